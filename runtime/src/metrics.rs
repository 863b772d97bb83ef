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
