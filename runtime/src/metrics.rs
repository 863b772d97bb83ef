//! Prometheus metrics, labelled by connector and task.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// Records by stage (poll, transform, produce, consume, put) and outcome.
    pub records: IntCounterVec,
    pub batch_seconds: HistogramVec,
    pub transform_seconds: HistogramVec,
    pub data_loss: IntCounterVec,
    pub commit_failures: IntCounterVec,
    /// 1 for the task's current state, 0 for the others.
    pub task_state: IntGaugeVec,
    transform_calls: IntCounterVec,
    transform_records: IntCounterVec,
    transform_errors: IntCounterVec,
    transform_call_seconds: HistogramVec,
    wasm_restarts: IntCounterVec,
    pub wasm_compilations: IntCounterVec,
    /// Failed records by stage and error class (tolerated or not).
    pub errors: IntCounterVec,
    /// Records written to a dead-letter queue.
    pub dlq_records: IntCounterVec,
    /// Retries after retriable failures, by stage.
    pub retries: IntCounterVec,
    /// Committed offset to the end of each partition, per sink connector.
    pub consumer_lag: IntGaugeVec,
    pub rebalances: IntCounterVec,
    /// Partitions each rebalance moved, `change` = gained or lost.
    pub rebalance_partitions: IntCounterVec,
    pub assigned_partitions: IntGaugeVec,
    /// Backpressure: partitions paused while a slow batch is written.
    pub paused_partitions: IntGaugeVec,
    pub backpressure_pauses: IntCounterVec,
    /// From `x-produce-timestamp-ms` (stamped by source tasks) to the sink's write.
    pub e2e_latency: HistogramVec,
    pub batch_size: HistogramVec,
    /// A sink's write of one batch: `put` and `flush`, or the exactly-once
    /// transaction with its offsets (Kafka Connect's put-batch time).
    pub sink_put_seconds: HistogramVec,
    /// Kafka transactions of exactly-once source and stream tasks, by
    /// outcome: committed, aborted, ambiguous (the producer was re-created
    /// after a commit whose result is unknown) or fenced.
    pub transactions: IntCounterVec,
    /// Automatic restarts of FAILED tasks (`errors.restart.policy`).
    pub task_auto_restarts: IntCounterVec,
    /// Automatic restarts of a task since it last ran for
    /// `errors.restart.max.delay.ms`.
    pub task_restart_attempts: IntGaugeVec,
    /// `sluice_source_<name>`: the gauges source tasks publish
    /// ([`sluice_sdk::SourceGauge`]), registered at first sight.
    source_gauges:
        std::sync::Arc<std::sync::Mutex<std::collections::HashMap<&'static str, IntGaugeVec>>>,
}

/// The header source tasks stamp and sinks measure end-to-end latency from.
pub const LATENCY_HEADER: &str = "x-produce-timestamp-ms";

/// One transform's series, resolved once per task.
#[derive(Clone)]
pub struct TransformMetrics {
    pub calls: prometheus::IntCounter,
    pub records_in: prometheus::IntCounter,
    pub records_out: prometheus::IntCounter,
    errors: [prometheus::IntCounter; 3],
    pub batch_seconds: prometheus::Histogram,
    pub restarts: prometheus::IntCounter,
}

