//! A payload checked against its schema and written in one of two forms:
//!
//! - `Envelope`: as `JsonConverter` writes it (`convertToJson`): a
//!   `Decimal` as base64 of its unscaled value (or a number with
//!   `decimal.format=NUMERIC`), a `Date` in days, doubles as Java writes
//!   them;
//! - `Sink`: what transforms and sinks receive (see
//!   `sluice_sdk::Record::value_schema`): the same, but a `Decimal` as an
//!   exact JSON number with `scale` digits after the point and a `Date` in
//!   milliseconds at midnight UTC.
//!
//! Either form is read and either written, so one walk reads an envelope
//! for a sink, writes a sink's form into an envelope, or checks that a
//! value still fits a schema. Reading is strict where `JsonConverter` is
//! lax (it reads a string as 0 for an `int32` and an integer as `false` for
//! a `boolean`): a value of the wrong type, an integer out of its type's
//! range, a missing required field or a null where the schema is not
//! optional is a `Mismatch` naming where it is. As in Kafka Connect, a
//! struct's member that the schema does not have is ignored when an
//! envelope is read; anywhere else it is a mismatch (the schema must say
//! it).

use base64::Engine as _;
use sluice_sdk::schema::{Logical, MILLIS_PER_DAY, Schema, SchemaKind};

use super::decimal::{Decimal, MAX_DIGITS, Unscaled};
use super::json::{self, Json, Members};
use crate::config::DecimalFormat;

/// Which form a payload is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Envelope,
    Sink,
}

/// `JsonConverter`'s settings that change payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub decimal_format: DecimalFormat,
    pub replace_null_with_default: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            decimal_format: DecimalFormat::Base64,
            replace_null_with_default: true,
        }
    }
}

/// Where in a payload: `payload.items[2].price`.
pub struct Path<'s> {
    root: String,
    segments: Vec<Segment<'s>>,
}

enum Segment<'s> {
    Field(&'s str),
    Index(usize),
    Key(String),
}

impl<'s> Path<'s> {
    pub fn new(root: impl Into<String>) -> Self {
        Path {
            root: root.into(),
            segments: Vec::new(),
        }
    }

    fn render(&self) -> String {
        let mut s = self.root.clone();
        for seg in &self.segments {
            match seg {
                Segment::Field(f) => {
                    s.push('.');
                    s.push_str(f);
                }
                Segment::Index(i) => s.push_str(&format!("[{i}]")),
                Segment::Key(k) => s.push_str(&format!("[{k:?}]")),
            }
        }
        s
    }

    fn mismatch(&self, what: impl Into<String>) -> Mismatch {
        Mismatch {
            at: self.render(),
            what: what.into(),
        }
    }
}

/// A payload that does not fit its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub at: String,
    pub what: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.what)
    }
}

