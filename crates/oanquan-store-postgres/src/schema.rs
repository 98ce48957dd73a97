//! The tables, their migrations, and opening a database: connect, lock, check, migrate.
//!
//! Our tables are recognised by `oanquan_schema`, whose one row holds the schema version: the
//! number of [`MIGRATIONS`] applied. Every migration runs in one transaction holding an
//! advisory lock, so that nodes starting at once migrate one after the other (the second finds
//! the work done), and a database is never half migrated.
//!
//! The tables hold what the SQLite store's tables hold at its schema version 4, with
//! PostgreSQL's types: `BIGINT` nanoseconds since the Unix epoch for times, `BYTEA` for
//! hashes, and `TEXT` for the JSON of the shared codec (`codec`), stored exactly as written
//! (see the crate docs for why not `JSONB`). Version 2 adds what only several nodes need: the
//! open seeks they share and their heartbeats (see `seeks`).

use std::fmt;

use deadpool_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::fault::describe;

/// Migration `i` takes a database from schema version `i` to `i + 1`. Append only: a released
/// migration never changes.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: games, moves, both event logs, accounts, ratings, API keys, and which games each
    // account plays: the SQLite schema version 4.
    r#"
    CREATE TABLE games (
        ord                  BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- listing order
        id                   TEXT    NOT NULL UNIQUE,
        status               TEXT    NOT NULL,   -- waiting | active | finished | aborted
        sequence             BIGINT  NOT NULL,   -- sequence of the game's last event
        move_count           INTEGER NOT NULL,
        token_first          BYTEA,              -- SHA-256 of the seat's token, never the token
        token_second         BYTEA,
        rematch_token_first  BYTEA,              -- SHA-256, NULL until offered
        rematch_token_second BYTEA,
        creator              TEXT,               -- IP address (IPv6 as its /64), NULL if unknown
        info                 TEXT    NOT NULL    -- JSON, see codec::InfoDto
    );
    CREATE INDEX games_by_status ON games (status, ord);

    CREATE TABLE moves (
        game   BIGINT  NOT NULL REFERENCES games (ord),
        number INTEGER NOT NULL,                 -- 1-based
        player TEXT    NOT NULL,                 -- first | second
        mv     TEXT    NOT NULL,                 -- notation: 3-, 10+
        time   BIGINT  NOT NULL,                 -- nanoseconds since the Unix epoch
        PRIMARY KEY (game, number)
    );

    CREATE TABLE game_events (
        game     BIGINT NOT NULL REFERENCES games (ord),
        sequence BIGINT NOT NULL,                -- 1, 2, 3, ... per game
        time     BIGINT NOT NULL,
        event    TEXT   NOT NULL,                -- JSON, see codec::GameEventDto
        PRIMARY KEY (game, sequence)
    );

    CREATE TABLE lobby_events (
        sequence BIGINT PRIMARY KEY,             -- 1, 2, 3, ... for every node together
        time     BIGINT NOT NULL,
        event    TEXT   NOT NULL                 -- JSON, see codec::LobbyEventDto
    );
    -- The last lobby sequence: one row, locked by each commit that numbers lobby events, so
    -- that they are numbered in commit order without gaps.
    CREATE TABLE lobby_counter (
        last BIGINT NOT NULL
    );
    INSERT INTO lobby_counter (last) VALUES (0);

    CREATE TABLE accounts (
        id           TEXT    PRIMARY KEY,
        username     TEXT    NOT NULL,           -- as registered
        username_key TEXT    NOT NULL UNIQUE,    -- Username::key: one account per name, any case
        created      BIGINT  NOT NULL,
        wins         BIGINT  NOT NULL,
        draws        BIGINT  NOT NULL,
        losses       BIGINT  NOT NULL,
        version      BIGINT  NOT NULL            -- bumped by every change (optimistic concurrency)
    );

    CREATE TABLE ratings (
        account     TEXT             NOT NULL REFERENCES accounts (id),
        speed       TEXT             NOT NULL,   -- bullet | blitz | rapid | classical | correspondence
        rating      DOUBLE PRECISION NOT NULL,   -- Glicko-2, exactly as computed
        deviation   DOUBLE PRECISION NOT NULL,
        volatility  DOUBLE PRECISION NOT NULL,
        games       BIGINT           NOT NULL,   -- rated games at this speed
        provisional BOOLEAN          NOT NULL,   -- Rating::is_provisional, as written
        PRIMARY KEY (account, speed)
    );
    -- The leaderboard: one range of one index, already in order (ties by id in byte order).
    CREATE INDEX ratings_leaderboard
        ON ratings (speed, provisional, rating DESC, account COLLATE "C");

    CREATE TABLE api_keys (
        ord     BIGINT GENERATED ALWAYS AS IDENTITY, -- insertion order: keys list oldest first
        id      TEXT   PRIMARY KEY,              -- the key's public id
        account TEXT   NOT NULL REFERENCES accounts (id),
        hash    BYTEA  NOT NULL,                 -- SHA-256 of the whole key, never the key
        created BIGINT NOT NULL,
        revoked BIGINT                           -- NULL while the key works
    );
    CREATE INDEX api_keys_by_account ON api_keys (account, ord);

    CREATE TABLE game_players (
        account TEXT   NOT NULL REFERENCES accounts (id),
        game    BIGINT NOT NULL REFERENCES games (ord),
        speed   TEXT,                            -- NULL for an untimed game
        result  TEXT,                            -- win | draw | loss once finished (not aborted)
        PRIMARY KEY (account, game)
    );
    "#,
    // 2: open seeks, shared by every node, and the nodes' heartbeats (see `seeks`).
    r#"
    CREATE TABLE seek_nodes (
        id   TEXT        PRIMARY KEY,           -- random, one per server process
        seen TIMESTAMPTZ NOT NULL               -- its last heartbeat, by the database's clock
    );

    CREATE TABLE seeks (
        ord      BIGINT GENERATED ALWAYS AS IDENTITY, -- oldest first
        id       TEXT   PRIMARY KEY,
        node     TEXT   NOT NULL,               -- the seeker's node, which answers its stream
        kind     TEXT   NOT NULL,               -- rules, time control, rated: only one kind pairs
        info     TEXT   NOT NULL,               -- JSON, see seeks::SeekDto
        token    BYTEA  NOT NULL,               -- SHA-256 of the seeker's seat token, never the token
        taken_by TEXT,                          -- the node pairing it; NULL while open
        taken_at TIMESTAMPTZ,
        game     TEXT,                          -- the game it led to, once created
        seat     TEXT,                          -- first | second: the seeker's seat in it
        failed   TEXT                           -- why the pairing failed
    );
    CREATE INDEX seeks_open ON seeks (kind, ord) WHERE taken_by IS NULL;
    "#,
    // 3: when a node stopped cleanly: with `seen`, when the last node was last alive, which a
    // restart after every node stopped charges running turns up to (`GameStore::last_alive`).
    r#"
    ALTER TABLE seek_nodes ADD COLUMN left_at TIMESTAMPTZ; -- NULL while it runs, or if killed
    "#,
    // 4: what each username looks like as written (`Username::look`), beside its key, so that a
    // name alike only in capitals is taken in either order. Filled in for older accounts by
    // `accounts::fill_looks` when a store connects, since SQL cannot compute it.
    r#"
    ALTER TABLE accounts ADD COLUMN username_look TEXT;
    CREATE INDEX accounts_by_look ON accounts (username_look);
    "#,
    // 5: whether a node holds its liveness lock (`seeks::NODE_KEY`): if it says so and the lock
    // is gone, it died, and its seeks are not paired even before its heartbeat is missed.
    // Nodes of older builds leave it false and are judged by their heartbeat alone.
    r#"
    ALTER TABLE seek_nodes ADD COLUMN locked BOOLEAN NOT NULL DEFAULT false;
    "#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// Why a PostgreSQL database cannot be used. Nothing was changed in any case, except a
