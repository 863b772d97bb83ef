//! KIP-875 offsets, as Kafka Connect's herder serves them: sources' from the offset store (or the offsets topic),
//! sinks' from their consumer group; changed only while STOPPED.

use sluice_sdk::ConnectorType;

use super::Herder;
use crate::config::{CommonConfig, ConnectorSpec};
use crate::kafka::GroupOffsetsError;
use crate::plugin::Plugin;
use crate::task;
use crate::worker::WorkerError;

impl Herder {
    /// KIP-875 offsets: sources from the offset store, sinks from their
    /// consumer group (`{kafka_topic, kafka_partition}` / `{kafka_offset}`).
    pub async fn offsets(&self, name: &str) -> Result<Option<Vec<serde_json::Value>>, WorkerError> {
        let Some((spec, kind, _)) = self.worker.spec(name).await else {
            return Ok(None);
        };
        if kind == ConnectorType::Source {
            if self.source_uses_offsets_topic(&spec)? {
                // The topic is the truth (a task may not have run since
                // the worker started).
                let read = self
                    .clients()
                    .offsets_topic()
                    .read(self.worker.clients(), name)
                    .await
                    .map_err(|e| WorkerError::Conflict(format!("{e:#}")))?;
                self.worker
                    .offset_store()
                    .replace(name, read)
                    .map_err(|e| WorkerError::Conflict(e.to_string()))?;
            }
            return Ok(Some(
                self.worker
                    .offset_store()
                    .all(name)
                    .into_iter()
                    .map(|(p, o)| serde_json::json!({"partition": p, "offset": o}))
                    .collect(),
            ));
        }
        let topics = self.sink_topics(&spec).await?;
        let (clients, group) = (self.worker.clients().clone(), task::group_id(name));
        let committed = tokio::task::spawn_blocking(move || clients.group_offsets(&group, &topics))
            .await
            .map_err(|e| WorkerError::Conflict(e.to_string()))?
            .map_err(|e| {
                WorkerError::Conflict(format!("reading the consumer group's offsets: {e:#}"))
            })?;
        Ok(Some(
            committed
                .into_iter()
                .filter_map(|(topic, partition, offset)| {
                    offset.map(|o| {
                        serde_json::json!({
                            "partition": {"kafka_topic": topic, "kafka_partition": partition},
                            "offset": {"kafka_offset": o}
                        })
                    })
                })
                .collect(),
        ))
    }

    fn common_config(&self, spec: &ConnectorSpec) -> Result<CommonConfig, WorkerError> {
        let invalid = |error| WorkerError::Invalid {
            name: spec.name.clone(),
            error,
        };
        self.worker.validator().common_config(spec).map_err(invalid)
    }

    /// A sink's topics: `topics`, or those `topics.regex` matches now.
    async fn sink_topics(&self, spec: &ConnectorSpec) -> Result<Vec<String>, WorkerError> {
        let common = self.common_config(spec)?;
        let Some(pattern) = common.topics_regex else {
            return Ok(common.topics);
        };
        let clients = self.clients().clone();
        tokio::task::spawn_blocking(move || clients.topics_matching(&pattern))
            .await
            .map_err(|e| WorkerError::Conflict(e.to_string()))?
            .map_err(|e| {
                WorkerError::Conflict(format!("listing the topics topics.regex matches: {e:#}"))
            })
    }

    fn source_uses_offsets_topic(&self, spec: &ConnectorSpec) -> Result<bool, WorkerError> {
        let guarantee = self.common_config(spec)?.delivery_guarantee;
        Ok(task::source::uses_offsets_topic(
            guarantee,
            self.worker.offset_store(),
        ))
    }

    /// Changes offsets (`PATCH`; an entry with a null offset resets its
    /// partition) or resets them all (`DELETE`: `entries` None). Only while
    /// STOPPED, as in Kafka Connect, so no task races the change.
    pub async fn alter_offsets(
        &self,
        name: &str,
        entries: Option<Vec<serde_json::Value>>,
    ) -> Result<bool, WorkerError> {
        let Some((spec, kind, _)) = self.worker.spec(name).await else {
            return Ok(false);
        };
        if self.worker.is_stopped(name).await != Some(true) {
            return Err(WorkerError::BadRequest(format!(
                "Connectors must be in the STOPPED state before their offsets can be modified: PUT /connectors/{name}/stop first"
            )));
        }
        match (kind, entries) {
            (ConnectorType::Source, None) => self.reset_source_offsets(name, &spec).await?,
            (ConnectorType::Source, Some(entries)) => {
                self.alter_source_offsets(name, &spec, entries).await?
            }
            (ConnectorType::Sink | ConnectorType::Stream, entries) => {
                self.alter_sink_offsets(name, &spec, entries).await?
            }
        }
        tracing::info!(connector = %name, "offsets changed while stopped");
        Ok(true)
    }

