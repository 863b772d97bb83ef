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
    let registry = tracing_subscriber::registry().with(filter);
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
