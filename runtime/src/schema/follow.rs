//! How a schema follows a transform.
//!
//! Transforms see and return payloads (schemaless JSON); the runtime keeps
//! the input's schema and decides the output's:
//!
//! 1. If the output still fits the input's schema (every field the schema
//!    has, of its type, and no other), the output has the input's schema,
//!    unchanged (name, version, doc, parameters and default included).
//! 2. Otherwise it is built from the output value and the input's schema
//!    together, recursively:
//!    - a struct (an object where the schema has a struct): its fields are
//!      the object's members, in their order; a member the input's struct
//!      has keeps that field's schema (followed again, if its value
//!      changed), a new member gets an inferred schema, a field the object
//!      no longer has is dropped; the struct keeps its name, version, doc,
//!      parameters and optionality, and loses its default;
//!    - an array or a map of a fitting shape: its element (value) schema
//!      is followed from each element and merged;
//!    - a null where the schema is required: the same schema, optional;
//!      nulls among an array's elements make its element schema optional;
//!    - anything else (a type the transform changed): inferred.
//! 3. Inferred schemas are optional and carry no name: JSON null is an
//!    optional `string`, a boolean `boolean`, an integer (no point, no
//!    exponent, within 64 bits) `int64`, any other number `double`, a
//!    string `string`, an array an `array` of its elements' merged schema
//!    (of optional `string`s when empty), an object a `struct` of its
//!    members.
//! 4. Merged (array elements, map values): equal schemas merge to
//!    themselves; `int64` and `double` to `double`; a null's to the other,
//!    optional; two structs to the union of their fields, in first-seen
//!    order, a field only one has optional; two arrays or maps by their
//!    elements. Anything else cannot be merged: the record fails at the
//!    converter stage.
//!
//! A record with no schema (read with `"schema": null`) stays without one.
//! A transform's null value (a tombstone) keeps the input's schema if that
//! schema takes a null (optional, or with a default), and has none
//! otherwise: it is written to Kafka as a null.

use std::sync::Arc;

use sluice_sdk::schema::{Field, Schema, SchemaKind};

use super::json::Json;
use super::payload::{Form, Path, Settings, convert};

/// The schema of a transform's output `v`, whose input had `input`.
pub fn follow(input: &Arc<Schema>, v: &Json, settings: Settings) -> Result<Arc<Schema>, String> {
    if fits(input, v, settings) {
        return Ok(input.clone());
    }
    follow_value(input, v, settings).map(Arc::new)
}

/// Whether `v` (a sink's form) is a value of `schema`.
pub fn fits(schema: &Schema, v: &Json, settings: Settings) -> bool {
    let mut scratch = Vec::new();
    convert(
        schema,
        Some(v),
        Form::Sink,
        Form::Sink,
        settings,
        &mut scratch,
        &mut Path::new(""),
    )
    .is_ok()
}

fn follow_value(input: &Schema, v: &Json, settings: Settings) -> Result<Schema, String> {
    if fits(input, v, settings) {
        return Ok(input.clone());
    }
    let kept = |kind: SchemaKind| Schema {
        kind,
        default: None,
        ..input.clone()
    };
    Ok(match (&input.kind, v) {
        (_, Json::Null) => Schema {
            optional: true,
            ..input.clone()
        },
        (SchemaKind::Struct(fields), Json::Object(members)) => {
            let mut out = Vec::with_capacity(members.len());
            for (name, value) in members {
                let schema = match fields.iter().find(|f| &f.name == name) {
                    Some(f) => follow_value(&f.schema, value, settings),
                    None => infer(value),
                }
                .map_err(|e| format!("{name}: {e}"))?;
                out.push(Field {
                    name: name.clone(),
                    schema,
                });
            }
            kept(SchemaKind::Struct(out))
        }
        (SchemaKind::Array(items), Json::Array(elements)) => {
            let mut merged: Option<Schema> = None;
            for e in elements {
                let s = follow_value(items, e, settings)?;
                merged = Some(match merged {
                    None => s,
                    Some(m) => merge(m, s)?,
                });
            }
            kept(SchemaKind::Array(Box::new(
                merged.unwrap_or_else(|| (**items).clone()),
            )))
        }
        (SchemaKind::Map(keys, values), Json::Object(members))
            if matches!(keys.kind, SchemaKind::String) =>
        {
            let mut merged: Option<Schema> = None;
            for (_, e) in members {
                let s = follow_value(values, e, settings)?;
                merged = Some(match merged {
                    None => s,
                    Some(m) => merge(m, s)?,
                });
            }
            kept(SchemaKind::Map(
                keys.clone(),
                Box::new(merged.unwrap_or_else(|| (**values).clone())),
            ))
        }
        _ => infer(v)?,
    })
}

/// The schema of a value nothing is known about.
pub fn infer(v: &Json) -> Result<Schema, String> {
    Ok(match v {
        Json::Null | Json::String(_) => Schema::string(),
        Json::Bool(_) => Schema::boolean(),
        Json::Number(n) => match (n.contains(['.', 'e', 'E']), n.parse::<i64>()) {
            (false, Ok(_)) => Schema::int64(),
            _ => Schema::float64(),
        },
        Json::Array(elements) => {
            let mut merged: Option<Schema> = None;
            let mut nulls = false;
            for e in elements {
                if let Json::Null = e {
                    nulls = true;
                    continue;
                }
                let s = infer(e)?;
                merged = Some(match merged {
                    None => s,
                    Some(m) => merge(m, s)?,
                });
            }
            let mut items = merged.unwrap_or_else(|| Schema::string().optional());
            items.optional |= nulls;
            Schema::array(items)
        }
        Json::Object(members) => {
            let mut fields = Vec::with_capacity(members.len());
            for (name, value) in members {
                fields.push(Field {
                    name: name.clone(),
                    schema: infer(value).map_err(|e| format!("{name}: {e}"))?,
                });
            }
            Schema::new(SchemaKind::Struct(fields))
        }
    }
    .optional())
}

