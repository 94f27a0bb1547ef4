package statectl.evolution;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.source.legacy.SourceFunction;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * The schema-evolution job, compiled twice: with v1/Model.java (writes the savepoint) and with
 * v2/Model.java (restores it), the same uids and state names. One operator per state (uid
 * "op-" + state), so that a state Flink refuses fails only its own restore:
 *
 * <pre>
 * src (p=1, emits 0..RECORDS-1, then idles) ─keyBy("k" + i % KEYS)→ op-&lt;state&gt; (one per state)
 * </pre>
 *
 * `write OUT`: every state written (ValueState of Model.value(state, i), a
 * MapState of key "m" + i % 2 for map-*, a ListState appended for list-*, an operator ListState
 * for oplist-*), then a savepoint: OUT/hashmap-canonical/savepoint-* (hashmap, CANONICAL) and
 * OUT/rocksdb-native/savepoint-* (RocksDB incremental, NATIVE). `restore REQUESTS RESULTS`: per
 * request {savepoint, state, backend}, a job of the source and op-&lt;state&gt; alone (the
 * savepoint's other operators not restored), which registers the state with this version's
 * type and dumps what it reads: {ok, error (the exception chain), values {key: value}} where a
 * POJO is {field: value}, a Row or Tuple a list of its fields, a list/map state a list/map. A
 * request with "states" (a list) instead restores all of them in one job, without allowing
 * non-restored state (every operator of the savepoint must be among them): values are then
 * {state: values}; with "savepoint_out" the job then takes a savepoint (of the backend's format,
 * "format") into that directory, of what it restored.
 */
public final class EvolutionJob {
    static final String[] STATES = {
        "pojo-added", "pojo-removed", "pojo-retyped", "pojo-renamed", "row-added", "tuple-retyped",
        "map-pojo-retyped", "list-pojo-added", "oplist-pojo-added", "enum-added", "enum-removed",
        "pojo-to-kryo", "pojo-same", "control",
    };
    static final int RECORDS = 12;
    static final int KEYS = 4;
    static final ObjectMapper JSON = new ObjectMapper();

    static final AtomicInteger processed = new AtomicInteger();
    static final AtomicInteger dumped = new AtomicInteger();
    static final Map<String, Object> dump = new ConcurrentHashMap<>();

    /** The jobs' checkpoint directory (they take savepoints only), deleted at the end. */
    static Path checkpoints;

    public static void main(String[] args) throws Exception {
        checkpoints = Files.createTempDirectory("statectl-evolution-");
        try {
            if (args[0].equals("write")) {
                try (MiniCluster cluster = cluster()) {
                    write(cluster, Paths.get(args[1], "hashmap-canonical"), "hashmap", "CANONICAL");
                    write(cluster, Paths.get(args[1], "rocksdb-native"), "rocksdb", "NATIVE");
                }
            } else if (args[0].equals("restore")) {
                restore(Paths.get(args[1]), Paths.get(args[2]));
            } else {
                throw new IllegalArgumentException("write OUT | restore REQUESTS RESULTS");
            }
        } finally {
            try (Stream<Path> paths = Files.walk(checkpoints)) {
                paths.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
            }
        }
    }

    // ------------------------------------------------------------------ the job

    static final class Source implements SourceFunction<Integer> {
        final boolean emit;
        volatile boolean running = true;

        Source(boolean emit) {
            this.emit = emit;
        }

        @Override
        public void run(SourceContext<Integer> ctx) throws Exception {
            for (int i = 0; emit && i < RECORDS && running; i++) {
                synchronized (ctx.getCheckpointLock()) {
                    ctx.collect(i);
                }
            }
            while (running) {
                Thread.sleep(5);
            }
        }

        @Override
        public void cancel() {
            running = false;
        }
    }

    static final class KeyOf implements KeySelector<Integer, String> {
        @Override
        public String getKey(Integer i) {
            return "k" + (i % KEYS);
        }
    }

    /** Holds one state: writes it from the records, or dumps what it restored. */
    static final class StateOperator extends AbstractStreamOperator<Void> implements OneInputStreamOperator<Integer, Void> {
        final String state;
        final boolean restoring;
        transient ListState<Object> opList;

        StateOperator(String state, boolean restoring) {
            this.state = state;
            this.restoring = restoring;
        }

        @SuppressWarnings({"unchecked", "rawtypes"})
        TypeInformation<Object> type() {
            return (TypeInformation) Model.type(state);
        }

        @Override
        public void initializeState(StateInitializationContext context) throws Exception {
            super.initializeState(context);
            if (state.startsWith("oplist-")) {
                opList = context.getOperatorStateStore().getListState(new ListStateDescriptor<>(state, type()));
                if (restoring) {
                    List<Object> values = new ArrayList<>();
                    for (Object v : opList.get()) {
                        values.add(json(v));
                    }
                    dump.put(state, values);
                    dumped.incrementAndGet();
                }
            }
        }

        @Override
        public void open() throws Exception {
            super.open();
            if (restoring && !state.startsWith("oplist-")) {
                Map<String, Object> values = new TreeMap<>();
                registered(); // a refused state fails here (RocksDB) or in the restore (heap)
                List<Object> keys = getKeyedStateBackend().getKeys(state, VoidNamespace.INSTANCE)
                        .collect(Collectors.toList());
                for (Object key : keys) {
                    setCurrentKey(key);
                    values.put((String) key, read());
                }
                dump.put(state, values);
                dumped.incrementAndGet();
            }
        }

        Object registered() throws Exception {
            if (state.startsWith("map-")) {
                return getPartitionedState(new MapStateDescriptor<>(state, Types.STRING, type()));
            }
            if (state.startsWith("list-")) {
                return getPartitionedState(new ListStateDescriptor<>(state, type()));
            }
            return getPartitionedState(new ValueStateDescriptor<>(state, type()));
        }

        @SuppressWarnings("unchecked")
        Object read() throws Exception {
            Object registered = registered();
            if (registered instanceof MapState) {
                Map<String, Object> out = new TreeMap<>();
                for (Map.Entry<String, Object> e : ((MapState<String, Object>) registered).entries()) {
                    out.put(e.getKey(), json(e.getValue()));
                }
                return out;
            }
            if (registered instanceof ListState) {
                List<Object> out = new ArrayList<>();
                for (Object v : ((ListState<Object>) registered).get()) {
                    out.add(json(v));
                }
                return out;
            }
            return json(((ValueState<Object>) registered).value());
        }

        @Override
        @SuppressWarnings("unchecked")
        public void processElement(StreamRecord<Integer> element) throws Exception {
            int i = element.getValue();
            Object value = Model.value(state, i);
            if (opList != null) {
                opList.add(value);
            } else {
                Object registered = registered();
                if (registered instanceof MapState) {
                    ((MapState<String, Object>) registered).put("m" + (i % 2), value);
                } else if (registered instanceof ListState) {
                    ((ListState<Object>) registered).add(value);
                } else {
                    ((ValueState<Object>) registered).update(value);
                }
            }
            processed.incrementAndGet();
        }
    }

    /** A value as JSON holds it: POJO fields by name, Row and Tuple fields as lists. */
    static Object json(Object v) throws Exception {
        if (v == null || v instanceof Number || v instanceof String || v instanceof Boolean) {
            return v;
        }
        if (v instanceof Enum) {
            return ((Enum<?>) v).name();
        }
        if (v instanceof Row) {
            Row row = (Row) v;
            List<Object> fields = new ArrayList<>();
            for (int i = 0; i < row.getArity(); i++) {
                fields.add(json(row.getField(i)));
            }
            return fields;
        }
        if (v instanceof Tuple) {
            Tuple t = (Tuple) v;
            List<Object> fields = new ArrayList<>();
            for (int i = 0; i < t.getArity(); i++) {
                fields.add(json(t.getField(i)));
            }
            return fields;
        }
        Map<String, Object> fields = new TreeMap<>();
        for (Field f : v.getClass().getDeclaredFields()) {
            if (!Modifier.isStatic(f.getModifiers())) {
                f.setAccessible(true);
                fields.put(f.getName(), json(f.get(v)));
            }
        }
        return fields;
    }

    static JobGraph build(Configuration conf, List<String> states, boolean restoring) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        DataStream<Integer> src = env.addSource(new Source(!restoring), "src", Types.INT).setParallelism(1).uid("src");
        for (String state : states) {
            src.keyBy(new KeyOf(), Types.STRING)
                    .transform("op-" + state, Types.VOID, new StateOperator(state, restoring))
                    .uid("op-" + state);
        }
        return env.getStreamGraph().getJobGraph(EvolutionJob.class.getClassLoader(), JobID.generate());
    }

    // ------------------------------------------------------------------ write and restore

    static Configuration config(String backend) {
        Map<String, String> c = new HashMap<>();
        c.put("state.backend.type", backend);
        c.put("parallelism.default", "1");
        c.put("pipeline.max-parallelism", "128");
        c.put("restart-strategy.type", "none");
        c.put("execution.checkpointing.storage", "filesystem");
        c.put("execution.checkpointing.dir", checkpoints.toUri().toString());
        c.put("execution.checkpointing.incremental", String.valueOf(backend.equals("rocksdb")));
        c.put("execution.checkpointing.data-inline-threshold", "0b");
        return Configuration.fromMap(c);
    }

    static MiniCluster cluster() throws Exception {
        Configuration conf = new Configuration();
        conf.setString("taskmanager.memory.managed.size", "256m");
        conf.setString("taskmanager.memory.network.min", "64m");
        conf.setString("taskmanager.memory.network.max", "64m");
        conf.setString("rest.bind-port", "0");
        MiniCluster cluster = new MiniCluster(new MiniClusterConfiguration.Builder().setConfiguration(conf)
                .setNumTaskManagers(1).setNumSlotsPerTaskManager(2).withRandomPorts().build());
        cluster.start();
        return cluster;
    }

    static void write(MiniCluster cluster, Path out, String backend, String format) throws Exception {
        processed.set(0);
        List<String> states = List.of(STATES);
        JobGraph job = build(config(backend), states, false);
        cluster.submitJob(job).get(60, TimeUnit.SECONDS);
        await(cluster, job.getJobID(), () -> processed.get() == RECORDS * states.size());
        savepoint(cluster, job, out, format);
        cluster.cancelJob(job.getJobID()).get(60, TimeUnit.SECONDS);
        cluster.requestJobResult(job.getJobID()).get(120, TimeUnit.SECONDS);
    }

    static void savepoint(MiniCluster cluster, JobGraph job, Path out, String format) throws Exception {
        for (int attempt = 0; ; attempt++) {
            try {
                cluster.triggerSavepoint(job.getJobID(), out.toUri().toString(), false,
                        SavepointFormatType.valueOf(format)).get(120, TimeUnit.SECONDS);
                return;
            } catch (Exception e) {
                if (attempt > 200) {
                    throw e;
                }
                Thread.sleep(100); // tasks still starting
            }
        }
    }

    static void restore(Path requestsFile, Path resultsFile) throws Exception {
        List<Map<String, Object>> results = new ArrayList<>();
        try (MiniCluster cluster = cluster()) {
            for (JsonNode request : JSON.readTree(requestsFile.toFile())) {
                Map<String, Object> result = new TreeMap<>();
                result.put("state", request.path("state").asText());
                result.put("ok", false);
                try {
                    result.put("values", restoreOne(cluster, request));
                    result.put("ok", true);
                } catch (Throwable e) {
                    result.put("error", chain(e));
                }
                results.add(result);
            }
        }
        JSON.writeValue(resultsFile.toFile(), results);
    }

    static Object restoreOne(MiniCluster cluster, JsonNode request) throws Exception {
        boolean strict = request.has("states");
        List<String> states = new ArrayList<>();
        if (strict) {
            request.get("states").forEach(state -> states.add(state.asText()));
        } else {
            states.add(request.get("state").asText());
        }
        Map<String, String> c = new HashMap<>(config(request.get("backend").asText()).toMap());
        c.put("execution.state-recovery.path", request.get("savepoint").asText());
        c.put("execution.state-recovery.ignore-unclaimed-state", String.valueOf(!strict));
        c.put("execution.state-recovery.claim-mode", "NO_CLAIM");
        Configuration conf = Configuration.fromMap(c);
        dump.clear();
        dumped.set(0);
        JobGraph job = build(conf, states, true);
        job.setSavepointRestoreSettings(SavepointRestoreSettings.fromConfiguration(conf));
        cluster.submitJob(job).get(60, TimeUnit.SECONDS);
        try {
            await(cluster, job.getJobID(), () -> dumped.get() == states.size());
            if (request.has("savepoint_out")) {
                savepoint(cluster, job, Paths.get(request.get("savepoint_out").asText()),
                        request.get("format").asText());
            }
            return strict ? new TreeMap<>(dump) : dump.get(states.get(0));
        } finally {
            if (!cluster.getJobStatus(job.getJobID()).get(10, TimeUnit.SECONDS).isGloballyTerminalState()) {
                cluster.cancelJob(job.getJobID()).get(60, TimeUnit.SECONDS);
            }
            cluster.requestJobResult(job.getJobID()).get(120, TimeUnit.SECONDS);
        }
    }

    interface Condition {
        boolean holds();
    }

    /** Waits for `condition`; a job that ends first throws its failure. */
    static void await(MiniCluster cluster, JobID job, Condition condition) throws Exception {
        long deadline = System.currentTimeMillis() + 120_000;
        while (!condition.holds()) {
            JobStatus status = cluster.getJobStatus(job).get(10, TimeUnit.SECONDS);
            if (status.isGloballyTerminalState()) {
                Throwable cause = cluster.requestJobResult(job).get(60, TimeUnit.SECONDS).getSerializedThrowable()
                        .map(t -> t.deserializeError(EvolutionJob.class.getClassLoader())).orElse(null);
                throw new IllegalStateException("job " + status, cause);
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("timed out, job " + status);
            }
            Thread.sleep(5);
        }
    }

    /** "Class: message | caused by Class: message ..." over the cause chain. */
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
