package statectl.values;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.core.fs.FSDataInputStream;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.CompositeKeySerializationUtils;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.StateSerializerProvider;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;
import org.apache.flink.runtime.state.restore.FullSnapshotRestoreOperation;
import org.apache.flink.runtime.state.restore.KeyGroup;
import org.apache.flink.runtime.state.restore.KeyGroupEntry;
import org.apache.flink.runtime.state.restore.SavepointRestoreResult;
import org.apache.flink.runtime.state.restore.ThrowingIterator;

import java.io.BufferedWriter;
import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;


/**
 * The JVM peer of the export benchmark: a lean variant of {@link StateDumper} that reads every
 * keyed VALUE entry of a CANONICAL savepoint with Flink's own classes (the header with
 * KeyedBackendSerializationProxy, serializers restored from their snapshots, the blocks with
 * FullSnapshotRestoreOperation) and deserializes each key, namespace and value, checking that the
 * value's bytes are used up, but prints nothing per entry.
 *
 * <p>{@code BenchReader savepoint-dir [unbuffered] [json=OUT]}: one JSON line {entries, errors,
 * seconds, cpu_seconds}. By default the files are read through a 1 MiB buffer ({@link Buffered});
 * {@code unbuffered}: through Flink's local file stream as the restore opens it. {@code json=OUT}:
 * each entry is also written to OUT as a line {"key": …, "value": …} by the dumper's JSON rules
 * ({@link Json}, the same as statectl's JSON columns), through a 1 MiB buffer: the JVM doing the
 * JSON export's work.
 */
public final class BenchReader {
    private BenchReader() {}

    public static void main(String[] args) throws Exception {
        long t0 = System.nanoTime();
        long cpu0 = cpuNanos();
        ClassLoader cl = BenchReader.class.getClassLoader();
        CheckpointMetadata metadata = StateDumper.loadMetadata(Paths.get(args[0]).toAbsolutePath());
        boolean unbuffered = false;
        Writer json = null;
        for (int i = 1; i < args.length; i++) {
            if (args[i].equals("unbuffered")) {
                unbuffered = true;
            } else if (args[i].startsWith("json=")) {
                json = new BufferedWriter(new OutputStreamWriter(
                        new FileOutputStream(args[i].substring(5)), StandardCharsets.UTF_8), 1 << 20);
            }
        }
        long[] counts = new long[3]; // entries, errors, checksum
        for (OperatorState op : metadata.getOperatorStates()) {
            int prefix = CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix(op.getMaxParallelism());
            for (OperatorSubtaskState state : op.getSubtaskStates().values()) {
                for (KeyedStateHandle handle : state.getManagedKeyedState()) {
                    KeyGroupsStateHandle groups = (KeyGroupsStateHandle) handle;
                    if (!unbuffered) {
                        groups = new KeyGroupsStateHandle(groups.getGroupRangeOffsets(),
                                new Buffered(groups.getDelegateStateHandle()));
                    }
                    read(groups, prefix, cl, counts, json);
                }
            }
        }
        if (json != null) {
            json.close();
        }
        System.out.printf("{\"entries\": %d, \"errors\": %d, \"checksum\": %d, \"seconds\": %.3f, \"cpu_seconds\": %.3f}%n",
                counts[0], counts[1], counts[2], (System.nanoTime() - t0) / 1e9, (cpuNanos() - cpu0) / 1e9);
        System.exit(counts[1] == 0 ? 0 : 1);
    }

    /**
     * The file's stream behind a 1 MiB buffer: Flink's local file stream is unbuffered and the
     * restore reads it an int at a time, so without one the JVM measures system calls, not
     * decoding (a distributed file system's client buffers).
     */
    static final class Buffered implements org.apache.flink.runtime.state.StreamStateHandle {
        final org.apache.flink.runtime.state.StreamStateHandle inner;

        Buffered(org.apache.flink.runtime.state.StreamStateHandle inner) {
            this.inner = inner;
        }

