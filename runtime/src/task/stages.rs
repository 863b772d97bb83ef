//! The stages every task loop shares: the converter stage of consumed
//! records (a check, or with `schemas.enable` the envelope read), the
//! transform chain, and the schemas of what the chain returns, each failure
//! handled by the task's error policy.

use sluice_sdk::{ConnectError, Record};

use super::TaskEnv;
use super::consume::Consumed;
use crate::errors::{ErrorHandler, Failure, Stage};
use crate::schema::{EnvelopeConverter, SchemaConverter};

/// What the converter stage passed: the records as consumed (what a
/// failure dead-letters, as Kafka Connect dead-letters the original
/// bytes), and, when a converter has schemas, the same records as the
/// transforms see them (payloads, with their schemas).
pub(crate) struct Converted {
    pub inputs: Vec<Record>,
    pub decoded: Option<Vec<Record>>,
}

impl Converted {
    /// The records the transform chain gets.
    pub fn chain_inputs(&self) -> &[Record] {
        self.decoded.as_deref().unwrap_or(&self.inputs)
    }
}

/// The converter stage: is each key and value what the connector says it
/// is (and, with `schemas.enable`, an envelope whose payload fits its
/// schema)? Those that are not go to the error handler.
pub(crate) async fn check_converters(
    env: &TaskEnv,
    errors: &ErrorHandler,
    batch: Vec<Consumed>,
) -> Result<Converted, ConnectError> {
    let envelopes = env.envelopes.any();
    let mut inputs = Vec::with_capacity(batch.len());
    let mut decoded = envelopes.then(|| Vec::with_capacity(batch.len()));
    for Consumed {
        record: r,
        header_error,
    } in batch
    {
        if let Some(e) = header_error {
            errors
                .tolerate_or_fail(Failure {
                    record: Some(&r),
                    stage: Stage::HeaderConverter,
                    component: "header-converter",
                    error: &e,
                    attempts: 1,
                })
                .await?;
            continue;
        }
        if let Some(decoded) = &mut decoded {
            match read_envelopes(env, &r).await {
                Ok(d) => {
                    decoded.push(d);
                    inputs.push(r);
                }
                Err((stage, component, e)) => {
                    errors
                        .tolerate_or_fail(Failure {
                            record: Some(&r),
                            stage,
                            component,
                            error: &e,
                            attempts: 1,
                        })
                        .await?;
                }
            }
            continue;
        }
        let checks = [
            (
                Stage::KeyConverter,
                env.common.key_converter,
                r.key.as_deref(),
            ),
            (
                Stage::ValueConverter,
                env.common.value_converter,
                r.value.as_deref(),
            ),
        ];
        let failed = checks.into_iter().find_map(|(stage, converter, bytes)| {
            converter.check(bytes).err().map(|e| (stage, converter, e))
        });
        match failed {
            None => inputs.push(r),
            Some((stage, converter, e)) => {
                errors
                    .tolerate_or_fail(Failure {
                        record: Some(&r),
                        stage,
                        component: converter.class_name(),
                        error: &e,
                        attempts: 1,
                    })
                    .await?;
            }
        }
    }
    Ok(Converted { inputs, decoded })
}

/// A consumed record as the transforms see it: each part with schemas read
/// from its envelope, the other checked as without schemas.
async fn read_envelopes(
    env: &TaskEnv,
    r: &Record,
) -> Result<Record, (Stage, &'static str, ConnectError)> {
    // The bytes are read, not copied, where a converter has schemas.
    let mut d = Record {
        topic: r.topic.clone(),
        partition: r.partition,
        offset: r.offset,
        timestamp: r.timestamp,
        headers: r.headers.clone(),
        ..Default::default()
    };
    for (stage, converter, envelope, bytes, out, schema) in [
        (
            Stage::KeyConverter,
            env.common.key_converter,
            &env.envelopes.key,
            &r.key,
            &mut d.key,
            &mut d.key_schema,
        ),
        (
            Stage::ValueConverter,
            env.common.value_converter,
            &env.envelopes.value,
            &r.value,
            &mut d.value,
            &mut d.value_schema,
        ),
    ] {
        match envelope {
            None => {
                converter
                    .check(bytes.as_deref())
                    .map_err(|e| (stage, converter.class_name(), e))?;
                out.clone_from(bytes);
            }
            Some(c) => {
                (*schema, *out) = c
                    .read(bytes.as_deref())
                    .await
                    .map_err(|e| (stage, c.class_name(), e))?;
            }
        }
    }
    Ok(d)
}

/// The key and value converters that have schemas (`None`: bytes as
/// they are).
#[derive(Default)]
pub struct Envelopes {
    pub key: Option<SchemaConverter>,
    pub value: Option<SchemaConverter>,
}

