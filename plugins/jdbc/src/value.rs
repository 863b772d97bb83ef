//! JSON field values as SQL values, and the coercions into a column's type.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    Int,
    Float,
    Bool,
    Text,
}

impl ColumnKind {
    /// The kind of a declared column type, by the databases' affinity rules.
    pub fn from_declared(declared: &str) -> Self {
        let t = declared.to_ascii_uppercase();
        if t.contains("BOOL") {
            ColumnKind::Bool
        } else if t.contains("INT") && !t.contains("POINT") && !t.contains("INTERVAL") {
            ColumnKind::Int
        } else if ["REAL", "FLOA", "DOUB", "NUMERIC", "DECIMAL"]
            .iter()
            .any(|k| t.contains(k))
        {
            ColumnKind::Float
        } else {
            ColumnKind::Text
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    Null,
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(String),
}

impl SqlValue {
    pub fn from_json(v: &serde_json::Value) -> Self {
        match v {
            serde_json::Value::Null => SqlValue::Null,
            serde_json::Value::Bool(b) => SqlValue::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => SqlValue::Int(i),
                None => SqlValue::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(s) => SqlValue::Text(s.clone()),
            // Nested structures are stored as their JSON text.
            other => SqlValue::Text(other.to_string()),
        }
    }

    /// Whether this guard value is older than `other`: numbers by value,
    /// text (ISO-8601 timestamps) by its order.
    pub fn is_older_than(&self, other: &SqlValue) -> bool {
        use SqlValue::*;
        match (self, other) {
            (Int(a), Int(b)) => a < b,
            (Int(a), Float(b)) => (*a as f64) < *b,
            (Float(a), Int(b)) => *a < *b as f64,
            (Float(a), Float(b)) => a < b,
            (Text(a), Text(b)) => a < b,
            (Bool(a), Bool(b)) => a < b,
            _ => false,
        }
    }

    /// The column kind `auto.create` gives this value.
    pub fn kind(&self) -> Option<ColumnKind> {
        match self {
            SqlValue::Null => None,
            SqlValue::Int(_) => Some(ColumnKind::Int),
            SqlValue::Float(_) => Some(ColumnKind::Float),
            SqlValue::Bool(_) => Some(ColumnKind::Bool),
            SqlValue::Text(_) => Some(ColumnKind::Text),
        }
    }

    /// Converts to the column's kind where no information is lost.
    pub fn coerce(self, kind: ColumnKind) -> Result<SqlValue, String> {
        use SqlValue::*;
        Ok(match (self, kind) {
            (Null, _) => Null,
            (Int(i), ColumnKind::Int) => Int(i),
            (Int(i), ColumnKind::Float) => Float(i as f64),
            (Int(i), ColumnKind::Text) => Text(i.to_string()),
            (Int(i @ (0 | 1)), ColumnKind::Bool) => Bool(i == 1),
            (Float(f), ColumnKind::Float) => Float(f),
            (Float(f), ColumnKind::Int) if f.fract() == 0.0 && f.abs() < 9.0e15 => Int(f as i64),
            (Float(f), ColumnKind::Text) => Text(f.to_string()),
            (Bool(b), ColumnKind::Bool) => Bool(b),
            (Bool(b), ColumnKind::Int) => Int(i64::from(b)),
            (Bool(b), ColumnKind::Text) => Text(b.to_string()),
            (Text(s), ColumnKind::Text) => Text(s),
            (Text(s), ColumnKind::Int) => Int(s
                .trim()
                .parse()
                .map_err(|_| format!("`{s}` is not an integer"))?),
            (Text(s), ColumnKind::Float) => Float(
                s.trim()
                    .parse()
                    .map_err(|_| format!("`{s}` is not a number"))?,
            ),
            (Text(s), ColumnKind::Bool) => match s.trim() {
                "true" => Bool(true),
                "false" => Bool(false),
                _ => return Err(format!("`{s}` is not a boolean")),
            },
            (v, k) => return Err(format!("{v:?} does not fit a {k:?} column")),
        })
    }
}

/// A record's value, read straight into column values: an object's fields
/// in their order (a repeated field keeps its first place and its last
/// value, as a parsed JSON object would), without building a JSON tree
/// first.
#[derive(Debug, PartialEq)]
pub enum ParsedValue {
    Object(Vec<(String, SqlValue)>),
    Null,
    /// Not an object: what it is, for the error.
    Other(&'static str),
}

impl ParsedValue {
    pub fn parse(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

impl<'de> serde::Deserialize<'de> for ParsedValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ParsedValueVisitor)
    }
}

struct ParsedValueVisitor;

impl<'de> serde::de::Visitor<'de> for ParsedValueVisitor {
    type Value = ParsedValue;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ParsedValue, A::Error> {
        let mut fields: Vec<(String, SqlValue)> = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(name) = map.next_key::<String>()? {
            let value = map.next_value::<FieldValue>()?.0;
            match fields.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => *v = value,
                None => fields.push((name, value)),
            }
        }
        Ok(ParsedValue::Object(fields))
    }

    fn visit_unit<E>(self) -> Result<ParsedValue, E> {
        Ok(ParsedValue::Null)
    }

    fn visit_none<E>(self) -> Result<ParsedValue, E> {
        Ok(ParsedValue::Null)
    }

    fn visit_bool<E>(self, _: bool) -> Result<ParsedValue, E> {
        Ok(ParsedValue::Other("a boolean"))
    }

    fn visit_i64<E>(self, _: i64) -> Result<ParsedValue, E> {
        Ok(ParsedValue::Other("a number"))
    }

    fn visit_u64<E>(self, _: u64) -> Result<ParsedValue, E> {
        Ok(ParsedValue::Other("a number"))
    }

    fn visit_f64<E>(self, _: f64) -> Result<ParsedValue, E> {
        Ok(ParsedValue::Other("a number"))
    }

    fn visit_str<E>(self, _: &str) -> Result<ParsedValue, E> {
        Ok(ParsedValue::Other("a string"))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<ParsedValue, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(ParsedValue::Other("an array"))
    }
}

/// One field's value as a column value: what [`SqlValue::from_json`] gives
/// for the same JSON.
struct FieldValue(SqlValue);

impl<'de> serde::Deserialize<'de> for FieldValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldValueVisitor)
    }
}

