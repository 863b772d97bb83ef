//! Avro and Kafka Connect's schemas, as Confluent's `AvroData` maps them.
//!
//! - [`to_connect`]: a writer's Avro schema (its JSON, so the `connect.*`
//!   properties Confluent's converter writes are kept) as a Connect schema.
//! - [`from_connect`]: a Connect schema as the Avro schema Confluent's
//!   converter would register for it.
//! - [`read_value`] and [`write_value`]: a datum's values and a payload in
//!   `JsonConverter`'s envelope form ([`super::payload::Form::Envelope`]),
//!   the form the rest of [`super`] reads and writes. That form is Avro's
//!   own for the logical types: a `Decimal` is its unscaled value's bytes
//!   (base64 in JSON), a `Date` days, a `Time` and a `Timestamp`
//!   milliseconds.
//!
//! The codec itself is the `apache-avro` crate's; this module only maps.

use std::collections::HashMap;

use apache_avro::Schema as Avro;
use apache_avro::types::Value;
use base64::Engine as _;
use serde_json::{Map, Value as JsonValue, json};
use sluice_sdk::schema::{
    DATE, DECIMAL, DECIMAL_SCALE, Field, Schema, SchemaKind, TIME, TIMESTAMP,
};

use super::json::{self, Json};
use super::payload::BASE64;

/// The namespace of the records Confluent's converter names itself.
const CONNECT_NAMESPACE: &str = "io.confluent.connect.avro";
/// The name of a struct without one.
const CONNECT_DEFAULT: &str = "ConnectDefault";
/// Its full name, which Confluent's record name strategies give it.
pub const CONNECT_DEFAULT_FULL_NAME: &str = "io.confluent.connect.avro.ConnectDefault";
/// A union that is not `[null, T]`: a struct with one optional field per
/// branch.
const UNION: &str = "io.confluent.connect.avro.Union";
/// An entry of a map whose keys are not strings.
const MAP_ENTRY: &str = "MapEntry";
/// The parameter that keeps a `Decimal`'s precision.
const DECIMAL_PRECISION: &str = "connect.decimal.precision";
/// The precision Confluent's converter gives a `Decimal` without one.
const DEFAULT_PRECISION: u64 = 64;

/// The Connect schema of a writer's Avro schema (its JSON text).
pub fn to_connect(avro: &str) -> Result<Schema, String> {
    let v: JsonValue =
        serde_json::from_str(avro).map_err(|e| format!("the Avro schema is not JSON: {e}"))?;
    let mut named = HashMap::new();
    to_connect_at(&v, None, &mut named)
}

fn full_name(v: &Map<String, JsonValue>, enclosing: Option<&str>) -> String {
    let name = v.get("name").and_then(JsonValue::as_str).unwrap_or("");
    if name.contains('.') {
        return name.to_string();
    }
    match v
        .get("namespace")
        .and_then(JsonValue::as_str)
        .or(enclosing)
        .filter(|n| !n.is_empty())
    {
        Some(ns) => format!("{ns}.{name}"),
        None => name.to_string(),
    }
}

fn namespace_of(full: &str) -> Option<&str> {
    full.rsplit_once('.').map(|(ns, _)| ns)
}

