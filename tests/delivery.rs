//! Delivery guarantees of source and stream tasks against the mock
//! cluster's real protocol, with its fault injection: exactly-once sources
//! (records and offsets in one transaction), exactly-once streams (records
//! and consumed offsets in one transaction), and what each kind of
//! transaction error does. The mock accepts the transactional API but
//! enforces nothing (aborted records stay visible), so these tests check
//! the call sequence, the recovery and the end state; `real_kafka`
//! checks what needs a real broker, on Apache Kafka.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::Message;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use serde_json::{Value, json};
use sluice_runtime::task::State;

use crate::fixtures::{self, InProcess, eventually};

fn metric(env: &InProcess, prefix: &str) -> u64 {
    let text = env.worker.metrics().render();
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

fn transactions(env: &InProcess, connector: &str, outcome: &str) -> u64 {
    metric(
        env,
        &format!(
            "sluice_transactions_total{{connector=\"{connector}\",outcome=\"{outcome}\",task=\"0\"}}"
        ),
    )
}

/// The datagen order ids in a topic, each with how often it is there.
fn order_ids(env: &InProcess, topic: &str) -> BTreeMap<u64, usize> {
    let mut ids = BTreeMap::new();
    for m in fixtures::read_topic(env.broker.bootstrap_servers(), topic) {
        let v: Value = serde_json::from_slice(m.payload().unwrap()).unwrap();
        *ids.entry(v["order_id"].as_u64().unwrap()).or_default() += 1;
    }
    ids
}

/// The offsets topic's records for a connector: (key, value).
fn offset_records(env: &InProcess, connector: &str) -> Vec<(Value, Option<Value>)> {
    fixtures::read_topic(env.broker.bootstrap_servers(), "sluice-offsets")
        .into_iter()
        .filter_map(|m| {
            let key: Value = serde_json::from_slice(m.key()?).ok()?;
            (key[0] == connector)
                .then(|| (key, m.payload().map(|p| serde_json::from_slice(p).unwrap())))
        })
        .collect()
}

fn eos_source(name: &str, topic: &str, count: u64, extra: Value) -> Value {
    let mut config = json!({
        "connector.class": "datagen", "topic": topic, "count": count.to_string(),
        "rate": "0", "batch.size": "50", "delivery.guarantee": "exactly-once",
        "errors.infrastructure.retry.timeout": "20000",
    });
    config
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    json!({"name": name, "config": config})
}

/// Makes the embedded broker answer its next `api` requests with
/// `errors`, one per request, in order (from whichever client sends them).
async fn fail_next(env: &InProcess, api: RDKafkaApiKey, errors: Vec<RDKafkaRespErr>) {
    env.broker
        .embedded()
        .fail_requests(api, errors)
        .await
        .unwrap();
}

async fn wait_for_ids(env: &InProcess, topic: &str, count: u64) -> BTreeMap<u64, usize> {
    eventually(
        Duration::from_secs(90),
        "every record in the topic",
        || async {
            let ids = order_ids(env, topic);
            ((1..=count).all(|id| ids.contains_key(&id))).then_some(ids)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_source_writes_records_and_offsets_in_one_transaction() {
    let env = InProcess::start();
    env.create(eos_source("eos-src", "eos-orders", 500, json!({})))
        .await;
    let ids = wait_for_ids(&env, "eos-orders", 500).await;
    assert_eq!(ids.len(), 500, "only the generated records");
    assert!(
        ids.values().all(|n| *n == 1),
        "no record twice without a failure"
    );
    // The offsets are in the offsets topic, in Kafka Connect's format,
    // one record per batch (50 records a poll, a transaction a poll).
    let stored = eventually(Duration::from_secs(30), "the last offset", || async {
        let records = offset_records(&env, "eos-src");
        records
            .last()
            .is_some_and(|(_, v)| v.as_ref() == Some(&json!({"next": 500})))
            .then_some(records)
    })
    .await;
    assert_eq!(stored[0].0, json!(["eos-src", {"datagen.task": 0}]));
    assert_eq!(stored.len(), 10, "one offsets record per transaction");
    assert_eq!(transactions(&env, "eos-src", "committed"), 10);
    assert_eq!(transactions(&env, "eos-src", "aborted"), 0);
    // The REST view reads the same topic.
    let offsets = env.herder.offsets("eos-src").await.unwrap().unwrap();
    assert_eq!(
        offsets,
        vec![json!({"partition": {"datagen.task": 0}, "offset": {"next": 500}})]
    );

    // Offsets changed while stopped go to the topic, and the restarted
    // task resumes from them.
    env.worker.stop("eos-src").await.unwrap();
    env.herder
        .alter_offsets(
            "eos-src",
            Some(vec![
                json!({"partition": {"datagen.task": 0}, "offset": {"next": 490}}),
            ]),
        )
        .await
        .unwrap();
    assert_eq!(
        offset_records(&env, "eos-src").last().unwrap().1,
        Some(json!({"next": 490}))
    );
    env.worker.resume("eos-src").await.unwrap();
    let again = eventually(Duration::from_secs(60), "the replayed tail", || async {
        let ids = order_ids(&env, "eos-orders");
        (ids[&491] == 2 && ids[&500] == 2).then_some(ids)
    })
    .await;
    assert_eq!(
        again.values().filter(|n| **n == 2).count(),
        10,
        "exactly the 10 records after the altered offset again"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_source_with_interval_boundary_spans_polls() {
    let env = InProcess::start();
    env.create(eos_source(
        "eos-interval",
        "eos-interval-orders",
        300,
        json!({"rate": "300", "batch.size": "10", "transaction.boundary": "interval",
               "transaction.boundary.interval.ms": "400"}),
    ))
    .await;
    wait_for_ids(&env, "eos-interval-orders", 300).await;
    let stored = eventually(Duration::from_secs(30), "the last offset", || async {
        let records = offset_records(&env, "eos-interval");
        records
            .last()
            .is_some_and(|(_, v)| v.as_ref() == Some(&json!({"next": 300})))
            .then_some(records)
    })
    .await;
    // 30 polls over about a second: a transaction each 400 ms spans
    // several of them.
    let committed = transactions(&env, "eos-interval", "committed");
    assert_eq!(committed as usize, stored.len());
    assert!(
        committed < 15,
        "{committed} transactions for 30 polls: the interval did not group them"
    );
}

/// Faults the transaction protocol can raise, one kind at a time: each is
/// retried or aborted and redone, and every record ends up in the topic
/// with the final offsets stored.
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_source_recovers_from_transaction_faults() {
    // (case, request, errors, whether the transaction must abort: retriable
    // errors are retried by the client within the transaction)
    let cases: [(&str, RDKafkaApiKey, Vec<RDKafkaRespErr>, bool); 4] = [
        (
            "produce",
            RDKafkaApiKey::Produce,
            vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS; 3],
            false,
        ),
        (
            "addpartitions",
            RDKafkaApiKey::AddPartitionsToTxn,
            vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED],
            true,
        ),
        (
            "endtxn-retriable",
            RDKafkaApiKey::EndTxn,
            vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS; 2],
            false,
        ),
        (
            "endtxn",
            RDKafkaApiKey::EndTxn,
            vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID],
            true,
        ),
    ];
    for (name, api, errors, aborts) in cases {
        let env = InProcess::start();
        let connector = format!("faulty-{name}");
        let topic = format!("faulty-{name}-orders");
        // The first transactions run into the faults.
        env.broker.create_topic(&topic, 1).await.unwrap();
        fail_next(&env, api, errors).await;
        env.create(eos_source(&connector, &topic, 200, json!({})))
            .await;
        wait_for_ids(&env, &topic, 200).await;
        eventually(Duration::from_secs(30), "the last offset", || async {
            offset_records(&env, &connector)
                .last()
                .is_some_and(|(_, v)| v.as_ref() == Some(&json!({"next": 200})))
                .then_some(())
        })
        .await;
        let status = env.worker.status(&connector).await.unwrap();
        assert_eq!(status.tasks[0].1.state, State::Running, "{name}");
        assert!(
            transactions(&env, &connector, "committed") >= 4,
            "{name}: every batch committed"
        );
        assert_eq!(
            transactions(&env, &connector, "aborted") > 0,
            aborts,
            "{name}: aborted {} transactions",
            transactions(&env, &connector, "aborted")
        );
    }
}

/// A transaction that can never commit: the task retries within its
/// budget, then fails saying why, and no offset was committed for any of
/// the aborted batches.
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_source_commits_no_offset_for_aborted_batches() {
    let env = InProcess::start();
    fail_next(
        &env,
        RDKafkaApiKey::AddPartitionsToTxn,
        vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED; 200],
    )
    .await;
    env.create(eos_source(
        "doomed",
        "doomed-orders",
        100,
        json!({"errors.infrastructure.retry.timeout": "3000"}),
    ))
    .await;
    let trace = env.failed_trace("doomed").await;
    assert!(
        trace.contains("committing the source transaction failed after"),
        "{trace}"
    );
    assert!(trace.contains("nothing was skipped"), "{trace}");
    assert!(transactions(&env, "doomed", "aborted") >= 2);
    assert_eq!(transactions(&env, "doomed", "committed"), 0);
    assert!(
        env.worker.source_offsets("doomed").is_empty(),
        "offsets moved for an aborted batch: {:?}",
        env.worker.source_offsets("doomed")
    );
}

/// Fencing fails the task with the cause; it is never retried.
#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_source_task_fails_with_the_cause() {
    let env = InProcess::start();
    fail_next(
        &env,
        RDKafkaApiKey::EndTxn,
        vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_PRODUCER_FENCED],
    )
    .await;
    env.create(eos_source("fenced", "fenced-orders", 100, json!({})))
        .await;
    let trace = env.failed_trace("fenced").await;
    assert!(trace.contains("fenced"), "{trace}");
    assert!(
        trace.contains("transactional.id `sluice-fenced-0`"),
        "{trace}"
    );
    assert_eq!(transactions(&env, "fenced", "fenced"), 1);
    assert!(env.worker.source_offsets("fenced").is_empty());
}

