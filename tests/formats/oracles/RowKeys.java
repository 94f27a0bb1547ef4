import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.BooleanSerializer;
import org.apache.flink.api.common.typeutils.base.ByteSerializer;
import org.apache.flink.api.common.typeutils.base.DoubleSerializer;
import org.apache.flink.api.common.typeutils.base.FloatSerializer;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.ShortSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.api.java.tuple.Tuple;
import org.apache.flink.api.java.tuple.Tuple1;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.typeutils.runtime.RowSerializer;
import org.apache.flink.api.java.typeutils.runtime.TupleSerializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.runtime.typeutils.RowDataSerializer;
import org.apache.flink.table.types.logical.BigIntType;
import org.apache.flink.table.types.logical.BooleanType;
import org.apache.flink.table.types.logical.DateType;
import org.apache.flink.table.types.logical.DecimalType;
import org.apache.flink.table.types.logical.DoubleType;
import org.apache.flink.table.types.logical.FloatType;
import org.apache.flink.table.types.logical.IntType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.SmallIntType;
import org.apache.flink.table.types.logical.TimestampType;
import org.apache.flink.table.types.logical.TinyIntType;
import org.apache.flink.table.types.logical.VarCharType;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;

/**
 * RowData, Tuple and Row keys as Flink serializes and hashes them, for statectl's key types.
 *
 * <p>For each key type prints "SNAPSHOT name versioned-snapshot-hex", then one line per
 * generated key: "KEY name serialized-hex hashCode keyGroup@128 keyGroup@256 keyGroup@4096".
 * RowData keys are hashed as the BinaryRowData the SQL key selectors produce.
 * Args: seed, keys per type.
 */
public class RowKeys {
    static final int[] MAX_PARALLELISMS = {128, 256, 4096};
    static final HexFormat HEX = HexFormat.of();
    static Random rnd;
    static int perType;

    public static void main(String[] args) throws Exception {
        rnd = new Random(Long.parseLong(args[0]));
        perType = Integer.parseInt(args[1]);
        rowData("INT", new LogicalType[] {new IntType()}, () -> rnd.nextInt());
        rowData("BIGINT", new LogicalType[] {new BigIntType()}, () -> rnd.nextLong());
        rowData("SMALLINT", new LogicalType[] {new SmallIntType()}, () -> (short) rnd.nextInt());
        rowData("TINYINT", new LogicalType[] {new TinyIntType()}, () -> (byte) rnd.nextInt());
        rowData("BOOLEAN", new LogicalType[] {new BooleanType()}, () -> rnd.nextBoolean());
        rowData("DOUBLE", new LogicalType[] {new DoubleType()}, RowKeys::aDouble);
        rowData("FLOAT", new LogicalType[] {new FloatType()}, () -> (float) aDouble());
        rowData("STRING", new LogicalType[] {VarCharType.STRING_TYPE}, () -> text());
        rowData("VARCHAR", new LogicalType[] {new VarCharType(10)}, () -> text());
        rowData("DECIMAL_COMPACT", new LogicalType[] {new DecimalType(10, 2)}, () -> decimal(10, 2));
        rowData("DECIMAL", new LogicalType[] {new DecimalType(30, 5)}, () -> decimal(30, 5));
        rowData("TIMESTAMP_3", new LogicalType[] {new TimestampType(3)}, () -> timestamp(3));
        rowData("TIMESTAMP_9", new LogicalType[] {new TimestampType(9)}, () -> timestamp(9));
        rowData("DATE", new LogicalType[] {new DateType()}, () -> rnd.nextInt(100000) - 50000);
        LogicalType[] multi = {
            new BigIntType(), VarCharType.STRING_TYPE, new IntType(), new DecimalType(30, 5),
            new TimestampType(9), new BooleanType(), new DoubleType(), new DateType()
        };
        rowData("MULTI", multi, null);
        rowData("EMPTY", new LogicalType[0], null);

        tuple("TUPLE1_STRING", new TypeSerializer<?>[] {StringSerializer.INSTANCE},
                () -> Tuple1.of(rnd.nextInt(10) == 0 ? null : text()));
        tuple("TUPLE2_LONG_STRING",
                new TypeSerializer<?>[] {LongSerializer.INSTANCE, StringSerializer.INSTANCE},
                () -> Tuple2.of(rnd.nextLong(), text()));
        tuple("TUPLE3_INT_DOUBLE_BOOLEAN",
                new TypeSerializer<?>[] {
                    IntSerializer.INSTANCE, DoubleSerializer.INSTANCE, BooleanSerializer.INSTANCE
                },
                () -> Tuple3.of(rnd.nextInt(), aDouble(), rnd.nextBoolean()));
        TypeSerializer<?>[] rowFields = {
            LongSerializer.INSTANCE, StringSerializer.INSTANCE, IntSerializer.INSTANCE,
            ShortSerializer.INSTANCE, ByteSerializer.INSTANCE, FloatSerializer.INSTANCE,
            DoubleSerializer.INSTANCE, BooleanSerializer.INSTANCE
        };
        row("ROW8", rowFields);
        row("ROW1_STRING", new TypeSerializer<?>[] {StringSerializer.INSTANCE});
    }

    // ----------------------------------------------------------------------------- generators

