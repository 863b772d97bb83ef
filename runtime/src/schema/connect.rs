//! A schema in `JsonConverter`'s JSON (`"schema"` of the envelope): read,
//! checked, and written byte for byte as `JsonConverter.asJsonSchema`
//! writes it.
//!
//! Written: `{"type": T}`, then `items` (array) or `keys` and `values`
//! (map) or `fields` (struct), then `optional`, then `name`, `version`,
//! `doc`, `parameters` and `default` when set. A struct's field is its
//! schema's object with `"field": NAME` last.
//!
//! Read strictly: Kafka Connect ignores a `name` or `version` of the wrong
//! JSON type and takes any `optional` that is not `true` as false; Sluice
//! refuses them, so a malformed schema never passes for another one.
//! Members it does not know are ignored, as Kafka Connect ignores them.

use sluice_sdk::schema::{
    DATE, DECIMAL, DECIMAL_SCALE, Field, Schema, SchemaKind, TIME, TIMESTAMP,
};

use super::decimal::MAX_DIGITS;
use super::json::{self, Json};
use super::payload::{Form, Path, Settings, convert};

/// Reads a schema (not null: a null schema is the caller's).
pub fn read_schema(v: &Json, settings: Settings) -> Result<Schema, String> {
    read_at(v, settings, &mut String::from("schema"))
}

fn read_at(v: &Json, settings: Settings, at: &mut String) -> Result<Schema, String> {
    let Json::Object(_) = v else {
        return Err(format!("{at} is {}, not a schema object", v.kind()));
    };
    let member = |name: &str| v.get(name).filter(|m| !matches!(m, Json::Null));
    let type_name = match v.get("type") {
        Some(Json::String(t)) => t.as_str(),
        Some(other) => return Err(format!("{at}.type is {}, not a string", other.kind())),
        None => return Err(format!("{at} has no `type`")),
    };
    let nested = |name: &str, at: &mut String| -> Result<Schema, String> {
        let len = at.len();
        at.push('.');
        at.push_str(name);
        let s = match member(name) {
            Some(m) => read_at(m, settings, at),
            None => Err(format!("{at} is missing: a `{type_name}` schema needs it")),
        };
        at.truncate(len);
        s
    };
    let kind = match type_name {
        "int8" => SchemaKind::Int8,
        "int16" => SchemaKind::Int16,
        "int32" => SchemaKind::Int32,
        "int64" => SchemaKind::Int64,
        "float" => SchemaKind::Float32,
        "double" => SchemaKind::Float64,
        "boolean" => SchemaKind::Boolean,
        "string" => SchemaKind::String,
        "bytes" => SchemaKind::Bytes,
        "array" => SchemaKind::Array(Box::new(nested("items", at)?)),
        "map" => {
            let keys = nested("keys", at)?;
            SchemaKind::Map(Box::new(keys), Box::new(nested("values", at)?))
        }
        "struct" => {
            let Some(Json::Array(list)) = v.get("fields") else {
                return Err(format!("{at}.fields is missing or not an array"));
            };
            let mut fields: Vec<Field> = Vec::with_capacity(list.len());
            for (i, f) in list.iter().enumerate() {
                let name = match f.get("field") {
                    Some(Json::String(n)) => n.clone(),
                    _ => return Err(format!("{at}.fields[{i}] has no `field` name (a string)")),
                };
                if fields.iter().any(|g| g.name == name) {
                    return Err(format!("{at}.fields has `{name}` twice"));
                }
                let len = at.len();
                at.push_str(&format!(".fields[{i}]"));
                let schema = read_at(f, settings, at);
                at.truncate(len);
                fields.push(Field {
                    name,
                    schema: schema?,
                });
            }
            SchemaKind::Struct(fields)
        }
        "float32" | "float64" => {
            return Err(format!(
                "{at}.type `{type_name}` is not JsonConverter's: it writes float32 as `float` and float64 as `double`"
            ));
        }
        other => return Err(format!("{at}.type `{other}` is not a Kafka Connect type")),
    };
    let mut schema = Schema::new(kind);
    schema.optional = match member("optional") {
        None => false,
        Some(Json::Bool(b)) => *b,
        Some(o) => return Err(format!("{at}.optional is {}, not a boolean", o.kind())),
    };
    schema.name = match member("name") {
        None => None,
        Some(Json::String(s)) => Some(s.clone()),
        Some(o) => return Err(format!("{at}.name is {}, not a string", o.kind())),
    };
    schema.version = match member("version") {
        None => None,
        Some(Json::Number(n)) => Some(
            super::decimal::Decimal::parse(n)
                .and_then(|d| d.to_i64().ok())
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(|| format!("{at}.version `{n}` is not a 32-bit integer"))?,
        ),
        Some(o) => return Err(format!("{at}.version is {}, not an integer", o.kind())),
    };
    schema.doc = match member("doc") {
        None => None,
        Some(Json::String(s)) => Some(s.clone()),
        Some(o) => return Err(format!("{at}.doc is {}, not a string", o.kind())),
    };
    match member("parameters") {
        None => {}
        Some(Json::Object(params)) => {
            for (k, p) in params {
                match p {
                    Json::String(s) => schema.parameters.push((k.clone(), s.clone())),
                    o => {
                        return Err(format!(
                            "{at}.parameters.{k} is {}: parameters are strings",
                            o.kind()
                        ));
                    }
                }
            }
        }
        Some(o) => return Err(format!("{at}.parameters is {}, not an object", o.kind())),
    }
    check_logical(&schema, at)?;
    if let Some(default) = v.get("default") {
        // Kafka Connect reads a default with the schema it belongs to,
        // before that schema has one: a null default of an optional schema
        // is no default; of a required one, an error.
        if !matches!(default, Json::Null) || !schema.optional {
            let mut out = Vec::new();
            let mut path = Path::new(format!("{at}.default"));
            convert(
                &schema,
                Some(default),
                Form::Envelope,
                Form::Envelope,
                settings,
                &mut out,
                &mut path,
            )
            .map_err(|e| e.to_string())?;
            schema.default = Some(String::from_utf8(out).expect("JSON is UTF-8"));
        }
    }
    Ok(schema)
}

