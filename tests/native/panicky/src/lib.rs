//! A sink plugin that panics in `put` when a record's value is `panic`:
//! the panic must fail only its task, with the message in the trace.

use async_trait::async_trait;
use sluice_sdk::{
    ConfigError, ConfigMap, ConnectError, ConnectorType, PluginInfo, Record, SinkConnector,
    SinkTask, TaskContext,
};

struct Panicky;

impl SinkConnector for Panicky {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            class: "panicky-sink",
            aliases: &[],
            kind: ConnectorType::Sink,
            version: "0.0.1",
            description: "panics on demand",
        }
    }

    fn validate(&self, config: &ConfigMap) -> Result<(), ConfigError> {
        match config.keys().next() {
            Some(k) => Err(ConfigError::new(k.as_str(), "not supported by this plugin")),
            None => Ok(()),
        }
    }

    fn create_task(
        &self,
        _config: &ConfigMap,
        _context: TaskContext,
    ) -> Result<Box<dyn SinkTask>, ConnectError> {
        Ok(Box::new(PanickyTask))
    }
}

struct PanickyTask;

#[async_trait]
impl SinkTask for PanickyTask {
    async fn put(&mut self, records: Vec<Record>) -> Result<(), ConnectError> {
        if records.iter().any(|r| r.value.as_deref() == Some(b"panic")) {
            panic!("boom in put");
        }
        Ok(())
    }
}

sluice_sdk::export_sink_plugin!(Panicky);
