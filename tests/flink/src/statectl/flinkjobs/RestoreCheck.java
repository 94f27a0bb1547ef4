package statectl.flinkjobs;

import org.apache.flink.api.common.JobID;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * Restores savepoints (or retained checkpoints) into the fixture topology, one job after the
 * other in one JVM and one MiniCluster, and dumps what every operator restored.
 *
 * <p>Usage: {@code RestoreCheck out.json REQUEST...} where REQUEST is either
 * {@code <path>=<parallelism>[,maxp=M][,backend=hashmap|rocksdb][,rename=old:new;old:new][,drop=uid;uid][,allow_non_restored=true]}
 * or {@code @requests.json} (a list of objects with keys path, parallelism, max_parallelism,
 * backend, rename {old: new}, drop [uid], allow_non_restored, and optionally savepoint_dir and
 * savepoint_format (NATIVE|CANONICAL, default NATIVE): take a savepoint of the restored job there,
 * reported as "savepoint" in the result).
 *
 * <p>Writes a JSON list, one result per request, in order: {"request", "ok", "error",
 * "error_chain", "state" (dump schema), "restored_flags", "backend_classes", "seconds"}. A
 * failed restore is an entry with ok=false; the batch continues.
 */
public final class RestoreCheck {
    private RestoreCheck() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: RestoreCheck out.json <path>=<parallelism>[,maxp=M]... | @requests.json");
            System.exit(2);
        }
        List<Map<String, Object>> requests = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            if (args[i].startsWith("@")) {
                for (JsonNode n : Flink.readJson(Paths.get(args[i].substring(1)))) {
                    requests.add(fromJson(n));
                }
            } else {
                requests.add(parse(args[i]));
            }
        }
        int slots = 1;
        for (Map<String, Object> r : requests) {
            slots = Math.max(slots, (Integer) r.get("parallelism"));
        }
        List<Map<String, Object>> results = new ArrayList<>();
        long started = System.nanoTime();
        MiniCluster cluster = Flink.startCluster(slots);
        System.err.printf("minicluster up in %.1fs%n", (System.nanoTime() - started) / 1e9);
        try {
            for (Map<String, Object> request : requests) {
                long t0 = System.nanoTime();
                Map<String, Object> result = new LinkedHashMap<>();
                result.put("request", request);
                result.put("ok", false);
                result.put("error", null);
                result.put("error_chain", new ArrayList<>());
                result.put("backend", null);
                try {
                    restore(cluster, request, result);
                    result.put("ok", true);
                    result.put("error", null);
                    result.put("error_chain", new ArrayList<>());
                } catch (Throwable e) {
                    List<String> chain = Flink.causes(e);
                    result.put("ok", false);
                    result.put("error", String.join("\ncaused by: ", chain));
                    result.put("error_chain", chain);
                    result.put("state", null);
                    result.putIfAbsent("backend", null);
                    result.put("restored_flags", new TreeMap<>(Control.restoredFlags));
                    result.put("backend_classes", new ArrayList<>(new java.util.TreeSet<>(Control.backendClasses)));
                }
                result.put("seconds", Math.round((System.nanoTime() - t0) / 1e6) / 1e3);
                System.err.printf("%s p=%s: %s in %.1fs%n", request.get("path"), request.get("parallelism"),
                        Boolean.TRUE.equals(result.get("ok")) ? "restored" : "FAILED", (System.nanoTime() - t0) / 1e9);
                results.add(result);
            }
        } finally {
            Flink.closeCluster(cluster);
        }
        Flink.writeJson(Paths.get(args[0]), results);
        System.exit(0);
    }

    private static void restore(MiniCluster cluster, Map<String, Object> request, Map<String, Object> result)
            throws Exception {
        String path = (String) request.get("path");
        int parallelism = (Integer) request.get("parallelism");
        Integer maxParallelism = (Integer) request.get("max_parallelism");
        @SuppressWarnings("unchecked")
        Map<String, String> rename = (Map<String, String>) request.get("rename");
        @SuppressWarnings("unchecked")
        Set<String> drop = new LinkedHashSet<>((List<String>) request.get("drop"));
        boolean allowNonRestored = (Boolean) request.get("allow_non_restored");
        String backend = (String) request.get("backend");
        if (backend == null) {
            backend = detectBackend(Paths.get(path).toAbsolutePath());
        }
        result.put("backend", backend);

        Map<String, String> c = new HashMap<>();
        c.put("state.backend.type", backend);
        c.put("parallelism.default", String.valueOf(parallelism));
        if (maxParallelism != null) {
            c.put("pipeline.max-parallelism", String.valueOf(maxParallelism));
        }
        c.put("restart-strategy.type", "none");
        c.put("state.backend.local-recovery", "false");
        c.put("execution.state-recovery.path", Paths.get(path).toAbsolutePath().toUri().toString());
        c.put("execution.state-recovery.ignore-unclaimed-state", String.valueOf(allowNonRestored));
        c.put("execution.state-recovery.claim-mode", "NO_CLAIM");
        Configuration conf = Configuration.fromMap(c);

        Control.reset();
        Control.skipKeyedDump = Boolean.FALSE.equals(request.get("dump"));
        Control.restoreMode = true;
        Control.releasedPhase = 0;
        JobID jobId = new JobID();
        JobGraph job = Flink.buildJob(conf, rename, drop, jobId);
        SavepointRestoreSettings settings = job.getSavepointRestoreSettings();
        if (!settings.restoreSavepoint() || settings.allowNonRestoredState() != allowNonRestored) {
            throw new IllegalStateException("execution.state-recovery.* not picked up: " + settings);
        }
        int expected = 0;
        for (String uid : Model.STATEFUL_UIDS) {
            if (!drop.contains(uid)) {
                expected += parallelism;
            }
        }
        final int expectedDumps = expected;
        long submitted = System.nanoTime();
        cluster.submitJob(job).get(60, TimeUnit.SECONDS);
        try {
            Flink.await(cluster, jobId, () -> Control.restoredCount() >= expectedDumps, 600_000, "restored state dumps");
            // Submission until every stateful subtask has restored (and dumped, unless skipped).
            result.put("restore_seconds", Math.round((System.nanoTime() - submitted) / 1e6) / 1e3);
            String savepointDir = (String) request.get("savepoint_dir");
            if (savepointDir != null) {
                result.put("savepoint", takeSavepoint(cluster, jobId, savepointDir, (String) request.get("savepoint_format")));
            }
        } finally {
            Flink.cancelAndWait(cluster, jobId);
        }
        result.put("state", Control.assemble(Control.restored));
        result.put("restored_flags", new TreeMap<>(Control.restoredFlags));
        result.put("backend_classes", new ArrayList<>(new java.util.TreeSet<>(Control.backendClasses)));
    }

    /**
     * Optional: once restored, a savepoint of the restored job (e.g. NATIVE after a rescale in
     * Flink) into dir; returns its path. Retried while tasks are still starting.
     */
    private static String takeSavepoint(MiniCluster cluster, JobID jobId, String dir, String format)
            throws Exception {
        SavepointFormatType type = SavepointFormatType.valueOf(format == null ? "NATIVE" : format.toUpperCase());
        String target = Paths.get(dir).toAbsolutePath().toUri().toString();
        String pointer = Flink.retryWhileTasksStart(
                () -> cluster.triggerSavepoint(jobId, target, false, type).get(120, TimeUnit.SECONDS));
        return Flink.snapshotDir(pointer).toString();
    }

    /** rocksdb when the snapshot has RocksDB native handles (code 11), else hashmap. */
    static String detectBackend(Path path) throws Exception {
        Path dir = path.getFileName().toString().equals("_metadata") ? path.getParent() : path;
        CheckpointMetadata metadata = Flink.loadMetadata(dir);
        for (OperatorState op : metadata.getOperatorStates()) {
            for (OperatorSubtaskState st : op.getStates()) {
                for (KeyedStateHandle h : st.getManagedKeyedState()) {
                    if (h instanceof IncrementalKeyedStateHandle) {
                        return "rocksdb";
                    }
                }
            }
        }
        return "hashmap";
    }

    private static Map<String, Object> request(String path, int parallelism) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("path", path);
        r.put("parallelism", parallelism);
        r.put("max_parallelism", null);
        r.put("backend", null);
        r.put("rename", new TreeMap<String, String>());
        r.put("drop", new ArrayList<String>());
        r.put("allow_non_restored", false);
        r.put("savepoint_dir", null);
        r.put("savepoint_format", null);
        return r;
    }

    static Map<String, Object> parse(String arg) {
        int eq = arg.lastIndexOf('=', arg.indexOf(',') < 0 ? arg.length() : arg.indexOf(','));
        if (eq < 0) {
            throw new IllegalArgumentException("expected <path>=<parallelism>[,...]: " + arg);
        }
        String[] opts = arg.substring(eq + 1).split(",");
        Map<String, Object> r = request(arg.substring(0, eq), Integer.parseInt(opts[0]));
        for (int i = 1; i < opts.length; i++) {
            String[] kv = opts[i].split("=", 2);
            switch (kv[0]) {
                case "maxp":
                case "max_parallelism":
                    r.put("max_parallelism", Integer.parseInt(kv[1]));
                    break;
                case "backend":
                    r.put("backend", kv[1]);
                    break;
                case "rename": {
                    @SuppressWarnings("unchecked")
                    Map<String, String> m = (Map<String, String>) r.get("rename");
                    for (String pair : kv[1].split(";")) {
                        String[] p = pair.split(":", 2);
                        m.put(p[0], p[1]);
                    }
                    break;
                }
                case "drop": {
                    @SuppressWarnings("unchecked")
                    List<String> l = (List<String>) r.get("drop");
                    for (String u : kv[1].split(";")) {
                        l.add(u);
                    }
                    break;
                }
                case "allow_non_restored":
                    r.put("allow_non_restored", Boolean.parseBoolean(kv[1]));
                    break;
                default:
                    throw new IllegalArgumentException("unknown option " + kv[0] + " in " + arg);
            }
        }
        return r;
    }

    static Map<String, Object> fromJson(JsonNode n) {
        Map<String, Object> r = request(n.get("path").asText(), n.get("parallelism").asInt());
        if (n.hasNonNull("max_parallelism")) {
            r.put("max_parallelism", n.get("max_parallelism").asInt());
        }
        if (n.hasNonNull("backend")) {
            r.put("backend", n.get("backend").asText());
        }
        if (n.hasNonNull("rename")) {
            @SuppressWarnings("unchecked")
            Map<String, String> m = (Map<String, String>) r.get("rename");
            for (Iterator<Map.Entry<String, JsonNode>> it = n.get("rename").fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                m.put(e.getKey(), e.getValue().asText());
            }
        }
        if (n.hasNonNull("drop")) {
            @SuppressWarnings("unchecked")
            List<String> l = (List<String>) r.get("drop");
            n.get("drop").forEach(u -> l.add(u.asText()));
        }
        if (n.hasNonNull("allow_non_restored")) {
            r.put("allow_non_restored", n.get("allow_non_restored").asBoolean());
        }
        if (n.hasNonNull("savepoint_dir")) {
            r.put("savepoint_dir", n.get("savepoint_dir").asText());
        }
        if (n.hasNonNull("savepoint_format")) {
            r.put("savepoint_format", n.get("savepoint_format").asText());
        }
        if (n.hasNonNull("dump")) {
            r.put("dump", n.get("dump").asBoolean());
        }
        return r;
    }
}
