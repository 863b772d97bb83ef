//! Whether data valid under one JSON Schema is read by another, by the
//! rules of Confluent's registry (its STRICT policy): the schemas are
//! compared node by node, and each difference is allowed (it only loosens
//! what the reader takes) or not. The differences are named as Confluent
//! names them (`TYPE_CHANGED`, `OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL`,
//! ...), with where in the schema they are.
//!
//! Objects: a property added where the writer's model is open (no
//! `additionalProperties: false`) is refused, because the writer may
//! have written anything under that name; added to a closed model it is
//! allowed if it is not required or has a default. A property removed is
//! allowed where the reader's model is open. Types: integer to number
//! loosens, the reverse narrows; `connect.type` is not compared, except
//! that two `bytes` schemas are equal whatever JSON type carries them.
//! Unions: every branch of the writer must be read by a branch of the
//! reader. Enums may grow, not shrink; string and number limits may
//! loosen, not tighten.

use serde_json::{Map, Value};

/// `Ok` if everything `writer` accepts, `reader` accepts too; else the
/// first difference that breaks it.
pub fn can_read(reader: &str, writer: &str) -> Result<(), String> {
    let reader: Value =
        serde_json::from_str(reader).map_err(|e| format!("not a valid JSON Schema: {e}"))?;
    let writer: Value =
        serde_json::from_str(writer).map_err(|e| format!("not a valid JSON Schema: {e}"))?;
    Diff {
        writer_root: &writer,
        reader_root: &reader,
        depth: 0,
    }
    .compare(&writer, &reader, "#")
}

struct Diff<'a> {
    writer_root: &'a Value,
    reader_root: &'a Value,
    depth: usize,
}

/// How deep `$ref`s are followed before the schemas count as recursive
/// and equal from there on.
const MAX_DEPTH: usize = 64;

fn refused(kind: &str, at: &str, detail: impl std::fmt::Display) -> Result<(), String> {
    Err(format!("{kind} at {at}: {detail}"))
}

fn resolve<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
    let mut s = s;
    for _ in 0..MAX_DEPTH {
        match s
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|p| root.pointer(p))
        {
            Some(target) => s = target,
            None => return s,
        }
    }
    s
}

fn accepts_anything(s: &Value) -> bool {
    match s {
        Value::Bool(b) => *b,
        Value::Object(o) => o.keys().all(|k| {
            matches!(
                k.as_str(),
                "title" | "description" | "$id" | "$schema" | "default" | "examples" | "$comment"
            ) || k.starts_with("connect.")
        }),
        _ => false,
    }
}

/// A union's branches (`oneOf`/`anyOf`, or a `type` list), or the schema
/// alone.
fn branches(s: &Value) -> Vec<Value> {
    for combinator in ["oneOf", "anyOf"] {
        if let Some(b) = s.get(combinator).and_then(Value::as_array) {
            return b.clone();
        }
    }
    if let Some(types) = s.get("type").and_then(Value::as_array) {
        return types
            .iter()
            .map(|t| {
                let mut one = s.as_object().cloned().unwrap_or_default();
                one.insert("type".into(), t.clone());
                Value::Object(one)
            })
            .collect();
    }
    vec![s.clone()]
}

fn json_type(s: &Value) -> Option<&str> {
    if s.get("connect.type").and_then(Value::as_str) == Some("bytes") {
        return Some("bytes");
    }
    match s.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        _ if s.get("properties").is_some() => Some("object"),
        _ if s.get("items").is_some() => Some("array"),
        _ => None,
    }
}

fn is_open(o: &Map<String, Value>) -> bool {
    !matches!(o.get("additionalProperties"), Some(Value::Bool(false)))
        && !o.contains_key("patternProperties")
        && !matches!(o.get("unevaluatedProperties"), Some(Value::Bool(false)))
}

