//! Admin and group operations: topics created when missing, a group's
//! committed offsets read and set.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::Consumer;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::KafkaClients;

impl KafkaClients {
    /// A consumer group's committed offset for every partition of `topics`
    /// (None: nothing committed). Blocking.
    pub fn group_offsets(
        &self,
        group: &str,
        topics: &[String],
    ) -> anyhow::Result<Vec<(String, i32, Option<i64>)>> {
        use rdkafka::consumer::Consumer;
        let consumer = self.tool_consumer(group)?;
        let mut tpl = TopicPartitionList::new();
        for topic in topics {
            let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
            for t in metadata.topics().iter().filter(|t| t.name() == topic) {
                for p in t.partitions() {
                    tpl.add_partition(topic, p.id());
                }
            }
        }
        let committed = consumer.committed_offsets(tpl, Duration::from_secs(10))?;
        Ok(committed
            .elements()
            .iter()
            .map(|e| {
                let offset = match e.offset() {
                    Offset::Offset(o) => Some(o),
                    _ => None,
                };
                (e.topic().to_string(), e.partition(), offset)
            })
            .collect())
    }

    /// Commits offsets for a stopped connector's group. It joins the group
    /// (with the sinks' protocol), waits until it owns every partition (no
    /// task competes while the connector is stopped), commits as a member,
    /// and leaves: brokers accept that whatever state the group was left
    /// in. `None` means the beginning of the partition. Blocking.
    pub fn set_group_offsets(
        &self,
        group: &str,
        offsets: &[(String, i32, Option<i64>)],
    ) -> anyhow::Result<()> {
        use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
        if offsets.is_empty() {
            return Ok(());
        }
        let consumer: BaseConsumer = self
            .group_consumer_config(
                group,
                &[
                    ("partition.assignment.strategy", "cooperative-sticky"),
                    ("auto.offset.reset", "earliest"),
                ],
            )
            .create()?;
        let mut tpl = TopicPartitionList::new();
        for (topic, partition, offset) in offsets {
            let at = match offset {
                Some(o) => *o,
                None => {
                    consumer
                        .fetch_watermarks(topic, *partition, Duration::from_secs(10))?
                        .0
                }
            };
            tpl.add_partition_offset(topic, *partition, Offset::Offset(at))?;
        }
        let mut topics: Vec<&str> = offsets.iter().map(|(t, _, _)| t.as_str()).collect();
        topics.sort_unstable();
        topics.dedup();
        consumer.subscribe(&topics)?;
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        loop {
            // Serve the group protocol; records read here are not used or
            // committed.
            let _ = consumer.poll(Duration::from_millis(200));
            let owned = consumer.assignment()?;
            let all = offsets.iter().all(|(t, p, _)| {
                owned
                    .elements()
                    .iter()
                    .any(|e| e.topic() == t && e.partition() == *p)
            });
            if all {
                break;
            }
            if std::time::Instant::now() > deadline {
                anyhow::bail!(
                    "could not take over the partitions of group `{group}`: is a task of the connector still running?"
                );
            }
        }
        consumer
            .commit(&tpl, CommitMode::Sync)
            .map_err(|e| anyhow::anyhow!("the consumer group did not accept the offsets: {e}"))?;
        consumer.unsubscribe();
        Ok(())
    }

    /// Creates a worker's internal topic if it is missing; `compact` ones
    /// keep the latest record of every key forever (`cleanup.policy=compact`),
    /// as Kafka Connect's config and status topics do. Returns its partition
    /// count.
    pub async fn ensure_internal_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication: i32,
        compact: bool,
    ) -> anyhow::Result<i32> {
        let count = |clients: &Self| -> anyhow::Result<Option<i32>> {
            let consumer = clients.tool_consumer("sluice-metadata")?;
            let metadata = tokio::task::block_in_place(|| {
                consumer.fetch_metadata(Some(topic), Duration::from_secs(30))
            })?;
            Ok(metadata
                .topics()
                .iter()
                .find(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
                .map(|t| t.partitions().len() as i32))
        };
        if let Some(n) = count(self)? {
            return Ok(n);
        }
        if let Some(embedded) = &self.embedded {
            embedded.create_topic(topic, partitions).await?;
            return Ok(partitions);
        }
        let mut c = self.base();
        for (k, v) in &self.admin_overrides {
            c.set(k, v);
        }
        let admin: AdminClient<DefaultClientContext> = c.create()?;
        let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
        if compact {
            new = new.set("cleanup.policy", "compact");
        }
        let results = admin
            .create_topics(
                [&new],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
            )
            .await?;
        for r in results {
            match r {
                Ok(topic) => tracing::info!(topic, partitions, compact, "created internal topic"),
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => anyhow::bail!("creating topic `{topic}`: {code}"),
            }
        }
        Ok(count(self)?.unwrap_or(partitions))
    }

    /// Creates each topic that does not exist yet.
    pub async fn ensure_topics(
        &self,
        topics: &[String],
        partitions: i32,
        replication: i32,
    ) -> anyhow::Result<()> {
        if topics.is_empty() {
            return Ok(());
        }
        if let Some(embedded) = &self.embedded {
            for t in topics {
                embedded.create_topic(t, partitions).await?;
            }
            return Ok(());
        }
        let mut c = self.base();
        for (k, v) in &self.admin_overrides {
            c.set(k, v);
        }
        let admin: AdminClient<DefaultClientContext> = c.create()?;
        // Only what is missing is created: that needs no CREATE permission
        // for existing topics (and no CreateTopics support at all).
        let existing: Vec<String> = {
            let client = admin.inner();
            let metadata = tokio::task::block_in_place(|| {
                client.fetch_metadata(None, Duration::from_secs(30))
            })?;
            metadata
                .topics()
                .iter()
                .filter(|t| t.error().is_none() && !t.partitions().is_empty())
                .map(|t| t.name().to_string())
                .collect()
        };
        let missing: Vec<&String> = topics.iter().filter(|t| !existing.contains(t)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        let new: Vec<NewTopic<'_>> = missing
            .iter()
            .map(|t| NewTopic::new(t, partitions, TopicReplication::Fixed(replication)))
            .collect();
        let results = admin
            .create_topics(
                &new,
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
            )
            .await?;
        for r in results {
            match r {
                Ok(topic) => tracing::info!(topic, partitions, "created topic"),
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => anyhow::bail!("creating topic `{topic}`: {code}"),
            }
        }
        Ok(())
    }
}
