//! Worker and connector configs: parsed from Kafka Connect's JSON, validated
//! whole before anything starts, and reported with the file, the key and what
//! was expected when they are wrong.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sluice_sdk::config::{ConfigError, ConfigMap, from_string_map};

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: not valid JSON at line {line}, column {column}: {message}")]
    Syntax {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}: {error}")]
    Invalid { file: PathBuf, error: ConfigError },
}

/// Reads a JSON object whose values are Kafka Connect config values.
/// Numbers and booleans are accepted and kept as their text, as Kafka
/// Connect's REST API does; nested values are rejected by key.
pub fn string_map_from_json(value: &serde_json::Value) -> Result<ConfigMap, ConfigError> {
    let object = value
        .as_object()
        .ok_or_else(|| ConfigError::general("expected a JSON object of string values"))?;
    let mut map = ConfigMap::new();
    for (k, v) in object {
        let text = match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            serde_json::Value::Null => {
                return Err(ConfigError::new(k, "is null; expected a string value"));
            }
            _ => {
                return Err(ConfigError::new(
                    k,
                    "expected a string value (Kafka Connect config values are strings), got a nested JSON value",
                ));
            }
        };
        map.insert(k.clone(), text);
    }
    Ok(map)
}

fn read_json(file: &Path) -> Result<serde_json::Value, ConfigFileError> {
    let text = std::fs::read_to_string(file).map_err(|source| ConfigFileError::Read {
        file: file.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| ConfigFileError::Syntax {
        file: file.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

/// Kafka's rules for topic names, checked before any broker is asked.
pub(crate) fn check_topic_name(topic: &str) -> Result<(), String> {
    if topic.is_empty() || topic == "." || topic == ".." {
        return Err(format!("`{topic}` is not a valid topic name"));
    }
    if topic.len() > 249 {
        return Err(format!(
            "topic names have at most 249 characters; `{}...` has {}",
            &topic[..20],
            topic.len()
        ));
    }
    if let Some(c) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "`{topic}` has `{c}`; topic names use only letters, digits, `.`, `_` and `-`"
        ));
    }
    Ok(())
}

fn check_topic_key(key: &str, topic: &str) -> Result<(), ConfigError> {
    check_topic_name(topic).map_err(|why| ConfigError::new(key, why))
}

/// The worker's own keys (Kafka Connect's names where they exist).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkerKeys {
    #[serde(rename = "bootstrap.servers", default)]
    bootstrap_servers: Option<String>,
    #[serde(rename = "group.id", default = "default_group")]
    group_id: String,
    #[serde(default = "default_listeners")]
    listeners: Vec<String>,
    #[serde(rename = "plugin.path", default)]
    plugin_path: Vec<PathBuf>,
    #[serde(rename = "offset.storage.file.filename", default)]
    offset_storage_file: Option<PathBuf>,
    /// The compacted topic of source offsets.
    #[serde(rename = "offset.storage.topic", default = "default_offsets_topic")]
    offset_storage_topic: String,
    #[serde(
        rename = "offset.storage.partitions",
        default = "default_offsets_partitions"
    )]
    offset_storage_partitions: i32,
    /// -1: the broker's default.
    #[serde(rename = "offset.storage.replication.factor", default = "minus_one")]
    offset_storage_replication_factor: i32,
    /// Where connector configs and target states persist (standalone).
    #[serde(rename = "config.storage.file.filename", default)]
    config_storage_file: Option<PathBuf>,
    /// Accepted for Kafka Connect compatibility; Sluice commits offsets
    /// after every batch, more often than any interval.
    #[serde(rename = "offset.flush.interval.ms", default)]
    offset_flush_interval_ms: Option<u64>,
    #[serde(
        rename = "task.shutdown.graceful.timeout.ms",
        default = "default_shutdown_ms"
    )]
    task_shutdown_graceful_timeout_ms: u64,
    #[serde(rename = "worker.id", default)]
    worker_id: Option<String>,
    /// `text` (default) or `json`.
    #[serde(rename = "log.format", default)]
    log_format: Option<String>,
    /// A separate listener for `/metrics` only (it is also on `listeners`).
    #[serde(rename = "metrics.listener", default)]
    metrics_listener: Option<String>,
    /// The standard transform library component (`sluice_transforms.wasm`).
    #[serde(rename = "transforms.library", default)]
    transforms_library: Option<PathBuf>,
    /// Where compiled WASM components are cached between starts; empty to
    /// disable. Default: `$XDG_CACHE_HOME/sluice/wasm` or `~/.cache/sluice/wasm`.
    #[serde(rename = "wasm.cache.dir", default)]
    wasm_cache_dir: Option<String>,
    /// Partitions of topics created on the embedded broker when a connector
    /// does not say.
    #[serde(rename = "embedded.topic.partitions", default = "default_partitions")]
    embedded_topic_partitions: i32,
    /// The `https://` listener's certificate chain and key (PEM files).
    #[serde(rename = "listeners.https.ssl.certificate.location", default)]
    https_certificate: Option<PathBuf>,
    #[serde(rename = "listeners.https.ssl.key.location", default)]
    https_key: Option<PathBuf>,
    /// HTTP basic authentication of the REST API: `user:argon2-PHC-hash` lines.
    #[serde(rename = "rest.auth.users.file", default)]
    rest_auth_users_file: Option<PathBuf>,
    /// `true`: `/health` answers without credentials.
    #[serde(rename = "rest.auth.health.open", default)]
    rest_auth_health_open: Option<String>,
    /// Distributed mode (`sluice distributed`): see [`ClusterTopicsConfig`].
    #[serde(rename = "config.storage.topic", default)]
    config_storage_topic: Option<String>,
    #[serde(
        rename = "config.storage.replication.factor",
        default = "default_internal_replication"
    )]
    config_storage_replication_factor: i32,
    #[serde(rename = "status.storage.topic", default)]
    status_storage_topic: Option<String>,
    #[serde(
        rename = "status.storage.replication.factor",
        default = "default_internal_replication"
    )]
    status_storage_replication_factor: i32,
    #[serde(rename = "task.slots.topic", default)]
    task_slots_topic: Option<String>,
    #[serde(rename = "task.slots.partitions", default = "default_task_slots")]
    task_slots_partitions: i32,
    #[serde(
        rename = "task.slots.replication.factor",
        default = "default_internal_replication"
    )]
    task_slots_replication_factor: i32,
}

