//! Debezium's change-event envelope: each captured table's key, row and
//! envelope schemas, and the records of its events.

use std::sync::Arc;

use sluice_sdk::{Schema, SourceRecord};

use crate::catalog::TableInfo;
use crate::config::CdcConfig;
use crate::json::Json;
use crate::types::{DecimalMode, Form};

/// The `version` Debezium's events carry in `source.version`: the
/// Debezium release whose event format this connector writes.
pub const DEBEZIUM_VERSION: &str = "3.6.1.Final";
pub const SOURCE_SCHEMA: &str = "io.debezium.connector.postgresql.Source";
/// What a column that PostgreSQL did not send holds (an unchanged TOASTed
/// value): Debezium's `unavailable.value.placeholder`.
pub const UNAVAILABLE: &str = "__debezium_unavailable_value";

/// `op` of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Create,
    Update,
    Delete,
    Truncate,
}

impl Op {
    pub fn code(self) -> &'static str {
        match self {
            Op::Read => "r",
            Op::Create => "c",
            Op::Update => "u",
            Op::Delete => "d",
            Op::Truncate => "t",
        }
    }
}

/// A captured table with its schemas, built once per shape of the table.
#[derive(Debug)]
pub struct Table {
    pub info: TableInfo,
    pub topic: String,
    /// Indexes of the key's columns in `info.columns`.
    pub key_columns: Vec<usize>,
    pub key_schema: Option<Arc<Schema>>,
    pub value_schema: Arc<Schema>,
}

/// The `source` block's varying part.
#[derive(Debug, Clone)]
pub struct SourcePosition {
    /// Commit time (streaming) or snapshot time, in microseconds.
    pub ts_us: i64,
    /// `true`, `first`, `last`, ... during a snapshot; `false` streaming.
    pub snapshot: &'static str,
    pub tx_id: Option<i64>,
    pub lsn: Option<u64>,
    /// Where the previous transaction ended (none for the first since the
    /// task started, and in a snapshot) and this event's LSN.
    pub sequence: Option<(Option<u64>, u64)>,
}

impl Table {
    pub fn new(info: TableInfo, cfg: &CdcConfig) -> Table {
        let topic = cfg.topic(&info.schema, &info.name);
        let key_columns: Vec<usize> = info
            .primary_key
            .iter()
            .filter_map(|k| info.columns.iter().position(|c| &c.name == k))
            .collect();
        let column_schema = |i: usize| {
            let c = &info.columns[i];
            let s = c.ty.schema(cfg.decimals);
            if c.nullable { s.optional() } else { s }
        };
        let key_schema = (!key_columns.is_empty()).then(|| {
            Arc::new(
                Schema::structure(
                    key_columns
                        .iter()
                        .map(|&i| (info.columns[i].name.clone(), column_schema(i))),
                )
                .named(format!("{topic}.Key")),
            )
        });
        let row = Schema::structure(
            (0..info.columns.len()).map(|i| (info.columns[i].name.clone(), column_schema(i))),
        )
        .named(format!("{topic}.Value"))
        .optional();
        let value_schema = Arc::new(envelope_schema(&topic, row));
        Table {
            info,
            topic,
            key_columns,
            key_schema,
            value_schema,
        }
    }
}

fn envelope_schema(topic: &str, row: Schema) -> Schema {
    let optional_i64 = || Schema::int64().optional();
    Schema::structure([
        ("before", row.clone()),
        ("after", row),
        ("source", source_schema()),
        ("transaction", transaction_schema()),
        ("op", Schema::string()),
        ("ts_ms", optional_i64()),
        ("ts_us", optional_i64()),
        ("ts_ns", optional_i64()),
    ])
    .named(format!("{topic}.Envelope"))
    .version(2)
}

fn source_schema() -> Schema {
    let mut snapshot = Schema::string()
        .optional()
        .named("io.debezium.data.Enum")
        .version(1);
    snapshot.parameters.push((
        "allowed".into(),
        "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental".into(),
    ));
    snapshot.default = Some("\"false\"".into());
    Schema::structure([
        ("version", Schema::string()),
        ("connector", Schema::string()),
        ("name", Schema::string()),
        ("ts_ms", Schema::int64()),
        ("snapshot", snapshot),
        ("db", Schema::string()),
        ("sequence", Schema::string().optional()),
        ("ts_us", Schema::int64().optional()),
        ("ts_ns", Schema::int64().optional()),
        ("schema", Schema::string()),
        ("table", Schema::string()),
        ("txId", Schema::int64().optional()),
        ("lsn", Schema::int64().optional()),
        ("xmin", Schema::int64().optional()),
        // The replication origin of a change applied by another server's
        // logical replication; null here, as Debezium writes it unless
        // origin filtering is configured.
        ("origin", Schema::string().optional()),
        ("origin_lsn", Schema::int64().optional()),
    ])
    .named(SOURCE_SCHEMA)
    .version(1)
}

