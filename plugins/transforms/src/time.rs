//! TimestampConverter: between unix numbers, strings and Kafka Connect's
//! logical Timestamp, Date and Time (schemaless: milliseconds).

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Timelike, Utc};
use serde_json::Value;
use sluice_sdk::{ConnectError, Record};

use crate::{Keys, Part, Smt, object, read, write};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Target {
    Str,
    Unix,
    Timestamp,
    Date,
    Time,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Precision {
    Seconds,
    Millis,
    Micros,
    Nanos,
}

pub struct TimestampConverter {
    part: Part,
    field: Option<String>,
    target: Target,
    /// chrono format, translated from Java's SimpleDateFormat.
    format: Option<String>,
    precision: Precision,
}

/// Translates the common SimpleDateFormat letters to chrono's.
pub(crate) fn java_format(java: &str) -> Result<String, String> {
    let mut out = String::new();
    let chars: Vec<char> = java.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                if chars[i] == '%' {
                    out.push('%');
                }
                out.push(chars[i]);
                i += 1;
            }
            i += 1;
            continue;
        }
        let mut n = 1;
        while i + n < chars.len() && chars[i + n] == c {
            n += 1;
        }
        let piece = match (c, n) {
            ('y', 2) => "%y",
            ('y', _) => "%Y",
            ('M', 1 | 2) => "%m",
            ('M', 3) => "%b",
            ('M', _) => "%B",
            ('d', _) => "%d",
            ('H', _) => "%H",
            ('h', _) => "%I",
            ('m', _) => "%M",
            ('s', _) => "%S",
            ('S', _) => "%3f",
            ('a', _) => "%p",
            ('E', 1..=3) => "%a",
            ('E', _) => "%A",
            ('Z', _) => "%z",
            ('X', 1) | ('X', 2) => "%z",
            ('X', _) => "%:z",
            ('%', _) => "%%",
            (c, _) if c.is_ascii_alphabetic() => {
                return Err(format!("the pattern letter `{c}` is not supported"));
            }
            _ => {
                for _ in 0..n {
                    out.push(c);
                }
                i += n;
                continue;
            }
        };
        out.push_str(piece);
        i += n;
    }
    Ok(out)
}

impl TimestampConverter {
    pub fn new(part: Part, k: &mut Keys) -> Result<Self, ConnectError> {
        let target = match k.required("target.type")?.as_str() {
            "string" => Target::Str,
            "unix" => Target::Unix,
            "Timestamp" => Target::Timestamp,
            "Date" => Target::Date,
            "Time" => Target::Time,
            other => {
                return Err(k.bad(
                    "target.type",
                    format!("`{other}`; expected string, unix, Date, Time or Timestamp"),
                ));
            }
        };
        let format = match k.take("format") {
            Some(f) if !f.is_empty() => Some(java_format(&f).map_err(|e| k.bad("format", e))?),
            _ => None,
        };
        let precision = match k.take("unix.precision").as_deref() {
            None | Some("milliseconds") => Precision::Millis,
            Some("seconds") => Precision::Seconds,
            Some("microseconds") => Precision::Micros,
            Some("nanoseconds") => Precision::Nanos,
            Some(other) => {
                return Err(k.bad(
                    "unix.precision",
                    format!(
                        "`{other}`; expected seconds, milliseconds, microseconds or nanoseconds"
                    ),
                ));
            }
        };
        let field = k.take("field").filter(|f| !f.is_empty());
        Ok(Self {
            part,
            field,
            target,
            format,
            precision,
        })
    }

    fn parse(&self, v: &Value) -> Result<Option<DateTime<Utc>>, ConnectError> {
        let bad = |why: String| ConnectError::data(format!("TimestampConverter: {why}"));
        match v {
            Value::Null => Ok(None),
            Value::Number(n) => {
                let i = n
                    .as_i64()
                    .ok_or_else(|| bad(format!("{n} is not an integer timestamp")))?;
                let dt = match self.precision {
                    Precision::Seconds => Utc.timestamp_opt(i, 0).single(),
                    Precision::Millis => Utc.timestamp_millis_opt(i).single(),
                    Precision::Micros => DateTime::from_timestamp_micros(i),
                    Precision::Nanos => Some(DateTime::from_timestamp_nanos(i)),
                };
                dt.map(Some)
                    .ok_or_else(|| bad(format!("{i} is out of range")))
            }
            Value::String(s) => {
                if let Some(f) = &self.format {
                    if let Ok(dt) = DateTime::parse_from_str(s, f) {
                        return Ok(Some(dt.with_timezone(&Utc)));
                    }
                    if let Ok(ndt) = NaiveDateTime::parse_from_str(s, f) {
                        return Ok(Some(Utc.from_utc_datetime(&ndt)));
                    }
                    if let Ok(d) = NaiveDate::parse_from_str(s, f) {
                        return Ok(Some(Utc.from_utc_datetime(&d.and_time(NaiveTime::MIN))));
                    }
                    return Err(bad(format!("`{s}` does not match the format")));
                }
                DateTime::parse_from_rfc3339(s)
                    .map(|d| Some(d.with_timezone(&Utc)))
                    .map_err(|e| {
                        bad(format!(
                            "`{s}` is not an RFC 3339 timestamp ({e}); set `format`"
                        ))
                    })
            }
            other => Err(bad(format!(
                "cannot read a timestamp from {}",
                crate::type_name(other)
            ))),
        }
    }