/// The Kafka topics a distributed worker keeps the cluster's state in and
/// coordinates through (`sluice distributed`).
#[derive(Debug, Clone)]
pub struct ClusterTopicsConfig {
    /// Connector configs, target states and restart requests (one
    /// partition, compacted).
    pub config_topic: Option<String>,
    pub config_replication_factor: i32,
    /// Task statuses and each worker's task slots (one partition, compacted).
    pub status_topic: Option<String>,
    pub status_replication_factor: i32,
    /// The coordination topic: its partitions are task slots, shared out
    /// by Kafka's group coordinator (default `<group.id>-task-slots`).
    pub slots_topic: String,
    pub slots_partitions: i32,
    pub slots_replication_factor: i32,
}

fn default_offsets_topic() -> String {
    "sluice-offsets".into()
}
fn default_offsets_partitions() -> i32 {
    25
}
fn minus_one() -> i32 {
    -1
}
fn default_group() -> String {
    "sluice".into()
}
fn default_listeners() -> Vec<String> {
    vec!["http://localhost:8083".into()]
}
fn default_shutdown_ms() -> u64 {
    5000
}
fn default_partitions() -> i32 {
    3
}
fn default_internal_replication() -> i32 {
    3
}
fn default_task_slots() -> i32 {
    64
}

/// Prefixes of client settings passed through to librdkafka: `producer.*`
/// and `consumer.*` for one kind of client, and the security settings for
/// all (so SASL_SSL clusters work).
const CLIENT_PREFIXES: [&str; 3] = ["producer.", "consumer.", "admin."];
const SHARED_CLIENT_PREFIXES: [&str; 4] = ["security.protocol", "sasl.", "ssl.", "client."];

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// `None`: start the embedded development broker.
    pub bootstrap_servers: Option<String>,
    pub group_id: String,
    pub listeners: Vec<String>,
    pub plugin_path: Vec<PathBuf>,
    pub offset_storage_file: Option<PathBuf>,
    pub offsets_topic: crate::offsets::OffsetsTopic,
    /// `offset.flush.interval.ms`: the default `transaction.boundary.interval.ms`.
    pub offset_flush_interval_ms: u64,
    pub config_storage_file: Option<PathBuf>,
    pub config_providers: crate::providers::ConfigProviders,
    pub task_shutdown_graceful_timeout_ms: u64,
    pub worker_id: Option<String>,
    pub embedded_topic_partitions: i32,
    pub wasm_cache_dir: Option<PathBuf>,
    pub transforms_library: Option<PathBuf>,
    pub log_format: crate::logging::LogFormat,
    /// `host:port` of the separate metrics listener, if any.
    pub metrics_listener: Option<String>,
    /// The certificate chain and key of an `https://` listener (PEM files).
    pub rest_tls: Option<(PathBuf, PathBuf)>,
    /// Basic authentication of the REST API, if set.
    pub rest_auth_users_file: Option<PathBuf>,
    pub rest_auth_health_open: bool,
    /// Keys accepted for compatibility that change nothing, with why: the
    /// worker logs them at start so nothing is ignored silently.
    pub inert_keys: Vec<(&'static str, &'static str)>,
    /// librdkafka settings for every client (security).
    pub client_common: ConfigMap,
    pub producer_overrides: ConfigMap,
    pub consumer_overrides: ConfigMap,
    pub admin_overrides: ConfigMap,
    pub cluster: ClusterTopicsConfig,
}

