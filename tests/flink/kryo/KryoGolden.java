/*
 * Golden Kryo bytes for tests/formats/values/test_kryo.py: JDK values serialized by Flink's own
 * KryoSerializer (Kryo 2.24 in Flink 1.x, Kryo 5.6 in Flink 2.x), one JSON line per value:
 *   {"case", "type" (the serializer's class), "snapshot" (hex of its versioned snapshot, on the
 *    first line of each type only),
 *    "hex" (the value's bytes), "raw" (a value statectl must leave undecoded), "json"}
 * "json" follows docs/values.md, computed here from the Java value (independent of statectl).
 *
 * Regenerate (from the repository root, per version: 1.20.3 for Kryo 2, 2.3.0 for Kryo 5):
 *   V=1.20.3; L=".cache/flink/$V/pyflink/lib/*"; D=/tmp/kryo-golden-$V
 *   javac -nowarn -d $D -cp "$L" tests/flink/kryo/KryoGolden.java
 *   java --add-opens java.base/java.util=ALL-UNNAMED --add-opens java.base/java.lang=ALL-UNNAMED \
 *     --add-opens java.base/java.math=ALL-UNNAMED --add-opens java.base/java.net=ALL-UNNAMED \
 *     --add-opens java.sql/java.sql=ALL-UNNAMED --add-opens java.base/java.util.concurrent=ALL-UNNAMED \
 *     -cp "$D:$L" statectl.kryo.KryoGolden > tests/fixtures/kryo/$V.jsonl
 * flink-scala is in lib/ as in the default distribution, so 1.x uses chill's Scala instantiator.
 */
package statectl.kryo;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializer;
import org.apache.flink.core.memory.DataOutputSerializer;

import java.lang.reflect.Array;
import java.lang.reflect.Constructor;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.net.URI;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.*;
import java.util.concurrent.TimeUnit;

public class KryoGolden {

    /** Not a JDK class: Kryo's FieldSerializer writes it, statectl leaves it raw. */
    public static class Opaque {
        public String s = "s";
        public int v = 1;
    }

    private static final StringBuilder OUT = new StringBuilder();
    private static final Set<Class<?>> SNAPSHOT_WRITTEN = new HashSet<>();