    /// DELETE on a source: every partition forgotten, in the offsets topic
    /// (tombstones) and the store.
    async fn reset_source_offsets(
        &self,
        name: &str,
        spec: &ConnectorSpec,
    ) -> Result<(), WorkerError> {
        let bad = WorkerError::BadRequest;
        if self.source_uses_offsets_topic(spec)? {
            // Tombstones for every partition the topic knows.
            let known = self
                .clients()
                .offsets_topic()
                .read(self.worker.clients(), name)
                .await
                .map_err(|e| bad(format!("{e:#}")))?;
            let forget: Vec<_> = known.into_keys().map(|k| (k, None)).collect();
            self.worker
                .clients()
                .offsets_topic()
                .write(self.worker.clients(), name, &forget)
                .await
                .map_err(|e| bad(format!("writing the offsets topic: {e:#}")))?;
        }
        self.worker
            .offset_store()
            .reset(name)
            .map_err(|e| bad(e.to_string()))?;
        Ok(())
    }

    /// PATCH on a source: `{partition, offset}` entries, a null offset
    /// forgetting its partition.
    async fn alter_source_offsets(
        &self,
        name: &str,
        spec: &ConnectorSpec,
        entries: Vec<serde_json::Value>,
    ) -> Result<(), WorkerError> {
        let bad = WorkerError::BadRequest;
        let changes = source_offset_changes(entries)?;
        if self.source_uses_offsets_topic(spec)? {
            self.worker
                .clients()
                .offsets_topic()
                .write(self.worker.clients(), name, &changes)
                .await
                .map_err(|e| bad(format!("writing the offsets topic: {e:#}")))?;
        }
        self.worker
            .offset_store()
            .alter(name, changes)
            .map_err(|e| bad(e.to_string()))?;
        Ok(())
    }

    /// PATCH or DELETE on a sink or stream: its consumer group's offsets,
    /// and first those an exactly-once sink stores with its data. The
    /// group's are changed through the Admin API, as Kafka Connect does: a
    /// null offset (and every offset, for DELETE) is deleted, so the
    /// partition starts where `auto.offset.reset` says.
    async fn alter_sink_offsets(
        &self,
        name: &str,
        spec: &ConnectorSpec,
        entries: Option<Vec<serde_json::Value>>,
    ) -> Result<(), WorkerError> {
        let bad = WorkerError::BadRequest;
        let topics = self.sink_topics(spec).await?;
        let (clients, group) = (self.worker.clients().clone(), task::group_id(name));
        let (wanted, in_group) = match entries {
            None => {
                let (c, g) = (clients.clone(), group.clone());
                let committed = tokio::task::spawn_blocking(move || c.group_offsets(&g, &topics))
                    .await
                    .map_err(|e| bad(e.to_string()))?
                    .map_err(|e| bad(format!("{e:#}")))?;
                // The sink forgets every partition; the group has only
                // those it committed to delete.
                let wanted = committed.iter().map(|(t, p, _)| (t.clone(), *p, None));
                let in_group = committed.iter().filter(|(_, _, o)| o.is_some());
                let in_group = in_group.map(|(t, p, _)| (t.clone(), *p, None)).collect();
                (wanted.collect(), in_group)
            }
            Some(entries) => {
                let changes = sink_offset_changes(entries, &topics)?;
                // Before anything changes (in the sink too): a partition
                // that does not exist is the request's fault.
                let (c, named) = (clients.clone(), changes_topics(&changes));
                let partitions = tokio::task::spawn_blocking(move || c.partitions(&named))
                    .await
                    .map_err(|e| bad(e.to_string()))?
                    .map_err(|e| {
                        WorkerError::Conflict(format!("reading the topics' partitions: {e:#}"))
                    })?;
                check_partitions_exist(&changes, &partitions)?;
                (changes.clone(), changes)
            }
        };
        // A sink that keeps offsets with its data (exactly-once)
        // changes them first: they decide where its tasks resume.
        let v = self
            .validator()
            .validate(spec)
            .await
            .map_err(|e| bad(e.to_string()))?;
        if let Plugin::Sink(p) = &v.plugin {
            p.alter_offsets(&v.plugin_config, name, &wanted)
                .await
                .map_err(|e| {
                    bad(format!(
                        "changing the offsets stored in the sink: {}",
                        e.full_message()
                    ))
                })?;
        }
        let g = group.clone();
        tokio::task::spawn_blocking(move || clients.change_group_offsets(&g, &in_group))
            .await
            .map_err(|e| bad(e.to_string()))?
            .map_err(|e| {
                let message = format!("changing the offsets of consumer group `{group}`: {e}");
                tracing::warn!(connector = %name, group, error = %e, "changing a sink's offsets failed");
                match e {
                    GroupOffsetsError::Partition { .. } => bad(message),
                    _ => WorkerError::Conflict(message),
                }
            })?;
        Ok(())
    }
}

