//! Every check a connector config gets before anything runs: the common
//! keys, the plugin's own keys, topic names, and every WASM module loaded
//! and checked against the interface. One [`Validator`] serves the REST
//! API, `sluice validate` (offline: no worker, no broker), the worker and
//! the cluster alike.

use std::path::PathBuf;

use serde_json::{Value, json};
use sluice_sdk::{ConfigError, ConfigMap};

use crate::config::{
    COMMON_KEYS, CommonConfig, ConnectorSpec, DeliveryGuarantee, Listed, StreamConfig,
    check_topic_name,
};
use crate::plugin::{Plugin, Registry};
use crate::providers::ConfigProviders;
use crate::transform::CompiledChain;
use crate::transform::wasm::WasmHost;

/// What validates connector configs: the known plugins, the WASM host that
/// loads transforms, config providers and the standard transform library.
#[derive(Clone)]
pub struct Validator {
    registry: Registry,
    wasm: WasmHost,
    providers: ConfigProviders,
    transforms_library: Option<PathBuf>,
}

/// Why a validation report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// No plugin has the class.
    #[error("{0}")]
    UnknownClass(String),
    /// The body is not a connector config.
    #[error("{0}")]
    BadRequest(String),
}

impl ValidatedConnector {
    /// The plugin's split of the connector into task configs.
    pub fn task_configs(&self) -> Vec<ConfigMap> {
        let (config, max) = (&self.plugin_config, self.common.tasks_max);
        match &self.plugin {
            Plugin::Source(p) => p.task_configs(config, max),
            Plugin::Sink(p) => p.task_configs(config, max),
            Plugin::Stream => crate::plugin::stream::StreamConnector::task_configs(config, max),
        }
    }

    /// The topics the connector reads or writes, created if missing.
    pub fn topics(&self) -> Vec<String> {
        match &self.plugin {
            Plugin::Source(p) => p.topics(&self.plugin_config),
            Plugin::Sink(_) => self.common.topics.clone(),
            Plugin::Stream => {
                let mut topics = self.common.topics.clone();
                if let Ok(c) =
                    crate::config::StreamConfig::parse(&self.plugin_config, &self.common.topics)
                {
                    topics.extend(self.common.topics.iter().map(|t| c.route(t)));
                }
                topics.sort();
                topics.dedup();
                topics
            }
        }
    }
}

/// A connector config that passed every check and is ready to run.
pub struct ValidatedConnector {
    pub spec: ConnectorSpec,
    pub common: CommonConfig,
    pub plugin_config: ConfigMap,
    pub plugin: Plugin,
    pub chain: CompiledChain,
}

impl Validator {
    /// The registry with the native plugins of `plugin_path` (those that do
    /// not load are logged and skipped) and a WASM host caching compiled
    /// code in `wasm_cache_dir`.
    pub fn build(
        plugin_path: &[PathBuf],
        wasm_cache_dir: Option<PathBuf>,
        providers: ConfigProviders,
        transforms_library: Option<PathBuf>,
        metrics: &crate::metrics::Metrics,
    ) -> anyhow::Result<Self> {
        let (registry, failures) = Registry::with_native(plugin_path);
        for (path, reason) in &failures {
            tracing::warn!(path = %path.display(), reason = %reason, "skipped a plugin");
        }
        let wasm = WasmHost::new(wasm_cache_dir, metrics.wasm_compilations.clone())?;
        Ok(Self::new(registry, wasm, providers, transforms_library))
    }

