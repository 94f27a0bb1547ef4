package statectl.compat;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.runtime.state.CheckpointableKeyedStateBackend;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.functions.co.BroadcastProcessFunction;
import org.apache.flink.streaming.api.functions.source.SourceFunction;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.InternalTimer;
import org.apache.flink.streaming.api.operators.InternalTimerService;
import org.apache.flink.streaming.api.operators.InternalTimerServiceImpl;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.Triggerable;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.util.Collector;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * The operators of the compat job, written against APIs common to Flink 1.15-1.20, and the static
 * channel between them and the driver (the MiniCluster runs in the same JVM and, without user
 * jars, loads these classes with the application class loader).
 */
public final class Ops {
    private Ops() {}

    public static final long TIMER_BASE = 4102444800000L; // 2100-01-01: timers never fire

    // ------------------------------------------------------------------ driver <-> operators

    /** false: dump in snapshotState (write); true: dump right after restore (restore). */
    static volatile boolean restoreMode;
    static volatile boolean released;
    static final AtomicLong statelessRecords = new AtomicLong();
    static final AtomicLong broadcastRecords = new AtomicLong();
    /** checkpointId (-1 on restore) -> uid -> subtask -> dump. */
    static final Map<Long, Map<String, Map<Integer, Map<String, Object>>>> dumps = new ConcurrentHashMap<>();
    /** uid -> [parallelism, maxParallelism] as the tasks saw it. */
    static final Map<String, int[]> info = new ConcurrentHashMap<>();
    /** Simple class names of the keyed state backends that ran. */
    static final Set<String> backendClasses = ConcurrentHashMap.newKeySet();

    static void reset(boolean restore) {
        restoreMode = restore;
        released = false;
        statelessRecords.set(0);
        broadcastRecords.set(0);
        dumps.clear();
        info.clear();
        backendClasses.clear();
    }

    static void record(long checkpointId, String uid, org.apache.flink.api.common.functions.RuntimeContext ctx,
            Map<String, Object> dump) {
        info.put(uid, new int[] {ctx.getNumberOfParallelSubtasks(), ctx.getMaxNumberOfParallelSubtasks()});
        dumps.computeIfAbsent(checkpointId, k -> new ConcurrentHashMap<>())
                .computeIfAbsent(uid, k -> new ConcurrentHashMap<>())
                .put(ctx.getIndexOfThisSubtask(), dump);
    }

    // ------------------------------------------------------------------ data

    static final String[] STRING_KEYS;
    static final long[] LONG_KEYS;
    static final String[] BCAST_KEYS = {"alpha", "beta", "\u03b3\u03ac\u03bc\u03bc\u03b1", "\uD83D\uDE00-smile"};
    static final int KEYS = 24;
    static final int RECORDS = 72;

    static {
        List<String> s = new ArrayList<>();
        for (int i = 0; s.size() < KEYS - 3; i++) {
            s.add("k" + i);
        }
        s.add("\u00e9-\u043a\u043b\u044e\u0447");
        s.add("\uD834\uDD1E-clef");
        s.add("long-" + "x".repeat(150));
        STRING_KEYS = s.toArray(new String[0]);
        long[] special = {Long.MIN_VALUE, Long.MAX_VALUE, -1L, 0L, 1L, -42L, 1L << 40, 2147483648L, 1L << 62};
        LONG_KEYS = new long[KEYS];
        for (int i = 0; i < KEYS; i++) {
            LONG_KEYS[i] = i < special.length ? special[i] : 1000L + 7L * i;
        }
    }

    /** Record i = (STRING_KEYS[i % KEYS], LONG_KEYS[i % KEYS], i). */
    static Tuple3<String, Long, Long> event(int i) {
        return Tuple3.of(STRING_KEYS[i % KEYS], LONG_KEYS[i % KEYS], (long) i);
    }

    static MapStateDescriptor<String, Long> bcastDescriptor() {
        return new MapStateDescriptor<>("bcast", Types.STRING, Types.LONG);
    }

    // ------------------------------------------------------------------ functions

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

    /** Emits the records once released (never on restore), then idles until cancelled. */
    public static final class Source implements SourceFunction<Tuple3<String, Long, Long>> {
        private volatile boolean running = true;

