//! Kafka -> PostgreSQL with the JDBC sink, by write strategy (insert,
//! upsert at each guarantee, a replay over existing rows, a stale replay
//! stopped by the guard), beside baselines measured in the same run on the
//! same broker and database:
//!
//! - a raw `COPY` of the same rows into an empty table (the ceiling);
//! - the database's own upsert, fed by `generate_series` in the server;
//! - the database's own upsert of the rows the exactly-once run wrote,
//!   from a table, in key order and in the order the sink wrote them
//!   (each batch interleaves keys from every partition);
//! - a bare client (no Kafka, no runtime) upserting the same orders in
//!   batches, in the sink's form (`UNNEST` of bound arrays) and through a
//!   staging table (`COPY`, then one upsert from it), and in the sink's
//!   form through tokio-postgres, with and without pipelining (the next
//!   batch sent while one runs, or a batch's parts inside its transaction);
//! - the simple row-at-a-time loop (`bench/baselines/pipeline1_python.py
//!   --no-transform`:
//!   confluent-kafka, one SQLAlchemy transaction per record, a commit per
//!   record), on a bounded prefix of the records, since it is slow.
//!
//!     bench/run.sh jdbc          (starts PostgreSQL and the Python venv)
//!
//! Environment: SLUICE_BENCH_POSTGRES_URL (required), SLUICE_BENCH_RECORDS
//! (default 1000000), SLUICE_BENCH_PYTHON (a python with the baseline's
//! packages), SLUICE_BENCH_PY_RECORDS (default 20000),
//! SLUICE_BENCH_BATCH_RECORDS (`batch.max.records`, default 5000),
//! SLUICE_BENCH_CONSUMER_OVERRIDES (`key=value,...`, set on the sink's
//! consumer as `consumer.override.<key>`).

use std::time::{Duration, Instant};

use sluice_runtime::config::ConnectorSpec;
use sluice_runtime::kafka::{EmbeddedBroker, KafkaClients};
use sluice_runtime::worker::Worker;
use sqlx::Connection;

mod common;
use common::process::{MachineCpu, run_python_baseline};
use common::spans::SpanTimes;
use common::{order_json, pg_exec, produce_orders, table_rows, wait_for_quiet_database};

const TOPIC: &str = "bench-orders";
/// The embedded broker keeps about 5 MiB per partition: spread the records.
const PARTITIONS: i32 = 64;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One way of writing the topic into PostgreSQL.
struct Strategy {
    /// The connector's name and, with `-` as `_`, its table's.
    name: &'static str,
    guarantee: &'static str,
    insert_mode: &'static str,
    /// `upsert.guard.column`, if any.
    guard: Option<&'static str>,
    /// Write over the rows an earlier strategy left in this table (a
    /// replay: every row conflicts) instead of into a new table.
    over: Option<&'static str>,
}

impl Strategy {
    fn table(&self) -> String {
        format!(
            "sluice_{}",
            self.over.unwrap_or(self.name).replace('-', "_")
        )
    }
}

/// A run's rate and where the machine's CPU went meanwhile.
struct Run {
    records: u64,
    seconds: f64,
    cpu: MachineCpu,
}

impl Run {
    /// `records` written since `started`, with the CPU used since `cpu_before`.
    fn since(records: u64, started: Instant, cpu_before: MachineCpu) -> Run {
        Run {
            records,
            seconds: started.elapsed().as_secs_f64(),
            cpu: cpu_before.since(&MachineCpu::now()),
        }
    }

    fn rate(&self) -> f64 {
        self.records as f64 / self.seconds
    }
}