    pub fn new(
        registry: Registry,
        wasm: WasmHost,
        providers: ConfigProviders,
        transforms_library: Option<PathBuf>,
    ) -> Self {
        Self {
            registry,
            wasm,
            providers,
            transforms_library,
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn has_transforms_library(&self) -> bool {
        self.transforms_library.as_ref().is_some_and(|p| p.exists())
    }

    /// The connector's keys the runtime handles, with config providers
    /// resolved.
    pub fn common_config(&self, spec: &ConnectorSpec) -> Result<CommonConfig, ConfigError> {
        let resolved = self.providers.resolve(&spec.config)?;
        Ok(CommonConfig::split(&resolved)?.0)
    }

    pub fn find_plugin(&self, class: &str) -> Result<Plugin, ReportError> {
        self.registry.find(class).cloned().ok_or_else(|| {
            ReportError::UnknownClass(format!(
                "Failed to find any class that implements Connector and which name matches {class}"
            ))
        })
    }

    /// `config` (computed from `spec`'s resolved config, as task configs
    /// are) with what config providers supplied shown as their references.
    pub fn conceal(&self, spec: &ConnectorSpec, config: &ConfigMap) -> ConfigMap {
        if self.providers.is_empty() {
            return config.clone();
        }
        let shown = self
            .providers
            .conceal(&spec.config, config.values().map(String::as_str));
        config.keys().cloned().zip(shown).collect()
    }

    /// Every check short of running (see [`Validator::check`]); an error
    /// never shows a value a config provider supplied.
    pub async fn validate(&self, spec: &ConnectorSpec) -> Result<ValidatedConnector, ConfigError> {
        self.check(spec).await.map_err(|mut e| {
            e.message = self
                .providers
                .conceal(&spec.config, [e.message.as_str()])
                .remove(0);
            e
        })
    }

    /// Every check short of running: common keys, the plugin's own keys,
    /// topics, and every WASM module loaded and checked against the WIT.
    async fn check(&self, spec: &ConnectorSpec) -> Result<ValidatedConnector, ConfigError> {
        // Tasks see resolved values; the stored config keeps its placeholders.
        let resolved = self.providers.resolve(&spec.config)?;
        let (mut common, plugin_config) = CommonConfig::split(&resolved)?;
        common.resolve_standard_transforms(self.transforms_library.as_deref())?;
        let plugin = self
            .registry
            .find(&common.connector_class)
            .cloned()
            .ok_or_else(|| {
                ConfigError::new(
                    "connector.class",
                    format!(
                        "`{}` is not a known connector class; known classes: {}",
                        common.connector_class,
                        self.registry.class_names().join(", ")
                    ),
                )
            })?;
        let topics_named = match &plugin {
            Plugin::Source(p) => p
                .topics(&plugin_config)
                .into_iter()
                .map(|t| ("topic", t))
                .collect::<Vec<_>>(),
            Plugin::Sink(_) | Plugin::Stream => common
                .topics
                .iter()
                .map(|t| ("topics", t.clone()))
                .collect(),
        };
        for (key, topic) in topics_named {
            check_topic_name(&topic).map_err(|why| ConfigError::new(key, why))?;
        }
        if let Some(dlq) = &common.errors.dlq {
            check_topic_name(&dlq.topic)
                .map_err(|why| ConfigError::new("errors.deadletterqueue.topic.name", why))?;
        }
        match &plugin {
            Plugin::Source(p) => {
                if !common.topics.is_empty() {
                    return Err(ConfigError::new(
                        "topics",
                        "is for sink connectors; a source names its topic in its own keys",
                    ));
                }
                p.validate(&plugin_config)?;
            }
            Plugin::Stream => {
                if common.topics.is_empty() {
                    return Err(ConfigError::new(
                        "topics",
                        "is required for a stream connector (a comma-separated list)",
                    ));
                }
                let stream = StreamConfig::parse(&plugin_config, &common.topics)?;
                if !stream.route("").is_empty() && !stream.route("").contains('$') {
                    // A fixed output topic (no `${topic}`): its name is known now.
                    check_topic_name(&stream.route(""))
                        .map_err(|why| ConfigError::new("output.topic", why))?;
                }
            }
            Plugin::Sink(p) => {
                if common.topics.is_empty() {
                    return Err(ConfigError::new(
                        "topics",
                        "is required for a sink connector (a comma-separated list)",
                    ));
                }
                p.validate(&plugin_config)?;
                if common.delivery_guarantee == DeliveryGuarantee::ExactlyOnce
                    && !p.supports_exactly_once(&plugin_config)
                {
                    return Err(ConfigError::new(
                        "delivery.guarantee",
                        format!(
                            "`{}` cannot store offsets with its data, so it cannot be exactly-once; use at-least-once with an idempotent write (e.g. upsert)",
                            common.connector_class
                        ),
                    ));
                }
            }
        }
        let transactional_source = matches!(plugin, Plugin::Source(_))
            && common.delivery_guarantee == DeliveryGuarantee::ExactlyOnce;
        if !transactional_source
            && (common.transaction_boundary != crate::config::TransactionBoundary::Poll
                || common.transaction_boundary_interval_ms.is_some())
        {
            return Err(ConfigError::new(
                "transaction.boundary",
                "applies only to source connectors with delivery.guarantee=exactly-once",
            ));
        }
        let host = self.wasm.clone();
        let specs = common.transforms.clone();
        let chain = tokio::task::spawn_blocking(move || CompiledChain::compile(&host, &specs))
            .await
            .map_err(|e| ConfigError::general(format!("compiling transforms: {e}")))?
            .map_err(|(key, message)| ConfigError::new(key, message))?;
        Ok(ValidatedConnector {
            spec: spec.clone(),
            common,
            plugin_config,
            plugin,
            chain,
        })
    }

    /// Every check a create would make (keys, types, the plugin's own keys,
    /// WASM modules loaded and checked against the interface), answered in Kafka
    /// Connect's `ConfigInfos` shape: one entry per key, the first problem found
    /// attached to its key. The REST endpoint and `sluice validate` (offline)
    /// both answer with this.
    pub async fn report(&self, class: &str, body: &Value) -> Result<Value, ReportError> {
        let plugin = self.find_plugin(class)?;
        let mut config = crate::config::string_map_from_json(body)
            .map_err(|e| ReportError::BadRequest(format!("request body: {e}")))?;
        config
            .entry("connector.class".into())
            .or_insert_with(|| class.to_string());
        let name = config
            .get("name")
            .cloned()
            .unwrap_or_else(|| "validate".into());
        let spec = ConnectorSpec::from_json(&json!({"name": name, "config": config}))
            .map_err(|e| ReportError::BadRequest(e.to_string()))?;
        let problem = self.validate(&spec).await.err();
        let (error_key, error_text) = match &problem {
            Some(e) => (
                e.key.clone().unwrap_or_else(|| "connector.class".into()),
                Some(e.message.clone()),
            ),
            None => (String::new(), None),
        };
        let mut configs = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for d in definitions(&plugin) {
            let key = d["name"].as_str().unwrap_or_default().to_string();
            let errors: Vec<String> = if key == error_key {
                error_text.clone().into_iter().collect()
            } else {
                Vec::new()
            };
            let value = crate::config::redact(&spec.config)
                .get(&key)
                .cloned()
                .map(Value::String)
                .unwrap_or(Value::Null);
            configs.push(json!({"definition": d, "value": {"name": key, "value": value, "recommended_values": [], "errors": errors, "visible": true}}));
            seen.insert(key);
        }
        for (key, value) in crate::config::redact(&spec.config) {
            if seen.contains(&key) {
                continue;
            }
            let errors: Vec<String> = if key == error_key {
                error_text.clone().into_iter().collect()
            } else {
                Vec::new()
            };
            configs.push(json!({"definition": {"name": key, "type": "STRING", "required": false, "default_value": null, "importance": "LOW",
                "documentation": "", "group": "Other", "order_in_group": 0, "width": "NONE", "display_name": key, "dependents": []},
                "value": {"name": key, "value": value, "recommended_values": [], "errors": errors, "visible": true}}));
            seen.insert(key);
        }
        if let Some(text) = &error_text
            && !seen.contains(&error_key)
        {
            configs.push(json!({"definition": {"name": error_key, "type": "STRING", "required": true, "default_value": null, "importance": "HIGH",
                "documentation": "", "group": "Other", "order_in_group": 0, "width": "NONE", "display_name": error_key, "dependents": []},
                "value": {"name": error_key, "value": null, "recommended_values": [], "errors": [text], "visible": true}}));
        }
        Ok(json!({
            "name": plugin.info().class,
            "error_count": usize::from(problem.is_some()),
            "groups": ["Common", "Connector"],
            "configs": configs,
        }))
    }
}

/// Kafka Connect's `ConfigKeyInfo` for every key: the runtime's common keys
/// (from [`COMMON_KEYS`]), then the plugin's own.
pub fn definitions(plugin: &Plugin) -> Vec<Value> {
    let source = plugin.kind() == sluice_sdk::ConnectorType::Source;
    let common = COMMON_KEYS.iter().filter(|k| match k.listed {
        Listed::No => false,
        Listed::Always => true,
        Listed::NotForSources => !source,
    });
    let own = match plugin {
        Plugin::Source(p) => p.config_definition(),
        Plugin::Sink(p) => p.config_definition(),
        Plugin::Stream => crate::plugin::stream::StreamConnector::config_definition(),
    };
    let mut out = Vec::new();
    for (i, k) in common.enumerate() {
        let default = k.default.map_or(Value::Null, |d| json!(d));
        out.push(json!({"name": k.name, "type": k.kind, "required": k.required, "default_value": default, "importance": "HIGH",
            "documentation": k.doc, "group": "Common", "order_in_group": i + 1, "width": "NONE", "display_name": k.name, "dependents": []}));
    }
    for (i, d) in own
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let name = d["name"].clone();
        out.push(json!({"name": name, "type": d["type"], "required": d["required"], "default_value": d["default_value"],
            "importance": if d["required"] == true { "HIGH" } else { "MEDIUM" }, "documentation": d["documentation"],
            "group": "Connector", "order_in_group": i + 1, "width": "NONE", "display_name": name, "dependents": []}));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error about a value a provider supplied shows the reference, not
    /// the value (the plugin's own error echoes what it was given).
    #[tokio::test]
    async fn an_invalid_config_never_echoes_a_provider_value() {
        // SAFETY: a variable only this test reads.
        unsafe { std::env::set_var("SLUICE_TEST_SECRET_COUNT", "hunter2-secret") };
        let providers = ConfigProviders::from_worker(
            &[
                ("config.providers".to_string(), "env".to_string()),
                (
                    "config.providers.env.class".to_string(),
                    "org.apache.kafka.common.config.provider.EnvVarConfigProvider".to_string(),
                ),
            ]
            .into(),
        )
        .unwrap();
        let validator =
            Validator::build(&[], None, providers, None, &crate::metrics::Metrics::new()).unwrap();
        let spec = ConnectorSpec::from_json(&json!({"name": "g", "config": {
            "connector.class": "datagen", "topic": "t", "count": "${env:SLUICE_TEST_SECRET_COUNT}"
        }}))
        .unwrap();
        let unconcealed = validator.check(&spec).await.err().unwrap();
        assert!(
            unconcealed.message.contains("hunter2-secret"),
            "the plugin echoes the value: {unconcealed}"
        );
        let shown = validator.validate(&spec).await.err().unwrap();
        assert!(!shown.message.contains("hunter2-secret"), "{shown}");
        assert!(
            shown.message.contains("${env:SLUICE_TEST_SECRET_COUNT}"),
            "{shown}"
        );
    }
}
