//! JSON as Kafka Connect's `JsonConverter` reads and writes it.
//!
//! Reading keeps every number as written (a `Decimal` sent as a JSON number
//! keeps all its digits, which a double would not) and members in order (a
//! repeated name keeps its first place and its last value, as Jackson's
//! tree does). It accepts what Jackson accepts with Kafka Connect's
//! settings, leading zeros in numbers included, and refuses the rest.
//!
//! Writing is Jackson's: compact, `"`, `\` and control characters escaped
//! (`\b \t \n \f \r` short, others `\u00XX` in upper case), characters past
//! U+FFFF as their two UTF-16 escapes, everything else as UTF-8; doubles
//! and floats as Java's `Double.toString` and `Float.toString` (the
//! shortest digits that read back to the same value, Java 19 and later;
//! see `write_f64`).

use std::collections::HashMap;
use std::fmt::Write as _;

/// A parsed JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// The number's text, as written (valid JSON number syntax, leading
    /// zeros allowed).
    Number(String),
    String(String),
    Array(Vec<Json>),
    /// Members in order; names are unique.
    Object(Vec<(String, Json)>),
}

/// Objects with more members than this look names up in a hash map.
const INDEX_AFTER: usize = 32;

/// How deep arrays and objects may nest (serde_json's limit).
const MAX_DEPTH: usize = 128;

impl Json {
    /// What kind of value this is, for messages ("an object").
    pub fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }

    /// A member of an object.
    pub fn get(&self, name: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Looks members of one object up by name: linearly for small objects,
/// through an index for wide ones.
pub struct Members<'a> {
    members: &'a [(String, Json)],
    index: Option<HashMap<&'a str, usize>>,
}

impl<'a> Members<'a> {
    pub fn new(members: &'a [(String, Json)]) -> Self {
        let index = (members.len() > INDEX_AFTER).then(|| {
            members
                .iter()
                .enumerate()
                .map(|(i, (k, _))| (k.as_str(), i))
                .collect()
        });
        Self { members, index }
    }

    pub fn get(&self, name: &str) -> Option<&'a Json> {
        match &self.index {
            Some(index) => index.get(name).map(|&i| &self.members[i].1),
            None => self.members.iter().find(|(k, _)| k == name).map(|(_, v)| v),
        }
    }
}

/// Why bytes are not JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset.
    pub at: usize,
    pub what: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

/// Parses one JSON value (surrounding whitespace allowed).
pub fn parse(bytes: &[u8]) -> Result<Json, ParseError> {
    let mut p = Parser::new(bytes)?;
    p.ws();
    let v = p.value()?;
    p.end()?;
    Ok(v)
}

/// A top-level object's members, each with the bytes it was written as
/// (so a schema can be looked up by its text before it is interpreted).
/// `None` when the value is not an object.
pub type TopMembers<'a> = Vec<(String, Json, &'a [u8])>;

