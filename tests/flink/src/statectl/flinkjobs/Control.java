package statectl.flinkjobs;

import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Static channel between the driver (main thread) and the operators. The MiniCluster runs in the
 * same JVM and, with no user jars, user code is loaded by the application class loader, so these
 * statics are shared. Jobs run one after the other; {@link #reset} between jobs.
 */
public final class Control {
    private Control() {}

    /** false: fixture job (dump in snapshotState); true: restore check (dump on open/initializeState). */
    public static volatile boolean restoreMode;
    /** Restore check with "dump": false (benchmarks): keyed operators record no keys. */
    public static volatile boolean skipKeyedDump;

    /** Extra phase-1 records, one per bulk key (FixtureJob spec {@code bulk_keys}; 0 by default). */
    public static volatile int bulkKeys;

    /** The source emits the records of phases 1..releasedPhase, then idles until cancelled. */
    public static volatile int releasedPhase;

    public static final AtomicLong statelessRecords = new AtomicLong();
    public static final AtomicLong broadcastRecords = new AtomicLong();

    /** checkpointId -> uid -> subtask -> dump (fixture job). */
    public static final Map<Long, Map<String, Map<Integer, Map<String, Object>>>> snapshots =
            new ConcurrentHashMap<>();

    /** uid -> subtask -> dump (restore check). */
    public static final Map<String, Map<Integer, Map<String, Object>>> restored =
            new ConcurrentHashMap<>();

    /** uid -> [parallelism, maxParallelism] as the running tasks saw it. */
    public static final Map<String, int[]> operatorInfo = new ConcurrentHashMap<>();

    /** uid -> whether the operator's state context reported "restored". */
    public static final Map<String, Boolean> restoredFlags = new ConcurrentHashMap<>();

    /** Simple class names of the keyed state backends that ran. */
    public static final Set<String> backendClasses = ConcurrentHashMap.newKeySet();

    public static void reset() {
        releasedPhase = 0;
        bulkKeys = 0;
        skipKeyedDump = false;
        statelessRecords.set(0);
        broadcastRecords.set(0);
        snapshots.clear();
        restored.clear();
        operatorInfo.clear();
        restoredFlags.clear();
        backendClasses.clear();
    }

    public static void record(
            Long checkpointId, String uid, int subtask, int parallelism, int maxParallelism,
            Map<String, Object> dump) {
        operatorInfo.put(uid, new int[] {parallelism, maxParallelism});
        Map<String, Map<Integer, Map<String, Object>>> target =
                checkpointId == null
                        ? restored
                        : snapshots.computeIfAbsent(checkpointId, k -> new ConcurrentHashMap<>());
        target.computeIfAbsent(uid, k -> new ConcurrentHashMap<>()).put(subtask, dump);
    }

    public static int restoredCount() {
        int n = 0;
        for (Map<Integer, Map<String, Object>> m : restored.values()) {
            n += m.size();
        }
        return n;
    }

    /** {"operators": {uid: {"parallelism", "max_parallelism", "subtasks": {i: dump}}}}. */
    public static Map<String, Object> assemble(Map<String, Map<Integer, Map<String, Object>>> dumps) {
        Map<String, Object> operators = new TreeMap<>();
        for (Map.Entry<String, Map<Integer, Map<String, Object>>> op : dumps.entrySet()) {
            int[] info = operatorInfo.get(op.getKey());
            Map<String, Object> subtasks = new TreeMap<>(Control::compareIndex);
            for (Map.Entry<Integer, Map<String, Object>> st : op.getValue().entrySet()) {
                subtasks.put(String.valueOf(st.getKey()), st.getValue());
            }
            Map<String, Object> entry = new java.util.LinkedHashMap<>();
            entry.put("parallelism", info[0]);
            entry.put("max_parallelism", info[1]);
            entry.put("subtasks", subtasks);
            operators.put(op.getKey(), entry);
        }
        Map<String, Object> out = new java.util.LinkedHashMap<>();
        out.put("operators", operators);
        return out;
    }

    private static int compareIndex(String a, String b) {
        return Integer.compare(Integer.parseInt(a), Integer.parseInt(b));
    }
}
