//! `file-source` and `file-sink`: JSON lines to and from a local file, with
//! Kafka Connect's `FileStreamSource` / `FileStreamSink` keys.
//!
//! The source tails its file: its offset is the byte position after the last
//! line it produced, so a restart resumes at the next line. The sink appends
//! one line per record value and makes them durable (`fsync`) on flush, before
//! the runtime commits their offsets.

use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use sluice_sdk::config::from_string_map;
use sluice_sdk::{
    ConfigError, ConfigMap, ConnectError, ConnectorType, PluginInfo, Record, Schema, SinkConnector,
    SinkTask, SourceConnector, SourceOffsets, SourceRecord, SourceTask, TaskContext,
    source_partition_key,
};
use tokio::fs::{File, OpenOptions};
use tokio::io::{AsyncBufReadExt, AsyncSeekExt, AsyncWriteExt, BufReader, BufWriter};

/// The directories the file connectors may read and write: the worker's
/// `file.allowed.paths`. Unset, any file the worker can open. A path is
/// checked with its symbolic links and `..` resolved, when the connector is
/// validated and again when the task opens it.
#[derive(Debug, Clone, Default)]
pub struct AllowedPaths(Option<Vec<PathBuf>>);

impl AllowedPaths {
    /// Confines the connectors to `dirs` (each must exist).
    pub fn only(dirs: &[PathBuf]) -> std::io::Result<Self> {
        let canonical = dirs
            .iter()
            .map(|d| {
                d.canonicalize()
                    .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", d.display())))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self(Some(canonical)))
    }

    /// Everything, as when nothing is configured.
    pub fn anywhere() -> Self {
        Self(None)
    }

    pub fn check(&self, file: &Path) -> Result<(), ConfigError> {
        let Some(allowed) = &self.0 else {
            return Ok(());
        };
        let refuse = |why: String| {
            ConfigError::new(
                "file",
                format!(
                    "{} {why}; the worker's file.allowed.paths permits only {}",
                    file.display(),
                    allowed
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        };
        // A file the sink will create does not exist yet: its directory
        // must, and decides.
        let real = match file.canonicalize() {
            Ok(real) => real,
            Err(_) => {
                let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
                    return Err(refuse("is not a file path".into()));
                };
                let dir = if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                };
                match dir.canonicalize() {
                    Ok(dir) => dir.join(name),
                    Err(e) => return Err(refuse(format!("cannot be checked ({e})"))),
                }
            }
        };
        if allowed.iter().any(|dir| real.starts_with(dir)) {
            Ok(())
        } else {
            Err(refuse(format!(
                "resolves to {}, outside them",
                real.display()
            )))
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSourceConfig {
    pub file: PathBuf,
    pub topic: String,
    /// Most lines per poll.
    #[serde(rename = "batch.size", default = "default_batch_size")]
    pub batch_size: usize,
}

fn default_batch_size() -> usize {
    2000
}

impl FileSourceConfig {
    pub fn parse(config: &ConfigMap) -> Result<Self, ConfigError> {
        let cfg: Self = from_string_map(config)?;
        if cfg.batch_size == 0 {
            return Err(ConfigError::new("batch.size", "must be at least 1"));
        }
        Ok(cfg)
    }
}

#[derive(Debug, Clone, Default)]
pub struct FileSourceConnector {
    pub allowed: AllowedPaths,
}

impl SourceConnector for FileSourceConnector {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            class: "file-source",
            aliases: &[
                "FileStreamSource",
                "FileStreamSourceConnector",
                "org.apache.kafka.connect.file.FileStreamSourceConnector",
            ],
            kind: ConnectorType::Source,
            version: env!("CARGO_PKG_VERSION"),
            description: "Reads lines of a file, tailing it; one record per line",
        }
    }

    fn config_definition(&self) -> serde_json::Value {
        serde_json::json!([
            {"name": "file", "type": "STRING", "required": true, "default_value": null, "documentation": "File to read, tailing it"},
            {"name": "topic", "type": "STRING", "required": true, "default_value": null, "documentation": "Topic to write to"},
            {"name": "batch.size", "type": "INT", "required": false, "default_value": "2000", "documentation": "Most lines per poll"},
        ])
    }

    fn validate(&self, config: &ConfigMap) -> Result<(), ConfigError> {
        let cfg = FileSourceConfig::parse(config)?;
        self.allowed.check(&cfg.file)
    }

    fn topics(&self, config: &ConfigMap) -> Vec<String> {
        FileSourceConfig::parse(config)
            .map(|c| vec![c.topic])
            .unwrap_or_default()
    }

    /// One file, one reader: always a single task.
    fn task_configs(&self, config: &ConfigMap, _max_tasks: u32) -> Vec<ConfigMap> {
        vec![config.clone()]
    }

    fn create_task(
        &self,
        config: &ConfigMap,
        context: TaskContext,
        offsets: SourceOffsets,
    ) -> Result<Box<dyn SourceTask>, ConnectError> {
        let cfg =
            FileSourceConfig::parse(config).map_err(|e| ConnectError::fatal(e.to_string()))?;
        let partition = json!({ "filename": cfg.file.to_string_lossy() });
        let position = offsets
            .get(&source_partition_key(&partition))
            .and_then(|o| o.get("position"))
            .and_then(|p| p.as_u64())
            .unwrap_or(0);
        Ok(Box::new(FileSourceTask {
            cfg,
            allowed: self.allowed.clone(),
            partition,
            position,
            reader: None,
            // As Kafka Connect's FileStreamSource: each line a `string`.
            value_schema: context.value_schemas.then(|| Arc::new(Schema::string())),
        }))
    }
}

struct FileSourceTask {
    cfg: FileSourceConfig,
    allowed: AllowedPaths,
    partition: serde_json::Value,
    /// Byte position after the last line handed to the runtime.
    position: u64,
    reader: Option<BufReader<File>>,
    /// With `value.converter.schemas.enable=true`: each line is a
    /// `string` payload, as FileStreamSource gives it.
    value_schema: Option<Arc<Schema>>,
}

#[async_trait]
impl SourceTask for FileSourceTask {
    async fn poll(&mut self) -> Result<Option<Vec<SourceRecord>>, ConnectError> {
        if self.reader.is_none() {
            // Again at open: a symbolic link may have changed since validate.
            self.allowed
                .check(&self.cfg.file)
                .map_err(|e| ConnectError::fatal(e.to_string()))?;
            match File::open(&self.cfg.file).await {
                Ok(mut f) => {
                    f.seek(SeekFrom::Start(self.position)).await.map_err(|e| {
                        ConnectError::retriable(format!("seeking {}", self.cfg.file.display()))
                            .with_source(e)
                    })?;
                    self.reader = Some(BufReader::new(f));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    // Not there yet: wait for it, as a tail would.
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    return Ok(Some(Vec::new()));
                }
                Err(e) => {
                    return Err(ConnectError::retriable(format!(
                        "opening {}",
                        self.cfg.file.display()
                    ))
                    .with_source(e));
                }
            }
        }
        let reader = self.reader.as_mut().expect("opened above");
        let mut batch = Vec::new();
        let mut line = Vec::new();
        while batch.len() < self.cfg.batch_size {
            line.clear();
            let n = reader.read_until(b'\n', &mut line).await.map_err(|e| {
                ConnectError::retriable(format!("reading {}", self.cfg.file.display()))
                    .with_source(e)
            })?;
            if n == 0 {
                break;
            }
            if line.last() != Some(&b'\n') {
                // A partial last line: re-read it whole once its writer ends it.
                reader
                    .seek(SeekFrom::Start(self.position))
                    .await
                    .map_err(|e| ConnectError::retriable("seeking back").with_source(e))?;
                break;
            }
            self.position += n as u64;
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if text.is_empty() {
                continue;
            }
            let value = match &self.value_schema {
                None => text.to_vec(),
                // The line as a JSON string; bytes that are not UTF-8 read
                // as U+FFFD, as FileStreamSource's UTF-8 reader reads them.
                Some(_) => serde_json::to_vec(&String::from_utf8_lossy(text)).expect("a string"),
            };
            batch.push(SourceRecord {
                source_partition: self.partition.clone(),
                source_offset: json!({ "position": self.position }),
                topic: self.cfg.topic.clone(),
                key: None,
                value: Some(value),
                headers: Vec::new(),
                timestamp: None,
                key_schema: None,
                value_schema: self.value_schema.clone(),
            });
        }
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(Some(batch))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSinkConfig {
    pub file: PathBuf,
}

#[derive(Debug, Clone, Default)]
pub struct FileSinkConnector {
    pub allowed: AllowedPaths,
}

impl SinkConnector for FileSinkConnector {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            class: "file-sink",
            aliases: &[
                "FileStreamSink",
                "FileStreamSinkConnector",
                "org.apache.kafka.connect.file.FileStreamSinkConnector",
            ],
            kind: ConnectorType::Sink,
            version: env!("CARGO_PKG_VERSION"),
            description: "Appends each record value as one line of a file",
        }
    }

    fn config_definition(&self) -> serde_json::Value {
        serde_json::json!([
            {"name": "file", "type": "STRING", "required": true, "default_value": null, "documentation": "File to append each record value to, one per line"},
        ])
    }

    fn validate(&self, config: &ConfigMap) -> Result<(), ConfigError> {
        let cfg: FileSinkConfig = from_string_map(config)?;
        self.allowed.check(&cfg.file)
    }

    /// One file, one writer: always a single task.
    fn task_configs(&self, config: &ConfigMap, _max_tasks: u32) -> Vec<ConfigMap> {
        vec![config.clone()]
    }

    fn create_task(
        &self,
        config: &ConfigMap,
        _context: TaskContext,
    ) -> Result<Box<dyn SinkTask>, ConnectError> {
        let cfg: FileSinkConfig =
            from_string_map(config).map_err(|e| ConnectError::fatal(e.to_string()))?;
        Ok(Box::new(FileSinkTask {
            cfg,
            allowed: self.allowed.clone(),
            writer: None,
        }))
    }
}

struct FileSinkTask {
    cfg: FileSinkConfig,
    allowed: AllowedPaths,
    writer: Option<BufWriter<File>>,
}

impl FileSinkTask {
    fn io_error(&self, what: &str, e: std::io::Error) -> ConnectError {
        ConnectError::retriable(format!("{what} {}", self.cfg.file.display())).with_source(e)
    }
}

#[async_trait]
impl SinkTask for FileSinkTask {
    async fn start(&mut self) -> Result<(), ConnectError> {
        // Again at open: a symbolic link may have changed since validate.
        self.allowed
            .check(&self.cfg.file)
            .map_err(|e| ConnectError::fatal(e.to_string()))?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.cfg.file)
            .await
            .map_err(|e| self.io_error("opening", e))?;
        self.writer = Some(BufWriter::new(file));
        Ok(())
    }

    async fn put(&mut self, records: Vec<Record>) -> Result<(), ConnectError> {
        // Check the whole batch first so a bad record writes nothing.
        for r in &records {
            if r.value.as_deref().is_some_and(|v| v.contains(&b'\n')) {
                return Err(ConnectError::data(format!(
                    "record {} has a line break in its value; a JSON-lines file cannot hold it",
                    r.coordinates()
                )));
            }
        }
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| ConnectError::fatal("put before start"))?;
        for r in &records {
            let line = r.value.as_deref().unwrap_or(b"null");
            let result = async {
                writer.write_all(line).await?;
                writer.write_all(b"\n").await
            }
            .await;
            if let Err(e) = result {
                return Err(self.io_error("writing", e));
            }
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), ConnectError> {
        if let Some(w) = self.writer.as_mut() {
            let result = async {
                w.flush().await?;
                w.get_ref().sync_data().await
            }
            .await;
            if let Err(e) = result {
                return Err(self.io_error("syncing", e));
            }
        }
        Ok(())
    }

    async fn stop(&mut self) {
        let _ = self.flush().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> TaskContext {
        TaskContext {
            connector: "f".into(),
            task_id: 0,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn sink_then_source_round_trip_and_resume() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let cfg: ConfigMap = [("file".to_string(), path.to_string_lossy().to_string())].into();
        let mut sink = FileSinkConnector::default()
            .create_task(&cfg, ctx())
            .unwrap();
        sink.start().await.unwrap();
        let records = (0..3)
            .map(|i| Record {
                value: Some(format!("{{\"n\":{i}}}").into_bytes()),
                ..Default::default()
            })
            .collect();
        sink.put(records).await.unwrap();
        sink.flush().await.unwrap();
        let bad = vec![Record {
            value: Some(b"a\nb".to_vec()),
            ..Default::default()
        }];
        let err = sink.put(bad).await.unwrap_err();
        assert_eq!(err.kind, sluice_sdk::ErrorKind::Data);

        let mut src_cfg = cfg.clone();
        src_cfg.insert("topic".into(), "t".into());
        let mut source = FileSourceConnector::default()
            .create_task(&src_cfg, ctx(), SourceOffsets::new())
            .unwrap();
        let batch = source.poll().await.unwrap().unwrap();
        let values: Vec<_> = batch.iter().map(|r| r.value.clone().unwrap()).collect();
        assert_eq!(
            values,
            vec![
                b"{\"n\":0}".to_vec(),
                b"{\"n\":1}".to_vec(),
                b"{\"n\":2}".to_vec()
            ]
        );

        // Resume after the first line.
        let mut offsets = SourceOffsets::new();
        offsets.insert(
            source_partition_key(&batch[0].source_partition),
            batch[0].source_offset.clone(),
        );
        let mut source = FileSourceConnector::default()
            .create_task(&src_cfg, ctx(), offsets)
            .unwrap();
        let batch = source.poll().await.unwrap().unwrap();
        assert_eq!(batch.len(), 2);
        assert_eq!(batch[0].value.as_deref(), Some(&b"{\"n\":1}"[..]));
    }

    /// A link that pointed inside when the connector was validated and
    /// outside when the task opens the file: refused at open.
    #[tokio::test]
    async fn a_link_moved_outside_after_validation_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let (allowed, inside, outside) = (
            dir.path().join("allowed"),
            dir.path().join("allowed/data"),
            dir.path().join("outside"),
        );
        for d in [&allowed, &inside, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        let link = allowed.join("current");
        std::os::unix::fs::symlink(&inside, &link).unwrap();
        let connector = FileSinkConnector {
            allowed: AllowedPaths::only(std::slice::from_ref(&allowed)).unwrap(),
        };
        let cfg: ConfigMap = [(
            "file".to_string(),
            link.join("out.jsonl").display().to_string(),
        )]
        .into();
        connector.validate(&cfg).unwrap();
        let mut sink = connector.create_task(&cfg, ctx()).unwrap();
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let err = sink.start().await.unwrap_err();
        assert!(err.to_string().contains("file.allowed.paths"), "{err}");
        assert!(!outside.join("out.jsonl").exists());

        // A directory that does not exist cannot be allowed.
        let missing = dir.path().join("missing");
        assert!(AllowedPaths::only(&[missing]).is_err());
    }
}
