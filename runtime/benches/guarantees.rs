//! What each delivery guarantee costs, by batch size: throughput of the
//! three task kinds at at-most-once, at-least-once and exactly-once, with
//! batches of 10, 100, 1000 and 10000 records, as ratios to at-least-once
//! at the same batch size, all in one run on one broker and database.
//!
//! - source: datagen -> Kafka (`batch.size` records per poll; exactly-once
//!   commits a transaction per poll);
//! - stream: Kafka -> Kafka (`batch.max.records`; exactly-once sends the
//!   consumed offsets in each batch's transaction);
//! - sink: Kafka -> PostgreSQL upsert (`batch.max.records`; exactly-once
//!   writes the offsets in each batch's database transaction).
//!
//!     bench/run.sh guarantees     (starts PostgreSQL and Apache Kafka)
//!
//! Every run is made on the embedded broker and, when `bench/run.sh`
//! started one, on a real Apache Kafka broker (`scripts/kafka.sh`): the
//! embedded broker accepts the transactional API but writes no transaction
//! markers, a real one writes (and replicates) a commit marker in every
//! partition a transaction touched, which is what exactly-once costs there.
//!
//! Environment: SLUICE_BENCH_POSTGRES_URL (required),
//! SLUICE_BENCH_KAFKA_BOOTSTRAP (the real broker; without it its rows say
//! "not run"), SLUICE_BENCH_GUARANTEE_RECORDS (default 100000; a run with
//! batches of B records processes at most 1000 B of them).

use std::time::{Duration, Instant};

use sluice_runtime::config::ConnectorSpec;
use sluice_runtime::kafka::EmbeddedBroker;
use sluice_runtime::worker::Worker;

mod common;
use common::{BenchBroker, pg_exec, produce_orders};

/// Spread over partitions: the embedded broker keeps about 5 MiB each.
const PARTITIONS: i32 = 32;
const BATCHES: [usize; 4] = [10, 100, 1000, 10000];
const GUARANTEES: [&str; 3] = ["at-most-once", "at-least-once", "exactly-once"];