fn to_connect_at(
    v: &JsonValue,
    namespace: Option<&str>,
    named: &mut HashMap<String, Schema>,
) -> Result<Schema, String> {
    match v {
        JsonValue::String(t) => primitive(t, None)
            .map(Ok)
            .or_else(|| {
                let full = if t.contains('.') {
                    t.clone()
                } else {
                    namespace.map_or(t.clone(), |ns| format!("{ns}.{t}"))
                };
                named.get(&full).or_else(|| named.get(t)).cloned().map(Ok)
            })
            .unwrap_or_else(|| Err(format!("the Avro type `{t}` is not known"))),
        JsonValue::Array(branches) => union(branches, namespace, named),
        JsonValue::Object(o) => {
            let t = o.get("type").ok_or("an Avro schema object has no `type`")?;
            let mut s = match (t, o.get("logicalType").and_then(JsonValue::as_str)) {
                (JsonValue::String(t), Some(logical)) => match logical_type(t, logical, o) {
                    Some(s) => s,
                    None => to_connect_at(&JsonValue::String(t.clone()), namespace, named)?,
                },
                (JsonValue::String(t), None) => match t.as_str() {
                    "record" => {
                        let full = full_name(o, namespace);
                        let fields = o
                            .get("fields")
                            .and_then(JsonValue::as_array)
                            .ok_or_else(|| format!("the record `{full}` has no `fields`"))?;
                        let mut out = Vec::with_capacity(fields.len());
                        for f in fields {
                            let name = f
                                .get("name")
                                .and_then(JsonValue::as_str)
                                .ok_or_else(|| format!("a field of `{full}` has no name"))?;
                            let ft = f
                                .get("type")
                                .ok_or_else(|| format!("the field `{full}.{name}` has no type"))?;
                            let mut schema = to_connect_at(ft, namespace_of(&full), named)?;
                            if let Some(d) = f.get("default") {
                                schema.default = default_text(&schema, d);
                            }
                            if let Some(doc) = f.get("doc").and_then(JsonValue::as_str) {
                                schema.doc.get_or_insert_with(|| doc.to_string());
                            }
                            out.push(Field {
                                name: name.to_string(),
                                schema,
                            });
                        }
                        let mut s = Schema::new(SchemaKind::Struct(out));
                        let default_name = full == format!("{CONNECT_NAMESPACE}.{CONNECT_DEFAULT}")
                            || full.starts_with(&format!("{CONNECT_NAMESPACE}.{CONNECT_DEFAULT}"));
                        if !default_name {
                            s.name = Some(full.clone());
                        }
                        named.insert(full, s.clone());
                        s
                    }
                    "enum" => {
                        let full = full_name(o, namespace);
                        let mut s = Schema::string();
                        s.name = Some(full.clone());
                        named.insert(full, s.clone());
                        s
                    }
                    "fixed" => {
                        let full = full_name(o, namespace);
                        let s = Schema::bytes();
                        named.insert(full, s.clone());
                        s
                    }
                    "array" => {
                        let items = o.get("items").ok_or("an Avro array has no `items`")?;
                        let items = to_connect_at(items, namespace, named)?;
                        if let SchemaKind::Struct(fields) = &items.kind
                            && items
                                .name
                                .as_deref()
                                .is_some_and(|n| n.ends_with(MAP_ENTRY))
                            && fields.len() == 2
                            && fields[0].name == "key"
                            && fields[1].name == "value"
                        {
                            Schema::new(SchemaKind::Map(
                                Box::new(fields[0].schema.clone()),
                                Box::new(fields[1].schema.clone()),
                            ))
                        } else {
                            Schema::new(SchemaKind::Array(Box::new(items)))
                        }
                    }
                    "map" => {
                        let values = o.get("values").ok_or("an Avro map has no `values`")?;
                        let values = to_connect_at(values, namespace, named)?;
                        Schema::new(SchemaKind::Map(
                            Box::new(Schema::string()),
                            Box::new(values),
                        ))
                    }
                    other => match primitive(other, o.get("connect.type")) {
                        Some(s) => s,
                        None => {
                            to_connect_at(&JsonValue::String(other.to_string()), namespace, named)?
                        }
                    },
                },
                (nested, _) => to_connect_at(nested, namespace, named)?,
            };
            if let Some(doc) = o.get("doc").and_then(JsonValue::as_str) {
                s.doc = Some(doc.to_string());
            }
            if let Some(name) = o.get("connect.name").and_then(JsonValue::as_str)
                && s.name.is_none()
            {
                s.name = Some(name.to_string());
            }
            if let Some(version) = o.get("connect.version").and_then(JsonValue::as_i64) {
                s.version = i32::try_from(version).ok();
            }
            if let Some(JsonValue::Object(params)) = o.get("connect.parameters") {
                for (k, v) in params {
                    if let Some(v) = v.as_str()
                        && !s.parameters.iter().any(|(pk, _)| pk == k)
                    {
                        s.parameters.push((k.clone(), v.to_string()));
                    }
                }
            }
            Ok(s)
        }
        other => Err(format!("`{other}` is not an Avro schema")),
    }
}

fn primitive(t: &str, connect_type: Option<&JsonValue>) -> Option<Schema> {
    Some(match (t, connect_type.and_then(JsonValue::as_str)) {
        ("int", Some("int8")) => Schema::int8(),
        ("int", Some("int16")) => Schema::int16(),
        ("int", _) => Schema::int32(),
        ("long", _) => Schema::int64(),
        ("float", _) => Schema::float32(),
        ("double", _) => Schema::float64(),
        ("boolean", _) => Schema::boolean(),
        ("string", _) => Schema::string(),
        ("bytes", _) => Schema::bytes(),
        _ => return None,
    })
}

/// A logical type Connect has (or maps to a plain type); `None` for one it
/// does not know, read as its underlying type (as the Avro spec says).
fn logical_type(t: &str, logical: &str, o: &Map<String, JsonValue>) -> Option<Schema> {
    let named = |mut s: Schema, name: &str| {
        s.name = Some(name.to_string());
        s.version = Some(1);
        s
    };
    Some(match (logical, t) {
        ("decimal", "bytes" | "fixed") => {
            let scale = o.get("scale").and_then(JsonValue::as_i64).unwrap_or(0);
            let precision = o.get("precision").and_then(JsonValue::as_u64)?;
            let mut s = named(Schema::bytes(), DECIMAL);
            s.parameters
                .push((DECIMAL_SCALE.to_string(), scale.to_string()));
            s.parameters
                .push((DECIMAL_PRECISION.to_string(), precision.to_string()));
            s
        }
        ("date", "int") => named(Schema::int32(), DATE),
        ("time-millis", "int") => named(Schema::int32(), TIME),
        ("timestamp-millis", "long") => named(Schema::int64(), TIMESTAMP),
        // As Confluent's converter reads them by default: the number.
        (
            "time-micros"
            | "timestamp-micros"
            | "local-timestamp-millis"
            | "local-timestamp-micros",
            "long",
        ) => Schema::int64(),
        ("uuid", "string") => Schema::string(),
        _ => return None,
    })
}

