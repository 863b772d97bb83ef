//! The web console (`/ui`) in a real browser: Debian's chromium driven by
//! playwright-core (`tests/console/run.mjs`) against a `sluice standalone`
//! worker with basic authentication on, on the embedded broker. The script
//! does what an operator does: it is refused without credentials, then
//! creates a JDBC sink through the form (a validation error first, then
//! fixed), watches it reach RUNNING with rows arriving, pauses and resumes
//! it, produces poison records and finds them in the dead-letter view,
//! replays them after a dry run, tries the transform chain on pasted
//! records, checks the page at a phone's width, and deletes the connector.
//! Screenshots of each view go to `target/tmp/console-screenshots/`.
//!
//! Needs node, chromium, and playwright-core and typescript from npm
//! (`scripts/console-tests.sh install`, which `scripts/setup.sh` runs); a
//! missing one fails the test, saying what to install. It is never skipped.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::fixtures::{self, SluiceProcess};

/// The node_modules with playwright-core and typescript.
fn console_modules() -> PathBuf {
    if let Ok(dir) = std::env::var("SLUICE_CONSOLE_MODULES") {
        return PathBuf::from(dir);
    }
    let tools =
        std::env::var("SLUICE_TOOLS_DIR").unwrap_or_else(|_| "/var/tmp/sluice-tools".into());
    PathBuf::from(tools).join("console/node_modules")
}

fn require(ok: bool, what: &str) {
    assert!(
        ok,
        "\n\n*** The console's browser test cannot run: {what} is missing. Install it with \
         scripts/console-tests.sh install (scripts/setup.sh runs it; it installs Debian's \
         chromium and fonts-dejavu-core with apt, and tests/console/package-lock.json with npm ci \
         into /var/tmp/sluice-tools/console). It is never skipped. ***\n"
    );
}

fn runs(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The console's modules type-check (`tsc --checkJs` on their JSDoc).
#[test]
fn console_modules_type_check() {
    let modules = console_modules();
    let tsc = modules.join(".bin/tsc");
    require(tsc.exists(), "typescript (npm)");
    let ui = fixtures::repo_root().join("runtime/ui");
    let files: Vec<PathBuf> = std::fs::read_dir(&ui)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "js"))
        .collect();
    let out = Command::new(&tsc)
        .args([
            "--noEmit",
            "--allowJs",
            "--checkJs",
            "--strict",
            "--target",
            "es2022",
            "--module",
            "es2022",
            "--moduleResolution",
            "bundler",
            "--lib",
            "es2022,dom,dom.iterable",
        ])
        .args(&files)
        .output()
        .expect("running tsc");
    assert!(
        out.status.success(),
        "tsc --checkJs on runtime/ui:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_in_a_real_browser() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    require(runs("node", "--version"), "node");
    require(runs(&chromium, "--version"), "chromium");
    let modules = console_modules();
    require(
        modules.join("playwright-core").exists(),
        "playwright-core (npm)",
    );

    let dir = tempfile::tempdir().unwrap();
    let (user, password) = ("operator", "console-pw");
    let users = dir.path().join("users");
    std::fs::write(
        &users,
        format!(
            "{user}:{}\n",
            sluice_runtime::auth::hash_password(password).unwrap()
        ),
    )
    .unwrap();
    let port = fixtures::free_port();
    let worker = dir.path().join("worker.json");
    std::fs::write(
        &worker,
        json!({
            "listeners": format!("http://127.0.0.1:{port}"),
            "rest.auth.users.file": users.display().to_string(),
            "transforms.library": fixtures::standard_library().display().to_string(),
            "wasm.cache.dir": fixtures::wasm_cache_dir().display().to_string(),
        })
        .to_string(),
    )
    .unwrap();
    let source = dir.path().join("orders-gen.json");
    std::fs::write(
        &source,
        json!({"name": "orders-gen", "config": {
            "connector.class": "datagen", "topic": "orders", "rate": "20", "key.field": "order_id",
        }})
        .to_string(),
    )
    .unwrap();
    let process = SluiceProcess::start(dir.path(), &[worker.as_path(), source.as_path()]);
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    fixtures::eventually(Duration::from_secs(120), "the worker's /health", || {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let r = http
                .get(format!("{url}/health"))
                .basic_auth(user, Some(password))
                .send()
                .await
                .ok()?;
            (r.status() == 200).then_some(())
        }
    })
    .await;

    let db = dir.path().join("orders.db");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    let script = fixtures::repo_root().join("tests/console/run.mjs");
    let run = tokio::process::Command::new("node")
        .arg(&script)
        .env("SLUICE_URL", &url)
        .env("SLUICE_USER", user)
        .env("SLUICE_PASSWORD", password)
        .env("SLUICE_DB", &db)
        .env("SLUICE_SCREENSHOTS", &shots)
        .env("SLUICE_CONSOLE_MODULES", &modules)
        .env("CHROMIUM", &chromium)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(600), run)
        .await
        .expect("the browser scenario finishes within 10 minutes")
        .expect("running node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    let log = process.log_text();
    assert!(
        out.status.success(),
        "the browser scenario failed:\n{stdout}\n{stderr}\n--- worker log (end) ---\n{}",
        &log[log.len().saturating_sub(6000)..]
    );
    assert!(stdout.contains("all steps passed"), "{stdout}");
    // The sink the form created wrote rows, stamped by its transform.
    let rows = fixtures::sqlite_rows(&db, "SELECT COUNT(*), MIN(via) FROM orders").await;
    let count: u64 = rows[0][0].parse().unwrap();
    assert!(count > 0, "rows arrived in {}", db.display());
    assert_eq!(rows[0][1], "console");
    assert!(!log.contains("panicked"), "{log}");
    eprintln!("console screenshots: {}", shots.display());
}
