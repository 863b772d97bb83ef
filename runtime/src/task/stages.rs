//! The stages every task loop shares: the converter check of consumed
//! records and the transform chain, each failure handled by the task's
//! error policy.

use sluice_sdk::{ConnectError, Record};

use super::TaskEnv;
use super::consume::Consumed;
use crate::errors::{ErrorHandler, Failure, Stage};

/// The converter stage: is each key and value what the connector says it
/// is? Those that are not go to the error handler.
pub(crate) async fn check_converters(
    env: &TaskEnv,
    errors: &ErrorHandler,
    batch: Vec<Consumed>,
) -> Result<Vec<Record>, ConnectError> {
    let mut inputs = Vec::with_capacity(batch.len());
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
    Ok(inputs)
}

/// Runs the chain; records that failed retriably are tried again within
/// `errors.retry.timeout`; what still fails goes to the error handler.
/// Returns the outputs, each with the index of its input.
pub(crate) async fn transform_all(
    env: &mut TaskEnv,
    errors: &ErrorHandler,
    inputs: &[Record],
) -> Result<Vec<(usize, Record)>, ConnectError> {
    let results = env.transform(inputs.to_vec()).await?;
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
                            .transform(vec![inputs[i].clone()])
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