/// A partition of the offsets topic without a leader for a moment (as
/// right after the topic is created on a busy broker) delays the task's
/// start; it neither fails the task nor loses a record.
#[tokio::test(flavor = "multi_thread")]
async fn a_source_starts_past_an_offsets_topic_without_a_leader() {
    let env = InProcess::start();
    env.broker
        .create_topic("leaderless-orders", 1)
        .await
        .unwrap();
    fail_next(
        &env,
        RDKafkaApiKey::ListOffsets,
        vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION; 4],
    )
    .await;
    env.create(eos_source(
        "leaderless",
        "leaderless-orders",
        100,
        json!({}),
    ))
    .await;
    // Watched through the worker alone until the task is done: a test
    // client's own ListOffsets would take the injected errors.
    eventually(
        Duration::from_secs(60),
        "the task's last offset",
        || async {
            let status = env.worker.status("leaderless").await?;
            let task = &status.tasks[0].1;
            assert_ne!(task.state, State::Failed, "{:?}", task.trace);
            let done = env
                .worker
                .source_offsets("leaderless")
                .iter()
                .any(|(_, offset)| *offset == json!({"next": 100}));
            done.then_some(())
        },
    )
    .await;
    let ids = wait_for_ids(&env, "leaderless-orders", 100).await;
    assert!(ids.values().all(|&n| n == 1), "duplicates: {ids:?}");
}