fn union(
    branches: &[JsonValue],
    namespace: Option<&str>,
    named: &mut HashMap<String, Schema>,
) -> Result<Schema, String> {
    let is_null = |b: &JsonValue| b.as_str() == Some("null");
    let others: Vec<&JsonValue> = branches.iter().filter(|b| !is_null(b)).collect();
    let nullable = others.len() < branches.len();
    if let ([only], true) = (others.as_slice(), nullable) {
        let mut s = to_connect_at(only, namespace, named)?;
        s.optional = true;
        return Ok(s);
    }
    let mut fields = Vec::with_capacity(others.len());
    for b in others {
        let mut s = to_connect_at(b, namespace, named)?;
        s.optional = true;
        let name = branch_name(b, &s);
        fields.push(Field { name, schema: s });
    }
    let mut s = Schema::new(SchemaKind::Struct(fields));
    s.name = Some(UNION.to_string());
    s.optional = nullable;
    Ok(s)
}

/// The field a union's branch becomes: its type's name (a named type's
/// short name).
fn branch_name(b: &JsonValue, s: &Schema) -> String {
    match b {
        JsonValue::String(t) => t.rsplit('.').next().unwrap_or(t).to_string(),
        JsonValue::Object(o) => match o.get("name").and_then(JsonValue::as_str) {
            Some(n) => n.rsplit('.').next().unwrap_or(n).to_string(),
            None => o
                .get("type")
                .and_then(JsonValue::as_str)
                .unwrap_or(s.kind.type_name())
                .to_string(),
        },
        _ => s.kind.type_name().to_string(),
    }
}

/// An Avro field default as the Connect default's text (envelope form),
/// for the types whose text is the same in both.
fn default_text(schema: &Schema, d: &JsonValue) -> Option<String> {
    if schema.logical().is_some() {
        return None;
    }
    match (&schema.kind, d) {
        (_, JsonValue::Null) => None,
        (
            SchemaKind::Int8
            | SchemaKind::Int16
            | SchemaKind::Int32
            | SchemaKind::Int64
            | SchemaKind::Float32
            | SchemaKind::Float64,
            JsonValue::Number(_),
        )
        | (SchemaKind::Boolean, JsonValue::Bool(_))
        | (SchemaKind::String, JsonValue::String(_)) => Some(d.to_string()),
        _ => None,
    }
}

/// The Avro schema Confluent's converter registers for `schema` (its
/// JSON).
pub fn from_connect(schema: &Schema) -> JsonValue {
    let mut names = HashMap::new();
    from_connect_at(schema, &mut names)
}

fn from_connect_at(schema: &Schema, names: &mut HashMap<String, u32>) -> JsonValue {
    let base = base_type(schema, names);
    if schema.optional {
        json!(["null", base])
    } else {
        base
    }
}

fn connect_props(schema: &Schema, o: &mut Map<String, JsonValue>, with_name: bool) {
    if let Some(doc) = &schema.doc {
        o.insert("connect.doc".into(), json!(doc));
    }
    if let Some(v) = schema.version {
        o.insert("connect.version".into(), json!(v));
    }
    if !schema.parameters.is_empty() {
        let params: Map<String, JsonValue> = schema
            .parameters
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        o.insert("connect.parameters".into(), JsonValue::Object(params));
    }
    if with_name && let Some(name) = &schema.name {
        o.insert("connect.name".into(), json!(name));
    }
}

