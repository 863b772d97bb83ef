//! Standalone mode's config store (`config.storage.file.filename`): every
//! connector's config and target state in one JSON file, written whole and
//! atomically after each change, read back when the worker starts.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::config::ConnectorSpec;
use crate::worker::TargetState;

pub struct ConfigFileStore {
    path: PathBuf,
}

impl ConfigFileStore {
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    /// Writes every connector's config and target state (atomically and
    /// durably: a crash leaves the old file or the new one). The herder
    /// serialises its writes.
    pub fn write(&self, connectors: &[(ConnectorSpec, TargetState)]) {
        let snapshot: BTreeMap<&str, serde_json::Value> = connectors
            .iter()
            .map(|(spec, state)| {
                (
                    spec.name.as_str(),
                    serde_json::json!({"config": spec.config, "state": state.as_str()}),
                )
            })
            .collect();
        let bytes = serde_json::to_vec_pretty(&snapshot).expect("serialises");
        if let Err(e) = crate::durable::replace_file(&self.path, &bytes) {
            tracing::error!(file = %self.path.display(), error = %e, "could not persist connector configs");
        }
    }

    /// The connectors the file holds, with their target states (an unknown
    /// state is RUNNING, with a warning).
    pub fn read(&self) -> Result<Vec<(ConnectorSpec, TargetState)>, String> {
        let path = &self.path;
        if !path.exists() {
            return Ok(Vec::new());
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let stored: BTreeMap<String, serde_json::Value> =
            serde_json::from_str(&text).map_err(|e| {
                format!(
                    "{} is corrupt ({e}); move it away to start over",
                    path.display()
                )
            })?;
        let mut out = Vec::new();
        for (name, entry) in stored {
            let spec = ConnectorSpec::from_json(
                &serde_json::json!({"name": name, "config": entry["config"]}),
            )
            .map_err(|e| format!("{}: connector `{name}`: {e}", path.display()))?;
            let state = entry["state"].as_str().unwrap_or("RUNNING");
            let target = TargetState::parse(state).unwrap_or_else(|| {
                tracing::warn!(connector = %name, state, "unknown stored state; starting the connector RUNNING");
                TargetState::Running
            });
            out.push((spec, target));
        }
        Ok(out)
    }
}
