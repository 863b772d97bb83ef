//! Source offsets: where each source task resumes.
//!
//! They live in a compacted Kafka topic (`offset.storage.topic`) in Kafka
//! Connect's format: key `["<connector>", {partition}]`, value the offset
//! object (null: forgotten). Exactly-once sources write them in the
//! transaction of the records they belong to. A standalone worker with
//! `offset.storage.file.filename` keeps at-least-once sources' offsets in
//! that file instead (written atomically). [`OffsetStore`] is the worker's
//! view of all of them, and the file's content.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use sluice_sdk::SourceOffsets;

type AllOffsets = HashMap<String, SourceOffsets>;

pub struct OffsetStore {
    file: Option<PathBuf>,
    offsets: Mutex<AllOffsets>,
    /// Held from a change to its write, so the file gets the changes in
    /// the order they were made.
    writing: Mutex<()>,
}

impl OffsetStore {
    pub fn open(file: Option<PathBuf>) -> anyhow::Result<Self> {
        let offsets = match &file {
            Some(path) if path.exists() => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("reading offsets file {}: {e}", path.display()))?;
                serde_json::from_str(&text).map_err(|e| {
                    anyhow::anyhow!(
                        "offsets file {} is corrupt ({e}); move it away to start over",
                        path.display()
                    )
                })?
            }
            _ => AllOffsets::new(),
        };
        Ok(Self {
            file,
            offsets: Mutex::new(offsets),
            writing: Mutex::new(()),
        })
    }

    pub fn is_persistent(&self) -> bool {
        self.file.is_some()
    }

    pub fn load(&self, connector: &str) -> SourceOffsets {
        self.offsets
            .lock()
            .expect("offsets lock")
            .get(connector)
            .cloned()
            .unwrap_or_default()
    }

    /// Records new offsets for a connector and, with a file, makes them
    /// durable before returning.
    pub fn commit(&self, connector: &str, updates: SourceOffsets) -> std::io::Result<()> {
        if updates.is_empty() {
            return Ok(());
        }
        self.change(|all| {
            all.entry(connector.to_string())
                .or_default()
                .extend(updates)
        })
    }

    /// Sets (Some) or forgets (None) offsets for source partitions: the
    /// offsets API, used while the connector is stopped.
    pub fn alter(
        &self,
        connector: &str,
        changes: Vec<(String, Option<serde_json::Value>)>,
    ) -> std::io::Result<()> {
        self.change(|all| {
            let offsets = all.entry(connector.to_string()).or_default();
            for (partition, offset) in changes {
                match offset {
                    Some(o) => offsets.insert(partition, o),
                    None => offsets.remove(&partition),
                };
            }
        })
    }

    /// Replaces a connector's offsets with those read from the offsets
    /// topic (which wins over anything kept here).
    pub fn replace(&self, connector: &str, offsets: SourceOffsets) -> std::io::Result<()> {
        self.change(|all| {
            all.insert(connector.to_string(), offsets);
        })
    }

    /// Forgets every offset of a connector: it starts from the beginning.
    pub fn reset(&self, connector: &str) -> std::io::Result<()> {
        self.change(|all| {
            all.remove(connector);
        })
    }

    fn change(&self, f: impl FnOnce(&mut AllOffsets)) -> std::io::Result<()> {
        let _in_order = self.writing.lock().expect("writing lock");
        let snapshot = {
            let mut all = self.offsets.lock().expect("offsets lock");
            f(&mut all);
            self.file
                .as_ref()
                .map(|_| serde_json::to_vec_pretty(&*all).expect("offsets serialise"))
        };
        if let (Some(path), Some(bytes)) = (&self.file, snapshot) {
            crate::durable::replace_file(path, &bytes)?;
        }
        Ok(())
    }

    pub fn all(&self, connector: &str) -> Vec<(serde_json::Value, serde_json::Value)> {
        self.load(connector)
            .into_iter()
            .map(|(k, v)| {
                (
                    serde_json::from_str(&k).unwrap_or(serde_json::Value::String(k)),
                    v,
                )
            })
            .collect()
    }
}

/// A change to one source partition's offset: its canonical key (see
/// [`sluice_sdk::source_partition_key`]) and the new offset, or None to
/// forget it.
pub type OffsetChange = (String, Option<serde_json::Value>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_offsets_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("offsets.json");
        let store = OffsetStore::open(Some(path.clone())).unwrap();
        store
            .commit(
                "c",
                [("{\"p\":1}".to_string(), serde_json::json!({"next": 5}))].into(),
            )
            .unwrap();
        let reopened = OffsetStore::open(Some(path.clone())).unwrap();
        assert_eq!(
            reopened.load("c").get("{\"p\":1}").unwrap(),
            &serde_json::json!({"next": 5})
        );
        std::fs::write(&path, "{").unwrap();
        let err = OffsetStore::open(Some(path)).err().unwrap();
        assert!(err.to_string().contains("corrupt"), "{err}");
    }

    #[test]
    fn concurrent_commits_all_reach_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("offsets.json");
        let store = std::sync::Arc::new(OffsetStore::open(Some(path.clone())).unwrap());
        let committers: Vec<_> = (0..8)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let partition = format!("{{\"p\":{}}}", t * 1000 + i);
                        store
                            .commit("c", [(partition, serde_json::json!({"next": i}))].into())
                            .unwrap();
                    }
                })
            })
            .collect();
        for c in committers {
            c.join().unwrap();
        }
        let reopened = OffsetStore::open(Some(path)).unwrap();
        assert_eq!(
            reopened.load("c").len(),
            8 * 50,
            "every commit is in the file"
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "offsets.json")
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    }
}
