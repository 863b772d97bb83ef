//! Kafka Connect's config providers: `${env:VAR}` (EnvVarConfigProvider) and
//! `${file:/path/to/file.properties:key}` (FileConfigProvider), enabled by
//! the worker's `config.providers` keys. Placeholders are resolved for the
//! tasks; the stored config and the REST API keep them, so secrets stay in
//! their files.

use std::collections::BTreeMap;
use std::path::Path;

use sluice_sdk::{ConfigError, ConfigMap};

#[derive(Debug, Clone)]
enum Kind {
    /// `param.allowlist.pattern` (Kafka Connect's KIP-887): only variables
    /// whose whole name matches may be read.
    Env { allowlist: Option<regex::Regex> },
    /// `param.allowed.paths` (KIP-993): only files under these directories
    /// may be read.
    File {
        allowed: Option<Vec<std::path::PathBuf>>,
    },
}

/// The providers a worker enables, by the alias configs use.
#[derive(Debug, Clone, Default)]
pub struct ConfigProviders {
    providers: BTreeMap<String, Kind>,
}

impl ConfigProviders {
    /// From `config.providers=a,b` and `config.providers.a.class=...`.
    pub fn from_worker(keys: &ConfigMap) -> Result<Self, ConfigError> {
        let mut providers = BTreeMap::new();
        let Some(list) = keys.get("config.providers") else {
            return Ok(Self::default());
        };
        for alias in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            let key = format!("config.providers.{alias}.class");
            let class = keys.get(&key).ok_or_else(|| {
                ConfigError::new(
                    key.clone(),
                    "is required for each provider in config.providers",
                )
            })?;
            let param = |name: &str| keys.get(&format!("config.providers.{alias}.param.{name}"));
            let known_params: &[&str] = match class.rsplit('.').next().unwrap_or(class) {
                "EnvVarConfigProvider" => &["allowlist.pattern"],
                "FileConfigProvider" => &["allowed.paths"],
                _ => &[],
            };
            let param_prefix = format!("config.providers.{alias}.param.");
            if let Some(unknown) = keys.keys().find(|k| {
                k.strip_prefix(&param_prefix)
                    .is_some_and(|p| !known_params.contains(&p))
            }) {
                return Err(ConfigError::new(
                    unknown.clone(),
                    format!(
                        "is not a parameter of this provider; known: {}",
                        known_params.join(", ")
                    ),
                ));
            }
            let kind = match class.rsplit('.').next().unwrap_or(class) {
                "EnvVarConfigProvider" => Kind::Env {
                    allowlist: match param("allowlist.pattern") {
                        Some(p) => Some(regex::Regex::new(&format!("^(?:{p})$")).map_err(|e| {
                            ConfigError::new(
                                format!("{param_prefix}allowlist.pattern"),
                                e.to_string(),
                            )
                        })?),
                        None => None,
                    },
                },
                "FileConfigProvider" => Kind::File {
                    allowed: param("allowed.paths").map(|paths| {
                        paths
                            .split(',')
                            .map(str::trim)
                            .filter(|p| !p.is_empty())
                            .map(|p| {
                                std::path::Path::new(p)
                                    .canonicalize()
                                    .unwrap_or_else(|_| p.into())
                            })
                            .collect()
                    }),
                },
                other => {
                    return Err(ConfigError::new(
                        key,
                        format!(
                            "`{other}` is not supported; use org.apache.kafka.common.config.provider.EnvVarConfigProvider or FileConfigProvider"
                        ),
                    ));
                }
            };
            providers.insert(alias.to_string(), kind);
        }
        Ok(Self { providers })
    }

    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }

    /// Every value with its `${provider:path:key}` placeholders resolved; an
    /// unknown provider, variable, file or key is an error naming the key.
    pub fn resolve(&self, config: &ConfigMap) -> Result<ConfigMap, ConfigError> {
        if self.providers.is_empty() {
            return Ok(config.clone());
        }
        let mut out = ConfigMap::new();
        for (k, v) in config {
            out.insert(
                k.clone(),
                self.resolve_value(v)
                    .map_err(|m| ConfigError::new(k.as_str(), m))?,
            );
        }
        Ok(out)
    }

    /// Every provider reference in `config` with what it resolves to now
    /// (references that do not resolve are left out), longest value first.
    pub fn resolved_references(&self, config: &ConfigMap) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for value in config.values() {
            let mut rest = value.as_str();
            while let Some(start) = rest.find("${") {
                let Some(len) = rest[start..].find('}') else {
                    break;
                };
                let reference = &rest[start..start + len + 1];
                if let Ok(resolved) = self.resolve_value(reference)
                    && resolved != reference
                    && !resolved.is_empty()
                    && !out.iter().any(|(r, _)| r == reference)
                {
                    out.push((reference.to_string(), resolved));
                }
                rest = &rest[start + len + 1..];
            }
        }
        // A value inside another is replaced after it.
        out.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        out
    }

    /// `texts` with every value a provider supplied for `config` shown as
    /// its reference: what the API shows of resolved configs and of errors
    /// about them, so a secret never leaves the worker. The references are
    /// resolved (files read) once for all of them.
    pub fn conceal<'a>(
        &self,
        config: &ConfigMap,
        texts: impl IntoIterator<Item = &'a str>,
    ) -> Vec<String> {
        let references = self.resolved_references(config);
        texts
            .into_iter()
            .map(|text| {
                references
                    .iter()
                    .fold(text.to_string(), |out, (reference, value)| {
                        out.replace(value, reference)
                    })
            })
            .collect()
    }

    fn resolve_value(&self, value: &str) -> Result<String, String> {
        let mut out = String::with_capacity(value.len());
        let mut rest = value;
        while let Some(start) = rest.find("${") {
            let Some(len) = rest[start..].find('}') else {
                break;
            };
            let inner = &rest[start + 2..start + len];
            out.push_str(&rest[..start]);
            // `${topic}` and other templates are not provider references.
            let Some((alias, reference)) = inner.split_once(':') else {
                out.push_str(&rest[start..start + len + 1]);
                rest = &rest[start + len + 1..];
                continue;
            };
            match self.providers.get(alias) {
                None => {
                    // Not a provider reference (e.g. `${topic}`): keep it.
                    out.push_str(&rest[start..start + len + 1]);
                }
                Some(Kind::Env { allowlist }) => {
                    if let Some(allow) = allowlist
                        && !allow.is_match(reference)
                    {
                        return Err(format!(
                            "environment variable `{reference}` is not allowed by config.providers.{alias}.param.allowlist.pattern"
                        ));
                    }
                    out.push_str(
                        &std::env::var(reference).map_err(|_| {
                            format!("environment variable `{reference}` is not set")
                        })?,
                    );
                }
                Some(Kind::File { allowed }) => {
                    let (path, key) = reference.rsplit_once(':').ok_or_else(|| {
                        format!("`${{{inner}}}` must be ${{{alias}:/path/to/file:key}}")
                    })?;
                    if let Some(allowed) = allowed {
                        // Resolved first, so `..` and links cannot leave them.
                        let real = Path::new(path)
                            .canonicalize()
                            .map_err(|e| format!("cannot read {path}: {e}"))?;
                        if !allowed.iter().any(|dir| real.starts_with(dir)) {
                            return Err(format!(
                                "{path} is not under config.providers.{alias}.param.allowed.paths"
                            ));
                        }
                    }
                    out.push_str(&read_property(Path::new(path), key)?);
                }
            }
            rest = &rest[start + len + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// `key=value` (or `key: value`) from a properties file.
fn read_property(path: &Path, key: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let split = line
            .find(['=', ':'])
            .map(|i| (line[..i].trim(), line[i + 1..].trim()));
        if let Some((k, v)) = split
            && k == key
        {
            return Ok(v.to_string());
        }
    }
    Err(format!("{} has no key `{key}`", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_env_and_file_references() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = dir.path().join("db.properties");
        std::fs::write(&secrets, "# comment\nuser = app\npassword=s3cret=x\n").unwrap();
        // SAFETY: single-threaded test setting a variable only it reads.
        unsafe { std::env::set_var("SLUICE_TEST_PROVIDER_HOST", "db.internal") };
        let worker: ConfigMap = [
            ("config.providers", "env,file"),
            (
                "config.providers.env.class",
                "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
            ),
            (
                "config.providers.file.class",
                "org.apache.kafka.common.config.provider.FileConfigProvider",
            ),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let p = ConfigProviders::from_worker(&worker).unwrap();
        let path = secrets.display();
        let config: ConfigMap = [
            (
                "connection.url",
                "jdbc:postgresql://${env:SLUICE_TEST_PROVIDER_HOST}:5432/app".to_string(),
            ),
            ("connection.password", format!("${{file:{path}:password}}")),
            ("table.name.format", "${topic}".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let r = p.resolve(&config).unwrap();
        assert_eq!(
            r["connection.url"],
            "jdbc:postgresql://db.internal:5432/app"
        );
        assert_eq!(r["connection.password"], "s3cret=x");
        assert_eq!(r["table.name.format"], "${topic}", "not a provider: kept");
        let missing: ConfigMap = [(
            "connection.user".to_string(),
            format!("${{file:{path}:nobody}}"),
        )]
        .into();
        let err = p.resolve(&missing).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("connection.user"));
        assert!(err.message.contains("no key `nobody`"), "{err}");
    }

    #[test]
    fn allow_lists_confine_what_providers_read() {
        let dir = tempfile::tempdir().unwrap();
        let allowed = dir.path().join("allowed");
        std::fs::create_dir(&allowed).unwrap();
        std::fs::write(allowed.join("db.properties"), "password=ok\n").unwrap();
        std::fs::write(dir.path().join("other.properties"), "password=no\n").unwrap();
        // SAFETY: variables only this test reads.
        unsafe {
            std::env::set_var("SLUICE_TEST_ALLOWED_VAR", "fine");
            std::env::set_var("SLUICE_TEST_OTHER_VAR", "leak");
        }
        let worker: ConfigMap = [
            ("config.providers", "env,file".to_string()),
            (
                "config.providers.env.class",
                "org.apache.kafka.common.config.provider.EnvVarConfigProvider".to_string(),
            ),
            (
                "config.providers.env.param.allowlist.pattern",
                "SLUICE_TEST_ALLOWED_.*".to_string(),
            ),
            (
                "config.providers.file.class",
                "org.apache.kafka.common.config.provider.FileConfigProvider".to_string(),
            ),
            (
                "config.providers.file.param.allowed.paths",
                allowed.display().to_string(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let p = ConfigProviders::from_worker(&worker).unwrap();
        let one = |v: String| -> Result<String, ConfigError> {
            p.resolve(&[("k".to_string(), v)].into())
                .map(|m| m["k"].clone())
        };
        assert_eq!(
            one("${env:SLUICE_TEST_ALLOWED_VAR}".into()).unwrap(),
            "fine"
        );
        let err = one("${env:SLUICE_TEST_OTHER_VAR}".into()).unwrap_err();
        assert!(err.message.contains("allowlist.pattern"), "{err}");
        let inside = allowed.join("db.properties");
        assert_eq!(
            one(format!("${{file:{}:password}}", inside.display())).unwrap(),
            "ok"
        );
        let outside = dir.path().join("other.properties");
        let err = one(format!("${{file:{}:password}}", outside.display())).unwrap_err();
        assert!(err.message.contains("allowed.paths"), "{err}");
        // `..` does not leave the allowed directory.
        let escape = allowed.join("..").join("other.properties");
        let err = one(format!("${{file:{}:password}}", escape.display())).unwrap_err();
        assert!(err.message.contains("allowed.paths"), "{err}");
        let mut unknown = worker.clone();
        unknown.insert(
            "config.providers.file.param.allowed.path".into(),
            "/x".into(),
        );
        let err = ConfigProviders::from_worker(&unknown).unwrap_err();
        assert_eq!(
            err.key.as_deref(),
            Some("config.providers.file.param.allowed.path")
        );
    }
}
