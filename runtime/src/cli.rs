//! The `sluice` command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::config::{ConnectorSpec, WorkerConfig};
use crate::kafka::{EMBEDDED_PARTITION_LIMIT_BYTES, EmbeddedBroker, KafkaClients};
use crate::metrics::Metrics;
use crate::offsets::OffsetStore;
use crate::worker::{Worker, WorkerOptions};

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "A Kafka Connect-style connector runtime with WebAssembly transforms"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs one worker with the given connectors, as Kafka Connect's
    /// standalone mode does.
    Standalone {
        /// Worker config (JSON).
        worker: PathBuf,
        /// Connector configs (Kafka Connect JSON: {"name", "config"}).
        connectors: Vec<PathBuf>,
    },
    /// Runs one worker of a cluster, as Kafka Connect's distributed mode
    /// does: workers with the same `group.id` share connectors and tasks
    /// through the Kafka topics named in the worker config
    /// (`config.storage.topic`, `status.storage.topic`); connectors are
    /// managed over the REST API of any worker.
    Distributed {
        /// Worker config (JSON).
        worker: PathBuf,
    },
    /// Inspects or replays a dead-letter queue.
    Dlq {
        #[command(subcommand)]
        command: DlqCommand,
    },
    /// Works with WASM transform components.
    Transform {
        #[command(subcommand)]
        command: TransformCommand,
    },
    /// Hashes a password for `rest.auth.users.file`: reads it from standard
    /// input (its first line) and prints `USER:$argon2id$...`.
    Passwd { user: String },
    /// Manages the connectors of a running worker over its REST API.
    /// Exit codes: 0 ok; 1 the worker answered with an error (404, 409,
    /// 400: its message is printed); 2 bad arguments or input file; 3 the
    /// worker could not be reached.
    Connectors {
        #[command(flatten)]
        client: crate::client::ClientArgs,
        #[command(subcommand)]
        command: crate::client::ConnectorsCommand,
    },
    /// Lists a running worker's connector plugins (exit codes as
    /// `connectors`).
    Plugins {
        #[command(flatten)]
        client: crate::client::ClientArgs,
        /// Transformations and predicates too.
        #[arg(long)]
        all: bool,
    },
    /// Checks a connector config offline, with no worker and no broker: the
    /// checks of `PUT /connector-plugins/{class}/config/validate` (keys,
    /// types, the plugin's own keys, WASM modules loaded and checked). Exits
    /// 0 when valid, 1 when the config has errors, 2 when the file cannot be
    /// read or is not JSON.
    Validate {
        /// Kafka Connect's `{"name", "config"}` JSON, or a flat config.
        file: PathBuf,
        /// A worker config, for `transforms.library`, `plugin.path`, config
        /// providers and `wasm.cache.dir`.
        #[arg(long)]
        worker: Option<PathBuf>,
        /// `table` (the keys with errors) or `json` (Kafka Connect's
        /// validate response).
        #[arg(long, value_enum, default_value = "table")]
        output: crate::client::Output,
    },
}

