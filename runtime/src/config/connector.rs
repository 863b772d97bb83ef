//! A connector config: its name, the keys every connector has (handled by
//! the runtime), and the plugin's own keys.

use std::path::Path;

use serde::Deserialize;
use sluice_sdk::config::{ConfigError, ConfigMap, from_string_map};

use crate::schema::registry::stores::{Store, StoreType};

use super::*;

/// A connector as Kafka Connect's JSON gives it: `{"name": ..., "config": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorSpec {
    pub name: String,
    pub config: ConfigMap,
}

impl ConnectorSpec {
    pub fn load(file: &Path) -> Result<Self, ConfigFileError> {
        let json = read_json(file)?;
        Self::from_json(&json).map_err(|error| ConfigFileError::Invalid {
            file: file.to_path_buf(),
            error,
        })
    }

    /// Accepts `{"name", "config"}`, or a flat config with a `name` key (the
    /// shape of Kafka Connect's standalone `.properties` files).
    pub fn from_json(json: &serde_json::Value) -> Result<Self, ConfigError> {
        let object = json.as_object().ok_or_else(|| {
            ConfigError::general("expected a JSON object {\"name\": ..., \"config\": {...}}")
        })?;
        let (name, mut config) = match object.get("config") {
            Some(config) => {
                for k in object.keys() {
                    if k != "name" && k != "config" {
                        return Err(ConfigError::new(
                            k.as_str(),
                            "unexpected top-level key; expected only `name` and `config`",
                        ));
                    }
                }
                let config = string_map_from_json(config).map_err(|e| e.in_namespace("config."))?;
                let name = match object.get("name") {
                    Some(serde_json::Value::String(n)) => Some(n.clone()),
                    Some(_) => return Err(ConfigError::new("name", "expected a string")),
                    None => None,
                };
                (name, config)
            }
            None => (None, string_map_from_json(json)?),
        };
        let name = match (name, config.get("name")) {
            (Some(n), Some(inner)) if &n != inner => {
                return Err(ConfigError::new(
                    "config.name",
                    format!("`{inner}` differs from the connector name `{n}`"),
                ));
            }
            (Some(n), _) => n,
            (None, Some(inner)) => inner.clone(),
            (None, None) => return Err(ConfigError::new("name", "is required but missing")),
        };
        validate_connector_name(&name)?;
        config.insert("name".into(), name.clone());
        Ok(ConnectorSpec { name, config })
    }
}

/// The longest connector name: it goes into consumer group ids,
/// transactional ids, status keys and the JDBC sink's offsets table
/// (`VARCHAR(255)`, with a prefix).
pub const MAX_CONNECTOR_NAME: usize = 200;

/// Most tasks of one connector, and most records of one batch: a single
/// config change must not be able to exhaust the worker's memory.
pub const MAX_TASKS: u32 = 1024;
pub const MAX_BATCH_RECORDS: usize = 1_000_000;

pub fn validate_connector_name(name: &str) -> Result<(), ConfigError> {
    if name.trim().is_empty() {
        return Err(ConfigError::new("name", "must not be empty"));
    }
    if name.chars().count() > MAX_CONNECTOR_NAME {
        return Err(ConfigError::new(
            "name",
            format!(
                "has {} characters, at most {MAX_CONNECTOR_NAME}: it names the connector's consumer group, transactional ids and stored offsets",
                name.chars().count()
            ),
        ));
    }
    if name.chars().any(|c| c.is_control() || c == '/') {
        return Err(ConfigError::new(
            "name",
            "must not contain `/` or control characters",
        ));
    }
    Ok(())
}

/// Where a key of [`COMMON_KEYS`] is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// By [`CommonKeys`].
    Common,
    /// By the `errors.*` policy.
    Errors,
}

/// Whether `GET /connector-plugins/{class}/config` lists a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    No,
    Always,
    /// Listed for sinks and streams, which consume topics.
    NotForSources,
}

/// A key every connector has, handled by the runtime.
#[derive(Debug)]
pub struct CommonKey {
    pub name: &'static str,
    /// Kafka Connect's type name.
    pub kind: &'static str,
    pub required: bool,
    pub default: Option<&'static str>,
    pub doc: &'static str,
    pub section: Section,
    pub listed: Listed,
}

const fn key(
    name: &'static str,
    kind: &'static str,
    default: Option<&'static str>,
    doc: &'static str,
    listed: Listed,
) -> CommonKey {
    CommonKey {
        name,
        kind,
        required: default.is_none() && !matches!(listed, Listed::No),
        default,
        doc,
        section: Section::Common,
        listed,
    }
}

/// The runtime's keys of a connector config (Kafka Connect's
/// `ConnectorConfig` and `SinkConnectorConfig`): which keys are the
/// runtime's rather than the plugin's, and what the REST API lists for
/// them, in its order. [`CommonKeys`] reads them; a test checks the two
/// agree.
pub const COMMON_KEYS: &[CommonKey] = &[
    key(
        "name",
        "STRING",
        None,
        "Globally unique name of the connector",
        Listed::Always,
    ),
    key(
        "connector.class",
        "STRING",
        None,
        "The connector's class: a Sluice name or Kafka Connect's",
        Listed::Always,
    ),
    key(
        "tasks.max",
        "INT",
        Some("1"),
        "Most tasks to run",
        Listed::Always,
    ),
    key(
        "transforms",
        "LIST",
        Some(""),
        "Transform aliases, applied in order",
        Listed::Always,
    ),
    key(
        "predicates",
        "LIST",
        Some(""),
        "Predicate aliases",
        Listed::Always,
    ),
    CommonKey {
        section: Section::Errors,
        ..key(
            "errors.tolerance",
            "STRING",
            Some("none"),
            "none: a failed record fails the task; all: it is skipped (and dead-lettered)",
            Listed::Always,
        )
    },
    CommonKey {
        section: Section::Errors,
        ..key(
            "errors.deadletterqueue.topic.name",
            "STRING",
            Some(""),
            "The dead-letter queue",
            Listed::Always,
        )
    },
    key(
        "batch.max.records",
        "INT",
        Some("500"),
        "Most records per batch",
        Listed::Always,
    ),
    key(
        "topics",
        "LIST",
        None,
        "Topics to consume",
        Listed::NotForSources,
    ),
    key(
        "topics.regex",
        "STRING",
        None,
        "Consume every topic whose whole name matches this regular expression (instead of `topics`)",
        Listed::NotForSources,
    ),
    key(
        "key.converter",
        "CLASS",
        None,
        "How record keys are checked",
        Listed::No,
    ),
    key(
        "value.converter",
        "CLASS",
        None,
        "How record values are checked",
        Listed::No,
    ),
    key(
        "key.converter.schemas.enable",
        "BOOLEAN",
        None,
        "JsonConverter: keys are {\"schema\", \"payload\"} envelopes",
        Listed::No,
    ),
    key(
        "value.converter.schemas.enable",
        "BOOLEAN",
        None,
        "JsonConverter: values are {\"schema\", \"payload\"} envelopes",
        Listed::No,
    ),
    key(
        "key.converter.decimal.format",
        "STRING",
        None,
        "JsonConverter with schemas: how a Decimal key is written, BASE64 or NUMERIC",
        Listed::No,
    ),
    key(
        "value.converter.decimal.format",
        "STRING",
        None,
        "JsonConverter with schemas: how a Decimal value is written, BASE64 or NUMERIC",
        Listed::No,
    ),
    key(
        "key.converter.replace.null.with.default",
        "BOOLEAN",
        None,
        "JsonConverter with schemas: a null key with a default is its default",
        Listed::No,
    ),
    key(
        "value.converter.replace.null.with.default",
        "BOOLEAN",
        None,
        "JsonConverter with schemas: a null value with a default is its default",
        Listed::No,
    ),
    key(
        "key.converter.schemas.cache.size",
        "INT",
        None,
        "JsonConverter with schemas: key schemas kept parsed",
        Listed::No,
    ),
    key(
        "value.converter.schemas.cache.size",
        "INT",
        None,
        "JsonConverter with schemas: value schemas kept parsed",
        Listed::No,
    ),
    key(
        "topic.creation.default.partitions",
        "INT",
        None,
        "Partitions of topics the connector creates",
        Listed::No,
    ),
    key(
        "topic.creation.default.replication.factor",
        "SHORT",
        None,
        "Replication factor of topics the connector creates",
        Listed::No,
    ),
    key(
        "batch.max.ms",
        "LONG",
        None,
        "Longest wait to fill a batch, in ms",
        Listed::No,
    ),
    key(
        "batch.linger.ms",
        "LONG",
        None,
        "How long a batch waits for more records once the consumer has none at hand, in ms (0: it closes at once)",
        Listed::No,
    ),
    key(
        "delivery.guarantee",
        "STRING",
        None,
        "at-most-once, at-least-once or exactly-once",
        Listed::No,
    ),
    key(
        "transaction.boundary",
        "STRING",
        None,
        "Exactly-once sources: poll or interval",
        Listed::No,
    ),
    key(
        "transaction.boundary.interval.ms",
        "LONG",
        None,
        "With transaction.boundary=interval: how often a transaction commits",
        Listed::No,
    ),
];

