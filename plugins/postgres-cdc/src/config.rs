//! The connector's keys: Debezium's PostgreSQL connector's names for the
//! ones it supports, parsed strictly (any other key is refused by name).

use regex::Regex;
use serde::Deserialize;
use sluice_sdk::config::from_string_map;
use sluice_sdk::{ConfigError, ConfigMap};

use crate::types::DecimalMode;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(rename = "database.hostname")]
    hostname: String,
    #[serde(rename = "database.port", default = "default_port")]
    port: u16,
    #[serde(rename = "database.user")]
    user: String,
    #[serde(rename = "database.password", default)]
    password: Option<String>,
    #[serde(rename = "database.dbname")]
    dbname: String,
    #[serde(rename = "database.sslmode", default = "default_sslmode")]
    sslmode: String,
    #[serde(rename = "topic.prefix")]
    topic_prefix: String,
    #[serde(rename = "plugin.name", default = "default_plugin")]
    plugin: String,
    #[serde(rename = "slot.name", default = "default_slot")]
    slot: String,
    #[serde(rename = "slot.drop.on.stop", default)]
    slot_drop_on_stop: bool,
    #[serde(rename = "publication.name", default = "default_publication")]
    publication: String,
    #[serde(rename = "publication.autocreate.mode", default = "default_autocreate")]
    publication_autocreate: String,
    #[serde(rename = "table.include.list", default)]
    table_include: Option<String>,
    #[serde(rename = "table.exclude.list", default)]
    table_exclude: Option<String>,
    #[serde(rename = "schema.include.list", default)]
    schema_include: Option<String>,
    #[serde(rename = "schema.exclude.list", default)]
    schema_exclude: Option<String>,
    #[serde(rename = "snapshot.mode", default = "default_snapshot")]
    snapshot: String,
    #[serde(rename = "snapshot.fetch.size", default = "default_fetch")]
    snapshot_fetch: u32,
    #[serde(rename = "heartbeat.interval.ms", default)]
    heartbeat_ms: u64,
    #[serde(
        rename = "topic.heartbeat.prefix",
        default = "default_heartbeat_prefix"
    )]
    heartbeat_prefix: String,
    #[serde(rename = "tombstones.on.delete", default = "default_true")]
    tombstones: bool,
    #[serde(rename = "skipped.operations", default = "default_skipped")]
    skipped: String,
    #[serde(rename = "decimal.handling.mode", default = "default_decimal")]
    decimal: String,
    #[serde(rename = "max.batch.size", default = "default_batch")]
    max_batch: usize,
    #[serde(rename = "poll.interval.ms", default = "default_poll")]
    poll_ms: u64,
    #[serde(rename = "status.update.interval.ms", default = "default_status")]
    status_ms: u64,
    #[serde(
        rename = "database.connect.timeout.ms",
        default = "default_connect_timeout"
    )]
    connect_timeout_ms: u64,
}