    fn render(&self, dt: DateTime<Utc>) -> Value {
        match self.target {
            Target::Str => Value::from(match &self.format {
                Some(f) => dt.format(f).to_string(),
                None => dt.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            }),
            Target::Unix => Value::from(match self.precision {
                Precision::Seconds => dt.timestamp(),
                Precision::Millis => dt.timestamp_millis(),
                Precision::Micros => dt.timestamp_micros(),
                Precision::Nanos => dt.timestamp_nanos_opt().unwrap_or(i64::MAX),
            }),
            Target::Timestamp => Value::from(dt.timestamp_millis()),
            Target::Date => Value::from(
                dt.date_naive()
                    .and_time(NaiveTime::MIN)
                    .and_utc()
                    .timestamp_millis(),
            ),
            Target::Time => Value::from(
                i64::from(dt.time().num_seconds_from_midnight()) * 1000
                    + i64::from(dt.time().nanosecond() / 1_000_000),
            ),
        }
    }
}

impl Smt for TimestampConverter {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        match &self.field {
            None => {
                let Some(v) = read(&record, self.part)? else {
                    return Ok(vec![record]);
                };
                if let Some(dt) = self.parse(&v)? {
                    write(&mut record, self.part, &self.render(dt));
                }
            }
            Some(field) => {
                let Some(mut m) = object(&record, self.part, "TimestampConverter")? else {
                    return Ok(vec![record]);
                };
                // As Kafka Connect: a missing field is set to null.
                let v = m.entry(field.clone()).or_insert(Value::Null);
                if let Some(dt) = self.parse(v)? {
                    *v = self.render(dt);
                }
                write(&mut record, self.part, &serde_json::Value::Object(m));
            }
        }
        Ok(vec![record])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn java_patterns() {
        assert_eq!(
            super::java_format("yyyy-MM-dd'T'HH:mm:ss.SSSXXX").unwrap(),
            "%Y-%m-%dT%H:%M:%S.%3f%:z"
        );
        assert_eq!(super::java_format("dd/MM/yy").unwrap(), "%d/%m/%y");
        assert!(super::java_format("yyyy Q").is_err());
    }
}

/// Kafka Connect's `TimestampRouter`: the topic becomes `topic.format`
/// with `${topic}` and `${timestamp}` (the record's timestamp in UTC,
/// written with the SimpleDateFormat pattern `timestamp.format`) replaced.
pub struct TimestampRouter {
    topic_format: String,
    /// chrono format, translated from Java's SimpleDateFormat.
    timestamp_format: String,
}

impl TimestampRouter {
    pub fn new(k: &mut Keys) -> Result<Self, ConnectError> {
        let topic_format = k
            .take("topic.format")
            .unwrap_or_else(|| "${topic}-${timestamp}".into());
        let java = k
            .take("timestamp.format")
            .unwrap_or_else(|| "yyyyMMdd".into());
        let timestamp_format = java_format(&java).map_err(|e| k.bad("timestamp.format", e))?;
        Ok(Self {
            topic_format,
            timestamp_format,
        })
    }
}

impl Smt for TimestampRouter {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        let Some(ts) = record.timestamp else {
            return Err(ConnectError::data(format!(
                "TimestampRouter: {} has no timestamp",
                record.coordinates()
            )));
        };
        let at = Utc.timestamp_millis_opt(ts).single().ok_or_else(|| {
            ConnectError::data(format!("TimestampRouter: timestamp {ts} is out of range"))
        })?;
        let stamp = at.format(&self.timestamp_format).to_string();
        record.topic = self
            .topic_format
            .replace("${topic}", &record.topic)
            .replace("${timestamp}", &stamp);
        Ok(vec![record])
    }
}
