//! The Sluice runtime. See `ARCHITECTURE.md` at the repository root for the
//! record flow and where each concern lives.

pub mod auth;
pub mod cli;
pub mod client;
pub mod config;
pub mod dlq;
pub mod durable;
pub mod errors;
pub mod herder;
pub mod kafka;
pub mod logging;
pub mod metrics;
pub mod offsets;
pub mod plugin;
pub mod providers;
pub mod rest;
pub mod schema;
pub mod task;
pub mod tls;
pub mod transform;
pub mod validate;
pub mod worker;