fn base_type(schema: &Schema, names: &mut HashMap<String, u32>) -> JsonValue {
    use sluice_sdk::schema::Logical;
    let mut o = Map::new();
    match schema.logical() {
        Some(Logical::Decimal { scale }) => {
            let precision = schema
                .parameters
                .iter()
                .find(|(k, _)| k == DECIMAL_PRECISION)
                .and_then(|(_, v)| v.parse::<u64>().ok())
                .unwrap_or(DEFAULT_PRECISION);
            o.insert("type".into(), json!("bytes"));
            o.insert("scale".into(), json!(scale));
            o.insert("precision".into(), json!(precision));
            connect_props(schema, &mut o, true);
            o.insert("logicalType".into(), json!("decimal"));
            return JsonValue::Object(o);
        }
        Some(Logical::Date) => {
            o.insert("type".into(), json!("int"));
            connect_props(schema, &mut o, true);
            o.insert("logicalType".into(), json!("date"));
            return JsonValue::Object(o);
        }
        Some(Logical::Time) => {
            o.insert("type".into(), json!("int"));
            connect_props(schema, &mut o, true);
            o.insert("logicalType".into(), json!("time-millis"));
            return JsonValue::Object(o);
        }
        Some(Logical::Timestamp) => {
            o.insert("type".into(), json!("long"));
            connect_props(schema, &mut o, true);
            o.insert("logicalType".into(), json!("timestamp-millis"));
            return JsonValue::Object(o);
        }
        None => {}
    }
    let plain = |t: &str| json!(t);
    let t = match &schema.kind {
        SchemaKind::Int8 => {
            o.insert("type".into(), json!("int"));
            o.insert("connect.type".into(), json!("int8"));
            None
        }
        SchemaKind::Int16 => {
            o.insert("type".into(), json!("int"));
            o.insert("connect.type".into(), json!("int16"));
            None
        }
        SchemaKind::Int32 => Some(plain("int")),
        SchemaKind::Int64 => Some(plain("long")),
        SchemaKind::Float32 => Some(plain("float")),
        SchemaKind::Float64 => Some(plain("double")),
        SchemaKind::Boolean => Some(plain("boolean")),
        SchemaKind::String => Some(plain("string")),
        SchemaKind::Bytes => Some(plain("bytes")),
        SchemaKind::Array(items) => {
            o.insert("type".into(), json!("array"));
            o.insert("items".into(), from_connect_at(items, names));
            None
        }
        SchemaKind::Map(keys, values)
            if matches!(keys.kind, SchemaKind::String) && !keys.optional =>
        {
            o.insert("type".into(), json!("map"));
            o.insert("values".into(), from_connect_at(values, names));
            None
        }
        SchemaKind::Map(keys, values) => {
            let entry = json!({
                "type": "record",
                "name": unique_name(names, MAP_ENTRY),
                "namespace": CONNECT_NAMESPACE,
                "fields": [
                    {"name": "key", "type": from_connect_at(keys, names)},
                    {"name": "value", "type": from_connect_at(values, names)},
                ],
            });
            o.insert("type".into(), json!("array"));
            o.insert("items".into(), entry);
            None
        }
        SchemaKind::Struct(fields) => {
            let (namespace, name) = match schema.name.as_deref() {
                Some(full) => match full.rsplit_once('.') {
                    Some((ns, n)) => (Some(ns.to_string()), unique_name(names, n)),
                    None => (None, unique_name(names, full)),
                },
                None => (
                    Some(CONNECT_NAMESPACE.to_string()),
                    unique_name(names, CONNECT_DEFAULT),
                ),
            };
            o.insert("type".into(), json!("record"));
            o.insert("name".into(), json!(name));
            if let Some(ns) = namespace {
                o.insert("namespace".into(), json!(ns));
            }
            if let Some(doc) = &schema.doc {
                o.insert("doc".into(), json!(doc));
            }
            let fields: Vec<JsonValue> = fields
                .iter()
                .map(|f| {
                    let mut field = Map::new();
                    field.insert("name".into(), json!(f.name));
                    field.insert("type".into(), from_connect_at(&f.schema, names));
                    if let Some(d) = f
                        .schema
                        .default
                        .as_deref()
                        .and_then(|d| serde_json::from_str::<JsonValue>(d).ok())
                        && f.schema.logical().is_none()
                        && !matches!(
                            f.schema.kind,
                            SchemaKind::Bytes
                                | SchemaKind::Struct(_)
                                | SchemaKind::Array(_)
                                | SchemaKind::Map(..)
                        )
                    {
                        field.insert("default".into(), d);
                    } else if f.schema.optional {
                        field.insert("default".into(), JsonValue::Null);
                    }
                    JsonValue::Object(field)
                })
                .collect();
            o.insert("fields".into(), JsonValue::Array(fields));
            if let Some(v) = schema.version {
                o.insert("connect.version".into(), json!(v));
            }
            // As Confluent's converter marks a named struct.
            if let Some(name) = &schema.name {
                o.insert("connect.name".into(), json!(name));
            }
            return JsonValue::Object(o);
        }
    };
    if let Some(t) = t {
        if schema.doc.is_none()
            && schema.version.is_none()
            && schema.parameters.is_empty()
            && schema.name.is_none()
        {
            return t;
        }
        o.insert("type".into(), t);
    }
    connect_props(schema, &mut o, true);
    JsonValue::Object(o)
}

/// Avro names each record once per schema: `MapEntry`, `MapEntry2`, ...
fn unique_name(names: &mut HashMap<String, u32>, base: &str) -> String {
    let n = names.entry(base.to_string()).or_insert(0);
    *n += 1;
    if *n == 1 {
        base.to_string()
    } else {
        format!("{base}{n}")
    }
}