fn transaction_schema() -> Schema {
    Schema::structure([
        ("id", Schema::string()),
        ("total_order", Schema::int64()),
        ("data_collection_order", Schema::int64()),
    ])
    .named("event.block")
    .version(1)
    .optional()
}

/// A row's values, in column order; `None` for a column PostgreSQL did
/// not send (an unchanged TOASTed value).
pub type RowText = Vec<Option<ColumnText>>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnText {
    Null,
    Text(String),
    /// Not sent: unchanged and stored out of line.
    Unchanged,
}

/// What builds one table's records.
pub struct EventWriter<'a> {
    pub cfg: &'a CdcConfig,
    pub key_form: Form,
    pub value_form: Form,
    pub key_schemas: bool,
    pub value_schemas: bool,
}

impl EventWriter<'_> {
    fn row(&self, table: &Table, row: &RowText, form: Form) -> Result<Json, String> {
        let mut fields = Vec::with_capacity(table.info.columns.len());
        for (i, c) in table.info.columns.iter().enumerate() {
            let value = match row.get(i).cloned().flatten() {
                Some(ColumnText::Text(t)) => {
                    c.ty.value(&t, self.cfg.decimals, form).map_err(|e| {
                        format!("column `{}` of {}: {e}", c.name, table.info.full_name())
                    })?
                }
                Some(ColumnText::Unchanged) => unavailable(&c.ty, self.cfg.decimals),
                Some(ColumnText::Null) | None if !c.nullable => {
                    c.ty.fallback(self.cfg.decimals, form)
                }
                Some(ColumnText::Null) | None => Json::Null,
            };
            fields.push((c.name.clone(), value));
        }
        Ok(Json::Object(fields))
    }

    fn key(&self, table: &Table, row: &RowText) -> Result<Option<Json>, String> {
        if table.key_columns.is_empty() {
            return Ok(None);
        }
        let mut fields = Vec::with_capacity(table.key_columns.len());
        for &i in &table.key_columns {
            let c = &table.info.columns[i];
            let value = match row.get(i).cloned().flatten() {
                Some(ColumnText::Text(t)) => {
                    c.ty.value(&t, self.cfg.decimals, self.key_form)
                        .map_err(|e| {
                            format!("key column `{}` of {}: {e}", c.name, table.info.full_name())
                        })?
                }
                _ => Json::Null,
            };
            fields.push((c.name.clone(), value));
        }
        Ok(Some(Json::Object(fields)))
    }

    fn source(&self, table: &Table, at: &SourcePosition) -> Json {
        let opt = |v: Option<i64>| v.map(Json::int).unwrap_or(Json::Null);
        Json::Object(vec![
            ("version".into(), Json::str(DEBEZIUM_VERSION)),
            ("connector".into(), Json::str("postgresql")),
            ("name".into(), Json::str(&self.cfg.topic_prefix)),
            ("ts_ms".into(), Json::int(at.ts_us.div_euclid(1000))),
            ("snapshot".into(), Json::str(at.snapshot)),
            ("db".into(), Json::str(&self.cfg.dbname)),
            (
                "sequence".into(),
                at.sequence
                    .map(|(last, lsn)| {
                        let last = last.map(|l| format!("\"{l}\"")).unwrap_or("null".into());
                        Json::String(format!("[{last},\"{lsn}\"]"))
                    })
                    .unwrap_or(Json::Null),
            ),
            ("ts_us".into(), Json::int(at.ts_us)),
            ("ts_ns".into(), Json::int(at.ts_us.saturating_mul(1000))),
            ("schema".into(), Json::str(&table.info.schema)),
            ("table".into(), Json::str(&table.info.name)),
            ("txId".into(), opt(at.tx_id)),
            ("lsn".into(), opt(at.lsn.map(|l| l as i64))),
            ("xmin".into(), Json::Null),
            ("origin".into(), Json::Null),
            ("origin_lsn".into(), Json::Null),
        ])
    }

    /// The records of one change: the event and, after a delete, its
    /// tombstone. `offset` is the source offset both carry.
    #[allow(clippy::too_many_arguments)]
    pub fn records(
        &self,
        table: &Table,
        op: Op,
        before: Option<&RowText>,
        after: Option<&RowText>,
        at: &SourcePosition,
        offset: &serde_json::Value,
        processed_us: i64,
    ) -> Result<Vec<SourceRecord>, String> {
        let key_row = after.or(before);
        let key = match key_row {
            Some(row) if op != Op::Truncate => self.key(table, row)?,
            _ => None,
        };
        let before = before
            .map(|r| self.row(table, r, self.value_form))
            .transpose()?
            .unwrap_or(Json::Null);
        let after = after
            .map(|r| self.row(table, r, self.value_form))
            .transpose()?
            .unwrap_or(Json::Null);
        let value = Json::Object(vec![
            ("before".into(), before),
            ("after".into(), after),
            ("source".into(), self.source(table, at)),
            ("transaction".into(), Json::Null),
            ("op".into(), Json::str(op.code())),
            ("ts_ms".into(), Json::int(processed_us.div_euclid(1000))),
            ("ts_us".into(), Json::int(processed_us)),
            ("ts_ns".into(), Json::int(processed_us.saturating_mul(1000))),
        ]);
        let key_bytes = key.as_ref().map(Json::to_bytes);
        // No key (a truncate, a table without one): null, with no schema.
        let key_schema = if self.key_schemas && key.is_some() {
            table.key_schema.clone()
        } else {
            None
        };
        let record = |value: Option<Vec<u8>>, value_schema: Option<Arc<Schema>>| SourceRecord {
            source_partition: self.cfg.source_partition(),
            source_offset: offset.clone(),
            topic: table.topic.clone(),
            key: key_bytes.clone(),
            value,
            headers: Vec::new(),
            timestamp: Some(processed_us.div_euclid(1000)),
            key_schema: key_schema.clone(),
            value_schema,
        };
        let value_schema = self.value_schemas.then(|| table.value_schema.clone());
        let mut out = vec![record(Some(value.to_bytes()), value_schema)];
        // Debezium writes the tombstone of a table without a key too (a
        // null key): consumers that count on one after each delete get it.
        if op == Op::Delete && self.cfg.tombstones {
            out.push(record(None, None));
        }
        Ok(out)
    }
}

