//! `jdbc-sink`: writes JSON records into SQL tables with Confluent's JDBC sink
//! keys, idempotently (`insert.mode=upsert`), one multi-row statement per
//! chunk and one transaction per batch.
//!
//! Supported databases: SQLite (the embedded default) and PostgreSQL.

mod dialect;
mod value;

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use sluice_sdk::config::from_string_map;
use sluice_sdk::{
    ConfigError, ConfigMap, ConnectError, ConnectorType, PluginInfo, Record, SinkConnector,
    SinkTask, TaskContext,
};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

pub use dialect::{Column, Database, classify_sqlx_error};
use value::{ColumnKind, SqlValue};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InsertMode {
    Insert,
    Upsert,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PkMode {
    None,
    Kafka,
    RecordKey,
    RecordValue,
}

/// Keys of the `jdbc-sink` connector (Confluent JDBC sink names).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JdbcSinkConfig {
    /// `jdbc:sqlite:PATH`, `sqlite://PATH`, `jdbc:postgresql://HOST:PORT/DB`
    /// or `postgres://...`.
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
    /// Most rows per statement (the batch from Kafka may be larger).
    #[serde(rename = "batch.size", default = "default_batch_size")]
    pub batch_size: usize,
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

const KAFKA_PK_FIELDS: [&str; 3] = ["__connect_topic", "__connect_partition", "__connect_offset"];

impl JdbcSinkConfig {
    pub fn parse(config: &ConfigMap) -> Result<Self, ConfigError> {
        let mut cfg: Self = from_string_map(config)?;
        Database::from_url(&cfg.connection_url)?;
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
            PkMode::None if cfg.insert_mode == InsertMode::Upsert => {
                return Err(ConfigError::new(
                    "pk.mode",
                    "insert.mode=upsert needs a primary key: set pk.mode to record_key, record_value or kafka",
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
        if cfg.table_name_format.trim().is_empty() {
            return Err(ConfigError::new("table.name.format", "must not be empty"));
        }
        Ok(cfg)
    }

    fn table_for(&self, topic: &str) -> String {
        self.table_name_format.replace("${topic}", topic)
    }
}

pub struct JdbcSinkConnector;

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
            description: "Writes records into SQLite or PostgreSQL tables, idempotently with insert.mode=upsert",
        }
    }

    fn config_definition(&self) -> serde_json::Value {
        serde_json::json!([
            {"name": "connection.url", "type": "STRING", "required": true, "default_value": null, "documentation": "jdbc:sqlite:PATH, sqlite://PATH, jdbc:postgresql://HOST:PORT/DB or postgres://..."},
            {"name": "connection.user", "type": "STRING", "required": false, "default_value": null, "documentation": "Database user"},
            {"name": "connection.password", "type": "PASSWORD", "required": false, "default_value": null, "documentation": "Database password (never shown back)"},
            {"name": "connection.pool.size", "type": "INT", "required": false, "default_value": "4", "documentation": "Connections per task"},
            {"name": "table.name.format", "type": "STRING", "required": false, "default_value": "${topic}", "documentation": "Table name; ${topic} is replaced by the record's topic"},
            {"name": "insert.mode", "type": "STRING", "required": false, "default_value": "insert", "documentation": "insert or upsert"},
            {"name": "pk.mode", "type": "STRING", "required": false, "default_value": "none", "documentation": "none, kafka, record_key or record_value"},
            {"name": "pk.fields", "type": "LIST", "required": false, "default_value": "", "documentation": "Primary-key fields"},
            {"name": "fields.whitelist", "type": "LIST", "required": false, "default_value": "", "documentation": "Only these value fields become columns"},
            {"name": "auto.create", "type": "BOOLEAN", "required": false, "default_value": "false", "documentation": "Create missing tables from the first record"},
            {"name": "batch.size", "type": "INT", "required": false, "default_value": "3000", "documentation": "Most rows per SQL statement"},
        ])
    }

    fn validate(&self, config: &ConfigMap) -> Result<(), ConfigError> {
        JdbcSinkConfig::parse(config).map(|_| ())
    }

    fn create_task(
        &self,
        config: &ConfigMap,
        context: TaskContext,
    ) -> Result<Box<dyn SinkTask>, ConnectError> {
        let cfg = JdbcSinkConfig::parse(config).map_err(|e| ConnectError::fatal(e.to_string()))?;
        Ok(Box::new(JdbcSinkTask {
            cfg,
            context,
            db: None,
            tables: HashMap::new(),
        }))
    }
}

/// Columns of a table as the database has them.
#[derive(Debug, Clone)]
struct TableInfo {
    columns: Vec<Column>,
}

impl TableInfo {
    fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }
}

struct JdbcSinkTask {
    cfg: JdbcSinkConfig,
    context: TaskContext,
    db: Option<Database>,
    tables: HashMap<String, TableInfo>,
}