/// The base64 Jackson writes (standard alphabet, padded); reading also
/// takes it unpadded.
pub(crate) const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// Reads `v` (in `from` form; `None` for a struct's missing field) as a
/// value of `schema` and writes it in `to` form.
pub fn convert<'s>(
    schema: &'s Schema,
    v: Option<&Json>,
    from: Form,
    to: Form,
    settings: Settings,
    out: &mut Vec<u8>,
    path: &mut Path<'s>,
) -> Result<(), Mismatch> {
    let v = match v {
        None | Some(Json::Null) => {
            if let (true, Some(default)) = (settings.replace_null_with_default, &schema.default) {
                // Kept in envelope form: written as it is, or read again.
                match to {
                    Form::Envelope => out.extend_from_slice(default.as_bytes()),
                    Form::Sink => {
                        let d = json::parse(default.as_bytes()).map_err(|e| {
                            path.mismatch(format!("the schema's default is not JSON: {e}"))
                        })?;
                        convert(schema, Some(&d), Form::Envelope, to, settings, out, path)?;
                    }
                }
                return Ok(());
            }
            if schema.optional {
                out.extend_from_slice(b"null");
                return Ok(());
            }
            return Err(path.mismatch(format!(
                "{} for a required `{}`",
                if v.is_none() { "missing" } else { "null" },
                describe(schema)
            )));
        }
        Some(v) => v,
    };
    if let Some(logical) = schema.logical() {
        return logical_value(logical, schema, v, from, to, settings, out, path);
    }
    let wrong = |path: &Path<'s>| {
        path.mismatch(format!(
            "{} where the schema has `{}`",
            v.kind(),
            describe(schema)
        ))
    };
    match (&schema.kind, v) {
        (SchemaKind::Int8, Json::Number(n)) => {
            integer(n, i64::from(i8::MIN), i64::from(i8::MAX), out, path)
        }
        (SchemaKind::Int16, Json::Number(n)) => {
            integer(n, i64::from(i16::MIN), i64::from(i16::MAX), out, path)
        }
        (SchemaKind::Int32, Json::Number(n)) => {
            integer(n, i64::from(i32::MIN), i64::from(i32::MAX), out, path)
        }
        (SchemaKind::Int64, Json::Number(n)) => integer(n, i64::MIN, i64::MAX, out, path),
        (SchemaKind::Float32, Json::Number(n)) => match n.parse::<f32>() {
            Ok(f) if f.is_finite() => {
                // Kafka Connect reads numbers through BigDecimal, which has
                // no negative zero.
                let f = if from == Form::Envelope && f == 0.0 {
                    0.0
                } else {
                    f
                };
                json::write_f32(out, f);
                Ok(())
            }
            _ => Err(path.mismatch(format!("{n} is out of a `float`'s range"))),
        },
        (SchemaKind::Float64, Json::Number(n)) => match n.parse::<f64>() {
            Ok(f) if f.is_finite() => {
                let f = if from == Form::Envelope && f == 0.0 {
                    0.0
                } else {
                    f
                };
                json::write_f64(out, f);
                Ok(())
            }
            _ => Err(path.mismatch(format!("{n} is out of a `double`'s range"))),
        },
        (SchemaKind::Boolean, Json::Bool(b)) => {
            out.extend_from_slice(if *b { b"true" } else { b"false" });
            Ok(())
        }
        (SchemaKind::String, Json::String(s)) => {
            json::write_string(out, s);
            Ok(())
        }
        (SchemaKind::Bytes, Json::String(s)) => {
            let bytes = BASE64
                .decode(s)
                .map_err(|e| path.mismatch(format!("`bytes` that are not base64: {e}")))?;
            json::write_string(out, &BASE64.encode(bytes));
            Ok(())
        }
        (SchemaKind::Array(items), Json::Array(elements)) => {
            out.push(b'[');
            for (i, e) in elements.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                path.segments.push(Segment::Index(i));
                convert(items, Some(e), from, to, settings, out, path)?;
                path.segments.pop();
            }
            out.push(b']');
            Ok(())
        }
        (SchemaKind::Map(keys, values), Json::Object(members))
            if matches!(keys.kind, SchemaKind::String) =>
        {
            out.push(b'{');
            for (i, (k, e)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json::write_string(out, k);
                out.push(b':');
                path.segments.push(Segment::Key(k.clone()));
                convert(values, Some(e), from, to, settings, out, path)?;
                path.segments.pop();
            }
            out.push(b'}');
            Ok(())
        }
        (SchemaKind::Map(keys, values), Json::Array(entries))
            if !matches!(keys.kind, SchemaKind::String) =>
        {
            // Maps whose keys are not strings: [[key, value], ...].
            out.push(b'[');
            for (i, entry) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                path.segments.push(Segment::Index(i));
                let Json::Array(pair) = entry else {
                    return Err(path.mismatch(format!(
                        "a map entry is {}, not a [key, value] array",
                        entry.kind()
                    )));
                };
                let [key, value] = pair.as_slice() else {
                    return Err(path.mismatch(format!(
                        "a map entry has {} elements, not a [key, value] pair",
                        pair.len()
                    )));
                };
                out.push(b'[');
                convert(keys, Some(key), from, to, settings, out, path)?;
                out.push(b',');
                convert(values, Some(value), from, to, settings, out, path)?;
                out.push(b']');
                path.segments.pop();
            }
            out.push(b']');
            Ok(())
        }
        (SchemaKind::Map(keys, _), other) => Err(path.mismatch(format!(
            "{} where the schema has a map, written as {}",
            other.kind(),
            if matches!(keys.kind, SchemaKind::String) {
                "an object"
            } else {
                "an array of [key, value] pairs (its keys are not strings)"
            }
        ))),
        (SchemaKind::Struct(fields), Json::Object(members)) => {
            let by_name = Members::new(members);
            if from == Form::Sink
                && let Some((extra, _)) = members
                    .iter()
                    .find(|(k, _)| !fields.iter().any(|f| &f.name == k))
            {
                return Err(path.mismatch(format!("`{extra}` is not a field of the schema")));
            }
            out.push(b'{');
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json::write_string(out, &f.name);
                out.push(b':');
                path.segments.push(Segment::Field(&f.name));
                convert(
                    &f.schema,
                    by_name.get(&f.name),
                    from,
                    to,
                    settings,
                    out,
                    path,
                )?;
                path.segments.pop();
            }
            out.push(b'}');
            Ok(())
        }
        _ => Err(wrong(path)),
    }
}

