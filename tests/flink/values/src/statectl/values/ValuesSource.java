package statectl.values;

import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.core.io.SimpleVersionedSerializer;

import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A FLIP-27 source (the API common to Flink 1.15-2.x; the legacy SourceFunction moved package in
 * 2.0) emitting {@link Model#event} 0..records()-1 with their event timestamps, then idling until
 * cancelled: the job never finishes, so no final watermark fires the windows. No splits: the
 * reader's state is an empty list, so a restored reader would start over at record 0: the restore
 * mode ({@code ValuesJob restore}) builds it with {@code emit = false} (it emits nothing).
 */
public final class ValuesSource implements Source<Tuple3<String, Integer, Long>, ValuesSource.NoSplit, Integer> {
    private final boolean emit;

    /** Emits every record of {@link Model#records()}. */
    public ValuesSource() {
        this(true);
    }

    /** {@code emit = false}: emits nothing, idles until cancelled (restores of the values job). */
    public ValuesSource(boolean emit) {
        this.emit = emit;
    }

    @Override
    public Boundedness getBoundedness() {
        return Boundedness.CONTINUOUS_UNBOUNDED;
    }

    @Override
    public SourceReader<Tuple3<String, Integer, Long>, NoSplit> createReader(SourceReaderContext context) {
        return new Reader(emit ? Model.records() : 0);
    }

    @Override
    public SplitEnumerator<NoSplit, Integer> createEnumerator(SplitEnumeratorContext<NoSplit> context) {
        return new Enumerator();
    }

    @Override
    public SplitEnumerator<NoSplit, Integer> restoreEnumerator(SplitEnumeratorContext<NoSplit> context, Integer checkpoint) {
        return new Enumerator();
    }

    @Override
    public SimpleVersionedSerializer<NoSplit> getSplitSerializer() {
        return new SimpleVersionedSerializer<NoSplit>() {
            @Override
            public int getVersion() {
                return 1;
            }

            @Override
            public byte[] serialize(NoSplit split) {
                return new byte[0];
            }

            @Override
            public NoSplit deserialize(int version, byte[] serialized) {
                return new NoSplit();
            }
        };
    }

    @Override
    public SimpleVersionedSerializer<Integer> getEnumeratorCheckpointSerializer() {
        return new SimpleVersionedSerializer<Integer>() {
            @Override
            public int getVersion() {
                return 1;
            }

            @Override
            public byte[] serialize(Integer value) {
                return new byte[] {0};
            }

            @Override
            public Integer deserialize(int version, byte[] serialized) {
                return 0;
            }
        };
    }

    public static final class NoSplit implements SourceSplit {
        @Override
        public String splitId() {
            return "none";
        }
    }

    static final class Reader implements SourceReader<Tuple3<String, Integer, Long>, NoSplit> {
        private final int records;
        private int next;
        private final CompletableFuture<Void> idle = new CompletableFuture<>();

        Reader(int records) {
            this.records = records;
        }

        @Override
        public void start() {}

        @Override
        public InputStatus pollNext(ReaderOutput<Tuple3<String, Integer, Long>> output) {
            if (next < records) {
                output.collect(Model.event(next), Model.timestamp(next));
                next++;
            }
            return next < records ? InputStatus.MORE_AVAILABLE : InputStatus.NOTHING_AVAILABLE;
        }

        @Override
        public List<NoSplit> snapshotState(long checkpointId) {
            return Collections.emptyList();
        }

        @Override
        public CompletableFuture<Void> isAvailable() {
            return next < records ? CompletableFuture.completedFuture(null) : idle;
        }

        @Override
        public void addSplits(List<NoSplit> splits) {}

        @Override
        public void notifyNoMoreSplits() {}

        @Override
        public void close() {
            idle.complete(null);
        }
    }

    static final class Enumerator implements SplitEnumerator<NoSplit, Integer> {
        @Override
        public void start() {}

        @Override
        public void handleSplitRequest(int subtaskId, String requesterHostname) {}

        @Override
        public void addSplitsBack(List<NoSplit> splits, int subtaskId) {}

        @Override
        public void addReader(int subtaskId) {}

        @Override
        public Integer snapshotState(long checkpointId) {
            return 0;
        }

        @Override
        public void close() {}
    }
}
