//! `sluice connectors ...` and `sluice plugins`: a client of a running
//! worker's REST API; and `sluice validate`, the validate endpoint's checks
//! run offline.
//!
//! Exit codes scripts can rely on: [`EXIT_OK`], [`EXIT_API`] (the worker
//! answered with an error, printed), [`EXIT_USAGE`] (bad arguments or an
//! input file that cannot be read or is not the expected JSON),
//! [`EXIT_UNREACHABLE`] (no answer from the worker).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// Success; for `sluice validate`, a valid config.
pub const EXIT_OK: u8 = 0;
/// The worker answered with an error (404, 409, 400, ...), or `sluice
/// validate` found errors in the config.
pub const EXIT_API: u8 = 1;
/// Bad arguments, or an input file that cannot be read or is not JSON of the
/// expected shape (clap's usage errors exit 2 as well).
pub const EXIT_USAGE: u8 = 2;
/// The worker could not be reached (connection refused, timeout).
pub const EXIT_UNREACHABLE: u8 = 3;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Human-readable tables.
    Table,
    /// The worker's JSON, unchanged (pretty-printed), for scripts.
    Json,
}

#[derive(Args)]
pub struct ClientArgs {
    /// The worker's REST API.
    #[arg(
        long,
        env = "SLUICE_URL",
        default_value = "http://localhost:8083",
        global = true
    )]
    url: String,
    /// `table`, or `json` (the worker's JSON) for scripts.
    #[arg(long, value_enum, default_value = "table", global = true)]
    output: Output,
    /// HTTP basic credentials, `USER:PASSWORD`, for a worker with
    /// `rest.auth.users.file`.
    #[arg(long, env = "SLUICE_USER", global = true, hide_env_values = true)]
    user: Option<String>,
    /// A PEM CA certificate to trust for an https:// worker (e.g. its own
    /// self-signed certificate), besides the system's.
    #[arg(long, env = "SLUICE_CA_CERT", global = true)]
    ca_cert: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum ConnectorsCommand {
    /// Lists the connectors with their type, state and tasks.
    List,
    /// Shows a connector's config and tasks.
    Get { name: String },
    /// Creates a connector from a Kafka Connect JSON file
    /// (`{"name": ..., "config": {...}}`).
    Create {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Creates or updates a connector (`PUT /connectors/NAME/config`) from a
    /// Kafka Connect JSON file (`{"name": ..., "config": {...}}`).
    Update {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Deletes a connector (its tasks stop cleanly).
    Delete { name: String },
    /// Shows the connector's and its tasks' states, with failure traces.
    Status { name: String },
    /// PAUSED: tasks stop moving records but keep their place.
    Pause { name: String },
    /// RUNNING again, from PAUSED or STOPPED.
    Resume { name: String },
    /// STOPPED: no tasks, the config kept (offsets may then be changed).
    Stop { name: String },
    /// Restarts the connector, or with the flags its tasks.
    Restart {
        name: String,
        /// Restart the tasks too (answered with the status).
        #[arg(long)]
        include_tasks: bool,
        /// Only what has FAILED.
        #[arg(long)]
        only_failed: bool,
    },
    /// Shows the connector's offsets (KIP-875).
    Offsets { name: String },
}

/// What went wrong, and so the exit code.
enum Failure {
    /// The worker's error, with its body.
    Api {
        status: StatusCode,
        body: Value,
    },
    Usage(String),
    Unreachable(String),
}

impl Failure {
    fn report(self, output: Output) -> ExitCode {
        match self {
            Failure::Api { status, body } => {
                let message = body["message"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| body.to_string());
                if output == Output::Json {
                    println!("{}", pretty(&body));
                }
                eprintln!("error: {message} (HTTP {})", status.as_u16());
                ExitCode::from(EXIT_API)
            }
            Failure::Usage(m) => {
                eprintln!("error: {m}");
                ExitCode::from(EXIT_USAGE)
            }
            Failure::Unreachable(m) => {
                eprintln!("error: {m}");
                ExitCode::from(EXIT_UNREACHABLE)
            }
        }
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).expect("serialises")
}

struct Client {
    http: reqwest::Client,
    base: String,
    credentials: Option<(String, String)>,
}

/// A successful answer: status, a header Sluice adds, and the JSON body
/// (`null` when there is none).
struct Answer {
    status: StatusCode,
    update: Option<String>,
    body: Value,
}

impl Client {
    fn new(url: &str, user: Option<&str>, ca_cert: Option<&Path>) -> Result<Self, Failure> {
        let credentials = match user {
            Some(u) => {
                let (name, password) = u.split_once(':').ok_or_else(|| {
                    Failure::Usage("--user (SLUICE_USER) must be USER:PASSWORD".into())
                })?;
                Some((name.to_string(), password.to_string()))
            }
            None => None,
        };
        let base = url.trim_end_matches('/').to_string();
        let parsed =
            reqwest::Url::parse(&base).map_err(|e| Failure::Usage(format!("--url {url}: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Failure::Usage(format!(
                "--url {url}: expected an http:// or https:// address"
            )));
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(120));
        if let Some(file) = ca_cert {
            let pem = std::fs::read(file).map_err(|e| {
                Failure::Usage(format!("--ca-cert: reading {}: {e}", file.display()))
            })?;
            let cert = reqwest::Certificate::from_pem(&pem).map_err(|e| {
                Failure::Usage(format!(
                    "--ca-cert: {} is not a PEM certificate: {e}",
                    file.display()
                ))
            })?;
            builder = builder.add_root_certificate(cert);
        }
        let http = builder
            .build()
            .map_err(|e| Failure::Usage(format!("building the HTTP client: {e}")))?;
        Ok(Self {
            http,
            base,
            credentials,
        })
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, Failure> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method.clone(), &url);
        if let Some(b) = body {
            request = request.json(b);
        }
        if let Some((user, password)) = &self.credentials {
            request = request.basic_auth(user, Some(password));
        }
        let response = request.send().await.map_err(|e| {
            // The innermost cause says it best ("Connection refused").
            let mut why = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                why = s.to_string();
                source = s.source();
            }
            if e.is_timeout() {
                why = format!("timed out ({why})");
            }
            Failure::Unreachable(format!(
                "cannot reach the worker at {} ({method} {path}): {why}",
                self.base
            ))
        })?;
        let status = response.status();
        let update = response
            .headers()
            .get("sluice-config-update")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = response.text().await.map_err(|e| {
            Failure::Unreachable(format!("reading the answer to {method} {path}: {e}"))
        })?;
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if !status.is_success() {
            let body = if body.is_object() {
                body
            } else {
                json!({"error_code": status.as_u16(), "message": body.as_str().map(str::to_string).unwrap_or_else(|| body.to_string())})
            };
            return Err(Failure::Api { status, body });
        }
        Ok(Answer {
            status,
            update,
            body,
        })
    }
}