async fn produce_inputs(env: &InProcess, topic: &str, n: usize) {
    env.broker.create_topic(topic, 1).await.unwrap();
    let values: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            json!({"id": i, "name": format!("n{i}")})
                .to_string()
                .into_bytes()
        })
        .collect();
    let records: Vec<(Option<&str>, &[u8])> = values.iter().map(|v| (None, v.as_slice())).collect();
    fixtures::produce(env.broker.bootstrap_servers(), topic, &records).await;
}

fn stream(name: &str, input: &str, extra: Value) -> Value {
    let mut config = json!({
        "connector.class": "stream", "topics": input, "output.topic": "${topic}.out",
        "delivery.guarantee": "exactly-once", "batch.max.records": "40",
        "transforms": "tag",
        "transforms.tag.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.tag.static.field": "via", "transforms.tag.static.value": "stream",
        "errors.infrastructure.retry.timeout": "20000",
    });
    config
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    json!({"name": name, "config": config})
}

/// The ids in the stream's output, each with how often it is there; every
/// one must carry the transform's field.
fn output_ids(env: &InProcess, topic: &str) -> BTreeMap<u64, usize> {
    let mut ids = BTreeMap::new();
    for m in fixtures::read_topic(env.broker.bootstrap_servers(), topic) {
        let v: Value = serde_json::from_slice(m.payload().unwrap()).unwrap();
        assert_eq!(v["via"], "stream", "{v}");
        *ids.entry(v["id"].as_u64().unwrap()).or_default() += 1;
    }
    ids
}

