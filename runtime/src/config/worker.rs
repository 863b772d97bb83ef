//! The worker config (Kafka Connect's worker keys where they exist).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sluice_sdk::config::{ConfigError, ConfigMap, from_string_map};

use super::*;

/// The offsets topic.
#[derive(Debug, Clone)]
pub struct OffsetsTopic {
    pub name: String,
    pub partitions: i32,
    pub replication: i32,
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
    /// Directories `file-source` and `file-sink` may use (Sluice).
    #[serde(rename = "file.allowed.paths", default)]
    file_allowed_paths: Vec<PathBuf>,
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
    /// The default `transaction.boundary.interval.ms` of exactly-once
    /// sources (other tasks commit after every batch).
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
    /// Kafka Connect's `listeners.https.ssl.client.authentication`:
    /// `none` (default), `requested` or `required`.
    #[serde(rename = "listeners.https.ssl.client.authentication", default)]
    https_client_auth: Option<String>,
    /// The CA certificates (PEM) client certificates are verified against.
    #[serde(rename = "listeners.https.ssl.truststore.location", default)]
    https_truststore: Option<PathBuf>,
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

/// The internal topics of a distributed worker, checked (see
/// [`WorkerConfig::distributed_topics`]).
#[derive(Debug, Clone)]
pub struct DistributedTopics {
    pub config: String,
    pub config_replication_factor: i32,
    pub status: String,
    pub status_replication_factor: i32,
    pub slots: String,
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
    /// `file.allowed.paths`: where the file connectors may read and write.
    pub file_allowed_paths: sluice_connector_file::AllowedPaths,
    pub offset_storage_file: Option<PathBuf>,
    pub offsets_topic: crate::config::OffsetsTopic,
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
    /// The `https://` listener's TLS settings.
    pub rest_tls: Option<RestTls>,
    /// Basic authentication of the REST API, if set.
    pub rest_auth_users_file: Option<PathBuf>,
    pub rest_auth_health_open: bool,
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
        let rest_tls = rest_listener(&keys)?;
        check_ranges(&keys)?;