/// Path segments are percent-encoded (connector names may hold anything).
fn seg(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Columns aligned to their widest cell.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                out.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// "2 RUNNING, 1 FAILED".
fn task_summary(tasks: &Value) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for t in tasks.as_array().into_iter().flatten() {
        let state = text(&t["state"]);
        match counts.iter_mut().find(|(s, _)| *s == state) {
            Some((_, n)) => *n += 1,
            None => counts.push((state, 1)),
        }
    }
    if counts.is_empty() {
        return "0".into();
    }
    counts
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn status_table(s: &Value) -> String {
    let mut out = format!(
        "{} ({}): {}\n",
        text(&s["name"]),
        text(&s["type"]),
        text(&s["connector"]["state"])
    );
    if let Some(trace) = s["connector"]["trace"].as_str() {
        out.push_str(&format!("  {}\n", trace.lines().next().unwrap_or_default()));
    }
    let rows: Vec<Vec<String>> = s["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            vec![
                text(&t["id"]),
                text(&t["state"]),
                text(&t["worker_id"]),
                t["trace"]
                    .as_str()
                    .and_then(|tr| tr.lines().next())
                    .unwrap_or_default()
                    .to_string(),
            ]
        })
        .collect();
    if rows.is_empty() {
        out.push_str("no tasks\n");
    } else {
        out.push_str(&table(&["TASK", "STATE", "WORKER", "TRACE"], &rows));
    }
    out
}

