#!/usr/bin/env python3
"""Writes records.json and configs.json, the SMT differential's corpus (tests/compat_smt.rs).

Run it after editing: python3 compat/smt-corpus/generate.py. Both files are committed."""
import json
import os

os.chdir(os.path.dirname(os.path.abspath(__file__)))

# The records: schemaless JSON, and JsonConverter envelopes (schemas: true).
TS = 1767263400000  # 2026-01-01T10:30:00Z
def rec(id, key, value, headers=(), topic="orders", ts=TS, schemas=False, partition=2, offset=40):
    return {"id": id, "topic": topic, "partition": partition, "offset": offset, "timestamp": ts,
            "schemas": schemas, "key": key, "value": value, "headers": [list(h) for h in headers]}

src = lambda table: {"version": "3.6.1.Final", "connector": "postgresql", "name": "shop", "ts_ms": 1767263399000,
                     "db": "shop", "schema": "public", "table": table, "lsn": 2841}
records = [
  rec("flat", {"id": 1}, {"id": 1, "name": "Ada", "amount": "42", "price": 3.5, "qty": 7, "active": True,
      "created": TS, "createdAt": "2026-01-01 10:30:00", "ssn": "123-45-6789", "tags": ["a", "b"]},
      headers=[("trace", "abc"), ("source", "web")]),
  rec("nested", {"id": 2}, {"id": 2, "name": "Bob", "customer": {"name": "Zoë", "tier": "gold",
      "address": {"city": "Köln", "zip": "50667"}}, "items": [{"sku": "x", "qty": 1}], "meta": {}}),
  rec("nulls", {"id": 3}, {"id": 3, "name": None, "amount": None, "price": None, "qty": None, "active": None,
      "created": None, "createdAt": None, "ssn": None, "tags": None, "customer": None}),
  rec("missing", {"id": 4}, {"id": 4}),
  rec("unicode", {"id": "ключ-5"}, {"id": 5, "name": "Zoë 名前 😀", "名前": "値", "ssn": "ß\"\\\n\t",
      "customer": {"name": "Ünïcødé", "address": {"city": "東京"}}}, headers=[("città", "Milano 🍕")],
      topic="commandes-ü"),
  rec("tombstone", {"id": 6}, None, headers=[("trace", "t6")]),
  rec("headers", "k7", {"id": 7, "name": "Hal"}, headers=[("trace", "abc"), ("trace", "def"), ("empty", ""),
      ("nil", None), ("num", "42")]),
  rec("primitive", None, "just text"),
  rec("no-timestamp", {"id": 9}, {"id": 9, "name": "Ann", "created": TS}, ts=None),
  rec("numbers", {"id": 10}, {"id": 10, "amount": "-7", "price": 2, "qty": 300, "active": "true",
      "created": 1767263400123, "createdAt": "1999-12-31 23:59:59", "big": 9007199254740993, "tiny": -1.5e-7}),
  rec("dbz-create", {"id": 11}, {"before": None, "after": {"id": 11, "name": "Ada", "email": "ada@example.com"},
      "source": src("customers"), "op": "c", "ts_ms": 1767263400100}, topic="shop.public.customers"),
  rec("dbz-update", {"id": 11}, {"before": {"id": 11, "name": "Ada", "email": "ada@example.com"},
      "after": {"id": 11, "name": "Ada L.", "email": "ada@example.org"},
      "source": src("customers"), "op": "u", "ts_ms": 1767263400200}, topic="shop.public.customers"),
  rec("dbz-delete", {"id": 11}, {"before": {"id": 11, "name": "Ada L.", "email": "ada@example.org"}, "after": None,
      "source": src("customers"), "op": "d", "ts_ms": 1767263400300}, topic="shop.public.customers"),
  rec("dbz-tombstone", {"id": 11}, None, topic="shop.public.customers"),
  rec("dbz-read", {"id": 12}, {"before": None, "after": {"id": 12, "name": "Zoë", "email": None},
      "source": src("customers"), "op": "r", "ts_ms": 1767263400400}, topic="shop.public.customers",
      headers=[("trace", "r12")]),
]

