"""Confluent's own Python client, JSON Schema side, against Sluice.

Run by tests/schema_registry.rs with the venv of scripts/confluent-py.sh.

    confluent_json_schema.py produce  BOOTSTRAP REGISTRY TOPIC N   orders, JSONSerializer (validating)
    confluent_json_schema.py invalid  BOOTSTRAP REGISTRY TOPIC     one value that breaks the registered schema
    confluent_json_schema.py consume  BOOTSTRAP REGISTRY TOPIC N   prints each value JSONDeserializer read (validating)
    confluent_json_schema.py registry REGISTRY SUBJECT             SchemaRegistryClient calls; prints results as JSON
"""
import json
import sys

from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

import kafka_io

# A schema as users write them: no connect.* annotations.
ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "shop.Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "amount": {"type": "number"},
        "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "name", "amount", "tags"],
    "additionalProperties": False,
}


def order(i):
    return {
        "id": i,
        "name": f"order-{i} \u00e9",
        "amount": 10.25 * i,
        "note": None if i % 2 else f"note {i}",
        "tags": [f"t{j}" for j in range(i % 3)],
    }


def serializer(registry):
    client = SchemaRegistryClient({"url": registry})
    return JSONSerializer(json.dumps(ORDER), client)


def produce(bootstrap, registry, topic, n):
    kafka_io.produce(bootstrap, topic, (order(i) for i in range(1, n + 1)), serializer(registry))


def invalid(bootstrap, registry, topic):
    # The serializer refuses it, as it should...
    serialize = serializer(registry)
    bad = {"id": "not a number", "name": "x", "amount": 1, "tags": []}
    try:
        serialize(bad, SerializationContext(topic, MessageField.VALUE))
        raise SystemExit("invalid: the serializer took a value its schema refuses")
    except Exception as e:  # SerializationError
        print(json.dumps({"serializer_refused": type(e).__name__}))
    # ...so it is framed by hand with the registered id, as a broken
    # producer would write it.
    schema_id = SchemaRegistryClient({"url": registry}).get_latest_version(f"{topic}-value").schema_id
    framed = b"\x00" + schema_id.to_bytes(4, "big") + json.dumps(bad).encode()
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key=b"bad", value=framed, partition=0)
    assert producer.flush(30) == 0, "undelivered records"


def consume(bootstrap, registry, topic, n):
    client = SchemaRegistryClient({"url": registry})
    deserializer = JSONDeserializer(None, schema_registry_client=client)
    kafka_io.consume(bootstrap, topic, n, "confluent-json", deserializer)


def registry(url, subject):
    client = SchemaRegistryClient({"url": url})
    out = {}

    def attempt(name, schema):
        try:
            out[name] = client.register_schema(subject, Schema(json.dumps(schema), "JSON"))
        except SchemaRegistryError as e:
            out[name] = {"status": e.http_status_code, "code": e.error_code}

    closed = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False}
    out["v1_id"] = client.register_schema(subject, Schema(json.dumps(closed), "JSON"))
    out["v1_again_id"] = client.register_schema(subject, Schema(json.dumps(closed, indent=2), "JSON"))
    added = json.loads(json.dumps(closed))
    added["properties"]["b"] = {"type": "string"}
    out["optional_added_compatible"] = client.test_compatibility(subject, Schema(json.dumps(added), "JSON"))
    attempt("v2_id", added)
    narrowed = json.loads(json.dumps(added))
    narrowed["properties"]["a"] = {"type": "string"}
    out["type_changed_compatible"] = client.test_compatibility(subject, Schema(json.dumps(narrowed), "JSON"))
    attempt("type_changed", narrowed)
    fetched = client.get_schema(out["v2_id"])
    out["by_id_type"] = fetched.schema_type
    latest = client.get_latest_version(subject)
    out["latest"] = {"version": latest.version, "id": latest.schema_id, "type": latest.schema.schema_type}
    # An Avro schema cannot join a subject of JSON schemas.
    try:
        client.register_schema(subject, Schema('{"type": "string"}', "AVRO"))
        out["avro_in_json_subject"] = "registered"
    except SchemaRegistryError as e:
        out["avro_in_json_subject"] = {"status": e.http_status_code, "code": e.error_code}
    try:
        client.register_schema(f"{subject}-broken", Schema('{"type": 12}', "JSON"))
        out["invalid_schema"] = "registered"
    except SchemaRegistryError as e:
        out["invalid_schema"] = {"status": e.http_status_code, "code": e.error_code}
    print(json.dumps(out))


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "produce":
        produce(args[0], args[1], args[2], int(args[3]))
    elif command == "invalid":
        invalid(args[0], args[1], args[2])
    elif command == "consume":
        consume(args[0], args[1], args[2], int(args[3]))
    elif command == "registry":
        registry(args[0], args[1])
    else:
        raise SystemExit(f"unknown command {command}")
