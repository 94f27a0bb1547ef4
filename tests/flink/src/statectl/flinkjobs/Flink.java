package statectl.flinkjobs;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.SerializationFeature;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.graph.StreamGraph;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;

/** Shared plumbing: MiniCluster, topology, JSON, `_metadata`. */
public final class Flink {
    private Flink() {}

    public static final ObjectMapper JSON = new ObjectMapper()
            .enable(SerializationFeature.INDENT_OUTPUT)
            .setDefaultPrettyPrinter(new org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.util
                    .DefaultPrettyPrinter().withoutSpacesInObjectEntries());

    /** One MiniCluster for the whole JVM; jobs carry their own configuration. */
    public static MiniCluster startCluster(int slots) throws Exception {
        Configuration conf = new Configuration();
        conf.setString("taskmanager.memory.managed.size", "256m");
        conf.setString("taskmanager.memory.network.min", "64m");
        conf.setString("taskmanager.memory.network.max", "64m");
        conf.setString("rest.bind-port", "0");
        MiniCluster cluster = new MiniCluster(new MiniClusterConfiguration.Builder()
                .setConfiguration(conf)
                .setNumTaskManagers(1)
                .setNumSlotsPerTaskManager(Math.max(1, slots))
                .withRandomPorts()
                .build());
        cluster.start();
        return cluster;
    }