    public static void main(String[] args) throws Exception {
        String longAscii = "x".repeat(200);
        String shared = new String("shared-string"); // one object, written twice: a back-reference
        ArrayList<Object> inner = new ArrayList<>(List.of("in", 1));
        java.sql.Timestamp ts = new java.sql.Timestamp(1700000000123L);
        ts.setNanos(123456789);
        java.sql.Timestamp before = new java.sql.Timestamp(-1500L);

        Object[][] cases = {
            {"null", null},
            {"string", "hello"},
            {"string-empty", ""},
            {"string-one", "s"},
            {"string-40", "a".repeat(40)},
            {"string-64", "b".repeat(64)},
            {"string-long", longAscii},
            {"string-non-ascii", "é-ключ"},
            {"string-pair", "𝄞-clef"},
            {"string-nul", "a\u0000b"},
            {"int", 5},
            {"int-min", Integer.MIN_VALUE},
            {"long", -5000000000L},
            {"long-max", Long.MAX_VALUE},
            {"long-min", Long.MIN_VALUE},
            {"short", (short) -2},
            {"byte", (byte) -3},
            {"char", 'é'},
            {"boolean", true},
            {"float", 1.5f},
            {"float-nan", Float.NaN},
            {"double", -0.25},
            {"double-inf", Double.NEGATIVE_INFINITY},
            {"biginteger", new BigInteger("-123456789012345678901234567890")},
            {"biginteger-zero", BigInteger.ZERO},
            {"bigdecimal", new BigDecimal("12.345")},
            {"bigdecimal-big", new BigDecimal("-98765432109876543210.0001")},
            {"bigdecimal-exp", new BigDecimal("1E+5")},
            {"date", new Date(1700000000123L)},
            {"date-before-1970", new Date(-1L)},
            {"sql-date", new java.sql.Date(1704067200000L)},
            {"sql-time", new java.sql.Time(1260000L)},
            {"timestamp", ts},
            {"timestamp-before-1970", before},
            {"uuid", UUID.fromString("123e4567-e89b-12d3-a456-426614174000")},
            {"uri", URI.create("https://example.com/a?b=c")},
            {"enum-jdk", TimeUnit.SECONDS},
            {"arraylist", new ArrayList<>(Arrays.asList("a", 1, null))},
            {"arraylist-strings", new ArrayList<>(List.of("x", "y", "z"))},
            {"arraylist-ints-null", new ArrayList<>(Arrays.asList(1, null, 2))},
            {"arraylist-nulls", new ArrayList<>(Arrays.asList(null, null))},
            {"arraylist-empty", new ArrayList<>()},
            {"arraylist-enums", new ArrayList<>(List.of(TimeUnit.DAYS, TimeUnit.DAYS))},
            {"linkedlist", new LinkedList<>(List.of(1L, 2L))},
            {"hashmap", new HashMap<>(Map.of("k", "v", "n", 1))},
            {"hashmap-null", mapOf("k", null)},
            {"hashmap-int-keys", new HashMap<>(Map.of(1, "a", 2, "b"))},
            {"hashmap-empty", new HashMap<>()},
            {"linkedhashmap", linked("z", 1, "a", 2)},
            {"treemap", new TreeMap<>(Map.of("b", 2L, "a", 1L))},
            {"hashset", new HashSet<>(List.of(3, 1, 2))},
            {"linkedhashset", new LinkedHashSet<>(List.of("b", "a"))},
            {"treeset", new TreeSet<>(List.of("y", "x"))},
            {"treeset-empty", new TreeSet<>()},
            {"nested", new ArrayList<>(List.of(new HashMap<>(Map.of("a", new ArrayList<>())), linked("b", new ArrayList<>(List.of(1.5))))) },
            {"map-of-lists", linked("l", new ArrayList<>(List.of("x")), "m", new LinkedList<>(List.of(2)))},
            {"shared-list", new ArrayList<>(List.of(inner, inner))},
            {"shared-string", new ArrayList<>(List.of(shared, shared))},
            {"bytes", new byte[] {1, -2, 3}},
            {"ints", new int[] {1, -1, 300}},
            {"longs", new long[] {Long.MIN_VALUE, 0}},
            {"shorts", new short[] {-1, 2}},
            {"chars", new char[] {'a', 'é'}},
            {"booleans", new boolean[] {true, false}},
            {"floats", new float[] {0.5f, Float.POSITIVE_INFINITY}},
            {"doubles", new double[] {2.5, Double.NaN}},
            {"strings", new String[] {"a", null, "a"}},
            {"objects", new Object[] {1, "x", null}},
            {"integers", new Integer[] {1, null}},
            {"ints-2d", new int[][] {{1}, null, {}}},
            {"arrays-aslist", Arrays.asList("a", "b")},
            {"empty-list", Collections.emptyList()},
            {"empty-map", Collections.emptyMap()},
            {"empty-set", Collections.emptySet()},
            {"singleton-list", Collections.singletonList("x")},
            {"singleton-map", Collections.singletonMap("k", 1)},
            {"singleton-set", Collections.singleton(2)},
            {"user-class", new Opaque()},
            {"list-of-user-class", new ArrayList<>(List.of(new Opaque()))},
        };
        for (Object[] c : cases) {
            emit((String) c[0], Object.class, c[1]);
        }
        // Declared types take registration id 85 (class tag 0x57).
        emit("declared-arraylist", ArrayList.class, new ArrayList<>(List.of("y")));
        emit("declared-hashmap", HashMap.class, new HashMap<>(Map.of("h", 5)));
        emit("declared-null", ArrayList.class, null);
        emit("declared-user-class", Opaque.class, new Opaque());
        System.out.print(OUT);
    }

