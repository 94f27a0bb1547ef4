package statectl.flinkjobs;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.functions.source.legacy.SourceFunction;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.Table;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;

/**
 * Flink SQL operators, their keys {@code BinaryRowData}: one job of six queries over one source
 * (id BIGINT, k STRING, v BIGINT, event time): a group aggregation with COUNT DISTINCT, a regular
 * join on (k, v), a window TVF aggregation, a rowtime deduplication, a top-N and a
 * MATCH_RECOGNIZE pattern (flink-cep); and two DataStream counters keyed by a Tuple2 and by a Row
 * (uids tuple-count, row-count). Every query's changelog is collected as "query|+I[...]" lines,
 * the counters' as "tuple|key|count". Operator chaining is off so that operator ids do not depend on the
 * parallelism (planner-generated operators have no uid).
 *
 * <p>Input: records 0..{@value #TOTAL}-1, a watermark after record {@value #WATERMARK_AFTER}-1
 * (windows and patterns before it fire, later ones stay pending).
 *
 * <p>{@code SqlJob write specs.json}: per spec {out, backend, format, parallelism,
 * max_parallelism} the job reads records below {@value #BATCH1}, a savepoint is taken into
 * out/savepoint and out/manifest.json holds the rows emitted before it ({@code before}) and
 * the rows of an uninterrupted run over all records ({@code full}).
 *
 * <p>Two optional spec fields make a variant (for the value tests, tests/operations/test_sql_values.py):
 * {@code ttl} sets {@code table.exec.state.ttl} (so the state is TTL-wrapped) and {@code typed:
 * true} adds the queries of {@link #TYPED_QUERIES} over a view with a column of every SQL type;
 * the variant's {@code full} rows are those of an uninterrupted run of the same variant.
 *
 * <p>{@code SqlJob restore results.json requests.json}: per request {path, parallelism,
 * backend, max_parallelism} the job is restored, reads the records from {@value #BATCH1} on and
 * ends; results.json: one {ok, error, rows} per request.
 */
public final class SqlJob {
    private SqlJob() {}

    static final int BATCH1 = 300;
    static final int TOTAL = 500;
    static final int WATERMARK_AFTER = 200;
    static final long EPOCH = 1_700_000_000_000L;

    static final ConcurrentLinkedQueue<String> EMITTED = new ConcurrentLinkedQueue<>();
    /** write: the first batch, then idle; restore: the second batch; full: both. */
    static volatile String phase = "full";
    static volatile int emittedRecords;

    static final Map<String, String> QUERIES = new LinkedHashMap<>();
    /** A column of (nearly) every SQL type, nulls included, derived from each record. */
    static final String TYPED_VIEW = "SELECT id, MOD(id, 7) AS g, rowtime,"
            + " CAST(id AS INT) AS i, CAST(v AS SMALLINT) AS sm, CAST(v - 5 AS TINYINT) AS ti, v > 5 AS b,"
            + " CAST(v AS FLOAT) / 4 AS f, CAST(v AS DOUBLE) / 7 AS d,"
            + " CAST(CAST(id AS DOUBLE) / 4 - 30 AS DECIMAL(10, 2)) AS dc,"
            + " CAST(CAST(id AS DOUBLE) / 8 - 20 AS DECIMAL(38, 18)) AS dw,"
            + " CAST(id * 1000003 AS DECIMAL(19, 0)) AS d19,"
            + " k AS s, CAST(k AS CHAR(6)) AS ch, CASE WHEN MOD(id, 3) = 0 THEN NULL ELSE CONCAT(k, '-é-long') END AS sn,"
            + " CAST(k AS BYTES) AS vb, CAST(CONCAT(k, '-bytes-', k) AS BYTES) AS vbl,"
            + " CAST(CAST(rowtime AS TIMESTAMP(3)) AS DATE) AS dt, CAST(CAST(rowtime AS TIMESTAMP(3)) AS TIME(0)) AS tm,"
            + " CAST(rowtime AS TIMESTAMP(3)) AS ts3,"
            + " TIMESTAMPADD(SECOND, CAST(id AS INT), TIMESTAMP '2024-01-01 00:00:00.123456789') AS ts9,"
            + " CAST(TIMESTAMPADD(MINUTE, CAST(id AS INT), TIMESTAMP '1969-12-31 23:59:59.999999') AS TIMESTAMP_LTZ(6)) AS ltz6,"
            + " ARRAY[id, CASE WHEN MOD(id, 2) = 0 THEN NULL ELSE v END] AS arr,"
            + " ARRAY[k, CONCAT(k, '-a-longer-string')] AS sarr,"
            + " MAP[k, v, CONCAT(k, 'x'), CAST(NULL AS BIGINT)] AS m,"
            + " MAP[CAST(id AS INT), k] AS mi,"
            + " ROW(id, k, CAST(v AS DECIMAL(20, 3))) AS r,"
            // nulls of non-compact DECIMAL and TIMESTAMP: generated code keeps their var-part space
            + " CASE WHEN MOD(id, 3) = 0 THEN NULL ELSE CAST(id AS DECIMAL(30, 4)) END AS dn,"
            + " CASE WHEN MOD(id, 2) = 0 THEN NULL ELSE CAST(CAST(rowtime AS TIMESTAMP(3)) AS TIMESTAMP(6)) END AS tn"
            + " FROM src";
    static final String TYPED_COLUMNS = "id, g, i, sm, ti, b, f, d, dc, dw, d19, s, ch, sn, vb, vbl, dt, tm, ts3, ts9, ltz6,"
            + " arr, sarr, m, mi, r, dn, tn";
    static final Map<String, String> TYPED_QUERIES = new LinkedHashMap<>();

