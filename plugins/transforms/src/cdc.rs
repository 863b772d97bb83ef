//! Debezium's `ExtractNewRecordState` ("unwrap"): a change event's envelope
//! (`before`, `after`, `source`, `op`, `ts_ms`) replaced by the row state,
//! on schemaless JSON.

use serde_json::{Map, Value};
use sluice_sdk::{ConnectError, Record};

use crate::{Keys, Part, Smt, read, type_name, write};

/// What becomes of a delete event (`op` = `d`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Deletes {
    /// Dropped.
    Drop,
    /// A tombstone: the key, no value.
    Tombstone,
    /// The `before` row, with `__deleted` = `"true"` (and `"false"` on
    /// every other change event).
    Rewrite,
}

/// One entry of `add.fields` or `add.headers`: `[struct.]field[:name]`.
struct Added {
    /// `source` in `source.ts_ms`; none: the envelope's field if it has
    /// one (`op`, `ts_ms`), else the `source` block's (`table`, `lsn`).
    block: Option<String>,
    field: String,
    /// The field or header it is written to, prefix included.
    name: String,
}

fn added(list: Vec<String>, prefix: &str) -> Vec<Added> {
    list.into_iter()
        .map(|entry| {
            let (path, rename) = match entry.split_once(':') {
                Some((p, r)) => (p.to_string(), Some(r.to_string())),
                None => (entry, None),
            };
            let (block, field) = match path.split_once('.') {
                Some((b, f)) => (Some(b.to_string()), f.to_string()),
                None => (None, path.clone()),
            };
            let name = format!(
                "{prefix}{}",
                rename.unwrap_or_else(|| path.replace('.', "_"))
            );
            Added { block, field, name }
        })
        .collect()
}

impl Added {
    fn value(&self, envelope: &Map<String, Value>) -> Value {
        let from_block = |b: &str| envelope.get(b).and_then(|s| s.get(&self.field)).cloned();
        match &self.block {
            Some(b) => from_block(b),
            None => envelope
                .get(&self.field)
                .cloned()
                .or_else(|| from_block("source")),
        }
        .unwrap_or(Value::Null)
    }
}

pub struct ExtractNewRecordState {
    deletes: Deletes,
    keep_tombstones: bool,
    fields: Vec<Added>,
    headers: Vec<Added>,
}

fn flag(k: &Keys, key: &str, v: &str) -> Result<bool, ConnectError> {
    match v.trim() {
        t if t.eq_ignore_ascii_case("true") => Ok(true),
        t if t.eq_ignore_ascii_case("false") => Ok(false),
        other => Err(k.bad(key, format!("`{other}`; expected true or false"))),
    }
}

impl ExtractNewRecordState {
    pub fn new(k: &mut Keys) -> Result<Self, ConnectError> {
        let mode = k.take("delete.tombstone.handling.mode");
        let drop_tombstones = k.take("drop.tombstones");
        let delete_handling = k.take("delete.handling.mode");
        let (deletes, keep_tombstones) = match mode {
            Some(_) if drop_tombstones.is_some() || delete_handling.is_some() => {
                return Err(k.bad(
                    "delete.tombstone.handling.mode",
                    "replaces drop.tombstones and delete.handling.mode (Debezium before 3.0): set one or the others",
                ));
            }
            Some(m) => match m.trim() {
                "drop" => (Deletes::Drop, false),
                "tombstone" | "delete-to-tombstone" => (Deletes::Tombstone, false),
                "rewrite" => (Deletes::Rewrite, false),
                "rewrite-with-tombstone" => (Deletes::Rewrite, true),
                other => {
                    return Err(k.bad(
                        "delete.tombstone.handling.mode",
                        format!("`{other}`; expected drop, tombstone, rewrite, rewrite-with-tombstone or delete-to-tombstone"),
                    ));
                }
            },
            // Debezium 3's default.
            None if drop_tombstones.is_none() && delete_handling.is_none() => {
                (Deletes::Tombstone, false)
            }
            // The keys of Debezium before 3.0, with their defaults then.
            None => {
                let drop = match &drop_tombstones {
                    Some(v) => flag(k, "drop.tombstones", v)?,
                    None => true,
                };
                let deletes = match delete_handling.as_deref().map(str::trim) {
                    None | Some("drop") => Deletes::Drop,
                    Some("none") => Deletes::Tombstone,
                    Some("rewrite") => Deletes::Rewrite,
                    Some(other) => {
                        return Err(k.bad(
                            "delete.handling.mode",
                            format!("`{other}`; expected drop, none or rewrite"),
                        ));
                    }
                };
                (deletes, !drop)
            }
        };
        let fields_prefix = k.take("add.fields.prefix").unwrap_or_else(|| "__".into());
        let headers_prefix = k.take("add.headers.prefix").unwrap_or_else(|| "__".into());
        Ok(Self {
            deletes,
            keep_tombstones,
            fields: added(k.list("add.fields"), &fields_prefix),
            headers: added(k.list("add.headers"), &headers_prefix),
        })
    }

    fn add_headers(&self, record: &mut Record, envelope: &Map<String, Value>) {
        for h in &self.headers {
            let bytes = match h.value(envelope) {
                Value::Null => None,
                Value::String(s) => Some(s.into_bytes()),
                other => Some(other.to_string().into_bytes()),
            };
            record.add_header(h.name.clone(), bytes);
        }
    }
}

/// A change event: an object with a text `op` and both `before` and
/// `after` (either may be null).
fn envelope(v: Value) -> Result<Map<String, Value>, Value> {
    match v {
        Value::Object(m)
            if m.get("op").is_some_and(Value::is_string)
                && m.contains_key("before")
                && m.contains_key("after") =>
        {
            Ok(m)
        }
        other => Err(other),
    }
}

impl Smt for ExtractNewRecordState {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        let Some(v) = read(&record, Part::Value)? else {
            return Ok(if self.keep_tombstones {
                vec![record]
            } else {
                vec![]
            });
        };
        // Anything but a change event passes unchanged.
        let Ok(mut envelope) = envelope(v) else {
            return Ok(vec![record]);
        };
        let (row, deleted) = match envelope["op"].as_str().unwrap_or_default() {
            // Truncate events have no row: dropped.
            "t" => return Ok(vec![]),
            "d" => match self.deletes {
                Deletes::Drop => return Ok(vec![]),
                Deletes::Tombstone => {
                    self.add_headers(&mut record, &envelope);
                    record.value = None;
                    return Ok(vec![record]);
                }
                Deletes::Rewrite => (envelope.remove("before"), "true"),
            },
            _ => (envelope.remove("after"), "false"),
        };
        self.add_headers(&mut record, &envelope);
        let mut row = match row {
            None | Some(Value::Null) => {
                record.value = None;
                return Ok(vec![record]);
            }
            Some(Value::Object(m)) => m,
            Some(other) => {
                return Err(ConnectError::data(format!(
                    "ExtractNewRecordState: the row of {} is {}, not an object",
                    record.coordinates(),
                    type_name(&other)
                )));
            }
        };
        if self.deletes == Deletes::Rewrite {
            row.insert("__deleted".into(), Value::from(deleted));
        }
        for f in &self.fields {
            row.insert(f.name.clone(), f.value(&envelope));
        }
        write(&mut record, Part::Value, &Value::Object(row));
        Ok(vec![record])
    }
}
