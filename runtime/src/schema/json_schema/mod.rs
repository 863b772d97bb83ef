//! JSON Schema as Confluent's `JsonSchemaConverter` maps it to and from
//! Kafka Connect schemas, and the payload differences between its JSON and
//! `JsonConverter`'s envelopes.
//!
//! From a Connect schema: integers are `{"type": "integer"}` and floats
//! `{"type": "number"}`, each with `connect.type` naming the Connect type;
//! bytes are base64 strings with `connect.type: bytes`; a struct is an
//! object whose properties carry their position as `connect.index` (open
//! to other properties, as Confluent's `object.additional.properties`
//! defaults, or closed with `additionalProperties: false`; no property is
//! `required`); an optional schema is
//! `oneOf: [{"type": "null"}, S]`; a map with string keys is an object of
//! `additionalProperties`, any other map an array of `{"key", "value"}`
//! objects, both with `connect.type: map`; a schema's name is its `title`,
//! its version `connect.version`, its doc `description`, its parameters
//! `connect.parameters`.
//!
//! To a Connect schema: the same in reverse, and for schemas written by
//! other tools an `integer` without `connect.type` is int64, a `number`
//! float64, `oneOf`/`anyOf` of a type and `null` (or `"type": [T,
//! "null"]`) optional, a string `enum` a string, and local `$ref`s are
//! followed. A property is optional only when it takes `null`, as
//! Confluent's default (`use.optional.for.nonrequired=false`) reads it.
//! What has no Connect form (an empty schema, unions of several types,
//! `allOf`, recursion) is refused with its place named.

pub mod compat;

use serde_json::{Map, Value, json};
use sluice_sdk::Schema;
use sluice_sdk::schema::{Field, SchemaKind};

use super::json::Json;

/// The property that names a schema's Connect type.
const CONNECT_TYPE: &str = "connect.type";
/// The property that keeps a struct field's position.
const CONNECT_INDEX: &str = "connect.index";
const CONNECT_VERSION: &str = "connect.version";
const CONNECT_PARAMETERS: &str = "connect.parameters";
/// Parameters Confluent's converter keeps to itself.
const CONFLUENT_NAMESPACE: &str = "io.confluent.connect.json";

/// A JSON Schema document, parsed and compiled for validation.
#[derive(Debug)]
pub struct Compiled {
    pub document: Value,
    pub validator: jsonschema::Validator,
}

/// Parses and compiles `text`: `Err` says why it is not a JSON Schema.
/// Only references inside the document resolve (the machines are offline
/// and schema references are not supported).
pub fn compile(text: &str) -> Result<Compiled, String> {
    let document: Value =
        serde_json::from_str(text).map_err(|e| format!("a JSON Schema must be JSON: {e}"))?;
    if !document.is_object() && !document.is_boolean() {
        return Err(format!(
            "a JSON Schema is an object or a boolean, not {document}"
        ));
    }
    let validator = jsonschema::validator_for(&document)
        .map_err(|e| format!("not a valid JSON Schema: {e}"))?;
    Ok(Compiled {
        document,
        validator,
    })
}

/// The JSON Schema Confluent's converter registers for `schema`; `open`:
/// structs allow other properties (`object.additional.properties`).
pub fn from_connect(schema: &Schema, open: bool) -> Value {
    FromConnect { open }.convert(schema, None)
}

struct FromConnect {
    open: bool,
}