/// The topics `changes` name, each once.
fn changes_topics(changes: &[(String, i32, Option<i64>)]) -> Vec<String> {
    let named: std::collections::BTreeSet<&String> = changes.iter().map(|(t, _, _)| t).collect();
    named.into_iter().cloned().collect()
}

/// A 400 naming the first partition of `changes` that `partitions` (each
/// topic's, from the cluster) does not have.
fn check_partitions_exist(
    changes: &[(String, i32, Option<i64>)],
    partitions: &std::collections::BTreeMap<String, Vec<i32>>,
) -> Result<(), WorkerError> {
    for (topic, partition, _) in changes {
        let have = partitions.get(topic).map(Vec::as_slice).unwrap_or_default();
        if have.contains(partition) {
            continue;
        }
        return Err(WorkerError::BadRequest(if have.is_empty() {
            format!("topic `{topic}` does not exist, so it has no partition {partition}")
        } else {
            format!(
                "topic `{topic}` has no partition {partition}: it has {} (0 to {})",
                have.len(),
                have.len() - 1
            )
        }));
    }
    Ok(())
}

/// A source's PATCH entries, `{partition, offset}`, as offset store changes
/// (a null offset forgets its partition). Public for the fuzz targets
/// (`fuzz/`), not an API.
#[doc(hidden)]
pub fn source_offset_changes(
    entries: Vec<serde_json::Value>,
) -> Result<Vec<(String, Option<serde_json::Value>)>, WorkerError> {
    let bad = WorkerError::BadRequest;
    let mut changes = Vec::new();
    for e in entries {
        let partition = e
            .get("partition")
            .filter(|p| p.is_object())
            .ok_or_else(|| bad(format!("each entry needs a `partition` object: {e}")))?;
        let offset = match e.get("offset") {
            None | Some(serde_json::Value::Null) => None,
            Some(o) if o.is_object() => Some(o.clone()),
            Some(o) => {
                return Err(bad(format!("`offset` must be an object or null, got {o}")));
            }
        };
        changes.push((sluice_sdk::source_partition_key(partition), offset));
    }
    Ok(changes)
}

/// A sink's PATCH entries, `{partition: {kafka_topic, kafka_partition},
/// offset: {kafka_offset} | null}`, for the connector's `topics`. Public for
/// the fuzz targets (`fuzz/`), not an API.
#[doc(hidden)]
pub fn sink_offset_changes(
    entries: Vec<serde_json::Value>,
    topics: &[String],
) -> Result<Vec<(String, i32, Option<i64>)>, WorkerError> {
    let bad = WorkerError::BadRequest;
    let mut out = Vec::new();
    for e in entries {
        let topic = e["partition"]["kafka_topic"]
            .as_str()
            .ok_or_else(|| bad(format!("each entry needs partition.kafka_topic: {e}")))?;
        let partition = e["partition"]["kafka_partition"]
            .as_i64()
            .ok_or_else(|| bad(format!("each entry needs partition.kafka_partition: {e}")))?;
        let partition = i32::try_from(partition)
            .ok()
            .filter(|p| *p >= 0)
            .ok_or_else(|| {
                bad(format!(
                    "partition.kafka_partition must be a partition number (0 to {}): {e}",
                    i32::MAX
                ))
            })?;
        if !topics.iter().any(|t| t == topic) {
            return Err(bad(format!(
                "`{topic}` is not one of the connector's topics"
            )));
        }
        let offset = match &e["offset"] {
            serde_json::Value::Null => None,
            o => Some(
                o["kafka_offset"]
                    .as_i64()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| {
                        bad(format!(
                            "offset.kafka_offset must be a non-negative number: {e}"
                        ))
                    })?,
            ),
        };
        out.push((topic.to_string(), partition, offset));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_the_topic_lacks_is_named_in_a_bad_request() {
        let partitions = [("t".to_string(), vec![0, 1])].into_iter().collect();
        let change = |topic: &str, partition| vec![(topic.to_string(), partition, Some(0))];
        assert!(check_partitions_exist(&change("t", 1), &partitions).is_ok());
        let Err(WorkerError::BadRequest(m)) = check_partitions_exist(&change("t", 2), &partitions)
        else {
            panic!("a missing partition is a bad request");
        };
        assert_eq!(m, "topic `t` has no partition 2: it has 2 (0 to 1)");
        let Err(WorkerError::BadRequest(m)) = check_partitions_exist(&change("u", 0), &partitions)
        else {
            panic!("a missing topic is a bad request");
        };
        assert_eq!(m, "topic `u` does not exist, so it has no partition 0");
    }
}
