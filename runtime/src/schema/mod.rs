//! Kafka Connect's schemas: `JsonConverter` with `schemas.enable=true`.
//!
//! Where schemas live: a record's key and value each carry theirs
//! (`sluice_sdk::Record::{key_schema, value_schema}`, the type in
//! `sluice_sdk::schema`) beside the payload, from the converter stage to
//! the producer or the sink. They never cross into transforms (which see
//! payloads as schemaless JSON) nor into native plugins (ABI version 1
//! carries bytes only).
//!
//! - Reading (sinks and streams, at the converter stage):
//!   [`EnvelopeConverter::read`] takes `{"schema": ..., "payload": ...}`,
//!   checks the schema ([`connect`]) and the payload against it
//!   ([`payload`]), and gives the payload in a sink's form.
//! - Following a transform ([`follow`]): the output's schema from the
//!   input's and the output value.
//! - Writing (sources and streams, before producing):
//!   [`EnvelopeConverter::write`], byte for byte as Kafka Connect's
//!   `JsonConverter` writes the same schema and data.
//!
//! Confluent's `AvroConverter` ([`avro_converter`]) reads and writes the
//! same schemas and payloads in Avro, with a schema registry
//! ([`registry`]); [`SchemaConverter`] is either converter.
//!
//! [`json`] is the JSON reader and writer they share (numbers kept as
//! written, Jackson's escapes and Java's doubles), [`decimal`] the exact
//! arithmetic of `Decimal`s.

pub mod avro;
pub mod avro_converter;
pub mod connect;
pub mod decimal;
pub mod follow;
pub mod json;
pub mod json_schema;
pub mod json_schema_converter;
pub mod payload;
pub mod protobuf;
pub mod protobuf_converter;
pub mod registry;
pub mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sluice_sdk::{ConnectError, Schema};

use crate::config::JsonSchemas;
use json::Json;
use payload::{Form, Path, Settings};

/// The class a converter's failures name (as Kafka Connect's would).
pub const CONVERTER_CLASS: &str = "org.apache.kafka.connect.json.JsonConverter";

/// Error classes of the converter stage with schemas.
pub mod class {
    /// The bytes are not JSON.
    pub const MALFORMED_JSON: &str = "MalformedJson";
    /// JSON, but not `{"schema": ..., "payload": ...}`.
    pub const NOT_AN_ENVELOPE: &str = "NotAnEnvelope";
    /// The schema is not a well-formed Kafka Connect schema.
    pub const INVALID_SCHEMA: &str = "InvalidSchema";
    /// The payload is not a value of its schema.
    pub const SCHEMA_MISMATCH: &str = "SchemaMismatch";
    /// A transform's output has no one schema (array elements of
    /// different types).
    pub const SCHEMA_INFERENCE: &str = "SchemaInference";
}

/// A key or value with its schema: the schema (`None`: without one) and
/// the bytes (`None`: Kafka's null).
pub type WithSchema = (Option<Arc<Schema>>, Option<Vec<u8>>);

/// A schema and its JSON text.
type Written = (Arc<Schema>, Arc<[u8]>);

/// One converter (keys or values) with `schemas.enable=true`: its settings
/// and the schemas it has parsed (by their JSON text, as Kafka Connect
/// caches them).
pub struct EnvelopeConverter {
    settings: Settings,
    cache_size: usize,
    /// `schemas.cache.size` of them; cleared when full.
    parsed: Mutex<HashMap<Vec<u8>, Arc<Schema>>>,
    /// The last schema written and its JSON: a source's records share one.
    written: Mutex<Option<Written>>,
}

fn data(class: &'static str, message: String) -> ConnectError {
    ConnectError::data(message).with_class(class)
}