/// Parses one JSON value; for an object, also the text of each member.
pub fn parse_top(bytes: &[u8]) -> Result<(Json, Option<TopMembers<'_>>), ParseError> {
    let mut p = Parser::new(bytes)?;
    p.ws();
    if p.peek() != Some(b'{') {
        let v = p.value()?;
        p.end()?;
        return Ok((v, None));
    }
    p.pos += 1;
    p.depth = 1;
    let mut members: TopMembers<'_> = Vec::new();
    p.ws();
    if p.peek() == Some(b'}') {
        p.pos += 1;
    } else {
        loop {
            p.ws();
            let key = p.string()?;
            p.ws();
            p.expect(b':')?;
            p.ws();
            let start = p.pos;
            let value = p.value()?;
            let text = &bytes[start..p.pos];
            match members.iter_mut().find(|(k, ..)| *k == key) {
                Some(m) => {
                    m.1 = value;
                    m.2 = text;
                }
                None => members.push((key, value, text)),
            }
            p.ws();
            match p.next() {
                Some(b',') => continue,
                Some(b'}') => break,
                _ => return Err(p.error("expected `,` or `}` in an object")),
            }
        }
    }
    p.end()?;
    let tree = Json::Object(
        members
            .iter()
            .map(|(k, v, _)| (k.clone(), v.clone()))
            .collect(),
    );
    Ok((tree, Some(members)))
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn new(bytes: &'a [u8]) -> Result<Self, ParseError> {
        // Checked once: every slice taken later at ASCII positions is UTF-8.
        std::str::from_utf8(bytes).map_err(|e| ParseError {
            at: e.valid_up_to(),
            what: "invalid UTF-8".into(),
        })?;
        Ok(Parser {
            s: bytes,
            pos: 0,
            depth: 0,
        })
    }

    fn error(&self, what: impl Into<String>) -> ParseError {
        ParseError {
            at: self.pos,
            what: what.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Some(b)
    }

    fn expect(&mut self, b: u8) -> Result<(), ParseError> {
        if self.next() == Some(b) {
            Ok(())
        } else {
            self.pos = self.pos.saturating_sub(1);
            Err(self.error(format!("expected `{}`", b as char)))
        }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn end(&mut self) -> Result<(), ParseError> {
        self.ws();
        if self.pos == self.s.len() {
            Ok(())
        } else {
            Err(self.error("trailing characters after the JSON value"))
        }
    }

    fn text(&self, from: usize) -> &'a str {
        // SAFETY-free: validated as UTF-8 in `new`, cut at ASCII bytes.
        std::str::from_utf8(&self.s[from..self.pos]).expect("UTF-8 checked")
    }

    fn value(&mut self) -> Result<Json, ParseError> {
        match self.peek() {
            None => Err(self.error("unexpected end of input")),
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number().map(Json::Number),
            Some(_) => Err(self.error("expected a JSON value")),
        }
    }

    fn nested(&mut self, f: fn(&mut Self) -> Result<Json, ParseError>) -> Result<Json, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(format!("nested more than {MAX_DEPTH} deep")));
        }
        let v = f(self);
        self.depth -= 1;
        v
    }

    fn literal(&mut self, word: &str, v: Json) -> Result<Json, ParseError> {
        if self.s[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(self.error("expected a JSON value"))
        }
    }

    fn object(&mut self) -> Result<Json, ParseError> {
        self.pos += 1;
        let mut members: Vec<(String, Json)> = Vec::new();
        let mut index: Option<HashMap<String, usize>> = None;
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.ws();
            self.expect(b':')?;
            self.ws();
            let value = self.value()?;
            let seen = match &index {
                Some(index) => index.get(&key).copied(),
                None => members.iter().position(|(k, _)| *k == key),
            };
            match seen {
                Some(at) => members[at].1 = value,
                None => {
                    if let Some(index) = &mut index {
                        index.insert(key.clone(), members.len());
                    }
                    members.push((key, value));
                    if index.is_none() && members.len() > INDEX_AFTER {
                        index = Some(
                            members
                                .iter()
                                .enumerate()
                                .map(|(i, (k, _))| (k.clone(), i))
                                .collect(),
                        );
                    }
                }
            }
            self.ws();
            match self.next() {
                Some(b',') => {}
                Some(b'}') => return Ok(Json::Object(members)),
                _ => return Err(self.error("expected `,` or `}` in an object")),
            }
        }
    }

    fn array(&mut self) -> Result<Json, ParseError> {
        self.pos += 1;
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Json::Array(items));
        }
        loop {
            self.ws();
            items.push(self.value()?);
            self.ws();
            match self.next() {
                Some(b',') => {}
                Some(b']') => return Ok(Json::Array(items)),
                _ => return Err(self.error("expected `,` or `]` in an array")),
            }
        }
    }

    fn string(&mut self) -> Result<String, ParseError> {
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a string"));
        }
        self.pos += 1;
        let mut out = String::new();
        let mut run = self.pos;
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    out.push_str(self.text(run));
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    out.push_str(self.text(run));
                    self.pos += 1;
                    self.escape(&mut out)?;
                    run = self.pos;
                }
                Some(0..0x20) => return Err(self.error("a control character in a string")),
                Some(_) => self.pos += 1,
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), ParseError> {
        let c = match self.next() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let hi = self.hex4()?;
                let code = match hi {
                    0xD800..=0xDBFF => {
                        if !(self.next() == Some(b'\\') && self.next() == Some(b'u')) {
                            return Err(self.error("a lone surrogate in a string"));
                        }
                        let lo = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&lo) {
                            return Err(self.error("a lone surrogate in a string"));
                        }
                        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                    }
                    0xDC00..=0xDFFF => return Err(self.error("a lone surrogate in a string")),
                    c => c,
                };
                char::from_u32(code).ok_or_else(|| self.error("an invalid \\u escape"))?
            }
            _ => return Err(self.error("an invalid escape in a string")),
        };
        out.push(c);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let digits = self
            .s
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.error("a short \\u escape"))?;
        let text = std::str::from_utf8(digits).map_err(|_| self.error("an invalid \\u escape"))?;
        let code =
            u32::from_str_radix(text, 16).map_err(|_| self.error("an invalid \\u escape"))?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(self.error("an invalid \\u escape"));
        }
        self.pos += 4;
        Ok(code)
    }

    fn number(&mut self) -> Result<String, ParseError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let digits = |p: &mut Self| {
            let from = p.pos;
            while let Some(b'0'..=b'9') = p.peek() {
                p.pos += 1;
            }
            p.pos - from
        };
        if digits(self) == 0 {
            return Err(self.error("a number without digits"));
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if digits(self) == 0 {
                return Err(self.error("no digits after a decimal point"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Err(self.error("no digits in an exponent"));
            }
        }
        Ok(self.text(start).to_string())
    }
}