/// Runs one jdbc-sink connector over the whole topic.
async fn sluice_run(
    worker: &Worker,
    url: &str,
    strategy: &Strategy,
    n: usize,
    spans: &SpanTimes,
) -> Run {
    let (name, table) = (strategy.name, strategy.table());
    if strategy.over.is_none() {
        pg_exec(url, &format!("DROP TABLE IF EXISTS {table}")).await;
    }
    pg_exec(url, "DELETE FROM sluice_offsets WHERE true").await;
    let mut spec = serde_json::json!({
        "name": name,
        "config": {
            "connector.class": "jdbc-sink",
            "topics": TOPIC,
            "connection.url": url,
            "insert.mode": strategy.insert_mode,
            "pk.mode": "record_value",
            "pk.fields": "order_id",
            "auto.create": "true",
            "table.name.format": table,
            "delivery.guarantee": strategy.guarantee,
            "batch.max.records": std::env::var("SLUICE_BENCH_BATCH_RECORDS").unwrap_or("5000".into()),
            "batch.max.ms": std::env::var("SLUICE_BENCH_BATCH_MS").unwrap_or("50".into()),
        }
    });
    if let Some(guard) = strategy.guard {
        spec["config"]["upsert.guard.column"] = guard.into();
    }
    // `key=value,...`: consumer settings to try (`consumer.override.*`).
    for setting in std::env::var("SLUICE_BENCH_CONSUMER_OVERRIDES")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
    {
        let (key, value) = setting
            .split_once('=')
            .expect("SLUICE_BENCH_CONSUMER_OVERRIDES: key=value,...");
        spec["config"][format!("consumer.override.{key}")] = value.into();
    }
    let spec = ConnectorSpec::from_json(&spec).unwrap();
    // Progress from the task's own counter of records written: counting
    // the table's rows as it grows would load the database being measured.
    let written = worker
        .metrics()
        .records
        .with_label_values(&[name, "0", "put", "ok"]);
    wait_for_quiet_database(url).await;
    let created = Instant::now();
    worker.create(&spec).await.unwrap();
    // Timed from the first batch written, as the Python loop is timed from
    // its first record: the consumer group's join (about 3 s on the
    // embedded broker) is not what is measured.
    let mut first: Option<(Instant, u64, MachineCpu)> = None;
    let batches = worker.metrics().batch_size.with_label_values(&[name, "0"]);
    let writes = worker
        .metrics()
        .sink_put_seconds
        .with_label_values(&[name, "0"]);
    let mut timed_from = (0, 0.0, 0, 0.0);
    let mut spans_from = spans.snapshot();
    loop {
        let done = written.get();
        if done >= n as u64 {
            break;
        }
        if done > 0 && first.is_none() {
            first = Some((Instant::now(), done, MachineCpu::now()));
            timed_from = (
                batches.get_sample_count(),
                batches.get_sample_sum(),
                writes.get_sample_count(),
                writes.get_sample_sum(),
            );
            spans_from = spans.snapshot();
        }
        assert!(
            created.elapsed() < Duration::from_secs(1800),
            "{name} did not finish"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (started, before, cpu_before) =
        first.expect("more than one batch: raise SLUICE_BENCH_RECORDS");
    let run = Run::since(n as u64 - before, started, cpu_before);
    // Where the task's time went: how much of the run a batch was being
    // written (the rest, the write waited for the next batch).
    let read = batches.get_sample_count() - timed_from.0;
    let wrote = writes.get_sample_count() - timed_from.2;
    let write_seconds = writes.get_sample_sum() - timed_from.3;
    println!(
        "  {name}: {read} batches read, {:.0} records each; {wrote} written, {:.1} ms each; writing {:.2} of the run",
        (batches.get_sample_sum() - timed_from.1) / read.max(1) as f64,
        1000.0 * write_seconds / wrote.max(1) as f64,
        write_seconds / run.seconds,
    );
    println!(
        "  {name}, the write's steps: {}",
        SpanTimes::report(&spans_from, &spans.snapshot(), run.seconds)
    );
    worker.stop_connector(name).await;
    assert_eq!(
        table_rows(url, &table).await,
        n as i64,
        "{name}: one row per record"
    );
    run
}

/// Reading the topic and nothing else, with the same client settings the
/// sink's consumer gets: what the broker and client can deliver.
async fn consume_only(clients: &KafkaClients, n: usize) -> f64 {
    use rdkafka::consumer::Consumer;
    let consumer = clients.tool_consumer("bench-consume-only").unwrap();
    let mut all = rdkafka::TopicPartitionList::new();
    for p in 0..PARTITIONS {
        all.add_partition_offset(TOPIC, p, rdkafka::Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&all).unwrap();
    let mut seen = 0;
    let mut started = None;
    tokio::task::block_in_place(|| {
        while seen < n {
            match consumer.poll(Duration::from_secs(1)) {
                Some(Ok(_)) => {
                    started.get_or_insert_with(Instant::now);
                    seen += 1;
                }
                Some(Err(e)) => panic!("consuming: {e}"),
                None => {}
            }
        }
    });
    n as f64 / started.unwrap().elapsed().as_secs_f64()
}

/// The orders' table, as the sink's auto.create makes it.
const ORDERS_COLUMNS: &str = "(order_id BIGINT PRIMARY KEY, customer_id TEXT, amount DOUBLE PRECISION, currency TEXT, status TEXT, updated_at TEXT)";

/// The upsert of an order: every column but the key replaced.
const UPSERT_SET: &str = "ON CONFLICT (order_id) DO UPDATE SET customer_id = EXCLUDED.customer_id, amount = EXCLUDED.amount, currency = EXCLUDED.currency, status = EXCLUDED.status, updated_at = EXCLUDED.updated_at";

/// `table` made afresh with the orders' columns.
async fn fresh_orders_table(url: &str, table: &str) {
    pg_exec(
        url,
        &format!("DROP TABLE IF EXISTS {table}; CREATE TABLE {table} {ORDERS_COLUMNS}"),
    )
    .await;
}

/// The database's own upsert rate: the same statement shape fed by
/// `generate_series` inside the server (no client, no parsing).
async fn server_upsert(url: &str, n: usize) -> Run {
    fresh_orders_table(url, "ceiling_orders").await;
    timed_statement(url, &format!(
        "INSERT INTO ceiling_orders SELECT g, 'cust-' || (g % 1000), 10 + (g % 500), 'EUR', 'shipped', '2026-01-01T00:00:00.000Z' FROM generate_series(0, {}) g {UPSERT_SET}",
        n - 1
    ), n as u64)
    .await
}

/// Runs `sql`, which writes `rows`, once the database is quiet, and times it.
async fn timed_statement(url: &str, sql: &str, rows: u64) -> Run {
    wait_for_quiet_database(url).await;
    let started = Instant::now();
    let cpu_before = MachineCpu::now();
    pg_exec(url, sql).await;
    Run::since(rows, started, cpu_before)
}

/// The order a run from a table feeds the database's own upsert.
#[derive(Clone, Copy)]
enum RowOrder {
    /// Ascending keys, as `generate_series` and the bare clients feed it.
    Keys,
    /// The order the sink wrote its rows in: batches drawn from every
    /// partition, so each interleaves keys from across the key range.
    Sink,
}

/// Copies the rows `written` holds (a sink's table, written into empty,
/// so its heap order is the order it was written in) into
/// `ordered_source`, numbered in that order. Returns how many.
async fn stage_written_rows(url: &str, written: &str) -> u64 {
    pg_exec(
        url,
        &format!(
            "DROP TABLE IF EXISTS ordered_source; CREATE TABLE ordered_source AS SELECT row_number() OVER (ORDER BY ctid) AS seq, * FROM {written}"
        ),
    )
    .await;
    table_rows(url, "ordered_source").await as u64
}

/// The database's own upsert of the `rows` staged by
/// [`stage_written_rows`], fed from that table in `order`: what the same
/// rows cost the database with no client in either order.
async fn server_upsert_from(url: &str, rows: u64, order: RowOrder) -> Run {
    fresh_orders_table(url, "ordered_orders").await;
    let by = match order {
        RowOrder::Keys => "order_id",
        RowOrder::Sink => "seq",
    };
    timed_statement(url, &format!(
        "INSERT INTO ordered_orders SELECT order_id, customer_id, amount, currency, status, updated_at FROM ordered_source ORDER BY {by} {UPSERT_SET}"
    ), rows)
    .await
}

/// The two forms a sink's upsert could take, as a bare client writes them.
#[derive(Clone, Copy)]
enum WriteForm {
    /// One `INSERT ... SELECT FROM UNNEST(bound arrays) ON CONFLICT` a
    /// batch: the JDBC sink's form.
    Unnest,
    /// `COPY` into a temporary table, then one `INSERT ... SELECT ... ON
    /// CONFLICT` from it (the staging form issue 25 asks to consider).
    Staged,
}

/// Appends `text` as a COPY text-format field.
fn copy_field(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
}

/// The sink's upsert form into the bare clients' table: one `INSERT ...
/// SELECT FROM UNNEST` of a bound array per column.
fn bare_unnest_upsert() -> String {
    format!(
        "INSERT INTO bare_orders SELECT * FROM UNNEST($1::int8[], $2::text[], $3::float8[], $4::text[], $5::text[], $6::text[]) {UPSERT_SET}"
    )
}

/// The orders' JSON for a bare client, with its table empty and the
/// database quiet.
async fn bare_client_orders(url: &str, n: usize) -> Vec<String> {
    bare_client_orders_in(url, &(0..n).collect::<Vec<_>>()).await
}

/// The orders `ids` names, in that order, as [`bare_client_orders`].
async fn bare_client_orders_in(url: &str, ids: &[usize]) -> Vec<String> {
    fresh_orders_table(url, "bare_orders").await;
    let values = ids.iter().map(|&id| order_json(id)).collect();
    wait_for_quiet_database(url).await;
    values
}

/// The order ids `table` holds, in the order a sink wrote them (its heap
/// order: the table was written into empty).
async fn written_order(url: &str, table: &str) -> Vec<usize> {
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    let ids: Vec<i64> = sqlx::query_scalar(&format!("SELECT order_id FROM {table} ORDER BY ctid"))
        .fetch_all(&mut c)
        .await
        .unwrap();
    ids.into_iter().map(|id| id as usize).collect()
}

/// Checks a bare client wrote every order, and returns its run.
async fn bare_client_checked(url: &str, run: Run) -> Run {
    let stored = table_rows(url, "bare_orders").await;
    assert_eq!(stored, run.records as i64, "every order upserted");
    run
}

/// A bare client's upsert of the orders (no Kafka, no runtime): each
/// order's JSON parsed, and the batch written in `form`, in batches of
/// `batch` records with a transaction each, over one connection. What a
/// sink's write form costs the client and the server, the rest aside.
async fn bare_client_upsert(url: &str, n: usize, batch: usize, form: WriteForm) -> Run {
    let values = bare_client_orders(url, n).await;
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query("CREATE TEMP TABLE bare_stage (LIKE bare_orders) ON COMMIT DELETE ROWS")
        .execute(&mut c)
        .await
        .unwrap();
    let unnest = bare_unnest_upsert();
    let from_stage = format!("INSERT INTO bare_orders SELECT * FROM bare_stage {UPSERT_SET}");
    let started = Instant::now();
    let cpu_before = MachineCpu::now();
    for chunk in values.chunks(batch) {
        let mut tx = c.begin().await.unwrap();
        match form {
            WriteForm::Unnest => {
                let columns = OrderColumns::parse(chunk);
                sqlx::query(&unnest)
                    .bind(columns.order_id)
                    .bind(columns.customer_id)
                    .bind(columns.amount)
                    .bind(columns.currency)
                    .bind(columns.status)
                    .bind(columns.updated_at)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
            }
            WriteForm::Staged => {
                let mut rows = String::with_capacity(chunk.len() * 96);
                for json in chunk {
                    let v: serde_json::Value = serde_json::from_str(json).unwrap();
                    rows.push_str(&v["order_id"].as_i64().unwrap().to_string());
                    rows.push('\t');
                    copy_field(&mut rows, v["customer_id"].as_str().unwrap());
                    rows.push('\t');
                    rows.push_str(&v["amount"].as_f64().unwrap().to_string());
                    for k in ["currency", "status", "updated_at"] {
                        rows.push('\t');
                        copy_field(&mut rows, v[k].as_str().unwrap());
                    }
                    rows.push('\n');
                }
                let mut copy = tx.copy_in_raw("COPY bare_stage FROM STDIN").await.unwrap();
                copy.send(rows.as_bytes()).await.unwrap();
                copy.finish().await.unwrap();
                sqlx::query(&from_stage).execute(&mut *tx).await.unwrap();
            }
        }
        tx.commit().await.unwrap();
    }
    bare_client_checked(url, Run::since(n as u64, started, cpu_before)).await
}

/// The orders' columns as arrays, one per column, for `UNNEST`.
#[derive(Default)]
struct OrderColumns {
    order_id: Vec<i64>,
    customer_id: Vec<String>,
    amount: Vec<f64>,
    currency: Vec<String>,
    status: Vec<String>,
    updated_at: Vec<String>,
}

impl OrderColumns {
    fn parse(chunk: &[String]) -> Self {
        let mut c = OrderColumns::default();
        let text = |v: &serde_json::Value, k: &str| v[k].as_str().unwrap().to_string();
        for json in chunk {
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            c.order_id.push(v["order_id"].as_i64().unwrap());
            c.customer_id.push(text(&v, "customer_id"));
            c.amount.push(v["amount"].as_f64().unwrap());
            c.currency.push(text(&v, "currency"));
            c.status.push(text(&v, "status"));
            c.updated_at.push(text(&v, "updated_at"));
        }
        c
    }
}

/// A connection of the tokio-postgres bare client, its statements
/// prepared.
struct PipelineConnection {
    client: tokio_postgres::Client,
    connection: tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
    begin: tokio_postgres::Statement,
    upsert: tokio_postgres::Statement,
    commit: tokio_postgres::Statement,
}

impl PipelineConnection {
    async fn open(url: &str) -> Self {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let connection = tokio::spawn(connection);
        let upsert = client.prepare(&bare_unnest_upsert()).await.unwrap();
        let begin = client.prepare("BEGIN").await.unwrap();
        let commit = client.prepare("COMMIT").await.unwrap();
        PipelineConnection {
            client,
            connection,
            begin,
            upsert,
            commit,
        }
    }

    /// Writes `columns` in a transaction. `pipelined`: BEGIN, the upsert
    /// and COMMIT are sent at the first poll, together and in order.
    async fn write(
        &self,
        columns: OrderColumns,
        pipelined: bool,
    ) -> Result<(), tokio_postgres::Error> {
        if pipelined {
            tokio::try_join!(
                self.client.execute(&self.begin, &[]),
                self.upsert(&columns),
                self.client.execute(&self.commit, &[])
            )
            .map(|_| ())
        } else {
            self.client.execute(&self.begin, &[]).await?;
            self.upsert(&columns).await?;
            self.client.execute(&self.commit, &[]).await.map(|_| ())
        }
    }

    /// The upsert of `columns`, one bound array per column; bound and
    /// sent at its first poll.
    async fn upsert(&self, columns: &OrderColumns) -> Result<u64, tokio_postgres::Error> {
        let c = columns;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
            &c.order_id,
            &c.customer_id,
            &c.amount,
            &c.currency,
            &c.status,
            &c.updated_at,
        ];
        self.client.execute(&self.upsert, &params).await
    }
}

/// A bare client's `UNNEST` upserts through tokio-postgres, which can send
/// a statement before the previous one's reply is read, over `connections`
/// connections (a batch split among them by `order_id`, so a key always
/// goes the same way, a transaction each). `pipelined`: the next batch is
/// parsed and sent while this one runs (two batches in flight on each
/// connection, in order), so no backend waits for the client. Otherwise
/// each statement waits for the last one's reply, as the sink's sqlx
/// connection does: the library apart from the pipelining.
async fn bare_client_tokio_postgres(
    url: &str,
    n: usize,
    batch: usize,
    connections: usize,
    pipelined: bool,
    in_order: Option<&[usize]>,
) -> Run {
    use std::future::Future;
    use std::pin::Pin;
    type Write<'a> = Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + 'a>>;
    let values = match in_order {
        Some(ids) => bare_client_orders_in(url, ids).await,
        None => bare_client_orders(url, n).await,
    };
    let mut pool = Vec::new();
    for _ in 0..connections {
        pool.push(PipelineConnection::open(url).await);
    }
    let started = Instant::now();
    let cpu_before = MachineCpu::now();
    let mut in_flight: Vec<Write> = Vec::new();
    for chunk in values.chunks(batch) {
        let mut parts: Vec<Vec<String>> = vec![Vec::new(); connections];
        for json in chunk {
            // The order id is the JSON's first field: `{"order_id":N,`.
            let id: usize = json[12..json.find(',').unwrap()].parse().unwrap();
            parts[id % connections].push(json.clone());
        }
        let mut sent: Vec<Write> = Vec::new();
        for (connection, part) in pool.iter().zip(parts) {
            let mut write: Write =
                Box::pin(connection.write(OrderColumns::parse(&part), pipelined));
            if pipelined {
                // One poll sends the statements; the replies are read
                // after the previous batch's.
                let _ = futures::poll!(write.as_mut());
            }
            sent.push(write);
        }
        if pipelined {
            for previous in std::mem::replace(&mut in_flight, sent) {
                previous.await.unwrap();
            }
        } else {
            futures::future::try_join_all(sent).await.unwrap();
        }
    }
    for last in in_flight.drain(..) {
        last.await.unwrap();
    }
    let run = Run::since(n as u64, started, cpu_before);
    drop(in_flight);
    for c in pool {
        drop(c.client);
        let _ = c.connection.await;
    }
    bare_client_checked(url, run).await
}

/// A bare client's `UNNEST` upserts through tokio-postgres, one
/// transaction a batch as the sink has it, the batch's upsert in `parts`
/// statements sent back to back: each part is parsed and bound while the
/// one before it runs, and the next batch only starts once this one has
/// committed. What pipelining inside one `put` could give a sink, with no
/// batch ever sent before the last one's commit is known.
async fn bare_client_tokio_postgres_parts(url: &str, n: usize, batch: usize, parts: usize) -> Run {
    let values = bare_client_orders(url, n).await;
    let connection = PipelineConnection::open(url).await;
    let started = Instant::now();
    let cpu_before = MachineCpu::now();
    for chunk in values.chunks(batch) {
        let c = &connection;
        let mut sent: Vec<Sent> = Vec::with_capacity(parts + 2);
        send(&mut sent, Box::pin(c.client.execute(&c.begin, &[])));
        for part in chunk.chunks(chunk.len().div_ceil(parts)) {
            let columns = OrderColumns::parse(part);
            send(&mut sent, Box::pin(async move { c.upsert(&columns).await }));
        }
        send(&mut sent, Box::pin(c.client.execute(&c.commit, &[])));
        for statement in sent {
            statement.await.unwrap();
        }
    }
    let run = Run::since(n as u64, started, cpu_before);
    drop(connection.client);
    let _ = connection.connection.await;
    bare_client_checked(url, run).await
}

/// A statement sent, its reply not yet read.
type Sent<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<u64, tokio_postgres::Error>> + 'a>>;

/// Polls `statement` once, which binds and sends it, and keeps it in
/// `sent` to read its reply later (one that failed at once is ready at
/// that poll). The first poll's wake-up is not needed: the statement is
/// awaited later, which registers the task's waker.
fn send<'a>(sent: &mut Vec<Sent<'a>>, mut statement: Sent<'a>) {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match statement.as_mut().poll(&mut context) {
        std::task::Poll::Ready(result) => {
            result.unwrap();
        }
        std::task::Poll::Pending => sent.push(statement),
    }
}

