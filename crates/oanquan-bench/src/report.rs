//! Figures of one measurement, as a table row and as JSON.

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::load::LoadStats;
use crate::pg::PgFigures;
use crate::procs::ProcSample;

/// Latency quantiles, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Quantiles {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

impl Quantiles {
    /// The quantiles of a histogram in µs.
    #[must_use]
    pub fn of(histogram: &Histogram<u64>) -> Quantiles {
        if histogram.is_empty() {
            return Quantiles::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Quantiles {
            count: histogram.len(),
            p50: ms(histogram.value_at_quantile(0.5)),
            p99: ms(histogram.value_at_quantile(0.99)),
            p999: ms(histogram.value_at_quantile(0.999)),
            max: ms(histogram.max()),
        }
    }
}

/// One measured point: a target (echo, memory or durable server) under one load.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Scenario name (`throughput`, `spectators`, `fanout`, ...).
    pub scenario: String,
    /// `echo`, `memory` or `durable`.
    pub target: String,
    /// Concurrent games (or echo callers).
    pub concurrency: usize,
    /// Spectators per game.
    pub spectators: usize,
    /// HTTP/2 connections the load used.
    pub connections: usize,
    /// Length of the window, seconds.
    pub window_s: f64,
    /// Moves (or echo calls) per second.
    pub ops_per_s: f64,
    /// Whole games finished.
    pub games_finished: u64,
    /// Call latency (PlayMove or Echo).
    pub latency_ms: Quantiles,
    /// CreateGame sent → first PlayMove acknowledged.
    pub create_to_first_move_ms: Quantiles,
    /// Each of those calls: CreateGame, JoinGame, the first PlayMove (echo: a round's calls).
    pub first_calls_ms: [Quantiles; 3],
    /// PlayMove acknowledged → every spectator has the event.
    pub delivery_ms: Quantiles,
    /// Moves some spectator never received.
    pub delivery_missing: u64,
    /// Failures.
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<String>,
    /// Mean encoded request size, bytes.
    pub request_bytes: usize,
    /// Mean encoded response size, bytes.
    pub response_bytes: usize,
    /// Server CPU in the window, in cores (1.0 = one core busy).
    pub server_cpu_cores: f64,
    /// Server CPU time in the window per call counted in it, µs.
    pub server_cpu_us_per_op: f64,
    /// Client (this process) CPU in the window, in cores.
    pub client_cpu_cores: f64,
    /// Server peak RSS (`VmHWM`), MiB; with several nodes, the largest node's.
    pub server_peak_rss_mib: f64,
    /// Server processes the load was spread over.
    pub nodes: usize,
    /// The PostgreSQL database's figures, for a PostgreSQL target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pg: Option<PgFigures>,
}

/// CPU at the start and the end of a measurement window.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// Server before and after.
    pub server: (ProcSample, ProcSample),
    /// Client before and after.
    pub client: (ProcSample, ProcSample),
    /// The window, seconds.
    pub wall_s: f64,
}

impl Point {
    /// A point from a run's stats and resource usage.
    #[must_use]
    pub fn new(
        scenario: &str,
        target: &str,
        (concurrency, spectators, connections): (usize, usize, usize),
        stats: &LoadStats,
        usage: &Usage,
    ) -> Point {
        let wall = usage.wall_s.max(1e-9);
        let server_cpu = usage.server.1.cpu_seconds - usage.server.0.cpu_seconds;
        let client_cpu = usage.client.1.cpu_seconds - usage.client.0.cpu_seconds;
        Point {
            scenario: scenario.to_owned(),
            target: target.to_owned(),
            concurrency,
            spectators,
            connections,
            window_s: stats.window.as_secs_f64(),
            ops_per_s: stats.ops_per_second(),
            games_finished: stats.games_finished,
            latency_ms: Quantiles::of(&stats.latency),
            create_to_first_move_ms: Quantiles::of(&stats.create_to_first_move),
            first_calls_ms: stats.first_calls.each_ref().map(Quantiles::of),
            delivery_ms: Quantiles::of(&stats.delivery),
            delivery_missing: stats.delivery_missing,
            errors: stats.errors,
            first_error: stats.first_error.clone(),
            request_bytes: stats.mean_request_bytes().unwrap_or(0),
            response_bytes: stats.mean_response_bytes().unwrap_or(0),
            server_cpu_cores: server_cpu / wall,
            server_cpu_us_per_op: if stats.ops > 0 {
                server_cpu * 1e6 / stats.ops as f64
            } else {
                0.0
            },
            client_cpu_cores: client_cpu / wall,
            server_peak_rss_mib: usage.server.1.hwm_kib as f64 / 1024.0,
            nodes: 1,
            pg: None,
        }
    }

    /// The header of [`Point::row`].
    #[must_use]
    pub fn header() -> String {
        format!(
            "{:<11} {:<8} {:>5} {:>5} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8} {:>7} {:>7} {:>7}  {}",
            "scenario",
            "target",
            "conc",
            "spect",
            "calls/s",
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "c→1st p99",
            "deliv p99",
            "srv cpu",
            "µs/call",
            "cli cpu",
            "RSS MiB",
            "errors",
            "note"
        )
    }

    /// One line of the human-readable table.
    #[must_use]
    pub fn row(&self) -> String {
        let dash = |q: &Quantiles| {
            if q.count == 0 {
                "-".to_owned()
            } else {
                format!("{:.2}", q.p99)
            }
        };
        format!(
            "{:<11} {:<8} {:>5} {:>5} {:>10.0} {:>8.2} {:>8.2} {:>8.2} {:>9} {:>9} {:>8.2} {:>8.1} {:>7.2} {:>7.1} {:>7}  {}",
            self.scenario,
            self.target,
            self.concurrency,
            self.spectators,
            self.ops_per_s,
            self.latency_ms.p50,
            self.latency_ms.p99,
            self.latency_ms.p999,
            dash(&self.create_to_first_move_ms),
            dash(&self.delivery_ms),
            self.server_cpu_cores,
            self.server_cpu_us_per_op,
            self.client_cpu_cores,
            self.server_peak_rss_mib,
            self.errors,
            self.first_error.as_deref().unwrap_or(""),
        )
    }
}
