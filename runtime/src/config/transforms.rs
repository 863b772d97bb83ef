//! The transform chain's keys: `transforms.<alias>.*`, `predicates.<alias>.*`
//! and the standard library's transforms.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sluice_sdk::config::{ConfigError, ConfigMap, from_string_map};

use super::*;

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

/// The keys of one alias of `section` (`transforms` or `predicates`),
/// without their `<alias>.` prefix; an alias may be listed once.
fn alias_keys(
    section: &str,
    alias: &str,
    listed_twice: bool,
    keys: &ConfigMap,
) -> Result<ConfigMap, ConfigError> {
    if listed_twice {
        return Err(ConfigError::new(
            section,
            format!("`{alias}` is listed twice"),
        ));
    }
    let prefix = format!("{alias}.");
    Ok(keys
        .iter()
        .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|r| (r.to_string(), v.clone())))
        .collect())
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

pub(crate) fn parse_predicates(
    aliases: &[String],
    keys: &ConfigMap,
) -> Result<Vec<PredicateSpec>, ConfigError> {
    let mut specs: Vec<PredicateSpec> = Vec::new();
    for alias in aliases {
        let listed_twice = specs.iter().any(|s| &s.alias == alias);
        let mut config = alias_keys("predicates", alias, listed_twice, keys)?;
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

/// The transforms of Sluice's standard library (`plugins/transforms`),
/// by the names Kafka Connect gives its SMTs (and Debezium its
/// `ExtractNewRecordState`).
pub const STANDARD_TRANSFORMS: [&str; 17] = [
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
    "Flatten",
    "TimestampRouter",
    "DropHeaders",
    "ExtractNewRecordState",
];

/// The standard transforms that have `$Key` and `$Value` variants.
const KEYED_TRANSFORMS: [&str; 9] = [
    "InsertField",
    "ReplaceField",
    "MaskField",
    "Cast",
    "TimestampConverter",
    "ExtractField",
    "HoistField",
    "HeaderFrom",
    "Flatten",
];

/// Debezium's class of the one standard transform that is not Kafka Connect's.
const DEBEZIUM_UNWRAP: &str = "io.debezium.transforms.ExtractNewRecordState";

/// The classes a worker with the library offers, as `GET
/// /connector-plugins?connectorsOnly=false` should list them: Kafka
/// Connect's (`$Key` and `$Value` for the keyed ones), Debezium's
/// `ExtractNewRecordState`, and Sluice's own `LatencyStamp`.
pub fn standard_transform_classes() -> Vec<String> {
    let mut out = Vec::new();
    for t in STANDARD_TRANSFORMS {
        match t {
            "LatencyStamp" => out.push(t.to_string()),
            "ExtractNewRecordState" => out.push(DEBEZIUM_UNWRAP.to_string()),
            t if KEYED_TRANSFORMS.contains(&t) => {
                for v in ["Key", "Value"] {
                    out.push(format!("org.apache.kafka.connect.transforms.{t}${v}"));
                }
            }
            t => out.push(format!("org.apache.kafka.connect.transforms.{t}")),
        }
    }
    out
}

/// `org.apache.kafka.connect.transforms.InsertField$Value` (or just
/// `InsertField$Value`) to the library's kind `InsertField$Value`;
/// `io.debezium.transforms.ExtractNewRecordState` to `ExtractNewRecordState`.
fn standard_kind(class: &str) -> Option<String> {
    if class == DEBEZIUM_UNWRAP {
        return Some("ExtractNewRecordState".into());
    }
    let short = class
        .strip_prefix("org.apache.kafka.connect.transforms.")
        .or_else(|| class.strip_prefix("sluice.transforms."))
        .unwrap_or(class);
    let (base, variant) = match short.split_once('$') {
        Some((b, v)) => (b, Some(v)),
        None => (short, None),
    };
    let known = STANDARD_TRANSFORMS.contains(&base)
        // Debezium's unwrap goes by its own class name (or the short one).
        && (base != "ExtractNewRecordState" || short == class);
    let variant_ok = match variant {
        None => true,
        Some("Key" | "Value") => KEYED_TRANSFORMS.contains(&base),
        Some(_) => false,
    };
    (known && variant_ok).then(|| short.to_string())
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

/// `transforms.<alias>.type` (and `module`): a WASM component's path, or a
/// standard transform's kind.
fn transform_type(
    alias: &str,
    config: &mut ConfigMap,
) -> Result<(PathBuf, Option<String>), ConfigError> {
    let key = |k: &str| format!("transforms.{alias}.{k}");
    Ok(match config.remove("type").as_deref() {
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
    })
}

/// `transforms.<alias>.limits.*`, taken out of the transform's config.
fn transform_limits(alias: &str, config: &mut ConfigMap) -> Result<TransformLimits, ConfigError> {
    let key = |k: &str| format!("transforms.{alias}.{k}");
    let limit_keys = sluice_sdk::config::subset(config, "limits.");
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
    Ok(limits)
}

pub(crate) fn parse_transforms(
    aliases: &[String],
    keys: &ConfigMap,
    predicates: &[PredicateSpec],
) -> Result<Vec<TransformSpec>, ConfigError> {
    let mut specs: Vec<TransformSpec> = Vec::with_capacity(aliases.len());
    for alias in aliases {
        let listed_twice = specs.iter().any(|s| &s.alias == alias);
        let mut config = alias_keys("transforms", alias, listed_twice, keys)?;
        let key = |k: &str| format!("transforms.{alias}.{k}");
        let (module, standard) = transform_type(alias, &mut config)?;
        let limits = transform_limits(alias, &mut config)?;
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
    use super::{standard_kind, standard_transform_classes};

    #[test]
    fn class_names_map_onto_the_library() {
        let kind = |c: &str| standard_kind(c);
        assert_eq!(
            kind("org.apache.kafka.connect.transforms.Flatten$Value").as_deref(),
            Some("Flatten$Value")
        );
        assert_eq!(
            kind("org.apache.kafka.connect.transforms.TimestampRouter").as_deref(),
            Some("TimestampRouter")
        );
        assert_eq!(kind("DropHeaders").as_deref(), Some("DropHeaders"));
        assert_eq!(
            kind("io.debezium.transforms.ExtractNewRecordState").as_deref(),
            Some("ExtractNewRecordState")
        );
        assert_eq!(
            kind("ExtractNewRecordState").as_deref(),
            Some("ExtractNewRecordState")
        );
        // Not Kafka Connect's class, and no variants where Kafka Connect has none.
        assert_eq!(
            kind("org.apache.kafka.connect.transforms.ExtractNewRecordState"),
            None
        );
        assert_eq!(
            kind("org.apache.kafka.connect.transforms.TimestampRouter$Value"),
            None
        );
        assert_eq!(kind("io.debezium.transforms.Flatten$Value"), None);
        // Every class listed maps back onto the library.
        for class in standard_transform_classes() {
            assert!(standard_kind(&class).is_some(), "{class}");
        }
    }
}
