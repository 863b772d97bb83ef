//! The wasmtime host for transform components (`sdk/wit/transform.wit`).
//!
//! One [`WasmHost`] (engine, linker, compiled-code cache) per worker; one
//! [`WasmTransform`] (store and instance) per transform per task.
//!
//! The sandbox: guests get WASI preview 2 with nothing granted: no
//! preopened directories (every filesystem call fails), no environment, no
//! arguments; clocks and random work; stdout and stderr go to the worker's
//! log. A component that imports networking (`wasi:sockets`, `wasi:http`)
//! is rejected when the connector is created. Each call has a time limit
//! (epoch interruption while the guest computes; a wait on a clock that
//! would end past the deadline is a timeout at once, so sleeping cannot
//! outlast it) and each instance
//! a memory limit on all its linear memories together, with bounded
//! counts of memories, tables, table elements and core instances; a trap,
//! a timeout or a limit reached discards the instance and is isolated to
//! its record.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use sha2::Digest;
use sluice_sdk::{ConnectError, ErrorKind, Header, Record, codec};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::component::{HasData, Resource};
use wasmtime::{Config, Engine, ResourceLimiter, Store};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::clocks::{WasiClocksCtxView, WasiClocksView};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::config::TransformLimits;
use crate::metrics::TransformMetrics;

mod records_world {
    wasmtime::component::bindgen!({
        path: "../sdk/wit",
        world: "transform",
    });
}

mod bytes_world {
    wasmtime::component::bindgen!({
        path: "../sdk/wit",
        world: "bytes",
    });
}

use records_world::Transform as RecordsWorld;
use records_world::sluice::transform::types::{
    ErrorClass, Header as WitHeader, KafkaRecord, TransformError as WitError,
};

/// The interface a records-world component exports.
pub const RECORDS_EXPORT: &str = "sluice:transform/transformer@0.1.0";
/// Import namespaces a transform may not use: no network.
const DENIED_IMPORTS: [&str; 2] = ["wasi:sockets/", "wasi:http/"];

/// How often the engine's epoch advances; the unit of the time limit.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Compilations, for the cache's effect to be seen (and tested).
#[derive(Debug, Default)]
pub struct CompileStats {
    pub compiled: AtomicU64,
    pub cache_hits: AtomicU64,
}

/// The worker's WASM engine, linker, epoch clock and compiled-code cache.
#[derive(Clone)]
pub struct WasmHost {
    engine: Engine,
    linker: Arc<Linker<GuestState>>,
    cache_dir: Option<PathBuf>,
    stats: Arc<CompileStats>,
    compilations: prometheus::IntCounterVec,
    _ticker: Arc<EpochTicker>,
}

struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Which of the two worlds a component implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// `sluice:transform/transformer`: typed records.
    Records,
    /// `bytes`: one encoded buffer in, one out.
    Bytes,
}

/// A compiled, checked component.
#[derive(Clone)]
pub struct LoadedModule {
    pub component: Component,
    pub flavor: Flavor,
    pub path: PathBuf,
}