    static {
        QUERIES.put("agg", "SELECT k, COUNT(DISTINCT v) AS dv, COUNT(*) AS c, SUM(v) AS s FROM src GROUP BY k");
        QUERIES.put("join", "SELECT l.k, l.v, l.id AS lid, r.id AS rid"
                + " FROM (SELECT id, k, v FROM src WHERE MOD(id, 2) = 0) l"
                + " JOIN (SELECT id, k, v FROM src WHERE MOD(id, 2) = 1) r ON l.k = r.k AND l.v = r.v");
        QUERIES.put("window", "SELECT k, window_start, COUNT(*) AS c, SUM(v) AS s"
                + " FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(rowtime), INTERVAL '1' MINUTE))"
                + " GROUP BY k, window_start, window_end");
        QUERIES.put("dedup", "SELECT g, id, v FROM (SELECT g, id, v,"
                + " ROW_NUMBER() OVER (PARTITION BY g ORDER BY rowtime DESC) AS rn"
                + " FROM (SELECT MOD(id, 17) AS g, id, v, rowtime FROM src)) WHERE rn = 1");
        QUERIES.put("topn", "SELECT v, id, k, rn FROM (SELECT v, id, k,"
                + " ROW_NUMBER() OVER (PARTITION BY v ORDER BY id DESC) AS rn FROM src) WHERE rn <= 2");
        QUERIES.put("cep", "SELECT * FROM src MATCH_RECOGNIZE (PARTITION BY k ORDER BY rowtime"
                + " MEASURES FIRST(A.id) AS a_id, LAST(B.id) AS b_id, C.id AS c_id"
                + " ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW"
                + " PATTERN (A B+ C)"
                + " DEFINE A AS A.v < 3, B AS B.v >= 3, C AS C.v < 3)");
    }

    static {
        TYPED_QUERIES.put("typed-dedup", "SELECT " + TYPED_COLUMNS + " FROM (SELECT *,"
                + " ROW_NUMBER() OVER (PARTITION BY g ORDER BY rowtime DESC) AS rn FROM typed) WHERE rn = 1");
        TYPED_QUERIES.put("typed-agg", "SELECT g, MAX(dw) AS mx, MIN(ts9) AS mn, SUM(dc) AS sm, AVG(d) AS av,"
                + " MAX(ltz6) AS ml, COLLECT(s) AS ks, COUNT(DISTINCT s) AS ds FROM typed GROUP BY g");
    }

    static Row record(int i) {
        return Row.of((long) i, "k" + (i % 23), (long) (i * 7 % 11));
    }

    static long timestamp(int i) {
        return EPOCH + i * 1000L;
    }

    public static void main(String[] args) throws Exception {
        MiniCluster cluster = Flink.startCluster(4);
        try {
            if (args[0].equals("write")) {
                Map<String, List<String>> fulls = new HashMap<>();
                for (JsonNode spec : Flink.readJson(Paths.get(args[1]))) {
                    String variant = variant(spec);
                    if (!fulls.containsKey(variant)) {
                        fulls.put(variant, full(cluster, spec));
                    }
                    write(cluster, spec, fulls.get(variant));
                }
            } else {
                restoreAll(cluster, Paths.get(args[1]), Paths.get(args[2]));
            }
        } finally {
            Flink.closeCluster(cluster);
        }
        System.exit(0);
    }

    /** The rows of one uninterrupted run over every record. */
    static List<String> full(MiniCluster cluster, JsonNode spec) throws Exception {
        phase = "full";
        EMITTED.clear();
        JobID jobId = new JobID();
        Map<String, String> c = config("hashmap", 2, 128);
        variantConfig(c, spec);
        cluster.submitJob(job(Configuration.fromMap(c), jobId)).get(60, TimeUnit.SECONDS);
        Throwable failure = Flink.jobFailure(cluster, jobId);
        if (failure != null) {
            throw new IllegalStateException("uninterrupted SQL job failed", failure);
        }
        return sorted(EMITTED);
    }

