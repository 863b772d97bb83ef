//! The connector contract, close to Kafka Connect's: a connector validates
//! its config and splits it into task configs; its tasks do the I/O.
//!
//! Built-in connectors implement these traits directly; native plugins
//! implement them behind the C ABI.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

use crate::config::{ConfigError, ConfigMap};
use crate::error::ConnectError;
use crate::record::{Header, Record};
use crate::schema::Schema;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectorType {
    Source,
    Sink,
    /// Kafka to Kafka, built into the runtime (consume, transform, produce).
    Stream,
}

impl ConnectorType {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectorType::Source => "source",
            ConnectorType::Sink => "sink",
            ConnectorType::Stream => "stream",
        }
    }
}

/// What a plugin is called and what it is.
#[derive(Debug, Clone)]
pub struct PluginInfo {
    /// Sluice's short name, e.g. `datagen`.
    pub class: &'static str,
    /// Other names accepted for `connector.class`, e.g. Kafka Connect's.
    pub aliases: &'static [&'static str],
    pub kind: ConnectorType,
    pub version: &'static str,
    pub description: &'static str,
}

/// A source partition (e.g. `{"filename": "in.txt"}`) serialised as canonical
/// JSON, mapped to the last committed offset for it (e.g. `{"position": 42}`).
pub type SourceOffsets = HashMap<String, serde_json::Value>;

/// A record produced by a source task, with where it came from so its
/// offset can be committed once Kafka has it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SourceRecord {
    /// Identifies the stream in the source system, as a JSON object.
    pub source_partition: serde_json::Value,
    /// The position in that stream after this record, as a JSON object.
    pub source_offset: serde_json::Value,
    pub topic: String,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<Header>,
    pub timestamp: Option<i64>,
    /// The key's schema, written with the key when the connector's
    /// `key.converter.schemas.enable` is true (the task is told:
    /// [`TaskContext::key_schemas`]); the key is then its payload as JSON
    /// (see [`Record::value_schema`] for the form). `None`: written with
    /// `"schema": null`.
    pub key_schema: Option<Arc<Schema>>,
    /// The value's schema, as [`SourceRecord::key_schema`] for values.
    pub value_schema: Option<Arc<Schema>>,
}

impl SourceRecord {
    /// The record as the transforms see it, before it has a partition.
    pub fn to_record(&self) -> Record {
        Record {
            topic: self.topic.clone(),
            partition: -1,
            offset: -1,
            timestamp: self.timestamp,
            key: self.key.clone(),
            value: self.value.clone(),
            headers: self.headers.clone(),
            key_schema: self.key_schema.clone(),
            value_schema: self.value_schema.clone(),
        }
    }
}

/// Canonical key for a source partition: compact JSON with sorted keys.
pub fn source_partition_key(partition: &serde_json::Value) -> String {
    fn canonical(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => {
                let mut entries: Vec<_> = m.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                serde_json::Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), canonical(v)))
                        .collect(),
                )
            }
            other => other.clone(),
        }
    }
    canonical(partition).to_string()
}

/// Everything a task is told when it starts.
#[derive(Debug, Clone, Default)]
pub struct TaskContext {
    pub connector: String,
    pub task_id: u32,
    /// Sources: whether keys are written with their schema
    /// (`key.converter.schemas.enable=true`). A source that knows its
    /// keys' schema then gives it ([`SourceRecord::key_schema`]) and gives
    /// each key as its payload in JSON; otherwise it gives its bytes as
    /// always.
    pub key_schemas: bool,
    /// Sources: the same for values (`value.converter.schemas.enable`).
    pub value_schemas: bool,
}

pub trait SourceConnector: Send + Sync {
    fn info(&self) -> PluginInfo;

    /// One JSON object per key (`{name, type, required, default_value,
    /// documentation}`), for `GET /connector-plugins/{class}/config`.
    fn config_definition(&self) -> serde_json::Value {
        serde_json::Value::Array(Vec::new())
    }

    /// Checks the connector's own keys (the runtime's common keys are removed
    /// first). Unknown keys are errors.
    fn validate(&self, config: &ConfigMap) -> Result<(), ConfigError>;

    /// Topics this connector writes to, if the config names them, so the
    /// runtime can create them before the first record.
    fn topics(&self, config: &ConfigMap) -> Vec<String>;

    /// Splits the work into at most `max_tasks` task configs.
    fn task_configs(&self, config: &ConfigMap, max_tasks: u32) -> Vec<ConfigMap> {
        let _ = max_tasks;
        vec![config.clone()]
    }

    fn create_task(
        &self,
        config: &ConfigMap,
        context: TaskContext,
        offsets: SourceOffsets,
    ) -> Result<Box<dyn SourceTask>, ConnectError>;
}

#[async_trait]
pub trait SourceTask: Send {
    /// Returns the next batch; an empty batch means nothing is available now
    /// (the task should wait a little inside `poll` rather than spin).
    /// `Ok(None)` means the source is exhausted and the task is done.
    async fn poll(&mut self) -> Result<Option<Vec<SourceRecord>>, ConnectError>;

    /// Called after the offsets of everything polled so far are committed.
    async fn commit(&mut self) -> Result<(), ConnectError> {
        Ok(())
    }

    async fn stop(&mut self) {}