fn info_table(info: &Value) -> String {
    let tasks = info["tasks"].as_array().map(Vec::len).unwrap_or(0);
    let mut out = format!(
        "{} ({}, {} task{})\n",
        text(&info["name"]),
        text(&info["type"]),
        tasks,
        if tasks == 1 { "" } else { "s" }
    );
    let rows: Vec<Vec<String>> = info["config"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| vec![k.clone(), text(v)])
        .collect();
    out.push_str(&table(&["KEY", "VALUE"], &rows));
    out
}

/// Reads Kafka Connect's connector file: `{"name": ..., "config": {...}}`.
fn read_connector_file(file: &Path) -> Result<(String, Value), Failure> {
    let body = read_json_file(file)?;
    let bad = |why: &str| {
        Failure::Usage(format!(
            "{}: {why}; expected Kafka Connect's {{\"name\": ..., \"config\": {{...}}}}",
            file.display()
        ))
    };
    let object = body.as_object().ok_or_else(|| bad("not a JSON object"))?;
    let name = object
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| bad("no `name` string"))?
        .to_string();
    let config = object
        .get("config")
        .filter(|c| c.is_object())
        .cloned()
        .ok_or_else(|| bad("no `config` object"))?;
    Ok((name, config))
}

fn read_json_file(file: &Path) -> Result<Value, Failure> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure::Usage(format!("reading {}: {e}", file.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| Failure::Usage(format!("{}: not valid JSON: {e}", file.display())))
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Usage(format!("starting the async runtime: {e}")))
}

/// `sluice connectors ...`.
pub fn connectors(args: ClientArgs, command: ConnectorsCommand) -> ExitCode {
    let output = args.output;
    let run = || -> Result<String, Failure> {
        let client = Client::new(&args.url, args.user.as_deref(), args.ca_cert.as_deref())?;
        runtime()?.block_on(connectors_command(&client, output, command))
    };
    finish(run(), output)
}

/// `sluice plugins`.
pub fn plugins(args: ClientArgs, all: bool) -> ExitCode {
    let output = args.output;
    let run = || -> Result<String, Failure> {
        let client = Client::new(&args.url, args.user.as_deref(), args.ca_cert.as_deref())?;
        let path = format!("/connector-plugins?connectorsOnly={}", !all);
        let answer = runtime()?.block_on(client.call(Method::GET, &path, None))?;
        Ok(match output {
            Output::Json => pretty(&answer.body),
            Output::Table => {
                let rows: Vec<Vec<String>> = answer
                    .body
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| {
                        let aliases = p["aliases"]
                            .as_array()
                            .map(|a| a.iter().map(text).collect::<Vec<_>>().join(", "))
                            .unwrap_or_default();
                        vec![
                            text(&p["class"]),
                            text(&p["type"]),
                            text(&p["version"]),
                            aliases,
                        ]
                    })
                    .collect();
                table(&["CLASS", "TYPE", "VERSION", "ALIASES"], &rows)
            }
        })
    };
    finish(run(), output)
}

fn finish(outcome: Result<String, Failure>, output: Output) -> ExitCode {
    match outcome {
        Ok(text) => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", text.trim_end());
            ExitCode::from(EXIT_OK)
        }
        Err(f) => f.report(output),
    }
}

fn connectors_table(body: &Value) -> String {
    let rows: Vec<Vec<String>> = body
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, c)| {
            vec![
                name.clone(),
                text(&c["info"]["type"]),
                text(&c["status"]["connector"]["state"]),
                task_summary(&c["status"]["tasks"]),
                text(&c["info"]["config"]["connector.class"]),
            ]
        })
        .collect();
    if rows.is_empty() {
        "no connectors".into()
    } else {
        table(&["NAME", "TYPE", "STATE", "TASKS", "CLASS"], &rows)
    }
}