/// Writes `s` as a JSON string, escaped as Jackson's UTF-8 writer escapes:
/// `"` and `\`, control characters (`\b \t \n \f \r` short, the others
/// `\u00XX`), and a character past U+FFFF as its UTF-16 surrogates
/// (`\uD83D\uDE00`), hex digits in upper case; everything else as UTF-8.
pub fn write_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let hex4 = |out: &mut Vec<u8>, u: u16| {
        out.extend_from_slice(&[
            b'\\',
            b'u',
            HEX[usize::from(u >> 12)],
            HEX[usize::from((u >> 8) & 0xF)],
            HEX[usize::from((u >> 4) & 0xF)],
            HEX[usize::from(u & 0xF)],
        ]);
    };
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut run = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let short = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            0x08 => b'b',
            0x09 => b't',
            0x0A => b'n',
            0x0C => b'f',
            0x0D => b'r',
            0..0x20 => 0,
            // The first byte of a character past U+FFFF.
            0xF0..=0xF7 => 1,
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&bytes[run..i]);
        match short {
            0 => hex4(out, u16::from(b)),
            1 => {
                let c = s[i..].chars().next().expect("a character starts here");
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    hex4(out, *u);
                }
                i += c.len_utf8();
                run = i;
                continue;
            }
            _ => out.extend_from_slice(&[b'\\', short]),
        }
        i += 1;
        run = i;
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

/// Writes a value compactly, numbers as they were written.
pub fn write(out: &mut Vec<u8>, v: &Json) {
    match v {
        Json::Null => out.extend_from_slice(b"null"),
        Json::Bool(true) => out.extend_from_slice(b"true"),
        Json::Bool(false) => out.extend_from_slice(b"false"),
        Json::Number(n) => out.extend_from_slice(n.as_bytes()),
        Json::String(s) => write_string(out, s),
        Json::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, item);
            }
            out.push(b']');
        }
        Json::Object(members) => {
            out.push(b'{');
            for (i, (k, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, k);
                out.push(b':');
                write(out, item);
            }
            out.push(b'}');
        }
    }
}

/// Writes a double as Java's `Double.toString` does (Jackson writes
/// doubles with it): the shortest decimal that reads back to the same
/// double (two digits when one would do, the closest, ties to even),
/// plain from 10^-3 to 10^7 (`100.0`, `0.001`), else `1.0E7`, `1.5E-5`.
///
/// That is Java 19 and later. Java 17's `Double.toString` (JDK-4511638)
/// sometimes writes more digits for the same double (`8.41E21` as
/// `8.409999999999999E21`); both read back to the same value.
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    let mut buf = ryu::Buffer::new();
    let shortest = if v == 0.0 { "" } else { buf.format_finite(v) };
    java_float(out, v == 0.0, v.is_sign_negative(), shortest, || {
        format!("{v:.1e}")
    });
}

/// Writes a float as Java's `Float.toString` does (see [`write_f64`]).
pub fn write_f32(out: &mut Vec<u8>, v: f32) {
    let mut buf = ryu::Buffer::new();
    let shortest = if v == 0.0 { "" } else { buf.format_finite(v) };
    java_float(out, v == 0.0, v.is_sign_negative(), shortest, || {
        format!("{v:.1e}")
    });
}

/// Java's layout of a float or double: `shortest` is `ryu`'s text of it,
/// `two_digits` its text with one decimal, used when the shortest has a
/// single digit (Java writes `1.0E10`, never `1E10`).
fn java_float(
    out: &mut Vec<u8>,
    zero: bool,
    negative: bool,
    shortest: &str,
    two_digits: impl FnOnce() -> String,
) {
    if zero {
        out.extend_from_slice(if negative { b"-0.0" } else { b"0.0" });
        return;
    }
    let (negative, mut digits, mut exp) = decimal_digits(shortest);
    if digits.len() == 1 {
        (_, digits, exp) = decimal_digits(&two_digits());
    }
    java_layout(out, negative, &digits, exp);
}

/// A finite number's text (`ryu`'s or Rust's `{:e}`) as its sign, its
/// significant digits and the power of ten of the first one.
fn decimal_digits(text: &str) -> (bool, String, i32) {
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exp) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (text, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{whole}{fraction}");
    let leading = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_start_matches('0').trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    (
        negative,
        digits.to_string(),
        exp + whole.len() as i32 - 1 - leading as i32,
    )
}