/// Secrets are never shown back: the values of keys named like a secret
/// (Kafka Connect's PASSWORD keys and the like), and wherever else those
/// values or inline passwords appear (URLs, JAAS configs).
pub fn redact(config: &ConfigMap) -> ConfigMap {
    let secrets = Secrets::of(config);
    config
        .iter()
        .map(|(k, v)| {
            let shown = if is_secret_key(k) {
                HIDDEN.to_string()
            } else {
                secrets.hide(v)
            };
            (k.clone(), shown)
        })
        .collect()
}

const HIDDEN: &str = "[hidden]";

/// Keys whose whole value is a secret.
fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "password",
        "secret",
        "token",
        "credentials",
        "jaas.config",
        "user.info",
        "private.key",
        "api.key",
        "apikey",
    ]
    .iter()
    .any(|s| key.contains(s))
}

/// Shorter values are not looked for elsewhere: hiding every `ab` in every
/// answer would hide more than the secret.
const MIN_SECRET_LEN: usize = 4;

/// What of one connector's config must not appear in any text shown about
/// it: API answers, validate's errors, task traces, logs.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    /// Longest first, so a secret inside another is hidden with it.
    values: Vec<String>,
}

impl Secrets {
    pub fn of(config: &ConfigMap) -> Self {
        let mut values: Vec<String> = config
            .iter()
            .filter(|(k, v)| {
                is_secret_key(k)
                    && v.len() >= MIN_SECRET_LEN
                    // An unresolved reference names where the secret is.
                    && !(v.starts_with("${") && v.ends_with('}'))
            })
            .map(|(_, v)| v.clone())
            .collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Self { values }
    }

    /// `text` with every secret value, URL password and `password=` value
    /// replaced by `[hidden]`.
    pub fn hide(&self, text: &str) -> String {
        static URL_PASSWORD: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
            // scheme://user:PASSWORD@host
            regex::Regex::new(r"([A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:]*:)[^@/?#\s]+@")
                .expect("valid")
        });
        static ASSIGNED_PASSWORD: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(
            || {
                // password=x, sslpassword=x, password="x" (JAAS), secret: 'x'
                regex::Regex::new(
                    r#"(?i)((?:password|passwd|pwd|secret|token)\s*[=:]\s*)("[^"]*"|'[^']*'|[^&;,\s"']+)"#,
                )
                .expect("valid")
            },
        );
        let mut out = text.to_string();
        for value in &self.values {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), HIDDEN);
            }
        }
        let out = URL_PASSWORD.replace_all(&out, format!("${{1}}{HIDDEN}@"));
        ASSIGNED_PASSWORD
            .replace_all(&out, format!("${{1}}{HIDDEN}"))
            .into_owned()
    }
}

/// The keys every connector has, handled by the runtime rather than the
/// plugin (Kafka Connect's `ConnectorConfig` and `SinkConnectorConfig`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommonKeys {
    name: String,
    #[serde(rename = "connector.class")]
    connector_class: String,
    #[serde(rename = "tasks.max", default = "one")]
    tasks_max: u32,
    #[serde(default)]
    topics: Vec<String>,
    #[serde(rename = "topics.regex", default)]
    topics_regex: Option<String>,
    #[serde(default)]
    transforms: Vec<String>,
    #[serde(default)]
    predicates: Vec<String>,
    #[serde(rename = "key.converter", default)]
    key_converter: Option<String>,
    #[serde(rename = "value.converter", default)]
    value_converter: Option<String>,
    #[serde(rename = "key.converter.schemas.enable", default)]
    key_converter_schemas: Option<bool>,
    #[serde(rename = "value.converter.schemas.enable", default)]
    value_converter_schemas: Option<bool>,
    #[serde(rename = "key.converter.decimal.format", default)]
    key_decimal_format: Option<DecimalFormat>,
    #[serde(rename = "value.converter.decimal.format", default)]
    value_decimal_format: Option<DecimalFormat>,
    #[serde(rename = "key.converter.replace.null.with.default", default)]
    key_replace_null_with_default: Option<bool>,
    #[serde(rename = "value.converter.replace.null.with.default", default)]
    value_replace_null_with_default: Option<bool>,
    #[serde(rename = "key.converter.schemas.cache.size", default)]
    key_schemas_cache_size: Option<usize>,
    #[serde(rename = "value.converter.schemas.cache.size", default)]
    value_schemas_cache_size: Option<usize>,
    #[serde(rename = "topic.creation.default.partitions", default)]
    topic_partitions: Option<i32>,
    #[serde(rename = "topic.creation.default.replication.factor", default)]
    topic_replication_factor: Option<i32>,
    /// Most records per batch through transforms and the sink (Sluice).
    #[serde(rename = "batch.max.records", default = "default_batch_records")]
    batch_max_records: usize,
    /// Longest wait to fill a sink batch, in ms (Sluice).
    #[serde(rename = "batch.max.ms", default = "default_batch_ms")]
    batch_max_ms: u64,
    /// How long a sink or stream batch waits for more records once the
    /// consumer has none at hand (Sluice); 0 closes it at once, as Kafka
    /// Connect's poll returns what it has.
    #[serde(rename = "batch.linger.ms", default)]
    batch_linger_ms: u64,
    #[serde(rename = "delivery.guarantee", default)]
    delivery_guarantee: DeliveryGuarantee,
    /// Exactly-once sources: when a transaction commits (Kafka Connect's key).
    #[serde(rename = "transaction.boundary", default)]
    transaction_boundary: TransactionBoundary,
    #[serde(rename = "transaction.boundary.interval.ms", default)]
    transaction_boundary_interval_ms: Option<u64>,
}