impl EnvelopeConverter {
    pub fn new(config: JsonSchemas) -> Self {
        EnvelopeConverter {
            settings: Settings {
                decimal_format: config.decimal_format,
                replace_null_with_default: config.replace_null_with_default,
            },
            cache_size: config.cache_size.max(1),
            parsed: Mutex::new(HashMap::new()),
            written: Mutex::new(None),
        }
    }

    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// Reads an envelope as Kafka holds it: its schema (`None` for
    /// `"schema": null`) and its payload in a sink's form (`None` for a
    /// null payload, or for Kafka's null, a tombstone).
    pub fn read(&self, bytes: Option<&[u8]>) -> Result<WithSchema, ConnectError> {
        let Some(bytes) = bytes else {
            return Ok((None, None));
        };
        let (tree, members) = json::parse_top(bytes)
            .map_err(|e| data(class::MALFORMED_JSON, format!("not JSON: {e}")))?;
        let members = match members {
            Some(m)
                if m.len() == 2
                    && m.iter().any(|(k, ..)| k == "schema")
                    && m.iter().any(|(k, ..)| k == "payload") =>
            {
                m
            }
            other => {
                let found = match other {
                    Some(m) => format!(
                        "an object of {}",
                        if m.is_empty() {
                            "no members".to_string()
                        } else {
                            m.iter()
                                .map(|(k, ..)| format!("`{k}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        }
                    ),
                    None => tree.kind().to_string(),
                };
                return Err(data(
                    class::NOT_AN_ENVELOPE,
                    format!(
                        "JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and may not contain additional fields; found {found}. To read plain JSON, set schemas.enable=false"
                    ),
                ));
            }
        };
        let (mut schema_json, mut schema_text, mut payload) = (&Json::Null, &b""[..], &Json::Null);
        for (k, v, text) in &members {
            if k == "schema" {
                (schema_json, schema_text) = (v, text);
            } else {
                payload = v;
            }
        }
        let schema = match schema_json {
            Json::Null => None,
            s => Some(self.parsed_schema(s, schema_text)?),
        };
        let mut out = Vec::with_capacity(bytes.len());
        match &schema {
            None if matches!(payload, Json::Null) => return Ok((None, None)),
            None => payload::write_schemaless(&mut out, payload),
            Some(s) => self.convert(s, Some(payload), Form::Envelope, Form::Sink, &mut out)?,
        }
        let value = (out != b"null").then_some(out);
        Ok((schema, value))
    }

    fn parsed_schema(&self, v: &Json, text: &[u8]) -> Result<Arc<Schema>, ConnectError> {
        let mut parsed = self.parsed.lock().expect("schema cache lock");
        if let Some(s) = parsed.get(text) {
            return Ok(s.clone());
        }
        let schema = Arc::new(connect::read_schema(v, self.settings).map_err(|e| {
            data(
                class::INVALID_SCHEMA,
                format!("not a Kafka Connect schema: {e}"),
            )
        })?);
        if parsed.len() >= self.cache_size {
            parsed.clear();
        }
        parsed.insert(text.to_vec(), schema.clone());
        Ok(schema)
    }

    /// Writes an envelope of `schema` and `payload` (a sink's form), as
    /// Kafka Connect's `JsonConverter` writes it. No schema and no payload
    /// is Kafka's null (a tombstone); no schema, `"schema": null`.
    pub fn write(
        &self,
        schema: Option<&Arc<Schema>>,
        payload: Option<&Json>,
    ) -> Result<Option<Vec<u8>>, ConnectError> {
        let Some(schema) = schema else {
            let Some(payload) = payload else {
                return Ok(None);
            };
            let mut out = b"{\"schema\":null,\"payload\":".to_vec();
            payload::write_schemaless(&mut out, payload);
            out.push(b'}');
            return Ok(Some(out));
        };
        let schema_json = self.schema_json(schema);
        let mut out = Vec::with_capacity(schema_json.len() + 64);
        out.extend_from_slice(b"{\"schema\":");
        out.extend_from_slice(&schema_json);
        out.extend_from_slice(b",\"payload\":");
        self.convert(schema, payload, Form::Sink, Form::Envelope, &mut out)?;
        out.push(b'}');
        Ok(Some(out))
    }

    fn convert(
        &self,
        schema: &Schema,
        payload: Option<&Json>,
        from: Form,
        to: Form,
        out: &mut Vec<u8>,
    ) -> Result<(), ConnectError> {
        convert_payload(schema, payload, from, to, self.settings, out)
    }

    fn schema_json(&self, schema: &Arc<Schema>) -> Arc<[u8]> {
        let mut last = self.written.lock().expect("schema lock");
        if let Some((s, text)) = last.as_ref()
            && (Arc::ptr_eq(s, schema) || **s == **schema)
        {
            return text.clone();
        }
        let mut out = Vec::new();
        connect::write_schema(&mut out, schema);
        let text: Arc<[u8]> = out.into();
        *last = Some((schema.clone(), text.clone()));
        text
    }

    /// A transform's output: its schema, followed from the input's
    /// ([`follow`]), and, `write`, its envelope (else its bytes as they
    /// are, for a sink).
    pub fn follow(
        &self,
        input: Option<&Arc<Schema>>,
        payload: Option<&[u8]>,
        write: bool,
    ) -> Result<WithSchema, ConnectError> {
        let v = parse_payload(payload, "the transformed payload")?;
        let schema = followed(input, v.as_ref(), self.settings)?;
        if !write {
            return Ok((schema, payload.map(<[u8]>::to_vec)));
        }
        let bytes = self.write(schema.as_ref(), v.as_ref())?;
        Ok((schema, bytes))
    }

    /// A payload with a schema already known (a source's, or one no
    /// transform changed): its envelope.
    pub fn write_bytes(
        &self,
        schema: Option<&Arc<Schema>>,
        payload: Option<&[u8]>,
    ) -> Result<Option<Vec<u8>>, ConnectError> {
        let v = parse_payload(payload, "the payload")?;
        self.write(schema, v.as_ref())
    }
}

/// A payload from one form to the other under its schema; a mismatch
/// is a record's data error.
pub(crate) fn convert_payload(
    schema: &Schema,
    payload: Option<&Json>,
    from: Form,
    to: Form,
    settings: Settings,
    out: &mut Vec<u8>,
) -> Result<(), ConnectError> {
    payload::convert(
        schema,
        payload,
        from,
        to,
        settings,
        out,
        &mut Path::new("payload"),
    )
    .map_err(|e| {
        data(
            class::SCHEMA_MISMATCH,
            format!("the payload does not fit its schema: {e}"),
        )
    })
}

/// A payload's JSON (`None` for Kafka's null); `what` names it when it
/// is not JSON.
pub(crate) fn parse_payload(
    payload: Option<&[u8]>,
    what: &str,
) -> Result<Option<Json>, ConnectError> {
    payload
        .map(|b| {
            json::parse(b)
                .map_err(|e| data(class::MALFORMED_JSON, format!("{what} is not JSON: {e}")))
        })
        .transpose()
}

/// The schema of a transform's output `v`, followed from its input's
/// ([`follow`]); a null keeps the input's schema if that takes a null.
pub(crate) fn followed(
    input: Option<&Arc<Schema>>,
    v: Option<&Json>,
    settings: Settings,
) -> Result<Option<Arc<Schema>>, ConnectError> {
    Ok(match (input, v) {
        (None, _) => None,
        (Some(s), None) => (s.optional || s.default.is_some()).then(|| s.clone()),
        (Some(s), Some(v)) => Some(follow::follow(s, v, settings).map_err(|e| {
            data(
                class::SCHEMA_INFERENCE,
                format!("the transformed payload has no schema: {e}"),
            )
        })?),
    })
}

/// The subject a registry converter writes `schema` under for `topic`, by
/// Confluent's subject name strategies; the record strategies name a
/// struct by its name (or `unnamed`, if the format has a name for that).
pub(crate) fn subject_name(
    strategy: crate::config::SubjectNameStrategy,
    is_key: bool,
    topic: &str,
    schema: &Schema,
    unnamed: Option<&str>,
) -> Result<String, ConnectError> {
    use crate::config::SubjectNameStrategy;
    use sluice_sdk::schema::SchemaKind;
    let suffix = if is_key { "key" } else { "value" };
    let record_name = || {
        match (&schema.kind, schema.name.as_deref().or(unnamed)) {
        (SchemaKind::Struct(_), Some(name)) => Ok(name.to_string()),
        (SchemaKind::Struct(_), None) => Err(ConnectError::data(format!(
            "the {suffix} subject name strategy names a record by its name, and this {suffix}'s struct has none (a source or transform must name it)"
        ))
        .with_class("SubjectName")),
        (kind, _) => Err(ConnectError::data(format!(
            "the {suffix} subject name strategy needs a record, and this {suffix}'s schema is {}",
            kind.type_name()
        ))
        .with_class("SubjectName")),
    }
    };
    Ok(match strategy {
        SubjectNameStrategy::TopicName => format!("{topic}-{suffix}"),
        SubjectNameStrategy::RecordName => record_name()?,
        SubjectNameStrategy::TopicRecordName => format!("{topic}-{}", record_name()?),
    })
}

/// A converter with schemas: `JsonConverter`'s envelopes or one of
/// Confluent's registry converters.
pub enum SchemaConverter {
    Json(EnvelopeConverter),
    Avro(avro_converter::AvroConverter),
    JsonSchema(json_schema_converter::JsonSchemaConverter),
    Protobuf(protobuf_converter::ProtobufConverter),
}

impl SchemaConverter {
    /// The class its failures name.
    pub fn class_name(&self) -> &'static str {
        match self {
            SchemaConverter::Json(_) => CONVERTER_CLASS,
            SchemaConverter::Avro(_) => avro_converter::AVRO_CONVERTER_CLASS,
            SchemaConverter::JsonSchema(_) => json_schema_converter::JSON_SCHEMA_CONVERTER_CLASS,
            SchemaConverter::Protobuf(_) => protobuf_converter::PROTOBUF_CONVERTER_CLASS,
        }
    }

    /// A consumed key or value: its schema and its payload in a sink's form.
    pub async fn read(&self, bytes: Option<&[u8]>) -> Result<WithSchema, ConnectError> {
        match self {
            SchemaConverter::Json(c) => c.read(bytes),
            SchemaConverter::Avro(c) => c.read(bytes).await,
            SchemaConverter::JsonSchema(c) => c.read(bytes).await,
            SchemaConverter::Protobuf(c) => c.read(bytes).await,
        }
    }

    /// A transform's output: its schema followed from the input's and,
    /// `write`, its bytes for `topic`.
    pub async fn follow(
        &self,
        topic: &str,
        input: Option<&Arc<Schema>>,
        payload: Option<&[u8]>,
        write: bool,
    ) -> Result<WithSchema, ConnectError> {
        if let SchemaConverter::Json(c) = self {
            return c.follow(input, payload, write);
        }
        let v = parse_payload(payload, "the transformed payload")?;
        let schema = followed(input, v.as_ref(), Settings::default())?;
        if !write {
            return Ok((schema, payload.map(<[u8]>::to_vec)));
        }
        let bytes = self.write(topic, schema.as_ref(), v.as_ref()).await?;
        Ok((schema, bytes))
    }

    /// A payload (in a sink's form) with its schema, by a registry
    /// converter.
    async fn write(
        &self,
        topic: &str,
        schema: Option<&Arc<Schema>>,
        payload: Option<&Json>,
    ) -> Result<Option<Vec<u8>>, ConnectError> {
        match self {
            SchemaConverter::Json(c) => c.write(schema, payload),
            SchemaConverter::Avro(c) => c.write(topic, schema, payload).await,
            SchemaConverter::JsonSchema(c) => c.write(topic, schema, payload).await,
            SchemaConverter::Protobuf(c) => c.write(topic, schema, payload).await,
        }
    }

    /// A payload with its schema, as bytes for `topic`.
    pub async fn write_bytes(
        &self,
        topic: &str,
        schema: Option<&Arc<Schema>>,
        payload: Option<&[u8]>,
    ) -> Result<Option<Vec<u8>>, ConnectError> {
        if let SchemaConverter::Json(c) = self {
            return c.write_bytes(schema, payload);
        }
        let v = parse_payload(payload, "the payload")?;
        self.write(topic, schema, v.as_ref()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DecimalFormat;

    fn converter() -> EnvelopeConverter {
        EnvelopeConverter::new(JsonSchemas {
            decimal_format: DecimalFormat::Base64,
            replace_null_with_default: true,
            cache_size: 2,
        })
    }

    #[test]
    fn an_envelope_reads_to_its_schema_and_payload_and_writes_back_the_same() {
        let c = converter();
        let text = br#"{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"},{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"},"field":"amount"}],"optional":false,"name":"o"},"payload":{"id":1,"amount":"MDk="}}"#;
        let (schema, payload) = c.read(Some(text)).unwrap();
        assert_eq!(
            payload.as_deref(),
            Some(&br#"{"id":1,"amount":123.45}"#[..])
        );
        let again = c.write_bytes(schema.as_ref(), payload.as_deref()).unwrap();
        assert_eq!(again.as_deref(), Some(&text[..]));
        // The same schema text is parsed once.
        let (second, _) = c.read(Some(text)).unwrap();
        assert!(Arc::ptr_eq(
            schema.as_ref().unwrap(),
            second.as_ref().unwrap()
        ));
    }

    #[test]
    fn nulls_tombstones_and_schemaless_envelopes() {
        let c = converter();
        assert_eq!(c.read(None).unwrap(), (None, None));
        assert_eq!(
            c.read(Some(br#"{"schema":null,"payload":null}"#)).unwrap(),
            (None, None)
        );
        let (s, p) = c
            .read(Some(br#"{"payload":{"a":1.50},"schema":null}"#))
            .unwrap();
        assert_eq!((s, p.as_deref()), (None, Some(&br#"{"a":1.5}"#[..])));
        let (s, p) = c
            .read(Some(
                br#"{"schema":{"type":"string","optional":true},"payload":null}"#,
            ))
            .unwrap();
        assert_eq!(p, None);
        assert_eq!(
            c.write(s.as_ref(), None).unwrap().as_deref(),
            Some(&br#"{"schema":{"type":"string","optional":true},"payload":null}"#[..])
        );
        assert_eq!(c.write(None, None).unwrap(), None);
        assert_eq!(
            c.write_bytes(None, Some(b"[1, 2.0]")).unwrap().as_deref(),
            Some(&br#"{"schema":null,"payload":[1,2.0]}"#[..])
        );
    }

    #[test]
    fn what_is_not_an_envelope_says_why_with_its_class() {
        let c = converter();
        for (bytes, class, says) in [
            (&b"{\"a\""[..], class::MALFORMED_JSON, "not JSON"),
            (
                b"{\"payload\":1}",
                class::NOT_AN_ENVELOPE,
                "found an object of `payload`",
            ),
            (b"[1]", class::NOT_AN_ENVELOPE, "found an array"),
            (
                b"{\"schema\":null,\"payload\":1,\"x\":2}",
                class::NOT_AN_ENVELOPE,
                "`schema`, `payload`, `x`",
            ),
            (
                b"{\"schema\":{\"type\":\"int\"},\"payload\":1}",
                class::INVALID_SCHEMA,
                "schema.type `int`",
            ),
            (
                b"{\"schema\":{\"type\":\"int8\"},\"payload\":1000}",
                class::SCHEMA_MISMATCH,
                "payload: 1000 is out of range",
            ),
        ] {
            let e = c.read(Some(bytes)).unwrap_err();
            assert_eq!(e.class.as_deref(), Some(class), "{e:?}");
            assert_eq!(e.kind, sluice_sdk::ErrorKind::Data);
            assert!(e.message.contains(says), "{}", e.message);
        }
    }

    /// Found by fuzzing: base64 read any number of bytes as a `Decimal`,
    /// which then could not be written (past `decimal::MAX_DIGITS`).
    #[test]
    fn a_decimal_of_more_digits_than_any_database_holds_is_refused_when_read() {
        let c = converter();
        let mut one_after_zeros = vec![0; 5000];
        one_after_zeros.push(1);
        for (bytes, fits) in [
            (vec![0x7f; 1700], true),
            (vec![0x7f; 1710], false),
            (vec![0x7f; 100_000], false),
            // Java takes redundant sign bytes: this is 1.
            (one_after_zeros, true),
        ] {
            let unscaled = base64::Engine::encode(&payload::BASE64, bytes);
            let text = format!(
                r#"{{"schema":{{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{{"scale":"2"}}}},"payload":"{unscaled}"}}"#
            );
            let read = c.read(Some(text.as_bytes()));
            if fits {
                let (schema, payload) = read.unwrap();
                c.write_bytes(schema.as_ref(), payload.as_deref()).unwrap();
            } else {
                let e = read.unwrap_err();
                assert_eq!(e.class.as_deref(), Some(class::SCHEMA_MISMATCH));
                assert!(e.message.contains("more than 4096 digits"), "{}", e.message);
            }
        }
    }

    #[test]
    fn a_transformed_payload_is_written_with_its_followed_schema() {
        let c = converter();
        let input = Arc::new(Schema::structure([("id", Schema::int64())]));
        let (schema, bytes) = c
            .follow(Some(&input), Some(br#"{"id":1,"note":"x"}"#), true)
            .unwrap();
        assert_eq!(
            bytes.as_deref(),
            Some(&br#"{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"},{"type":"string","optional":true,"field":"note"}],"optional":false},"payload":{"id":1,"note":"x"}}"#[..])
        );
        assert_eq!(
            schema.unwrap().field("note"),
            Some(&Schema::string().optional())
        );
        // A tombstone from a transform: no schema takes it, so Kafka's null.
        assert_eq!(c.follow(Some(&input), None, true).unwrap(), (None, None));
    }
}