/// One record turned into named column values.
struct Row {
    columns: Vec<(String, SqlValue)>,
    /// Names of the primary-key columns, in key order.
    pk_names: Vec<String>,
    pk: Vec<SqlValue>,
}

impl JdbcSinkTask {
    fn row_from(&self, record: &Record) -> Result<Row, ConnectError> {
        let value = record.value_json().map_err(|e| {
            ConnectError::data(format!(
                "value of {} is not JSON: {e}",
                record.coordinates()
            ))
            .with_class("MalformedJson")
        })?;
        let object = match value {
            serde_json::Value::Object(o) => o,
            serde_json::Value::Null => {
                return Err(ConnectError::data(format!(
                    "record {} is a tombstone (null value); deletes are not enabled for this sink",
                    record.coordinates()
                ))
                .with_class("Tombstone"));
            }
            other => {
                return Err(ConnectError::data(format!(
                    "value of {} is JSON but not an object (got {}); the JDBC sink maps object fields to columns",
                    record.coordinates(),
                    value::json_type(&other)
                ))
                .with_class("NotAnObject"));
            }
        };
        let mut columns: Vec<(String, SqlValue)> = Vec::with_capacity(object.len() + 3);
        let mut pk_names: Vec<String> = match self.cfg.pk_mode {
            PkMode::None => Vec::new(),
            _ => self.cfg.pk_fields.clone(),
        };
        let whitelisted = |f: &str| {
            self.cfg.fields_whitelist.is_empty() || self.cfg.fields_whitelist.iter().any(|w| w == f)
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
                let key = record.key_json().map_err(|e| {
                    ConnectError::data(format!("key of {} is not JSON: {e}", record.coordinates()))
                })?;
                match key {
                    serde_json::Value::Object(k) => {
                        if pk_names.is_empty() {
                            pk_names = k.keys().cloned().collect();
                        }
                        for name in pk_names.clone() {
                            let v = k.get(&name).ok_or_else(|| {
                                ConnectError::data(format!(
                                    "key of {} has no field `{name}` named in pk.fields",
                                    record.coordinates()
                                ))
                            })?;
                            columns.push((name, SqlValue::from_json(v)));
                        }
                    }
                    serde_json::Value::Null => {
                        return Err(ConnectError::data(format!(
                            "record {} has no key but pk.mode=record_key",
                            record.coordinates()
                        )));
                    }
                    primitive => {
                        let name = self.cfg.pk_fields.first().cloned().ok_or_else(|| {
                            ConnectError::fatal(
                                "pk.mode=record_key with a primitive key needs pk.fields to name its column",
                            )
                        })?;
                        pk_names = vec![name.clone()];
                        columns.push((name, SqlValue::from_json(&primitive)));
                    }
                }
            }
            PkMode::None | PkMode::RecordValue => {}
        }
        for (field, v) in &object {
            if !whitelisted(field) || columns.iter().any(|(c, _)| c == field) {
                continue;
            }
            columns.push((field.clone(), SqlValue::from_json(v)));
        }
        let mut pk = Vec::with_capacity(pk_names.len());
        for name in &pk_names {
            let v = columns
                .iter()
                .find(|(c, _)| c == name)
                .map(|(_, v)| v.clone());
            match v {
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
        Ok(Row {
            columns,
            pk_names,
            pk,
        })
    }

    async fn db(&mut self) -> Result<&Database, ConnectError> {
        if self.db.is_none() {
            let db = connect(&self.cfg).await?;
            self.db = Some(db);
        }
        Ok(self.db.as_ref().expect("set above"))
    }

    /// Looks the table up, creating it if allowed.
    async fn ensure_table(&mut self, table: &str, sample: &Row) -> Result<TableInfo, ConnectError> {
        if let Some(info) = self.tables.get(table) {
            return Ok(info.clone());
        }
        let auto_create = self.cfg.auto_create;
        let pk_names = sample.pk_names.clone();
        let db = self.db().await?;
        let mut columns = db.describe_table(table).await?;
        if columns.is_empty() {
            if !auto_create {
                return Err(ConnectError::fatal(format!(
                    "table `{table}` does not exist and auto.create is false; create it or set auto.create=true"
                )));
            }
            let defs: Vec<(String, ColumnKind)> = sample
                .columns
                .iter()
                .map(|(c, v)| (c.clone(), v.kind().unwrap_or(ColumnKind::Text)))
                .collect();
            db.create_table(table, &defs, &pk_names).await?;
            tracing::info!(table, columns = defs.len(), "created table (auto.create)");
            columns = db.describe_table(table).await?;
        }
        let info = TableInfo { columns };
        self.tables.insert(table.to_string(), info.clone());
        Ok(info)
    }

    async fn write_table(&mut self, table: &str, rows: Vec<Row>) -> Result<(), ConnectError> {
        let info = self.ensure_table(table, &rows[0]).await?;
        let upsert = self.cfg.insert_mode == InsertMode::Upsert;
        let rows = if upsert { dedupe_last_wins(rows) } else { rows };
        // Rows with the same fields share a statement, so a field a record
        // lacks never touches its column, whatever else is in the batch.
        let mut groups: Vec<(Vec<String>, Vec<Row>)> = Vec::new();
        for row in rows {
            let names: Vec<String> = row.columns.iter().map(|(c, _)| c.clone()).collect();
            match groups.iter_mut().find(|(n, _)| *n == names) {
                Some((_, rows)) => rows.push(row),
                None => groups.push((names, vec![row])),
            }
        }
        let chunk = self.cfg.batch_size;
        let mut statements = Vec::with_capacity(groups.len());
        for (names, rows) in groups {
            let mut columns = Vec::with_capacity(names.len());
            for name in &names {
                let column = info.column(name).ok_or_else(|| {
                    ConnectError::data(format!(
                        "table `{table}` has no column `{name}` (auto.evolve is not supported yet)"
                    ))
                })?;
                columns.push(column.clone());
            }
            let pk_names = rows[0].pk_names.clone();
            let mut matrix: Vec<Vec<SqlValue>> = Vec::with_capacity(rows.len());
            for row in rows {
                let mut values = Vec::with_capacity(columns.len());
                for ((name, v), column) in row.columns.into_iter().zip(&columns) {
                    values.push(v.coerce(column.kind).map_err(|e| {
                        ConnectError::data(format!("column `{name}` of table `{table}`: {e}"))
                    })?);
                }
                matrix.push(values);
            }
            statements.push(dialect::Statement {
                names,
                columns,
                pk: pk_names,
                rows: matrix,
            });
        }
        let db = self.db().await?;
        db.write(table, &statements, upsert, chunk).await
    }
}

/// Within one upsert statement a key may appear once: keep the last record
/// for each key, in its position.
fn dedupe_last_wins(rows: Vec<Row>) -> Vec<Row> {
    let mut last: HashMap<String, usize> = HashMap::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        last.insert(format!("{:?}", r.pk), i);
    }
    rows.into_iter()
        .enumerate()
        .filter(|(i, r)| last.get(&format!("{:?}", r.pk)) == Some(i))
        .map(|(_, r)| r)
        .collect()
}

