//! Schema registries in Confluent's API: a client of an external one
//! ([`client`]) and the worker's own ([`builtin`], served under
//! `/schema-registry` by `crate::rest::registry`). Converters see either
//! through [`Registry`].

pub mod builtin;
pub mod client;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sluice_sdk::ConnectError;

/// One version of a subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registered {
    pub subject: String,
    pub version: u32,
    pub id: u32,
    pub schema: String,
}

/// Why a registry call failed; the kind tells the task what to do.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Not reachable or answering 5xx: retried within `errors.retry.timeout`.
    #[error("the schema registry is unavailable: {0}")]
    Unavailable(String),
    /// The schema is not compatible with the subject's (409).
    #[error("{0}")]
    Incompatible(String),
    /// No such subject, version or id (404).
    #[error("{0}")]
    NotFound(String),
    /// Anything else the registry refused (4xx): the record's error.
    #[error("{0}")]
    Refused(String),
}

impl From<RegistryError> for ConnectError {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::Unavailable(_) => {
                ConnectError::retriable(e.to_string()).with_class("SchemaRegistryUnavailable")
            }
            RegistryError::Incompatible(_) => {
                ConnectError::data(e.to_string()).with_class("IncompatibleSchema")
            }
            RegistryError::NotFound(_) => {
                ConnectError::data(e.to_string()).with_class("SchemaNotFound")
            }
            RegistryError::Refused(_) => {
                ConnectError::data(e.to_string()).with_class("SchemaRefused")
            }
        }
    }
}

/// What a converter needs of a registry.
#[async_trait]
pub trait Registry: Send + Sync {
    /// The schema (its text) with this id.
    async fn schema_by_id(&self, id: u32) -> Result<String, RegistryError>;
    /// Registers `schema` under `subject` (a no-op if it is there) and
    /// gives its id.
    async fn register(&self, subject: &str, schema: &str) -> Result<u32, RegistryError>;
    /// The version of `subject` that is `schema`, if any.
    async fn lookup(
        &self,
        subject: &str,
        schema: &str,
    ) -> Result<Option<Registered>, RegistryError>;
    /// The latest version of `subject`, if any.
    async fn latest(&self, subject: &str) -> Result<Option<Registered>, RegistryError>;
}

/// Compatibility levels, as Confluent's registry names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Compatibility {
    #[default]
    Backward,
    BackwardTransitive,
    Forward,
    ForwardTransitive,
    Full,
    FullTransitive,
    None,
}

impl Compatibility {
    pub fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(s.to_ascii_uppercase())).ok()
    }

    pub fn name(self) -> &'static str {
        match self {
            Compatibility::Backward => "BACKWARD",
            Compatibility::BackwardTransitive => "BACKWARD_TRANSITIVE",
            Compatibility::Forward => "FORWARD",
            Compatibility::ForwardTransitive => "FORWARD_TRANSITIVE",
            Compatibility::Full => "FULL",
            Compatibility::FullTransitive => "FULL_TRANSITIVE",
            Compatibility::None => "NONE",
        }
    }

    /// Whether `new` may follow `existing` (oldest first): `Ok` if so,
    /// else why not.
    pub fn check(self, new: &str, existing: &[&str]) -> Result<(), String> {
        use apache_avro::Schema;
        use apache_avro::schema_compatibility::SchemaCompatibility;
        let against: &[&str] = match self {
            Compatibility::None => return Ok(()),
            Compatibility::Backward | Compatibility::Forward | Compatibility::Full => {
                existing.last().map(std::slice::from_ref).unwrap_or(&[])
            }
            _ => existing,
        };
        let new_schema =
            Schema::parse_str(new).map_err(|e| format!("not a valid Avro schema: {e}"))?;
        for old in against {
            let old_schema = Schema::parse_str(old)
                .map_err(|e| format!("a stored schema does not parse: {e}"))?;
            let backward = || SchemaCompatibility::can_read(&old_schema, &new_schema);
            let forward = || SchemaCompatibility::can_read(&new_schema, &old_schema);
            let result = match self {
                Compatibility::Backward | Compatibility::BackwardTransitive => {
                    backward().map(|_| ()).map_err(|e| {
                        format!("the new schema cannot read data written with an earlier one: {e}")
                    })
                }
                Compatibility::Forward | Compatibility::ForwardTransitive => {
                    forward().map(|_| ()).map_err(|e| {
                        format!("an earlier schema cannot read data written with the new one: {e}")
                    })
                }
                _ => backward()
                    .map_err(|e| {
                        format!("the new schema cannot read data written with an earlier one: {e}")
                    })
                    .and_then(|_| {
                        forward().map_err(|e| {
                            format!(
                                "an earlier schema cannot read data written with the new one: {e}"
                            )
                        })
                    })
                    .map(|_| ()),
            };
            result.map_err(|e| format!("{} compatibility: {e}", self.name()))?;
        }
        Ok(())
    }
}

