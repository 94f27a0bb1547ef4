package statectl.values;

import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.state.AggregatingState;
import org.apache.flink.api.common.state.AggregatingStateDescriptor;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ReducingState;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.InternalTimer;
import org.apache.flink.streaming.api.operators.InternalTimerService;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.Triggerable;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import statectl.values.Model.Color;
import statectl.values.Model.Pojo;

/** The operators of the values job (APIs common to Flink 1.15-2.x). */
public final class Operators {
    private Operators() {}

    /** Records processed per operator (the driver waits for all of them before the savepoint). */
    public static final AtomicLong valuesRecords = new AtomicLong();
    public static final AtomicLong windowRecords = new AtomicLong();
    public static final AtomicLong opstateRecords = new AtomicLong();
    public static final AtomicLong opstateInits = new AtomicLong();

    public static void reset() {
        valuesRecords.set(0);
        windowRecords.set(0);
        opstateRecords.set(0);
        opstateInits.set(0);
    }

    public static final class KeyOf implements KeySelector<Tuple3<String, Integer, Long>, String> {
        @Override
        public String getKey(Tuple3<String, Integer, Long> e) {
            return e.f0;
        }
    }

    public static final class Sum implements ReduceFunction<Long> {
        @Override
        public Long reduce(Long a, Long b) {
            return a + b;
        }
    }

    /** (sum, count) accumulator. */
    public static final class Avg implements AggregateFunction<Long, Tuple2<Long, Long>, Double> {
        @Override
        public Tuple2<Long, Long> createAccumulator() {
            return Tuple2.of(0L, 0L);
        }

        @Override
        public Tuple2<Long, Long> add(Long value, Tuple2<Long, Long> acc) {
            return Tuple2.of(acc.f0 + value, acc.f1 + 1);
        }

        @Override
        public Double getResult(Tuple2<Long, Long> acc) {
            return acc.f1 == 0 ? 0.0 : (double) acc.f0 / acc.f1;
        }

        @Override
        public Tuple2<Long, Long> merge(Tuple2<Long, Long> a, Tuple2<Long, Long> b) {
            return Tuple2.of(a.f0 + b.f0, a.f1 + b.f1);
        }
    }

    /** The window operator's aggregate: the sum of the sequence numbers. */
    public static final class WindowSum implements AggregateFunction<Tuple3<String, Integer, Long>, Long, Long> {
        @Override
        public Long createAccumulator() {
            return 0L;
        }

