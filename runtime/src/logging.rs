//! Logs: text or JSON (`log.format`), with levels changeable at run time
//! through `/admin/loggers`, as Kafka Connect's. A logger is a Rust module
//! path (`sluice_runtime::task::sink`) or `root`.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

struct Control {
    handle: reload::Handle<EnvFilter, Registry>,
    /// Logger -> (level, last modified in ms since the epoch; None if set at start).
    levels: Mutex<BTreeMap<String, (String, Option<i64>)>>,
}

static CONTROL: OnceLock<Control> = OnceLock::new();

const LEVELS: [&str; 6] = ["OFF", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"];

/// Installs the global subscriber. `RUST_LOG` sets the starting levels
/// (default `info`).
pub fn init(format: LogFormat) {
    let mut levels = BTreeMap::new();
    levels.insert("root".to_string(), ("INFO".to_string(), None));
    if let Ok(spec) = std::env::var("RUST_LOG") {
        for directive in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            match directive.split_once('=') {
                Some((target, level)) => {
                    levels.insert(target.to_string(), (level.to_ascii_uppercase(), None))
                }
                None => levels.insert("root".to_string(), (directive.to_ascii_uppercase(), None)),
            };
        }
    }
    let (filter, handle) = reload::Layer::new(build_filter(&levels));
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(RepeatedClientErrors::default());
    let installed = match format {
        LogFormat::Text => registry
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
            .try_init(),
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    if installed.is_ok() {
        let _ = CONTROL.set(Control {
            handle,
            levels: Mutex::new(levels),
        });
    }
}

/// librdkafka reports a broker that stays unreachable at every retry, from
/// every client, about twice a second. Each such warning or error is logged
/// when it starts; repeats are dropped while they keep coming (less than
/// [`QUIET`] apart), with a reminder every [`REMIND`] while it lasts. So an
/// outage is one line per kind of failure, and its end and the next one are
/// seen.
#[derive(Default)]
struct RepeatedClientErrors {
    seen: Mutex<std::collections::HashMap<String, Repeats>>,
}

struct Repeats {
    logged: std::time::Instant,
    last: std::time::Instant,
}

const QUIET: std::time::Duration = std::time::Duration::from_secs(60);
const REMIND: std::time::Duration = std::time::Duration::from_secs(600);
/// Kinds of failure remembered at most (older ones are forgotten first).
const KINDS: usize = 1024;

impl RepeatedClientErrors {
    /// Whether a client message of this `shape` is logged at `now`.
    fn admit(&self, shape: String, now: std::time::Instant) -> bool {
        let mut seen = self.seen.lock().expect("repeats lock");
        if let Some(r) = seen.get_mut(&shape) {
            let repeat = now.duration_since(r.last) < QUIET;
            r.last = now;
            if repeat && now.duration_since(r.logged) < REMIND {
                return false;
            }
            r.logged = now;
            return true;
        }
        if seen.len() >= KINDS {
            seen.retain(|_, r| now.duration_since(r.last) < QUIET);
            if seen.len() >= KINDS {
                seen.clear();
            }
        }
        seen.insert(
            shape,
            Repeats {
                logged: now,
                last: now,
            },
        );
        true
    }
}

/// A message as a kind of failure: numbers (ports, timings, counts) and
/// librdkafka's own "N identical error(s) suppressed" do not make it new.
fn failure_shape(target: &str, message: &str) -> String {
    let mut shape = String::with_capacity(target.len() + message.len() + 1);
    shape.push_str(target);
    shape.push(' ');
    let mut in_number = false;
    for c in message.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                shape.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            shape.push(c);
        }
    }
    shape.replace(", # identical error(s) suppressed", "")
}

#[derive(Default)]
struct MessageText(String);