def f(fname, type, optional=True, **kw):
    d = {"field": fname, "type": type, "optional": optional}; d.update(kw); return d
def struct(fields, name=None, optional=False, field=None):
    d = {"type": "struct", "fields": fields, "optional": optional}
    if name: d["name"] = name
    if field: d["field"] = field
    return d
def env(schema, payload): return {"schema": schema, "payload": payload}

key_schema = struct([f("id", "int32", False)], name="shop.Key")
address = struct([f("city", "string"), f("zip", "string")], name="shop.Address", optional=True, field="address")
customer = struct([f("name", "string"), f("tier", "string"), address], name="shop.Customer", optional=True, field="customer")
ts_field = f("created", "int64", name="org.apache.kafka.connect.data.Timestamp", version=1)
order = struct([f("id", "int32", False), f("name", "string"), f("amount", "string"), f("price", "double"),
                f("qty", "int64"), f("active", "boolean"), ts_field, f("createdAt", "string"), f("ssn", "string"),
                {"field": "tags", "type": "array", "items": {"type": "string", "optional": False}, "optional": True},
                customer], name="shop.Order")
def order_payload(**kw):
    p = {k: None for k in ["id", "name", "amount", "price", "qty", "active", "created", "createdAt", "ssn", "tags", "customer"]}
    p.update(kw); return p
row = struct([f("id", "int32", False), f("name", "string"), f("email", "string")], name="shop.public.customers.Value", optional=True)
def dbz_schema():
    b = dict(row, field="before"); a = dict(row, field="after")
    source = struct([f("version", "string", False), f("connector", "string", False), f("name", "string", False),
                     f("ts_ms", "int64", False), f("db", "string", False), f("schema", "string", False),
                     f("table", "string", False), f("lsn", "int64")], name="io.debezium.connector.postgresql.Source", field="source")
    return struct([b, a, source, f("op", "string", False), f("ts_ms", "int64")], name="shop.public.customers.Envelope")

records += [
  rec("s-flat", env(key_schema, {"id": 21}), env(order, order_payload(id=21, name="Ada", amount="42", price=3.5, qty=7,
      active=True, created=TS, createdAt="2026-01-01 10:30:00", ssn="123-45-6789", tags=["a", "b"])),
      schemas=True, headers=[("trace", "abc")]),
  rec("s-nested", env(key_schema, {"id": 22}), env(order, order_payload(id=22, name="Zoë 名前 😀",
      customer={"name": "Ünïcødé", "tier": "gold", "address": {"city": "Köln", "zip": "50667"}})), schemas=True),
  rec("s-nulls", env(key_schema, {"id": 23}), env(order, order_payload(id=23, customer={"name": None, "tier": None, "address": None})), schemas=True),
  rec("s-tombstone", env(key_schema, {"id": 24}), None, schemas=True),
  rec("s-primitive", None, env({"type": "string", "optional": False}, "just text"), schemas=True),
  rec("s-dbz-create", env(key_schema, {"id": 25}), env(dbz_schema(), {"before": None,
      "after": {"id": 25, "name": "Ada", "email": "ada@example.com"}, "source": src("customers"), "op": "c",
      "ts_ms": 1767263400100}), topic="shop.public.customers", schemas=True),
  rec("s-dbz-update", env(key_schema, {"id": 25}), env(dbz_schema(), {"before": {"id": 25, "name": "Ada", "email": "ada@example.com"},
      "after": {"id": 25, "name": "Ada L.", "email": None}, "source": src("customers"), "op": "u",
      "ts_ms": 1767263400200}), topic="shop.public.customers", schemas=True),
  rec("s-dbz-delete", env(key_schema, {"id": 25}), env(dbz_schema(), {"before": {"id": 25, "name": "Ada L.", "email": None},
      "after": None, "source": src("customers"), "op": "d", "ts_ms": 1767263400300}), topic="shop.public.customers", schemas=True),
  rec("s-dbz-truncate", None, env(dbz_schema(), {"before": None, "after": None, "source": src("customers"), "op": "t",
      "ts_ms": 1767263400500}), topic="shop.public.customers", schemas=True),
  rec("s-dbz-tombstone", env(key_schema, {"id": 25}), None, topic="shop.public.customers", schemas=True),
]
with open("records.json", "w") as fh:
    fh.write("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n]")
    fh.write("\n")