impl WorkerConfig {
    pub fn load(file: &Path) -> Result<Self, ConfigFileError> {
        let json = read_json(file)?;
        let invalid = |error| ConfigFileError::Invalid {
            file: file.to_path_buf(),
            error,
        };
        let map = string_map_from_json(&json).map_err(invalid)?;
        Self::from_map(&map).map_err(invalid)
    }

    pub fn from_map(map: &ConfigMap) -> Result<Self, ConfigError> {
        let mut own = ConfigMap::new();
        let mut client_common = ConfigMap::new();
        let mut provider_keys = ConfigMap::new();
        let mut prefixed: BTreeMap<&str, ConfigMap> = BTreeMap::new();
        for (k, v) in map {
            if let Some(prefix) = CLIENT_PREFIXES.iter().find(|p| k.starts_with(**p)) {
                prefixed
                    .entry(prefix)
                    .or_default()
                    .insert(k[prefix.len()..].to_string(), v.clone());
            } else if k == "config.providers" || k.starts_with("config.providers.") {
                provider_keys.insert(k.clone(), v.clone());
            } else if SHARED_CLIENT_PREFIXES.iter().any(|p| k.starts_with(p)) {
                client_common.insert(k.clone(), v.clone());
            } else {
                own.insert(k.clone(), v.clone());
            }
        }
        let keys: WorkerKeys = from_string_map(&own)?;
        if keys.listeners.is_empty() {
            return Err(ConfigError::new(
                "listeners",
                "must name at least one listener",
            ));
        }
        if keys.listeners.len() > 1 {
            return Err(ConfigError::new(
                "listeners",
                "names more than one listener; Sluice serves its REST API on one (http:// or https://)",
            ));
        }
        for l in &keys.listeners {
            parse_listener(l).map_err(|m| ConfigError::new("listeners", m))?;
        }
        let https = keys.listeners[0].starts_with("https://");
        let rest_tls = match (https, keys.https_certificate, keys.https_key) {
            (true, Some(cert), Some(key)) => Some((cert, key)),
            (true, None, _) => {
                return Err(ConfigError::new(
                    "listeners.https.ssl.certificate.location",
                    "is required for an https:// listener: the PEM file of its certificate chain",
                ));
            }
            (true, _, None) => {
                return Err(ConfigError::new(
                    "listeners.https.ssl.key.location",
                    "is required for an https:// listener: the PEM file of its private key",
                ));
            }
            (false, Some(_), _) => {
                return Err(ConfigError::new(
                    "listeners.https.ssl.certificate.location",
                    "has no effect: the listener is not https://",
                ));
            }
            (false, None, Some(_)) => {
                return Err(ConfigError::new(
                    "listeners.https.ssl.key.location",
                    "has no effect: the listener is not https://",
                ));
            }
            (false, None, None) => None,
        };
        if keys.embedded_topic_partitions < 1 {
            return Err(ConfigError::new(
                "embedded.topic.partitions",
                "must be at least 1",
            ));
        }
        if let Some(b) = &keys.bootstrap_servers
            && b.trim().is_empty()
        {
            return Err(ConfigError::new(
                "bootstrap.servers",
                "is empty; remove it to use the embedded broker, or name the cluster's brokers",
            ));
        }
        let inert_keys = Vec::new();
        check_topic_key("offset.storage.topic", &keys.offset_storage_topic)?;
        if keys.offset_storage_partitions < 1 {
            return Err(ConfigError::new(
                "offset.storage.partitions",
                "must be at least 1",
            ));
        }

        let wasm_cache_dir = match keys.wasm_cache_dir.as_deref() {
            Some("") => None,
            Some(dir) => Some(PathBuf::from(dir)),
            None => default_cache_dir(),
        };
        let log_format = match keys.log_format.as_deref() {
            None | Some("text") => crate::logging::LogFormat::Text,
            Some("json") => crate::logging::LogFormat::Json,
            Some(other) => {
                return Err(ConfigError::new(
                    "log.format",
                    format!("`{other}`; expected text or json"),
                ));
            }
        };
        let metrics_listener = match &keys.metrics_listener {
            Some(l) if l.starts_with("https://") => {
                return Err(ConfigError::new(
                    "metrics.listener",
                    format!("`{l}`: the metrics listener serves http:// only"),
                ));
            }
            Some(l) => {
                Some(parse_listener(l).map_err(|m| ConfigError::new("metrics.listener", m))?)
            }
            None => None,
        };
        let rest_auth_health_open = match keys.rest_auth_health_open.as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ConfigError::new(
                    "rest.auth.health.open",
                    format!("`{other}`; expected true or false"),
                ));
            }
        };
        if keys.task_slots_partitions < 1 {
            return Err(ConfigError::new(
                "task.slots.partitions",
                "must be at least 1 (it bounds the tasks a cluster spreads out; 64 by default)",
            ));
        }
        for (key, topic) in [
            ("config.storage.topic", &keys.config_storage_topic),
            ("status.storage.topic", &keys.status_storage_topic),
            ("task.slots.topic", &keys.task_slots_topic),
        ] {
            if topic.as_ref().is_some_and(|t| t.trim().is_empty()) {
                return Err(ConfigError::new(key, "is empty; name a topic"));
            }
        }
        let slots_topic = keys
            .task_slots_topic
            .clone()
            .unwrap_or_else(|| format!("{}-task-slots", keys.group_id));
        if keys.rest_auth_health_open.is_some() && keys.rest_auth_users_file.is_none() {
            return Err(ConfigError::new(
                "rest.auth.health.open",
                "has no effect without rest.auth.users.file",
            ));
        }
        Ok(WorkerConfig {
            rest_tls,
            rest_auth_users_file: keys.rest_auth_users_file,
            rest_auth_health_open,
            log_format,
            metrics_listener,
            transforms_library: keys.transforms_library.or_else(default_library),
            wasm_cache_dir,
            inert_keys,
            bootstrap_servers: keys.bootstrap_servers,
            group_id: keys.group_id,
            listeners: keys.listeners,
            plugin_path: keys.plugin_path,
            offset_storage_file: keys.offset_storage_file,
            offsets_topic: crate::offsets::OffsetsTopic {
                name: keys.offset_storage_topic,
                partitions: keys.offset_storage_partitions,
                replication: keys.offset_storage_replication_factor,
            },
            offset_flush_interval_ms: keys.offset_flush_interval_ms.unwrap_or(60_000),
            config_storage_file: keys.config_storage_file,
            config_providers: crate::providers::ConfigProviders::from_worker(&provider_keys)?,
            task_shutdown_graceful_timeout_ms: keys.task_shutdown_graceful_timeout_ms,
            worker_id: keys.worker_id,
            embedded_topic_partitions: keys.embedded_topic_partitions,
            client_common,
            producer_overrides: prefixed.remove("producer.").unwrap_or_default(),
            consumer_overrides: prefixed.remove("consumer.").unwrap_or_default(),
            admin_overrides: prefixed.remove("admin.").unwrap_or_default(),
            cluster: ClusterTopicsConfig {
                config_topic: keys.config_storage_topic,
                config_replication_factor: keys.config_storage_replication_factor,
                status_topic: keys.status_storage_topic,
                status_replication_factor: keys.status_storage_replication_factor,
                slots_topic,
                slots_partitions: keys.task_slots_partitions,
                slots_replication_factor: keys.task_slots_replication_factor,
            },
        })
    }

    /// The socket address of the first listener.
    pub fn listen_addr(&self) -> String {
        parse_listener(&self.listeners[0]).expect("validated")
    }

    /// `worker.id`, or the host's name and the REST port: stable across
    /// restarts and distinct per worker, as the consumers' static group
    /// membership (`group.instance.id`) needs.
    pub fn resolved_worker_id(&self) -> String {
        if let Some(id) = &self.worker_id {
            return id.clone();
        }
        let listen = self.listen_addr();
        let port = listen.rsplit_once(':').map_or("8083", |(_, p)| p);
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty());
        match host {
            Some(host) => format!("{host}:{port}"),
            None => listen,
        }
    }
}

