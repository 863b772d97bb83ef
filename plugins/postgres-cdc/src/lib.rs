//! `postgres-cdc`: PostgreSQL change data capture through logical
//! replication and the built-in `pgoutput` plugin, writing Debezium's
//! change events (and answering to Debezium's class name for the keys it
//! supports).
//!
//! - `config.rs`: the keys (Debezium's names), parsed strictly.
//! - `catalog.rs`: what is read over SQL: tables, columns, primary keys,
//!   the publication, the slot.
//! - `types.rs`: column types as Debezium maps them, values from
//!   PostgreSQL's text output.
//! - `envelope.rs`: the key, row and envelope schemas and the records.
//! - `task.rs`: snapshot, then stream; positions, confirmation, restarts.

pub mod catalog;
pub mod config;
pub mod envelope;
pub mod json;
pub mod lsn;
pub mod task;
pub mod types;

use sluice_sdk::{
    ConfigError, ConfigMap, ConnectError, ConnectorType, PluginInfo, SourceConnector,
    SourceOffsets, SourceTask, TaskContext,
};

pub use config::CdcConfig;

pub struct PostgresCdcConnector;

impl SourceConnector for PostgresCdcConnector {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            class: "postgres-cdc",
            aliases: &["io.debezium.connector.postgresql.PostgresConnector"],
            kind: ConnectorType::Source,
            version: env!("CARGO_PKG_VERSION"),
            description: "PostgreSQL change data capture (logical replication, pgoutput) as Debezium change events",
        }
    }

    fn config_definition(&self) -> serde_json::Value {
        let key = |name: &str, ty: &str, required: bool, default: Option<&str>, doc: &str| {
            serde_json::json!({
                "name": name, "type": ty, "required": required,
                "default_value": default, "documentation": doc,
            })
        };
        serde_json::Value::Array(vec![
            key("database.hostname", "STRING", true, None, "PostgreSQL host"),
            key(
                "database.port",
                "INT",
                false,
                Some("5432"),
                "PostgreSQL port",
            ),
            key(
                "database.user",
                "STRING",
                true,
                None,
                "a user with the REPLICATION attribute",
            ),
            key("database.password", "PASSWORD", false, None, "its password"),
            key(
                "database.dbname",
                "STRING",
                true,
                None,
                "the database to capture",
            ),
            key(
                "database.sslmode",
                "STRING",
                false,
                Some("prefer"),
                "disable, prefer, require, verify-ca or verify-full",
            ),
            key(
                "topic.prefix",
                "STRING",
                true,
                None,
                "topics are <topic.prefix>.<schema>.<table>",
            ),
            key(
                "plugin.name",
                "STRING",
                false,
                Some("pgoutput"),
                "only pgoutput",
            ),
            key(
                "slot.name",
                "STRING",
                false,
                Some("debezium"),
                "the replication slot; one per connector",
            ),
            key(
                "slot.drop.on.stop",
                "BOOLEAN",
                false,
                Some("false"),
                "drop the slot when the task stops (loses the position)",
            ),
            key(
                "publication.name",
                "STRING",
                false,
                Some("dbz_publication"),
                "the publication",
            ),
            key(
                "publication.autocreate.mode",
                "STRING",
                false,
                Some("all_tables"),
                "all_tables, filtered or disabled",
            ),
            key(
                "table.include.list",
                "LIST",
                false,
                None,
                "regular expressions matching schema.table",
            ),
            key(
                "table.exclude.list",
                "LIST",
                false,
                None,
                "regular expressions matching schema.table",
            ),
            key(
                "schema.include.list",
                "LIST",
                false,
                None,
                "regular expressions matching schemas",
            ),
            key(
                "schema.exclude.list",
                "LIST",
                false,
                None,
                "regular expressions matching schemas",
            ),
            key(
                "snapshot.mode",
                "STRING",
                false,
                Some("initial"),
                "initial, initial_only or no_data (never)",
            ),
            key(
                "snapshot.fetch.size",
                "INT",
                false,
                Some("10240"),
                "rows per snapshot fetch",
            ),
            key(
                "heartbeat.interval.ms",
                "LONG",
                false,
                Some("0"),
                "heartbeat records while idle, so the slot advances",
            ),
            key(
                "topic.heartbeat.prefix",
                "STRING",
                false,
                Some("__debezium-heartbeat"),
                "heartbeat topic prefix",
            ),
            key(
                "tombstones.on.delete",
                "BOOLEAN",
                false,
                Some("true"),
                "a tombstone after each delete",
            ),
            key(
                "skipped.operations",
                "LIST",
                false,
                Some("t"),
                "operations not written: c, u, d, t or none",
            ),
            key(
                "decimal.handling.mode",
                "STRING",
                false,
                Some("precise"),
                "precise, double or string",
            ),
            key(
                "max.batch.size",
                "INT",
                false,
                Some("2048"),
                "events per poll",
            ),
            key(
                "poll.interval.ms",
                "LONG",
                false,
                Some("500"),
                "how long a poll waits for a change",
            ),
            key(
                "status.update.interval.ms",
                "LONG",
                false,
                Some("10000"),
                "how often the slot hears of progress",
            ),
            key(
                "database.connect.timeout.ms",
                "LONG",
                false,
                Some("30000"),
                "connection timeout",
            ),
        ])
    }

    fn validate(&self, config: &ConfigMap) -> Result<(), ConfigError> {
        CdcConfig::parse(config).map(|_| ())
    }

    fn topics(&self, _config: &ConfigMap) -> Vec<String> {
        // One per captured table, known only from the database: created
        // as their first events are written.
        Vec::new()
    }

    fn task_configs(&self, config: &ConfigMap, _max_tasks: u32) -> Vec<ConfigMap> {
        // One slot is read by one connection: one task.
        vec![config.clone()]
    }

    fn create_task(
        &self,
        config: &ConfigMap,
        context: TaskContext,
        offsets: SourceOffsets,
    ) -> Result<Box<dyn SourceTask>, ConnectError> {
        let cfg = CdcConfig::parse(config)
            .map_err(|e| ConnectError::fatal(format!("invalid config: {e}")))?;
        Ok(Box::new(task::CdcTask::new(cfg, context, offsets)))
    }
}
