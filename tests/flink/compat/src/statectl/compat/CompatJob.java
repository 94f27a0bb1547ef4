package statectl.compat;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.SerializationFeature;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.DiscardingSink;

import java.io.DataInputStream;
import java.io.InputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;

/**
 * A small job for Flink 1.15-1.20 (APIs common to all of them), in one JVM on one MiniCluster:
 *
 * <pre>
 * src (p=1) ─keyBy(String)→ keyed-str ─┐
 *           ─keyBy(Long)──→ keyed-long ─┴→ opstate → bcast (+ src broadcast) → stateless → sink
 * </pre>
 *
 * <p>{@code CompatJob write specs.json}: per spec {out, backend, format, parallelism,
 * max_parallelism}, run the job, take one savepoint into out/savepoint and write out/manifest.json
 * (the operators in `_metadata` and the state dumped in snapshotState of that checkpoint). With
 * {@code "mode": "checkpoint"} (and {@code checkpoint_base}, the fixed directory Flink writes the
 * checkpoints into: a checkpoint's `_metadata` may hold absolute paths), checkpoints are retained
 * on cancellation and, instead of a savepoint, one checkpoint is triggered after the records; its
 * job directory (chk-N/, shared/, taskowned/) is copied to out/checkpoint (manifest: path
 * checkpoint/chk-N, checkpoint.original_dir, checkpoint.files).
 *
 * <p>{@code CompatJob restore results.json requests.json}: per request {path, parallelism, backend},
 * restore the savepoint into the same topology and dump what every operator restored (keyed state
 * read back key by key through setCurrentKey); a failed restore is a result with ok=false.
 */
public final class CompatJob {
    private CompatJob() {}

    static final TypeInformation<Tuple3<String, Long, Long>> EVENT = Types.TUPLE(Types.STRING, Types.LONG, Types.LONG);
    static final List<String> UIDS = Arrays.asList("src", "keyed-str", "keyed-long", "opstate", "bcast", "stateless", "sink");
    static final List<String> STATEFUL = Arrays.asList("keyed-str", "keyed-long", "opstate", "bcast");
    static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    public static void main(String[] args) throws Exception {
        boolean write = args.length == 2 && args[0].equals("write");
        if (!write && !(args.length == 3 && args[0].equals("restore"))) {
            System.err.println("usage: CompatJob write specs.json | restore results.json requests.json");
            System.exit(2);
        }
        JsonNode items = JSON.readTree(Paths.get(args[args.length - 1]).toFile());
        int slots = 1;
        for (JsonNode item : items) {
            slots = Math.max(slots, item.get("parallelism").asInt());
        }
        Configuration clusterConf = new Configuration();
        clusterConf.setString("taskmanager.memory.managed.size", "128m");
        clusterConf.setString("taskmanager.memory.network.min", "64m");
        clusterConf.setString("taskmanager.memory.network.max", "64m");
        clusterConf.setString("rest.bind-port", "0");
        // Flink < 1.20 configures the checkpoint storage's inline threshold from the cluster
        // configuration only: 0 bytes puts every non-empty state stream in a file.
        clusterConf.setString("state.storage.fs.memory-threshold", "0b");
        MiniCluster cluster = new MiniCluster(new MiniClusterConfiguration.Builder()
                .setConfiguration(clusterConf)
                .setNumTaskManagers(1)
                .setNumSlotsPerTaskManager(slots)
                .withRandomPorts()
                .build());
        cluster.start();
        int failures = 0;
        List<Map<String, Object>> results = new ArrayList<>();
        try {
            for (JsonNode item : items) {
                long t0 = System.nanoTime();
                if (write) {
                    try {
                        writeSavepoint(cluster, item);
                    } catch (Exception e) {
                        failures++;
                        System.err.println("FAILED " + item + ": " + String.join("\n  caused by ", causes(e)));
                        e.printStackTrace();
                    }
                } else {
                    Map<String, Object> result = new LinkedHashMap<>();
                    result.put("request", JSON.convertValue(item, Map.class));
                    try {
                        result.put("state", restore(cluster, item));
                        result.put("backend_classes", new java.util.TreeSet<>(Ops.backendClasses));
                        result.put("ok", true);
                        result.put("error", null);
                    } catch (Exception e) {
                        result.put("state", null);
                        result.put("ok", false);
                        result.put("error", String.join("\ncaused by: ", causes(e)));
                    }
                    result.put("seconds", Math.round((System.nanoTime() - t0) / 1e6) / 1e3);
                    results.add(result);
                }
                System.err.printf("%s %s in %.1fs%n", args[0], item.get(write ? "out" : "path").asText(),
                        (System.nanoTime() - t0) / 1e9);
            }
        } finally {
            java.io.PrintStream err = System.err;
            System.setErr(new java.io.PrintStream(java.io.OutputStream.nullOutputStream()));
            try {
                cluster.close();
            } finally {
                System.setErr(err);
            }
        }
        if (!write) {
            JSON.writeValue(Paths.get(args[1]).toFile(), results);
        }
        System.exit(failures == 0 ? 0 : 1);
    }

