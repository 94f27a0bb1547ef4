import java.util.HashMap;
import java.util.Map;

/**
 * Prints the iteration order of a HashMap<String, ?>. Args: "put:CAPACITY" or
 * "compute:CAPACITY" (insert with computeIfAbsent), then the keys in insertion order.
 */
public class HashMapOrder {
    public static void main(String[] args) {
        String[] how = args[0].split(":");
        Map<String, Integer> map = new HashMap<>(Integer.parseInt(how[1]));
        for (int i = 1; i < args.length; i++) {
            if (how[0].equals("put")) {
                map.put(args[i], i);
            } else {
                map.computeIfAbsent(args[i], k -> 0);
            }
        }
        System.out.println(String.join("\n", map.keySet()));
    }
}
