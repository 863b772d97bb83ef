//! The wasmtime host for transform components (`sdk/wit/transform.wit`).
//!
//! One [`WasmHost`] (engine) per worker; one [`WasmTransform`] (store and
//! instance) per transform per task. Guests get WASI with nothing granted:
//! no files, no environment, no network; stdout and stderr are discarded.
//! Each call has a time limit (epoch interruption) and a memory limit; a
//! trap discards the instance and a fresh one takes its place.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sluice_sdk::{ConnectError, ErrorKind, Header, Record};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

mod bindings {
    wasmtime::component::bindgen!({
        path: "../sdk/wit",
        world: "transform",
    });
}

use bindings::Transform as TransformWorld;
use bindings::sluice::transform::types::{
    ErrorClass, Header as WitHeader, KafkaRecord, TransformError as WitError,
};

/// How often the engine's epoch advances; the unit of the time limit.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Limits per transform instance.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub call_timeout: Duration,
    pub memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(5),
            memory_bytes: 256 * 1024 * 1024,
        }
    }
}

/// The worker's WASM engine and its epoch clock.
#[derive(Clone)]
pub struct WasmHost {
    engine: Engine,
    linker: Arc<Linker<GuestState>>,
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

impl WasmHost {
    pub fn new() -> anyhow::Result<Self> {
        let mut config = Config::new();
        config.wasm_component_model(true).epoch_interruption(true);
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
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
            _ticker: Arc::new(EpochTicker { stop }),
        })
    }

    /// Compiles a component and checks it implements the transform world.
    pub fn load(&self, path: &Path) -> anyhow::Result<Component> {
        let component = Component::from_file(&self.engine, path)
            .map_err(|e| anyhow::anyhow!("loading WASM component {}: {e:#}", path.display()))?;
        // Instantiating once proves every import is satisfiable and the
        // exports match, so a bad module fails at connector creation.
        let mut store = self.store(Limits::default());
        TransformWorld::instantiate(&mut store, &component, &self.linker).map_err(|e| {
            anyhow::anyhow!(
                "WASM component {} does not implement sluice:transform/transformer@0.1.0 with the imports Sluice provides: {e:#}",
                path.display()
            )
        })?;
        Ok(component)
    }

    fn store(&self, limits: Limits) -> Store<GuestState> {
        let wasi = WasiCtxBuilder::new()
            .allow_tcp(false)
            .allow_udp(false)
            .build();
        let state = GuestState {
            wasi,
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(limits.memory_bytes)
                .instances(16)
                .build(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(ticks_for(limits.call_timeout));
        store
    }
}

pub struct GuestState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// One configured transform instance.
pub struct WasmTransform {
    host: WasmHost,
    component: Component,
    config: Vec<(String, String)>,
    limits: Limits,
    name: String,
    live: Option<(Store<GuestState>, TransformWorld)>,
}

impl WasmTransform {
    pub fn new(
        host: &WasmHost,
        component: Component,
        name: &str,
        config: Vec<(String, String)>,
        limits: Limits,
    ) -> Result<Self, ConnectError> {
        let mut t = Self {
            host: host.clone(),
            component,
            config,
            limits,
            name: name.to_string(),
            live: None,
        };
        t.instance()?;
        Ok(t)
    }

    /// The live instance, instantiating and configuring one if needed.
    fn instance(&mut self) -> Result<&mut (Store<GuestState>, TransformWorld), ConnectError> {
        if self.live.is_none() {
            let mut store = self.host.store(self.limits);
            let world = TransformWorld::instantiate(&mut store, &self.component, &self.host.linker)
                .map_err(|e| {
                    ConnectError::fatal(format!("instantiating transform `{}`: {e:#}", self.name))
                })?;
            world
                .sluice_transform_transformer()
                .call_configure(&mut store, &self.config)
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
            self.live = Some((store, world));
        }
        Ok(self.live.as_mut().expect("set above"))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn deadline_ticks(&self) -> u64 {
        ticks_for(self.limits.call_timeout)
    }

    /// Transforms a batch: one result per input, in order. A trap (including
    /// a timeout or exhausted memory) is isolated to the record that caused
    /// it by replaying the batch one record at a time on fresh instances.
    pub fn transform_batch(
        &mut self,
        input: Vec<Record>,
    ) -> Vec<Result<Vec<Record>, ConnectError>> {
        let ticks = self.deadline_ticks();
        let wit: Vec<KafkaRecord> = input.iter().map(to_wit).collect();
        let outcome = match self.instance() {
            Ok((store, world)) => {
                store.set_epoch_deadline(ticks);
                world
                    .sluice_transform_transformer()
                    .call_transform_batch(&mut *store, &wit)
            }
            Err(e) => return input.iter().map(|_| Err(clone_error(&e))).collect(),
        };
        match outcome {
            Ok(results) if results.len() == input.len() => {
                results.into_iter().map(from_wit_result).collect()
            }
            Ok(results) => {
                let e = ConnectError::fatal(format!(
                    "transform `{}` returned {} results for {} records",
                    self.name,
                    results.len(),
                    input.len()
                ));
                input.iter().map(|_| Err(clone_error(&e))).collect()
            }
            Err(trap) => {
                tracing::warn!(transform = %self.name, error = %format!("{trap:#}"), records = input.len(),
                    "transform trapped; replaying the batch record by record on a fresh instance");
                self.live = None;
                wit.into_iter().map(|r| self.transform_one(r)).collect()
            }
        }
    }

    fn transform_one(&mut self, record: KafkaRecord) -> Result<Vec<Record>, ConnectError> {
        let ticks = self.deadline_ticks();
        let (store, world) = self.instance()?;
        store.set_epoch_deadline(ticks);
        match world
            .sluice_transform_transformer()
            .call_transform(&mut *store, &record)
        {
            Ok(result) => from_wit_result(result),
            Err(trap) => {
                self.live = None;
                let timed_out = trap
                    .downcast_ref::<wasmtime::Trap>()
                    .is_some_and(|t| *t == wasmtime::Trap::Interrupt);
                let what = if timed_out {
                    format!("exceeded its time limit of {:?}", self.limits.call_timeout)
                } else {
                    format!("trapped: {trap:#}")
                };
                Err(ConnectError::data(format!(
                    "transform `{}` {what}",
                    self.name
                )))
            }
        }
    }
}

fn ticks_for(timeout: Duration) -> u64 {
    (timeout.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
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
    }
}

fn from_wit_result(r: Result<Vec<KafkaRecord>, WitError>) -> Result<Vec<Record>, ConnectError> {
    match r {
        Ok(records) => Ok(records.into_iter().map(from_wit).collect()),
        Err(e) => {
            let kind = match e.class {
                ErrorClass::Data => ErrorKind::Data,
                ErrorClass::Retriable => ErrorKind::Retriable,
                ErrorClass::Fatal => ErrorKind::Fatal,
            };
            Err(ConnectError::new(kind, e.message))
        }
    }
}
