//! The Ô Ăn Quan game server.
//!
//! * [`domain`]: games, seats, moves, events, tokens and storage in plain Rust types.
//! * [`grpc`]: thin tonic adapters (protobuf conversions at the edge, one status table).
//! * [`run`]: serves everything on a bound listener until a shutdown future resolves, like
//!   mini-redis, so tests bind `127.0.0.1:0` first and need no sleeps.

pub mod domain;
pub mod grpc;
mod server;

pub use server::{Config, HEALTH_SERVICES, ServeError, Storage, run};
