package statectl.evolution;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.types.Row;

/** Version 2 of the job's types: what restores the version 1 savepoint. */
public final class Model {
    private Model() {}

    public static final class PojoAdded {
        public String id;
        public int a;
        public String extra; // added
    }

    public static final class PojoRemoved {
        public int a; // b removed
    }

    public static final class PojoRetyped {
        public String id;
        public long count; // was int
    }

    public static final class PojoRenamed {
        public String title; // was name
        public int qty;
    }

    public static final class MapValue {
        public int label; // was String
        public int n;
    }

    public static final class ListItem {
        public int v;
        public String note; // added
    }

    public static final class OpItem {
        public long v;
        public String note; // added
    }

    public static final class Same {
        public String s;
        public int n;
    }

    public enum Added {
        RED, GREEN, BLUE // BLUE added
    }

    public enum Removed {
        RED, GREEN // BLUE removed
    }

    public static final class Opaque {
        public int a;
        private String b; // no getter or setter: no longer a POJO (Kryo)
    }

    /** The value type of each state (POJOs by class; Row, Tuple and Long declared in code). */
    public static TypeInformation<?> type(String state) {
        switch (state) {
            case "pojo-added": return TypeInformation.of(PojoAdded.class);
            case "pojo-removed": return TypeInformation.of(PojoRemoved.class);
            case "pojo-retyped": return TypeInformation.of(PojoRetyped.class);
            case "pojo-renamed": return TypeInformation.of(PojoRenamed.class);
            case "row-added": return Types.ROW_NAMED(new String[] {"id", "qty", "comment"}, Types.STRING, Types.INT, Types.STRING);
            case "tuple-retyped": return Types.TUPLE(Types.STRING, Types.LONG);
            case "map-pojo-retyped": return TypeInformation.of(MapValue.class);
            case "list-pojo-added": return TypeInformation.of(ListItem.class);
            case "oplist-pojo-added": return TypeInformation.of(OpItem.class);
            case "pojo-same": return TypeInformation.of(Same.class);
            case "enum-added": return TypeInformation.of(Added.class);
            case "enum-removed": return TypeInformation.of(Removed.class);
            case "pojo-to-kryo": return TypeInformation.of(Opaque.class);
            case "control": return Types.LONG;
            default: throw new IllegalArgumentException(state);
        }
    }

    /** The value record `i` writes into `state`. */
    public static Object value(String state, int i) {
        switch (state) {
            case "pojo-added": { PojoAdded p = new PojoAdded(); p.id = "id" + i; p.a = i; return p; }
            case "pojo-removed": { PojoRemoved p = new PojoRemoved(); p.a = i; return p; }
            case "pojo-retyped": { PojoRetyped p = new PojoRetyped(); p.id = "id" + i; p.count = i; return p; }
            case "pojo-renamed": { PojoRenamed p = new PojoRenamed(); p.title = "title" + i; p.qty = i; return p; }
            case "row-added": return Row.of("id" + i, i, "c" + i);
            case "tuple-retyped": return Tuple2.of("t" + i, (long) i);
            case "map-pojo-retyped": { MapValue p = new MapValue(); p.label = i; p.n = i; return p; }
            case "list-pojo-added": { ListItem p = new ListItem(); p.v = i; return p; }
            case "oplist-pojo-added": { OpItem p = new OpItem(); p.v = i; return p; }
            case "pojo-same": { Same p = new Same(); p.s = "s" + i; p.n = i; return p; }
            case "enum-added": return Added.values()[i % 2];
            case "enum-removed": return Removed.values()[i % 2];
            case "pojo-to-kryo": { Opaque p = new Opaque(); p.a = i; p.b = "b" + i; return p; }
            case "control": return (long) i;
            default: throw new IllegalArgumentException(state);
        }
    }
}
