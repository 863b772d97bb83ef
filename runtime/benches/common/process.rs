//! A `sluice standalone` worker run as a child process, so its own CPU time
//! and memory can be read from `/proc` apart from the broker and database
//! the bench hosts; and those `/proc` readings.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// CPU time and memory of a process, from `/proc/<pid>`.
#[derive(Debug, Clone, Copy)]
pub struct ProcStats {
    /// User plus system CPU seconds since the process started.
    pub cpu_seconds: f64,
    /// Resident memory now (`VmRSS`), KiB.
    pub rss_kib: u64,
    /// Peak resident memory (`VmHWM`), KiB.
    pub peak_rss_kib: u64,
    /// Of `rss_kib`: anonymous memory (heap, stacks) and file-backed
    /// (the binary's and libraries' pages).
    pub rss_anon_kib: u64,
    pub rss_file_kib: u64,
}

/// Clock ticks per second of `/proc/<pid>/stat`'s times (`getconf
/// CLK_TCK`; asked once rather than linking libc for `sysconf`).
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let out = Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .expect("running getconf CLK_TCK");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("getconf CLK_TCK prints a number")
    })
}

impl ProcStats {
    pub fn of(pid: u32) -> std::io::Result<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // Fields after the command name, which is in parentheses and may
        // hold spaces: state is field 3, utime 14 and stime 15.
        let after_name = &stat[stat.rfind(')').expect("stat has a command name") + 2..];
        let fields: Vec<&str> = after_name.split(' ').collect();
        let ticks = |i: usize| fields[i - 3].parse::<u64>().expect("a tick count");
        let cpu_seconds = (ticks(14) + ticks(15)) as f64 / clock_ticks_per_second();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let kib = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
                .unwrap_or(0)
        };
        Ok(Self {
            cpu_seconds,
            rss_kib: kib("VmRSS:"),
            peak_rss_kib: kib("VmHWM:"),
            rss_anon_kib: kib("RssAnon:"),
            rss_file_kib: kib("RssFile:"),
        })
    }
}

/// CPU seconds of the whole machine and of the processes beside the worker
/// that a pipeline keeps busy: where the cores went during a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct MachineCpu {
    /// Busy CPU seconds of all cores (`/proc/stat`: everything but idle
    /// and iowait).
    pub busy: f64,
    /// This bench process: the embedded broker (librdkafka's mock cluster
    /// runs in its threads) and the bench's own polling.
    pub bench: f64,
    /// Every `postgres` process, with the children they have reaped.
    pub postgres: f64,
    /// Every `java` process, with reaped children: Apache Kafka's broker
    /// when the bench runs on it.
    pub java: f64,
}

impl MachineCpu {
    pub fn now() -> Self {
        let ticks = clock_ticks_per_second();
        let stat = std::fs::read_to_string("/proc/stat").expect("reading /proc/stat");
        let cpu: Vec<u64> = stat
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("cpu "))
            .expect("/proc/stat starts with the cpu line")
            .split_whitespace()
            .map(|v| v.parse().expect("a tick count"))
            .collect();
        // user nice system idle iowait irq softirq steal
        let busy = cpu.iter().take(8).sum::<u64>() - cpu[3] - cpu[4];
        let mut machine = Self {
            busy: busy as f64 / ticks,
            bench: process_ticks(
                &std::fs::read_to_string("/proc/self/stat").unwrap_or_default(),
                false,
            ) as f64
                / ticks,
            ..Self::default()
        };
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let name = stat
                .split_once(" (")
                .and_then(|(_, rest)| rest.split_once(')'));
            let seconds = process_ticks(&stat, true) as f64 / ticks;
            match name.map(|(name, _)| name) {
                Some("postgres") => machine.postgres += seconds,
                Some("java") => machine.java += seconds,
                _ => {}
            }
        }
        machine
    }

    /// What each used between `self` and the later `end`.
    pub fn since(&self, end: &Self) -> Self {
        Self {
            busy: end.busy - self.busy,
            bench: end.bench - self.bench,
            postgres: end.postgres - self.postgres,
            java: end.java - self.java,
        }
    }
}

