//! Native connector plugins: shared libraries from `plugin.path`, behind
//! the C ABI of `sluice_sdk::native`. Only C functions and byte buffers
//! cross; the ABI version is checked before any other call; every buffer
//! the plugin returns is handed back to the plugin to free.

use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use libloading::Library;
use sluice_sdk::native::{ABI_VERSION, Buffer, Status, decode_source_batch};
use sluice_sdk::{
    ConfigError, ConfigMap, ConnectError, ConnectorType, PluginInfo, Record, SinkConnector,
    SinkTask, SourceConnector, SourceOffsets, SourceRecord, SourceTask, TaskContext, codec,
};

use crate::plugin::Plugin;

type AbiVersionFn = unsafe extern "C" fn() -> u32;
type MetadataFn = unsafe extern "C" fn() -> Buffer;
type ValidateFn = unsafe extern "C" fn(*const u8, usize) -> Status;
type TaskConfigsFn = unsafe extern "C" fn(*const u8, usize, u32, *mut Buffer) -> Status;
type OpenFn = unsafe extern "C" fn(
    *const u8,
    usize,
    *const u8,
    usize,
    *const u8,
    usize,
    *mut *mut c_void,
) -> Status;
type PutFn = unsafe extern "C" fn(*mut c_void, *const u8, usize) -> Status;
type FlushFn = unsafe extern "C" fn(*mut c_void) -> Status;
type PollFn = unsafe extern "C" fn(*mut c_void, *mut Buffer) -> Status;
type CloseFn = unsafe extern "C" fn(*mut c_void);
type FreeFn = unsafe extern "C" fn(Buffer);

/// A loaded plugin library and its entry points.
pub struct NativeLibrary {
    path: PathBuf,
    info: PluginInfo,
    config_definition: serde_json::Value,
    validate: ValidateFn,
    task_configs: TaskConfigsFn,
    open: OpenFn,
    put: Option<PutFn>,
    flush: Option<FlushFn>,
    poll: Option<PollFn>,
    close: CloseFn,
    free: FreeFn,
    // Last: the functions above point into it.
    _library: Library,
}

fn symbol<T: Copy>(lib: &Library, name: &str) -> Result<T, String> {
    // SAFETY: the type is the one the ABI declares for this symbol; the
    // library stays loaded as long as the function pointer is used.
    unsafe { lib.get::<T>(name.as_bytes()).map(|s| *s) }
        .map_err(|e| format!("missing symbol `{name}`: {e}"))
}