/// `transaction.boundary` of an exactly-once source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransactionBoundary {
    /// One transaction per batch the task polls.
    #[default]
    Poll,
    /// One transaction per `transaction.boundary.interval.ms`.
    Interval,
    /// Defined by the connector (Kafka Connect); refused with a reason.
    Connector,
}

/// `delivery.guarantee`: what a connector promises about each record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryGuarantee {
    /// Offsets are committed before the records are written: a crash loses
    /// what was in flight, never duplicates it.
    AtMostOnce,
    /// Offsets are committed after the records are written: a crash
    /// repeats what was in flight, never loses it.
    #[default]
    AtLeastOnce,
    /// Records and offsets are committed together: a crash neither loses
    /// nor repeats.
    ExactlyOnce,
}

fn one() -> u32 {
    1
}
fn default_batch_records() -> usize {
    500
}
fn default_batch_ms() -> u64 {
    100
}

/// Converters Sluice accepts: without schemas all of them pass bytes through
/// unchanged, which is what these do for schemaless JSON; `JsonConverter`
/// with `schemas.enable=true` reads and writes its envelope.
const PASS_THROUGH_CONVERTERS: [&str; 6] = [
    "org.apache.kafka.connect.json.JsonConverter",
    "org.apache.kafka.connect.storage.StringConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter",
    "JsonConverter",
    "StringConverter",
    "ByteArrayConverter",
];

/// The runtime's part of a connector config, validated; the rest is the
/// plugin's.
#[derive(Debug, Clone)]
pub struct CommonConfig {
    pub name: String,
    pub connector_class: String,
    pub tasks_max: u32,
    pub topics: Vec<String>,
    /// `topics.regex`: consume every topic whose whole name matches.
    pub topics_regex: Option<String>,
    pub transforms: Vec<TransformSpec>,
    pub topic_partitions: Option<i32>,
    pub topic_replication_factor: Option<i32>,
    pub batch_max_records: usize,
    pub batch_max_ms: u64,
    pub batch_linger_ms: u64,
    pub errors: ErrorPolicy,
    pub key_converter: Converter,
    pub value_converter: Converter,
    /// `key.converter` is `JsonConverter` with `schemas.enable=true`.
    pub key_schemas: Option<JsonSchemas>,
    /// `value.converter` is `JsonConverter` with `schemas.enable=true`.
    pub value_schemas: Option<JsonSchemas>,
    /// `key.converter` is one of Confluent's registry converters.
    pub key_registry: Option<RegistrySettings>,
    /// `value.converter` is one of Confluent's registry converters.
    pub value_registry: Option<RegistrySettings>,
    pub delivery_guarantee: DeliveryGuarantee,
    pub transaction_boundary: TransactionBoundary,
    /// None: the worker's `offset.flush.interval.ms`.
    pub transaction_boundary_interval_ms: Option<u64>,
    /// `consumer.override.*`, over the worker's `consumer.*`.
    pub consumer_overrides: ConfigMap,
    /// `producer.override.*`, over the worker's `producer.*`.
    pub producer_overrides: ConfigMap,
}

/// `JsonConverter`'s settings when `schemas.enable=true`: keys or values are
/// `{"schema": ..., "payload": ...}` envelopes, read and written by
/// `crate::schema`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonSchemas {
    /// `decimal.format`: how a `Decimal` is written (both are read).
    pub decimal_format: DecimalFormat,
    /// `replace.null.with.default` (default true): a null with a default
    /// reads and writes as the default.
    pub replace_null_with_default: bool,
    /// `schemas.cache.size` (default 1000): schemas kept parsed.
    pub cache_size: usize,
}

/// `JsonConverter`'s `decimal.format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DecimalFormat {
    /// Base64 of the unscaled value's big-endian two's complement bytes.
    #[default]
    Base64,
    /// A JSON number (Java's `BigDecimal.toString`).
    Numeric,
}

/// What a sink checks a consumed key or value is, before anything else
/// (Kafka Connect's converter stage; without schemas Sluice passes the
/// bytes on unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Converter {
    /// Any bytes (also the default when no converter is named).
    ByteArray,
    /// UTF-8 text.
    String,
    /// JSON (schemaless).
    Json,
}

impl Converter {
    fn parse(key: &str, class: Option<&str>) -> Result<Self, ConfigError> {
        Ok(match class.map(|c| c.rsplit('.').next().unwrap_or(c)) {
            None | Some("ByteArrayConverter") => Converter::ByteArray,
            Some("StringConverter") => Converter::String,
            Some("JsonConverter") => Converter::Json,
            // Read and written by `crate::schema`'s registry converters.
            Some(_) if registry_format(class).is_some() => Converter::ByteArray,
            Some(_) => {
                return Err(ConfigError::new(
                    key,
                    unsupported_converter(class.unwrap_or_default()),
                ));
            }
        })
    }

    pub fn class_name(self) -> &'static str {
        match self {
            Converter::ByteArray => "org.apache.kafka.connect.converters.ByteArrayConverter",
            Converter::String => "org.apache.kafka.connect.storage.StringConverter",
            Converter::Json => "org.apache.kafka.connect.json.JsonConverter",
        }
    }

    /// Checks one part of a consumed record.
    pub fn check(self, bytes: Option<&[u8]>) -> Result<(), sluice_sdk::ConnectError> {
        let Some(b) = bytes else { return Ok(()) };
        match self {
            Converter::ByteArray => Ok(()),
            Converter::String => std::str::from_utf8(b).map(|_| ()).map_err(|e| {
                sluice_sdk::ConnectError::data(format!("not UTF-8: {e}")).with_class("InvalidUtf8")
            }),
            Converter::Json => serde_json::from_slice::<serde::de::IgnoredAny>(b)
                .map(|_| ())
                .map_err(|e| {
                    sluice_sdk::ConnectError::data(format!("not JSON: {e}"))
                        .with_class("MalformedJson")
                }),
        }
    }
}

