//! Confluent's `ProtobufConverter`: keys or values in Confluent's wire
//! format (magic byte 0, the schema's id as 4 big-endian bytes, the
//! message indexes, the Protobuf message), with their schemas in a
//! registry (an external one, or the worker's own).
//!
//! Reading gives the record's Connect schema (mapped from its message as
//! `crate::schema::protobuf` says) and its payload in a sink's form, as
//! the other converters with schemas do. A schema id is compiled once per
//! id and cached; so is the id of each (subject, schema) written.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prost::Message as _;
use prost_reflect::{DynamicMessage, MessageDescriptor};
use sluice_sdk::{ConnectError, Schema};

use super::json::{self, Json};
use super::payload::{self, Form, Path, Settings};
use super::protobuf::{self, compile};
use super::registry::{Registry, SchemaType};
use super::wire::{Prepared, WriterKey};
use super::{WithSchema, class, data};
use crate::config::RegistrySettings;

/// The class a converter's failures name.
pub const PROTOBUF_CONVERTER_CLASS: &str = "io.confluent.connect.protobuf.ProtobufConverter";

/// A compiled schema of the registry and the Connect schemas of the
/// messages records have named in it.
struct Reader {
    compiled: compile::Compiled,
    messages: Mutex<HashMap<Vec<i32>, Message>>,
}

/// A message of a schema and its Connect schema.
type Message = (MessageDescriptor, Arc<Schema>);

/// How records of one Connect schema are written under one subject.
struct Writer {
    id: u32,
    indexes: Vec<i32>,
    message: MessageDescriptor,
}

pub struct ProtobufConverter {
    registry: Arc<dyn Registry>,
    settings: RegistrySettings,
    is_key: bool,
    readers: Prepared<u32, Reader>,
    writers: Prepared<WriterKey, Writer>,
}

fn invalid(id: u32, e: String) -> ConnectError {
    data(
        class::INVALID_SCHEMA,
        format!("schema id {id} is not a Protobuf schema Sluice can read: {e}"),
    )
}

impl ProtobufConverter {
    pub fn new(registry: Arc<dyn Registry>, settings: RegistrySettings, is_key: bool) -> Self {
        ProtobufConverter {
            registry,
            settings,
            is_key,
            readers: Prepared::default(),
            writers: Prepared::default(),
        }
    }

    async fn reader(&self, id: u32) -> Result<Arc<Reader>, ConnectError> {
        self.readers
            .get_or_build(id, async {
                let text =
                    super::registry::schema_of_type(&*self.registry, id, SchemaType::Protobuf)
                        .await?;
                Ok(Reader {
                    compiled: compile::compile(&text).map_err(|e| invalid(id, e))?,
                    messages: Mutex::new(HashMap::new()),
                })
            })
            .await
    }

    /// Reads a key or value as Kafka holds it: its schema and its payload
    /// in a sink's form (`None` for Kafka's null).
    pub async fn read(&self, bytes: Option<&[u8]>) -> Result<WithSchema, ConnectError> {
        let Some(bytes) = bytes else {
            return Ok((None, None));
        };
        let (id, rest) = super::wire::split(bytes, "Protobuf data")?;
        let (indexes, body) = compile::read_indexes(rest).map_err(|e| {
            data(
                "MalformedProtobuf",
                format!("the record after schema id {id}: {e}"),
            )
        })?;
        let reader = self.reader(id).await?;
        let (message, schema) = {
            let mut messages = reader.messages.lock().expect("protobuf messages");
            match messages.get(&indexes) {
                Some(known) => known.clone(),
                None => {
                    let m = reader
                        .compiled
                        .message_at(&indexes)
                        .map_err(|e| invalid(id, e))?;
                    let s = Arc::new(
                        protobuf::to_connect(&m, self.settings.enhanced_protobuf).map_err(|e| {
                            data(
                                class::INVALID_SCHEMA,
                                format!("schema id {id} has no Connect form: {e}"),
                            )
                        })?,
                    );
                    messages.insert(indexes.clone(), (m.clone(), s.clone()));
                    (m, s)
                }
            }
        };
        let msg = DynamicMessage::decode(message.clone(), body).map_err(|e| {
            data(
                "MalformedProtobuf",
                format!(
                    "the bytes after schema id {id} are not a `{}` message: {e}",
                    message.full_name()
                ),
            )
        })?;
        let envelope = protobuf::value::read(&msg, &schema)
            .map_err(|e| data(class::SCHEMA_MISMATCH, format!("schema id {id}: {e}")))?;
        if matches!(envelope, Json::Null) {
            return Ok((Some(schema), None));
        }
        let mut out = Vec::with_capacity(body.len() * 2 + 16);
        payload::convert(
            &schema,
            Some(&envelope),
            Form::Envelope,
            Form::Sink,
            Settings::default(),
            &mut out,
            &mut Path::new("payload"),
        )
        .map_err(|e| data(class::SCHEMA_MISMATCH, format!("schema id {id}: {e}")))?;
        Ok((Some(schema), Some(out)))
    }

