//! The REST differential: one sequence of requests sent to Apache Kafka
//! Connect itself (`scripts/kafka-connect.sh`, distributed) and to a
//! `sluice distributed` worker, both on the broker of `scripts/kafka.sh`,
//! each running the same file source and sink (Kafka Connect's
//! `FileStreamSource`/`FileStreamSink`, the names Sluice answers to as
//! well). Every answer is compared: status code, content type, and the
//! JSON body's keys and value types, and its values where they are
//! deterministic (not `worker_id`, `trace`, timestamps, versions). Names
//! and paths that differ between the two sides (each has its own
//! connectors, topics and files, so that they share no consumer group) are
//! mapped back to placeholders before comparing.
//!
//! Every difference must be listed in `docs/compatibility.md` (its table
//! of accepted differences: request id and JSON path), and every listed
//! one must still occur: the suite fails on a new difference and on a
//! stale entry. `KAFKA_CONNECT_URL` names a running Kafka Connect instead
//! of the one `scripts/kafka-connect.sh start` runs (on the same broker as
//! `SLUICE_TEST_KAFKA_BOOTSTRAP`). The third-party client check
//! (`kafka-connect-py`, PyPI) drives the same lifecycle through
//! `tests/compat/kafka_connect_py.py`. The same Kafka Connect runs
//! Debezium's JDBC sink into PostgreSQL, the reference of the benchmarks'
//! JDBC rows (`debezium_jdbc_sink_runs_in_kafka_connect`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{broker, unique};
use crate::fixtures::{self, SluiceProcess};

/// The Kafka Connect worker the suites compare with: `KAFKA_CONNECT_URL`,
/// or the distributed one of `scripts/kafka-connect.sh start`.
pub fn kafka_connect() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("KAFKA_CONNECT_URL")
            && !url.is_empty()
        {
            return url;
        }
        let out = Command::new(fixtures::repo_root().join("scripts/kafka-connect.sh"))
            .arg("start")
            .env("SLUICE_TEST_KAFKA_BOOTSTRAP", &broker().bootstrap)
            .output()
            .expect("running scripts/kafka-connect.sh");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "scripts/kafka-connect.sh start failed: the REST and client differentials need \
             Apache Kafka Connect (Java 17 and Maven):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("export KAFKA_CONNECT_URL="))
            .unwrap_or_else(|| {
                panic!("scripts/kafka-connect.sh printed no KAFKA_CONNECT_URL: {stdout}")
            })
            .to_string()
    })
}

/// A `sluice distributed` worker on the real broker, a cluster of its own.
pub fn sluice_worker(dir: &Path) -> (SluiceProcess, String) {
    let prefix = unique("compat");
    let port = fixtures::free_port();
    let worker = dir.join("worker.json");
    let mut config = json!({
        "bootstrap.servers": broker().bootstrap,
        "group.id": format!("{prefix}-cluster"),
        "listeners": format!("http://127.0.0.1:{port}"),
        "worker.id": "compat-worker",
        "config.storage.topic": format!("{prefix}-configs"),
        "status.storage.topic": format!("{prefix}-status"),
        "task.slots.topic": format!("{prefix}-slots"),
        "offset.storage.topic": format!("{prefix}-offsets"),
        "wasm.cache.dir": fixtures::wasm_cache_dir().display().to_string(),
        "transforms.library": fixtures::standard_library().display().to_string(),
    });
    for key in [
        "config.storage.replication.factor",
        "status.storage.replication.factor",
        "task.slots.replication.factor",
    ] {
        config[key] = json!("-1");
    }
    std::fs::write(&worker, config.to_string()).unwrap();
    let process = SluiceProcess::start_distributed(dir, &worker);
    (process, format!("http://127.0.0.1:{port}"))
}

/// Fails, saying how the plugin is resolved, unless the Kafka Connect
/// worker at `kc_url` lists the connector `class` (`what`, resolved by the
/// pom profile `profile` of scripts/kafka-connect/pom.xml).
pub async fn assert_kafka_connect_has(
    http: &reqwest::Client,
    kc_url: &str,
    class: &str,
    what: &str,
    profile: &str,
) {
    let plugins = http
        .get(format!("{kc_url}/connector-plugins"))
        .send()
        .await
        .expect("GET /connector-plugins")
        .text()
        .await
        .unwrap();
    let listed: Value = serde_json::from_str(&plugins)
        .unwrap_or_else(|e| panic!("GET {kc_url}/connector-plugins: {e}: {plugins}"));
    assert!(
        listed
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["class"] == class),
        "{what} ({class}) is not among the plugins of Kafka Connect at {kc_url}: \
         scripts/kafka-connect.sh resolves it from Maven (scripts/kafka-connect/pom.xml, profile \
         {profile}) and its `start` says why it has not (a Maven log under \
         ~/.cache/sluice/kafka-connect-*/plugins/); the worker lists: {plugins}"
    );
}

/// Creates (or updates) connector `name` on the Kafka Connect worker at
/// `kc_url`, failing with its answer if it refuses (`what` the connector).
pub async fn put_kafka_connect_connector(
    http: &reqwest::Client,
    kc_url: &str,
    name: &str,
    config: &Value,
    what: &str,
) {
    let created = http
        .put(format!("{kc_url}/connectors/{name}/config"))
        .json(config)
        .send()
        .await
        .expect("PUT /connectors/{name}/config");
    let status = created.status();
    assert!(
        status.is_success(),
        "Kafka Connect refused {what} ({status}): {}",
        created.text().await.unwrap_or_default()
    );
}

/// Waits until `GET base/health` answers 200.
pub async fn healthy(http: &reqwest::Client, base: &str, what: &str) {
    fixtures::eventually(Duration::from_secs(120), what, || async {
        let r = http.get(format!("{base}/health")).send().await.ok()?;
        (r.status() == 200).then_some(())
    })
    .await
}

/// A request's body.
enum Body {
    None,
    /// JSON, sent as `application/json`; `{placeholders}` in strings are
    /// replaced by the side's values.
    Json(Value),
    /// Raw bytes with a content type (bad JSON, a wrong content type).
    Raw(&'static str, &'static str),
}

