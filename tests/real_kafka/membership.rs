//! Static membership on a broker that implements it: a worker restarted
//! within `session.timeout.ms` takes its partitions back with the group's
//! generation unchanged (the broker's group coordinator logs every
//! generation it stabilizes), and a rolling restart of a three-worker
//! cluster moves no task.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{
    broker, create_topic, get_json, high_watermarks, produce_numbered, settled_group_history,
    unique, write_connector, write_worker,
};
use crate::distributed::running_tasks;
use crate::fixtures::{self, SluiceProcess, eventually};

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_worker_takes_its_partitions_back_without_a_rebalance() {
    let cluster = broker();
    let bootstrap = cluster.bootstrap.clone();
    let (input, output) = (unique("static-in"), unique("static-out"));
    create_topic(&bootstrap, &input, 4).await;
    create_topic(&bootstrap, &output, 4).await;
    produce_numbered(&bootstrap, &input, 4, 100).await;
    let dir = tempfile::tempdir().unwrap();
    let worker = write_worker(dir.path(), &bootstrap, "worker", json!({}));
    let name = unique("static");
    let connector = write_connector(
        dir.path(),
        &name,
        json!({
            "connector.class": "stream",
            "tasks.max": "2",
            "topics": input,
            "output.topic": output,
        }),
    );
    let group = format!("connect-{name}");
    let wait_for_output = |at_least: i64| {
        let bootstrap = bootstrap.clone();
        let output = output.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(90);
            while high_watermarks(&bootstrap, &output) < at_least {
                assert!(
                    Instant::now() < deadline,
                    "the stream copied {at_least} records"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let mut sluice = SluiceProcess::start(dir.path(), &[&worker, &connector]);
    wait_for_output(400).await;
    let (generations, rebalances) = settled_group_history(cluster, &group).await;
    let generation = *generations.last().unwrap();

    // A rolling restart of this worker: stopped, started again at once.
    sluice.terminate(Duration::from_secs(30));
    let mut sluice = SluiceProcess::start(dir.path(), &[&worker, &connector]);
    produce_numbered(&bootstrap, &input, 4, 100).await;
    wait_for_output(800).await;
    let (after, rebalances_after) = settled_group_history(cluster, &group).await;
    sluice.terminate(Duration::from_secs(30));
    assert_eq!(
        (after.last().copied(), rebalances_after),
        (Some(generation), rebalances),
        "the restarted worker's two static members rejoined {group} without a rebalance \
         (generations stabilized before: {generations:?}, after: {after:?})"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rolling_restart_of_three_distributed_workers_moves_no_task() {
    let bootstrap = broker().bootstrap.clone();
    let input = unique("rolling-in");
    create_topic(&bootstrap, &input, 6).await;
    let dir = tempfile::tempdir().unwrap();
    let cluster = unique("rolling");
    let workers: Vec<(std::path::PathBuf, String)> = (0..3)
        .map(|i| {
            let port = fixtures::free_port();
            let file = dir.path().join(format!("worker{i}.json"));
            std::fs::write(
                &file,
                json!({
                    "bootstrap.servers": bootstrap,
                    "group.id": cluster,
                    "listeners": format!("http://127.0.0.1:{port}"),
                    "worker.id": format!("w{i}"),
                    "config.storage.topic": format!("{cluster}-configs"),
                    "status.storage.topic": format!("{cluster}-status"),
                    "offset.storage.topic": format!("{cluster}-offsets"),
                    "task.slots.topic": format!("{cluster}-slots"),
                    "config.storage.replication.factor": "-1",
                    "status.storage.replication.factor": "-1",
                    "task.slots.replication.factor": "-1",
                    "wasm.cache.dir": fixtures::wasm_cache_dir().display().to_string(),
                })
                .to_string(),
            )
            .unwrap();
            (file, format!("http://127.0.0.1:{port}"))
        })
        .collect();
    let mut processes: Vec<SluiceProcess> = workers
        .iter()
        .map(|(file, _)| SluiceProcess::start_distributed(dir.path(), file))
        .collect();
    let logs = |processes: &[SluiceProcess]| {
        processes
            .iter()
            .enumerate()
            .map(|(i, w)| format!("--- w{i} ---\n{}", w.log_text()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for (_, base) in &workers {
        eventually(
            Duration::from_secs(90),
            "every worker's REST API",
            || async { get_json(base, "/health").await },
        )
        .await;
    }
    let name = unique("rolling-stream");
    let r = reqwest::Client::new()
        .post(format!("{}/connectors", workers[0].1))
        .json(&json!({"name": name, "config": {
            "connector.class": "stream",
            "tasks.max": "6",
            "topics": input,
            "output.topic": format!("{input}-out"),
        }}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    // All six tasks running, spread over the three workers: their
    // workers, or what was last seen when they were not within 120 s.
    let settled = |base: String| {
        let name = name.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut last = None;
            loop {
                let tasks = running_tasks(&reqwest::Client::new(), &base, &name).await;
                if let Some(tasks) = &tasks {
                    let workers: std::collections::BTreeSet<&String> = tasks.iter().collect();
                    if tasks.len() == 6 && workers.len() == 3 {
                        return Ok(tasks.clone());
                    }
                }
                if tasks.is_some() {
                    last = tasks;
                }
                if Instant::now() > deadline {
                    let status = get_json(&base, &format!("/connectors/{name}/status")).await;
                    return Err(format!(
                        "timed out after 120 s waiting for all six tasks running on three workers; \
                         last running tasks: {last:?}; status: {status:?}"
                    ));
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    };
    let before = match settled(workers[0].1.clone()).await {
        Ok(b) => b,
        Err(e) => panic!("{e}\n{}", logs(&processes)),
    };

    for i in 0..3 {
        processes[i].terminate(Duration::from_secs(60));
        processes[i] = SluiceProcess::start_distributed(dir.path(), &workers[i].0);
        eventually(
            Duration::from_secs(90),
            "the restarted worker's API",
            || async { get_json(&workers[i].1, "/health").await },
        )
        .await;
        let now = match settled(workers[(i + 1) % 3].1.clone()).await {
            Ok(n) => n,
            Err(e) => panic!("after restarting w{i}: {e}\n{}", logs(&processes)),
        };
        assert_eq!(
            now,
            before,
            "restarting w{i} moved tasks (task i runs on element i)\n{}",
            logs(&processes)
        );
    }
    let status: Value = get_json(&workers[0].1, &format!("/connectors/{name}/status"))
        .await
        .unwrap();
    for p in &mut processes {
        p.terminate(Duration::from_secs(60));
    }
    assert_eq!(status["connector"]["state"], "RUNNING", "{status}");
}
