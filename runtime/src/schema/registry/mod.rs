//! Schema registries in Confluent's API: a client of an external one
//! ([`client`]) and the worker's own ([`builtin`], served under
//! `/schema-registry` by `crate::rest::registry`). Converters see either
//! through [`Registry`].

pub mod builtin;
pub mod client;
pub mod stores;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sluice_sdk::ConnectError;

/// The kinds of schema a registry holds, by Confluent's `schemaType`
/// names (absent means AVRO).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SchemaType {
    #[default]
    Avro,
    Json,
    Protobuf,
}

impl SchemaType {
    pub fn name(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Json => "JSON",
            SchemaType::Protobuf => "PROTOBUF",
        }
    }

    /// Confluent's `schemaType` value (case as given is accepted).
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_uppercase().as_str() {
            "AVRO" => Some(SchemaType::Avro),
            "JSON" => Some(SchemaType::Json),
            "PROTOBUF" => Some(SchemaType::Protobuf),
            _ => None,
        }
    }

    /// The types the built-in registry holds, as `/schemas/types` lists them.
    pub const ALL: [SchemaType; 3] = [SchemaType::Json, SchemaType::Protobuf, SchemaType::Avro];

    /// Whether `text` is a schema of this type: `Err` says why not.
    pub fn validate(self, text: &str) -> Result<(), String> {
        match self {
            SchemaType::Avro => apache_avro::Schema::parse_str(text)
                .map(|_| ())
                .map_err(|e| format!("not a valid Avro schema: {e}")),
            SchemaType::Json => crate::schema::json_schema::compile(text).map(|_| ()),
            SchemaType::Protobuf => crate::schema::protobuf::compile::compile(text).map(|_| ()),
        }
    }

    /// A schema's identity: the same schema written differently (spaced,
    /// keys in another order, `.proto` text or a descriptor) is one
    /// schema, with one id.
    pub fn identity(self, text: &str) -> Result<String, String> {
        match self {
            SchemaType::Avro | SchemaType::Json => builtin::normalise(text),
            SchemaType::Protobuf => crate::schema::protobuf::compile::identity(text),
        }
    }
}

/// One version of a subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registered {
    pub subject: String,
    pub version: u32,
    pub id: u32,
    pub schema_type: SchemaType,
    pub schema: String,
}

impl Registered {
    /// As Confluent's API answers it: `schemaType` only when not AVRO.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "subject": self.subject,
            "version": self.version,
            "id": self.id,
            "schema": self.schema,
        });
        if self.schema_type != SchemaType::Avro {
            v["schemaType"] = self.schema_type.name().into();
        }
        v
    }
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
    /// The schema with this id: its type and text.
    async fn schema_by_id(&self, id: u32) -> Result<(SchemaType, String), RegistryError>;
    /// Registers `schema` under `subject` (a no-op if it is there) and
    /// gives its id.
    async fn register(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
    ) -> Result<u32, RegistryError>;
    /// The version of `subject` that is `schema`, if any.
    async fn lookup(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
    ) -> Result<Option<Registered>, RegistryError>;
    /// The latest version of `subject`, if any.
    async fn latest(&self, subject: &str) -> Result<Option<Registered>, RegistryError>;
}

/// The text of the schema `id` names, which a record's converter expects
/// to be of `expected` type: a record's data error if it is absent or of
/// another type.
pub async fn schema_of_type(
    registry: &dyn Registry,
    id: u32,
    expected: SchemaType,
) -> Result<String, ConnectError> {
    let (found, text) = registry.schema_by_id(id).await.map_err(|e| match e {
        RegistryError::NotFound(m) => {
            ConnectError::data(format!("{m} (the record names schema id {id})"))
                .with_class("SchemaNotFound")
        }
        other => other.into(),
    })?;
    if found != expected {
        return Err(ConnectError::data(format!(
            "the record names schema id {id}, which is {} and not {}: it was written by another kind of converter",
            found.name(),
            expected.name()
        ))
        .with_class("SchemaTypeMismatch"));
    }
    Ok(text)
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
    /// else why not. A subject holds one type of schema.
    pub fn check(
        self,
        schema_type: SchemaType,
        new: &str,
        existing: &[(SchemaType, &str)],
    ) -> Result<(), String> {
        let against: &[(SchemaType, &str)] = match self {
            Compatibility::None => return Ok(()),
            Compatibility::Backward | Compatibility::Forward | Compatibility::Full => {
                existing.last().map(std::slice::from_ref).unwrap_or(&[])
            }
            _ => existing,
        };
        for (old_type, old) in against {
            if *old_type != schema_type {
                return Err(format!(
                    "{} compatibility: the subject holds {} schemas and this one is {}",
                    self.name(),
                    old_type.name(),
                    schema_type.name()
                ));
            }
            // `can_read(reader, writer)`: Ok if data written with `writer`
            // reads with `reader`.
            let can_read = |reader: &str, writer: &str| match schema_type {
                SchemaType::Avro => avro_can_read(reader, writer),
                SchemaType::Json => crate::schema::json_schema::compat::can_read(reader, writer),
                SchemaType::Protobuf => crate::schema::protobuf::compat::can_read(reader, writer),
            };
            let backward = || {
                can_read(new, old).map_err(|e| {
                    format!("the new schema cannot read data written with an earlier one: {e}")
                })
            };
            let forward = || {
                can_read(old, new).map_err(|e| {
                    format!("an earlier schema cannot read data written with the new one: {e}")
                })
            };
            let result = match self {
                Compatibility::Backward | Compatibility::BackwardTransitive => backward(),
                Compatibility::Forward | Compatibility::ForwardTransitive => forward(),
                _ => backward().and_then(|_| forward()),
            };
            result.map_err(|e| format!("{} compatibility: {e}", self.name()))?;
        }
        Ok(())
    }
}