/// How the two answers are compared (after placeholders and volatile
/// values are mapped).
#[derive(Clone, Copy)]
enum Check {
    /// Status, content type, keys, types and values.
    Values,
    /// Values, arrays of strings compared as sets; only this run's
    /// connectors (names that map to a placeholder), so that other
    /// connectors on the same Kafka Connect do not count.
    Mine,
    /// Status, content type, keys and types; arrays by their elements'
    /// shapes, not their lengths (null matches any type).
    Shape,
    /// The shapes of an object's values, whatever its keys (the loggers:
    /// each side has its own).
    ValueShapes,
    /// A validation report: its shape, its `name`, whether it found errors
    /// and the keys it found them in (each side words and counts its
    /// messages its own way, and lists its own keys).
    Verdict,
    /// Values of the array elements whose `class` is one of these (each
    /// side's other plugins are its own), and every element's shape.
    Plugins(&'static [&'static str]),
    /// The config definitions named here (each plugin's own keys differ):
    /// their name, type, default and whether required; and every element's
    /// shape (documentation, display names, groups and order are each
    /// plugin's own text).
    Definitions(&'static [&'static str]),
}

/// What both sides must show before a request is sent (polled on both).
#[derive(Clone, Copy)]
enum Wait {
    None,
    /// `connector`'s state, and every task's (none when STOPPED, at least
    /// one when RUNNING).
    State(&'static str, &'static str),
    /// `GET /connectors/{c}/topics` lists a topic.
    Topics(&'static str),
    /// `GET /connectors/{c}/offsets` has `n` entries, the first one at
    /// offset key `key` = `value`.
    Offset(&'static str, &'static str, u64),
}

struct Step {
    id: &'static str,
    method: &'static str,
    path: &'static str,
    body: Body,
    check: Check,
    wait: Wait,
}

fn step(id: &'static str, method: &'static str, path: &'static str) -> Step {
    Step {
        id,
        method,
        path,
        body: Body::None,
        check: Check::Values,
        wait: Wait::None,
    }
}

impl Step {
    fn json(mut self, body: Value) -> Self {
        self.body = Body::Json(body);
        self
    }
    fn raw(mut self, content_type: &'static str, body: &'static str) -> Self {
        self.body = Body::Raw(content_type, body);
        self
    }
    fn check(mut self, check: Check) -> Self {
        self.check = check;
        self
    }
    fn after(mut self, wait: Wait) -> Self {
        self.wait = wait;
        self
    }
}

const FILE_CLASSES: &[&str] = &[
    "org.apache.kafka.connect.file.FileStreamSinkConnector",
    "org.apache.kafka.connect.file.FileStreamSourceConnector",
];

fn src_config() -> Value {
    json!({
        "connector.class": "FileStreamSource",
        "tasks.max": "1",
        "file": "{dir}/in.txt",
        "topic": "{topic}",
    })
}

fn sink_config() -> Value {
    json!({
        "connector.class": "FileStreamSink",
        "tasks.max": "1",
        "file": "{dir}/out.txt",
        "topics": "{topic}",
    })
}

/// The sequence. Placeholders: `{src}` and `{sink}` (the two connectors
/// that live throughout), `{extra}` (created by PUT), `{paused}` (created
/// PAUSED), `{topic}`, `{dir}`. `nope` exists on neither side.
fn steps() -> Vec<Step> {
    use Check::*;
    let ct = "text/plain";
    let bad_json = "{\"name\": \"x\", \"config\": {";
    let with_name = |name: &str, config: Value| json!({"name": name, "config": config});
    let mut s = vec![
        step("root", "GET", "/"),
        step("plugins", "GET", "/connector-plugins").check(Plugins(FILE_CLASSES)),
        step(
            "plugins-all",
            "GET",
            "/connector-plugins?connectorsOnly=false",
        )
        .check(Plugins(&[
            "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "org.apache.kafka.connect.transforms.Filter",
            "org.apache.kafka.connect.transforms.InsertField$Value",
            "org.apache.kafka.connect.transforms.RegexRouter",
            "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        ])),
        step(
            "plugins-all-capitalized",
            "GET",
            "/connector-plugins?connectorsOnly=False",
        )
        .check(Plugins(&["org.apache.kafka.connect.transforms.predicates.TopicNameMatches"])),
        step(
            "plugins-connectors-only",
            "GET",
            "/connector-plugins?connectorsOnly=true",
        )
        .check(Plugins(FILE_CLASSES)),
        step(
            "plugin-config",
            "GET",
            "/connector-plugins/FileStreamSourceConnector/config",
        )
        .check(Definitions(&["file", "topic", "batch.size"])),
        step(
            "plugin-config-fqcn",
            "GET",
            "/connector-plugins/org.apache.kafka.connect.file.FileStreamSinkConnector/config",
        )
        .check(Definitions(&["file", "topics"])),
        step(
            "plugin-config-unknown",
            "GET",
            "/connector-plugins/NoSuchConnector/config",
        ),
        step(
            "validate-valid",
            "PUT",
            "/connector-plugins/FileStreamSinkConnector/config/validate",
        )
        .json(sink_config())
        .check(Verdict),
        step(
            "validate-invalid",
            "PUT",
            "/connector-plugins/FileStreamSinkConnector/config/validate",
        )
        .json(json!({"connector.class": "FileStreamSink", "tasks.max": "x"}))
        .check(Verdict),
        step(
            "validate-named",
            "PUT",
            "/connector-plugins/FileStreamSinkConnector/config/validate",
        )
        .json({
            let mut c = sink_config();
            c["name"] = json!("{sink}");
            c
        })
        .check(Verdict),
        step(
            "validate-other-plugin",
            "PUT",
            "/connector-plugins/FileStreamSinkConnector/config/validate",
        )
        .json(src_config()),
        step(
            "validate-alias",
            "PUT",
            "/connector-plugins/org.apache.kafka.connect.file.FileStreamSinkConnector/config/validate",
        )
        .json({
            let mut c = sink_config();
            c["name"] = json!("{sink}");
            c
        })
        .check(Verdict),
        step(
            "validate-unknown-class",
            "PUT",
            "/connector-plugins/NoSuchConnector/config/validate",
        )
        .json(json!({"connector.class": "NoSuchConnector", "topics": "t"})),
        step(
            "validate-bad-json",
            "PUT",
            "/connector-plugins/FileStreamSinkConnector/config/validate",
        )
        .raw("application/json", bad_json),
        step(
            "validate-content-type",
            "PUT",
            "/connector-plugins/FileStreamSinkConnector/config/validate",
        )
        .raw(ct, "{}"),
        // Create.
        step("create-source", "POST", "/connectors").json(with_name("{src}", src_config())),
        step("create-sink", "POST", "/connectors").json(with_name("{sink}", sink_config())),
        step("create-duplicate", "POST", "/connectors").json(with_name("{src}", src_config())),
        step("create-bad-json", "POST", "/connectors").raw("application/json", bad_json),
        step("create-content-type", "POST", "/connectors").raw(ct, "{}"),
        step("create-no-class", "POST", "/connectors").json(with_name(
            "nope",
            json!({"file": "{dir}/in.txt", "topic": "{topic}"}),
        )),
        step("create-unknown-class", "POST", "/connectors").json(with_name(
            "nope",
            json!({"connector.class": "com.example.NoSuchConnector", "topic": "{topic}"}),
        )),
        step("create-wrong-type", "POST", "/connectors").json(with_name(
            "nope",
            json!({"connector.class": "FileStreamSource", "tasks.max": "many", "topic": "{topic}"}),
        )),
        step("create-no-name", "POST", "/connectors").json(json!({"config": src_config()})),
        step("create-not-object", "POST", "/connectors").json(json!(["{src}"])),
        step("create-paused", "POST", "/connectors").json(json!({
            "name": "{paused}", "config": sink_config(), "initial_state": "PAUSED"
        })),
        step("create-bad-initial-state", "POST", "/connectors").json(json!({
            "name": "nope", "config": sink_config(), "initial_state": "SLEEPING"
        })),
        // Read.
        step("list", "GET", "/connectors").check(Mine),
        step("status-source", "GET", "/connectors/{src}/status")
            .after(Wait::State("{src}", "RUNNING")),
        step("status-sink", "GET", "/connectors/{sink}/status")
            .after(Wait::State("{sink}", "RUNNING")),
        step("status-paused", "GET", "/connectors/{paused}/status")
            .after(Wait::State("{paused}", "PAUSED")),
        step("list-expand-status", "GET", "/connectors?expand=status").check(Mine),
        step("list-expand-info", "GET", "/connectors?expand=info").check(Mine),
        step(
            "list-expand-both",
            "GET",
            "/connectors?expand=status&expand=info",
        )
        .check(Mine),
        step("get-source", "GET", "/connectors/{src}"),
        step("get-config", "GET", "/connectors/{src}/config"),
        step("get-tasks", "GET", "/connectors/{src}/tasks"),
        step("get-task-status", "GET", "/connectors/{src}/tasks/0/status"),
        step("topics-source", "GET", "/connectors/{src}/topics").after(Wait::Topics("{src}")),
        step("topics-sink", "GET", "/connectors/{sink}/topics").after(Wait::Topics("{sink}")),
        step("offsets-sink-running", "GET", "/connectors/{sink}/offsets").after(Wait::Offset(
            "{sink}",
            "kafka_offset",
            3,
        )),
        step("offsets-source-running", "GET", "/connectors/{src}/offsets")
            .after(Wait::Offset("{src}", "position", 14)),
        step(
            "offsets-patch-running",
            "PATCH",
            "/connectors/{src}/offsets",
        )
        .json(json!({
            "offsets": [{"partition": {"filename": "{dir}/in.txt"}, "offset": {"position": 4}}]
        })),
        step(
            "offsets-delete-running",
            "DELETE",
            "/connectors/{src}/offsets",
        ),
        // Update.
        step("put-config", "PUT", "/connectors/{sink}/config").json(json!({
            "connector.class": "FileStreamSink", "tasks.max": "1",
            "file": "{dir}/out2.txt", "topics": "{topic}",
        })),
        step("topics-after-update", "GET", "/connectors/{sink}/topics")
            .after(Wait::State("{sink}", "RUNNING")),
        step("put-config-create", "PUT", "/connectors/{extra}/config").json(sink_config()),
        step("put-config-invalid", "PUT", "/connectors/{extra}/config").json(json!({
            "connector.class": "FileStreamSink", "tasks.max": "-1", "topics": "{topic}"
        })),
        step(
            "put-config-name-mismatch",
            "PUT",
            "/connectors/{extra}/config",
        )
        .json(json!({
            "connector.class": "FileStreamSink", "name": "other", "topics": "{topic}"
        })),
        step("put-config-bad-json", "PUT", "/connectors/{extra}/config")
            .raw("application/json", "{\"topics\": "),
        step(
            "put-config-content-type",
            "PUT",
            "/connectors/{extra}/config",
        )
        .raw(ct, "{}"),
        step("patch-config", "PATCH", "/connectors/{extra}/config")
            .json(json!({"file": "{dir}/out3.txt"})),
        step("patch-config-remove", "PATCH", "/connectors/{extra}/config")
            .json(json!({"tasks.max": null})),
        step(
            "patch-config-content-type",
            "PATCH",
            "/connectors/{extra}/config",
        )
        .raw(ct, "{}"),
        step("get-extra", "GET", "/connectors/{extra}").after(Wait::State("{extra}", "RUNNING")),
        // Target states and restarts.
        step("pause", "PUT", "/connectors/{src}/pause"),
        step("status-after-pause", "GET", "/connectors/{src}/status")
            .after(Wait::State("{src}", "PAUSED")),
        step("resume", "PUT", "/connectors/{src}/resume"),
        step("status-after-resume", "GET", "/connectors/{src}/status")
            .after(Wait::State("{src}", "RUNNING")),
        step("restart", "POST", "/connectors/{src}/restart"),
        step(
            "restart-include-tasks",
            "POST",
            "/connectors/{src}/restart?includeTasks=true",
        )
        .after(Wait::State("{src}", "RUNNING")),
        step(
            "restart-only-failed",
            "POST",
            "/connectors/{src}/restart?includeTasks=true&onlyFailed=true",
        )
        .after(Wait::State("{src}", "RUNNING")),
        // Python's requests writes booleans as `True`/`False`.
        step(
            "restart-capitalized",
            "POST",
            "/connectors/{src}/restart?includeTasks=True&onlyFailed=True",
        )
        .after(Wait::State("{src}", "RUNNING")),
        step("restart-not-a-boolean", "POST", "/connectors/{src}/restart?includeTasks=yes")
            .after(Wait::State("{src}", "RUNNING")),
        step("restart-task", "POST", "/connectors/{src}/tasks/0/restart")
            .after(Wait::State("{src}", "RUNNING")),
        step(
            "restart-task-unknown",
            "POST",
            "/connectors/{src}/tasks/7/restart",
        ),
        step(
            "task-status-unknown",
            "GET",
            "/connectors/{src}/tasks/7/status",
        ),
        step(
            "task-status-not-a-number",
            "GET",
            "/connectors/{src}/tasks/x/status",
        ),
        // Stopped: offsets can be changed.
        step("stop", "PUT", "/connectors/{src}/stop").after(Wait::State("{src}", "RUNNING")),
        step("status-stopped", "GET", "/connectors/{src}/status")
            .after(Wait::State("{src}", "STOPPED")),
        step("offsets-stopped", "GET", "/connectors/{src}/offsets"),
        step("offsets-patch", "PATCH", "/connectors/{src}/offsets").json(json!({
            "offsets": [{"partition": {"filename": "{dir}/in.txt"}, "offset": {"position": 4}}]
        })),
        step("offsets-after-patch", "GET", "/connectors/{src}/offsets"),
        step(
            "offsets-patch-no-offsets",
            "PATCH",
            "/connectors/{src}/offsets",
        )
        .json(json!({"partitions": []})),
        step(
            "offsets-patch-content-type",
            "PATCH",
            "/connectors/{src}/offsets",
        )
        .raw(ct, "{}"),
        step("offsets-delete", "DELETE", "/connectors/{src}/offsets"),
        step("offsets-after-delete", "GET", "/connectors/{src}/offsets"),
        step("resume-stopped", "PUT", "/connectors/{src}/resume"),
        step("status-resumed", "GET", "/connectors/{src}/status")
            .after(Wait::State("{src}", "RUNNING")),
        // Topics.
        step(
            "topics-reset-running",
            "PUT",
            "/connectors/{sink}/topics/reset",
        ),
        step("stop-sink", "PUT", "/connectors/{sink}/stop"),
        step("topics-reset", "PUT", "/connectors/{sink}/topics/reset")
            .after(Wait::State("{sink}", "STOPPED")),
        step("topics-after-reset", "GET", "/connectors/{sink}/topics"),
        // How far each sink got depends on what its source wrote again
        // after the restarts above.
        step("offsets-sink-stopped", "GET", "/connectors/{sink}/offsets").check(Shape),
        step("offsets-sink-patch", "PATCH", "/connectors/{sink}/offsets").json(json!({
            "offsets": [{"partition": {"kafka_topic": "{topic}", "kafka_partition": 0},
                         "offset": {"kafka_offset": 1}}]
        })),
        step(
            "offsets-sink-after-patch",
            "GET",
            "/connectors/{sink}/offsets",
        ),
        step(
            "offsets-sink-delete",
            "DELETE",
            "/connectors/{sink}/offsets",
        ),
        step(
            "offsets-sink-after-delete",
            "GET",
            "/connectors/{sink}/offsets",
        ),
        // Loggers.
        step("loggers", "GET", "/admin/loggers").check(ValueShapes),
        step("logger-root", "GET", "/admin/loggers/root").check(Shape),
        step("logger-put", "PUT", "/admin/loggers/root")
            .json(json!({"level": "INFO"}))
            .check(Shape),
        step("logger-put-bad-level", "PUT", "/admin/loggers/root").json(json!({"level": "LOUD"})),
        step("logger-put-no-level", "PUT", "/admin/loggers/root").json(json!({})),
        step("logger-put-content-type", "PUT", "/admin/loggers/root").raw(ct, "{}"),
        step("logger-unknown", "GET", "/admin/loggers/no.such.logger"),
        // Every path parameter unknown.
        step("unknown-get", "GET", "/connectors/nope"),
        step("unknown-delete", "DELETE", "/connectors/nope"),
        step("unknown-config", "GET", "/connectors/nope/config"),
        step("unknown-patch-config", "PATCH", "/connectors/nope/config")
            .json(json!({"tasks.max": "1"})),
        step("unknown-status", "GET", "/connectors/nope/status"),
        step("unknown-tasks", "GET", "/connectors/nope/tasks"),
        step(
            "unknown-task-status",
            "GET",
            "/connectors/nope/tasks/0/status",
        ),
        step("unknown-restart", "POST", "/connectors/nope/restart"),
        step(
            "unknown-task-restart",
            "POST",
            "/connectors/nope/tasks/0/restart",
        ),
        step("unknown-pause", "PUT", "/connectors/nope/pause"),
        step("unknown-resume", "PUT", "/connectors/nope/resume"),
        step("unknown-stop", "PUT", "/connectors/nope/stop"),
        step("unknown-offsets", "GET", "/connectors/nope/offsets"),
        step("unknown-offsets-patch", "PATCH", "/connectors/nope/offsets").json(json!({
            "offsets": [{"partition": {"filename": "x"}, "offset": {"position": 0}}]
        })),
        step(
            "unknown-offsets-delete",
            "DELETE",
            "/connectors/nope/offsets",
        ),
        step("unknown-topics", "GET", "/connectors/nope/topics"),
        step(
            "unknown-topics-reset",
            "PUT",
            "/connectors/nope/topics/reset",
        ),
        step("unknown-path", "GET", "/no/such/path"),
        // Wrong methods.
        step("method-connectors", "DELETE", "/connectors"),
        step("method-pause", "POST", "/connectors/{src}/pause"),
        step("method-restart", "GET", "/connectors/{src}/restart"),
        step("method-plugins", "POST", "/connector-plugins"),
        step(
            "method-validate",
            "POST",
            "/connector-plugins/FileStreamSinkConnector/config/validate",
        )
        .json(json!({})),
        step("method-loggers", "PUT", "/admin/loggers").json(json!({"level": "INFO"})),
        // Delete.
        step("delete-paused", "DELETE", "/connectors/{paused}"),
        step("delete-extra", "DELETE", "/connectors/{extra}"),
        step("get-deleted", "GET", "/connectors/{paused}"),
        step("list-after-delete", "GET", "/connectors").check(Mine),
    ];
    // The last requests clean up; the connectors' end is compared too.
    s.push(step("delete-source", "DELETE", "/connectors/{src}"));
    s.push(step("delete-sink", "DELETE", "/connectors/{sink}"));
    s
}

/// One side: its base URL and the values of the placeholders.
struct Side {
    what: &'static str,
    base: String,
    vars: Vec<(String, String)>,
}

impl Side {
    fn new(what: &'static str, base: String, run: &str, dir: &Path) -> Self {
        let tag = if what == "Kafka Connect" { "kc" } else { "sl" };
        let mut vars = vec![
            ("{topic}".to_string(), format!("compat-{run}-{tag}-lines")),
            ("{src}".to_string(), format!("compat-{run}-source-{tag}")),
            ("{sink}".to_string(), format!("compat-{run}-sink-{tag}")),
            ("{extra}".to_string(), format!("compat-{run}-extra-{tag}")),
            ("{paused}".to_string(), format!("compat-{run}-paused-{tag}")),
            ("{dir}".to_string(), dir.display().to_string()),
        ];
        // Longest first, so that no value is replaced inside a longer one.
        vars.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        Self { what, base, vars }
    }

    fn fill(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (k, v) in &self.vars {
            out = out.replace(k, v);
        }
        out
    }

    fn unfill(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (k, v) in &self.vars {
            out = out.replace(v, k);
        }
        out
    }

    async fn send(&self, http: &reqwest::Client, s: &Step) -> Answer {
        let method = reqwest::Method::from_bytes(s.method.as_bytes()).unwrap();
        let mut request = http
            .request(method, format!("{}{}", self.base, self.fill(s.path)))
            .timeout(Duration::from_secs(90));
        match &s.body {
            Body::None => {}
            Body::Json(v) => {
                request = request
                    .header("content-type", "application/json")
                    .body(self.fill(&v.to_string()));
            }
            Body::Raw(ct, text) => {
                request = request.header("content-type", *ct).body(self.fill(text));
            }
        }
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("{}: {} {}: {e}", self.what, s.method, s.path));
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            });
        let allow = response
            .headers()
            .get("allow")
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                let mut m: Vec<String> = v.split(',').map(|m| m.trim().to_string()).collect();
                m.sort();
                // HEAD and OPTIONS come with GET in one server, not the other.
                m.retain(|m| m != "HEAD" && m != "OPTIONS");
                m
            });
        let text = response.text().await.unwrap_or_default();
        let body = if text.is_empty() {
            Value::Null
        } else {
            match serde_json::from_str::<Value>(&text) {
                Ok(v) => self.normalize(v),
                Err(_) => Value::String(format!(
                    "<not JSON: {}>",
                    text.chars().take(80).collect::<String>()
                )),
            }
        };
        Answer {
            status,
            content_type,
            allow,
            body,
        }
    }

    /// [`Self::send`], asked again while the worker says its group is
    /// rebalancing (Kafka Connect answers 409 or 500 then, after a config
    /// change, without doing anything): not an answer of the API.
    async fn send_settled(&self, http: &reqwest::Client, s: &Step) -> Answer {
        let mut answer = self.send(http, s).await;
        for _ in 0..20 {
            let rebalancing = matches!(answer.status, 409 | 500)
                && answer.body["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("rebalanc"));
            if !rebalancing {
                break;
            }
            eprintln!(
                "{}: {} answered {}; asking again",
                s.id, self.what, answer.body
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
            answer = self.send(http, s).await;
        }
        answer
    }

    /// Placeholders back, volatile values replaced by their type.
    fn normalize(&self, v: Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.unfill(&s)),
            Value::Array(a) => Value::Array(a.into_iter().map(|v| self.normalize(v)).collect()),
            Value::Object(o) => Value::Object(
                o.into_iter()
                    .map(|(k, v)| {
                        let v = if VOLATILE.contains(&k.as_str()) {
                            Value::String(format!("<{}>", type_name(&v)))
                        } else {
                            self.normalize(v)
                        };
                        (self.unfill(&k), v)
                    })
                    .collect(),
            ),
            other => other,
        }
    }

    /// Polls until both sides show `wait` (each side on its own).
    async fn wait(&self, http: &reqwest::Client, wait: Wait) {
        let (path, what) = match wait {
            Wait::None => return,
            Wait::State(c, state) => (format!("/connectors/{c}/status"), format!("{c} {state}")),
            Wait::Topics(c) => (format!("/connectors/{c}/topics"), format!("{c}'s topics")),
            Wait::Offset(c, key, n) => (
                format!("/connectors/{c}/offsets"),
                format!("{c}'s offset {key} = {n}"),
            ),
        };
        let url = format!("{}{}", self.base, self.fill(&path));
        let mut last = Value::Null;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(r) = http.get(&url).send().await
                && let Ok(v) = r.json::<Value>().await
            {
                let done = match wait {
                    Wait::None => true,
                    Wait::State(_, state) => {
                        let tasks = v["tasks"].as_array().cloned().unwrap_or_default();
                        // RUNNING: with its tasks; STOPPED: none; a
                        // connector created PAUSED may have none yet.
                        v["connector"]["state"] == state
                            && match state {
                                "STOPPED" => tasks.is_empty(),
                                "RUNNING" => !tasks.is_empty(),
                                _ => true,
                            }
                            && tasks.iter().all(|t| t["state"] == state)
                    }
                    Wait::Topics(_) => v
                        .as_object()
                        .and_then(|o| o.values().next())
                        .and_then(|t| t["topics"].as_array())
                        .is_some_and(|t| !t.is_empty()),
                    Wait::Offset(_, key, n) => v["offsets"]
                        .as_array()
                        .and_then(|o| o.first())
                        .is_some_and(|o| o["offset"][key] == n),
                };
                if done {
                    return;
                }
                last = v;
            }
            assert!(
                Instant::now() < deadline,
                "{}: {} not reached in 120 s; last answer: {last}",
                self.what,
                self.fill(&what)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Values that differ between any two workers, compared by type only.
const VOLATILE: &[&str] = &[
    "worker_id",
    "trace",
    "last_modified",
    "version",
    "commit",
    "kafka_cluster_id",
];

struct Answer {
    status: u16,
    content_type: Option<String>,
    /// The methods a 405 names in its `Allow` header, sorted.
    allow: Option<Vec<String>>,
    body: Value,
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 160 {
        format!("{}...", s.chars().take(160).collect::<String>())
    } else {
        s
    }
}

/// The differences of two JSON values under `path`: `(path, detail)`.
fn diff(kc: &Value, sl: &Value, path: &str, values: bool, out: &mut Vec<(String, String)>) {
    match (kc, sl) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    Some(w) => diff(v, w, &p, values, out),
                    None => out.push((
                        p,
                        format!("missing in Sluice (Kafka Connect: {})", short(v)),
                    )),
                }
            }
            for (k, w) in b {
                if !a.contains_key(k) {
                    out.push((
                        format!("{path}.{k}"),
                        format!("only in Sluice: {}", short(w)),
                    ));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if values && a.len() != b.len() {
                out.push((
                    path.to_string(),
                    format!(
                        "{} elements, Sluice {}: {} / {}",
                        a.len(),
                        b.len(),
                        short(kc),
                        short(sl)
                    ),
                ));
                return;
            }
            if values {
                for (i, (v, w)) in a.iter().zip(b).enumerate() {
                    diff(v, w, &format!("{path}[{i}]"), values, out);
                }
            } else {
                // Shapes: every element of each side against the other's first.
                if let (Some(v0), Some(w0)) = (a.first(), b.first()) {
                    let mut seen = BTreeSet::new();
                    for w in b {
                        let mut d = Vec::new();
                        diff(v0, w, &format!("{path}[]"), false, &mut d);
                        seen.extend(d);
                    }
                    for v in a {
                        let mut d = Vec::new();
                        diff(v, w0, &format!("{path}[]"), false, &mut d);
                        seen.extend(d);
                    }
                    out.extend(seen);
                }
            }
        }
        _ if !values && (kc.is_null() || sl.is_null()) => {}
        _ if type_name(kc) != type_name(sl) => out.push((
            path.to_string(),
            format!(
                "type {} (Kafka Connect: {}), Sluice {}: {}",
                type_name(kc),
                short(kc),
                type_name(sl),
                short(sl)
            ),
        )),
        _ if values && kc != sl => out.push((
            path.to_string(),
            format!("Kafka Connect {}, Sluice {}", short(kc), short(sl)),
        )),
        _ => {}
    }
}

