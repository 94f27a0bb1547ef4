package statectl.flinkjobs;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.runtime.state.CheckpointableKeyedStateBackend;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.InternalTimer;
import org.apache.flink.streaming.api.operators.InternalTimerService;
import org.apache.flink.streaming.api.operators.InternalTimerServiceImpl;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.Triggerable;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * Keyed operator with ValueState "cnt", ListState "lst", MapState "mp" and processing/event-time
 * timers (timer service "user-timers"). Dumps its whole keyed state: in snapshotState (fixture
 * job: the exact content of that snapshot) or in open() right after restore (restore check).
 */
public class KeyedStateOperator<K> extends AbstractStreamOperator<Tuple3<String, Long, Long>>
        implements OneInputStreamOperator<Tuple3<String, Long, Long>, Tuple3<String, Long, Long>>,
                Triggerable<K, VoidNamespace> {

    private static final long serialVersionUID = 1L;

    private final String uid;
    private transient ValueState<Long> cnt;
    private transient ListState<Long> lst;
    private transient MapState<String, Long> mp;
    private transient InternalTimerService<VoidNamespace> timers;

    public KeyedStateOperator(String uid) {
        this.uid = uid;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        cnt = getPartitionedState(new ValueStateDescriptor<>("cnt", Types.LONG));
        lst = getPartitionedState(new ListStateDescriptor<>("lst", Types.LONG));
        mp = getPartitionedState(new MapStateDescriptor<>("mp", Types.STRING, Types.LONG));
        Control.restoredFlags.merge(uid, context.isRestored(), Boolean::logicalOr);
    }

    @Override
    public void open() throws Exception {
        super.open();
        timers = getInternalTimerService("user-timers", VoidNamespaceSerializer.INSTANCE, this);
        Control.backendClasses.add(getKeyedStateBackend().getClass().getSimpleName());
        if (Control.restoreMode) {
            record(null, Control.skipKeyedDump ? new java.util.LinkedHashMap<>() : dump(true));
        }
    }

    @Override
    public void processElement(StreamRecord<Tuple3<String, Long, Long>> element) throws Exception {
        long v = element.getValue().f2;
        if (v < 0) {
            cnt.clear();
            lst.clear();
            mp.clear();
        } else {
            Long c = cnt.value();
            cnt.update((c == null ? 0L : c) + v);
            lst.add(v);
            if (v % 2 == 0) {
                mp.put("u" + (v % 3), v);
            }
            if (v % 3 == 0) {
                timers.registerProcessingTimeTimer(VoidNamespace.INSTANCE, Model.TIMER_BASE + v);
            }
            if (v % 5 == 0) {
                timers.registerEventTimeTimer(VoidNamespace.INSTANCE, Model.TIMER_BASE + v * 1000);
            }
        }
        output.collect(element);
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        if (!Control.restoreMode) {
            record(context.getCheckpointId(), dump(false));
        }
    }

    @Override
    public void onEventTime(InternalTimer<K, VoidNamespace> timer) {}

    @Override
    public void onProcessingTime(InternalTimer<K, VoidNamespace> timer) {}

    private void record(Long checkpointId, Map<String, Object> dump) {
        Control.record(
                checkpointId,
                uid,
                getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(),
                getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks(),
                getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks(),
                dump);
    }

    private static String keyString(Object key) {
        return String.valueOf(key);
    }

    /** The complete keyed state of this subtask, read back through each key. */
    @SuppressWarnings("unchecked")
    private Map<String, Object> dump(boolean withChecks) throws Exception {
        KeyedStateBackend<K> backend = getKeyedStateBackend();
        KeyGroupRange range = ((CheckpointableKeyedStateBackend<K>) backend).getKeyGroupRange();
        int maxParallelism = getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks();
        Object previousKey = backend.getCurrentKey();

        Set<List<String>> unreachable = new LinkedHashSet<>();
        Set<List<String>> misplaced = new LinkedHashSet<>();
        Map<String, Object> keyed = new TreeMap<>();
        for (String name : Arrays.asList("cnt", "lst", "mp")) {
            List<K> keys;
            try (Stream<K> stream = backend.getKeys(name, VoidNamespace.INSTANCE)) {
                keys = new ArrayList<>(new LinkedHashSet<>(stream.collect(java.util.stream.Collectors.toList())));
            }
            Map<String, Object> values = new TreeMap<>();
            for (K key : keys) {
                String ks = keyString(key);
                int keyGroup = KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism);
                if (!range.contains(keyGroup)) {
                    misplaced.add(Arrays.asList(name, ks));
                }
                Object value;
                try {
                    setCurrentKey(key);
                    value = read(name);
                } catch (RuntimeException e) {
                    value = null;
                }
                if (value == null) {
                    unreachable.add(Arrays.asList(name, ks));
                } else {
                    values.put(ks, value);
                }
            }
            keyed.put(name, values);
        }

        Map<String, Object> timerDump = new TreeMap<>();
        InternalTimerServiceImpl<K, VoidNamespace> impl =
                (InternalTimerServiceImpl<K, VoidNamespace>) timers;
        for (String kind : Arrays.asList("processing", "event")) {
            Map<String, List<Long>> byKey = new TreeMap<>();
            String stateName = kind.equals("processing") ? Model.TIMERS_PROCESSING : Model.TIMERS_EVENT;
            org.apache.flink.util.function.BiConsumerWithException<VoidNamespace, Long, Exception> visit =
                    (ns, ts) -> {
                        Object key = backend.getCurrentKey();
                        String ks = keyString(key);
                        int keyGroup = KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism);
                        if (!range.contains(keyGroup)) {
                            misplaced.add(Arrays.asList(stateName, ks));
                        }
                        byKey.computeIfAbsent(ks, k -> new ArrayList<>()).add(ts);
                    };
            if (kind.equals("processing")) {
                impl.forEachProcessingTimeTimer(visit);
            } else {
                impl.forEachEventTimeTimer(visit);
            }
            for (List<Long> l : byKey.values()) {
                l.sort(Comparator.naturalOrder());
            }
            timerDump.put(kind, byKey);
        }
        if (previousKey != null) {
            setCurrentKey(previousKey);
        }

        Map<String, Object> out = new LinkedHashMap<>();
        out.put("key_group_range", Arrays.asList(range.getStartKeyGroup(), range.getEndKeyGroup()));
        out.put("keyed", keyed);
        out.put("timers", timerDump);
        if (withChecks) {
            out.put("unreachable", sorted(unreachable));
            out.put("misplaced", sorted(misplaced));
        } else if (!unreachable.isEmpty() || !misplaced.isEmpty()) {
            throw new IllegalStateException(
                    uid + ": unreachable " + unreachable + " misplaced " + misplaced + " at snapshot");
        }
        return out;
    }

    private static List<List<String>> sorted(Set<List<String>> pairs) {
        List<List<String>> l = new ArrayList<>(pairs);
        l.sort(Comparator.<List<String>, String>comparing(p -> p.get(0)).thenComparing(p -> p.get(1)));
        return l;
    }

    /** The value of state `name` for the current key, or null if there is none. */
    private Object read(String name) throws Exception {
        switch (name) {
            case "cnt":
                return cnt.value();
            case "lst": {
                Iterable<Long> it = lst.get();
                if (it == null) {
                    return null;
                }
                List<Long> l = new ArrayList<>();
                it.forEach(l::add);
                return l.isEmpty() ? null : l;
            }
            case "mp": {
                Iterable<Map.Entry<String, Long>> it = mp.entries();
                if (it == null) {
                    return null;
                }
                Map<String, Long> m = new TreeMap<>();
                for (Map.Entry<String, Long> e : it) {
                    m.put(e.getKey(), e.getValue());
                }
                return m.isEmpty() ? null : m;
            }
            default:
                throw new IllegalArgumentException(name);
        }
    }
}