impl WasmHost {
    /// `cache_dir`: where compiled code is kept between starts (created
    /// if missing); `None` compiles on every start.
    pub fn new(
        cache_dir: Option<PathBuf>,
        compilations: prometheus::IntCounterVec,
    ) -> anyhow::Result<Self> {
        let mut config = Config::new();
        config.wasm_component_model(true).epoch_interruption(true);
        // For profiling guests: names their compiled functions in
        // /tmp/perf-PID.map, which perf reads (and BENCHMARKS.md maps
        // callgrind's addresses with).
        if std::env::var_os("SLUICE_WASM_PERF_MAP").is_some_and(|v| v == "1") {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        // The monotonic clock again, with no wait past the call's deadline:
        // a guest blocked in the host is out of the epoch's reach.
        linker.allow_shadowing(true);
        monotonic_clock::add_to_linker::<GuestState, DeadlineClocks>(&mut linker, |s| {
            DeadlineClock {
                deadline: s.deadline,
                clocks: s.clocks(),
            }
        })?;
        linker.allow_shadowing(false);
        if let Some(dir) = &cache_dir {
            std::fs::create_dir_all(dir).map_err(|e| {
                anyhow::anyhow!("creating the WASM cache directory {}: {e}", dir.display())
            })?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                // Compiled code is loaded as trusted: only this user may write it.
                let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (weak_engine, stop_flag) = (engine.weak(), stop.clone());
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while !stop_flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak_engine.upgrade() {
                        Some(e) => e.increment_epoch(),
                        None => break,
                    }
                }
            })?;
        Ok(Self {
            engine,
            linker: Arc::new(linker),
            cache_dir,
            stats: Arc::new(CompileStats::default()),
            compilations,
            _ticker: Arc::new(EpochTicker { stop }),
        })
    }

    pub fn stats(&self) -> &CompileStats {
        &self.stats
    }

    /// Reads, compiles (or loads from the cache) and checks a component:
    /// its size, its imports against the sandbox, and that it implements one
    /// of the two worlds. Every failure names what was wrong.
    pub fn load(&self, path: &Path, limits: &TransformLimits) -> anyhow::Result<LoadedModule> {
        let size = std::fs::metadata(path)
            .map_err(|e| anyhow::anyhow!("loading WASM component {}: {e}", path.display()))?
            .len();
        if size > limits.module_bytes {
            anyhow::bail!(
                "WASM component {} is {size} bytes, over the limit of {} (limits.module.bytes)",
                path.display(),
                limits.module_bytes
            );
        }
        let bytes = std::fs::read(path)
            .map_err(|e| anyhow::anyhow!("loading WASM component {}: {e}", path.display()))?;
        let component = self
            .compile(&bytes)
            .map_err(|e| anyhow::anyhow!("loading WASM component {}: {e:#}", path.display()))?;
        let ty = component.component_type();
        for (name, _) in ty.imports(&self.engine) {
            if DENIED_IMPORTS.iter().any(|d| name.starts_with(d)) {
                anyhow::bail!(
                    "WASM component {} imports `{name}`: transforms run without network access, so it cannot be used",
                    path.display()
                );
            }
        }
        let exports: Vec<(String, bool)> = ty
            .exports(&self.engine)
            .map(|(n, item)| {
                (
                    n.to_string(),
                    matches!(item.ty, ComponentItem::ComponentFunc(_)),
                )
            })
            .collect();
        let flavor = if exports.iter().any(|(n, _)| n == RECORDS_EXPORT) {
            Flavor::Records
        } else if exports.iter().any(|(n, f)| n == "transform-batch" && *f) {
            Flavor::Bytes
        } else {
            let names: Vec<&str> = exports.iter().map(|(n, _)| n.as_str()).collect();
            anyhow::bail!(
                "WASM component {} exports neither `{RECORDS_EXPORT}` nor the bytes world's `transform-batch` (it exports: {})",
                path.display(),
                if names.is_empty() {
                    "nothing".to_string()
                } else {
                    names.join(", ")
                }
            );
        };
        let module = LoadedModule {
            component,
            flavor,
            path: path.to_path_buf(),
        };
        // Instantiating once proves every import is satisfiable and the
        // exports have the right types.
        let mut store = self.store("validation", limits);
        Instance::new(&mut store, &module, &self.linker).map_err(|e| {
            anyhow::anyhow!(
                "WASM component {} cannot be instantiated by Sluice (an import it needs is not provided, or an export has the wrong type): {e:#}",
                path.display()
            )
        })?;
        Ok(module)
    }

    fn compile(&self, bytes: &[u8]) -> anyhow::Result<Component> {
        let Some(dir) = &self.cache_dir else {
            self.stats.compiled.fetch_add(1, Ordering::Relaxed);
            self.compilations.with_label_values(&["compiled"]).inc();
            return Ok(Component::new(&self.engine, bytes)?);
        };
        let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut engine_hash);
        let content = sha2::Sha256::digest(bytes);
        let hex: String = content.iter().map(|b| format!("{b:02x}")).collect();
        let file = dir.join(format!("{hex}-{:016x}.cwasm", engine_hash.finish()));
        if file.exists() {
            // SAFETY: the file was written by `precompile_component` below,
            // for this engine configuration (its hash is in the name), in a
            // directory only this user can write.
            match unsafe { Component::deserialize_file(&self.engine, &file) } {
                Ok(c) => {
                    self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                    self.compilations.with_label_values(&["cache_hit"]).inc();
                    return Ok(c);
                }
                Err(e) => {
                    tracing::warn!(file = %file.display(), error = %e, "discarding an unusable cached compilation")
                }
            }
        }
        let started = Instant::now();
        let compiled = self.engine.precompile_component(bytes)?;
        self.stats.compiled.fetch_add(1, Ordering::Relaxed);
        self.compilations.with_label_values(&["compiled"]).inc();
        tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, cache = %file.display(), "compiled WASM component");
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        if let Err(e) = std::fs::write(&tmp, &compiled).and_then(|_| std::fs::rename(&tmp, &file)) {
            tracing::warn!(file = %file.display(), error = %e, "could not cache the compiled component");
            let _ = std::fs::remove_file(&tmp);
        }
        // SAFETY: produced just now by this engine.
        Ok(unsafe { Component::deserialize(&self.engine, &compiled) }?)
    }

    fn store(&self, transform: &str, limits: &TransformLimits) -> Store<GuestState> {
        let name: Arc<str> = Arc::from(transform);
        let wasi = WasiCtxBuilder::new()
            .stdout(GuestLog {
                transform: name.clone(),
                stderr: false,
            })
            .stderr(GuestLog {
                transform: name,
                stderr: true,
            })
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let state = GuestState {
            wasi,
            table: ResourceTable::new(),
            limits: GuestLimits::new(limits.memory_bytes),
            deadline: None,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        set_deadline(&mut store, limits.timeout_ms);
        store
    }
}

