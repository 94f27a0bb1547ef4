package statectl.values;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.java.tuple.Tuple;
import org.apache.flink.types.BooleanValue;
import org.apache.flink.types.ByteValue;
import org.apache.flink.types.CharValue;
import org.apache.flink.types.DoubleValue;
import org.apache.flink.types.Either;
import org.apache.flink.types.FloatValue;
import org.apache.flink.types.IntValue;
import org.apache.flink.types.LongValue;
import org.apache.flink.types.NullValue;
import org.apache.flink.types.Row;
import org.apache.flink.types.ShortValue;
import org.apache.flink.types.StringValue;

import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * A deserialized Java value as JSON text, by the rules of docs/values.md. The serializer that
 * produced the value is passed along as a hint where it is known: SQL rows (RowData) need the
 * LogicalTypes of their RowDataSerializer; everything else is decided by the runtime class.
 */
public final class Json {
    private Json() {}

    public static String of(Object value, TypeSerializer<?> hint) {
        StringBuilder sb = new StringBuilder();
        write(sb, value, hint, 0);
        return sb.toString();
    }

    static void write(StringBuilder sb, Object v, TypeSerializer<?> hint, int depth) {
        if (depth > 64) {
            throw new IllegalStateException("value nested too deeply (a cycle?)");
        }
        hint = Hints.unwrap(hint);
        if (v == null) {
            sb.append("null");
        } else if (TableJson.AVAILABLE && TableJson.isTableValue(v)) {
            TableJson.write(sb, v, hint, depth);
        } else if (v instanceof String) {
            string(sb, (String) v);
        } else if (v instanceof Character) {
            string(sb, String.valueOf(v));
        } else if (v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Byte || v instanceof Short || v instanceof Integer || v instanceof Long) {
            sb.append(v);
        } else if (v instanceof Float) {
            number(sb, ((Float) v).doubleValue());
        } else if (v instanceof Double) {
            number(sb, (Double) v);
        } else if (v instanceof BigDecimal) {
            string(sb, ((BigDecimal) v).toPlainString());
        } else if (v instanceof BigInteger) {
            string(sb, v.toString());
        } else if (v instanceof byte[]) {
            string(sb, Base64.getEncoder().encodeToString((byte[]) v));
        } else if (v instanceof char[]) {
            char[] chars = (char[]) v;
            sb.append('[');
            for (int k = 0; k < chars.length; k++) {
                if (k > 0) {
                    sb.append(',');
                }
                string(sb, String.valueOf(chars[k]));
            }
            sb.append(']');
        } else if (v.getClass().isArray()) {
            TypeSerializer<?> element = Hints.element(hint);
            sb.append('[');
            for (int k = 0; k < Array.getLength(v); k++) {
                if (k > 0) {
                    sb.append(',');
                }
                write(sb, Array.get(v, k), element, depth + 1);
            }
            sb.append(']');
        } else if (v instanceof java.sql.Timestamp) {
            string(sb, instant(((java.sql.Timestamp) v).toInstant()));
        } else if (v instanceof java.sql.Date) {
            string(sb, Instant.ofEpochMilli(((java.sql.Date) v).getTime()).atOffset(ZoneOffset.UTC).toLocalDate().toString());
        } else if (v instanceof java.sql.Time) {
            string(sb, time(Instant.ofEpochMilli(((java.sql.Time) v).getTime()).atOffset(ZoneOffset.UTC).toLocalTime()));
        } else if (v instanceof java.util.Date) {
            string(sb, instant(Instant.ofEpochMilli(((java.util.Date) v).getTime())));
        } else if (v instanceof Instant) {
            string(sb, instant((Instant) v));
        } else if (v instanceof LocalDateTime) {
            string(sb, dateTime((LocalDateTime) v));
        } else if (v instanceof LocalDate) {
            string(sb, v.toString());
        } else if (v instanceof LocalTime) {
            string(sb, time((LocalTime) v));
        } else if (v instanceof Enum) {
            string(sb, ((Enum<?>) v).name());
        } else if (v instanceof StringValue) {
            string(sb, v.toString());
        } else if (v instanceof CharValue) {
            string(sb, String.valueOf(((CharValue) v).getValue()));
        } else if (v instanceof BooleanValue) {
            sb.append(((BooleanValue) v).getValue());
        } else if (v instanceof ByteValue) {
            sb.append(((ByteValue) v).getValue());
        } else if (v instanceof ShortValue) {
            sb.append(((ShortValue) v).getValue());
        } else if (v instanceof IntValue) {
            sb.append(((IntValue) v).getValue());
        } else if (v instanceof LongValue) {
            sb.append(((LongValue) v).getValue());
        } else if (v instanceof FloatValue) {
            number(sb, ((FloatValue) v).getValue());
        } else if (v instanceof DoubleValue) {
            number(sb, ((DoubleValue) v).getValue());
        } else if (v instanceof NullValue || v instanceof Void) {
            sb.append("null");
        } else if (v instanceof Either) {
            Either<?, ?> e = (Either<?, ?>) v;
            sb.append(e.isLeft() ? "{\"left\":" : "{\"right\":");
            write(sb, e.isLeft() ? e.left() : e.right(), null, depth + 1);
            sb.append('}');
        } else if (v instanceof Tuple) {
            Tuple t = (Tuple) v;
            sb.append('{');
            for (int k = 0; k < t.getArity(); k++) {
                if (k > 0) {
                    sb.append(',');
                }
                string(sb, "f" + k);
                sb.append(':');
                write(sb, t.getField(k), null, depth + 1);
            }
            sb.append('}');
        } else if (v instanceof Row) {
            Row row = (Row) v;
            Set<String> names = row.getFieldNames(false);
            TreeMap<String, String> fields = new TreeMap<>();
            if (names != null) {
                for (String name : names) {
                    fields.put(name, of(row.getField(name), null));
                }
                object(sb, fields);
            } else {
                sb.append('{');
                for (int k = 0; k < row.getArity(); k++) {
                    if (k > 0) {
                        sb.append(',');
                    }
                    string(sb, "f" + k);
                    sb.append(':');
                    write(sb, row.getField(k), null, depth + 1);
                }
                sb.append('}');
            }
        } else if (isNamespace(v, "VoidNamespace") || isNamespace(v, "GlobalWindow")) {
            sb.append("null");
        } else if (isNamespace(v, "TimeWindow")) {
            sb.append("{\"start\":").append(call(v, "getStart")).append(",\"end\":").append(call(v, "getEnd")).append('}');
        } else if (isNamespace(v, "CountWindow")) {
            sb.append("{\"id\":").append(call(v, "getId")).append('}');
        } else if (v instanceof Map) {
            map(sb, (Map<?, ?>) v, Hints.mapKey(hint), Hints.mapValue(hint), depth);
        } else if (v instanceof Set) {
            TypeSerializer<?> element = Hints.element(hint);
            List<String> elements = new ArrayList<>();
            for (Object e : (Set<?>) v) {
                StringBuilder item = new StringBuilder();
                write(item, e, element, depth + 1);
                elements.add(item.toString());
            }
            elements.sort(null);
            sb.append('[').append(String.join(",", elements)).append(']');
        } else if (v instanceof Collection) {
            TypeSerializer<?> element = Hints.element(hint);
            sb.append('[');
            boolean first = true;
            for (Object e : (Collection<?>) v) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                write(sb, e, element, depth + 1);
            }
            sb.append(']');
        } else if (v.getClass().getName().startsWith("java.")) {
            string(sb, v.toString()); // a JDK class no rule covers
        } else {
            pojo(sb, v, depth);
        }
    }

    /** Every non-static, non-transient field of the class and its superclasses, by name. */
    static void pojo(StringBuilder sb, Object v, int depth) {
        TreeMap<String, String> fields = new TreeMap<>();
        for (Class<?> c = v.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                int mod = f.getModifiers();
                if (Modifier.isStatic(mod) || Modifier.isTransient(mod) || f.isSynthetic() || fields.containsKey(f.getName())) {
                    continue;
                }
                try {
                    f.setAccessible(true);
                    StringBuilder item = new StringBuilder();
                    write(item, f.get(v), null, depth + 1);
                    fields.put(f.getName(), item.toString());
                } catch (ReflectiveOperationException | RuntimeException e) {
                    throw new IllegalStateException("cannot read field " + c.getName() + "." + f.getName() + ": " + e, e);
                }
            }
        }
        object(sb, fields);
    }

    static void map(StringBuilder sb, Map<?, ?> m, TypeSerializer<?> keyHint, TypeSerializer<?> valueHint, int depth) {
        boolean stringKeys = true;
        for (Object k : m.keySet()) {
            stringKeys &= k instanceof String;
        }
        if (stringKeys) {
            TreeMap<String, String> fields = new TreeMap<>();
            for (Map.Entry<?, ?> e : m.entrySet()) {
                StringBuilder item = new StringBuilder();
                write(item, e.getValue(), valueHint, depth + 1);
                fields.put((String) e.getKey(), item.toString());
            }
            object(sb, fields);
        } else {
            pairs(sb, m.entrySet(), keyHint, valueHint, depth);
        }
    }

    /** [[key, value], ...] sorted by the key's JSON text. */
    static void pairs(StringBuilder sb, Iterable<? extends Map.Entry<?, ?>> entries, TypeSerializer<?> keyHint,
            TypeSerializer<?> valueHint, int depth) {
        TreeMap<String, String> sorted = new TreeMap<>();
        for (Map.Entry<?, ?> e : entries) {
            StringBuilder k = new StringBuilder();
            write(k, e.getKey(), keyHint, depth + 1);
            StringBuilder item = new StringBuilder("[").append(k).append(',');
            write(item, e.getValue(), valueHint, depth + 1);
            sorted.put(k.toString(), item.append(']').toString());
        }
        sb.append('[').append(String.join(",", sorted.values())).append(']');
    }

    /** An object from name -> JSON text, in the map's order. */
    static void object(StringBuilder sb, Map<String, String> fields) {
        sb.append('{');
        boolean first = true;
        for (Map.Entry<String, String> e : fields.entrySet()) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            string(sb, e.getKey());
            sb.append(':').append(e.getValue());
        }
        sb.append('}');
    }

    private static boolean isNamespace(Object v, String simpleName) {
        for (Class<?> c = v.getClass(); c != null; c = c.getSuperclass()) {
            if (c.getSimpleName().equals(simpleName) && c.getName().startsWith("org.apache.flink.")) {
                return true;
            }
        }
        return false;
    }

    private static Object call(Object v, String method) {
        try {
            Method m = v.getClass().getMethod(method);
            return m.invoke(v);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    // ------------------------------------------------------------------ scalars

    public static void number(StringBuilder sb, double d) {
        if (Double.isNaN(d)) {
            sb.append("\"NaN\"");
        } else if (Double.isInfinite(d)) {
            sb.append(d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        } else {
            sb.append(Double.toString(d));
        }
    }

    public static void string(StringBuilder sb, String s) {
        sb.append('"');
        for (int k = 0; k < s.length(); k++) {
            char c = s.charAt(k);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                default:
                    if (c < 0x20 || (Character.isSurrogate(c) && !validSurrogate(s, k))) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }

    private static boolean validSurrogate(String s, int k) {
        char c = s.charAt(k);
        if (Character.isHighSurrogate(c)) {
            return k + 1 < s.length() && Character.isLowSurrogate(s.charAt(k + 1));
        }
        return k > 0 && Character.isHighSurrogate(s.charAt(k - 1));
    }

    /** 2023-11-15T19:13:20.123Z */
    public static String instant(Instant i) {
        return dateTime(LocalDateTime.ofInstant(i, ZoneOffset.UTC)) + "Z";
    }

    /** 2024-01-01T00:21:00 (fraction only when not zero, trailing zeros removed). */
    public static String dateTime(LocalDateTime t) {
        return t.toLocalDate() + "T" + time(t.toLocalTime());
    }

    /** 00:21:00, 00:21:00.5, 00:21:00.000000123 */
    public static String time(LocalTime t) {
        StringBuilder sb = new StringBuilder(String.format("%02d:%02d:%02d", t.getHour(), t.getMinute(), t.getSecond()));
        if (t.getNano() != 0) {
            String fraction = String.format("%09d", t.getNano());
            int end = fraction.length();
            while (fraction.charAt(end - 1) == '0') {
                end--;
            }
            sb.append('.').append(fraction, 0, end);
        }
        return sb.toString();
    }
}