        @Override
        public FSDataInputStream openInputStream() throws java.io.IOException {
            FSDataInputStream in = inner.openInputStream();
            return new FSDataInputStream() {
                final byte[] buf = new byte[1 << 20];
                long bufStart;
                int len;
                int at;

                @Override
                public void seek(long pos) throws java.io.IOException {
                    if (pos >= bufStart && pos <= bufStart + len) {
                        at = (int) (pos - bufStart);
                    } else {
                        in.seek(pos);
                        bufStart = pos;
                        len = 0;
                        at = 0;
                    }
                }

                @Override
                public long getPos() {
                    return bufStart + at;
                }

                boolean fill() throws java.io.IOException {
                    bufStart += len;
                    at = 0;
                    len = Math.max(in.read(buf, 0, buf.length), 0);
                    return len > 0;
                }

                @Override
                public int read() throws java.io.IOException {
                    if (at == len && !fill()) {
                        return -1;
                    }
                    return buf[at++] & 0xFF;
                }

                @Override
                public int read(byte[] b, int off, int n) throws java.io.IOException {
                    if (at == len && !fill()) {
                        return -1;
                    }
                    int k = Math.min(n, len - at);
                    System.arraycopy(buf, at, b, off, k);
                    at += k;
                    return k;
                }

                @Override
                public void close() throws java.io.IOException {
                    in.close();
                }
            };
        }

        @Override
        public java.util.Optional<byte[]> asBytesIfInMemory() {
            return java.util.Optional.empty();
        }

        @Override
        public org.apache.flink.runtime.state.PhysicalStateHandleID getStreamStateHandleID() {
            return inner.getStreamStateHandleID();
        }

        @Override
        public void discardState() {}

        @Override
        public long getStateSize() {
            return inner.getStateSize();
        }
    }

    /**
     * A SQL row's field getters: RowDataSerializer hands out the BinaryRowData it read without
     * decoding a field, so the reader reads each one (strings to Java strings) as a POJO's
     * deserialization does.
     */
    static TypeSerializer<Object> getters(TypeSerializer<Object> value) throws Exception {
        if (!((Object) value instanceof org.apache.flink.table.runtime.typeutils.RowDataSerializer)) {
            return null;
        }
        java.lang.reflect.Field types = value.getClass().getDeclaredField("types");
        types.setAccessible(true);
        org.apache.flink.table.types.logical.LogicalType[] logical =
                (org.apache.flink.table.types.logical.LogicalType[]) types.get(value);
        org.apache.flink.table.data.RowData.FieldGetter[] getters =
                new org.apache.flink.table.data.RowData.FieldGetter[logical.length];
        for (int i = 0; i < logical.length; i++) {
            getters[i] = org.apache.flink.table.data.RowData.createFieldGetter(logical[i], i);
        }
        return new Getters(getters);
    }

    /** Carries a row's field getters in the serializer slot of its state. */
    @SuppressWarnings("serial")
    static final class Getters extends org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton<Object> {
        final org.apache.flink.table.data.RowData.FieldGetter[] getters;

        Getters(org.apache.flink.table.data.RowData.FieldGetter[] getters) {
            this.getters = getters;
        }

        @Override public boolean isImmutableType() { return true; }
        @Override public Object createInstance() { return null; }
        @Override public Object copy(Object from) { return from; }
        @Override public Object copy(Object from, Object reuse) { return from; }
        @Override public int getLength() { return -1; }
        @Override public void serialize(Object record, org.apache.flink.core.memory.DataOutputView target) {}
        @Override public Object deserialize(org.apache.flink.core.memory.DataInputView source) { return null; }
        @Override public Object deserialize(Object reuse, org.apache.flink.core.memory.DataInputView source) { return null; }
        @Override public void copy(org.apache.flink.core.memory.DataInputView source, org.apache.flink.core.memory.DataOutputView target) {}
        @Override public org.apache.flink.api.common.typeutils.TypeSerializerSnapshot<Object> snapshotConfiguration() { return null; }
    }

