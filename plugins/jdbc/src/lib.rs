//! `jdbc-sink`: writes JSON records into SQL tables with Confluent's JDBC
//! sink keys. Idempotent with `insert.mode=upsert`, guarded against stale
//! replays with `upsert.guard.column`, one batched statement per table per
//! batch, and exactly-once by storing the consumed offsets in the same
//! database transaction as the rows.
//!
//! Databases: SQLite (the embedded default), PostgreSQL, MySQL and MariaDB.

mod change_event;
mod db;
mod dialect;
mod native_pg;
mod schema;
pub mod source;
// Public for the fuzz targets (`fuzz/`), not an API.
#[doc(hidden)]
pub mod value;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use sluice_sdk::config::from_string_map;
use sluice_sdk::{
    CommitOffset, ConfigError, ConfigMap, ConnectError, ConnectorType, PartitionOffset, PluginInfo,
    Record, Schema, SchemaKind, SinkConnector, SinkTask, TaskContext,
};
use tracing::{Instrument, debug_span};

pub use db::{Column, Pool, Target, classify, redact_url};
pub use dialect::{Dialect, WriteMode};
pub use source::JdbcSourceConnector;
use value::{ColumnKind, KeyRef, ParsedValue, SqlValue};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InsertMode {
    Insert,
    Upsert,
    Update,
}

pub use change_event::ChangeGuard;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PkMode {
    None,
    Kafka,
    RecordKey,
    RecordValue,
}

/// Keys of the `jdbc-sink` connector (Confluent JDBC sink names, plus
/// Sluice's `upsert.guard.column`, `auto.create.column.<name>.type`,
/// `offsets.table.name` and `connection.pool.size`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JdbcSinkConfig {
    /// `jdbc:sqlite:PATH`, `jdbc:postgresql://HOST:PORT/DB`,
    /// `jdbc:mysql://HOST:PORT/DB` (or `jdbc:mariadb:`), or the same
    /// without `jdbc:`.
    #[serde(rename = "connection.url")]
    pub connection_url: String,
    #[serde(rename = "connection.user", default)]
    pub connection_user: Option<String>,
    #[serde(rename = "connection.password", default)]
    pub connection_password: Option<String>,
    #[serde(rename = "connection.pool.size", default = "default_pool_size")]
    pub pool_size: u32,
    #[serde(rename = "table.name.format", default = "default_table_format")]
    pub table_name_format: String,
    #[serde(rename = "insert.mode", default = "default_insert_mode")]
    pub insert_mode: InsertMode,
    #[serde(rename = "pk.mode", default = "default_pk_mode")]
    pub pk_mode: PkMode,
    #[serde(rename = "pk.fields", default)]
    pub pk_fields: Vec<String>,
    #[serde(rename = "fields.whitelist", default)]
    pub fields_whitelist: Vec<String>,
    #[serde(rename = "auto.create", default)]
    pub auto_create: bool,
    #[serde(rename = "auto.evolve", default)]
    pub auto_evolve: bool,
    #[serde(rename = "delete.enabled", default)]
    pub delete_enabled: bool,
    /// Debezium's `truncate.enabled`: a truncate change event empties its
    /// table (in the batch's transaction).
    #[serde(rename = "truncate.enabled", default)]
    pub truncate_enabled: bool,
    /// Write a row only if this column's incoming value is newer than the
    /// stored one, so an old replay never overwrites newer data.
    #[serde(rename = "upsert.guard.column", default)]
    pub guard_column: Option<String>,
    /// Where exactly-once tasks keep their offsets.
    #[serde(rename = "offsets.table.name", default = "default_offsets_table")]
    pub offsets_table: String,
    /// Debezium change events: a column holding each row's source LSN
    /// (or `ts_ms`), used as the upsert guard so an older event never
    /// overwrites a newer one.
    #[serde(rename = "change.events.guard", default = "default_change_guard")]
    pub change_guard: ChangeGuard,
    /// Most rows per SQL statement on SQLite and MySQL (PostgreSQL writes
    /// a batch in one statement).
    #[serde(rename = "batch.size", default = "default_batch_size")]
    pub batch_size: usize,
    /// `auto.create.column.<name>.type`: declared types for created or
    /// added columns, instead of inferring them from JSON values.
    #[serde(skip)]
    pub column_types: BTreeMap<String, String>,
}

fn default_pool_size() -> u32 {
    4
}
fn default_table_format() -> String {
    "${topic}".into()
}
fn default_insert_mode() -> InsertMode {
    InsertMode::Insert
}
fn default_pk_mode() -> PkMode {
    PkMode::None
}
fn default_batch_size() -> usize {
    3000
}
fn default_change_guard() -> ChangeGuard {
    ChangeGuard::None
}
fn default_offsets_table() -> String {
    "sluice_offsets".into()
}

const KAFKA_PK_FIELDS: [&str; 3] = ["__connect_topic", "__connect_partition", "__connect_offset"];
const COLUMN_TYPE_PREFIX: &str = "auto.create.column.";