    /**
     * The fixture topology. Every operator has an explicit uid; `rename` maps a uid to the uid
     * used in this job, `drop` leaves operators out (restore check only).
     *
     * <pre>
     * src ─keyBy(String)→ keyed-str ─┐
     *     ─keyBy(Long)──→ keyed-long ─┴→ opstate → bcast(+ src broadcast) → stateless → sink
     * </pre>
     */
    public static JobGraph buildJob(Configuration conf, Map<String, String> rename, Set<String> drop, JobID jobId) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        DataStream<Tuple3<String, Long, Long>> src = env
                .addSource(new Functions.ScriptedSource(), "src", Model.EVENT)
                .setParallelism(1)
                .uid(uid("src", rename));
        List<DataStream<Tuple3<String, Long, Long>>> keyed = new ArrayList<>();
        if (!drop.contains("keyed-str")) {
            String u = uid("keyed-str", rename);
            keyed.add(src.keyBy(new Functions.StringKey())
                    .transform("keyed-str", Model.EVENT, new KeyedStateOperator<String>(u))
                    .uid(u));
        }
        if (!drop.contains("keyed-long")) {
            String u = uid("keyed-long", rename);
            keyed.add(src.keyBy(new Functions.LongKey())
                    .transform("keyed-long", Model.EVENT, new KeyedStateOperator<Long>(u))
                    .uid(u));
        }
        DataStream<Tuple3<String, Long, Long>> stream;
        if (keyed.isEmpty()) {
            stream = src;
        } else if (keyed.size() == 1) {
            stream = keyed.get(0);
        } else {
            stream = keyed.get(0).union(keyed.get(1));
        }
        if (!drop.contains("opstate")) {
            String u = uid("opstate", rename);
            stream = stream.map(new Functions.OpState(u)).returns(Model.EVENT).name("opstate").uid(u);
        }
        if (!drop.contains("bcast")) {
            String u = uid("bcast", rename);
            MapStateDescriptor<String, Long> descriptor = Model.bcastDescriptor();
            stream = stream.connect(src.broadcast(descriptor))
                    .process(new Functions.Bcast(u), Model.EVENT)
                    .name("bcast")
                    .uid(u);
        }
        stream = stream.map(new Functions.Stateless()).returns(Model.EVENT).name("stateless")
                .uid(uid("stateless", rename));
        stream.sinkTo(new DiscardingSink<>()).name("sink").uid(uid("sink", rename));
        StreamGraph graph = env.getStreamGraph();
        return graph.getJobGraph(Flink.class.getClassLoader(), jobId);
    }

    private static String uid(String uid, Map<String, String> rename) {
        return rename.getOrDefault(uid, uid);
    }

    /**
     * Operator ID as Flink derives it from a uid: murmur3_128(seed 0) of the UTF-8 bytes, through
     * whichever shaded Guava this Flink ships (2.0 has guava32, 2.3 guava33).
     */
    public static String operatorId(String uid) {
        try {
            for (String guava : new String[] {"guava33", "guava32", "guava31", "guava30"}) {
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
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
        throw new IllegalStateException("no shaded Guava found");
    }

    public static CheckpointMetadata loadMetadata(Path dir) throws IOException {
        try (InputStream in = Files.newInputStream(dir.resolve("_metadata"))) {
            return Checkpoints.loadCheckpointMetadata(
                    new DataInputStream(in), Flink.class.getClassLoader(), dir.toUri().toString());
        }
    }

    /**
     * Closes the cluster. Jobs that failed during initialization leave application futures that
     * the dispatcher cancels on shutdown, printing CancellationException traces to stderr; those
     * are silenced here.
     */
    public static void closeCluster(MiniCluster cluster) throws Exception {
        java.io.PrintStream err = System.err;
        System.setErr(new java.io.PrintStream(java.io.OutputStream.nullOutputStream()));
        try {
            cluster.close();
        } finally {
            System.setErr(err);
        }
    }

    public static boolean isTerminal(JobStatus status) {
        return status.isGloballyTerminalState() || status == JobStatus.SUSPENDED;
    }

    /** Waits until cond holds; fails early when the job terminates, or after timeoutMs. */
    public static void await(MiniCluster cluster, JobID job, BooleanSupplier cond, long timeoutMs, String what)
            throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!cond.getAsBoolean()) {
            JobStatus status = cluster.getJobStatus(job).get(10, TimeUnit.SECONDS);
            if (isTerminal(status)) {
                throw new IllegalStateException("job " + status + " while waiting for " + what, jobFailure(cluster, job));
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("timeout waiting for " + what + " (job " + status + ")");
            }
            Thread.sleep(10);
        }
    }

    public static Throwable jobFailure(MiniCluster cluster, JobID job) {
        try {
            JobResult result = cluster.requestJobResult(job).get(60, TimeUnit.SECONDS);
            return result.getSerializedThrowable()
                    .map(t -> t.deserializeError(Flink.class.getClassLoader()))
                    .orElse(null);
        } catch (Exception e) {
            return e;
        }
    }

    public static void cancelAndWait(MiniCluster cluster, JobID job) throws Exception {
        JobStatus status = cluster.getJobStatus(job).get(10, TimeUnit.SECONDS);
        if (!isTerminal(status)) {
            try {
                cluster.cancelJob(job).get(60, TimeUnit.SECONDS);
            } catch (Exception e) {
                // the job may have terminated in between
            }
        }
        cluster.requestJobResult(job).get(120, TimeUnit.SECONDS);
    }

    /** Messages of an exception and its causes, outermost first, without repeats. */
    /** The directory of a savepoint or checkpoint pointer ("file:/…" or a bare path). */
    public static Path snapshotDir(String pointer) {
        return java.nio.file.Paths.get(java.net.URI.create(pointer.startsWith("file:") ? pointer : "file:" + pointer));
    }

    /** A call that may fail while the job's tasks are still starting. */
    interface Call<T> {
        T call() throws Exception;
    }

    /**
     * Savepoints and checkpoints are refused until every task runs ("Not all required tasks are
     * currently running", "... is not being executed at the moment"): retry those for up to
     * 20 s, which a loaded 2-core machine needs.
     */
    public static <T> T retryWhileTasksStart(Call<T> call) throws Exception {
        for (int attempt = 0; ; attempt++) {
            try {
                return call.call();
            } catch (Exception e) {
                String text = String.join(" ", causes(e)).toLowerCase(java.util.Locale.ROOT);
                boolean starting = text.contains("not all required tasks are currently running")
                        || text.contains("not_all_required_tasks_running")
                        || text.contains("is not being executed at the moment")
                        || text.contains("not running");
                if (attempt < 200 && starting) {
                    System.err.println("retrying: " + text);
                    Thread.sleep(100);
                    continue;
                }
                throw e;
            }
        }
    }

    public static List<String> causes(Throwable t) {
        List<String> out = new ArrayList<>();
        for (int depth = 0; t != null && depth < 20; depth++, t = t.getCause()) {
            String line = t.getClass().getName() + ": " + t.getMessage();
            if (t instanceof org.apache.flink.util.SerializedThrowable) {
                line = ((org.apache.flink.util.SerializedThrowable) t).getOriginalErrorClassName() + ": " + t.getMessage();
            }
            if (out.isEmpty() || !out.get(out.size() - 1).equals(line)) {
                out.add(line);
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return out;
    }

    public static void deleteRecursively(Path p) throws IOException {
        if (!Files.exists(p)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(p)) {
            for (Path q : (Iterable<Path>) walk.sorted(Comparator.reverseOrder())::iterator) {
                Files.delete(q);
            }
        }
    }

    public static void copyRecursively(Path from, Path to) throws IOException {
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

    public static JsonNode readJson(Path p) throws IOException {
        return JSON.readTree(p.toFile());
    }

    public static void writeJson(Path p, Object value) throws IOException {
        Files.createDirectories(p.toAbsolutePath().getParent());
        Path tmp = p.resolveSibling(p.getFileName() + ".tmp");
        JSON.writeValue(tmp.toFile(), value);
        Files.move(tmp, p, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    }
}
