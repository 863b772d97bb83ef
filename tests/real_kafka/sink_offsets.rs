//! KIP-875 offsets of a sink on a real broker: while the connector is
//! STOPPED, `PATCH` and `DELETE /connectors/NAME/offsets` change its
//! consumer group's offsets through the Admin API, as Kafka Connect does
//! (AlterConsumerGroupOffsets, DeleteConsumerGroupOffsets). The next run
//! starts exactly where they say; a partition that does not exist is
//! refused at once; after a `DELETE` nothing is listed and the sink starts
//! over from the beginning (Kafka Connect's `auto.offset.reset=earliest`).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{broker, create_topic, produce_numbered, unique};
use crate::fixtures::{InProcess, eventually};

/// The `(input partition, seq)` of every line the file sink wrote, in order.
fn written(out: &Path) -> Vec<(i64, i64)> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("a line of the sink's file is not JSON ({e}): {l}"));
            (v["p"].as_i64().unwrap(), v["seq"].as_i64().unwrap())
        })
        .collect()
}

struct Rest {
    http: reqwest::Client,
    base: String,
    name: String,
}

impl Rest {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}/connectors/{}{path}", self.base, self.name);
        let mut request = self.http.request(method, url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// `GET .../offsets`, as `(partition, offset)` pairs sorted.
    async fn offsets(&self) -> Vec<(i64, i64)> {
        let (status, body) = self.send(reqwest::Method::GET, "/offsets", None).await;
        assert_eq!(status, 200, "{body}");
        let mut pairs: Vec<(i64, i64)> = body["offsets"]
            .as_array()
            .unwrap_or_else(|| panic!("no offsets array: {body}"))
            .iter()
            .map(|e| {
                (
                    e["partition"]["kafka_partition"].as_i64().unwrap(),
                    e["offset"]["kafka_offset"].as_i64().unwrap(),
                )
            })
            .collect();
        pairs.sort_unstable();
        pairs
    }

    async fn committed(&self, want: &[(i64, i64)]) {
        eventually(
            Duration::from_secs(60),
            &format!("committed offsets {want:?}"),
            || async { (self.offsets().await == want).then_some(()) },
        )
        .await;
    }

    async fn put(&self, action: &str, status: u16) {
        let (got, body) = self
            .send(reqwest::Method::PUT, &format!("/{action}"), None)
            .await;
        assert_eq!(got, status, "PUT {action}: {body}");
    }

    async fn patch(&self, topic: &str, entries: &[(i64, Option<i64>)]) -> (u16, Value) {
        let offsets: Vec<Value> = entries
            .iter()
            .map(|(p, o)| {
                json!({
                    "partition": {"kafka_topic": topic, "kafka_partition": p},
                    "offset": o.map(|o| json!({"kafka_offset": o})),
                })
            })
            .collect();
        self.send(
            reqwest::Method::PATCH,
            "/offsets",
            Some(json!({ "offsets": offsets })),
        )
        .await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_sinks_offsets_are_altered_and_deleted_through_the_admin_api() {
    let bootstrap = broker().bootstrap.clone();
    let topic = unique("sink-offsets");
    create_topic(&bootstrap, &topic, 2).await;
    produce_numbered(&bootstrap, &topic, 2, 10).await;
    let all: BTreeSet<(i64, i64)> = (0..2).flat_map(|p| (0..10).map(move |s| (p, s))).collect();

    let env = InProcess::start_on(&bootstrap);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = sluice_runtime::rest::router(env.herder.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let rest = Rest {
        http: reqwest::Client::new(),
        base,
        name: unique("offsets-sink"),
    };
    let create = json!({"name": rest.name, "config": {
        "connector.class": "file-sink", "topics": topic, "file": out.display().to_string()}});
    let r = rest
        .http
        .post(format!("{}/connectors", rest.base))
        .json(&create)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let lines = |n: usize, what: &str| {
        let out = out.clone();
        let what = what.to_string();
        async move {
            eventually(Duration::from_secs(120), &what, || async {
                (written(&out).len() >= n).then_some(())
            })
            .await;
            let got = written(&out);
            assert_eq!(got.len(), n, "{what}: more lines than expected: {got:?}");
            got
        }
    };
    let first = lines(20, "every record once").await;
    assert_eq!(first.iter().copied().collect::<BTreeSet<_>>(), all);
    rest.committed(&[(0, 10), (1, 10)]).await;

    // A partition the topic does not have: a 400 naming it, at once (the
    // stopped task may still be in the group), and nothing changed.
    rest.put("stop", 204).await;
    let asked = Instant::now();
    let (status, body) = rest.patch(&topic, &[(0, Some(1)), (5, Some(0))]).await;
    let took = asked.elapsed();
    assert_eq!(status, 400, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&topic) && message.contains("partition 5"),
        "the error names the partition: {body}"
    );
    assert!(
        took < Duration::from_secs(5),
        "a nonexistent partition took {took:?} to refuse"
    );
    assert_eq!(rest.offsets().await, vec![(0, 10), (1, 10)]);

    // Stopped, the offsets go to given positions: the next run starts
    // exactly there.
    let (status, body) = rest.patch(&topic, &[(0, Some(7)), (1, Some(3))]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(rest.offsets().await, vec![(0, 7), (1, 3)]);

    rest.put("resume", 202).await;
    let second = lines(30, "the records after the altered offsets").await;
    let again: BTreeSet<(i64, i64)> = second[20..].iter().copied().collect();
    let expected: BTreeSet<(i64, i64)> = (7..10)
        .map(|s| (0, s))
        .chain((3..10).map(|s| (1, s)))
        .collect();
    assert_eq!(again, expected, "the run after PATCH starts at 7 and 3");
    rest.committed(&[(0, 10), (1, 10)]).await;

    // A null offset deletes that partition's offset only.
    rest.put("stop", 204).await;
    let (status, body) = rest.patch(&topic, &[(1, None)]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(rest.offsets().await, vec![(0, 10)]);

    // DELETE: no offsets are listed, and the next run starts where
    // `auto.offset.reset` says (the beginning, as Kafka Connect's default).
    let (status, body) = rest.send(reqwest::Method::DELETE, "/offsets", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(rest.offsets().await, vec![]);
    rest.put("resume", 202).await;
    let third = lines(50, "every record again after DELETE").await;
    assert_eq!(third[30..].iter().copied().collect::<BTreeSet<_>>(), all);
    rest.committed(&[(0, 10), (1, 10)]).await;
    env.worker.shutdown().await;
}