/// Arms the time limit of the next call: the epoch deadline for the
/// guest's code, and the instant clock waits are cut at.
fn set_deadline(store: &mut Store<GuestState>, timeout_ms: u64) {
    store.set_epoch_deadline(ticks_for(timeout_ms));
    store.data_mut().deadline = Some(Instant::now() + Duration::from_millis(timeout_ms));
}

/// Core instances a component may create (its modules and adapters).
const MAX_INSTANCES: usize = 64;
/// Linear memories, all instances together; their total size is bounded
/// by `limits.memory.bytes`.
const MAX_MEMORIES: usize = 16;
/// Tables, all instances together.
const MAX_TABLES: usize = 64;
/// Table elements, all tables together (8 bytes or more of host memory
/// each): far above what a language runtime's function table needs.
const MAX_TABLE_ELEMENTS: usize = 4 << 20;

/// The sandbox's limits on one store. Memory is counted over every linear
/// memory of every instance, so a module with many memories cannot
/// multiply `limits.memory.bytes`.
struct GuestLimits {
    memory_limit: usize,
    memory_used: usize,
    table_elements_used: usize,
}

/// A limit of the sandbox that a guest reached: the call traps with it.
#[derive(Debug, thiserror::Error)]
pub enum SandboxLimit {
    #[error("its linear memories would total {wanted} bytes, over limits.memory.bytes={limit}")]
    Memory { wanted: usize, limit: usize },
    #[error("its tables would hold {wanted} elements, over the sandbox's {MAX_TABLE_ELEMENTS}")]
    TableElements { wanted: usize },
}

impl GuestLimits {
    fn new(memory_limit: usize) -> Self {
        Self {
            memory_limit,
            memory_used: 0,
            table_elements_used: 0,
        }
    }
}

impl ResourceLimiter for GuestLimits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let wanted = self
            .memory_used
            .saturating_add(desired.saturating_sub(current));
        if wanted > self.memory_limit {
            return Err(SandboxLimit::Memory {
                wanted,
                limit: self.memory_limit,
            }
            .into());
        }
        self.memory_used = wanted;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let wanted = self
            .table_elements_used
            .saturating_add(desired.saturating_sub(current));
        if wanted > MAX_TABLE_ELEMENTS {
            return Err(SandboxLimit::TableElements { wanted }.into());
        }
        self.table_elements_used = wanted;
        Ok(true)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }
}

/// `wasi:clocks/monotonic-clock` for a guest: WASI's own, but a wait
/// (`subscribe-duration`, `subscribe-instant`) that would end past the
/// current call's deadline traps as a timeout at once.
struct DeadlineClock<'a> {
    deadline: Option<Instant>,
    clocks: WasiClocksCtxView<'a>,
}

struct DeadlineClocks;

impl HasData for DeadlineClocks {
    type Data<'a> = DeadlineClock<'a>;
}

