package statectl.values;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.SerializationFeature;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

import java.io.DataInputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TimeZone;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;

/**
 * The values job: one keyed operator holding a state of (almost) every value type Flink has, a
 * window operator and an operator with list / union / broadcast state (see tests/flink/README.md).
 * Runs on Flink 1.15-2.x (one source set; reflection shims in {@link Model}).
 *
 * <pre>
 * src (FLIP-27, p=1) ─keyBy(String)→ values (keyed: VALUE/LIST/MAP/REDUCING/AGGREGATING, TTL, Kryo, timers) → opstate
 *                    ─keyBy(String)→ window (tumbling 1 h event time, aggregate; no watermark: all pending)
 * </pre>
 *
 * <p>{@code ValuesJob write <out_root> <prefix> <parallelism> <max_parallelism> [--extra=NAME]... <kind>...}
 * ({@code --extra}: the job registers the state NAME of {@link States#EXTRA} too): kinds
 * {@code hashmap-canonical}, {@code rocksdb-canonical}, {@code rocksdb-native},
 * {@code hashmap-checkpoint}, {@code hashmap-checkpoint-compressed}. One job on the hashmap backend
 * (its CANONICAL savepoint), one on RocksDB (incremental) whose CANONICAL savepoint is taken right
 * before its NATIVE one with no record in between: the "twin". Each kind goes to
 * out_root/prefix-kind/{savepoint/, truth.jsonl, manifest.json}; truth.jsonl is the
 * {@link StateDumper} output of the savepoint, for rocksdb-native that of its canonical twin.
 * The checkpoint kinds: one job each on the hashmap backend (snapshot compression on for
 * -compressed), a CANONICAL savepoint (the twin, kept as twin/) then, with no record in between,
 * a retained checkpoint (RETAIN_ON_CANCELLATION, no periodic checkpoints); its job directory
 * (chk-N/, shared/, taskowned/) is copied to checkpoint/ (manifest: mode checkpoint, path
 * checkpoint/chk-N, checkpoint.original_dir: where its `_metadata` was written) and truth.jsonl is
 * the twin's dump. {@code hashmap-checkpoint-readable}: the same without the two value states
 * whose serializer's output has no length statectl can know ({@link #UNDELIMITED}), uncompressed.
 *
 * <p>{@code ValuesJob restore <requests.json> <results.json>}: {@link ValuesRestore} (restores
 * savepoints of this job with per-request overrides of its states, takes a CANONICAL savepoint of
 * each and dumps it).
 */
public final class ValuesJob {
    private ValuesJob() {}

    static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
    static final List<String> UIDS = Arrays.asList("src", "values", "window", "opstate");
    /**
     * Value states whose entries statectl cannot delimit in the hashmap backend's own snapshot
     * format (no per-entry length there): a Kryo FieldSerializer value and a POJO subclass the
     * snapshot does not register. Not registered by the job of {@code hashmap-checkpoint-readable}.
     */
    static final List<String> UNDELIMITED = Arrays.asList("kryo-custom", "pojo-subclass-unregistered");
    /** States of {@link States#EXTRA} the write mode registers ({@code --extra=NAME}). */
    static final List<String> EXTRA = new ArrayList<>();
    static final List<String> CHECKPOINT_KINDS = Arrays.asList("hashmap-checkpoint", "hashmap-checkpoint-compressed",
            "hashmap-checkpoint-readable");

