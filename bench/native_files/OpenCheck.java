import org.rocksdb.*;
import java.util.*;

/** Opens a RocksDB folder read-write with every column family (as Flink's restore does), counts
 *  the rows per column family and the key groups' range (1-byte prefixes), and closes it. */
public class OpenCheck {
    public static void main(String[] args) throws Exception {
        RocksDB.loadLibrary();
        for (String path : args) {
            List<byte[]> names = RocksDB.listColumnFamilies(new Options(), path);
            List<ColumnFamilyDescriptor> descs = new ArrayList<>();
            for (byte[] n : names) {
                ColumnFamilyOptions cfo = new ColumnFamilyOptions();
                cfo.setMergeOperatorName("stringappendtest");
                descs.add(new ColumnFamilyDescriptor(n, cfo));
            }
            List<ColumnFamilyHandle> handles = new ArrayList<>();
            DBOptions o = new DBOptions().setParanoidChecks(true);
            try (RocksDB db = RocksDB.open(o, path, descs, handles)) {
                StringBuilder sb = new StringBuilder(path + ":");
                for (int i = 0; i < handles.size(); i++) {
                    long rows = 0; int min = 256, max = -1;
                    try (RocksIterator it = db.newIterator(handles.get(i))) {
                        for (it.seekToFirst(); it.isValid(); it.next()) {
                            rows++; int g = it.key()[0] & 0xff; min = Math.min(min, g); max = Math.max(max, g);
                        }
                    }
                    sb.append(" ").append(new String(names.get(i))).append("=").append(rows)
                      .append(rows > 0 ? "[" + min + ".." + max + "]" : "");
                }
                System.out.println(sb);
                for (ColumnFamilyHandle h : handles) h.close();
            } catch (RocksDBException e) {
                System.out.println(path + ": FAILED " + e.getMessage());
            }
        }
    }
}
