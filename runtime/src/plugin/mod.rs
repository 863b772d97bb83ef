//! The connector classes a worker knows: built-in ones, by Sluice's short
//! name or Kafka Connect's class names.

pub mod native;
pub mod stream;

use std::sync::Arc;

use sluice_sdk::{ConnectorType, PluginInfo, SinkConnector, SourceConnector};

#[derive(Clone)]
pub enum Plugin {
    Source(Arc<dyn SourceConnector>),
    Sink(Arc<dyn SinkConnector>),
    /// The built-in Kafka-to-Kafka connector (`task::stream` runs it).
    Stream,
}

impl Plugin {
    pub fn info(&self) -> PluginInfo {
        match self {
            Plugin::Source(p) => p.info(),
            Plugin::Sink(p) => p.info(),
            Plugin::Stream => crate::plugin::stream::StreamConnector::info(),
        }
    }

    pub fn kind(&self) -> ConnectorType {
        self.info().kind
    }
}

#[derive(Clone)]
pub struct Registry {
    plugins: Vec<Plugin>,
}

impl Registry {
    pub fn builtin() -> Self {
        Self::builtin_with(sluice_connector_file::AllowedPaths::anywhere())
    }

    /// The built-in connectors, the file connectors confined to `files`.
    pub fn builtin_with(files: sluice_connector_file::AllowedPaths) -> Self {
        use sluice_connector_file::{FileSinkConnector, FileSourceConnector};
        Self {
            plugins: vec![
                Plugin::Source(Arc::new(sluice_connector_datagen::DatagenConnector)),
                Plugin::Source(Arc::new(FileSourceConnector {
                    allowed: files.clone(),
                })),
                Plugin::Sink(Arc::new(FileSinkConnector { allowed: files })),
                Plugin::Sink(Arc::new(sluice_connector_jdbc::JdbcSinkConnector)),
                Plugin::Source(Arc::new(sluice_connector_jdbc::JdbcSourceConnector)),
                Plugin::Source(Arc::new(
                    sluice_connector_postgres_cdc::PostgresCdcConnector,
                )),
                Plugin::Stream,
            ],
        }
    }

    /// The built-in connectors plus the native plugins found in `plugin.path`
    /// (a plugin whose class is already taken is skipped, with a reason).
    pub fn with_native(
        plugin_path: &[std::path::PathBuf],
        files: sluice_connector_file::AllowedPaths,
    ) -> (Self, Vec<(std::path::PathBuf, String)>) {
        let mut registry = Self::builtin_with(files);
        let (plugins, mut failures) = native::scan(plugin_path);
        for p in plugins {
            let class = p.info().class;
            if registry.find(class).is_some() {
                let reason = format!("its class `{class}` is already provided by another plugin");
                tracing::error!(class, "native plugin not loaded: {reason}");
                failures.push((std::path::PathBuf::from(class), reason));
                continue;
            }
            registry.plugins.push(p);
        }
        (registry, failures)
    }

    /// Finds a plugin by its class or any alias.
    pub fn find(&self, class: &str) -> Option<&Plugin> {
        self.plugins.iter().find(|p| {
            let info = p.info();
            info.class == class || info.aliases.contains(&class)
        })
    }

    pub fn all(&self) -> &[Plugin] {
        &self.plugins
    }

    /// The known class names, for error messages.
    pub fn class_names(&self) -> Vec<&'static str> {
        self.plugins.iter().map(|p| p.info().class).collect()
    }
}