impl CommonConfig {
    /// Splits `config` into the validated common part and the plugin's keys.
    pub fn split(config: &ConfigMap) -> Result<(CommonConfig, ConfigMap), ConfigError> {
        let mut common = ConfigMap::new();
        let mut plugin = ConfigMap::new();
        let mut transform_keys = ConfigMap::new();
        let mut predicate_keys = ConfigMap::new();
        let mut error_keys = ConfigMap::new();
        let mut consumer_overrides = ConfigMap::new();
        let mut producer_overrides = ConfigMap::new();
        let mut key_registry_keys = ConfigMap::new();
        let mut value_registry_keys = ConfigMap::new();
        for (k, v) in config {
            if let Some((is_key, rest)) = registry_converter_key(config, k) {
                if is_key {
                    &mut key_registry_keys
                } else {
                    &mut value_registry_keys
                }
                .insert(rest.to_string(), v.clone());
            } else if let Some(rest) = k.strip_prefix("consumer.override.") {
                consumer_overrides.insert(rest.to_string(), v.clone());
            } else if let Some(rest) = k.strip_prefix("producer.override.") {
                producer_overrides.insert(rest.to_string(), v.clone());
            } else if let Some(rest) = k.strip_prefix("transforms.") {
                transform_keys.insert(rest.to_string(), v.clone());
            } else if let Some(rest) = k.strip_prefix("predicates.") {
                predicate_keys.insert(rest.to_string(), v.clone());
            } else if let Some(rest) = k.strip_prefix("errors.") {
                error_keys.insert(rest.to_string(), v.clone());
            } else if is_common_key(k) {
                common.insert(k.clone(), v.clone());
            } else {
                plugin.insert(k.clone(), v.clone());
            }
        }
        let keys: CommonKeys = from_string_map(&common)?;
        check_overrides(&consumer_overrides, &producer_overrides)?;
        check_common_keys(&keys)?;
        let errors = ErrorPolicy::parse(&error_keys, &keys.topics)?;
        let key_converter = Converter::parse("key.converter", keys.key_converter.as_deref())?;
        let value_converter = Converter::parse("value.converter", keys.value_converter.as_deref())?;
        let json_schemas = |schemas: Option<bool>,
                            decimal_format: Option<DecimalFormat>,
                            replace_null: Option<bool>,
                            cache_size: Option<usize>| {
            (schemas == Some(true)).then(|| JsonSchemas {
                decimal_format: decimal_format.unwrap_or_default(),
                replace_null_with_default: replace_null.unwrap_or(true),
                cache_size: cache_size.unwrap_or(1000),
            })
        };
        let key_schemas = json_schemas(
            keys.key_converter_schemas,
            keys.key_decimal_format,
            keys.key_replace_null_with_default,
            keys.key_schemas_cache_size,
        );
        let value_schemas = json_schemas(
            keys.value_converter_schemas,
            keys.value_decimal_format,
            keys.value_replace_null_with_default,
            keys.value_schemas_cache_size,
        );
        let key_registry = registry_format(keys.key_converter.as_deref())
            .map(|f| RegistrySettings::parse(f, "key.converter", true, &key_registry_keys))
            .transpose()?;
        let value_registry = registry_format(keys.value_converter.as_deref())
            .map(|f| RegistrySettings::parse(f, "value.converter", false, &value_registry_keys))
            .transpose()?;
        let predicates = parse_predicates(&keys.predicates, &predicate_keys)?;
        let transforms = parse_transforms(&keys.transforms, &transform_keys, &predicates)?;
        Ok((
            CommonConfig {
                name: keys.name,
                connector_class: keys.connector_class,
                tasks_max: keys.tasks_max,
                topics: keys.topics,
                topics_regex: keys.topics_regex,
                transforms,
                topic_partitions: keys.topic_partitions,
                topic_replication_factor: keys.topic_replication_factor,
                batch_max_records: keys.batch_max_records,
                batch_max_ms: keys.batch_max_ms,
                batch_linger_ms: keys.batch_linger_ms,
                errors,
                key_converter,
                value_converter,
                key_schemas,
                value_schemas,
                key_registry,
                value_registry,
                delivery_guarantee: keys.delivery_guarantee,
                transaction_boundary: keys.transaction_boundary,
                transaction_boundary_interval_ms: keys.transaction_boundary_interval_ms,
                consumer_overrides,
                producer_overrides,
            },
            plugin,
        ))
    }
}

/// What the runtime's guarantees rest on is not the connector's to change.
fn check_overrides(
    consumer_overrides: &ConfigMap,
    producer_overrides: &ConfigMap,
) -> Result<(), ConfigError> {
    for (prefix, overrides, fixed) in [
        (
            "consumer.override.",
            consumer_overrides,
            &[
                "group.id",
                "enable.auto.commit",
                "enable.auto.offset.store",
                "isolation.level",
                "auto.offset.reset",
            ][..],
        ),
        (
            "producer.override.",
            producer_overrides,
            &["transactional.id", "enable.idempotence"][..],
        ),
    ] {
        if let Some(k) = overrides.keys().find(|k| fixed.contains(&k.as_str())) {
            return Err(ConfigError::new(
                format!("{prefix}{k}"),
                "is set by Sluice to keep the delivery guarantee and cannot be overridden",
            ));
        }
    }
    Ok(())
}

/// A `topics.regex` both Rust's `regex` (which resolves it for the
/// offsets API) and librdkafka's subscription (POSIX extended syntax)
/// read alike: no Perl classes, lookarounds or flags.
fn check_topics_regex(pattern: &str) -> Result<(), String> {
    if pattern.trim().is_empty() {
        return Err("must be a regular expression".into());
    }
    if let Some(seq) = ["\\d", "\\w", "\\s", "\\D", "\\W", "\\S", "(?", "\\b"]
        .into_iter()
        .find(|s| pattern.contains(s))
    {
        return Err(format!(
            "`{pattern}` uses `{seq}`, which librdkafka's regular expressions (POSIX extended) do not have; use a class such as [0-9]"
        ));
    }
    regex::Regex::new(&format!("^(?:{pattern})$"))
        .map(|_| ())
        .map_err(|e| format!("`{pattern}` is not a valid regular expression: {e}"))
}

/// The whole-name subscription pattern librdkafka takes for `topics.regex`
/// (a topic beginning with `^` is a regular expression; Kafka Connect
/// matches the whole name).
pub fn topics_regex_subscription(pattern: &str) -> String {
    format!("^({pattern})$")
}

/// The common keys' values: in range, supported, consistent.
fn check_common_keys(keys: &CommonKeys) -> Result<(), ConfigError> {
    if keys.tasks_max == 0 || keys.tasks_max > MAX_TASKS {
        return Err(ConfigError::new(
            "tasks.max",
            format!("must be from 1 to {MAX_TASKS}"),
        ));
    }
    if let Some(pattern) = &keys.topics_regex {
        if !keys.topics.is_empty() {
            return Err(ConfigError::new(
                "topics.regex",
                "cannot be combined with `topics`: set one of them",
            ));
        }
        if let Err(why) = check_topics_regex(pattern) {
            return Err(ConfigError::new("topics.regex", why));
        }
    }
    for (key, converter, schemas, decimal_format, replace_null, cache_size) in [
        (
            "key.converter",
            &keys.key_converter,
            keys.key_converter_schemas,
            keys.key_decimal_format.is_some(),
            keys.key_replace_null_with_default.is_some(),
            keys.key_schemas_cache_size,
        ),
        (
            "value.converter",
            &keys.value_converter,
            keys.value_converter_schemas,
            keys.value_decimal_format.is_some(),
            keys.value_replace_null_with_default.is_some(),
            keys.value_schemas_cache_size,
        ),
    ] {
        if let Some(c) = converter
            && !PASS_THROUGH_CONVERTERS.contains(&c.as_str())
            && registry_format(Some(c)).is_none()
        {
            return Err(ConfigError::new(key, unsupported_converter(c)));
        }
        let json = converter
            .as_deref()
            .is_some_and(|c| c.rsplit('.').next() == Some("JsonConverter"));
        if schemas == Some(true) && !json {
            return Err(ConfigError::new(
                format!("{key}.schemas.enable"),
                format!(
                    "schema envelopes are JsonConverter's: set `{key}` to org.apache.kafka.connect.json.JsonConverter, or this to false"
                ),
            ));
        }
        for (name, set) in [
            ("decimal.format", decimal_format),
            ("replace.null.with.default", replace_null),
            ("schemas.cache.size", cache_size.is_some()),
        ] {
            if set && schemas != Some(true) {
                return Err(ConfigError::new(
                    format!("{key}.{name}"),
                    format!("applies only to `{key}.schemas.enable=true`"),
                ));
            }
        }
        if cache_size == Some(0) {
            return Err(ConfigError::new(
                format!("{key}.schemas.cache.size"),
                "must be at least 1",
            ));
        }
    }
    if keys.batch_max_records == 0 || keys.batch_max_records > MAX_BATCH_RECORDS {
        return Err(ConfigError::new(
            "batch.max.records",
            format!("must be from 1 to {MAX_BATCH_RECORDS}"),
        ));
    }
    if keys.transaction_boundary == TransactionBoundary::Connector {
        return Err(ConfigError::new(
            "transaction.boundary",
            "`connector` (boundaries defined by the connector) is not supported: Sluice's connector API has no way to define them; use poll or interval",
        ));
    }
    if keys.transaction_boundary_interval_ms.is_some()
        && keys.transaction_boundary != TransactionBoundary::Interval
    {
        return Err(ConfigError::new(
            "transaction.boundary.interval.ms",
            "applies only with transaction.boundary=interval",
        ));
    }
    if keys.transaction_boundary_interval_ms == Some(0) {
        return Err(ConfigError::new(
            "transaction.boundary.interval.ms",
            "must be at least 1",
        ));
    }
    Ok(())
}

