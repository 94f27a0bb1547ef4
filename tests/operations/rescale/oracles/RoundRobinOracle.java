import org.apache.flink.runtime.checkpoint.RoundRobinOperatorStateRepartitioner;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.OperatorStreamStateHandle;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;
import org.apache.flink.util.CollectionUtil;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * Flink's own operator-state assignment, for comparing statectl's planner against it.
 *
 * <p>Each line of stdin is a case: oldParallelism newParallelism then one
 * "subtask:name:MODE:count" per state, in the order the states appear in each subtask's handle.
 * Element i of old subtask s has offset s * 1000000 + i. Prints, per case, one line
 * "newSubtask name oldSubtask index" per assigned element, then "--".
 */
public class RoundRobinOracle {
    public static void main(String[] ignored) throws Exception {
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (!line.isBlank()) {
                assign(line.trim().split(" "));
            }
            System.out.println("--");
        }
    }

    private static void assign(String[] args) {
        int oldParallelism = Integer.parseInt(args[0]);
        int newParallelism = Integer.parseInt(args[1]);
        List<List<String[]>> specs = new ArrayList<>();
        for (int s = 0; s < oldParallelism; s++) {
            specs.add(new ArrayList<>());
        }
        for (int i = 2; i < args.length; i++) {
            String[] spec = args[i].split(":");
            specs.get(Integer.parseInt(spec[0])).add(spec);
        }
        List<List<OperatorStateHandle>> old = new ArrayList<>();
        for (int s = 0; s < oldParallelism; s++) {
            Map<String, OperatorStateHandle.StateMetaInfo> states =
                    CollectionUtil.newHashMapWithExpectedSize(specs.get(s).size());
            for (String[] spec : specs.get(s)) {
                long[] offsets = new long[Integer.parseInt(spec[3])];
                for (int e = 0; e < offsets.length; e++) {
                    offsets[e] = s * 1000000L + e;
                }
                states.put(spec[1], new OperatorStateHandle.StateMetaInfo(
                        offsets, OperatorStateHandle.Mode.valueOf(spec[2])));
            }
            old.add(Collections.singletonList(new OperatorStreamStateHandle(
                    states, new ByteStreamStateHandle("subtask-" + s, new byte[0]))));
        }
        List<List<OperatorStateHandle>> assigned = RoundRobinOperatorStateRepartitioner.INSTANCE
                .repartitionState(old, oldParallelism, newParallelism);
        for (int n = 0; n < assigned.size(); n++) {
            for (OperatorStateHandle handle : assigned.get(n)) {
                for (Map.Entry<String, OperatorStateHandle.StateMetaInfo> e :
                        handle.getStateNameToPartitionOffsets().entrySet()) {
                    for (long offset : e.getValue().getOffsets()) {
                        System.out.println(n + " " + e.getKey() + " " + offset / 1000000L + " " + offset % 1000000L);
                    }
                }
            }
        }
    }
}
