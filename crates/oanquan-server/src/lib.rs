//! The Ô Ăn Quan game server.
//!
//! * [`domain`]: games, seats, moves, events, tokens and storage in plain Rust types.
//! * [`config`]: the settings, one section per consumer, each a `clap::Args` whose `Default`
//!   is its flags' defaults.
//! * [`grpc`]: thin tonic adapters (protobuf conversions at the edge, one status table).
//! * [`run`]: serves everything on a bound listener until a shutdown future resolves, like
//!   mini-redis, so tests bind `127.0.0.1:0` first and need no sleeps. [`open_store`] +
//!   [`run_with_store`] split it, so the binary can refuse a bad database before it listens.

mod bearer;
pub mod config;
pub mod domain;
pub mod grpc;
pub mod metrics;
pub mod peer;
pub mod readiness;
mod server;
mod tls_reload;
pub mod web;

pub use server::{Config, HEALTH_SERVICES, ServeError, Storage, open_store, run, run_with_store};
pub use tls_reload::{TlsError, TlsIdentity, TlsReload};
