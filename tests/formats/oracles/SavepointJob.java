import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.BroadcastProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A small job whose canonical savepoint exercises every state-file layout statectl reads.
 *
 * <p>Usage: {@code SavepointJob <hashmap|rocksdb> <compression true|false> <maxParallelism>
 * <keys> <savepoint dir>}. Parallelism 2; String- and Long-keyed process functions with Value,
 * List and Map state and a processing-time timer per key; a map with split and union list state;
 * a broadcast state (String -> Long). Runs until every key has all its state, takes a CANONICAL savepoint,
 * prints "SAVEPOINT <path>" and cancels the job.
 */
public class SavepointJob {
    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration();
        conf.setString("state.backend.type", args[0]);
        conf.setString("execution.checkpointing.snapshot-compression", args[1]);
        // file-system checkpoint storage, so that state streams above 1 KiB become files
        conf.setString("execution.checkpointing.storage", "filesystem");
        conf.setString("execution.checkpointing.dir", "file://" + args[4] + "-checkpoints");
        conf.setString("execution.checkpointing.data-inline-threshold", "1kb");
        conf.setString("rest.bind-port", "0"); // other tests may run a cluster at the same time
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        env.setMaxParallelism(Integer.parseInt(args[2]));
        long keys = Long.parseLong(args[3]);
        DataStream<Long> numbers = env
                .fromSource(new NumberSequenceSource(0, Long.MAX_VALUE), WatermarkStrategy.noWatermarks(), "gen")
                .uid("src")
                .map(new Throttle()).uid("opstate-map");
        numbers.keyBy(x -> "k" + (x % keys)).process(new Counter<String>()).uid("keyed-str")
                .sinkTo(new DiscardingSink<>()).uid("sink-str");
        numbers.keyBy(x -> x % (keys - 13)).process(new Counter<Long>()).uid("keyed-long")
                .sinkTo(new DiscardingSink<>()).uid("sink-long");
        MapStateDescriptor<String, Long> broadcast = new MapStateDescriptor<>("bc", Types.STRING, Types.LONG);
        numbers.connect(numbers.broadcast(broadcast)).process(new Broadcaster(broadcast)).uid("bcast")
                .sinkTo(new DiscardingSink<>()).uid("sink-bc");
        JobClient client = env.executeAsync("statectl-formats");
        // Every key must have seen values of all three residues mod 3 (its map holds three
        // entries): 3 * keys consecutive numbers from one source subtask, so twice that in all.
        // Counted, not timed: on a loaded machine 5 s were once not enough.
        long deadline = System.currentTimeMillis() + 240_000;
        while (Throttle.MAPPED.get() < 6 * keys && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        try {
            System.out.println("SAVEPOINT " + savepoint(client, "file://" + args[4]));
            client.cancel().get();
            System.exit(0);
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1); // the local cluster's threads would keep the JVM alive
        }
    }

    /**
     * A savepoint of the running job, retried while tasks are still starting (RocksDB's are slow to
     * on a loaded machine). Not stop-with-savepoint: its end-of-data reaches the union-state map's
     * subtasks racily, and now and then Flink refused the savepoint because only one of them had
     * finished its operators (PartialFinishingNotSupportedByStateException, seen in CI).
     */
    static String savepoint(JobClient client, String target) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                return client.triggerSavepoint(target, SavepointFormatType.CANONICAL).get();
            } catch (ExecutionException e) {
                String message = String.valueOf(e.getMessage()).toLowerCase();
                if (attempt == 120 || !message.contains("is not being executed at the moment")) {
                    throw e;
                }
                Thread.sleep(500);
            }
        }
    }

    /** Slows the source down and keeps split and union list state. */
    public static class Throttle implements MapFunction<Long, Long>, CheckpointedFunction {
        /** Records mapped by all subtasks (the local cluster runs in this JVM). */
        static final AtomicLong MAPPED = new AtomicLong();

        private transient ListState<Long> split;
        private transient ListState<Long> union;
        private long last;

        @Override
        public Long map(Long value) throws Exception {
            if (value % 50 == 0) {
                Thread.sleep(1);
            }
            last = value;
            MAPPED.incrementAndGet();
            return value;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            split.update(List.of(last, last + 1, last + 2));
            union.update(List.of(last));
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            split = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("split", Types.LONG));
            union = context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("union", Types.LONG));
        }
    }

    /** Value, list and map state plus a timer per key. */
    public static class Counter<K> extends KeyedProcessFunction<K, Long, Long> {
        private transient ValueState<Long> count;
        private transient ListState<Long> list;
        private transient MapState<String, Long> map;

        @Override
        public void open(OpenContext context) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("cnt", Types.LONG));
            list = getRuntimeContext().getListState(new ListStateDescriptor<>("lst", Types.LONG));
            map = getRuntimeContext().getMapState(new MapStateDescriptor<>("mp", Types.STRING, Types.LONG));
        }

        @Override
        public void processElement(Long value, Context context, Collector<Long> out) throws Exception {
            Long seen = count.value();
            count.update(seen == null ? 1 : seen + 1);
            if (seen == null || seen < 3) {
                list.add(value);
            }
            map.put("m" + (value % 3), value);
            context.timerService().registerProcessingTimeTimer(4102444800000L);
        }
    }

    /** Keeps the last value per residue class in broadcast state. */
    public static class Broadcaster extends BroadcastProcessFunction<Long, Long, Long> {
        private final MapStateDescriptor<String, Long> descriptor;

        Broadcaster(MapStateDescriptor<String, Long> descriptor) {
            this.descriptor = descriptor;
        }

        @Override
        public void processElement(Long value, ReadOnlyContext context, Collector<Long> out) {}

        @Override
        public void processBroadcastElement(Long value, Context context, Collector<Long> out) throws Exception {
            context.getBroadcastState(descriptor).put("b" + (value % 5), value);
        }
    }
}
