//! Debezium change events applied directly: an envelope becomes the write
//! of its `after` row, or the delete of its key, in the table of its
//! source (`${source.table}` in `table.name.format`).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use sluice_sdk::{ConnectError, Record};

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    after: Option<&'a RawValue>,
    op: String,
    #[serde(default)]
    source: Option<SourceBlock>,
}

#[derive(Deserialize, Default, Clone)]
pub struct SourceBlock {
    #[serde(default)]
    pub db: Option<String>,
    #[serde(default)]
    pub schema: Option<String>,
    #[serde(default)]
    pub table: Option<String>,
}

/// A record after unwrapping: the row to write (or `None` for a delete)
/// and where its event came from.
pub struct Unwrapped {
    pub record: Record,
    pub source: SourceBlock,
}

/// Whether `record` is a change event: by its schema's name when it has
/// one (`<prefix>.<schema>.<table>.Envelope`), else by the envelope's JSON
/// as JsonConverter writes it (`before` first, then `after`).
fn is_change_event(record: &Record) -> bool {
    match &record.value_schema {
        Some(s) => {
            s.name.as_deref().is_some_and(|n| n.ends_with(".Envelope"))
                && s.field("op").is_some()
                && s.field("after").is_some()
        }
        None => record
            .value
            .as_deref()
            .is_some_and(|v| v.starts_with(b"{\"before\":")),
    }
}

/// The record as the sink writes it: a change event unwrapped, anything
/// else as it is (`None`).
pub fn unwrap(record: &Record) -> Result<Option<Unwrapped>, ConnectError> {
    if !is_change_event(record) {
        return Ok(None);
    }
    let bytes = record.value.as_deref().unwrap_or_default();
    let envelope: Envelope<'_> = serde_json::from_slice(bytes).map_err(|e| {
        ConnectError::data(format!(
            "value of {} looks like a change event but is not one: {e}",
            record.coordinates()
        ))
        .with_class("MalformedChangeEvent")
    })?;
    let mut out = record.clone();
    match envelope.op.as_str() {
        "c" | "u" | "r" => {
            let after = envelope
                .after
                .filter(|a| a.get() != "null")
                .ok_or_else(|| {
                    ConnectError::data(format!(
                        "change event {} (op `{}`) has no `after` row",
                        record.coordinates(),
                        envelope.op
                    ))
                    .with_class("MalformedChangeEvent")
                })?;
            out.value = Some(after.get().as_bytes().to_vec());
            out.value_schema = record
                .value_schema
                .as_ref()
                .and_then(|s| s.field("after"))
                .map(|s| Arc::new(s.clone()));
        }
        // A delete is the delete of its key, as a tombstone is.
        "d" => {
            out.value = None;
            out.value_schema = None;
        }
        "t" => {
            return Err(ConnectError::data(format!(
                "change event {} is a truncate, which the JDBC sink does not apply; leave truncates out at the source (Debezium's default skipped.operations=t)",
                record.coordinates()
            ))
            .with_class("UnsupportedChangeEvent"));
        }
        other => {
            return Err(ConnectError::data(format!(
                "change event {} has op `{other}`; expected c, u, d, r or t",
                record.coordinates()
            ))
            .with_class("MalformedChangeEvent"));
        }
    }
    Ok(Some(Unwrapped {
        record: out,
        source: envelope.source.unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(value: &str) -> Record {
        Record {
            topic: "shop.public.orders".into(),
            partition: 0,
            offset: 7,
            key: Some(br#"{"id":1}"#.to_vec()),
            value: Some(value.as_bytes().to_vec()),
            ..Record::default()
        }
    }

    #[test]
    fn envelopes_unwrap_to_their_after_row_or_a_delete() {
        let c = unwrap(&record(
            r#"{"before":null,"after":{"id":1,"amount":12.50},"source":{"db":"shop","schema":"public","table":"orders"},"op":"c","ts_ms":1}"#,
        ))
        .unwrap()
        .unwrap();
        assert_eq!(
            c.record.value.as_deref(),
            Some(br#"{"id":1,"amount":12.50}"#.as_slice())
        );
        assert_eq!(c.source.table.as_deref(), Some("orders"));
        let d = unwrap(&record(
            r#"{"before":{"id":1},"after":null,"source":{"table":"orders"},"op":"d"}"#,
        ))
        .unwrap()
        .unwrap();
        assert_eq!(d.record.value, None);
        assert!(unwrap(&record(r#"{"id":1}"#)).unwrap().is_none());
        let t = unwrap(&record(r#"{"before":null,"after":null,"op":"t"}"#));
        assert!(t.err().unwrap().message.contains("truncate"));
    }
}