    /** Reads every field of a SQL row (a POJO is read whole by its serializer already). */
    static long fields(Object value, TypeSerializer<Object> getters) {
        if (value == null) {
            return 0;
        }
        if (getters == null) {
            return 1;
        }
        long sum = 0;
        for (org.apache.flink.table.data.RowData.FieldGetter getter : ((Getters) getters).getters) {
            Object field = getter.getFieldOrNull((org.apache.flink.table.data.RowData) value);
            if (field instanceof org.apache.flink.table.data.StringData) {
                field = field.toString();
            } else if (field instanceof org.apache.flink.table.data.DecimalData) {
                field = ((org.apache.flink.table.data.DecimalData) field).toBigDecimal();
            }
            sum += field == null ? 0 : field.hashCode() & 1;
        }
        return sum;
    }

    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    @SuppressWarnings("unchecked")
    static void read(KeyGroupsStateHandle handle, int prefix, ClassLoader cl, long[] counts, Writer json)
            throws Exception {
        KeyedBackendSerializationProxy<Object> header = new KeyedBackendSerializationProxy<>(cl);
        try (FSDataInputStream in = handle.openInputStream()) {
            header.read(new DataInputViewStreamWrapper(in));
        }
        TypeSerializer<Object> keys = (TypeSerializer<Object>) header.getKeySerializerSnapshot().restoreSerializer();
        FullSnapshotRestoreOperation<Object> restore = new FullSnapshotRestoreOperation<>(handle.getKeyGroupRange(),
                cl, Collections.singletonList(handle), StateSerializerProvider.fromNewRegisteredSerializer(keys));
        try (ThrowingIterator<SavepointRestoreResult> results = restore.restore()) {
            while (results.hasNext()) {
                SavepointRestoreResult result = results.next();
                List<TypeSerializer<Object>[]> serializers = new ArrayList<>();
                for (StateMetaInfoSnapshot meta : result.getStateMetaInfoSnapshots()) {
                    if (meta.getBackendStateType() == StateMetaInfoSnapshot.BackendStateType.PRIORITY_QUEUE) {
                        serializers.add(null); // timers: not read here (none in the benchmark)
                        continue;
                    }
                    TypeSerializer<Object> namespace = (TypeSerializer<Object>) meta.getTypeSerializerSnapshot(
                            StateMetaInfoSnapshot.CommonSerializerKeys.NAMESPACE_SERIALIZER).restoreSerializer();
                    TypeSerializer<Object> value = (TypeSerializer<Object>) meta.getTypeSerializerSnapshot(
                            StateMetaInfoSnapshot.CommonSerializerKeys.VALUE_SERIALIZER).restoreSerializer();
                    serializers.add(new TypeSerializer[] {namespace, value, getters(value)});
                }
                DataInputDeserializer keyIn = new DataInputDeserializer();
                DataInputDeserializer valueIn = new DataInputDeserializer();
                try (ThrowingIterator<KeyGroup> groups = result.getRestoredKeyGroups()) {
                    while (groups.hasNext()) {
                        KeyGroup group = groups.next();
                        try (ThrowingIterator<KeyGroupEntry> entries = group.getKeyGroupEntries()) {
                            while (entries.hasNext()) {
                                KeyGroupEntry entry = entries.next();
                                TypeSerializer<Object>[] s = serializers.get(entry.getKvStateId());
                                try {
                                    keyIn.setBuffer(entry.getKey());
                                    if (CompositeKeySerializationUtils.readKeyGroup(prefix, keyIn) != group.getKeyGroupId()) {
                                        throw new IllegalStateException("entry outside its key group's block");
                                    }
                                    Object key = keys.deserialize(keyIn);
                                    Object namespace = s[0].deserialize(keyIn);
                                    valueIn.setBuffer(entry.getValue());
                                    Object value = s[1].deserialize(valueIn);
                                    if (keyIn.available() != 0 || valueIn.available() != 0) {
                                        throw new IllegalStateException("bytes left after the key or value");
                                    }
                                    counts[2] += key.hashCode() + fields(value, s[2]);
                                    counts[0]++;
                                    if (json != null) {
                                        json.write("{\"key\": " + Json.of(key, keys) + ", \"value\": "
                                                + Json.of(value, s[1]) + "}\n");
                                    }
                                } catch (Exception e) {
                                    if (counts[1]++ < 5) {
                                        System.err.println("entry of key group " + group.getKeyGroupId() + ": "
                                                + StateDumper.message(e));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
