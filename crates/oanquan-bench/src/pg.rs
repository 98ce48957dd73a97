//! Server nodes on one PostgreSQL database: a fresh schema for each measurement (dropped after
//! it), and the database's own counters read around a run (transactions, WAL, rows written).
//!
//! Every node of a measurement connects with `search_path` set to the schema, so a run starts
//! on empty tables and never sees another run's games, and with `application_name` set to the
//! schema's name, so that the bench can tell when the nodes' sessions have ended: PostgreSQL
//! publishes a session's statistics at the latest when it ends, and whole-run figures are read
//! only after that.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;
use tokio_postgres::NoTls;

/// A schema of its own on a PostgreSQL database, dropped by [`PgSchema::drop`].
#[derive(Debug)]
pub struct PgSchema {
    client: tokio_postgres::Client,
    name: String,
    url: String,
}

/// The database's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PgCounters {
    /// `pg_stat_database.xact_commit` of the database (every session's, not only ours).
    pub xact_commit: i64,
    /// `pg_current_wal_lsn()` as bytes (the whole cluster's WAL).
    pub wal_bytes: f64,
    /// Rows inserted, updated and deleted in the schema's tables (`pg_stat_user_tables`).
    pub rows_written: i64,
    /// Rows of the schema's `moves` table: every move played so far.
    pub moves: i64,
}

impl PgSchema {
    /// Creates a schema `oq_bench_<random>` on the database of `url` (a `postgres://` URL
    /// without `options` or `application_name`).
    ///
    /// # Errors
    ///
    /// If the database cannot be reached or the schema cannot be made.
    pub async fn create(url: &str) -> anyhow::Result<PgSchema> {
        let (client, connection) = tokio_postgres::connect(url, NoTls)
            .await
            .context("connecting to the --database PostgreSQL")?;
        tokio::spawn(connection);
        let name = format!("oq_bench_{:016x}", rand::random::<u64>());
        client
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .await
            .with_context(|| format!("CREATE SCHEMA {name}"))?;
        let separator = if url.contains('?') { '&' } else { '?' };
        let url = format!("{url}{separator}options=-csearch_path%3D{name}&application_name={name}");
        Ok(PgSchema { client, name, url })
    }

    /// The URL the nodes connect with (the schema as their `search_path`).
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The counters now. Before the nodes have made the tables, `moves` and `rows_written`
    /// are 0.
    ///
    /// # Errors
    ///
    /// If a query fails.
    pub async fn counters(&self) -> anyhow::Result<PgCounters> {
        // The statistics snapshot of this session would otherwise stay what it first read.
        self.client
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .await?;
        let row = self
            .client
            .query_one(
                "SELECT (SELECT xact_commit FROM pg_stat_database
                          WHERE datname = current_database()),
                        pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8,
                        (SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint
                           FROM pg_stat_user_tables WHERE schemaname = $1),
                        to_regclass($2) IS NOT NULL",
                &[&self.name, &format!("{}.moves", self.name)],
            )
            .await
            .context("reading pg_stat_database")?;
        let moves = if row.get::<_, bool>(3) {
            self.client
                .query_one(&format!("SELECT count(*) FROM {}.moves", self.name), &[])
                .await?
                .get(0)
        } else {
            0
        };
        Ok(PgCounters {
            xact_commit: row.get(0),
            wal_bytes: row.get(1),
            rows_written: row.get(2),
            moves,
        })
    }

    /// Waits (at most 10 s) until no session of the nodes is left, so that their statistics
    /// are all published. False if some remain.
    ///
    /// # Errors
    ///
    /// If a query fails.
    pub async fn wait_for_sessions_to_end(&self) -> anyhow::Result<bool> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left: i64 = self
                .client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                    &[&self.name],
                )
                .await?
                .get(0);
            if left == 0 {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Drops the schema and everything in it.
    ///
    /// # Errors
    ///
    /// If the statement fails.
    pub async fn drop(self) -> anyhow::Result<()> {
        self.client
            .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name))
            .await
            .with_context(|| format!("DROP SCHEMA {}", self.name))
    }
}

/// What the database did for one run, from counters read before the nodes started and after
/// their sessions ended (whole run), and around the measurement window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PgFigures {
    /// Server nodes on the database.
    pub nodes: usize,
    /// Moves played in the whole run (warm-up and unfinished games included).
    pub moves: i64,
    /// Transactions committed per move in the whole run (every session of the database).
    pub xacts_per_move: f64,
    /// WAL bytes per move in the whole run (the whole cluster's WAL).
    pub wal_bytes_per_move: f64,
    /// Rows inserted, updated or deleted per move in the whole run (the schema's tables).
    pub rows_per_move: f64,
    /// Transactions committed per second in the window (`xact_commit` delta; sessions publish
    /// their counts about once a second, so a short window is rough).
    pub commits_per_s: f64,
    /// WAL bytes per second in the window.
    pub wal_bytes_per_s: f64,
    /// CPU of every `postgres` process in the window, in cores.
    pub db_cpu_cores: f64,
}

impl PgFigures {
    /// Figures from the counters before the run, at the window's start and end, and after the
    /// run; `db_cpu_seconds` is the database's CPU in the window.
    #[must_use]
    pub fn new(
        nodes: usize,
        [before, start, end, after]: [PgCounters; 4],
        window_s: f64,
        db_cpu_seconds: f64,
    ) -> PgFigures {
        let moves = after.moves - before.moves;
        let per_move = |delta: f64| {
            if moves > 0 { delta / moves as f64 } else { 0.0 }
        };
        let window = window_s.max(1e-9);
        PgFigures {
            nodes,
            moves,
            xacts_per_move: per_move((after.xact_commit - before.xact_commit) as f64),
            wal_bytes_per_move: per_move(after.wal_bytes - before.wal_bytes),
            rows_per_move: per_move((after.rows_written - before.rows_written) as f64),
            commits_per_s: (end.xact_commit - start.xact_commit) as f64 / window,
            wal_bytes_per_s: (end.wal_bytes - start.wal_bytes) / window,
            db_cpu_cores: db_cpu_seconds / window,
        }
    }
}