impl monotonic_clock::Host for DeadlineClock<'_> {
    fn now(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        monotonic_clock::Host::now(&mut self.clocks)
    }

    fn resolution(&mut self) -> wasmtime::Result<monotonic_clock::Duration> {
        monotonic_clock::Host::resolution(&mut self.clocks)
    }

    fn subscribe_instant(
        &mut self,
        when: monotonic_clock::Instant,
    ) -> wasmtime::Result<Resource<wasmtime_wasi::p2::DynPollable>> {
        let now = monotonic_clock::Host::now(&mut self.clocks)?;
        self.subscribe_duration(when.saturating_sub(now))
    }

    fn subscribe_duration(
        &mut self,
        nanos: monotonic_clock::Duration,
    ) -> wasmtime::Result<Resource<wasmtime_wasi::p2::DynPollable>> {
        if let Some(deadline) = self.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if u128::from(nanos) >= left.as_nanos() {
                // Waiting would outlast the call's time: it is out of time
                // now (the epoch cannot interrupt a wait in the host).
                return Err(wasmtime::Trap::Interrupt.into());
            }
        }
        monotonic_clock::Host::subscribe_duration(&mut self.clocks, nanos)
    }
}

fn ticks_for(timeout_ms: u64) -> u64 {
    (timeout_ms / EPOCH_TICK.as_millis() as u64).max(1)
}

pub struct GuestState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: GuestLimits,
    /// When the current call's time is up.
    deadline: Option<Instant>,
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// A guest's stdout or stderr, line by line into the worker's log.
#[derive(Clone)]
struct GuestLog {
    transform: Arc<str>,
    stderr: bool,
}

impl IsTerminal for GuestLog {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestLog {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(GuestLogStream::new(self.clone()))
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(GuestLogStream::new(self.clone()))
    }
}

/// Longest line kept before it is logged anyway.
const MAX_LINE: usize = 4096;

struct GuestLogStream {
    log: GuestLog,
    line: Vec<u8>,
}

impl GuestLogStream {
    fn new(log: GuestLog) -> Self {
        Self {
            log,
            line: Vec::new(),
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        while let Some(i) = bytes.iter().position(|b| *b == b'\n') {
            self.line.extend_from_slice(&bytes[..i]);
            self.emit();
            bytes = &bytes[i + 1..];
        }
        self.line.extend_from_slice(bytes);
        if self.line.len() >= MAX_LINE {
            self.emit();
        }
    }

    fn emit(&mut self) {
        if self.line.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.line);
        if self.log.stderr {
            tracing::warn!(transform = %self.log.transform, stream = "stderr", "{text}");
        } else {
            tracing::info!(transform = %self.log.transform, stream = "stdout", "{text}");
        }
        self.line.clear();
    }
}

impl Drop for GuestLogStream {
    fn drop(&mut self) {
        self.emit();
    }
}

#[async_trait::async_trait]
impl Pollable for GuestLogStream {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestLogStream {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for GuestLogStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.emit();
        Poll::Ready(Ok(()))
    }
}

/// A live instance of either world.
enum Instance {
    Records(RecordsWorld),
    Bytes(bytes_world::Bytes),
}

type Outcome = Result<Vec<Record>, ConnectError>;

impl Instance {
    fn new(
        store: &mut Store<GuestState>,
        module: &LoadedModule,
        linker: &Linker<GuestState>,
    ) -> wasmtime::Result<Self> {
        Ok(match module.flavor {
            Flavor::Records => Instance::Records(RecordsWorld::instantiate(
                &mut *store,
                &module.component,
                linker,
            )?),
            Flavor::Bytes => Instance::Bytes(bytes_world::Bytes::instantiate(
                &mut *store,
                &module.component,
                linker,
            )?),
        })
    }

    fn configure(
        &self,
        store: &mut Store<GuestState>,
        config: &[(String, String)],
    ) -> wasmtime::Result<Result<(), ConnectError>> {
        match self {
            Instance::Records(w) => Ok(w
                .sluice_transform_transformer()
                .call_configure(store, config)?
                .map_err(from_wit_error)),
            Instance::Bytes(w) => {
                let out = w.call_configure(store, &codec::encode_config(config))?;
                Ok(codec::decode_status(&out).unwrap_or_else(|e| {
                    Err(ConnectError::fatal(format!(
                        "configure returned a malformed status: {e}"
                    )))
                }))
            }
        }
    }

