package statectl.flinkjobs;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.typeinfo.TypeHint;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.functions.source.legacy.SourceFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;

/**
 * Window operators, the keyed state most production jobs hold: state under a {@code TimeWindow}
 * namespace and event-time timers per window. Three operators over tumbling one-hour windows:
 * {@code win-agg} (String keys, AggregatingState of a sum), {@code win-reduce} (Long keys,
 * ReducingState) and {@code win-list} (String keys, ListState of the elements, read by a
 * ProcessWindowFunction).
 *
 * <p>{@code WindowJob write out backend format parallelism maxParallelism}: the source emits
 * {@link #RECORDS} records with event timestamps over three windows and no watermark, so no
 * window fires; a savepoint is taken into {@code out/savepoint} and {@code out/manifest.json}
 * holds the window results the job must eventually emit ({@code expected}). Format
 * {@code CHECKPOINT}: a checkpoint retained on cancellation instead (no periodic checkpoints), its
 * job directory copied to {@code out/checkpoint} (manifest {@code path}: checkpoint/chk-N).
 *
 * <p>{@code WindowJob restore results.json requests.json}: per request (path, parallelism,
 * backend, max_parallelism) the job is restored, its source ends at once, the final watermark
 * fires every window, and the emitted results are recorded; one entry per request in
 * results.json: {ok, error, results}.
 */
public final class WindowJob {
    private WindowJob() {}

    static final int RECORDS = 600;
    static final long HOUR = 3_600_000L;
    static final List<String> UIDS = List.of("win-agg", "win-reduce", "win-list");
    static final TypeInformation<Tuple3<String, Long, Long>> EVENT =
            TypeInformation.of(new TypeHint<Tuple3<String, Long, Long>>() {});

    /** Window results the sinks saw, as "uid|key|windowStart|result" lines. */
    static final ConcurrentLinkedQueue<String> EMITTED = new ConcurrentLinkedQueue<>();
    static volatile boolean restoreMode;
    static volatile int emittedRecords;

    /** Record i: (string key, long key, value) at an event time in one of three windows. */
    static Tuple3<String, Long, Long> record(int i) {
        return Tuple3.of("w" + (i % 50), (long) (i % 37), (long) i);
    }

    static long timestamp(int i) {
        return (i * 7919L % 3) * HOUR + i;
    }

