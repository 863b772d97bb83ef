//! The JSON the connector writes, built by hand so that numbers keep the
//! exact text PostgreSQL gave (a `numeric(20,2)` is `12.50`, not a double).

use std::fmt::Write;

/// A JSON value whose numbers are kept as text.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// A JSON number, written as it is (already valid JSON number text).
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn int(n: i64) -> Json {
        Json::Number(n.to_string())
    }

    pub fn str(s: impl Into<String>) -> Json {
        Json::String(s.into())
    }

    pub fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => out.push_str(n),
            Json::String(s) => write_string(s, out),
            Json::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Object(fields) => {
                out.push('{');
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(name, out);
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = String::new();
        self.write(&mut out);
        out.into_bytes()
    }

    /// As a `serde_json::Value` (numbers parsed: for offsets and tests).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_slice(&self.to_bytes()).expect("the writer writes valid JSON")
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_their_text_and_strings_are_escaped() {
        let j = Json::Object(vec![
            ("n".into(), Json::Number("12.50".into())),
            ("s".into(), Json::str("a\"b\\c\n\u{1}")),
            ("a".into(), Json::Array(vec![Json::Null, Json::Bool(true)])),
        ]);
        let text = String::from_utf8(j.to_bytes()).unwrap();
        assert_eq!(text, r#"{"n":12.50,"s":"a\"b\\c\n\u0001","a":[null,true]}"#);
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["s"], "a\"b\\c\n\u{1}");
    }
}
