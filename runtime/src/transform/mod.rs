//! The transform chain a task runs every batch through: WASM components in
//! order, each optionally guarded by a predicate.

pub mod sample;
pub mod wasm;

use std::collections::HashMap;
use std::path::PathBuf;

use sluice_sdk::{ConnectError, Record};

use crate::config::TransformSpec;
use crate::metrics::Metrics;
use wasm::{LoadedModule, WasmHost, WasmTransform};

/// Components compiled for one connector, shared by its tasks.
#[derive(Clone)]
pub struct CompiledChain {
    host: WasmHost,
    stages: Vec<(TransformSpec, LoadedModule)>,
}

impl CompiledChain {
    /// Loads every module; the first that fails is reported by its key.
    pub fn compile(host: &WasmHost, specs: &[TransformSpec]) -> Result<Self, (String, String)> {
        let mut loaded: HashMap<PathBuf, LoadedModule> = HashMap::new();
        let mut stages = Vec::with_capacity(specs.len());
        for spec in specs {
            let module = match loaded.get(&spec.module) {
                Some(m) => m.clone(),
                None => {
                    let m = host.load(&spec.module, &spec.limits).map_err(|e| {
                        (
                            format!("transforms.{}.module", spec.alias),
                            format!("{e:#}"),
                        )
                    })?;
                    loaded.insert(spec.module.clone(), m.clone());
                    m
                }
            };
            stages.push((spec.clone(), module));
        }
        Ok(Self {
            host: host.clone(),
            stages,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// Instances for one task (instantiated and configured).
    pub fn instantiate(
        &self,
        metrics: &Metrics,
        connector: &str,
        task: u32,
    ) -> Result<TransformChain, ConnectError> {
        let mut stages = Vec::with_capacity(self.stages.len());
        for (spec, module) in &self.stages {
            let config = spec
                .config
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let transform = WasmTransform::new(
                &self.host,
                module.clone(),
                &spec.alias,
                config,
                spec.limits,
                metrics.transform(connector, task, &spec.alias),
            )?;
            stages.push(ChainStep {
                transform,
                spec: spec.clone(),
            });
        }
        Ok(TransformChain { stages })
    }
}

/// A failure of one input record somewhere in the chain.
#[derive(Debug)]
pub struct TransformFailure {
    pub transform: String,
    pub error: ConnectError,
}

struct ChainStep {
    transform: WasmTransform,
    spec: TransformSpec,
}

impl ChainStep {
    /// Whether this stage applies to the record (its predicate, negated or not).
    fn applies(&self, record: &Record) -> bool {
        match &self.spec.predicate {
            None => true,
            Some(p) => p.kind.test(record) != self.spec.negate,
        }
    }
}

pub struct TransformChain {
    stages: Vec<ChainStep>,
}

enum Slot {
    /// The stage does not apply: the record passes by unchanged.
    Bypass(usize, Record),
    /// Index into the batch sent to the stage.
    Sent(usize),
}

impl TransformChain {
    /// One result per input record, in order: the records it became (zero
    /// if dropped), or the first failure in the chain.
    pub fn apply(&mut self, input: Vec<Record>) -> Vec<Result<Vec<Record>, TransformFailure>> {
        let mut failures: Vec<Option<TransformFailure>> = input.iter().map(|_| None).collect();
        // (index of the input record, record) flowing through the stages.
        let mut flowing: Vec<(usize, Record)> = input.into_iter().enumerate().collect();
        for stage in self.stages.iter_mut() {
            if flowing.is_empty() {
                break;
            }
            let mut order = Vec::with_capacity(flowing.len());
            let mut sent = Vec::new();
            let mut sent_origin = Vec::new();
            for (origin, record) in flowing {
                if stage.applies(&record) {
                    order.push(Slot::Sent(sent.len()));
                    sent_origin.push(origin);
                    sent.push(record);
                } else {
                    order.push(Slot::Bypass(origin, record));
                }
            }
            let mut results: Vec<Option<Result<Vec<Record>, ConnectError>>> = if sent.is_empty() {
                Vec::new()
            } else {
                stage
                    .transform
                    .transform_batch(sent)
                    .into_iter()
                    .map(Some)
                    .collect()
            };
            let mut next = Vec::with_capacity(order.len());
            for slot in order {
                match slot {
                    Slot::Bypass(origin, record) => next.push((origin, record)),
                    Slot::Sent(i) => {
                        let origin = sent_origin[i];
                        match results[i].take().expect("one result per record sent") {
                            Ok(records) => next.extend(records.into_iter().map(|r| (origin, r))),
                            Err(error) => {
                                failures[origin].get_or_insert(TransformFailure {
                                    transform: stage.spec.alias.clone(),
                                    error,
                                });
                            }
                        }
                    }
                }
            }
            // A record that failed anywhere is out of the chain entirely.
            flowing = next
                .into_iter()
                .filter(|(o, _)| failures[*o].is_none())
                .collect();
        }
        let mut out: Vec<Result<Vec<Record>, TransformFailure>> = failures
            .into_iter()
            .map(|f| f.map_or_else(|| Ok(Vec::new()), Err))
            .collect();
        for (origin, record) in flowing {
            if let Ok(records) = &mut out[origin] {
                records.push(record);
            }
        }
        out
    }
}