    public static void main(String[] args) throws Exception {
        TimeZone.setDefault(TimeZone.getTimeZone("UTC"));
        if (args.length == 3 && args[0].equals("restore")) {
            ValuesRestore.main(Paths.get(args[1]), Paths.get(args[2]));
            System.exit(0);
        }
        if (args.length < 5 || !args[0].equals("write")) {
            System.err.println("usage: ValuesJob write <out_root> <prefix> <parallelism> <max_parallelism> [--extra=NAME]... <kind>...\n"
                    + "       ValuesJob restore <requests.json> <results.json>");
            System.exit(2);
        }
        Path root = Paths.get(args[1]).toAbsolutePath();
        String prefix = args[2];
        int parallelism = Integer.parseInt(args[3]);
        int maxParallelism = Integer.parseInt(args[4]);
        List<String> kinds = new ArrayList<>();
        for (String arg : Arrays.asList(args).subList(5, args.length)) {
            if (arg.startsWith("--extra=")) {
                String name = arg.substring("--extra=".length());
                if (!States.EXTRA.containsKey(name)) {
                    throw new IllegalArgumentException("unknown extra state " + name + "; known: " + States.EXTRA.keySet());
                }
                EXTRA.add(name);
            } else {
                kinds.add(arg);
            }
        }
        for (String kind : kinds) {
            if (!Arrays.asList("hashmap-canonical", "rocksdb-canonical", "rocksdb-native").contains(kind)
                    && !CHECKPOINT_KINDS.contains(kind)) {
                throw new IllegalArgumentException("unknown kind " + kind);
            }
        }
        MiniCluster cluster = startCluster(Math.max(2, parallelism));
        Path work = Files.createTempDirectory("statectl-values-");
        Map<String, Map<String, Object>> written = new LinkedHashMap<>();
        try {
            if (kinds.contains("hashmap-canonical")) {
                List<Map<String, Object>> taken = run(cluster, "hashmap", parallelism, maxParallelism,
                        Arrays.asList("CANONICAL"), work.resolve("hashmap"));
                written.put("hashmap-canonical", taken.get(0));
            }
            if (kinds.contains("rocksdb-canonical") || kinds.contains("rocksdb-native")) {
                List<Map<String, Object>> taken = run(cluster, "rocksdb", parallelism, maxParallelism,
                        Arrays.asList("CANONICAL", "NATIVE"), work.resolve("rocksdb"));
                written.put("rocksdb-canonical", taken.get(0));
                written.put("rocksdb-native", taken.get(1));
            }
            for (String kind : CHECKPOINT_KINDS) {
                if (kinds.contains(kind)) {
                    List<Map<String, Object>> taken = run(cluster, "hashmap", parallelism, maxParallelism,
                            Arrays.asList("CANONICAL", "CHECKPOINT"), work.resolve(kind), kind.endsWith("-compressed"),
                            kind.endsWith("-readable") ? UNDELIMITED : List.of());
                    written.put(kind + "#twin", taken.get(0));
                    written.put(kind, taken.get(1));
                }
            }
        } finally {
            closeCluster(cluster);
        }
        // the truths: StateDumper on the canonical savepoints (the native one: its twin's)
        Map<String, List<StateDumper.Line>> truths = new HashMap<>();
        List<String> canonicals = new ArrayList<>(Arrays.asList("hashmap-canonical", "rocksdb-canonical"));
        CHECKPOINT_KINDS.forEach(k -> canonicals.add(k + "#twin"));
        for (String kind : canonicals) {
            if (written.containsKey(kind)) {
                truths.put(kind, StateDumper.dump(Paths.get((String) written.get(kind).get("savepoint_dir"))));
            }
        }
        for (String kind : kinds) {
            Map<String, Object> info = written.get(kind);
            boolean checkpoint = kind.startsWith("hashmap-checkpoint");
            String truthFrom = kind.equals("rocksdb-native") ? "rocksdb-canonical" : checkpoint ? kind + "#twin" : kind;
            List<StateDumper.Line> truth = truths.get(truthFrom);
            Path out = root.resolve(prefix + "-" + kind);
            deleteRecursively(out);
            Files.createDirectories(out);
            Map<String, Object> manifest = manifest(kind, info, parallelism, maxParallelism);
            if (checkpoint) {
                Path chk = Paths.get((String) info.get("savepoint_dir"));
                Path jobDir = chk.getParent();
                copyRecursively(jobDir, out.resolve("checkpoint"));
                copyRecursively(Paths.get((String) written.get(truthFrom).get("savepoint_dir")), out.resolve("twin"));
                manifest.put("path", "checkpoint/" + chk.getFileName());
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
            } else {
                copyRecursively(Paths.get((String) info.get("savepoint_dir")), out.resolve("savepoint"));
            }
            StateDumper.write(truth, out.resolve("truth.jsonl"));
            long errors = truth.stream().filter(l -> l.fields.containsKey("error")).count();
            manifest.put("truth", "truth.jsonl");
            manifest.put("truth_lines", truth.size());
            manifest.put("truth_errors", errors);
            if (!truthFrom.equals(kind)) {
                Map<String, Object> twin = new LinkedHashMap<>();
                twin.put("kind", checkpoint ? "twin/" : truthFrom);
                twin.put("checkpoint_id", written.get(truthFrom).get("checkpoint_id"));
                twin.put("note", "truth.jsonl is the dump of the CANONICAL savepoint taken of the same running "
                        + "job right before this " + (checkpoint ? "retained checkpoint" : "NATIVE one")
                        + ", with no record in between");
                manifest.put("truth_from", twin);
            } else {
                manifest.put("truth_from", null);
            }
            JSON.writeValue(out.resolve("manifest.json").toFile(), manifest);
            System.err.printf("wrote %s: %d truth lines, %d errors%n", out, truth.size(), errors);
        }
        deleteRecursively(work);
        System.exit(0);
    }