fn default_port() -> u16 {
    5432
}
fn default_sslmode() -> String {
    "prefer".into()
}
fn default_plugin() -> String {
    "pgoutput".into()
}
fn default_slot() -> String {
    "debezium".into()
}
fn default_publication() -> String {
    "dbz_publication".into()
}
fn default_autocreate() -> String {
    "all_tables".into()
}
fn default_snapshot() -> String {
    "initial".into()
}
fn default_fetch() -> u32 {
    10_240
}
fn default_heartbeat_prefix() -> String {
    "__debezium-heartbeat".into()
}
fn default_true() -> bool {
    true
}
fn default_skipped() -> String {
    "t".into()
}
fn default_decimal() -> String {
    "precise".into()
}
fn default_batch() -> usize {
    2048
}
fn default_poll() -> u64 {
    500
}
fn default_status() -> u64 {
    10_000
}
fn default_connect_timeout() -> u64 {
    30_000
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotMode {
    /// Snapshot when there is no offset yet, then stream.
    Initial,
    /// Snapshot when there is no offset yet, then stop.
    InitialOnly,
    /// Stream only (Debezium's `no_data`, formerly `never`).
    NoData,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublicationAutocreate {
    AllTables,
    Filtered,
    Disabled,
}

/// The operations written (Debezium's `skipped.operations` inverted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operations {
    pub create: bool,
    pub update: bool,
    pub delete: bool,
    pub truncate: bool,
}

#[derive(Debug, Clone)]
pub struct CdcConfig {
    pub hostname: String,
    pub port: u16,
    pub user: String,
    pub password: Option<String>,
    pub dbname: String,
    pub sslmode: String,
    pub topic_prefix: String,
    pub slot: String,
    pub slot_drop_on_stop: bool,
    pub publication: String,
    pub publication_autocreate: PublicationAutocreate,
    pub tables: TableFilter,
    pub snapshot: SnapshotMode,
    pub snapshot_fetch: u32,
    pub heartbeat_ms: u64,
    pub heartbeat_prefix: String,
    pub tombstones: bool,
    pub operations: Operations,
    pub decimals: DecimalMode,
    pub max_batch: usize,
    pub poll_ms: u64,
    pub status_ms: u64,
    pub connect_timeout_ms: u64,
}

/// Which tables are captured: Debezium's include and exclude lists,
/// comma-separated regular expressions matched against the whole
/// `schema.table` (or schema).
#[derive(Debug, Clone, Default)]
pub struct TableFilter {
    table_include: Vec<Regex>,
    table_exclude: Vec<Regex>,
    schema_include: Vec<Regex>,
    schema_exclude: Vec<Regex>,
}

impl TableFilter {
    pub fn captures(&self, schema: &str, table: &str) -> bool {
        if matches!(schema, "pg_catalog" | "information_schema") || schema.starts_with("pg_") {
            return false;
        }
        let full = format!("{schema}.{table}");
        let any = |list: &[Regex], s: &str| list.iter().any(|r| r.is_match(s));
        if !self.schema_include.is_empty() && !any(&self.schema_include, schema) {
            return false;
        }
        if any(&self.schema_exclude, schema) {
            return false;
        }
        if !self.table_include.is_empty() {
            return any(&self.table_include, &full);
        }
        !any(&self.table_exclude, &full)
    }
}

fn regex_list(key: &str, value: Option<&str>) -> Result<Vec<Regex>, ConfigError> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    value
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            Regex::new(&format!("^(?:{p})$")).map_err(|e| {
                ConfigError::new(key, format!("`{p}` is not a regular expression: {e}"))
            })
        })
        .collect()
}

