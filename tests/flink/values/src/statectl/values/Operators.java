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
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.KeyedStateBackend;
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
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.stream.Stream;

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
    /** Subtasks of `values` whose initializeState registered every state (the restore mode waits for them). */
    public static final AtomicLong valuesInits = new AtomicLong();

    /**
     * Per-request overrides of the `values` operator's keyed states (ValuesJob restore), by the
     * state's name in the original job: TTL on for a state without, TTL off for a TTL state,
     * registered under another name, not registered at all. Empty in the original job; cleared by
     * {@link #reset}.
     */
    public static final Set<String> ttlOn = ConcurrentHashMap.newKeySet();
    public static final Set<String> ttlOff = ConcurrentHashMap.newKeySet();
    public static final Map<String, String> rename = new ConcurrentHashMap<>();
    public static final Set<String> drop = ConcurrentHashMap.newKeySet();
    /**
     * Per-request (ValuesRestore): operators ({@code window}, {@code opstate}) left out of the
     * job, so their restored state is not restored at all (needs allow_non_restored). Empty in the
     * original job; cleared by {@link #reset}.
     */
    public static final Set<String> dropOperators = ConcurrentHashMap.newKeySet();
    /** States of {@link States#EXTRA} registered in this run; cleared by {@link #reset}. */
    public static final Set<String> extra = ConcurrentHashMap.newKeySet();

    /**
     * Restore mode only (set by ValuesRestore after {@link #reset}; off in the write mode): each
     * subtask of `values` checks in open() that every restored keyed entry is reachable the way the
     * job reaches it (see {@link ValuesOperator#checkReachable}), adding its findings below and
     * counting itself in {@link #valuesChecks} when done.
     */
    public static volatile boolean checkReachable = false;
    /** [registered state name, key]: getKeys lists the key, but reading it after setCurrentKey gives nothing. */
    public static final List<List<String>> unreachable = Collections.synchronizedList(new ArrayList<>());
    /** [registered state name, key]: the key's key group (KeyGroupRangeAssignment) is outside the subtask's range. */
    public static final List<List<String>> misplaced = Collections.synchronizedList(new ArrayList<>());
    /** (state, key) pairs checked, over all subtasks. */
    public static final AtomicLong checked = new AtomicLong();
    /** Subtasks of `values` that finished the check. */
    public static final AtomicLong valuesChecks = new AtomicLong();

    public static void reset() {
        valuesRecords.set(0);
        windowRecords.set(0);
        opstateRecords.set(0);
        opstateInits.set(0);
        valuesInits.set(0);
        ttlOn.clear();
        ttlOff.clear();
        rename.clear();
        drop.clear();
        dropOperators.clear();
        extra.clear();
        checkReachable = false;
        unreachable.clear();
        misplaced.clear();
        checked.set(0);
        valuesChecks.set(0);
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
        /** Every registered keyed state (after drop/rename), by its registered name. */
        private transient Map<String, State> registered;

        @Override
        @SuppressWarnings("unchecked")
        public void initializeState(StateInitializationContext context) throws Exception {
            super.initializeState(context);
            registered = new LinkedHashMap<>();
            values = new LinkedHashMap<>();
            for (States.ValueDef d : States.active()) {
                ValueState<Object> state = register(d.name, false,
                        name -> new ValueStateDescriptor<>(name, (TypeInformation<Object>) d.type));
                if (state != null) {
                    values.put(d.name, state);
                }
            }
            ttlValue = register("ttl-value", true, name -> new ValueStateDescriptor<>(name, Types.STRING));
            pojoList = register("pojo-list", false, name -> new ListStateDescriptor<>(name, Types.POJO(Pojo.class)));
            tuple2List = register("tuple2-list", false,
                    name -> new ListStateDescriptor<>(name, Types.TUPLE(Types.STRING, Types.LONG)));
            ttlList = register("ttl-list", true, name -> new ListStateDescriptor<>(name, Types.STRING));
            pojoMap = register("pojo-map", false,
                    name -> new MapStateDescriptor<>(name, Types.STRING, Types.POJO(Pojo.class)));
            enumMap = register("enum-map", false,
                    name -> new MapStateDescriptor<>(name, Types.LONG, Types.ENUM(Color.class)));
            ttlMap = register("ttl-map", true, name -> new MapStateDescriptor<>(name, Types.STRING, Types.LONG));
            reducing = register("reducing", false, name -> new ReducingStateDescriptor<>(name, new Sum(), Types.LONG));
            ttlReducing = register("ttl-reducing", true, name -> new ReducingStateDescriptor<>(name, new Sum(), Types.LONG));
            aggregating = register("aggregating", false,
                    name -> new AggregatingStateDescriptor<Long, Tuple2<Long, Long>, Double>(name, new Avg(), ACC));
            ttlAggregating = register("ttl-aggregating", true,
                    name -> new AggregatingStateDescriptor<Long, Tuple2<Long, Long>, Double>(name, new Avg(), ACC));
            valuesInits.incrementAndGet();
        }

        /**
         * Registers the state `original` of the job with the per-request overrides: null when
         * dropped, else under its new name (rename), with TTL when the job has it (`ttl`) and
         * ttlOff does not name it, or when ttlOn names it.
         */
        private <S extends State> S register(String original, boolean ttl, Function<String, StateDescriptor<S, ?>> make)
                throws Exception {
            if (drop.contains(original)) {
                return null;
            }
            StateDescriptor<S, ?> descriptor = make.apply(rename.getOrDefault(original, original));
            if (ttl ? !ttlOff.contains(original) : ttlOn.contains(original)) {
                descriptor.enableTimeToLive(Model.ttlConfig());
            }
            S state = getPartitionedState(descriptor);
            registered.put(descriptor.getName(), state);
            return state;
        }

        @Override
        public void open() throws Exception {
            super.open();
            timers = getInternalTimerService("user-timers", VoidNamespaceSerializer.INSTANCE, this);
            if (checkReachable) {
                checkReachable();
                valuesChecks.incrementAndGet();
            }
        }

        /**
         * Restore mode: for every registered keyed state, every key getKeys lists is read the way
         * the job reads it (setCurrentKey, then value() / get() / entries()); a read that gives
         * null or nothing, or throws, makes [state, key] "unreachable" (the entry is stored under
         * another key group than KeyGroupRangeAssignment gives the key), a key whose key group is
         * not in this subtask's range "misplaced".
         *
         * <p>TTL states are checked too: Model.ttlConfig() is a 10-year TTL on processing time
         * with the default update type (OnCreateAndWrite: a read does not refresh the last-access
         * timestamp, so the new savepoint is unchanged) and visibility (NeverReturnExpired). A
         * value reads as expired only when its last-access timestamp is more than 10 years before
         * the restore, which no savepoint written by this job (or migrated by ttl_on, stamped
         * with the restore time) has, so "written long ago" does not mean "hidden" here and the
         * TTL states need no skipping. (An edited savepoint with a timestamp over 10 years old
         * would report its keys unreachable.)
         */
        private void checkReachable() {
            KeyedStateBackend<String> backend = getKeyedStateBackend();
            org.apache.flink.api.common.TaskInfo info = getContainingTask().getEnvironment().getTaskInfo();
            int maxParallelism = info.getMaxNumberOfParallelSubtasks();
            KeyGroupRange range = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(
                    maxParallelism, info.getNumberOfParallelSubtasks(), info.getIndexOfThisSubtask());
            for (Map.Entry<String, State> e : registered.entrySet()) {
                String name = e.getKey();
                List<String> keys;
                // collect first: a read (TTL incremental cleanup) must not run inside the key iteration
                try (Stream<String> s = backend.getKeys(name, VoidNamespace.INSTANCE)) {
                    keys = s.collect(Collectors.toList());
                }
                for (String key : keys) {
                    checked.incrementAndGet();
                    if (!range.contains(KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism))) {
                        misplaced.add(Arrays.asList(name, key));
                    }
                    boolean found;
                    try {
                        setCurrentKey(key);
                        found = read(e.getValue());
                    } catch (Exception | AssertionError ex) {
                        found = false;
                    }
                    if (!found) {
                        unreachable.add(Arrays.asList(name, key));
                    }
                }
            }
        }

        /** Whether the state holds something for the current key (VALUE, LIST, MAP, REDUCING, AGGREGATING). */
        private static boolean read(State state) throws Exception {
            if (state instanceof ValueState) {
                return ((ValueState<?>) state).value() != null;
            }
            if (state instanceof MapState) {
                Iterable<?> entries = ((MapState<?, ?>) state).entries();
                return entries != null && entries.iterator().hasNext();
            }
            if (state instanceof ListState) {
                Iterable<?> list = ((ListState<?>) state).get();
                return list != null && list.iterator().hasNext();
            }
            if (state instanceof ReducingState || state instanceof AggregatingState) {
                // both are AppendingState<IN, OUT>: get() is null when the key has no accumulator
                return ((org.apache.flink.api.common.state.AppendingState<?, ?>) state).get() != null;
            }
            throw new IllegalStateException("unexpected state " + state.getClass().getName());
        }

        @Override
        public void processElement(StreamRecord<Tuple3<String, Integer, Long>> element) throws Exception {
            // the restore mode emits no record: every state is registered here
            Tuple3<String, Integer, Long> e = element.getValue();
            int i = e.f1;
            long seq = e.f2;
            long n = seq / Model.KEYS.length;
            for (States.ValueDef d : States.active()) {
                Object v = d.value.apply(i, n);
                if (v != null && values.containsKey(d.name)) { // not when dropped (a checkpoint kind)
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
