//! Types shared by the Sluice runtime and its connector plugins.
//!
//! * [`record`]: the record that flows through every task, the same shape the
//!   WASM transforms see (`sdk/wit/transform.wit`).
//! * [`error`]: the typed error whose [`ErrorKind`] tells the runtime what to
//!   do: dead-letter or tolerate (`Data`), back off and retry (`Retriable`), or
//!   fail the task (`Fatal`).
//! * [`config`]: Kafka Connect configs are maps of strings; plugins
//!   deserialise their part into their own typed struct with
//!   `#[serde(deny_unknown_fields)]` through [`config::from_string_map`].
//! * [`connector`]: the source and sink traits every connector implements.
//! * [`schema`]: Kafka Connect's schemas, which records carry when a
//!   converter has `schemas.enable=true`.

pub mod codec;
pub mod config;
pub mod connector;
pub mod error;
#[cfg(feature = "guest")]
pub mod guest;
#[cfg(feature = "native")]
pub mod native;
pub mod record;
pub mod schema;

pub use config::{ConfigError, ConfigMap};
pub use connector::{
    CommitOffset, ConnectorType, PartitionOffset, PluginInfo, SinkConnector, SinkTask,
    SourceConnector, SourceGauge, SourceOffsets, SourceRecord, SourceTask, TaskContext,
    source_partition_key,
};
pub use error::{ConnectError, ErrorKind, FENCED_CLASS, panic_message};
pub use record::{Header, Record};
pub use schema::{Field, Logical, Schema, SchemaKind};