/// A logical type's name on another type, or a `Decimal` without an
/// integer scale, is refused rather than read as something else.
fn check_logical(schema: &Schema, at: &str) -> Result<(), String> {
    let Some(name) = schema.name.as_deref() else {
        return Ok(());
    };
    let expected = match name {
        DECIMAL => "bytes",
        DATE | TIME => "int32",
        TIMESTAMP => "int64",
        _ => return Ok(()),
    };
    if schema.kind.type_name() != expected {
        return Err(format!(
            "{at} is named `{name}`, a logical type of `{expected}`, but its type is `{}`",
            schema.kind.type_name()
        ));
    }
    if name == DECIMAL {
        let Some(scale) = schema
            .parameter(DECIMAL_SCALE)
            .and_then(|s| s.parse::<i32>().ok())
        else {
            return Err(format!(
                "{at} is a `{DECIMAL}` without an integer `{DECIMAL_SCALE}` parameter"
            ));
        };
        // Java allows any int scale, but a value is written with `scale`
        // digits after its point: past the digits any value may have, one
        // record would cost gigabytes.
        if scale.unsigned_abs() as usize > MAX_DIGITS {
            return Err(format!(
                "{at} is a `{DECIMAL}` whose scale {scale} is out of range (at most ±{MAX_DIGITS})"
            ));
        }
    }
    Ok(())
}

/// Writes `schema` as `JsonConverter.asJsonSchema` does.
pub fn write_schema(out: &mut Vec<u8>, schema: &Schema) {
    write_members(out, schema);
    out.push(b'}');
}