fn required(o: &Map<String, Value>) -> Vec<&str> {
    o.get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

impl Diff<'_> {
    fn compare(&mut self, writer: &Value, reader: &Value, at: &str) -> Result<(), String> {
        if self.depth > MAX_DEPTH {
            return Ok(());
        }
        self.depth += 1;
        let result = self.compare_resolved(
            &resolve(self.writer_root, writer).clone(),
            &resolve(self.reader_root, reader).clone(),
            at,
        );
        self.depth -= 1;
        result
    }

    fn compare_resolved(&mut self, writer: &Value, reader: &Value, at: &str) -> Result<(), String> {
        if accepts_anything(reader) || writer == &Value::Bool(false) {
            return Ok(());
        }
        let writer_branches = branches(writer);
        let reader_branches = branches(reader);
        if writer_branches.len() > 1 || reader_branches.len() > 1 {
            // Every kind of value the writer wrote, some reader branch reads.
            for (i, w) in writer_branches.iter().enumerate() {
                let read = reader_branches
                    .iter()
                    .any(|r| self.compare(w, r, &format!("{at}/oneOf/{i}")).is_ok());
                if !read {
                    return refused(
                        "SUM_TYPE_NARROWED",
                        at,
                        format!("no branch of the new schema reads {w}"),
                    );
                }
            }
            return Ok(());
        }
        let (w, r) = (json_type(writer), json_type(reader));
        match (w, r) {
            (Some(w), Some(r)) if w == r => {}
            (Some("integer"), Some("number")) => {}
            (Some("number"), Some("integer")) => {
                return refused("TYPE_NARROWED", at, "number became integer");
            }
            (Some(w), Some(r)) => {
                return refused("TYPE_CHANGED", at, format!("{w} became {r}"));
            }
            // The writer took any type (an enum is compared below).
            (None, Some(r)) if writer.get("enum").is_none() => {
                return refused("TYPE_NARROWED", at, format!("any type became {r}"));
            }
            _ => {}
        }
        self.enums(writer, reader, at)?;
        self.limits(writer, reader, at)?;
        if let (Some(wi), Some(ri)) = (writer.get("items"), reader.get("items")) {
            self.compare(wi, ri, &format!("{at}/items"))?;
        }
        if let (Value::Object(wo), Value::Object(ro)) = (writer, reader)
            && matches!(r, Some("object"))
        {
            self.objects(wo, ro, at)?;
        }
        Ok(())
    }

    fn enums(&self, writer: &Value, reader: &Value, at: &str) -> Result<(), String> {
        match (
            writer.get("enum").and_then(Value::as_array),
            reader.get("enum").and_then(Value::as_array),
        ) {
            (_, None) => Ok(()),
            (None, Some(_)) => refused("ENUM_ARRAY_NARROWED", at, "an enum was added"),
            (Some(w), Some(r)) => match w.iter().find(|v| !r.contains(v)) {
                Some(gone) => refused(
                    "ENUM_ARRAY_NARROWED",
                    at,
                    format!("{gone} is no longer allowed"),
                ),
                None => Ok(()),
            },
        }
    }

    /// String and number limits: the reader's may only be looser.
    fn limits(&self, writer: &Value, reader: &Value, at: &str) -> Result<(), String> {
        let number = |s: &Value, k: &str| s.get(k).and_then(Value::as_f64);
        // (key, the reader's value is tighter when it is ... than the writer's)
        for (key, tighter_when_less) in [
            ("maxLength", true),
            ("maximum", true),
            ("exclusiveMaximum", true),
            ("maxItems", true),
            ("maxProperties", true),
            ("minLength", false),
            ("minimum", false),
            ("exclusiveMinimum", false),
            ("minItems", false),
            ("minProperties", false),
        ] {
            let Some(r) = number(reader, key) else {
                continue;
            };
            let tightened = match number(writer, key) {
                None => true,
                Some(w) if tighter_when_less => r < w,
                Some(w) => r > w,
            };
            if tightened {
                return refused(
                    &format!("{}_ADDED_OR_TIGHTENED", to_screaming(key)),
                    at,
                    format!("{key} is now {r}"),
                );
            }
        }
        if let Some(pattern) = reader.get("pattern")
            && writer.get("pattern") != Some(pattern)
        {
            return refused(
                "PATTERN_ADDED_OR_CHANGED",
                at,
                format!("pattern is now {pattern}"),
            );
        }
        if reader.get("uniqueItems") == Some(&Value::Bool(true))
            && writer.get("uniqueItems") != Some(&Value::Bool(true))
        {
            return refused("UNIQUE_ITEMS_ADDED", at, "items must now be unique");
        }
        Ok(())
    }

    fn objects(
        &mut self,
        writer: &Map<String, Value>,
        reader: &Map<String, Value>,
        at: &str,
    ) -> Result<(), String> {
        let empty = Map::new();
        let wp = writer
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let rp = reader
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let reader_required = required(reader);
        let writer_required = required(writer);
        for (name, r) in rp {
            let place = format!("{at}/properties/{name}");
            match wp.get(name) {
                Some(w) => self.compare(w, r, &place)?,
                None if accepts_anything(r) => {}
                None if is_open(writer) => {
                    return refused(
                        if reader_required.contains(&name.as_str()) {
                            "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
                        } else {
                            "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
                        },
                        &place,
                        "the earlier schema allowed any value under this name",
                    );
                }
                None if reader_required.contains(&name.as_str()) && r.get("default").is_none() => {
                    return refused(
                        "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
                        &place,
                        "data written before has no such property",
                    );
                }
                None => {}
            }
        }
        for (name, w) in wp {
            if !rp.contains_key(name) && !is_open(reader) && w != &Value::Bool(false) {
                return refused(
                    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
                    &format!("{at}/properties/{name}"),
                    "the new schema no longer allows it and data written before has it",
                );
            }
        }
        for name in &reader_required {
            let has_default = rp.get(*name).is_some_and(|p| p.get("default").is_some());
            if !writer_required.contains(name) && wp.contains_key(*name) && !has_default {
                return refused(
                    "REQUIRED_ATTRIBUTE_ADDED",
                    &format!("{at}/properties/{name}"),
                    "it is now required and data written before may lack it",
                );
            }
        }
        match (
            writer.get("additionalProperties"),
            reader.get("additionalProperties"),
        ) {
            (Some(w @ Value::Object(_)), Some(r @ Value::Object(_))) => {
                self.compare(w, r, &format!("{at}/additionalProperties"))
            }
            (None | Some(Value::Bool(true)), Some(Value::Object(_)) | Some(Value::Bool(false))) => {
                refused(
                    "ADDITIONAL_PROPERTIES_NARROWED",
                    at,
                    "the earlier schema allowed any other property",
                )
            }
            (Some(Value::Object(_)), Some(Value::Bool(false))) => refused(
                "ADDITIONAL_PROPERTIES_REMOVED",
                at,
                "other properties are no longer allowed",
            ),
            _ => Ok(()),
        }
    }
}