/// migration that completed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL does not parse, or an option is out of range.
    #[error("{0}")]
    Config(String),
    /// The database cannot be reached, or refused the connection.
    #[error(
        "cannot connect to the PostgreSQL database {target}: {detail}. Check that it runs and \
         that the URL (--database, OANQUAN_DATABASE_URL) is right"
    )]
    Connect {
        /// Host, port, database and user (never the password).
        target: String,
        /// What failed.
        detail: String,
    },
    /// Written by a newer server.
    #[error(
        "the PostgreSQL database {target} has oanquan schema version {found}, written by a newer \
         oanquan-server (this one knows versions up to {SCHEMA_VERSION}). Nothing was changed. \
         Run a newer oanquan-server, or point --database at another database or schema"
    )]
    Newer {
        /// Host, port, database and user.
        target: String,
        /// Its schema version.
        found: i32,
    },
    /// Tables of another application where ours would go.
    #[error(
        "the PostgreSQL database {target} already has a table {table} that is not ours (no \
         oanquan_schema table). Nothing was changed. Use another database, or another schema \
         (?options=-csearch_path%3Dname in the URL)"
    )]
    Foreign {
        /// Host, port, database and user.
        target: String,
        /// One of the tables in the way.
        table: String,
    },
    /// A statement of the check or the migration failed.
    #[error("the PostgreSQL database {target}: {context}: {detail}")]
    Database {
        /// Host, port, database and user.
        target: String,
        /// What we were doing.
        context: &'static str,
        /// PostgreSQL's words.
        detail: String,
    },
}

