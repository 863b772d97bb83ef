//! The transform chain a task runs every batch through.

pub mod wasm;

use std::collections::HashMap;
use std::path::PathBuf;

use sluice_sdk::{ConnectError, Record};
use wasmtime::component::Component;

use crate::config::TransformSpec;
use wasm::{Limits, WasmHost, WasmTransform};

/// Components compiled for one connector, shared by its tasks.
#[derive(Clone)]
pub struct CompiledChain {
    host: WasmHost,
    stages: Vec<(TransformSpec, Component)>,
}

impl CompiledChain {
    /// Loads every module; the first that fails is reported by its key.
    pub fn compile(host: &WasmHost, specs: &[TransformSpec]) -> Result<Self, (String, String)> {
        let mut cache: HashMap<PathBuf, Component> = HashMap::new();
        let mut stages = Vec::with_capacity(specs.len());
        for spec in specs {
            let component = match cache.get(&spec.module) {
                Some(c) => c.clone(),
                None => {
                    let c = host.load(&spec.module).map_err(|e| {
                        (
                            format!("transforms.{}.module", spec.alias),
                            format!("{e:#}"),
                        )
                    })?;
                    cache.insert(spec.module.clone(), c.clone());
                    c
                }
            };
            stages.push((spec.clone(), component));
        }
        Ok(Self {
            host: host.clone(),
            stages,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// Instances for one task.
    pub fn instantiate(&self) -> Result<TransformChain, ConnectError> {
        let mut stages = Vec::with_capacity(self.stages.len());
        for (spec, component) in &self.stages {
            let config = spec
                .config
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            stages.push(WasmTransform::new(
                &self.host,
                component.clone(),
                &spec.alias,
                config,
                Limits::default(),
            )?);
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

pub struct TransformChain {
    stages: Vec<WasmTransform>,
}

impl TransformChain {
    /// One result per input record, in order: the records it became (zero
    /// if dropped), or the first failure in the chain.
    pub fn apply(&mut self, input: Vec<Record>) -> Vec<Result<Vec<Record>, TransformFailure>> {
        let n = input.len();
        let mut results: Vec<Result<Vec<Record>, TransformFailure>> =
            (0..n).map(|_| Ok(Vec::new())).collect();
        // (index of the input record, record) flowing through the stages.
        let mut flowing: Vec<(usize, Record)> = input.into_iter().enumerate().collect();
        for stage in self.stages.iter_mut() {
            if flowing.is_empty() {
                break;
            }
            let (origins, records): (Vec<usize>, Vec<Record>) = flowing.into_iter().unzip();
            let outputs = stage.transform_batch(records);
            flowing = Vec::with_capacity(outputs.len());
            for (origin, output) in origins.into_iter().zip(outputs) {
                if results[origin].is_err() {
                    continue;
                }
                match output {
                    Ok(records) => flowing.extend(records.into_iter().map(|r| (origin, r))),
                    Err(error) => {
                        results[origin] = Err(TransformFailure {
                            transform: stage.name().to_string(),
                            error,
                        })
                    }
                }
            }
            flowing.retain(|(origin, _)| results[*origin].is_ok());
        }
        for (origin, record) in flowing {
            if let Ok(out) = &mut results[origin] {
                out.push(record);
            }
        }
        results
    }
}