    /// `Err` is a trap; `Ok(Err)` a malformed answer (per-record replay,
    /// with `records` as they were). Unchanged fields of `records` may be
    /// moved into the outcomes.
    fn batch(
        &self,
        store: &mut Store<GuestState>,
        records: &mut [Record],
    ) -> wasmtime::Result<Result<Vec<Outcome>, String>> {
        match self {
            Instance::Records(w) => {
                let wit: Vec<KafkaRecord> = records.iter().map(to_wit).collect();
                let results = w
                    .sluice_transform_transformer()
                    .call_transform_batch(store, &wit)?;
                Ok(Ok(results.into_iter().map(from_wit_result).collect()))
            }
            Instance::Bytes(w) => {
                let out = w.call_transform_batch(store, &codec::encode_batch(records))?;
                Ok(codec::decode_results_for(&out, records).map_err(|e| e.to_string()))
            }
        }
    }

    fn one(&self, store: &mut Store<GuestState>, record: &Record) -> wasmtime::Result<Outcome> {
        match self {
            Instance::Records(w) => Ok(from_wit_result(
                w.sluice_transform_transformer()
                    .call_transform(store, &to_wit(record))?,
            )),
            Instance::Bytes(_) => Ok(match self.batch(store, &mut [record.clone()])? {
                Ok(mut results) if results.len() == 1 => results.pop().expect("one result"),
                Ok(results) => Err(ConnectError::data(format!(
                    "returned {} results for 1 record",
                    results.len()
                ))),
                Err(malformed) => Err(ConnectError::data(format!(
                    "returned a malformed buffer: {malformed}"
                ))),
            }),
        }
    }
}

/// One configured transform instance, re-created after a trap.
pub struct WasmTransform {
    host: WasmHost,
    module: LoadedModule,
    config: Vec<(String, String)>,
    limits: TransformLimits,
    name: String,
    metrics: TransformMetrics,
    live: Option<(Store<GuestState>, Instance)>,
}