    /** Job configuration; 1.x key names (1.20 still reads them as deprecated keys). */
    static Configuration config(String backend, boolean incremental, boolean compression, int parallelism,
            Integer maxParallelism, Path checkpoints) {
        return config(backend, incremental, compression, parallelism, maxParallelism, checkpoints, false);
    }

    /** `retain`: checkpoints retained on cancellation (no interval: only those triggered). */
    static Configuration config(String backend, boolean incremental, boolean compression, int parallelism,
            Integer maxParallelism, Path checkpoints, boolean retain) {
        Map<String, String> c = new HashMap<>();
        c.put("state.backend", backend);
        c.put("state.backend.type", backend);
        c.put("parallelism.default", String.valueOf(parallelism));
        if (maxParallelism != null) {
            c.put("pipeline.max-parallelism", String.valueOf(maxParallelism));
        }
        c.put("restart-strategy", "none");
        c.put("state.checkpoint-storage", "filesystem");
        c.put("state.checkpoints.dir", checkpoints.toUri().toString());
        c.put("state.backend.incremental", String.valueOf(incremental));
        c.put("state.backend.local-recovery", "false");
        c.put("execution.checkpointing.snapshot-compression", String.valueOf(compression));
        c.put("state.storage.fs.memory-threshold", "0b"); // every non-empty stream in a file
        if (retain) {
            // the same key from 1.15 to 1.20 (1.20 moved it to CheckpointingOptions, same name)
            c.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
            c.put("state.checkpoints.num-retained", "1");
            c.put("execution.checkpointing.num-retained", "1");
        }
        return Configuration.fromMap(c);
    }

