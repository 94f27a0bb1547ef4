import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.BooleanSerializer;
import org.apache.flink.api.common.typeutils.base.ByteSerializer;
import org.apache.flink.api.common.typeutils.base.CharSerializer;
import org.apache.flink.api.common.typeutils.base.DoubleSerializer;
import org.apache.flink.api.common.typeutils.base.FloatSerializer;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.ShortSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HexFormat;

/**
 * Keys as Flink serializes and hashes them, for statectl's key types.
 *
 * <p>Each line of stdin is "TYPE VALUE": TYPE one of String Long Integer Short Byte Boolean
 * Character Double Float; VALUE the UTF-16 code units of a String (or the code unit of a
 * Character) as hex, 4 digits each; the raw bits in hex for Double/Float; else the decimal value.
 * Prints "serialized-hex hashCode keyGroup@128 keyGroup@300 keyGroup@32768" per line.
 */
public class KeyValues {
    public static void main(String[] ignored) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] parts = line.split(" ", -1);
            switch (parts[0]) {
                case "String" -> print(StringSerializer.INSTANCE, units(parts[1]));
                case "Long" -> print(LongSerializer.INSTANCE, Long.parseLong(parts[1]));
                case "Integer" -> print(IntSerializer.INSTANCE, Integer.parseInt(parts[1]));
                case "Short" -> print(ShortSerializer.INSTANCE, Short.parseShort(parts[1]));
                case "Byte" -> print(ByteSerializer.INSTANCE, Byte.parseByte(parts[1]));
                case "Boolean" -> print(BooleanSerializer.INSTANCE, Boolean.parseBoolean(parts[1]));
                case "Character" -> print(CharSerializer.INSTANCE, units(parts[1]).charAt(0));
                case "Double" -> print(DoubleSerializer.INSTANCE,
                        Double.longBitsToDouble(Long.parseUnsignedLong(parts[1], 16)));
                case "Float" -> print(FloatSerializer.INSTANCE,
                        Float.intBitsToFloat(Integer.parseUnsignedInt(parts[1], 16)));
                default -> throw new IllegalArgumentException(line);
            }
        }
    }

    private static String units(String hex) {
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < hex.length(); i += 4) {
            text.append((char) Integer.parseInt(hex.substring(i, i + 4), 16));
        }
        return text.toString();
    }

    private static <T> void print(TypeSerializer<T> serializer, T value) throws Exception {
        DataOutputSerializer out = new DataOutputSerializer(16);
        serializer.serialize(value, out);
        System.out.println(HexFormat.of().formatHex(out.getCopyOfBuffer()) + " " + value.hashCode() + " "
                + KeyGroupRangeAssignment.assignToKeyGroup(value, 128) + " "
                + KeyGroupRangeAssignment.assignToKeyGroup(value, 300) + " "
                + KeyGroupRangeAssignment.assignToKeyGroup(value, 32768));
    }
}
