package dev.sluice.compat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;
import org.apache.kafka.connect.transforms.Transformation;
import org.apache.kafka.connect.transforms.predicates.Predicate;

/**
 * Runs Kafka Connect's single message transforms over a corpus of records,
 * as a sink task's transformation stage would, and writes what comes out as
 * JSON lines.
 *
 * <p>Usage: {@code SmtHarness RECORDS.json CONFIGS.json OUT.jsonl}
 *
 * <p>RECORDS.json is an array of records: {@code id}, {@code topic},
 * {@code partition}, {@code offset}, {@code timestamp} (ms or null),
 * {@code schemas} (true: key and value are JsonConverter envelopes,
 * {"schema": ..., "payload": ...}), {@code key}, {@code value} (JSON; null is
 * a null key or a tombstone) and {@code headers} ([[key, text or null], ...]).
 * Keys and values go through JsonConverter (schemas.enable as the record
 * says) into Connect data, headers through SimpleHeaderConverter (Kafka
 * Connect's default header.converter); the outputs go back the same way.
 *
 * <p>CONFIGS.json is an array of {@code name}, {@code type} (the class),
 * {@code config} (string values), optionally {@code predicate}
 * ({@code type}, {@code config}) and {@code negate}, and optionally
 * {@code records} (the ids to run; default all). One instance per config,
 * reused for every record, as one task does.
 *
 * <p>Each output line: {@code config}, {@code record}, {@code outcome}
 * ({@code record}, {@code dropped} or {@code error}), and for a record its
 * {@code topic}, {@code partition}, {@code timestamp}, {@code key},
 * {@code value} (the converter's output parsed as JSON) and {@code headers};
 * for an error its {@code error} (the exception's class and message).
 */
public final class SmtHarness {
  private static final ObjectMapper MAPPER = new ObjectMapper();
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

