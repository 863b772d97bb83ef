//! `sluice standalone` and `sluice distributed`: load and check every file,
//! start the broker (embedded when none is named), build the worker and
//! its herder, serve the REST API, restore the connectors, and run until a
//! signal, then stop cleanly.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use super::EXIT_CONFIG;
use crate::config::{ConnectorSpec, DistributedTopics, WorkerConfig};
use crate::herder::{Herder, RestoreError};
use crate::kafka::{EMBEDDED_PARTITION_LIMIT_BYTES, EmbeddedBroker, KafkaClients};
use crate::metrics::Metrics;
use crate::offsets::OffsetStore;
use crate::validate::ValidatedConnector;
use crate::worker::{Worker, WorkerOptions};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Standalone,
    Distributed,
}

/// Why the worker stops before running: a config to fix (exit 2) or a
/// failure (exit 1). The message is printed as `error: ...`.
enum Stop {
    Config(String),
    Failure(String),
}

impl Stop {
    fn exit(self) -> ExitCode {
        let (message, code) = match self {
            Stop::Config(m) => (m, ExitCode::from(EXIT_CONFIG)),
            Stop::Failure(m) => (m, ExitCode::FAILURE),
        };
        eprintln!("error: {message}");
        code
    }
}

/// Every file, read and checked before anything starts.
struct Loaded {
    file: PathBuf,
    config: WorkerConfig,
    /// Distributed mode: the cluster's topics.
    cluster: Option<DistributedTopics>,
    connectors: Vec<(PathBuf, ConnectorSpec)>,
}

/// Runs a worker on a runtime of its own until it is stopped.
pub(super) fn run_worker(
    worker_file: PathBuf,
    connector_files: Vec<PathBuf>,
    mode: Mode,
) -> ExitCode {
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
    match runtime.block_on(run(worker_file, connector_files, mode)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(stop) => stop.exit(),
    }
}

async fn run(worker_file: PathBuf, connector_files: Vec<PathBuf>, mode: Mode) -> Result<(), Stop> {
    let loaded = load(worker_file, &connector_files, mode)?;
    crate::logging::init(loaded.config.log_format);
    let (embedded, bootstrap) = broker(&loaded.config)?;
    let worker = build_worker(&loaded, &embedded, &bootstrap)?;
    let given = validate_given(&worker, &loaded).await?;
    let herder = Arc::new(build_herder(&loaded, worker).await?);
    let shutdown = tokio_util::sync::CancellationToken::new();
    let servers = serve(&loaded, &herder, &bootstrap, &shutdown).await?;
    match herder.restore(given).await {
        Ok(()) => {}
        Err(RestoreError::Store(e)) => return Err(Stop::Config(e)),
        Err(RestoreError::Start(e)) => {
            herder.shutdown().await;
            return Err(Stop::Failure(e.to_string()));
        }
    }
    herder.set_starting(false);
    tracing::info!("worker ready");
    wait_for_signal().await;
    tracing::info!("shutting down: finishing in-flight batches");
    exit_after(shutdown_timeout(&loaded.config) + SHUTDOWN_MARGIN);
    herder.shutdown().await;
    shutdown.cancel();
    for server in servers {
        let _ = server.await;
    }
    drop(embedded);
    tracing::info!("stopped");
    Ok(())
}

/// The worker config (with distributed mode's rules) and the connector
/// files, each name used once.
fn load(worker_file: PathBuf, connector_files: &[PathBuf], mode: Mode) -> Result<Loaded, Stop> {
    let config = WorkerConfig::load(&worker_file).map_err(|e| Stop::Config(e.to_string()))?;
    let cluster = match mode {
        Mode::Standalone => None,
        Mode::Distributed => Some(
            config
                .distributed_topics()
                .map_err(|e| Stop::Config(format!("{}: {e}", worker_file.display())))?,
        ),
    };
    let mut connectors: Vec<(PathBuf, ConnectorSpec)> = Vec::with_capacity(connector_files.len());
    for file in connector_files {
        let spec = ConnectorSpec::load(file).map_err(|e| Stop::Config(e.to_string()))?;
        if connectors.iter().any(|(_, s)| s.name == spec.name) {
            return Err(Stop::Config(format!(
                "{}: connector name `{}` is used by another file",
                file.display(),
                spec.name
            )));
        }
        connectors.push((file.clone(), spec));
    }
    Ok(Loaded {
        file: worker_file,
        config,
        cluster,
        connectors,
    })
}

/// The cluster named by `bootstrap.servers`, or the embedded development
/// broker (with a warning) when none is.
fn broker(config: &WorkerConfig) -> Result<(Option<EmbeddedBroker>, String), Stop> {
    if let Some(b) = &config.bootstrap_servers {
        return Ok((None, b.clone()));
    }
    let embedded = EmbeddedBroker::start().map_err(|e| Stop::Failure(format!("{e:#}")))?;
    let bootstrap = embedded.bootstrap_servers().to_string();
    tracing::warn!(
        bootstrap.servers = %bootstrap,
        "no bootstrap.servers: using the embedded development broker. It keeps nothing across restarts \
         and silently drops data beyond about {} MiB per partition; set bootstrap.servers for production",
        EMBEDDED_PARTITION_LIMIT_BYTES / (1024 * 1024)
    );
    Ok((Some(embedded), bootstrap))
}