impl TransformMetrics {
    pub fn error(&self, kind: sluice_sdk::ErrorKind) -> &prometheus::IntCounter {
        match kind {
            sluice_sdk::ErrorKind::Data => &self.errors[0],
            sluice_sdk::ErrorKind::Retriable => &self.errors[1],
            sluice_sdk::ErrorKind::Fatal => &self.errors[2],
        }
    }
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let records = IntCounterVec::new(
            Opts::new(
                "sluice_records_total",
                "Records by connector, task, stage and outcome",
            ),
            &["connector", "task", "stage", "outcome"],
        )
        .expect("valid metric");
        let batch_seconds = HistogramVec::new(
            HistogramOpts::new(
                "sluice_batch_commit_seconds",
                "Time from a batch's poll to its commit",
            )
            .buckets(vec![0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0]),
            &["connector", "task"],
        )
        .expect("valid metric");
        let transform_seconds = HistogramVec::new(
            HistogramOpts::new(
                "sluice_transform_batch_seconds",
                "Time through the transform chain per batch",
            )
            .buckets(vec![
                0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0,
            ]),
            &["connector", "task"],
        )
        .expect("valid metric");
        let data_loss = IntCounterVec::new(
            Opts::new(
                "sluice_data_loss_total",
                "Times a consumer found its position gone from the broker (records lost before they were read)",
            ),
            &["connector", "topic", "partition"],
        )
        .expect("valid metric");
        let commit_failures = IntCounterVec::new(
            Opts::new("sluice_commit_failures_total", "Failed offset commits"),
            &["connector", "task"],
        )
        .expect("valid metric");
        let task_state = IntGaugeVec::new(
            Opts::new("sluice_task_state", "1 for the state each task is in"),
            &["connector", "task", "state"],
        )
        .expect("valid metric");
        let transform_calls = IntCounterVec::new(
            Opts::new(
                "sluice_transform_calls_total",
                "Batch calls into each WASM transform",
            ),
            &["connector", "task", "transform"],
        )
        .expect("valid metric");
        let transform_records = IntCounterVec::new(
            Opts::new(
                "sluice_transform_records_total",
                "Records into (in) and out of (out) each WASM transform",
            ),
            &["connector", "task", "transform", "direction"],
        )
        .expect("valid metric");
        let transform_errors = IntCounterVec::new(
            Opts::new(
                "sluice_transform_errors_total",
                "Records each WASM transform failed, by error class",
            ),
            &["connector", "task", "transform", "class"],
        )
        .expect("valid metric");
        let transform_call_seconds = HistogramVec::new(
            HistogramOpts::new(
                "sluice_transform_call_seconds",
                "Time per batch call into each WASM transform",
            )
            .buckets(vec![
                0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0,
            ]),
            &["connector", "task", "transform"],
        )
        .expect("valid metric");
        let wasm_restarts = IntCounterVec::new(
            Opts::new(
                "sluice_wasm_instance_restarts_total",
                "WASM instances discarded after a trap, timeout or memory blow-up",
            ),
            &["connector", "task", "transform"],
        )
        .expect("valid metric");
        let wasm_compilations = IntCounterVec::new(
            Opts::new(
                "sluice_wasm_compilations_total",
                "WASM components compiled, or loaded compiled from the disk cache",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        let errors = IntCounterVec::new(
            Opts::new(
                "sluice_errors_total",
                "Records (or polls) that failed, by stage and error class",
            ),
            &["connector", "task", "stage", "error_class"],
        )
        .expect("valid metric");
        let dlq_records = IntCounterVec::new(
            Opts::new(
                "sluice_dlq_records_total",
                "Records written to the dead-letter queue, by stage and error class",
            ),
            &["connector", "task", "stage", "error_class"],
        )
        .expect("valid metric");
        let retries = IntCounterVec::new(
            Opts::new(
                "sluice_retries_total",
                "Retries after retriable failures, by stage",
            ),
            &["connector", "task", "stage"],
        )
        .expect("valid metric");
        let consumer_lag = IntGaugeVec::new(
            Opts::new(
                "sluice_consumer_lag",
                "Records between a sink's committed offset and the end of the partition",
            ),
            &["connector", "topic", "partition"],
        )
        .expect("valid metric");
        let rebalances = IntCounterVec::new(
            Opts::new(
                "sluice_rebalances_total",
                "Consumer group rebalances that gave partitions to a consumer task or took some away (not its own stop)",
            ),
            &["connector", "task"],
        )
        .expect("valid metric");
        let rebalance_partitions = IntCounterVec::new(
            Opts::new(
                "sluice_rebalance_partitions_total",
                "Partitions a consumer task gained or lost in rebalances",
            ),
            &["connector", "task", "change"],
        )
        .expect("valid metric");
        let paused_partitions = IntGaugeVec::new(
            Opts::new(
                "sluice_consumer_paused_partitions",
                "Partitions a consumer task has paused because a batch is slow to write (backpressure)",
            ),
            &["connector", "task"],
        )
        .expect("valid metric");
        let backpressure_pauses = IntCounterVec::new(
            Opts::new(
                "sluice_consumer_backpressure_pauses_total",
                "Times a consumer task paused its partitions while a slow batch was written",
            ),
            &["connector", "task"],
        )
        .expect("valid metric");
        let assigned_partitions = IntGaugeVec::new(
            Opts::new(
                "sluice_assigned_partitions",
                "Partitions assigned to each sink task",
            ),
            &["connector", "task"],
        )
        .expect("valid metric");
        let e2e_latency = HistogramVec::new(
            HistogramOpts::new(
                "streaming_e2e_latency_seconds",
                "End-to-end latency: from the source's x-produce-timestamp-ms stamp to the sink's write",
            )
            .buckets(vec![0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0]),
            &["topic", "pipeline"],
        )
        .expect("valid metric");
        let batch_size = HistogramVec::new(
            HistogramOpts::new("sluice_batch_size", "Records per batch")
                .buckets(vec![1.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 5000.0, 10000.0]),
            &["connector", "task"],
        )
        .expect("valid metric");
        let sink_put_seconds = HistogramVec::new(
            HistogramOpts::new(
                "sluice_sink_put_batch_seconds",
                "Time a sink task took to write one batch (put and flush, or the exactly-once transaction with its offsets)",
            )
            .buckets(vec![0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0]),
            &["connector", "task"],
        )
        .expect("valid metric");
        let transactions = IntCounterVec::new(
            Opts::new(
                "sluice_transactions_total",
                "Kafka transactions of exactly-once source and stream tasks, by outcome",
            ),
            &["connector", "task", "outcome"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(transactions.clone()))
            .expect("metric registered once");
        let task_auto_restarts = IntCounterVec::new(
            Opts::new(
                "sluice_task_auto_restarts_total",
                "Automatic restarts of FAILED tasks (errors.restart.policy=backoff)",
            ),
            &["connector", "task"],
        )
        .expect("valid metric");
        let task_restart_attempts = IntGaugeVec::new(
            Opts::new(
                "sluice_task_restart_attempts",
                "Automatic restarts of a task in a row (reset once it has run for 5 minutes since the last)",
            ),
            &["connector", "task"],
        )
        .expect("valid metric");
        for c in [
            Box::new(task_auto_restarts.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(task_restart_attempts.clone()),
        ] {
            registry.register(c).expect("metric registered once");
        }
        for c in [
            Box::new(consumer_lag.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(rebalances.clone()),
            Box::new(rebalance_partitions.clone()),
            Box::new(assigned_partitions.clone()),
            Box::new(paused_partitions.clone()),
            Box::new(backpressure_pauses.clone()),
            Box::new(e2e_latency.clone()),
            Box::new(batch_size.clone()),
            Box::new(sink_put_seconds.clone()),
        ] {
            registry.register(c).expect("metric registered once");
        }
        for c in [
            Box::new(errors.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(dlq_records.clone()),
            Box::new(retries.clone()),
        ] {
            registry.register(c).expect("metric registered once");
        }
        for c in [
            Box::new(transform_calls.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(transform_records.clone()),
            Box::new(transform_errors.clone()),
            Box::new(transform_call_seconds.clone()),
            Box::new(wasm_restarts.clone()),
            Box::new(wasm_compilations.clone()),
        ] {
            registry.register(c).expect("metric registered once");
        }
        for c in [
            Box::new(records.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(batch_seconds.clone()),
            Box::new(transform_seconds.clone()),
            Box::new(data_loss.clone()),
            Box::new(commit_failures.clone()),
            Box::new(task_state.clone()),
        ] {
            registry.register(c).expect("metric registered once");
        }
        Self {
            registry,
            records,
            batch_seconds,
            transform_seconds,
            data_loss,
            commit_failures,
            task_state,
            transform_calls,
            transform_records,
            transform_errors,
            transform_call_seconds,
            wasm_restarts,
            wasm_compilations,
            errors,
            dlq_records,
            retries,
            consumer_lag,
            rebalances,
            rebalance_partitions,
            assigned_partitions,
            paused_partitions,
            backpressure_pauses,
            e2e_latency,
            batch_size,
            sink_put_seconds,
            transactions,
            task_auto_restarts,
            task_restart_attempts,
            source_gauges: Default::default(),
        }
    }

    /// The family of a gauge a source task publishes, labelled by
    /// connector and task. `None` for a name Prometheus does not allow
    /// (said once in the log).
    pub fn source_gauge(&self, name: &'static str, help: &'static str) -> Option<IntGaugeVec> {
        let mut families = self.source_gauges.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(family) = families.get(name) {
            return Some(family.clone());
        }
        let family = IntGaugeVec::new(
            Opts::new(format!("sluice_source_{name}"), help),
            &["connector", "task"],
        )
        .and_then(|family| {
            self.registry.register(Box::new(family.clone()))?;
            Ok(family)
        });
        match family {
            Ok(family) => {
                families.insert(name, family.clone());
                Some(family)
            }
            Err(e) => {
                tracing::warn!(gauge = name, error = %e, "a source task's gauge cannot be exported");
                None
            }
        }
    }

    pub fn transform(&self, connector: &str, task: u32, transform: &str) -> TransformMetrics {
        let task = task.to_string();
        let l = [connector, task.as_str(), transform];
        TransformMetrics {
            calls: self.transform_calls.with_label_values(&l),
            records_in: self
                .transform_records
                .with_label_values(&[l[0], l[1], l[2], "in"]),
            records_out: self
                .transform_records
                .with_label_values(&[l[0], l[1], l[2], "out"]),
            errors: ["data", "retriable", "fatal"].map(|c| {
                self.transform_errors
                    .with_label_values(&[l[0], l[1], l[2], c])
            }),
            batch_seconds: self.transform_call_seconds.with_label_values(&l),
            restarts: self.wasm_restarts.with_label_values(&l),
        }
    }

    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding cannot fail");
        String::from_utf8(buf).expect("prometheus text is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