impl CdcConfig {
    pub fn parse(config: &ConfigMap) -> Result<Self, ConfigError> {
        let raw: RawConfig = from_string_map(config)?;
        if raw.plugin != "pgoutput" {
            return Err(ConfigError::new(
                "plugin.name",
                format!(
                    "`{}` is not supported: only PostgreSQL's built-in `pgoutput` is (decoderbufs and wal2json need server extensions)",
                    raw.plugin
                ),
            ));
        }
        if raw.topic_prefix.is_empty()
            || !raw
                .topic_prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err(ConfigError::new(
                "topic.prefix",
                "must be non-empty and use only letters, digits, `.`, `_` and `-` (it starts every topic name)",
            ));
        }
        let valid_name = |s: &str| {
            !s.is_empty()
                && s.len() <= 63
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        };
        if !valid_name(&raw.slot) {
            return Err(ConfigError::new(
                "slot.name",
                "must be 1 to 63 lower-case letters, digits or `_` (PostgreSQL's rule for slot names)",
            ));
        }
        if raw.publication.is_empty() || raw.publication.contains('"') {
            return Err(ConfigError::new(
                "publication.name",
                "must be a non-empty name without `\"`",
            ));
        }
        let publication_autocreate = match raw.publication_autocreate.as_str() {
            "all_tables" => PublicationAutocreate::AllTables,
            "filtered" => PublicationAutocreate::Filtered,
            "disabled" => PublicationAutocreate::Disabled,
            other => {
                return Err(ConfigError::new(
                    "publication.autocreate.mode",
                    format!("`{other}`: expected all_tables, filtered or disabled"),
                ));
            }
        };
        let snapshot = match raw.snapshot.as_str() {
            "initial" => SnapshotMode::Initial,
            "initial_only" => SnapshotMode::InitialOnly,
            "no_data" | "never" => SnapshotMode::NoData,
            other => {
                return Err(ConfigError::new(
                    "snapshot.mode",
                    format!("`{other}`: expected initial, initial_only, no_data or never"),
                ));
            }
        };
        let mut operations = Operations {
            create: true,
            update: true,
            delete: true,
            truncate: true,
        };
        for op in raw
            .skipped
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            match op {
                "none" => {}
                "c" => operations.create = false,
                "u" => operations.update = false,
                "d" => operations.delete = false,
                "t" => operations.truncate = false,
                other => {
                    return Err(ConfigError::new(
                        "skipped.operations",
                        format!("`{other}`: expected a list of c, u, d, t, or none"),
                    ));
                }
            }
        }
        let decimals = match raw.decimal.as_str() {
            "precise" => DecimalMode::Precise,
            "double" => DecimalMode::Double,
            "string" => DecimalMode::String,
            other => {
                return Err(ConfigError::new(
                    "decimal.handling.mode",
                    format!("`{other}`: expected precise, double or string"),
                ));
            }
        };
        if !matches!(
            raw.sslmode.as_str(),
            "disable" | "prefer" | "require" | "verify-ca" | "verify-full"
        ) {
            return Err(ConfigError::new(
                "database.sslmode",
                format!(
                    "`{}`: expected disable, prefer, require, verify-ca or verify-full",
                    raw.sslmode
                ),
            ));
        }
        if raw.max_batch == 0 {
            return Err(ConfigError::new("max.batch.size", "must be at least 1"));
        }
        if raw.snapshot_fetch == 0 {
            return Err(ConfigError::new(
                "snapshot.fetch.size",
                "must be at least 1",
            ));
        }
        if raw.table_include.is_some() && raw.table_exclude.is_some() {
            return Err(ConfigError::new(
                "table.exclude.list",
                "cannot be set with table.include.list",
            ));
        }
        if raw.schema_include.is_some() && raw.schema_exclude.is_some() {
            return Err(ConfigError::new(
                "schema.exclude.list",
                "cannot be set with schema.include.list",
            ));
        }
        let tables = TableFilter {
            table_include: regex_list("table.include.list", raw.table_include.as_deref())?,
            table_exclude: regex_list("table.exclude.list", raw.table_exclude.as_deref())?,
            schema_include: regex_list("schema.include.list", raw.schema_include.as_deref())?,
            schema_exclude: regex_list("schema.exclude.list", raw.schema_exclude.as_deref())?,
        };
        Ok(CdcConfig {
            hostname: raw.hostname,
            port: raw.port,
            user: raw.user,
            password: raw.password,
            dbname: raw.dbname,
            sslmode: raw.sslmode,
            topic_prefix: raw.topic_prefix,
            slot: raw.slot,
            slot_drop_on_stop: raw.slot_drop_on_stop,
            publication: raw.publication,
            publication_autocreate,
            tables,
            snapshot,
            snapshot_fetch: raw.snapshot_fetch,
            heartbeat_ms: raw.heartbeat_ms,
            heartbeat_prefix: raw.heartbeat_prefix,
            tombstones: raw.tombstones,
            operations,
            decimals,
            max_batch: raw.max_batch,
            poll_ms: raw.poll_ms,
            status_ms: raw.status_ms,
            connect_timeout_ms: raw.connect_timeout_ms,
        })
    }

    /// Debezium's heartbeat topic.
    pub fn heartbeat_topic(&self) -> String {
        format!("{}.{}", self.heartbeat_prefix, self.topic_prefix)
    }

    /// The topic of a table's events.
    pub fn topic(&self, schema: &str, table: &str) -> String {
        format!("{}.{schema}.{table}", self.topic_prefix)
    }

    /// The source partition every offset of this connector belongs to.
    pub fn source_partition(&self) -> serde_json::Value {
        serde_json::json!({ "server": self.topic_prefix })
    }

    /// A libpq key/value connection string (for the replication
    /// connection, with `replication=database`).
    pub fn conninfo(&self, replication: bool) -> String {
        let quote = |v: &str| format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"));
        let mut s = format!(
            "host={} port={} user={} dbname={} sslmode={}",
            quote(&self.hostname),
            self.port,
            quote(&self.user),
            quote(&self.dbname),
            self.sslmode,
        );
        if let Some(p) = &self.password {
            s.push_str(&format!(" password={}", quote(p)));
        }
        s.push_str(&format!(
            " connect_timeout={}",
            self.connect_timeout_ms.div_ceil(1000).max(1)
        ));
        if replication {
            s.push_str(" replication=database");
        }
        s
    }

    /// Options for the SQL connection (catalog, snapshot, slot checks).
    pub fn sql_options(&self) -> sqlx::postgres::PgConnectOptions {
        use sqlx::postgres::{PgConnectOptions, PgSslMode};
        let ssl = match self.sslmode.as_str() {
            "disable" => PgSslMode::Disable,
            "require" => PgSslMode::Require,
            "verify-ca" => PgSslMode::VerifyCa,
            "verify-full" => PgSslMode::VerifyFull,
            _ => PgSslMode::Prefer,
        };
        let mut o = PgConnectOptions::new()
            .host(&self.hostname)
            .port(self.port)
            .username(&self.user)
            .database(&self.dbname)
            .ssl_mode(ssl)
            .application_name("sluice-postgres-cdc")
            // The snapshot reads values as text; these make that text the
            // same as what pgoutput sends, whatever the server's defaults.
            .options([
                ("TimeZone", "UTC"),
                ("DateStyle", "ISO"),
                ("IntervalStyle", "postgres"),
                ("extra_float_digits", "1"),
                ("bytea_output", "hex"),
            ]);
        if let Some(p) = &self.password {
            o = o.password(p);
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> ConfigMap {
        let mut m: ConfigMap = [
            ("database.hostname", "db"),
            ("database.user", "u"),
            ("database.dbname", "shop"),
            ("topic.prefix", "shop"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for (k, v) in pairs {
            m.insert(k.to_string(), v.to_string());
        }
        m
    }

    #[test]
    fn defaults_are_debeziums() {
        let c = CdcConfig::parse(&map(&[])).unwrap();
        assert_eq!(c.slot, "debezium");
        assert_eq!(c.publication, "dbz_publication");
        assert_eq!(c.snapshot, SnapshotMode::Initial);
        assert!(!c.operations.truncate && c.operations.delete);
        assert_eq!(c.heartbeat_topic(), "__debezium-heartbeat.shop");
        assert!(c.tables.captures("public", "orders"));
        assert!(!c.tables.captures("pg_catalog", "pg_class"));
    }

    #[test]
    fn table_lists_match_whole_names() {
        let c =
            CdcConfig::parse(&map(&[("table.include.list", "public.orders,inv\\..*")])).unwrap();
        assert!(c.tables.captures("public", "orders"));
        assert!(!c.tables.captures("public", "orders_archive"));
        assert!(c.tables.captures("inv", "items"));
        let c = CdcConfig::parse(&map(&[("table.exclude.list", "public.audit")])).unwrap();
        assert!(!c.tables.captures("public", "audit"));
        assert!(c.tables.captures("public", "audit2"));
    }

    #[test]
    fn bad_keys_are_named() {
        for (pairs, key) in [
            (vec![("plugin.name", "wal2json")], "plugin.name"),
            (vec![("slot.name", "Bad-Slot")], "slot.name"),
            (vec![("snapshot.mode", "always")], "snapshot.mode"),
            (vec![("skipped.operations", "x")], "skipped.operations"),
            (vec![("table.include.list", "(")], "table.include.list"),
            (vec![("database.sslmode", "maybe")], "database.sslmode"),
            (vec![("nonsense", "1")], "nonsense"),
        ] {
            let e = CdcConfig::parse(&map(&pairs)).unwrap_err();
            assert!(e.to_string().contains(key), "{key}: {e}");
        }
    }
}
