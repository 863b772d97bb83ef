//! `http-sink`: POSTs each record's value to an HTTP endpoint, with an
//! `Idempotency-Key` derived from the record's topic, partition and offset,
//! so a retry after a timeout is safe at the receiving API.
//!
//! | key | default | |
//! |---|---|---|
//! | `http.url` | required | where to POST |
//! | `http.timeout.ms` | 10000 | per request |
//! | `http.content.type` | `application/json` | |
//!
//! Responses: 2xx is written; 408, 429 and 5xx, and connection failures,
//! are retriable (the runtime retries the batch with backoff); any other
//! 4xx rejects the record as a data error (dead-lettered with
//! `errors.tolerance=all`).

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use sluice_sdk::config::from_string_map;
use sluice_sdk::{
    ConfigError, ConfigMap, ConnectError, ConnectorType, PluginInfo, Record, SinkConnector,
    SinkTask, TaskContext,
};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpSinkConfig {
    #[serde(rename = "http.url")]
    url: String,
    #[serde(rename = "http.timeout.ms", default = "default_timeout")]
    timeout_ms: u64,
    #[serde(rename = "http.content.type", default = "default_content_type")]
    content_type: String,
}

fn default_timeout() -> u64 {
    10_000
}
fn default_content_type() -> String {
    "application/json".into()
}

impl HttpSinkConfig {
    fn parse(config: &ConfigMap) -> Result<Self, ConfigError> {
        let c: Self = from_string_map(config)?;
        if !(c.url.starts_with("http://") || c.url.starts_with("https://")) {
            return Err(ConfigError::new(
                "http.url",
                format!("`{}` is not an http:// or https:// URL", c.url),
            ));
        }
        Ok(c)
    }
}

pub struct HttpSink;

impl SinkConnector for HttpSink {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            class: "http-sink",
            aliases: &["HttpSink"],
            kind: ConnectorType::Sink,
            version: env!("CARGO_PKG_VERSION"),
            description: "POSTs record values to an HTTP endpoint with idempotency keys",
        }
    }

    fn config_definition(&self) -> serde_json::Value {
        serde_json::json!([
            {"name": "http.url", "type": "STRING", "required": true, "default_value": null, "documentation": "Where to POST each record's value"},
            {"name": "http.timeout.ms", "type": "LONG", "required": false, "default_value": "10000", "documentation": "Per-request timeout"},
            {"name": "http.content.type", "type": "STRING", "required": false, "default_value": "application/json", "documentation": "Content-Type of the requests"},
        ])
    }

    fn validate(&self, config: &ConfigMap) -> Result<(), ConfigError> {
        HttpSinkConfig::parse(config).map(|_| ())
    }

    fn create_task(
        &self,
        config: &ConfigMap,
        _context: TaskContext,
    ) -> Result<Box<dyn SinkTask>, ConnectError> {
        let cfg = HttpSinkConfig::parse(config).map_err(|e| ConnectError::fatal(e.to_string()))?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_millis(cfg.timeout_ms)))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Box::new(HttpSinkTask { cfg, agent }))
    }
}

struct HttpSinkTask {
    cfg: HttpSinkConfig,
    agent: ureq::Agent,
}

/// Stable across retries and replays of the same record.
fn idempotency_key(r: &Record) -> String {
    format!("{}-{}-{}", r.topic, r.partition, r.offset)
}

#[async_trait]
impl SinkTask for HttpSinkTask {
    async fn put(&mut self, records: Vec<Record>) -> Result<(), ConnectError> {
        for r in &records {
            let key = idempotency_key(r);
            let body = r.value.clone().unwrap_or_else(|| b"null".to_vec());
            let response = self
                .agent
                .post(&self.cfg.url)
                .header("Content-Type", &self.cfg.content_type)
                .header("Idempotency-Key", &key)
                .send(&body[..]);
            match response {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    match status {
                        200..=299 => {}
                        408 | 429 | 500..=599 => {
                            return Err(ConnectError::retriable(format!(
                                "{} answered {status} for {key}",
                                self.cfg.url
                            ))
                            .with_class("HttpUnavailable"));
                        }
                        _ => {
                            return Err(ConnectError::data(format!(
                                "{} rejected {key} with {status}",
                                self.cfg.url
                            ))
                            .with_class("HttpRejected"));
                        }
                    }
                }
                Err(e) => {
                    return Err(ConnectError::retriable(format!(
                        "POST {} for {key}: {e}",
                        self.cfg.url
                    ))
                    .with_class("HttpUnavailable"));
                }
            }
        }
        Ok(())
    }
}

sluice_sdk::export_sink_plugin!(HttpSink);