#[derive(Subcommand)]
enum TransformCommand {
    /// Runs a component over sample records and prints each result as a
    /// JSON line: `{"input": N, "result": "ok"|"dropped", "records": [...]}`
    /// or `{"input": N, "result": "error", "class": ..., "message": ...}`.
    /// Exits non-zero if the component cannot be loaded or rejects its
    /// config (not for a record's error: that is printed).
    Test {
        /// The component (.wasm).
        module: PathBuf,
        /// Sample records, one JSON object per line (`-` for standard
        /// input): {"key":..., "value":..., "headers":{...}, "topic":...};
        /// a JSON string stands for its text, other JSON for its
        /// serialisation, null for none.
        #[arg(long)]
        input: PathBuf,
        /// A config key as the transform receives it (without
        /// `transforms.<alias>.`), as key=value; repeatable.
        #[arg(long = "config", value_name = "KEY=VALUE")]
        config: Vec<String>,
        /// The world the component must implement.
        #[arg(long, value_enum, default_value = "auto")]
        world: crate::transform::sample::WorldChoice,
        /// One call per record (`transform`) instead of one batch
        /// (`transform-batch`).
        #[arg(long)]
        per_record: bool,
        /// Where compiled code is cached (default: the worker's default,
        /// ~/.cache/sluice/wasm).
        #[arg(long)]
        cache_dir: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct ClusterArgs {
    /// The Kafka cluster (a running worker logs its embedded broker's address).
    #[arg(long)]
    bootstrap_servers: Option<String>,
    /// Take the cluster and its security settings from a worker config.
    #[arg(long)]
    worker: Option<PathBuf>,
}

#[derive(Subcommand)]
enum DlqCommand {
    /// Counts a DLQ by stage, error class and origin topic, with samples.
    Inspect {
        #[arg(long)]
        topic: String,
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Sample records shown per error class.
        #[arg(long, default_value_t = 3)]
        samples: usize,
        /// `table` or `json`.
        #[arg(long, default_value = "table")]
        output: String,
    },
    /// Re-produces dead-lettered records to their origin topic (or --to).
    /// Resumable: a second run replays nothing already replayed.
    Replay {
        #[arg(long)]
        topic: String,
        #[command(flatten)]
        cluster: ClusterArgs,
        #[arg(long)]
        to: Option<String>,
        #[arg(long)]
        error_class: Option<String>,
        #[arg(long)]
        stage: Option<String>,
        #[arg(long)]
        max: Option<u64>,
        #[arg(long)]
        dry_run: bool,
        /// `table` or `json`.
        #[arg(long, default_value = "table")]
        output: String,
    },
}

fn clients_for(cluster: &ClusterArgs) -> Result<KafkaClients, String> {
    let config = match &cluster.worker {
        Some(file) => WorkerConfig::load(file).map_err(|e| e.to_string())?,
        None => WorkerConfig::from_map(&Default::default()).map_err(|e| e.to_string())?,
    };
    let bootstrap = cluster
        .bootstrap_servers
        .clone()
        .or_else(|| config.bootstrap_servers.clone())
        .ok_or("name the cluster with --bootstrap-servers, or --worker with a worker config that has bootstrap.servers")?;
    Ok(KafkaClients::new(&config, bootstrap, None))
}

fn dlq(command: DlqCommand) -> ExitCode {
    let outcome = match command {
        DlqCommand::Inspect { topic, cluster, samples, output } => clients_for(&cluster).and_then(|clients| {
            crate::dlq::inspect(&clients, &topic, samples)
                .map(|r| if output == "json" { serde_json::to_string_pretty(&r).expect("serialises") } else { r.render() })
                .map_err(|e| format!("{e:#}"))
        }),
        DlqCommand::Replay { topic, cluster, to, error_class, stage, max, dry_run, output } => clients_for(&cluster).and_then(|clients| {
            let opts = crate::dlq::ReplayOptions { to, error_class, stage, max, dry_run };
            crate::dlq::replay(&clients, &topic, &opts)
                .map(|r| {
                    if output == "json" {
                        serde_json::to_string_pretty(&r).expect("serialises")
                    } else {
                        let verb = if r.dry_run { "would replay" } else { "replayed" };
                        let mut out = format!("{verb} {} record(s) from `{}` ({} skipped by the filters; replay `{}`)\n", r.replayed, r.topic, r.skipped_by_filter, r.replay);
                        for (t, n) in &r.by_target_topic {
                            out.push_str(&format!("  to {t}: {n}\n"));
                        }
                        out
                    }
                })
                .map_err(|e| format!("{e:#}"))
        }),
    };
    match outcome {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Exit code for a config the user must fix.
const EXIT_CONFIG: u8 = 2;

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Standalone { worker, connectors } => {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: starting the async runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            runtime.block_on(run_worker(worker, connectors, Mode::Standalone))
        }
        Command::Distributed { worker } => {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: starting the async runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            runtime.block_on(run_worker(worker, Vec::new(), Mode::Distributed))
        }
        Command::Dlq { command } => {
            crate::logging::init(crate::logging::LogFormat::Text);
            dlq(command)
        }
        Command::Transform { command } => transform(command),
        Command::Connectors { client, command } => crate::client::connectors(client, command),
        Command::Passwd { user } => passwd(&user),
        Command::Plugins { client, all } => crate::client::plugins(client, all),
        Command::Validate {
            file,
            worker,
            output,
        } => crate::client::validate(&file, worker.as_deref(), output),
    }
}

fn passwd(user: &str) -> ExitCode {
    if user.is_empty() || user.contains(':') {
        eprintln!("error: the user name must be non-empty and without `:`");
        return ExitCode::from(EXIT_CONFIG);
    }
    let mut line = String::new();
    if let Err(e) = std::io::stdin().read_line(&mut line) {
        eprintln!("error: reading the password from standard input: {e}");
        return ExitCode::from(EXIT_CONFIG);
    }
    let password = line.trim_end_matches(['\n', '\r']);
    if password.is_empty() {
        eprintln!("error: the password (first line of standard input) is empty");
        return ExitCode::from(EXIT_CONFIG);
    }
    match crate::auth::hash_password(password) {
        Ok(hash) => {
            println!("{user}:{hash}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn transform(command: TransformCommand) -> ExitCode {
    use crate::transform::sample::{self, SampleError};
    let TransformCommand::Test {
        module,
        input,
        config,
        world,
        per_record,
        cache_dir,
    } = command;
    let mut pairs = Vec::with_capacity(config.len());
    for c in &config {
        match c.split_once('=') {
            Some((k, v)) => pairs.push((k.to_string(), v.to_string())),
            None => {
                eprintln!("error: --config {c}: expected KEY=VALUE");
                return ExitCode::from(EXIT_CONFIG);
            }
        }
    }
    let text = if input.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map(|_| s)
    } else {
        std::fs::read_to_string(&input)
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: reading {}: {e}", input.display());
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let outcome = sample::parse_records(&text).and_then(|records| {
        sample::run(
            &module,
            pairs,
            world,
            records,
            per_record,
            cache_dir.or_else(crate::config::default_cache_dir),
        )
    });
    match outcome {
        Ok(results) => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            for (i, r) in results.iter().enumerate() {
                // A closed pipe (`| head`) is not an error worth a panic.
                if writeln!(out, "{}", sample::outcome_json(i + 1, r)).is_err() {
                    break;
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            let what = match e {
                SampleError::Load(_) => "loading the component",
                SampleError::Configure(_) => "configuring the component",
                SampleError::Input(_) => "reading the sample records",
            };
            eprintln!("error: {what}: {e}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Standalone,
    Distributed,
}

async fn run_worker(worker_file: PathBuf, connector_files: Vec<PathBuf>, mode: Mode) -> ExitCode {
    // Validate every file before starting anything.
    let mut worker_config = match WorkerConfig::load(&worker_file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if mode == Mode::Distributed {
        if worker_config.config_storage_file.is_some() {
            eprintln!(
                "error: {}: key `config.storage.file.filename` is for standalone workers; a distributed worker keeps connector configs in `config.storage.topic`",
                worker_file.display()
            );
            return ExitCode::from(EXIT_CONFIG);
        }
        if worker_config.offset_storage_file.is_some() {
            eprintln!(
                "error: {}: key `offset.storage.file.filename` is for standalone workers; a distributed worker keeps source offsets in `offset.storage.topic`, where a task that moves to another worker finds them",
                worker_file.display()
            );
            return ExitCode::from(EXIT_CONFIG);
        }
        for key in ["config.storage.topic", "status.storage.topic"] {
            let missing = match key {
                "config.storage.topic" => worker_config.cluster.config_topic.is_none(),
                _ => worker_config.cluster.status_topic.is_none(),
            };
            if missing {
                eprintln!(
                    "error: {}: key `{key}` is required by `sluice distributed`: the Kafka topic where the cluster keeps its {}",
                    worker_file.display(),
                    if key == "config.storage.topic" {
                        "connector configs and target states"
                    } else {
                        "task statuses"
                    }
                );
                return ExitCode::from(EXIT_CONFIG);
            }
        }
        let topics = &worker_config.cluster;
        let offsets = Some(worker_config.offsets_topic.name.as_str());
        if topics.config_topic == topics.status_topic
            || topics.config_topic.as_deref() == Some(topics.slots_topic.as_str())
            || topics.status_topic.as_deref() == Some(topics.slots_topic.as_str())
            || [
                topics.config_topic.as_deref(),
                topics.status_topic.as_deref(),
                Some(topics.slots_topic.as_str()),
            ]
            .contains(&offsets)
        {
            eprintln!(
                "error: {}: keys `config.storage.topic`, `status.storage.topic`, `task.slots.topic` and `offset.storage.topic` must name four different topics",
                worker_file.display()
            );
            return ExitCode::from(EXIT_CONFIG);
        }
        // group.id names the cluster here: it has an effect.
        worker_config
            .inert_keys
            .retain(|(key, _)| *key != "group.id");
    }
    crate::logging::init(worker_config.log_format);
    let mut specs = Vec::with_capacity(connector_files.len());
    for file in &connector_files {
        match ConnectorSpec::load(file) {
            Ok(spec) => {
                if specs
                    .iter()
                    .any(|(_, s): &(PathBuf, ConnectorSpec)| s.name == spec.name)
                {
                    eprintln!(
                        "error: {}: connector name `{}` is used by another file",
                        file.display(),
                        spec.name
                    );
                    return ExitCode::from(EXIT_CONFIG);
                }
                specs.push((file.clone(), spec));
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(EXIT_CONFIG);
            }
        }
    }

    let embedded = match &worker_config.bootstrap_servers {
        Some(_) => None,
        None => match EmbeddedBroker::start() {
            Ok(b) => Some(b),
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::FAILURE;
            }
        },
    };
    let bootstrap = match (&worker_config.bootstrap_servers, &embedded) {
        (Some(b), _) => b.clone(),
        (None, Some(e)) => e.bootstrap_servers().to_string(),
        (None, None) => unreachable!("embedded broker started above"),
    };
    if embedded.is_some() {
        tracing::warn!(
            bootstrap.servers = %bootstrap,
            "no bootstrap.servers: using the embedded development broker. It keeps nothing across restarts \
             and silently drops data beyond about {} MiB per partition; set bootstrap.servers for production",
            EMBEDDED_PARTITION_LIMIT_BYTES / (1024 * 1024)
        );
    }
    for (key, why) in &worker_config.inert_keys {
        tracing::warn!(file = %worker_file.display(), key, "{key} has no effect: {why}");
    }
    let offsets = match OffsetStore::open(worker_config.offset_storage_file.clone()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {worker}: {e:#}", worker = worker_file.display());
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let listen = worker_config.listen_addr();
    let worker_id = worker_config.resolved_worker_id();
    let worker = match Worker::new(WorkerOptions {
        id: worker_id,
        wasm_cache_dir: worker_config.wasm_cache_dir.clone(),
        providers: worker_config.config_providers.clone(),
        config_store: worker_config.config_storage_file.clone(),
        plugin_path: worker_config.plugin_path.clone(),
        transforms_library: worker_config.transforms_library.clone(),
        clients: KafkaClients::new(&worker_config, bootstrap.clone(), embedded.clone()),
        offsets,
        // On a real cluster, -1 lets the broker choose (`num.partitions`).
        default_partitions: if embedded.is_some() {
            worker_config.embedded_topic_partitions
        } else {
            -1
        },
        shutdown_timeout: Duration::from_millis(worker_config.task_shutdown_graceful_timeout_ms),
        metrics: Metrics::new(),
    }) {
        Ok(w) => {
            // `/health` says "starting" until the connectors are up.
            w.set_starting(true);
            Arc::new(w)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };

    let mut validated = Vec::with_capacity(specs.len());
    for (file, spec) in &specs {
        match worker.validate(spec).await {
            Ok(v) => validated.push(v),
            Err(e) => {
                eprintln!("error: {}: connector `{}`: {e}", file.display(), spec.name);
                return ExitCode::from(EXIT_CONFIG);
            }
        }
    }

    let cluster = match mode {
        Mode::Standalone => None,
        Mode::Distributed => match crate::cluster::Cluster::start(
            worker.clone(),
            &worker_config.group_id,
            &worker_config.cluster,
            worker.clients(),
            Duration::from_millis(worker_config.task_shutdown_graceful_timeout_ms),
        )
        .await
        {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!(
                    "error: {}: joining the cluster: {e:#}",
                    worker_file.display()
                );
                return ExitCode::FAILURE;
            }
        },
    };

    let auth = match &worker_config.rest_auth_users_file {
        Some(file) => {
            match crate::auth::BasicAuth::load(file, worker_config.rest_auth_health_open) {
                Ok(a) => Some(Arc::new(a)),
                Err(e) => {
                    eprintln!("error: {}: {e}", worker_file.display());
                    return ExitCode::from(EXIT_CONFIG);
                }
            }
        }
        None => None,
    };

    let tls = match &worker_config.rest_tls {
        Some((cert, key)) => match crate::tls::acceptor(cert, key) {
            Ok(a) => Some(a),
            Err(e) => {
                eprintln!("error: {}: {e}", worker_file.display());
                return ExitCode::from(EXIT_CONFIG);
            }
        },
        None => None,
    };

    let listener = match tokio::net::TcpListener::bind(&listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "error: {}: key `listeners`: cannot listen on {listen}: {e}",
                worker_file.display()
            );
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let local = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or(listen);
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(rest = %format!("{scheme}://{local}"), bootstrap.servers = %bootstrap, "worker started");
    let shutdown = tokio_util::sync::CancellationToken::new();
    let server = {
        let app = match &auth {
            Some(a) => crate::auth::protect(crate::rest::router(worker.clone()), a.clone()),
            None => crate::rest::router(worker.clone()),
        };
        let stop = shutdown.clone();
        tokio::spawn(async move {
            match tls {
                Some(acceptor) => crate::tls::serve(listener, acceptor, app, stop).await,
                None => {
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(stop.cancelled_owned())
                        .await;
                }
            }
        })
    };

    let metrics_server = match &worker_config.metrics_listener {
        Some(addr) => match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => {
                tracing::info!(metrics = %format!("http://{addr}/metrics"), "metrics listener started");
                let app = crate::rest::metrics_router(worker.clone());
                let stop = shutdown.clone();
                Some(tokio::spawn(async move {
                    let _ = axum::serve(l, app)
                        .with_graceful_shutdown(stop.cancelled_owned())
                        .await;
                }))
            }
            Err(e) => {
                eprintln!(
                    "error: {}: key `metrics.listener`: cannot listen on {addr}: {e}",
                    worker_file.display()
                );
                return ExitCode::from(EXIT_CONFIG);
            }
        },
        None => None,
    };

    // Connectors from the config store first (with their last state), unless
    // a connector file on the command line names the same connector.
    let stored = match worker.stored_connectors() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let named: Vec<String> = validated.iter().map(|v| v.spec.name.clone()).collect();
    for (spec, state) in stored.into_iter().filter(|(s, _)| !named.contains(&s.name)) {
        let name = spec.name.clone();
        let target = crate::worker::TargetState::parse(&state).unwrap_or_else(|| {
            tracing::warn!(connector = %name, state = %state, "unknown stored state; starting the connector RUNNING");
            crate::worker::TargetState::Running
        });
        let restored = match worker.validate(&spec).await {
            Ok(v) => worker.start_in(v, target).await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match restored {
            Ok(()) => {
                tracing::info!(connector = %name, state = %state, "restored connector from the config store");
            }
            Err(e) => {
                tracing::error!(connector = %name, error = %e, "a stored connector no longer starts; it is left out (and dropped from the config store at the next change): create it again over REST")
            }
        }
    }

    for v in validated {
        let name = v.spec.name.clone();
        if let Err(e) = worker.start(v).await {
            tracing::error!(connector = %name, error = %e, "connector failed to start");
            eprintln!("error: {e}");
            worker.shutdown().await;
            return ExitCode::FAILURE;
        }
    }

    worker.set_starting(false);
    tracing::info!("worker ready");
    wait_for_signal().await;
    tracing::info!("shutting down: finishing in-flight batches");
    let local_tasks: Vec<(String, u32)> = worker
        .local_task_statuses()
        .await
        .into_iter()
        .map(|(connector, task, _)| (connector, task))
        .collect();
    worker.shutdown().await;
    if let Some(c) = &cluster {
        c.report_all_stopped(local_tasks).await;
        c.shutdown();
    }
    shutdown.cancel();
    let _ = server.await;
    if let Some(m) = metrics_server {
        let _ = m.await;
    }
    drop(embedded);
    tracing::info!("stopped");
    ExitCode::SUCCESS
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