/// `sluice_transforms.wasm` next to the binary, or where the container
/// image puts it.
fn default_library() -> Option<PathBuf> {
    let beside = std::env::current_exe()
        .ok()?
        .with_file_name("sluice_transforms.wasm");
    let image = PathBuf::from("/opt/sluice/transforms/sluice_transforms.wasm");
    Some(if !beside.exists() && image.exists() {
        image
    } else {
        beside
    })
}

pub(crate) fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("sluice").join("wasm"))
}

/// `http://host:port` or `https://host:port` to `host:port`.
fn parse_listener(listener: &str) -> Result<String, String> {
    let rest = listener
        .strip_prefix("http://")
        .or_else(|| listener.strip_prefix("https://"))
        .ok_or_else(|| {
            format!("`{listener}` is not supported; expected http://HOST:PORT or https://HOST:PORT")
        })?;
    let rest = rest.trim_end_matches('/');
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| format!("`{listener}` has no port; expected http://HOST:PORT"))?;
    port.parse::<u16>()
        .map_err(|_| format!("`{listener}` has an invalid port; expected http://HOST:PORT"))?;
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    Ok(format!("{host}:{port}"))
}

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

pub fn validate_connector_name(name: &str) -> Result<(), ConfigError> {
    if name.trim().is_empty() {
        return Err(ConfigError::new("name", "must not be empty"));
    }
    if name.chars().any(|c| c.is_control() || c == '/') {
        return Err(ConfigError::new(
            "name",
            "must not contain `/` or control characters",
        ));
    }
    Ok(())
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

/// Converters Sluice accepts: all of them pass bytes through unchanged, which
/// is what these do for schemaless JSON.
const PASS_THROUGH_CONVERTERS: [&str; 6] = [
    "org.apache.kafka.connect.json.JsonConverter",
    "org.apache.kafka.connect.storage.StringConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter",
    "JsonConverter",
    "StringConverter",
    "ByteArrayConverter",
];

/// One transform of the chain: `transforms.<alias>.*`.
#[derive(Debug, Clone)]
pub struct TransformSpec {
    pub alias: String,
    /// Path of the WASM component (the standard library's, once resolved,
    /// for a standard transform).
    pub module: PathBuf,
    /// For a standard transform named by its class (e.g. Kafka Connect's
    /// `InsertField$Value`): its kind in the standard library.
    pub standard: Option<String>,
    /// Every other `transforms.<alias>.*` key, prefix removed: for `configure`.
    pub config: ConfigMap,
    pub limits: TransformLimits,
    /// Apply only to records matching this predicate (or not matching it,
    /// with `negate`).
    pub predicate: Option<PredicateSpec>,
    pub negate: bool,
}

impl PartialEq for TransformSpec {
    fn eq(&self, other: &Self) -> bool {
        self.alias == other.alias
            && self.module == other.module
            && self.config == other.config
            && self.limits == other.limits
            && self.negate == other.negate
            && self.predicate.as_ref().map(|p| &p.source)
                == other.predicate.as_ref().map(|p| &p.source)
    }
}

/// The sandbox's limits for one transform (`transforms.<alias>.limits.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransformLimits {
    /// Longest a call may run (`limits.timeout.ms`, default 5000).
    pub timeout_ms: u64,
    /// Most linear memory an instance may have (`limits.memory.bytes`,
    /// default 256 MiB).
    pub memory_bytes: usize,
    /// Largest component file accepted (`limits.module.bytes`, default 64 MiB).
    pub module_bytes: u64,
}