/// Host, port, database and user of a configuration, for messages: never the password.
pub(crate) struct Target(pub(crate) String);

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Target {
    pub(crate) fn of(config: &tokio_postgres::Config) -> Target {
        let hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
            .map(|(host, port)| match host {
                tokio_postgres::config::Host::Tcp(host) => format!("{host}:{port}"),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(path) => format!("{}:{port}", path.display()),
            })
            .collect();
        Target(format!(
            "{}/{} (user {})",
            hosts.join(","),
            config.get_dbname().unwrap_or("(default)"),
            config.get_user().unwrap_or("(default)")
        ))
    }

    fn error(&self, context: &'static str) -> impl Fn(tokio_postgres::Error) -> OpenError + '_ {
        move |error| OpenError::Database {
            target: self.0.clone(),
            context,
            detail: describe(&error),
        }
    }
}

/// Our tables' names: where one exists without `oanquan_schema`, the schema is another
/// application's.
const TABLES: [&str; 12] = [
    "games",
    "moves",
    "game_events",
    "lobby_events",
    "lobby_counter",
    "accounts",
    "ratings",
    "api_keys",
    "game_players",
    "seek_nodes",
    "seeks",
    "oanquan_schema",
];

/// Key of the advisory lock that migrations take (with the schema's name hashed in), so that
/// stores of one schema migrate one at a time and stores of different schemas do not wait.
const MIGRATION_LOCK: i32 = 0x4F41_4E51; // "OANQ"

/// Checks the schema version and applies the missing migrations, in one transaction under the
/// advisory lock. Returns the version found.
pub(crate) async fn migrate(client: &mut Client, target: &Target) -> Result<i32, OpenError> {
    let tx = client
        .transaction()
        .await
        .map_err(target.error("starting the migration"))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))",
        &[&MIGRATION_LOCK],
    )
    .await
    .map_err(target.error("taking the migration lock"))?;
    let ours = tx
        .query_one("SELECT to_regclass('oanquan_schema') IS NOT NULL", &[])
        .await
        .map_err(target.error("looking for our tables"))?
        .get::<_, bool>(0);
    let found = if ours {
        tx.query_one("SELECT version FROM oanquan_schema", &[])
            .await
            .map_err(target.error("reading the schema version"))?
            .get::<_, i32>(0)
    } else {
        for table in TABLES {
            let taken = tx
                .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
                .await
                .map_err(target.error("looking for our tables"))?
                .get::<_, bool>(0);
            if taken {
                return Err(OpenError::Foreign {
                    target: target.0.clone(),
                    table: table.to_owned(),
                });
            }
        }
        0
    };
    if found > SCHEMA_VERSION {
        return Err(OpenError::Newer {
            target: target.0.clone(),
            found,
        });
    }
    // No server writes one; taken as a count of migrations it would skip them all.
    if found < 0 {
        return Err(OpenError::Database {
            target: target.0.clone(),
            context: "reading the schema version",
            detail: format!("version {found}, which no oanquan-server writes"),
        });
    }
    if found == SCHEMA_VERSION {
        // Nothing to write: the lock goes with the transaction.
        tx.rollback()
            .await
            .map_err(target.error("ending the check"))?;
        return Ok(found);
    }
    if !ours {
        tx.batch_execute("CREATE TABLE oanquan_schema (version INTEGER NOT NULL);")
            .await
            .map_err(target.error("creating the schema version table"))?;
        tx.execute("INSERT INTO oanquan_schema (version) VALUES (0)", &[])
            .await
            .map_err(target.error("recording the schema version"))?;
    }
    for (from, migration) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.batch_execute(migration)
            .await
            .map_err(target.error("applying a migration"))?;
        tx.execute(
            "UPDATE oanquan_schema SET version = $1",
            &[&(from as i32 + 1)],
        )
        .await
        .map_err(target.error("recording the schema version"))?;
    }
    tx.commit()
        .await
        .map_err(target.error("committing the migration"))?;
    if found == 0 {
        tracing::info!(database = %target, version = SCHEMA_VERSION, "database tables created");
    } else {
        tracing::info!(database = %target, from = found, to = SCHEMA_VERSION, "database migrated");
    }
    Ok(found)
}

/// Whether `error` is a unique violation of the constraint `constraint`.
pub(crate) fn violates(error: &tokio_postgres::Error, constraint: &str) -> bool {
    error.as_db_error().is_some_and(|db| {
        *db.code() == SqlState::UNIQUE_VIOLATION && db.constraint() == Some(constraint)
    })
}
