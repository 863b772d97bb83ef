//! The keys of `jdbc-source`: Confluent's JDBC source connector's names,
//! parsed strictly.

use serde::Deserialize;
use sluice_sdk::config::from_string_map;
use sluice_sdk::{ConfigError, ConfigMap};

use crate::db::Target;

/// Which rows a query reads again at each poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Mode {
    /// The whole table, every time.
    #[serde(rename = "bulk")]
    Bulk,
    /// Rows whose strictly increasing column is above the last one seen:
    /// new rows, never updates.
    #[serde(rename = "incrementing")]
    Incrementing,
    /// Rows whose timestamp is after the last one seen: new and updated
    /// rows (rows sharing the last timestamp may be missed after a
    /// restart; `timestamp+incrementing` cannot miss them).
    #[serde(rename = "timestamp")]
    Timestamp,
    /// By timestamp, then by the incrementing column within one
    /// timestamp.
    #[serde(rename = "timestamp+incrementing")]
    TimestampIncrementing,
}

impl Mode {
    pub fn uses_incrementing(self) -> bool {
        matches!(self, Mode::Incrementing | Mode::TimestampIncrementing)
    }
    pub fn uses_timestamp(self) -> bool {
        matches!(self, Mode::Timestamp | Mode::TimestampIncrementing)
    }
}

/// `numeric.mapping`: what `NUMERIC`/`DECIMAL` columns become.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NumericMapping {
    /// Always Kafka Connect's `Decimal`.
    None,
    /// The smallest integer or `float64` that holds the declared precision
    /// and scale, else `Decimal`.
    BestFit,
    /// Integers for scale 0 by precision, `Decimal` otherwise.
    PrecisionOnly,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuoteIdentifiers {
    Always,
    Never,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(rename = "connection.url")]
    connection_url: String,
    #[serde(rename = "connection.user", default)]
    connection_user: Option<String>,
    #[serde(rename = "connection.password", default)]
    connection_password: Option<String>,
    /// Accepted for Kafka Connect configs; the runtime's retries of
    /// infrastructure errors (`errors.retry.*`) do this work.
    #[serde(rename = "connection.attempts", default)]
    _connection_attempts: Option<u32>,
    #[serde(rename = "connection.backoff.ms", default)]
    _connection_backoff_ms: Option<u64>,
    mode: Mode,
    #[serde(rename = "table.whitelist", alias = "table.include.list", default)]
    table_whitelist: Vec<String>,
    #[serde(rename = "table.blacklist", alias = "table.exclude.list", default)]
    table_blacklist: Vec<String>,
    /// Set by the connector for each task: the tables it reads.
    #[serde(rename = "tables", default)]
    tables: Vec<String>,
    #[serde(rename = "table.types", default = "default_table_types")]
    table_types: Vec<String>,
    #[serde(rename = "schema.pattern", default)]
    schema_pattern: Option<String>,
    #[serde(rename = "catalog.pattern", default)]
    _catalog_pattern: Option<String>,
    #[serde(default)]
    query: Option<String>,
    #[serde(rename = "query.suffix", default)]
    query_suffix: Option<String>,
    #[serde(rename = "topic.prefix")]
    topic_prefix: String,
    #[serde(rename = "incrementing.column.name", default)]
    incrementing_column: Option<String>,
    #[serde(rename = "timestamp.column.name", default)]
    timestamp_columns: Vec<String>,
    #[serde(rename = "timestamp.initial", default)]
    timestamp_initial: Option<i64>,
    #[serde(rename = "validate.non.null", default = "yes")]
    validate_non_null: bool,
    #[serde(rename = "poll.interval.ms", default = "default_poll_ms")]
    poll_ms: u64,
    #[serde(rename = "batch.max.rows", default = "default_batch_rows")]
    batch_max_rows: usize,
    #[serde(rename = "table.poll.interval.ms", default = "default_table_poll_ms")]
    table_poll_ms: u64,
    #[serde(rename = "timestamp.delay.interval.ms", default)]
    timestamp_delay_ms: u64,
    #[serde(rename = "db.timezone", default = "default_timezone")]
    db_timezone: String,
    #[serde(rename = "numeric.mapping", default = "default_numeric_mapping")]
    numeric_mapping: NumericMapping,
    #[serde(rename = "numeric.precision.mapping", default)]
    numeric_precision_mapping: bool,
    #[serde(rename = "dialect.name", default)]
    dialect_name: Option<String>,
    #[serde(rename = "quote.sql.identifiers", default = "default_quote")]
    quote: QuoteIdentifiers,
    #[serde(rename = "transaction.isolation.mode", default)]
    _isolation: Option<String>,
}

