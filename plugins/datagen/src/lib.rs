//! `datagen`: a source of realistic order events, deterministic for a seed.
//!
//! Every event has `order_id`, `customer_id`, `amount`, `currency`, `status`
//! and `updated_at`; its key is the JSON of the `key.field` (by default the
//! order id). Task `t` of `n` generates sequence numbers `t, t+n, t+2n, ...`,
//! and a record's content depends only on the seed and its sequence number, so
//! a restart from a committed offset regenerates exactly the same records.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use serde_json::json;
use sluice_sdk::config::from_string_map;
use sluice_sdk::{
    ConfigError, ConfigMap, ConnectError, ConnectorType, PluginInfo, Schema, SourceConnector,
    SourceOffsets, SourceRecord, SourceTask, TaskContext, source_partition_key,
};

/// Keys of the `datagen` connector.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatagenConfig {
    /// Topic to write to (`kafka.topic` is Confluent datagen's name for it).
    #[serde(alias = "kafka.topic")]
    pub topic: String,
    /// Records per second per task; 0 means as fast as possible.
    #[serde(default = "default_rate")]
    pub rate: f64,
    /// Total records per connector; absent means forever (`iterations` is
    /// Confluent datagen's name for it).
    #[serde(default, alias = "iterations")]
    pub count: Option<u64>,
    /// Field whose value becomes the record key.
    #[serde(rename = "key.field", default = "default_key_field")]
    pub key_field: String,
    /// Fraction of records (0 to 1) whose value is deliberately not JSON.
    #[serde(rename = "poison.ratio", default)]
    pub poison_ratio: f64,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// How many distinct customers orders are spread over.
    #[serde(default = "default_customers")]
    pub customers: u64,
    /// Records per poll.
    #[serde(rename = "batch.size", default = "default_batch_size")]
    pub batch_size: usize,
    /// Set by the connector on each task config; not for users.
    #[serde(rename = "datagen.task.count", default)]
    pub task_count: Option<u64>,
}

fn default_rate() -> f64 {
    100.0
}
fn default_key_field() -> String {
    "order_id".into()
}
fn default_seed() -> u64 {
    42
}
fn default_customers() -> u64 {
    1000
}
fn default_batch_size() -> usize {
    100
}

impl DatagenConfig {
    pub fn parse(config: &ConfigMap) -> Result<Self, ConfigError> {
        let cfg: Self = from_string_map(config)?;
        if !(0.0..=1.0).contains(&cfg.poison_ratio) {
            return Err(ConfigError::new("poison.ratio", "must be between 0 and 1"));
        }
        if cfg.rate < 0.0 || !cfg.rate.is_finite() {
            return Err(ConfigError::new("rate", "must be a non-negative number"));
        }
        if cfg.customers == 0 {
            return Err(ConfigError::new("customers", "must be at least 1"));
        }
        if cfg.batch_size == 0 {
            return Err(ConfigError::new("batch.size", "must be at least 1"));
        }
        if !["order_id", "customer_id", "status"].contains(&cfg.key_field.as_str()) {
            return Err(ConfigError::new(
                "key.field",
                format!(
                    "`{}` is not a field of the order events; expected order_id, customer_id or status",
                    cfg.key_field
                ),
            ));
        }
        Ok(cfg)
    }
}

const STATUSES: [&str; 4] = ["pending", "paid", "shipped", "delivered"];
const CURRENCIES: [&str; 3] = ["EUR", "USD", "GBP"];
/// 2026-01-01T00:00:00Z; events advance one second per sequence number.
const EPOCH_MS: i64 = 1_767_225_600_000;

