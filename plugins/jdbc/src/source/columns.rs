//! From a result column to a Kafka Connect field: the type a column's
//! declared type maps to (Confluent's mapping, `numeric.mapping`
//! included), and each value in the payload form the runtime writes
//! (`sluice_sdk::Record::value_schema`).

use base64::Engine as _;
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Timelike as _};
use sluice_sdk::schema::{DATE, DECIMAL, DECIMAL_SCALE, TIME, TIMESTAMP};
use sluice_sdk::{Field, Schema, SchemaKind};

use super::config::NumericMapping;
use crate::dialect::Dialect;

/// One value as a database returned it.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
}

/// What the catalog says of a column beyond its type.
#[derive(Debug, Clone, Default)]
pub struct ColumnFacts {
    pub nullable: bool,
    pub precision: Option<i64>,
    pub scale: Option<i64>,
    /// Filled by the database (a sequence, identity or auto-increment).
    pub generated: bool,
}

/// How a column's values become payload JSON.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Conversion {
    Boolean,
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Decimal { scale: u32 },
    String,
    Bytes,
    Date,
    Time,
    Timestamp,
}

/// The conversion of a column of this declared type (the database's
/// name for it, as sqlx reports it).
pub fn conversion(
    dialect: Dialect,
    type_name: &str,
    facts: &ColumnFacts,
    numeric: NumericMapping,
) -> Conversion {
    let t = type_name.to_ascii_uppercase();
    let t = t.trim();
    match dialect {
        Dialect::Postgres => match t {
            "BOOL" => Conversion::Boolean,
            "INT2" => Conversion::Int16,
            "INT4" | "OID" => Conversion::Int32,
            "INT8" => Conversion::Int64,
            "FLOAT4" => Conversion::Float32,
            "FLOAT8" => Conversion::Float64,
            "NUMERIC" => numeric_conversion(facts, numeric),
            "DATE" => Conversion::Date,
            "TIME" => Conversion::Time,
            "TIMESTAMP" | "TIMESTAMPTZ" => Conversion::Timestamp,
            "BYTEA" => Conversion::Bytes,
            _ => Conversion::String,
        },
        Dialect::MySql => {
            let unsigned = t.ends_with("UNSIGNED");
            match t.trim_end_matches("UNSIGNED").trim() {
                "BOOLEAN" => Conversion::Boolean,
                "TINYINT" if unsigned => Conversion::Int16,
                "TINYINT" => Conversion::Int8,
                "SMALLINT" if unsigned => Conversion::Int32,
                "SMALLINT" => Conversion::Int16,
                "MEDIUMINT" => Conversion::Int32,
                "INT" | "INTEGER" if unsigned => Conversion::Int64,
                "INT" | "INTEGER" | "YEAR" => Conversion::Int32,
                // An unsigned BIGINT above i64::MAX is refused by name.
                "BIGINT" => Conversion::Int64,
                "FLOAT" => Conversion::Float32,
                "DOUBLE" | "REAL" => Conversion::Float64,
                "DECIMAL" | "NUMERIC" => numeric_conversion(facts, numeric),
                "DATE" => Conversion::Date,
                "TIME" => Conversion::Time,
                "DATETIME" | "TIMESTAMP" => Conversion::Timestamp,
                "BINARY" | "VARBINARY" | "TINYBLOB" | "BLOB" | "MEDIUMBLOB" | "LONGBLOB"
                | "BIT" => Conversion::Bytes,
                _ => Conversion::String,
            }
        }
        // SQLite's affinity rules, on the declared type.
        Dialect::Sqlite => {
            if t.contains("BOOL") {
                Conversion::Boolean
            } else if t.contains("INT") {
                Conversion::Int64
            } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
                Conversion::String
            } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
                Conversion::Float64
            } else if t == "DATE" {
                Conversion::Date
            } else if t == "TIME" {
                Conversion::Time
            } else if t.contains("DATETIME") || t.contains("TIMESTAMP") {
                Conversion::Timestamp
            } else if t.contains("BLOB") {
                Conversion::Bytes
            } else if t.contains("NUMERIC") || t.contains("DECIMAL") {
                // Stored as an integer or a double: no exact scale to keep.
                Conversion::Float64
            } else {
                Conversion::String
            }
        }
    }
}