/// The registry a converter's settings name: the external one at
/// `schema.registry.url`, or else the worker's own.
pub fn for_settings(
    settings: &crate::config::AvroSettings,
    builtin: &std::sync::Arc<builtin::BuiltinRegistry>,
) -> std::sync::Arc<dyn Registry> {
    if settings.registry_urls.is_empty() {
        return builtin.clone();
    }
    let config = client::ClientConfig {
        urls: settings.registry_urls.clone(),
        basic_auth: settings.basic_auth.clone(),
        trust_pem: settings.trust_pem.clone(),
    };
    match client::HttpRegistry::new(config) {
        Ok(c) => std::sync::Arc::new(c),
        Err(e) => std::sync::Arc::new(Unusable(e)),
    }
}

/// A registry whose client could not be built (its trust store changed
/// since the config was validated): every call says why.
struct Unusable(String);

#[async_trait]
impl Registry for Unusable {
    async fn schema_by_id(&self, _: u32) -> Result<String, RegistryError> {
        Err(RegistryError::Unavailable(self.0.clone()))
    }
    async fn register(&self, _: &str, _: &str) -> Result<u32, RegistryError> {
        Err(RegistryError::Unavailable(self.0.clone()))
    }
    async fn lookup(&self, _: &str, _: &str) -> Result<Option<Registered>, RegistryError> {
        Err(RegistryError::Unavailable(self.0.clone()))
    }
    async fn latest(&self, _: &str) -> Result<Option<Registered>, RegistryError> {
        Err(RegistryError::Unavailable(self.0.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compatibility_levels_are_enforced() {
        let v1 = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}"#;
        let added_optional = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"b","type":["null","string"],"default":null}]}"#;
        let added_required = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"b","type":"string"}]}"#;
        let dropped = r#"{"type":"record","name":"R","fields":[]}"#;
        assert!(Compatibility::Backward.check(added_optional, &[v1]).is_ok());
        let e = Compatibility::Backward
            .check(added_required, &[v1])
            .unwrap_err();
        assert!(e.starts_with("BACKWARD"), "{e}");
        assert!(Compatibility::Forward.check(added_required, &[v1]).is_ok());
        assert!(Compatibility::Backward.check(dropped, &[v1]).is_ok());
        assert!(Compatibility::Forward.check(dropped, &[v1]).is_err());
        assert!(Compatibility::Full.check(added_optional, &[v1]).is_ok());
        assert!(Compatibility::Full.check(added_required, &[v1]).is_err());
        assert!(Compatibility::None.check(added_required, &[v1]).is_ok());
        // Transitive: against every version, not only the last.
        assert!(
            Compatibility::Forward
                .check(dropped, &[v1, added_optional])
                .is_err()
        );
        assert!(
            Compatibility::BackwardTransitive
                .check(added_required, &[added_required, dropped])
                .is_err()
        );
        assert_eq!(
            Compatibility::parse("full_transitive"),
            Some(Compatibility::FullTransitive)
        );
    }
}