    /// Numbers the task measures about its source (e.g. how far a
    /// replication slot lags), read after each poll and exported as
    /// `sluice_source_<name>{connector,task}` gauges.
    fn gauges(&self) -> Vec<SourceGauge> {
        Vec::new()
    }
}

/// One gauge a source task publishes: see [`SourceTask::gauges`].
#[derive(Debug, Clone, PartialEq)]
pub struct SourceGauge {
    /// The metric's name after `sluice_source_`, e.g.
    /// `replication_slot_lag_bytes`: lower case, digits and `_`.
    pub name: &'static str,
    pub help: &'static str,
    pub value: i64,
}

#[async_trait]
pub trait SinkConnector: Send + Sync {
    fn info(&self) -> PluginInfo;

    /// One JSON object per key (`{name, type, required, default_value,
    /// documentation}`), for `GET /connector-plugins/{class}/config`.
    fn config_definition(&self) -> serde_json::Value {
        serde_json::Value::Array(Vec::new())
    }

    fn validate(&self, config: &ConfigMap) -> Result<(), ConfigError>;

    fn task_configs(&self, config: &ConfigMap, max_tasks: u32) -> Vec<ConfigMap> {
        (0..max_tasks.max(1)).map(|_| config.clone()).collect()
    }

    fn create_task(
        &self,
        config: &ConfigMap,
        context: TaskContext,
    ) -> Result<Box<dyn SinkTask>, ConnectError>;

    /// Whether tasks made from `config` store consumed offsets with the data
    /// (see [`SinkTask::begin`]), so `delivery.guarantee=exactly-once` can be
    /// accepted.
    fn supports_exactly_once(&self, config: &ConfigMap) -> bool {
        let _ = config;
        false
    }

    /// Kafka Connect's `SinkConnector.alterOffsets`: called while the
    /// connector is stopped, before the group's offsets are changed, so a
    /// sink that stores offsets itself changes them too. `None` as an offset
    /// means "forget it" (a reset). `Ok(false)` means the sink keeps no
    /// offsets of its own.
    async fn alter_offsets(
        &self,
        config: &ConfigMap,
        connector: &str,
        offsets: &[(String, i32, Option<i64>)],
    ) -> Result<bool, ConnectError> {
        let _ = (config, connector, offsets);
        Ok(false)
    }
}

/// The next offset to consume from a topic partition, as stored with the data.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionOffset {
    pub topic: String,
    pub partition: i32,
    /// The offset of the next record to read (last written + 1).
    pub offset: i64,
}

/// One partition's part of an exactly-once commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitOffset {
    pub topic: String,
    pub partition: i32,
    /// The offset of the batch's first record from this partition. If the
    /// stored offset is already past it, another task (the partition's new
    /// owner) has written part of this batch: the commit must be refused
    /// with [`ConnectError::fenced`].
    pub first: i64,
    /// The offset of the next record to read (last written + 1): what is
    /// stored.
    pub next: i64,
}

#[async_trait]
pub trait SinkTask: Send {
    /// Opens connections; a failure here is retried by the runtime if
    /// retriable.
    async fn start(&mut self) -> Result<(), ConnectError> {
        Ok(())
    }

    /// Writes a batch. When this returns `Ok`, the records must be durable
    /// once [`SinkTask::flush`] returns `Ok`; only then are their offsets
    /// committed.
    async fn put(&mut self, records: Vec<Record>) -> Result<(), ConnectError>;

    /// Makes everything put so far durable.
    async fn flush(&mut self) -> Result<(), ConnectError> {
        Ok(())
    }

    async fn stop(&mut self) {}

    // Exactly-once: offsets stored with the data. A task that returns `true`
    // from `supports_exactly_once` implements the four methods below; the
    // runtime then calls `begin`, one or more `put`s (each atomic: a `put`
    // that fails leaves nothing of itself behind, so the batch can be split
    // around a bad record), and `commit` with the batch's offsets, or
    // `rollback`.

    fn supports_exactly_once(&self) -> bool {
        false
    }

    /// Starts the transaction that the next `put`s and `commit` belong to.
    async fn begin(&mut self) -> Result<(), ConnectError> {
        Err(ConnectError::fatal(
            "this sink does not support exactly-once delivery",
        ))
    }

    /// Stores each partition's `next` offset and commits everything put
    /// since `begin`, atomically; or, if a stored offset is past the
    /// partition's `first` (another task wrote there meanwhile) or `next`
    /// would move it back, commits nothing and returns
    /// [`ConnectError::fenced`]. The check and the
    /// store are one compare-and-set in the same transaction, so of two
    /// tasks that both believe they own a partition only one commits.
    async fn commit(&mut self, offsets: &[CommitOffset]) -> Result<(), ConnectError> {
        let _ = offsets;
        Err(ConnectError::fatal(
            "this sink does not support exactly-once delivery",
        ))
    }

    /// Discards everything put since `begin`.
    async fn rollback(&mut self) {}

    /// The offsets stored for `partitions` (those with none are left out),
    /// read when they are assigned, so consumption resumes exactly after
    /// what the sink has.
    async fn stored_offsets(
        &mut self,
        partitions: &[(String, i32)],
    ) -> Result<Vec<PartitionOffset>, ConnectError> {
        let _ = partitions;
        Ok(Vec::new())
    }
}
