//! Sluice's integration tests: one binary, shared fixtures.
//!
//! They run against real parts: librdkafka's mock cluster speaking the Kafka
//! protocol on loopback (hosted in this process, or by a `sluice` child
//! process), Apache Kafka itself for what the mock does not enforce
//! (`real_kafka`: transactions, fencing, static membership), PostgreSQL,
//! SQLite files, and WASM components built from source here.

mod fixtures;

mod cdc;
mod compat_converter;
mod compat_smt;
mod config_errors;
mod console;
pub mod consumer_stability;
mod converter;
pub mod crash;
mod delivery;
pub mod distributed;
mod error_handling;
mod hot_swap;
mod jdbc;
mod jdbc_source;
mod languages;
mod native_plugins;
mod observability;
mod openapi;
mod persistence;
mod postgres;
mod quickstart;
mod real_kafka;
mod rest;
mod schema_registry;
mod sink_failures;
mod stdlib;
mod transforms;