/// `NUMERIC(p, s)` by `numeric.mapping`. Without a declared precision
/// (PostgreSQL's unconstrained `numeric`) no scale is fixed: the values
/// are written as text, exactly, under `none` and `precision_only`, and as
/// `float64` under `best_fit`.
fn numeric_conversion(facts: &ColumnFacts, mapping: NumericMapping) -> Conversion {
    let (Some(precision), scale) = (facts.precision.filter(|p| *p > 0), facts.scale) else {
        return match mapping {
            NumericMapping::BestFit => Conversion::Float64,
            _ => Conversion::String,
        };
    };
    let scale = scale.unwrap_or(0).max(0);
    let integer = |p: i64| match p {
        ..=2 => Conversion::Int8,
        3..=4 => Conversion::Int16,
        5..=9 => Conversion::Int32,
        _ => Conversion::Int64,
    };
    match mapping {
        NumericMapping::PrecisionOnly | NumericMapping::BestFit if scale == 0 && precision < 19 => {
            integer(precision)
        }
        NumericMapping::BestFit if scale > 0 && precision <= 15 => Conversion::Float64,
        _ => Conversion::Decimal {
            scale: u32::try_from(scale).unwrap_or(0),
        },
    }
}

impl Conversion {
    pub fn schema(self, optional: bool) -> Schema {
        let mut schema = match self {
            Conversion::Boolean => Schema::boolean(),
            Conversion::Int8 => Schema::int8(),
            Conversion::Int16 => Schema::int16(),
            Conversion::Int32 => Schema::int32(),
            Conversion::Int64 => Schema::int64(),
            Conversion::Float32 => Schema::float32(),
            Conversion::Float64 => Schema::float64(),
            Conversion::String => Schema::string(),
            Conversion::Bytes => Schema::new(SchemaKind::Bytes),
            Conversion::Decimal { scale } => {
                let mut s = Schema::new(SchemaKind::Bytes);
                s.name = Some(DECIMAL.into());
                s.version = Some(1);
                s.parameters = vec![(DECIMAL_SCALE.into(), scale.to_string())];
                s
            }
            Conversion::Date => logical(SchemaKind::Int32, DATE),
            Conversion::Time => logical(SchemaKind::Int32, TIME),
            Conversion::Timestamp => logical(SchemaKind::Int64, TIMESTAMP),
        };
        schema.optional = optional;
        schema
    }

