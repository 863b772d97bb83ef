//! Debezium change events applied directly: an envelope becomes the write
//! of its `after` row, or the delete of its key, in the table of its
//! source (`${source.table}` in `table.name.format`).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use sluice_sdk::{ConnectError, Field, Record, Schema, SchemaKind};

/// `change.events.guard`: what orders two events of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeGuard {
    None,
    /// The source's log position (`source.lsn`): exact, one per change.
    Lsn,
    /// The source's commit time (`source.ts_ms`): two changes of a row in
    /// one millisecond keep the first.
    TsMs,
}

impl ChangeGuard {
    /// The column that holds it in the target table.
    pub fn column(self) -> Option<&'static str> {
        match self {
            ChangeGuard::None => None,
            ChangeGuard::Lsn => Some("__source_lsn"),
            ChangeGuard::TsMs => Some("__source_ts_ms"),
        }
    }

    fn field(self) -> &'static str {
        match self {
            ChangeGuard::Lsn => "lsn",
            _ => "ts_ms",
        }
    }
}

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
    #[serde(default)]
    pub lsn: Option<i64>,
    #[serde(default)]
    pub ts_ms: Option<i64>,
}

/// A record after unwrapping: the row to write (or `None` for a delete)
/// and where its event came from.
pub struct Unwrapped {
    pub record: Record,
    pub source: SourceBlock,
    /// A truncate: the table is emptied (`truncate.enabled`).
    pub truncate: bool,
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
pub fn unwrap(record: &Record, guard: ChangeGuard) -> Result<Option<Unwrapped>, ConnectError> {
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
            if let Some(column) = guard.column() {
                let source = envelope.source.clone().unwrap_or_default();
                let position = match guard {
                    ChangeGuard::Lsn => source.lsn,
                    _ => source.ts_ms,
                }
                .ok_or_else(|| {
                    ConnectError::data(format!(
                        "change event {} has no source.{}, which change.events.guard orders rows by",
                        record.coordinates(),
                        guard.field()
                    ))
                    .with_class("MissingGuardValue")
                })?;
                add_field(&mut out, column, position);
            }
        }
        // A delete is the delete of its key, as a tombstone is.
        "d" => {
            out.value = None;
            out.value_schema = None;
        }
        "t" => {
            out.value = None;
            out.value_schema = None;
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
        truncate: envelope.op == "t",
    }))
}

/// Appends `"column": position` to the row (and an `int64` field to its
/// schema).
fn add_field(row: &mut Record, column: &str, position: i64) {
    if let Some(value) = row.value.as_mut() {
        let text = String::from_utf8_lossy(value);
        let body = text
            .trim_end()
            .strip_suffix('}')
            .unwrap_or(&text)
            .trim_end();
        let sep = if body.ends_with('{') { "" } else { "," };
        *value = format!("{body}{sep}\"{column}\":{position}}}").into_bytes();
    }
    if let Some(schema) = row.value_schema.as_mut()
        && let SchemaKind::Struct(fields) = &schema.kind
    {
        let mut fields = fields.clone();
        fields.push(Field {
            name: column.to_string(),
            schema: Schema::int64(),
        });
        let mut with = (**schema).clone();
        with.kind = SchemaKind::Struct(fields);
        *schema = Arc::new(with);
    }
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
        ), ChangeGuard::None)
        .unwrap()
        .unwrap();
        assert_eq!(
            c.record.value.as_deref(),
            Some(br#"{"id":1,"amount":12.50}"#.as_slice())
        );
        assert_eq!(c.source.table.as_deref(), Some("orders"));
        let d = unwrap(
            &record(r#"{"before":{"id":1},"after":null,"source":{"table":"orders"},"op":"d"}"#),
            ChangeGuard::Lsn,
        )
        .unwrap()
        .unwrap();
        assert_eq!(d.record.value, None);
        assert!(
            unwrap(&record(r#"{"id":1}"#), ChangeGuard::None)
                .unwrap()
                .is_none()
        );
        let t = unwrap(
            &record(r#"{"before":null,"after":null,"op":"t"}"#),
            ChangeGuard::None,
        );
        assert!(t.unwrap().unwrap().truncate);
    }

    #[test]
    fn the_guard_adds_the_source_position_to_the_row() {
        let event = r#"{"before":null,"after":{"id":1},"source":{"table":"orders","lsn":4242,"ts_ms":7},"op":"u"}"#;
        let u = unwrap(&record(event), ChangeGuard::Lsn).unwrap().unwrap();
        assert_eq!(
            u.record.value.as_deref(),
            Some(br#"{"id":1,"__source_lsn":4242}"#.as_slice())
        );
        let u = unwrap(&record(event), ChangeGuard::TsMs).unwrap().unwrap();
        assert_eq!(
            u.record.value.as_deref(),
            Some(br#"{"id":1,"__source_ts_ms":7}"#.as_slice())
        );
        let no_lsn = r#"{"before":null,"after":{"id":1},"source":{"table":"orders"},"op":"c"}"#;
        let err = unwrap(&record(no_lsn), ChangeGuard::Lsn).err().unwrap();
        assert!(err.message.contains("no source.lsn"), "{}", err.message);
    }
}
