package dev.sluice.compat;

import com.fasterxml.jackson.core.StreamWriteFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.DoubleNode;
import com.fasterxml.jackson.databind.node.FloatNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.metrics.PluginMetrics;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.file.FileStreamSourceTask;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTaskContext;
import org.apache.kafka.connect.storage.OffsetStorageReader;

/**
 * Kafka Connect's JsonConverter with schemas.enable=true, as the reference
 * of the converter differential (tests/compat_converter.rs).
 *
 * <p>{@code ConverterHarness convert CASES.json OUT.jsonl}: CASES.json is an
 * array of {@code id}, {@code key} (true: a key converter), {@code config}
 * (the converter's keys besides schemas.enable, e.g. decimal.format) and
 * {@code bytes} (the envelope's text, kept as text so that no number is
 * read before the converter reads it). Each case is read into Connect data
 * ({@code toConnectData}) and written back ({@code fromConnectData}). Each
 * output line: {@code id}, {@code outcome} ({@code ok} or {@code error}),
 * {@code bytes} (what JsonConverter wrote, as text), {@code shortest} (the
 * same envelope with every float and double written as Java 19 and later
 * write them: Jackson's Schubfach writer, the algorithm of their
 * Double.toString; this JVM's differs when it is older) and for an error
 * its {@code error}.
 *
 * <p>{@code ConverterHarness file-source FILE OUT.jsonl}: runs Kafka Connect's
 * FileStreamSourceTask over FILE (topic {@code t}) until it has nothing
 * more, and writes each record's key and value as JsonConverter
 * (schemas.enable=true) writes them: {@code key}, {@code value} (text or
 * null).
 */
public final class ConverterHarness {
  private static final ObjectMapper MAPPER = new ObjectMapper();
  /** Reads numbers exactly, as JsonConverter's deserializer does. */
  private static final ObjectMapper EXACT =
      JsonMapper.builder()
          .nodeFactory(new JsonNodeFactory(true))
          .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
          .build();
  /** Writes doubles and floats with the shortest digits (Java 19+). */
  private static final ObjectMapper SHORTEST =
      JsonMapper.builder()
          .nodeFactory(new JsonNodeFactory(true))
          .enable(StreamWriteFeature.USE_FAST_DOUBLE_WRITER)
          .build();
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