/// The schema's object without its closing brace (a struct field adds
/// `"field"` after).
fn write_members(out: &mut Vec<u8>, schema: &Schema) {
    out.extend_from_slice(b"{\"type\":");
    json::write_string(out, schema.kind.type_name());
    match &schema.kind {
        SchemaKind::Array(items) => {
            out.extend_from_slice(b",\"items\":");
            write_schema(out, items);
        }
        SchemaKind::Map(keys, values) => {
            out.extend_from_slice(b",\"keys\":");
            write_schema(out, keys);
            out.extend_from_slice(b",\"values\":");
            write_schema(out, values);
        }
        SchemaKind::Struct(fields) => {
            out.extend_from_slice(b",\"fields\":[");
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_members(out, &f.schema);
                out.extend_from_slice(b",\"field\":");
                json::write_string(out, &f.name);
                out.push(b'}');
            }
            out.push(b']');
        }
        _ => {}
    }
    out.extend_from_slice(if schema.optional {
        b",\"optional\":true"
    } else {
        b",\"optional\":false"
    });
    if let Some(name) = &schema.name {
        out.extend_from_slice(b",\"name\":");
        json::write_string(out, name);
    }
    if let Some(version) = schema.version {
        out.extend_from_slice(format!(",\"version\":{version}").as_bytes());
    }
    if let Some(doc) = &schema.doc {
        out.extend_from_slice(b",\"doc\":");
        json::write_string(out, doc);
    }
    if !schema.parameters.is_empty() {
        out.extend_from_slice(b",\"parameters\":{");
        for (i, (k, v)) in schema.parameters.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json::write_string(out, k);
            out.push(b':');
            json::write_string(out, v);
        }
        out.push(b'}');
    }
    if let Some(default) = &schema.default {
        out.extend_from_slice(b",\"default\":");
        out.extend_from_slice(default.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Schema, String> {
        read_schema(&json::parse(text.as_bytes()).unwrap(), Settings::default())
    }

    fn written(s: &Schema) -> String {
        let mut out = Vec::new();
        write_schema(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn schemas_are_written_as_json_converter_writes_them() {
        let s = Schema::structure([
            ("id", Schema::int64()),
            ("price", Schema::decimal(2).optional()),
            ("tags", Schema::array(Schema::string()).optional()),
            ("attrs", Schema::map(Schema::string(), Schema::float64())),
        ])
        .named("shop.Order")
        .version(3);
        let text = r#"{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"},{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"},"field":"price"},{"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"tags"},{"type":"map","keys":{"type":"string","optional":false},"values":{"type":"double","optional":false},"optional":false,"field":"attrs"}],"optional":false,"name":"shop.Order","version":3}"#;
        assert_eq!(written(&s), text);
        assert_eq!(read(text).unwrap(), s);
    }

    #[test]
    fn defaults_are_kept_in_json_converters_form() {
        let s = read(r#"{"type":"double","optional":false,"default":5,"doc":"d"}"#).unwrap();
        assert_eq!(s.default.as_deref(), Some("5.0"));
        assert_eq!(
            written(&s),
            r#"{"type":"double","optional":false,"doc":"d","default":5.0}"#
        );
        let s = read(r#"{"type":"string","optional":true,"default":null}"#).unwrap();
        assert_eq!(s.default, None);
        assert!(read(r#"{"type":"string","default":null}"#).is_err());
        assert!(read(r#"{"type":"int8","default":300}"#).is_err());
    }

    #[test]
    fn malformed_schemas_say_what_is_wrong() {
        for (text, says) in [
            (r#"[]"#, "not a schema object"),
            (r#"{}"#, "no `type`"),
            (r#"{"type":"float64"}"#, "`double`"),
            (r#"{"type":"decimal"}"#, "not a Kafka Connect type"),
            (r#"{"type":"array"}"#, "schema.items is missing"),
            (
                r#"{"type":"map","keys":{"type":"string"}}"#,
                "schema.values",
            ),
            (r#"{"type":"struct"}"#, "fields"),
            (
                r#"{"type":"struct","fields":[{"type":"int8"}]}"#,
                "`field` name",
            ),
            (
                r#"{"type":"struct","fields":[{"type":"int8","field":"a"},{"type":"int8","field":"a"}]}"#,
                "twice",
            ),
            (
                r#"{"type":"struct","fields":[{"type":"nope","field":"a"}]}"#,
                "schema.fields[0].type",
            ),
            (r#"{"type":"int8","optional":"yes"}"#, "not a boolean"),
            (r#"{"type":"int8","version":1.5}"#, "32-bit integer"),
            (
                r#"{"type":"int8","parameters":{"a":1}}"#,
                "parameters are strings",
            ),
            (
                r#"{"type":"string","name":"org.apache.kafka.connect.data.Date"}"#,
                "logical type of `int32`",
            ),
            (
                r#"{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal"}"#,
                "`scale`",
            ),
            // Found by fuzzing: a scale of a billion wrote a gigabyte of
            // zeros for one value.
            (
                r#"{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"0000000001094619290"}}"#,
                "scale 1094619290 is out of range",
            ),
        ] {
            let e = read(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
        // Unknown members are ignored, as Kafka Connect ignores them.
        assert_eq!(read(r#"{"type":"int8","x":1}"#).unwrap(), Schema::int8());
    }
}