        @Override
        public void run(SourceContext<Tuple3<String, Long, Long>> ctx) throws Exception {
            boolean done = false;
            while (running) {
                if (!done && released) {
                    for (int i = 0; i < RECORDS; i++) {
                        synchronized (ctx.getCheckpointLock()) {
                            ctx.collect(event(i));
                        }
                    }
                    done = true;
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
     * ValueState cnt (sum), ListState lst (values), MapState mp (u<v%3> -> v, even v), timers
     * (processing at TIMER_BASE+v for v%3==0, event at TIMER_BASE+1000v for v%5==0).
     */
    public static final class Keyed<K> extends AbstractStreamOperator<Tuple3<String, Long, Long>>
            implements OneInputStreamOperator<Tuple3<String, Long, Long>, Tuple3<String, Long, Long>>,
                    Triggerable<K, VoidNamespace> {
        private final String uid;
        private transient ValueState<Long> cnt;
        private transient ListState<Long> lst;
        private transient MapState<String, Long> mp;
        private transient InternalTimerService<VoidNamespace> timers;

        public Keyed(String uid) {
            this.uid = uid;
        }

        @Override
        public void initializeState(StateInitializationContext context) throws Exception {
            super.initializeState(context);
            cnt = getPartitionedState(new ValueStateDescriptor<>("cnt", Types.LONG));
            lst = getPartitionedState(new ListStateDescriptor<>("lst", Types.LONG));
            mp = getPartitionedState(new MapStateDescriptor<>("mp", Types.STRING, Types.LONG));
        }

        @Override
        public void open() throws Exception {
            super.open();
            timers = getInternalTimerService("user-timers", VoidNamespaceSerializer.INSTANCE, this);
            backendClasses.add(getKeyedStateBackend().getClass().getSimpleName());
            if (restoreMode) {
                record(-1L, uid, getRuntimeContext(), dump(true));
            }
        }

        @Override
        public void processElement(StreamRecord<Tuple3<String, Long, Long>> element) throws Exception {
            long v = element.getValue().f2;
            Long c = cnt.value();
            cnt.update((c == null ? 0L : c) + v);
            lst.add(v);
            if (v % 2 == 0) {
                mp.put("u" + (v % 3), v);
            }
            if (v % 3 == 0) {
                timers.registerProcessingTimeTimer(VoidNamespace.INSTANCE, TIMER_BASE + v);
            }
            if (v % 5 == 0) {
                timers.registerEventTimeTimer(VoidNamespace.INSTANCE, TIMER_BASE + v * 1000);
            }
            output.collect(element);
        }

        @Override
        public void snapshotState(StateSnapshotContext context) throws Exception {
            super.snapshotState(context);
            if (!restoreMode) {
                record(context.getCheckpointId(), uid, getRuntimeContext(), dump(false));
            }
        }

        @Override
        public void onEventTime(InternalTimer<K, VoidNamespace> timer) {}

        @Override
        public void onProcessingTime(InternalTimer<K, VoidNamespace> timer) {}

        /** Every key from getKeys, read back through setCurrentKey; timers; checks. */
        @SuppressWarnings("unchecked")
        private Map<String, Object> dump(boolean restored) throws Exception {
            CheckpointableKeyedStateBackend<K> backend = (CheckpointableKeyedStateBackend<K>) getKeyedStateBackend();
            KeyGroupRange range = backend.getKeyGroupRange();
            int maxParallelism = getRuntimeContext().getMaxNumberOfParallelSubtasks();
            Object previousKey = backend.getCurrentKey();
            Set<List<String>> unreachable = new LinkedHashSet<>();
            Set<List<String>> misplaced = new LinkedHashSet<>();
            Map<String, Object> keyed = new TreeMap<>();
            for (String name : Arrays.asList("cnt", "lst", "mp")) {
                List<K> keys;
                try (Stream<K> stream = backend.getKeys(name, VoidNamespace.INSTANCE)) {
                    keys = new ArrayList<>(new LinkedHashSet<>(stream.collect(Collectors.toList())));
                }
                Map<String, Object> values = new TreeMap<>();
                for (K key : keys) {
                    if (!range.contains(KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism))) {
                        misplaced.add(Arrays.asList(name, String.valueOf(key)));
                    }
                    Object value;
                    try {
                        setCurrentKey(key);
                        value = read(name);
                    } catch (RuntimeException e) {
                        value = null;
                    }
                    if (value == null) {
                        unreachable.add(Arrays.asList(name, String.valueOf(key)));
                    } else {
                        values.put(String.valueOf(key), value);
                    }
                }
                keyed.put(name, values);
            }
            Map<String, Object> timerDump = new TreeMap<>();
            InternalTimerServiceImpl<K, VoidNamespace> impl = (InternalTimerServiceImpl<K, VoidNamespace>) timers;
            for (String kind : Arrays.asList("processing", "event")) {
                Map<String, List<Long>> byKey = new TreeMap<>();
                String state = "_timer_state/" + kind + "_user-timers";
                org.apache.flink.util.function.BiConsumerWithException<VoidNamespace, Long, Exception> visit = (ns, ts) -> {
                    Object key = backend.getCurrentKey();
                    if (!range.contains(KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism))) {
                        misplaced.add(Arrays.asList(state, String.valueOf(key)));
                    }
                    byKey.computeIfAbsent(String.valueOf(key), k -> new ArrayList<>()).add(ts);
                };
                if (kind.equals("processing")) {
                    impl.forEachProcessingTimeTimer(visit);
                } else {
                    impl.forEachEventTimeTimer(visit);
                }
                byKey.values().forEach(l -> l.sort(Comparator.naturalOrder()));
                timerDump.put(kind, byKey);
            }
            if (previousKey != null) {
                setCurrentKey(previousKey);
            }
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("key_group_range", Arrays.asList(range.getStartKeyGroup(), range.getEndKeyGroup()));
            out.put("keyed", keyed);
            out.put("timers", timerDump);
            if (restored) {
                out.put("unreachable", sortedPairs(unreachable));
                out.put("misplaced", sortedPairs(misplaced));
            } else if (!unreachable.isEmpty() || !misplaced.isEmpty()) {
                throw new IllegalStateException(uid + ": unreachable " + unreachable + " misplaced " + misplaced);
            }
            return out;
        }

        private Object read(String name) throws Exception {
            switch (name) {
                case "cnt":
                    return cnt.value();
                case "lst": {
                    List<Long> l = new ArrayList<>();
                    Iterable<Long> it = lst.get();
                    if (it != null) {
                        it.forEach(l::add);
                    }
                    return l.isEmpty() ? null : l;
                }
                default: {
                    Map<String, Long> m = new TreeMap<>();
                    Iterable<Map.Entry<String, Long>> it = mp.entries();
                    if (it != null) {
                        it.forEach(e -> m.put(e.getKey(), e.getValue()));
                    }
                    return m.isEmpty() ? null : m;
                }
            }
        }
    }

    private static List<List<String>> sortedPairs(Set<List<String>> pairs) {
        List<List<String>> l = new ArrayList<>(pairs);
        l.sort(Comparator.<List<String>, String>comparing(p -> p.get(0)).thenComparing(p -> p.get(1)));
        return l;
    }

    /** Split list "split" = [1000i .. 1000i+1+i] and union list "union" = [1000i+500 ..] on subtask i. */
    public static final class OpState extends RichMapFunction<Tuple3<String, Long, Long>, Tuple3<String, Long, Long>>
            implements CheckpointedFunction {
        private transient ListState<Long> split;
        private transient ListState<Long> union;

        @Override
        public Tuple3<String, Long, Long> map(Tuple3<String, Long, Long> e) {
            return e;
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            split = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("split", Types.LONG));
            union = context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("union", Types.LONG));
            int index = getRuntimeContext().getIndexOfThisSubtask();
            if (restoreMode) {
                dump(-1L);
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
            if (!restoreMode) {
                dump(context.getCheckpointId());
            }
        }

        private void dump(long checkpointId) throws Exception {
            Map<String, Object> operator = new TreeMap<>();
            operator.put("split", elements(split));
            operator.put("union", elements(union));
            Map<String, Object> dump = new LinkedHashMap<>();
            dump.put("operator", operator);
            record(checkpointId, "opstate", getRuntimeContext(), withChecks(dump, checkpointId));
        }
    }

