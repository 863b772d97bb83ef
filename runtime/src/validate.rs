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
        files: sluice_connector_file::AllowedPaths,
        wasm_cache_dir: Option<PathBuf>,
        providers: ConfigProviders,
        transforms_library: Option<PathBuf>,
        metrics: &crate::metrics::Metrics,
    ) -> anyhow::Result<Self> {
        let (registry, failures) = Registry::with_native(plugin_path, files);
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
        self.check(spec).await.map_err(|e| self.shown(spec, e))
    }

    /// Every problem of `spec`'s config, each on its key (none: valid), as
    /// [`Validator::validate`] shows its first.
    pub async fn problems(&self, spec: &ConnectorSpec) -> Vec<ConfigError> {
        match self.faults(spec).await {
            Ok(_) => Vec::new(),
            Err(all) => all.into_iter().map(|e| self.shown(spec, e)).collect(),
        }
    }

    /// `e` without the values config providers supplied or secrets.
    fn shown(&self, spec: &ConnectorSpec, mut e: ConfigError) -> ConfigError {
        let concealed = self
            .providers
            .conceal(&spec.config, [e.message.as_str()])
            .remove(0);
        e.message = crate::config::Secrets::of(&spec.config).hide(&concealed);
        e
    }

    /// Every check short of running: the first problem of
    /// [`Validator::faults`].
    async fn check(&self, spec: &ConnectorSpec) -> Result<ValidatedConnector, ConfigError> {
        self.faults(spec).await.map_err(|all| {
            all.into_iter()
                .next()
                .unwrap_or_else(|| ConfigError::general("the config is invalid"))
        })
    }

    /// Every check short of running: common keys, the plugin's own keys,
    /// topics, and every WASM module loaded and checked against the WIT.
    /// On failure, every problem found (never none), in the order the
    /// checks run: each check goes on past a key at fault (see
    /// [`Faults::each`]), and a check that needs what a failed one would
    /// have given is skipped.
    async fn faults(&self, spec: &ConnectorSpec) -> Result<ValidatedConnector, Vec<ConfigError>> {
        // Tasks see resolved values; the stored config keeps its placeholders.
        let resolved = self.providers.resolve(&spec.config).map_err(|e| vec![e])?;
        let mut faults = Faults::default();
        let library = self.transforms_library.as_deref();
        let split = faults.each(&resolved, |config| {
            let (mut common, plugin_config) = CommonConfig::split(config)?;
            common.resolve_standard_transforms(library)?;
            Ok((common, plugin_config))
        });
        let (common, plugin_config) = match split {
            Some((common, plugin_config)) => (Some(common), plugin_config),
            None => (None, crate::config::plugin_keys(&resolved)),
        };
        // A missing `connector.class` is the split's fault.
        let Some(class) = resolved.get("connector.class") else {
            return Err(faults.into_errors());
        };
        let Some(plugin) = self.registry.find(class).cloned() else {
            faults.push(ConfigError::new(
                "connector.class",
                format!(
                    "`{class}` is not a known connector class; known classes: {}",
                    self.registry.class_names().join(", ")
                ),
            ));
            return Err(faults.into_errors());
        };
        let topics = common.as_ref().map(|c| c.topics.as_slice());
        let topics_named = match &plugin {
            Plugin::Source(p) => p
                .topics(&plugin_config)
                .into_iter()
                .map(|t| ("topic", t))
                .collect::<Vec<_>>(),
            Plugin::Sink(_) | Plugin::Stream => topics
                .unwrap_or_default()
                .iter()
                .map(|t| ("topics", t.clone()))
                .collect(),
        };
        for (key, topic) in topics_named {
            if let Err(why) = check_topic_name(&topic) {
                faults.push(ConfigError::new(key, why));
            }
        }
        if let Some(dlq) = common.as_ref().and_then(|c| c.errors.dlq.as_ref())
            && let Err(why) = check_topic_name(&dlq.topic)
        {
            faults.push(ConfigError::new("errors.deadletterqueue.topic.name", why));
        }
        let has_regex = common.as_ref().is_some_and(|c| c.topics_regex.is_some());
        let has_topics = topics.map(|t| !t.is_empty() || has_regex);
        match &plugin {
            Plugin::Source(p) => {
                if has_topics == Some(true) {
                    faults.push(ConfigError::new(
                        if has_regex { "topics.regex" } else { "topics" },
                        "is for sink connectors; a source names its topic in its own keys",
                    ));
                }
                if faults.each(&plugin_config, |c| p.validate(c)).is_none() {
                    faults.missing(&plugin, &plugin_config);
                }
            }
            Plugin::Stream => {
                if has_topics == Some(false) {
                    // On both keys, as Kafka Connect reports it.
                    faults.push(ConfigError::new(
                        "topics",
                        "is required for a stream connector (a comma-separated list; or topics.regex)",
                    ));
                    faults.push(ConfigError::new(
                        "topics.regex",
                        "is required for a stream connector when `topics` is not set",
                    ));
                }
                let inputs = topics.unwrap_or_default();
                match faults.each(&plugin_config, |c| StreamConfig::parse(c, inputs)) {
                    Some(stream) => {
                        let fixed = stream.route("");
                        // A fixed output topic (no `${topic}`): its name is known now.
                        if !fixed.is_empty()
                            && !fixed.contains('$')
                            && let Err(why) = check_topic_name(&fixed)
                        {
                            faults.push(ConfigError::new("output.topic", why));
                        }
                    }
                    None => faults.missing(&plugin, &plugin_config),
                }
            }
            Plugin::Sink(p) => {
                if has_topics == Some(false) {
                    // On both keys, as Kafka Connect reports it.
                    faults.push(ConfigError::new(
                        "topics",
                        "is required for a sink connector (a comma-separated list; or topics.regex)",
                    ));
                    faults.push(ConfigError::new(
                        "topics.regex",
                        "is required for a sink connector when `topics` is not set",
                    ));
                }
                if faults.each(&plugin_config, |c| p.validate(c)).is_none() {
                    faults.missing(&plugin, &plugin_config);
                }
                if let Some(common) = &common
                    && common.delivery_guarantee == DeliveryGuarantee::ExactlyOnce
                    && !p.supports_exactly_once(&plugin_config)
                {
                    faults.push(ConfigError::new(
                        "delivery.guarantee",
                        format!(
                            "`{}` cannot store offsets with its data, so it cannot be exactly-once; use at-least-once with an idempotent write (e.g. upsert)",
                            common.connector_class
                        ),
                    ));
                }
            }
        }
        let Some(common) = common else {
            return Err(faults.into_errors());
        };
        let transactional_source = matches!(plugin, Plugin::Source(_))
            && common.delivery_guarantee == DeliveryGuarantee::ExactlyOnce;
        if !transactional_source
            && (common.transaction_boundary != crate::config::TransactionBoundary::Poll
                || common.transaction_boundary_interval_ms.is_some())
        {
            faults.push(ConfigError::new(
                "transaction.boundary",
                "applies only to source connectors with delivery.guarantee=exactly-once",
            ));
        }
        let host = self.wasm.clone();
        let specs = common.transforms.clone();
        let chain = match tokio::task::spawn_blocking(move || CompiledChain::compile(&host, &specs))
            .await
        {
            Ok(Ok(chain)) => Some(chain),
            Ok(Err((key, message))) => {
                faults.push(ConfigError::new(key, message));
                None
            }
            Err(e) => {
                faults.push(ConfigError::general(format!("compiling transforms: {e}")));
                None
            }
        };
        match chain {
            Some(chain) if faults.0.is_empty() => Ok(ValidatedConnector {
                spec: spec.clone(),
                common,
                plugin_config,
                plugin,
                chain,
            }),
            _ => Err(faults.into_errors()),
        }
    }

    /// Every check a create would make (keys, types, the plugin's own keys,
    /// WASM modules loaded and checked against the interface), answered in Kafka
    /// Connect's `ConfigInfos` shape: one entry per key, each problem found
    /// attached to its key (one without a key to `connector.class`), and
    /// `error_count` the number of problems. The REST endpoint and `sluice
    /// validate` (offline) both answer with this.
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
        let spec =
            ConnectorSpec::from_json(&json!({"name": name, "config": config})).map_err(|e| {
                ReportError::BadRequest(crate::config::Secrets::of(&config).hide(&e.to_string()))
            })?;
        let problems = self.problems(&spec).await;
        let mut errors: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for e in &problems {
            let key = e.key.clone().unwrap_or_else(|| "connector.class".into());
            errors.entry(key).or_default().push(e.message.clone());
        }
        let shown = crate::config::redact(&spec.config);
        let mut configs = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for d in definitions(&plugin) {
            let key = d["name"].as_str().unwrap_or_default().to_string();
            let value = shown
                .get(&key)
                .cloned()
                .map(Value::String)
                .unwrap_or(Value::Null);
            let errors = errors.get(&key).cloned().unwrap_or_default();
            configs.push(json!({"definition": d, "value": {"name": key, "value": value, "recommended_values": [], "errors": errors, "visible": true}}));
            seen.insert(key);
        }
        for (key, value) in &shown {
            if seen.contains(key) {
                continue;
            }
            let errors = errors.get(key).cloned().unwrap_or_default();
            configs.push(json!({"definition": {"name": key, "type": "STRING", "required": false, "default_value": null, "importance": "LOW",
                "documentation": "", "group": "Other", "order_in_group": 0, "width": "NONE", "display_name": key, "dependents": []},
                "value": {"name": key, "value": value, "recommended_values": [], "errors": errors, "visible": true}}));
            seen.insert(key.clone());
        }
        for (key, errors) in &errors {
            if seen.contains(key) {
                continue;
            }
            configs.push(json!({"definition": {"name": key, "type": "STRING", "required": true, "default_value": null, "importance": "HIGH",
                "documentation": "", "group": "Other", "order_in_group": 0, "width": "NONE", "display_name": key, "dependents": []},
                "value": {"name": key, "value": null, "recommended_values": [], "errors": errors, "visible": true}}));
        }
        Ok(json!({
            "name": plugin.info().class,
            "error_count": problems.len(),
            "groups": ["Common", "Connector"],
            "configs": configs,
        }))
    }
}