/// A schema as messages name it: its type, or its logical type's name.
pub fn describe(schema: &Schema) -> String {
    match (schema.logical(), &schema.name) {
        (Some(_), Some(name)) => name.rsplit('.').next().unwrap_or(name).to_string(),
        _ => schema.kind.type_name().to_string(),
    }
}

fn integer(
    text: &str,
    min: i64,
    max: i64,
    out: &mut Vec<u8>,
    path: &Path<'_>,
) -> Result<(), Mismatch> {
    let v = Decimal::parse(text)
        .ok_or_else(|| path.mismatch(format!("`{text}` is not a number")))?
        .to_i64()
        .map_err(|why| path.mismatch(format!("{text} {why}")))?;
    if v < min || v > max {
        return Err(path.mismatch(format!("{v} is out of range ({min} to {max})")));
    }
    out.extend_from_slice(v.to_string().as_bytes());
    Ok(())
}

/// An integer written as one (no point, no exponent), as Jackson's
/// `isInt`/`isIntegralNumber` ask of a `Date`, `Time` or `Timestamp` in an
/// envelope.
fn literal_integer(text: &str) -> bool {
    !text.contains(['.', 'e', 'E'])
}

#[allow(clippy::too_many_arguments)]
fn logical_value(
    logical: Logical,
    schema: &Schema,
    v: &Json,
    from: Form,
    to: Form,
    settings: Settings,
    out: &mut Vec<u8>,
    path: &Path<'_>,
) -> Result<(), Mismatch> {
    let name = describe(schema);
    match logical {
        Logical::Decimal { scale } => {
            let unscaled = match (v, from) {
                (Json::Number(n), _) => Decimal::parse(n)
                    .ok_or_else(|| path.mismatch(format!("`{n}` is not a number")))?
                    .unscaled(scale)
                    .map_err(|why| {
                        path.mismatch(format!("{n} {why} (a `Decimal` of scale {scale})"))
                    })?,
                (Json::String(s), Form::Envelope) => {
                    let bytes = BASE64.decode(s).map_err(|e| {
                        path.mismatch(format!("a `Decimal` that is not base64: {e}"))
                    })?;
                    // n significant bytes hold more than 2.4(n-1) digits:
                    // refuse what is surely too long before the quadratic
                    // conversion (redundant sign bytes, which Java takes, are
                    // not counted).
                    let sign = if bytes.first().is_some_and(|b| b & 0x80 != 0) {
                        0xff
                    } else {
                        0
                    };
                    let significant = bytes.iter().skip_while(|&&b| b == sign).count();
                    if significant > MAX_DIGITS / 2 {
                        return Err(path.mismatch(format!(
                            "a `Decimal` of {} bytes has more than {MAX_DIGITS} digits",
                            bytes.len()
                        )));
                    }
                    let unscaled = Unscaled::from_twos_complement(&bytes)
                        .ok_or_else(|| path.mismatch("a `Decimal` of no bytes"))?;
                    if unscaled.digits.len() > MAX_DIGITS {
                        return Err(path.mismatch(format!(
                            "a `Decimal` of {} bytes has more than {MAX_DIGITS} digits",
                            bytes.len()
                        )));
                    }
                    unscaled
                }
                (other, _) => {
                    return Err(path.mismatch(format!(
                        "{} where the schema has a `Decimal` ({})",
                        other.kind(),
                        if from == Form::Envelope {
                            "base64 or a number"
                        } else {
                            "a number"
                        }
                    )));
                }
            };
            match (to, settings.decimal_format) {
                (Form::Sink, _) => out.extend_from_slice(unscaled.plain(scale).as_bytes()),
                (Form::Envelope, DecimalFormat::Base64) => {
                    json::write_string(out, &BASE64.encode(unscaled.to_twos_complement()))
                }
                (Form::Envelope, DecimalFormat::Numeric) => {
                    out.extend_from_slice(unscaled.java_big_decimal(scale).as_bytes())
                }
            }
            Ok(())
        }
        Logical::Date | Logical::Time | Logical::Timestamp => {
            let Json::Number(n) = v else {
                return Err(path.mismatch(format!(
                    "{} where the schema has a `{name}` (an integer)",
                    v.kind()
                )));
            };
            if from == Form::Envelope && !literal_integer(n) {
                return Err(path.mismatch(format!("a `{name}` must be an integer, not {n}")));
            }
            let i = Decimal::parse(n)
                .ok_or_else(|| path.mismatch(format!("`{n}` is not a number")))?
                .to_i64()
                .map_err(|why| path.mismatch(format!("a `{name}` {n} {why}")))?;
            let written = match (logical, from, to) {
                (Logical::Date, Form::Envelope, _) => {
                    let days = i32::try_from(i).map_err(|_| {
                        path.mismatch(format!("a `Date` of {i} days is out of range"))
                    })?;
                    if to == Form::Sink {
                        i64::from(days) * MILLIS_PER_DAY
                    } else {
                        i64::from(days)
                    }
                }
                (Logical::Date, Form::Sink, _) => {
                    if i % MILLIS_PER_DAY != 0 {
                        return Err(path.mismatch(format!(
                            "a `Date` of {i} ms is not midnight UTC (a multiple of {MILLIS_PER_DAY})"
                        )));
                    }
                    let days = i32::try_from(i / MILLIS_PER_DAY).map_err(|_| {
                        path.mismatch(format!("a `Date` of {i} ms is out of range"))
                    })?;
                    if to == Form::Sink { i } else { i64::from(days) }
                }
                (Logical::Time, ..) => {
                    if !(0..=MILLIS_PER_DAY).contains(&i) {
                        return Err(path.mismatch(format!(
                            "a `Time` of {i} ms is not within a day (0 to {MILLIS_PER_DAY})"
                        )));
                    }
                    i
                }
                _ => i,
            };
            out.extend_from_slice(written.to_string().as_bytes());
            Ok(())
        }
    }
}

