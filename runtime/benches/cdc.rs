//! `postgres-cdc` against PostgreSQL's own ceilings, measured in one run on
//! one server: the snapshot beside `COPY (SELECT ...) TO STDOUT` (what
//! `pg_dump` does), the stream beside the server decoding the same WAL
//! with `pgoutput` alone (`pg_logical_slot_get_binary_changes`, no client
//! work at all). The task is driven as the runtime drives it (poll, then
//! commit), without Kafka: what is measured is the connector.
//!
//!     bench/run.sh cdc          (starts PostgreSQL with wal_level=logical)
//!
//! Reported per phase: events (rows) per second, CPU seconds per million
//! events in this process (the client) and in the PostgreSQL server
//! processes, and this process's peak RSS growth during the phase.
//!
//! Environment: SLUICE_BENCH_POSTGRES_URL (required),
//! SLUICE_BENCH_CDC_ROWS (default 200000).

use std::time::Instant;

use sluice_sdk::{ConfigMap, SourceConnector, TaskContext};
use sqlx::Connection;

mod common;
use common::pg_exec;

const SLOT: &str = "sluice_bench_cdc";
const BASELINE_SLOT: &str = "sluice_bench_cdc_base";

/// CPU seconds (user + system) of the processes `pick` selects, from /proc.
fn cpu_seconds(pick: impl Fn(&str, u32) -> bool) -> f64 {
    let ticks = 100.0; // USER_HZ on Linux
    let mut total = 0.0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        if !pick(comm, pid) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        // utime and stime are fields 14 and 15 of stat (11 and 12 here).
        let utime: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        let stime: f64 = fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        total += (utime + stime) / ticks;
    }
    total
}

fn own_cpu() -> f64 {
    let me = std::process::id();
    cpu_seconds(|_, pid| pid == me)
}

fn server_cpu() -> f64 {
    cpu_seconds(|comm, _| comm.starts_with("postgres") || comm.starts_with("postmaster"))
}

/// Resets this process's peak RSS (Linux `clear_refs` 5), so a phase's
/// peak can be read after it.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map(|kib| kib / 1024.0)
        .unwrap_or(f64::NAN)
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map(|kib| kib / 1024.0)
        .unwrap_or(f64::NAN)
}

/// One phase's measurements.
struct Phase {
    what: &'static str,
    events: usize,
    seconds: f64,
    client_cpu: f64,
    server_cpu: f64,
    /// Peak RSS growth over the phase, MiB (none for server-only phases).
    rss_mib: Option<f64>,
}

impl Phase {
    fn row(&self, baseline: Option<&Phase>) -> String {
        let rate = self.events as f64 / self.seconds;
        let per_million = |cpu: f64| cpu / self.events as f64 * 1e6;
        let ratio = baseline
            .map(|b| format!("{:.2}", rate / (b.events as f64 / b.seconds)))
            .unwrap_or_else(|| "1 (baseline)".into());
        format!(
            "| {} | {} | {:.0} | {} | {:.1} | {:.1} | {} |",
            self.what,
            self.events,
            rate,
            ratio,
            per_million(self.client_cpu),
            per_million(self.server_cpu),
            self.rss_mib
                .map(|m| format!("{m:.0}"))
                .unwrap_or_else(|| "-".into()),
        )
    }
}