/// The problems of one config, in the order found.
#[derive(Default)]
struct Faults(Vec<ConfigError>);

impl Faults {
    fn push(&mut self, e: ConfigError) {
        if !self.0.contains(&e) {
            self.0.push(e);
        }
    }

    /// What `check` makes of `config`, finding every key at fault on the
    /// way: after an error on a key, that key is set aside (see
    /// [`set_aside`]: its default applies) and `check` runs again on the
    /// rest. It stops, giving up on a value, when an error names no key,
    /// a key already at fault (the one set aside was required), or a key
    /// the config does not have (a required key missing: nothing can stand
    /// in for it). Each pass but the last sets aside a key or a list item,
    /// so there are at most that many passes, plus one.
    fn each<T>(
        &mut self,
        config: &ConfigMap,
        mut check: impl FnMut(&ConfigMap) -> Result<T, ConfigError>,
    ) -> Option<T> {
        let mut config = config.clone();
        let mut at_fault = std::collections::BTreeSet::new();
        let most = config.len()
            + ["transforms", "predicates"]
                .iter()
                .filter_map(|k| config.get(*k))
                .map(|v| v.split(',').count())
                .sum::<usize>();
        for _ in 0..=most {
            let e = match check(&config) {
                Ok(value) => return Some(value),
                Err(e) => e,
            };
            let Some(key) = e.key.clone() else {
                self.push(e);
                return None;
            };
            if !at_fault.insert(key.clone()) {
                return None;
            }
            self.push(e);
            if !set_aside(&mut config, &key) {
                return None;
            }
        }
        None
    }

