//! Confluent's `JsonSchemaConverter`: keys or values in Confluent's wire
//! format (magic byte 0, the schema's id as 4 big-endian bytes, the JSON
//! text), with their JSON Schemas in a registry (an external one, or the
//! worker's own).
//!
//! Reading gives the record's Connect schema (mapped from its JSON Schema
//! as `crate::schema::json_schema` says) and its payload in a sink's form,
//! as the other converters with schemas do. With
//! `json.fail.invalid.schema=true` a payload is validated against its JSON
//! Schema both ways, and one that does not validate is the record's error.
//! A schema id is looked up once and cached; so is the id of each
//! (subject, schema) written.

use std::sync::Arc;

use sluice_sdk::{ConnectError, Schema};

use super::json::{self, Json};
use super::json_schema::{self, Compiled, Entries};
use super::payload::{self, Form, Path, Settings};
use super::registry::{Registry, SchemaType};
use super::wire::{Prepared, WriterKey};
use super::{WithSchema, class, data};
use crate::config::RegistrySettings;

/// The class a converter's failures name.
pub const JSON_SCHEMA_CONVERTER_CLASS: &str = "io.confluent.connect.json.JsonSchemaConverter";

/// A schema of the registry, ready to read or write with.
struct Known {
    id: u32,
    compiled: Compiled,
    connect: Arc<Schema>,
    /// Whether payloads hold maps with keys that are not strings, whose
    /// JSON Schema form differs from the envelope form.
    entry_maps: bool,
}

pub struct JsonSchemaConverter {
    registry: Arc<dyn Registry>,
    settings: RegistrySettings,
    is_key: bool,
    readers: Prepared<u32, Known>,
    writers: Prepared<WriterKey, Known>,
}

impl JsonSchemaConverter {
    pub fn new(registry: Arc<dyn Registry>, settings: RegistrySettings, is_key: bool) -> Self {
        JsonSchemaConverter {
            registry,
            settings,
            is_key,
            readers: Prepared::default(),
            writers: Prepared::default(),
        }
    }

    fn known(id: u32, text: &str, what: &str) -> Result<Known, ConnectError> {
        let compiled = json_schema::compile(text).map_err(|e| {
            data(
                class::INVALID_SCHEMA,
                format!("{what} (id {id}) is not a valid JSON Schema: {e}"),
            )
        })?;
        let connect = json_schema::to_connect(&compiled.document).map_err(|e| {
            data(
                class::INVALID_SCHEMA,
                format!("{what} (id {id}) has no Connect form: {e}"),
            )
        })?;
        Ok(Known {
            id,
            entry_maps: json_schema::has_entry_maps(&connect),
            compiled,
            connect: Arc::new(connect),
        })
    }

    async fn reader(&self, id: u32) -> Result<Arc<Known>, ConnectError> {
        self.readers
            .get_or_build(id, async {
                let text =
                    super::registry::schema_of_type(&*self.registry, id, SchemaType::Json).await?;
                Self::known(id, &text, "the schema")
            })
            .await
    }

    /// Validates `text` against `known` when `json.fail.invalid.schema`
    /// is set.
    fn validate(&self, known: &Known, text: &[u8], what: &str) -> Result<(), ConnectError> {
        if !self.settings.fail_invalid_schema {
            return Ok(());
        }
        let value: serde_json::Value = serde_json::from_slice(text)
            .map_err(|e| data(class::MALFORMED_JSON, format!("{what} is not JSON: {e}")))?;
        if let Some(error) = known.compiled.validator.iter_errors(&value).next() {
            return Err(data(
                "JsonSchemaValidation",
                format!(
                    "{what} does not validate against schema id {} at `{}`: {error}",
                    known.id,
                    error.instance_path()
                ),
            ));
        }
        Ok(())
    }

    /// Reads a key or value as Kafka holds it: its schema and its payload
    /// in a sink's form (`None` for Kafka's null or a JSON null).
    pub async fn read(&self, bytes: Option<&[u8]>) -> Result<WithSchema, ConnectError> {
        let Some(bytes) = bytes else {
            return Ok((None, None));
        };
        let (id, text) = super::wire::split(bytes, "JSON Schema data")?;
        let known = self.reader(id).await?;
        let value = json::parse(text).map_err(|e| {
            data(
                class::MALFORMED_JSON,
                format!("the JSON after schema id {id} does not parse: {e}"),
            )
        })?;
        self.validate(&known, text, "the payload")?;
        if matches!(value, Json::Null) {
            return Ok((Some(known.connect.clone()), None));
        }
        let value = if known.entry_maps {
            json_schema::convert_entries(&known.connect, value, Entries::ToPairs)
        } else {
            value
        };
        let mut out = Vec::with_capacity(text.len() + 16);
        payload::convert(
            &known.connect,
            Some(&value),
            Form::Envelope,
            Form::Sink,
            Settings::default(),
            &mut out,
            &mut Path::new("payload"),
        )
        .map_err(|e| data(class::SCHEMA_MISMATCH, format!("schema id {id}: {e}")))?;
        Ok((Some(known.connect.clone()), Some(out)))
    }

    async fn writer(
        &self,
        subject: &str,
        schema: &Arc<Schema>,
    ) -> Result<Arc<Known>, ConnectError> {
        let key = (subject.to_string(), schema.clone());
        self.writers
            .get_or_build(key, async {
                let (id, text) = super::wire::writer_schema(
                    &*self.registry,
                    &self.settings,
                    subject,
                    SchemaType::Json,
                    || {
                        json_schema::from_connect(
                            schema,
                            self.settings.object_additional_properties,
                        )
                        .to_string()
                    },
                )
                .await?;
                let mut known = Self::known(id, &text, &format!("the schema of `{subject}`"))?;
                // Written as the record's own schema says (the registry's
                // copy may be an equal one written by another tool).
                known.connect = schema.clone();
                known.entry_maps = json_schema::has_entry_maps(schema);
                Ok(known)
            })
            .await
    }