/// COPY of the same rows as CSV into an empty table: the ceiling.
async fn copy_run(url: &str, n: usize) -> f64 {
    fresh_orders_table(url, "copy_orders").await;
    let mut csv = String::with_capacity(n * 80);
    for i in 0..n {
        let v: serde_json::Value = serde_json::from_str(&order_json(i)).unwrap();
        csv.push_str(&format!(
            "{},{},{},{},{},{}\n",
            v["order_id"],
            v["customer_id"].as_str().unwrap(),
            v["amount"],
            v["currency"].as_str().unwrap(),
            v["status"].as_str().unwrap(),
            v["updated_at"].as_str().unwrap()
        ));
    }
    wait_for_quiet_database(url).await;
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    let started = Instant::now();
    let mut copy = c
        .copy_in_raw("COPY copy_orders FROM STDIN (FORMAT csv)")
        .await
        .unwrap();
    for chunk in csv.as_bytes().chunks(1 << 20) {
        copy.send(chunk).await.unwrap();
    }
    copy.finish().await.unwrap();
    n as f64 / started.elapsed().as_secs_f64()
}

/// The row-at-a-time Python loop: pipeline 1's baseline without its
/// transform.
fn python_run(bootstrap: &str, url: &str, n: usize) -> Option<f64> {
    let line = run_python_baseline(
        "pipeline1_python.py",
        &[
            "--no-transform".into(),
            "--bootstrap".into(),
            bootstrap.into(),
            "--topic".into(),
            TOPIC.into(),
            "--url".into(),
            url.replacen("postgres://", "postgresql+psycopg2://", 1),
            "--records".into(),
            n.to_string(),
            "--table".into(),
            "py_orders".into(),
        ],
    )?;
    line["records_per_second"].as_f64()
}