fn offsets_table(body: &Value) -> String {
    let rows: Vec<Vec<String>> = body["offsets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| vec![o["partition"].to_string(), o["offset"].to_string()])
        .collect();
    if rows.is_empty() {
        "no offsets".into()
    } else {
        table(&["PARTITION", "OFFSET"], &rows)
    }
}

/// What a config update did, as `PUT .../config` said.
fn update_summary(status: StatusCode, update: Option<&str>) -> &'static str {
    match (status, update) {
        (StatusCode::CREATED, _) => "created",
        (_, Some("transforms-swapped")) => "updated (transforms swapped in without a restart)",
        (_, Some("restarted")) => "updated (tasks restarted)",
        (_, Some("tasks-resized")) => "updated (tasks added or removed; the others went on)",
        (_, Some("unchanged")) => "unchanged",
        _ => "updated",
    }
}

/// An action with no body in its answer (`DELETE`, `PUT .../pause`, ...):
/// what it did, as a line or JSON.
async fn act(
    client: &Client,
    output: Output,
    method: Method,
    name: &str,
    suffix: &str,
    word: &str,
) -> Result<String, Failure> {
    let path = format!("/connectors/{}{suffix}", seg(name));
    client.call(method, &path, None).await?;
    Ok(match output {
        Output::Json => pretty(&json!({"name": name, "result": word})),
        Output::Table => format!("{word} connector {name}"),
    })
}

async fn connectors_command(
    client: &Client,
    output: Output,
    command: ConnectorsCommand,
) -> Result<String, Failure> {
    // What an action without a body (202/204) prints.
    let done = |name: &str, action: &str, human: String| match output {
        Output::Json => pretty(&json!({"name": name, "result": action})),
        Output::Table => human,
    };
    let shown = |body: &Value, human: fn(&Value) -> String| match output {
        Output::Json => pretty(body),
        Output::Table => human(body),
    };
    Ok(match command {
        ConnectorsCommand::List => {
            let answer = client
                .call(Method::GET, "/connectors?expand=status&expand=info", None)
                .await?;
            shown(&answer.body, connectors_table)
        }
        ConnectorsCommand::Get { name } => {
            let answer = client
                .call(Method::GET, &format!("/connectors/{}", seg(&name)), None)
                .await?;
            shown(&answer.body, info_table)
        }
        ConnectorsCommand::Create { file } => {
            let (name, config) = read_connector_file(&file)?;
            let answer = client
                .call(
                    Method::POST,
                    "/connectors",
                    Some(&json!({"name": name, "config": config})),
                )
                .await?;
            shown(&answer.body, |b| format!("created {}", info_table(b)))
        }
        ConnectorsCommand::Update { file } => {
            let (name, config) = read_connector_file(&file)?;
            let answer = client
                .call(
                    Method::PUT,
                    &format!("/connectors/{}/config", seg(&name)),
                    Some(&config),
                )
                .await?;
            match output {
                Output::Json => pretty(&answer.body),
                Output::Table => {
                    let what = update_summary(answer.status, answer.update.as_deref());
                    format!("{what}: {}", info_table(&answer.body))
                }
            }
        }
        ConnectorsCommand::Delete { name } => {
            act(client, output, Method::DELETE, &name, "", "deleted").await?
        }
        ConnectorsCommand::Status { name } => {
            let answer = client
                .call(
                    Method::GET,
                    &format!("/connectors/{}/status", seg(&name)),
                    None,
                )
                .await?;
            shown(&answer.body, status_table)
        }
        ConnectorsCommand::Pause { name } => {
            act(client, output, Method::PUT, &name, "/pause", "paused").await?
        }
        ConnectorsCommand::Resume { name } => {
            act(client, output, Method::PUT, &name, "/resume", "resumed").await?
        }
        ConnectorsCommand::Stop { name } => {
            act(client, output, Method::PUT, &name, "/stop", "stopped").await?
        }
        ConnectorsCommand::Restart {
            name,
            include_tasks,
            only_failed,
        } => {
            let answer = client
                .call(
                    Method::POST,
                    &format!(
                        "/connectors/{}/restart?includeTasks={include_tasks}&onlyFailed={only_failed}",
                        seg(&name)
                    ),
                    None,
                )
                .await?;
            if answer.body.is_null() {
                done(&name, "restarted", format!("restarted connector {name}"))
            } else {
                shown(&answer.body, status_table)
            }
        }
        ConnectorsCommand::Offsets { name } => {
            let answer = client
                .call(
                    Method::GET,
                    &format!("/connectors/{}/offsets", seg(&name)),
                    None,
                )
                .await?;
            shown(&answer.body, offsets_table)
        }
    })
}