/// This run's part of a list of connectors (names) or of a map by name.
fn mine(v: &Value) -> Value {
    let ours = |name: &str| name.starts_with('{');
    match v {
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|n| n.as_str().is_some_and(ours))
                .cloned()
                .collect(),
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| ours(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn sort_strings(v: &Value) -> Value {
    match v {
        Value::Array(a) if a.iter().all(Value::is_string) => {
            let mut a = a.clone();
            a.sort_by(|x, y| x.as_str().cmp(&y.as_str()));
            Value::Array(a)
        }
        Value::Array(a) => Value::Array(a.iter().map(sort_strings).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), sort_strings(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The elements of an array whose `key` is one of `keep`, by that key.
fn pick(v: &Value, key: &str, keep: &[&str]) -> Value {
    let mut out: BTreeMap<String, Value> = BTreeMap::new();
    for e in v.as_array().into_iter().flatten() {
        if let Some(k) = e[key].as_str().filter(|k| keep.contains(k)) {
            out.insert(k.to_string(), e.clone());
        }
    }
    json!(out)
}

fn compare(s: &Step, kc: &Answer, sl: &Answer) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if kc.status != sl.status {
        out.push((
            "status".to_string(),
            format!("Kafka Connect {}, Sluice {}", kc.status, sl.status),
        ));
    }
    // An error body's `error_code` is its status: compared there, once.
    let own_code = |a: &Answer| a.body["error_code"] == a.status;
    let (mut kc_body, mut sl_body) = (kc.body.clone(), sl.body.clone());
    if kc.status != sl.status && own_code(kc) && own_code(sl) {
        for body in [&mut kc_body, &mut sl_body] {
            if let Some(o) = body.as_object_mut() {
                o.remove("error_code");
            }
        }
    }
    let (kc_body, sl_body) = (&kc_body, &sl_body);
    if kc.content_type != sl.content_type {
        out.push((
            "content-type".to_string(),
            format!(
                "Kafka Connect {:?}, Sluice {:?}",
                kc.content_type, sl.content_type
            ),
        ));
    }
    if kc.allow != sl.allow {
        out.push((
            "allow".to_string(),
            format!("Kafka Connect {:?}, Sluice {:?}", kc.allow, sl.allow),
        ));
    }
    match s.check {
        Check::Values => diff(kc_body, sl_body, "$", true, &mut out),
        Check::Mine => diff(
            &sort_strings(&mine(kc_body)),
            &sort_strings(&mine(sl_body)),
            "$",
            true,
            &mut out,
        ),
        Check::Shape => diff(kc_body, sl_body, "$", false, &mut out),
        Check::ValueShapes => {
            let values = |v: &Value| {
                json!(
                    v.as_object()
                        .map(|o| o.values().cloned().collect::<Vec<_>>())
                )
            };
            diff(&values(kc_body), &values(sl_body), "$.*", false, &mut out);
        }
        Check::Verdict => {
            diff(kc_body, sl_body, "$", false, &mut out);
            let verdict = |v: &Value| {
                let mut invalid: Vec<&str> = v["configs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| {
                        c["value"]["errors"]
                            .as_array()
                            .is_some_and(|e| !e.is_empty())
                    })
                    .filter_map(|c| c["value"]["name"].as_str())
                    .collect();
                // A set, not a list: each key at fault on one side only is
                // its own difference, whatever order each lists them in.
                invalid.sort();
                let invalid: serde_json::Map<String, Value> = invalid
                    .into_iter()
                    .map(|k| (k.to_string(), Value::Bool(true)))
                    .collect();
                json!({"name": v["name"], "valid": v["error_count"] == 0, "invalid_keys": invalid})
            };
            diff(&verdict(kc_body), &verdict(sl_body), "$", true, &mut out);
        }
        Check::Plugins(classes) => {
            diff(kc_body, sl_body, "$", false, &mut out);
            diff(
                &pick(kc_body, "class", classes),
                &pick(sl_body, "class", classes),
                "$",
                true,
                &mut out,
            );
        }
        Check::Definitions(names) => {
            diff(kc_body, sl_body, "$", false, &mut out);
            let facts = |v: &Value| {
                let mut picked = pick(v, "name", names);
                for d in picked
                    .as_object_mut()
                    .into_iter()
                    .flat_map(|o| o.values_mut())
                {
                    if let Some(d) = d.as_object_mut() {
                        d.retain(|k, _| {
                            ["name", "type", "required", "default_value"].contains(&k.as_str())
                        });
                    }
                }
                picked
            };
            diff(&facts(kc_body), &facts(sl_body), "$", true, &mut out);
        }
    }
    out
}

/// The accepted differences: `docs/compatibility.md`'s table rows
/// `| \`id\` | \`path\` | ... |` under "### Accepted differences (REST)" (id `*`:
/// at any request).
fn accepted() -> BTreeSet<(String, String)> {
    let doc = std::fs::read_to_string(fixtures::repo_root().join("docs/compatibility.md"))
        .expect("docs/compatibility.md");
    let section = doc
        .split("\n### Accepted differences (REST)")
        .nth(1)
        .expect("docs/compatibility.md has a section \"### Accepted differences (REST)\"");
    let section = section.split("\n#").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|l| {
            let mut cells = l.trim().strip_prefix('|')?.split('|').map(str::trim);
            let id = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            let path = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            Some((id.to_string(), path.to_string()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn rest_api_answers_as_kafka_connect_does() {
    let started = Instant::now();
    let http = reqwest::Client::new();
    let kc_url = kafka_connect().to_string();
    let dir = tempfile::tempdir().unwrap();
    let run = unique("r").replace("sluice-r-", "");
    let mut sides = Vec::new();
    for (what, sub) in [("Kafka Connect", "kc"), ("Sluice", "sl")] {
        let d = dir.path().join(sub);
        std::fs::create_dir_all(&d).unwrap();
        // Both workers read and write files here: the Kafka Connect one may
        // run as another user.
        std::fs::write(d.join("in.txt"), "one\ntwo\nthree\n").unwrap();
        let _ = Command::new("chmod")
            .args(["-R", "a+rwX"])
            .arg(dir.path())
            .status();
        sides.push((what, d));
    }
    let (mut sluice, sl_url) = sluice_worker(dir.path());
    healthy(&http, &kc_url, "Kafka Connect's /health").await;
    healthy(&http, &sl_url, "Sluice's /health").await;
    // Connectors an earlier run of this suite left (a failed run stops
    // half-way) are deleted: they would only take the machine's time.
    if let Some(names) = crate::distributed::get_json(&http, &format!("{kc_url}/connectors")).await
    {
        for name in names
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if name.starts_with("compat-") {
                let _ = http
                    .delete(format!("{kc_url}/connectors/{name}"))
                    .send()
                    .await;
            }
        }
    }
    let kc = Side::new("Kafka Connect", kc_url, &run, &sides[0].1);
    let sl = Side::new("Sluice", sl_url, &run, &sides[1].1);

    let steps = steps();
    let ids: BTreeSet<&str> = steps.iter().map(|s| s.id).collect();
    assert_eq!(ids.len(), steps.len(), "request ids must be unique");
    assert!(steps.len() >= 60, "the table has {} requests", steps.len());

    let mut found: BTreeMap<(String, String), String> = BTreeMap::new();
    for s in &steps {
        kc.wait(&http, s.wait).await;
        sl.wait(&http, s.wait).await;
        let a = kc.send_settled(&http, s).await;
        let b = sl.send_settled(&http, s).await;
        for (path, detail) in compare(s, &a, &b) {
            found.insert((s.id.to_string(), path), detail);
        }
    }
    let accepted = accepted();
    let is_accepted = |(id, path): &(String, String)| {
        accepted.contains(&(id.clone(), path.clone()))
            || accepted.contains(&("*".to_string(), path.clone()))
    };
    let new: Vec<String> = found
        .iter()
        .filter(|(k, _)| !is_accepted(k))
        .map(|((id, path), d)| format!("| `{id}` | `{path}` | {d} |"))
        .collect();
    let stale: Vec<String> = accepted
        .iter()
        .filter(|(id, path)| {
            !found
                .keys()
                .any(|(i, p)| p == path && (i == id || id == "*"))
        })
        .map(|(id, path)| format!("`{id}` `{path}`"))
        .collect();
    eprintln!(
        "REST differential: {} requests, {} differences ({} accepted), {:.0?}",
        steps.len(),
        found.len(),
        found.len() - new.len(),
        started.elapsed()
    );
    if !new.is_empty() || !stale.is_empty() {
        eprintln!("Sluice's log ends with:\n{}", tail(&sluice.log_text(), 40));
    }
    assert!(
        new.is_empty(),
        "{} difference(s) from Kafka Connect not in docs/compatibility.md (fix Sluice, or list \
         them with the reason they stay):\n{}",
        new.len(),
        new.join("\n")
    );
    assert!(
        stale.is_empty(),
        "docs/compatibility.md lists differences that no longer occur (remove them): {}",
        stale.join(", ")
    );
    sluice.terminate(Duration::from_secs(30));
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The third-party client: `kafka-connect-py` (PyPI, pinned; installed by
/// `scripts/kafka-connect-py.sh`) drives one connector's lifecycle on
/// both workers through `tests/compat/kafka_connect_py.py`, which fails on
/// any answer that differs.
#[tokio::test(flavor = "multi_thread")]
async fn kafka_connect_py_gets_the_same_answers() {
    let started = Instant::now();
    let root = fixtures::repo_root();
    let install = Command::new(root.join("scripts/kafka-connect-py.sh"))
        .arg("python")
        .output()
        .expect("running scripts/kafka-connect-py.sh");
    assert!(
        install.status.success(),
        "kafka-connect-py could not be installed (scripts/kafka-connect-py.sh): the \
         third-party client check cannot run:\n{}",
        String::from_utf8_lossy(&install.stderr)
    );
    let python = String::from_utf8_lossy(&install.stdout).trim().to_string();
    let http = reqwest::Client::new();
    let kc_url = kafka_connect().to_string();
    let dir = tempfile::tempdir().unwrap();
    for sub in ["kc", "sl"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        std::fs::write(dir.path().join(sub).join("in.txt"), "one\ntwo\nthree\n").unwrap();
    }
    let _ = Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(dir.path())
        .status();
    let (mut sluice, sl_url) = sluice_worker(dir.path());
    healthy(&http, &kc_url, "Kafka Connect's /health").await;
    healthy(&http, &sl_url, "Sluice's /health").await;
    let run = unique("p").replace("sluice-p-", "");
    let script = root.join("tests/compat/kafka_connect_py.py");
    let out = tokio::task::spawn_blocking({
        let dir = dir.path().to_path_buf();
        move || {
            Command::new(&python)
                .arg(&script)
                .args([&kc_url, &sl_url])
                .arg(&dir)
                .arg(&run)
                .output()
                .expect("running tests/compat/kafka_connect_py.py")
        }
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}({:.0?})", started.elapsed());
    assert!(
        out.status.success(),
        "kafka-connect-py got different answers from Kafka Connect and Sluice (or could not \
         run: exit {:?}):\n{stderr}\nSluice's log ends with:\n{}",
        out.status.code(),
        tail(&sluice.log_text(), 30)
    );
    assert!(
        stderr.contains(", 0 different answers"),
        "the client check printed no verdict: {stderr}"
    );
    sluice.terminate(Duration::from_secs(30));
}

/// Debezium's JDBC sink (`io.debezium.connector.jdbc.JdbcSinkConnector`,
/// which the benchmarks compare Sluice's `jdbc-sink` with) runs in the
/// Kafka Connect of `scripts/kafka-connect.sh` as the script lays out its
/// plugin directory: created through the REST API, it upserts
/// `JsonConverter` envelopes (keys and values with schemas) from a topic
/// into PostgreSQL, its task RUNNING. A plugin directory with Jackson jars
/// of its own made the task fail as it started (`Jdk8Module not a
/// subtype`). A worker without the JDBC sink fails this, saying so: the
/// script resolves it from Maven and must have.
#[tokio::test(flavor = "multi_thread")]
async fn debezium_jdbc_sink_runs_in_kafka_connect() {
    const CLASS: &str = "io.debezium.connector.jdbc.JdbcSinkConnector";
    let http = reqwest::Client::new();
    let kc_url = kafka_connect().to_string();
    healthy(&http, &kc_url, "Kafka Connect's /health").await;
    assert_kafka_connect_has(&http, &kc_url, CLASS, "Debezium's JDBC sink", "jdbc-plugin").await;

    // The PostgreSQL of scripts/postgres.sh, else one of this test's own.
    let own_pg;
    let pg_url = match std::env::var("SLUICE_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => {
            let Some(pg) = fixtures::PgInstance::start() else {
                return;
            };
            own_pg = pg;
            own_pg.url()
        }
    };
    let parsed = reqwest::Url::parse(&pg_url).expect("a postgres:// URL");
    let jdbc_url = format!(
        "jdbc:postgresql://{}:{}{}",
        parsed.host_str().expect("a host in the PostgreSQL URL"),
        parsed.port().unwrap_or(5432),
        parsed.path()
    );

    let bootstrap = broker().bootstrap.clone();
    let topic = unique("dbz-jdbc");
    let table = topic.replace('-', "_");
    let name = topic.clone();
    super::create_topic(&bootstrap, &topic, 1).await;
    let config = json!({
        "connector.class": CLASS,
        "tasks.max": "1",
        "topics": topic,
        "connection.url": jdbc_url,
        "connection.username": parsed.username(),
        "connection.password": parsed.password().unwrap_or(""),
        "insert.mode": "upsert",
        "primary.key.mode": "record_key",
        "schema.evolution": "basic",
        "collection.name.format": table,
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    });
    put_kafka_connect_connector(&http, &kc_url, &name, &config, "Debezium's JDBC sink").await;

    // Keys and values as JsonConverter envelopes; id 2 twice, the second
    // an update of the first.
    let key = |id: i64| {
        json!({
            "schema": {"type": "struct", "optional": false, "name": "sluice.test.Key",
                "fields": [{"type": "int64", "optional": false, "field": "id"}]},
            "payload": {"id": id},
        })
        .to_string()
    };
    let value = |id: i64, label: &str| {
        json!({
            "schema": {"type": "struct", "optional": false, "name": "sluice.test.Row",
                "fields": [
                    {"type": "int64", "optional": false, "field": "id"},
                    {"type": "string", "optional": true, "field": "label"},
                    {"type": "double", "optional": false, "field": "amount"},
                ]},
            "payload": {"id": id, "label": label, "amount": id as f64 * 1.5},
        })
        .to_string()
    };
    let producer: rdkafka::producer::FutureProducer = super::client_config(&bootstrap)
        .set("acks", "all")
        .create()
        .unwrap();
    for (id, label) in [(1, "one"), (2, "two"), (3, "three"), (2, "two again")] {
        let (k, v) = (key(id), value(id, label));
        producer
            .send(
                rdkafka::producer::FutureRecord::to(&topic)
                    .key(&k)
                    .payload(&v),
                Duration::from_secs(30),
            )
            .await
            .map_err(|(e, _)| e)
            .expect("producing an envelope");
    }

    let want = vec![
        vec!["1".to_string(), "one".into(), "1.5".into()],
        vec!["2".to_string(), "two again".into(), "3".into()],
        vec!["3".to_string(), "three".into(), "4.5".into()],
    ];
    let deadline = Instant::now() + Duration::from_secs(120);
    let (rows, state) = loop {
        let state =
            crate::distributed::get_json(&http, &format!("{kc_url}/connectors/{name}/status"))
                .await
                .unwrap_or(Value::Null);
        let task = &state["tasks"][0];
        assert_ne!(
            task["state"],
            "FAILED",
            "Debezium's JDBC sink's task failed in Kafka Connect:\n{}",
            task["trace"].as_str().unwrap_or_default()
        );
        let rows = if fixtures::table_exists(&pg_url, &table).await {
            fixtures::db_rows(
                &pg_url,
                &format!(
                    "SELECT CAST(id AS TEXT), label, CAST(amount AS TEXT) FROM {table} ORDER BY id"
                ),
            )
            .await
        } else {
            Vec::new()
        };
        if rows == want || Instant::now() > deadline {
            break (rows, state);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(
        rows, want,
        "the rows Debezium's JDBC sink wrote to {table} (connector status: {state})"
    );
    assert_eq!(state["connector"]["state"], "RUNNING", "{state}");
    assert_eq!(state["tasks"][0]["state"], "RUNNING", "{state}");

    let _ = http
        .delete(format!("{kc_url}/connectors/{name}"))
        .send()
        .await;
    fixtures::db_exec(&pg_url, &format!("DROP TABLE IF EXISTS {table}")).await;
}
