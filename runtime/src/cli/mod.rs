//! The `sluice` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod run;

use crate::config::WorkerConfig;
use crate::kafka::KafkaClients;

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
        /// Sample records shown per error class and stage.
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
            run::run_worker(worker, connectors, run::Mode::Standalone)
        }
        Command::Distributed { worker } => {
            run::run_worker(worker, Vec::new(), run::Mode::Distributed)
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
