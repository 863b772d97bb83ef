//! Connector configs and target states persist across a worker restart
//! (standalone: `config.storage.file.filename`), and config providers
//! resolve `${env:...}` and `${file:...}` for the tasks only.

use std::time::Duration;

use serde_json::{Value, json};

use crate::fixtures::{self, SluiceProcess};

#[tokio::test(flavor = "multi_thread")]
async fn connectors_and_their_states_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let port = fixtures::free_port();
    let out = dir.path().join("out.jsonl");
    let secrets = dir.path().join("secrets.properties");
    std::fs::write(&secrets, "topic = restored-orders\n").unwrap();
    let worker = dir.path().join("worker.json");
    std::fs::write(
        &worker,
        json!({
            "listeners": format!("http://127.0.0.1:{port}"),
            "config.storage.file.filename": dir.path().join("connectors.json").display().to_string(),
            "config.providers": "env,file",
            "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
            "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
            "wasm.cache.dir": fixtures::wasm_cache_dir().display().to_string(),
        })
        .to_string(),
    )
    .unwrap();
    let env = [("SLUICE_TEST_OUT_FILE", out.to_str().unwrap())];
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let up = |http: reqwest::Client, base: String| async move {
        fixtures::eventually(Duration::from_secs(60), "the REST API", || {
            let (http, base) = (http.clone(), base.clone());
            async move {
                http.get(format!("{base}/health"))
                    .send()
                    .await
                    .ok()
                    .filter(|r| r.status() == 200)
            }
        })
        .await
    };

    let mut first = SluiceProcess::start_with_env(dir.path(), &[worker.as_path()], &env);
    up(http.clone(), base.clone()).await;
    let topic_ref = format!("${{file:{}:topic}}", secrets.display());
    let r = http
        .put(format!("{base}/connectors/gen/config"))
        .json(
            &json!({"connector.class": "datagen", "topic": topic_ref, "count": "30", "rate": "0"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let r = http
        .put(format!("{base}/connectors/out/config"))
        .json(&json!({"connector.class": "file-sink", "topics": "restored-orders", "file": "${env:SLUICE_TEST_OUT_FILE}"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    fixtures::eventually(
        Duration::from_secs(120),
        "records in the file named by ${env:...}",
        || async {
            (std::fs::read_to_string(&out)
                .unwrap_or_default()
                .lines()
                .count()
                >= 30)
                .then_some(())
        },
    )
    .await;
    let config: Value = http
        .get(format!("{base}/connectors/gen/config"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        config["topic"], topic_ref,
        "the API shows the placeholder, never the secret"
    );
    // The task configs too: they are computed from the resolved config,
    // but what a provider supplied is shown as its placeholder.
    for (connector, key, placeholder) in [
        ("gen", "topic", topic_ref.clone()),
        ("out", "file", "${env:SLUICE_TEST_OUT_FILE}".to_string()),
    ] {
        let tasks: Value = http
            .get(format!("{base}/connectors/{connector}/tasks"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(tasks[0]["config"][key], placeholder, "{tasks}");
        let shown = tasks.to_string();
        assert!(
            !shown.contains(out.to_str().unwrap()),
            "a task config shows a resolved secret: {shown}"
        );
    }
    assert_eq!(
        http.put(format!("{base}/connectors/out/pause"))
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
    assert!(first.terminate(Duration::from_secs(30)).success());
    drop(first);

    // Started again with no connector files: both are back, `out` still paused.
    let mut second = SluiceProcess::start_with_env(dir.path(), &[worker.as_path()], &env);
    up(http.clone(), base.clone()).await;
    let names: Value = http
        .get(format!("{base}/connectors"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(names, json!(["gen", "out"]));
    let status = fixtures::eventually(Duration::from_secs(60), "the restored states", || {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let s: Value = http
                .get(format!("{base}/connectors/out/status"))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            (s["tasks"][0]["state"] == "PAUSED").then_some(s)
        }
    })
    .await;
    assert_eq!(status["connector"]["state"], "PAUSED", "{status}");
    let gen_status: Value = http
        .get(format!("{base}/connectors/gen/status"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(gen_status["connector"]["state"], "RUNNING");
    let config: Value = http
        .get(format!("{base}/connectors/out/config"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(config["file"], "${env:SLUICE_TEST_OUT_FILE}");
    assert!(second.terminate(Duration::from_secs(30)).success());
}