/// One generated event: its key and value bytes. Pure function of
/// `(seed, seq)`, which is what makes restarts reproducible.
pub fn generate(cfg: &DatagenConfig, seq: u64) -> (Option<Vec<u8>>, Vec<u8>) {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    rng.set_stream(seq);
    let order_id = seq + 1;
    let poison = cfg.poison_ratio > 0.0 && rng.random_bool(cfg.poison_ratio);
    let customer = rng.random_range(0..cfg.customers);
    let cents: u64 = rng.random_range(100..50_000);
    let status = STATUSES[rng.random_range(0..STATUSES.len())];
    let currency = CURRENCIES[rng.random_range(0..CURRENCIES.len())];
    let updated_at = chrono::DateTime::from_timestamp_millis(EPOCH_MS + seq as i64 * 1000)
        .expect("in range")
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let value = json!({
        "order_id": order_id,
        "customer_id": format!("cust-{customer:05}"),
        "amount": cents as f64 / 100.0,
        "currency": currency,
        "status": status,
        "updated_at": updated_at,
    });
    let key = serde_json::to_vec(&value[cfg.key_field.as_str()]).ok();
    if poison {
        // Truncated JSON: what a broken upstream producer typically sends.
        let mut bytes = serde_json::to_vec(&value).expect("serialises");
        bytes.truncate(bytes.len() / 2);
        return (key, bytes);
    }
    (key, serde_json::to_vec(&value).expect("serialises"))
}

/// The schema of an event (with `value.converter.schemas.enable=true`): a
/// struct of its fields, in their order.
pub fn value_schema() -> Schema {
    Schema::structure([
        ("order_id", Schema::int64()),
        ("customer_id", Schema::string()),
        ("amount", Schema::float64()),
        ("currency", Schema::string()),
        ("status", Schema::string()),
        ("updated_at", Schema::string()),
    ])
}

/// The schema of a key (`key.field`'s).
pub fn key_schema(key_field: &str) -> Schema {
    match key_field {
        "order_id" => Schema::int64(),
        _ => Schema::string(),
    }
}

pub struct DatagenConnector;

impl SourceConnector for DatagenConnector {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            class: "datagen",
            aliases: &[
                "Datagen",
                "DatagenConnector",
                "io.confluent.kafka.connect.datagen.DatagenConnector",
            ],
            kind: ConnectorType::Source,
            version: env!("CARGO_PKG_VERSION"),
            description: "Generates realistic order events, deterministic for a seed",
        }
    }

    fn config_definition(&self) -> serde_json::Value {
        serde_json::json!([
            {"name": "topic", "type": "STRING", "required": true, "default_value": null, "documentation": "Topic to write to (kafka.topic also accepted)"},
            {"name": "rate", "type": "DOUBLE", "required": false, "default_value": "100", "documentation": "Records per second per task; 0 for as fast as possible"},
            {"name": "count", "type": "LONG", "required": false, "default_value": null, "documentation": "Total records (iterations also accepted); absent for forever"},
            {"name": "key.field", "type": "STRING", "required": false, "default_value": "order_id", "documentation": "Field whose value becomes the key: order_id, customer_id or status"},
            {"name": "poison.ratio", "type": "DOUBLE", "required": false, "default_value": "0", "documentation": "Fraction of records whose value is deliberately not JSON"},
            {"name": "seed", "type": "LONG", "required": false, "default_value": "42", "documentation": "Seed: the same seed gives the same records"},
            {"name": "customers", "type": "LONG", "required": false, "default_value": "1000", "documentation": "Distinct customers"},
            {"name": "batch.size", "type": "INT", "required": false, "default_value": "100", "documentation": "Records per poll"},
        ])
    }

    fn validate(&self, config: &ConfigMap) -> Result<(), ConfigError> {
        DatagenConfig::parse(config).map(|_| ())
    }

    fn topics(&self, config: &ConfigMap) -> Vec<String> {
        DatagenConfig::parse(config)
            .map(|c| vec![c.topic])
            .unwrap_or_default()
    }

    fn task_configs(&self, config: &ConfigMap, max_tasks: u32) -> Vec<ConfigMap> {
        let n = max_tasks.max(1);
        (0..n)
            .map(|_| {
                let mut c = config.clone();
                c.insert("datagen.task.count".into(), n.to_string());
                c
            })
            .collect()
    }

    fn create_task(
        &self,
        config: &ConfigMap,
        context: TaskContext,
        offsets: SourceOffsets,
    ) -> Result<Box<dyn SourceTask>, ConnectError> {
        let cfg = DatagenConfig::parse(config).map_err(|e| ConnectError::fatal(e.to_string()))?;
        let task_count = cfg.task_count.unwrap_or(1).max(1);
        let partition = json!({ "datagen.task": context.task_id });
        let next_index = offsets
            .get(&source_partition_key(&partition))
            .and_then(|o| o.get("next"))
            .and_then(|n| n.as_u64())
            .unwrap_or(0);
        let key_schema = context
            .key_schemas
            .then(|| Arc::new(key_schema(&cfg.key_field)));
        Ok(Box::new(DatagenTask {
            interval: (cfg.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / cfg.rate)),
            cfg,
            task_id: u64::from(context.task_id),
            task_count,
            next_index,
            partition,
            next_due: tokio::time::Instant::now(),
            key_schema,
            value_schema: context.value_schemas.then(|| Arc::new(value_schema())),
        }))
    }
}

