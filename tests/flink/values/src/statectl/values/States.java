package statectl.values;

import org.apache.flink.api.common.typeinfo.BasicArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.BasicTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.types.Either;
import org.apache.flink.types.LongValue;
import org.apache.flink.types.Row;
import org.apache.flink.types.StringValue;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;

import statectl.values.Model.Animal;
import statectl.values.Model.Cat;
import statectl.values.Model.Color;
import statectl.values.Model.Dog;
import statectl.values.Model.Opaque;
import statectl.values.Model.Pojo;

/**
 * The VALUE states of the keyed operator {@code values}: name, TypeInformation, and the value of
 * key index i after its n-th record (n = 0, 1, 2; null: the key has no value in that state).
 */
public final class States {
    private States() {}

    public static final class ValueDef {
        public final String name;
        public final TypeInformation<?> type;
        public final BiFunction<Integer, Long, Object> value;
        public final String java;

        ValueDef(String name, String java, TypeInformation<?> type, BiFunction<Integer, Long, Object> value) {
            this.name = name;
            this.java = java;
            this.type = type;
            this.value = value;
        }
    }

    public static final List<ValueDef> VALUES = new ArrayList<>();
    /**
     * VALUE states the job registers only when asked ({@code Operators.extra}: the write mode's
     * {@code --extra=NAME}, a restore request's {@code extra}), so that the committed fixtures
     * stay as they are.
     */
    public static final Map<String, ValueDef> EXTRA = new LinkedHashMap<>();

    /** The VALUE states of this run: VALUES, then the EXTRA ones {@code Operators.extra} names. */
    public static List<ValueDef> active() {
        List<ValueDef> active = new ArrayList<>(VALUES);
        for (ValueDef d : EXTRA.values()) {
            if (Operators.extra.contains(d.name)) {
                active.add(d);
            }
        }
        return active;
    }

    private static void v(String name, String java, TypeInformation<?> type, BiFunction<Integer, Long, Object> value) {
        VALUES.add(new ValueDef(name, java, type, value));
    }