impl JdbcSinkConfig {
    pub fn parse(config: &ConfigMap) -> Result<Self, ConfigError> {
        let mut column_types = BTreeMap::new();
        let mut rest = ConfigMap::new();
        for (k, v) in config {
            match k
                .strip_prefix(COLUMN_TYPE_PREFIX)
                .and_then(|c| c.strip_suffix(".type"))
            {
                Some(column) if !column.is_empty() => {
                    if v.trim().is_empty() || v.contains(';') {
                        return Err(ConfigError::new(
                            k.as_str(),
                            "must be a column type such as NUMERIC(12,2) or TIMESTAMPTZ",
                        ));
                    }
                    column_types.insert(column.to_string(), v.trim().to_string());
                }
                _ => {
                    rest.insert(k.clone(), v.clone());
                }
            }
        }
        let mut cfg: Self = from_string_map(&rest)?;
        cfg.column_types = column_types;
        Target::parse(&cfg.connection_url)?;
        if cfg.batch_size == 0 {
            return Err(ConfigError::new("batch.size", "must be at least 1"));
        }
        if cfg.pool_size == 0 {
            return Err(ConfigError::new(
                "connection.pool.size",
                "must be at least 1",
            ));
        }
        match cfg.pk_mode {
            PkMode::None if cfg.insert_mode != InsertMode::Insert => {
                return Err(ConfigError::new(
                    "pk.mode",
                    "insert.mode=upsert and insert.mode=update need a primary key: set pk.mode to record_key, record_value or kafka",
                ));
            }
            PkMode::None if !cfg.pk_fields.is_empty() => {
                return Err(ConfigError::new(
                    "pk.fields",
                    "is only used when pk.mode is not none",
                ));
            }
            PkMode::RecordValue if cfg.pk_fields.is_empty() => {
                return Err(ConfigError::new(
                    "pk.fields",
                    "pk.mode=record_value needs the value fields that form the primary key",
                ));
            }
            PkMode::Kafka => {
                if cfg.pk_fields.is_empty() {
                    cfg.pk_fields = KAFKA_PK_FIELDS.iter().map(|s| s.to_string()).collect();
                } else if cfg.pk_fields.len() != 3 {
                    return Err(ConfigError::new(
                        "pk.fields",
                        "pk.mode=kafka takes exactly three names (topic, partition, offset columns)",
                    ));
                }
            }
            _ => {}
        }
        if cfg.delete_enabled && cfg.pk_mode != PkMode::RecordKey {
            return Err(ConfigError::new(
                "delete.enabled",
                "deletes find the row by the record's key: set pk.mode=record_key",
            ));
        }
        if let Some(column) = cfg.change_guard.column() {
            if cfg.insert_mode != InsertMode::Upsert {
                return Err(ConfigError::new(
                    "change.events.guard",
                    "guards upserts of change events: set insert.mode=upsert",
                ));
            }
            match &cfg.guard_column {
                Some(g) if g != column => {
                    return Err(ConfigError::new(
                        "upsert.guard.column",
                        format!(
                            "with change.events.guard the guard column is `{column}`: leave upsert.guard.column unset"
                        ),
                    ));
                }
                _ => cfg.guard_column = Some(column.to_string()),
            }
        }
        if let Some(guard) = &cfg.guard_column {
            if guard.trim().is_empty() {
                return Err(ConfigError::new(
                    "upsert.guard.column",
                    "must name a column",
                ));
            }
            if cfg.insert_mode == InsertMode::Insert {
                return Err(ConfigError::new(
                    "upsert.guard.column",
                    "guards updates of existing rows: set insert.mode to upsert or update",
                ));
            }
            if cfg.pk_fields.contains(guard) {
                return Err(ConfigError::new(
                    "upsert.guard.column",
                    "cannot be a primary-key column",
                ));
            }
        }
        if cfg.table_name_format.trim().is_empty() {
            return Err(ConfigError::new("table.name.format", "must not be empty"));
        }
        if cfg.offsets_table.trim().is_empty() {
            return Err(ConfigError::new("offsets.table.name", "must not be empty"));
        }
        Ok(cfg)
    }

    /// The table of a record of `topic`; a change event's source fills
    /// `${source.db}`, `${source.schema}` and `${source.table}`.
    fn table_for(&self, topic: &str, source: Option<&change_event::SourceBlock>) -> String {
        let mut table = self.table_name_format.replace("${topic}", topic);
        if table.contains("${source.") {
            // A record that is not an event (a delete's tombstone) names its
            // table by its topic, Debezium's `<prefix>.<schema>.<table>`.
            let from_topic;
            let source = match source {
                Some(s) => s,
                None => {
                    let mut parts = topic.rsplit('.');
                    from_topic = change_event::SourceBlock {
                        table: parts.next().map(str::to_string),
                        schema: parts.next().map(str::to_string),
                        ..Default::default()
                    };
                    &from_topic
                }
            };
            let field = |f: &Option<String>| f.as_deref().unwrap_or_default().to_string();
            table = table
                .replace("${source.db}", &field(&source.db))
                .replace("${source.schema}", &field(&source.schema))
                .replace("${source.table}", &field(&source.table));
        }
        table
    }

    fn write_mode(&self) -> WriteMode {
        match self.insert_mode {
            InsertMode::Insert => WriteMode::Insert,
            InsertMode::Upsert => WriteMode::Upsert,
            InsertMode::Update => WriteMode::Update,
        }
    }

    async fn connect(&self) -> Result<Pool, ConnectError> {
        Pool::connect(
            &self.connection_url,
            self.connection_user.as_deref(),
            self.connection_password.as_deref(),
            self.pool_size,
            true,
        )
        .await
    }
}

pub struct JdbcSinkConnector;

