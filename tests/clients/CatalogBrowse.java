import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;

/**
 * What a JDBC tool (DBeaver, Metabase, DataGrip) does when it opens a database: connect,
 * list the tables and their columns through DatabaseMetaData, and run one query.
 * Usage: java CatalogBrowse URL USER PASSWORD TABLE QUERY. Prints one line per fact.
 */
public final class CatalogBrowse {
    private CatalogBrowse() {}

    public static void main(String[] args) throws Exception {
        String url = args[0];
        String table = args[3];
        String query = args[4];
        try (Connection conn = DriverManager.getConnection(url, args[1], args[2])) {
            DatabaseMetaData meta = conn.getMetaData();
            System.out.println("product " + meta.getDatabaseProductName() + " "
                    + meta.getDatabaseProductVersion());
            try (ResultSet rs = meta.getSchemas()) {
                while (rs.next()) {
                    System.out.println("schema " + rs.getString("TABLE_SCHEM"));
                }
            }
            try (ResultSet rs = meta.getTables(null, null, "%", new String[] {"TABLE"})) {
                while (rs.next()) {
                    System.out.println("table " + rs.getString("TABLE_SCHEM") + "."
                            + rs.getString("TABLE_NAME") + " " + rs.getString("TABLE_TYPE"));
                }
            }
            try (ResultSet rs = meta.getColumns(null, null, table, "%")) {
                while (rs.next()) {
                    System.out.println("column " + rs.getString("TABLE_NAME") + "."
                            + rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME")
                            + " " + rs.getInt("DATA_TYPE") + " " + rs.getInt("ORDINAL_POSITION"));
                }
            }
            try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(query)) {
                while (rs.next()) {
                    System.out.println("answer " + rs.getString(1));
                }
            }
        }
    }
}