/// utime + stime of a `/proc/<pid>/stat` line, and with `reaped` the
/// children's the process has waited for (cutime + cstime), in ticks.
fn process_ticks(stat: &str, reaped: bool) -> u64 {
    let Some(close) = stat.rfind(')') else {
        return 0;
    };
    let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
    let ticks = |i: usize| {
        fields
            .get(i - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let own = ticks(14) + ticks(15);
    if reaped {
        own + ticks(16) + ticks(17)
    } else {
        own
    }
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A `sluice standalone` child process with a REST listener on a free
/// loopback port. Killed when dropped, so a panicking bench leaves no
/// worker behind; its config and log are deleted then too, unless
/// `SLUICE_BENCH_KEEP_WORKER_LOGS` is set (to read what a run did).
pub struct SluiceProcess {
    child: Child,
    rest: String,
    log: PathBuf,
    http: reqwest::Client,
    dir: Option<tempfile::TempDir>,
    /// Basic-auth credentials for a worker with `rest.auth.users.file`.
    credentials: Option<(String, String)>,
    /// How long starting may take before the bench gives up.
    startup_timeout: Duration,
}

impl SluiceProcess {
    /// Starts a worker against `bootstrap` (`None`: the embedded broker in
    /// the worker's own process) with `extra` worker keys, and waits until
    /// its REST API answers `/health`. Compiled WASM components are cached
    /// in `wasm_cache`, so only the first worker of a run compiles them.
    pub async fn start(
        bootstrap: Option<&str>,
        wasm_cache: &Path,
        extra: serde_json::Value,
    ) -> Self {
        Self::start_wrapped(bootstrap, wasm_cache, extra, &[]).await
    }

    /// [`Self::start`] with the binary run by `wrapper` (a command and its
    /// arguments, such as valgrind's), which may make starting slow.
    pub async fn start_wrapped(
        bootstrap: Option<&str>,
        wasm_cache: &Path,
        extra: serde_json::Value,
        wrapper: &[String],
    ) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir for the worker");
        let mut config = serde_json::json!({
            "listeners": "http://127.0.0.1:0",
            // JSON logs: the REST address is read from them, free of colour codes.
            "log.format": "json",
            "wasm.cache.dir": wasm_cache,
        });
        if let Some(b) = bootstrap {
            config["bootstrap.servers"] = b.into();
        }
        for (k, v) in extra.as_object().into_iter().flatten() {
            config[k] = v.clone();
        }
        let worker_file = dir.path().join("worker.json");
        std::fs::write(&worker_file, config.to_string()).expect("writing worker.json");
        let log = dir.path().join("worker.log");
        let log_file = std::fs::File::create(&log).expect("creating the worker log");
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(env!("CARGO_BIN_EXE_sluice"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_sluice")),
        };
        let child = command
            .arg("standalone")
            .arg(&worker_file)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("a second handle on the log"))
            .stderr(log_file)
            .spawn()
            .expect("starting the sluice binary");
        let mut worker = Self {
            child,
            rest: String::new(),
            log,
            http: reqwest::Client::new(),
            dir: Some(dir),
            credentials: None,
            startup_timeout: if wrapper.is_empty() {
                Duration::from_secs(60)
            } else {
                Duration::from_secs(900)
            },
        };
        worker.rest = worker.wait_for_rest_address().await;
        worker.wait_healthy().await;
        worker
    }

    /// From now on every request carries these credentials.
    pub fn with_credentials(mut self, user: &str, password: &str) -> Self {
        self.credentials = Some((user.into(), password.into()));
        self
    }

    /// The REST API's address (`http://host:port`).
    pub fn rest(&self) -> &str {
        &self.rest
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.rest));
        match &self.credentials {
            Some((user, password)) => request.basic_auth(user, Some(password)),
            None => request,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stats(&self) -> ProcStats {
        ProcStats::of(self.pid()).unwrap_or_else(|e| self.fail(&format!("reading /proc: {e}")))
    }

    /// The worker's log: what a failure report shows.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "sluice worker: {what}\nlast lines of its log:\n{}",
            self.log_tail()
        )
    }

    async fn wait_for_rest_address(&mut self) -> String {
        let started = Instant::now();
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(rest) = log
                .lines()
                .filter(|l| l.contains("worker started"))
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .find_map(|v| v["fields"]["rest"].as_str().map(String::from))
            {
                return rest;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                self.fail(&format!("exited while starting ({status})"));
            }
            if started.elapsed() > self.startup_timeout {
                self.fail(&format!(
                    "did not log `worker started` within {:?}",
                    self.startup_timeout
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_healthy(&self) {
        let started = Instant::now();
        loop {
            let ok = self
                .http
                .get(format!("{}/health", self.rest))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                return;
            }
            if started.elapsed() > self.startup_timeout {
                self.fail(&format!(
                    "/health did not answer 200 within {:?}",
                    self.startup_timeout
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `POST /connectors` with `{"name", "config"}`.
    pub async fn create_connector(&self, connector: &serde_json::Value) {
        let response = self
            .request(reqwest::Method::POST, "/connectors")
            .json(connector)
            .send()
            .await
            .unwrap_or_else(|e| self.fail(&format!("POST /connectors: {e}")));
        if !response.status().is_success() {
            let status = response.status();
            let body = response.text().await.unwrap_or_default();
            self.fail(&format!(
                "creating connector {}: {status}: {body}",
                connector["name"]
            ));
        }
    }

    /// Panics with the task's trace if a task of `connector` failed.
    pub async fn assert_running(&self, connector: &str) {
        let status: serde_json::Value = match self
            .request(
                reqwest::Method::GET,
                &format!("/connectors/{connector}/status"),
            )
            .send()
            .await
        {
            Ok(r) => r.json().await.unwrap_or_default(),
            Err(e) => self.fail(&format!("GET status of {connector}: {e}")),
        };
        let failed = status["tasks"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(std::iter::once(&status["connector"]))
            .find(|t| t["state"] == "FAILED");
        if let Some(t) = failed {
            self.fail(&format!("connector {connector} failed: {}", t["trace"]));
        }
    }

    /// Records counted by `sluice_records_total` with outcome `ok` at
    /// `stage` (`put`, `produce`, ...), over every connector of the worker.
    pub async fn records_ok(&self, stage: &str) -> u64 {
        let text = self.metrics_text().await;
        let stage = format!("stage=\"{stage}\"");
        text.lines()
            .filter(|l| l.starts_with("sluice_records_total{"))
            .filter(|l| l.contains("outcome=\"ok\"") && l.contains(&stage))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }
}

impl SluiceProcess {
    /// The worker's Prometheus exposition (`GET /metrics`).
    async fn metrics_text(&self) -> String {
        self.request(reqwest::Method::GET, "/metrics")
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .unwrap_or_else(|e| self.fail(&format!("GET /metrics: {e}")))
            .text()
            .await
            .unwrap_or_default()
    }

    /// Sink batches written and the seconds their writes took, over every
    /// sink task of the worker (`sluice_sink_put_batch_seconds`).
    pub async fn sink_writes(&self) -> (f64, f64) {
        let text = self.metrics_text().await;
        let total = |name: &str| -> f64 {
            text.lines()
                .filter(|l| l.starts_with(&format!("{name}{{")))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        };
        (
            total("sluice_sink_put_batch_seconds_count"),
            total("sluice_sink_put_batch_seconds_sum"),
        )
    }

    /// Stops the worker as an operator would (SIGTERM, a clean shutdown),
    /// waits for it to exit, and returns its log: a wrapper such as
    /// valgrind writes its totals there only at a clean exit.
    pub fn terminate(mut self) -> String {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("running kill");
        assert!(status.success(), "kill -TERM the worker: {status}");
        let started = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    if !status.success() {
                        self.fail(&format!("exited with {status} after SIGTERM"));
                    }
                    break;
                }
                Ok(None) if started.elapsed() < Duration::from_secs(300) => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Ok(None) => self.fail("still running 300 s after SIGTERM"),
                Err(e) => self.fail(&format!("waiting for it to exit: {e}")),
            }
        }
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for SluiceProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::env::var_os("SLUICE_BENCH_KEEP_WORKER_LOGS").is_some()
            && let Some(dir) = self.dir.take()
        {
            let kept = dir.keep();
            eprintln!("worker log kept: {}", kept.join("worker.log").display());
        }
    }
}

/// Runs a Python baseline script from `bench/baselines/` with `args`;
/// returns the one JSON line it prints. `None` without
/// `SLUICE_BENCH_PYTHON` (`bench/run.sh` sets it).
pub fn run_python_baseline(script: &str, args: &[String]) -> Option<serde_json::Value> {
    let python = std::env::var("SLUICE_BENCH_PYTHON").ok()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bench/baselines")
        .join(script);
    let out = Command::new(python)
        .arg(&script)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .expect("running a Python baseline");
    assert!(
        out.status.success(),
        "{} failed ({})",
        script.display(),
        out.status
    );
    let line = String::from_utf8_lossy(&out.stdout);
    let last = line.lines().last().unwrap_or_default();
    Some(serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "{} printed `{last}`, not one JSON line: {e}",
            script.display()
        )
    }))
}