#[async_trait]
impl SinkConnector for JdbcSinkConnector {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            class: "jdbc-sink",
            aliases: &[
                "JdbcSinkConnector",
                "JdbcSink",
                "io.confluent.connect.jdbc.JdbcSinkConnector",
            ],
            kind: ConnectorType::Sink,
            version: env!("CARGO_PKG_VERSION"),
            description: "Writes records into SQLite, PostgreSQL, MySQL or MariaDB tables: idempotent upserts, deletes, exactly-once with offsets in the same transaction",
        }
    }

    fn config_definition(&self) -> serde_json::Value {
        serde_json::json!([
            {"name": "connection.url", "type": "STRING", "required": true, "default_value": null, "documentation": "jdbc:sqlite:PATH, jdbc:postgresql://HOST:PORT/DB, jdbc:mysql://HOST:PORT/DB or jdbc:mariadb://HOST:PORT/DB (jdbc: is optional)"},
            {"name": "connection.user", "type": "STRING", "required": false, "default_value": null, "documentation": "Database user"},
            {"name": "connection.password", "type": "PASSWORD", "required": false, "default_value": null, "documentation": "Database password (never shown back)"},
            {"name": "connection.pool.size", "type": "INT", "required": false, "default_value": "4", "documentation": "Connections per task"},
            {"name": "table.name.format", "type": "STRING", "required": false, "default_value": "${topic}", "documentation": "Table name; ${topic} is replaced by the record's topic, and for Debezium change events ${source.db}, ${source.schema} and ${source.table} by the source's"},
            {"name": "insert.mode", "type": "STRING", "required": false, "default_value": "insert", "documentation": "insert, upsert (insert or update by key) or update (existing rows only)"},
            {"name": "pk.mode", "type": "STRING", "required": false, "default_value": "none", "documentation": "none, kafka, record_key or record_value"},
            {"name": "pk.fields", "type": "LIST", "required": false, "default_value": "", "documentation": "Primary-key fields"},
            {"name": "fields.whitelist", "type": "LIST", "required": false, "default_value": "", "documentation": "Only these value fields become columns"},
            {"name": "auto.create", "type": "BOOLEAN", "required": false, "default_value": "false", "documentation": "Create missing tables from the batch's fields"},
            {"name": "auto.evolve", "type": "BOOLEAN", "required": false, "default_value": "false", "documentation": "Add missing columns (nullable) for new fields"},
            {"name": "auto.create.column.<name>.type", "type": "STRING", "required": false, "default_value": null, "documentation": "Declared type of a created or added column, instead of the type inferred from JSON"},
            {"name": "delete.enabled", "type": "BOOLEAN", "required": false, "default_value": "false", "documentation": "A tombstone (null value) deletes the row with the record's key; needs pk.mode=record_key"},
            {"name": "truncate.enabled", "type": "BOOLEAN", "required": false, "default_value": "false", "documentation": "A truncate change event (op t) empties its table"},
            {"name": "upsert.guard.column", "type": "STRING", "required": false, "default_value": null, "documentation": "Update a row only when this column's incoming value is greater than the stored one"},
            {"name": "change.events.guard", "type": "STRING", "required": false, "default_value": "none", "documentation": "Debezium change events: lsn or ts_ms keeps the source's position in __source_lsn (__source_ts_ms) and updates a row only from a newer event"},
            {"name": "offsets.table.name", "type": "STRING", "required": false, "default_value": "sluice_offsets", "documentation": "Table for offsets stored with the rows (delivery.guarantee=exactly-once)"},
            {"name": "batch.size", "type": "INT", "required": false, "default_value": "3000", "documentation": "Most rows per SQL statement on SQLite and MySQL"},
        ])
    }

    fn validate(&self, config: &ConfigMap) -> Result<(), ConfigError> {
        JdbcSinkConfig::parse(config).map(|_| ())
    }

    fn supports_exactly_once(&self, _config: &ConfigMap) -> bool {
        true
    }

    fn create_task(
        &self,
        config: &ConfigMap,
        context: TaskContext,
    ) -> Result<Box<dyn SinkTask>, ConnectError> {
        let cfg = JdbcSinkConfig::parse(config).map_err(|e| ConnectError::fatal(e.to_string()))?;
        let cfg = Arc::new(cfg);
        Ok(Box::new(JdbcSinkTask {
            planner: Planner {
                pk_fields: cfg.pk_fields.clone().into(),
                dialect: Target::parse(&cfg.connection_url)
                    .map_err(|e| ConnectError::fatal(e.to_string()))?
                    .dialect(),
                cfg: cfg.clone(),
            },
            cfg,
            context,
            pool: None,
            tables: HashMap::new(),
            tx: TxState::Idle,
            offsets_table_ready: false,
        }))
    }

    /// Exactly-once tasks resume from the offsets table, so a reset or an
    /// alteration must change it too (when it exists).
    async fn alter_offsets(
        &self,
        config: &ConfigMap,
        connector: &str,
        offsets: &[(String, i32, Option<i64>)],
    ) -> Result<bool, ConnectError> {
        let mut cfg =
            JdbcSinkConfig::parse(config).map_err(|e| ConnectError::fatal(e.to_string()))?;
        cfg.pool_size = 1;
        let pool = cfg.connect().await?;
        let result = async {
            let mut tx = pool.begin().await?;
            if tx.conn().describe(&cfg.offsets_table).await?.is_empty() {
                return Ok(false);
            }
            for (topic, partition, offset) in offsets {
                match offset {
                    Some(o) => {
                        tx.conn()
                            .store_offsets(
                                &cfg.offsets_table,
                                connector,
                                &[(topic.clone(), *partition, *o)],
                            )
                            .await?
                    }
                    None => {
                        tx.conn()
                            .delete_offset(&cfg.offsets_table, connector, topic, *partition)
                            .await?
                    }
                }
            }
            tx.commit().await?;
            Ok(true)
        }
        .await
        .map_err(|e| classify(format!("changing offsets in `{}`", cfg.offsets_table), e));
        pool.close().await;
        result
    }
}

/// Columns of a table as the database has them.
#[derive(Debug, Clone, Default)]
struct TableInfo {
    columns: Vec<Column>,
    /// Each column's place in `columns`, by name.
    by_name: HashMap<String, usize>,
}

impl TableInfo {
    fn new(columns: Vec<Column>) -> Self {
        let by_name = columns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), i))
            .collect();
        Self { columns, by_name }
    }

    fn column(&self, name: &str) -> Option<&Column> {
        self.by_name.get(name).map(|&i| &self.columns[i])
    }

    /// `values` of the columns `names`, each coerced to its column's kind
    /// where it can be (what is left as it was fails later, with its error).
    fn coerced(&self, names: &[String], values: &[SqlValue]) -> Vec<SqlValue> {
        names
            .iter()
            .zip(values)
            .map(|(name, v)| match self.column(name) {
                Some(c) => v.clone().coerce(c.kind).unwrap_or_else(|_| v.clone()),
                None => v.clone(),
            })
            .collect()
    }
}

/// The exactly-once transaction between `begin` and `commit`/`rollback`.
enum TxState {
    /// No transaction: each `put` commits by itself (at-least-once).
    Idle,
    /// `begin` was called; the database transaction starts at the first
    /// statement (so MySQL's DDL, which commits implicitly, runs before).
    Open(Option<db::Tx>),
    /// The connection failed inside the transaction: everything of it is
    /// lost, and the runtime must redo it from `begin`.
    Broken,
}

struct JdbcSinkTask {
    cfg: Arc<JdbcSinkConfig>,
    planner: Planner,
    context: TaskContext,
    pool: Option<Pool>,
    tables: HashMap<String, TableInfo>,
    tx: TxState,
    offsets_table_ready: bool,
}

/// One record turned into named column values.
struct Row {
    columns: Vec<(String, SqlValue)>,
    /// Names of the primary-key columns, in key order.
    pk_names: Arc<[String]>,
    pk: Vec<SqlValue>,
    /// The guard column's value, when `upsert.guard.column` is set.
    guard: Option<SqlValue>,
    /// The record's schemas (`*.converter.schemas.enable=true`), which
    /// give new columns their types.
    schemas: Option<RowSchemas>,
}

/// Where a row's columns' schemas are: its first `from_key` columns come
/// from the key (or the record's coordinates), the rest from the value.
struct RowSchemas {
    key: Option<Arc<Schema>>,
    value: Option<Arc<Schema>>,
    from_key: usize,
}

impl RowSchemas {
    /// The schema of column `i`, named `name`.
    fn of(&self, i: usize, name: &str) -> Option<&Schema> {
        if i < self.from_key {
            let key = self.key.as_deref()?;
            return match &key.kind {
                SchemaKind::Struct(_) => key.field(name),
                // A primitive key is the one key column.
                _ => Some(key),
            };
        }
        self.value.as_deref()?.field(name)
    }
}

impl Row {
    /// The columns it writes, in order.
    fn column_names(&self) -> impl Iterator<Item = &String> {
        self.columns.iter().map(|(name, _)| name)
    }

    /// Column `i`'s schema, when the record has one.
    fn column_schema(&self, i: usize) -> Option<&Schema> {
        self.schemas.as_ref()?.of(i, &self.columns[i].0)
    }
}

/// What one record asks of its table.
enum Op {
    Write(Row),
    /// A tombstone with `delete.enabled`: the key's columns and values.
    Delete(Vec<String>, Vec<SqlValue>),
    /// A truncate change event with `truncate.enabled`: every row goes.
    /// Only ever first in a table's operations (what came before it in
    /// the batch is dropped when it is planned).
    Truncate,
}

