package statectl.flinkjobs;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.functions.co.BroadcastProcessFunction;
import org.apache.flink.streaming.api.functions.source.legacy.SourceFunction;
import org.apache.flink.util.Collector;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** The non-keyed functions of the fixture topology. */
public final class Functions {
    private Functions() {}

    public static final class StringKey implements KeySelector<Tuple3<String, Long, Long>, String> {
        @Override
        public String getKey(Tuple3<String, Long, Long> e) {
            return e.f0;
        }
    }

    public static final class LongKey implements KeySelector<Tuple3<String, Long, Long>, Long> {
        @Override
        public Long getKey(Tuple3<String, Long, Long> e) {
            return e.f1;
        }
    }

    /**
     * Emits the records of the released phases in order, then idles until cancelled (a finished
     * source would make savepoints of a job with union state fail). Stateless.
     */
    public static final class ScriptedSource implements SourceFunction<Tuple3<String, Long, Long>> {
        private volatile boolean running = true;

        @Override
        public void run(SourceContext<Tuple3<String, Long, Long>> ctx) throws Exception {
            int emitted = 0;
            while (running) {
                while (emitted < Control.releasedPhase && running) {
                    emitted++;
                    for (Tuple3<String, Long, Long> e : Model.records(emitted)) {
                        synchronized (ctx.getCheckpointLock()) {
                            ctx.collect(e);
                        }
                    }
                }
                Thread.sleep(5);
            }
        }

        @Override
        public void cancel() {
            running = false;
        }
    }

    /**
     * Operator list state "split" (SPLIT_DISTRIBUTE) and union list state "union". A fresh
     * subtask i holds split = [i*1000 + 0 .. i*1000 + (1+i)] (2+i elements) and union =
     * [i*1000 + 500 .. + (i % 2)] (1 + i%2 elements).
     */
    public static final class OpState extends RichMapFunction<Tuple3<String, Long, Long>, Tuple3<String, Long, Long>>
            implements CheckpointedFunction {
        private final String uid;
        private transient ListState<Long> split;
        private transient ListState<Long> union;

        public OpState(String uid) {
            this.uid = uid;
        }

        @Override
        public Tuple3<String, Long, Long> map(Tuple3<String, Long, Long> e) {
            return e;
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            split = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("split", Types.LONG));
            union = context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("union", Types.LONG));
            Control.restoredFlags.merge(uid, context.isRestored(), Boolean::logicalOr);
            int index = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            if (Control.restoreMode) {
                record(null);
            } else if (!context.isRestored()) {
                List<Long> s = new ArrayList<>();
                for (int i = 0; i < 2 + index; i++) {
                    s.add(index * 1000L + i);
                }
                split.update(s);
                List<Long> u = new ArrayList<>();
                for (int j = 0; j < 1 + index % 2; j++) {
                    u.add(index * 1000L + 500 + j);
                }
                union.update(u);
            }
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            if (!Control.restoreMode) {
                record(context.getCheckpointId());
            }
        }

        private void record(Long checkpointId) throws Exception {
            Map<String, Object> operator = new TreeMap<>();
            operator.put("split", elements(split));
            operator.put("union", elements(union));
            Map<String, Object> dump = new LinkedHashMap<>();
            dump.put("operator", operator);
            Functions.record(checkpointId, uid, getRuntimeContext().getTaskInfo(), dump);
        }
    }

    /** Broadcast state "bcast" (String -> Long), written from the broadcast side. */
    public static final class Bcast
            extends BroadcastProcessFunction<Tuple3<String, Long, Long>, Tuple3<String, Long, Long>, Tuple3<String, Long, Long>>
            implements CheckpointedFunction {
        private final String uid;
        private transient BroadcastState<String, Long> state;

        public Bcast(String uid) {
            this.uid = uid;
        }

        @Override
        public void processElement(Tuple3<String, Long, Long> e, ReadOnlyContext ctx, Collector<Tuple3<String, Long, Long>> out) {
            out.collect(e);
        }

        @Override
        public void processBroadcastElement(Tuple3<String, Long, Long> e, Context ctx, Collector<Tuple3<String, Long, Long>> out)
                throws Exception {
            long v = e.f2;
            if (v >= 0 && v % 8 == 0) {
                ctx.getBroadcastState(Model.bcastDescriptor())
                        .put(Model.BCAST_KEYS[(int) ((v / 8) % Model.BCAST_KEYS.length)], v);
            }
            Control.broadcastRecords.incrementAndGet();
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            state = context.getOperatorStateStore().getBroadcastState(Model.bcastDescriptor());
            Control.restoredFlags.merge(uid, context.isRestored(), Boolean::logicalOr);
            if (Control.restoreMode) {
                record(null);
            }
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            if (!Control.restoreMode) {
                record(context.getCheckpointId());
            }
        }

        private void record(Long checkpointId) throws Exception {
            Map<String, Long> content = new TreeMap<>();
            for (Map.Entry<String, Long> e : state.entries()) {
                content.put(e.getKey(), e.getValue());
            }
            Map<String, Object> broadcast = new TreeMap<>();
            broadcast.put("bcast", content);
            Map<String, Object> dump = new LinkedHashMap<>();
            dump.put("broadcast", broadcast);
            Functions.record(checkpointId, uid, getRuntimeContext().getTaskInfo(), dump);
        }
    }

    /** No state; counts records so the driver knows when everything upstream is processed. */
    public static final class Stateless implements MapFunction<Tuple3<String, Long, Long>, Tuple3<String, Long, Long>> {
        @Override
        public Tuple3<String, Long, Long> map(Tuple3<String, Long, Long> e) {
            Control.statelessRecords.incrementAndGet();
            return e;
        }
    }

    static List<Long> elements(ListState<Long> state) throws Exception {
        List<Long> out = new ArrayList<>();
        Iterable<Long> it = state.get();
        if (it != null) {
            it.forEach(out::add);
        }
        return out;
    }

    static void record(Long checkpointId, String uid, org.apache.flink.api.common.TaskInfo info, Map<String, Object> dump) {
        if (checkpointId == null) {
            dump.put("unreachable", new ArrayList<>());
            dump.put("misplaced", new ArrayList<>());
        }
        Control.record(
                checkpointId, uid, info.getIndexOfThisSubtask(), info.getNumberOfParallelSubtasks(),
                info.getMaxNumberOfParallelSubtasks(), dump);
    }
}