    static void write(MiniCluster cluster, JsonNode spec, List<String> full) throws Exception {
        Path out = Paths.get(spec.get("out").asText());
        String format = spec.get("format").asText();
        Files.createDirectories(out);
        Map<String, String> c = config(
                spec.get("backend").asText(), spec.get("parallelism").asInt(), spec.get("max_parallelism").asInt());
        variantConfig(c, spec);
        c.put("execution.checkpointing.storage", "filesystem");
        c.put("execution.checkpointing.dir", out.resolve("checkpoints").toUri().toString());
        phase = "write";
        emittedRecords = 0;
        EMITTED.clear();
        JobID jobId = new JobID();
        cluster.submitJob(job(Configuration.fromMap(c), jobId)).get(60, TimeUnit.SECONDS);
        String pointer;
        try {
            Flink.await(cluster, jobId, () -> emittedRecords == BATCH1, 120_000, "records");
            // Aligned barriers follow the records: the savepoint completes once every operator
            // (the collectors too) has processed all of them.
            pointer = Flink.retryWhileTasksStart(() -> cluster.triggerSavepoint(
                    jobId, out.resolve("savepoints").toUri().toString(), false,
                    SavepointFormatType.valueOf(format)).get(120, TimeUnit.SECONDS));
        } finally {
            Flink.cancelAndWait(cluster, jobId);
        }
        List<String> before = sorted(EMITTED);
        Flink.copyRecursively(Flink.snapshotDir(pointer), out.resolve("savepoint"));
        Flink.deleteRecursively(out.resolve("savepoints"));
        Flink.deleteRecursively(out.resolve("checkpoints"));
        Map<String, Object> manifest = new LinkedHashMap<>();
        manifest.put("backend", spec.get("backend").asText());
        manifest.put("format", format);
        manifest.put("parallelism", spec.get("parallelism").asInt());
        manifest.put("max_parallelism", spec.get("max_parallelism").asInt());
        if (!variant(spec).isEmpty()) {
            manifest.put("variant", variant(spec));
        }
        manifest.put("before", before);
        manifest.put("full", full);
        Flink.writeJson(out.resolve("manifest.json"), manifest);
    }

