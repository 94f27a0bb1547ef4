package statectl.values;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.table.data.ArrayData;
import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.MapData;
import org.apache.flink.table.data.RawValueData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.types.logical.ArrayType;
import org.apache.flink.table.types.logical.DistinctType;
import org.apache.flink.table.types.logical.IntType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.MapType;
import org.apache.flink.table.types.logical.MultisetType;
import org.apache.flink.table.types.logical.RawType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.StructuredType;

import java.time.LocalDate;
import java.time.LocalTime;
import java.util.AbstractMap;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * SQL values (RowData and the other internal data structures of the Table runtime) as JSON, by
 * their LogicalTypes: a top-level row is positional {"f0": ...}, a nested ROW or structured type
 * by its field names.
 */
final class TableJson {
    private TableJson() {}

    static final boolean AVAILABLE;

    static {
        boolean found;
        try {
            Class.forName("org.apache.flink.table.data.RowData");
            Class.forName("org.apache.flink.table.types.logical.LogicalType");
            found = true;
        } catch (ClassNotFoundException | LinkageError e) {
            found = false;
        }
        AVAILABLE = found;
    }

    static boolean isTableValue(Object v) {
        return v instanceof RowData || v instanceof StringData || v instanceof DecimalData
                || v instanceof TimestampData || v instanceof ArrayData || v instanceof MapData
                || v instanceof RawValueData;
    }

    /** A table value found by class (not by type): a RowData with its serializer's types. */
    static void write(StringBuilder sb, Object v, TypeSerializer<?> hint, int depth) {
        if (v instanceof RowData) {
            LogicalType[] types = rowTypes(hint);
            RowData row = (RowData) v;
            if (types == null && row instanceof GenericRowData) {
                // no types: the fields are internal objects already
                sb.append('{');
                for (int k = 0; k < row.getArity(); k++) {
                    if (k > 0) {
                        sb.append(',');
                    }
                    Json.string(sb, "f" + k);
                    sb.append(':');
                    Json.write(sb, ((GenericRowData) row).getField(k), null, depth + 1);
                }
                sb.append('}');
                return;
            }
            if (types == null) {
                throw new IllegalStateException("a " + v.getClass().getName() + " without a RowDataSerializer ("
                        + (hint == null ? null : hint.getClass().getName()) + "): its field types are unknown");
            }
            row(sb, row, types, null, depth);
        } else if (v instanceof StringData) {
            Json.string(sb, v.toString());
        } else if (v instanceof DecimalData) {
            Json.string(sb, ((DecimalData) v).toBigDecimal().toPlainString());
        } else if (v instanceof TimestampData) {
            // without a type: TIMESTAMP (no zone)
            Json.string(sb, Json.dateTime(((TimestampData) v).toLocalDateTime()));
        } else if (v instanceof ArrayData && hint != null && Hints.field(hint, "eleType") instanceof LogicalType) {
            // ArrayDataSerializer used as a state's serializer: its element type
            logical(sb, v, new ArrayType((LogicalType) Hints.field(hint, "eleType")), depth);
        } else if (v instanceof MapData && hint != null && Hints.field(hint, "keyType") instanceof LogicalType) {
            // MapDataSerializer: its key and value types
            map(sb, (MapData) v, (LogicalType) Hints.field(hint, "keyType"),
                    (LogicalType) Hints.field(hint, "valueType"), depth);
        } else if (v instanceof RawValueData && Hints.call(hint, "getInnerSerializer") instanceof TypeSerializer) {
            // RawValueDataSerializer: RAW is base64 of the value's bytes in its own serializer
            @SuppressWarnings("unchecked")
            TypeSerializer<Object> inner = (TypeSerializer<Object>) Hints.call(hint, "getInnerSerializer");
            @SuppressWarnings("unchecked")
            RawValueData<Object> raw = (RawValueData<Object>) v;
            Json.string(sb, Base64.getEncoder().encodeToString(raw.toBytes(inner)));
        } else {
            throw new IllegalStateException("a " + v.getClass().getName() + " without its LogicalType");
        }
    }

    static LogicalType[] rowTypes(TypeSerializer<?> s) {
        if (s == null) {
            return null;
        }
        Object types = Hints.field(s, "types");
        return types instanceof LogicalType[] ? (LogicalType[]) types : null;
    }

    /** names null: positional f0, f1, ... */
    static void row(StringBuilder sb, RowData row, LogicalType[] types, List<String> names, int depth) {
        if (row.getArity() != types.length) {
            throw new IllegalStateException("row of arity " + row.getArity() + " with " + types.length + " types");
        }
        Map<String, String> fields = names == null ? new java.util.LinkedHashMap<>() : new TreeMap<>();
        for (int k = 0; k < types.length; k++) {
            Object field = row.isNullAt(k) ? null : RowData.createFieldGetter(types[k], k).getFieldOrNull(row);
            StringBuilder item = new StringBuilder();
            logical(item, field, types[k], depth + 1);
            fields.put(names == null ? "f" + k : names.get(k), item.toString());
        }
        Json.object(sb, fields);
    }