/// The named types a schema defines, by full name, so a reference to one
/// can be followed.
pub fn named_types(schema: &Avro) -> HashMap<String, Avro> {
    fn walk(s: &Avro, out: &mut HashMap<String, Avro>) {
        match s {
            Avro::Record(r) => {
                out.insert(r.name.fullname(None), s.clone());
                for f in &r.fields {
                    walk(&f.schema, out);
                }
            }
            Avro::Enum(e) => {
                out.insert(e.name.fullname(None), s.clone());
            }
            Avro::Fixed(f) => {
                out.insert(f.name.fullname(None), s.clone());
            }
            Avro::Array(a) => walk(&a.items, out),
            Avro::Map(m) => walk(&m.types, out),
            Avro::Union(u) => u.variants().iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = HashMap::new();
    walk(schema, &mut out);
    out
}

/// A decoded datum (`value`, of `connect`'s schema) in envelope form.
pub fn read_value(value: &Value, connect: &Schema) -> Result<Json, String> {
    Ok(match value {
        Value::Null => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Int(i) | Value::Date(i) | Value::TimeMillis(i) => Json::Number(i.to_string()),
        Value::Long(l)
        | Value::TimeMicros(l)
        | Value::TimestampMillis(l)
        | Value::TimestampMicros(l)
        | Value::TimestampNanos(l)
        | Value::LocalTimestampMillis(l)
        | Value::LocalTimestampMicros(l)
        | Value::LocalTimestampNanos(l) => Json::Number(l.to_string()),
        Value::Float(f) => {
            if !f.is_finite() {
                return Err(format!("the float {f} has no JSON form"));
            }
            let mut out = Vec::new();
            json::write_f32(&mut out, *f);
            Json::Number(String::from_utf8(out).expect("digits"))
        }
        Value::Double(f) => {
            if !f.is_finite() {
                return Err(format!("the double {f} has no JSON form"));
            }
            let mut out = Vec::new();
            json::write_f64(&mut out, *f);
            Json::Number(String::from_utf8(out).expect("digits"))
        }
        Value::Bytes(b) | Value::Fixed(_, b) => Json::String(BASE64.encode(b)),
        Value::String(s) | Value::Enum(_, s) => Json::String(s.clone()),
        Value::Uuid(u) => Json::String(u.to_string()),
        Value::Decimal(d) => {
            let bytes: Vec<u8> = d
                .try_into()
                .map_err(|e| format!("a decimal that cannot be read: {e}"))?;
            Json::String(BASE64.encode(bytes))
        }
        Value::BigDecimal(d) => Json::String(d.to_string()),
        Value::Duration(_) => return Err("Avro's `duration` has no Connect type".into()),
        Value::Union(index, inner) => match (&connect.kind, connect.name.as_deref()) {
            (SchemaKind::Struct(fields), Some(UNION)) => {
                if matches!(**inner, Value::Null) {
                    Json::Null
                } else {
                    // The branch's index among the union's non-null ones.
                    let i = (*index as usize).min(fields.len().saturating_sub(1));
                    let branch = fields
                        .iter()
                        .enumerate()
                        .map(|(j, f)| {
                            let v = if j == i {
                                read_value(inner, &f.schema)?
                            } else {
                                Json::Null
                            };
                            Ok((f.name.clone(), v))
                        })
                        .collect::<Result<Vec<_>, String>>()?;
                    Json::Object(branch)
                }
            }
            _ => read_value(inner, connect)?,
        },
        Value::Array(items) => match &connect.kind {
            SchemaKind::Array(s) => Json::Array(
                items
                    .iter()
                    .map(|v| read_value(v, s))
                    .collect::<Result<_, _>>()?,
            ),
            SchemaKind::Map(k, v) => {
                let mut pairs = Vec::with_capacity(items.len());
                for entry in items {
                    let Value::Record(kv) = entry else {
                        return Err("a map entry that is not a record".into());
                    };
                    let find = |name: &str| kv.iter().find(|(n, _)| n == name).map(|(_, v)| v);
                    let (Some(key), Some(value)) = (find("key"), find("value")) else {
                        return Err("a map entry without `key` and `value`".into());
                    };
                    pairs.push(Json::Array(vec![
                        read_value(key, k)?,
                        read_value(value, v)?,
                    ]));
                }
                Json::Array(pairs)
            }
            _ => {
                return Err(format!(
                    "an array where the schema has `{}`",
                    connect.kind.type_name()
                ));
            }
        },
        Value::Map(entries) => {
            let SchemaKind::Map(_, v) = &connect.kind else {
                return Err(format!(
                    "a map where the schema has `{}`",
                    connect.kind.type_name()
                ));
            };
            let mut members: Vec<(String, Json)> = entries
                .iter()
                .map(|(k, e)| Ok((k.clone(), read_value(e, v)?)))
                .collect::<Result<_, String>>()?;
            // Avro's maps have no order; sorted, the same map reads the same.
            members.sort_by(|a, b| a.0.cmp(&b.0));
            Json::Object(members)
        }
        Value::Record(fields) => {
            let SchemaKind::Struct(schema_fields) = &connect.kind else {
                return Err(format!(
                    "a record where the schema has `{}`",
                    connect.kind.type_name()
                ));
            };
            let mut members = Vec::with_capacity(fields.len());
            for (name, v) in fields {
                let Some(f) = schema_fields.iter().find(|f| &f.name == name) else {
                    return Err(format!("the record's field `{name}` is not in its schema"));
                };
                members.push((name.clone(), read_value(v, &f.schema)?));
            }
            Json::Object(members)
        }
    })
}

/// A payload in envelope form as a datum of `schema` (the writer's Avro
/// schema; `named` its named types). What does not fit is an error naming
/// where.
pub fn write_value(
    v: &Json,
    schema: &Avro,
    named: &HashMap<String, Avro>,
    at: &str,
) -> Result<Value, String> {
    let wrong = || {
        format!(
            "{at}: {} where the Avro schema has {}",
            v.kind(),
            avro_kind(schema)
        )
    };
    let number = |n: &str| -> Result<i64, String> {
        n.parse::<i64>()
            .map_err(|_| format!("{at}: {n} is not an integer"))
    };
    Ok(match (schema, v) {
        (Avro::Ref { name }, _) => {
            let target = named.get(&name.fullname(None)).ok_or_else(|| {
                format!(
                    "{at}: the Avro type `{}` is not defined",
                    name.fullname(None)
                )
            })?;
            return write_value(v, target, named, at);
        }
        (Avro::Union(u), _) => {
            let variants = u.variants();
            if matches!(v, Json::Null) {
                let i = variants
                    .iter()
                    .position(|s| matches!(s, Avro::Null))
                    .ok_or_else(|| format!("{at}: null where the Avro union has no null"))?;
                return Ok(Value::Union(i as u32, Box::new(Value::Null)));
            }
            let non_null: Vec<(usize, &Avro)> = variants
                .iter()
                .enumerate()
                .filter(|(_, s)| !matches!(s, Avro::Null))
                .collect();
            // Connect's form of a general union: a struct with one branch set.
            if non_null.len() > 1
                && let Json::Object(members) = v
                && let Some((name, inner)) = members.iter().find(|(_, m)| !matches!(m, Json::Null))
            {
                for (i, s) in &non_null {
                    if branch_name_of(s) == *name {
                        let inner = write_value(inner, s, named, &format!("{at}.{name}"))?;
                        return Ok(Value::Union(*i as u32, Box::new(inner)));
                    }
                }
            }
            let mut last = None;
            for (i, s) in non_null {
                match write_value(v, s, named, at) {
                    Ok(inner) => return Ok(Value::Union(i as u32, Box::new(inner))),
                    Err(e) => last = Some(e),
                }
            }
            return Err(last.unwrap_or_else(wrong));
        }
        (Avro::Null, Json::Null) => Value::Null,
        (Avro::Boolean, Json::Bool(b)) => Value::Boolean(*b),
        (Avro::Int, Json::Number(n)) => Value::Int(
            i32::try_from(number(n)?).map_err(|_| format!("{at}: {n} is out of an int's range"))?,
        ),
        (Avro::Long, Json::Number(n)) => Value::Long(number(n)?),
        (Avro::Float, Json::Number(n)) => Value::Float(n.parse().map_err(|_| wrong())?),
        (Avro::Double, Json::Number(n)) => Value::Double(n.parse().map_err(|_| wrong())?),
        (Avro::String, Json::String(s)) => Value::String(s.clone()),
        (Avro::Uuid(_), Json::String(s)) => Value::Uuid(
            s.parse()
                .map_err(|e| format!("{at}: `{s}` is not a UUID: {e}"))?,
        ),
        (Avro::Enum(e), Json::String(s)) => {
            let i = e.symbols.iter().position(|x| x == s).ok_or_else(|| {
                format!(
                    "{at}: `{s}` is not a symbol of the enum `{}`",
                    e.name.fullname(None)
                )
            })?;
            Value::Enum(i as u32, s.clone())
        }
        (Avro::Bytes, Json::String(s)) => Value::Bytes(base64(s, at)?),
        (Avro::Fixed(f), Json::String(s)) => {
            let b = base64(s, at)?;
            if b.len() != f.size {
                return Err(format!(
                    "{at}: {} bytes where the fixed type has {}",
                    b.len(),
                    f.size
                ));
            }
            Value::Fixed(f.size, b)
        }
        (Avro::Decimal(d), Json::String(s)) => {
            let mut b = base64(s, at)?;
            if let apache_avro::schema::InnerDecimalSchema::Fixed(f) = &d.inner {
                b = sign_extend(&b, f.size).ok_or_else(|| {
                    format!(
                        "{at}: the decimal needs more than the {} bytes of its fixed type",
                        f.size
                    )
                })?;
            }
            Value::Decimal(apache_avro::Decimal::from(b))
        }
        (Avro::Date, Json::Number(n)) => Value::Date(
            i32::try_from(number(n)?).map_err(|_| format!("{at}: the date {n} is out of range"))?,
        ),
        (Avro::TimeMillis, Json::Number(n)) => Value::TimeMillis(
            i32::try_from(number(n)?).map_err(|_| format!("{at}: the time {n} is out of range"))?,
        ),
        (Avro::TimeMicros, Json::Number(n)) => Value::TimeMicros(number(n)?),
        (Avro::TimestampMillis, Json::Number(n)) => Value::TimestampMillis(number(n)?),
        (Avro::TimestampMicros, Json::Number(n)) => Value::TimestampMicros(number(n)?),
        (Avro::LocalTimestampMillis, Json::Number(n)) => Value::LocalTimestampMillis(number(n)?),
        (Avro::LocalTimestampMicros, Json::Number(n)) => Value::LocalTimestampMicros(number(n)?),
        (Avro::Array(a), Json::Array(items)) => {
            // A Connect map whose keys are not strings: [[key, value], ...].
            if let Avro::Record(entry) = &*a.items
                && entry.name.name().starts_with(MAP_ENTRY)
                && items
                    .iter()
                    .all(|i| matches!(i, Json::Array(p) if p.len() == 2))
            {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let Json::Array(pair) = item else {
                        unreachable!()
                    };
                    let key = write_value(
                        &pair[0],
                        &entry.fields[0].schema,
                        named,
                        &format!("{at}[{i}].key"),
                    )?;
                    let value = write_value(
                        &pair[1],
                        &entry.fields[1].schema,
                        named,
                        &format!("{at}[{i}].value"),
                    )?;
                    out.push(Value::Record(vec![
                        ("key".into(), key),
                        ("value".into(), value),
                    ]));
                }
                return Ok(Value::Array(out));
            }
            Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| write_value(item, &a.items, named, &format!("{at}[{i}]")))
                    .collect::<Result<_, _>>()?,
            )
        }
        (Avro::Map(m), Json::Object(members)) => Value::Map(
            members
                .iter()
                .map(|(k, item)| {
                    Ok((
                        k.clone(),
                        write_value(item, &m.types, named, &format!("{at}.{k}"))?,
                    ))
                })
                .collect::<Result<_, String>>()?,
        ),
        (Avro::Record(r), Json::Object(members)) => {
            if let Some((extra, _)) = members.iter().find(|(k, _)| !r.lookup.contains_key(k)) {
                return Err(format!(
                    "{at}: `{extra}` is not a field of the Avro record `{}`",
                    r.name.fullname(None)
                ));
            }
            let mut fields = Vec::with_capacity(r.fields.len());
            for f in &r.fields {
                let path = format!("{at}.{}", f.name);
                let value = match members.iter().find(|(k, _)| k == &f.name) {
                    Some((_, m)) => write_value(m, &f.schema, named, &path)?,
                    None => match &f.default {
                        Some(d) => default_value(d, &f.schema, named, &path)?,
                        None => {
                            return Err(format!(
                                "{path}: missing, and the Avro field has no default"
                            ));
                        }
                    },
                };
                fields.push((f.name.clone(), value));
            }
            Value::Record(fields)
        }
        _ => return Err(wrong()),
    })
}