    static JobGraph buildJob(Configuration conf) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        DataStream<Tuple3<String, Long, Long>> src = env.addSource(new Ops.Source(), "src", EVENT).setParallelism(1).uid("src");
        DataStream<Tuple3<String, Long, Long>> byString = src.keyBy(new Ops.StringKey())
                .transform("keyed-str", EVENT, new Ops.Keyed<String>("keyed-str")).uid("keyed-str");
        DataStream<Tuple3<String, Long, Long>> byLong = src.keyBy(new Ops.LongKey())
                .transform("keyed-long", EVENT, new Ops.Keyed<Long>("keyed-long")).uid("keyed-long");
        byString.union(byLong)
                .map(new Ops.OpState()).returns(EVENT).name("opstate").uid("opstate")
                .connect(src.broadcast(Ops.bcastDescriptor()))
                .process(new Ops.Bcast(), EVENT).name("bcast").uid("bcast")
                .map(new Ops.Stateless()).returns(EVENT).name("stateless").uid("stateless")
                .addSink(new DiscardingSink<>()).name("sink").uid("sink");
        return env.getStreamGraph().getJobGraph();
    }

    static void writeSavepoint(MiniCluster cluster, JsonNode spec) throws Exception {
        Path out = Paths.get(spec.get("out").asText()).toAbsolutePath();
        String backend = spec.get("backend").asText();
        String format = spec.get("format").asText().toUpperCase();
        int parallelism = spec.get("parallelism").asInt();
        int maxParallelism = spec.get("max_parallelism").asInt();
        boolean incremental = spec.path("incremental").asBoolean(false);
        boolean compression = spec.path("compression").asBoolean(false);
        String mode = spec.path("mode").asText("savepoint");
        boolean checkpointMode = mode.equals("checkpoint");
        if (!checkpointMode && !mode.equals("savepoint")) {
            throw new IllegalArgumentException("mode must be savepoint or checkpoint: " + mode);
        }
        deleteRecursively(out);
        Files.createDirectories(out);
        Path work = Files.createTempDirectory("statectl-compat-");
        try {
            Path checkpointBase = spec.hasNonNull("checkpoint_base")
                    ? Paths.get(spec.get("checkpoint_base").asText()).toAbsolutePath()
                    : work.resolve("checkpoints");
            deleteRecursively(checkpointBase);
            Files.createDirectories(checkpointBase);
            Ops.reset(false);
            JobGraph job = buildJob(config(backend, incremental, compression, parallelism, maxParallelism,
                    checkpointBase, checkpointMode));
            JobID jobId = job.getJobID();
            cluster.submitJob(job).get(60, TimeUnit.SECONDS);
            String pointer;
            try {
                Ops.released = true;
                await(cluster, jobId, () -> Ops.statelessRecords.get() == 2L * Ops.RECORDS
                        && Ops.broadcastRecords.get() == (long) Ops.RECORDS * parallelism, "records");
                pointer = null;
                for (int attempt = 0; pointer == null; attempt++) {
                    try {
                        pointer = checkpointMode
                                ? cluster.triggerCheckpoint(jobId).get(120, TimeUnit.SECONDS)
                                : cluster.triggerSavepoint(jobId, work.resolve("savepoints").toUri().toString(), false,
                                        SavepointFormatType.valueOf(format)).get(120, TimeUnit.SECONDS);
                    } catch (Exception e) {
                        String text = String.join(" ", causes(e)).toLowerCase(java.util.Locale.ROOT);
                        boolean starting = text.contains("not all required tasks are currently running")
                                || text.contains("is not being executed at the moment");
                        if (attempt > 200 || !starting) {
                            throw e;
                        }
                        Thread.sleep(100);
                    }
                }
            } finally {
                cancelAndWait(cluster, jobId);
            }
            Path savepoint = Paths.get(URI.create(pointer.startsWith("file:") ? pointer : "file:" + pointer));
            if (!Files.isRegularFile(savepoint.resolve("_metadata"))) {
                throw new IllegalStateException(savepoint + " is gone (not retained on cancellation?)");
            }
            CheckpointMetadata metadata;
            int metadataVersion;
            try (DataInputStream in = new DataInputStream(Files.newInputStream(savepoint.resolve("_metadata")))) {
                in.readInt();
                metadataVersion = in.readInt();
            }
            try (InputStream in = Files.newInputStream(savepoint.resolve("_metadata"))) {
                metadata = Checkpoints.loadCheckpointMetadata(
                        new DataInputStream(in), CompatJob.class.getClassLoader(), savepoint.toUri().toString());
            }
            long checkpointId = metadata.getCheckpointId();
            Map<String, Map<Integer, Map<String, Object>>> dumps = Ops.dumps.get(checkpointId);
            if (dumps == null) {
                throw new IllegalStateException("no state dumps for checkpoint " + checkpointId);
            }
            Map<String, Object> manifest = new LinkedHashMap<>();
            manifest.put("flink_version", EnvironmentInformation.getVersion());
            manifest.put("metadata_version", metadataVersion);
            manifest.put("mode", mode);
            manifest.put("backend", backend);
            manifest.put("format", checkpointMode ? "NATIVE" : format); // a checkpoint: the backend's own
            manifest.put("incremental", incremental);
            manifest.put("compression", compression);
            manifest.put("inline", false);
            manifest.put("parallelism", parallelism);
            manifest.put("max_parallelism", maxParallelism);
            manifest.put("checkpoint_id", checkpointId);
            manifest.put("job_id", jobId.toHexString());
            if (!checkpointMode) {
                copyRecursively(savepoint, out.resolve("savepoint"));
                manifest.put("path", "savepoint");
            } else {
                Path jobDir = savepoint.getParent();
                copyRecursively(jobDir, out.resolve("checkpoint"));
                manifest.put("path", "checkpoint/" + savepoint.getFileName());
                Map<String, Object> origin = new LinkedHashMap<>();
                origin.put("original_dir", jobDir.toString());
                origin.put("original_uri", "file:" + jobDir);
                List<String> layout = new ArrayList<>();
                try (Stream<Path> walk = Files.walk(jobDir)) {
                    walk.filter(p -> !p.equals(jobDir)).forEach(p -> layout.add(
                            jobDir.relativize(p) + (Files.isDirectory(p) ? "/" : "")));
                }
                java.util.Collections.sort(layout);
                origin.put("files", layout);
                manifest.put("checkpoint", origin);
            }
            manifest.put("backend_classes", new java.util.TreeSet<>(Ops.backendClasses));
            manifest.put("operators", operators(metadata, dumps));
            manifest.put("state", assemble(dumps));
            JSON.writeValue(out.resolve("manifest.json").toFile(), manifest);
        } finally {
            deleteRecursively(work);
        }
    }

    static Map<String, Object> restore(MiniCluster cluster, JsonNode request) throws Exception {
        Path path = Paths.get(request.get("path").asText()).toAbsolutePath();
        int parallelism = request.get("parallelism").asInt();
        Path work = Files.createTempDirectory("statectl-compat-restore-");
        try {
            Ops.reset(true);
            JobGraph job = buildJob(config(request.get("backend").asText(), false, false, parallelism, null, work));
            job.setSavepointRestoreSettings(SavepointRestoreSettings.forPath(path.toUri().toString(), false));
            JobID jobId = job.getJobID();
            cluster.submitJob(job).get(60, TimeUnit.SECONDS);
            try {
                await(cluster, jobId, () -> restoredDumps() >= STATEFUL.size() * parallelism, "restored state dumps");
            } finally {
                cancelAndWait(cluster, jobId);
            }
            return assemble(Ops.dumps.get(-1L));
        } finally {
            deleteRecursively(work);
        }
    }

    static int restoredDumps() {
        return Ops.dumps.getOrDefault(-1L, Map.of()).values().stream().mapToInt(Map::size).sum();
    }

    /** Every operator in `_metadata` by uid (ids are murmur3_128 of the uids), in topology order. */
    static List<Map<String, Object>> operators(CheckpointMetadata metadata, Map<String, Map<Integer, Map<String, Object>>> dumps)
            throws Exception {
        Map<String, OperatorState> byId = new TreeMap<>();
        for (OperatorState op : metadata.getOperatorStates()) {
            byId.put(op.getOperatorID().toHexString(), op);
        }
        Map<String, String> ids = new LinkedHashMap<>();
        for (String uid : UIDS) {
            ids.put(operatorId(uid), uid);
        }
        if (!byId.keySet().equals(new java.util.TreeSet<>(ids.keySet()))) {
            throw new IllegalStateException("_metadata has operators " + byId.keySet() + ", expected " + ids);
        }
        List<Map<String, Object>> out = new ArrayList<>();
        for (Map.Entry<String, String> e : ids.entrySet()) {
            OperatorState op = byId.get(e.getKey());
            String uid = e.getValue();
            Map<Integer, Map<String, Object>> d = dumps.get(uid);
            if (STATEFUL.contains(uid) && (d == null || d.size() != op.getParallelism())) {
                throw new IllegalStateException(uid + ": dumps " + (d == null ? null : d.keySet()));
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("uid", uid);
            m.put("id", e.getKey());
            m.put("name", null); // 1.x `_metadata` (V3/V4) has neither names nor uids
            m.put("parallelism", op.getParallelism());
            m.put("max_parallelism", op.getMaxParallelism());
            m.put("states", states(uid));
            m.put("entry_counts", entryCounts(d, uid));
            out.add(m);
        }
        return out;
    }

    static List<Map<String, Object>> states(String uid) {
        List<Map<String, Object>> out = new ArrayList<>();
        if (uid.startsWith("keyed-")) {
            out.add(state("cnt", "keyed", "VALUE", null));
            out.add(state("lst", "keyed", "LIST", null));
            out.add(state("mp", "keyed", "MAP", null));
            out.add(state("_timer_state/processing_user-timers", "keyed", "TIMERS", null));
            out.add(state("_timer_state/event_user-timers", "keyed", "TIMERS", null));
        } else if (uid.equals("opstate")) {
            out.add(state("split", "operator", "LIST", "SPLIT_DISTRIBUTE"));
            out.add(state("union", "operator", "LIST", "UNION"));
        } else if (uid.equals("bcast")) {
            out.add(state("bcast", "operator", "BROADCAST", "BROADCAST"));
        }
        return out;
    }

    private static Map<String, Object> state(String name, String scope, String kind, String mode) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", name);
        m.put("scope", scope);
        m.put("kind", kind);
        m.put("mode", mode);
        return m;
    }

    /** Entries per keyed state as in canonical key-group blocks: keys, (key, user key)s, timers. */
    @SuppressWarnings("unchecked")
    static Map<String, Object> entryCounts(Map<Integer, Map<String, Object>> subtasks, String uid) {
        Map<String, Object> counts = new LinkedHashMap<>();
        if (!uid.startsWith("keyed-")) {
            return counts;
        }
        long cnt = 0, lst = 0, mp = 0, processing = 0, event = 0;
        for (Map<String, Object> dump : subtasks.values()) {
            Map<String, Map<String, Object>> k = (Map<String, Map<String, Object>>) dump.get("keyed");
            cnt += k.get("cnt").size();
            lst += k.get("lst").size();
            for (Object v : k.get("mp").values()) {
                mp += ((Map<?, ?>) v).size();
            }
            Map<String, Map<String, List<?>>> timers = (Map<String, Map<String, List<?>>>) dump.get("timers");
            processing += timers.get("processing").values().stream().mapToLong(List::size).sum();
            event += timers.get("event").values().stream().mapToLong(List::size).sum();
        }
        counts.put("cnt", cnt);
        counts.put("lst", lst);
        counts.put("mp", mp);
        counts.put("_timer_state/processing_user-timers", processing);
        counts.put("_timer_state/event_user-timers", event);
        return counts;
    }

    /** The dump schema of tests/flink/README.md: {"operators": {uid: {parallelism, max_parallelism, subtasks}}}. */
    static Map<String, Object> assemble(Map<String, Map<Integer, Map<String, Object>>> dumps) {
        Map<String, Object> operators = new TreeMap<>();
        for (Map.Entry<String, Map<Integer, Map<String, Object>>> op : dumps.entrySet()) {
            int[] info = Ops.info.get(op.getKey());
            Map<String, Object> subtasks = new TreeMap<>(Comparator.comparingInt(Integer::parseInt));
            op.getValue().forEach((index, dump) -> subtasks.put(String.valueOf(index), dump));
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("parallelism", info[0]);
            entry.put("max_parallelism", info[1]);
            entry.put("subtasks", subtasks);
            operators.put(op.getKey(), entry);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("operators", operators);
        return out;
    }

    /** murmur3_128 (seed 0) of the uid, through whichever shaded Guava this Flink ships. */
    static String operatorId(String uid) throws Exception {
        for (String guava : new String[] {"guava33", "guava32", "guava31", "guava30", "guava18"}) {
            String pkg = "org.apache.flink.shaded." + guava + ".com.google.common.hash.";
            Class<?> hashing;
            try {
                hashing = Class.forName(pkg + "Hashing");
            } catch (ClassNotFoundException e) {
                continue;
            }
            Object function = hashing.getMethod("murmur3_128", int.class).invoke(null, 0);
            Object code = Class.forName(pkg + "HashFunction")
                    .getMethod("hashString", CharSequence.class, java.nio.charset.Charset.class)
                    .invoke(function, uid, StandardCharsets.UTF_8);
            return HexFormat.of().formatHex((byte[]) Class.forName(pkg + "HashCode").getMethod("asBytes").invoke(code));
        }
        throw new IllegalStateException("no shaded Guava found");
    }

    static void await(MiniCluster cluster, JobID job, BooleanSupplier cond, String what) throws Exception {
        long deadline = System.currentTimeMillis() + 120_000;
        while (!cond.getAsBoolean()) {
            JobStatus status = cluster.getJobStatus(job).get(10, TimeUnit.SECONDS);
            if (status.isGloballyTerminalState() || System.currentTimeMillis() > deadline) {
                Throwable cause = null;
                if (status.isGloballyTerminalState()) {
                    cause = cluster.requestJobResult(job).get(60, TimeUnit.SECONDS).getSerializedThrowable()
                            .map(t -> t.deserializeError(CompatJob.class.getClassLoader())).orElse(null);
                }
                throw new IllegalStateException("job " + status + " while waiting for " + what, cause);
            }
            Thread.sleep(10);
        }
    }

    static void cancelAndWait(MiniCluster cluster, JobID job) throws Exception {
        if (!cluster.getJobStatus(job).get(10, TimeUnit.SECONDS).isGloballyTerminalState()) {
            try {
                cluster.cancelJob(job).get(60, TimeUnit.SECONDS);
            } catch (Exception e) {
                // it may have terminated in between
            }
        }
        cluster.requestJobResult(job).get(120, TimeUnit.SECONDS);
    }

    static List<String> causes(Throwable t) {
        List<String> out = new ArrayList<>();
        for (int depth = 0; t != null && depth < 20; depth++, t = t.getCause()) {
            String line = t.getClass().getName() + ": " + t.getMessage();
            if (t instanceof org.apache.flink.util.SerializedThrowable) {
                line = ((org.apache.flink.util.SerializedThrowable) t).getOriginalErrorClassName() + ": " + t.getMessage();
            }
            if (out.isEmpty() || !out.get(out.size() - 1).equals(line)) {
                out.add(line);
            }
        }
        return out;
    }

    static void deleteRecursively(Path p) throws Exception {
        if (Files.exists(p)) {
            try (Stream<Path> walk = Files.walk(p)) {
                for (Path q : (Iterable<Path>) walk.sorted(Comparator.reverseOrder())::iterator) {
                    Files.delete(q);
                }
            }
        }
    }

    static void copyRecursively(Path from, Path to) throws Exception {
        try (Stream<Path> walk = Files.walk(from)) {
            for (Path p : (Iterable<Path>) walk::iterator) {
                Path target = to.resolve(from.relativize(p).toString());
                if (Files.isDirectory(p)) {
                    Files.createDirectories(target);
                } else {
                    Files.copy(p, target);
                }
            }
        }
    }
}