struct DatagenTask {
    cfg: DatagenConfig,
    task_id: u64,
    task_count: u64,
    /// How many records this task has generated (its committed offset).
    next_index: u64,
    partition: serde_json::Value,
    interval: Option<Duration>,
    next_due: tokio::time::Instant,
    /// With `key.converter.schemas.enable` / `value.converter.schemas.enable`.
    key_schema: Option<Arc<Schema>>,
    value_schema: Option<Arc<Schema>>,
}

impl DatagenTask {
    fn seq(&self, index: u64) -> u64 {
        index * self.task_count + self.task_id
    }
}

#[async_trait]
impl SourceTask for DatagenTask {
    async fn poll(&mut self) -> Result<Option<Vec<SourceRecord>>, ConnectError> {
        let mut batch = Vec::with_capacity(self.cfg.batch_size);
        while batch.len() < self.cfg.batch_size {
            let seq = self.seq(self.next_index);
            if self.cfg.count.is_some_and(|count| seq >= count) {
                break;
            }
            if let Some(interval) = self.interval {
                let now = tokio::time::Instant::now();
                if self.next_due > now {
                    if !batch.is_empty() {
                        // Hand over what is ready rather than hold it back.
                        break;
                    }
                    tokio::time::sleep_until(self.next_due).await;
                }
                // Records that fell due while the last batch was handed
                // over (a transaction, a delivery wait) are owed, up to one
                // batch: the rate holds, and a long stall is no burst.
                let batch = u32::try_from(self.cfg.batch_size).unwrap_or(u32::MAX);
                let debt_limit = interval.saturating_mul(batch);
                let earliest = now.checked_sub(debt_limit).unwrap_or(now);
                self.next_due = self.next_due.max(earliest) + interval;
            }
            let (key, value) = generate(&self.cfg, seq);
            self.next_index += 1;
            batch.push(SourceRecord {
                source_partition: self.partition.clone(),
                source_offset: json!({ "next": self.next_index }),
                topic: self.cfg.topic.clone(),
                key,
                value: Some(value),
                headers: Vec::new(),
                timestamp: Some(chrono::Utc::now().timestamp_millis()),
                key_schema: self.key_schema.clone(),
                value_schema: self.value_schema.clone(),
            });
        }
        if batch.is_empty() {
            return Ok(None);
        }
        Ok(Some(batch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> ConfigMap {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn same_seed_same_records_and_poison_is_not_json() {
        let cfg =
            DatagenConfig::parse(&config(&[("topic", "orders"), ("poison.ratio", "0.3")])).unwrap();
        let mut poison = 0;
        for seq in 0..200 {
            assert_eq!(generate(&cfg, seq), generate(&cfg, seq));
            let (key, value) = generate(&cfg, seq);
            assert_eq!(key.unwrap(), (seq + 1).to_string().into_bytes());
            match serde_json::from_slice::<serde_json::Value>(&value) {
                Ok(v) => {
                    assert_eq!(v["order_id"], seq + 1);
                    assert!(v["customer_id"].as_str().unwrap().starts_with("cust-"));
                    assert!(v["amount"].as_f64().unwrap() >= 1.0);
                }
                Err(_) => poison += 1,
            }
        }
        assert!(
            (30..=90).contains(&poison),
            "poison count {poison} far from 30%"
        );
    }

    #[test]
    fn rejects_bad_keys_by_name() {
        let err = DatagenConfig::parse(&config(&[("topic", "o"), ("rate", "fast")])).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("rate"));
        let err = DatagenConfig::parse(&config(&[("rate", "1")])).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("topic"));
        let err =
            DatagenConfig::parse(&config(&[("topic", "o"), ("key.field", "nope")])).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("key.field"));
    }

    #[tokio::test]
    async fn tasks_split_the_sequence_and_resume_from_offsets() {
        let mut cfg = config(&[("topic", "orders"), ("count", "10"), ("rate", "0")]);
        let configs = DatagenConnector.task_configs(&cfg, 2);
        let mut seen = Vec::new();
        for (i, c) in configs.iter().enumerate() {
            let ctx = TaskContext {
                connector: "d".into(),
                task_id: i as u32,
                ..Default::default()
            };
            let mut task = DatagenConnector
                .create_task(c, ctx, SourceOffsets::new())
                .unwrap();
            while let Some(batch) = task.poll().await.unwrap() {
                for r in batch {
                    let v: serde_json::Value =
                        serde_json::from_slice(r.value.as_ref().unwrap()).unwrap();
                    seen.push(v["order_id"].as_u64().unwrap());
                }
            }
        }
        seen.sort();
        assert_eq!(seen, (1..=10).collect::<Vec<_>>());

        // Resuming task 0 after 3 records continues at its fourth.
        cfg.insert("datagen.task.count".into(), "1".into());
        let mut offsets = SourceOffsets::new();
        offsets.insert(
            source_partition_key(&json!({"datagen.task": 0})),
            json!({"next": 3}),
        );
        let ctx = TaskContext {
            connector: "d".into(),
            task_id: 0,
            ..Default::default()
        };
        let mut task = DatagenConnector.create_task(&cfg, ctx, offsets).unwrap();
        let batch = task.poll().await.unwrap().unwrap();
        assert_eq!(batch.len(), 7);
        assert_eq!(batch[0].key.as_deref(), Some(&b"4"[..]));
    }

    /// `rate` holds when handing a batch over costs more than one record's
    /// interval (a Kafka transaction or delivery wait per poll): the records
    /// that fell due meanwhile go out together, up to a batch.
    #[tokio::test(start_paused = true)]
    async fn the_rate_holds_when_each_poll_costs_more_than_a_records_interval() {
        let cfg = config(&[("topic", "orders"), ("rate", "1000"), ("batch.size", "100")]);
        let ctx = TaskContext {
            connector: "d".into(),
            task_id: 0,
            ..Default::default()
        };
        let mut task = DatagenConnector
            .create_task(&cfg, ctx, SourceOffsets::new())
            .unwrap();
        let start = tokio::time::Instant::now();
        let mut records = 0;
        while start.elapsed() < Duration::from_secs(2) {
            records += task.poll().await.unwrap().unwrap().len();
            // What the runtime spends on each batch.
            tokio::time::advance(Duration::from_millis(8)).await;
        }
        assert!(
            (1900..=2100).contains(&records),
            "{records} records in 2 s at a rate of 1000/s"
        );
    }
}