struct FieldValueVisitor;

impl<'de> serde::de::Visitor<'de> for FieldValueVisitor {
    type Value = FieldValue;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<FieldValue, E> {
        Ok(FieldValue(SqlValue::Null))
    }

    fn visit_none<E>(self) -> Result<FieldValue, E> {
        Ok(FieldValue(SqlValue::Null))
    }

    fn visit_bool<E>(self, b: bool) -> Result<FieldValue, E> {
        Ok(FieldValue(SqlValue::Bool(b)))
    }

    fn visit_i64<E>(self, i: i64) -> Result<FieldValue, E> {
        Ok(FieldValue(SqlValue::Int(i)))
    }

    fn visit_u64<E>(self, u: u64) -> Result<FieldValue, E> {
        Ok(FieldValue(match i64::try_from(u) {
            Ok(i) => SqlValue::Int(i),
            Err(_) => SqlValue::Float(u as f64),
        }))
    }

    fn visit_f64<E>(self, f: f64) -> Result<FieldValue, E> {
        Ok(FieldValue(SqlValue::Float(f)))
    }

    fn visit_str<E>(self, s: &str) -> Result<FieldValue, E> {
        Ok(FieldValue(SqlValue::Text(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<FieldValue, E> {
        Ok(FieldValue(SqlValue::Text(s)))
    }

    // Nested structures are stored as their compact JSON text.
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<FieldValue, A::Error> {
        use serde::Deserialize;
        let v = serde_json::Value::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
        Ok(FieldValue(SqlValue::Text(v.to_string())))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<FieldValue, A::Error> {
        use serde::Deserialize;
        let v = serde_json::Value::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        Ok(FieldValue(SqlValue::Text(v.to_string())))
    }
}

/// A primary key's values as a hash-map key: equal when every value is
/// the same variant with the same content (floats by their bits), as keys
/// compare in the database.
#[derive(Debug, Clone, Copy)]
pub struct KeyRef<'a>(pub &'a [SqlValue]);

impl PartialEq for KeyRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().zip(other.0).all(|(a, b)| match (a, b) {
                (SqlValue::Float(x), SqlValue::Float(y)) => x.to_bits() == y.to_bits(),
                _ => a == b,
            })
    }
}

impl Eq for KeyRef<'_> {}

impl std::hash::Hash for KeyRef<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        for v in self.0 {
            std::mem::discriminant(v).hash(h);
            match v {
                SqlValue::Null => {}
                SqlValue::Int(i) => i.hash(h),
                SqlValue::Float(f) => f.to_bits().hash(h),
                SqlValue::Bool(b) => b.hash(h),
                SqlValue::Text(s) => s.hash(h),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsed_values_match_the_json_tree() {
        let cases = [
            r#"{"a":1,"b":"x","c":null,"d":true,"e":1.5,"f":{"g":[1, 2]},"h":[{"i":"j"}],"k":18446744073709551615}"#,
            r#"{"a":1,"a":2,"b":3}"#,
            r#"{}"#,
        ];
        for json in cases {
            let tree: serde_json::Value = serde_json::from_str(json).unwrap();
            let expected: Vec<(String, SqlValue)> = tree
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), SqlValue::from_json(v)))
                .collect();
            assert_eq!(
                ParsedValue::parse(json.as_bytes()).unwrap(),
                ParsedValue::Object(expected),
                "{json}"
            );
        }
        assert_eq!(ParsedValue::parse(b"null").unwrap(), ParsedValue::Null);
        assert_eq!(
            ParsedValue::parse(b"[1,[2]]").unwrap(),
            ParsedValue::Other("an array")
        );
        assert_eq!(
            ParsedValue::parse(b"7").unwrap(),
            ParsedValue::Other("a number")
        );
        assert!(ParsedValue::parse(b"{\"a\":").is_err());
        assert!(ParsedValue::parse(b"{} x").is_err());
    }

    #[test]
    fn keys_compare_by_variant_and_content() {
        use std::collections::HashSet;
        let keys = [
            vec![SqlValue::Int(1)],
            vec![SqlValue::Float(1.0)],
            vec![SqlValue::Text("1".into())],
            vec![SqlValue::Int(1), SqlValue::Int(2)],
        ];
        let set: HashSet<KeyRef> = keys.iter().map(|k| KeyRef(k)).collect();
        assert_eq!(set.len(), 4);
        let again = vec![SqlValue::Int(1), SqlValue::Int(2)];
        assert!(set.contains(&KeyRef(&again)));
    }
}
