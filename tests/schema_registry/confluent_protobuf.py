"""Confluent's own Python client, Protobuf side, against Sluice.

Run by tests/schema_registry.rs with the venv of scripts/confluent-py.sh.
The message classes are built from descriptors at run time (no protoc):
the serializer registers the file's descriptor, as it does for generated
classes.

    confluent_protobuf.py produce  BOOTSTRAP REGISTRY TOPIC N   orders, ProtobufSerializer
    confluent_protobuf.py consume  BOOTSTRAP REGISTRY TOPIC N   prints each value ProtobufDeserializer read,
                                                                 with a class built from the writer's schema
                                                                 as the registry serves it (format=serialized)
    confluent_protobuf.py registry REGISTRY SUBJECT             SchemaRegistryClient calls; prints results as JSON
"""
import base64
import datetime
import json
import sys
import time

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory, timestamp_pb2, wrappers_pb2
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.confluent import meta_pb2
from confluent_kafka.schema_registry.confluent.type import decimal_pb2
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

import kafka_io

F = descriptor_pb2.FieldDescriptorProto


def order_file():
    """shop/order.proto, as a user would write it:

    syntax = "proto3";
    package shop;
    import "google/protobuf/timestamp.proto";
    message Order {
      int64 id = 1;
      string name = 2;
      double amount = 3;
      google.protobuf.Timestamp placed_at = 4;
      repeated string tags = 5;
      Status status = 6;
      Address address = 7;
      map<string, int32> counts = 8;
      uint32 units = 9;
      enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
      message Address { string city = 1; }
    }
    """
    f = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    m = f.message_type.add(name="Order")

    def field(msg, name, number, kind, label=F.LABEL_OPTIONAL, type_name=None):
        fd = msg.field.add(name=name, number=number, type=kind, label=label)
        if type_name:
            fd.type_name = type_name

    field(m, "id", 1, F.TYPE_INT64)
    field(m, "name", 2, F.TYPE_STRING)
    field(m, "amount", 3, F.TYPE_DOUBLE)
    field(m, "placed_at", 4, F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp")
    field(m, "tags", 5, F.TYPE_STRING, label=F.LABEL_REPEATED)
    field(m, "status", 6, F.TYPE_ENUM, type_name=".shop.Order.Status")
    field(m, "address", 7, F.TYPE_MESSAGE, type_name=".shop.Order.Address")
    field(m, "counts", 8, F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=".shop.Order.CountsEntry")
    field(m, "units", 9, F.TYPE_UINT32)
    status = m.enum_type.add(name="Status")
    for i, symbol in enumerate(["NEW", "PAID", "SHIPPED"]):
        status.value.add(name=symbol, number=i)
    address = m.nested_type.add(name="Address")
    field(address, "city", 1, F.TYPE_STRING)
    entry = m.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    field(entry, "key", 1, F.TYPE_STRING)
    field(entry, "value", 2, F.TYPE_INT32)
    return f


# The imports a served schema may have, by file name.
KNOWN_IMPORTS = {
    "google/protobuf/descriptor.proto": descriptor_pb2,
    "google/protobuf/timestamp.proto": timestamp_pb2,
    "google/protobuf/wrappers.proto": wrappers_pb2,
    "confluent/meta.proto": meta_pb2,
    "confluent/type/decimal.proto": decimal_pb2,
}


def message_class(file_proto, full_name):
    pool = descriptor_pool.DescriptorPool()
    added = set()

    def add(name):
        if name in added:
            return
        if name not in KNOWN_IMPORTS:
            raise SystemExit(f"the schema imports {name}, which this script does not know")
        module = KNOWN_IMPORTS[name]
        dependency = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
        for d in dependency.dependency:
            add(d)
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
        added.add(name)

    for d in file_proto.dependency:
        add(d)
    pool.Add(file_proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


Order = message_class(order_file(), "shop.Order")


def order(i):
    o = Order(
        id=i,
        name=f"order-{i} \u00e9",
        amount=10.25 * i,
        tags=[f"t{j}" for j in range(i % 3)],
        status=i % 3,
        units=4_000_000_000 + i,
    )
    o.placed_at.FromDatetime(datetime.datetime(2026, 12, i, 10, 30, 0, 250_000))
    if i % 2 == 0:
        o.address.city = f"city {i}"
    o.counts["a"] = i
    return o


def produce(bootstrap, registry, topic, n):
    client = SchemaRegistryClient({"url": registry})
    serializer = ProtobufSerializer(Order, client)
    kafka_io.produce(bootstrap, topic, (order(i) for i in range(1, n + 1)), serializer)


def consume(bootstrap, registry, topic, n):
    client = SchemaRegistryClient({"url": registry})
    # The writer registers its schema with its first record: wait for it.
    deadline = time.monotonic() + 60
    while True:
        try:
            latest = client.get_latest_version(f"{topic}-value")
            break
        except SchemaRegistryError as e:
            if e.error_code != 40401 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    served = client.get_schema(latest.schema_id, fmt="serialized")
    file_proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(served.schema_str))
    if not file_proto.name:
        file_proto.name = "served.proto"
    first = file_proto.message_type[0].name
    name = f"{file_proto.package}.{first}" if file_proto.package else first
    cls = message_class(file_proto, name)
    deserializer = ProtobufDeserializer(cls, {}, schema_registry_client=client)
    print(json.dumps({"message": name, "schema_type": served.schema_type}))
    kafka_io.consume(
        bootstrap, topic, n, "confluent-protobuf", deserializer,
        plain=lambda m: json_format.MessageToDict(m, preserving_proto_field_name=True),
    )


def registry(url, subject):
    client = SchemaRegistryClient({"url": url})
    out = {}
    v1 = 'syntax = "proto3";\npackage shop;\nmessage Item {\n  int64 id = 1;\n  string sku = 2;\n}\n'

    def attempt(name, text):
        try:
            out[name] = client.register_schema(subject, Schema(text, "PROTOBUF"))
        except SchemaRegistryError as e:
            out[name] = {"status": e.http_status_code, "code": e.error_code}

    out["v1_id"] = client.register_schema(subject, Schema(v1, "PROTOBUF"))
    # The same schema as a descriptor, as the serializer sends it: one id.
    item_file = descriptor_pb2.FileDescriptorProto(name="item.proto", package="shop", syntax="proto3")
    item = item_file.message_type.add(name="Item")
    item.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    item.field.add(name="sku", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    encoded = base64.b64encode(item_file.SerializeToString()).decode()
    out["v1_as_descriptor_id"] = client.register_schema(subject, Schema(encoded, "PROTOBUF"))
    out["v1_lookup_version"] = client.lookup_schema(subject, Schema(v1.replace("\n  ", " "), "PROTOBUF")).version
    added = v1.replace("string sku = 2;", "string sku = 2;\n  bool gift = 3;")
    out["field_added_compatible"] = client.test_compatibility(subject, Schema(added, "PROTOBUF"))
    attempt("v2_id", added)
    changed = added.replace("int64 id = 1;", "string id = 1;")
    out["kind_changed_compatible"] = client.test_compatibility(subject, Schema(changed, "PROTOBUF"))
    attempt("kind_changed", changed)
    out["by_id_type"] = client.get_schema(out["v2_id"]).schema_type
    latest = client.get_latest_version(subject)
    out["latest"] = {"version": latest.version, "id": latest.schema_id, "type": latest.schema.schema_type}
    out["types"] = sorted(client.get_schema_types())
    try:
        client.register_schema(f"{subject}-broken", Schema('syntax = "proto3"; message {', "PROTOBUF"))
        out["invalid_schema"] = "registered"
    except SchemaRegistryError as e:
        out["invalid_schema"] = {"status": e.http_status_code, "code": e.error_code}
    print(json.dumps(out))


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "produce":
        produce(args[0], args[1], args[2], int(args[3]))
    elif command == "consume":
        consume(args[0], args[1], args[2], int(args[3]))
    elif command == "registry":
        registry(args[0], args[1])
    else:
        raise SystemExit(f"unknown command {command}")