impl NativeLibrary {
    /// Loads a library and checks it is a Sluice plugin of this ABI.
    pub fn load(path: &Path) -> Result<Plugin, String> {
        // SAFETY: loading runs the library's initialisers; plugin.path is
        // configured by the operator as trusted code, as Kafka Connect's is.
        let library = unsafe { Library::new(path) }
            .map_err(|e| format!("not a loadable shared library: {e}"))?;
        let abi: AbiVersionFn = symbol(&library, "sluice_plugin_abi_version")
            .map_err(|e| format!("not a Sluice plugin ({e})"))?;
        // SAFETY: declared by the ABI: no arguments, returns a u32.
        let version = unsafe { abi() };
        if version != ABI_VERSION {
            return Err(format!(
                "built for plugin ABI version {version}, but this worker speaks version {ABI_VERSION}; rebuild it against this Sluice's SDK"
            ));
        }
        let metadata: MetadataFn = symbol(&library, "sluice_plugin_metadata")?;
        let free: FreeFn = symbol(&library, "sluice_plugin_free")?;
        // SAFETY: per the ABI; the buffer is handed back to `free` below.
        let meta_bytes = take(free, unsafe { metadata() });
        let meta: serde_json::Value = serde_json::from_slice(&meta_bytes)
            .map_err(|e| format!("its metadata is not JSON: {e}"))?;
        let text = |k: &str| -> Result<&'static str, String> {
            let s = meta[k]
                .as_str()
                .ok_or_else(|| format!("its metadata has no `{k}`"))?;
            // Plugins load once per worker: their names live as long as it.
            Ok(Box::leak(s.to_string().into_boxed_str()))
        };
        let kind = match text("type")? {
            "sink" => ConnectorType::Sink,
            "source" => ConnectorType::Source,
            other => {
                return Err(format!(
                    "its metadata names type `{other}`; expected sink or source"
                ));
            }
        };
        let aliases: Vec<&'static str> = meta["aliases"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str())
                    .map(|s| &*Box::leak(s.to_string().into_boxed_str()))
                    .collect()
            })
            .unwrap_or_default();
        let info = PluginInfo {
            class: text("class")?,
            aliases: Box::leak(aliases.into_boxed_slice()),
            kind,
            version: text("version")?,
            description: text("description").unwrap_or(""),
        };
        let lib = NativeLibrary {
            path: path.to_path_buf(),
            info,
            config_definition: meta["config"].clone(),
            validate: symbol(&library, "sluice_plugin_validate")?,
            task_configs: symbol(&library, "sluice_plugin_task_configs")?,
            open: symbol(&library, "sluice_plugin_open")?,
            put: (kind == ConnectorType::Sink)
                .then(|| symbol(&library, "sluice_plugin_put"))
                .transpose()?,
            flush: (kind == ConnectorType::Sink)
                .then(|| symbol(&library, "sluice_plugin_flush"))
                .transpose()?,
            poll: (kind == ConnectorType::Source)
                .then(|| symbol(&library, "sluice_plugin_poll"))
                .transpose()?,
            close: symbol(&library, "sluice_plugin_close")?,
            free,
            _library: library,
        };
        let lib = Arc::new(lib);
        Ok(match kind {
            ConnectorType::Sink => Plugin::Sink(Arc::new(NativeSink(lib))),
            ConnectorType::Source => Plugin::Source(Arc::new(NativeSource(lib))),
            ConnectorType::Stream => unreachable!("the metadata names sink or source"),
        })
    }

    fn check(&self, status: Status) -> Result<(), ConnectError> {
        let message = take(self.free, status.message);
        match Status::to_error(status.code, &message) {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    fn validate(&self, config: &ConfigMap) -> Result<(), ConfigError> {
        let json = serde_json::to_vec(config).expect("serialises");
        // SAFETY: per the ABI; the input is borrowed for the call.
        let status = unsafe { (self.validate)(json.as_ptr(), json.len()) };
        self.check(status).map_err(|e| {
            // The plugin's message is `key `x`: why` when it names a key.
            let m = e.message;
            match m.strip_prefix("key `").and_then(|r| r.split_once("`: ")) {
                Some((key, why)) => ConfigError::new(key, why),
                None => ConfigError::general(m),
            }
        })
    }

    fn task_configs(&self, config: &ConfigMap, max_tasks: u32) -> Vec<ConfigMap> {
        let json = serde_json::to_vec(config).expect("serialises");
        let mut out = Buffer::empty();
        // SAFETY: per the ABI; `out` is written by the plugin and freed below.
        let status = unsafe { (self.task_configs)(json.as_ptr(), json.len(), max_tasks, &mut out) };
        let bytes = take(self.free, out);
        match self
            .check(status)
            .map(|_| serde_json::from_slice::<Vec<ConfigMap>>(&bytes))
        {
            Ok(Ok(configs)) if !configs.is_empty() => configs,
            _ => vec![config.clone()],
        }
    }

    fn open(
        self: &Arc<Self>,
        config: &ConfigMap,
        context: &TaskContext,
        offsets: Option<&SourceOffsets>,
    ) -> Result<NativeTask, ConnectError> {
        let config = serde_json::to_vec(config).expect("serialises");
        let context = serde_json::to_vec(
            &serde_json::json!({"connector": context.connector, "task_id": context.task_id}),
        )
        .expect("serialises");
        let offsets =
            serde_json::to_vec(&offsets.cloned().unwrap_or_default()).expect("serialises");
        let mut task: *mut c_void = std::ptr::null_mut();
        // SAFETY: per the ABI; inputs are borrowed for the call, `task` is
        // an opaque pointer owned by the plugin until `close`.
        let status = unsafe {
            (self.open)(
                config.as_ptr(),
                config.len(),
                context.as_ptr(),
                context.len(),
                offsets.as_ptr(),
                offsets.len(),
                &mut task,
            )
        };
        self.check(status)?;
        if task.is_null() {
            return Err(ConnectError::fatal(format!(
                "plugin {} opened no task",
                self.path.display()
            )));
        }
        Ok(NativeTask {
            lib: self.clone(),
            ptr: task,
        })
    }
}

/// Copies a plugin-owned buffer and hands it back to the plugin to free.
fn take(free: FreeFn, buffer: Buffer) -> Vec<u8> {
    if buffer.ptr.is_null() {
        return Vec::new();
    }
    // SAFETY: the plugin returned `len` readable bytes at `ptr`.
    let bytes = unsafe { Buffer::borrow(buffer.ptr, buffer.len) }.to_vec();
    // SAFETY: the buffer came from this plugin and is freed once.
    unsafe { free(buffer) };
    bytes
}

/// A task inside a plugin: an opaque pointer, closed exactly once.
pub struct NativeTask {
    lib: Arc<NativeLibrary>,
    ptr: *mut c_void,
}

// SAFETY: a task is used by one runtime task at a time (never shared); the
// plugin's task object has no thread affinity by the ABI's contract.
unsafe impl Send for NativeTask {}

impl NativeTask {
    /// Runs a blocking plugin call without stalling the async workers.
    fn call<T>(&mut self, f: impl FnOnce(&NativeLibrary, *mut c_void) -> T) -> T {
        let (lib, ptr) = (&self.lib, self.ptr);
        tokio::task::block_in_place(|| f(lib, ptr))
    }

    fn close(&mut self) {
        if !self.ptr.is_null() {
            let (close, ptr) = (self.lib.close, self.ptr);
            self.ptr = std::ptr::null_mut();
            // SAFETY: the task pointer came from `open` and is closed once.
            unsafe { close(ptr) };
        }
    }
}

impl Drop for NativeTask {
    fn drop(&mut self) {
        self.close();
    }
}

#[async_trait]
impl SinkTask for NativeTask {
    async fn put(&mut self, records: Vec<Record>) -> Result<(), ConnectError> {
        let buf = codec::encode_batch(&records);
        self.call(|lib, ptr| {
            let put = lib.put.expect("sinks have put");
            // SAFETY: per the ABI; the records are borrowed for the call.
            lib.check(unsafe { put(ptr, buf.as_ptr(), buf.len()) })
        })
    }

    async fn flush(&mut self) -> Result<(), ConnectError> {
        self.call(|lib, ptr| {
            let flush = lib.flush.expect("sinks have flush");
            // SAFETY: per the ABI.
            lib.check(unsafe { flush(ptr) })
        })
    }

    async fn stop(&mut self) {
        self.close();
    }
}

#[async_trait]
impl SourceTask for NativeTask {
    async fn poll(&mut self) -> Result<Option<Vec<SourceRecord>>, ConnectError> {
        self.call(|lib, ptr| {
            let poll = lib.poll.expect("sources have poll");
            let mut out = Buffer::empty();
            // SAFETY: per the ABI; `out` is freed by `take`.
            let status = unsafe { poll(ptr, &mut out) };
            let bytes = take(lib.free, out);
            lib.check(status)?;
            if bytes.is_empty() {
                return Ok(None);
            }
            decode_source_batch(&bytes).map(Some).map_err(|e| {
                ConnectError::fatal(format!(
                    "plugin {} returned malformed records: {e}",
                    lib.path.display()
                ))
            })
        })
    }

    async fn stop(&mut self) {
        self.close();
    }
}

/// What sink and source connectors alike answer from the library.
macro_rules! connector_basics {
    () => {
        fn info(&self) -> PluginInfo {
            self.0.info.clone()
        }
        fn config_definition(&self) -> serde_json::Value {
            self.0.config_definition.clone()
        }
        fn validate(&self, config: &ConfigMap) -> Result<(), ConfigError> {
            self.0.validate(config)
        }
        fn task_configs(&self, config: &ConfigMap, max_tasks: u32) -> Vec<ConfigMap> {
            self.0.task_configs(config, max_tasks)
        }
    };
}

struct NativeSink(Arc<NativeLibrary>);
struct NativeSource(Arc<NativeLibrary>);

impl SinkConnector for NativeSink {
    connector_basics!();
    fn create_task(
        &self,
        config: &ConfigMap,
        context: TaskContext,
    ) -> Result<Box<dyn SinkTask>, ConnectError> {
        Ok(Box::new(self.0.open(config, &context, None)?))
    }
}

impl SourceConnector for NativeSource {
    connector_basics!();
    fn topics(&self, config: &ConfigMap) -> Vec<String> {
        config
            .get("topic")
            .map(|t| vec![t.clone()])
            .unwrap_or_default()
    }
    fn create_task(
        &self,
        config: &ConfigMap,
        context: TaskContext,
        offsets: SourceOffsets,
    ) -> Result<Box<dyn SourceTask>, ConnectError> {
        Ok(Box::new(self.0.open(config, &context, Some(&offsets))?))
    }
}

/// Loads every shared library in the `plugin.path` directories. Each one
/// that fails is returned with its reason (and logged); the rest load.
pub fn scan(dirs: &[PathBuf]) -> (Vec<Plugin>, Vec<(PathBuf, String)>) {
    let mut plugins = Vec::new();
    let mut failures = Vec::new();
    for dir in dirs {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "plugin.path directory cannot be read; skipped");
                failures.push((dir.clone(), format!("cannot read the directory: {e}")));
                continue;
            }
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("so" | "dylib" | "dll")
                )
            })
            .collect();
        paths.sort();
        for path in paths {
            match NativeLibrary::load(&path) {
                Ok(plugin) => {
                    let info = plugin.info();
                    tracing::info!(path = %path.display(), class = info.class, version = info.version, kind = info.kind.as_str(), "loaded native plugin");
                    plugins.push(plugin);
                }
                Err(reason) => {
                    tracing::error!(path = %path.display(), reason = %reason, "native plugin not loaded; the worker carries on without it");
                    failures.push((path, reason));
                }
            }
        }
    }
    (plugins, failures)
}
