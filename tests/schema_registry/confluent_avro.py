"""Confluent's own Python client against Sluice's built-in schema registry.

Run by tests/schema_registry.rs with the venv of scripts/confluent-py.sh.

    confluent_avro.py produce  BOOTSTRAP REGISTRY TOPIC N   Avro orders, AvroSerializer
    confluent_avro.py consume  BOOTSTRAP REGISTRY TOPIC N   prints each decoded value as JSON
    confluent_avro.py registry REGISTRY SUBJECT             SchemaRegistryClient calls; prints results as JSON
    confluent_avro.py deletes  REGISTRY SUBJECT             soft and permanent deletes; prints results as JSON
"""
import datetime
import decimal
import json
import sys

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError

import kafka_io

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 2}},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def order(i):
    return {
        "id": i,
        "name": f"order-{i} \u00e9",
        # Digits a double would round: only exact end to end.
        "amount": decimal.Decimal("12345678901234567.89") + i,
        "placed": datetime.datetime(2024, 1, 1, 0, 0, 0, 123000, tzinfo=datetime.timezone.utc)
        + datetime.timedelta(seconds=i),
        "day": datetime.date(2024, 2, 29),
        "note": None if i % 2 else f"note {i}",
    }


def produce(bootstrap, registry, topic, n):
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry}), json.dumps(ORDER))
    kafka_io.produce(bootstrap, topic, (order(i) for i in range(1, n + 1)), serializer)


def plain(v):
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (datetime.datetime, datetime.date)):
        return v.isoformat()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def consume(bootstrap, registry, topic, n):
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    kafka_io.consume(bootstrap, topic, n, "confluent-avro", deserializer, plain)


def registry(url, subject):
    client = SchemaRegistryClient({"url": url})
    out = {}
    v1 = Schema(json.dumps(ORDER), "AVRO")
    out["v1_id"] = client.register_schema(subject, v1)
    out["v1_again_id"] = client.register_schema(subject, Schema(json.dumps(ORDER, indent=2), "AVRO"))
    added = dict(ORDER, fields=ORDER["fields"] + [{"name": "extra", "type": ["null", "long"], "default": None}])
    out["optional_added_compatible"] = client.test_compatibility(subject, Schema(json.dumps(added), "AVRO"))
    out["v2_id"] = client.register_schema(subject, Schema(json.dumps(added), "AVRO"))
    required = dict(ORDER, fields=ORDER["fields"] + [{"name": "must", "type": "string"}])
    out["required_added_compatible"] = client.test_compatibility(subject, Schema(json.dumps(required), "AVRO"))
    try:
        client.register_schema(subject, Schema(json.dumps(required), "AVRO"))
        out["required_added"] = "registered"
    except SchemaRegistryError as e:
        out["required_added"] = {"status": e.http_status_code, "code": e.error_code}
    latest = client.get_latest_version(subject)
    out["latest"] = {"version": latest.version, "id": latest.schema_id}
    out["versions"] = client.get_versions(subject)
    out["by_id_has_extra"] = "extra" in client.get_schema(out["v2_id"]).schema_str
    found = client.lookup_schema(subject, v1)
    out["lookup_v1"] = {"version": found.version, "id": found.schema_id}
    out["subjects"] = client.get_subjects()
    out["set_none"] = client.set_compatibility(subject, "NONE")
    out["required_after_none_id"] = client.register_schema(subject, Schema(json.dumps(required), "AVRO"))
    try:
        client.get_schema(9999)
        out["missing_id"] = "found"
    except SchemaRegistryError as e:
        out["missing_id"] = {"status": e.http_status_code, "code": e.error_code}
    print(json.dumps(out, default=str))



def deletes(url, subject):
    client = SchemaRegistryClient({"url": url})
    out = {}

    def attempt(name, call):
        try:
            out[name] = call()
        except SchemaRegistryError as e:
            out[name] = {"status": e.http_status_code, "code": e.error_code}

    v1 = Schema(json.dumps(ORDER), "AVRO")
    added = dict(ORDER, fields=ORDER["fields"] + [{"name": "extra", "type": ["null", "long"], "default": None}])
    v2 = Schema(json.dumps(added), "AVRO")
    out["ids"] = [client.register_schema(subject, v1), client.register_schema(subject, v2)]
    attempt("hard_before_soft", lambda: client.delete_version(subject, 2, permanent=True))
    attempt("soft_v2", lambda: client.delete_version(subject, 2))
    attempt("soft_v2_again", lambda: client.delete_version(subject, 2))
    out["versions"] = client.get_versions(subject)
    out["versions_with_deleted"] = client.get_versions(subject, deleted=True)
    out["latest_after_soft"] = client.get_latest_version(subject).version
    attempt("v2_by_version", lambda: client.get_version(subject, 2).version)
    out["v2_by_version_deleted"] = client.get_version(subject, 2, deleted=True).version
    out["v2_id_still_served"] = "extra" in client.get_schema(out["ids"][1]).schema_str
    attempt("hard_v2", lambda: client.delete_version(subject, 2, permanent=True))
    out["versions_after_hard"] = client.get_versions(subject, deleted=True)
    attempt("soft_subject", lambda: client.delete_subject(subject))
    out["subjects"] = client.get_subjects()
    out["subjects_with_deleted"] = client.get_subjects(deleted=True)
    attempt("versions_of_deleted_subject", lambda: client.get_versions(subject))
    attempt("hard_subject", lambda: client.delete_subject(subject, permanent=True))
    out["subjects_after_hard"] = client.get_subjects(deleted=True)
    out["registered_again"] = client.register_schema(subject, v1)
    out["version_again"] = client.get_latest_version(subject).version
    print(json.dumps(out))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "produce":
        produce(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif mode == "consume":
        consume(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif mode == "registry":
        registry(sys.argv[2], sys.argv[3])
    elif mode == "deletes":
        deletes(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(f"unknown mode {mode}")