async fn measure<F, Fut>(what: &'static str, events: usize, client: bool, body: F) -> Phase
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    reset_peak_rss();
    let rss_before = rss_mib();
    let (c0, s0) = (own_cpu(), server_cpu());
    let started = Instant::now();
    body().await;
    let seconds = started.elapsed().as_secs_f64();
    let (c1, s1) = (own_cpu(), server_cpu());
    Phase {
        what,
        events,
        seconds,
        client_cpu: c1 - c0,
        server_cpu: s1 - s0,
        rss_mib: client.then(|| (peak_rss_mib() - rss_before).max(0.0)),
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn run() {
    let Ok(base) = std::env::var("SLUICE_BENCH_POSTGRES_URL") else {
        panic!("SLUICE_BENCH_POSTGRES_URL is not set: run bench/run.sh cdc");
    };
    let rows: usize = std::env::var("SLUICE_BENCH_CDC_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    for slot in [SLOT, BASELINE_SLOT] {
        pg_exec(
            &base,
            &format!("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}'"),
        )
        .await;
    }
    pg_exec(
        &base,
        "DROP DATABASE IF EXISTS sluice_bench_cdc WITH (FORCE)",
    )
    .await;
    pg_exec(&base, "CREATE DATABASE sluice_bench_cdc").await;
    let (server, _) = base.rsplit_once('/').unwrap();
    let url = format!("{server}/sluice_bench_cdc");
    let load = |from: usize, n: usize| {
        format!(
            "INSERT INTO orders SELECT i, 'customer ' || (i % 1000), (i % 100000) / 100.0,
               timestamptz '2026-01-01' + i * interval '1 second', 'note ' || i
             FROM generate_series({from}, {}) i",
            from + n - 1
        )
    };
    pg_exec(
        &url,
        "CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL,
           amount numeric(12,2) NOT NULL, placed timestamptz NOT NULL, note text)",
    )
    .await;
    pg_exec(&url, &load(1, rows)).await;
    pg_exec(&url, "VACUUM ANALYZE orders").await;

    // The snapshot's ceiling: COPY TO, every byte read by this process.
    // Connections are opened before and closed after a phase: a backend's
    // CPU time leaves /proc with it.
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let copy = measure(
        "COPY (SELECT * FROM orders) TO STDOUT",
        rows,
        true,
        || async {
            let mut stream = conn
                .copy_out_raw("COPY (SELECT * FROM orders) TO STDOUT")
                .await
                .unwrap();
            let mut bytes = 0usize;
            use futures::StreamExt as _;
            while let Some(chunk) = stream.next().await {
                bytes += chunk.unwrap().len();
            }
            assert!(bytes > rows * 20, "COPY returned {bytes} bytes");
        },
    )
    .await;

    let (user_host, _) = url
        .strip_prefix("postgres://")
        .unwrap()
        .rsplit_once('/')
        .unwrap();
    let (user, hostport) = user_host.split_once('@').unwrap();
    let (host, port) = hostport.split_once(':').unwrap();
    let config: ConfigMap = [
        ("database.hostname", host),
        ("database.port", port),
        ("database.user", user),
        ("database.dbname", "sluice_bench_cdc"),
        ("database.sslmode", "disable"),
        ("topic.prefix", "bench"),
        ("slot.name", SLOT),
        ("publication.name", "sluice_bench_cdc"),
        ("poll.interval.ms", "100"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let context = TaskContext {
        key_schemas: true,
        value_schemas: true,
        ..TaskContext::default()
    };
    let connector = sluice_connector_postgres_cdc::PostgresCdcConnector;
    let mut task = connector
        .create_task(&config, context, Default::default())
        .unwrap();
    let snapshot = measure(
        "postgres-cdc snapshot (Debezium events, with schemas)",
        rows,
        true,
        || async {
            let mut read = 0;
            while read < rows {
                read += task.poll().await.unwrap().unwrap().len();
                task.commit().await.unwrap();
            }
            assert_eq!(read, rows);
        },
    )
    .await;

    // The same WAL for both streams: a second slot from here on.
    pg_exec(
        &url,
        &format!("SELECT pg_create_logical_replication_slot('{BASELINE_SLOT}', 'pgoutput')"),
    )
    .await;
    // The changes, written before either reads them (not timed): inserts
    // in transactions of 1000 rows.
    for start in (0..rows).step_by(1000) {
        pg_exec(&url, &load(rows + 1 + start, 1000.min(rows - start))).await;
    }
    let stream = measure(
        "postgres-cdc stream (Debezium events, with schemas)",
        rows,
        true,
        || async {
            let mut read = 0;
            while read < rows {
                let batch = task.poll().await.unwrap().unwrap();
                read += batch.len();
                task.commit().await.unwrap();
            }
            assert_eq!(read, rows);
        },
    )
    .await;
    let decode = measure(
        "the server decoding the same WAL (pgoutput, no client)",
        rows,
        false,
        || async {
            let changes: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM pg_logical_slot_get_binary_changes('{BASELINE_SLOT}', NULL, NULL,
               'proto_version', '1', 'publication_names', 'sluice_bench_cdc')"
        ))
            .fetch_one(&mut conn)
            .await
            .unwrap();
            // BEGIN, COMMIT and RELATION messages besides one INSERT per row.
            assert!(changes as usize >= rows, "{changes} messages");
        },
    )
    .await;
    conn.close().await.unwrap();
    task.stop().await;
    for slot in [SLOT, BASELINE_SLOT] {
        pg_exec(
            &base,
            &format!("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}'"),
        )
        .await;
    }

    println!("\n## postgres-cdc ({rows} rows; one run on one server)\n");
    println!(
        "| phase | events | events/s | rate / baseline | client CPU s per M | server CPU s per M | peak RSS growth MiB |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!("{}", copy.row(None));
    println!("{}", snapshot.row(Some(&copy)));
    println!("{}", decode.row(None));
    println!("{}", stream.row(Some(&decode)));
}
