package statectl.values;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.flink.table.types.logical.BigIntType;
import org.apache.flink.table.types.logical.DecimalType;
import org.apache.flink.table.types.logical.DoubleType;
import org.apache.flink.table.types.logical.IntType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.VarCharType;
import org.apache.flink.util.Collector;

import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.TimeZone;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;


/**
 * The export benchmark's seed: a CANONICAL hashmap savepoint written by Flink itself, whose keyed
 * operators "pojo" (ValueState of {@link BenchPojo}) and "rowdata" (ValueState of a SQL row BIGINT,
 * INT, DOUBLE, VARCHAR, VARCHAR, DECIMAL(10, 2)) hold one Long key each. bench/export_bench.py takes
 * their serializer snapshots (the keyed files' headers) and writes millions of entries behind them.
 *
 * <p>{@code BenchJob <savepoint-parent-dir>}: prints the savepoint's directory.
 */
public final class BenchJob {
    private BenchJob() {}

    static final AtomicLong POJO_RECORDS = new AtomicLong();
    static final AtomicLong ROW_RECORDS = new AtomicLong();

    /** Six fields, two of them strings (PojoSerializer orders them by name). */
    public static class BenchPojo {
        public long id;
        public int count;
        public double score;
        public boolean flag;
        public String name;
        public String city;

        public BenchPojo() {}
    }

    static final RowType ROW = RowType.of(new BigIntType(), new IntType(), new DoubleType(),
            new VarCharType(VarCharType.MAX_LENGTH), new VarCharType(VarCharType.MAX_LENGTH), new DecimalType(10, 2));

    /** Keeps the POJO of the record in a ValueState. */
    public static final class PojoFunction
            extends KeyedProcessFunction<Long, Tuple3<String, Integer, Long>, Long> {
        transient ValueState<BenchPojo> state;

        @Override
        public void open(OpenContext context) {
            state = getRuntimeContext().getState(new ValueStateDescriptor<>("pojo", BenchPojo.class));
        }

        @Override
        public void processElement(Tuple3<String, Integer, Long> e, Context ctx, Collector<Long> out)
                throws Exception {
            BenchPojo p = new BenchPojo();
            p.id = e.f2;
            p.count = e.f1;
            p.score = e.f2 / 7.0;
            p.flag = (e.f1 & 1) == 0;
            p.name = e.f0;
            p.city = "city-" + e.f1;
            state.update(p);
            POJO_RECORDS.incrementAndGet();
        }
    }

    /** Keeps the SQL row of the record in a ValueState (RowDataSerializer). */
    public static final class RowFunction
            extends KeyedProcessFunction<Long, Tuple3<String, Integer, Long>, Long> {
        transient ValueState<RowData> state;

        @Override
        public void open(OpenContext context) {
            state = getRuntimeContext().getState(new ValueStateDescriptor<>("row", InternalTypeInfo.of(ROW)));
        }

        @Override
        public void processElement(Tuple3<String, Integer, Long> e, Context ctx, Collector<Long> out)
                throws Exception {
            state.update(GenericRowData.of(e.f2, e.f1, e.f2 / 7.0, StringData.fromString(e.f0),
                    StringData.fromString("city-" + e.f1),
                    DecimalData.fromBigDecimal(BigDecimal.valueOf(e.f2, 2), 10, 2)));
            ROW_RECORDS.incrementAndGet();
        }
    }

    public static void main(String[] args) throws Exception {
        TimeZone.setDefault(TimeZone.getTimeZone("UTC"));
        Path out = Paths.get(args[0]).toAbsolutePath();
        Configuration clusterConf = new Configuration();
        clusterConf.setString("taskmanager.memory.managed.size", "128m");
        clusterConf.setString("taskmanager.memory.network.min", "64m");
        clusterConf.setString("taskmanager.memory.network.max", "64m");
        clusterConf.setString("rest.bind-port", "0");
        MiniCluster cluster = new MiniCluster(new MiniClusterConfiguration.Builder()
                .setConfiguration(clusterConf).setNumTaskManagers(1).setNumSlotsPerTaskManager(2)
                .withRandomPorts().build());
        cluster.start();
        try {
            Path work = Files.createTempDirectory("statectl-bench-");
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(
                    ValuesJob.config("hashmap", 1, 128, work.resolve("checkpoints")));
            DataStream<Tuple3<String, Integer, Long>> src = env
                    .fromSource(new ValuesSource(), WatermarkStrategy.noWatermarks(), "src", Model.EVENT)
                    .setParallelism(1).uid("src");
            src.keyBy(e -> 1L, Types.LONG).process(new PojoFunction(), Types.LONG).uid("pojo");
            src.keyBy(e -> 1L, Types.LONG).process(new RowFunction(), Types.LONG).uid("rowdata");
            JobGraph job = env.getStreamGraph().getJobGraph();
            JobID id = job.getJobID();
            cluster.submitJob(job).get(60, TimeUnit.SECONDS);
            long n = Model.records();
            ValuesJob.await(cluster, id, () -> POJO_RECORDS.get() == n && ROW_RECORDS.get() == n, "records");
            String pointer = ValuesJob.triggerSavepoint(cluster, id, out, "CANONICAL");
            ValuesJob.cancelAndWait(cluster, id);
            System.out.println(pointer);
        } finally {
            cluster.close();
        }
        System.exit(0);
    }
}
