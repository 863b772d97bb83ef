//! PostgreSQL column types as Debezium's PostgreSQL connector maps them by
//! default (`decimal.handling.mode=precise`, `time.precision.mode=adaptive`,
//! `binary.handling.mode=bytes`, `interval.handling.mode=numeric`), and
//! their values read from PostgreSQL's text output, which is what pgoutput
//! sends and what the snapshot selects (`col::text`), so both paths share
//! one decoder.

use base64::Engine;
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use sluice_sdk::Schema;

use crate::json::Json;

/// Debezium's `decimal.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecimalMode {
    /// Kafka Connect's `Decimal` (or Debezium's `VariableScaleDecimal` for a
    /// `numeric` without a scale).
    #[default]
    Precise,
    Double,
    String,
}

/// The form values are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The record carries its schema (`schemas.enable`, a registry
    /// converter): the runtime's payload form, a `Decimal` as an exact
    /// number.
    Payload,
    /// No schema: what Kafka Connect's `JsonConverter` writes without one,
    /// a `Decimal` as the base64 of its unscaled value.
    Schemaless,
}

pub const MICRO_TIMESTAMP: &str = "io.debezium.time.MicroTimestamp";
pub const TIMESTAMP: &str = "io.debezium.time.Timestamp";
pub const ZONED_TIMESTAMP: &str = "io.debezium.time.ZonedTimestamp";
pub const DATE: &str = "io.debezium.time.Date";
pub const MICRO_TIME: &str = "io.debezium.time.MicroTime";
pub const TIME: &str = "io.debezium.time.Time";
pub const ZONED_TIME: &str = "io.debezium.time.ZonedTime";
pub const MICRO_DURATION: &str = "io.debezium.time.MicroDuration";
pub const VARIABLE_SCALE_DECIMAL: &str = "io.debezium.data.VariableScaleDecimal";
pub const JSON: &str = "io.debezium.data.Json";
pub const UUID: &str = "io.debezium.data.Uuid";
pub const XML: &str = "io.debezium.data.Xml";

/// A column's type, from its type OID and modifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PgType {
    Bool,
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    /// `numeric(precision, scale)`; both `None` when unconstrained.
    Numeric {
        precision: Option<i32>,
        scale: Option<i32>,
    },
    Money,
    Text,
    Uuid,
    Json,
    Xml,
    Bytea,
    Date,
    /// `time(p)`.
    Time(i32),
    TimeTz,
    /// `timestamp(p)`.
    Timestamp(i32),
    /// With its fractional-second precision, the digits Debezium writes.
    TimestampTz(i32),
    Interval,
    Array(Box<PgType>),
}

