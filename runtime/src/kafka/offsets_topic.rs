//! The offsets topic (`offset.storage.topic`): source offsets keyed by
//! `[connector, partition]`, read whole and written outside transactions.

use sluice_sdk::SourceOffsets;

use super::KafkaClients;
use crate::config::OffsetsTopic;
use crate::offsets::OffsetChange;

impl OffsetsTopic {
    /// The records that store `changes` for `connector`.
    pub fn records(&self, connector: &str, changes: &[OffsetChange]) -> Vec<sluice_sdk::Record> {
        changes
            .iter()
            .map(|(partition, offset)| {
                let partition: serde_json::Value = serde_json::from_str(partition)
                    .unwrap_or_else(|_| serde_json::Value::String(partition.clone()));
                let key = serde_json::to_vec(&serde_json::json!([connector, partition]))
                    .expect("JSON serialises");
                sluice_sdk::Record {
                    topic: self.name.clone(),
                    partition: -1,
                    offset: -1,
                    timestamp: None,
                    key: Some(key),
                    value: offset
                        .as_ref()
                        .map(|o| serde_json::to_vec(o).expect("JSON serialises")),
                    headers: Vec::new(),
                    ..Default::default()
                }
            })
            .collect()
    }

    /// Reads the whole topic (committed records only) and returns the
    /// latest offset of each of `connector`'s source partitions.
    pub async fn read(
        &self,
        clients: &KafkaClients,
        connector: &str,
    ) -> anyhow::Result<SourceOffsets> {
        let (topic, clients, connector) = (self.clone(), clients.clone(), connector.to_string());
        tokio::task::spawn_blocking(move || topic.read_blocking(&clients, &connector))
            .await
            .map_err(|e| anyhow::anyhow!("the offsets topic reader failed: {e}"))?
    }

    fn read_blocking(
        &self,
        clients: &KafkaClients,
        connector: &str,
    ) -> anyhow::Result<SourceOffsets> {
        use rdkafka::consumer::Consumer;
        use rdkafka::error::KafkaError;
        use rdkafka::{Message, Offset, TopicPartitionList};
        let consumer = clients.log_reader()?;
        let timeout = std::time::Duration::from_secs(30);
        let metadata = consumer.fetch_metadata(Some(&self.name), timeout)?;
        let mut tpl = TopicPartitionList::new();
        let mut unread = std::collections::BTreeSet::new();
        for t in metadata.topics().iter().filter(|t| t.name() == self.name) {
            for p in t.partitions() {
                tpl.add_partition_offset(&self.name, p.id(), Offset::Beginning)?;
                unread.insert(p.id());
            }
        }
        let mut offsets = SourceOffsets::new();
        if unread.is_empty() {
            return Ok(offsets);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        self.wait_for_open_transactions(clients, &consumer, &unread, deadline)?;
        consumer.assign(&tpl)?;
        while !unread.is_empty() {
            if std::time::Instant::now() > deadline {
                anyhow::bail!(
                    "reading the offsets topic `{}` did not reach its end within 2 minutes (partitions {unread:?} unread; an open transaction of another producer holds them back until it ends)",
                    self.name
                );
            }
            match consumer.poll(std::time::Duration::from_millis(200)) {
                None => {}
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    unread.remove(&p);
                }
                Some(Err(e)) => {
                    anyhow::bail!("reading the offsets topic `{}`: {e}", self.name)
                }
                Some(Ok(m)) => {
                    let Some(key) = m.key() else { continue };
                    let Ok(serde_json::Value::Array(parts)) = serde_json::from_slice(key) else {
                        tracing::warn!(topic = %self.name, offset = m.offset(), "skipping an offsets record whose key is not [connector, partition]");
                        continue;
                    };
                    if parts.len() != 2 || parts[0].as_str() != Some(connector) {
                        continue;
                    }
                    let partition = sluice_sdk::source_partition_key(&parts[1]);
                    match m.payload().map(serde_json::from_slice::<serde_json::Value>) {
                        None | Some(Ok(serde_json::Value::Null)) => {
                            offsets.remove(&partition);
                        }
                        Some(Ok(offset)) => {
                            offsets.insert(partition, offset);
                        }
                        Some(Err(e)) => anyhow::bail!(
                            "the offsets topic `{}` holds a value that is not JSON at partition {} offset {}: {e}",
                            self.name,
                            m.partition(),
                            m.offset()
                        ),
                    }
                }
            }
        }
        Ok(offsets)
    }

    /// Waits until every transaction open in `partitions` when the read
    /// began has ended. A read_committed reader stops at the first record
    /// of an open transaction (the last stable offset), so without the wait
    /// offsets committed after another producer's transaction began (another
    /// task's, or a dead one's until its `transaction.timeout.ms`) would be
    /// missed, and the records they cover written again.
    fn wait_for_open_transactions<C: rdkafka::consumer::ConsumerContext>(
        &self,
        clients: &KafkaClients,
        committed: &rdkafka::consumer::BaseConsumer<C>,
        partitions: &std::collections::BTreeSet<i32>,
        deadline: std::time::Instant,
    ) -> anyhow::Result<()> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let timeout = std::time::Duration::from_secs(30);
        // The end of the log, open transactions included: a read_committed
        // client's ListOffsets answers the last stable offset instead.
        let uncommitted: BaseConsumer = clients
            .group_consumer_config(
                "sluice-log-reader",
                &[("isolation.level", "read_uncommitted")],
            )
            .create()?;
        let mut ends = std::collections::BTreeMap::new();
        for &p in partitions {
            ends.insert(p, uncommitted.fetch_watermarks(&self.name, p, timeout)?.1);
        }
        let started = std::time::Instant::now();
        let mut warned = false;
        loop {
            let mut held = Vec::new();
            for (&p, &end) in &ends {
                let stable = committed.fetch_watermarks(&self.name, p, timeout)?.1;
                if stable < end {
                    held.push((p, stable, end));
                }
            }
            if held.is_empty() {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                anyhow::bail!(
                    "reading the offsets topic `{}`: transactions open in it did not end within 2 minutes \
                     (partition, last stable offset, end: {held:?}); a dead producer's transaction ends at its transaction.timeout.ms",
                    self.name
                );
            }
            if !warned && started.elapsed() > std::time::Duration::from_secs(5) {
                warned = true;
                tracing::warn!(
                    topic = %self.name,
                    held = ?held,
                    "waiting for transactions open in the offsets topic to end before reading it (partition, last stable offset, end)"
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Writes `changes` outside any transaction (the offsets API, for a
    /// stopped connector), and waits until Kafka has them.
    pub async fn write(
        &self,
        clients: &KafkaClients,
        connector: &str,
        changes: &[OffsetChange],
    ) -> anyhow::Result<()> {
        let producer =
            clients.producer(&format!("sluice-{connector}-offsets"), &Default::default())?;
        let records = self.records(connector, changes);
        for result in super::produce_each(&producer, &records).await {
            result.map_err(|e| anyhow::anyhow!("{}", e.full_message()))?;
        }
        Ok(())
    }
}
