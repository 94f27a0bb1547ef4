package statectl.values;

import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;

import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The data of the values job: the user types its states hold, the records, and the small
 * reflection shims for the APIs that differ between Flink 1.15-1.20 and 2.x.
 */
public final class Model {
    private Model() {}

    /** Record: (key, key index, sequence number). */
    public static final TypeInformation<Tuple3<String, Integer, Long>> EVENT =
            Types.TUPLE(Types.STRING, Types.INT, Types.LONG);

    public static final String[] KEYS;
    public static final int ROUNDS = 2;
    /** Event time of record 0: 2023-11-14T22:13:20Z; record j is 2j minutes later (two 1-hour windows). */
    public static final long EPOCH = 1_700_000_000_000L;
    /** 2100-01-01: timers never fire. */
    public static final long TIMER_BASE = 4_102_444_800_000L;

    static {
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < 13; i++) {
            keys.add(String.format("k%02d", i));
        }
        keys.add("\u00e9-\u043a\u043b\u044e\u0447"); // é-ключ
        keys.add("\uD834\uDD1E-clef"); // 𝄞-clef (surrogate pair)
        keys.add(""); // the empty string
        KEYS = keys.toArray(new String[0]);
    }

    public static int records() {
        return KEYS.length * ROUNDS;
    }

    /** Record j = (KEYS[j % n], j % n, j), event time EPOCH + 2j minutes. */
    public static Tuple3<String, Integer, Long> event(int j) {
        return Tuple3.of(KEYS[j % KEYS.length], j % KEYS.length, (long) j);
    }

    public static long timestamp(int j) {
        return EPOCH + j * 120_000L;
    }

    // ------------------------------------------------------------------ user types

    public enum Color {
        RED, GREEN, BLUE, VIOLET
    }

    /** A nested POJO. */
    public static class Inner {
        public String label;
        public int n;

        public Inner() {}

        public Inner(String label, int n) {
            this.label = label;
            this.n = n;
        }
    }

    /**
     * The main POJO. Its List/Map/Set fields are Kryo (GenericType) in 1.x and List/Map/Set
     * serializers in 2.x.
     */
    public static class Pojo {
        public long id;
        public int count;
        public String name;
        public Double score;
        public Inner inner;
        public Color color;
        public List<String> tags;
        public Map<String, Long> counts;
        public Set<Integer> codes;
        public byte[] payload;
        public transient String ignored = "transient";
        public static String STATIC_IGNORED = "static";

        public Pojo() {}
    }

    public static Pojo pojo(int i, long n) {
        Pojo p = new Pojo();
        p.id = 1_000_000_000_000L * (i % 3) + i * 10L + n;
        p.count = i - 7;
        p.name = i % 7 == 3 ? null : "pojo-" + KEYS[i];
        p.score = i % 4 == 1 ? null : i * 1.5 + n;
        p.inner = i % 5 == 2 ? null : new Inner("in" + i, i * 3);
        p.color = i % 6 == 5 ? null : Color.values()[i % Color.values().length];
        if (i % 4 != 3) {
            p.tags = new ArrayList<>(List.of("t" + i, "x", "é" + n));
            p.counts = new java.util.HashMap<>(Map.of("a", (long) i, "b" + i, -n));
            p.codes = new java.util.HashSet<>(Set.of(i, 100 + i, -i - 1));
        } else {
            p.tags = new ArrayList<>();
            p.counts = new java.util.HashMap<>();
            p.codes = new java.util.HashSet<>();
        }
        p.payload = i % 5 == 4 ? null : ("p" + i).getBytes(StandardCharsets.UTF_8);
        return p;
    }

    /** Base of the subclass states. */
    public static class Animal {
        public String name;
        public int legs;

        public Animal() {}
    }

    /** Registered with registerPojoType: a subclass tag in the bytes. */
    public static class Dog extends Animal {
        public boolean goodBoy;
        public Double weight;

        public Dog() {}
    }

    /** Not registered: the class name in the bytes. */
    public static class Cat extends Animal {
        public String mood;
        public long lives;

        public Cat() {}
    }

    /** No default constructor, JDK-typed fields: Kryo's FieldSerializer (statectl keeps it raw). */
    public static final class Opaque {
        private final String label;
        private final Long amount;
        private final int[] codes;

        public Opaque(String label, Long amount, int[] codes) {
            this.label = label;
            this.amount = amount;
            this.codes = codes;
        }

        @Override
        public String toString() {
            return "Opaque(" + label + ", " + amount + ")";
        }
    }

    /**
     * No default constructor, fields of generic collection types: Kryo's FieldSerializer hands
     * their type arguments to CollectionSerializer and MapSerializer, which then write the
     * elements of a final class (String, Long, Integer, Color) without class tags; Kryo 5 also
     * those of the nested List of {@code groups} and {@code rows}, and writes them otherwise than
     * Kryo 2. The state {@code kryo-generic} ({@link States#EXTRA}).
     */
    public static final class Tagged {
        private final String name;
        private final List<String> tags;
        private final Map<String, Long> counts;
        private final Set<Integer> ids;
        private final Map<String, List<Integer>> groups;
        private final List<List<String>> rows;
        private final List<Color> colors;
        private final java.util.TreeMap<String, Long> sorted;
        private final List<? extends Number> numbers;

        public Tagged(String name, List<String> tags, Map<String, Long> counts, Set<Integer> ids,
                Map<String, List<Integer>> groups, List<List<String>> rows, List<Color> colors,
                java.util.TreeMap<String, Long> sorted, List<? extends Number> numbers) {
            this.name = name;
            this.tags = tags;
            this.counts = counts;
            this.ids = ids;
            this.groups = groups;
            this.rows = rows;
            this.colors = colors;
            this.sorted = sorted;
            this.numbers = numbers;
        }

        @Override
        public String toString() {
            return "Tagged(" + name + ")";
        }
    }

    /** The {@code kryo-generic} value of key i after round n: nulls, empty and shared elements. */
    public static Tagged tagged(int i, long n) {
        List<String> tags = i % 5 == 4 ? null : new ArrayList<>();
        if (tags != null && i % 5 != 3) {
            String shared = "shared-" + i; // one object twice: a back-reference
            tags.add("t" + i);
            tags.add(shared);
            tags.add(shared);
            tags.add(KEYS[i]);
            if (i % 2 == 0) {
                tags.add(null);
            }
        }
        Map<String, Long> counts = new java.util.HashMap<>();
        counts.put("a" + i, i * 1000L + n);
        counts.put("min", Long.MIN_VALUE);
        if (i % 3 == 0) {
            counts.put("none", null);
        }
        Set<Integer> ids = new java.util.HashSet<>(List.of(i, -i - 1, 1000 + i));
        if (i % 4 == 1) {
            ids.add(null);
        }
        Map<String, List<Integer>> groups = new java.util.HashMap<>();
        List<Integer> group = new ArrayList<>(List.of(i, 2 * i));
        if (i % 3 == 1) {
            group.add(null);
        }
        groups.put("g" + i, group);
        groups.put("empty", new ArrayList<>());
        List<List<String>> rows = i % 6 == 5 ? null
                : new ArrayList<>(List.of(new ArrayList<>(List.of("r" + n, KEYS[i])), new ArrayList<>()));
        List<Color> colors = new ArrayList<>(List.of(Color.RED, Color.values()[i % Color.values().length]));
        if (i % 2 == 1) {
            colors.add(null);
        }
        java.util.TreeMap<String, Long> sorted = new java.util.TreeMap<>(Map.of("z", (long) i, "a", n));
        List<Long> numbers = new ArrayList<>(List.of((long) i, -n));
        return new Tagged(i % 7 == 6 ? null : "tagged-" + i, tags, counts, ids, groups, rows, colors, sorted, numbers);
    }

    // ------------------------------------------------------------------ shims 1.x / 2.x

    /** A TTL config with a 10-year TTL (nothing expires), no cleanupFullSnapshot. */
    public static StateTtlConfig ttlConfig() {
        try {
            Object builder = null;
            for (Method m : StateTtlConfig.class.getMethods()) {
                if (m.getName().equals("newBuilder") && m.getParameterCount() == 1
                        && m.getParameterTypes()[0] == Duration.class) {
                    builder = m.invoke(null, Duration.ofDays(3650));
                }
            }
            if (builder == null) { // 1.x: newBuilder(org.apache.flink.api.common.time.Time)
                Class<?> time = Class.forName("org.apache.flink.api.common.time.Time");
                Object t = time.getMethod("days", long.class).invoke(null, 3650L);
                builder = StateTtlConfig.class.getMethod("newBuilder", time).invoke(null, t);
            }
            return ((StateTtlConfig.Builder) builder).build();
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /** TumblingEventTimeWindows.of(1 hour): of(Duration) in 2.x, of(Time) in 1.x. */
    public static TumblingEventTimeWindows hourWindows() {
        try {
            try {
                return (TumblingEventTimeWindows) TumblingEventTimeWindows.class
                        .getMethod("of", Duration.class).invoke(null, Duration.ofHours(1));
            } catch (NoSuchMethodException e) {
                Class<?> time = Class.forName("org.apache.flink.streaming.api.windowing.time.Time");
                Object t = time.getMethod("hours", long.class).invoke(null, 1L);
                return (TumblingEventTimeWindows) TumblingEventTimeWindows.class.getMethod("of", time).invoke(null, t);
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /** ExecutionConfig.registerPojoType (1.x) or SerializerConfigImpl.registerPojoType (2.x). */
    public static void registerPojoType(ExecutionConfig config, Class<?> type) {
        try {
            try {
                ExecutionConfig.class.getMethod("registerPojoType", Class.class).invoke(config, type);
            } catch (NoSuchMethodException e) {
                Object serializerConfig = ExecutionConfig.class.getMethod("getSerializerConfig").invoke(config);
                Method m = serializerConfig.getClass().getMethod("registerPojoType", Class.class);
                m.setAccessible(true);
                m.invoke(serializerConfig, type);
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /** getIndexOfThisSubtask (1.x) or getTaskInfo().getIndexOfThisSubtask() (2.x). */
    public static int subtaskIndex(RuntimeContext context) {
        return taskInfo(context, "getIndexOfThisSubtask");
    }

    public static int parallelism(RuntimeContext context) {
        return taskInfo(context, "getNumberOfParallelSubtasks");
    }

    private static int taskInfo(RuntimeContext context, String name) {
        try {
            try {
                return (Integer) RuntimeContext.class.getMethod(name).invoke(context);
            } catch (NoSuchMethodException e) {
                Object info = RuntimeContext.class.getMethod("getTaskInfo").invoke(context);
                return (Integer) info.getClass().getMethod(name).invoke(info);
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /** murmur3_128 (seed 0) of the uid, through whichever shaded Guava this Flink ships. */
    public static String operatorId(String uid) {
        try {
            for (String guava : new String[] {"guava33", "guava32", "guava31", "guava30", "guava18"}) {
                String pkg = "org.apache.flink.shaded." + guava + ".com.google.common.hash.";
                Class<?> hashing;
                try {
                    hashing = Class.forName(pkg + "Hashing");
                } catch (ClassNotFoundException e) {
                    continue;
                }
                Object function = hashing.getMethod("murmur3_128", int.class).invoke(null, 0);
                Object code = Class.forName(pkg + "HashFunction")
                        .getMethod("hashString", CharSequence.class, java.nio.charset.Charset.class)
                        .invoke(function, uid, StandardCharsets.UTF_8);
                return HexFormat.of().formatHex((byte[]) Class.forName(pkg + "HashCode").getMethod("asBytes").invoke(code));
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
        throw new IllegalStateException("no shaded Guava found");
    }
}
