package statectl.values;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.api.common.typeutils.base.MapSerializer;
import org.apache.flink.core.fs.FSDataInputStream;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.CompositeKeySerializationUtils;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.ListDelimitedSerializer;
import org.apache.flink.runtime.state.OperatorBackendSerializationProxy;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.SnappyStreamCompressionDecorator;
import org.apache.flink.runtime.state.StateSerializerProvider;
import org.apache.flink.runtime.state.StreamCompressionDecorator;
import org.apache.flink.runtime.state.UncompressedStreamCompressionDecorator;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;
import org.apache.flink.runtime.state.restore.FullSnapshotRestoreOperation;
import org.apache.flink.runtime.state.restore.KeyGroup;
import org.apache.flink.runtime.state.restore.KeyGroupEntry;
import org.apache.flink.runtime.state.restore.SavepointRestoreResult;
import org.apache.flink.runtime.state.restore.ThrowingIterator;
import org.apache.flink.runtime.state.ttl.TtlValue;
import org.apache.flink.streaming.api.operators.TimerHeapInternalTimer;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * Reads a CANONICAL savepoint with Flink's own classes only and prints every state entry as one
 * JSON line (the JSON rules of docs/values.md): the values oracle.
 *
 * <ul>
 *   <li>{@code _metadata}: {@link Checkpoints#loadCheckpointMetadata};
 *   <li>keyed state ({@link KeyGroupsStateHandle}): the header with
 *       {@link KeyedBackendSerializationProxy}, each state's serializers restored from their
 *       snapshots, the key-group blocks with {@link FullSnapshotRestoreOperation} (Snappy when the
 *       header says so), every entry decoded as {@code HeapSavepointRestoreOperation} does
 *       (composite key = key-group prefix, key, namespace, MAP user key; LIST values with
 *       {@link ListDelimitedSerializer}; MAP values behind a null flag; timers with their
 *       TimerSerializer after the prefix);
 *   <li>operator state ({@link OperatorStateHandle}): {@link OperatorBackendSerializationProxy},
 *       one element per offset (list and union), the map at the offset (broadcast), as
 *       {@code OperatorStateRestoreOperation} does.
 * </ul>
 *
 * <p>{@code StateDumper out.jsonl savepoint-dir [out2.jsonl dir2 ...]}. A value Flink cannot
 * read is a line with "error".
 */
public final class StateDumper {
    private StateDumper() {}

    public static void main(String[] args) throws Exception {
        java.util.TimeZone.setDefault(java.util.TimeZone.getTimeZone("UTC"));
        if (args.length == 0 || args.length % 2 != 0) {
            System.err.println("usage: StateDumper out.jsonl savepoint-dir [out.jsonl savepoint-dir ...]");
            System.exit(2);
        }
        int errors = 0;
        for (int k = 0; k < args.length; k += 2) {
            long t0 = System.nanoTime();
            List<Line> lines = dump(Paths.get(args[k + 1]));
            write(lines, Paths.get(args[k]));
            long bad = lines.stream().filter(l -> l.fields.containsKey("error")).count();
            errors += bad;
            System.err.printf("dumped %s: %d lines, %d errors, %.1fs%n", args[k + 1], lines.size(), bad,
                    (System.nanoTime() - t0) / 1e9);
        }
        System.exit(0);
    }

    /** One output line: its fields (name -> JSON text) and its sort key. */
    public static final class Line {
        final Map<String, String> fields = new LinkedHashMap<>();
        final List<Comparable<?>> sort = new ArrayList<>();

        Line put(String name, String json) {
            fields.put(name, json);
            return this;
        }

        String text() {
            StringBuilder sb = new StringBuilder();
            Json.object(sb, fields);
            return sb.toString();
        }
    }

    public static void write(List<Line> lines, Path out) throws IOException {
        Files.createDirectories(out.toAbsolutePath().getParent());
        Path tmp = out.resolveSibling(out.getFileName() + ".tmp");
        try (Writer w = Files.newBufferedWriter(tmp, StandardCharsets.UTF_8)) {
            for (Line line : lines) {
                w.write(line.text());
                w.write('\n');
            }
        }
        Files.move(tmp, out, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    }

    static String str(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder sb = new StringBuilder();
        Json.string(sb, s);
        return sb.toString();
    }

    public static CheckpointMetadata loadMetadata(Path dir) throws IOException {
        try (InputStream in = Files.newInputStream(dir.resolve("_metadata"))) {
            return Checkpoints.loadCheckpointMetadata(new DataInputStream(in), StateDumper.class.getClassLoader(),
                    dir.toAbsolutePath().toUri().toString());
        }
    }

    /** Every entry of the savepoint in `dir`, sorted. */
    public static List<Line> dump(Path dir) throws Exception {
        ClassLoader cl = StateDumper.class.getClassLoader();
        CheckpointMetadata metadata = loadMetadata(dir.toAbsolutePath());
        List<Line> lines = new ArrayList<>();
        for (OperatorState op : metadata.getOperatorStates()) {
            String operatorId = op.getOperatorID().toHexString();
            String uid = uid(op);
            for (Map.Entry<Integer, OperatorSubtaskState> e : new TreeMap<>(op.getSubtaskStates()).entrySet()) {
                int subtask = e.getKey();
                OperatorSubtaskState state = e.getValue();
                for (KeyedStateHandle handle : state.getManagedKeyedState()) {
                    Keyed keyed = new Keyed(operatorId, uid, op.getMaxParallelism(), subtask, lines);
                    try {
                        keyed.dump(handle, cl);
                    } catch (Exception ex) {
                        lines.add(keyed.error(null, null, ex));
                    }
                }
                for (OperatorStateHandle handle : state.getManagedOperatorState()) {
                    try {
                        operatorState(operatorId, uid, subtask, handle, cl, lines);
                    } catch (Exception ex) {
                        Line l = base(operatorId, uid, null, null);
                        l.put("subtask", String.valueOf(subtask)).put("error", str(message(ex)));
                        l.sort.addAll(List.of(operatorId, "", subtask, -1, "", "", "", 0L, 0));
                        lines.add(l);
                    }
                }
                if (!state.getRawKeyedState().isEmpty() || !state.getRawOperatorState().isEmpty()) {
                    Line l = base(operatorId, uid, null, null);
                    l.put("subtask", String.valueOf(subtask)).put("error", str("raw keyed/operator state is not dumped"));
                    l.sort.addAll(List.of(operatorId, "", subtask, -1, "", "", "", 0L, 0));
                    lines.add(l);
                }
            }
        }
        lines.sort(StateDumper::compare);
        return lines;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static int compare(Line a, Line b) {
        for (int k = 0; k < Math.min(a.sort.size(), b.sort.size()); k++) {
            int c = ((Comparable) a.sort.get(k)).compareTo(b.sort.get(k));
            if (c != 0) {
                return c;
            }
        }
        return Integer.compare(a.sort.size(), b.sort.size());
    }

    /** 2.x `_metadata` (V5+) keeps the uid; 1.x does not (null). */
    static String uid(OperatorState op) {
        try {
            Object uid = OperatorState.class.getMethod("getOperatorUid").invoke(op);
            return uid instanceof Optional ? ((Optional<String>) uid).orElse(null) : null;
        } catch (NoSuchMethodException e) {
            return null;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    static Line base(String operatorId, String uid, String state, String kind) {
        Line l = new Line();
        l.put("operator_id", str(operatorId)).put("uid", str(uid)).put("state", str(state)).put("kind", str(kind));
        return l;
    }

    static String message(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (int depth = 0; t != null && depth < 8; depth++, t = t.getCause()) {
            if (sb.length() > 0) {
                sb.append(" | caused by ");
            }
            sb.append(t.getClass().getName()).append(": ").append(t.getMessage());
        }
        return sb.toString();
    }

    // ------------------------------------------------------------------ keyed state

    /** The serializers of one keyed state, restored from its snapshots. */
    static final class KeyedStateInfo {
        String name;
        String kind; // VALUE|LIST|MAP|REDUCING|AGGREGATING|TIMERS
        TypeSerializer<Object> stateSerializer;
        TypeSerializer<Object> namespaceSerializer;
        Exception failure;
    }

    static final class Keyed {
        final String operatorId;
        final String uid;
        final int keyGroupPrefixBytes;
        final int subtask;
        final List<Line> lines;
        TypeSerializer<Object> keySerializer;

        Keyed(String operatorId, String uid, int maxParallelism, int subtask, List<Line> lines) {
            this.operatorId = operatorId;
            this.uid = uid;
            this.keyGroupPrefixBytes = CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix(maxParallelism);
            this.subtask = subtask;
            this.lines = lines;
        }

        Line error(KeyedStateInfo info, Integer keyGroup, Exception e) {
            Line l = base(operatorId, uid, info == null ? null : info.name, info == null ? null : info.kind);
            if (keyGroup != null) {
                l.put("key_group", String.valueOf(keyGroup));
            }
            l.put("subtask", String.valueOf(subtask)).put("error", str(message(e)));
            l.sort.addAll(List.of(operatorId, info == null ? "" : info.name, -1, keyGroup == null ? -1 : keyGroup,
                    "", "", "", 0L, 0));
            return l;
        }

        @SuppressWarnings("unchecked")
        void dump(KeyedStateHandle handle, ClassLoader cl) throws Exception {
            if (!(handle instanceof KeyGroupsStateHandle)) {
                throw new IllegalStateException("not a canonical keyed state handle: " + handle.getClass().getName()
                        + " (a NATIVE snapshot: dump its CANONICAL twin)");
            }
            KeyGroupsStateHandle groups = (KeyGroupsStateHandle) handle;
            KeyedBackendSerializationProxy<Object> header = new KeyedBackendSerializationProxy<>(cl);
            try (FSDataInputStream in = groups.openInputStream()) {
                header.read(new DataInputViewStreamWrapper(in));
            }
            keySerializer = (TypeSerializer<Object>) header.getKeySerializerSnapshot().restoreSerializer();
            FullSnapshotRestoreOperation<Object> restore = new FullSnapshotRestoreOperation<>(
                    groups.getKeyGroupRange(), cl, Collections.singletonList(handle),
                    StateSerializerProvider.fromNewRegisteredSerializer(keySerializer));
            try (ThrowingIterator<SavepointRestoreResult> results = restore.restore()) {
                while (results.hasNext()) {
                    SavepointRestoreResult result = results.next();
                    List<KeyedStateInfo> infos = new ArrayList<>();
                    for (StateMetaInfoSnapshot meta : result.getStateMetaInfoSnapshots()) {
                        infos.add(info(meta));
                    }
                    try (ThrowingIterator<KeyGroup> keyGroups = result.getRestoredKeyGroups()) {
                        while (keyGroups.hasNext()) {
                            KeyGroup keyGroup = keyGroups.next();
                            try (ThrowingIterator<KeyGroupEntry> entries = keyGroup.getKeyGroupEntries()) {
                                while (entries.hasNext()) {
                                    KeyGroupEntry entry = entries.next();
                                    KeyedStateInfo info = infos.get(entry.getKvStateId());
                                    try {
                                        if (info.failure != null) {
                                            throw info.failure;
                                        }
                                        lines.add(entry(info, keyGroup.getKeyGroupId(), entry));
                                    } catch (Exception e) {
                                        lines.add(error(info, keyGroup.getKeyGroupId(), e));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }

        @SuppressWarnings("unchecked")
        KeyedStateInfo info(StateMetaInfoSnapshot meta) {
            KeyedStateInfo info = new KeyedStateInfo();
            info.name = meta.getName();
            try {
                switch (meta.getBackendStateType().name()) {
                    case "PRIORITY_QUEUE":
                        info.kind = "TIMERS";
                        break;
                    case "KEY_VALUE":
                    case "KEY_VALUE_V2":
                        info.kind = meta.getOption(StateMetaInfoSnapshot.CommonOptionsKeys.KEYED_STATE_TYPE);
                        TypeSerializerSnapshot<?> ns = meta.getTypeSerializerSnapshot(
                                StateMetaInfoSnapshot.CommonSerializerKeys.NAMESPACE_SERIALIZER);
                        info.namespaceSerializer = (TypeSerializer<Object>) ns.restoreSerializer();
                        break;
                    default:
                        throw new IllegalStateException("unexpected keyed state type " + meta.getBackendStateType());
                }
                info.stateSerializer = (TypeSerializer<Object>) meta.getTypeSerializerSnapshot(
                        StateMetaInfoSnapshot.CommonSerializerKeys.VALUE_SERIALIZER).restoreSerializer();
            } catch (Exception e) {
                info.failure = e;
            }
            return info;
        }

        Line entry(KeyedStateInfo info, int keyGroupOfBlock, KeyGroupEntry entry) throws Exception {
            DataInputDeserializer keyIn = new DataInputDeserializer(entry.getKey());
            int keyGroup = CompositeKeySerializationUtils.readKeyGroup(keyGroupPrefixBytes, keyIn);
            if (keyGroup != keyGroupOfBlock) {
                throw new IllegalStateException("entry of key group " + keyGroup + " in the block of key group " + keyGroupOfBlock);
            }
            Line l = base(operatorId, uid, info.name, info.kind);
            l.put("key_group", String.valueOf(keyGroup));
            if (info.kind.equals("TIMERS")) {
                TimerHeapInternalTimer<?, ?> timer = (TimerHeapInternalTimer<?, ?>) info.stateSerializer.deserialize(keyIn);
                String key = Json.of(timer.getKey(), keySerializer);
                String namespace = Json.of(timer.getNamespace(), null);
                l.put("key", key).put("namespace", namespace).put("timestamp", String.valueOf(timer.getTimestamp()));
                l.sort.addAll(List.of(operatorId, info.name, -1, keyGroup, key, namespace, "", timer.getTimestamp(), 0));
                return l;
            }
            boolean ambiguous = keySerializer.getLength() < 0 && info.namespaceSerializer.getLength() < 0;
            Object key = CompositeKeySerializationUtils.readKey(keySerializer, keyIn, ambiguous);
            Object namespace = CompositeKeySerializationUtils.readNamespace(info.namespaceSerializer, keyIn, ambiguous);
            String keyJson = Json.of(key, keySerializer);
            String namespaceJson = Json.of(namespace, info.namespaceSerializer);
            l.put("key", keyJson).put("namespace", namespaceJson);
            String userKeyJson = "";
            Object value;
            TypeSerializer<?> valueSerializer;
            switch (info.kind) {
                case "LIST": {
                    TypeSerializer<Object> element = ((ListSerializer<Object>) (TypeSerializer<?>) info.stateSerializer).getElementSerializer();
                    value = new ListDelimitedSerializer().deserializeList(entry.getValue(), element);
                    valueSerializer = element;
                    break;
                }
                case "MAP": {
                    MapSerializer<Object, Object> map = (MapSerializer<Object, Object>) (TypeSerializer<?>) info.stateSerializer;
                    Object userKey = map.getKeySerializer().deserialize(keyIn);
                    userKeyJson = Json.of(userKey, map.getKeySerializer());
                    l.put("user_key", userKeyJson);
                    DataInputDeserializer valueIn = new DataInputDeserializer(entry.getValue());
                    value = valueIn.readBoolean() ? null : map.getValueSerializer().deserialize(valueIn);
                    valueSerializer = map.getValueSerializer();
                    break;
                }
                default:
                    value = info.stateSerializer.deserialize(new DataInputDeserializer(entry.getValue()));
                    valueSerializer = info.stateSerializer;
            }
            if (keyIn.available() != 0) {
                throw new IllegalStateException(keyIn.available() + " bytes left in the key");
            }
            // TTL: the user value, and its last-access timestamp(s)
            String ttl = null;
            if (Hints.isTtl(valueSerializer)) {
                if (value instanceof List) {
                    List<Object> users = new ArrayList<>();
                    List<String> stamps = new ArrayList<>();
                    for (Object element : (List<?>) value) {
                        TtlValue<?> t = (TtlValue<?>) element;
                        users.add(t.getUserValue());
                        stamps.add(String.valueOf(t.getLastAccessTimestamp()));
                    }
                    value = users;
                    ttl = "[" + String.join(",", stamps) + "]";
                } else if (value != null) {
                    TtlValue<?> t = (TtlValue<?>) value;
                    value = t.getUserValue();
                    ttl = String.valueOf(t.getLastAccessTimestamp());
                }
                valueSerializer = Hints.ttlUser(valueSerializer);
            }
            String valueJson;
            Object classOf = value;
            if (info.kind.equals("LIST")) {
                StringBuilder sb = new StringBuilder("[");
                List<?> list = (List<?>) value;
                for (int k = 0; k < list.size(); k++) {
                    if (k > 0) {
                        sb.append(',');
                    }
                    sb.append(Json.of(list.get(k), valueSerializer));
                }
                valueJson = sb.append(']').toString();
                classOf = list.isEmpty() ? null : list.get(0);
            } else {
                valueJson = Json.of(value, valueSerializer);
            }
            l.put("value", valueJson);
            if (ttl != null) {
                l.put("ttl_timestamp", ttl);
            }
            l.put("value_class", str(classOf == null ? null : classOf.getClass().getName()));
            l.sort.addAll(List.of(operatorId, info.name, -1, keyGroup, keyJson, namespaceJson, userKeyJson, 0L, 0));
            return l;
        }
    }

    // ------------------------------------------------------------------ operator state

    @SuppressWarnings("unchecked")
    static void operatorState(String operatorId, String uid, int subtask, OperatorStateHandle handle, ClassLoader cl,
            List<Line> lines) throws Exception {
        OperatorBackendSerializationProxy header = new OperatorBackendSerializationProxy(cl);
        try (FSDataInputStream in = handle.openInputStream()) {
            header.read(new DataInputViewStreamWrapper(in));
            StreamCompressionDecorator compression = compressed(header)
                    ? SnappyStreamCompressionDecorator.INSTANCE : UncompressedStreamCompressionDecorator.INSTANCE;
            Map<String, OperatorStateHandle.StateMetaInfo> offsets = handle.getStateNameToPartitionOffsets();
            for (StateMetaInfoSnapshot meta : header.getOperatorStateMetaInfoSnapshots()) {
                OperatorStateHandle.StateMetaInfo info = offsets.get(meta.getName());
                if (info == null) {
                    continue;
                }
                String kind = info.getDistributionMode().name().equals("UNION") ? "UNION" : "LIST";
                TypeSerializer<Object> serializer = (TypeSerializer<Object>) meta.getTypeSerializerSnapshot(
                        StateMetaInfoSnapshot.CommonSerializerKeys.VALUE_SERIALIZER).restoreSerializer();
                long[] positions = info.getOffsets();
                for (int k = 0; k < positions.length; k++) {
                    Line l = base(operatorId, uid, meta.getName(), kind);
                    l.put("subtask", String.valueOf(subtask));
                    l.sort.addAll(List.of(operatorId, meta.getName(), subtask, -1, "", "", "", 0L, k));
                    try {
                        in.seek(positions[k]);
                        Object value = serializer.deserialize(new DataInputViewStreamWrapper(compression.decorateWithCompression(in)));
                        l.put("value", Json.of(value, serializer));
                        l.put("value_class", str(value == null ? null : value.getClass().getName()));
                    } catch (Exception e) {
                        l.put("error", str(message(e)));
                    }
                    lines.add(l);
                }
            }
            for (StateMetaInfoSnapshot meta : header.getBroadcastStateMetaInfoSnapshots()) {
                OperatorStateHandle.StateMetaInfo info = offsets.get(meta.getName());
                if (info == null) {
                    continue;
                }
                TypeSerializer<Object> keySerializer = (TypeSerializer<Object>) meta.getTypeSerializerSnapshot(
                        StateMetaInfoSnapshot.CommonSerializerKeys.KEY_SERIALIZER).restoreSerializer();
                TypeSerializer<Object> valueSerializer = (TypeSerializer<Object>) meta.getTypeSerializerSnapshot(
                        StateMetaInfoSnapshot.CommonSerializerKeys.VALUE_SERIALIZER).restoreSerializer();
                for (long position : info.getOffsets()) {
                    in.seek(position);
                    DataInputViewStreamWrapper view = new DataInputViewStreamWrapper(compression.decorateWithCompression(in));
                    int size = view.readInt();
                    for (int k = 0; k < size; k++) {
                        Object key = keySerializer.deserialize(view);
                        Object value = valueSerializer.deserialize(view);
                        String keyJson = Json.of(key, keySerializer);
                        Line l = base(operatorId, uid, meta.getName(), "BROADCAST");
                        l.put("subtask", String.valueOf(subtask)).put("key", keyJson).put("value", Json.of(value, valueSerializer));
                        l.put("value_class", str(value == null ? null : value.getClass().getName()));
                        l.sort.addAll(List.of(operatorId, meta.getName(), subtask, -1, keyJson, "", "", 0L, 0));
                        lines.add(l);
                    }
                }
            }
        }
    }

    /** The header's compression flag (version 6, Flink 1.18+; package-private there). */
    static boolean compressed(OperatorBackendSerializationProxy header) {
        try {
            java.lang.reflect.Method m = OperatorBackendSerializationProxy.class.getDeclaredMethod("isUsingStateCompression");
            m.setAccessible(true);
            return (Boolean) m.invoke(header);
        } catch (NoSuchMethodException e) {
            return false;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }
}