  private ConverterHarness() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: ConverterHarness convert|file-source INPUT OUT.jsonl");
      System.exit(2);
    }
    try (BufferedWriter out =
        new BufferedWriter(
            new OutputStreamWriter(
                Files.newOutputStream(Path.of(args[2])), StandardCharsets.UTF_8))) {
      int lines =
          switch (args[0]) {
            case "convert" -> convert(new File(args[1]), out);
            case "file-source" -> fileSource(args[1], out);
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
          };
      System.err.println("converter-harness: " + lines + " lines");
    }
  }

  private static int convert(File cases, BufferedWriter out) throws IOException {
    int lines = 0;
    for (JsonNode c : MAPPER.readTree(cases)) {
      ObjectNode line = NODES.objectNode();
      line.put("id", c.path("id").asText());
      JsonConverter converter = new JsonConverter();
      Map<String, String> config = new HashMap<>();
      config.put("schemas.enable", "true");
      Iterator<Map.Entry<String, JsonNode>> it = c.path("config").fields();
      while (it.hasNext()) {
        Map.Entry<String, JsonNode> e = it.next();
        config.put(e.getKey(), e.getValue().asText());
      }
      converter.configure(config, c.path("key").asBoolean(false));
      try {
        byte[] in = c.path("bytes").asText().getBytes(StandardCharsets.UTF_8);
        SchemaAndValue data = converter.toConnectData("t", in);
        byte[] written = converter.fromConnectData("t", data.schema(), data.value());
        line.put("outcome", "ok");
        if (written == null) {
          line.putNull("bytes");
          line.putNull("shortest");
        } else {
          line.put("bytes", new String(written, StandardCharsets.UTF_8));
          line.put("shortest", shortest(written, data.schema()));
        }
      } catch (RuntimeException e) {
        line.put("outcome", "error");
        line.put("error", e.getClass().getName() + ": " + e.getMessage());
      }
      out.write(MAPPER.writeValueAsString(line));
      out.write('\n');
      lines++;
    }
    return lines;
  }

  /** The envelope again, its floats and doubles written as Java 19+ writes them. */
  private static String shortest(byte[] envelope, Schema schema) throws IOException {
    ObjectNode tree = (ObjectNode) EXACT.readTree(envelope);
    if (schema != null) {
      fixSchema(tree.get("schema"), schema);
      tree.set("payload", fix(tree.get("payload"), schema));
    }
    // As bytes: Jackson's UTF-8 writer, as JsonConverter's (it escapes
    // characters past U+FFFF, the String writer does not).
    return new String(SHORTEST.writeValueAsBytes(tree), StandardCharsets.UTF_8);
  }

  /** A schema's JSON: defaults are values of their schema. */
  private static void fixSchema(JsonNode json, Schema schema) {
    if (!(json instanceof ObjectNode o)) {
      return;
    }
    if (o.has("default")) {
      o.set("default", fix(o.get("default"), schema));
    }
    switch (schema.type()) {
      case ARRAY -> fixSchema(o.get("items"), schema.valueSchema());
      case MAP -> {
        fixSchema(o.get("keys"), schema.keySchema());
        fixSchema(o.get("values"), schema.valueSchema());
      }
      case STRUCT -> {
        List<Field> fields = schema.fields();
        for (int i = 0; i < fields.size(); i++) {
          fixSchema(o.get("fields").get(i), fields.get(i).schema());
        }
      }
      default -> {}
    }
  }

  /** A value: floats and doubles as such, so that they are written again. */
  private static JsonNode fix(JsonNode v, Schema schema) {
    if (v == null || v.isNull() || schema == null) {
      return v;
    }
    switch (schema.type()) {
      case FLOAT32:
        return v.isNumber() ? FloatNode.valueOf(v.decimalValue().floatValue()) : v;
      case FLOAT64:
        return v.isNumber() ? DoubleNode.valueOf(v.decimalValue().doubleValue()) : v;
      case ARRAY:
        if (v instanceof ArrayNode a) {
          for (int i = 0; i < a.size(); i++) {
            a.set(i, fix(a.get(i), schema.valueSchema()));
          }
        }
        return v;
      case MAP:
        if (v instanceof ObjectNode o) {
          List<String> names = new java.util.ArrayList<>();
          o.fieldNames().forEachRemaining(names::add);
          for (String name : names) {
            o.set(name, fix(o.get(name), schema.valueSchema()));
          }
        } else if (v instanceof ArrayNode a) {
          for (JsonNode entry : a) {
            ArrayNode pair = (ArrayNode) entry;
            pair.set(0, fix(pair.get(0), schema.keySchema()));
            pair.set(1, fix(pair.get(1), schema.valueSchema()));
          }
        }
        return v;
      case STRUCT:
        if (v instanceof ObjectNode o) {
          for (Field f : schema.fields()) {
            o.set(f.name(), fix(o.get(f.name()), f.schema()));
          }
        }
        return v;
      default:
        return v;
    }
  }

  private static int fileSource(String file, BufferedWriter out) throws Exception {
    FileStreamSourceTask task = new FileStreamSourceTask();
    task.initialize(
        new SourceTaskContext() {
          @Override
          public Map<String, String> configs() {
            return Map.of();
          }

          @Override
          public OffsetStorageReader offsetStorageReader() {
            return new OffsetStorageReader() {
              @Override
              public <T> Map<String, Object> offset(Map<String, T> partition) {
                return null;
              }

              @Override
              public <T> Map<Map<String, T>, Map<String, Object>> offsets(
                  Collection<Map<String, T>> partitions) {
                return Map.of();
              }
            };
          }

          @Override
          public PluginMetrics pluginMetrics() {
            return null;
          }
        });
    task.start(Map.of("file", file, "topic", "t"));
    JsonConverter keys = new JsonConverter();
    keys.configure(Map.of("schemas.enable", "true"), true);
    JsonConverter values = new JsonConverter();
    values.configure(Map.of("schemas.enable", "true"), false);
    int lines = 0;
    // An empty poll waits a second; two in a row: the file is read.
    int empty = 0;
    while (empty < 2) {
      List<SourceRecord> records = task.poll();
      if (records == null || records.isEmpty()) {
        empty++;
        continue;
      }
      empty = 0;
      for (SourceRecord r : records) {
        ObjectNode line = NODES.objectNode();
        byte[] k = keys.fromConnectData(r.topic(), r.keySchema(), r.key());
        byte[] v = values.fromConnectData(r.topic(), r.valueSchema(), r.value());
        if (k == null) {
          line.putNull("key");
        } else {
          line.put("key", new String(k, StandardCharsets.UTF_8));
        }
        if (v == null) {
          line.putNull("value");
        } else {
          line.put("value", new String(v, StandardCharsets.UTF_8));
        }
        out.write(MAPPER.writeValueAsString(line));
        out.write('\n');
        lines++;
      }
    }
    task.stop();
    return lines;
  }
}