    /** Broadcast state "bcast" (String -> Long), written from the broadcast side. */
    public static final class Bcast
            extends BroadcastProcessFunction<Tuple3<String, Long, Long>, Tuple3<String, Long, Long>, Tuple3<String, Long, Long>>
            implements CheckpointedFunction {
        private transient BroadcastState<String, Long> state;

        @Override
        public void processElement(Tuple3<String, Long, Long> e, ReadOnlyContext ctx, Collector<Tuple3<String, Long, Long>> out) {
            out.collect(e);
        }

        @Override
        public void processBroadcastElement(Tuple3<String, Long, Long> e, Context ctx, Collector<Tuple3<String, Long, Long>> out)
                throws Exception {
            if (e.f2 % 8 == 0) {
                ctx.getBroadcastState(bcastDescriptor()).put(BCAST_KEYS[(int) ((e.f2 / 8) % BCAST_KEYS.length)], e.f2);
            }
            broadcastRecords.incrementAndGet();
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            state = context.getOperatorStateStore().getBroadcastState(bcastDescriptor());
            if (restoreMode) {
                dump(-1L);
            }
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            if (!restoreMode) {
                dump(context.getCheckpointId());
            }
        }

        private void dump(long checkpointId) throws Exception {
            Map<String, Long> content = new TreeMap<>();
            for (Map.Entry<String, Long> e : state.entries()) {
                content.put(e.getKey(), e.getValue());
            }
            Map<String, Object> broadcast = new TreeMap<>();
            broadcast.put("bcast", content);
            Map<String, Object> dump = new LinkedHashMap<>();
            dump.put("broadcast", broadcast);
            record(checkpointId, "bcast", getRuntimeContext(), withChecks(dump, checkpointId));
        }
    }

    /** Counts records so the driver knows when everything upstream is processed. */
    public static final class Stateless implements MapFunction<Tuple3<String, Long, Long>, Tuple3<String, Long, Long>> {
        @Override
        public Tuple3<String, Long, Long> map(Tuple3<String, Long, Long> e) {
            statelessRecords.incrementAndGet();
            return e;
        }
    }

    private static Map<String, Object> withChecks(Map<String, Object> dump, long checkpointId) {
        if (checkpointId < 0) {
            dump.put("unreachable", new ArrayList<>());
            dump.put("misplaced", new ArrayList<>());
        }
        return dump;
    }

    private static List<Long> elements(ListState<Long> state) throws Exception {
        List<Long> out = new ArrayList<>();
        Iterable<Long> it = state.get();
        if (it != null) {
            it.forEach(out::add);
        }
        return out;
    }
}