async fn connect(cfg: &JdbcSinkConfig) -> Result<Database, ConnectError> {
    let target =
        Database::from_url(&cfg.connection_url).map_err(|e| ConnectError::fatal(e.to_string()))?;
    let acquire = Duration::from_secs(10);
    match target {
        dialect::Target::Sqlite(path) => {
            let options = SqliteConnectOptions::new()
                .filename(&path)
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(Duration::from_secs(10));
            let pool = SqlitePoolOptions::new()
                .max_connections(cfg.pool_size)
                .acquire_timeout(acquire)
                .connect_with(options)
                .await
                .map_err(|e| classify_sqlx_error(format!("opening SQLite database {path}"), e))?;
            Ok(Database::Sqlite(pool))
        }
        dialect::Target::Postgres(url) => {
            let mut options: PgConnectOptions = url.parse().map_err(|e| {
                ConnectError::fatal("connection.url is not a valid PostgreSQL URL").with_source(e)
            })?;
            if let Some(user) = &cfg.connection_user {
                options = options.username(user);
            }
            if let Some(password) = &cfg.connection_password {
                options = options.password(password);
            }
            let pool = PgPoolOptions::new()
                .max_connections(cfg.pool_size)
                .acquire_timeout(acquire)
                .connect_with(options)
                .await
                .map_err(|e| classify_sqlx_error("connecting to PostgreSQL".into(), e))?;
            Ok(Database::Postgres(pool))
        }
    }
}

#[async_trait]
impl SinkTask for JdbcSinkTask {
    async fn start(&mut self) -> Result<(), ConnectError> {
        self.db().await?;
        tracing::debug!(connector = %self.context.connector, task = self.context.task_id, "jdbc sink connected");
        Ok(())
    }

    async fn put(&mut self, records: Vec<Record>) -> Result<(), ConnectError> {
        // Group by table, keeping record order within each table.
        let mut by_table: Vec<(String, Vec<Row>)> = Vec::new();
        for record in &records {
            let row = self.row_from(record)?;
            let table = self.cfg.table_for(&record.topic);
            match by_table.iter_mut().find(|(t, _)| *t == table) {
                Some((_, rows)) => rows.push(row),
                None => by_table.push((table, vec![row])),
            }
        }
        for (table, rows) in by_table {
            self.write_table(&table, rows).await?;
        }
        Ok(())
    }

    async fn stop(&mut self) {
        if let Some(db) = self.db.take() {
            db.close().await;
        }
    }
}

#[cfg(test)]
mod tests;
