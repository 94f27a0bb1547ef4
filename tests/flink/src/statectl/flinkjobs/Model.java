package statectl.flinkjobs;

import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The fixed data of the fixture job: keys, records per phase, state names, state layout.
 *
 * <p>A record is (string key, long key, value). value >= 0 updates state; value < 0 clears the
 * keyed state (cnt, lst, mp) of both keys of the record.
 */
public final class Model {
    private Model() {}

    public static final TypeInformation<Tuple3<String, Long, Long>> EVENT =
            Types.TUPLE(Types.STRING, Types.LONG, Types.LONG);

    /** 2100-01-01T00:00:00Z: timers registered at or after this never fire during a run. */
    public static final long TIMER_BASE = 4102444800000L;

    public static final String[] STRING_KEYS;
    public static final long[] LONG_KEYS;

    static {
        List<String> s = new ArrayList<>();
        for (int i = 0; s.size() < 37; i++) {
            s.add("k" + i);
        }
        s.add("\u00e9-\u043a\u043b\u044e\u0447"); // "é-ключ": Latin-1 and Cyrillic
        s.add("\uD834\uDD1E-clef"); // U+1D11E MUSICAL SYMBOL G CLEF: a surrogate pair
        s.add("long-" + "x".repeat(150)); // 155 chars: a 2-byte length varint
        STRING_KEYS = s.toArray(new String[0]);

        long[] special = {
            Long.MIN_VALUE, Long.MAX_VALUE, -1L, 0L, 1L, -42L, 1L << 40, -(1L << 40),
            TIMER_BASE, 2147483648L, -2147483649L, 255L, 256L, 65535L, 1L << 62,
        };
        LONG_KEYS = new long[40];
        for (int i = 0; i < LONG_KEYS.length; i++) {
            LONG_KEYS[i] = i < special.length ? special[i] : 1000L + 7L * (i - special.length);
        }
    }

    /** Broadcast state keys. */
    public static final String[] BCAST_KEYS = {
        "alpha", "beta", "\u03b3\u03ac\u03bc\u03bc\u03b1", "delta", "\uD83D\uDE00-smile",
    };

    public static final int PHASE1_RECORDS = 160;

    /** Phase 1's records: the 160 above, then one per bulk key ({@link Control#bulkKeys}). */
    public static int phase1Records() {
        return PHASE1_RECORDS + Control.bulkKeys;
    }

    /**
     * Bulk key i (spec {@code bulk_keys}: enough state that RocksDB flushes and compacts into
     * levels below L0): a 32-char String key and a Long key of its own, value i.
     */
    public static Tuple3<String, Long, Long> bulkRecord(int i) {
        return Tuple3.of(String.format("bulk-%08d-%s", i, "p".repeat(18)), 1_000_000_007L * (i + 1), (long) i);
    }

    /** The records the source emits in a phase (1-based); phase 2 only in checkpoint mode. */
    public static List<Tuple3<String, Long, Long>> records(int phase) {
        List<Tuple3<String, Long, Long>> out = new ArrayList<>();
        if (phase == 1) {
            for (int i = 0; i < PHASE1_RECORDS; i++) {
                out.add(Tuple3.of(STRING_KEYS[i % 40], LONG_KEYS[i % 40], (long) i));
            }
            for (int i = 0; i < Control.bulkKeys; i++) {
                out.add(bulkRecord(i));
            }
        } else if (phase == 2) {
            for (int j = 0; j < 10; j++) {
                out.add(Tuple3.of(STRING_KEYS[j], LONG_KEYS[j], 1000L + j));
            }
            for (int j = 10; j < 13; j++) {
                out.add(Tuple3.of(STRING_KEYS[j], LONG_KEYS[j], -1L));
            }
        }
        return out;
    }

    public static MapStateDescriptor<String, Long> bcastDescriptor() {
        return new MapStateDescriptor<>("bcast", Types.STRING, Types.LONG);
    }

    public static final String TIMERS_PROCESSING = "_timer_state/processing_user-timers";
    public static final String TIMERS_EVENT = "_timer_state/event_user-timers";

    /** Operator uids in topology order. */
    public static final List<String> UIDS = Collections.unmodifiableList(Arrays.asList(
            "src", "keyed-str", "keyed-long", "opstate", "bcast", "stateless", "sink"));

    public static final List<String> KEYED_UIDS = Arrays.asList("keyed-str", "keyed-long");
    public static final List<String> STATEFUL_UIDS =
            Arrays.asList("keyed-str", "keyed-long", "opstate", "bcast");

    /** uid -> list of {name, scope, kind, mode}. */
    public static List<Map<String, Object>> states(String uid) {
        List<Map<String, Object>> out = new ArrayList<>();
        switch (uid) {
            case "keyed-str":
            case "keyed-long":
                out.add(state("cnt", "keyed", "VALUE", null));
                out.add(state("lst", "keyed", "LIST", null));
                out.add(state("mp", "keyed", "MAP", null));
                out.add(state(TIMERS_PROCESSING, "keyed", "TIMERS", null));
                out.add(state(TIMERS_EVENT, "keyed", "TIMERS", null));
                break;
            case "opstate":
                out.add(state("split", "operator", "LIST", "SPLIT_DISTRIBUTE"));
                out.add(state("union", "operator", "LIST", "UNION"));
                break;
            case "bcast":
                out.add(state("bcast", "operator", "BROADCAST", "BROADCAST"));
                break;
            default:
                break;
        }
        return out;
    }

    private static Map<String, Object> state(String name, String scope, String kind, String mode) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", name);
        m.put("scope", scope);
        m.put("kind", kind);
        m.put("mode", mode);
        return m;
    }
}