    static double aDouble() {
        switch (rnd.nextInt(4)) {
            case 0: return rnd.nextInt(1000);
            case 1: return Double.longBitsToDouble(rnd.nextLong());
            default: return rnd.nextGaussian() * 1e6;
        }
    }

    static String text() {
        String alphabet = "abcxyz019 €éß\u4e2d\ud83d\ude00";
        int length = rnd.nextInt(4) == 0 ? rnd.nextInt(40) : rnd.nextInt(9);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < length; i++) {
            char c = alphabet.charAt(rnd.nextInt(alphabet.length()));
            if (Character.isSurrogate(c)) {
                sb.append("\ud83d\ude00");
            } else {
                sb.append(c);
            }
        }
        return sb.toString();
    }

    static DecimalData decimal(int precision, int scale) {
        BigInteger unscaled = new BigInteger(precision * 3, rnd).mod(BigInteger.TEN.pow(precision));
        BigDecimal value = new BigDecimal(rnd.nextBoolean() ? unscaled : unscaled.negate(), scale);
        return DecimalData.fromBigDecimal(value, precision, scale);
    }

    static TimestampData timestamp(int precision) {
        long millis = rnd.nextLong() % 4_000_000_000_000L;
        int nanos = precision > 3 ? rnd.nextInt(1_000_000) : 0;
        return TimestampData.fromEpochMillis(millis, nanos);
    }

    static Object field(LogicalType type) {
        if (rnd.nextInt(5) == 0) {
            return null;
        }
        switch (type.getTypeRoot()) {
            case BIGINT: return rnd.nextLong();
            case INTEGER: return rnd.nextInt();
            case DATE: return rnd.nextInt(100000);
            case BOOLEAN: return rnd.nextBoolean();
            case DOUBLE: return aDouble();
            case DECIMAL: return decimal(30, 5);
            case TIMESTAMP_WITHOUT_TIME_ZONE: return timestamp(9);
            default: return StringData.fromString(text());
        }
    }

    // ----------------------------------------------------------------------------- key types

    static void rowData(String name, LogicalType[] types, Supplier<Object> single) throws Exception {
        RowDataSerializer serializer = new RowDataSerializer(types);
        snapshot(name, serializer);
        for (int i = 0; i < perType; i++) {
            GenericRowData row = new GenericRowData(types.length);
            for (int f = 0; f < types.length; f++) {
                Object value = single == null ? field(types[f]) : single.get();
                if (value instanceof String) {
                    value = StringData.fromString((String) value);
                }
                row.setField(f, single != null && i == 0 ? null : value);
            }
            // The key selectors of SQL operators copy each key into a BinaryRowData.
            key(name, serializer, serializer.toBinaryRow(row).copy());
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void tuple(String name, TypeSerializer<?>[] fields, Supplier<Tuple> values)
            throws Exception {
        Class<Tuple> type = (Class<Tuple>) values.get().getClass();
        TupleSerializer serializer = new TupleSerializer(type, fields);
        snapshot(name, serializer);
        for (int i = 0; i < perType; i++) {
            key(name, serializer, values.get());
        }
    }

    static void row(String name, TypeSerializer<?>[] fields) throws Exception {
        RowSerializer serializer = new RowSerializer(fields);
        snapshot(name, serializer);
        RowKind[] kinds = RowKind.values();
        for (int i = 0; i < perType; i++) {
            Object[] values = new Object[fields.length];
            for (int f = 0; f < fields.length; f++) {
                values[f] = rnd.nextInt(5) == 0 ? null : rowField(fields[f]);
            }
            Row row = Row.ofKind(i % 3 == 0 ? kinds[rnd.nextInt(kinds.length)] : RowKind.INSERT, values);
            key(name, serializer, row);
        }
    }

    static Object rowField(TypeSerializer<?> field) {
        if (field == LongSerializer.INSTANCE) return rnd.nextLong();
        if (field == IntSerializer.INSTANCE) return rnd.nextInt();
        if (field == ShortSerializer.INSTANCE) return (short) rnd.nextInt();
        if (field == ByteSerializer.INSTANCE) return (byte) rnd.nextInt();
        if (field == FloatSerializer.INSTANCE) return (float) aDouble();
        if (field == DoubleSerializer.INSTANCE) return aDouble();
        if (field == BooleanSerializer.INSTANCE) return rnd.nextBoolean();
        return text();
    }

    // ----------------------------------------------------------------------------- output

    static void snapshot(String name, TypeSerializer<?> serializer) throws Exception {
        DataOutputSerializer out = new DataOutputSerializer(256);
        TypeSerializerSnapshot.writeVersionedSnapshot(out, serializer.snapshotConfiguration());
        System.out.println("SNAPSHOT " + name + " " + HEX.formatHex(out.getCopyOfBuffer()));
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void key(String name, TypeSerializer serializer, Object key) throws Exception {
        DataOutputSerializer out = new DataOutputSerializer(64);
        serializer.serialize(key, out);
        StringBuilder line = new StringBuilder("KEY ").append(name).append(' ');
        line.append(HEX.formatHex(out.getCopyOfBuffer())).append(' ').append(key.hashCode());
        for (int maxParallelism : MAX_PARALLELISMS) {
            line.append(' ').append(KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism));
        }
        System.out.println(line);
    }
}
