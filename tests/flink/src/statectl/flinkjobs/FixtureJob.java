package statectl.flinkjobs;

import org.apache.flink.api.common.JobID;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

/**
 * Runs the fixture job once per spec (all in one JVM and one MiniCluster) and writes, per spec,
 * {@code <out>/manifest.json} plus {@code <out>/savepoint/} (savepoint mode) or
 * {@code <out>/checkpoint/} (the retained checkpoint directory, mode "checkpoint").
 *
 * <p>Usage: {@code FixtureJob specs.json} where specs.json is a list of objects with keys
 * out, backend (hashmap|rocksdb), format (CANONICAL|NATIVE), parallelism, max_parallelism,
 * compression, inline, incremental, mode (savepoint|checkpoint), checkpoint_base (optional,
 * checkpoint mode: the directory Flink writes the checkpoints into), job_id (optional, 32 hex),
 * file_merging (optional: checkpoint files merged into shared physical files, FLIP-306),
 * bulk_keys (optional: that many more phase-1 records, each of a key of its own), flink_config
 * (optional: more Flink configuration, e.g. RocksDB's memtable and level sizes).
 */
public final class FixtureJob {
    private FixtureJob() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: FixtureJob specs.json");
            System.exit(2);
        }
        JsonNode specs = Flink.readJson(Paths.get(args[0]));
        int slots = 1;
        for (JsonNode spec : specs) {
            slots = Math.max(slots, spec.path("parallelism").asInt(2));
        }
        long started = System.nanoTime();
        MiniCluster cluster = Flink.startCluster(slots);
        System.err.printf("minicluster up in %.1fs%n", (System.nanoTime() - started) / 1e9);
        int failures = 0;
        try {
            for (JsonNode spec : specs) {
                long t0 = System.nanoTime();
                try {
                    Path manifest = run(cluster, spec);
                    System.out.println(manifest);
                    System.err.printf("%s in %.1fs%n", manifest, (System.nanoTime() - t0) / 1e9);
                } catch (Exception e) {
                    failures++;
                    System.err.println("FAILED " + spec + ": " + String.join("\n  caused by ", Flink.causes(e)));
                    e.printStackTrace();
                }
            }
        } finally {
            Flink.closeCluster(cluster);
        }
        System.exit(failures == 0 ? 0 : 1);
    }

    static Path run(MiniCluster cluster, JsonNode spec) throws Exception {
        Path out = Paths.get(spec.get("out").asText()).toAbsolutePath();
        String backend = spec.path("backend").asText("hashmap");
        String format = spec.path("format").asText("CANONICAL").toUpperCase();
        int parallelism = spec.path("parallelism").asInt(2);
        int maxParallelism = spec.path("max_parallelism").asInt(128);
        boolean compression = spec.path("compression").asBoolean(false);
        boolean inline = spec.path("inline").asBoolean(false);
        boolean incremental = spec.path("incremental").asBoolean(false);
        boolean fileMerging = spec.path("file_merging").asBoolean(false);
        int bulkKeys = spec.path("bulk_keys").asInt(0);
        String mode = spec.path("mode").asText("savepoint");
        boolean checkpointMode = mode.equals("checkpoint");
        if (!checkpointMode && !mode.equals("savepoint")) {
            throw new IllegalArgumentException("mode must be savepoint or checkpoint: " + mode);
        }

        Files.createDirectories(out);
        Flink.deleteRecursively(out.resolve("savepoint"));
        Flink.deleteRecursively(out.resolve("checkpoint"));
        Files.deleteIfExists(out.resolve("manifest.json"));
        Path work = Files.createTempDirectory("statectl-fixture-");
        try {
            Path checkpointBase = spec.hasNonNull("checkpoint_base")
                    ? Paths.get(spec.get("checkpoint_base").asText()).toAbsolutePath()
                    : work.resolve("checkpoints");
            Flink.deleteRecursively(checkpointBase);
            Files.createDirectories(checkpointBase);

            Map<String, String> c = new HashMap<>();
            c.put("state.backend.type", backend);
            c.put("parallelism.default", String.valueOf(parallelism));
            c.put("pipeline.max-parallelism", String.valueOf(maxParallelism));
            c.put("restart-strategy.type", "none");
            c.put("execution.checkpointing.storage", "filesystem");
            c.put("execution.checkpointing.dir", checkpointBase.toUri().toString());
            c.put("execution.checkpointing.incremental", String.valueOf(incremental));
            c.put("execution.checkpointing.snapshot-compression", String.valueOf(compression));
            // 1 MiB is the largest allowed threshold; 0 puts every non-empty stream in a file.
            c.put("execution.checkpointing.data-inline-threshold", inline ? "1mb" : "0b");
            c.put("execution.checkpointing.file-merging.enabled", String.valueOf(fileMerging));
            c.put("state.backend.local-recovery", "false");
            if (checkpointMode) {
                // no interval: no periodic checkpoints, only the two triggered below
                c.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
                c.put("execution.checkpointing.num-retained", "1");
            }
            spec.path("flink_config").fields().forEachRemaining(e -> c.put(e.getKey(), e.getValue().asText()));
            Configuration conf = Configuration.fromMap(c);

            JobID jobId = spec.hasNonNull("job_id")
                    ? JobID.fromHexString(spec.get("job_id").asText())
                    : new JobID();
            Control.reset();
            Control.restoreMode = false;
            Control.bulkKeys = bulkKeys;
            JobGraph job = Flink.buildJob(conf, Collections.emptyMap(), Collections.emptySet(), jobId);
            cluster.submitJob(job).get(60, TimeUnit.SECONDS);

            Path snapshotDir;
            try {
                releaseAndAwait(cluster, jobId, 1, Model.phase1Records(), parallelism);
                if (!checkpointMode) {
                    String pointer = Flink.retryWhileTasksStart(() -> cluster.triggerSavepoint(
                            jobId, work.resolve("savepoints").toUri().toString(), false,
                            SavepointFormatType.valueOf(format)).get(120, TimeUnit.SECONDS));
                    snapshotDir = Flink.snapshotDir(pointer);
                } else {
                    Flink.retryWhileTasksStart(() -> cluster.triggerCheckpoint(jobId).get(120, TimeUnit.SECONDS));
                    int total = Model.phase1Records() + Model.records(2).size();
                    releaseAndAwait(cluster, jobId, 2, total, parallelism);
                    String pointer = Flink.retryWhileTasksStart(() -> cluster.triggerCheckpoint(jobId).get(120, TimeUnit.SECONDS));
                    snapshotDir = Flink.snapshotDir(pointer);
                }
            } finally {
                Flink.cancelAndWait(cluster, jobId);
            }

            if (!Files.isRegularFile(snapshotDir.resolve("_metadata"))) {
                throw new IllegalStateException(snapshotDir + " is gone (subsumed by a later checkpoint?)");
            }
            CheckpointMetadata metadata = Flink.loadMetadata(snapshotDir);
            long checkpointId = metadata.getCheckpointId();
            Map<String, Map<Integer, Map<String, Object>>> dumps = Control.snapshots.get(checkpointId);
            if (dumps == null) {
                throw new IllegalStateException("no state dumps for checkpoint " + checkpointId
                        + " (have " + Control.snapshots.keySet() + ")");
            }

            Map<String, Object> manifest = new LinkedHashMap<>();
            manifest.put("flink_version", EnvironmentInformation.getVersion());
            manifest.put("mode", mode);
            manifest.put("backend", backend);
            manifest.put("format", format);
            manifest.put("incremental", incremental);
            if (fileMerging) {
                manifest.put("file_merging", true);
            }
            if (bulkKeys > 0) {
                manifest.put("bulk_keys", bulkKeys);
            }
            if (spec.hasNonNull("flink_config")) {
                manifest.put("flink_config", spec.get("flink_config"));
            }
            manifest.put("compression", compression);
            manifest.put("inline", inline);
            manifest.put("parallelism", parallelism);
            manifest.put("max_parallelism", maxParallelism);
            manifest.put("checkpoint_id", checkpointId);
            manifest.put("job_id", jobId.toHexString());

            if (!checkpointMode) {
                Flink.copyRecursively(snapshotDir, out.resolve("savepoint"));
                manifest.put("path", "savepoint");
            } else {
                Path jobDir = snapshotDir.getParent();
                Flink.copyRecursively(jobDir, out.resolve("checkpoint"));
                manifest.put("path", "checkpoint/" + snapshotDir.getFileName());
                Map<String, Object> origin = new LinkedHashMap<>();
                origin.put("original_dir", jobDir.toString());
                origin.put("original_uri", "file:" + jobDir);
                List<String> layout = new ArrayList<>();
                try (java.util.stream.Stream<Path> walk = Files.walk(jobDir)) {
                    walk.filter(p -> !p.equals(jobDir)).forEach(p -> layout.add(
                            jobDir.relativize(p) + (Files.isDirectory(p) ? "/" : "")));
                }
                Collections.sort(layout);
                origin.put("files", layout);
                manifest.put("checkpoint", origin);
            }
            manifest.put("operators", operators(metadata, dumps));
            manifest.put("state", Control.assemble(dumps));
            Path manifestPath = out.resolve("manifest.json");
            Flink.writeJson(manifestPath, manifest);
            return manifestPath;
        } finally {
            Flink.deleteRecursively(work);
        }
    }

    private static void releaseAndAwait(MiniCluster cluster, JobID jobId, int phase, int totalRecords, int parallelism)
            throws Exception {
        Control.releasedPhase = phase;
        Flink.await(cluster, jobId,
                () -> Control.statelessRecords.get() == 2L * totalRecords
                        && Control.broadcastRecords.get() == (long) totalRecords * parallelism,
                120_000, "phase " + phase + " records");
    }

    /** The manifest's operator list: every operator in `_metadata`, in topology order. */
    private static List<Map<String, Object>> operators(
            CheckpointMetadata metadata, Map<String, Map<Integer, Map<String, Object>>> dumps) {
        Map<String, OperatorState> byUid = new TreeMap<>();
        for (OperatorState op : metadata.getOperatorStates()) {
            String uid = op.getOperatorUid().orElseThrow(
                    () -> new IllegalStateException("operator without uid in _metadata: " + op.getOperatorID()));
            byUid.put(uid, op);
        }
        if (!byUid.keySet().equals(new TreeSet<>(Model.UIDS))) {
            throw new IllegalStateException("_metadata has operators " + byUid.keySet() + ", expected " + Model.UIDS);
        }
        for (String uid : Model.STATEFUL_UIDS) {
            int p = byUid.get(uid).getParallelism();
            Map<Integer, Map<String, Object>> d = dumps.get(uid);
            if (d == null || d.size() != p) {
                throw new IllegalStateException(uid + ": dumps of subtasks " + (d == null ? null : d.keySet()) + ", parallelism " + p);
            }
        }
        List<Map<String, Object>> out = new ArrayList<>();
        for (String uid : Model.UIDS) {
            OperatorState op = byUid.get(uid);
            String id = op.getOperatorID().toHexString();
            if (!id.equals(Flink.operatorId(uid))) {
                throw new IllegalStateException(uid + ": operator id " + id + " != murmur3 " + Flink.operatorId(uid));
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("uid", uid);
            m.put("id", id);
            m.put("name", op.getOperatorName().orElse(null));
            m.put("parallelism", op.getParallelism());
            m.put("max_parallelism", op.getMaxParallelism());
            m.put("states", Model.states(uid));
            m.put("entry_counts", entryCounts(dumps.get(uid)));
            out.add(m);
        }
        return out;
    }

    /** Entries per keyed state as in canonical key-group blocks: keys, (key, user key)s, timers. */
    @SuppressWarnings("unchecked")
    private static Map<String, Object> entryCounts(Map<Integer, Map<String, Object>> subtasks) {
        Map<String, Object> counts = new LinkedHashMap<>();
        if (subtasks == null) {
            return counts;
        }
        long cnt = 0, lst = 0, mp = 0, processing = 0, event = 0;
        boolean keyed = false;
        for (Map<String, Object> dump : subtasks.values()) {
            Map<String, Object> k = (Map<String, Object>) dump.get("keyed");
            if (k == null) {
                continue;
            }
            keyed = true;
            cnt += ((Map<String, Object>) k.get("cnt")).size();
            lst += ((Map<String, Object>) k.get("lst")).size();
            for (Object v : ((Map<String, Object>) k.get("mp")).values()) {
                mp += ((Map<String, Object>) v).size();
            }
            Map<String, Object> timers = (Map<String, Object>) dump.get("timers");
            for (Object v : ((Map<String, Object>) timers.get("processing")).values()) {
                processing += ((List<Object>) v).size();
            }
            for (Object v : ((Map<String, Object>) timers.get("event")).values()) {
                event += ((List<Object>) v).size();
            }
        }
        if (keyed) {
            counts.put("cnt", cnt);
            counts.put("lst", lst);
            counts.put("mp", mp);
            counts.put(Model.TIMERS_PROCESSING, processing);
            counts.put(Model.TIMERS_EVENT, event);
        }
        return counts;
    }
}
