package statectl.values;

import org.apache.flink.api.common.JobID;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The restore oracle of the values job: {@code ValuesJob restore <requests.json> <results.json>}.
 * For each request in order, on one MiniCluster: builds the values job (same uids, descriptors and
 * serializers; the source emits nothing) with the request's overrides of the `values` operator's
 * keyed states ({@link Operators#ttlOn}, {@link Operators#ttlOff}, {@link Operators#rename},
 * {@link Operators#drop}), restores the savepoint (NO_CLAIM), waits until every subtask of
 * `values` and `opstate` has initialized its state and every subtask of `values` has checked in
 * open() that each restored keyed entry is reachable ({@link Operators#checkReachable}), takes a
 * CANONICAL savepoint into `out`, cancels, and dumps the new savepoint with {@link StateDumper}
 * into out/dump.jsonl (unless the request says "dump": false: a state too large to dump is
 * checked only).
 *
 * <p>Request: {"savepoint": dir, "out": dir, "backend": "hashmap"|"rocksdb"|null (null: rocksdb
 * when the savepoint has RocksDB native handles), "parallelism": 2, "max_parallelism": 128,
 * "allow_non_restored": false, "ttl_on": [name], "ttl_off": [name], "rename": {old: new}, "drop":
 * [name], "drop_operators": [uid] (window / opstate left out of the job), "extra": [name] (states of
 * {@link States#EXTRA} registered too), "dump": true (false: no savepoint, no dump)}. Result (a JSON list,
 * one per request, in order): {"ok", "error" (null, or the exception
 * chain "Class: message | caused by Class: message ..."), "savepoint" (the new savepoint dir),
 * "dump" (out/dump.jsonl), "lines" (its line count), "unreachable" ([[state, key], ...]: keys that
 * getKeys lists under a registered keyed state of `values` but that read as nothing after
 * setCurrentKey), "misplaced" ([[state, key], ...]: keys whose key group is outside their
 * subtask's range), "checked" (the number of (state, key) pairs checked), "seconds"}; the last
 * three are null when the job did not get that far. A restore or savepoint that fails is a result
 * with ok=false and the batch goes on; a malformed request fails the whole run.
 */
public final class ValuesRestore {
    private ValuesRestore() {}

    static final List<String> BACKENDS = Arrays.asList("hashmap", "rocksdb");
    static final Set<String> FIELDS = new LinkedHashSet<>(Arrays.asList("savepoint", "out", "backend", "parallelism",
            "max_parallelism", "allow_non_restored", "ttl_on", "ttl_off", "rename", "drop", "drop_operators", "extra", "dump"));
    /** The operators a request may leave out of the job (`drop_operators`). */
    static final Set<String> DROPPABLE_OPERATORS = new LinkedHashSet<>(Arrays.asList("window", "opstate"));
    /** The keyed states of `values` the overrides may name (timers are not descriptors). */
    static final Set<String> KEYED = new LinkedHashSet<>();
    static final Set<String> WITH_TTL = new LinkedHashSet<>(
            Arrays.asList("ttl-value", "ttl-list", "ttl-map", "ttl-reducing", "ttl-aggregating"));

    static {
        for (String[] s : States.ALL.get("values")) {
            if (!s[1].equals("TIMERS")) {
                KEYED.add(s[0]);
            }
        }
    }

    /** One parsed request. */
    static final class Request {
        Path savepoint;
        Path out;
        String backend;
        int parallelism;
        int maxParallelism;
        boolean allowNonRestored;
        Set<String> ttlOn = new LinkedHashSet<>();
        Set<String> ttlOff = new LinkedHashSet<>();
        Map<String, String> rename = new LinkedHashMap<>();
        Set<String> drop = new LinkedHashSet<>();
        Set<String> dropOperators = new LinkedHashSet<>();
        Set<String> extra = new LinkedHashSet<>();
        boolean dump;
    }

    public static void main(Path requestsFile, Path resultsFile) throws Exception {
        List<Request> requests = new ArrayList<>();
        for (JsonNode n : ValuesJob.JSON.readTree(requestsFile.toFile())) {
            requests.add(parse(n));
        }
        int slots = 2;
        for (Request r : requests) {
            slots = Math.max(slots, r.parallelism);
        }
        List<Map<String, Object>> results = new ArrayList<>();
        MiniCluster cluster = ValuesJob.startCluster(slots);
        try {
            for (Request request : requests) {
                long t0 = System.nanoTime();
                Map<String, Object> result = new LinkedHashMap<>();
                result.put("ok", false);
                result.put("error", null);
                result.put("savepoint", null);
                result.put("dump", null);
                result.put("lines", null);
                result.put("unreachable", null);
                result.put("misplaced", null);
                result.put("checked", null);
                try {
                    restore(cluster, request, result);
                    result.put("ok", true);
                } catch (Throwable e) {
                    result.put("ok", false);
                    result.put("error", chain(e));
                }
                result.put("seconds", Math.round((System.nanoTime() - t0) / 1e6) / 1e3);
                System.err.printf("restore %s: %s in %.1fs%n", request.savepoint,
                        Boolean.TRUE.equals(result.get("ok")) ? "ok" : "FAILED", (System.nanoTime() - t0) / 1e9);
                results.add(result);
            }
        } finally {
            ValuesJob.closeCluster(cluster);
        }
        Files.createDirectories(resultsFile.toAbsolutePath().getParent());
        ValuesJob.JSON.writeValue(resultsFile.toFile(), results);
    }

    static Request parse(JsonNode n) {
        for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
            String field = it.next();
            if (!FIELDS.contains(field)) {
                throw new IllegalArgumentException("unknown request field " + field + "; known: " + FIELDS);
            }
        }
        Request r = new Request();
        if (!n.hasNonNull("savepoint") || !n.hasNonNull("out")) {
            throw new IllegalArgumentException("a request needs savepoint and out: " + n);
        }
        r.savepoint = Paths.get(n.get("savepoint").asText()).toAbsolutePath();
        r.out = Paths.get(n.get("out").asText()).toAbsolutePath();
        r.backend = n.hasNonNull("backend") ? n.get("backend").asText() : null;
        if (r.backend != null && !BACKENDS.contains(r.backend)) {
            throw new IllegalArgumentException("backend " + r.backend + " not in " + BACKENDS);
        }
        r.parallelism = n.hasNonNull("parallelism") ? n.get("parallelism").asInt() : 2;
        r.maxParallelism = n.hasNonNull("max_parallelism") ? n.get("max_parallelism").asInt() : 128;
        r.allowNonRestored = n.hasNonNull("allow_non_restored") && n.get("allow_non_restored").asBoolean();
        r.dump = !n.hasNonNull("dump") || n.get("dump").asBoolean();
        names(n, "ttl_on", r.ttlOn);
        names(n, "ttl_off", r.ttlOff);
        names(n, "drop", r.drop);
        if (n.hasNonNull("drop_operators")) {
            for (JsonNode uid : n.get("drop_operators")) {
                if (!DROPPABLE_OPERATORS.contains(uid.asText())) {
                    throw new IllegalArgumentException("drop_operators: " + uid.asText() + " not in " + DROPPABLE_OPERATORS);
                }
                r.dropOperators.add(uid.asText());
            }
        }
        if (n.hasNonNull("extra")) {
            for (JsonNode name : n.get("extra")) {
                if (!States.EXTRA.containsKey(name.asText())) {
                    throw new IllegalArgumentException("extra: " + name.asText() + " not in " + States.EXTRA.keySet());
                }
                r.extra.add(name.asText());
            }
        }
        if (n.hasNonNull("rename")) {
            for (Iterator<Map.Entry<String, JsonNode>> it = n.get("rename").fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                r.rename.put(known(e.getKey(), "rename"), e.getValue().asText());
            }
        }
        for (String name : r.ttlOn) {
            if (WITH_TTL.contains(name)) {
                throw new IllegalArgumentException("ttl_on: " + name + " has TTL already");
            }
        }
        for (String name : r.ttlOff) {
            if (!WITH_TTL.contains(name)) {
                throw new IllegalArgumentException("ttl_off: " + name + " has no TTL; TTL states: " + WITH_TTL);
            }
        }
        return r;
    }

    static void names(JsonNode n, String field, Set<String> into) {
        if (n.hasNonNull(field)) {
            for (JsonNode name : n.get(field)) {
                into.add(known(name.asText(), field));
            }
        }
    }

    static String known(String name, String field) {
        if (!KEYED.contains(name)) {
            throw new IllegalArgumentException(field + ": " + name + " is not a keyed state of `values`");
        }
        return name;
    }

    static void restore(MiniCluster cluster, Request r, Map<String, Object> result) throws Exception {
        String backend = r.backend != null ? r.backend : detectBackend(r.savepoint);
        Files.createDirectories(r.out);
        Path work = Files.createTempDirectory("statectl-values-restore-");
        Configuration conf = ValuesJob.config(backend, r.parallelism, r.maxParallelism, work.resolve("checkpoints"));
        String path = r.savepoint.toUri().toString();
        String allow = String.valueOf(r.allowNonRestored);
        Map<String, String> c = new HashMap<>(conf.toMap());
        // 2.x keys, then the 1.x ones (1.20 reads both; each version ignores the other's)
        c.put("execution.state-recovery.path", path);
        c.put("execution.state-recovery.ignore-unclaimed-state", allow);
        c.put("execution.state-recovery.claim-mode", "NO_CLAIM");
        c.put("execution.savepoint.path", path);
        c.put("execution.savepoint.ignore-unclaimed-state", allow);
        c.put("execution.savepoint-restore-mode", "NO_CLAIM");
        conf = Configuration.fromMap(c);

        Operators.reset();
        Operators.ttlOn.addAll(r.ttlOn);
        Operators.ttlOff.addAll(r.ttlOff);
        Operators.rename.putAll(r.rename);
        Operators.drop.addAll(r.drop);
        Operators.dropOperators.addAll(r.dropOperators);
        Operators.extra.addAll(r.extra);
        Operators.checkReachable = true;
        JobGraph job = ValuesJob.buildJob(conf, false);
        SavepointRestoreSettings settings = SavepointRestoreSettings.fromConfiguration(conf);
        job.setSavepointRestoreSettings(settings);
        if (!settings.restoreSavepoint() || settings.allowNonRestoredState() != r.allowNonRestored
                || !claimMode(settings).equals("NO_CLAIM")) {
            throw new IllegalStateException("restore settings not picked up: " + settings);
        }
        JobID jobId = job.getJobID();
        cluster.submitJob(job).get(60, java.util.concurrent.TimeUnit.SECONDS);
        try {
            // every subtask of `values` and `opstate` ran initializeState (so did `window`: a
            // savepoint needs every task RUNNING, i.e. restored)
            int opstates = r.dropOperators.contains("opstate") ? 0 : r.parallelism;
            ValuesJob.await(cluster, jobId, () -> Operators.valuesInits.get() == r.parallelism
                    && Operators.opstateInits.get() == opstates, "state initialization");
            // every subtask of `values` ran the reachability check in open() (before the savepoint)
            ValuesJob.await(cluster, jobId, () -> Operators.valuesChecks.get() == r.parallelism,
                    "reachability check");
            synchronized (Operators.unreachable) {
                result.put("unreachable", sorted(Operators.unreachable));
            }
            synchronized (Operators.misplaced) {
                result.put("misplaced", sorted(Operators.misplaced));
            }
            result.put("checked", Operators.checked.get());
            if (!r.dump) {
                return;
            }
            String pointer = ValuesJob.triggerSavepoint(cluster, jobId, r.out, "CANONICAL");
            Path dir = Paths.get(URI.create(pointer.startsWith("file:") ? pointer : "file:" + pointer));
            result.put("savepoint", dir.toString());
        } finally {
            ValuesJob.cancelAndWait(cluster, jobId);
            ValuesJob.deleteRecursively(work);
        }
        List<StateDumper.Line> lines = StateDumper.dump(Paths.get((String) result.get("savepoint")));
        Path dump = r.out.resolve("dump.jsonl");
        StateDumper.write(lines, dump);
        result.put("dump", dump.toString());
        result.put("lines", lines.size());
    }

    /** [state, key] pairs, sorted by state then key (the subtasks add them concurrently). */
    static List<List<String>> sorted(List<List<String>> pairs) {
        List<List<String>> out = new ArrayList<>(pairs);
        out.sort(Comparator.<List<String>, String>comparing(p -> p.get(0)).thenComparing(p -> p.get(1)));
        return out;
    }

    /** getRecoveryClaimMode (2.x) or getRestoreMode (1.x), as text. */
    static String claimMode(SavepointRestoreSettings settings) throws Exception {
        for (String name : new String[] {"getRecoveryClaimMode", "getRestoreMode"}) {
            try {
                return String.valueOf(SavepointRestoreSettings.class.getMethod(name).invoke(settings));
            } catch (NoSuchMethodException e) {
                // the other version's name
            }
        }
        throw new IllegalStateException("no claim mode getter on SavepointRestoreSettings");
    }

    /** rocksdb when the savepoint has RocksDB native (incremental) handles, else hashmap. */
    static String detectBackend(Path dir) throws Exception {
        CheckpointMetadata metadata = StateDumper.loadMetadata(dir);
        for (OperatorState op : metadata.getOperatorStates()) {
            for (OperatorSubtaskState st : op.getStates()) {
                for (KeyedStateHandle h : st.getManagedKeyedState()) {
                    if (h instanceof IncrementalKeyedStateHandle) {
                        return "rocksdb";
                    }
                }
            }
        }
        return "hashmap";
    }

    /** "Class: message | caused by Class: message ..." over the whole cause chain. */
    static String chain(Throwable t) {
        StringBuilder sb = new StringBuilder();
        Map<Throwable, Boolean> seen = new IdentityHashMap<>();
        for (; t != null && seen.put(t, true) == null; t = t.getCause()) {
            if (sb.length() > 0) {
                sb.append(" | caused by ");
            }
            sb.append(t.getClass().getName()).append(": ").append(t.getMessage());
        }
        return sb.toString();
    }
}