/// Encodes one datum of `schema`.
pub fn encode(schema: &Avro, value: Value) -> Result<Vec<u8>, apache_avro::Error> {
    apache_avro::writer::datum::GenericDatumWriter::builder(schema)
        .build()?
        .write_value_to_vec(value)
}

/// Decodes one datum written with `schema`, advancing `bytes` past it.
pub fn decode(schema: &Avro, bytes: &mut &[u8]) -> Result<Value, apache_avro::Error> {
    apache_avro::reader::datum::GenericDatumReader::builder(schema)
        .build()?
        .read_value(bytes)
}

/// An Avro field's default (its JSON) as a value of the field's schema.
fn default_value(
    d: &JsonValue,
    schema: &Avro,
    named: &HashMap<String, Avro>,
    at: &str,
) -> Result<Value, String> {
    let text = serde_json::to_vec(d).expect("JSON");
    let v = json::parse(&text).map_err(|e| format!("{at}: a default that is not JSON: {e}"))?;
    match schema {
        // A union's default is of its first branch.
        Avro::Union(u) if !u.variants().is_empty() => {
            let inner = write_value(&v, &u.variants()[0], named, at)?;
            Ok(Value::Union(0, Box::new(inner)))
        }
        s => write_value(&v, s, named, at),
    }
}