/// A truncate change event's work: every row of `table` deleted (in the
/// batch's transaction; SQLite has no `TRUNCATE`).
async fn empty_table(conn: &mut db::Conn<'_>, table: &str) -> Result<(), ConnectError> {
    let sql = format!("DELETE FROM {}", conn.dialect().quote_table(table));
    conn.execute(&sql)
        .await
        .map(|_| ())
        .map_err(|e| classify(format!("emptying `{table}` (a truncate)"), e))
}

/// Which operations count when each key (`keys[i]` is `ops[i]`'s) keeps
/// only its last one, with a guard its newest write.
fn latest_per_key(ops: &[Op], keys: &[KeyRef]) -> Vec<bool> {
    let mut winner: HashMap<KeyRef, usize> = HashMap::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let key = keys[i];
        let replace = match (winner.get(&key).map(|&w| &ops[w]), op) {
            (Some(Op::Write(old)), Op::Write(new)) => match (&old.guard, &new.guard) {
                (Some(a), Some(b)) => !b.is_older_than(a),
                _ => true,
            },
            _ => true,
        };
        if replace {
            winner.insert(key, i);
        }
    }
    (0..ops.len())
        .map(|i| winner.get(&keys[i]) == Some(&i))
        .collect()
}

/// `ops` but those `keep` says not to.
fn kept(ops: Vec<Op>, keep: Vec<bool>) -> Vec<Op> {
    ops.into_iter()
        .zip(keep)
        .filter(|(_, keep)| *keep)
        .map(|(op, _)| op)
        .collect()
}

impl Op {
    /// The key as the record has it.
    fn key(&self) -> &[SqlValue] {
        match self {
            Op::Write(r) => &r.pk,
            Op::Delete(_, pk) => pk,
            Op::Truncate => &[],
        }
    }

    /// The key as the table stores it: `1`, `1.0` and `"1"` are one key
    /// to a BIGINT column.
    fn stored_key(&self, info: &TableInfo) -> Vec<SqlValue> {
        match self {
            Op::Write(r) => info.coerced(&r.pk_names, &r.pk),
            Op::Delete(names, pk) => info.coerced(names, pk),
            Op::Truncate => Vec::new(),
        }
    }
}

/// Rows that write the same columns: (column names, key names, values).
type StatementRows = (Vec<String>, Vec<String>, Vec<Vec<SqlValue>>);

/// Consecutive operations of one kind, run as batched statements.
enum Phase {
    Write(Vec<Row>),
    Delete(Vec<String>, Vec<Vec<SqlValue>>),
    Truncate,
}

/// Turns records into operations: the CPU-bound part of a `put`, run off
/// the async threads (a record may have a hundred thousand fields).
#[derive(Clone)]
struct Planner {
    cfg: Arc<JdbcSinkConfig>,
    /// The database's, from `connection.url`.
    dialect: Dialect,
    /// `pk.fields`, shared by every row that uses them.
    pk_fields: Arc<[String]>,
}

impl Planner {
    /// The key's columns, for `pk.mode=record_key`.
    fn key_columns(&self, record: &Record) -> Result<Vec<(String, SqlValue)>, ConnectError> {
        let key = record.key_json().map_err(|e| {
            ConnectError::data(format!("key of {} is not JSON: {e}", record.coordinates()))
                .with_class("MalformedJson")
        })?;
        match key {
            serde_json::Value::Object(k) => {
                let names: Vec<String> = if self.cfg.pk_fields.is_empty() {
                    k.keys().cloned().collect()
                } else {
                    self.cfg.pk_fields.clone()
                };
                names
                    .into_iter()
                    .map(|name| {
                        let v = k.get(&name).ok_or_else(|| {
                            ConnectError::data(format!(
                                "key of {} has no field `{name}` named in pk.fields",
                                record.coordinates()
                            ))
                            .with_class("MissingPrimaryKey")
                        })?;
                        Ok((name, SqlValue::from_json(v)))
                    })
                    .collect()
            }
            serde_json::Value::Null => Err(ConnectError::data(format!(
                "record {} has no key but pk.mode=record_key",
                record.coordinates()
            ))
            .with_class("MissingPrimaryKey")),
            primitive => {
                let name = self.cfg.pk_fields.first().cloned().ok_or_else(|| {
                    ConnectError::fatal(
                        "pk.mode=record_key with a primitive key needs pk.fields to name its column",
                    )
                })?;
                Ok(vec![(name, SqlValue::from_json(&primitive))])
            }
        }
    }

    /// A tombstone with `delete.enabled`: delete the row with the record's key.
    fn delete_op(&self, record: &Record) -> Result<Op, ConnectError> {
        let key = self.key_columns(record)?;
        if key.iter().any(|(_, v)| *v == SqlValue::Null) {
            return Err(ConnectError::data(format!(
                "tombstone {} has a null key field; no row to delete",
                record.coordinates()
            ))
            .with_class("MissingPrimaryKey"));
        }
        let (names, values) = key.into_iter().unzip();
        Ok(Op::Delete(names, values))
    }

