package statectl.sources;

import org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer;
import org.apache.flink.connector.file.src.FileSourceSplit;
import org.apache.flink.connector.file.src.FileSourceSplitSerializer;
import org.apache.flink.connector.file.src.PendingSplitsCheckpoint;
import org.apache.flink.connector.file.src.PendingSplitsCheckpointSerializer;
import org.apache.flink.connector.file.src.util.CheckpointedPosition;
import org.apache.flink.core.fs.FSDataInputStream;
import org.apache.flink.core.fs.Path;
import org.apache.flink.core.io.SimpleVersionedSerialization;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.CompressibleFSDataInputStream;
import org.apache.flink.runtime.state.OperatorBackendSerializationProxy;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.SnappyStreamCompressionDecorator;
import org.apache.flink.runtime.state.StreamCompressionDecorator;
import org.apache.flink.runtime.state.UncompressedStreamCompressionDecorator;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.SerializationFeature;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The oracle of tests/flink/sources: {@code SourceDumper <out.json> <savepoint dir>} reads every
 * FileSource operator of a savepoint with Flink's own classes and writes what they read, as JSON:
 * per operator id, the {@code SourceReaderState} elements of each subtask
 * ({@link BytePrimitiveArraySerializer}, then {@link SimpleVersionedSerialization} with
 * {@link FileSourceSplitSerializer}) and the coordinator state (SourceCoordinator's framing: i32
 * serde version, i32 serializer version, i32 length, then {@link PendingSplitsCheckpointSerializer}).
 */
public final class SourceDumper {
    static final String READER_STATE = "SourceReaderState";

    public static void main(String[] args) throws Exception {
        String dir = Paths.get(args[1]).toAbsolutePath().toString();
        CheckpointMetadata metadata;
        try (InputStream in = Files.newInputStream(Paths.get(dir, "_metadata"))) {
            metadata = Checkpoints.loadCheckpointMetadata(new DataInputStream(in),
                    SourceDumper.class.getClassLoader(), Paths.get(dir).toUri().toString());
        }
        Map<String, Object> operators = new TreeMap<>();
        for (OperatorState op : metadata.getOperatorStates()) {
            Map<String, Object> dump = dumpOperator(op);
            if (dump != null) {
                operators.put(op.getOperatorID().toHexString(), dump);
            }
        }
        ObjectMapper json = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
        json.writeValue(Paths.get(args[0]).toFile(), Map.of("operators", operators));
    }

    static Map<String, Object> dumpOperator(OperatorState op) throws Exception {
        Map<String, Object> subtasks = new TreeMap<>();
        for (Map.Entry<Integer, OperatorSubtaskState> e : op.getSubtaskStates().entrySet()) {
            List<Object> splits = new ArrayList<>();
            for (OperatorStateHandle handle : e.getValue().getManagedOperatorState()) {
                OperatorStateHandle.StateMetaInfo info = handle.getStateNameToPartitionOffsets().get(READER_STATE);
                if (info == null) {
                    continue;
                }
                StreamCompressionDecorator decorator;
                try (FSDataInputStream raw = handle.openInputStream()) {
                    // OperatorBackendSerializationProxy: i32 version, then (v6+) the compression flag
                    DataInputStream header = new DataInputStream(raw);
                    boolean compressed = header.readInt() >= 6 && header.readBoolean();
                    decorator = compressed
                            ? SnappyStreamCompressionDecorator.INSTANCE
                            : UncompressedStreamCompressionDecorator.INSTANCE;
                }
                // as OperatorStateRestoreOperation reads elements: each offset starts a new stream
                try (FSDataInputStream file = handle.openInputStream()) {
                    new OperatorBackendSerializationProxy(SourceDumper.class.getClassLoader())
                            .read(new DataInputViewStreamWrapper(file));
                    FSDataInputStream in = new CompressibleFSDataInputStream(file, decorator);
                    for (long offset : info.getOffsets()) {
                        in.seek(offset);
                        byte[] element = BytePrimitiveArraySerializer.INSTANCE.deserialize(new DataInputViewStreamWrapper(in));
                        splits.add(split(SimpleVersionedSerialization.readVersionAndDeSerialize(
                                FileSourceSplitSerializer.INSTANCE, element)));
                    }
                }
            }
            if (!splits.isEmpty()) {
                subtasks.put(String.valueOf(e.getKey()), splits);
            }
        }
        StreamStateHandle coordinator = op.getCoordinatorState();
        if (subtasks.isEmpty() && coordinator == null) {
            return null;
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("subtasks", subtasks);
        out.put("enumerator", coordinator == null ? null : enumerator(coordinator));
        return out;
    }

    static Map<String, Object> enumerator(StreamStateHandle handle) throws Exception {
        byte[] bytes;
        try (FSDataInputStream in = handle.openInputStream()) {
            bytes = in.readAllBytes();
        }
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes));
        int serdeVersion = in.readInt();
        int version = in.readInt();
        byte[] body = new byte[in.readInt()];
        in.readFully(body);
        if (in.available() > 0) {
            throw new IllegalStateException("trailing bytes after the enumerator checkpoint");
        }
        PendingSplitsCheckpoint<FileSourceSplit> checkpoint =
                new PendingSplitsCheckpointSerializer<>(FileSourceSplitSerializer.INSTANCE).deserialize(version, body);
        List<Object> pending = new ArrayList<>();
        for (FileSourceSplit split : checkpoint.getSplits()) {
            pending.add(split(split));
        }
        List<String> processed = new ArrayList<>();
        for (Path path : checkpoint.getAlreadyProcessedPaths()) {
            processed.add(path.toString());
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("coordinator_serde_version", serdeVersion);
        out.put("serializer_version", version);
        out.put("pending_splits", pending);
        out.put("processed_paths", processed);
        return out;
    }

    static Map<String, Object> split(FileSourceSplit split) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("split_id", split.splitId());
        out.put("path", split.path().toString());
        out.put("offset", split.offset());
        out.put("length", split.length());
        out.put("modification_time", split.fileModificationTime());
        out.put("file_size", split.fileSize());
        out.put("hostnames", List.of(split.hostnames()));
        CheckpointedPosition position = split.getReaderPosition().orElse(null);
        out.put("reader_offset", position == null ? null : position.getOffset());
        out.put("records_to_skip", position == null ? null : position.getRecordsAfterOffset());
        return out;
    }
}