fn branch_name_of(s: &Avro) -> String {
    match s {
        Avro::Record(r) => r.name.name().to_string(),
        Avro::Enum(e) => e.name.name().to_string(),
        Avro::Fixed(f) => f.name.name().to_string(),
        Avro::Ref { name } => name.name().to_string(),
        other => avro_kind(other).to_string(),
    }
}

fn avro_kind(s: &Avro) -> &'static str {
    match s {
        Avro::Null => "null",
        Avro::Boolean => "boolean",
        Avro::Int => "int",
        Avro::Long => "long",
        Avro::Float => "float",
        Avro::Double => "double",
        Avro::Bytes => "bytes",
        Avro::String => "string",
        Avro::Array(_) => "array",
        Avro::Map(_) => "map",
        Avro::Union(_) => "union",
        Avro::Record(_) => "record",
        Avro::Enum(_) => "enum",
        Avro::Fixed(_) => "fixed",
        Avro::Decimal(_) | Avro::BigDecimal => "decimal",
        Avro::Uuid(_) => "uuid",
        Avro::Date => "date",
        Avro::TimeMillis => "time-millis",
        Avro::TimeMicros => "time-micros",
        Avro::TimestampMillis => "timestamp-millis",
        Avro::TimestampMicros => "timestamp-micros",
        _ => "another type",
    }
}