impl FromConnect {
    fn convert(&self, schema: &Schema, index: Option<usize>) -> Value {
        let mut out = Map::new();
        let connect_type = |t: &str| (CONNECT_TYPE.to_string(), Value::from(t));
        match &schema.kind {
            SchemaKind::Int8 | SchemaKind::Int16 | SchemaKind::Int32 | SchemaKind::Int64 => {
                out.insert("type".into(), "integer".into());
                let (k, v) = connect_type(connect_type_name(&schema.kind));
                out.insert(k, v);
            }
            SchemaKind::Float32 | SchemaKind::Float64 => {
                out.insert("type".into(), "number".into());
                let (k, v) = connect_type(connect_type_name(&schema.kind));
                out.insert(k, v);
            }
            SchemaKind::Boolean => {
                out.insert("type".into(), "boolean".into());
            }
            SchemaKind::String => {
                out.insert("type".into(), "string".into());
            }
            SchemaKind::Bytes => {
                out.insert("type".into(), "string".into());
                let (k, v) = connect_type("bytes");
                out.insert(k, v);
            }
            SchemaKind::Array(items) => {
                out.insert("type".into(), "array".into());
                out.insert("items".into(), self.convert(items, None));
            }
            SchemaKind::Map(keys, values) if keys.kind == SchemaKind::String && !keys.optional => {
                out.insert("type".into(), "object".into());
                out.insert("additionalProperties".into(), self.convert(values, None));
                let (k, v) = connect_type("map");
                out.insert(k, v);
            }
            SchemaKind::Map(keys, values) => {
                out.insert("type".into(), "array".into());
                out.insert(
                    "items".into(),
                    json!({
                        "type": "object",
                        "properties": {
                            "key": self.convert(keys, Some(0)),
                            "value": self.convert(values, Some(1)),
                        }
                    }),
                );
                let (k, v) = connect_type("map");
                out.insert(k, v);
            }
            SchemaKind::Struct(fields) => {
                out.insert("type".into(), "object".into());
                let properties: Map<String, Value> = fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| (f.name.clone(), self.convert(&f.schema, Some(i))))
                    .collect();
                out.insert("properties".into(), Value::Object(properties));
                if !self.open {
                    out.insert("additionalProperties".into(), false.into());
                }
            }
        }
        if let Some(name) = &schema.name {
            out.insert("title".into(), name.clone().into());
        }
        if let Some(version) = schema.version {
            out.insert(CONNECT_VERSION.into(), version.into());
        }
        if let Some(doc) = &schema.doc {
            out.insert("description".into(), doc.clone().into());
        }
        let parameters: Map<String, Value> = schema
            .parameters
            .iter()
            .filter(|(k, _)| !k.starts_with(CONFLUENT_NAMESPACE))
            .map(|(k, v)| (k.clone(), v.clone().into()))
            .collect();
        if !parameters.is_empty() {
            out.insert(CONNECT_PARAMETERS.into(), Value::Object(parameters));
        }
        if let Some(default) = schema
            .default
            .as_deref()
            .and_then(|d| serde_json::from_str::<Value>(d).ok())
        {
            out.insert("default".into(), default);
        }
        let mut out = if schema.optional {
            let mut one_of = Map::new();
            one_of.insert(
                "oneOf".into(),
                json!([{"type": "null"}, Value::Object(out)]),
            );
            one_of
        } else {
            out
        };
        if let Some(index) = index {
            out.insert(CONNECT_INDEX.into(), index.into());
        }
        Value::Object(out)
    }
}

fn connect_type_name(kind: &SchemaKind) -> &'static str {
    match kind {
        SchemaKind::Int8 => "int8",
        SchemaKind::Int16 => "int16",
        SchemaKind::Int32 => "int32",
        SchemaKind::Int64 => "int64",
        SchemaKind::Float32 => "float32",
        SchemaKind::Float64 => "float64",
        SchemaKind::Bytes => "bytes",
        _ => "map",
    }
}

/// The Connect schema of a JSON Schema document.
pub fn to_connect(document: &Value) -> Result<Schema, String> {
    ToConnect {
        root: document,
        following: Vec::new(),
    }
    .convert(document, false, "#")
}

struct ToConnect<'d> {
    root: &'d Value,
    /// The `$ref`s being followed: one met again is recursion.
    following: Vec<String>,
}