    static void logical(StringBuilder sb, Object v, LogicalType t, int depth) {
        if (v == null) {
            sb.append("null");
            return;
        }
        switch (t.getTypeRoot()) {
            case CHAR:
            case VARCHAR:
                Json.string(sb, v.toString());
                break;
            case BOOLEAN:
            case TINYINT:
            case SMALLINT:
            case INTEGER:
            case BIGINT:
            case INTERVAL_YEAR_MONTH:
            case INTERVAL_DAY_TIME:
                sb.append(v);
                break;
            case FLOAT:
                Json.number(sb, ((Float) v).doubleValue());
                break;
            case DOUBLE:
                Json.number(sb, (Double) v);
                break;
            case DECIMAL:
                Json.string(sb, ((DecimalData) v).toBigDecimal().toPlainString());
                break;
            case DATE:
                Json.string(sb, LocalDate.ofEpochDay((Integer) v).toString());
                break;
            case TIME_WITHOUT_TIME_ZONE:
                Json.string(sb, Json.time(LocalTime.ofNanoOfDay((Integer) v * 1_000_000L)));
                break;
            case TIMESTAMP_WITHOUT_TIME_ZONE:
                Json.string(sb, Json.dateTime(((TimestampData) v).toLocalDateTime()));
                break;
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                Json.string(sb, Json.instant(((TimestampData) v).toInstant()));
                break;
            case BINARY:
            case VARBINARY:
                Json.string(sb, Base64.getEncoder().encodeToString((byte[]) v));
                break;
            case ARRAY: {
                LogicalType element = ((ArrayType) t).getElementType();
                ArrayData array = (ArrayData) v;
                ArrayData.ElementGetter getter = ArrayData.createElementGetter(element);
                sb.append('[');
                for (int k = 0; k < array.size(); k++) {
                    if (k > 0) {
                        sb.append(',');
                    }
                    logical(sb, getter.getElementOrNull(array, k), element, depth + 1);
                }
                sb.append(']');
                break;
            }
            case MAP:
                map(sb, (MapData) v, ((MapType) t).getKeyType(), ((MapType) t).getValueType(), depth);
                break;
            case MULTISET:
                map(sb, (MapData) v, ((MultisetType) t).getElementType(), new IntType(false), depth);
                break;
            case ROW: {
                RowType rowType = (RowType) t;
                row(sb, (RowData) v, rowType.getChildren().toArray(new LogicalType[0]), rowType.getFieldNames(), depth);
                break;
            }
            case STRUCTURED_TYPE: {
                List<String> names = new ArrayList<>();
                List<LogicalType> types = new ArrayList<>();
                for (StructuredType.StructuredAttribute a : ((StructuredType) t).getAttributes()) {
                    names.add(a.getName());
                    types.add(a.getType());
                }
                row(sb, (RowData) v, types.toArray(new LogicalType[0]), names, depth);
                break;
            }
            case DISTINCT_TYPE:
                logical(sb, v, ((DistinctType) t).getSourceType(), depth);
                break;
            case RAW: {
                @SuppressWarnings("unchecked")
                RawValueData<Object> raw = (RawValueData<Object>) v;
                @SuppressWarnings("unchecked")
                TypeSerializer<Object> serializer = (TypeSerializer<Object>) ((RawType<?>) t).getTypeSerializer();
                Json.string(sb, Base64.getEncoder().encodeToString(raw.toBytes(serializer)));
                break;
            }
            case NULL:
                sb.append("null");
                break;
            default:
                Json.string(sb, v.toString());
        }
    }

    static void map(StringBuilder sb, MapData map, LogicalType keyType, LogicalType valueType, int depth) {
        ArrayData keys = map.keyArray();
        ArrayData values = map.valueArray();
        ArrayData.ElementGetter keyGetter = ArrayData.createElementGetter(keyType);
        ArrayData.ElementGetter valueGetter = ArrayData.createElementGetter(valueType);
        boolean stringKeys = keyType.getTypeRoot() == org.apache.flink.table.types.logical.LogicalTypeRoot.CHAR
                || keyType.getTypeRoot() == org.apache.flink.table.types.logical.LogicalTypeRoot.VARCHAR;
        for (int k = 0; k < map.size() && stringKeys; k++) {
            stringKeys = !keys.isNullAt(k);
        }
        TreeMap<String, String> sorted = new TreeMap<>();
        List<Map.Entry<String, String>> entries = new ArrayList<>();
        for (int k = 0; k < map.size(); k++) {
            StringBuilder key = new StringBuilder();
            logical(key, keyGetter.getElementOrNull(keys, k), keyType, depth + 1);
            StringBuilder value = new StringBuilder();
            logical(value, valueGetter.getElementOrNull(values, k), valueType, depth + 1);
            entries.add(new AbstractMap.SimpleEntry<>(key.toString(), value.toString()));
        }
        if (stringKeys) {
            TreeMap<String, String> fields = new TreeMap<>();
            for (int k = 0; k < map.size(); k++) {
                fields.put(keyGetter.getElementOrNull(keys, k).toString(), entries.get(k).getValue());
            }
            Json.object(sb, fields);
        } else {
            for (Map.Entry<String, String> e : entries) {
                sorted.put(e.getKey(), "[" + e.getKey() + "," + e.getValue() + "]");
            }
            sb.append('[').append(String.join(",", sorted.values())).append(']');
        }
    }
}