    /// Appends the value's payload JSON to `out`.
    pub fn write(self, cell: &Cell, out: &mut String) -> Result<(), String> {
        use std::fmt::Write as _;
        if matches!(cell, Cell::Null) {
            out.push_str("null");
            return Ok(());
        }
        match self {
            Conversion::Boolean => {
                let b = match cell {
                    Cell::Int(i) => *i != 0,
                    Cell::Float(f) => *f != 0.0,
                    Cell::Text(t) => match t.as_str() {
                        "t" | "true" | "1" | "TRUE" => true,
                        "f" | "false" | "0" | "FALSE" => false,
                        other => return Err(format!("`{other}` is not a boolean")),
                    },
                    _ => return Err("bytes are not a boolean".into()),
                };
                out.push_str(if b { "true" } else { "false" });
            }
            Conversion::Int8 | Conversion::Int16 | Conversion::Int32 | Conversion::Int64 => {
                let i = integer(cell)?;
                let (min, max) = match self {
                    Conversion::Int8 => (i64::from(i8::MIN), i64::from(i8::MAX)),
                    Conversion::Int16 => (i64::from(i16::MIN), i64::from(i16::MAX)),
                    Conversion::Int32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
                    _ => (i64::MIN, i64::MAX),
                };
                if !(min..=max).contains(&i) {
                    return Err(format!("{i} is out of range for its column's type"));
                }
                let _ = write!(out, "{i}");
            }
            Conversion::Float32 | Conversion::Float64 => {
                let f = match cell {
                    Cell::Int(i) => *i as f64,
                    Cell::Float(f) => *f,
                    Cell::Text(t) => t
                        .parse::<f64>()
                        .map_err(|_| format!("`{t}` is not a number"))?,
                    Cell::Bytes(_) | Cell::Null => return Err("bytes are not a number".into()),
                };
                if f.is_finite() {
                    let _ = write!(out, "{f:?}");
                } else {
                    // JSON has no NaN or infinity; Kafka Connect's
                    // JsonConverter writes them as these strings.
                    let _ = write!(out, "\"{f}\"");
                }
            }
            Conversion::Decimal { scale } => {
                let text = match cell {
                    Cell::Int(i) => i.to_string(),
                    Cell::Float(f) => f.to_string(),
                    Cell::Text(t) => t.clone(),
                    _ => return Err("bytes are not a decimal".into()),
                };
                out.push_str(&rescale(&text, scale)?);
            }
            Conversion::String => {
                let text = match cell {
                    Cell::Int(i) => i.to_string(),
                    Cell::Float(f) => f.to_string(),
                    Cell::Text(t) => t.clone(),
                    Cell::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
                    Cell::Null => unreachable!("handled above"),
                };
                out.push_str(&serde_json::to_string(&text).map_err(|e| e.to_string())?);
            }
            Conversion::Bytes => {
                let bytes = match cell {
                    Cell::Bytes(b) => b.clone(),
                    Cell::Text(t) => match t.strip_prefix("\\x") {
                        // PostgreSQL's text form of bytea.
                        Some(hex) => decode_hex(hex)?,
                        None => t.as_bytes().to_vec(),
                    },
                    other => return Err(format!("{other:?} is not bytes")),
                };
                let _ = write!(
                    out,
                    "\"{}\"",
                    base64::engine::general_purpose::STANDARD.encode(bytes)
                );
            }
            Conversion::Date => {
                let date = parse_date(text(cell)?)?;
                let days = date
                    .signed_duration_since(NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid"))
                    .num_days();
                let _ = write!(out, "{}", days * sluice_sdk::schema::MILLIS_PER_DAY);
            }
            Conversion::Time => {
                let t = text(cell)?;
                let time = NaiveTime::parse_from_str(t, "%H:%M:%S%.f")
                    .map_err(|_| format!("`{t}` is not a time of day"))?;
                let ms = time.num_seconds_from_midnight() * 1000 + time.nanosecond() / 1_000_000;
                let _ = write!(out, "{ms}");
            }
            Conversion::Timestamp => {
                let ts = parse_timestamp(cell)?;
                let _ = write!(out, "{}", ts.and_utc().timestamp_millis());
            }
        }
        Ok(())
    }
}

fn logical(kind: SchemaKind, name: &str) -> Schema {
    let mut s = Schema::new(kind);
    s.name = Some(name.into());
    s.version = Some(1);
    s
}

fn text(cell: &Cell) -> Result<&str, String> {
    match cell {
        Cell::Text(t) => Ok(t),
        other => Err(format!("{other:?} is not text")),
    }
}

/// An integer cell (an incrementing column's value, or an integer field).
pub fn integer(cell: &Cell) -> Result<i64, String> {
    match cell {
        Cell::Int(i) => Ok(*i),
        Cell::Text(t) => t
            .parse::<i64>()
            .map_err(|_| format!("`{t}` is not a whole number that fits 64 bits")),
        Cell::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(*f as i64),
        other => Err(format!("{other:?} is not a whole number")),
    }
}

fn parse_date(t: &str) -> Result<NaiveDate, String> {
    NaiveDate::parse_from_str(t, "%Y-%m-%d").map_err(|_| format!("`{t}` is not a date"))
}

/// A timestamp cell as UTC: `YYYY-MM-DD HH:MM:SS[.f]` with an optional
/// `T` and zone (`+00`, `+02:00`, `Z`), or an integer of seconds since
/// the epoch (SQLite's `unixepoch()`).
pub fn parse_timestamp(cell: &Cell) -> Result<NaiveDateTime, String> {
    let t = match cell {
        Cell::Int(secs) => {
            return DateTime::from_timestamp(*secs, 0)
                .map(|d| d.naive_utc())
                .ok_or_else(|| format!("{secs} is out of range for a timestamp"));
        }
        other => text(other)?,
    };
    let normal = t.trim().replacen('T', " ", 1);
    let normal = normal.strip_suffix('Z').unwrap_or(&normal);
    if let Ok(ts) = NaiveDateTime::parse_from_str(normal, "%Y-%m-%d %H:%M:%S%.f") {
        return Ok(ts);
    }
    if let Ok(ts) = DateTime::parse_from_str(normal, "%Y-%m-%d %H:%M:%S%.f%#z") {
        return Ok(ts.naive_utc());
    }
    if let Ok(d) = parse_date(normal) {
        return Ok(d.and_hms_opt(0, 0, 0).expect("midnight"));
    }
    Err(format!("`{t}` is not a timestamp"))
}

/// Decimal text with exactly `scale` digits after the point (rounding
/// away nothing: more digits than the scale is an error).
fn rescale(text: &str, scale: u32) -> Result<String, String> {
    let t = text.trim();
    if t.is_empty()
        || !t
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.'))
        || t.matches('.').count() > 1
    {
        return Err(format!("`{text}` is not a decimal number"));
    }
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    let frac = frac.trim_end_matches('0');
    let scale = scale as usize;
    if frac.len() > scale {
        return Err(format!(
            "`{text}` has more than {scale} digits after the point"
        ));
    }
    let whole = if whole.is_empty() || whole == "-" || whole == "+" {
        format!("{whole}0")
    } else {
        whole.to_string()
    };
    let whole = whole.strip_prefix('+').unwrap_or(&whole);
    if scale == 0 {
        return Ok(whole.to_string());
    }
    Ok(format!("{whole}.{frac:0<scale$}"))
}

fn decode_hex(hex: &str) -> Result<Vec<u8>, String> {
    if !hex.len().is_multiple_of(2) {
        return Err("bytea hex text of odd length".into());
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| format!("`{hex}` is not hex")))
        .collect()
}

