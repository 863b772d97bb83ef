//! What Confluent's registry converters share: the wire format (the byte
//! 0, the schema's id as 4 big-endian bytes, the encoded value) and how a
//! writer finds the id of the schema it writes with.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use sluice_sdk::{ConnectError, Schema};

use super::registry::{Registry, SchemaType};
use super::{class, data};
use crate::config::RegistrySettings;

/// What a registry converter has prepared from its registry's schemas:
/// readers by schema id, writers by [`WriterKey`]. Each is built once (a
/// round trip to the registry and a parse) and then shared.
pub struct Prepared<K, V>(Mutex<HashMap<K, Arc<V>>>);

/// A subject and the Connect schema written under it.
pub type WriterKey = (String, Arc<Schema>);

impl<K, V> Default for Prepared<K, V> {
    fn default() -> Self {
        Prepared(Mutex::new(HashMap::new()))
    }
}

impl<K: Eq + Hash, V> Prepared<K, V> {
    /// The value for `key`, built by `build` the first time. The lock is
    /// not held while building (it may ask the registry).
    pub async fn get_or_build<F>(&self, key: K, build: F) -> Result<Arc<V>, ConnectError>
    where
        F: Future<Output = Result<V, ConnectError>>,
    {
        if let Some(v) = self.0.lock().expect("prepared schemas").get(&key) {
            return Ok(v.clone());
        }
        let v = Arc::new(build.await?);
        self.0
            .lock()
            .expect("prepared schemas")
            .insert(key, v.clone());
        Ok(v)
    }
}

/// Confluent's wire format starts with this byte.
const MAGIC: u8 = 0;

/// The schema id of a record in the wire format, and the bytes after the
/// header; `carries` names what a registry's records of this format hold
/// (for the error of a record that is not in the format).
pub fn split<'b>(bytes: &'b [u8], carries: &str) -> Result<(u32, &'b [u8]), ConnectError> {
    if bytes.len() < 5 || bytes[0] != MAGIC {
        return Err(data(
            "UnknownMagicByte",
            format!(
                "not in Confluent's wire format: {} ({carries} from a registry starts with the byte 0 and a 4-byte schema id)",
                if bytes.is_empty() {
                    "no bytes".to_string()
                } else if bytes.len() < 5 {
                    format!("only {} bytes", bytes.len())
                } else {
                    format!("the first byte is {}", bytes[0])
                }
            ),
        ));
    }
    let id = u32::from_be_bytes(bytes[1..5].try_into().expect("4 bytes"));
    Ok((id, &bytes[5..]))
}

/// The header of a record written with schema `id`, with room for `body`
/// more bytes.
pub fn header(id: u32, body: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(body + 5);
    out.push(MAGIC);
    out.extend_from_slice(&id.to_be_bytes());
    out
}

/// The schema a record must have to be written by `converter`.
pub fn required<'s>(
    schema: Option<&'s Arc<Schema>>,
    converter: &str,
) -> Result<&'s Arc<Schema>, ConnectError> {
    schema.ok_or_else(|| {
        data(
            "SchemaRequired",
            format!("{converter} writes records with a schema, and this one has none (a source must give one, or a transform's output must follow its input's)"),
        )
    })
}

/// The id and text of the schema to write `subject` with, as the
/// settings say: the subject's latest (`use.latest.version`, which must be
/// of `schema_type`), or `text()` registered (`auto.register.schemas`) or
/// looked up.
pub async fn writer_schema(
    registry: &dyn Registry,
    settings: &RegistrySettings,
    subject: &str,
    schema_type: SchemaType,
    text: impl FnOnce() -> String,
) -> Result<(u32, String), ConnectError> {
    if settings.use_latest_version {
        let latest = registry.latest(subject).await?.ok_or_else(|| {
            data(
                "SchemaNotFound",
                format!("use.latest.version is set and the subject `{subject}` has no version"),
            )
        })?;
        if latest.schema_type != schema_type {
            return Err(data(
                class::INVALID_SCHEMA,
                format!(
                    "use.latest.version: the latest schema of `{subject}` is {}, not {}",
                    latest.schema_type.name(),
                    schema_type.name()
                ),
            ));
        }
        return Ok((latest.id, latest.schema));
    }
    let text = text();
    let id = if settings.auto_register_schemas {
        registry.register(subject, schema_type, &text).await?
    } else {
        registry
            .lookup(subject, schema_type, &text)
            .await?
            .ok_or_else(|| {
                data(
                    "SchemaNotFound",
                    format!(
                        "the schema is not registered under `{subject}` and auto.register.schemas is false: {text}"
                    ),
                )
            })?
            .id
    };
    Ok((id, text))
}