    /** A MiniCluster of one TaskManager with `slots` slots. */
    static MiniCluster startCluster(int slots) throws Exception {
        Configuration clusterConf = new Configuration();
        clusterConf.setString("taskmanager.memory.managed.size", "256m");
        clusterConf.setString("taskmanager.memory.network.min", "64m");
        clusterConf.setString("taskmanager.memory.network.max", "64m");
        clusterConf.setString("rest.bind-port", "0");
        clusterConf.setString("state.storage.fs.memory-threshold", "0b"); // Flink < 1.20 reads it here only
        MiniCluster cluster = new MiniCluster(new MiniClusterConfiguration.Builder()
                .setConfiguration(clusterConf)
                .setNumTaskManagers(1)
                .setNumSlotsPerTaskManager(slots)
                .withRandomPorts()
                .build());
        cluster.start();
        return cluster;
    }

    /** Closes the cluster, its shutdown noise on stderr silenced. */
    static void closeCluster(MiniCluster cluster) throws Exception {
        java.io.PrintStream err = System.err;
        System.setErr(new java.io.PrintStream(java.io.OutputStream.nullOutputStream()));
        try {
            cluster.close();
        } finally {
            System.setErr(err);
        }
    }

    static Map<String, Object> manifest(String kind, Map<String, Object> info, int parallelism, int maxParallelism) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("flink_version", EnvironmentInformation.getVersion());
        m.put("kind", kind);
        m.put("metadata_version", info.get("metadata_version"));
        boolean checkpoint = kind.startsWith("hashmap-checkpoint");
        m.put("mode", checkpoint ? "checkpoint" : "savepoint");
        m.put("backend", kind.startsWith("rocksdb") ? "rocksdb" : "hashmap");
        m.put("format", kind.endsWith("native") || checkpoint ? "NATIVE" : "CANONICAL");
        m.put("incremental", kind.startsWith("rocksdb"));
        m.put("compression", kind.endsWith("-compressed"));
        m.put("not_registered", kind.endsWith("-readable") ? UNDELIMITED : List.of());
        m.put("parallelism", parallelism);
        m.put("max_parallelism", maxParallelism);
        m.put("checkpoint_id", info.get("checkpoint_id"));
        m.put("job_id", info.get("job_id"));
        m.put("path", "savepoint");
        m.put("timezone", "UTC");
        m.put("records", Model.records());
        m.put("keys", Arrays.asList(Model.KEYS));
        List<Map<String, Object>> operators = new ArrayList<>();
        for (String uid : UIDS) {
            Map<String, Object> op = new LinkedHashMap<>();
            op.put("uid", uid);
            op.put("id", Model.operatorId(uid));
            List<Map<String, Object>> states = new ArrayList<>();
            List<String[]> all = new ArrayList<>(States.ALL.getOrDefault(uid, List.of()));
            if (uid.equals("values")) {
                EXTRA.forEach(name -> all.add(new String[] {name, "VALUE", States.EXTRA.get(name).java}));
            }
            for (String[] s : all) {
                Map<String, Object> state = new LinkedHashMap<>();
                state.put("name", s[0]);
                state.put("kind", s[1]);
                state.put("type", s[2]);
                states.add(state);
            }
            op.put("states", states);
            operators.add(op);
        }
        m.put("operators", operators);
        return m;
    }

    /** Job configuration, 1.x and 2.x key names (each version ignores the other's). */
    static Configuration config(String backend, int parallelism, int maxParallelism, Path checkpoints) {
        return config(backend, parallelism, maxParallelism, checkpoints, false);
    }

    /**
     * `compression`: snapshot compression on, and checkpoints retained on cancellation (no
     * interval: only those triggered); the job writing the checkpoint kinds.
     */
    static Configuration config(String backend, int parallelism, int maxParallelism, Path checkpoints,
            boolean compression) {
        Map<String, String> c = new HashMap<>();
        c.put("state.backend", backend);
        c.put("state.backend.type", backend);
        c.put("parallelism.default", String.valueOf(parallelism));
        c.put("pipeline.max-parallelism", String.valueOf(maxParallelism));
        c.put("restart-strategy", "none");
        c.put("restart-strategy.type", "none");
        c.put("state.checkpoint-storage", "filesystem");
        c.put("execution.checkpointing.storage", "filesystem");
        c.put("state.checkpoints.dir", checkpoints.toUri().toString());
        c.put("execution.checkpointing.dir", checkpoints.toUri().toString());
        boolean incremental = backend.equals("rocksdb");
        c.put("state.backend.incremental", String.valueOf(incremental));
        c.put("execution.checkpointing.incremental", String.valueOf(incremental));
        c.put("state.backend.local-recovery", "false");
        c.put("execution.checkpointing.snapshot-compression", String.valueOf(compression));
        c.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        c.put("execution.checkpointing.num-retained", "1");
        c.put("state.storage.fs.memory-threshold", "0b");
        c.put("execution.checkpointing.data-inline-threshold", "0b");
        c.put("execution.checkpointing.file-merging.enabled", "false");
        return Configuration.fromMap(c);
    }

    static JobGraph buildJob(Configuration conf) {
        return buildJob(conf, true);
    }

    /** The job; `emit` false: its source emits nothing (restores). */
    static JobGraph buildJob(Configuration conf, boolean emit) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        Model.registerPojoType(env.getConfig(), Model.Dog.class);
        DataStream<Tuple3<String, Integer, Long>> src = env
                .fromSource(new ValuesSource(emit), WatermarkStrategy.noWatermarks(), "src", Model.EVENT)
                .setParallelism(1)
                .uid("src");
        DataStream<Tuple3<String, Integer, Long>> values = src.keyBy(new Operators.KeyOf(), Types.STRING)
                .transform("values", Model.EVENT, new Operators.ValuesOperator())
                .uid("values");
        if (!Operators.dropOperators.contains("window")) {
            src.keyBy(new Operators.KeyOf(), Types.STRING)
                    .window(Model.hourWindows())
                    .aggregate(new Operators.WindowSum(), Types.LONG, Types.LONG)
                    .name("window")
                    .uid("window");
        }
        if (!Operators.dropOperators.contains("opstate")) {
            values.transform("opstate", Model.EVENT, new Operators.OpStateOperator()).uid("opstate");
        }
        return env.getStreamGraph().getJobGraph();
    }

    static List<Map<String, Object>> run(MiniCluster cluster, String backend, int parallelism, int maxParallelism,
            List<String> formats, Path work) throws Exception {
        return run(cluster, backend, parallelism, maxParallelism, formats, work, false, List.of());
    }

    /**
     * Runs the job on `backend`, takes one snapshot per format in order (CANONICAL / NATIVE: a
     * savepoint; CHECKPOINT: a checkpoint, retained on cancellation), cancels.
     */
    static List<Map<String, Object>> run(MiniCluster cluster, String backend, int parallelism, int maxParallelism,
            List<String> formats, Path work, boolean compression, List<String> drop) throws Exception {
        Operators.reset();
        Operators.drop.addAll(drop);
        Operators.extra.addAll(EXTRA);
        JobGraph job = buildJob(config(backend, parallelism, maxParallelism, work.resolve("checkpoints"), compression));
        JobID jobId = job.getJobID();
        cluster.submitJob(job).get(60, TimeUnit.SECONDS);
        List<Map<String, Object>> out = new ArrayList<>();
        try {
            long n = Model.records();
            await(cluster, jobId, () -> Operators.valuesRecords.get() == n && Operators.windowRecords.get() == n
                    && Operators.opstateRecords.get() == n && Operators.opstateInits.get() == parallelism, "records");
            for (String format : formats) {
                String pointer = format.equals("CHECKPOINT")
                        ? triggerCheckpoint(cluster, jobId)
                        : triggerSavepoint(cluster, jobId, work.resolve("savepoints-" + format.toLowerCase()), format);
                Path dir = Paths.get(URI.create(pointer.startsWith("file:") ? pointer : "file:" + pointer));
                Map<String, Object> info = new LinkedHashMap<>();
                info.put("savepoint_dir", dir.toString());
                info.put("job_id", jobId.toHexString());
                try (DataInputStream in = new DataInputStream(Files.newInputStream(dir.resolve("_metadata")))) {
                    in.readInt();
                    info.put("metadata_version", in.readInt());
                }
                CheckpointMetadata metadata = StateDumper.loadMetadata(dir);
                info.put("checkpoint_id", metadata.getCheckpointId());
                List<String> ids = new ArrayList<>();
                for (OperatorState op : metadata.getOperatorStates()) {
                    ids.add(op.getOperatorID().toHexString());
                }
                for (String uid : UIDS) {
                    if (!ids.contains(Model.operatorId(uid))) {
                        throw new IllegalStateException("operator " + uid + " not in _metadata: " + ids);
                    }
                }
                out.add(info);
                System.err.printf("%s %s savepoint: %s%n", backend, format, dir);
            }
        } finally {
            cancelAndWait(cluster, jobId);
        }
        return out;
    }

    static String triggerSavepoint(MiniCluster cluster, JobID jobId, Path dir, String format) throws Exception {
        return retryWhileStarting(() -> cluster.triggerSavepoint(jobId, dir.toUri().toString(), false,
                SavepointFormatType.valueOf(format)).get(120, TimeUnit.SECONDS));
    }

    /** A checkpoint (retained on cancellation by the job's configuration): its pointer. */
    static String triggerCheckpoint(MiniCluster cluster, JobID jobId) throws Exception {
        return retryWhileStarting(() -> cluster.triggerCheckpoint(jobId).get(120, TimeUnit.SECONDS));
    }

    interface Trigger {
        String call() throws Exception;
    }

    static String retryWhileStarting(Trigger trigger) throws Exception {
        for (int attempt = 0; ; attempt++) {
            try {
                return trigger.call();
            } catch (Exception e) {
                String text = StateDumper.message(e).toLowerCase(java.util.Locale.ROOT);
                boolean starting = text.contains("not all required tasks are currently running")
                        || text.contains("not_all_required_tasks_running")
                        || text.contains("is not being executed at the moment");
                if (attempt > 200 || !starting) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
    }

    static void await(MiniCluster cluster, JobID job, BooleanSupplier cond, String what) throws Exception {
        long deadline = System.currentTimeMillis() + 120_000;
        while (!cond.getAsBoolean()) {
            JobStatus status = cluster.getJobStatus(job).get(10, TimeUnit.SECONDS);
            if (status.isGloballyTerminalState() || System.currentTimeMillis() > deadline) {
                Throwable cause = null;
                if (status.isGloballyTerminalState()) {
                    cause = cluster.requestJobResult(job).get(60, TimeUnit.SECONDS).getSerializedThrowable()
                            .map(t -> t.deserializeError(ValuesJob.class.getClassLoader())).orElse(null);
                }
                throw new IllegalStateException("job " + status + " while waiting for " + what + " (values "
                        + Operators.valuesRecords + ", window " + Operators.windowRecords + ", opstate "
                        + Operators.opstateRecords + ")", cause);
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