/// The plugin's keys of `config`: those [`CommonConfig::split`] hands on,
/// whether or not the runtime's keys are valid.
pub fn plugin_keys(config: &ConfigMap) -> ConfigMap {
    config
        .iter()
        .filter(|(k, _)| {
            !RUNTIME_NAMESPACES.iter().any(|p| k.starts_with(p))
                && !is_common_key(k)
                && registry_converter_key(config, k).is_none()
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The prefixes of the runtime's keys besides [`COMMON_KEYS`]: what
/// [`CommonConfig::split`] reads apart from the plugin's keys.
const RUNTIME_NAMESPACES: [&str; 5] = [
    "consumer.override.",
    "producer.override.",
    "transforms.",
    "predicates.",
    "errors.",
];

/// Confluent's Avro converter, by its class name.
pub const AVRO_CONVERTER: &str = "io.confluent.connect.avro.AvroConverter";
/// Confluent's JSON Schema converter, by its class name.
pub const JSON_SCHEMA_CONVERTER: &str = "io.confluent.connect.json.JsonSchemaConverter";
/// Confluent's Protobuf converter, by its class name.
pub const PROTOBUF_CONVERTER: &str = "io.confluent.connect.protobuf.ProtobufConverter";

/// The data formats of Confluent's converters that keep schemas in a
/// registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryFormat {
    Avro,
    JsonSchema,
    Protobuf,
}

impl RegistryFormat {
    pub fn class_name(self) -> &'static str {
        match self {
            RegistryFormat::Avro => AVRO_CONVERTER,
            RegistryFormat::JsonSchema => JSON_SCHEMA_CONVERTER,
            RegistryFormat::Protobuf => PROTOBUF_CONVERTER,
        }
    }
}

/// Which registry converter `class` is, if any (by full or short name).
fn registry_format(class: Option<&str>) -> Option<RegistryFormat> {
    match class? {
        AVRO_CONVERTER | "AvroConverter" => Some(RegistryFormat::Avro),
        JSON_SCHEMA_CONVERTER | "JsonSchemaConverter" => Some(RegistryFormat::JsonSchema),
        PROTOBUF_CONVERTER | "ProtobufConverter" => Some(RegistryFormat::Protobuf),
        _ => None,
    }
}

fn unsupported_converter(class: &str) -> String {
    format!(
        "`{class}` is not supported; Sluice has JsonConverter (with or without schemas.enable), {AVRO_CONVERTER}, {JSON_SCHEMA_CONVERTER}, {PROTOBUF_CONVERTER}, StringConverter and ByteArrayConverter"
    )
}

/// A key of a registry converter (`key.converter.schema.registry.url`):
/// which side (true: keys) and the converter's own name of it.
fn registry_converter_key<'k>(config: &ConfigMap, k: &'k str) -> Option<(bool, &'k str)> {
    if is_common_key(k) {
        return None;
    }
    for (is_key, prefix) in [(true, "key.converter"), (false, "value.converter")] {
        if let Some(rest) = k.strip_prefix(prefix).and_then(|r| r.strip_prefix('.'))
            && registry_format(config.get(prefix).map(String::as_str)).is_some()
        {
            return Some((is_key, rest));
        }
    }
    None
}

/// How Confluent's serializers name the subject of a schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubjectNameStrategy {
    /// `<topic>-key` or `<topic>-value` (the default).
    TopicName,
    /// The record's full name.
    RecordName,
    /// `<topic>-<record's full name>`.
    TopicRecordName,
}

/// A registry converter's settings (its keys under `key.converter.` or
/// `value.converter.`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrySettings {
    /// Which converter: the data format in the registry.
    pub format: RegistryFormat,
    /// `schema.registry.url`, comma-separated, tried in turn; none: the
    /// worker's built-in registry.
    pub registry_urls: Vec<String>,
    /// `basic.auth.user.info` (with `basic.auth.credentials.source`
    /// USER_INFO) or the URL's user info (source URL).
    pub basic_auth: Option<(String, String)>,
    /// `schema.registry.ssl.truststore.*`: PEM certificates, a JKS or a
    /// PKCS12 store.
    pub truststore: Option<Store>,
    /// `schema.registry.ssl.keystore.*` and `...key.password`, for
    /// registries that authenticate clients by certificate: a PEM file
    /// (the certificate chain and its unencrypted private key), a JKS or a
    /// PKCS12 store.
    pub keystore: Option<Store>,
    /// `auto.register.schemas` (default true).
    pub auto_register_schemas: bool,
    /// `use.latest.version` (default false): write with the subject's
    /// latest schema instead of registering one.
    pub use_latest_version: bool,
    /// `key.subject.name.strategy` or `value.subject.name.strategy`.
    pub subject_name_strategy: SubjectNameStrategy,
    /// `json.fail.invalid.schema` (JsonSchemaConverter, default false): a
    /// value that does not validate against its JSON Schema is a record
    /// error instead of being written or read as it is.
    pub fail_invalid_schema: bool,
    /// `object.additional.properties` (JsonSchemaConverter, default true):
    /// the JSON Schema of a struct allows other properties (an open
    /// content model, under which adding a field is not BACKWARD
    /// compatible); false closes it.
    pub object_additional_properties: bool,
    /// `enhanced.protobuf.schema.support` (ProtobufConverter, default
    /// false): a message's struct is named by its full name (with its
    /// package), so what is read writes back under the same package.
    pub enhanced_protobuf: bool,
}

