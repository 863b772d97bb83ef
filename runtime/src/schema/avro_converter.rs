//! Confluent's `AvroConverter`: keys or values in Confluent's wire format
//! (magic byte 0, the schema's id as 4 big-endian bytes, the Avro datum),
//! with the schemas in a registry (an external one, or the worker's own).
//!
//! Reading gives the record's Connect schema and its payload in a sink's
//! form, as `JsonConverter` with schemas does, so transforms, follow and
//! sinks treat both alike. A schema id is looked up once and cached; so is
//! the id of each (subject, schema) written.

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::Schema as Avro;
use sluice_sdk::{ConnectError, Schema};

use super::avro;
use super::json;
use super::payload::{self, Form, Path, Settings};
use super::registry::{Registry, SchemaType};
use super::wire::{Prepared, WriterKey};
use super::{WithSchema, class, data};
use crate::config::RegistrySettings;

/// The class a converter's failures name.
pub const AVRO_CONVERTER_CLASS: &str = "io.confluent.connect.avro.AvroConverter";

/// A writer's schema, ready to decode with.
struct ReaderSchema {
    avro: Avro,
    connect: Arc<Schema>,
}

/// A schema to write with, and its id.
struct WriterSchema {
    id: u32,
    avro: Avro,
    named: HashMap<String, Avro>,
}

pub struct AvroConverter {
    registry: Arc<dyn Registry>,
    settings: RegistrySettings,
    is_key: bool,
    readers: Prepared<u32, ReaderSchema>,
    writers: Prepared<WriterKey, WriterSchema>,
}

impl AvroConverter {
    pub fn new(registry: Arc<dyn Registry>, settings: RegistrySettings, is_key: bool) -> Self {
        AvroConverter {
            registry,
            settings,
            is_key,
            readers: Prepared::default(),
            writers: Prepared::default(),
        }
    }

    fn payload_settings() -> Settings {
        Settings::default()
    }

    async fn reader(&self, id: u32) -> Result<Arc<ReaderSchema>, ConnectError> {
        self.readers
            .get_or_build(id, async {
                let text =
                    super::registry::schema_of_type(&*self.registry, id, SchemaType::Avro).await?;
                let avro = Avro::parse_str(&text).map_err(|e| {
                    data(
                        class::INVALID_SCHEMA,
                        format!("the schema with id {id} is not valid Avro: {e}"),
                    )
                })?;
                let connect = avro::to_connect(&text).map_err(|e| {
                    data(
                        class::INVALID_SCHEMA,
                        format!("the schema with id {id} has no Connect form: {e}"),
                    )
                })?;
                Ok(ReaderSchema {
                    avro,
                    connect: Arc::new(connect),
                })
            })
            .await
    }

    /// Reads a key or value as Kafka holds it: its schema and its payload
    /// in a sink's form (`None` for Kafka's null or an Avro null).
    pub async fn read(&self, bytes: Option<&[u8]>) -> Result<WithSchema, ConnectError> {
        let Some(bytes) = bytes else {
            return Ok((None, None));
        };
        let (id, mut datum) = super::wire::split(bytes, "Avro")?;
        let reader = self.reader(id).await?;
        let value = avro::decode(&reader.avro, &mut datum).map_err(|e| {
            data(
                "MalformedAvro",
                format!("the Avro datum does not decode with schema id {id}: {e}"),
            )
        })?;
        if !datum.is_empty() {
            return Err(data(
                "MalformedAvro",
                format!(
                    "{} bytes follow the Avro datum of schema id {id}",
                    datum.len()
                ),
            ));
        }
        let envelope = avro::read_value(&value, &reader.connect)
            .map_err(|e| data(class::SCHEMA_MISMATCH, format!("schema id {id}: {e}")))?;
        if matches!(envelope, json::Json::Null) {
            return Ok((Some(reader.connect.clone()), None));
        }
        let mut out = Vec::with_capacity(bytes.len() * 2);
        payload::convert(
            &reader.connect,
            Some(&envelope),
            Form::Envelope,
            Form::Sink,
            Self::payload_settings(),
            &mut out,
            &mut Path::new("payload"),
        )
        .map_err(|e| data(class::SCHEMA_MISMATCH, format!("schema id {id}: {e}")))?;
        Ok((Some(reader.connect.clone()), Some(out)))
    }

    fn subject(&self, topic: &str, schema: &Schema) -> Result<String, ConnectError> {
        // A struct without a name is Confluent's `ConnectDefault` record.
        super::subject_name(
            self.settings.subject_name_strategy,
            self.is_key,
            topic,
            schema,
            Some(avro::CONNECT_DEFAULT_FULL_NAME),
        )
    }

    async fn writer(
        &self,
        subject: &str,
        schema: &Arc<Schema>,
    ) -> Result<Arc<WriterSchema>, ConnectError> {
        let key = (subject.to_string(), schema.clone());
        self.writers
            .get_or_build(key, async {
                let (id, text) = super::wire::writer_schema(
                    &*self.registry,
                    &self.settings,
                    subject,
                    SchemaType::Avro,
                    || avro::from_connect(schema).to_string(),
                )
                .await?;
                let avro = Avro::parse_str(&text).map_err(|e| {
                    data(
                        class::INVALID_SCHEMA,
                        format!("the schema of `{subject}` (id {id}) is not valid Avro: {e}"),
                    )
                })?;
                let named = avro::named_types(&avro);
                Ok(WriterSchema { id, avro, named })
            })
            .await
    }

    /// A payload (in a sink's form) with its schema, in the wire format.
    pub async fn write(
        &self,
        topic: &str,
        schema: Option<&Arc<Schema>>,
        payload: Option<&json::Json>,
    ) -> Result<Option<Vec<u8>>, ConnectError> {
        let Some(payload) = payload else {
            return Ok(None);
        };
        let schema = super::wire::required(schema, "AvroConverter")?;
        let mut envelope = Vec::new();
        super::convert_payload(
            schema,
            Some(payload),
            Form::Sink,
            Form::Envelope,
            Self::payload_settings(),
            &mut envelope,
        )?;
        let envelope = json::parse(&envelope).expect("convert writes JSON");
        let subject = self.subject(topic, schema)?;
        let writer = self.writer(&subject, schema).await?;
        let value =
            avro::write_value(&envelope, &writer.avro, &writer.named, "payload").map_err(|e| {
                data(
                    class::SCHEMA_MISMATCH,
                    format!(
                        "the payload does not fit the Avro schema of `{subject}` (id {}): {e}",
                        writer.id
                    ),
                )
            })?;
        let datum = avro::encode(&writer.avro, value).map_err(|e| {
            data(
                class::SCHEMA_MISMATCH,
                format!(
                    "the payload does not encode with the Avro schema of `{subject}` (id {}): {e}",
                    writer.id
                ),
            )
        })?;
        let mut out = super::wire::header(writer.id, datum.len());
        out.extend_from_slice(&datum);
        Ok(Some(out))
    }
}