    /** Every state of the job: uid -> [name, kind, Java type]. */
    public static final Map<String, List<String[]>> ALL = new LinkedHashMap<>();

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void defineValues() {
        v("pojo", "Pojo", Types.POJO(Pojo.class), Model::pojo);
        v("pojo-subclass-registered", "Animal (Dog registered)", Types.POJO(Animal.class), (i, n) -> {
            if (i % 2 == 0) {
                Dog d = new Dog();
                d.name = "dog-" + i;
                d.legs = 4;
                d.goodBoy = i % 4 == 0;
                d.weight = i % 3 == 0 ? null : 10.5 + i;
                return d;
            }
            Animal a = new Animal();
            a.name = "animal-" + i;
            a.legs = 2;
            return a;
        });
        v("pojo-subclass-unregistered", "Animal (Cat not registered)", Types.POJO(Animal.class), (i, n) -> {
            if (i % 3 != 0) {
                Cat c = new Cat();
                c.name = i % 5 == 1 ? null : "cat-" + i;
                c.legs = 4;
                c.mood = i % 2 == 0 ? "grumpy" : "sleepy";
                c.lives = 9 - i % 9;
                return c;
            }
            Animal a = new Animal();
            a.name = "animal-" + i;
            a.legs = 6;
            return a;
        });
        v("tuple2", "Tuple2<String,Long>", Types.TUPLE(Types.STRING, Types.LONG),
                (i, n) -> Tuple2.of("t" + i, i * 1_000_000_007L * (i % 2 == 0 ? 1 : -1)));
        v("tuple3", "Tuple3<Integer,String,Double>", Types.TUPLE(Types.INT, Types.STRING, Types.DOUBLE),
                (i, n) -> Tuple3.of(i - 5, i % 4 == 0 ? null : "s" + i, i / 4.0));
        v("row", "Row(STRING, LONG, DOUBLE)", Types.ROW(Types.STRING, Types.LONG, Types.DOUBLE),
                (i, n) -> Row.of(i % 3 == 0 ? null : "r" + i, (long) i * i, i % 5 == 0 ? null : i + 0.25));
        v("row-named", "Row(name STRING, count INT, active BOOLEAN)",
                Types.ROW_NAMED(new String[] {"name", "count", "active"}, Types.STRING, Types.INT, Types.BOOLEAN),
                // position-based values: Flink's heap snapshot cannot write name-based rows (its
                // snapshot-time RowSerializer has no field names)
                (i, n) -> Row.of("named-" + i, i * 7, i % 4 == 3 ? null : i % 2 == 0));
        v("enum", "Color", Types.ENUM(Color.class), (i, n) -> Color.values()[i % Color.values().length]);
        v("bytes", "byte[]", Types.PRIMITIVE_ARRAY(Types.BYTE), (i, n) -> {
            byte[] b = new byte[i % 6 == 0 ? 0 : i % 7 + 1];
            for (int k = 0; k < b.length; k++) {
                b[k] = (byte) (i * 37 + k * 101);
            }
            return b;
        });
        v("long-array", "long[]", Types.PRIMITIVE_ARRAY(Types.LONG),
                (i, n) -> i == 0 ? new long[0] : new long[] {i, -i, Long.MAX_VALUE, Long.MIN_VALUE + i});
        v("int-array", "int[]", Types.PRIMITIVE_ARRAY(Types.INT), (i, n) -> new int[] {i, i * -3, Integer.MIN_VALUE});
        v("double-array", "double[]", Types.PRIMITIVE_ARRAY(Types.DOUBLE),
                (i, n) -> new double[] {i + 0.5, i == 5 ? Double.NaN : 1e300 * i, -1.0E-7, i == 6 ? Double.NEGATIVE_INFINITY : 0.1});
        v("boolean-array", "boolean[]", Types.PRIMITIVE_ARRAY(Types.BOOLEAN),
                (i, n) -> new boolean[] {i % 2 == 0, true, i % 3 == 0});
        v("char-array", "char[]", Types.PRIMITIVE_ARRAY(Types.CHAR), (i, n) -> ("c" + i + "\u00e9").toCharArray());
        v("string-array", "String[]", BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO,
                (i, n) -> new String[] {"a" + i, i % 3 == 0 ? null : "b", Model.KEYS[i]});
        v("boxed-long-array", "Long[]", BasicArrayTypeInfo.LONG_ARRAY_TYPE_INFO,
                (i, n) -> new Long[] {(long) i, i % 4 == 0 ? null : -7L * i});
        v("bigdecimal", "BigDecimal", Types.BIG_DEC, (i, n) -> {
            switch (i % 4) {
                case 0:
                    return new BigDecimal("12345.678900").add(BigDecimal.valueOf(i));
                case 1:
                    return new BigDecimal("1E+3").multiply(BigDecimal.valueOf(i));
                case 2:
                    return new BigDecimal("-0.000000000000000001").multiply(BigDecimal.valueOf(i));
                default:
                    return new BigDecimal("98765432109876543210.0123456789").negate();
            }
        });
        v("biginteger", "BigInteger", Types.BIG_INT,
                (i, n) -> BigInteger.TWO.pow(100).multiply(BigInteger.valueOf(i % 2 == 0 ? 1 : -1)).add(BigInteger.valueOf(i)));
        v("util-date", "java.util.Date", BasicTypeInfo.DATE_TYPE_INFO,
                (i, n) -> new java.util.Date(Model.EPOCH + i * 86_400_123L - (i % 2) * 123L));
        v("sql-date", "java.sql.Date", Types.SQL_DATE, (i, n) -> new java.sql.Date((19723L + i * 37) * 86_400_000L));
        v("sql-time", "java.sql.Time", Types.SQL_TIME, (i, n) -> new java.sql.Time(45_296_000L + i * 1000L + (i % 2) * 123L));
        v("sql-timestamp", "java.sql.Timestamp", Types.SQL_TIMESTAMP, (i, n) -> {
            java.sql.Timestamp ts = new java.sql.Timestamp(Model.EPOCH + i * 1000L);
            ts.setNanos(i % 3 == 0 ? 0 : i % 3 == 1 ? 123_456_789 - i : 500_000_000);
            return ts;
        });
        v("instant", "Instant", Types.INSTANT,
                (i, n) -> Instant.ofEpochSecond(1_700_000_000L + i * 3600L, i % 3 == 0 ? 0 : i % 3 == 1 ? 123_456_789L : 120_000_000L));
        v("local-date", "LocalDate", Types.LOCAL_DATE, (i, n) -> LocalDate.of(2024, 1, 1).plusDays(i * 40L));
        v("local-time", "LocalTime", Types.LOCAL_TIME,
                (i, n) -> LocalTime.of(i, 21, i, i % 2 == 0 ? 0 : 500_000_000 + i));
        v("local-date-time", "LocalDateTime", Types.LOCAL_DATE_TIME,
                (i, n) -> LocalDateTime.of(2024, 1, 1, 0, 21).plusHours(i).withNano(i % 3 == 0 ? 0 : i % 3 == 1 ? 123_000_000 : 123));
        v("long-value", "LongValue", Types.VALUE(LongValue.class), (i, n) -> new LongValue(i * 11L - 50));
        v("string-value", "StringValue", Types.VALUE(StringValue.class), (i, n) -> new StringValue("sv-" + Model.KEYS[i]));
        v("either", "Either<String,Long>", Types.EITHER(Types.STRING, Types.LONG),
                (i, n) -> i % 2 == 0 ? Either.Left("left-" + i) : Either.Right((long) i * 100));
        v("char", "Character", Types.CHAR, (i, n) -> i == 13 ? '\u00e9' : (char) ('A' + i));
        v("short", "Short", Types.SHORT, (i, n) -> (short) (i * -1000 + 7));
        v("byte", "Byte", Types.BYTE, (i, n) -> (byte) (i * 13 - 100));
        v("float", "Float", Types.FLOAT, (i, n) -> {
            if (i % 5 == 3) {
                return Float.NaN;
            }
            if (i == 4) {
                return Float.POSITIVE_INFINITY;
            }
            if (i == 9) {
                return Float.NEGATIVE_INFINITY;
            }
            return i % 2 == 0 ? i * 1.1f : i + 0.25f;
        });
        v("boolean", "Boolean", Types.BOOLEAN, (i, n) -> i % 2 == 0);
        v("string", "String", Types.STRING, (i, n) -> Model.KEYS[i] + "-v" + n);
        v("int", "Integer", Types.INT, (i, n) -> i == 0 ? Integer.MIN_VALUE : i * 1000 + n.intValue());
        v("long", "Long", Types.LONG, (i, n) -> i == 0 ? Long.MIN_VALUE : i == 1 ? Long.MAX_VALUE : i * 1_000_000_000_000L);
        v("double", "Double", Types.DOUBLE, (i, n) -> {
            double[] special = {1e-7, 1.0E22, -0.0, 123.456, 0.1 + 0.2, 1e7, 12345678.9};
            return i < special.length ? special[i] : i / 3.0;
        });
        v("list-long", "List<Long> (Types.LIST)", Types.LIST(Types.LONG), (i, n) -> {
            List<Long> l = new ArrayList<>();
            for (long k = 0; k <= i % 4; k++) {
                l.add(i * 10 + k);
            }
            return l;
        });
        v("map-string-int", "Map<String,Integer> (Types.MAP)", Types.MAP(Types.STRING, Types.INT), (i, n) -> {
            Map<String, Integer> m = new HashMap<>();
            m.put("a" + i, i);
            m.put("b", -i);
            if (i % 4 == 0) {
                m.put("null", null);
            }
            return m;
        });
        v("kryo-arraylist", "ArrayList<String> (GenericTypeInfo: Kryo)", new GenericTypeInfo(ArrayList.class), (i, n) -> {
            ArrayList<String> l = new ArrayList<>();
            l.add("x" + i);
            l.add(Model.KEYS[i]);
            return l;
        });
        v("kryo-hashmap", "HashMap<String,Integer> (GenericTypeInfo: Kryo)", new GenericTypeInfo(HashMap.class), (i, n) -> {
            HashMap<String, Integer> m = new HashMap<>();
            m.put("h" + i, i);
            m.put("z", -1);
            return m;
        });
        v("kryo-object", "Object holding a String or a Long (GenericTypeInfo<Object>: Kryo)", new GenericTypeInfo<>(Object.class),
                (i, n) -> i % 2 == 0 ? "obj-" + i : (Object) (i * 1000L));
        ValueDef generic = new ValueDef("kryo-generic",
                "Tagged, no default constructor, generic collection fields (GenericTypeInfo: Kryo FieldSerializer)",
                new GenericTypeInfo<>(Model.Tagged.class), Model::tagged);
        EXTRA.put(generic.name, generic);
        v("kryo-custom", "Opaque, no default constructor (GenericTypeInfo: Kryo FieldSerializer)", new GenericTypeInfo<>(Opaque.class),
                (i, n) -> new Opaque("o" + i, i % 3 == 0 ? null : (long) i, new int[] {i, i + 1}));
    }