impl tracing::field::Visit for MessageText {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.0 = value.to_string();
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RepeatedClientErrors {
    fn event_enabled(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        use tracing_log::NormalizeEvent;
        // Events from `log` carry their target in fields.
        let normalized = event.normalized_metadata();
        let metadata = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let target = metadata.target();
        // Only the Kafka clients' warnings and errors (through `log`).
        if !(target.starts_with("librdkafka") || target.starts_with("rdkafka"))
            || *metadata.level() > tracing::Level::WARN
        {
            return true;
        }
        let mut text = MessageText::default();
        event.record(&mut text);
        self.admit(failure_shape(target, &text.0), std::time::Instant::now())
    }
}

fn build_filter(levels: &BTreeMap<String, (String, Option<i64>)>) -> EnvFilter {
    let mut spec = levels
        .get("root")
        .map(|(l, _)| l.to_ascii_lowercase())
        .unwrap_or_else(|| "info".into());
    for (target, (level, _)) in levels {
        if target != "root" {
            spec.push_str(&format!(",{target}={}", level.to_ascii_lowercase()));
        }
    }
    EnvFilter::try_new(&spec).unwrap_or_else(|_| EnvFilter::new("info"))
}

/// Every logger with a level set, and `root`.
pub fn loggers() -> BTreeMap<String, (String, Option<i64>)> {
    CONTROL
        .get()
        .map(|c| c.levels.lock().expect("levels lock").clone())
        .unwrap_or_default()
}

/// The level in effect for `logger`: its own, or its closest ancestor's.
pub fn level_of(logger: &str) -> Option<(String, Option<i64>)> {
    let levels = loggers();
    if levels.is_empty() {
        return None;
    }
    let mut name = logger.to_string();
    loop {
        if let Some(l) = levels.get(&name) {
            return Some(l.clone());
        }
        match name.rsplit_once("::") {
            Some((parent, _)) => name = parent.to_string(),
            None => return levels.get("root").cloned(),
        }
    }
}

/// Sets a logger's level; returns the loggers whose level changed (the
/// logger and any more specific ones it replaces), as Kafka Connect does.
pub fn set_level(logger: &str, level: &str) -> Result<Vec<String>, String> {
    let level = level.to_ascii_uppercase();
    if !LEVELS.contains(&level.as_str()) {
        return Err(format!(
            "`{level}` is not a level; expected one of {}",
            LEVELS.join(", ")
        ));
    }
    // A name the filter cannot take would reset every level to `info`
    // when the filter is rebuilt.
    let name_chars = |c: char| c.is_ascii_alphanumeric() || "_:.-".contains(c);
    let directive = format!("{logger}={}", level.to_ascii_lowercase());
    if logger.is_empty()
        || !logger.chars().all(name_chars)
        || (logger != "root"
            && directive
                .parse::<tracing_subscriber::filter::Directive>()
                .is_err())
    {
        return Err(format!(
            "`{logger}` is not a logger name (a module path like sluice_runtime::task, or root: letters, digits, `_`, `:`, `.` and `-`)"
        ));
    }
    let control = CONTROL.get().ok_or("logging is not initialised")?;
    let mut levels = control.levels.lock().expect("levels lock");
    let now = chrono::Utc::now().timestamp_millis();
    // Kafka Connect: setting a logger also sets its descendants.
    let prefix = format!("{logger}::");
    let mut changed: Vec<String> = levels
        .keys()
        .filter(|k| logger == "root" || k.starts_with(&prefix))
        .cloned()
        .collect();
    for k in &changed {
        levels.insert(k.clone(), (level.clone(), Some(now)));
    }
    if !changed.iter().any(|c| c == logger) {
        levels.insert(logger.to_string(), (level.clone(), Some(now)));
        changed.push(logger.to_string());
    }
    control
        .handle
        .reload(build_filter(&levels))
        .map_err(|e| format!("applying the level: {e}"))?;
    changed.sort();
    Ok(changed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_client_failure_is_logged_when_it_starts_not_at_every_retry() {
        let filter = super::RepeatedClientErrors::default();
        let t0 = std::time::Instant::now();
        let at = |s: u64| t0 + std::time::Duration::from_secs(s);
        let refused = |ms: u32, suppressed: u32| {
            let tail = if suppressed > 0 {
                format!(", {suppressed} identical error(s) suppressed")
            } else {
                String::new()
            };
            super::failure_shape(
                "librdkafka",
                &format!(
                    "FAIL 127.0.0.1:9092/1: Connect failed: Connection refused (after {ms}ms in state CONNECT{tail})"
                ),
            )
        };
        assert!(filter.admit(refused(0, 0), at(0)));
        // Retries twice a second for a minute: not logged.
        for half in 1..120 {
            assert!(!filter.admit(refused(half, half % 3), at(u64::from(half) / 2)));
        }
        // Another failure is.
        let down = super::failure_shape(
            "rdkafka::client",
            "Global error: AllBrokersDown: 1/1 brokers are down",
        );
        assert!(filter.admit(down.clone(), at(60)));
        // Still failing ten minutes on: one reminder.
        let mut logged = 0;
        for s in 61..=700 {
            logged += usize::from(filter.admit(refused(1, 0), at(s)));
        }
        assert_eq!(logged, 1);
        // Quiet for a while, then down again: a new outage is logged.
        assert!(filter.admit(down.clone(), at(900)));
    }

    /// A name the filter cannot parse (found by the `rest_bodies` fuzz
    /// target: `a[`, a NUL) was accepted, and rebuilding the filter then
    /// reset every logger to `info`.
    #[test]
    fn names_the_filter_cannot_take_are_refused() {
        for bad in ["a[", "\0root", "a b", "x=y", "a,b", "", "a{b}"] {
            let err = super::set_level(bad, "DEBUG").unwrap_err();
            assert!(err.contains("is not a logger name"), "{bad:?}: {err}");
        }
    }
}
