import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;

import java.io.BufferedReader;
import java.io.InputStreamReader;

/**
 * Flink's key-group assignment, for `statectl plan`'s subtask loads.
 *
 * <p>Each line of stdin is "MAX_PARALLELISM PARALLELISM". Prints one line per operator index:
 * "index first last", the range of computeKeyGroupRangeForOperatorIndex, after checking that
 * computeOperatorIndexForKeyGroup maps every key group of the range back to that index.
 */
public class KeyGroupRanges {
    public static void main(String[] ignored) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] parts = line.trim().split(" ");
            int maxParallelism = Integer.parseInt(parts[0]);
            int parallelism = Integer.parseInt(parts[1]);
            for (int index = 0; index < parallelism; index++) {
                KeyGroupRange range = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(
                        maxParallelism, parallelism, index);
                for (int group = range.getStartKeyGroup(); group <= range.getEndKeyGroup(); group++) {
                    int owner = KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup(
                            maxParallelism, parallelism, group);
                    if (owner != index) {
                        throw new IllegalStateException(line + ": key group " + group + " -> " + owner);
                    }
                }
                System.out.println(index + " " + range.getStartKeyGroup() + " " + range.getEndKeyGroup());
            }
        }
    }
}