fn build_worker(
    loaded: &Loaded,
    embedded: &Option<EmbeddedBroker>,
    bootstrap: &str,
) -> Result<Arc<Worker>, Stop> {
    let config = &loaded.config;
    let offsets = OffsetStore::open(config.offset_storage_file.clone())
        .map_err(|e| Stop::Config(format!("{}: {e:#}", loaded.file.display())))?;
    let worker = Worker::new(WorkerOptions {
        id: config.resolved_worker_id(),
        wasm_cache_dir: config.wasm_cache_dir.clone(),
        providers: config.config_providers.clone(),
        plugin_path: config.plugin_path.clone(),
        file_allowed_paths: config.file_allowed_paths.clone(),
        transforms_library: config.transforms_library.clone(),
        clients: KafkaClients::new(config, bootstrap.to_string(), embedded.clone()),
        offsets,
        // On a real cluster, -1 lets the broker choose (`num.partitions`).
        default_partitions: if embedded.is_some() {
            config.embedded_topic_partitions
        } else {
            -1
        },
        shutdown_timeout: shutdown_timeout(config),
        metrics: Metrics::new(),
    })
    .map_err(|e| Stop::Failure(format!("{e:#}")))?;
    // `/health` says "starting" until the connectors are up.
    worker.set_starting(true);
    Ok(Arc::new(worker))
}

fn shutdown_timeout(config: &WorkerConfig) -> Duration {
    Duration::from_millis(config.task_shutdown_graceful_timeout_ms)
}

/// What a worker may take beyond `task.shutdown.graceful.timeout.ms` to
/// stop (final statuses, leaving groups, closing clients) before it exits
/// whatever is still waiting on an unreachable broker.
pub const SHUTDOWN_MARGIN: Duration = Duration::from_secs(5);

/// Exits the process once `bound` has passed, should the shutdown still
/// be waiting then: on a broker that is down, closing a client or writing
/// a status can wait for minutes. A thread, because what blocks may be a
/// client's destructor, which no timer interrupts.
fn exit_after(bound: Duration) {
    let spawned = std::thread::Builder::new()
        .name("shutdown-bound".into())
        .spawn(move || {
            std::thread::sleep(bound);
            tracing::warn!(
                bound_ms = bound.as_millis() as u64,
                "shutdown did not finish within task.shutdown.graceful.timeout.ms and its margin (is the broker reachable?): exiting now; uncommitted records are read again, and a final task status not written is reconciled by the task's next holder"
            );
            std::process::exit(0);
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no thread to bound the shutdown: it may wait for the broker");
    }
}

/// The connector files on the command line, validated whole before any
/// starts.
async fn validate_given(worker: &Worker, loaded: &Loaded) -> Result<Vec<ValidatedConnector>, Stop> {
    let mut validated = Vec::with_capacity(loaded.connectors.len());
    for (file, spec) in &loaded.connectors {
        let v = worker.validator().validate(spec).await.map_err(|e| {
            Stop::Config(format!(
                "{}: connector `{}`: {e}",
                file.display(),
                spec.name
            ))
        })?;
        validated.push(v);
    }
    Ok(validated)
}

async fn build_herder(loaded: &Loaded, worker: Arc<Worker>) -> Result<Herder, Stop> {
    let config = &loaded.config;
    match &loaded.cluster {
        None => Ok(Herder::standalone(
            worker,
            config.config_storage_file.clone(),
        )),
        Some(topics) => {
            Herder::distributed(worker, &config.group_id, topics, shutdown_timeout(config))
                .await
                .map_err(|e| {
                    Stop::Failure(format!(
                        "{}: joining the cluster: {e:#}",
                        loaded.file.display()
                    ))
                })
        }
    }
}

/// The REST API (with its auth and TLS) and the metrics listener, if one
/// is configured; they stop when `shutdown` is cancelled.
async fn serve(
    loaded: &Loaded,
    herder: &Arc<Herder>,
    bootstrap: &str,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Result<Vec<tokio::task::JoinHandle<()>>, Stop> {
    let config = &loaded.config;
    let file = loaded.file.display();
    let auth = match &config.rest_auth_users_file {
        Some(users) => Some(Arc::new(
            crate::auth::BasicAuth::load(users, config.rest_auth_health_open)
                .map_err(|e| Stop::Config(format!("{file}: {e}")))?,
        )),
        None => None,
    };
    let tls = match &config.rest_tls {
        Some(settings) => {
            Some(crate::tls::acceptor(settings).map_err(|e| Stop::Config(format!("{file}: {e}")))?)
        }
        None => None,
    };
    let listen = config.listen_addr();
    let listener = tokio::net::TcpListener::bind(&listen).await.map_err(|e| {
        Stop::Config(format!(
            "{file}: key `listeners`: cannot listen on {listen}: {e}"
        ))
    })?;
    let local = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or(listen);
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(rest = %format!("{scheme}://{local}"), bootstrap.servers = %bootstrap, "worker started");
    let app = match &auth {
        Some(a) => crate::auth::protect(crate::rest::router(herder.clone()), a.clone()),
        None => crate::rest::router(herder.clone()),
    };
    let stop = shutdown.clone();
    let mut servers = vec![tokio::spawn(async move {
        match tls {
            Some(acceptor) => crate::tls::serve(listener, acceptor, app, stop).await,
            None => {
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await;
            }
        }
    })];
    if let Some(addr) = &config.metrics_listener {
        let l = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            Stop::Config(format!(
                "{file}: key `metrics.listener`: cannot listen on {addr}: {e}"
            ))
        })?;
        tracing::info!(metrics = %format!("http://{addr}/metrics"), "metrics listener started");
        let app = crate::rest::metrics_router(herder.clone());
        let stop = shutdown.clone();
        servers.push(tokio::spawn(async move {
            let _ = axum::serve(l, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
        }));
    }
    Ok(servers)
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
