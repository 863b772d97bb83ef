//! Kafka Connect's config providers: `${env:VAR}` (EnvVarConfigProvider) and
//! `${file:/path/to/file.properties:key}` (FileConfigProvider), enabled by
//! the worker's `config.providers` keys. Placeholders are resolved for the
//! tasks; the stored config and the REST API keep them, so secrets stay in
//! their files.

use std::collections::BTreeMap;
use std::path::Path;

use sluice_sdk::{ConfigError, ConfigMap};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Env,
    File,
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
            let kind = match class.rsplit('.').next().unwrap_or(class) {
                "EnvVarConfigProvider" => Kind::Env,
                "FileConfigProvider" => Kind::File,
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

    /// `text` with every value a provider supplied for `config` shown as its
    /// reference: what the API shows of resolved configs and of errors
    /// about them, so a secret never leaves the worker.
    pub fn conceal(&self, config: &ConfigMap, text: &str) -> String {
        let mut out = text.to_string();
        for (reference, value) in self.resolved_references(config) {
            out = out.replace(&value, &reference);
        }
        out
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
                Some(Kind::Env) => {
                    out.push_str(
                        &std::env::var(reference).map_err(|_| {
                            format!("environment variable `{reference}` is not set")
                        })?,
                    );
                }
                Some(Kind::File) => {
                    let (path, key) = reference.rsplit_once(':').ok_or_else(|| {
                        format!("`${{{inner}}}` must be ${{{alias}:/path/to/file:key}}")
                    })?;
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
}