    fn op_from(&self, record: &Record) -> Result<Op, ConnectError> {
        let Some(bytes) = record.value.as_deref() else {
            if self.cfg.delete_enabled {
                return self.delete_op(record);
            }
            return Err(ConnectError::data(format!(
                "record {} is a tombstone (null value); set delete.enabled=true (with pk.mode=record_key) to delete rows",
                record.coordinates()
            ))
            .with_class("Tombstone"));
        };
        let fields = match ParsedValue::parse(bytes) {
            Ok(ParsedValue::Object(fields)) => fields,
            Ok(ParsedValue::Null) if self.cfg.delete_enabled => return self.delete_op(record),
            Ok(ParsedValue::Null) => {
                return Err(self.not_an_object(record, "null"));
            }
            Ok(ParsedValue::Other(what)) => return Err(self.not_an_object(record, what)),
            Err(e) => {
                return Err(ConnectError::data(format!(
                    "value of {} is not JSON: {e}",
                    record.coordinates()
                ))
                .with_class("MalformedJson"));
            }
        };
        let mut columns: Vec<(String, SqlValue)> = Vec::with_capacity(fields.len() + 3);
        let mut pk_names = match self.cfg.pk_mode {
            PkMode::None => Arc::from([]),
            _ => self.pk_fields.clone(),
        };
        match self.cfg.pk_mode {
            PkMode::Kafka => {
                columns.push((
                    self.cfg.pk_fields[0].clone(),
                    SqlValue::Text(record.topic.clone()),
                ));
                columns.push((
                    self.cfg.pk_fields[1].clone(),
                    SqlValue::Int(record.partition.into()),
                ));
                columns.push((self.cfg.pk_fields[2].clone(), SqlValue::Int(record.offset)));
            }
            PkMode::RecordKey => {
                let key = self.key_columns(record)?;
                pk_names = key.iter().map(|(n, _)| n.clone()).collect();
                columns.extend(key);
            }
            PkMode::None | PkMode::RecordValue => {}
        }
        // Columns taken from the key or the record's coordinates win over a
        // value field of the same name.
        let from_key = columns.len();
        for (field, v) in fields {
            let whitelisted =
                self.cfg.fields_whitelist.is_empty() || self.cfg.fields_whitelist.contains(&field);
            if whitelisted && !columns[..from_key].iter().any(|(c, _)| *c == field) {
                columns.push((field, v));
            }
        }
        let schemas = (record.value_schema.is_some()
            || (record.key_schema.is_some() && self.cfg.pk_mode == PkMode::RecordKey))
            .then(|| RowSchemas {
                key: match self.cfg.pk_mode {
                    PkMode::RecordKey => record.key_schema.clone(),
                    _ => None,
                },
                value: record.value_schema.clone(),
                from_key,
            });
        if let Some(schemas) = &schemas {
            // Logical values as their columns take them (dates as ISO
            // text, bytes as bytes).
            for (i, (name, v)) in columns.iter_mut().enumerate() {
                if let Some(s) = schemas.of(i, name) {
                    *v =
                        schema::column_value(self.dialect, s, std::mem::replace(v, SqlValue::Null))
                            .map_err(|e| {
                                ConnectError::data(format!(
                                    "field `{name}` of {}: {e}",
                                    record.coordinates()
                                ))
                                .with_class("InvalidValue")
                            })?;
                }
            }
        }
        let value_of = |name: &str| {
            columns
                .iter()
                .find(|(c, _)| c == name)
                .map(|(_, v)| v.clone())
        };
        let mut pk = Vec::with_capacity(pk_names.len());
        for name in pk_names.iter() {
            match value_of(name) {
                Some(SqlValue::Null) | None => {
                    return Err(ConnectError::data(format!(
                        "record {} has no value for primary-key field `{name}`",
                        record.coordinates()
                    ))
                    .with_class("MissingPrimaryKey"));
                }
                Some(v) => pk.push(v),
            }
        }
        let guard = match &self.cfg.guard_column {
            None => None,
            Some(g) => match value_of(g) {
                Some(SqlValue::Null) | None => {
                    return Err(ConnectError::data(format!(
                        "record {} has no value for `{g}`, the upsert.guard.column: without it the record cannot be ordered against the stored row",
                        record.coordinates()
                    ))
                    .with_class("MissingGuardValue"));
                }
                v => v,
            },
        };
        Ok(Op::Write(Row {
            columns,
            pk_names,
            pk,
            guard,
            schemas,
        }))
    }

    fn not_an_object(&self, record: &Record, what: &str) -> ConnectError {
        ConnectError::data(format!(
            "value of {} is JSON but not an object (got {what}); the JDBC sink maps object fields to columns",
            record.coordinates(),
        ))
        .with_class("NotAnObject")
    }

    /// Turns records into per-table operations; any bad record fails the put
    /// (the runtime then isolates it).
    fn plan(&self, records: &[Record]) -> Result<Vec<(String, Vec<Op>)>, ConnectError> {
        // (table, its place in by_table): batches hold few tables.
        let mut tables: Vec<(String, usize)> = Vec::new();
        let mut by_table: Vec<(String, Vec<Op>)> = Vec::new();
        for record in records {
            if record.key.is_none() && record.value.is_none() && self.cfg.delete_enabled {
                // Debezium's tombstone after the delete of a row without a
                // key: it names no row (the delete event did the work).
                continue;
            }
            // A change event is applied as its row (or its key's delete),
            // in the table of its source.
            let unwrapped = change_event::unwrap(record, self.cfg.change_guard)?;
            let (op, table) = match &unwrapped {
                Some(u) if u.truncate => {
                    if !self.cfg.truncate_enabled {
                        return Err(ConnectError::data(format!(
                            "change event {} is a truncate: set truncate.enabled=true to empty the table, or leave truncates out at the source (Debezium's default skipped.operations=t)",
                            record.coordinates()
                        ))
                        .with_class("UnsupportedChangeEvent"));
                    }
                    (
                        Op::Truncate,
                        self.cfg.table_for(&record.topic, Some(&u.source)),
                    )
                }
                Some(u) => (
                    self.op_from(&u.record)?,
                    self.cfg.table_for(&record.topic, Some(&u.source)),
                ),
                None => (
                    self.op_from(record)?,
                    self.cfg.table_for(&record.topic, None),
                ),
            };
            let slot = match tables.iter().find(|(t, _)| *t == table) {
                Some(&(_, slot)) => slot,
                None => {
                    // Writing there would overwrite the offsets stored with
                    // the data (case folded, as most databases fold names).
                    if table.eq_ignore_ascii_case(&self.cfg.offsets_table) {
                        return Err(ConnectError::data(format!(
                            "topic `{}` maps onto the offsets table `{table}` (offsets.table.name); route it elsewhere with table.name.format or a transform",
                            record.topic
                        ))
                        .with_class("OffsetsTableTarget"));
                    }
                    let slot = match by_table.iter().position(|(t, _)| *t == table) {
                        Some(slot) => slot,
                        None => {
                            by_table.push((table.clone(), Vec::new()));
                            by_table.len() - 1
                        }
                    };
                    tables.push((table, slot));
                    slot
                }
            };
            if matches!(op, Op::Truncate) {
                // What the batch wrote to the table before is emptied too.
                by_table[slot].1.clear();
            }
            by_table[slot].1.push(op);
        }
        // Only the last operation per key as written counts (the table is
        // made from what is written); `phases` compares the keys again as
        // the table stores them.
        if self.cfg.insert_mode != InsertMode::Insert {
            for (_, ops) in &mut by_table {
                let keys: Vec<KeyRef> = ops.iter().map(|op| KeyRef(op.key())).collect();
                let keep = latest_per_key(ops, &keys);
                *ops = kept(std::mem::take(ops), keep);
            }
        }
        Ok(by_table)
    }
}

