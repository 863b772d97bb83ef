//! Exactly-once under bounce, as Kafka's own system tests do it
//! (`transactions_test.py`, Connect's `test_exactly_once_source`): the
//! worker is SIGKILLed at random moments again and again, a broker of a
//! three-broker cluster is killed and restarted, and what a read_committed
//! consumer sees at the end holds every record exactly once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::Message;
use serde_json::{Value, json};

use super::{
    assert_exactly_once_in_order, broker, cluster3, create_topic, high_watermarks,
    produce_numbered, read_committed, unique, write_connector, write_worker,
};
use crate::fixtures::{KillSchedule, SluiceProcess};

const KILLS: usize = 10;

/// Runs `sluice` with `args` again and again: each run is SIGKILLed at a
/// random moment once `progress` has moved, until `KILLS` kills landed while
/// work was still left (`done` false). `between(k)` runs after kill `k`.
/// Returns the last, unkilled run.
async fn bounce(
    dir: &std::path::Path,
    args: &[&std::path::Path],
    schedule: &mut KillSchedule,
    progress: impl Fn() -> i64,
    done: impl Fn() -> bool,
    mut between: impl FnMut(usize),
) -> SluiceProcess {
    let mut landed = 0;
    let started = Instant::now();
    while landed < KILLS {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "only {landed} of {KILLS} kills landed mid-work in 5 minutes (seed {})",
            schedule.seed
        );
        let before = progress();
        let mut sluice = SluiceProcess::start(dir, args);
        let deadline = Instant::now() + Duration::from_secs(60);
        while progress() == before {
            assert!(
                Instant::now() < deadline,
                "the worker made no progress in 60 s:\n{}",
                sluice.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let wait = schedule.next_ms(0, 700);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        sluice.child.kill().unwrap();
        sluice.child.wait().unwrap();
        assert!(
            !done(),
            "the work finished before kill {} of {KILLS} (seed {}): the input is too small to prove anything",
            landed + 1,
            schedule.seed
        );
        landed += 1;
        eprintln!(
            "bounce: kill {landed} {wait} ms after progress resumed ({:.1} s in, progress {before} -> {})",
            started.elapsed().as_secs_f64(),
            progress()
        );
        between(landed);
    }
    SluiceProcess::start(dir, args)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_copies_every_record_exactly_once_while_its_worker_and_a_broker_die() {
    const PARTITIONS: i32 = 4;
    const PER_PARTITION: u64 = 25_000;
    let cluster = cluster3();
    let bootstrap = cluster.bootstrap.clone();
    let (input, output) = (unique("bounce-in"), unique("bounce-out"));
    create_topic(&bootstrap, &input, PARTITIONS).await;
    create_topic(&bootstrap, &output, PARTITIONS).await;
    produce_numbered(&bootstrap, &input, PARTITIONS, PER_PARTITION).await;

    let dir = tempfile::tempdir().unwrap();
    let worker = write_worker(dir.path(), &bootstrap, "worker", json!({}));
    let connector = write_connector(
        dir.path(),
        &unique("bounce-stream"),
        json!({
            "connector.class": "stream",
            "tasks.max": "2",
            "topics": input,
            "output.topic": output,
            "delivery.guarantee": "exactly-once",
            // Small transactions: many of them open when the kills land.
            "batch.max.records": "250",
            "errors.infrastructure.retry.timeout": "-1",
        }),
    );
    let mut schedule = KillSchedule::from_env();
    let mut killed_broker = None;
    let total = PARTITIONS as i64 * PER_PARTITION as i64;
    let mut sluice = bounce(
        dir.path(),
        &[&worker, &connector],
        &mut schedule,
        || high_watermarks(&bootstrap, &output),
        || read_committed(&bootstrap, &output).len() as i64 >= total,
        |kill| {
            // A broker dies a third of the way through and comes back at
            // two thirds: leaders move, the transaction coordinator too.
            if kill == KILLS / 3 {
                let node = 1 + (kill as u32 % 3);
                cluster.kill(node);
                killed_broker = Some(node);
                eprintln!("bounce: broker {node} killed");
            } else if kill == 2 * KILLS / 3 {
                cluster.start_again();
                eprintln!("bounce: brokers all up again");
            }
        },
    )
    .await;
    assert!(killed_broker.is_some());
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let seen = read_committed(&bootstrap, &output).len() as i64;
        if seen >= total {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{seen} of {total} records reached {output} (seed {}):\n{}",
            schedule.seed,
            sluice.log_text()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // A duplicate committed late would show now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    sluice.terminate(Duration::from_secs(30));
    assert_exactly_once_in_order(
        &read_committed(&bootstrap, &output),
        PARTITIONS,
        PER_PARTITION,
        &format!("stream under bounce, seed {}", schedule.seed),
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exactly_once_source_writes_each_sequence_number_once_across_sigkills() {
    const COUNT: u64 = 30_000;
    let bootstrap = broker().bootstrap.clone();
    let topic = unique("bounce-datagen");
    create_topic(&bootstrap, &topic, 3).await;
    let dir = tempfile::tempdir().unwrap();
    let worker = write_worker(dir.path(), &bootstrap, "worker", json!({}));
    let connector = write_connector(
        dir.path(),
        &unique("bounce-source"),
        json!({
            "connector.class": "datagen",
            "tasks.max": "2",
            "topic": topic,
            "count": COUNT.to_string(),
            // Paced, so the run spans many kills.
            "rate": "1500",
            "batch.size": "50",
            "delivery.guarantee": "exactly-once",
            "errors.infrastructure.retry.timeout": "-1",
        }),
    );
    let mut schedule = KillSchedule::from_env();
    let mut sluice = bounce(
        dir.path(),
        &[&worker, &connector],
        &mut schedule,
        || high_watermarks(&bootstrap, &topic),
        || read_committed(&bootstrap, &topic).len() as u64 >= COUNT,
        |_| {},
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let ids = order_id_counts(&read_committed(&bootstrap, &topic));
        if ids.len() as u64 >= COUNT {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {COUNT} sequence numbers reached {topic} (seed {}):\n{}",
            ids.len(),
            schedule.seed,
            sluice.log_text()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    sluice.terminate(Duration::from_secs(30));
    // A clean run logs no error (reaching the end of the offsets topic's
    // partitions while restoring is not one).
    let errors: Vec<String> = sluice
        .log_text()
        .lines()
        .filter(|l| l.contains(" ERROR "))
        .take(5)
        .map(str::to_string)
        .collect();
    assert!(
        errors.is_empty(),
        "the last, unkilled run logged errors: {errors:#?}"
    );
    assert_each_order_once(
        &read_committed(&bootstrap, &topic),
        COUNT,
        &format!("exactly-once source under bounce (seed {})", schedule.seed),
    );
}

/// How many times each datagen `order_id` was written.
fn order_id_counts(messages: &[rdkafka::message::OwnedMessage]) -> BTreeMap<u64, u32> {
    let mut ids: BTreeMap<u64, u32> = BTreeMap::new();
    for m in messages {
        let v: Value = serde_json::from_slice(m.payload().unwrap()).unwrap();
        *ids.entry(v["order_id"].as_u64().unwrap()).or_default() += 1;
    }
    ids
}

/// Every datagen order id from 1 to `count` once, and nothing else.
fn assert_each_order_once(messages: &[rdkafka::message::OwnedMessage], count: u64, context: &str) {
    let ids = order_id_counts(messages);
    let duplicated: Vec<_> = ids.iter().filter(|(_, n)| **n > 1).take(10).collect();
    let missing: Vec<u64> = (1..=count)
        .filter(|id| !ids.contains_key(id))
        .take(10)
        .collect();
    assert!(
        duplicated.is_empty() && missing.is_empty() && messages.len() as u64 == count,
        "{context}: {} records, {} distinct; \
         duplicated (order_id, times): {duplicated:?}; missing: {missing:?}",
        messages.len(),
        ids.len()
    );
}

/// Waits until `read` is at least `at_least`, or fails with `sluice`'s log.
async fn wait_for(sluice: &SluiceProcess, what: &str, at_least: i64, read: impl Fn() -> i64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let now = read();
        if now >= at_least {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {now} of {at_least} in 2 minutes:\n{}",
            sluice.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Another producer's transaction left open in the offsets topic (another
/// connector's task, killed mid-commit) holds a read_committed reader at its
/// first record. A task that restarts meanwhile must not take the offsets
/// before that record for all there is: what it committed after the open
/// transaction began would be written again.
#[tokio::test(flavor = "multi_thread")]
async fn an_exactly_once_source_resumes_past_another_producers_open_transaction() {
    resumes_past_an_open_transaction("exactly-once").await;
}

/// The same for an at-most-once source, whose offsets go to the offsets
/// topic outside any transaction: read short, they would repeat records.
#[tokio::test(flavor = "multi_thread")]
async fn an_at_most_once_source_resumes_past_another_producers_open_transaction() {
    resumes_past_an_open_transaction("at-most-once").await;
}

/// And an at-least-once source: the kill may repeat the batch whose offsets
/// it had not written yet, no more.
#[tokio::test(flavor = "multi_thread")]
async fn an_at_least_once_source_resumes_past_another_producers_open_transaction() {
    resumes_past_an_open_transaction("at-least-once").await;
}

async fn resumes_past_an_open_transaction(guarantee: &str) {
    use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
    const COUNT: u64 = 6_000;
    let bootstrap = broker().bootstrap.clone();
    let topic = unique("open-txn-datagen");
    create_topic(&bootstrap, &topic, 3).await;
    let dir = tempfile::tempdir().unwrap();
    let worker = write_worker(dir.path(), &bootstrap, "worker", json!({}));
    let offsets_topic = serde_json::from_slice::<Value>(&std::fs::read(&worker).unwrap()).unwrap()
        ["offset.storage.topic"]
        .as_str()
        .unwrap()
        .to_string();
    let connector = write_connector(
        dir.path(),
        &unique("open-txn-source"),
        json!({
            "connector.class": "datagen",
            "tasks.max": "1",
            "topic": topic,
            "count": COUNT.to_string(),
            "rate": "1000",
            "batch.size": "50",
            "delivery.guarantee": guarantee,
        }),
    );
    let args = [worker.as_path(), connector.as_path()];
    let mut sluice = SluiceProcess::start(dir.path(), &args);
    wait_for(&sluice, "records before the open transaction", 300, || {
        high_watermarks(&bootstrap, &topic)
    })
    .await;

    // The other producer opens a transaction on every partition of the
    // offsets topic (which the worker created) and neither commits nor
    // aborts it yet.
    let other: FutureProducer = super::client_config(&bootstrap)
        .set("transactional.id", unique("other-connector-task"))
        .create()
        .unwrap();
    other.init_transactions(Duration::from_secs(30)).unwrap();
    other.begin_transaction().unwrap();
    let partitions = {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let probe: BaseConsumer = super::client_config(&bootstrap).create().unwrap();
        let metadata = probe
            .fetch_metadata(Some(&offsets_topic), Duration::from_secs(10))
            .unwrap();
        metadata.topics()[0].partitions().len() as i32
    };
    assert!(partitions > 0, "the worker created {offsets_topic}");
    for partition in 0..partitions {
        other
            .send(
                FutureRecord::to(&offsets_topic)
                    .partition(partition)
                    .key(r#"["another-connector",{"p":0}]"#)
                    .payload(r#"{"position":1}"#),
                Duration::from_secs(10),
            )
            .await
            .unwrap();
    }

    // The source goes on committing offsets after the open transaction's
    // records, then dies.
    let before_kill = high_watermarks(&bootstrap, &topic) + 500;
    wait_for(
        &sluice,
        "records after the open transaction",
        before_kill,
        || high_watermarks(&bootstrap, &topic),
    )
    .await;
    sluice.child.kill().unwrap();
    sluice.child.wait().unwrap();
    let written = order_id_counts(&read_committed(&bootstrap, &topic)).len() as u64;
    assert!(
        written < COUNT,
        "the source finished before it was killed ({written} of {COUNT}): nothing is left to prove"
    );

    // It restarts while the transaction is still open; the transaction
    // ends a few seconds later, as a dead producer's does at its timeout.
    let sluice = SluiceProcess::start(dir.path(), &args);
    tokio::time::sleep(Duration::from_secs(5)).await;
    tokio::task::block_in_place(|| other.abort_transaction(Duration::from_secs(30))).unwrap();
    let context = format!(
        "{guarantee} source restarted behind an open transaction:\n{}",
        sluice.log_text()
    );
    // At least once, the kill may repeat the batch (50) whose offsets were
    // not written yet; at most once, it may lose it instead.
    let (may_repeat, may_lose) = match guarantee {
        "at-least-once" => (50, false),
        "at-most-once" => (0, true),
        _ => (0, false),
    };
    if may_lose {
        // The last order id shows the source finished.
        wait_for(&sluice, "the last order id", 1, || {
            order_id_counts(&read_committed(&bootstrap, &topic)).contains_key(&COUNT) as i64
        })
        .await;
    } else {
        wait_for(
            &sluice,
            "distinct order ids in the end",
            COUNT as i64,
            || order_id_counts(&read_committed(&bootstrap, &topic)).len() as i64,
        )
        .await;
    }
    // A duplicate committed late would show now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let messages = read_committed(&bootstrap, &topic);
    if guarantee == "exactly-once" {
        assert_each_order_once(&messages, COUNT, &context);
        return;
    }
    let repeated: Vec<(u64, u32)> = order_id_counts(&messages)
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(
        repeated.len() <= may_repeat,
        "{context}: {} order ids written again, at most {may_repeat} may be; (order_id, times): {:?}",
        repeated.len(),
        &repeated[..repeated.len().min(10)]
    );
}