/// Records a connector's tasks counted at `stage` (ok).
fn counted(worker: &Worker, connector: &str, stage: &str) -> u64 {
    let prefix =
        format!("sluice_records_total{{connector=\"{connector}\",outcome=\"ok\",stage=\"{stage}\"");
    worker
        .metrics()
        .render()
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Creates the connector, waits until `n` records passed `stage`, returns
/// records/s from the first record counted (joining the consumer group
/// and starting the producer are not what is measured).
async fn run(worker: &Worker, config: serde_json::Value, stage: &str, n: usize) -> f64 {
    let name = config["name"].as_str().unwrap().to_string();
    let spec = ConnectorSpec::from_json(&config).unwrap();
    let started = Instant::now();
    worker.create(&spec).await.unwrap();
    let mut first: Option<(Instant, u64)> = None;
    loop {
        let done = counted(worker, &name, stage);
        if done > 0 && first.is_none() {
            first = Some((Instant::now(), done));
        }
        if done >= n as u64 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1200),
            "{name} did not finish"
        );
        if let Some(status) = worker.status(&name).await
            && let Some((_, t)) = status.tasks.iter().find(|(_, t)| t.trace.is_some())
        {
            panic!("{name} failed: {}", t.trace.clone().unwrap());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (t0, c0) = first.expect("counted");
    let rate = (n as u64 - c0) as f64 / t0.elapsed().as_secs_f64().max(1e-6);
    worker.stop_connector(&name).await;
    rate
}

const KINDS: [&str; 3] = [
    "source: datagen -> Kafka",
    "stream: Kafka -> Kafka",
    "sink: Kafka -> PostgreSQL upsert",
];

/// records/s of every run on one broker: `[kind][batch][guarantee]`.
type Rates = Vec<Vec<[f64; 3]>>;

/// Every kind, batch size and guarantee on `broker`. Names carry `run` so
/// that a real broker's topics and groups from earlier runs are not reused.
async fn measure(broker: &BenchBroker, url: &str, n: usize, run_id: &str) -> Rates {
    let bootstrap = broker.bootstrap().to_string();
    let input = format!("bench-input-{run_id}");
    broker.create_topic(&input, PARTITIONS).await;
    eprintln!("{}: producing {n} input records...", broker.label());
    produce_orders(&bootstrap, &input, PARTITIONS, n).await;
    let worker = common::worker_on(broker, PARTITIONS);
    pg_exec(
        url,
        &sluice_connector_jdbc::Dialect::Postgres.create_offsets_table("sluice_offsets"),
    )
    .await;
    // Offsets a previous run stored would point past this run's input.
    pg_exec(url, "DELETE FROM sluice_offsets").await;

    let mut rates = vec![vec![[0.0f64; 3]; BATCHES.len()]; 3];
    for (b, batch) in BATCHES.iter().enumerate() {
        for (g, guarantee) in GUARANTEES.iter().enumerate() {
            let tag = format!("{}-{batch}-{run_id}", ["amo", "alo", "eos"][g]);
            // Small batches are slow: fewer records keep the run short.
            let n = n.min(batch * 1000);
            eprintln!("{}: {guarantee}, batches of {batch}...", broker.label());
            rates[0][b][g] = run(
                &worker,
                serde_json::json!({"name": format!("src-{tag}"), "config": {
                    "connector.class": "datagen", "topic": format!("out-src-{tag}"),
                    "count": n.to_string(), "rate": "0", "batch.size": batch.to_string(),
                    "delivery.guarantee": guarantee,
                }}),
                "produce",
                n,
            )
            .await;
            rates[1][b][g] = run(
                &worker,
                serde_json::json!({"name": format!("stream-{tag}"), "config": {
                    "connector.class": "stream", "topics": input,
                    "output.topic": format!("out-stream-{tag}"),
                    "batch.max.records": batch.to_string(), "batch.max.ms": "50",
                    "delivery.guarantee": guarantee,
                }}),
                "produce",
                n,
            )
            .await;
            let table = format!("bench_{}", tag.replace('-', "_"));
            pg_exec(url, &format!("DROP TABLE IF EXISTS {table}")).await;
            rates[2][b][g] = run(
                &worker,
                serde_json::json!({"name": format!("sink-{tag}"), "config": {
                    "connector.class": "jdbc-sink", "topics": input,
                    "connection.url": url, "insert.mode": "upsert",
                    "pk.mode": "record_value", "pk.fields": "order_id",
                    "auto.create": "true", "table.name.format": table,
                    "batch.max.records": batch.to_string(), "batch.max.ms": "50",
                    "delivery.guarantee": guarantee,
                }}),
                "put",
                n,
            )
            .await;
            pg_exec(url, &format!("DROP TABLE IF EXISTS {table}")).await;
        }
    }
    worker.shutdown().await;
    rates
}

fn main() {
    let url = std::env::var("SLUICE_BENCH_POSTGRES_URL")
        .expect("SLUICE_BENCH_POSTGRES_URL: run through bench/run.sh, which starts PostgreSQL");
    let n: usize = std::env::var("SLUICE_BENCH_GUARANTEE_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let run_id = std::process::id().to_string();
        let embedded = BenchBroker::Embedded(EmbeddedBroker::start().unwrap());
        let mut results = vec![(embedded.label(), measure(&embedded, &url, n, &run_id).await)];
        let real = BenchBroker::real_from_env();
        if let Some(real) = &real {
            results.push((real.label(), measure(real, &url, n, &run_id).await));
        }

        println!("\nJSON order records (at most {n}, and 1000 batches, per run), one task, {PARTITIONS} partitions, PostgreSQL; records/s and the ratio to at-least-once at the same batch size on the same broker\n");
        println!("| broker | task | batch | at-most-once | at-least-once | exactly-once |");
        println!("|---|---|---:|---:|---:|---:|");
        for (label, rates) in &results {
            for (k, kind) in KINDS.iter().enumerate() {
                for (b, batch) in BATCHES.iter().enumerate() {
                    let [amo, alo, eos] = rates[k][b];
                    println!(
                        "| {label} | {kind} | {batch} | {amo:.0} ({:.2}) | {alo:.0} (1.00) | {eos:.0} ({:.2}) |",
                        amo / alo,
                        eos / alo
                    );
                }
            }
        }
        if real.is_none() {
            println!("| Apache Kafka | NOT RUN: set SLUICE_BENCH_KAFKA_BOOTSTRAP (bench/run.sh starts a broker) | | | | |");
            return;
        }
        let (mock, kafka) = (&results[0].1, &results[1].1);
        println!("\nThe real broker against the embedded one, same run: records/s on Apache Kafka as a ratio to the embedded broker's, by guarantee\n");
        println!("| task | batch | at-most-once | at-least-once | exactly-once |");
        println!("|---|---:|---:|---:|---:|");
        for (k, kind) in KINDS.iter().enumerate() {
            for (b, batch) in BATCHES.iter().enumerate() {
                let ratio = |g: usize| kafka[k][b][g] / mock[k][b][g];
                println!(
                    "| {kind} | {batch} | {:.2} | {:.2} | {:.2} |",
                    ratio(0),
                    ratio(1),
                    ratio(2)
                );
            }
        }
    });
}
