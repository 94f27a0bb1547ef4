import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.MapSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.OperatorBackendSerializationProxy;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.RegisteredBroadcastStateBackendMetaInfo;
import org.apache.flink.runtime.state.RegisteredKeyValueStateBackendMetaInfo;
import org.apache.flink.runtime.state.RegisteredOperatorStateBackendMetaInfo;
import org.apache.flink.runtime.state.RegisteredPriorityQueueStateBackendMetaInfo;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;
import org.apache.flink.runtime.state.ttl.TtlStateFactory;
import org.apache.flink.streaming.api.operators.TimerSerializer;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Serializer-proxy headers exactly as Flink writes them, for statectl's header parser.
 *
 * <p>Usage: {@code java -cp flink-dist.jar StateHeaders.java <out dir>}. Writes keyed headers
 * (String key; Value, List, Map, POJO, Kryo, TTL, Tuple/TimeWindow, enum and timer states; with
 * and without compression), a Long-keyed and a POJO-keyed header, and operator headers (split,
 * union with a Kryo element, broadcast String -> POJO; with and without compression; empty).
 */
public class StateHeaders {

    /** A POJO: public fields, public no-argument constructor. */
    public static class Event {
        public String name;
        public long count;
        public List<String> tags;

        public Event() {}
    }

    /** Not a POJO (no default constructor): Flink falls back to Kryo. */
    public static class Opaque {
        private final int x;

        public Opaque(int x) {
            this.x = x;
        }
    }

    /** An enum. */
    public enum Color {
        RED,
        GREEN,
        BLUE
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args[0]);
        SerializerConfigImpl config = new SerializerConfigImpl();
        TypeSerializer<Event> pojo = TypeInformation.of(Event.class).createSerializer(config);
        TypeSerializer<Opaque> kryo = new KryoSerializer<>(Opaque.class, config);

        List<StateMetaInfoSnapshot> keyed = new ArrayList<>();
        keyed.add(kv(StateDescriptor.Type.VALUE, "cnt", LongSerializer.INSTANCE));
        keyed.add(kv(StateDescriptor.Type.LIST, "lst", new ListSerializer<>(LongSerializer.INSTANCE)));
        keyed.add(kv(StateDescriptor.Type.MAP, "mp",
                new MapSerializer<>(StringSerializer.INSTANCE, LongSerializer.INSTANCE)));
        keyed.add(kv(StateDescriptor.Type.VALUE, "pojo", pojo));
        keyed.add(kv(StateDescriptor.Type.VALUE, "kryo", kryo));
        keyed.add(kv(StateDescriptor.Type.VALUE, "ttl",
                new TtlStateFactory.TtlSerializer<>(LongSerializer.INSTANCE, StringSerializer.INSTANCE)));
        keyed.add(new RegisteredKeyValueStateBackendMetaInfo<>(StateDescriptor.Type.VALUE, "tuple",
                new TimeWindow.Serializer(),
                Types.TUPLE(Types.STRING, Types.LONG).createSerializer(config)).snapshot());
        keyed.add(kv(StateDescriptor.Type.AGGREGATING, "enum",
                TypeInformation.of(Color.class).createSerializer(config)));
        keyed.add(new RegisteredPriorityQueueStateBackendMetaInfo<>("_timer_state/processing_user-timers",
                new TimerSerializer<>(StringSerializer.INSTANCE, VoidNamespaceSerializer.INSTANCE)).snapshot());
        for (boolean compressed : new boolean[] {false, true}) {
            write(out.resolve("keyed_string" + (compressed ? "_compressed" : "") + ".bin"),
                    new KeyedBackendSerializationProxy<>(StringSerializer.INSTANCE, keyed, compressed));
        }
        write(out.resolve("keyed_long.bin"), new KeyedBackendSerializationProxy<>(LongSerializer.INSTANCE,
                List.of(kv(StateDescriptor.Type.VALUE, "cnt", LongSerializer.INSTANCE)), false));
        write(out.resolve("keyed_pojo_key_no_states.bin"),
                new KeyedBackendSerializationProxy<>(pojo, List.of(), false));

        List<StateMetaInfoSnapshot> lists = new ArrayList<>();
        lists.add(new RegisteredOperatorStateBackendMetaInfo<>("split", LongSerializer.INSTANCE,
                OperatorStateHandle.Mode.SPLIT_DISTRIBUTE).snapshot());
        lists.add(new RegisteredOperatorStateBackendMetaInfo<>("union", kryo,
                OperatorStateHandle.Mode.UNION).snapshot());
        List<StateMetaInfoSnapshot> broadcast = List.of(new RegisteredBroadcastStateBackendMetaInfo<>(
                "bc", OperatorStateHandle.Mode.BROADCAST, StringSerializer.INSTANCE, pojo).snapshot());
        for (boolean compressed : new boolean[] {false, true}) {
            write(out.resolve("operator" + (compressed ? "_compressed" : "") + ".bin"),
                    new OperatorBackendSerializationProxy(lists, broadcast, compressed));
        }
        write(out.resolve("operator_empty.bin"), new OperatorBackendSerializationProxy(List.of(), List.of(), false));
    }

    private static StateMetaInfoSnapshot kv(StateDescriptor.Type type, String name, TypeSerializer<?> serializer) {
        return new RegisteredKeyValueStateBackendMetaInfo<>(type, name, VoidNamespaceSerializer.INSTANCE, serializer)
                .snapshot();
    }

    private static void write(Path file, org.apache.flink.core.io.IOReadableWritable proxy) throws Exception {
        DataOutputSerializer bytes = new DataOutputSerializer(1024);
        proxy.write(bytes);
        Files.write(file, bytes.getCopyOfBuffer());
    }
}