    public static void main(String[] args) throws Exception {
        MiniCluster cluster = Flink.startCluster(4);
        try {
            if (args[0].equals("write")) {
                write(cluster, Paths.get(args[1]), args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]));
            } else {
                restoreAll(cluster, Paths.get(args[1]), Paths.get(args[2]));
            }
        } finally {
            Flink.closeCluster(cluster);
        }
        System.exit(0);
    }

    static void write(MiniCluster cluster, Path out, String backend, String format, int parallelism, int maxParallelism)
            throws Exception {
        Files.createDirectories(out);
        Map<String, String> c = config(backend, parallelism, maxParallelism);
        c.put("execution.checkpointing.storage", "filesystem");
        c.put("execution.checkpointing.dir", out.resolve("checkpoints").toUri().toString());
        boolean checkpoint = format.equals("CHECKPOINT");
        if (checkpoint) {
            c.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
            c.put("execution.checkpointing.num-retained", "1");
        }
        restoreMode = false;
        emittedRecords = 0;
        JobID jobId = new JobID();
        cluster.submitJob(job(Configuration.fromMap(c), jobId)).get(60, TimeUnit.SECONDS);
        String pointer;
        try {
            Flink.await(cluster, jobId, () -> emittedRecords == RECORDS, 120_000, "records");
            pointer = checkpoint
                    ? Flink.retryWhileTasksStart(() -> cluster.triggerCheckpoint(jobId).get(120, TimeUnit.SECONDS))
                    : Flink.retryWhileTasksStart(() -> cluster.triggerSavepoint(
                            jobId, out.resolve("savepoints").toUri().toString(), false,
                            SavepointFormatType.valueOf(format)).get(120, TimeUnit.SECONDS));
        } finally {
            Flink.cancelAndWait(cluster, jobId);
        }
        if (!EMITTED.isEmpty()) {
            throw new IllegalStateException("windows fired before the savepoint: " + EMITTED);
        }
        Path savepoint = Flink.snapshotDir(pointer);
        String path = "savepoint";
        if (checkpoint) {
            Flink.copyRecursively(savepoint.getParent(), out.resolve("checkpoint"));
            path = "checkpoint/" + savepoint.getFileName();
        } else {
            Flink.copyRecursively(savepoint, out.resolve("savepoint"));
        }
        Flink.deleteRecursively(out.resolve("savepoints"));
        Flink.deleteRecursively(out.resolve("checkpoints"));
        Map<String, Object> manifest = new LinkedHashMap<>();
        manifest.put("backend", backend);
        manifest.put("format", format);
        manifest.put("parallelism", parallelism);
        manifest.put("max_parallelism", maxParallelism);
        manifest.put("mode", checkpoint ? "checkpoint" : "savepoint");
        manifest.put("path", path);
        manifest.put("expected", expected());
        Flink.writeJson(out.resolve("manifest.json"), manifest);
    }

    /** What the three operators emit once every window has fired. */
    static List<String> expected() {
        Map<String, Long> sums = new TreeMap<>();
        Map<String, List<Long>> lists = new TreeMap<>();
        for (int i = 0; i < RECORDS; i++) {
            Tuple3<String, Long, Long> e = record(i);
            long window = timestamp(i) / HOUR * HOUR;
            sums.merge("win-agg|" + e.f0 + "|" + window, e.f2, Long::sum);
            sums.merge("win-reduce|" + e.f1 + "|" + window, e.f2, Long::sum);
            lists.computeIfAbsent("win-list|" + e.f0 + "|" + window, k -> new ArrayList<>()).add(e.f2);
        }
        TreeSet<String> lines = new TreeSet<>();
        sums.forEach((k, v) -> lines.add(k + "|" + v));
        lists.forEach((k, v) -> lines.add(k + "|" + sortedList(v)));
        return new ArrayList<>(lines);
    }

    static String sortedList(List<Long> values) {
        List<Long> sorted = new ArrayList<>(values);
        sorted.sort(null);
        return sorted.toString().replace(" ", "");
    }

    static void restoreAll(MiniCluster cluster, Path resultsFile, Path requestsFile) throws Exception {
        List<Map<String, Object>> results = new ArrayList<>();
        for (JsonNode request : Flink.readJson(requestsFile)) {
            Map<String, Object> result = new LinkedHashMap<>();
            result.put("request", Flink.JSON.convertValue(request, Map.class));
            try {
                result.put("results", restore(cluster, request));
                result.put("ok", true);
                result.put("error", null);
            } catch (Exception e) {
                result.put("ok", false);
                result.put("error", String.join("\ncaused by: ", Flink.causes(e)));
            }
            results.add(result);
        }
        Flink.writeJson(resultsFile, results);
    }

    static List<String> restore(MiniCluster cluster, JsonNode request) throws Exception {
        String path = request.get("path").asText();
        int parallelism = request.get("parallelism").asInt();
        int maxParallelism = request.path("max_parallelism").asInt(-1);
        Map<String, String> c = config(request.get("backend").asText(), parallelism, maxParallelism);
        c.put("execution.state-recovery.path", Paths.get(path).toAbsolutePath().toUri().toString());
        c.put("execution.state-recovery.claim-mode", "NO_CLAIM");
        restoreMode = true;
        EMITTED.clear();
        JobID jobId = new JobID();
        cluster.submitJob(job(Configuration.fromMap(c), jobId)).get(60, TimeUnit.SECONDS);
        Throwable failure = Flink.jobFailure(cluster, jobId);
        if (failure != null) {
            throw new IllegalStateException("restored window job failed", failure);
        }
        List<String> lines = new ArrayList<>(EMITTED);
        lines.sort(null);
        return lines;
    }

    static Map<String, String> config(String backend, int parallelism, int maxParallelism) {
        Map<String, String> c = new HashMap<>();
        c.put("state.backend.type", backend);
        c.put("parallelism.default", String.valueOf(parallelism));
        if (maxParallelism > 0) {
            c.put("pipeline.max-parallelism", String.valueOf(maxParallelism));
        }
        c.put("restart-strategy.type", "none");
        c.put("execution.checkpointing.data-inline-threshold", "0b");
        c.put("execution.checkpointing.file-merging.enabled", "false");
        c.put("state.backend.local-recovery", "false");
        return c;
    }

    static JobGraph job(Configuration conf, JobID jobId) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        DataStream<Tuple3<String, Long, Long>> src = env
                .addSource(new Source(), "src", EVENT).setParallelism(1).uid("win-src");
        TumblingEventTimeWindows hourly = TumblingEventTimeWindows.of(Duration.ofHours(1));
        DataStream<String> agg = src.keyBy(e -> e.f0, TypeInformation.of(String.class))
                .window(hourly)
                .aggregate(new Sum(), new Emit<String>("win-agg"))
                .uid("win-agg").name("win-agg");
        DataStream<String> reduce = src.keyBy(e -> e.f1, TypeInformation.of(Long.class))
                .window(hourly)
                .reduce(new SumRecords(), new EmitRecord())
                .uid("win-reduce").name("win-reduce");
        DataStream<String> list = src.keyBy(e -> e.f0, TypeInformation.of(String.class))
                .window(hourly)
                .process(new ListAll())
                .uid("win-list").name("win-list");
        agg.union(reduce, list).map(new Collect()).uid("win-collect").name("win-collect")
                .sinkTo(new DiscardingSink<>()).uid("win-sink").name("win-sink");
        return env.getStreamGraph().getJobGraph(WindowJob.class.getClassLoader(), jobId);
    }

    /** Emits every record once with its timestamp and no watermark, then idles; restored, ends. */
    static final class Source implements SourceFunction<Tuple3<String, Long, Long>> {
        private volatile boolean running = true;

        @Override
        public void run(SourceContext<Tuple3<String, Long, Long>> ctx) throws Exception {
            if (restoreMode) {
                return; // the end of input fires every window
            }
            for (int i = 0; i < RECORDS && running; i++) {
                synchronized (ctx.getCheckpointLock()) {
                    ctx.collectWithTimestamp(record(i), timestamp(i));
                    emittedRecords = i + 1;
                }
            }
            while (running) {
                Thread.sleep(5);
            }
        }

        @Override
        public void cancel() {
            running = false;
        }
    }

    static final class Sum implements AggregateFunction<Tuple3<String, Long, Long>, Long, Long> {
        @Override
        public Long createAccumulator() {
            return 0L;
        }

        @Override
        public Long add(Tuple3<String, Long, Long> e, Long acc) {
            return acc + e.f2;
        }

        @Override
        public Long getResult(Long acc) {
            return acc;
        }

        @Override
        public Long merge(Long a, Long b) {
            return a + b;
        }
    }

    static final class Emit<K> extends ProcessWindowFunction<Long, String, K, TimeWindow> {
        private final String uid;

        Emit(String uid) {
            this.uid = uid;
        }

        @Override
        public void process(K key, Context ctx, Iterable<Long> sums, Collector<String> out) {
            for (Long sum : sums) {
                out.collect(uid + "|" + key + "|" + ctx.window().getStart() + "|" + sum);
            }
        }
    }

    static final class SumRecords implements ReduceFunction<Tuple3<String, Long, Long>> {
        @Override
        public Tuple3<String, Long, Long> reduce(Tuple3<String, Long, Long> a, Tuple3<String, Long, Long> b) {
            return Tuple3.of(a.f0, a.f1, a.f2 + b.f2);
        }
    }

    static final class EmitRecord extends ProcessWindowFunction<Tuple3<String, Long, Long>, String, Long, TimeWindow> {
        @Override
        public void process(Long key, Context ctx, Iterable<Tuple3<String, Long, Long>> sums, Collector<String> out) {
            for (Tuple3<String, Long, Long> sum : sums) {
                out.collect("win-reduce|" + key + "|" + ctx.window().getStart() + "|" + sum.f2);
            }
        }
    }

    static final class ListAll extends ProcessWindowFunction<Tuple3<String, Long, Long>, String, String, TimeWindow> {
        @Override
        public void process(String key, Context ctx, Iterable<Tuple3<String, Long, Long>> elements, Collector<String> out) {
            List<Long> values = new ArrayList<>();
            elements.forEach(e -> values.add(e.f2));
            out.collect("win-list|" + key + "|" + ctx.window().getStart() + "|" + sortedList(values));
        }
    }

    static final class Collect implements MapFunction<String, String> {
        @Override
        public String map(String line) {
            EMITTED.add(line);
            return line;
        }
    }
}