    static {
        defineValues();
        List<String[]> values = new ArrayList<>();
        for (ValueDef d : VALUES) {
            values.add(new String[] {d.name, "VALUE", d.java});
        }
        values.add(new String[] {"ttl-value", "VALUE", "String, TTL"});
        values.add(new String[] {"pojo-list", "LIST", "Pojo"});
        values.add(new String[] {"tuple2-list", "LIST", "Tuple2<String,Long>"});
        values.add(new String[] {"ttl-list", "LIST", "String, TTL"});
        values.add(new String[] {"pojo-map", "MAP", "String -> Pojo (null values on some keys)"});
        values.add(new String[] {"enum-map", "MAP", "Long -> Color"});
        values.add(new String[] {"ttl-map", "MAP", "String -> Long, TTL"});
        values.add(new String[] {"reducing", "REDUCING", "Long (sum)"});
        values.add(new String[] {"ttl-reducing", "REDUCING", "Long (sum), TTL"});
        values.add(new String[] {"aggregating", "AGGREGATING", "accumulator Tuple2<Long,Long> (sum, count)"});
        values.add(new String[] {"ttl-aggregating", "AGGREGATING", "accumulator Tuple2<Long,Long> (sum, count), TTL"});
        values.add(new String[] {"_timer_state/processing_user-timers", "TIMERS", "String key, VoidNamespace"});
        values.add(new String[] {"_timer_state/event_user-timers", "TIMERS", "String key, VoidNamespace"});
        ALL.put("values", values);
        List<String[]> window = new ArrayList<>();
        window.add(new String[] {"window-contents", "AGGREGATING", "accumulator Long (sum), TimeWindow namespace"});
        window.add(new String[] {"_timer_state/event_window-timers", "TIMERS", "String key, TimeWindow namespace"});
        ALL.put("window", window);
        List<String[]> op = new ArrayList<>();
        op.add(new String[] {"op-list", "LIST", "Pojo (operator list state)"});
        op.add(new String[] {"op-union", "UNION", "Long (union list state)"});
        op.add(new String[] {"op-broadcast", "BROADCAST", "String -> Pojo (broadcast state)"});
        ALL.put("opstate", op);
    }
}