impl RegistrySettings {
    /// `format`'s converter with none of its keys set: the worker's own
    /// registry and Confluent's defaults.
    pub fn defaults(format: RegistryFormat) -> Self {
        RegistrySettings {
            format,
            registry_urls: vec![],
            basic_auth: None,
            truststore: None,
            keystore: None,
            auto_register_schemas: true,
            use_latest_version: false,
            subject_name_strategy: SubjectNameStrategy::TopicName,
            fail_invalid_schema: false,
            object_additional_properties: true,
            enhanced_protobuf: false,
        }
    }

    /// The keys every registry converter reads; any other is refused,
    /// naming these.
    const KEYS: [&str; 15] = [
        "schema.registry.ssl.keystore.location",
        "schema.registry.ssl.keystore.type",
        "schema.registry.ssl.keystore.password",
        "schema.registry.ssl.key.password",
        "schema.registry.ssl.truststore.password",
        "schema.registry.url",
        "basic.auth.credentials.source",
        "basic.auth.user.info",
        "schema.registry.basic.auth.user.info",
        "auto.register.schemas",
        "use.latest.version",
        "key.subject.name.strategy",
        "value.subject.name.strategy",
        "schema.registry.ssl.truststore.location",
        "schema.registry.ssl.truststore.type",
    ];

    /// The keys of the Protobuf converter's that Sluice reads: the first
    /// as it is, the others at their defaults only (what Sluice does);
    /// another value is refused, naming the key.
    const PROTOBUF_KEYS: [&str; 8] = [
        "enhanced.protobuf.schema.support",
        "int.for.enums",
        "optional.for.nullables",
        "optional.for.proto2",
        "wrapper.for.nullables",
        "wrapper.for.raw.primitives",
        "generate.index.for.unions",
        "scrub.invalid.names",
    ];

    /// The defaults of [`Self::PROTOBUF_KEYS`], in order.
    const PROTOBUF_DEFAULTS: [bool; 8] = [false, false, false, true, false, true, true, false];

    /// The keys only the JSON Schema converter reads.
    const JSON_SCHEMA_KEYS: [&str; 2] =
        ["json.fail.invalid.schema", "object.additional.properties"];

