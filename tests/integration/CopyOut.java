import java.io.StringWriter;
import java.sql.Connection;
import java.sql.DriverManager;
import org.postgresql.PGConnection;
import org.postgresql.copy.CopyManager;

/**
 * pgJDBC's CopyManager.copyOut of a COPY statement, as JDBC tools export a result.
 * Usage: java CopyOut URL USER PASSWORD SQL. Prints "rows n", then the data as received.
 */
public final class CopyOut {
    private CopyOut() {}

    public static void main(String[] args) throws Exception {
        try (Connection conn = DriverManager.getConnection(args[0], args[1], args[2])) {
            CopyManager copy = conn.unwrap(PGConnection.class).getCopyAPI();
            StringWriter out = new StringWriter();
            long rows = copy.copyOut(args[3], out);
            System.out.println("rows " + rows);
            System.out.print(out);
        }
    }
}