impl WasmTransform {
    pub fn new(
        host: &WasmHost,
        module: LoadedModule,
        name: &str,
        config: Vec<(String, String)>,
        limits: TransformLimits,
        metrics: TransformMetrics,
    ) -> Result<Self, ConnectError> {
        let mut t = Self {
            host: host.clone(),
            module,
            config,
            limits,
            name: name.to_string(),
            metrics,
            live: None,
        };
        t.instance()?;
        Ok(t)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The live instance, instantiating and configuring one if needed.
    fn instance(&mut self) -> Result<&mut (Store<GuestState>, Instance), ConnectError> {
        if self.live.is_none() {
            let mut store = self.host.store(&self.name, &self.limits);
            let instance =
                Instance::new(&mut store, &self.module, &self.host.linker).map_err(|e| {
                    ConnectError::fatal(format!("instantiating transform `{}`: {e:#}", self.name))
                })?;
            instance
                .configure(&mut store, &self.config)
                .map_err(|e| {
                    ConnectError::fatal(format!(
                        "transform `{}` trapped in configure: {e:#}",
                        self.name
                    ))
                })?
                .map_err(|e| {
                    ConnectError::fatal(format!(
                        "transform `{}` rejected its config: {}",
                        self.name, e.message
                    ))
                })?;
            self.live = Some((store, instance));
        }
        Ok(self.live.as_mut().expect("set above"))
    }

    fn discard_instance(&mut self) {
        self.live = None;
        self.metrics.restarts.inc();
    }

    /// One result per input, in order. A trap (including a timeout or
    /// exhausted memory) is isolated to the record that caused it by
    /// replaying the batch one record at a time on fresh instances.
    pub fn transform_batch(&mut self, mut input: Vec<Record>) -> Vec<Outcome> {
        let started = Instant::now();
        self.metrics.calls.inc();
        self.metrics.records_in.inc_by(input.len() as u64);
        let timeout_ms = self.limits.timeout_ms;
        let outcome = match self.instance() {
            Ok((store, instance)) => {
                set_deadline(store, timeout_ms);
                instance.batch(store, &mut input)
            }
            Err(e) => {
                return self.finish(
                    started,
                    input.iter().map(|_| Err(clone_error(&e))).collect(),
                );
            }
        };
        let results = match outcome {
            Ok(Ok(results)) if results.len() == input.len() => results,
            Ok(Ok(results)) => {
                tracing::warn!(transform = %self.name, results = results.len(), records = input.len(),
                    "transform returned the wrong number of results; replaying record by record");
                input.iter().map(|r| self.transform_one(r)).collect()
            }
            Ok(Err(malformed)) => {
                tracing::warn!(transform = %self.name, error = %malformed, "transform returned a malformed buffer; replaying record by record");
                input.iter().map(|r| self.transform_one(r)).collect()
            }
            Err(trap) => {
                tracing::warn!(transform = %self.name, error = %format!("{trap:#}"), records = input.len(),
                    "transform trapped; replaying the batch record by record on fresh instances");
                self.discard_instance();
                input.iter().map(|r| self.transform_one(r)).collect()
            }
        };
        self.finish(started, results)
    }

    fn finish(&self, started: Instant, results: Vec<Outcome>) -> Vec<Outcome> {
        for r in &results {
            match r {
                Ok(out) => self.metrics.records_out.inc_by(out.len() as u64),
                Err(e) => self.metrics.error(e.kind).inc(),
            }
        }
        self.metrics
            .batch_seconds
            .observe(started.elapsed().as_secs_f64());
        results
    }

    /// One record through the component's per-record entry point
    /// (`transform`; a one-record batch for the bytes world). A trap is this
    /// record's `data` error, and the instance is replaced.
    pub fn transform_one(&mut self, record: &Record) -> Outcome {
        let timeout_ms = self.limits.timeout_ms;
        let (store, instance) = self.instance()?;
        set_deadline(store, timeout_ms);
        match instance.one(store, record) {
            Ok(result) => result,
            Err(trap) => {
                self.discard_instance();
                let timed_out = trap
                    .downcast_ref::<wasmtime::Trap>()
                    .is_some_and(|t| *t == wasmtime::Trap::Interrupt);
                let limit = trap.chain().find_map(|e| e.downcast_ref::<SandboxLimit>());
                let (what, class) = match (timed_out, limit) {
                    (true, _) => (
                        format!(
                            "exceeded its time limit of {} ms (limits.timeout.ms)",
                            self.limits.timeout_ms
                        ),
                        "TransformTimeout",
                    ),
                    (false, Some(limit @ SandboxLimit::Memory { .. })) => (
                        format!(
                            "exceeded its memory limit of {} bytes (limits.memory.bytes): {limit}",
                            self.limits.memory_bytes
                        ),
                        "TransformMemoryLimit",
                    ),
                    (false, Some(limit)) => (
                        format!("exceeded a sandbox limit: {limit}"),
                        "TransformTableLimit",
                    ),
                    (false, None) => (format!("trapped: {trap:#}"), "TransformTrap"),
                };
                Err(
                    ConnectError::data(format!("transform `{}` {what}", self.name))
                        .with_class(class),
                )
            }
        }
    }
}

fn clone_error(e: &ConnectError) -> ConnectError {
    ConnectError::new(e.kind, e.full_message())
}

fn to_wit(r: &Record) -> KafkaRecord {
    KafkaRecord {
        topic: r.topic.clone(),
        partition: r.partition,
        offset: r.offset,
        timestamp: r.timestamp,
        key: r.key.clone(),
        value: r.value.clone(),
        headers: r
            .headers
            .iter()
            .map(|h| WitHeader {
                key: h.key.clone(),
                value: h.value.clone(),
            })
            .collect(),
    }
}

fn from_wit(r: KafkaRecord) -> Record {
    Record {
        topic: r.topic,
        partition: r.partition,
        offset: r.offset,
        timestamp: r.timestamp,
        key: r.key,
        value: r.value,
        headers: r
            .headers
            .into_iter()
            .map(|h| Header {
                key: h.key,
                value: h.value,
            })
            .collect(),
        ..Default::default()
    }
}

fn from_wit_error(e: WitError) -> ConnectError {
    let kind = match e.class {
        ErrorClass::Data => ErrorKind::Data,
        ErrorClass::Retriable => ErrorKind::Retriable,
        ErrorClass::Fatal => ErrorKind::Fatal,
    };
    ConnectError::new(kind, e.message)
}

fn from_wit_result(r: Result<Vec<KafkaRecord>, WitError>) -> Outcome {
    r.map(|records| records.into_iter().map(from_wit).collect())
        .map_err(from_wit_error)
}