/// The placeholder of a value PostgreSQL did not send, in the column's
/// type where it can hold one (text and bytes), else null.
fn unavailable(ty: &crate::types::PgType, decimals: DecimalMode) -> Json {
    use crate::types::PgType;
    let _ = decimals;
    match ty {
        PgType::Text | PgType::Json | PgType::Xml | PgType::Uuid => Json::str(UNAVAILABLE),
        PgType::Bytea => {
            use base64::Engine;
            Json::String(base64::engine::general_purpose::STANDARD.encode(UNAVAILABLE))
        }
        PgType::Array(item) if matches!(**item, PgType::Text) => {
            Json::Array(vec![Json::str(UNAVAILABLE)])
        }
        _ => Json::Null,
    }
}

/// Debezium's heartbeat record: key `{serverName}`, value `{ts_ms}`.
pub fn heartbeat(
    cfg: &CdcConfig,
    offset: &serde_json::Value,
    now_ms: i64,
    key_schemas: bool,
    value_schemas: bool,
) -> SourceRecord {
    let key_schema = Schema::structure([("serverName", Schema::string())])
        .named("io.debezium.connector.common.ServerNameKey")
        .version(1);
    let value_schema = Schema::structure([("ts_ms", Schema::int64())])
        .named("io.debezium.connector.common.Heartbeat")
        .version(1);
    SourceRecord {
        source_partition: cfg.source_partition(),
        source_offset: offset.clone(),
        topic: cfg.heartbeat_topic(),
        key: Some(
            Json::Object(vec![("serverName".into(), Json::str(&cfg.topic_prefix))]).to_bytes(),
        ),
        value: Some(Json::Object(vec![("ts_ms".into(), Json::int(now_ms))]).to_bytes()),
        headers: Vec::new(),
        timestamp: Some(now_ms),
        key_schema: key_schemas.then(|| Arc::new(key_schema)),
        value_schema: value_schemas.then(|| Arc::new(value_schema)),
    }
}
