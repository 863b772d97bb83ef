//! Worker and connector configs: parsed from Kafka Connect's JSON, validated
//! whole before anything starts, and reported with the file, the key and what
//! was expected when they are wrong.

mod connector;
mod errors;
mod stream;
mod transforms;
mod worker;

pub use connector::*;
pub use errors::*;
pub use stream::*;
pub use transforms::*;
pub use worker::*;

use std::path::{Path, PathBuf};

use sluice_sdk::config::{ConfigError, ConfigMap};

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: not valid JSON at line {line}, column {column}: {message}")]
    Syntax {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}: {error}")]
    Invalid { file: PathBuf, error: ConfigError },
}

/// Reads a JSON object whose values are Kafka Connect config values.
/// Numbers and booleans are accepted and kept as their text, as Kafka
/// Connect's REST API does; nested values are rejected by key.
pub fn string_map_from_json(value: &serde_json::Value) -> Result<ConfigMap, ConfigError> {
    let object = value
        .as_object()
        .ok_or_else(|| ConfigError::general("expected a JSON object of string values"))?;
    let mut map = ConfigMap::new();
    for (k, v) in object {
        let text = match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            serde_json::Value::Null => {
                return Err(ConfigError::new(k, "is null; expected a string value"));
            }
            _ => {
                return Err(ConfigError::new(
                    k,
                    "expected a string value (Kafka Connect config values are strings), got a nested JSON value",
                ));
            }
        };
        map.insert(k.clone(), text);
    }
    Ok(map)
}

fn read_json(file: &Path) -> Result<serde_json::Value, ConfigFileError> {
    let text = std::fs::read_to_string(file).map_err(|source| ConfigFileError::Read {
        file: file.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| ConfigFileError::Syntax {
        file: file.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

/// Kafka's rules for topic names, checked before any broker is asked.
pub(crate) fn check_topic_name(topic: &str) -> Result<(), String> {
    if topic.is_empty() || topic == "." || topic == ".." {
        return Err(format!("`{topic}` is not a valid topic name"));
    }
    let length = topic.chars().count();
    if length > 249 {
        let start: String = topic.chars().take(20).collect();
        return Err(format!(
            "topic names have at most 249 characters; `{start}...` has {length}"
        ));
    }
    if let Some(c) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "`{topic}` has `{c}`; topic names use only letters, digits, `.`, `_` and `-`"
        ));
    }
    Ok(())
}

fn check_topic_key(key: &str, topic: &str) -> Result<(), ConfigError> {
    check_topic_name(topic).map_err(|why| ConfigError::new(key, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_topic_name_of_multibyte_characters_is_refused_not_a_panic() {
        // 300 bytes but 100 characters: refused for its characters.
        let why = check_topic_name(&"€".repeat(100)).unwrap_err();
        assert!(why.contains("has `€`"), "{why}");
        let why = check_topic_name(&"€".repeat(300)).unwrap_err();
        assert!(why.contains("at most 249 characters"), "{why}");
        assert!(why.contains("has 300"), "{why}");
    }
}