impl Default for TransformLimits {
    fn default() -> Self {
        Self {
            timeout_ms: 5_000,
            memory_bytes: 256 * 1024 * 1024,
            module_bytes: 64 * 1024 * 1024,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitKeys {
    #[serde(rename = "timeout.ms", default)]
    timeout_ms: Option<u64>,
    #[serde(rename = "memory.bytes", default)]
    memory_bytes: Option<usize>,
    #[serde(rename = "module.bytes", default)]
    module_bytes: Option<u64>,
}

/// A predicate, Kafka Connect's `predicates.<alias>.*`.
#[derive(Debug, Clone)]
pub struct PredicateSpec {
    pub alias: String,
    pub kind: PredicateKind,
    /// The keys it was built from, to compare configs.
    source: ConfigMap,
}

#[derive(Debug, Clone)]
pub enum PredicateKind {
    /// The topic matches the whole `pattern` (Java's `Matcher.matches`).
    TopicNameMatches(regex::Regex),
    /// Some header has the key `name`.
    HasHeaderKey(String),
    /// The value is null.
    RecordIsTombstone,
}

impl PredicateKind {
    pub fn test(&self, record: &sluice_sdk::Record) -> bool {
        match self {
            PredicateKind::TopicNameMatches(re) => re.is_match(&record.topic),
            PredicateKind::HasHeaderKey(name) => record.has_header(name),
            PredicateKind::RecordIsTombstone => record.value.is_none(),
        }
    }
}

/// Every `<section>.<alias>.*` key must belong to an alias listed in `<section>`.
fn check_listed(
    section: &str,
    what: &str,
    aliases: &[String],
    keys: &ConfigMap,
) -> Result<(), ConfigError> {
    for k in keys.keys() {
        let alias = k.split('.').next().unwrap_or_default();
        if !aliases.iter().any(|a| a == alias) {
            return Err(ConfigError::new(
                format!("{section}.{k}"),
                format!("belongs to {what} `{alias}`, which is not listed in `{section}`"),
            ));
        }
    }
    Ok(())
}

fn parse_predicates(
    aliases: &[String],
    keys: &ConfigMap,
) -> Result<Vec<PredicateSpec>, ConfigError> {
    let mut specs: Vec<PredicateSpec> = Vec::new();
    for alias in aliases {
        if specs.iter().any(|s| &s.alias == alias) {
            return Err(ConfigError::new(
                "predicates",
                format!("`{alias}` is listed twice"),
            ));
        }
        let prefix = format!("{alias}.");
        let mut config: ConfigMap = keys
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|r| (r.to_string(), v.clone())))
            .collect();
        let source = config.clone();
        let key = |k: &str| format!("predicates.{alias}.{k}");
        let ty = config.remove("type").ok_or_else(|| {
            ConfigError::new(
                key("type"),
                "is required but missing (TopicNameMatches, HasHeaderKey or RecordIsTombstone)",
            )
        })?;
        let short = ty
            .strip_prefix("org.apache.kafka.connect.transforms.predicates.")
            .unwrap_or(&ty);
        let kind = match short {
            "TopicNameMatches" => {
                let pattern = config.remove("pattern").ok_or_else(|| {
                    ConfigError::new(
                        key("pattern"),
                        "is required for TopicNameMatches (a regular expression)",
                    )
                })?;
                let re = regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
                    ConfigError::new(
                        key("pattern"),
                        format!("is not a valid regular expression: {e}"),
                    )
                })?;
                PredicateKind::TopicNameMatches(re)
            }
            "HasHeaderKey" => {
                PredicateKind::HasHeaderKey(config.remove("name").ok_or_else(|| {
                    ConfigError::new(key("name"), "is required for HasHeaderKey (the header key)")
                })?)
            }
            "RecordIsTombstone" => PredicateKind::RecordIsTombstone,
            other => {
                return Err(ConfigError::new(
                    key("type"),
                    format!(
                        "`{other}` is not a known predicate; expected TopicNameMatches, HasHeaderKey or RecordIsTombstone"
                    ),
                ));
            }
        };
        if let Some(extra) = config.keys().next() {
            return Err(ConfigError::new(
                key(extra),
                format!("is not a key of {short}"),
            ));
        }
        specs.push(PredicateSpec {
            alias: alias.clone(),
            kind,
            source,
        });
    }
    check_listed("predicates", "predicate", aliases, keys)?;
    Ok(specs)
}