impl Envelopes {
    /// The converters of `common`; a registry converter without
    /// `schema.registry.url` uses `builtin`, the worker's registry.
    pub fn new(
        common: &crate::config::CommonConfig,
        builtin: &std::sync::Arc<crate::schema::registry::builtin::BuiltinRegistry>,
    ) -> Self {
        let side = |json: Option<crate::config::JsonSchemas>,
                    registry: &Option<crate::config::RegistrySettings>,
                    is_key: bool| {
            if let Some(settings) = registry {
                use crate::config::RegistryFormat;
                use crate::schema::{avro_converter, json_schema_converter, protobuf_converter};
                let registry = crate::schema::registry::for_settings(settings, builtin);
                let settings = settings.clone();
                return Some(match settings.format {
                    RegistryFormat::Avro => SchemaConverter::Avro(
                        avro_converter::AvroConverter::new(registry, settings, is_key),
                    ),
                    RegistryFormat::JsonSchema => SchemaConverter::JsonSchema(
                        json_schema_converter::JsonSchemaConverter::new(registry, settings, is_key),
                    ),
                    RegistryFormat::Protobuf => SchemaConverter::Protobuf(
                        protobuf_converter::ProtobufConverter::new(registry, settings, is_key),
                    ),
                });
            }
            json.map(|j| SchemaConverter::Json(EnvelopeConverter::new(j)))
        };
        Envelopes {
            key: side(common.key_schemas, &common.key_registry, true),
            value: side(common.value_schemas, &common.value_registry, false),
        }
    }

    pub fn any(&self) -> bool {
        self.key.is_some() || self.value.is_some()
    }
}

/// After the transforms, with schemas: each output's schemas, followed
/// from its input's when a transform returned it (`sluice::schema::follow`),
/// and with `write` (sources and streams) its key and value written as
/// envelopes. An output that has no schema, or does not fit the one it
/// has, fails at the converter stage. Without schemas, the outputs as
/// they are.
pub(crate) async fn schema_outputs(
    env: &TaskEnv,
    errors: &ErrorHandler,
    inputs: &[Record],
    chain_inputs: &[Record],
    outputs: Vec<(usize, Record)>,
    write: bool,
) -> Result<Vec<(usize, Record)>, ConnectError> {
    if !env.envelopes.any() {
        return Ok(outputs);
    }
    let mut kept = Vec::with_capacity(outputs.len());
    for (i, mut r) in outputs {
        let mut failed = None;
        for (stage, envelope, bytes, schema, input_schema) in [
            (
                Stage::KeyConverter,
                &env.envelopes.key,
                &mut r.key,
                &mut r.key_schema,
                &chain_inputs[i].key_schema,
            ),
            (
                Stage::ValueConverter,
                &env.envelopes.value,
                &mut r.value,
                &mut r.value_schema,
                &chain_inputs[i].value_schema,
            ),
        ] {
            let Some(c) = envelope else { continue };
            let result = if schema.is_none() && input_schema.is_some() {
                // A transform returned it: its schema follows.
                c.follow(&r.topic, input_schema.as_ref(), bytes.as_deref(), write)
                    .await
            } else if write {
                c.write_bytes(&r.topic, schema.as_ref(), bytes.as_deref())
                    .await
                    .map(|b| (schema.clone(), b))
            } else {
                continue;
            };
            match result {
                Ok((s, b)) => (*schema, *bytes) = (s, b),
                Err(e) => {
                    failed = Some((stage, c.class_name(), e));
                    break;
                }
            }
        }
        match failed {
            None => kept.push((i, r)),
            Some((stage, component, e)) => {
                errors
                    .tolerate_or_fail(Failure {
                        record: Some(&inputs[i]),
                        stage,
                        component,
                        error: &e,
                        attempts: 1,
                    })
                    .await?;
            }
        }
    }
    Ok(kept)
}

/// Runs the chain; records that failed retriably are tried again within
/// `errors.retry.timeout`; what still fails goes to the error handler.
/// Returns the outputs, each with the index of its input.
///
/// `chain_inputs` are what the chain gets (payloads, with schemas);
/// `inputs` what a failure reports (the records as consumed).
pub(crate) async fn transform_all(
    env: &mut TaskEnv,
    errors: &ErrorHandler,
    inputs: &[Record],
    chain_inputs: &[Record],
) -> Result<Vec<(usize, Record)>, ConnectError> {
    let results = env.transform(chain_inputs.to_vec()).await?;
    let mut outputs = Vec::with_capacity(results.len());
    for (i, result) in results.into_iter().enumerate() {
        let mut result = result;
        let mut retrier = errors.retrier(Stage::Transformation, false);
        loop {
            match result {
                Ok(records) => {
                    outputs.extend(records.into_iter().map(|r| (i, r)));
                    break;
                }
                Err(failure) => {
                    if retrier.again(&failure.error).await {
                        result = env
                            .transform(vec![chain_inputs[i].clone()])
                            .await?
                            .pop()
                            .expect("one result");
                        continue;
                    }
                    env.count("transform", "failed", 1);
                    let component = format!("transform `{}`", failure.transform);
                    errors
                        .tolerate_or_fail(Failure {
                            record: Some(&inputs[i]),
                            stage: Stage::Transformation,
                            component: &component,
                            error: &failure.error,
                            attempts: retrier.attempts(),
                        })
                        .await?;
                    break;
                }
            }
        }
    }
    env.count("transform", "ok", outputs.len());
    Ok(outputs)
}