# The configs: each runs on every record (unless it names "records").
K = "org.apache.kafka.connect.transforms."
P = K + "predicates."
D = "io.debezium.transforms.ExtractNewRecordState"
C = []
def c(name, type, predicate=None, negate=None, records=None, **config):
    d = {"name": name, "type": type, "config": {k.replace("_", "."): v for k, v in config.items()}}
    if predicate: d["predicate"] = predicate
    if negate is not None: d["negate"] = negate
    if records: d["records"] = records
    C.append(d)
def cfg(name, type, config, **kw):
    d = {"name": name, "type": type, "config": config}; d.update(kw); C.append(d)

cfg("InsertField$Value all", K + "InsertField$Value", {"topic.field": "topic", "partition.field": "partition!",
    "offset.field": "offset?", "timestamp.field": "ts", "static.field": "source", "static.value": "sluice"})
cfg("InsertField$Key static", K + "InsertField$Key", {"static.field": "region", "static.value": "eu"})
cfg("ReplaceField$Value exclude renames", K + "ReplaceField$Value", {"exclude": "ssn,tags", "renames": "name:full_name,amount:total"})
cfg("ReplaceField$Value include renames", K + "ReplaceField$Value", {"include": "id,name,customer", "renames": "customer:buyer,name:名"})
cfg("ReplaceField$Value renames only", K + "ReplaceField$Value", {"renames": "id:order_id,missing:gone"})
cfg("ReplaceField$Value rename swap", K + "ReplaceField$Value", {"renames": "name:id,id:name"})
cfg("ReplaceField$Key renames", K + "ReplaceField$Key", {"renames": "id:key_id"})
cfg("MaskField$Value default", K + "MaskField$Value", {"fields": "ssn,amount,price,qty,active,tags,customer,created"})
cfg("MaskField$Value replacement", K + "MaskField$Value", {"fields": "ssn,name", "replacement": "***"})
cfg("MaskField$Value numeric replacement", K + "MaskField$Value", {"fields": "qty,price", "replacement": "9"})
cfg("MaskField$Value replacement on boolean", K + "MaskField$Value", {"fields": "active", "replacement": "x"})
cfg("Filter all", K + "Filter", {})
cfg("Filter tombstones", K + "Filter", {}, predicate={"type": P + "RecordIsTombstone", "config": {}})
cfg("Filter without trace header", K + "Filter", {}, predicate={"type": P + "HasHeaderKey", "config": {"name": "trace"}}, negate=True)
cfg("Cast$Value fields", K + "Cast$Value", {"spec": "amount:int32,price:int64,qty:float64,id:string"})
cfg("Cast$Value booleans", K + "Cast$Value", {"spec": "active:boolean,qty:boolean,name:string"})
cfg("Cast$Value int8", K + "Cast$Value", {"spec": "qty:int8"})
cfg("Cast$Value complex to string", K + "Cast$Value", {"spec": "customer:string,tags:string"})
cfg("Cast$Key whole string", K + "Cast$Key", {"spec": "string"})
cfg("TimestampConverter$Value to string", K + "TimestampConverter$Value", {"field": "created", "target.type": "string", "format": "yyyy-MM-dd HH:mm:ss.SSS"})
cfg("TimestampConverter$Value string to unix", K + "TimestampConverter$Value", {"field": "createdAt", "target.type": "unix", "format": "yyyy-MM-dd HH:mm:ss"})
cfg("TimestampConverter$Value unix seconds", K + "TimestampConverter$Value", {"field": "created", "target.type": "unix", "unix.precision": "seconds"})
cfg("TimestampConverter$Value to Timestamp", K + "TimestampConverter$Value", {"field": "createdAt", "target.type": "Timestamp", "format": "yyyy-MM-dd HH:mm:ss"})
cfg("TimestampConverter$Value to Date", K + "TimestampConverter$Value", {"field": "created", "target.type": "Date"})
cfg("ExtractField$Value name", K + "ExtractField$Value", {"field": "name"})
cfg("ExtractField$Value nested V2", K + "ExtractField$Value", {"field": "customer.address.city", "field.syntax.version": "V2"})
cfg("ExtractField$Key id", K + "ExtractField$Key", {"field": "id"})
cfg("ValueToKey", K + "ValueToKey", {"fields": "id,name"})
cfg("HoistField$Value", K + "HoistField$Value", {"field": "payload"})
cfg("HoistField$Key", K + "HoistField$Key", {"field": "k"})
cfg("RegexRouter", K + "RegexRouter", {"regex": "(.*)s", "replacement": "$1-v2"})
cfg("RegexRouter with predicate", K + "RegexRouter", {"regex": "shop\\.public\\.(.*)", "replacement": "cdc.$1"},
    predicate={"type": P + "TopicNameMatches", "config": {"pattern": "shop\\..*"}})
