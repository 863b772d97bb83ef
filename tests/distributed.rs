//! Distributed mode: three `sluice distributed` processes on loopback share
//! one broker (hosted in this process). Connectors created through one
//! worker's REST API spread their tasks over all three, two each; changes
//! made on other workers (config, pause, resume, restart, delete) take
//! effect on all; a worker that restarts gets its share back; a worker
//! killed with SIGKILL while writing has its tasks running on the others
//! after the session timeout, with no record lost and, for the exactly-once
//! sink, none duplicated. The same scenario runs on a real broker in the
//! real-Kafka suite (`real_kafka::cluster_of_three_workers`), where a worker
//! that restarts takes its own tasks back without moving any.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::fixtures::{self, PgInstance, SluiceProcess};

const WAVE: usize = 5000;

/// Where a scenario runs: its broker, the prefix of the cluster's names
/// (the cluster's group and topics, the data topic) and whether the broker
/// is the mock.
pub struct Setting {
    pub bootstrap: String,
    pub prefix: String,
    pub embedded: Option<sluice_runtime::kafka::EmbeddedBroker>,
}

/// Records keyed by id, spread over the topic's partitions by the key hash
/// (`fixtures::produce` sends all to partition 0).
async fn produce_wave(bootstrap: &str, topic: &str, wave: usize) {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let sends: Vec<_> = (wave * WAVE..(wave + 1) * WAVE)
        .map(|i| {
            let key = i.to_string();
            let value = json!({"id": i, "amount": i % 97, "status": "new"}).to_string();
            let producer = producer.clone();
            async move {
                producer
                    .send(
                        FutureRecord::to(topic).key(&key).payload(&value),
                        Duration::from_secs(30),
                    )
                    .await
                    .map_err(|(e, _)| e)
                    .unwrap();
            }
        })
        .collect();
    futures::future::join_all(sends).await;
}

pub async fn get_json(http: &reqwest::Client, url: &str) -> Option<Value> {
    let r = http.get(url).send().await.ok()?;
    if r.status() != 200 {
        return None;
    }
    r.json().await.ok()
}

/// The worker of each task of `connector`, once all of them run.
pub async fn running_tasks(
    http: &reqwest::Client,
    base: &str,
    connector: &str,
) -> Option<Vec<String>> {
    let status = get_json(http, &format!("{base}/connectors/{connector}/status")).await?;
    let tasks = status["tasks"].as_array()?;
    if tasks.is_empty() || tasks.iter().any(|t| t["state"] != "RUNNING") {
        return None;
    }
    Some(
        tasks
            .iter()
            .map(|t| t["worker_id"].as_str().unwrap_or_default().to_string())
            .collect(),
    )
}

fn write_worker(dir: &Path, setting: &Setting, i: usize, port: u16) -> std::path::PathBuf {
    let file = dir.join(format!("worker{i}.json"));
    let prefix = &setting.prefix;
    let mut config = json!({
            "bootstrap.servers": setting.bootstrap,
            "group.id": format!("{prefix}-cluster"),
            "listeners": format!("http://127.0.0.1:{port}"),
            "worker.id": format!("w{i}"),
            "config.storage.topic": format!("{prefix}-configs"),
            "status.storage.topic": format!("{prefix}-status"),
            "task.slots.topic": format!("{prefix}-slots"),
            // A dead member is noticed after the session timeout: short here.
            "consumer.session.timeout.ms": "6000",
            "consumer.heartbeat.interval.ms": "500",
            "wasm.cache.dir": fixtures::wasm_cache_dir().display().to_string(),
    });
    // Source offsets too get a topic of the cluster's own on a real broker
    // (the mock's default topic lives and dies with the test's broker).
    // Its internal topics take the broker's default replication (Kafka
    // Connect's default of 3 is more than a one-broker cluster has).
    if setting.embedded.is_none() {
        config["offset.storage.topic"] = json!(format!("{prefix}-offsets"));
        for key in [
            "config.storage.replication.factor",
            "status.storage.replication.factor",
            "task.slots.replication.factor",
        ] {
            config[key] = json!("-1");
        }
    }
    std::fs::write(&file, config.to_string()).unwrap();
    file
}