fn base64(s: &str, at: &str) -> Result<Vec<u8>, String> {
    BASE64
        .decode(s)
        .map_err(|e| format!("{at}: bytes that are not base64: {e}"))
}

/// Two's complement bytes widened to `size` (sign-extended); `None` if
/// they do not fit.
fn sign_extend(b: &[u8], size: usize) -> Option<Vec<u8>> {
    if b.len() > size {
        return None;
    }
    let fill = if b.first().is_some_and(|x| x & 0x80 != 0) {
        0xFF
    } else {
        0
    };
    let mut out = vec![fill; size - b.len()];
    out.extend_from_slice(b);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_schemas_map_to_avro_and_back() {
        let mut decimal = Schema::bytes();
        decimal.name = Some(DECIMAL.into());
        decimal.version = Some(1);
        decimal.parameters = vec![
            (DECIMAL_SCALE.into(), "2".into()),
            (DECIMAL_PRECISION.into(), "20".into()),
        ];
        let mut ts = Schema::int64();
        ts.name = Some(TIMESTAMP.into());
        ts.version = Some(1);
        let mut note = Schema::string();
        note.optional = true;
        let mut value = Schema::new(SchemaKind::Struct(vec![
            Field {
                name: "id".into(),
                schema: Schema::int64(),
            },
            Field {
                name: "small".into(),
                schema: Schema::int16(),
            },
            Field {
                name: "amount".into(),
                schema: decimal,
            },
            Field {
                name: "at".into(),
                schema: ts,
            },
            Field {
                name: "note".into(),
                schema: note,
            },
        ]));
        value.name = Some("shop.Order".into());
        let avro = from_connect(&value);
        assert_eq!(avro["type"], "record");
        assert_eq!(
            (avro["name"].as_str(), avro["namespace"].as_str()),
            (Some("Order"), Some("shop"))
        );
        assert_eq!(avro["fields"][2]["type"]["logicalType"], "decimal");
        assert_eq!(avro["fields"][4]["type"], json!(["null", "string"]));
        let parsed = Avro::parse_str(&avro.to_string()).expect("a valid Avro schema");
        assert!(matches!(parsed, Avro::Record(_)));
        let back = to_connect(&avro.to_string()).unwrap();
        assert_eq!(back, value, "{avro}");
    }

    #[test]
    fn a_datum_reads_and_writes_in_envelope_form() {
        let text = r#"{"type":"record","name":"R","fields":[
            {"name":"n","type":"long"},
            {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
            {"name":"day","type":{"type":"int","logicalType":"date"}},
            {"name":"tags","type":{"type":"array","items":"string"}},
            {"name":"opt","type":["null","string"],"default":null},
            {"name":"color","type":{"type":"enum","name":"Color","symbols":["RED","GREEN"]}}
        ]}"#;
        let avro = Avro::parse_str(text).unwrap();
        let connect = to_connect(text).unwrap();
        let named = named_types(&avro);
        let payload = json::parse(
            br#"{"n":7,"price":"MDk=","day":19000,"tags":["a","b"],"opt":null,"color":"GREEN"}"#,
        )
        .unwrap();
        let value = write_value(&payload, &avro, &named, "payload").unwrap();
        let datum = encode(&avro, value).unwrap();
        let decoded = decode(&avro, &mut datum.as_slice()).unwrap();
        let again = read_value(&decoded, &connect).unwrap();
        assert_eq!(again, payload);
        // A field of the wrong type is named.
        let bad =
            json::parse(br#"{"n":"x","price":"MDk=","day":1,"tags":[],"color":"RED"}"#).unwrap();
        let e = write_value(&bad, &avro, &named, "payload").unwrap_err();
        assert!(e.contains("payload.n"), "{e}");
    }
}