    async fn writer(
        &self,
        subject: &str,
        schema: &Arc<Schema>,
    ) -> Result<Arc<Writer>, ConnectError> {
        let key = (subject.to_string(), schema.clone());
        self.writers
            .get_or_build(key, async {
                let (text, mut indexes) = protobuf::from_connect(schema).map_err(|e| {
                    data(
                        class::INVALID_SCHEMA,
                        format!("the schema of `{subject}` has no Protobuf form: {e}"),
                    )
                })?;
                let (id, registered) = super::wire::writer_schema(
                    &*self.registry,
                    &self.settings,
                    subject,
                    SchemaType::Protobuf,
                    || text.clone(),
                )
                .await?;
                let compiled = compile::compile(&registered).map_err(|e| invalid(id, e))?;
                if registered != text {
                    // `use.latest.version`: the record's message is the one
                    // of the subject's latest schema that has the struct's
                    // name (else its first message).
                    let short = schema
                        .name
                        .as_deref()
                        .map(|n| n.rsplit('.').next().unwrap_or(n));
                    indexes = compiled
                        .file
                        .messages()
                        .position(|m| Some(m.name()) == short)
                        .map_or(vec![0], |i| vec![i as i32]);
                }
                let message = compiled.message_at(&indexes).map_err(|e| invalid(id, e))?;
                Ok(Writer {
                    id,
                    indexes,
                    message,
                })
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
        let schema = super::wire::required(schema, "ProtobufConverter")?;
        let subject = super::subject_name(
            self.settings.subject_name_strategy,
            self.is_key,
            topic,
            schema,
            Some("ConnectDefault1"),
        )?;
        let writer = self.writer(&subject, schema).await?;
        let mut envelope = Vec::new();
        super::convert_payload(
            schema,
            Some(payload),
            Form::Sink,
            Form::Envelope,
            Settings::default(),
            &mut envelope,
        )?;
        let envelope = json::parse(&envelope).expect("convert writes JSON");
        let msg = protobuf::value::write(&writer.message, schema, &envelope).map_err(|e| {
            data(
                class::SCHEMA_MISMATCH,
                format!("the payload for `{subject}` does not fit its message: {e}"),
            )
        })?;
        let mut out = super::wire::header(writer.id, msg.encoded_len() + 4);
        compile::write_indexes(&mut out, &writer.indexes);
        msg.encode(&mut out).expect("a Vec grows");
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RegistryFormat;
    use crate::schema::registry::builtin::BuiltinRegistry;

    fn converter(registry: &Arc<BuiltinRegistry>) -> ProtobufConverter {
        with_full_names(registry, false)
    }

    fn with_full_names(registry: &Arc<BuiltinRegistry>, enhanced: bool) -> ProtobufConverter {
        ProtobufConverter::new(
            registry.clone(),
            RegistrySettings {
                enhanced_protobuf: enhanced,
                ..RegistrySettings::defaults(RegistryFormat::Protobuf)
            },
            false,
        )
    }

    #[tokio::test]
    async fn writes_and_reads_back_through_the_registry() {
        let registry = Arc::new(BuiltinRegistry::new(None).unwrap());
        let c = converter(&registry);
        let schema = Arc::new(
            Schema::structure([
                ("id", Schema::int32()),
                ("price", Schema::decimal(2)),
                ("by_id", Schema::map(Schema::int32(), Schema::string())),
                ("at", Schema::timestamp().optional()),
                ("day", Schema::date().optional()),
                ("note", Schema::string().optional()),
                ("tiny", Schema::int8()),
            ])
            .named("shop.Order"),
        );
        let payload = json::parse(
            br#"{"id":7,"price":12.5,"by_id":[[1,"a"]],"at":1700000000123,"day":86400000,"note":null,"tiny":-3}"#,
        )
        .unwrap();
        let bytes = c
            .write("orders", Some(&schema), Some(&payload))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&bytes[..6], &[0, 0, 0, 0, 1, 0]);
        let registered = registry.latest("orders-value").await.unwrap().unwrap();
        assert_eq!(registered.schema_type, SchemaType::Protobuf);
        assert!(
            registered.schema.contains("message Order {"),
            "{}",
            registered.schema
        );
        let (read_schema, read) = c.read(Some(&bytes)).await.unwrap();
        let read_schema = read_schema.unwrap();
        assert_eq!(read_schema.name.as_deref(), Some("Order"));
        // proto3: a null string reads back as "" (Confluent's does too).
        assert_eq!(
            std::str::from_utf8(read.as_deref().unwrap()).unwrap(),
            r#"{"id":7,"price":12.50,"by_id":[[1,"a"]],"at":1700000000123,"day":86400000,"note":"","tiny":-3}"#
        );
        // By default a struct is named without its package (as Confluent's
        // converter names it): what was read writes to another subject;
        // back under the same one, the package would change.
        let again = c
            .write(
                "orders-copy",
                Some(&read_schema),
                Some(&json::parse(read.as_deref().unwrap()).unwrap()),
            )
            .await
            .unwrap()
            .unwrap();
        let (_, again_read) = c.read(Some(&again)).await.unwrap();
        assert_eq!(again_read, read);
        let e = c
            .write(
                "orders",
                Some(&read_schema),
                Some(&json::parse(read.as_deref().unwrap()).unwrap()),
            )
            .await
            .unwrap_err();
        assert!(e.message.contains("PACKAGE_CHANGED"), "{e}");
        // With enhanced.protobuf.schema.support the full name is kept, and
        // the record writes back as the very schema it was read with.
        let enhanced = with_full_names(&registry, true);
        let (full, read) = enhanced.read(Some(&bytes)).await.unwrap();
        assert_eq!(full.as_ref().unwrap().name.as_deref(), Some("shop.Order"));
        let again = enhanced
            .write(
                "orders",
                full.as_ref(),
                Some(&json::parse(read.as_deref().unwrap()).unwrap()),
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(again[..6], bytes[..6]);
    }

    #[tokio::test]
    async fn bad_records_are_data_errors_naming_the_cause() {
        let registry = Arc::new(BuiltinRegistry::new(None).unwrap());
        let c = converter(&registry);
        let id = registry
            .register(
                "t-value",
                SchemaType::Protobuf,
                "syntax = \"proto3\";\nmessage M { int32 n = 1; }\n",
            )
            .await
            .unwrap();
        let framed = |tail: &[u8]| {
            let mut record = vec![0];
            record.extend_from_slice(&id.to_be_bytes());
            record.extend_from_slice(tail);
            record
        };
        let (_, ok) = c.read(Some(&framed(&[0, 8, 5]))).await.unwrap();
        assert_eq!(ok.as_deref(), Some(&br#"{"n":5}"#[..]));
        for (bytes, class) in [
            (b"{\"n\":1}".to_vec(), "UnknownMagicByte"),
            (vec![0, 0, 0, 0, 99, 0], "SchemaNotFound"),
            (framed(&[]), "MalformedProtobuf"),
            (framed(&[0, 8]), "MalformedProtobuf"),
            (framed(&[2, 6]), class::INVALID_SCHEMA),
        ] {
            let e = c.read(Some(&bytes)).await.unwrap_err();
            assert_eq!(e.class.as_deref(), Some(class), "{e}");
        }
        let avro = registry
            .register("a-value", SchemaType::Avro, r#"{"type":"string"}"#)
            .await
            .unwrap();
        let mut other = vec![0];
        other.extend_from_slice(&avro.to_be_bytes());
        other.push(0);
        let e = c.read(Some(&other)).await.unwrap_err();
        assert_eq!(e.class.as_deref(), Some("SchemaTypeMismatch"), "{e}");
    }
}