/// A result's columns: names, conversions and the row schema.
#[derive(Debug)]
pub struct RowShape {
    pub names: Vec<String>,
    pub conversions: Vec<Conversion>,
    pub schema: std::sync::Arc<Schema>,
}

impl RowShape {
    pub fn new(
        dialect: Dialect,
        name: Option<&str>,
        columns: &[(String, String)],
        facts: &dyn Fn(&str) -> Option<ColumnFacts>,
        numeric: NumericMapping,
    ) -> RowShape {
        let mut fields = Vec::with_capacity(columns.len());
        let mut conversions = Vec::with_capacity(columns.len());
        for (column, type_name) in columns {
            let known = facts(column);
            let facts = known.clone().unwrap_or(ColumnFacts {
                nullable: true,
                ..ColumnFacts::default()
            });
            let conversion = conversion(dialect, type_name, &facts, numeric);
            conversions.push(conversion);
            fields.push(Field {
                name: column.clone(),
                schema: conversion.schema(facts.nullable),
            });
        }
        let mut schema = Schema::new(SchemaKind::Struct(fields));
        schema.name = name.map(str::to_string);
        RowShape {
            names: columns.iter().map(|(n, _)| n.clone()).collect(),
            conversions,
            schema: std::sync::Arc::new(schema),
        }
    }

    /// The row's payload JSON object.
    pub fn payload(&self, row: &[Cell]) -> Result<String, String> {
        let mut out = String::with_capacity(16 * row.len() + 2);
        out.push('{');
        for (i, (cell, conversion)) in row.iter().zip(&self.conversions).enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(&self.names[i]).map_err(|e| e.to_string())?);
            out.push(':');
            conversion
                .write(cell, &mut out)
                .map_err(|e| format!("column `{}`: {e}", self.names[i]))?;
        }
        out.push('}');
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(c: Conversion, cell: Cell) -> String {
        let mut out = String::new();
        c.write(&cell, &mut out).expect("converts");
        out
    }

    #[test]
    fn values_take_the_payload_form() {
        assert_eq!(
            write(Conversion::Decimal { scale: 2 }, Cell::Text("12.5".into())),
            "12.50"
        );
        assert_eq!(
            write(Conversion::Decimal { scale: 0 }, Cell::Text("-7".into())),
            "-7"
        );
        assert_eq!(
            write(Conversion::Date, Cell::Text("1970-01-02".into())),
            "86400000"
        );
        assert_eq!(
            write(Conversion::Time, Cell::Text("00:00:01.5".into())),
            "1500"
        );
        assert_eq!(
            write(
                Conversion::Timestamp,
                Cell::Text("1970-01-01 00:00:01.25+00".into())
            ),
            "1250"
        );
        assert_eq!(
            write(
                Conversion::Timestamp,
                Cell::Text("1970-01-01T02:00:00+02:00".into())
            ),
            "0"
        );
        assert_eq!(
            write(Conversion::Bytes, Cell::Text("\\x0102".into())),
            "\"AQI=\""
        );
        assert_eq!(write(Conversion::Boolean, Cell::Text("t".into())), "true");
        assert_eq!(
            write(Conversion::String, Cell::Text("a\"b".into())),
            "\"a\\\"b\""
        );
        let mut out = String::new();
        assert!(Conversion::Int8.write(&Cell::Int(300), &mut out).is_err());
        assert!(
            Conversion::Decimal { scale: 1 }
                .write(&Cell::Text("1.25".into()), &mut out)
                .is_err()
        );
    }

    #[test]
    fn numeric_mapping_follows_confluent() {
        let facts = |p, s| ColumnFacts {
            precision: Some(p),
            scale: Some(s),
            ..ColumnFacts::default()
        };
        let pg = |f: &ColumnFacts, m| conversion(Dialect::Postgres, "NUMERIC", f, m);
        assert_eq!(
            pg(&facts(10, 2), NumericMapping::None),
            Conversion::Decimal { scale: 2 }
        );
        assert_eq!(pg(&facts(9, 0), NumericMapping::BestFit), Conversion::Int32);
        assert_eq!(
            pg(&facts(10, 2), NumericMapping::BestFit),
            Conversion::Float64
        );
        assert_eq!(
            pg(&facts(30, 2), NumericMapping::BestFit),
            Conversion::Decimal { scale: 2 }
        );
        assert_eq!(
            pg(&facts(4, 0), NumericMapping::PrecisionOnly),
            Conversion::Int16
        );
        assert_eq!(
            pg(&ColumnFacts::default(), NumericMapping::None),
            Conversion::String
        );
    }
}