/// A payload with no schema (`"schema": null`), as Kafka Connect writes
/// what it read without one: integers as they are, other numbers as
/// doubles; members in their order.
pub fn write_schemaless(out: &mut Vec<u8>, v: &Json) {
    match v {
        Json::Number(n) => match (literal_integer(n), n.parse::<i64>()) {
            (true, Ok(i)) => out.extend_from_slice(i.to_string().as_bytes()),
            _ => match n.parse::<f64>() {
                Ok(f) if f.is_finite() => json::write_f64(out, f),
                _ => out.extend_from_slice(n.as_bytes()),
            },
        },
        Json::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_schemaless(out, item);
            }
            out.push(b']');
        }
        Json::Object(members) => {
            out.push(b'{');
            for (i, (k, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json::write_string(out, k);
                out.push(b':');
                write_schemaless(out, item);
            }
            out.push(b'}');
        }
        other => json::write(out, other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(schema: &Schema, payload: &str, from: Form, to: Form) -> Result<String, String> {
        let v = json::parse(payload.as_bytes()).unwrap();
        let mut out = Vec::new();
        convert(
            schema,
            Some(&v),
            from,
            to,
            Settings::default(),
            &mut out,
            &mut Path::new("payload"),
        )
        .map_err(|e| e.to_string())?;
        Ok(String::from_utf8(out).unwrap())
    }

    fn order() -> Schema {
        Schema::structure([
            ("id", Schema::int32()),
            ("price", Schema::decimal(2)),
            ("day", Schema::date().optional()),
            ("at", Schema::timestamp()),
            ("t", Schema::time()),
            ("ratio", Schema::float32()),
            ("note", Schema::string().optional()),
            ("blob", Schema::bytes().optional()),
        ])
    }

    #[test]
    fn logical_types_have_their_sink_form() {
        let envelope = r#"{"id":7,"price":"MDk=","day":19723,"at":1704067200123,"t":3600000,"ratio":1.1,"blob":"AAE=","extra":1}"#;
        let sink = run(&order(), envelope, Form::Envelope, Form::Sink).unwrap();
        assert_eq!(
            sink,
            r#"{"id":7,"price":123.45,"day":1704067200000,"at":1704067200123,"t":3600000,"ratio":1.1,"note":null,"blob":"AAE="}"#
        );
        let back = run(&order(), &sink, Form::Sink, Form::Envelope).unwrap();
        assert_eq!(
            back,
            r#"{"id":7,"price":"MDk=","day":19723,"at":1704067200123,"t":3600000,"ratio":1.1,"note":null,"blob":"AAE="}"#
        );
        // A decimal with fewer digits is padded, never rounded.
        let s = Schema::decimal(2);
        assert_eq!(run(&s, "123.4", Form::Sink, Form::Sink).unwrap(), "123.40");
        assert!(run(&s, "123.456", Form::Sink, Form::Envelope).is_err());
        assert_eq!(
            run(&s, "12345678901234567890.12", Form::Sink, Form::Sink).unwrap(),
            "12345678901234567890.12"
        );
    }

    #[test]
    fn mismatches_name_the_field() {
        for (payload, says) in [
            (
                r#"{"id":"7"}"#,
                "payload.id: a string where the schema has `int32`",
            ),
            (
                r#"{"id":3000000000}"#,
                "payload.id: 3000000000 is out of range",
            ),
            (r#"{"id":1.5}"#, "payload.id: 1.5 is not an integer"),
            (
                r#"{"id":1}"#,
                "payload.price: missing for a required `Decimal`",
            ),
            (
                r#"{"id":1,"price":null}"#,
                "payload.price: null for a required `Decimal`",
            ),
            (
                r#"{"id":1,"price":true}"#,
                "payload.price: a boolean where the schema has a `Decimal`",
            ),
            (
                r#"{"id":1,"price":"!!"}"#,
                "payload.price: a `Decimal` that is not base64",
            ),
            (
                r#"{"id":1,"price":1,"day":1.5,"at":1,"t":1,"ratio":1}"#,
                "payload.day: a `Date` must be an integer",
            ),
            (
                r#"{"id":1,"price":1,"at":1,"t":-1,"ratio":1}"#,
                "payload.t: a `Time` of -1 ms is not within a day",
            ),
            (
                r#"{"id":1,"price":1,"at":1,"t":1,"ratio":1e39}"#,
                "payload.ratio: 1e39 is out of a `float`'s range",
            ),
            (
                r#"{"id":1,"price":1,"at":1,"t":1,"ratio":1,"blob":"*"}"#,
                "payload.blob: `bytes` that are not base64",
            ),
            ("[]", "payload: an array where the schema has `struct`"),
        ] {
            let e = run(&order(), payload, Form::Envelope, Form::Sink).unwrap_err();
            assert!(e.starts_with(says), "{payload}: {e}");
        }
        // A sink's form says every field: one the schema lacks is a mismatch.
        let e = run(
            &Schema::structure([("a", Schema::int8())]),
            r#"{"a":1,"b":2}"#,
            Form::Sink,
            Form::Envelope,
        )
        .unwrap_err();
        assert_eq!(e, "payload: `b` is not a field of the schema");
        // A date in a sink's form is midnight.
        let e = run(&Schema::date(), "86400001", Form::Sink, Form::Envelope).unwrap_err();
        assert!(e.contains("not midnight UTC"), "{e}");
    }

    #[test]
    fn maps_arrays_and_defaults() {
        let m = Schema::map(Schema::string(), Schema::int64());
        assert_eq!(
            run(&m, r#"{"b":1,"a":2}"#, Form::Envelope, Form::Sink).unwrap(),
            r#"{"b":1,"a":2}"#
        );
        let m = Schema::map(Schema::int32(), Schema::string());
        assert_eq!(
            run(&m, r#"[[1,"x"],[2,"y"]]"#, Form::Envelope, Form::Sink).unwrap(),
            r#"[[1,"x"],[2,"y"]]"#
        );
        assert!(run(&m, r#"{"1":"x"}"#, Form::Envelope, Form::Sink).is_err());
        assert!(run(&m, r#"[[1]]"#, Form::Envelope, Form::Sink).is_err());
        let mut d = Schema::decimal(1);
        d.default = Some("\"AQ==\"".into());
        let s = Schema::structure([("a", d), ("b", Schema::array(Schema::boolean()))]);
        assert_eq!(
            run(&s, r#"{"b":[true,false]}"#, Form::Envelope, Form::Sink).unwrap(),
            r#"{"a":0.1,"b":[true,false]}"#
        );
        assert_eq!(
            run(&s, r#"{"a":null,"b":[]}"#, Form::Sink, Form::Envelope).unwrap(),
            r#"{"a":"AQ==","b":[]}"#
        );
    }

    #[test]
    fn schemaless_payloads_are_written_as_kafka_connect_writes_them() {
        let mut out = Vec::new();
        write_schemaless(
            &mut out,
            &json::parse(br#"{"a":1,"b":1.50,"c":[1e2,"x",null,true],"d":007}"#).unwrap(),
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":1,"b":1.5,"c":[100.0,"x",null,true],"d":7}"#
        );
    }
}