/// `sluice validate FILE`: the checks of `PUT
/// /connector-plugins/{class}/config/validate` ([`crate::validate::Validator::report`]),
/// run here with no worker and no broker. `worker_file` supplies the
/// transforms library, `plugin.path`, config providers and the WASM cache.
pub fn validate(file: &Path, worker_file: Option<&Path>, output: Output) -> ExitCode {
    let outcome = (|| -> Result<(Value, String), Failure> {
        let json = read_json_file(file)?;
        let object = json.as_object().ok_or_else(|| {
            Failure::Usage(format!(
                "{}: not a JSON object; expected {{\"name\": ..., \"config\": {{...}}}} or a flat config",
                file.display()
            ))
        })?;
        // Kafka Connect's connector file, or a flat config (as the endpoint takes).
        let mut config = match object.get("config") {
            Some(c) => c.clone(),
            None => json.clone(),
        };
        if let (Some(name), Some(c)) = (object.get("name"), config.as_object_mut()) {
            c.entry("name").or_insert(name.clone());
        }
        let class = config
            .get("connector.class")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_default();
        let worker_config = match worker_file {
            Some(w) => crate::config::WorkerConfig::load(w),
            None => crate::config::WorkerConfig::from_map(&Default::default()).map_err(|e| {
                crate::config::ConfigFileError::Invalid {
                    file: PathBuf::from("(defaults)"),
                    error: e,
                }
            }),
        }
        .map_err(|e| Failure::Usage(e.to_string()))?;
        let validator = crate::validate::Validator::build(
            &worker_config.plugin_path,
            worker_config.file_allowed_paths.clone(),
            worker_config.wasm_cache_dir.clone(),
            worker_config.config_providers.clone(),
            worker_config.transforms_library.clone(),
            &crate::metrics::Metrics::new(),
        )
        .map_err(|e| Failure::Usage(format!("{e:#}")))?;
        let report = runtime()?
            .block_on(validator.report(&class, &config))
            .map(|mut report| {
                crate::rest::as_kafka_connect_report(&mut report, &class, &config);
                report
            });
        match report {
            Ok(report) => Ok((report, class)),
            // An unknown class or a body that is not a config: one error on
            // its key, in the endpoint's shape.
            Err(e) => {
                let key = match e {
                    crate::validate::ReportError::UnknownClass(_) => "connector.class",
                    crate::validate::ReportError::BadRequest(_) => "config",
                };
                let message = if class.is_empty() && key == "connector.class" {
                    "is required: the connector's class".to_string()
                } else {
                    e.to_string()
                };
                Ok((
                    json!({"name": class, "error_count": 1, "groups": [], "configs": [
                        {"definition": {"name": key, "type": "STRING", "required": true, "default_value": null, "importance": "HIGH",
                            "documentation": "", "group": "Common", "order": 0, "width": "NONE", "display_name": key, "dependents": []},
                         "value": {"name": key, "value": config.get(key).cloned().unwrap_or(Value::Null), "recommended_values": [], "errors": [message], "visible": true}}
                    ]}),
                    class,
                ))
            }
        }
    })();
    let (report, class) = match outcome {
        Ok(r) => r,
        Err(f) => return f.report(output),
    };
    let errors = report["error_count"].as_u64().unwrap_or(0);
    match output {
        Output::Json => println!("{}", pretty(&report)),
        Output::Table => {
            let rows: Vec<Vec<String>> = report["configs"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|c| {
                    let key = text(&c["value"]["name"]);
                    c["value"]["errors"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                        .into_iter()
                        .map(move |e| vec![key.clone(), text(&e)])
                })
                .collect();
            if rows.is_empty() {
                println!(
                    "{}: valid ({class}, {} keys checked)",
                    file.display(),
                    report["configs"].as_array().map(Vec::len).unwrap_or(0)
                );
            } else {
                print!("{}", table(&["KEY", "ERROR"], &rows));
            }
        }
    }
    ExitCode::from(if errors == 0 { EXIT_OK } else { EXIT_API })
}
