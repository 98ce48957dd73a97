//! Load benchmark of `oanquan-server`: moves per second, move latency, event delivery to
//! spectators, server CPU and memory, each measured against a bare tonic echo server
//! (`oanquan-echo-server`, built from this crate) driven by the same client in the same run.
//!
//! The binary `oanquan-bench` is the entry point (`cargo run --release -p oanquan-bench -- all`);
//! this library holds its parts so that the smoke test can drive them:
//!
//! * [`procs`]: start a server process, read its address, sample `/proc/<pid>` (CPU, RSS);
//! * [`load`]: the load client (games with spectators through the real API, echo calls);
//! * [`report`]: the figures of one measurement, as text and JSON;
//! * [`clocks`]: many timed games whose flags must fall on time, and the idle server's CPU;
//! * [`chart`]: the SVG chart (throughput and p99 against concurrency);
//! * [`pg`]: a fresh PostgreSQL schema per measurement for server nodes that share it, and the
//!   database's counters (transactions, WAL, rows) around a run.

pub mod chart;
pub mod clocks;
pub mod load;
pub mod pg;
pub mod procs;
pub mod report;

/// The baseline's protobuf API (`proto/oanquan/bench/v1/echo.proto`).
#[allow(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms,
    clippy::all,
    clippy::pedantic,
    clippy::nursery
)]
pub mod echo {
    tonic::include_proto!("oanquan.bench.v1");
}
