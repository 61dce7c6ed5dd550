// Drives Kafka Connect's own JsonConverter (org.apache.kafka:connect-json) for the byte-compatibility tests
// (tests/integration/test_connect_json_compat.py, through tests/support/connect_json/__init__.py).
//
// One JSON request per stdin line, one JSON answer per stdout line (Jackson, which connect-json brings):
//   {"op":"echo","read":{configs},"write":{configs},"key":false,"data":"<base64>"}
//       Kafka's converter configured with "read" reads the bytes (toConnectData); one configured with "write"
//       writes what it read (fromConnectData). Answer: {"out":"<base64>"|null,"schema":"<asJsonSchema text>"|null,
//       "value":"<typed description of the value>"} or {"error":"<class>: <message>"}.
//   {"op":"cases","write":{configs},"key":false}
//       The values built below (independently of the Python side) written by Kafka's converter.
//       Answer: {"cases":{"<name>":"<base64>"|null, ...}} (a case Kafka refuses: {"error:<name>": message}).
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;
import org.apache.kafka.connect.json.JsonConverter;

public class Harness {
    static final ObjectMapper MAPPER = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode req = MAPPER.readTree(line);
            ObjectNode answer = MAPPER.createObjectNode();
            try {
                boolean isKey = req.path("key").asBoolean(false);
                switch (req.get("op").asText()) {
                    case "echo" -> echo(req, isKey, answer);
                    case "cases" -> cases(req, isKey, answer);
                    default -> answer.put("error", "unknown op");
                }
            } catch (Exception e) {
                answer.put("error", e.getClass().getName() + ": " + e.getMessage());
            }
            System.out.println(MAPPER.writeValueAsString(answer));
            System.out.flush();
        }
    }

    static JsonConverter converter(JsonNode configs, boolean isKey) {
        Map<String, Object> map = new HashMap<>();
        configs.fields().forEachRemaining(e -> map.put(e.getKey(), e.getValue().asText()));
        JsonConverter c = new JsonConverter();
        c.configure(map, isKey);
        return c;
    }

    static void echo(JsonNode req, boolean isKey, ObjectNode answer) {
        JsonConverter reader = converter(req.get("read"), isKey);
        JsonConverter writer = converter(req.get("write"), isKey);
        byte[] data = req.get("data").isNull() ? null : Base64.getDecoder().decode(req.get("data").asText());
        SchemaAndValue sv = reader.toConnectData("topic", data);
        byte[] out = writer.fromConnectData("topic", sv.schema(), sv.value());
        answer.put("out", out == null ? null : Base64.getEncoder().encodeToString(out));
        JsonConverter describer = converter(MAPPER.createObjectNode().put("schemas.enable", "true"), isKey);
        answer.put("schema", sv.schema() == null ? null : describer.asJsonSchema(sv.schema()).toString());
        answer.put("value", describe(sv.schema(), sv.value()));
    }

    /** A typed text of a Connect value, the same as the Python side's describe(). */
    static String describe(Schema schema, Object v) {
        if (v == null) return "null";
        String name = schema == null ? null : schema.name();
        if (Decimal.LOGICAL_NAME.equals(name)) return "decimal:" + v;
        if (Date.LOGICAL_NAME.equals(name) || Time.LOGICAL_NAME.equals(name) || Timestamp.LOGICAL_NAME.equals(name))
            return name.substring(name.lastIndexOf('.') + 1).toLowerCase() + ":" + ((java.util.Date) v).getTime();
        if (v instanceof Struct s) {
            StringBuilder b = new StringBuilder("struct{");
            for (Field f : s.schema().fields()) {
                if (f.index() > 0) b.append(',');
                b.append(f.name()).append('=').append(describe(f.schema(), s.get(f)));
            }
            return b.append('}').toString();
        }
        if (v instanceof List<?> l) {
            List<String> parts = new ArrayList<>();
            for (Object o : l) parts.add(describe(schema == null ? null : schema.valueSchema(), o));
            return "[" + String.join(",", parts) + "]";
        }
        if (v instanceof Map<?, ?> m) {
            TreeMap<String, String> parts = new TreeMap<>();
            for (Map.Entry<?, ?> e : m.entrySet())
                parts.put(describe(schema == null ? null : schema.keySchema(), e.getKey()),
                          describe(schema == null ? null : schema.valueSchema(), e.getValue()));
            List<String> out = new ArrayList<>();
            parts.forEach((k, val) -> out.add(k + ":" + val));
            return "{" + String.join(",", out) + "}";
        }
        if (v instanceof byte[] b) return "bytes:" + java.util.HexFormat.of().formatHex(b);
        if (v instanceof Byte || v instanceof Short || v instanceof Integer || v instanceof Long) return "int:" + v;
        if (v instanceof Float f) return "f32:" + f;
        if (v instanceof Double d) return "f64:" + d;
        if (v instanceof Boolean x) return "bool:" + x;
        if (v instanceof String s) return "str:" + java.util.HexFormat.of().formatHex(s.getBytes(StandardCharsets.UTF_8));
        return "?" + v.getClass().getName() + ":" + v;
    }

    // -- the cases: keep in step with CASES in tests/integration/test_connect_json_compat.py -----------------
    static Map<String, SchemaAndValue> buildCases() {
        Map<String, SchemaAndValue> c = new LinkedHashMap<>();
        Schema prims = SchemaBuilder.struct().name("compat.Primitives").version(3).doc("all the primitive types")
            .field("i8", Schema.INT8_SCHEMA).field("i16", Schema.INT16_SCHEMA).field("i32", Schema.INT32_SCHEMA)
            .field("i64", Schema.INT64_SCHEMA).field("f32", Schema.FLOAT32_SCHEMA).field("f64", Schema.FLOAT64_SCHEMA)
            .field("flag", Schema.BOOLEAN_SCHEMA).field("text", Schema.STRING_SCHEMA).field("raw", Schema.BYTES_SCHEMA)
            .field("maybe", Schema.OPTIONAL_STRING_SCHEMA).build();
        c.put("primitives", new SchemaAndValue(prims, new Struct(prims)
            .put("i8", (byte) -128).put("i16", (short) 32767).put("i32", Integer.MIN_VALUE).put("i64", Long.MAX_VALUE)
            .put("f32", 0.1f).put("f64", 1.0e-5).put("flag", true)
            .put("text", "caf\u00e9 \u2603 \"q\" \\ \n\t\u0001\u001f \ud83d\ude00 </> \u007f\u2028\b\f\r")
            .put("raw", new byte[] {0, 1, 2, (byte) 0xff, (byte) 0xfe}).put("maybe", null)));
        Schema logical = SchemaBuilder.struct().name("compat.Logical")
            .field("price", Decimal.schema(2)).field("big", Decimal.schema(0)).field("tiny", Decimal.schema(10))
            .field("neg", Decimal.schema(3))
            .field("day", Date.SCHEMA).field("before", Date.SCHEMA).field("at", Time.SCHEMA)
            .field("when", Timestamp.SCHEMA).field("old", Timestamp.SCHEMA)
            .field("maybeDay", Date.builder().optional().build()).build();
        c.put("logical", new SchemaAndValue(logical, new Struct(logical)
            .put("price", new BigDecimal("12345.67")).put("big", new BigDecimal(BigInteger.TWO.pow(70)))
            .put("tiny", new BigDecimal("0.0000000001")).put("neg", new BigDecimal("-0.128"))
            .put("day", new java.util.Date(19724L * 86400000L)).put("before", new java.util.Date(-1L * 86400000L))
            .put("at", new java.util.Date(3723004L)).put("when", new java.util.Date(1704164645006L))
            .put("old", new java.util.Date(-1234567890123L)).put("maybeDay", null)));
        Schema inner = SchemaBuilder.struct().name("compat.Line").field("sku", Schema.STRING_SCHEMA)
            .field("qty", Schema.INT32_SCHEMA).build();
        Schema nested = SchemaBuilder.struct().name("compat.Nested")
            .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).build())
            .field("counts", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT64_SCHEMA).build())
            .field("byId", SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.OPTIONAL_STRING_SCHEMA).build())
            .field("lines", SchemaBuilder.array(inner).build())
            .field("first", inner).field("none", SchemaBuilder.struct().name("compat.Empty").optional().build())
            .field("doubles", SchemaBuilder.array(Schema.FLOAT64_SCHEMA).build())
            .field("floats", SchemaBuilder.array(Schema.FLOAT32_SCHEMA).build()).build();
        Map<String, Long> counts = new LinkedHashMap<>();
        counts.put("a", 1L);
        Map<Integer, String> byId = new LinkedHashMap<>();
        byId.put(-1, null);  // the order Kafka's reader (a HashMap) gives back
        byId.put(7, "seven");
        c.put("nested", new SchemaAndValue(nested, new Struct(nested)
            .put("tags", List.of("x", "y")).put("counts", counts).put("byId", byId)
            .put("lines", List.of(new Struct(inner).put("sku", "A").put("qty", 2)))
            .put("first", new Struct(inner).put("sku", "B").put("qty", -3)).put("none", null)
            .put("doubles", List.of(0.0, -0.0, 1.5, 100.0, 0.001, 1.0e-4, 1234567.0, 1.0e7, 1.2345678e7, 1.0e300,
                                    4.9e-324, 0.1 + 0.2, -2.5e-7))
            .put("floats", List.of(0.0f, 1.5f, 3.4e38f, 1.0e-5f, 0.3f, 16777216.0f))));
        Schema defaults = SchemaBuilder.struct().name("compat.Defaults")
            .field("n", SchemaBuilder.int32().optional().defaultValue(42).build())
            .field("s", SchemaBuilder.string().defaultValue("dflt").doc("a doc").build())
            .field("d", Decimal.builder(2).optional().defaultValue(new BigDecimal("1.50")).build())
            .field("p", SchemaBuilder.string().parameter("z", "1").parameter("a", "2").parameter("m", "3")
                .optional().build()).build();
        c.put("defaults", new SchemaAndValue(defaults, new Struct(defaults).put("n", null).put("p", "x")));
        c.put("string", new SchemaAndValue(Schema.STRING_SCHEMA, "plain"));
        c.put("int64", new SchemaAndValue(Schema.INT64_SCHEMA, -9007199254740993L));
        c.put("bytes", new SchemaAndValue(Schema.BYTES_SCHEMA, "hello".getBytes(StandardCharsets.UTF_8)));
        c.put("decimal", new SchemaAndValue(Decimal.schema(4), new BigDecimal("-1.0000")));
        Map<Integer, Boolean> pairs = new LinkedHashMap<>();
        pairs.put(1, true);
        c.put("intmap", new SchemaAndValue(SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.BOOLEAN_SCHEMA).build(), pairs));
        c.put("optionalNull", new SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, null));
        Map<String, Object> loose = new LinkedHashMap<>();
        loose.put("a", 1L);
        loose.put("b", List.of("x", 2.5, true));
        c.put("schemaless", new SchemaAndValue(null, loose));
        return c;
    }

    static void cases(JsonNode req, boolean isKey, ObjectNode answer) {
        JsonConverter writer = converter(req.get("write"), isKey);
        ObjectNode out = answer.putObject("cases");
        for (Map.Entry<String, SchemaAndValue> e : buildCases().entrySet()) {
            try {
                byte[] b = writer.fromConnectData("topic", e.getValue().schema(), e.getValue().value());
                out.put(e.getKey(), b == null ? null : Base64.getEncoder().encodeToString(b));
            } catch (Exception ex) {
                answer.put("error:" + e.getKey(), ex.getClass().getName() + ": " + ex.getMessage());
            }
        }
    }
}