/// Two schemas of elements of one array (or values of one map) as one.
fn merge(a: Schema, b: Schema) -> Result<Schema, String> {
    if a == b {
        return Ok(a);
    }
    let optional = a.optional || b.optional;
    let merged = match (&a.kind, &b.kind) {
        (SchemaKind::Int64, SchemaKind::Float64) | (SchemaKind::Float64, SchemaKind::Int64)
            if a.name.is_none() && b.name.is_none() =>
        {
            Schema::float64()
        }
        (SchemaKind::Struct(fa), SchemaKind::Struct(fb)) => {
            let mut fields: Vec<Field> = Vec::with_capacity(fa.len().max(fb.len()));
            for f in fa {
                fields.push(match fb.iter().find(|g| g.name == f.name) {
                    Some(g) => Field {
                        name: f.name.clone(),
                        schema: merge(f.schema.clone(), g.schema.clone())?,
                    },
                    None => Field {
                        name: f.name.clone(),
                        schema: f.schema.clone().optional(),
                    },
                });
            }
            for g in fb {
                if !fa.iter().any(|f| f.name == g.name) {
                    fields.push(Field {
                        name: g.name.clone(),
                        schema: g.schema.clone().optional(),
                    });
                }
            }
            Schema {
                kind: SchemaKind::Struct(fields),
                default: None,
                ..a.clone()
            }
        }
        (SchemaKind::Array(x), SchemaKind::Array(y)) => Schema {
            kind: SchemaKind::Array(Box::new(merge((**x).clone(), (**y).clone())?)),
            default: None,
            ..a.clone()
        },
        (SchemaKind::Map(kx, x), SchemaKind::Map(ky, y)) if kx == ky => Schema {
            kind: SchemaKind::Map(kx.clone(), Box::new(merge((**x).clone(), (**y).clone())?)),
            default: None,
            ..a.clone()
        },
        _ if same_but_optional(&a, &b) => a.clone(),
        _ => {
            return Err(format!(
                "elements of different types (`{}` and `{}`) have no one schema",
                a.kind.type_name(),
                b.kind.type_name()
            ));
        }
    };
    Ok(Schema { optional, ..merged })
}

fn same_but_optional(a: &Schema, b: &Schema) -> bool {
    Schema {
        optional: false,
        ..a.clone()
    } == Schema {
        optional: false,
        ..b.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::json::parse;

    fn follow_text(input: &Schema, output: &str) -> Result<Schema, String> {
        follow(
            &Arc::new(input.clone()),
            &parse(output.as_bytes()).unwrap(),
            Settings::default(),
        )
        .map(|s| (*s).clone())
    }

    fn order() -> Schema {
        Schema::structure([
            ("id", Schema::int64()),
            ("price", Schema::decimal(2)),
            ("status", Schema::string()),
        ])
        .named("shop.Order")
    }

    #[test]
    fn an_unchanged_shape_keeps_the_schema() {
        let input = Arc::new(order());
        let out = follow(
            &input,
            &parse(br#"{"id":1,"price":9.5,"status":"PAID"}"#).unwrap(),
            Settings::default(),
        )
        .unwrap();
        assert!(Arc::ptr_eq(&input, &out));
    }

    #[test]
    fn added_fields_are_inferred_removed_ones_dropped_changed_ones_reinferred() {
        let out = follow_text(
            &order(),
            r#"{"id":"A-1","price":9.5,"pipeline":"sluice","n":2,"x":1.5,"tags":["a"],"at":null}"#,
        )
        .unwrap();
        let expected = Schema::structure([
            ("id", Schema::string().optional()),
            ("price", Schema::decimal(2)),
            ("pipeline", Schema::string().optional()),
            ("n", Schema::int64().optional()),
            ("x", Schema::float64().optional()),
            (
                "tags",
                Schema::array(Schema::string().optional()).optional(),
            ),
            ("at", Schema::string().optional()),
        ])
        .named("shop.Order");
        assert_eq!(out, expected);
        // A required field set to null becomes optional.
        let out = follow_text(&order(), r#"{"id":1,"price":null,"status":"x"}"#).unwrap();
        assert_eq!(out.field("price"), Some(&Schema::decimal(2).optional()));
    }

    #[test]
    fn nested_structs_and_arrays_follow_recursively() {
        let input = Schema::structure([(
            "lines",
            Schema::array(Schema::structure([
                ("sku", Schema::string()),
                ("qty", Schema::int32()),
            ])),
        )]);
        let out = follow_text(
            &input,
            r#"{"lines":[{"sku":"a","qty":1,"gift":true},{"sku":"b","qty":2}]}"#,
        )
        .unwrap();
        assert_eq!(
            out,
            Schema::structure([(
                "lines",
                Schema::array(Schema::structure([
                    ("sku", Schema::string()),
                    ("qty", Schema::int32()),
                    ("gift", Schema::boolean().optional()),
                ])),
            )])
        );
        let e = follow_text(&input, r#"{"lines":[1,"a"]}"#).unwrap_err();
        assert!(e.contains("different types"), "{e}");
        let mixed = follow_text(&Schema::string(), "[1, 2.5, null]").unwrap();
        assert_eq!(
            mixed,
            Schema::array(Schema::float64().optional()).optional()
        );
    }
}
