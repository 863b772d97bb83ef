//! The built-in stream connector's own keys.

use serde::Deserialize;
use sluice_sdk::config::{ConfigError, ConfigMap};

/// The built-in stream connector's own keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    /// Where each record goes; `${topic}` is the record's topic after the
    /// transforms (its input topic unless a transform routed it).
    #[serde(rename = "output.topic")]
    output_topic: String,
}

impl StreamConfig {
    pub fn parse(config: &ConfigMap, inputs: &[String]) -> Result<Self, ConfigError> {
        let cfg: Self = sluice_sdk::config::from_string_map(config)?;
        if cfg.output_topic.trim().is_empty() {
            return Err(ConfigError::new("output.topic", "must name a topic"));
        }
        for input in inputs {
            if cfg.route(input) == *input {
                return Err(ConfigError::new(
                    "output.topic",
                    format!(
                        "`{}` writes records of `{input}` back to `{input}`, a loop; name another topic (e.g. `${{topic}}.out`)",
                        cfg.output_topic
                    ),
                ));
            }
        }
        Ok(cfg)
    }

    /// The output topic of a record whose topic (after transforms) is `topic`.
    pub fn route(&self, topic: &str) -> String {
        self.output_topic.replace("${topic}", topic)
    }
}