    /// After the plugin's check stopped (on a required key missing, say):
    /// the other keys its definitions require that the config lacks, which
    /// the check never reached.
    fn missing(&mut self, plugin: &Plugin, plugin_config: &ConfigMap) {
        let own = match plugin {
            Plugin::Source(p) => p.config_definition(),
            Plugin::Sink(p) => p.config_definition(),
            Plugin::Stream => crate::plugin::stream::StreamConnector::config_definition(),
        };
        for d in own.as_array().into_iter().flatten() {
            if let Some(key) = d["name"].as_str()
                && d["required"] == true
                && !plugin_config.contains_key(key)
                && !self.0.iter().any(|e| e.key.as_deref() == Some(key))
            {
                self.push(ConfigError::new(key, "is required but missing"));
            }
        }
    }

    fn into_errors(self) -> Vec<ConfigError> {
        if self.0.is_empty() {
            vec![ConfigError::general("the config is invalid")]
        } else {
            self.0
        }
    }
}

/// Takes `key` out of `config`, so that a check goes on without it: the
/// key itself, or for a key of a transform or predicate (`transforms.A.x`)
/// the alias, with all its keys (and a transform's use of a predicate set
/// aside: the transform then applies to every record). False when nothing
/// was taken out.
fn set_aside(config: &mut ConfigMap, key: &str) -> bool {
    for list in ["transforms", "predicates"] {
        let Some((alias, _)) = key
            .strip_prefix(list)
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|rest| rest.split_once('.'))
        else {
            continue;
        };
        let alias = alias.to_string();
        let keys = config.len();
        let prefix = format!("{list}.{alias}.");
        config.retain(|k, _| !k.starts_with(&prefix));
        let mut taken = config.len() < keys;
        if let Some(names) = config.get_mut(list) {
            let listed: Vec<&str> = names
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .collect();
            if listed.contains(&alias.as_str()) {
                *names = listed
                    .into_iter()
                    .filter(|a| *a != alias)
                    .collect::<Vec<_>>()
                    .join(",");
                taken = true;
            }
        }
        if list == "predicates" {
            let uses: Vec<String> = config
                .iter()
                .filter(|(k, v)| {
                    k.starts_with("transforms.") && k.ends_with(".predicate") && v.trim() == alias
                })
                .map(|(k, _)| k.clone())
                .collect();
            for k in uses {
                config.remove(&format!("{}negate", &k[..k.len() - "predicate".len()]));
                config.remove(&k);
            }
        }
        return taken;
    }
    config.remove(key).is_some()
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

    fn validator() -> Validator {
        Validator::build(
            &[],
            Default::default(),
            None,
            ConfigProviders::default(),
            None,
            &crate::metrics::Metrics::new(),
        )
        .unwrap()
    }

    fn spec(config: Value) -> ConnectorSpec {
        ConnectorSpec::from_json(&json!({"name": "v", "config": config})).unwrap()
    }

    /// Each problem's key and the start of its message.
    async fn faults_of(config: Value) -> Vec<(String, String)> {
        validator()
            .problems(&spec(config))
            .await
            .into_iter()
            .map(|e| (e.key.unwrap_or_default(), e.message))
            .collect()
    }

    /// A common key that does not parse, a plugin key that does not parse
    /// and a required key missing: three problems, each on its key, in the
    /// order the checks meet them; a create still refuses with the first.
    #[tokio::test]
    async fn every_key_at_fault_is_reported_on_its_key() {
        let config = json!({"connector.class": "datagen", "tasks.max": "x", "rate": "fast"});
        let found = faults_of(config.clone()).await;
        let keys: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["tasks.max", "rate", "topic"], "{found:?}");
        assert!(
            found[0].1.contains("expected a non-negative integer"),
            "{found:?}"
        );
        assert!(found[1].1.contains("expected a number"), "{found:?}");
        assert_eq!(found[2].1, "is required but missing");
        let first = validator().validate(&spec(config)).await.err().unwrap();
        assert_eq!(first.key.as_deref(), Some("tasks.max"), "{first}");
    }

    /// The report has each of those problems in its key's `errors`, and
    /// `error_count` counts them all.
    #[tokio::test]
    async fn the_report_lists_every_key_at_fault() {
        let report = validator()
            .report(
                "datagen",
                &json!({"name": "v", "tasks.max": "x", "rate": "fast"}),
            )
            .await
            .unwrap();
        let errors = |key: &str| -> Vec<String> {
            report["configs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["value"]["name"] == key)
                .map(|c| serde_json::from_value(c["value"]["errors"].clone()).unwrap())
                .unwrap_or_default()
        };
        assert_eq!(report["error_count"], 3, "{report}");
        for key in ["tasks.max", "rate", "topic"] {
            assert_eq!(errors(key).len(), 1, "{key}: {report}");
        }
        assert_eq!(errors("topic"), ["is required but missing"]);
    }

    /// Values out of range, an unknown plugin key, a bad enum value of the
    /// runtime's, a transform of an unknown type and a sink without topics
    /// are all found in one report.
    #[tokio::test]
    async fn ranges_unknown_keys_enums_and_transforms_are_all_reported() {
        let found = faults_of(json!({"connector.class": "datagen", "topic": "t",
            "poison.ratio": "2", "customers": "0", "colour": "red",
            "errors.tolerance": "sometimes", "transforms": "a, b",
            "transforms.a.type": "no.such.Transform", "transforms.b.type": "wasm"}))
        .await;
        let mut keys: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "colour",
                "customers",
                "errors.tolerance",
                "poison.ratio",
                "transforms.a.type",
                "transforms.b.module"
            ],
            "{found:?}"
        );
        let found = faults_of(
            json!({"connector.class": "jdbc-sink", "insert.mode": "merge",
            "tasks.max": "0"}),
        )
        .await;
        let keys: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "tasks.max",
                "topics",
                "topics.regex",
                "insert.mode",
                "connection.url"
            ],
            "{found:?}"
        );
        assert!(
            faults_of(json!({"connector.class": "datagen", "topic": "t"}))
                .await
                .is_empty()
        );
    }

    /// What a check goes on without after a key at fault.
    #[test]
    fn a_key_at_fault_is_set_aside_with_its_alias() {
        let mut config: ConfigMap = [
            ("transforms", "t, u"),
            ("transforms.t.type", "x"),
            ("transforms.t.predicate", "p"),
            ("transforms.t.negate", "true"),
            ("transforms.u.type", "y"),
            ("predicates", "p"),
            ("predicates.p.type", "z"),
            ("rate", "fast"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert!(set_aside(&mut config, "predicates.p.pattern"));
        assert!(set_aside(&mut config, "transforms.u.module"));
        assert!(set_aside(&mut config, "rate"));
        assert!(!set_aside(&mut config, "topic"));
        let left: Vec<(&str, &str)> = config
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            left,
            [
                ("predicates", ""),
                ("transforms", "t"),
                ("transforms.t.type", "x")
            ]
        );
        assert!(!set_aside(&mut config, "transforms.u.type"));
    }

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
        let validator = Validator::build(
            &[],
            Default::default(),
            None,
            providers,
            None,
            &crate::metrics::Metrics::new(),
        )
        .unwrap();
        let spec = ConnectorSpec::from_json(&json!({"name": "g", "config": {
            "connector.class": "datagen", "topic": "t", "count": "${env:SLUICE_TEST_SECRET_COUNT}"
        }}))
        .unwrap();
        let unconcealed = validator.check(&spec).await.err().unwrap();
        let shown = validator.problems(&spec).await;
        assert_eq!(shown.len(), 1, "{shown:?}");
        assert!(!shown[0].message.contains("hunter2-secret"), "{shown:?}");
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