impl PgType {
    /// The type of a column with this type OID and `atttypmod`. Types the
    /// connector does not know (enums, domains, ranges, geometry, ...) are
    /// read as their text.
    pub fn from_oid(oid: u32, typmod: i32) -> PgType {
        let precision = if typmod >= 0 { typmod.min(6) } else { 6 };
        match oid {
            16 => PgType::Bool,
            21 => PgType::Int2,
            23 => PgType::Int4,
            20 | 26 => PgType::Int8,
            700 => PgType::Float4,
            701 => PgType::Float8,
            1700 => {
                if typmod < 4 {
                    PgType::Numeric {
                        precision: None,
                        scale: None,
                    }
                } else {
                    let t = typmod - 4;
                    // The scale is 11 bits, signed since PostgreSQL 15.
                    let raw_scale = t & 0x7ff;
                    let scale = if raw_scale > 1023 {
                        raw_scale - 2048
                    } else {
                        raw_scale
                    };
                    PgType::Numeric {
                        precision: Some((t >> 16) & 0xffff),
                        scale: Some(scale),
                    }
                }
            }
            790 => PgType::Money,
            2950 => PgType::Uuid,
            114 | 3802 => PgType::Json,
            142 => PgType::Xml,
            17 => PgType::Bytea,
            1082 => PgType::Date,
            1083 => PgType::Time(precision),
            1266 => PgType::TimeTz,
            1114 => PgType::Timestamp(precision),
            1184 => PgType::TimestampTz(precision),
            1186 => PgType::Interval,
            1000 => PgType::Array(Box::new(PgType::Bool)),
            1005 => PgType::Array(Box::new(PgType::Int2)),
            1007 => PgType::Array(Box::new(PgType::Int4)),
            1016 => PgType::Array(Box::new(PgType::Int8)),
            1021 => PgType::Array(Box::new(PgType::Float4)),
            1022 => PgType::Array(Box::new(PgType::Float8)),
            1231 => PgType::Array(Box::new(PgType::Numeric {
                precision: None,
                scale: None,
            })),
            1009 | 1014 | 1015 => PgType::Array(Box::new(PgType::Text)),
            2951 => PgType::Array(Box::new(PgType::Uuid)),
            199 | 3807 => PgType::Array(Box::new(PgType::Json)),
            1182 => PgType::Array(Box::new(PgType::Date)),
            1115 => PgType::Array(Box::new(PgType::Timestamp(6))),
            1185 => PgType::Array(Box::new(PgType::TimestampTz(6))),
            _ => PgType::Text,
        }
    }

    /// The Connect schema of a column of this type (required; the caller
    /// makes it optional when the column is nullable).
    pub fn schema(&self, decimals: DecimalMode) -> Schema {
        match self {
            PgType::Bool => Schema::boolean(),
            PgType::Int2 => Schema::int16(),
            PgType::Int4 => Schema::int32(),
            PgType::Int8 => Schema::int64(),
            PgType::Float4 => Schema::float32(),
            PgType::Float8 => Schema::float64(),
            PgType::Numeric { precision, scale } => match decimals {
                DecimalMode::Double => Schema::float64(),
                DecimalMode::String => Schema::string(),
                DecimalMode::Precise => match (precision, scale) {
                    (Some(p), Some(s)) => {
                        let mut schema = Schema::decimal(*s);
                        schema
                            .parameters
                            .push(("connect.decimal.precision".into(), p.to_string()));
                        schema
                    }
                    _ => variable_scale_decimal(),
                },
            },
            PgType::Money => match decimals {
                DecimalMode::Double => Schema::float64(),
                DecimalMode::String => Schema::string(),
                DecimalMode::Precise => Schema::decimal(2),
            },
            PgType::Text => Schema::string(),
            PgType::Uuid => Schema::string().named(UUID).version(1),
            PgType::Json => Schema::string().named(JSON).version(1),
            PgType::Xml => Schema::string().named(XML).version(1),
            PgType::Bytea => Schema::bytes(),
            PgType::Date => Schema::int32().named(DATE).version(1),
            PgType::Time(p) if *p <= 3 => Schema::int32().named(TIME).version(1),
            PgType::Time(_) => Schema::int64().named(MICRO_TIME).version(1),
            PgType::TimeTz => Schema::string().named(ZONED_TIME).version(1),
            PgType::Timestamp(p) if *p <= 3 => Schema::int64().named(TIMESTAMP).version(1),
            PgType::Timestamp(_) => Schema::int64().named(MICRO_TIMESTAMP).version(1),
            PgType::TimestampTz(_) => Schema::string().named(ZONED_TIMESTAMP).version(1),
            PgType::Interval => Schema::int64().named(MICRO_DURATION).version(1),
            PgType::Array(item) => Schema::array(item.schema(decimals).optional()),
        }
    }