impl<'d> ToConnect<'d> {
    fn convert(&mut self, s: &'d Value, optional: bool, at: &str) -> Result<Schema, String> {
        let object = match s {
            Value::Object(o) => o,
            Value::Bool(true) => {
                return Err(format!("{at}: `true` (any value) has no Connect type"));
            }
            other => return Err(format!("{at}: {other} is not a schema Sluice reads")),
        };
        if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
            return self.follow(reference, optional, at);
        }
        for combinator in ["oneOf", "anyOf"] {
            if let Some(branches) = object.get(combinator).and_then(Value::as_array) {
                let (nulls, others): (Vec<&Value>, Vec<&Value>) =
                    branches.iter().partition(|b| is_null_schema(b));
                return match others.as_slice() {
                    [one] => self.convert(one, optional || !nulls.is_empty(), at),
                    _ => Err(format!(
                        "{at}: `{combinator}` of {} types has no Connect form Sluice writes (one type, optionally with null, has)",
                        others.len()
                    )),
                };
            }
        }
        if let Some(all) = object.get("allOf").and_then(Value::as_array) {
            return match all.as_slice() {
                [one] => self.convert(one, optional, at),
                _ => Err(format!("{at}: `allOf` is not supported")),
            };
        }
        let (json_type, nullable) = match object.get("type") {
            Some(Value::String(t)) => (Some(t.as_str()), false),
            Some(Value::Array(types)) => {
                let named: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
                let others: Vec<&str> = named.iter().copied().filter(|t| *t != "null").collect();
                match others.as_slice() {
                    [one] => (Some(*one), named.len() > others.len()),
                    _ => {
                        return Err(format!(
                            "{at}: the types {named:?} have no one Connect type"
                        ));
                    }
                }
            }
            None if object.contains_key("enum") || object.contains_key("const") => {
                (Some("string"), false)
            }
            None if object.contains_key("properties") => (Some("object"), false),
            _ => (None, false),
        };
        let connect_type = object.get(CONNECT_TYPE).and_then(Value::as_str);
        let kind = match json_type {
            Some("boolean") => SchemaKind::Boolean,
            Some("integer") | Some("number") => match connect_type {
                Some("int8") => SchemaKind::Int8,
                Some("int16") => SchemaKind::Int16,
                Some("int32") => SchemaKind::Int32,
                Some("int64") => SchemaKind::Int64,
                Some("float32") => SchemaKind::Float32,
                Some("float64") => SchemaKind::Float64,
                Some("bytes") => SchemaKind::Bytes,
                None if json_type == Some("integer") => SchemaKind::Int64,
                None => SchemaKind::Float64,
                Some(other) => return Err(format!("{at}: unknown {CONNECT_TYPE} `{other}`")),
            },
            Some("string") => match connect_type {
                Some("bytes") => SchemaKind::Bytes,
                _ => {
                    if let Some(values) = object.get("enum").and_then(Value::as_array)
                        && values.iter().any(|v| !v.is_string() && !v.is_null())
                    {
                        return Err(format!(
                            "{at}: an enum of other than strings has no Connect type"
                        ));
                    }
                    SchemaKind::String
                }
            },
            Some("array") => {
                let items = object.get("items").ok_or_else(|| {
                    format!("{at}: an array schema without `items` has no Connect type")
                })?;
                let entries = items
                    .get("properties")
                    .filter(|_| connect_type == Some("map"));
                match entries {
                    Some(entry) => {
                        let key = entry
                            .get("key")
                            .ok_or_else(|| format!("{at}: a map's entries have no `key`"))?;
                        let value = entry
                            .get("value")
                            .ok_or_else(|| format!("{at}: a map's entries have no `value`"))?;
                        SchemaKind::Map(
                            Box::new(self.convert(key, false, &format!("{at}/items/key"))?),
                            Box::new(self.convert(value, false, &format!("{at}/items/value"))?),
                        )
                    }
                    None => SchemaKind::Array(Box::new(self.convert(
                        items,
                        false,
                        &format!("{at}/items"),
                    )?)),
                }
            }
            Some("object") if connect_type == Some("map") => {
                let values = object.get("additionalProperties").ok_or_else(|| {
                    format!("{at}: a map without `additionalProperties` has no value type")
                })?;
                SchemaKind::Map(
                    Box::new(Schema::string()),
                    Box::new(self.convert(values, false, &format!("{at}/additionalProperties"))?),
                )
            }
            Some("object") => {
                let properties = object.get("properties").and_then(Value::as_object);
                let mut ordered: Vec<(u64, usize, &String, &'d Value)> = Vec::new();
                for (position, (name, property)) in properties.into_iter().flatten().enumerate() {
                    let index = property
                        .get(CONNECT_INDEX)
                        .and_then(Value::as_u64)
                        .unwrap_or(u64::MAX);
                    ordered.push((index, position, name, property));
                }
                ordered.sort_by_key(|(index, position, _, _)| (*index, *position));
                let mut fields = Vec::with_capacity(ordered.len());
                for (_, _, name, property) in ordered {
                    fields.push(Field {
                        name: name.clone(),
                        schema: self.convert(
                            property,
                            false,
                            &format!("{at}/properties/{name}"),
                        )?,
                    });
                }
                SchemaKind::Struct(fields)
            }
            Some("null") => return Err(format!("{at}: `null` alone has no Connect type")),
            Some(other) => return Err(format!("{at}: unknown type `{other}`")),
            None => {
                return Err(format!(
                    "{at}: a schema without a type (any value) has no Connect type"
                ));
            }
        };
        let mut schema = Schema::new(kind);
        schema.optional = optional || nullable;
        schema.name = object
            .get("title")
            .and_then(Value::as_str)
            .map(str::to_string);
        schema.version = object
            .get(CONNECT_VERSION)
            .and_then(Value::as_i64)
            .and_then(|v| i32::try_from(v).ok());
        schema.doc = object
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(parameters) = object.get(CONNECT_PARAMETERS).and_then(Value::as_object) {
            schema.parameters = parameters
                .iter()
                .map(|(k, v)| {
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                    (k.clone(), v)
                })
                .collect();
        }
        schema.default = object.get("default").map(Value::to_string);
        Ok(schema)
    }