fn main() {
    let url = std::env::var("SLUICE_BENCH_POSTGRES_URL")
        .expect("SLUICE_BENCH_POSTGRES_URL: run through bench/run.sh, which starts PostgreSQL");
    let n = env_usize("SLUICE_BENCH_RECORDS", 1_000_000);
    let py_n = env_usize("SLUICE_BENCH_PY_RECORDS", 20_000).min(n);
    let spans = SpanTimes::install(&["sluice_connector_jdbc", "sluice_runtime::task::sink"]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let broker = EmbeddedBroker::start().unwrap();
        broker.create_topic(TOPIC, PARTITIONS).await.unwrap();
        let bootstrap = broker.bootstrap_servers().to_string();
        eprintln!("producing {n} records...");
        produce_orders(&bootstrap, TOPIC, PARTITIONS, n).await;
        let worker = common::worker(&broker, 1);
        // The sink's own offsets table, so each run can clear a previous run's.
        pg_exec(&url, &sluice_connector_jdbc::Dialect::Postgres.create_offsets_table("sluice_offsets")).await;
        let strategies = [
            Strategy { name: "bench-insert", guarantee: "at-least-once", insert_mode: "insert", guard: None, over: None },
            Strategy { name: "bench-alo", guarantee: "at-least-once", insert_mode: "upsert", guard: None, over: None },
            Strategy { name: "bench-eos", guarantee: "exactly-once", insert_mode: "upsert", guard: None, over: None },
            Strategy { name: "bench-replay", guarantee: "at-least-once", insert_mode: "upsert", guard: None, over: Some("bench-alo") },
            Strategy { name: "bench-stale-replay", guarantee: "at-least-once", insert_mode: "upsert", guard: Some("updated_at"), over: Some("bench-alo") },
        ];
        let mut runs = Vec::new();
        for strategy in &strategies {
            eprintln!("sluice {}...", strategy.name);
            runs.push(sluice_run(&worker, &url, strategy, n, &spans).await);
        }
        eprintln!("COPY...");
        let copy = copy_run(&url, n).await;
        eprintln!("consume only...");
        let consumed = consume_only(worker.clients(), n).await;
        eprintln!("server-side upsert...");
        let server_run = server_upsert(&url, n).await;
        let server = server_run.rate();
        // The same rows as the exactly-once run wrote them, from a table:
        // in key order, then in the sink's (interleaved) order.
        eprintln!("server-side upsert of the sink's rows, in key order and in the sink's order...");
        let staged = stage_written_rows(&url, &strategies[2].table()).await;
        let in_order = [
            (
                "the database alone, the exactly-once run's rows from a table in key order",
                server_upsert_from(&url, staged, RowOrder::Keys).await,
            ),
            (
                "the database alone, the same rows in the order the sink wrote them (each batch interleaves keys from 64 partitions)",
                server_upsert_from(&url, staged, RowOrder::Sink).await,
            ),
        ];
        let batch = env_usize("SLUICE_BENCH_BATCH_RECORDS", 5000);
        eprintln!("a bare client's upserts...");
        let bare = [
            (
                "a bare client (no Kafka, no runtime): `INSERT ... SELECT FROM UNNEST(bound arrays) ON CONFLICT` a batch, the sink's form",
                bare_client_upsert(&url, n, batch, WriteForm::Unnest).await,
            ),
            (
                "a bare client: COPY into a temporary table, then `INSERT ... SELECT ... ON CONFLICT` a batch",
                bare_client_upsert(&url, n, batch, WriteForm::Staged).await,
            ),
            (
                "a bare client, tokio-postgres: the sink's form, each statement after the last one's reply",
                bare_client_tokio_postgres(&url, n, batch, 1, false, None).await,
            ),
            (
                "a bare client, tokio-postgres, pipelined: the sink's form, the next batch parsed and sent while one runs",
                bare_client_tokio_postgres(&url, n, batch, 1, true, None).await,
            ),
            (
                "a bare client, tokio-postgres, pipelined over two connections (a batch split by order_id, a transaction on each)",
                bare_client_tokio_postgres(&url, n, batch, 2, true, None).await,
            ),
        ];
        let mut bare = Vec::from(bare);
        let sink_order = written_order(&url, &strategies[2].table()).await;
        bare.push((
            "a bare client, tokio-postgres, pipelined on one connection, fed the orders in the order the exactly-once sink wrote them",
            bare_client_tokio_postgres(&url, n, batch, 1, true, Some(&sink_order)).await,
        ));
        for parts in [2, 5, 10] {
            bare.push((
                match parts {
                    2 => "a bare client, tokio-postgres, a batch's upsert in 2 parts sent back to back in its transaction (each part bound while the one before runs), the next batch after the commit",
                    5 => "the same in 5 parts",
                    _ => "the same in 10 parts",
                },
                bare_client_tokio_postgres_parts(&url, n, batch, parts).await,
            ));
        }
        eprintln!("Python row-at-a-time loop over {py_n} records...");
        let py = python_run(&bootstrap, &url, py_n);

        println!("\n{n} JSON order records, Kafka (embedded broker, {PARTITIONS} partitions) -> PostgreSQL, keyed by order_id, one task, rates from the first batch written\n");
        println!("| pipeline | records/s | vs COPY | vs the database alone | vs Python loop |");
        println!("|---|---:|---:|---:|---:|");
        let vs_py = |r: f64| py.map(|p| format!("{:.1}x", r / p)).unwrap_or("not run".into());
        println!("| raw COPY into an empty table (ceiling) | {copy:.0} | 1.00 | {:.2} | {} |", copy / server, vs_py(copy));
        println!("| the database alone: INSERT ... SELECT generate_series ON CONFLICT DO UPDATE | {server:.0} | {:.2} | 1.00 | {} |", server / copy, vs_py(server));
        println!("| the broker alone: consume the topic, no processing | {consumed:.0} | {:.2} | {:.2} | {} |", consumed / copy, consumed / server, vs_py(consumed));
        let described = [
            "Sluice jdbc-sink, insert.mode=insert into an empty table, at-least-once",
            "Sluice jdbc-sink, upsert into an empty table, at-least-once",
            "Sluice jdbc-sink, upsert into an empty table, exactly-once",
            "Sluice jdbc-sink, upsert over the same rows (a replay: every row conflicts), at-least-once",
            "Sluice jdbc-sink, guarded upsert over the same rows (`upsert.guard.column`: a stale replay, every row kept), at-least-once",
        ];
        for (what, run) in described.iter().zip(&runs) {
            let rate = run.rate();
            println!("| {what} | {rate:.0} | {:.2} | {:.2} | {} |", rate / copy, rate / server, vs_py(rate));
        }
        for (what, run) in &in_order {
            let rate = run.rate();
            println!("| {what} | {rate:.0} | {:.2} | {:.2} | {} |", rate / copy, rate / server, vs_py(rate));
        }
        for (what, run) in &bare {
            let rate = run.rate();
            println!("| {what}, batches of {batch} | {rate:.0} | {:.2} | {:.2} | {} |", rate / copy, rate / server, vs_py(rate));
        }
        match py {
            Some(p) => println!("| Python loop (confluent-kafka + SQLAlchemy, 1 tx per record), {py_n} records | {p:.0} | {:.3} | {:.3} | 1.0x |", p / copy, p / server),
            None => println!("| Python loop | NOT RUN: set SLUICE_BENCH_PYTHON (bench/run.sh does) | | | |"),
        }
        println!("\nexactly-once / at-least-once (upsert into an empty table): {:.2}", runs[2].rate() / runs[1].rate());
        println!(
            "the same rows cost the database alone {:.2}x as much time in the sink's order as in key order; against it in the sink's order, the sink reaches {:.2} at-least-once and {:.2} exactly-once",
            in_order[0].1.rate() / in_order[1].1.rate(),
            runs[1].rate() / in_order[1].1.rate(),
            runs[2].rate() / in_order[1].1.rate(),
        );
        // Where the cores went: the worker and the embedded broker share
        // this process; PostgreSQL's backends are apart.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        println!("\nWhere the CPU went (cores busy on average over the run; this machine has {cores}):\n");
        println!("| run | records/s | machine busy | this process (worker and embedded broker) | PostgreSQL | other | PostgreSQL CPU s per 1M rows | machine CPU s per 1M rows | records/s with all {cores} cores busy |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        let split = |what: &str, run: &Run| {
            let per_second = |v: f64| v / run.seconds;
            let per_million = |v: f64| v / run.records as f64 * 1e6;
            let other = run.cpu.busy - run.cpu.bench - run.cpu.postgres;
            println!(
                "| {what} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} |",
                run.rate(),
                per_second(run.cpu.busy),
                per_second(run.cpu.bench),
                per_second(run.cpu.postgres),
                per_second(other),
                per_million(run.cpu.postgres),
                per_million(run.cpu.busy),
                run.records as f64 / run.cpu.busy * cores
            );
        };
        split("the database alone (server-side upsert)", &server_run);
        for (what, run) in &in_order {
            split(what, run);
        }
        for (what, run) in described.iter().zip(&runs) {
            split(what, run);
        }
        for (what, run) in &bare {
            split(what, run);
        }
    });
}