    /// What a required column holds when PostgreSQL did not send it (the
    /// non-key columns of a delete's old row under REPLICA IDENTITY
    /// DEFAULT): as Debezium, the type's zero, since null does not fit.
    pub fn fallback(&self, decimals: DecimalMode, form: Form) -> Json {
        match self {
            PgType::Bool => Json::Bool(false),
            PgType::Int2 | PgType::Int4 | PgType::Int8 => Json::int(0),
            PgType::Float4 | PgType::Float8 => Json::Number("0.0".into()),
            PgType::Numeric { .. } | PgType::Money => {
                let scale = match self {
                    PgType::Numeric { scale, .. } => *scale,
                    _ => Some(2),
                };
                let precision = scale.map(|_| 1);
                numeric("0", precision, scale, decimals, form).unwrap_or(Json::Null)
            }
            PgType::Bytea => Json::str(""),
            PgType::Date | PgType::Time(_) | PgType::Timestamp(_) | PgType::Interval => {
                Json::int(0)
            }
            PgType::TimestampTz(_) => Json::str("1970-01-01T00:00:00Z"),
            PgType::TimeTz => Json::str("00:00:00Z"),
            PgType::Array(_) => Json::Array(Vec::new()),
            PgType::Text | PgType::Uuid | PgType::Json | PgType::Xml => Json::str(""),
        }
    }