    fn parse(
        format: RegistryFormat,
        prefix: &str,
        is_key: bool,
        keys: &ConfigMap,
    ) -> Result<Self, ConfigError> {
        let err = |k: &str, m: String| ConfigError::new(format!("{prefix}.{k}"), m);
        let own: &[&str] = match format {
            RegistryFormat::Avro => &[],
            RegistryFormat::JsonSchema => &Self::JSON_SCHEMA_KEYS,
            RegistryFormat::Protobuf => &Self::PROTOBUF_KEYS,
        };
        if let Some(k) = keys
            .keys()
            .find(|k| !Self::KEYS.contains(&k.as_str()) && !own.contains(&k.as_str()))
        {
            return Err(err(
                k,
                format!(
                    "is not a key of {} that Sluice supports; it reads {}",
                    format.class_name(),
                    Self::KEYS
                        .iter()
                        .chain(own)
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let boolean = |k: &str, default: bool| -> Result<bool, ConfigError> {
            match keys.get(k).map(|v| v.trim().to_ascii_lowercase()) {
                None => Ok(default),
                Some(v) if v == "true" => Ok(true),
                Some(v) if v == "false" => Ok(false),
                Some(v) => Err(err(k, format!("expected true or false, got `{v}`"))),
            }
        };
        if format == RegistryFormat::Protobuf {
            for (k, default) in Self::PROTOBUF_KEYS
                .iter()
                .zip(Self::PROTOBUF_DEFAULTS)
                .skip(1)
            {
                if boolean(k, default)? != default {
                    return Err(err(
                        k,
                        format!(
                            "Sluice maps Protobuf and Connect schemas as Confluent's ProtobufConverter does by default ({k}={default}); the other mapping is not supported"
                        ),
                    ));
                }
            }
        }
        let mut registry_urls = Vec::new();
        let mut url_auth = None;
        for url in keys
            .get("schema.registry.url")
            .map(|u| {
                u.split(',')
                    .map(str::trim)
                    .filter(|u| !u.is_empty())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
        {
            let parsed = reqwest::Url::parse(url)
                .map_err(|e| err("schema.registry.url", format!("`{url}` is not a URL: {e}")))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(err(
                    "schema.registry.url",
                    format!("`{url}` is not http or https"),
                ));
            }
            if !parsed.username().is_empty() {
                url_auth = Some((
                    parsed.username().to_string(),
                    parsed.password().unwrap_or_default().to_string(),
                ));
            }
            let mut plain = parsed.clone();
            let _ = plain.set_username("");
            let _ = plain.set_password(None);
            registry_urls.push(plain.to_string().trim_end_matches('/').to_string());
        }
        let user_info = keys
            .get("basic.auth.user.info")
            .or_else(|| keys.get("schema.registry.basic.auth.user.info"));
        let basic_auth = match keys
            .get("basic.auth.credentials.source")
            .map(|s| s.trim().to_ascii_uppercase())
            .as_deref()
        {
            None if user_info.is_none() => url_auth,
            None | Some("USER_INFO") => {
                let info = user_info.ok_or_else(|| {
                    err(
                        "basic.auth.user.info",
                        "is required with basic.auth.credentials.source=USER_INFO".into(),
                    )
                })?;
                let (user, password) = info
                    .split_once(':')
                    .ok_or_else(|| err("basic.auth.user.info", "must be `user:password`".into()))?;
                Some((user.to_string(), password.to_string()))
            }
            Some("URL") => url_auth,
            Some(other) => {
                return Err(err(
                    "basic.auth.credentials.source",
                    format!("`{other}` is not supported; Sluice reads USER_INFO and URL"),
                ));
            }
        };
        let store =
            |side: &str, key_password: Option<&String>| -> Result<Option<Store>, ConfigError> {
                let location_key = format!("schema.registry.ssl.{side}.location");
                let Some(location) = keys.get(&location_key) else {
                    return Ok(None);
                };
                let type_key = format!("schema.registry.ssl.{side}.type");
                let store_type = match keys.get(&type_key) {
                    None => StoreType::Pem,
                    Some(t) => StoreType::parse(t).ok_or_else(|| {
                        err(
                            &type_key,
                            format!("`{t}` is not a store type Sluice reads: PEM, JKS or PKCS12"),
                        )
                    })?,
                };
                Ok(Some(Store {
                    location: location.clone(),
                    store_type,
                    password: keys
                        .get(&format!("schema.registry.ssl.{side}.password"))
                        .cloned(),
                    key_password: key_password.cloned(),
                }))
            };
        let truststore = store("truststore", None)?;
        if let Some(t) = &truststore {
            t.trusted_pem()
                .map_err(|e| err("schema.registry.ssl.truststore.location", e))?;
        }
        let key_password = keys.get("schema.registry.ssl.key.password");
        let keystore = store("keystore", key_password)?;
        match &keystore {
            Some(k) => {
                if key_password.is_some() && k.store_type == StoreType::Pem {
                    return Err(err(
                        "schema.registry.ssl.key.password",
                        "encrypted PEM private keys are not supported: give the key unencrypted, or use a JKS or PKCS12 keystore".into(),
                    ));
                }
                k.identity_pem()
                    .map_err(|e| err("schema.registry.ssl.keystore.location", e))?;
            }
            None if key_password.is_some() => {
                return Err(err(
                    "schema.registry.ssl.key.password",
                    "is set without schema.registry.ssl.keystore.location".into(),
                ));
            }
            None => {}
        }
        let strategy_key = if is_key {
            "key.subject.name.strategy"
        } else {
            "value.subject.name.strategy"
        };
        let other_key = if is_key {
            "value.subject.name.strategy"
        } else {
            "key.subject.name.strategy"
        };
        if keys.contains_key(other_key) {
            return Err(err(
                other_key,
                format!("does not apply to `{prefix}`; set `{prefix}.{strategy_key}`"),
            ));
        }
        let subject_name_strategy = match keys
            .get(strategy_key)
            .map(|s| s.trim().rsplit('.').next().unwrap_or_default().to_string())
            .as_deref()
        {
            None | Some("TopicNameStrategy") => SubjectNameStrategy::TopicName,
            Some("RecordNameStrategy") => SubjectNameStrategy::RecordName,
            Some("TopicRecordNameStrategy") => SubjectNameStrategy::TopicRecordName,
            Some(other) => {
                return Err(err(
                    strategy_key,
                    format!(
                        "`{other}` is not supported; Sluice has TopicNameStrategy, RecordNameStrategy and TopicRecordNameStrategy"
                    ),
                ));
            }
        };
        Ok(RegistrySettings {
            format,
            registry_urls,
            basic_auth,
            truststore,
            keystore,
            auto_register_schemas: boolean("auto.register.schemas", true)?,
            use_latest_version: boolean("use.latest.version", false)?,
            subject_name_strategy,
            fail_invalid_schema: boolean("json.fail.invalid.schema", false)?,
            object_additional_properties: boolean("object.additional.properties", true)?,
            enhanced_protobuf: boolean("enhanced.protobuf.schema.support", false)?,
        })
    }
}

fn is_common_key(k: &str) -> bool {
    COMMON_KEYS
        .iter()
        .any(|key| key.name == k && key.section == Section::Common)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_hidden_by_value_and_inline() {
        let config: ConfigMap = [
            ("connection.password", "pw-1234"),
            ("api.key", "${file:/run/keys:api}"),
            ("ssl.key.password", "abc"),
            ("note", "uses pw-1234 and abc"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let secrets = Secrets::of(&config);
        // The value of a secret key, wherever it appears; a reference is
        // not a secret, and three characters are too short to look for.
        assert_eq!(
            secrets.hide("uses pw-1234 and abc"),
            "uses [hidden] and abc"
        );
        for (text, shown) in [
            (
                "postgres://app:pw@db:5432/x",
                "postgres://app:[hidden]@db:5432/x",
            ),
            (
                "jdbc:mysql://h/db?user=u&password=p1&x=1",
                "jdbc:mysql://h/db?user=u&password=[hidden]&x=1",
            ),
            (
                r#"PlainLoginModule required username="u" password="p w";"#,
                r#"PlainLoginModule required username="u" password=[hidden];"#,
            ),
            ("http://host:8081/subjects", "http://host:8081/subjects"),
        ] {
            assert_eq!(secrets.hide(text), shown);
        }
        let shown = redact(&config);
        assert_eq!(shown["connection.password"], "[hidden]");
        assert_eq!(shown["note"], "uses [hidden] and abc");
    }

    use serde_json::json;

    #[test]
    fn the_common_keys_table_and_their_parser_agree() {
        let probe: ConfigMap = [("no.such.key".to_string(), "x".to_string())].into();
        let err = from_string_map::<CommonKeys>(&probe).unwrap_err();
        let parsed: std::collections::BTreeSet<&str> = err
            .message
            .rsplit_once("supported keys are: ")
            .expect("serde lists the fields it knows")
            .1
            .split(", ")
            .collect();
        let table: std::collections::BTreeSet<&str> = COMMON_KEYS
            .iter()
            .filter(|k| k.section == Section::Common)
            .map(|k| k.name)
            .collect();
        assert_eq!(parsed, table);
    }

    #[test]
    fn unbounded_sizes_and_overlong_names_are_refused() {
        let base = |k: &str, v: &str| -> ConfigMap {
            [("name", "s"), ("connector.class", "datagen"), (k, v)]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        for (key, value) in [("tasks.max", "1000000"), ("batch.max.records", "100000000")] {
            let err = CommonConfig::split(&base(key, value)).unwrap_err();
            assert_eq!(err.key.as_deref(), Some(key), "{err}");
        }
        let long = "n".repeat(250);
        let err = ConnectorSpec::from_json(&json!({"name": long, "config": {}})).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("name"), "{err}");
        assert!(err.message.contains("at most"), "{err}");
    }

    #[test]
    fn avro_converter_keys_are_its_own_and_checked() {
        let config = |pairs: &[(&str, &str)]| -> ConfigMap {
            [
                ("name", "s"),
                ("connector.class", "datagen"),
                ("value.converter", AVRO_CONVERTER),
            ]
            .iter()
            .chain(pairs)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
        };
        let (common, plugin) = CommonConfig::split(&config(&[
            (
                "value.converter.schema.registry.url",
                "http://u:p@a:8081/, http://b:8081",
            ),
            ("value.converter.basic.auth.credentials.source", "URL"),
            ("value.converter.auto.register.schemas", "false"),
            (
                "value.converter.value.subject.name.strategy",
                "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
            ),
        ]))
        .unwrap();
        assert!(
            plugin.keys().all(|k| !k.starts_with("value.converter")),
            "{plugin:?}"
        );
        assert_eq!(
            common.value_registry,
            Some(RegistrySettings {
                format: RegistryFormat::Avro,
                registry_urls: vec!["http://a:8081".into(), "http://b:8081".into()],
                basic_auth: Some(("u".into(), "p".into())),
                truststore: None,
                keystore: None,
                auto_register_schemas: false,
                use_latest_version: false,
                subject_name_strategy: SubjectNameStrategy::TopicRecordName,
                fail_invalid_schema: false,
                object_additional_properties: true,
                enhanced_protobuf: false,
            })
        );
        assert_eq!(common.key_registry, None);
        for (pairs, key) in [
            (
                &[("value.converter.schemas.cache.config", "1")][..],
                "value.converter.schemas.cache.config",
            ),
            (
                &[("value.converter.schema.registry.url", "ftp://x")][..],
                "value.converter.schema.registry.url",
            ),
            (
                &[("value.converter.basic.auth.user.info", "no-colon")][..],
                "value.converter.basic.auth.user.info",
            ),
            (
                &[(
                    "value.converter.key.subject.name.strategy",
                    "TopicNameStrategy",
                )][..],
                "value.converter.key.subject.name.strategy",
            ),
            (
                &[
                    (
                        "value.converter.schema.registry.ssl.truststore.location",
                        "/x.jks",
                    ),
                    (
                        "value.converter.schema.registry.ssl.truststore.type",
                        "BCFKS",
                    ),
                ][..],
                "value.converter.schema.registry.ssl.truststore.type",
            ),
            (
                &[
                    (
                        "value.converter.schema.registry.ssl.truststore.location",
                        "/no/such.jks",
                    ),
                    ("value.converter.schema.registry.ssl.truststore.type", "JKS"),
                    (
                        "value.converter.schema.registry.ssl.truststore.password",
                        "p",
                    ),
                ][..],
                "value.converter.schema.registry.ssl.truststore.location",
            ),
            (
                &[("value.converter.schema.registry.ssl.key.password", "p")][..],
                "value.converter.schema.registry.ssl.key.password",
            ),
            (
                &[("value.converter.use.latest.version", "yes")][..],
                "value.converter.use.latest.version",
            ),
        ] {
            let err = CommonConfig::split(&config(pairs)).unwrap_err();
            assert_eq!(err.key.as_deref(), Some(key), "{err}");
        }
    }

    #[test]
    fn schema_envelopes_are_json_converters_with_its_keys() {
        let config = |pairs: &[(&str, &str)]| -> ConfigMap {
            [("name", "s"), ("connector.class", "datagen")]
                .iter()
                .chain(pairs)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let (common, plugin) = CommonConfig::split(&config(&[
            (
                "value.converter",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
            ("value.converter.schemas.enable", "true"),
            ("value.converter.decimal.format", "NUMERIC"),
            ("key.converter", "JsonConverter"),
            ("key.converter.schemas.enable", "false"),
        ]))
        .unwrap();
        assert!(plugin.is_empty(), "{plugin:?}");
        assert_eq!(common.key_schemas, None);
        assert_eq!(
            common.value_schemas,
            Some(JsonSchemas {
                decimal_format: DecimalFormat::Numeric,
                replace_null_with_default: true,
                cache_size: 1000,
            })
        );
        for (pairs, key, says) in [
            (
                &[("value.converter.schemas.enable", "true")][..],
                "value.converter.schemas.enable",
                "JsonConverter",
            ),
            (
                &[
                    ("key.converter", "StringConverter"),
                    ("key.converter.schemas.enable", "true"),
                ],
                "key.converter.schemas.enable",
                "JsonConverter",
            ),
            (
                &[
                    ("value.converter", "JsonConverter"),
                    ("value.converter.decimal.format", "BASE64"),
                ],
                "value.converter.decimal.format",
                "schemas.enable=true",
            ),
            (
                &[
                    ("value.converter", "JsonConverter"),
                    ("value.converter.schemas.enable", "true"),
                    ("value.converter.decimal.format", "HEX"),
                ],
                "value.converter.decimal.format",
                "",
            ),
            (
                &[
                    ("value.converter", "JsonConverter"),
                    ("value.converter.schemas.enable", "true"),
                    ("value.converter.schemas.cache.size", "0"),
                ],
                "value.converter.schemas.cache.size",
                "at least 1",
            ),
        ] {
            let err = CommonConfig::split(&config(pairs)).unwrap_err();
            assert_eq!(err.key.as_deref(), Some(key), "{err}");
            assert!(err.message.contains(says), "{err}");
        }
    }

    #[test]
    fn connector_spec_shapes() {
        let spec = ConnectorSpec::from_json(
            &json!({"name": "a", "config": {"connector.class": "datagen", "tasks.max": 2}}),
        )
        .unwrap();
        assert_eq!(spec.config.get("tasks.max").unwrap(), "2");
        assert_eq!(spec.config.get("name").unwrap(), "a");
        let err = ConnectorSpec::from_json(
            &json!({"config": {"connector.class": "x", "nested": {"a": 1}}}),
        )
        .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("config.nested"));
        let err =
            ConnectorSpec::from_json(&json!({"config": {"connector.class": "x"}})).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("name"));
    }

    #[test]
    fn common_keys_and_transforms() {
        let spec = ConnectorSpec::from_json(&json!({"name": "s", "config": {
            "connector.class": "jdbc-sink", "topics": "a, b", "transforms": "t",
            "transforms.t.type": "wasm", "transforms.t.module": "x.wasm", "transforms.t.field": "f",
            "connection.url": "jdbc:sqlite:x.db"
        }}))
        .unwrap();
        let (common, plugin) = CommonConfig::split(&spec.config).unwrap();
        assert_eq!(common.topics, vec!["a", "b"]);
        assert_eq!(common.transforms[0].config.get("field").unwrap(), "f");
        assert_eq!(plugin.keys().collect::<Vec<_>>(), vec!["connection.url"]);

        let mut bad = spec.config.clone();
        bad.insert("transforms.u.type".into(), "wasm".into());
        let err = CommonConfig::split(&bad).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("transforms.u.type"));
        let mut bad = spec.config.clone();
        bad.insert(
            "transforms.t.type".into(),
            "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value".into(),
        );
        let err = CommonConfig::split(&bad).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("transforms.t.type"));
        // A standard transform takes its module from the library.
        bad.insert(
            "transforms.t.type".into(),
            "org.apache.kafka.connect.transforms.InsertField$Value".into(),
        );
        let err = CommonConfig::split(&bad).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("transforms.t.module"));
        bad.remove("transforms.t.module");
        let (common, _) = CommonConfig::split(&bad).unwrap();
        assert_eq!(
            common.transforms[0].standard.as_deref(),
            Some("InsertField$Value")
        );
        let mut with_predicate = spec.config.clone();
        for (k, v) in [
            ("predicates", "onlyOrders"),
            (
                "predicates.onlyOrders.type",
                "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            ),
            ("predicates.onlyOrders.pattern", "orders-.*"),
            ("transforms.t.predicate", "onlyOrders"),
            ("transforms.t.negate", "true"),
            ("transforms.t.limits.timeout.ms", "250"),
            ("consumer.override.max.poll.records", "10"),
        ] {
            with_predicate.insert(k.into(), v.into());
        }
        let (common, plugin) = CommonConfig::split(&with_predicate).unwrap();
        assert_eq!(plugin, plugin_keys(&with_predicate));
        let t = &common.transforms[0];
        assert!(t.negate);
        assert_eq!(t.limits.timeout_ms, 250);
        assert!(
            !t.config.contains_key("limits.timeout.ms"),
            "limits are not passed to configure"
        );
        let p = &t.predicate.as_ref().unwrap().kind;
        let rec = |topic: &str| sluice_sdk::Record {
            topic: topic.into(),
            ..Default::default()
        };
        assert!(
            p.test(&rec("orders-eu")) && !p.test(&rec("x-orders-eu")),
            "whole-topic match"
        );
        let mut bad = with_predicate.clone();
        bad.insert("transforms.t.predicate".into(), "nope".into());
        assert_eq!(
            CommonConfig::split(&bad).unwrap_err().key.as_deref(),
            Some("transforms.t.predicate")
        );
        let mut bad = with_predicate.clone();
        bad.insert("predicates.onlyOrders.pattern".into(), "(".into());
        assert_eq!(
            CommonConfig::split(&bad).unwrap_err().key.as_deref(),
            Some("predicates.onlyOrders.pattern")
        );
        let mut bad = with_predicate.clone();
        bad.insert("transforms.t.limits.cpu".into(), "1".into());
        assert_eq!(
            CommonConfig::split(&bad).unwrap_err().key.as_deref(),
            Some("transforms.t.limits.cpu")
        );

        let mut bad = spec.config.clone();
        bad.insert("tasks.max".into(), "lots".into());
        let err = CommonConfig::split(&bad).unwrap_err();
        assert_eq!(
            err.to_string(),
            "key `tasks.max`: expected a non-negative integer, got `lots`"
        );
    }
}
