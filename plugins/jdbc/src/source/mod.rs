//! `jdbc-source` (also `io.confluent.connect.jdbc.JdbcSourceConnector`):
//! reads tables or a query from SQLite, PostgreSQL, MySQL or MariaDB by
//! polling, in Confluent's modes (`bulk`, `incrementing`, `timestamp`,
//! `timestamp+incrementing`) and with Confluent's offsets, so a connector
//! moved from Kafka Connect resumes where it was.
//!
//! - `config.rs`: the keys.
//! - `query.rs`: the catalog, the statements, the background reader.
//! - `columns.rs`: column types to Kafka Connect schemas; values.
//! - `task.rs`: the polling loop and positions.

pub mod columns;
pub mod config;
pub mod query;
pub mod task;

use sluice_sdk::{
    ConfigError, ConfigMap, ConnectError, ConnectorType, PluginInfo, SourceConnector,
    SourceOffsets, SourceTask, TaskContext,
};

pub use config::SourceConfig;

pub struct JdbcSourceConnector;

impl SourceConnector for JdbcSourceConnector {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            class: "jdbc-source",
            aliases: &[
                "JdbcSourceConnector",
                "io.confluent.connect.jdbc.JdbcSourceConnector",
            ],
            kind: ConnectorType::Source,
            version: env!("CARGO_PKG_VERSION"),
            description: "Polls tables or a query in SQLite, PostgreSQL, MySQL or MariaDB (bulk, incrementing, timestamp, timestamp+incrementing) with Confluent's offsets",
        }
    }

    fn config_definition(&self) -> serde_json::Value {
        serde_json::json!([
            {"name": "connection.url", "type": "STRING", "required": true, "default_value": null, "documentation": "jdbc:sqlite:PATH, jdbc:postgresql://HOST:PORT/DB, jdbc:mysql://HOST:PORT/DB or jdbc:mariadb://HOST:PORT/DB"},
            {"name": "connection.user", "type": "STRING", "required": false, "default_value": null, "documentation": "Database user"},
            {"name": "connection.password", "type": "PASSWORD", "required": false, "default_value": null, "documentation": "Database password"},
            {"name": "mode", "type": "STRING", "required": true, "default_value": null, "documentation": "bulk, incrementing, timestamp or timestamp+incrementing"},
            {"name": "table.whitelist", "type": "LIST", "required": false, "default_value": "", "documentation": "Tables to read (table, schema.table or catalog.schema.table); all tables when empty"},
            {"name": "table.blacklist", "type": "LIST", "required": false, "default_value": "", "documentation": "Tables not to read"},
            {"name": "table.types", "type": "LIST", "required": false, "default_value": "TABLE", "documentation": "TABLE and/or VIEW"},
            {"name": "schema.pattern", "type": "STRING", "required": false, "default_value": null, "documentation": "PostgreSQL: only schemas LIKE this"},
            {"name": "query", "type": "STRING", "required": false, "default_value": null, "documentation": "Read this query instead of tables, into the topic topic.prefix"},
            {"name": "query.suffix", "type": "STRING", "required": false, "default_value": null, "documentation": "Appended to every statement (e.g. a LIMIT)"},
            {"name": "topic.prefix", "type": "STRING", "required": true, "default_value": null, "documentation": "Topics are <topic.prefix><table>; with a query, the topic"},
            {"name": "incrementing.column.name", "type": "STRING", "required": false, "default_value": null, "documentation": "The strictly increasing column (default: the table's auto-incremented one)"},
            {"name": "timestamp.column.name", "type": "LIST", "required": false, "default_value": "", "documentation": "The last-modified column(s); several: the first non-null"},
            {"name": "timestamp.initial", "type": "LONG", "required": false, "default_value": null, "documentation": "Milliseconds since the epoch to start after; -1: now"},
            {"name": "timestamp.delay.interval.ms", "type": "LONG", "required": false, "default_value": "0", "documentation": "Rows are read once their timestamp is this much in the past, so transactions still open when it passed are not missed"},
            {"name": "validate.non.null", "type": "BOOLEAN", "required": false, "default_value": "true", "documentation": "Refuse nullable incrementing or timestamp columns"},
            {"name": "poll.interval.ms", "type": "INT", "required": false, "default_value": "5000", "documentation": "How often each table is queried"},
            {"name": "batch.max.rows", "type": "INT", "required": false, "default_value": "100", "documentation": "Rows per poll"},
            {"name": "table.poll.interval.ms", "type": "LONG", "required": false, "default_value": "60000", "documentation": "How often new or dropped tables are looked for"},
            {"name": "numeric.mapping", "type": "STRING", "required": false, "default_value": "none", "documentation": "none, best_fit or precision_only"},
            {"name": "db.timezone", "type": "STRING", "required": false, "default_value": "UTC", "documentation": "Only UTC"},
            {"name": "quote.sql.identifiers", "type": "STRING", "required": false, "default_value": "always", "documentation": "always or never"},
            {"name": "dialect.name", "type": "STRING", "required": false, "default_value": null, "documentation": "Checked against connection.url"}
        ])
    }

    fn validate(&self, config: &ConfigMap) -> Result<(), ConfigError> {
        SourceConfig::parse(config).map(|_| ())
    }

    fn topics(&self, _config: &ConfigMap) -> Vec<String> {
        // One per table, known only from the database: created as their
        // first records are written.
        Vec::new()
    }

    /// Named tables are shared among the tasks, as Kafka Connect's
    /// connector does (each task's `tables`); all tables, or a query,
    /// are one task's.
    fn task_configs(&self, config: &ConfigMap, max_tasks: u32) -> Vec<ConfigMap> {
        let Ok(cfg) = SourceConfig::parse(config) else {
            return vec![config.clone()];
        };
        let config::Input::Tables(tables) = cfg.input else {
            return vec![config.clone()];
        };
        if tables.len() < 2 || max_tasks < 2 {
            return vec![config.clone()];
        }
        let groups = (max_tasks as usize).min(tables.len());
        (0..groups)
            .map(|g| {
                let mine: Vec<&str> = tables
                    .iter()
                    .skip(g)
                    .step_by(groups)
                    .map(String::as_str)
                    .collect();
                let mut task = config.clone();
                task.insert("tables".into(), mine.join(","));
                task
            })
            .collect()
    }

    fn create_task(
        &self,
        config: &ConfigMap,
        context: TaskContext,
        offsets: SourceOffsets,
    ) -> Result<Box<dyn SourceTask>, ConnectError> {
        let cfg = SourceConfig::parse(config)
            .map_err(|e| ConnectError::fatal(format!("invalid config: {e}")))?;
        Ok(Box::new(task::JdbcSourceTask::new(cfg, context, offsets)))
    }
}