    @SafeVarargs
    private static <K, V> LinkedHashMap<K, V> linked(Object... kv) {
        LinkedHashMap<K, V> map = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            @SuppressWarnings("unchecked")
            K k = (K) kv[i];
            @SuppressWarnings("unchecked")
            V v = (V) kv[i + 1];
            map.put(k, v);
        }
        return map;
    }

    private static HashMap<Object, Object> mapOf(Object k, Object v) {
        HashMap<Object, Object> map = new HashMap<>();
        map.put(k, v);
        return map;
    }

    // --- serializing -----------------------------------------------------------------------

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void emit(String name, Class<?> type, Object value) throws Exception {
        TypeSerializer serializer = kryoSerializer(type);
        DataOutputSerializer out = new DataOutputSerializer(64);
        serializer.serialize(value, out);
        DataOutputSerializer snap = new DataOutputSerializer(256);
        TypeSerializerSnapshot.writeVersionedSnapshot(snap, serializer.snapshotConfiguration());
        boolean raw = value instanceof Opaque || (value instanceof List && ((List<?>) value).stream().anyMatch(v -> v instanceof Opaque));
        OUT.append("{\"case\":").append(str(name))
            .append(",\"type\":").append(str(type.getName()))
            .append(SNAPSHOT_WRITTEN.add(type) ? ",\"snapshot\":" + str(hex(snap.getCopyOfBuffer())) : "")
            .append(",\"hex\":").append(str(hex(out.getCopyOfBuffer())))
            .append(",\"raw\":").append(raw)
            .append(",\"json\":").append(raw ? "null" : json(value))
            .append("}\n");
    }

    /** 1.x: KryoSerializer(Class, ExecutionConfig); 2.x: KryoSerializer(Class, SerializerConfig). */
    private static TypeSerializer<?> kryoSerializer(Class<?> type) throws Exception {
        for (Constructor<?> c : KryoSerializer.class.getConstructors()) {
            Class<?>[] params = c.getParameterTypes();
            if (params.length != 2 || params[0] != Class.class) {
                continue;
            }
            String config = params[1].getName();
            if (config.equals("org.apache.flink.api.common.ExecutionConfig")) {
                return (TypeSerializer<?>) c.newInstance(type, params[1].getConstructor().newInstance());
            }
            if (config.equals("org.apache.flink.api.common.serialization.SerializerConfig")) {
                Object impl = Class.forName("org.apache.flink.api.common.serialization.SerializerConfigImpl")
                    .getConstructor().newInstance();
                return (TypeSerializer<?>) c.newInstance(type, impl);
            }
        }
        throw new IllegalStateException("no KryoSerializer(Class, config) constructor");
    }

    private static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder();
        for (byte b : bytes) {
            sb.append(String.format("%02x", b & 0xFF));
        }
        return sb.toString();
    }

    // --- JSON by docs/values.md ---------------------------------------------------------------

    private static String json(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof String || v instanceof Character || v instanceof URI || v instanceof UUID) {
            return str(v.toString());
        }
        if (v instanceof Float || v instanceof Double) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d)) return str("NaN");
            if (Double.isInfinite(d)) return str(d > 0 ? "Infinity" : "-Infinity");
            return Double.toString(d);
        }
        if (v instanceof BigDecimal) return str(((BigDecimal) v).toPlainString());
        if (v instanceof BigInteger) return str(v.toString());
        if (v instanceof Number || v instanceof Boolean) return v.toString();
        if (v instanceof Enum) return str(((Enum<?>) v).name());
        if (v instanceof java.sql.Timestamp) {
            java.sql.Timestamp t = (java.sql.Timestamp) v;
            return str(iso(Math.floorDiv(t.getTime(), 1000L), t.getNanos()) + "Z");
        }
        if (v instanceof java.sql.Date) {
            return str(LocalDateTime.ofEpochSecond(Math.floorDiv(((Date) v).getTime(), 1000L), 0, ZoneOffset.UTC).toLocalDate().toString());
        }
        if (v instanceof java.sql.Time) {
            long ms = Math.floorMod(((Date) v).getTime(), 86_400_000L);
            return str(iso(ms / 1000, (int) (ms % 1000) * 1_000_000).substring(11));
        }
        if (v instanceof Date) {
            long ms = ((Date) v).getTime();
            return str(iso(Math.floorDiv(ms, 1000L), (int) Math.floorMod(ms, 1000L) * 1_000_000) + "Z");
        }
        if (v instanceof byte[]) return str(Base64.getEncoder().encodeToString((byte[]) v));
        if (v.getClass().isArray()) {
            List<Object> items = new ArrayList<>();
            for (int i = 0; i < Array.getLength(v); i++) items.add(Array.get(v, i));
            return list(items, false);
        }
        if (v instanceof Set) return list((Set<?>) v, true);
        if (v instanceof Collection) return list((Collection<?>) v, false);
        if (v instanceof Map) return map((Map<?, ?>) v);
        throw new IllegalArgumentException("no JSON rule for " + v.getClass());
    }

    private static String iso(long seconds, int nanos) {
        String text = LocalDateTime.ofEpochSecond(seconds, 0, ZoneOffset.UTC).toString();
        if (text.length() == 16) text += ":00"; // LocalDateTime omits zero seconds
        if (nanos != 0) text += "." + String.format("%09d", nanos).replaceAll("0+$", "");
        return text;
    }

    private static String list(Collection<?> items, boolean sorted) {
        List<String> parts = new ArrayList<>();
        for (Object item : items) parts.add(json(item));
        if (sorted) Collections.sort(parts);
        return "[" + String.join(",", parts) + "]";
    }

    private static String map(Map<?, ?> m) {
        boolean stringKeys = m.keySet().stream().allMatch(k -> k instanceof String);
        List<String> parts = new ArrayList<>();
        for (Map.Entry<?, ?> e : m.entrySet()) {
            parts.add(stringKeys ? json(e.getKey()) + ":" + json(e.getValue())
                : "[" + json(e.getKey()) + "," + json(e.getValue()) + "]");
        }
        Collections.sort(parts);
        return (stringKeys ? "{" : "[") + String.join(",", parts) + (stringKeys ? "}" : "]");
    }

    private static String str(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') sb.append('\\').append(c);
            else if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
            else sb.append(c);
        }
        return sb.append('"').toString();
    }
}
