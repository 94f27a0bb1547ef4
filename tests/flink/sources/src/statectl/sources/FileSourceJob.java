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
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.SerializationFeature;

import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A FileSource job stopped mid-file: {@code FileSourceJob <out dir> [<input dir>]} writes 4 text
 * files ({@code <input dir>/part-<i>.txt}, 400 lines {@code file <i> line <n>} each; the input dir
 * defaults to {@code out/input}) and reads them with
 * {@code FileSource.forRecordStreamFormat(TextLineInputFormat)} at parallelism 2 (uid
 * {@code file-src}) into a throttled map (3 ms a record), takes a CANONICAL savepoint into
 * {@code out/savepoint/} once 150 records went through (each reader then holds one file half read,
 * the enumerator the files not yet handed out), cancels, and runs {@link SourceDumper} over it
 * ({@code out/truth.json}). A second run does the same with filesystem checkpoint storage, every
 * state in a file and snapshot compression on: {@code out/savepoint-files/},
 * {@code out/truth-files.json}.
 *
 * <p>{@code FileSourceJob restore <results.json> <requests.json>}: each request
 * ({@code {"path": savepoint dir, "input": input dir}}) is restored ({@code execution.state-recovery.path})
 * into the same job, unthrottled, which runs to the end of its bounded input; the result lists what
 * the restored job read: {@code {"ok", "error", "lines": {"<file index>": [line numbers, sorted]}}}.
 * The files are read at the paths the savepoint's splits name.
 */
public final class FileSourceJob {
    static final AtomicLong RECORDS = new AtomicLong();
    static final ConcurrentLinkedQueue<String> READ = new ConcurrentLinkedQueue<>();
    static volatile boolean throttle = true;
    static final int FILES = 4;
    static final int LINES = 400;

    public static void main(String[] args) throws Exception {
        if (args[0].equals("restore")) {
            restore(Paths.get(args[1]), Paths.get(args[2]));
            return;
        }
        Path out = Paths.get(args[0]).toAbsolutePath();
        Path input = args.length > 1 ? Paths.get(args[1]).toAbsolutePath() : out.resolve("input");
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
            Path savepoint = run(cluster, input, out.resolve("savepoints"), false);
            Path target = out.resolve("savepoint");
            Files.move(savepoint, target);
            SourceDumper.main(new String[] {out.resolve("truth.json").toString(), target.toString()});
            Path files = run(cluster, input, out.resolve("savepoints-files"), true);
            Path filesTarget = out.resolve("savepoint-files");
            Files.move(files, filesTarget);
            SourceDumper.main(new String[] {out.resolve("truth-files.json").toString(), filesTarget.toString()});
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

    static JobGraph buildJob(Path input, Configuration extra) {
        Configuration conf = new Configuration();
        conf.setString("state.backend.type", "hashmap");
        conf.setString("execution.checkpointing.data-inline-threshold", "0b");
        conf.setString("restart-strategy.type", "none");
        conf.addAll(extra);
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

    static Path run(MiniCluster cluster, Path input, Path savepoints, boolean files) throws Exception {
        Configuration extra = new Configuration();
        if (files) {  // state in files (not inline in _metadata), Snappy-compressed
            extra.setString("execution.checkpointing.storage", "filesystem");
            extra.setString("execution.checkpointing.dir", savepoints.resolveSibling("checkpoints").toUri().toString());
            extra.setString("execution.checkpointing.snapshot-compression", "true");
        }
        RECORDS.set(0);
        throttle = true;
        JobGraph job = buildJob(input, extra);
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

    static void restore(Path results, Path requests) throws Exception {
        ObjectMapper json = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
        List<Object> out = new ArrayList<>();
        MiniCluster cluster = startCluster();
        try {
            for (JsonNode request : json.readTree(requests.toFile())) {
                out.add(restoreOne(cluster, Paths.get(request.get("path").asText()),
                        Paths.get(request.get("input").asText())));
            }
        } finally {
            cluster.close();
        }
        json.writeValue(results.toFile(), out);
    }

    static Map<String, Object> restoreOne(MiniCluster cluster, Path savepoint, Path input) throws Exception {
        Configuration extra = new Configuration();
        extra.setString("execution.state-recovery.path", savepoint.toAbsolutePath().toUri().toString());
        extra.setString("execution.state-recovery.claim-mode", "NO_CLAIM");
        READ.clear();
        throttle = false;
        JobGraph job = buildJob(input, extra);
        if (!job.getSavepointRestoreSettings().restoreSavepoint()) {
            throw new IllegalStateException("execution.state-recovery.path not picked up");
        }
        Map<String, Object> result = new LinkedHashMap<>();
        String error = null;
        try {
            cluster.submitJob(job).get(60, TimeUnit.SECONDS);
            JobResult done = cluster.requestJobResult(job.getJobID()).get(300, TimeUnit.SECONDS);
            if (!done.isSuccess()) {
                error = String.join(" <- ", messages(done.getSerializedThrowable().get()));
            }
        } catch (Exception e) {
            error = String.join(" <- ", messages(e));
        }
        Map<String, List<Integer>> lines = new TreeMap<>();
        for (String line : READ) {  // "file <f> line <n>"
            String[] words = line.split(" ");
            lines.computeIfAbsent(words[1], k -> new ArrayList<>()).add(Integer.parseInt(words[3]));
        }
        lines.values().forEach(Collections::sort);
        result.put("ok", error == null);
        result.put("error", error);
        result.put("lines", lines);
        return result;
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

    /**
     * Throttles the source, so that the savepoint finds every reader in the middle of a file; in a
     * restore, records what the restored job reads instead.
     */
    static final class Slow implements MapFunction<String, String> {
        @Override
        public String map(String value) throws Exception {
            RECORDS.incrementAndGet();
            if (throttle) {
                Thread.sleep(3);
            } else {
                READ.add(value);
            }
            return value;
        }
    }
}