fn avro_can_read(reader: &str, writer: &str) -> Result<(), String> {
    use apache_avro::Schema;
    use apache_avro::schema_compatibility::SchemaCompatibility;
    let reader = Schema::parse_str(reader).map_err(|e| format!("not a valid Avro schema: {e}"))?;
    let writer = Schema::parse_str(writer).map_err(|e| format!("not a valid Avro schema: {e}"))?;
    SchemaCompatibility::can_read(&writer, &reader)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The registry a converter's settings name: the external one at
/// `schema.registry.url`, or else the worker's own.
pub fn for_settings(
    settings: &crate::config::RegistrySettings,
    builtin: &std::sync::Arc<builtin::BuiltinRegistry>,
) -> std::sync::Arc<dyn Registry> {
    if settings.registry_urls.is_empty() {
        return builtin.clone();
    }
    let config = client::ClientConfig {
        urls: settings.registry_urls.clone(),
        basic_auth: settings.basic_auth.clone(),
        truststore: settings.truststore.clone(),
        keystore: settings.keystore.clone(),
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
    async fn schema_by_id(&self, _: u32) -> Result<(SchemaType, String), RegistryError> {
        Err(RegistryError::Unavailable(self.0.clone()))
    }
    async fn register(&self, _: &str, _: SchemaType, _: &str) -> Result<u32, RegistryError> {
        Err(RegistryError::Unavailable(self.0.clone()))
    }
    async fn lookup(
        &self,
        _: &str,
        _: SchemaType,
        _: &str,
    ) -> Result<Option<Registered>, RegistryError> {
        Err(RegistryError::Unavailable(self.0.clone()))
    }
    async fn latest(&self, _: &str) -> Result<Option<Registered>, RegistryError> {
        Err(RegistryError::Unavailable(self.0.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn avro<'a>(schemas: &[&'a str]) -> Vec<(SchemaType, &'a str)> {
        schemas.iter().map(|s| (SchemaType::Avro, *s)).collect()
    }

    #[test]
    fn compatibility_levels_are_enforced() {
        let v1 = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}"#;
        let added_optional = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"b","type":["null","string"],"default":null}]}"#;
        let added_required = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"b","type":"string"}]}"#;
        let dropped = r#"{"type":"record","name":"R","fields":[]}"#;
        assert!(
            Compatibility::Backward
                .check(SchemaType::Avro, added_optional, &avro(&[v1]))
                .is_ok()
        );
        let e = Compatibility::Backward
            .check(SchemaType::Avro, added_required, &avro(&[v1]))
            .unwrap_err();
        assert!(e.starts_with("BACKWARD"), "{e}");
        assert!(
            Compatibility::Forward
                .check(SchemaType::Avro, added_required, &avro(&[v1]))
                .is_ok()
        );
        assert!(
            Compatibility::Backward
                .check(SchemaType::Avro, dropped, &avro(&[v1]))
                .is_ok()
        );
        assert!(
            Compatibility::Forward
                .check(SchemaType::Avro, dropped, &avro(&[v1]))
                .is_err()
        );
        assert!(
            Compatibility::Full
                .check(SchemaType::Avro, added_optional, &avro(&[v1]))
                .is_ok()
        );
        assert!(
            Compatibility::Full
                .check(SchemaType::Avro, added_required, &avro(&[v1]))
                .is_err()
        );
        assert!(
            Compatibility::None
                .check(SchemaType::Avro, added_required, &avro(&[v1]))
                .is_ok()
        );
        // Transitive: against every version, not only the last.
        assert!(
            Compatibility::Forward
                .check(SchemaType::Avro, dropped, &avro(&[v1, added_optional]))
                .is_err()
        );
        assert!(
            Compatibility::BackwardTransitive
                .check(
                    SchemaType::Avro,
                    added_required,
                    &avro(&[added_required, dropped])
                )
                .is_err()
        );
        assert_eq!(
            Compatibility::parse("full_transitive"),
            Some(Compatibility::FullTransitive)
        );
    }
}