    /// A payload (in a sink's form) with its schema, in the wire format.
    pub async fn write(
        &self,
        topic: &str,
        schema: Option<&Arc<Schema>>,
        payload: Option<&Json>,
    ) -> Result<Option<Vec<u8>>, ConnectError> {
        let Some(payload) = payload else {
            return Ok(None);
        };
        let schema = super::wire::required(schema, "JsonSchemaConverter")?;
        let subject = super::subject_name(
            self.settings.subject_name_strategy,
            self.is_key,
            topic,
            schema,
            None,
        )?;
        let known = self.writer(&subject, schema).await?;
        let mut out = super::wire::header(known.id, 64);
        let convert = |value: &Json, out: &mut Vec<u8>| {
            super::convert_payload(
                schema,
                Some(value),
                Form::Sink,
                Form::Envelope,
                Settings::default(),
                out,
            )
        };
        if known.entry_maps {
            let mut envelope = Vec::new();
            convert(payload, &mut envelope)?;
            let value = json::parse(&envelope).expect("convert writes JSON");
            let value = json_schema::convert_entries(schema, value, Entries::ToObjects);
            json::write(&mut out, &value);
        } else {
            convert(payload, &mut out)?;
        }
        self.validate(&known, &out[5..], &format!("the payload for `{subject}`"))?;
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RegistryFormat;
    use crate::schema::registry::builtin::BuiltinRegistry;

    fn converter(
        registry: &Arc<BuiltinRegistry>,
        fail_invalid_schema: bool,
    ) -> JsonSchemaConverter {
        JsonSchemaConverter::new(
            registry.clone(),
            RegistrySettings {
                fail_invalid_schema,
                ..RegistrySettings::defaults(RegistryFormat::JsonSchema)
            },
            false,
        )
    }

    #[tokio::test]
    async fn writes_and_reads_back_through_the_registry() {
        let registry = Arc::new(BuiltinRegistry::new(None).unwrap());
        let c = converter(&registry, true);
        let schema = Arc::new(
            Schema::structure([
                ("id", Schema::int32()),
                ("price", Schema::decimal(2)),
                ("by_id", Schema::map(Schema::int32(), Schema::string())),
                ("note", Schema::string().optional()),
            ])
            .named("shop.Order"),
        );
        let payload =
            json::parse(br#"{"id":7,"price":12.5,"by_id":[[1,"a"]],"note":null}"#).unwrap();
        let bytes = c
            .write("orders", Some(&schema), Some(&payload))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&bytes[..5], &[0, 0, 0, 0, 1]);
        assert_eq!(
            std::str::from_utf8(&bytes[5..]).unwrap(),
            r#"{"id":7,"price":"BOI=","by_id":[{"key":1,"value":"a"}],"note":null}"#
        );
        let registered = registry.latest("orders-value").await.unwrap().unwrap();
        assert_eq!(registered.schema_type, SchemaType::Json);
        let (read_schema, read) = c.read(Some(&bytes)).await.unwrap();
        assert_eq!(read_schema.as_deref(), Some(&*schema));
        assert_eq!(
            std::str::from_utf8(read.as_deref().unwrap()).unwrap(),
            r#"{"id":7,"price":12.50,"by_id":[[1,"a"]],"note":null}"#
        );
    }

    #[tokio::test]
    async fn bad_records_are_data_errors_naming_the_cause() {
        let registry = Arc::new(BuiltinRegistry::new(None).unwrap());
        let strict = converter(&registry, true);
        let text = r#"{"type":"object","properties":{"n":{"type":"integer","maximum":10,"connect.type":"int32"}}}"#;
        let id = registry
            .register("t-value", SchemaType::Json, text)
            .await
            .unwrap();
        let mut record = vec![0];
        record.extend_from_slice(&id.to_be_bytes());
        record.extend_from_slice(br#"{"n":11}"#);
        let e = strict.read(Some(&record)).await.unwrap_err();
        assert_eq!(e.class.as_deref(), Some("JsonSchemaValidation"), "{e}");
        assert!(e.message.contains("/n"), "{e}");
        // Without json.fail.invalid.schema the value is read as it is.
        let lenient = converter(&registry, false);
        let (_, p) = lenient.read(Some(&record)).await.unwrap();
        assert_eq!(p.as_deref(), Some(&br#"{"n":11}"#[..]));
        for (bytes, class) in [
            (&b"{\"n\":1}"[..], "UnknownMagicByte"),
            (&[0, 0, 0, 0][..], "UnknownMagicByte"),
            (&[0, 0, 0, 0, 99, b'1'][..], "SchemaNotFound"),
        ] {
            let e = strict.read(Some(bytes)).await.unwrap_err();
            assert_eq!(e.class.as_deref(), Some(class), "{e}");
        }
        let avro = registry
            .register("a-value", SchemaType::Avro, r#"{"type":"string"}"#)
            .await
            .unwrap();
        let mut other = vec![0];
        other.extend_from_slice(&avro.to_be_bytes());
        other.extend_from_slice(b"\"x\"");
        let e = strict.read(Some(&other)).await.unwrap_err();
        assert_eq!(e.class.as_deref(), Some("SchemaTypeMismatch"), "{e}");
        let mut broken = record.clone();
        broken.truncate(8);
        let e = lenient.read(Some(&broken)).await.unwrap_err();
        assert_eq!(e.class.as_deref(), Some(class::MALFORMED_JSON), "{e}");
    }
}
