//! Sluice's standard transforms, as one component. The runtime selects one
//! with the `kind` key (it sets it from Kafka Connect's class names, e.g.
//! `org.apache.kafka.connect.transforms.InsertField$Value`, or Debezium's
//! `io.debezium.transforms.ExtractNewRecordState`). Every
//! transform works on schemaless JSON; `$Key` variants work on the key and
//! `$Value` variants on the value. See `README.md` for each one's keys.

mod cdc;
mod fields;
mod time;

use serde_json::{Map, Value};
use sluice_sdk::guest::{Config, Transform};
use sluice_sdk::{ConnectError, Record};

pub use fields::*;

/// Which part of the record a transform works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Key,
    Value,
}

/// A transform's keys, consumed one by one so leftovers can be reported.
pub struct Keys {
    kind: String,
    map: Config,
}

impl Keys {
    pub fn new(kind: &str, map: Config) -> Self {
        Self {
            kind: kind.to_string(),
            map,
        }
    }

    pub fn take(&mut self, key: &str) -> Option<String> {
        self.map.remove(key)
    }

    pub fn required(&mut self, key: &str) -> Result<String, ConnectError> {
        self.take(key)
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| ConnectError::fatal(format!("{}: key `{key}` is required", self.kind)))
    }

    pub fn list(&mut self, key: &str) -> Vec<String> {
        self.take(key)
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn bad(&self, key: &str, why: impl std::fmt::Display) -> ConnectError {
        ConnectError::fatal(format!("{}: key `{key}`: {why}", self.kind))
    }

    /// Every key must have been used.
    pub fn finish(self) -> Result<(), ConnectError> {
        match self.map.keys().next() {
            None => Ok(()),
            Some(k) => Err(ConnectError::fatal(format!(
                "{}: key `{k}` is not supported",
                self.kind
            ))),
        }
    }
}

/// One configured standard transform.
pub trait Smt {
    fn apply(&self, record: Record) -> Result<Vec<Record>, ConnectError>;
}

pub struct Library {
    inner: Box<dyn Smt>,
}

/// Builds the transform `kind` (e.g. `InsertField$Value`) from its keys.
pub fn build(kind: &str, keys: Config) -> Result<Box<dyn Smt>, ConnectError> {
    let mut k = Keys::new(kind, keys);
    let (name, part) = match kind.split_once('$') {
        Some((n, "Key")) => (n, Part::Key),
        Some((n, "Value")) => (n, Part::Value),
        Some((_, other)) => {
            return Err(ConnectError::fatal(format!(
                "`{kind}`: `${other}` is not a variant; use $Key or $Value"
            )));
        }
        None => (kind, Part::Value),
    };
    let smt: Box<dyn Smt> = match name {
        "InsertField" => Box::new(InsertField::new(part, &mut k)?),
        "ReplaceField" => Box::new(ReplaceField::new(part, &mut k)?),
        "MaskField" => Box::new(MaskField::new(part, &mut k)?),
        "Filter" => Box::new(Filter::new(&mut k)?),
        "Cast" => Box::new(Cast::new(part, &mut k)?),
        "TimestampConverter" => Box::new(time::TimestampConverter::new(part, &mut k)?),
        "ExtractField" => Box::new(ExtractField::new(part, &mut k)?),
        "ValueToKey" => Box::new(ValueToKey::new(&mut k)?),
        "HoistField" => Box::new(HoistField::new(part, &mut k)?),
        "RegexRouter" => Box::new(RegexRouter::new(&mut k)?),
        "InsertHeader" => Box::new(InsertHeader::new(&mut k)?),
        "HeaderFrom" => Box::new(HeaderFrom::new(part, &mut k)?),
        "LatencyStamp" => Box::new(LatencyStamp::new(&mut k)?),
        "Flatten" => Box::new(Flatten::new(part, &mut k)?),
        "TimestampRouter" => Box::new(time::TimestampRouter::new(&mut k)?),
        "DropHeaders" => Box::new(DropHeaders::new(&mut k)?),
        "ExtractNewRecordState" => Box::new(cdc::ExtractNewRecordState::new(&mut k)?),
        other => {
            return Err(ConnectError::fatal(format!(
                "`{other}` is not a standard transform; known: {}",
                KINDS.join(", ")
            )));
        }
    };
    k.finish()?;
    Ok(smt)
}

/// The standard transforms, by the name `kind` takes.
pub const KINDS: [&str; 17] = [
    "InsertField",
    "ReplaceField",
    "MaskField",
    "Filter",
    "Cast",
    "TimestampConverter",
    "ExtractField",
    "ValueToKey",
    "HoistField",
    "RegexRouter",
    "InsertHeader",
    "HeaderFrom",
    "LatencyStamp",
    "Flatten",
    "TimestampRouter",
    "DropHeaders",
    "ExtractNewRecordState",
];

impl Transform for Library {
    fn configure(mut config: Config) -> Result<Self, ConnectError> {
        let kind = config.remove("kind").ok_or_else(|| {
            ConnectError::fatal(format!(
                "key `kind` is required: one of {}",
                KINDS.join(", ")
            ))
        })?;
        Ok(Library {
            inner: build(&kind, config)?,
        })
    }

    fn transform(&mut self, record: Record) -> Result<Vec<Record>, ConnectError> {
        self.inner.apply(record)
    }
}

sluice_sdk::export_transform!(Library);

/// The key or value parsed as JSON; `None` for a null (tombstone) part.
pub fn read(record: &Record, part: Part) -> Result<Option<Value>, ConnectError> {
    let bytes = match part {
        Part::Key => record.key.as_deref(),
        Part::Value => record.value.as_deref(),
    };
    match bytes {
        None => Ok(None),
        Some(b) => serde_json::from_slice(b).map(Some).map_err(|e| {
            ConnectError::data(format!(
                "the {} of {} is not JSON: {e}",
                if part == Part::Key { "key" } else { "value" },
                record.coordinates()
            ))
        }),
    }
}

pub fn write(record: &mut Record, part: Part, value: &Value) {
    let bytes = Some(serde_json::to_vec(value).expect("JSON serialises"));
    match part {
        Part::Key => record.key = bytes,
        Part::Value => record.value = bytes,
    }
}

/// The part as a JSON object, or a data error naming what it is instead.
pub fn object(
    record: &Record,
    part: Part,
    kind: &str,
) -> Result<Option<Map<String, Value>>, ConnectError> {
    match read(record, part)? {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(other) => Err(ConnectError::data(format!(
            "{kind} needs a JSON object but the {} of {} is {}",
            if part == Part::Key { "key" } else { "value" },
            record.coordinates(),
            type_name(&other)
        ))),
    }
}

pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