/// The runtime's part of a connector config, validated; the rest is the
/// plugin's.
#[derive(Debug, Clone)]
pub struct CommonConfig {
    pub name: String,
    pub connector_class: String,
    pub tasks_max: u32,
    pub topics: Vec<String>,
    pub transforms: Vec<TransformSpec>,
    pub topic_partitions: Option<i32>,
    pub topic_replication_factor: Option<i32>,
    pub batch_max_records: usize,
    pub batch_max_ms: u64,
    pub errors: crate::errors::ErrorPolicy,
    pub key_converter: Converter,
    pub value_converter: Converter,
    pub delivery_guarantee: DeliveryGuarantee,
    pub transaction_boundary: TransactionBoundary,
    /// None: the worker's `offset.flush.interval.ms`.
    pub transaction_boundary_interval_ms: Option<u64>,
    /// `consumer.override.*`, over the worker's `consumer.*`.
    pub consumer_overrides: ConfigMap,
    /// `producer.override.*`, over the worker's `producer.*`.
    pub producer_overrides: ConfigMap,
}

/// What a sink checks a consumed key or value is, before anything else
/// (Kafka Connect's converter stage; Sluice passes the bytes on unchanged).
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
            Some(_) => {
                return Err(ConfigError::new(
                    key,
                    format!(
                        "`{}` is not supported; Sluice passes bytes through (JsonConverter with schemas.enable=false, StringConverter or ByteArrayConverter)",
                        class.unwrap_or_default()
                    ),
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
        for (k, v) in config {
            if let Some(rest) = k.strip_prefix("consumer.override.") {
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
        // What the runtime's guarantees rest on is not the connector's to change.
        for (prefix, overrides, fixed) in [
            (
                "consumer.override.",
                &consumer_overrides,
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
                &producer_overrides,
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
        if keys.tasks_max == 0 {
            return Err(ConfigError::new("tasks.max", "must be at least 1"));
        }
        if keys.topics_regex.is_some() {
            return Err(ConfigError::new(
                "topics.regex",
                "is not supported yet; list the topics in `topics`",
            ));
        }
        for (key, converter, schemas) in [
            (
                "key.converter",
                &keys.key_converter,
                keys.key_converter_schemas,
            ),
            (
                "value.converter",
                &keys.value_converter,
                keys.value_converter_schemas,
            ),
        ] {
            if let Some(c) = converter
                && !PASS_THROUGH_CONVERTERS.contains(&c.as_str())
            {
                return Err(ConfigError::new(
                    key,
                    format!(
                        "`{c}` is not supported; Sluice passes bytes through (JsonConverter with schemas.enable=false, StringConverter or ByteArrayConverter)"
                    ),
                ));
            }
            if schemas == Some(true) {
                return Err(ConfigError::new(
                    format!("{key}.schemas.enable"),
                    "schema envelopes are not supported; set it to false",
                ));
            }
        }
        if keys.batch_max_records == 0 {
            return Err(ConfigError::new("batch.max.records", "must be at least 1"));
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
        let errors = crate::errors::ErrorPolicy::parse(&error_keys, &keys.topics)?;
        let key_converter = Converter::parse("key.converter", keys.key_converter.as_deref())?;
        let value_converter = Converter::parse("value.converter", keys.value_converter.as_deref())?;
        let predicates = parse_predicates(&keys.predicates, &predicate_keys)?;
        let transforms = parse_transforms(&keys.transforms, &transform_keys, &predicates)?;
        Ok((
            CommonConfig {
                name: keys.name,
                connector_class: keys.connector_class,
                tasks_max: keys.tasks_max,
                topics: keys.topics,
                transforms,
                topic_partitions: keys.topic_partitions,
                topic_replication_factor: keys.topic_replication_factor,
                batch_max_records: keys.batch_max_records,
                batch_max_ms: keys.batch_max_ms,
                errors,
                key_converter,
                value_converter,
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

fn is_common_key(k: &str) -> bool {
    matches!(
        k,
        "name"
            | "connector.class"
            | "tasks.max"
            | "topics"
            | "topics.regex"
            | "transforms"
            | "predicates"
            | "key.converter"
            | "value.converter"
            | "key.converter.schemas.enable"
            | "value.converter.schemas.enable"
            | "topic.creation.default.partitions"
            | "topic.creation.default.replication.factor"
            | "batch.max.records"
            | "batch.max.ms"
            | "delivery.guarantee"
            | "transaction.boundary"
            | "transaction.boundary.interval.ms"
    )
}

/// The transforms of Sluice's standard library (`plugins/transforms`),
/// by the names Kafka Connect gives its SMTs.
pub const STANDARD_TRANSFORMS: [&str; 13] = [
    "InsertField",
    "ReplaceField",
    "MaskField",
    "Filter",
    "Cast",
    "TimestampConverter",
    "ExtractField",
    "ValueToKey",
    "HoistField",
    "RegexRouter",
    "InsertHeader",
    "HeaderFrom",
    "LatencyStamp",
];

/// `org.apache.kafka.connect.transforms.InsertField$Value` (or just
/// `InsertField$Value`) to the library's kind `InsertField$Value`.
fn standard_kind(class: &str) -> Option<String> {
    let short = class
        .strip_prefix("org.apache.kafka.connect.transforms.")
        .or_else(|| class.strip_prefix("sluice.transforms."))
        .unwrap_or(class);
    let (base, variant) = match short.split_once('$') {
        Some((b, v)) => (b, Some(v)),
        None => (short, None),
    };
    (STANDARD_TRANSFORMS.contains(&base) && matches!(variant, None | Some("Key" | "Value")))
        .then(|| short.to_string())
}

impl CommonConfig {
    /// Points standard transforms at the library component, or fails naming
    /// the transform that needs it.
    pub fn resolve_standard_transforms(
        &mut self,
        library: Option<&Path>,
    ) -> Result<(), ConfigError> {
        for t in &mut self.transforms {
            let Some(kind) = &t.standard else { continue };
            let Some(path) = library.filter(|p| p.exists()) else {
                return Err(ConfigError::new(
                    format!("transforms.{}.type", t.alias),
                    format!(
                        "`{kind}` is a standard transform, but this worker has no standard transform library{}: build it with plugins/transforms/build.sh and set `transforms.library` in the worker config",
                        library
                            .map(|p| format!(" (looked for {})", p.display()))
                            .unwrap_or_default()
                    ),
                ));
            };
            t.module = path.to_path_buf();
            t.config.insert("kind".into(), kind.clone());
        }
        Ok(())
    }
}

fn parse_transforms(
    aliases: &[String],
    keys: &ConfigMap,
    predicates: &[PredicateSpec],
) -> Result<Vec<TransformSpec>, ConfigError> {
    let mut specs: Vec<TransformSpec> = Vec::with_capacity(aliases.len());
    for alias in aliases {
        if specs.iter().any(|s| &s.alias == alias) {
            return Err(ConfigError::new(
                "transforms",
                format!("`{alias}` is listed twice"),
            ));
        }
        let prefix = format!("{alias}.");
        let mut config: ConfigMap = keys
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|r| (r.to_string(), v.clone())))
            .collect();
        let key = |k: &str| format!("transforms.{alias}.{k}");
        let (module, standard) = match config.remove("type").as_deref() {
            Some("wasm") => {
                let module = config.remove("module").ok_or_else(|| {
                    ConfigError::new(
                        key("module"),
                        "is required but missing (the path of a .wasm component)",
                    )
                })?;
                (PathBuf::from(module), None)
            }
            Some(other) => match standard_kind(other) {
                Some(kind) => {
                    if config.contains_key("module") {
                        return Err(ConfigError::new(
                            key("module"),
                            format!("is not used with the standard transform `{other}`"),
                        ));
                    }
                    if config.contains_key("kind") {
                        return Err(ConfigError::new(
                            key("kind"),
                            "is set from `type` for a standard transform",
                        ));
                    }
                    (PathBuf::new(), Some(kind))
                }
                None => {
                    return Err(ConfigError::new(
                        key("type"),
                        format!(
                            "`{other}` is not supported: use `wasm` with a `module`, or a standard transform ({})",
                            STANDARD_TRANSFORMS.join(", ")
                        ),
                    ));
                }
            },
            None => {
                return Err(ConfigError::new(
                    key("type"),
                    "is required but missing (`wasm`, or a standard transform's class)",
                ));
            }
        };
        let limit_keys = sluice_sdk::config::subset(&config, "limits.");
        config.retain(|k, _| !k.starts_with("limits."));
        let parsed: LimitKeys =
            from_string_map(&limit_keys).map_err(|e| e.in_namespace(&key("limits.")))?;
        let defaults = TransformLimits::default();
        let limits = TransformLimits {
            timeout_ms: parsed.timeout_ms.unwrap_or(defaults.timeout_ms),
            memory_bytes: parsed.memory_bytes.unwrap_or(defaults.memory_bytes),
            module_bytes: parsed.module_bytes.unwrap_or(defaults.module_bytes),
        };
        if limits.timeout_ms == 0 {
            return Err(ConfigError::new(
                key("limits.timeout.ms"),
                "must be at least 1",
            ));
        }
        if limits.memory_bytes < 64 * 1024 {
            return Err(ConfigError::new(
                key("limits.memory.bytes"),
                "must be at least 65536 (one WASM page)",
            ));
        }
        let predicate = match config.remove("predicate") {
            Some(name) => Some(
                predicates
                    .iter()
                    .find(|p| p.alias == name)
                    .cloned()
                    .ok_or_else(|| {
                        ConfigError::new(
                            key("predicate"),
                            format!("names `{name}`, which is not listed in `predicates`"),
                        )
                    })?,
            ),
            None => None,
        };
        let negate = match config.remove("negate").as_deref() {
            None => false,
            Some(v) if v.eq_ignore_ascii_case("true") => true,
            Some(v) if v.eq_ignore_ascii_case("false") => false,
            Some(v) => {
                return Err(ConfigError::new(
                    key("negate"),
                    format!("expected `true` or `false`, got `{v}`"),
                ));
            }
        };
        if negate && predicate.is_none() {
            return Err(ConfigError::new(
                key("negate"),
                "needs a `predicate` to negate",
            ));
        }
        specs.push(TransformSpec {
            alias: alias.clone(),
            module,
            standard,
            config,
            limits,
            predicate,
            negate,
        });
    }
    check_listed("transforms", "transform", aliases, keys)?;
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn worker_defaults_and_passthrough() {
        let w = WorkerConfig::from_map(
            &string_map_from_json(&json!({
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "producer.linger.ms": 10,
            }))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(w.bootstrap_servers, None);
        assert_eq!(w.listen_addr(), "localhost:8083");
        assert_eq!(
            w.client_common.get("security.protocol").unwrap(),
            "SASL_SSL"
        );
        assert_eq!(w.producer_overrides.get("linger.ms").unwrap(), "10");

        let err = WorkerConfig::from_map(
            &string_map_from_json(&json!({"listeners": "ftp://x:1"})).unwrap(),
        )
        .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("listeners"));
        // https:// needs its certificate and key; they need https://.
        let err = WorkerConfig::from_map(
            &string_map_from_json(&json!({"listeners": "https://x:1"})).unwrap(),
        )
        .unwrap_err();
        assert_eq!(
            err.key.as_deref(),
            Some("listeners.https.ssl.certificate.location")
        );
        let err = WorkerConfig::from_map(
            &string_map_from_json(&json!({"listeners": "https://x:1", "listeners.https.ssl.certificate.location": "c.pem"}))
                .unwrap(),
        )
        .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("listeners.https.ssl.key.location"));
        let err = WorkerConfig::from_map(
            &string_map_from_json(&json!({"listeners.https.ssl.key.location": "k.pem"})).unwrap(),
        )
        .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("listeners.https.ssl.key.location"));
        let w = WorkerConfig::from_map(
            &string_map_from_json(&json!({"listeners": "https://x:1", "listeners.https.ssl.certificate.location": "c.pem", "listeners.https.ssl.key.location": "k.pem"}))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(w.listen_addr(), "x:1");
        assert!(w.rest_tls.is_some());
        let err = WorkerConfig::from_map(
            &string_map_from_json(&json!({"rest.auth.health.open": "true"})).unwrap(),
        )
        .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("rest.auth.health.open"));
        let err = WorkerConfig::from_map(
            &string_map_from_json(&json!({"bootstrap.server": "x"})).unwrap(),
        )
        .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("bootstrap.server"));
    }

    #[test]
    fn plugin_path_and_offset_flush_interval() {
        let w = WorkerConfig::from_map(
            &string_map_from_json(
                &json!({"plugin.path": "/a, /b", "offset.flush.interval.ms": 10000}),
            )
            .unwrap(),
        )
        .unwrap();
        assert!(w.inert_keys.is_empty(), "{:?}", w.inert_keys);
        assert_eq!(
            w.offset_flush_interval_ms, 10000,
            "the default interval of interval-bounded transactions"
        );
        assert_eq!(
            w.plugin_path,
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        let err =
            WorkerConfig::from_map(&string_map_from_json(&json!({"log.format": "xml"})).unwrap())
                .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("log.format"));
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
            "org.apache.kafka.connect.transforms.Flatten$Value".into(),
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
        ] {
            with_predicate.insert(k.into(), v.into());
        }
        let (common, _) = CommonConfig::split(&with_predicate).unwrap();
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
