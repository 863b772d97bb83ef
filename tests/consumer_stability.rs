//! Consumer stability: sink tasks sharing a consumer group under load while
//! one restarts and tasks are added and removed (nothing lost, nothing
//! duplicated with an exactly-once sink, the rebalance counters telling
//! what moved), and a sink slowed by a locked table (the consumer pauses
//! its partitions and keeps polling instead of being evicted).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Value, json};
use sluice_runtime::config::ConnectorSpec;
use sluice_runtime::task::State;
use sluice_runtime::worker::{Updated, Worker};

use crate::fixtures::{self, InProcess, PgInstance, eventually};

const PARTITIONS: i32 = 4;

/// Writes `count` order records from `first` on, spread over the
/// partitions by id.
async fn produce_orders(producer: &FutureProducer, topic: &str, first: usize, count: usize) {
    for id in first..first + count {
        let value = json!({"id": id, "amount": id % 97, "status": "new"}).to_string();
        let key = id.to_string();
        producer
            .send(
                FutureRecord::to(topic)
                    .key(&key)
                    .payload(&value)
                    .partition((id % PARTITIONS as usize) as i32),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
}

fn producer(env: &InProcess) -> FutureProducer {
    rdkafka::ClientConfig::new()
        .set("bootstrap.servers", env.broker.bootstrap_servers())
        .create()
        .unwrap()
}

/// One task's consumer group counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Moves {
    rebalances: u64,
    gained: u64,
    lost: u64,
    assigned: i64,
}

fn moves(worker: &Worker, connector: &str, task: u32) -> Moves {
    let m = worker.metrics();
    let task = task.to_string();
    let labels = [connector, task.as_str()];
    Moves {
        rebalances: m.rebalances.with_label_values(&labels).get(),
        gained: m
            .rebalance_partitions
            .with_label_values(&[connector, &task, "gained"])
            .get(),
        lost: m
            .rebalance_partitions
            .with_label_values(&[connector, &task, "lost"])
            .get(),
        assigned: m.assigned_partitions.with_label_values(&labels).get(),
    }
}

/// Waits until the running tasks `tasks` each own some partitions and
/// together all of them, and the counters stay put for a moment (the
/// cooperative protocol moves partitions in two rounds).
async fn settled(worker: &Worker, connector: &str, tasks: &[u32]) -> Vec<Moves> {
    let mut previous: Option<Vec<Moves>> = None;
    eventually(
        Duration::from_secs(120),
        "every partition assigned to the running tasks",
        || {
            let now: Vec<Moves> = tasks.iter().map(|t| moves(worker, connector, *t)).collect();
            let balanced = now.iter().all(|m| m.assigned > 0)
                && now.iter().map(|m| m.assigned).sum::<i64>() == i64::from(PARTITIONS);
            let stable = previous.as_ref() == Some(&now);
            previous = Some(now.clone());
            let running = async move {
                let status = worker.status(connector).await?;
                let all_running = status.tasks.iter().all(|(_, t)| t.state == State::Running);
                (all_running && status.tasks.len() == tasks.len()).then_some(())
            };
            async move {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                running.await?;
                (balanced && stable).then_some(now)
            }
        },
    )
    .await
}

async fn put_tasks_max(env: &InProcess, name: &str, base: &Value, tasks_max: u32) -> Updated {
    let mut config = base.clone();
    config["tasks.max"] = json!(tasks_max.to_string());
    let spec = ConnectorSpec::from_json(&json!({"name": name, "config": config})).unwrap();
    env.worker.put(&spec).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn tasks_restart_join_and_leave_under_load_without_loss_or_duplicates() {
    restart_join_and_leave(InProcess::start(), "stable", None).await;
}

/// On `env`'s broker, with the connector and its topic named after `name`.
/// On a real broker the consumers are static members: a task's restart is
/// then no rebalance for the other task either.
/// `rebalances_begun`, on a real broker, reads from the group coordinator
/// how many rebalances of a group it has begun.
pub async fn restart_join_and_leave(
    env: InProcess,
    name: &str,
    rebalances_begun: Option<&dyn Fn(&str) -> usize>,
) {
    let Some(pg) = PgInstance::start() else {
        return;
    };
    let real = matches!(env.broker, fixtures::TestKafka::Real(_));
    let topic = &format!("{name}-orders");
    env.broker.create_topic(topic, PARTITIONS).await.unwrap();
    // Exactly-once into a table without a key: a duplicate would be a
    // second row. The embedded broker has no static membership, so the
    // consumers are dynamic members there (the defaults are unit-tested in
    // kafka.rs); a short session timeout for quick rebalances.
    let config = json!({
        "connector.class": "jdbc-sink",
        "tasks.max": "2",
        "topics": topic,
        "connection.url": pg.url(),
        "delivery.guarantee": "exactly-once",
        "insert.mode": "insert",
        "auto.create": "true",
        "table.name.format": "stable_rows",
        "batch.max.records": "50",
        "consumer.override.session.timeout.ms": "6000",
        "consumer.override.heartbeat.interval.ms": "500",
    });
    env.create(json!({"name": name, "config": config.clone()}))
        .await;

    // Load all along: a wave every 100 ms until the end.
    let produced = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let producer = producer(&env);
        let (produced, stop) = (produced.clone(), stop.clone());
        let topic = topic.clone();
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let first = produced.load(Ordering::SeqCst);
                produce_orders(&producer, &topic, first, 40).await;
                produced.fetch_add(40, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let first = settled(&env.worker, name, &[0, 1]).await;
    let group = format!("connect-{name}");
    let begun_before = rebalances_begun.map(|begun| begun(&group));

    // A restart of task 1 under load: its batch in flight is redone by its
    // successor from the offsets in the sink. With static membership (a
    // real broker) this is no rebalance at all for task 0; the mock broker
    // implements static membership not at all, so there only the data is
    // checked.
    assert!(env.worker.restart_task(name, 1).await.unwrap());
    let before = settled(&env.worker, name, &[0, 1]).await;
    if real {
        assert_eq!(
            before[0], first[0],
            "task 1's restart as a static member rebalanced task 0"
        );
    }
    if let (Some(begun), Some(begun_before)) = (rebalances_begun, begun_before) {
        assert_eq!(
            begun(&group),
            begun_before,
            "task 1's restart as a static member began a rebalance of {group}"
        );
    }

    // A third task joins: cooperative-sticky moves partitions only from the
    // two running tasks to it, which go on untouched (a restarted task
    // would gain partitions).
    assert_eq!(
        put_tasks_max(&env, name, &config, 3).await,
        Updated::TasksResized
    );
    let grown = settled(&env.worker, name, &[0, 1, 2]).await;
    let third = grown[2];
    for (old, new) in before.iter().zip(&grown) {
        assert_eq!(
            new.gained, old.gained,
            "a running task gained partitions when a task was added: {old:?} -> {new:?}"
        );
    }
    let lost: u64 = before
        .iter()
        .zip(&grown)
        .map(|(o, n)| n.lost - o.lost)
        .sum();
    assert_eq!(
        lost, third.gained,
        "what the old tasks lost is what the new one gained"
    );
    assert_eq!(third.gained as i64, third.assigned);
    assert_eq!(third.lost, 0);
    assert!(third.rebalances >= 1);
    for (old, new) in before.iter().zip(&grown) {
        let moved = new.lost - old.lost;
        let counted = new.rebalances - old.rebalances;
        assert_eq!(
            moved > 0,
            counted > 0,
            "rebalances counted iff partitions moved: {old:?} -> {new:?}"
        );
        assert!(
            counted <= moved,
            "more rebalances than partitions moved: {old:?} -> {new:?}"
        );
    }

    // And leaves again: its consumer leaves the group at once, its
    // partitions go back to the two others, which again go on.
    assert_eq!(
        put_tasks_max(&env, name, &config, 2).await,
        Updated::TasksResized
    );
    let shrunk = settled(&env.worker, name, &[0, 1]).await;
    let regained: u64 = grown[..2]
        .iter()
        .zip(&shrunk)
        .map(|(o, n)| n.gained - o.gained)
        .sum();
    assert_eq!(
        regained, third.assigned as u64,
        "the remaining tasks took over exactly the removed task's partitions"
    );
    for (old, new) in grown[..2].iter().zip(&shrunk) {
        assert_eq!(
            new.lost, old.lost,
            "a remaining task lost partitions when a task was removed: {old:?} -> {new:?}"
        );
        let moved = new.gained - old.gained;
        let counted = new.rebalances - old.rebalances;
        assert_eq!(
            moved > 0,
            counted > 0,
            "rebalances counted iff partitions moved: {old:?} -> {new:?}"
        );
        assert!(counted <= moved);
    }
    let status = env.worker.status(name).await.unwrap();
    assert_eq!(
        status.tasks.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        vec![0, 1]
    );

    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();
    let total = produced.load(Ordering::SeqCst);
    let url = pg.url();
    let rows = eventually(
        Duration::from_secs(120),
        "every record in the table",
        || {
            let url = url.clone();
            async move {
                let rows = fixtures::db_rows(
                    &url,
                    "SELECT COUNT(*)::text, COUNT(DISTINCT id)::text, MIN(id)::text, MAX(id)::text FROM stable_rows",
                )
                .await;
                let count: usize = rows[0][0].parse().unwrap();
                (count >= total).then(|| rows[0].clone())
            }
        },
    )
    .await;
    assert_eq!(
        rows,
        vec![
            total.to_string(),
            total.to_string(),
            "0".to_string(),
            (total - 1).to_string()
        ],
        "rows, distinct ids, lowest and highest id: every record once"
    );
    env.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_sink_pauses_the_consumer_instead_of_getting_it_evicted() {
    slow_sink_pauses(InProcess::start(), "slow", 4).await;
}

/// On `env`'s broker, with the connector and its topic named after `name`,
/// and `max.poll.interval.ms` (and the session timeout) `interval_s`
/// seconds: a real broker refuses sessions under 6 s.
pub async fn slow_sink_pauses(env: InProcess, name: &str, interval_s: u64) {
    use sqlx::Connection;
    let Some(pg) = PgInstance::start() else {
        return;
    };
    let topic = &format!("{name}-orders");
    env.broker.create_topic(topic, PARTITIONS).await.unwrap();
    let interval_ms = (interval_s * 1000).to_string();
    // max.poll.interval.ms short: a poll loop blocked on the locked table
    // for longer would leave the group (librdkafka's own check), and the
    // rebalance counter would show it.
    env.create(json!({"name": name, "config": {
        "connector.class": "jdbc-sink",
        "topics": topic,
        "connection.url": pg.url(),
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "id",
        "auto.create": "true",
        "table.name.format": "slow_rows",
        "batch.max.records": "20",
        "consumer.override.session.timeout.ms": interval_ms,
        "consumer.override.heartbeat.interval.ms": "500",
        "consumer.override.max.poll.interval.ms": interval_ms,
    }}))
    .await;
    let producer = producer(&env);
    let url = pg.url();
    let count = |url: String| async move {
        let rows = fixtures::db_rows(&url, "SELECT COUNT(*)::text FROM slow_rows").await;
        rows[0][0].parse::<usize>().unwrap()
    };
    produce_orders(&producer, topic, 0, 4).await;
    eventually(Duration::from_secs(120), "the first rows", || {
        let url = url.clone();
        async move {
            let exists = fixtures::db_rows(
                &url,
                "SELECT COUNT(*)::text FROM pg_tables WHERE tablename = 'slow_rows'",
            )
            .await;
            if exists[0][0] != "1" {
                return None;
            }
            (count(url).await == 4).then_some(())
        }
    })
    .await;
    let settled = moves(&env.worker, name, 0);
    assert_eq!(settled.assigned, i64::from(PARTITIONS));

    // The sink blocks on the table while the test holds its lock.
    let mut lock = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut lock).await.unwrap();
    sqlx::query("LOCK TABLE slow_rows IN ACCESS EXCLUSIVE MODE")
        .execute(&mut lock)
        .await
        .unwrap();
    produce_orders(&producer, topic, 4, 400).await;
    let paused = || {
        env.worker
            .metrics()
            .paused_partitions
            .with_label_values(&[name, "0"])
            .get()
    };
    eventually(Duration::from_secs(60), "the partitions paused", || async {
        (paused() == i64::from(PARTITIONS)).then_some(())
    })
    .await;
    // Three times max.poll.interval.ms with the sink stuck: the member must
    // stay in its group all along.
    for _ in 0..3 * interval_s {
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            paused(),
            i64::from(PARTITIONS),
            "resumed while the sink is stuck"
        );
        let state = env.worker.status(name).await.unwrap().tasks[0].1.state;
        assert_eq!(state, State::Running);
    }
    sqlx::query("COMMIT").execute(&mut lock).await.unwrap();
    drop(lock);

    eventually(Duration::from_secs(120), "every row written", || {
        let url = url.clone();
        async move { (count(url).await == 404).then_some(()) }
    })
    .await;
    eventually(
        Duration::from_secs(30),
        "the partitions resumed",
        || async { (paused() == 0).then_some(()) },
    )
    .await;
    let after = moves(&env.worker, name, 0);
    assert_eq!(
        after, settled,
        "the consumer was evicted or rebalanced while the sink was slow"
    );
    let pauses = env
        .worker
        .metrics()
        .backpressure_pauses
        .with_label_values(&[name, "0"])
        .get();
    assert!(pauses >= 1);
    env.worker.shutdown().await;
}