cfg("InsertHeader", K + "InsertHeader", {"header": "app", "value.literal": "sluice"})
cfg("InsertHeader number", K + "InsertHeader", {"header": "version", "value.literal": "42"})
cfg("HeaderFrom$Value copy", K + "HeaderFrom$Value", {"fields": "id,name,customer,tags", "headers": "h_id,h_name,h_customer,h_tags", "operation": "copy"})
cfg("HeaderFrom$Value move", K + "HeaderFrom$Value", {"fields": "name,price", "headers": "name,price", "operation": "move"})
cfg("HeaderFrom$Key copy", K + "HeaderFrom$Key", {"fields": "id", "headers": "key_id", "operation": "copy"})
cfg("Flatten$Value", K + "Flatten$Value", {})
cfg("Flatten$Value underscore", K + "Flatten$Value", {"delimiter": "_"})
cfg("Flatten$Key", K + "Flatten$Key", {})
cfg("TimestampRouter default", K + "TimestampRouter", {})
cfg("TimestampRouter custom", K + "TimestampRouter", {"topic.format": "archive-${topic}-${timestamp}", "timestamp.format": "yyyy.MM.dd-HH'h'"})
cfg("DropHeaders", K + "DropHeaders", {"headers": "trace,nil"})
cfg("ExtractNewRecordState default", D, {})
cfg("ExtractNewRecordState legacy drop.tombstones=false", D, {"drop.tombstones": "false"})
cfg("ExtractNewRecordState legacy delete.handling.mode=rewrite", D, {"delete.handling.mode": "rewrite"})
cfg("ExtractNewRecordState legacy delete.handling.mode=none", D, {"delete.handling.mode": "none", "drop.tombstones": "false"})
cfg("ExtractNewRecordState add fields and headers", D, {"add.fields": "op,table,source.ts_ms,ts_ms", "add.headers": "op,db"})
cfg("ExtractNewRecordState add fields prefix", D, {"add.fields": "op,lsn", "add.fields.prefix": "_", "add.headers": "name", "add.headers.prefix": "dbz."})
cfg("ExtractNewRecordState tombstone mode drop", D, {"delete.tombstone.handling.mode": "drop"})
cfg("ExtractNewRecordState tombstone mode tombstone", D, {"delete.tombstone.handling.mode": "tombstone"})
cfg("ExtractNewRecordState tombstone mode rewrite", D, {"delete.tombstone.handling.mode": "rewrite"})
cfg("ExtractNewRecordState tombstone mode rewrite-with-tombstone", D, {"delete.tombstone.handling.mode": "rewrite-with-tombstone"})
cfg("ExtractNewRecordState tombstone mode delete-to-tombstone", D, {"delete.tombstone.handling.mode": "delete-to-tombstone"})
cfg("ExtractNewRecordState renamed fields", D, {"add.fields": "op:OPERATION,source.ts_ms:EVENT_TS,db", "add.headers": "table:TABLE"})
cfg("ExtractNewRecordState rewrite with fields", D, {"delete.tombstone.handling.mode": "rewrite", "add.fields": "op,ts_ms", "add.fields.prefix": "_", "add.headers": "op"})
with open("configs.json", "w") as fh:
    fh.write("[\n" + ",\n".join(json.dumps(x, ensure_ascii=False) for x in C) + "\n]\n")