    fn follow(&mut self, reference: &str, optional: bool, at: &str) -> Result<Schema, String> {
        let pointer = reference.strip_prefix('#').ok_or_else(|| {
            format!("{at}: `$ref` {reference} is outside the schema; schema references are not supported")
        })?;
        if self.following.iter().any(|r| r == reference) {
            return Err(format!(
                "{at}: `$ref` {reference} is recursive, which has no Connect form"
            ));
        }
        let target = self
            .root
            .pointer(pointer)
            .ok_or_else(|| format!("{at}: `$ref` {reference} points at nothing"))?;
        self.following.push(reference.to_string());
        let result = self.convert(target, optional, reference);
        self.following.pop();
        result
    }
}

fn is_null_schema(s: &Value) -> bool {
    s.get("type").and_then(Value::as_str) == Some("null")
}

/// Whether a payload of `schema` holds a map with keys other than strings
/// (the only place JSON Schema payloads and envelope payloads differ).
pub fn has_entry_maps(schema: &Schema) -> bool {
    match &schema.kind {
        SchemaKind::Map(keys, values) => {
            keys.kind != SchemaKind::String || keys.optional || has_entry_maps(values)
        }
        SchemaKind::Array(items) => has_entry_maps(items),
        SchemaKind::Struct(fields) => fields.iter().any(|f| has_entry_maps(&f.schema)),
        _ => false,
    }
}

/// Which way a payload goes between the two forms of a map whose keys are
/// not strings: `[{"key": k, "value": v}]` (JSON Schema) and `[[k, v]]`
/// (envelopes).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Entries {
    ToPairs,
    ToObjects,
}

