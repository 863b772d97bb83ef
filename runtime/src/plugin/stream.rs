//! The built-in Kafka-to-Kafka connector's description; its task loop is
//! `task::stream`, its keys `config::StreamConfig`.

use sluice_sdk::{ConfigMap, ConnectorType, PluginInfo};

pub struct StreamConnector;

impl StreamConnector {
    pub fn info() -> PluginInfo {
        PluginInfo {
            class: "stream",
            aliases: &["sluice.Stream", "io.sluice.StreamConnector"],
            kind: ConnectorType::Stream,
            version: env!("CARGO_PKG_VERSION"),
            description: "Kafka to Kafka: consumes `topics`, transforms, produces to `output.topic`; exactly-once with Kafka transactions",
        }
    }

    pub fn config_definition() -> serde_json::Value {
        serde_json::json!([
            {"name": "output.topic", "type": "STRING", "required": true, "default_value": null,
             "documentation": "Topic to produce to; ${topic} stands for the record's topic after the transforms"},
        ])
    }

    /// Every task gets the same config: they share the consumer group.
    pub fn task_configs(config: &ConfigMap, tasks_max: u32) -> Vec<ConfigMap> {
        (0..tasks_max).map(|_| config.clone()).collect()
    }
}
