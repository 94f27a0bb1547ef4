package statectl.sources;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A FileSource job stopped mid-file: {@code FileSourceJob <out dir>} writes 4 text files
 * ({@code out/input/part-<i>.txt}, 400 lines each) and reads them with
 * {@code FileSource.forRecordStreamFormat(TextLineInputFormat)} at parallelism 2 (uid
 * {@code file-src}) into a throttled map (3 ms a record), takes a CANONICAL savepoint into
 * {@code out/savepoint/} once 150 records went through (each reader then holds one file half read,
 * the enumerator the files not yet handed out), cancels, and runs {@link SourceDumper} over it
 * ({@code out/truth.json}).
 */
public final class FileSourceJob {
    static final AtomicLong RECORDS = new AtomicLong();
    static final int FILES = 4;
    static final int LINES = 400;

    public static void main(String[] args) throws Exception {
        Path out = Paths.get(args[0]).toAbsolutePath();
        Path input = out.resolve("input");
        Files.createDirectories(input);
        for (int f = 0; f < FILES; f++) {
            StringBuilder text = new StringBuilder();
            for (int line = 0; line < LINES; line++) {
                text.append("file ").append(f).append(" line ").append(line).append('\n');
            }
            Files.write(input.resolve("part-" + f + ".txt"), text.toString().getBytes(StandardCharsets.UTF_8));
        }
        MiniCluster cluster = startCluster();
        try {
            Path savepoint = run(cluster, input, out.resolve("savepoints"));
            Path target = out.resolve("savepoint");
            Files.move(savepoint, target);
            SourceDumper.main(new String[] {out.resolve("truth.json").toString(), target.toString()});
        } finally {
            cluster.close();
        }
    }

    static MiniCluster startCluster() throws Exception {
        Configuration conf = new Configuration();
        conf.setString("taskmanager.memory.managed.size", "128m");
        conf.setString("taskmanager.memory.network.min", "64m");
        conf.setString("taskmanager.memory.network.max", "64m");
        conf.setString("rest.bind-port", "0");
        MiniCluster cluster = new MiniCluster(new MiniClusterConfiguration.Builder()
                .setConfiguration(conf).setNumTaskManagers(1).setNumSlotsPerTaskManager(2)
                .withRandomPorts().build());
        cluster.start();
        return cluster;
    }

    static JobGraph buildJob(Path input) {
        Configuration conf = new Configuration();
        conf.setString("state.backend.type", "hashmap");
        conf.setString("execution.checkpointing.data-inline-threshold", "0b");
        conf.setString("restart-strategy.type", "none");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        FileSource<String> source = FileSource
                .forRecordStreamFormat(new TextLineInputFormat(), new org.apache.flink.core.fs.Path(input.toUri()))
                .build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "files")
                .uid("file-src")
                .map(new Slow())
                .uid("slow")
                .name("slow")
                .sinkTo(new DiscardingSink<>())
                .uid("sink")
                .name("sink");
        return env.getStreamGraph().getJobGraph(FileSourceJob.class.getClassLoader(), null);
    }

    static Path run(MiniCluster cluster, Path input, Path savepoints) throws Exception {
        JobGraph job = buildJob(input);
        JobID id = job.getJobID();
        cluster.submitJob(job).get(60, TimeUnit.SECONDS);
        try {
            long deadline = System.currentTimeMillis() + 120_000;
            while (RECORDS.get() < 150) {
                JobStatus status = cluster.getJobStatus(id).get(10, TimeUnit.SECONDS);
                if (status.isGloballyTerminalState() || System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("job " + status + " before 150 records");
                }
                Thread.sleep(5);
            }
            String pointer = triggerSavepoint(cluster, id, savepoints);
            return Paths.get(URI.create(pointer.startsWith("file:") ? pointer : "file:" + pointer));
        } finally {
            if (!cluster.getJobStatus(id).get(10, TimeUnit.SECONDS).isGloballyTerminalState()) {
                try {
                    cluster.cancelJob(id).get(60, TimeUnit.SECONDS);
                } catch (Exception e) {
                    // it may have terminated in between
                }
            }
            cluster.requestJobResult(id).get(120, TimeUnit.SECONDS);
        }
    }

    static String triggerSavepoint(MiniCluster cluster, JobID id, Path dir) throws Exception {
        for (int attempt = 0; ; attempt++) {
            try {
                return cluster.triggerSavepoint(id, dir.toUri().toString(), false, SavepointFormatType.CANONICAL)
                        .get(120, TimeUnit.SECONDS);
            } catch (Exception e) {
                if (attempt > 200 || !String.valueOf(messages(e)).toLowerCase().contains("not")) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
    }

    static List<String> messages(Throwable e) {
        List<String> all = new ArrayList<>();
        for (Throwable t = e; t != null && all.size() < 20; t = t.getCause()) {
            all.add(String.valueOf(t.getMessage()));
        }
        return all;
    }

    /** Throttles the source, so that the savepoint finds every reader in the middle of a file. */
    static final class Slow implements MapFunction<String, String> {
        @Override
        public String map(String value) throws Exception {
            RECORDS.incrementAndGet();
            Thread.sleep(3);
            return value;
        }
    }
}