#[tokio::test(flavor = "multi_thread")]
async fn three_workers_share_tasks_and_survive_a_sigkill() {
    let broker = sluice_runtime::kafka::EmbeddedBroker::start().unwrap();
    // The mock broker has no CreateTopics: the cluster's topics are made here.
    for (topic, partitions) in [
        ("dist-configs", 1),
        ("dist-status", 1),
        ("dist-slots", 12),
        ("dist-orders", 3),
    ] {
        broker.create_topic(topic, partitions).await.unwrap();
    }
    three_workers(Setting {
        bootstrap: broker.bootstrap_servers().to_string(),
        prefix: "dist".into(),
        embedded: Some(broker),
    })
    .await;
}

/// The scenario on `setting`'s broker; the data topic `<prefix>-orders`
/// must exist with three partitions.
pub async fn three_workers(setting: Setting) {
    let Some(pg) = PgInstance::start() else {
        return;
    };
    let bootstrap = setting.bootstrap.clone();
    let topic = format!("{}-orders", setting.prefix);
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..3).map(|_| fixtures::free_port()).collect();
    let bases: Vec<String> = ports
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect();
    let mut workers: Vec<SluiceProcess> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            let file = write_worker(dir.path(), &setting, i, *port);
            SluiceProcess::start_distributed(dir.path(), &file)
        })
        .collect();
    let http = reqwest::Client::new();
    let logs = |workers: &[SluiceProcess]| {
        workers
            .iter()
            .enumerate()
            .map(|(i, w)| format!("--- w{i} ---\n{}", w.log_text()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for base in &bases {
        fixtures::eventually(
            Duration::from_secs(90),
            "every worker's REST API",
            || async { get_json(&http, &format!("{base}/health")).await },
        )
        .await;
    }

    // Both connectors are created through w0's REST API.
    let sinks = [
        (
            "eos",
            json!({
                "connector.class": "jdbc-sink",
                "topics": topic,
                "tasks.max": "3",
                "connection.url": pg.url(),
                "delivery.guarantee": "exactly-once",
                "insert.mode": "insert",
                "auto.create": "true",
                "table.name.format": "eos_rows",
                "batch.max.records": "50",
                "errors.infrastructure.retry.timeout": "-1",
            }),
        ),
        (
            "alo",
            json!({
                "connector.class": "jdbc-sink",
                "topics": topic,
                "tasks.max": "3",
                "connection.url": pg.url(),
                "insert.mode": "upsert",
                "pk.mode": "record_value",
                "pk.fields": "id",
                "auto.create": "true",
                "table.name.format": "alo_rows",
                "batch.max.records": "100",
                "errors.infrastructure.retry.timeout": "-1",
            }),
        ),
    ];
    for (name, config) in &sinks {
        let r = http
            .post(format!("{}/connectors", bases[0]))
            .json(&json!({"name": name, "config": config}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
        let info: Value = r.json().await.unwrap();
        assert_eq!(info["tasks"].as_array().unwrap().len(), 3, "{info}");
    }

    // The other workers know them, and the six tasks run on all three.
    for base in &bases[1..] {
        fixtures::eventually(
            Duration::from_secs(30),
            "the connectors on every worker",
            || async {
                let names = get_json(&http, &format!("{base}/connectors")).await?;
                (names == json!(["alo", "eos"])).then_some(())
            },
        )
        .await;
    }
    // Tasks placed before every worker has its slots are evened out once
    // the group has settled: two on each.
    let spread = fixtures::eventually(
        Duration::from_secs(90),
        "six running tasks, two on each worker",
        || async {
            let mut all = running_tasks(&http, &bases[0], "eos").await?;
            all.extend(running_tasks(&http, &bases[0], "alo").await?);
            ["w0", "w1", "w2"]
                .iter()
                .all(|w| all.iter().filter(|t| t == w).count() == 2)
                .then_some(all)
        },
    )
    .await;
    eprintln!("tasks: {spread:?}");
    // Every worker shows the same placement.
    for base in &bases[1..] {
        let seen = fixtures::eventually(
            Duration::from_secs(30),
            "the status on every worker",
            || async {
                let mut all = running_tasks(&http, base, "eos").await?;
                all.extend(running_tasks(&http, base, "alo").await?);
                (all == spread).then_some(all)
            },
        )
        .await;
        assert_eq!(seen, spread);
    }

    // A config change made on w2 is seen by w0 and w1.
    let mut changed = sinks[1].1.clone();
    changed["batch.max.records"] = json!("200");
    let r = http
        .put(format!("{}/connectors/alo/config", bases[2]))
        .json(&changed)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    for base in &bases[..2] {
        fixtures::eventually(
            Duration::from_secs(30),
            "the change on every worker",
            || async {
                let config = get_json(&http, &format!("{base}/connectors/alo/config")).await?;
                (config["batch.max.records"] == "200").then_some(())
            },
        )
        .await;
    }

    // Pausing on w1 pauses the tasks on every worker; resuming on w0 resumes them.
    let states = |base: String| {
        let http = http.clone();
        async move {
            let status = get_json(&http, &format!("{base}/connectors/eos/status")).await?;
            let mut states: Vec<String> = status["tasks"]
                .as_array()?
                .iter()
                .map(|t| t["state"].as_str().unwrap_or_default().to_string())
                .collect();
            states.push(status["connector"]["state"].as_str()?.to_string());
            Some(states)
        }
    };
    let r = http
        .put(format!("{}/connectors/eos/pause", bases[1]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    fixtures::eventually(Duration::from_secs(30), "every eos task PAUSED", || async {
        let s = states(bases[0].clone()).await?;
        (s.len() == 4 && s.iter().all(|s| s == "PAUSED")).then_some(())
    })
    .await;
    let r = http
        .put(format!("{}/connectors/eos/resume", bases[0]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    fixtures::eventually(
        Duration::from_secs(30),
        "every eos task RUNNING",
        || async {
            let s = states(bases[2].clone()).await?;
            (s.len() == 4 && s.iter().all(|s| s == "RUNNING")).then_some(())
        },
    )
    .await;

    // A restart asked of w1 restarts the tasks on every worker.
    let r = http
        .post(format!(
            "{}/connectors/eos/restart?includeTasks=true",
            bases[1]
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap());
    fixtures::eventually(
        Duration::from_secs(60),
        "three eos tasks restarted",
        || async {
            let restarted: usize = workers
                .iter()
                .map(|w| {
                    w.log_text()
                        .lines()
                        .filter(|l| l.contains("task restarted") && l.contains("connector=eos"))
                        .count()
                })
                .sum();
            (restarted == 3).then_some(())
        },
    )
    .await;
    fixtures::eventually(
        Duration::from_secs(30),
        "every eos task RUNNING",
        || async {
            let s = states(bases[0].clone()).await?;
            (s.len() == 4 && s.iter().all(|s| s == "RUNNING")).then_some(())
        },
    )
    .await;

    // A worker that stops and comes back gets its share of the tasks again.
    // (The mock broker does not implement static membership, so there the
    // restarted worker joins as a new member and the tasks are evened out
    // again; a real broker hands it its old slots back and nothing moves.)
    let mut placed = running_tasks(&http, &bases[0], "eos").await.unwrap();
    placed.extend(running_tasks(&http, &bases[0], "alo").await.unwrap());
    let status = workers[2].terminate(Duration::from_secs(60));
    assert!(
        status.success(),
        "w2 did not stop cleanly:\n{}",
        workers[2].log_text()
    );
    let w2_file = dir.path().join("worker2.json");
    workers[2] = SluiceProcess::start_distributed(dir.path(), &w2_file);
    let back = fixtures::eventually(
        Duration::from_secs(90),
        "two tasks on each worker again",
        || async {
            let mut all = running_tasks(&http, &bases[0], "eos").await?;
            all.extend(running_tasks(&http, &bases[0], "alo").await?);
            ["w0", "w1", "w2"]
                .iter()
                .all(|w| all.iter().filter(|t| t == w).count() == 2)
                .then_some(all)
        },
    )
    .await;
    eprintln!("after w2's restart: {back:?}");
    if setting.embedded.is_none() {
        assert_eq!(back, placed, "w2's restart moved tasks on a real broker");
    }

    // Under load, w1 is killed.
    let victim = 1;
    assert!(back.iter().any(|w| w == "w1"));
    produce_wave(&bootstrap, &topic, 0).await;
    produce_wave(&bootstrap, &topic, 1).await;
    let eos_rows = || async {
        if !fixtures::table_exists(&pg.url(), "eos_rows").await {
            return 0;
        }
        fixtures::db_rows(&pg.url(), "SELECT CAST(COUNT(*) AS TEXT) FROM eos_rows").await[0][0]
            .parse::<usize>()
            .unwrap()
    };
    fixtures::eventually(Duration::from_secs(60), "rows being written", || async {
        (eos_rows().await > 0).then_some(())
    })
    .await;
    workers[victim].child.kill().unwrap();
    workers[victim].child.wait().unwrap();
    let at_kill = eos_rows().await;
    eprintln!(
        "w1 killed with {at_kill} of {} exactly-once rows written",
        2 * WAVE
    );
    assert!(
        at_kill < 2 * WAVE,
        "the kill did not land while records were being written"
    );
    produce_wave(&bootstrap, &topic, 2).await;
    let total = 3 * WAVE;

    // Its tasks run on the two others, and every record arrives once.
    let survivors = [bases[0].clone(), bases[2].clone()];
    let moved = fixtures::eventually(
        Duration::from_secs(120),
        "w1's tasks running elsewhere",
        || async {
            let mut all = running_tasks(&http, &survivors[0], "eos").await?;
            all.extend(running_tasks(&http, &survivors[0], "alo").await?);
            (all.len() == 6 && all.iter().all(|w| w == "w0" || w == "w2")).then_some(all)
        },
    )
    .await;
    eprintln!("after the kill: {moved:?}");
    let count = |table: &'static str| {
        let url = pg.url();
        async move {
            fixtures::db_rows(
                &url,
                &format!(
                    "SELECT CAST(COUNT(*) AS TEXT), CAST(COUNT(DISTINCT id) AS TEXT) FROM {table}"
                ),
            )
            .await[0]
                .clone()
        }
    };
    for table in ["eos_rows", "alo_rows"] {
        // A sink creates its table with its first batch.
        let deadline = std::time::Instant::now() + Duration::from_secs(180);
        loop {
            let written = if fixtures::table_exists(&pg.url(), table).await {
                count(table).await
            } else {
                vec!["0".into(), "0".into()]
            };
            if written[1] == total.to_string() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{table}: {written:?} of {total} records (rows, distinct ids)\n{}",
                logs(&workers)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // Give a duplicate the chance to appear before judging.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        count("eos_rows").await,
        vec![total.to_string(), total.to_string()],
        "exactly-once: one row per record (rows, distinct ids)\n{}",
        logs(&workers)
    );
    assert_eq!(
        count("alo_rows").await[1],
        total.to_string(),
        "at-least-once: no gaps"
    );

    // The topics used are listed by every worker, whichever ran the tasks
    // (the killed one included); a config update keeps them; a reset asked
    // of one worker clears them on all.
    for base in &survivors {
        for name in ["eos", "alo"] {
            fixtures::eventually(
                Duration::from_secs(30),
                "the topics used, on every worker",
                || async {
                    let t = get_json(&http, &format!("{base}/connectors/{name}/topics")).await?;
                    (t == json!({name: {"topics": [topic]}})).then_some(())
                },
            )
            .await;
        }
    }
    changed["batch.max.records"] = json!("300");
    let r = http
        .put(format!("{}/connectors/alo/config", bases[0]))
        .json(&changed)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let t = get_json(&http, &format!("{}/connectors/alo/topics", bases[2]))
        .await
        .unwrap();
    assert_eq!(
        t,
        json!({"alo": {"topics": [topic]}}),
        "after a config update"
    );
    let r = http
        .put(format!("{}/connectors/eos/topics/reset", bases[2]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    for base in &survivors {
        fixtures::eventually(
            Duration::from_secs(30),
            "no topics after the reset, on every worker",
            || async {
                let t = get_json(&http, &format!("{base}/connectors/eos/topics")).await?;
                (t == json!({"eos": {"topics": []}})).then_some(())
            },
        )
        .await;
    }

    // A connector no worker can start (its topic cannot be created: the
    // mock broker has no CreateTopics) is refused with the reason, and can
    // still be deleted from the config topic. A real broker creates it.
    if setting.embedded.is_some() {
        orphan_is_refused(&http, &bases[0], dir.path()).await;
    }

    // A connector deleted on one worker is gone from the others.
    let r = http
        .delete(format!("{}/connectors/alo", bases[2]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    fixtures::eventually(
        Duration::from_secs(30),
        "alo deleted everywhere",
        || async {
            let names = get_json(&http, &format!("{}/connectors", bases[0])).await?;
            (names == json!(["eos"])).then_some(())
        },
    )
    .await;
    for i in [0, 2] {
        let _ = workers[i].terminate(Duration::from_secs(60));
    }
}

async fn orphan_is_refused(http: &reqwest::Client, base: &str, dir: &Path) {
    let r = http
        .post(format!("{}/connectors", base))
        .json(&json!({"name": "orphan", "config": {
            "connector.class": "file-sink",
            "topics": "never-created",
            "file": dir.join("orphan.jsonl").display().to_string(),
        }}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["message"]
            .as_str()
            .unwrap()
            .matches("starting connector `orphan`")
            .count(),
        1,
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap().contains("never-created"),
        "{body}"
    );
    let r = http
        .delete(format!("{}/connectors/orphan", base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
}

#[test]
fn a_distributed_worker_needs_its_topics_and_no_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let worker = dir.path().join("worker.json");
    std::fs::write(&worker, json!({"status.storage.topic": "s"}).to_string()).unwrap();
    let (code, stderr) = fixtures::sluice_rejects_command(dir.path(), "distributed", &[&worker]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("`config.storage.topic` is required"),
        "{stderr}"
    );

    std::fs::write(
        &worker,
        json!({"config.storage.topic": "c", "status.storage.topic": "s",
               "config.storage.file.filename": "connectors.json"})
        .to_string(),
    )
    .unwrap();
    let (code, stderr) = fixtures::sluice_rejects_command(dir.path(), "distributed", &[&worker]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("`config.storage.file.filename` is for standalone workers"),
        "{stderr}"
    );

    std::fs::write(
        &worker,
        json!({"config.storage.topic": "c", "status.storage.topic": "c"}).to_string(),
    )
    .unwrap();
    let (code, stderr) = fixtures::sluice_rejects_command(dir.path(), "distributed", &[&worker]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("must name four different topics"),
        "{stderr}"
    );

    std::fs::write(
        &worker,
        json!({"config.storage.topic": "c", "status.storage.topic": "s",
               "offset.storage.topic": "s"})
        .to_string(),
    )
    .unwrap();
    let (code, stderr) = fixtures::sluice_rejects_command(dir.path(), "distributed", &[&worker]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("must name four different topics"),
        "{stderr}"
    );

    std::fs::write(
        &worker,
        json!({"config.storage.topic": "c", "status.storage.topic": "s",
               "offset.storage.file.filename": "offsets.json"})
        .to_string(),
    )
    .unwrap();
    let (code, stderr) = fixtures::sluice_rejects_command(dir.path(), "distributed", &[&worker]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("`offset.storage.file.filename` is for standalone workers"),
        "{stderr}"
    );

    std::fs::write(&worker, json!({"task.slots.partitions": "0"}).to_string()).unwrap();
    let (code, stderr) = fixtures::sluice_rejects_command(dir.path(), "distributed", &[&worker]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("task.slots.partitions"), "{stderr}");
}

/// Issue 21 #12: with the broker down, SIGTERM stops distributed workers
/// within task.shutdown.graceful.timeout.ms plus the documented margin
/// (they used to wait for each final status's producer timeout, a minute
/// and more).
#[tokio::test(flavor = "multi_thread")]
async fn workers_stop_in_bounded_time_while_the_broker_is_down() {
    let broker = sluice_runtime::kafka::EmbeddedBroker::start().unwrap();
    for (topic, partitions) in [
        ("down-configs", 1),
        ("down-status", 1),
        ("down-slots", 12),
        ("down-orders", 2),
    ] {
        broker.create_topic(topic, partitions).await.unwrap();
    }
    let setting = Setting {
        bootstrap: broker.bootstrap_servers().to_string(),
        prefix: "down".into(),
        embedded: None,
    };
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..2).map(|_| fixtures::free_port()).collect();
    let mut workers: Vec<SluiceProcess> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            let file = write_worker(dir.path(), &setting, i, *port);
            let mut config: Value =
                serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
            for key in [
                "config.storage.replication.factor",
                "status.storage.replication.factor",
                "task.slots.replication.factor",
                "offset.storage.topic",
            ] {
                config.as_object_mut().unwrap().remove(key);
            }
            config["task.shutdown.graceful.timeout.ms"] = json!("2000");
            std::fs::write(&file, config.to_string()).unwrap();
            SluiceProcess::start_distributed(dir.path(), &file)
        })
        .collect();
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{}", ports[0]);
    for port in &ports {
        fixtures::eventually(Duration::from_secs(90), "every worker's REST API", || {
            let url = format!("http://127.0.0.1:{port}/health");
            let http = http.clone();
            async move { get_json(&http, &url).await }
        })
        .await;
    }
    let created = http
        .post(format!("{base}/connectors"))
        .json(&json!({"name": "down-gen", "config": {
            "connector.class": "file-sink", "topics": "down-orders",
            "file": dir.path().join("out.txt").display().to_string(),
        }}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    // (A file sink runs one task.)
    while running_tasks(&http, &base, "down-gen").await.is_none() {
        if std::time::Instant::now() > deadline {
            let status = get_json(&http, &format!("{base}/connectors/down-gen/status")).await;
            let logs: Vec<String> = workers.iter().map(|w| w.log_text()).collect();
            panic!(
                "the task is not running: {status:?}\n{}",
                logs.join("\n---\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    broker.set_up(false).await.unwrap();
    // Long enough for the clients to find the broker gone, and to retry
    // many times.
    tokio::time::sleep(Duration::from_secs(12)).await;
    // Each client says once that the broker is gone, not at every retry.
    for w in &workers {
        let log = w.log_text();
        let mut repeats: std::collections::BTreeMap<String, usize> = Default::default();
        for line in log.lines() {
            // The target and message, without timestamp, level or numbers.
            let Some(at) = line.find("rdkafka") else {
                continue;
            };
            let message = &line[at..];
            let shape: String = message
                .chars()
                .map(|c| if c.is_ascii_digit() { '#' } else { c })
                .collect();
            *repeats.entry(shape).or_default() += 1;
        }
        let noisy: Vec<_> = repeats.iter().filter(|(_, n)| **n > 2).collect();
        assert!(
            noisy.is_empty(),
            "client errors logged at every retry: {noisy:#?}"
        );
    }
    // 2 s graceful timeout + the 5 s margin + slack for a loaded machine.
    for w in &workers {
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(w.child.id().to_string())
            .status();
    }
    for w in &mut workers {
        w.terminate(Duration::from_secs(20));
    }
}