  private SmtHarness() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: SmtHarness RECORDS.json CONFIGS.json OUT.jsonl");
      System.exit(2);
    }
    JsonNode records = MAPPER.readTree(new File(args[0]));
    JsonNode configs = MAPPER.readTree(new File(args[1]));
    int lines = 0;
    try (BufferedWriter out =
        new BufferedWriter(
            new OutputStreamWriter(
                Files.newOutputStream(Path.of(args[2])), StandardCharsets.UTF_8))) {
      for (JsonNode config : configs) {
        for (ObjectNode line : runConfig(config, records)) {
          out.write(MAPPER.writeValueAsString(line));
          out.write('\n');
          lines++;
        }
      }
    }
    System.err.println("smt-harness: " + lines + " outcomes");
  }

  private static List<ObjectNode> runConfig(JsonNode config, JsonNode records) throws Exception {
    String name = config.path("name").asText();
    List<String> only = new ArrayList<>();
    config.path("records").forEach(r -> only.add(r.asText()));
    List<ObjectNode> lines = new ArrayList<>();
    Transformation<SinkRecord> transform = instantiate(config.path("type").asText());
    Predicate<SinkRecord> predicate = null;
    try {
      transform.configure(strings(config.path("config")));
      if (config.hasNonNull("predicate")) {
        predicate = instantiate(config.path("predicate").path("type").asText());
        predicate.configure(strings(config.path("predicate").path("config")));
      }
    } catch (RuntimeException e) {
      // A config Kafka Connect refuses: every record's outcome says so.
      for (JsonNode record : records) {
        String id = record.path("id").asText();
        if (only.isEmpty() || only.contains(id)) {
          ObjectNode line = NODES.objectNode();
          line.put("config", name);
          line.put("record", id);
          lines.add(error(line, "configure", e));
        }
      }
      return lines;
    }
    boolean negate = config.path("negate").asBoolean(false);
    for (JsonNode record : records) {
      String id = record.path("id").asText();
      if (!only.isEmpty() && !only.contains(id)) {
        continue;
      }
      ObjectNode line = NODES.objectNode();
      line.put("config", name);
      line.put("record", id);
      Codec codec = new Codec(record.path("schemas").asBoolean(false));
      SinkRecord input = codec.toConnect(record);
      SinkRecord output;
      try {
        boolean applies = predicate == null || predicate.test(input) != negate;
        output = applies ? transform.apply(input) : input;
      } catch (RuntimeException e) {
        lines.add(error(line, "transform", e));
        continue;
      }
      if (output == null) {
        line.put("outcome", "dropped");
        lines.add(line);
        continue;
      }
      try {
        codec.fromConnect(output, line);
      } catch (RuntimeException e) {
        lines.add(error(line, "convert", e));
        continue;
      }
      lines.add(line);
    }
    transform.close();
    if (predicate != null) {
      predicate.close();
    }
    return lines;
  }

  private static ObjectNode error(ObjectNode line, String stage, RuntimeException e) {
    line.put("outcome", "error");
    line.put("stage", stage);
    line.put("error", e.getClass().getName() + ": " + e.getMessage());
    if (System.getenv("SMT_HARNESS_TRACE") != null) {
      StringWriter trace = new StringWriter();
      e.printStackTrace(new PrintWriter(trace));
      line.put("trace", trace.toString());
    }
    return line;
  }

  @SuppressWarnings("unchecked")
  private static <T> T instantiate(String className) throws Exception {
    return (T) Class.forName(className).getDeclaredConstructor().newInstance();
  }

  private static Map<String, String> strings(JsonNode node) {
    Map<String, String> out = new HashMap<>();
    Iterator<Map.Entry<String, JsonNode>> fields = node.fields();
    while (fields.hasNext()) {
      Map.Entry<String, JsonNode> e = fields.next();
      out.put(e.getKey(), e.getValue().isTextual() ? e.getValue().asText() : e.getValue().toString());
    }
    return out;
  }

  /** The converters of one record's kind: with schemas or without. */
  private static final class Codec {
    private final JsonConverter keys = new JsonConverter();
    private final JsonConverter values = new JsonConverter();
    private final SimpleHeaderConverter headers = new SimpleHeaderConverter();

    Codec(boolean schemas) {
      Map<String, String> config = Map.of("schemas.enable", Boolean.toString(schemas));
      keys.configure(config, true);
      values.configure(config, false);
      headers.configure(Map.of());
    }

    SinkRecord toConnect(JsonNode record) throws IOException {
      String topic = record.path("topic").asText();
      SchemaAndValue key = keys.toConnectData(topic, bytes(record.get("key")));
      SchemaAndValue value = values.toConnectData(topic, bytes(record.get("value")));
      ConnectHeaders connectHeaders = new ConnectHeaders();
      for (JsonNode h : record.path("headers")) {
        String k = h.get(0).asText();
        byte[] v = h.get(1).isNull() ? null : h.get(1).asText().getBytes(StandardCharsets.UTF_8);
        connectHeaders.add(k, headers.toConnectHeader(topic, k, v));
      }
      JsonNode ts = record.get("timestamp");
      Long timestamp = ts == null || ts.isNull() ? null : ts.asLong();
      return new SinkRecord(
          topic,
          record.path("partition").asInt(),
          key.schema(),
          key.value(),
          value.schema(),
          value.value(),
          record.path("offset").asLong(),
          timestamp,
          timestamp == null ? TimestampType.NO_TIMESTAMP_TYPE : TimestampType.CREATE_TIME,
          connectHeaders);
    }

    void fromConnect(SinkRecord r, ObjectNode line) throws RuntimeException {
      String topic = r.topic();
      JsonNode key = json(keys.fromConnectData(topic, r.keySchema(), r.key()));
      JsonNode value = json(values.fromConnectData(topic, r.valueSchema(), r.value()));
      ArrayNode hs = NODES.arrayNode();
      for (Header h : r.headers()) {
        byte[] b = headers.fromConnectHeader(topic, h.key(), h.schema(), h.value());
        ArrayNode pair = hs.addArray();
        pair.add(h.key());
        if (b == null) {
          pair.addNull();
        } else {
          pair.add(new String(b, StandardCharsets.UTF_8));
        }
      }
      line.put("outcome", "record");
      line.put("topic", topic);
      line.put("partition", r.kafkaPartition());
      if (r.timestamp() == null) {
        line.putNull("timestamp");
      } else {
        line.put("timestamp", r.timestamp());
      }
      line.set("key", key);
      line.set("value", value);
      line.set("headers", hs);
    }

    private static byte[] bytes(JsonNode node) throws IOException {
      return node == null || node.isNull() ? null : MAPPER.writeValueAsBytes(node);
    }

    private static JsonNode json(byte[] bytes) {
      if (bytes == null) {
        return NODES.nullNode();
      }
      try {
        return MAPPER.readTree(bytes);
      } catch (IOException e) {
        throw new IllegalStateException("the converter wrote something that is not JSON", e);
      }
    }
  }
}