fn default_table_types() -> Vec<String> {
    vec!["TABLE".into()]
}
fn yes() -> bool {
    true
}
fn default_poll_ms() -> u64 {
    5000
}
fn default_batch_rows() -> usize {
    100
}
fn default_table_poll_ms() -> u64 {
    60_000
}
fn default_timezone() -> String {
    "UTC".into()
}
fn default_numeric_mapping() -> NumericMapping {
    NumericMapping::None
}
fn default_quote() -> QuoteIdentifiers {
    QuoteIdentifiers::Always
}

/// Where a task reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// These tables (`schema.table` or `table`), or every table of
    /// `table.types` when empty.
    Tables(Vec<String>),
    /// One query, written to the topic `topic.prefix`.
    Query(String),
}

/// `jdbc-source`'s validated keys.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    pub connection_url: String,
    pub user: Option<String>,
    pub password: Option<String>,
    pub mode: Mode,
    pub input: Input,
    pub exclude: Vec<String>,
    pub table_types: Vec<String>,
    pub schema_pattern: Option<String>,
    pub query_suffix: Option<String>,
    pub topic_prefix: String,
    pub incrementing_column: Option<String>,
    pub timestamp_columns: Vec<String>,
    /// Milliseconds since the epoch the first timestamp query starts
    /// after; `-1`: the database's current time.
    pub timestamp_initial: Option<i64>,
    pub validate_non_null: bool,
    pub poll_ms: u64,
    pub batch_max_rows: usize,
    pub table_poll_ms: u64,
    pub timestamp_delay_ms: u64,
    pub numeric_mapping: NumericMapping,
    pub quote: QuoteIdentifiers,
}

impl SourceConfig {
    pub fn parse(config: &ConfigMap) -> Result<SourceConfig, ConfigError> {
        let raw: RawConfig = from_string_map(config)?;
        let target = Target::parse(&raw.connection_url)?;
        let query = raw.query.filter(|q| !q.trim().is_empty());
        let tables = if raw.tables.is_empty() {
            raw.table_whitelist.clone()
        } else {
            raw.tables
        };
        let input = match query {
            Some(q) => {
                if !tables.is_empty() || !raw.table_blacklist.is_empty() {
                    return Err(ConfigError::new(
                        "query",
                        "cannot be combined with table.whitelist or table.blacklist: a connector reads either one query or tables",
                    ));
                }
                Input::Query(q.trim().trim_end_matches(';').to_string())
            }
            None => Input::Tables(tables),
        };
        if !raw.table_whitelist.is_empty() && !raw.table_blacklist.is_empty() {
            return Err(ConfigError::new(
                "table.blacklist",
                "cannot be combined with table.whitelist: name the tables to read, or the ones to leave out",
            ));
        }
        if raw.mode.uses_incrementing()
            && raw.incrementing_column.as_deref().is_none_or(str::is_empty)
            && matches!(input, Input::Query(_))
        {
            return Err(ConfigError::new(
                "incrementing.column.name",
                "is required with a query: the column of the query's result that only grows",
            ));
        }
        if raw.mode.uses_timestamp() && raw.timestamp_columns.is_empty() {
            return Err(ConfigError::new(
                "timestamp.column.name",
                format!(
                    "is required with mode={}: the column (or columns, the first non-null counting) that says when a row last changed",
                    mode_name(raw.mode)
                ),
            ));
        }
        if !matches!(
            raw.db_timezone.as_str(),
            "UTC" | "Etc/UTC" | "GMT" | "Z" | "+00:00"
        ) {
            return Err(ConfigError::new(
                "db.timezone",
                format!(
                    "`{}` is not supported: timestamps without a time zone are read as UTC, the default",
                    raw.db_timezone
                ),
            ));
        }
        if raw.batch_max_rows == 0 {
            return Err(ConfigError::new("batch.max.rows", "must be at least 1"));
        }
        if raw.poll_ms == 0 {
            return Err(ConfigError::new("poll.interval.ms", "must be at least 1"));
        }
        if let Some(name) = raw.dialect_name.as_deref().filter(|n| !n.is_empty()) {
            let expected = match target {
                Target::Sqlite(_) => "SqliteDatabaseDialect",
                Target::Postgres(_) => "PostgreSqlDatabaseDialect",
                Target::MySql(_) => "MySqlDatabaseDialect",
            };
            if name != expected {
                return Err(ConfigError::new(
                    "dialect.name",
                    format!("`{name}` does not match connection.url, whose dialect is {expected}"),
                ));
            }
        }
        let bad_topic = |c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if raw.topic_prefix.chars().any(bad_topic)
            || (matches!(input, Input::Query(_)) && raw.topic_prefix.is_empty())
        {
            return Err(ConfigError::new(
                "topic.prefix",
                "must use only letters, digits, `.`, `_` and `-` (and with a query it is the whole topic name, so not empty)",
            ));
        }
        let numeric_mapping =
            if raw.numeric_precision_mapping && raw.numeric_mapping == NumericMapping::None {
                NumericMapping::PrecisionOnly
            } else {
                raw.numeric_mapping
            };
        Ok(SourceConfig {
            connection_url: raw.connection_url,
            user: raw.connection_user,
            password: raw.connection_password,
            mode: raw.mode,
            input,
            exclude: raw.table_blacklist,
            table_types: raw
                .table_types
                .into_iter()
                .map(|t| t.to_ascii_uppercase())
                .collect(),
            schema_pattern: raw.schema_pattern.filter(|s| !s.is_empty()),
            query_suffix: raw.query_suffix.filter(|s| !s.trim().is_empty()),
            topic_prefix: raw.topic_prefix,
            incrementing_column: raw.incrementing_column.filter(|c| !c.is_empty()),
            timestamp_columns: raw.timestamp_columns,
            timestamp_initial: raw.timestamp_initial,
            validate_non_null: raw.validate_non_null,
            poll_ms: raw.poll_ms,
            batch_max_rows: raw.batch_max_rows,
            table_poll_ms: raw.table_poll_ms.max(1),
            timestamp_delay_ms: raw.timestamp_delay_ms,
            numeric_mapping,
            quote: raw.quote,
        })
    }
}

pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Bulk => "bulk",
        Mode::Incrementing => "incrementing",
        Mode::Timestamp => "timestamp",
        Mode::TimestampIncrementing => "timestamp+incrementing",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<SourceConfig, ConfigError> {
        let map: ConfigMap = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SourceConfig::parse(&map)
    }

    #[test]
    fn confluent_keys_parse() {
        let c = parse(&[
            ("connection.url", "jdbc:postgresql://localhost/shop"),
            ("mode", "timestamp+incrementing"),
            ("table.whitelist", "orders,public.customers"),
            ("timestamp.column.name", "updated_at,created_at"),
            ("incrementing.column.name", "id"),
            ("topic.prefix", "pg-"),
            ("poll.interval.ms", "1000"),
            ("timestamp.delay.interval.ms", "250"),
            ("numeric.mapping", "best_fit"),
        ])
        .expect("valid");
        assert_eq!(c.mode, Mode::TimestampIncrementing);
        assert_eq!(
            c.input,
            Input::Tables(vec!["orders".into(), "public.customers".into()])
        );
        assert_eq!(c.timestamp_columns, ["updated_at", "created_at"]);
        assert_eq!(c.batch_max_rows, 100);
        assert_eq!(c.numeric_mapping, NumericMapping::BestFit);
    }

    #[test]
    fn mistakes_are_named() {
        let base = [
            ("connection.url", "jdbc:sqlite:/tmp/x.db"),
            ("topic.prefix", "t-"),
        ];
        let err = |extra: &[(&str, &str)]| {
            let mut all = base.to_vec();
            all.extend_from_slice(extra);
            parse(&all).expect_err("invalid").to_string()
        };
        assert!(err(&[("mode", "timestamp")]).contains("timestamp.column.name"));
        assert!(err(&[("mode", "sometimes")]).contains("mode"));
        assert!(
            err(&[
                ("mode", "bulk"),
                ("query", "SELECT 1"),
                ("table.whitelist", "a")
            ])
            .contains("query")
        );
        assert!(
            err(&[("mode", "incrementing"), ("query", "SELECT * FROM a")])
                .contains("incrementing.column.name")
        );
        assert!(err(&[("mode", "bulk"), ("db.timezone", "Europe/Paris")]).contains("db.timezone"));
        assert!(err(&[("mode", "bulk"), ("batch.max.rows", "0")]).contains("batch.max.rows"));
        assert!(
            err(&[
                ("mode", "bulk"),
                ("dialect.name", "PostgreSqlDatabaseDialect")
            ])
            .contains("dialect.name")
        );
        assert!(err(&[("mode", "bulk"), ("tabel.whitelist", "a")]).contains("tabel.whitelist"));
    }
}