async fn group_offset(env: &InProcess, connector: &str, topic: &str) -> Option<i64> {
    let (clients, group, topics) = (
        env.worker.clients().clone(),
        format!("connect-{connector}"),
        vec![topic.to_string()],
    );
    tokio::task::spawn_blocking(move || clients.group_offsets(&group, &topics))
        .await
        .unwrap()
        .unwrap()
        .first()
        .and_then(|(_, _, o)| *o)
}

#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_stream_transforms_and_commits_offsets_in_the_transaction() {
    let env = InProcess::start();
    produce_inputs(&env, "stream-in", 200).await;
    env.create(stream("eos-stream", "stream-in", json!({})))
        .await;
    let ids = eventually(Duration::from_secs(90), "every record out", || async {
        let ids = output_ids(&env, "stream-in.out");
        (ids.len() == 200).then_some(ids)
    })
    .await;
    assert!(ids.values().all(|n| *n == 1), "no duplicates: {ids:?}");
    eventually(Duration::from_secs(30), "the group's offset", || async {
        (group_offset(&env, "eos-stream", "stream-in").await == Some(200)).then_some(())
    })
    .await;
    assert!(transactions(&env, "eos-stream", "committed") >= 5);
    assert_eq!(transactions(&env, "eos-stream", "aborted"), 0);
}

/// Faults on the offsets' part of the transaction (AddOffsetsToTxn,
/// TxnOffsetCommit) and on its end: the transaction aborts, the consumer
/// rewinds, and every record still comes out, transformed.
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_stream_rewinds_after_an_aborted_transaction() {
    let cases: [(&str, RDKafkaApiKey, RDKafkaRespErr); 3] = [
        (
            "addoffsets",
            RDKafkaApiKey::AddOffsetsToTxn,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED,
        ),
        (
            "txnoffsetcommit",
            RDKafkaApiKey::TxnOffsetCommit,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED,
        ),
        (
            "endtxn",
            RDKafkaApiKey::EndTxn,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID,
        ),
    ];
    for (name, api, error) in cases {
        let env = InProcess::start();
        let (connector, input) = (format!("stream-{name}"), format!("in-{name}"));
        produce_inputs(&env, &input, 120).await;
        fail_next(&env, api, vec![error]).await;
        env.create(stream(&connector, &input, json!({}))).await;
        let out = format!("{input}.out");
        eventually(Duration::from_secs(90), "every record out", || async {
            (output_ids(&env, &out).len() == 120).then_some(())
        })
        .await;
        eventually(Duration::from_secs(30), "the group's offset", || async {
            (group_offset(&env, &connector, &input).await == Some(120)).then_some(())
        })
        .await;
        assert!(
            transactions(&env, &connector, "aborted") >= 1,
            "{name}: the fault aborted a transaction"
        );
        let status = env.worker.status(&connector).await.unwrap();
        assert_eq!(status.tasks[0].1.state, State::Running, "{name}");
    }
}