    /// A value of this type from PostgreSQL's text output.
    pub fn value(&self, text: &str, decimals: DecimalMode, form: Form) -> Result<Json, String> {
        let bad = |what: &str| format!("`{text}` is not a valid {what}");
        Ok(match self {
            PgType::Bool => match text {
                "t" | "true" => Json::Bool(true),
                "f" | "false" => Json::Bool(false),
                _ => return Err(bad("boolean")),
            },
            PgType::Int2 | PgType::Int4 | PgType::Int8 => {
                let n: i64 = text.parse().map_err(|_| bad("integer"))?;
                Json::int(n)
            }
            PgType::Float4 | PgType::Float8 => {
                let n: f64 = text.parse().map_err(|_| bad("number"))?;
                if !n.is_finite() {
                    return Err(format!(
                        "`{text}` has no JSON form (Kafka Connect's JsonConverter cannot write it either)"
                    ));
                }
                Json::Number(text.to_string())
            }
            PgType::Numeric { precision, scale } => {
                numeric(text, *precision, *scale, decimals, form).map_err(|e| bad(&e))?
            }
            PgType::Money => {
                // The text depends on lc_monetary: keep the sign, the digits
                // and the decimal point.
                let negative = text.starts_with('-') || text.starts_with('(');
                let digits: String = text
                    .chars()
                    .filter(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                let plain = if negative {
                    format!("-{digits}")
                } else {
                    digits
                };
                numeric(&plain, Some(19), Some(2), decimals, form).map_err(|e| bad(&e))?
            }
            PgType::Text | PgType::Uuid | PgType::Json | PgType::Xml => Json::str(text),
            PgType::Bytea => {
                let hex = text
                    .strip_prefix("\\x")
                    .ok_or_else(|| bad("bytea in hex output (bytea_output=hex)"))?;
                let bytes = decode_hex(hex).ok_or_else(|| bad("bytea"))?;
                Json::String(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
            PgType::Date => {
                let date = parse_date(text).ok_or_else(|| bad("date"))?;
                Json::int((date - NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch")).num_days())
            }
            PgType::Time(p) => {
                let time = NaiveTime::parse_from_str(text, "%H:%M:%S%.f")
                    .or_else(|_| {
                        // 24:00:00 is a valid PostgreSQL time.
                        if text.starts_with("24:00:00") {
                            Ok(NaiveTime::MIN)
                        } else {
                            Err(())
                        }
                    })
                    .map_err(|_| bad("time"))?;
                let micros = if text.starts_with("24:00:00") {
                    86_400_000_000
                } else {
                    time.num_seconds_from_midnight() as i64 * 1_000_000
                        + (time.nanosecond() / 1000) as i64
                };
                if *p <= 3 {
                    Json::int(micros / 1000)
                } else {
                    Json::int(micros)
                }
            }
            PgType::TimeTz => {
                Json::String(zoned_time(text).ok_or_else(|| bad("time with time zone"))?)
            }
            PgType::Timestamp(p) => {
                let ts = parse_timestamp(text).ok_or_else(|| bad("timestamp"))?;
                let micros = ts.and_utc().timestamp_micros();
                if *p <= 3 {
                    Json::int(micros.div_euclid(1000))
                } else {
                    Json::int(micros)
                }
            }
            PgType::TimestampTz(p) => {
                let ts = parse_timestamptz(text).ok_or_else(|| bad("timestamp with time zone"))?;
                Json::String(zoned_timestamp(ts, *p))
            }
            PgType::Interval => Json::int(interval_micros(text).ok_or_else(|| bad("interval"))?),
            PgType::Array(item) => {
                let elements = parse_array(text).ok_or_else(|| bad("one-dimensional array"))?;
                let mut out = Vec::with_capacity(elements.len());
                for e in elements {
                    out.push(match e {
                        None => Json::Null,
                        Some(e) => item.value(&e, decimals, form)?,
                    });
                }
                Json::Array(out)
            }
        })
    }
}

fn variable_scale_decimal() -> Schema {
    let mut schema = Schema::structure([("scale", Schema::int32()), ("value", Schema::bytes())])
        .named(VARIABLE_SCALE_DECIMAL)
        .version(1);
    // Debezium documents the struct, and JsonConverter writes the doc.
    schema.doc = Some("Variable scaled decimal".into());
    schema
}

/// A numeric's text as `decimal.handling.mode` wants it.
fn numeric(
    text: &str,
    precision: Option<i32>,
    scale: Option<i32>,
    mode: DecimalMode,
    form: Form,
) -> Result<Json, String> {
    if text == "NaN" || text.ends_with("Infinity") {
        return match mode {
            DecimalMode::String => Ok(Json::str(text)),
            _ => Err("number (NaN and infinities need decimal.handling.mode=string)".into()),
        };
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    if int_part.is_empty() && frac_part.is_empty()
        || !int_part
            .bytes()
            .chain(frac_part.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return Err("number".into());
    }
    match mode {
        DecimalMode::String => return Ok(Json::str(text)),
        DecimalMode::Double => {
            let n: f64 = text.parse().map_err(|_| "number".to_string())?;
            return Ok(Json::Number(format!("{n:?}")));
        }
        DecimalMode::Precise => {}
    }
    let text_scale = frac_part.len() as i32;
    let unscaled_digits = format!("{int_part}{frac_part}");
    match (precision, scale) {
        (Some(_), Some(scale)) => {
            // Constrained: PostgreSQL prints exactly `scale` digits.
            let (digits, text_scale) = rescale(&unscaled_digits, text_scale, scale);
            match form {
                Form::Payload => {
                    let _ = text_scale;
                    Ok(Json::Number(plain_decimal(negative, &digits, scale)))
                }
                Form::Schemaless => Ok(Json::String(
                    base64::engine::general_purpose::STANDARD
                        .encode(twos_complement(negative, &digits)),
                )),
            }
        }
        _ => Ok(Json::Object(vec![
            ("scale".into(), Json::int(text_scale as i64)),
            (
                "value".into(),
                Json::String(
                    base64::engine::general_purpose::STANDARD
                        .encode(twos_complement(negative, &unscaled_digits)),
                ),
            ),
        ])),
    }
}

/// The unscaled digits for `scale` (padding or, for a negative scale,
/// keeping what PostgreSQL printed: it already rounded).
fn rescale(digits: &str, text_scale: i32, scale: i32) -> (String, i32) {
    if scale >= text_scale {
        let mut d = digits.to_string();
        d.extend(std::iter::repeat_n('0', (scale - text_scale) as usize));
        (d, scale)
    } else {
        let cut = (text_scale - scale) as usize;
        (
            digits[..digits.len().saturating_sub(cut)].to_string(),
            scale,
        )
    }
}

/// `-12.50` from sign, unscaled digits and scale.
fn plain_decimal(negative: bool, digits: &str, scale: i32) -> String {
    let digits = digits.trim_start_matches('0');
    let scale = scale.max(0) as usize;
    let padded = if digits.len() <= scale {
        format!("{}{}", "0".repeat(scale + 1 - digits.len()), digits)
    } else {
        digits.to_string()
    };
    let (i, f) = padded.split_at(padded.len() - scale);
    let sign = if negative && padded.bytes().any(|b| b != b'0') {
        "-"
    } else {
        ""
    };
    if scale == 0 {
        format!("{sign}{i}")
    } else {
        format!("{sign}{i}.{f}")
    }
}

/// Java's `BigInteger.toByteArray()` of a decimal digit string.
pub fn twos_complement(negative: bool, digits: &str) -> Vec<u8> {
    // Base-256 magnitude, little-endian, by repeated multiply-add.
    let mut magnitude: Vec<u8> = Vec::new();
    for d in digits.bytes() {
        let mut carry = (d - b'0') as u32;
        for byte in magnitude.iter_mut() {
            let v = *byte as u32 * 10 + carry;
            *byte = v as u8;
            carry = v >> 8;
        }
        while carry > 0 {
            magnitude.push(carry as u8);
            carry >>= 8;
        }
    }
    while magnitude.last() == Some(&0) {
        magnitude.pop();
    }
    if magnitude.is_empty() {
        return vec![0];
    }
    if negative {
        // Two's complement: invert and add one.
        let mut carry = 1u16;
        for byte in magnitude.iter_mut() {
            let v = (!*byte) as u16 + carry;
            *byte = v as u8;
            carry = v >> 8;
        }
        if magnitude.last().is_some_and(|b| b & 0x80 == 0) {
            magnitude.push(0xff);
        }
        // Drop redundant sign bytes.
        while magnitude.len() > 1
            && magnitude[magnitude.len() - 1] == 0xff
            && magnitude[magnitude.len() - 2] & 0x80 != 0
        {
            magnitude.pop();
        }
    } else if magnitude.last().is_some_and(|b| b & 0x80 != 0) {
        magnitude.push(0);
    }
    magnitude.reverse();
    magnitude
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

fn parse_date(text: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()
}

fn parse_timestamp(text: &str) -> Option<NaiveDateTime> {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").ok()
}

/// `2024-01-02 10:11:12.5+02` or `...+05:30` (DateStyle ISO).
fn parse_timestamptz(text: &str) -> Option<DateTime<chrono::Utc>> {
    let (local, offset) = split_offset(text)?;
    let ts = parse_timestamp(local)?;
    Some((ts - chrono::Duration::seconds(offset)).and_utc())
}

/// Splits `...+HH[:MM[:SS]]` into the local part and the offset in seconds.
fn split_offset(text: &str) -> Option<(&str, i64)> {
    let at = text.rfind(['+', '-'])?;
    // The date's own dashes come before the time's colon.
    if !text[..at].contains(':') {
        return None;
    }
    let (local, zone) = text.split_at(at);
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let mut parts = zone[1..].split(':');
    let h: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next().map(|p| p.parse().ok()).unwrap_or(Some(0))?;
    let s: i64 = parts.next().map(|p| p.parse().ok()).unwrap_or(Some(0))?;
    Some((local, sign * (h * 3600 + m * 60 + s)))
}

/// Debezium's `ZonedTimestamp`: ISO-8601 in UTC, with as many fraction
/// digits as the column's precision (`timestamptz` is 6: `…:59.000000Z`).
fn zoned_timestamp(ts: DateTime<chrono::Utc>, precision: i32) -> String {
    let digits = precision.clamp(0, 6) as usize;
    let whole = ts.format("%Y-%m-%dT%H:%M:%S");
    if digits == 0 {
        return format!("{whole}Z");
    }
    let micros = format!("{:06}", ts.nanosecond() / 1000);
    format!("{whole}.{}Z", &micros[..digits])
}

fn fraction(nanos: u32) -> String {
    if nanos == 0 {
        return String::new();
    }
    let micros = format!("{:06}", nanos / 1000);
    format!(".{}", micros.trim_end_matches('0'))
}

/// Debezium's `ZonedTime`: the time in UTC, `HH:MM:SS[.ffffff]Z`.
fn zoned_time(text: &str) -> Option<String> {
    let (local, offset) = split_offset(text)?;
    let time = NaiveTime::parse_from_str(local, "%H:%M:%S%.f").ok()?;
    let utc = time - chrono::Duration::seconds(offset);
    Some(format!(
        "{}{}Z",
        utc.format("%H:%M:%S"),
        fraction(utc.nanosecond())
    ))
}

/// Debezium's `MicroDuration` of an interval in PostgreSQL's default
/// `IntervalStyle=postgres` output (`1 year 2 mons 3 days 04:05:06.5`,
/// `-00:00:01`): a month is 30.4375 days, as Debezium counts.
fn interval_micros(text: &str) -> Option<i64> {
    const MICROS_PER_DAY: f64 = 86_400_000_000.0;
    let mut micros: f64 = 0.0;
    let mut words = text.split_whitespace().peekable();
    while let Some(word) = words.next() {
        if word.contains(':') {
            let (negative, hms) = match word.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, word.strip_prefix('+').unwrap_or(word)),
            };
            let mut parts = hms.split(':');
            let h: f64 = parts.next()?.parse().ok()?;
            let m: f64 = parts.next()?.parse().ok()?;
            let s: f64 = parts.next().unwrap_or("0").parse().ok()?;
            let v = (h * 3600.0 + m * 60.0 + s) * 1_000_000.0;
            micros += if negative { -v } else { v };
            continue;
        }
        let n: f64 = word.parse().ok()?;
        let unit = words.next()?;
        let per = match unit.trim_end_matches('s') {
            "year" => 365.25 * MICROS_PER_DAY,
            "mon" => 30.4375 * MICROS_PER_DAY,
            "day" => MICROS_PER_DAY,
            "hour" => 3_600_000_000.0,
            "min" => 60_000_000.0,
            "sec" => 1_000_000.0,
            _ => return None,
        };
        micros += n * per;
    }
    Some(micros.round() as i64)
}

/// The elements of a one-dimensional array's text (`{1,NULL,"a,b"}`);
/// `None` as an element is SQL NULL.
fn parse_array(text: &str) -> Option<Vec<Option<String>>> {
    // A lower bound other than 1 is printed first: `[0:1]={1,2}`.
    let body = match text.find('=') {
        Some(i) if text.starts_with('[') => &text[i + 1..],
        _ => text,
    };
    let inner = body.strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    if inner.is_empty() {
        return Some(out);
    }
    let mut chars = inner.chars().peekable();
    loop {
        match chars.peek() {
            Some('{') => return None, // more than one dimension
            Some('"') => {
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next()? {
                        '\\' => s.push(chars.next()?),
                        '"' => break,
                        c => s.push(c),
                    }
                }
                out.push(Some(s));
            }
            _ => {
                let mut s = String::new();
                while let Some(&c) = chars.peek() {
                    if c == ',' {
                        break;
                    }
                    s.push(c);
                    chars.next();
                }
                out.push(if s == "NULL" { None } else { Some(s) });
            }
        }
        match chars.next() {
            None => return Some(out),
            Some(',') => {}
            Some(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(t: PgType, text: &str) -> String {
        String::from_utf8(
            t.value(text, DecimalMode::Precise, Form::Payload)
                .unwrap()
                .to_bytes(),
        )
        .unwrap()
    }

    #[test]
    fn numerics_keep_their_scale_and_unconstrained_ones_carry_it() {
        let n = PgType::from_oid(1700, ((10 << 16) | 2) + 4);
        assert_eq!(
            n,
            PgType::Numeric {
                precision: Some(10),
                scale: Some(2)
            }
        );
        assert_eq!(v(n.clone(), "12.50"), "12.50");
        assert_eq!(v(n.clone(), "-0.05"), "-0.05");
        let schemaless = n
            .value("-1.00", DecimalMode::Precise, Form::Schemaless)
            .unwrap();
        // -100 as Java's BigInteger bytes: 0x9c.
        assert_eq!(schemaless, Json::str("nA=="));
        let free = PgType::from_oid(1700, -1);
        assert_eq!(v(free, "3.14159"), r#"{"scale":5,"value":"BMsv"}"#);
    }

    #[test]
    fn twos_complement_matches_java() {
        assert_eq!(twos_complement(false, "0"), vec![0]);
        assert_eq!(twos_complement(false, "128"), vec![0, 128]);
        assert_eq!(twos_complement(true, "128"), vec![0x80]);
        assert_eq!(twos_complement(true, "129"), vec![0xff, 0x7f]);
        assert_eq!(twos_complement(false, "1250"), vec![0x04, 0xe2]);
    }

    #[test]
    fn times_follow_the_adaptive_mode() {
        assert_eq!(v(PgType::Date, "1970-01-02"), "1");
        assert_eq!(v(PgType::Date, "1969-12-31"), "-1");
        assert_eq!(
            v(PgType::Timestamp(6), "2024-01-02 03:04:05.123456"),
            "1704164645123456"
        );
        assert_eq!(
            v(PgType::Timestamp(3), "2024-01-02 03:04:05.123"),
            "1704164645123"
        );
        assert_eq!(
            v(PgType::TimestampTz(6), "2024-01-02 03:04:05.5+02"),
            r#""2024-01-02T01:04:05.500000Z""#
        );
        // As many fraction digits as the column's precision, as Debezium.
        assert_eq!(
            v(PgType::TimestampTz(6), "2024-01-02 03:04:05-05:30"),
            r#""2024-01-02T08:34:05.000000Z""#
        );
        assert_eq!(
            v(PgType::TimestampTz(3), "2024-01-02 03:04:05.5+02"),
            r#""2024-01-02T01:04:05.500Z""#
        );
        assert_eq!(
            v(PgType::TimestampTz(0), "2024-01-02 03:04:05+02"),
            r#""2024-01-02T01:04:05Z""#
        );
        assert_eq!(v(PgType::Time(6), "00:00:01.5"), "1500000");
        assert_eq!(v(PgType::Time(3), "00:00:01.5"), "1500");
        assert_eq!(v(PgType::TimeTz, "10:00:00+02"), r#""08:00:00Z""#);
        assert_eq!(v(PgType::Interval, "1 day 00:00:01"), "86401000000");
        assert_eq!(v(PgType::Interval, "-00:00:01.5"), "-1500000");
    }

    #[test]
    fn arrays_bytes_and_text() {
        assert_eq!(v(PgType::from_oid(1007, -1), "{1,NULL,3}"), "[1,null,3]");
        assert_eq!(
            v(
                PgType::from_oid(1009, -1),
                r#"{a,"b,c","d\"e",NULL,"NULL"}"#
            ),
            r#"["a","b,c","d\"e",null,"NULL"]"#
        );
        assert_eq!(v(PgType::Bytea, "\\x0102ff"), r#""AQL/""#);
        assert!(
            PgType::from_oid(1007, -1)
                .value("{{1},{2}}", DecimalMode::Precise, Form::Payload)
                .unwrap_err()
                .contains("one-dimensional")
        );
        assert!(
            PgType::Float8
                .value("NaN", DecimalMode::Precise, Form::Payload)
                .is_err()
        );
    }
}