    static void restoreAll(MiniCluster cluster, Path resultsFile, Path requestsFile) throws Exception {
        List<Map<String, Object>> results = new ArrayList<>();
        for (JsonNode request : Flink.readJson(requestsFile)) {
            Map<String, Object> result = new LinkedHashMap<>();
            try {
                result.put("rows", restore(cluster, request));
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
        Map<String, String> c = config(
                request.get("backend").asText(), request.get("parallelism").asInt(),
                request.path("max_parallelism").asInt(-1));
        variantConfig(c, request);
        c.put("execution.state-recovery.path", Paths.get(request.get("path").asText()).toAbsolutePath().toUri().toString());
        c.put("execution.state-recovery.claim-mode", "NO_CLAIM");
        phase = "restore";
        EMITTED.clear();
        JobID jobId = new JobID();
        cluster.submitJob(job(Configuration.fromMap(c), jobId)).get(60, TimeUnit.SECONDS);
        Throwable failure = Flink.jobFailure(cluster, jobId);
        if (failure != null) {
            throw new IllegalStateException("restored SQL job failed", failure);
        }
        return sorted(EMITTED);
    }

    /** "" for the plain job, else e.g. "ttl=1 h,typed". */
    static String variant(JsonNode spec) {
        List<String> parts = new ArrayList<>();
        if (!spec.path("ttl").asText("").isEmpty()) {
            parts.add("ttl=" + spec.get("ttl").asText());
        }
        if (spec.path("typed").asBoolean(false)) {
            parts.add("typed");
        }
        return String.join(",", parts);
    }

    /** The variant's options as job configuration (read by job()). */
    static void variantConfig(Map<String, String> c, JsonNode spec) {
        if (!spec.path("ttl").asText("").isEmpty()) {
            c.put("table.exec.state.ttl", spec.get("ttl").asText());
        }
        if (spec.path("typed").asBoolean(false)) {
            c.put(TYPED_OPTION, "true");
        }
    }

    /** A key of the job's own (Flink ignores unknown keys): add TYPED_QUERIES. */
    static final String TYPED_OPTION = "statectl.sql-job.typed";

    static List<String> sorted(ConcurrentLinkedQueue<String> rows) {
        List<String> lines = new ArrayList<>(rows);
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
        c.put("pipeline.operator-chaining.enabled", "false");
        c.put("restart-strategy.type", "none");
        c.put("execution.checkpointing.data-inline-threshold", "0b");
        c.put("execution.checkpointing.file-merging.enabled", "false");
        c.put("state.backend.local-recovery", "false");
        c.put("table.local-time-zone", "UTC");
        c.put("table.optimizer.agg-phase-strategy", "ONE_PHASE");
        return c;
    }

    static JobGraph job(Configuration conf, JobID jobId) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        StreamTableEnvironment tables = StreamTableEnvironment.create(env);
        TypeInformation<Row> type = Types.ROW_NAMED(new String[] {"id", "k", "v"}, Types.LONG, Types.STRING, Types.LONG);
        DataStream<Row> src = env.addSource(new Source(), "sql-src", type).setParallelism(1).uid("sql-src");
        Table table = tables.fromDataStream(src, Schema.newBuilder()
                .columnByMetadata("rowtime", "TIMESTAMP_LTZ(3)")
                .watermark("rowtime", "SOURCE_WATERMARK()")
                .build());
        tables.createTemporaryView("src", table);
        Map<String, String> queries = new LinkedHashMap<>(QUERIES);
        if ("true".equals(conf.toMap().get(TYPED_OPTION))) {
            tables.createTemporaryView("typed", tables.sqlQuery(TYPED_VIEW));
            queries.putAll(TYPED_QUERIES);
        }
        for (Map.Entry<String, String> query : queries.entrySet()) {
            String name = query.getKey();
            tables.toChangelogStream(tables.sqlQuery(query.getValue()))
                    .map(new Collect(name)).name("collect-" + name).uid("collect-" + name)
                    .sinkTo(new DiscardingSink<>()).name("sink-" + name).uid("sink-" + name);
        }
        // DataStream operators keyed by a Tuple2 and by a Row (with null fields): their keys
        // hash by Tuple.hashCode / Row.hashCode.
        src.keyBy((KeySelector<Row, Tuple2<String, Long>>) r -> Tuple2.of((String) r.getField(1), (Long) r.getField(2)),
                        Types.TUPLE(Types.STRING, Types.LONG))
                .process(new Count<Tuple2<String, Long>>("tuple")).uid("tuple-count").name("tuple-count")
                .sinkTo(new DiscardingSink<>()).uid("sink-tuple").name("sink-tuple");
        src.keyBy((KeySelector<Row, Row>) r -> Row.of(r.getField(1), (Long) r.getField(2) % 3 == 0 ? null : r.getField(2)),
                        Types.ROW(Types.STRING, Types.LONG))
                .process(new Count<Row>("row")).uid("row-count").name("row-count")
                .sinkTo(new DiscardingSink<>()).uid("sink-row").name("sink-row");
        return env.getStreamGraph().getJobGraph(SqlJob.class.getClassLoader(), jobId);
    }

    /** Emits its batch with event timestamps; write: then idles; otherwise ends (final watermark). */
    static final class Source implements SourceFunction<Row> {
        private volatile boolean running = true;

        @Override
        public void run(SourceContext<Row> ctx) throws Exception {
            int from = phase.equals("restore") ? BATCH1 : 0;
            int to = phase.equals("write") ? BATCH1 : TOTAL;
            for (int i = from; i < to && running; i++) {
                synchronized (ctx.getCheckpointLock()) {
                    ctx.collectWithTimestamp(record(i), timestamp(i));
                    if (i == WATERMARK_AFTER - 1) {
                        ctx.emitWatermark(new Watermark(timestamp(i)));
                    }
                    emittedRecords = i + 1;
                }
            }
            while (running && phase.equals("write")) {
                Thread.sleep(5);
            }
        }

        @Override
        public void cancel() {
            running = false;
        }
    }

    /** Emits "name|key|count of the key's records so far" per record. */
    static final class Count<K> extends KeyedProcessFunction<K, Row, String> {
        private final String name;
        private transient ValueState<Long> count;

        Count(String name) {
            this.name = name;
        }

        @Override
        public void open(OpenContext context) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(Row row, Context ctx, Collector<String> out) throws Exception {
            long next = (count.value() == null ? 0 : count.value()) + 1;
            count.update(next);
            String line = name + "|" + ctx.getCurrentKey() + "|" + next;
            EMITTED.add(line);
            out.collect(line);
        }
    }

    static final class Collect implements MapFunction<Row, String> {
        private final String query;

        Collect(String query) {
            this.query = query;
        }

        @Override
        public String map(Row row) {
            String line = query + "|" + row;
            EMITTED.add(line);
            return line;
        }
    }
}