/// Exactly once, a stream reads and transforms its next batch while the
/// current one commits. When that commit fails, the batch read meanwhile
/// is read again too, from every partition it came from, including those
/// the failed batch did not touch (40 partitions of 2 records, batches of
/// 2: the two batches rarely share a partition).
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_stream_rereads_the_batch_read_while_a_failed_commit_was_in_flight() {
    let env = InProcess::start();
    let input = "in-overlap";
    env.broker.create_topic(input, 40).await.unwrap();
    let values: Vec<Vec<u8>> = (0..80)
        .map(|i| {
            json!({"id": i, "name": format!("n{i}")})
                .to_string()
                .into_bytes()
        })
        .collect();
    // Keyed by id: two records in each of the 40 partitions, spread by hash.
    let keys: Vec<String> = (0..80).map(|i| format!("k{i}")).collect();
    let records: Vec<(Option<&str>, &[u8])> = keys
        .iter()
        .zip(&values)
        .map(|(k, v)| (Some(k.as_str()), v.as_slice()))
        .collect();
    fixtures::produce(env.broker.bootstrap_servers(), input, &records).await;
    fail_next(
        &env,
        RDKafkaApiKey::EndTxn,
        vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID; 8],
    )
    .await;
    env.create(stream(
        "stream-overlap",
        input,
        json!({"batch.max.records": "2"}),
    ))
    .await;
    let out = format!("{input}.out");
    eventually(Duration::from_secs(120), "every record out", || async {
        (output_ids(&env, &out).len() == 80).then_some(())
    })
    .await;
    let aborted = transactions(&env, "stream-overlap", "aborted");
    assert!(aborted >= 1, "the faults aborted transactions: {aborted}");
    let status = env.worker.status("stream-overlap").await.unwrap();
    assert_eq!(status.tasks[0].1.state, State::Running);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_stream_task_fails_with_the_cause() {
    let env = InProcess::start();
    produce_inputs(&env, "fenced-in", 50).await;
    fail_next(
        &env,
        RDKafkaApiKey::EndTxn,
        vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_PRODUCER_FENCED],
    )
    .await;
    env.create(stream("fenced-stream", "fenced-in", json!({})))
        .await;
    let trace = env.failed_trace("fenced-stream").await;
    assert!(trace.contains("fenced"), "{trace}");
    assert_eq!(
        group_offset(&env, "fenced-stream", "fenced-in").await,
        None,
        "no offset committed for the fenced transaction"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn at_least_once_stream_and_config_errors() {
    let env = InProcess::start();
    produce_inputs(&env, "alo-in", 100).await;
    env.create(stream(
        "alo-stream",
        "alo-in",
        json!({"delivery.guarantee": "at-least-once", "output.topic": "alo-out"}),
    ))
    .await;
    eventually(Duration::from_secs(90), "every record out", || async {
        (output_ids(&env, "alo-out").len() == 100).then_some(())
    })
    .await;
    eventually(Duration::from_secs(30), "the group's offset", || async {
        (group_offset(&env, "alo-stream", "alo-in").await == Some(100)).then_some(())
    })
    .await;

    for (config, key, says) in [
        (
            json!({"connector.class": "stream", "topics": "a", "output.topic": "${topic}"}),
            "output.topic",
            "a loop",
        ),
        (
            json!({"connector.class": "stream", "topics": "a"}),
            "output.topic",
            "missing",
        ),
        (
            json!({"connector.class": "datagen", "topic": "t", "transaction.boundary": "interval"}),
            "transaction.boundary",
            "exactly-once",
        ),
        (
            json!({"connector.class": "datagen", "topic": "t", "delivery.guarantee": "exactly-once",
                   "transaction.boundary": "connector"}),
            "transaction.boundary",
            "not supported",
        ),
    ] {
        let mut config = config;
        config["name"] = json!("bad");
        let spec = sluice_runtime::config::ConnectorSpec::from_json(
            &json!({"name": "bad", "config": config}),
        )
        .unwrap();
        let err = env.worker.validator().validate(&spec).await.err().unwrap();
        assert_eq!(err.key.as_deref(), Some(key), "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
}

/// `examples/quickstart/stream.json` as shipped.
#[tokio::test(flavor = "multi_thread")]
async fn the_shipped_stream_example_runs() {
    let env = InProcess::start();
    let path = fixtures::repo_root().join("examples/quickstart/stream.json");
    let example: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let input = example["config"]["topics"].as_str().unwrap().to_string();
    produce_inputs(&env, &input, 30).await;
    env.create(example).await;
    let out = eventually(Duration::from_secs(90), "the enriched records", || async {
        let out = fixtures::read_topic(env.broker.bootstrap_servers(), "orders.enriched");
        (out.len() == 30).then_some(out)
    })
    .await;
    for m in out {
        let v: Value = serde_json::from_slice(m.payload().unwrap()).unwrap();
        assert_eq!(v["enriched_by"], "sluice", "{v}");
    }
}

/// The broker goes down while an exactly-once source and stream run, and
/// comes back: both carry on, nothing is lost, and the final offsets are
/// stored.
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_tasks_ride_out_a_broker_outage() {
    let env = InProcess::start();
    produce_inputs(&env, "outage-in", 300).await;
    env.create(eos_source(
        "outage-src",
        "outage-orders",
        600,
        json!({"rate": "200", "batch.size": "20", "errors.infrastructure.retry.timeout": "120000"}),
    ))
    .await;
    env.create(stream(
        "outage-stream",
        "outage-in",
        json!({"batch.max.records": "20", "errors.infrastructure.retry.timeout": "120000"}),
    ))
    .await;
    eventually(Duration::from_secs(60), "the source under way", || async {
        let ids = order_ids(&env, "outage-orders");
        (ids.len() > 100).then_some(())
    })
    .await;
    env.broker.embedded().set_up(false).await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    env.broker.embedded().set_up(true).await.unwrap();
    wait_for_ids(&env, "outage-orders", 600).await;
    eventually(
        Duration::from_secs(60),
        "the source's last offset",
        || async {
            offset_records(&env, "outage-src")
                .last()
                .is_some_and(|(_, v)| v.as_ref() == Some(&json!({"next": 600})))
                .then_some(())
        },
    )
    .await;
    eventually(
        Duration::from_secs(90),
        "every stream record out",
        || async { (output_ids(&env, "outage-in.out").len() == 300).then_some(()) },
    )
    .await;
    for name in ["outage-src", "outage-stream"] {
        let status = env.worker.status(name).await.unwrap();
        assert_eq!(status.tasks[0].1.state, State::Running, "{name}");
    }
}

/// A sink's batch closes when the consumer has no more records at hand,
/// not when `batch.max.ms` runs out (a record at a low rate waits for no
/// others); `batch.linger.ms` makes it wait for more.
#[tokio::test(flavor = "multi_thread")]
async fn a_sink_batch_closes_when_the_consumer_runs_dry() {
    let env = InProcess::start();
    env.broker.create_topic("dry", 1).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = |name: &str| dir.path().join(format!("{name}.jsonl"));
    let lines = |name: &str| {
        std::fs::read_to_string(out(name))
            .unwrap_or_default()
            .lines()
            .count()
    };
    for (name, linger) in [("dry-sink", None), ("lingering-sink", Some("600000"))] {
        let mut config = json!({
            "connector.class": "file-sink",
            "topics": "dry",
            "file": out(name).display().to_string(),
            // Ten minutes: only a batch closed early is written in this test.
            "batch.max.ms": "600000",
        });
        if let Some(ms) = linger {
            config["batch.linger.ms"] = json!(ms);
        }
        env.create(json!({"name": name, "config": config})).await;
    }
    let value: &[u8] = br#"{"n": 1}"#;
    fixtures::produce(
        env.broker.bootstrap_servers(),
        "dry",
        &[(None, value), (None, value), (None, value)],
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "the three records in the file of the sink with the defaults",
        || async { (lines("dry-sink") == 3).then_some(()) },
    )
    .await;
    // The other sink read the same records and still holds its batch.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        lines("lingering-sink"),
        0,
        "batch.linger.ms=600000 keeps the batch open"
    );
    env.worker.shutdown().await;
}