        let wasm_cache_dir = match keys.wasm_cache_dir.as_deref() {
            Some("") => None,
            Some(dir) => Some(PathBuf::from(dir)),
            None => default_cache_dir(),
        };
        let (log_format, metrics_listener, rest_auth_health_open) = observability(&keys)?;
        let file_allowed_paths = if keys.file_allowed_paths.is_empty() {
            sluice_connector_file::AllowedPaths::anywhere()
        } else {
            sluice_connector_file::AllowedPaths::only(&keys.file_allowed_paths).map_err(|e| {
                ConfigError::new(
                    "file.allowed.paths",
                    format!("{e}: each entry must be an existing directory"),
                )
            })?
        };
        let slots_topic = keys
            .task_slots_topic
            .clone()
            .unwrap_or_else(|| format!("{}-task-slots", keys.group_id));
        Ok(WorkerConfig {
            rest_tls,
            rest_auth_users_file: keys.rest_auth_users_file,
            rest_auth_health_open,
            log_format,
            metrics_listener,
            transforms_library: keys.transforms_library.or_else(default_library),
            wasm_cache_dir,
            bootstrap_servers: keys.bootstrap_servers,
            group_id: keys.group_id,
            listeners: keys.listeners,
            plugin_path: keys.plugin_path,
            file_allowed_paths,
            offset_storage_file: keys.offset_storage_file,
            offsets_topic: crate::config::OffsetsTopic {
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

    /// The rules of distributed mode, checked in this one place: the
    /// standalone-only stores unset, the config and status topics named,
    /// and the four internal topics distinct.
    pub fn distributed_topics(&self) -> Result<DistributedTopics, ConfigError> {
        if self.config_storage_file.is_some() {
            return Err(ConfigError::general(
                "key `config.storage.file.filename` is for standalone workers; a distributed worker keeps connector configs in `config.storage.topic`",
            ));
        }
        if self.offset_storage_file.is_some() {
            return Err(ConfigError::general(
                "key `offset.storage.file.filename` is for standalone workers; a distributed worker keeps source offsets in `offset.storage.topic`, where a task that moves to another worker finds them",
            ));
        }
        let required = |key: &str, topic: &Option<String>, holds: &str| {
            topic.clone().ok_or_else(|| {
                ConfigError::general(format!(
                    "key `{key}` is required by `sluice distributed`: the Kafka topic where the cluster keeps its {holds}"
                ))
            })
        };
        let c = &self.cluster;
        let config = required(
            "config.storage.topic",
            &c.config_topic,
            "connector configs and target states",
        )?;
        let status = required("status.storage.topic", &c.status_topic, "task statuses")?;
        let names = [&config, &status, &c.slots_topic, &self.offsets_topic.name];
        let distinct: std::collections::BTreeSet<_> = names.iter().collect();
        if distinct.len() != names.len() {
            return Err(ConfigError::general(
                "keys `config.storage.topic`, `status.storage.topic`, `task.slots.topic` and `offset.storage.topic` must name four different topics",
            ));
        }
        Ok(DistributedTopics {
            config,
            config_replication_factor: c.config_replication_factor,
            status,
            status_replication_factor: c.status_replication_factor,
            slots: c.slots_topic.clone(),
            slots_partitions: c.slots_partitions,
            slots_replication_factor: c.slots_replication_factor,
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

/// The REST listener (one, http:// or https://) and, for https://, its
/// certificate and key.
fn rest_listener(keys: &WorkerKeys) -> Result<Option<RestTls>, ConfigError> {
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
    let rest_tls = match (
        https,
        keys.https_certificate.clone(),
        keys.https_key.clone(),
    ) {
        (true, Some(certificate), Some(key)) => {
            let client_auth = match keys
                .https_client_auth
                .as_deref()
                .map(|a| a.trim().to_ascii_lowercase())
                .as_deref()
            {
                None | Some("none") => ClientAuth::None,
                Some("requested") => ClientAuth::Requested,
                Some("required") => ClientAuth::Required,
                Some(other) => {
                    return Err(ConfigError::new(
                        "listeners.https.ssl.client.authentication",
                        format!("`{other}` is not one of none, requested, required"),
                    ));
                }
            };
            if client_auth != ClientAuth::None && keys.https_truststore.is_none() {
                return Err(ConfigError::new(
                    "listeners.https.ssl.truststore.location",
                    "is required with listeners.https.ssl.client.authentication requested or required: the PEM file of the CA certificates that sign clients' certificates",
                ));
            }
            Some(RestTls {
                certificate,
                key,
                client_auth,
                truststore: keys.https_truststore.clone(),
            })
        }
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
        (false, None, None) => {
            if keys.https_client_auth.is_some() || keys.https_truststore.is_some() {
                return Err(ConfigError::new(
                    if keys.https_client_auth.is_some() {
                        "listeners.https.ssl.client.authentication"
                    } else {
                        "listeners.https.ssl.truststore.location"
                    },
                    "has no effect: the listener is not https://",
                ));
            }
            None
        }
    };
    Ok(rest_tls)
}

/// Whether the `https://` listener asks clients for certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    /// Asked for, verified if given; a client without one is served (and
    /// meets basic authentication, if set).
    Requested,
    /// A connection without a certificate signed by the trust store is
    /// refused in the handshake.
    Required,
}

/// The `https://` listener: its certificate chain and key, and how it
/// authenticates clients (PEM files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestTls {
    pub certificate: PathBuf,
    pub key: PathBuf,
    pub client_auth: ClientAuth,
    pub truststore: Option<PathBuf>,
}

/// Numbers in range, names not empty, keys that only work together.
fn check_ranges(keys: &WorkerKeys) -> Result<(), ConfigError> {
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
    check_topic_key("offset.storage.topic", &keys.offset_storage_topic)?;
    if keys.offset_storage_partitions < 1 {
        return Err(ConfigError::new(
            "offset.storage.partitions",
            "must be at least 1",
        ));
    }
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
    if keys.rest_auth_health_open.is_some() && keys.rest_auth_users_file.is_none() {
        return Err(ConfigError::new(
            "rest.auth.health.open",
            "has no effect without rest.auth.users.file",
        ));
    }
    Ok(())
}

/// `log.format`, `metrics.listener` and `rest.auth.health.open`.
fn observability(
    keys: &WorkerKeys,
) -> Result<(crate::logging::LogFormat, Option<String>, bool), ConfigError> {
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
        Some(l) => Some(parse_listener(l).map_err(|m| ConfigError::new("metrics.listener", m))?),
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
    Ok((log_format, metrics_listener, rest_auth_health_open))
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
        assert_eq!(
            w.rest_tls.as_ref().map(|t| t.client_auth),
            Some(ClientAuth::None)
        );
        let err = WorkerConfig::from_map(
            &string_map_from_json(&json!({"listeners": "https://x:1", "listeners.https.ssl.certificate.location": "c.pem", "listeners.https.ssl.key.location": "k.pem", "listeners.https.ssl.client.authentication": "required"}))
                .unwrap(),
        )
        .unwrap_err();
        assert_eq!(
            err.key.as_deref(),
            Some("listeners.https.ssl.truststore.location")
        );
        let err = WorkerConfig::from_map(
            &string_map_from_json(&json!({"listeners": "https://x:1", "listeners.https.ssl.certificate.location": "c.pem", "listeners.https.ssl.key.location": "k.pem", "listeners.https.ssl.client.authentication": "always"}))
                .unwrap(),
        )
        .unwrap_err();
        assert_eq!(
            err.key.as_deref(),
            Some("listeners.https.ssl.client.authentication")
        );
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
}
