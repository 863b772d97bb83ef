//! The record every task moves, as Kafka sees it.

use std::sync::Arc;

use crate::schema::Schema;

/// One Kafka header. Values may be null; order and duplicates are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: String,
    pub value: Option<Vec<u8>>,
}

/// A record at any point of the flow: polled from a source, consumed from
/// Kafka, or returned by a transform.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    pub topic: String,
    /// -1 when the record has not been written to Kafka yet.
    pub partition: i32,
    /// -1 when the record has not been written to Kafka yet.
    pub offset: i64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: Option<i64>,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<Header>,
    /// The key's Kafka Connect schema, with `key.converter.schemas.enable`
    /// (see [`Record::value_schema`]); `None` otherwise.
    pub key_schema: Option<Arc<Schema>>,
    /// The value's Kafka Connect schema when the connector's
    /// `value.converter` is `JsonConverter` with `schemas.enable=true`;
    /// `None` otherwise, and for a value read with `"schema": null`.
    ///
    /// With a schema, `value` is not the envelope but its payload, as
    /// JSON: every field of a struct in the schema's order (a missing one
    /// as null or its default), `bytes` as base64 text, and the logical
    /// types as numbers: a `Decimal` as an exact JSON number with `scale`
    /// digits after the point (`12.50`), a `Date` as milliseconds since
    /// the epoch at midnight UTC (days x 86400000), a `Time` as
    /// milliseconds since midnight, a `Timestamp` as milliseconds since
    /// the epoch. A null payload is a `None` value.
    ///
    /// Schemas do not cross into transforms or native plugins: the runtime
    /// keeps them and decides the schema of what a transform returns
    /// (`runtime/src/schema/`).
    pub value_schema: Option<Arc<Schema>>,
}

impl Record {
    /// The value parsed as JSON, if it is JSON.
    pub fn value_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_slice(self.value.as_deref().unwrap_or(b"null"))
    }

    /// The key parsed as JSON, if it is JSON.
    pub fn key_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_slice(self.key.as_deref().unwrap_or(b"null"))
    }

    /// The last header with this key (Kafka's `lastHeader`).
    pub fn last_header(&self, key: &str) -> Option<&Header> {
        self.headers.iter().rev().find(|h| h.key == key)
    }

    /// `topic-partition@offset`, for logs and error messages.
    pub fn coordinates(&self) -> String {
        format!("{}-{}@{}", self.topic, self.partition, self.offset)
    }
}

impl Record {
    /// Replaces the value with this JSON, serialised compactly.
    pub fn set_value_json(&mut self, value: &serde_json::Value) {
        self.value = Some(serde_json::to_vec(value).expect("a JSON value serialises"));
    }

    /// Replaces the key with this JSON, serialised compactly.
    pub fn set_key_json(&mut self, key: &serde_json::Value) {
        self.key = Some(serde_json::to_vec(key).expect("a JSON value serialises"));
    }

    /// Appends a header (duplicates are allowed, as in Kafka).
    pub fn add_header(&mut self, key: impl Into<String>, value: Option<Vec<u8>>) {
        self.headers.push(Header {
            key: key.into(),
            value,
        });
    }

    /// Removes every header with this key.
    pub fn remove_headers(&mut self, key: &str) {
        self.headers.retain(|h| h.key != key);
    }

    /// Whether any header has this key.
    pub fn has_header(&self, key: &str) -> bool {
        self.headers.iter().any(|h| h.key == key)
    }
}
