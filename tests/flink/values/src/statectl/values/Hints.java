package statectl.values;

import org.apache.flink.api.common.typeutils.TypeSerializer;

import java.lang.reflect.Field;
import java.lang.reflect.Method;

/**
 * Nested serializers of a serializer, found by reflection so one source serves every Flink
 * version: list/array elements, map keys and values, the user value of a TtlSerializer, the
 * serializer a NullableSerializer wraps. Only needed to know the LogicalTypes of SQL rows nested in
 * Java collections; a missing hint is null.
 */
public final class Hints {
    private Hints() {}

    public static TypeSerializer<?> unwrap(TypeSerializer<?> s) {
        for (int guard = 0; s != null && guard < 8; guard++) {
            String name = s.getClass().getName();
            if (name.endsWith(".NullableSerializer")) {
                s = (TypeSerializer<?>) field(s, "originalSerializer");
            } else {
                return s;
            }
        }
        return s;
    }

    /** The user-value serializer of a TtlSerializer (field 1 of the CompositeSerializer). */
    public static TypeSerializer<?> ttlUser(TypeSerializer<?> s) {
        if (s != null && s.getClass().getName().contains("TtlSerializer")) {
            Object[] fields = (Object[]) field(s, "fieldSerializers");
            if (fields != null && fields.length == 2) {
                return (TypeSerializer<?>) fields[1];
            }
        }
        return s;
    }

    public static boolean isTtl(TypeSerializer<?> s) {
        return s != null && s.getClass().getName().contains("TtlSerializer");
    }

    public static TypeSerializer<?> element(TypeSerializer<?> s) {
        TypeSerializer<?> e = (TypeSerializer<?>) call(s, "getElementSerializer");
        return e != null ? e : (TypeSerializer<?>) call(s, "getComponentSerializer");
    }

    public static TypeSerializer<?> mapKey(TypeSerializer<?> s) {
        return (TypeSerializer<?>) call(s, "getKeySerializer");
    }

    public static TypeSerializer<?> mapValue(TypeSerializer<?> s) {
        return (TypeSerializer<?>) call(s, "getValueSerializer");
    }

    static Object call(Object target, String method) {
        if (target == null) {
            return null;
        }
        try {
            Method m = target.getClass().getMethod(method);
            m.setAccessible(true);
            return m.invoke(target);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    public static Object field(Object target, String name) {
        for (Class<?> c = target.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(target);
            } catch (NoSuchFieldException e) {
                // superclass
            } catch (ReflectiveOperationException | RuntimeException e) {
                return null;
            }
        }
        return null;
    }
}