        @Override
        public Long add(Tuple3<String, Integer, Long> e, Long acc) {
            windowRecords.incrementAndGet();
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

    static final TypeInformation<Tuple2<Long, Long>> ACC = Types.TUPLE(Types.LONG, Types.LONG);

    /** The keyed operator `values` (String keys) with every state of States.ALL["values"]. */
    public static final class ValuesOperator extends AbstractStreamOperator<Tuple3<String, Integer, Long>>
            implements OneInputStreamOperator<Tuple3<String, Integer, Long>, Tuple3<String, Integer, Long>>,
                    Triggerable<String, VoidNamespace> {
        private transient Map<String, ValueState<Object>> values;
        private transient ValueState<String> ttlValue;
        private transient ListState<Pojo> pojoList;
        private transient ListState<Tuple2<String, Long>> tuple2List;
        private transient ListState<String> ttlList;
        private transient MapState<String, Pojo> pojoMap;
        private transient MapState<Long, Color> enumMap;
        private transient MapState<String, Long> ttlMap;
        private transient ReducingState<Long> reducing;
        private transient ReducingState<Long> ttlReducing;
        private transient AggregatingState<Long, Double> aggregating;
        private transient AggregatingState<Long, Double> ttlAggregating;
        private transient InternalTimerService<VoidNamespace> timers;

        @Override
        @SuppressWarnings("unchecked")
        public void initializeState(StateInitializationContext context) throws Exception {
            super.initializeState(context);
            StateTtlConfig ttl = Model.ttlConfig();
            values = new LinkedHashMap<>();
            for (States.ValueDef d : States.VALUES) {
                values.put(d.name, getPartitionedState(new ValueStateDescriptor<>(d.name, (TypeInformation<Object>) d.type)));
            }
            ValueStateDescriptor<String> ttlValueDesc = new ValueStateDescriptor<>("ttl-value", Types.STRING);
            ttlValueDesc.enableTimeToLive(ttl);
            ttlValue = getPartitionedState(ttlValueDesc);
            pojoList = getPartitionedState(new ListStateDescriptor<>("pojo-list", Types.POJO(Pojo.class)));
            tuple2List = getPartitionedState(new ListStateDescriptor<>("tuple2-list", Types.TUPLE(Types.STRING, Types.LONG)));
            ListStateDescriptor<String> ttlListDesc = new ListStateDescriptor<>("ttl-list", Types.STRING);
            ttlListDesc.enableTimeToLive(ttl);
            ttlList = getPartitionedState(ttlListDesc);
            pojoMap = getPartitionedState(new MapStateDescriptor<>("pojo-map", Types.STRING, Types.POJO(Pojo.class)));
            enumMap = getPartitionedState(new MapStateDescriptor<>("enum-map", Types.LONG, Types.ENUM(Color.class)));
            MapStateDescriptor<String, Long> ttlMapDesc = new MapStateDescriptor<>("ttl-map", Types.STRING, Types.LONG);
            ttlMapDesc.enableTimeToLive(ttl);
            ttlMap = getPartitionedState(ttlMapDesc);
            reducing = getPartitionedState(new ReducingStateDescriptor<>("reducing", new Sum(), Types.LONG));
            ReducingStateDescriptor<Long> ttlReducingDesc = new ReducingStateDescriptor<>("ttl-reducing", new Sum(), Types.LONG);
            ttlReducingDesc.enableTimeToLive(ttl);
            ttlReducing = getPartitionedState(ttlReducingDesc);
            aggregating = getPartitionedState(new AggregatingStateDescriptor<>("aggregating", new Avg(), ACC));
            AggregatingStateDescriptor<Long, Tuple2<Long, Long>, Double> ttlAggDesc =
                    new AggregatingStateDescriptor<>("ttl-aggregating", new Avg(), ACC);
            ttlAggDesc.enableTimeToLive(ttl);
            ttlAggregating = getPartitionedState(ttlAggDesc);
        }

        @Override
        public void open() throws Exception {
            super.open();
            timers = getInternalTimerService("user-timers", VoidNamespaceSerializer.INSTANCE, this);
        }

        @Override
        public void processElement(StreamRecord<Tuple3<String, Integer, Long>> element) throws Exception {
            Tuple3<String, Integer, Long> e = element.getValue();
            int i = e.f1;
            long seq = e.f2;
            long n = seq / Model.KEYS.length;
            for (States.ValueDef d : States.VALUES) {
                Object v = d.value.apply(i, n);
                if (v != null) {
                    values.get(d.name).update(v);
                }
            }
            ttlValue.update("ttl-" + Model.KEYS[i] + "-" + n);
            pojoList.add(Model.pojo(i, n));
            tuple2List.add(Tuple2.of("e" + n, seq));
            ttlList.add("v" + seq);
            if (i % 2 == 0) {
                pojoMap.put("m" + n, Model.pojo(i, n + 10));
                if (i % 4 == 0) {
                    pojoMap.put("null", null);
                }
            }
            enumMap.put(seq, Color.values()[(int) (seq % 4)]);
            enumMap.put((long) -i, Color.VIOLET);
            ttlMap.put("u" + (seq % 2), seq);
            reducing.add(seq);
            ttlReducing.add(seq * 2);
            aggregating.add(seq);
            ttlAggregating.add(seq + 1);
            timers.registerProcessingTimeTimer(VoidNamespace.INSTANCE, Model.TIMER_BASE + i * 1000L + n);
            if (i % 3 == 0) {
                timers.registerEventTimeTimer(VoidNamespace.INSTANCE, Model.TIMER_BASE + 1_000_000L + i * 10L + n);
            }
            output.collect(element);
            valuesRecords.incrementAndGet();
        }

        @Override
        public void onEventTime(InternalTimer<String, VoidNamespace> timer) {}

        @Override
        public void onProcessingTime(InternalTimer<String, VoidNamespace> timer) {}
    }

    /** Operator (non-keyed) state: list `op-list` (Pojo), union `op-union` (Long), broadcast `op-broadcast`. */
    public static final class OpStateOperator extends AbstractStreamOperator<Tuple3<String, Integer, Long>>
            implements OneInputStreamOperator<Tuple3<String, Integer, Long>, Tuple3<String, Integer, Long>> {

        @Override
        public void initializeState(StateInitializationContext context) throws Exception {
            super.initializeState(context);
            ListState<Pojo> list = context.getOperatorStateStore()
                    .getListState(new ListStateDescriptor<>("op-list", Types.POJO(Pojo.class)));
            ListState<Long> union = context.getOperatorStateStore()
                    .getUnionListState(new ListStateDescriptor<>("op-union", Types.LONG));
            BroadcastState<String, Pojo> broadcast = context.getOperatorStateStore()
                    .getBroadcastState(new MapStateDescriptor<>("op-broadcast", Types.STRING, Types.POJO(Pojo.class)));
            if (!context.isRestored()) {
                int s = Model.subtaskIndex(getRuntimeContext());
                List<Pojo> l = new ArrayList<>();
                for (int k = 0; k < 2 + s; k++) {
                    l.add(Model.pojo((s * 5 + k) % Model.KEYS.length, 100 + k));
                }
                list.update(l);
                List<Long> u = new ArrayList<>();
                for (int k = 0; k < 1 + s % 2; k++) {
                    u.add(1000L * s + 500 + k);
                }
                union.update(u);
                for (int k = 0; k < 3; k++) {
                    broadcast.put("b" + k, Model.pojo(k, 200));
                }
                broadcast.put("\uD83D\uDE00-smile", Model.pojo(3, 201));
            }
            opstateInits.incrementAndGet();
        }

        @Override
        public void processElement(StreamRecord<Tuple3<String, Integer, Long>> element) {
            opstateRecords.incrementAndGet();
        }
    }
}