/// Java's layout of `d1.d2d3... x 10^exp`.
fn java_layout(out: &mut Vec<u8>, negative: bool, digits: &str, exp: i32) {
    let mut s = String::with_capacity(digits.len() + 8);
    if negative {
        s.push('-');
    }
    if (-3..7).contains(&exp) {
        if exp >= 0 {
            let whole = exp as usize + 1;
            if digits.len() <= whole {
                s.push_str(digits);
                s.extend(std::iter::repeat_n('0', whole - digits.len()));
                s.push_str(".0");
            } else {
                s.push_str(&digits[..whole]);
                s.push('.');
                s.push_str(&digits[whole..]);
            }
        } else {
            s.push_str("0.");
            s.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            s.push_str(digits);
        }
    } else {
        s.push_str(&digits[..1]);
        s.push('.');
        s.push_str(if digits.len() > 1 { &digits[1..] } else { "0" });
        let _ = write!(s, "E{exp}");
    }
    out.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(v: &Json) -> String {
        let mut out = Vec::new();
        write(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn numbers_keep_their_text_and_members_their_order() {
        let v = parse(
            br#" {"b": 12345678901234567890.120, "a": [1, -0.5e-3, 007], "b": {"x": null}} "#,
        )
        .unwrap();
        assert_eq!(written(&v), r#"{"b":{"x":null},"a":[1,-0.5e-3,007]}"#);
        let v = parse(br#"{"n": 12345678901234567890.120}"#).unwrap();
        assert_eq!(
            v.get("n"),
            Some(&Json::Number("12345678901234567890.120".into()))
        );
    }

    #[test]
    fn what_json_refuses_is_refused() {
        for bad in [
            &b""[..],
            b"{",
            b"[1,]",
            b"{\"a\":1,}",
            b"01a",
            b"1.",
            b".5",
            b"+1",
            b"1e",
            b"NaN",
            b"\"\\x\"",
            b"\"\\ud800\"",
            b"\"\x01\"",
            b"\"\xff\"",
            b"{} {}",
            b"tru",
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(parse(deep.as_bytes()).unwrap_err().what.contains("deep"));
    }

    #[test]
    fn strings_round_trip_with_jacksons_escapes() {
        let v = parse(br#""a\"b\\c\/d\u0001\u001f\b\t\n\f\r\u00e9\ud83d\ude00 \u2028""#).unwrap();
        assert_eq!(
            v,
            Json::String("a\"b\\c/d\u{1}\u{1f}\u{8}\t\n\u{c}\r\u{e9}\u{1f600} \u{2028}".into())
        );
        assert_eq!(
            written(&v),
            "\"a\\\"b\\\\c/d\\u0001\\u001F\\b\\t\\n\\f\\r\u{e9}\\uD83D\\uDE00 \u{2028}\""
        );
    }

    #[test]
    fn doubles_and_floats_are_written_as_java_writes_them() {
        let d = |v: f64| {
            let mut out = Vec::new();
            write_f64(&mut out, v);
            String::from_utf8(out).unwrap()
        };
        let f = |v: f32| {
            let mut out = Vec::new();
            write_f32(&mut out, v);
            String::from_utf8(out).unwrap()
        };
        for (v, java) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (19.99, "19.99"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1234567.0, "1234567.0"),
            (1.0e7, "1.0E7"),
            (12345678.9, "1.23456789E7"),
            (-1.5e-5, "-1.5E-5"),
            (f64::MAX, "1.7976931348623157E308"),
            (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
            (5e-324, "4.9E-324"),
            (876_278_563_398_630.2, "8.762785633986302E14"),
        ] {
            assert_eq!(d(v), java, "{v:e}");
        }
        for (v, java) in [
            (1.1f32, "1.1"),
            (301_539.62_f32, "301539.62"),
            (1.0e10f32, "1.0E10"),
            (f32::MAX, "3.4028235E38"),
            (1.4e-45f32, "1.4E-45"),
        ] {
            assert_eq!(f(v), java, "{v:e}");
        }
    }

    #[test]
    fn a_top_level_object_gives_each_members_text() {
        let (tree, members) = parse_top(br#"{"schema": {"type": "int32"} , "payload":1}"#).unwrap();
        let members = members.unwrap();
        assert_eq!(members[0].0, "schema");
        assert_eq!(members[0].2, br#"{"type": "int32"}"#);
        assert_eq!(members[1].2, b"1");
        assert_eq!(tree.get("payload"), Some(&Json::Number("1".into())));
        let (tree, members) = parse_top(b" [1] ").unwrap();
        assert!(members.is_none());
        assert_eq!(tree, Json::Array(vec![Json::Number("1".into())]));
        assert!(parse_top(b"{\"a\":1} x").is_err());
        assert!(parse_top(b"{\"a\" 1}").is_err());
    }
}