impl JdbcSinkTask {
    /// Orders a table's operations into phases of batched statements.
    /// With a key (upsert, update), only the last operation per key as
    /// `info`'s columns store it counts (`1`, `1.0` and `"1"` are one
    /// BIGINT key), so all can run in two statements; inserts keep their
    /// order.
    fn phases(&self, ops: Vec<Op>, info: &TableInfo) -> Vec<Phase> {
        let ops = if self.cfg.insert_mode == InsertMode::Insert {
            ops
        } else {
            let stored: Vec<Vec<SqlValue>> = ops.iter().map(|op| op.stored_key(info)).collect();
            let keys: Vec<KeyRef> = stored.iter().map(|k| KeyRef(k)).collect();
            let keep = latest_per_key(&ops, &keys);
            kept(ops, keep)
        };
        let mut phases: Vec<Phase> = Vec::new();
        for op in ops {
            match (phases.last_mut(), op) {
                (Some(Phase::Write(rows)), Op::Write(row)) => rows.push(row),
                (Some(Phase::Delete(names, keys)), Op::Delete(n, key)) if *names == n => {
                    keys.push(key)
                }
                (_, Op::Write(row)) => phases.push(Phase::Write(vec![row])),
                (_, Op::Delete(names, key)) => phases.push(Phase::Delete(names, vec![key])),
                (_, Op::Truncate) => phases.push(Phase::Truncate),
            }
        }
        phases
    }

    async fn pool(&mut self) -> Result<&Pool, ConnectError> {
        if self.pool.is_none() {
            self.pool = Some(self.cfg.connect().await?);
        }
        Ok(self.pool.as_ref().expect("set above"))
    }

    /// The declared type for a new column.
    fn new_column_type(&self, dialect: Dialect, name: &str, kind: ColumnKind, key: bool) -> String {
        self.cfg
            .column_types
            .get(name)
            .cloned()
            .unwrap_or_else(|| dialect.type_name(kind, key).to_string())
    }