/// `value` (of `schema`) with its non-string-keyed maps in the other form.
/// What does not fit is left as it is: the payload conversion that follows
/// names it.
pub fn convert_entries(schema: &Schema, value: Json, way: Entries) -> Json {
    match (&schema.kind, value) {
        (SchemaKind::Map(keys, values), Json::Array(entries))
            if keys.kind != SchemaKind::String || keys.optional =>
        {
            Json::Array(
                entries
                    .into_iter()
                    .map(|entry| {
                        let (k, v) = match (way, entry) {
                            (Entries::ToPairs, Json::Object(members)) => {
                                let mut k = Json::Null;
                                let mut v = Json::Null;
                                for (name, member) in members {
                                    match name.as_str() {
                                        "key" => k = member,
                                        "value" => v = member,
                                        _ => {}
                                    }
                                }
                                (k, v)
                            }
                            (Entries::ToObjects, Json::Array(mut pair)) if pair.len() == 2 => {
                                let v = pair.pop().expect("two");
                                let k = pair.pop().expect("two");
                                (k, v)
                            }
                            (_, other) => return other,
                        };
                        let k = convert_entries(keys, k, way);
                        let v = convert_entries(values, v, way);
                        match way {
                            Entries::ToPairs => Json::Array(vec![k, v]),
                            Entries::ToObjects => {
                                Json::Object(vec![("key".into(), k), ("value".into(), v)])
                            }
                        }
                    })
                    .collect(),
            )
        }
        (SchemaKind::Map(_, values), Json::Object(members)) => Json::Object(
            members
                .into_iter()
                .map(|(k, v)| (k, convert_entries(values, v, way)))
                .collect(),
        ),
        (SchemaKind::Array(items), Json::Array(elements)) => Json::Array(
            elements
                .into_iter()
                .map(|e| convert_entries(items, e, way))
                .collect(),
        ),
        (SchemaKind::Struct(fields), Json::Object(members)) => Json::Object(
            members
                .into_iter()
                .map(|(name, v)| {
                    let v = match fields.iter().find(|f| f.name == name) {
                        Some(f) => convert_entries(&f.schema, v, way),
                        None => v,
                    };
                    (name, v)
                })
                .collect(),
        ),
        (_, other) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order() -> Schema {
        Schema::structure([
            ("id", Schema::int64()),
            ("qty", Schema::int16()),
            ("price", Schema::decimal(2)),
            ("note", Schema::string().optional()),
            ("day", Schema::date()),
            (
                "tags",
                Schema::map(Schema::string(), Schema::float32()).optional(),
            ),
            ("by_id", Schema::map(Schema::int32(), Schema::boolean())),
            ("raw", Schema::array(Schema::bytes())),
        ])
        .named("shop.Order")
    }

    #[test]
    fn connect_schemas_map_to_json_schema_and_back() {
        let schema = order();
        let document = from_connect(&schema, true);
        assert_eq!(document["title"], "shop.Order");
        assert_eq!(
            document.get("additionalProperties"),
            None,
            "open by default"
        );
        assert_eq!(from_connect(&schema, false)["additionalProperties"], false);
        let p = &document["properties"];
        assert_eq!(
            p["id"],
            json!({"type": "integer", "connect.type": "int64", "connect.index": 0})
        );
        assert_eq!(p["qty"]["connect.type"], "int16");
        assert_eq!(p["price"]["type"], "string");
        assert_eq!(p["price"]["connect.type"], "bytes");
        assert_eq!(p["price"]["title"], "org.apache.kafka.connect.data.Decimal");
        assert_eq!(p["price"]["connect.parameters"], json!({"scale": "2"}));
        assert_eq!(p["note"]["oneOf"][0], json!({"type": "null"}));
        assert_eq!(p["note"]["connect.index"], 3);
        assert_eq!(
            p["tags"]["oneOf"][1]["additionalProperties"]["connect.type"],
            "float32"
        );
        assert_eq!(p["by_id"]["type"], "array");
        assert_eq!(p["by_id"]["connect.type"], "map");
        assert_eq!(
            p["by_id"]["items"]["properties"]["key"]["connect.type"],
            "int32"
        );
        compile(&document.to_string()).expect("a valid JSON Schema");
        let back = to_connect(&document).unwrap();
        assert_eq!(back, schema);
    }

    #[test]
    fn schemas_of_other_tools_read_with_confluents_defaults() {
        let document = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "User",
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer"},
                "score": {"type": ["number", "null"]},
                "home": {"$ref": "#/definitions/address"},
                "role": {"enum": ["admin", "user"]},
            },
            "required": ["name"],
            "definitions": {
                "address": {"type": "object", "properties": {"city": {"type": "string"}}}
            }
        });
        let s = to_connect(&document).unwrap();
        assert_eq!(s.name.as_deref(), Some("User"));
        let SchemaKind::Struct(fields) = &s.kind else {
            panic!("{s:?}")
        };
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["name", "age", "score", "home", "role"]);
        assert_eq!(fields[1].schema, Schema::int64());
        assert_eq!(fields[2].schema, Schema::float64().optional());
        assert!(matches!(fields[3].schema.kind, SchemaKind::Struct(_)));
        assert_eq!(fields[4].schema.kind, SchemaKind::String);
        for (bad, says) in [
            (
                json!({"type": "object", "properties": {"x": {}}}),
                "#/properties/x",
            ),
            (
                json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}),
                "oneOf",
            ),
            (
                json!({"type": "object", "properties": {"me": {"$ref": "#"}}}),
                "recursive",
            ),
            (json!({"$ref": "other.json"}), "schema references"),
            (json!({"type": "array"}), "items"),
        ] {
            let e = to_connect(&bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn maps_with_other_keys_change_form_both_ways() {
        let schema = order();
        let objects = super::super::json::parse(
            br#"{"id":1,"by_id":[{"key":7,"value":true},{"key":8,"value":false}],"tags":{"a":1.5}}"#,
        )
        .unwrap();
        let pairs = convert_entries(&schema, objects.clone(), Entries::ToPairs);
        let mut text = Vec::new();
        super::super::json::write(&mut text, &pairs);
        assert_eq!(
            String::from_utf8(text).unwrap(),
            r#"{"id":1,"by_id":[[7,true],[8,false]],"tags":{"a":1.5}}"#
        );
        assert_eq!(convert_entries(&schema, pairs, Entries::ToObjects), objects);
        assert!(has_entry_maps(&schema));
        assert!(!has_entry_maps(&Schema::map(
            Schema::string(),
            Schema::int8()
        )));
    }

    #[test]
    fn invalid_documents_are_refused_with_the_reason() {
        assert!(compile("{").unwrap_err().contains("JSON"));
        assert!(compile("3").unwrap_err().contains("object or a boolean"));
        assert!(
            compile(r#"{"type": 12}"#)
                .unwrap_err()
                .contains("not a valid JSON Schema")
        );
        let c = compile(r#"{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false}"#).unwrap();
        assert!(c.validator.is_valid(&json!({"a": 1})));
        assert!(!c.validator.is_valid(&json!({"a": 1, "b": 2})));
    }
}