fn to_screaming(camel: &str) -> String {
    let mut out = String::new();
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(reader: Value, writer: Value) -> Result<(), String> {
        can_read(&reader.to_string(), &writer.to_string())
    }

    #[test]
    fn confluents_object_rules() {
        let open = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let open_added = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}});
        // Backward (the new one reads the old one's data).
        let e = check(open_added.clone(), open.clone()).unwrap_err();
        assert!(
            e.starts_with("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at #/properties/b"),
            "{e}"
        );
        check(open.clone(), open_added.clone()).expect("removed from an open model");
        let closed =
            |p: Value| json!({"type": "object", "properties": p, "additionalProperties": false});
        let c1 = closed(json!({"a": {"type": "integer"}}));
        let c2 = closed(json!({"a": {"type": "integer"}, "b": {"type": "string"}}));
        check(c2.clone(), c1.clone()).expect("an optional property added to a closed model");
        let e = check(c1.clone(), c2.clone()).unwrap_err();
        assert!(
            e.starts_with("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"),
            "{e}"
        );
        let mut c2_required = c2.clone();
        c2_required["required"] = json!(["b"]);
        let e = check(c2_required.clone(), c1.clone()).unwrap_err();
        assert!(
            e.starts_with("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"),
            "{e}"
        );
        c2_required["properties"]["b"]["default"] = json!("x");
        check(c2_required, c1).expect("required with a default");
        let mut a_required = open.clone();
        a_required["required"] = json!(["a"]);
        let e = check(a_required, open).unwrap_err();
        assert!(e.starts_with("REQUIRED_ATTRIBUTE_ADDED"), "{e}");
    }

    #[test]
    fn types_unions_enums_and_limits() {
        check(json!({"type": "number"}), json!({"type": "integer"})).unwrap();
        assert!(
            check(json!({"type": "integer"}), json!({"type": "number"}))
                .unwrap_err()
                .starts_with("TYPE_NARROWED")
        );
        assert!(
            check(json!({"type": "string"}), json!({"type": "integer"}))
                .unwrap_err()
                .starts_with("TYPE_CHANGED")
        );
        // connect.type is not compared; bytes are bytes in any JSON type.
        check(
            json!({"type": "integer", "connect.type": "int64"}),
            json!({"type": "integer", "connect.type": "int32"}),
        )
        .unwrap();
        check(
            json!({"type": "number", "connect.type": "bytes"}),
            json!({"type": "string", "connect.type": "bytes"}),
        )
        .unwrap();
        let optional = json!({"oneOf": [{"type": "null"}, {"type": "string"}]});
        check(optional.clone(), json!({"type": "string"})).expect("made optional");
        assert!(
            check(json!({"type": "string"}), optional)
                .unwrap_err()
                .starts_with("SUM_TYPE_NARROWED")
        );
        check(
            json!({"enum": ["a", "b", "c"]}),
            json!({"enum": ["a", "b"]}),
        )
        .unwrap();
        assert!(
            check(json!({"enum": ["a"]}), json!({"enum": ["a", "b"]}))
                .unwrap_err()
                .starts_with("ENUM_ARRAY_NARROWED")
        );
        check(
            json!({"type": "string", "maxLength": 10}),
            json!({"type": "string", "maxLength": 5}),
        )
        .unwrap();
        assert!(
            check(
                json!({"type": "string", "maxLength": 5}),
                json!({"type": "string"})
            )
            .unwrap_err()
            .starts_with("MAX_LENGTH")
        );
        let nested_old = json!({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}});
        let nested_new = json!({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "boolean"}}}});
        let e = check(nested_new, nested_old).unwrap_err();
        assert!(
            e.starts_with("TYPE_CHANGED at #/properties/xs/items"),
            "{e}"
        );
        let with_ref = json!({"type": "object", "properties": {"a": {"$ref": "#/definitions/a"}}, "definitions": {"a": {"type": "integer"}}});
        check(
            with_ref,
            json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
        )
        .unwrap();
    }
}