    /// Makes sure `table` exists with every column the batch writes:
    /// creating it (`auto.create`) or adding columns (`auto.evolve`).
    async fn prepare_table(
        &mut self,
        conn: &mut db::Conn<'_>,
        table: &str,
        ops: &[Op],
    ) -> Result<TableInfo, ConnectError> {
        let dialect = conn.dialect();
        // Each column the batch writes, with the kind of its first non-null
        // value, and where it is in `wanted`.
        let mut wanted: Vec<(String, Option<ColumnKind>)> = Vec::new();
        let mut wanted_at: HashMap<&str, usize> = HashMap::new();
        // A column's type and `NOT NULL` from the first record with a
        // schema for it (Confluent's JDBC sink's types).
        let mut declared: HashMap<&str, (String, bool)> = HashMap::new();
        let mut unknown_kinds = 0;
        let mut pk: Vec<String> = Vec::new();
        // Rows mostly repeat the previous row's fields: once every kind is
        // known, such a row adds nothing.
        let mut previous: Option<&Row> = None;
        for op in ops {
            match op {
                Op::Write(row) => {
                    if pk.is_empty() {
                        pk = row.pk_names.to_vec();
                    }
                    if unknown_kinds == 0
                        && previous.is_some_and(|p| p.column_names().eq(row.column_names()))
                    {
                        continue;
                    }
                    for (i, (name, v)) in row.columns.iter().enumerate() {
                        if !declared.contains_key(name.as_str())
                            && let Some(schema) = row.column_schema(i)
                        {
                            let is_key = row.pk_names.contains(name);
                            declared.insert(
                                name,
                                (schema::sql_type(dialect, schema, is_key), !schema.optional),
                            );
                        }
                        match wanted_at.get(name.as_str()) {
                            Some(&at) => {
                                if wanted[at].1.is_none() && v.kind().is_some() {
                                    wanted[at].1 = v.kind();
                                    unknown_kinds -= 1;
                                }
                            }
                            None => {
                                wanted_at.insert(name, wanted.len());
                                if v.kind().is_none() {
                                    unknown_kinds += 1;
                                }
                                wanted.push((name.clone(), v.kind()));
                            }
                        }
                    }
                    previous = Some(row);
                }
                Op::Delete(names, _) => {
                    if pk.is_empty() {
                        pk = names.clone();
                    }
                }
                Op::Truncate => {}
            }
        }
        let ctx = |what: &str| format!("{what} table `{table}`");
        let mut info = match self.tables.get(table) {
            Some(info) => info.clone(),
            None => TableInfo::new(
                conn.describe(table)
                    .await
                    .map_err(|e| classify(ctx("reading the columns of"), e))?,
            ),
        };
        if info.columns.is_empty() {
            if !self.cfg.auto_create {
                return Err(ConnectError::fatal(format!(
                    "table `{table}` does not exist and auto.create is false; create it or set auto.create=true"
                )));
            }
            let defs: Vec<(String, String)> = wanted
                .iter()
                .map(|(name, kind)| {
                    let is_key = pk.contains(name);
                    let ty = match (self.cfg.column_types.get(name), declared.get(name.as_str())) {
                        (None, Some((ty, not_null))) if *not_null && !is_key => {
                            format!("{ty} NOT NULL")
                        }
                        (None, Some((ty, _))) => ty.clone(),
                        _ => self.new_column_type(
                            dialect,
                            name,
                            kind.unwrap_or(ColumnKind::Text),
                            is_key,
                        ),
                    };
                    (name.clone(), ty)
                })
                .collect();
            conn.execute(&dialect.create_table(table, &defs, &pk))
                .await
                .map_err(|e| classify(ctx("creating"), e))?;
            tracing::info!(table, columns = defs.len(), "created table (auto.create)");
            info = TableInfo::new(
                conn.describe(table)
                    .await
                    .map_err(|e| classify(ctx("reading the columns of"), e))?,
            );
        }
        let missing: Vec<&(String, Option<ColumnKind>)> = wanted
            .iter()
            .filter(|(n, _)| info.column(n).is_none())
            .collect();
        if !missing.is_empty() {
            if !self.cfg.auto_evolve {
                let names: Vec<&str> = missing.iter().map(|(n, _)| n.as_str()).collect();
                return Err(ConnectError::data(format!(
                    "table `{table}` has no column {} and auto.evolve is false; add the column or set auto.evolve=true",
                    names
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .with_class("UnknownColumn"));
            }
            for (name, kind) in missing {
                // Added columns are nullable, schema or not: rows already
                // written have no value for them.
                let ty = match (self.cfg.column_types.get(name), declared.get(name.as_str())) {
                    (None, Some((ty, _))) => ty.clone(),
                    _ => {
                        self.new_column_type(dialect, name, kind.unwrap_or(ColumnKind::Text), false)
                    }
                };
                // On PostgreSQL a failed statement aborts the transaction:
                // behind a savepoint, the table can still be read after.
                let savepoint = dialect == Dialect::Postgres;
                if savepoint {
                    conn.execute("SAVEPOINT sluice_ddl")
                        .await
                        .map_err(|e| classify(ctx("altering"), e))?;
                }
                let added = conn.execute(&dialect.add_column(table, name, &ty)).await;
                if savepoint {
                    let step = match added {
                        Ok(_) => "RELEASE SAVEPOINT sluice_ddl",
                        Err(_) => "ROLLBACK TO SAVEPOINT sluice_ddl",
                    };
                    conn.execute(step)
                        .await
                        .map_err(|e| classify(ctx("altering"), e))?;
                }
                if let Err(e) = added {
                    // Another task may have added it meanwhile.
                    let now = conn
                        .describe(table)
                        .await
                        .map_err(|e| classify(ctx("reading the columns of"), e))?;
                    if !now.iter().any(|c| c.name == *name) {
                        return Err(classify(format!("adding column `{name}` to `{table}`"), e));
                    }
                } else {
                    tracing::info!(table, column = %name, sql_type = %ty, "added column (auto.evolve)");
                }
            }
            info = TableInfo::new(
                conn.describe(table)
                    .await
                    .map_err(|e| classify(ctx("reading the columns of"), e))?,
            );
        }
        self.tables.insert(table.to_string(), info.clone());
        Ok(info)
    }

    /// Runs a table's phases on `conn`.
    async fn write_table(
        &self,
        conn: &mut db::Conn<'_>,
        table: &str,
        info: &TableInfo,
        phases: Vec<Phase>,
    ) -> Result<(), ConnectError> {
        let mode = self.cfg.write_mode();
        let guard = self.cfg.guard_column.as_deref();
        let chunk = self.cfg.batch_size;
        let column = |name: &str| {
            info.column(name).cloned().ok_or_else(|| {
                ConnectError::data(format!("table `{table}` has no column `{name}`"))
                    .with_class("UnknownColumn")
            })
        };
        for phase in phases {
            match phase {
                Phase::Truncate => empty_table(conn, table).await?,
                Phase::Delete(names, keys) => {
                    let key_columns = names
                        .iter()
                        .map(|n| column(n))
                        .collect::<Result<Vec<_>, _>>()?;
                    let keys = keys
                        .into_iter()
                        .map(|key| coerce_row(table, &names, key, &key_columns))
                        .collect::<Result<Vec<_>, _>>()?;
                    conn.delete(table, &names, &key_columns, &keys, chunk)
                        .await
                        .map_err(|e| classify(format!("deleting rows from `{table}`"), e))?;
                }
                Phase::Write(rows) => {
                    // Rows with the same fields share a statement, so a field
                    // a record lacks never touches its column.
                    let mut groups: Vec<StatementRows> = Vec::new();
                    for row in rows {
                        let group = groups
                            .iter()
                            .position(|(names, _, _)| names.iter().eq(row.column_names()));
                        match group {
                            Some(g) => groups[g]
                                .2
                                .push(row.columns.into_iter().map(|(_, v)| v).collect()),
                            None => {
                                let (names, values) = row.columns.into_iter().unzip();
                                groups.push((names, row.pk_names.to_vec(), vec![values]));
                            }
                        }
                    }
                    for (names, pk, rows) in groups {
                        let columns = names
                            .iter()
                            .map(|n| column(n))
                            .collect::<Result<Vec<_>, _>>()?;
                        let rows = rows
                            .into_iter()
                            .map(|values| coerce_row(table, &names, values, &columns))
                            .collect::<Result<Vec<_>, _>>()?;
                        let shape = dialect::Shape {
                            table,
                            names: &names,
                            pk: &pk,
                            guard: guard.filter(|g| names.iter().any(|n| n == g)),
                        };
                        let affected = conn
                            .write(&shape, mode, &columns, &rows, chunk)
                            .instrument(debug_span!("jdbc_statements"))
                            .await
                            .map_err(|e| {
                                classify(format!("writing {} rows to `{table}`", rows.len()), e)
                            })?;
                        if mode == WriteMode::Update && (affected as usize) < rows.len() {
                            tracing::debug!(
                                table,
                                rows = rows.len(),
                                updated = affected,
                                "insert.mode=update: rows with no stored match (or an older guard value) were not written"
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Prepares and writes every table on `conn`. On MySQL the tables were
    /// prepared outside the transaction already (its DDL commits).
    async fn write_all(
        &mut self,
        conn: &mut db::Conn<'_>,
        plan: Vec<(String, Vec<Op>)>,
    ) -> Result<(), ConnectError> {
        for (table, ops) in plan {
            if ops.iter().all(|op| matches!(op, Op::Truncate)) {
                // Nothing to create a table from: empty it if it exists.
                let exists = self.tables.contains_key(&table)
                    || !conn
                        .describe(&table)
                        .await
                        .map_err(|e| {
                            classify(format!("reading the columns of table `{table}`"), e)
                        })?
                        .is_empty();
                if exists {
                    empty_table(conn, &table).await?;
                }
                continue;
            }
            let info = match (conn.dialect(), self.tables.get(&table)) {
                (Dialect::MySql, Some(info)) => info.clone(),
                _ => {
                    self.prepare_table(conn, &table, &ops)
                        .instrument(debug_span!("jdbc_prepare_table"))
                        .await?
                }
            };
            let phases = self.phases(ops, &info);
            self.write_table(conn, &table, &info, phases)
                .instrument(debug_span!("jdbc_write_table"))
                .await?;
        }
        Ok(())
    }

    async fn ensure_offsets_table(&mut self) -> Result<(), ConnectError> {
        if self.offsets_table_ready {
            return Ok(());
        }
        let table = self.cfg.offsets_table.clone();
        let pool = self.pool().await?;
        let sql = pool.dialect().create_offsets_table(&table);
        let mut c = pool
            .acquire()
            .await
            .map_err(|e| classify("connecting".into(), e))?;
        c.conn()
            .execute(&sql)
            .await
            .map_err(|e| classify(format!("creating the offsets table `{table}`"), e))?;
        self.offsets_table_ready = true;
        Ok(())
    }

    async fn begin_tx(&mut self) -> Result<db::Tx, ConnectError> {
        self.pool()
            .await?
            .begin()
            .instrument(debug_span!("jdbc_begin"))
            .await
            .map_err(|e| classify("starting a transaction".into(), e))
    }

    /// The exactly-once transaction, started now if `begin` deferred it.
    /// `self.tx` is `after` until the caller puts the transaction back.
    async fn take_transaction(&mut self, after: TxState) -> Result<db::Tx, ConnectError> {
        match std::mem::replace(&mut self.tx, after) {
            TxState::Open(Some(tx)) => Ok(tx),
            TxState::Open(None) => self.begin_tx().await,
            TxState::Broken => Err(ConnectError::retriable(
                "the transaction was lost with its connection; the batch is redone",
            )),
            TxState::Idle => Err(ConnectError::fatal(
                "no transaction is open: begin was not called",
            )),
        }
    }

    /// Rolls back an open exactly-once transaction, if any.
    async fn discard_transaction(&mut self) {
        if let TxState::Open(Some(tx)) = std::mem::replace(&mut self.tx, TxState::Idle) {
            let _ = tx.rollback().await;
        }
    }

    async fn put_in_transaction(&mut self, plan: Plan) -> Result<(), ConnectError> {
        let mut tx = self.take_transaction(TxState::Broken).await?;
        // Each put is atomic within the transaction, so the runtime can
        // split a batch around a bad record without losing the rest.
        let lost = |e| {
            classify("the transaction's connection".into(), e).with_class("DatabaseUnavailable")
        };
        let savepoint = tx
            .conn()
            .execute("SAVEPOINT sluice_put")
            .instrument(debug_span!("jdbc_savepoint"))
            .await;
        if let Err(e) = savepoint {
            return Err(ConnectError::retriable("starting a savepoint").with_source(lost(e)));
        }
        let result = self.write_all(&mut tx.conn(), plan).await;
        let step = match &result {
            Ok(()) => "RELEASE SAVEPOINT sluice_put",
            Err(_) => "ROLLBACK TO SAVEPOINT sluice_put",
        };
        let ended = tx
            .conn()
            .execute(step)
            .instrument(debug_span!("jdbc_savepoint"))
            .await;
        match ended {
            Ok(_) => self.tx = TxState::Open(Some(tx)),
            Err(e) => {
                // The state of the transaction is unknown: redo it all.
                self.tables.clear();
                let _ = tx.rollback().await;
                return Err(ConnectError::retriable(format!(
                    "the transaction was lost ({}); the batch is redone",
                    result.err().map(|e| e.full_message()).unwrap_or_default()
                ))
                .with_source(lost(e)));
            }
        }
        if result.is_err() {
            // DDL inside the rolled-back savepoint is undone too.
            self.tables.clear();
        }
        result
    }
}

/// Per table, the operations of a batch's records.
type Plan = Vec<(String, Vec<Op>)>;

fn coerce_row(
    table: &str,
    names: &[String],
    values: Vec<SqlValue>,
    columns: &[Column],
) -> Result<Vec<SqlValue>, ConnectError> {
    values
        .into_iter()
        .zip(columns)
        .zip(names)
        .map(|((v, column), name)| {
            v.coerce(column.kind).map_err(|e| {
                ConnectError::data(format!("column `{name}` of table `{table}`: {e}"))
                    .with_class("InvalidValue")
            })
        })
        .collect()
}

#[async_trait]
impl SinkTask for JdbcSinkTask {
    async fn start(&mut self) -> Result<(), ConnectError> {
        self.pool().await?;
        tracing::debug!(connector = %self.context.connector, task = self.context.task_id, "jdbc sink connected");
        Ok(())
    }

    async fn put(&mut self, records: Vec<Record>) -> Result<(), ConnectError> {
        let planner = self.planner.clone();
        let plan = tokio::task::spawn_blocking(move || planner.plan(&records))
            .instrument(debug_span!("jdbc_plan"))
            .await
            .map_err(|e| ConnectError::fatal(format!("planning the batch failed: {e}")))??;
        if plan.is_empty() {
            return Ok(());
        }
        if self.pool().await?.dialect() == Dialect::MySql {
            // MySQL's DDL commits any open transaction: run it first, on a
            // connection of its own.
            let pool = self.pool.take().expect("connected above");
            let prepared = async {
                let mut c = pool
                    .acquire()
                    .await
                    .map_err(|e| classify("connecting".into(), e))?;
                for (table, ops) in &plan {
                    self.prepare_table(&mut c.conn(), table, ops).await?;
                }
                Ok::<_, ConnectError>(())
            }
            .await;
            self.pool = Some(pool);
            prepared?;
        }
        if !matches!(self.tx, TxState::Idle) {
            return self.put_in_transaction(plan).await;
        }
        let mut tx = self.begin_tx().await?;
        let result = self.write_all(&mut tx.conn(), plan).await;
        match result {
            Ok(()) => tx
                .commit()
                .instrument(debug_span!("jdbc_commit"))
                .await
                .map_err(|e| classify("committing the batch".into(), e)),
            Err(e) => {
                self.tables.clear();
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }

    async fn stop(&mut self) {
        self.discard_transaction().await;
        if let Some(pool) = self.pool.take() {
            pool.close().await;
        }
    }

    fn supports_exactly_once(&self) -> bool {
        true
    }

    async fn begin(&mut self) -> Result<(), ConnectError> {
        self.discard_transaction().await;
        self.ensure_offsets_table().await?;
        self.tx = TxState::Open(None);
        Ok(())
    }

    async fn commit(&mut self, offsets: &[CommitOffset]) -> Result<(), ConnectError> {
        let mut tx = self.take_transaction(TxState::Idle).await?;
        let table = self.cfg.offsets_table.clone();
        let stored = tx
            .conn()
            .store_offsets_fenced(&table, &self.context.connector, offsets)
            .instrument(debug_span!("jdbc_store_offsets"))
            .await;
        let fenced = match stored {
            Ok(fenced) => fenced,
            Err(e) => {
                let _ = tx.rollback().await;
                return Err(classify(format!("storing offsets in `{table}`"), e));
            }
        };
        if let Some((topic, partition)) = fenced {
            let _ = tx.rollback().await;
            self.tables.clear();
            return Err(ConnectError::fenced(format!(
                "the offset of {topic}-{partition} stored in `{table}` is past where this batch began (another task of connector `{}` committed there: this task no longer owns the partition), or the batch would move it back; the batch is rolled back and the partition read again from the stored offset",
                self.context.connector
            )));
        }
        // A failed COMMIT may still have committed: the runtime checks the
        // stored offsets before redoing the batch.
        tx.commit()
            .instrument(debug_span!("jdbc_commit"))
            .await
            .map_err(|e| classify("committing the batch with its offsets".into(), e))
    }

    async fn rollback(&mut self) {
        self.discard_transaction().await;
        self.tables.clear();
    }

    async fn stored_offsets(
        &mut self,
        partitions: &[(String, i32)],
    ) -> Result<Vec<PartitionOffset>, ConnectError> {
        self.ensure_offsets_table().await?;
        let table = self.cfg.offsets_table.clone();
        let connector = self.context.connector.clone();
        let pool = self.pool().await?;
        let mut c = pool
            .acquire()
            .await
            .map_err(|e| classify("connecting".into(), e))?;
        let all = c
            .conn()
            .load_offsets(&table, &connector)
            .await
            .map_err(|e| classify(format!("reading offsets from `{table}`"), e))?;
        Ok(all
            .into_iter()
            .filter(|(t, p, _)| partitions.iter().any(|(pt, pp)| pt == t && pp == p))
            .map(|(topic, partition, offset)| PartitionOffset {
                topic,
                partition,
                offset,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests;
