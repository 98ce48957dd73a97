//! The game domain as the server's adapters name it: [`oanquan_game`], the SQLite store of
//! [`oanquan_store_sqlite`] and the PostgreSQL store of [`oanquan_store_postgres`], under one path so that the adapters, `main` and the tests say
//! `domain::X` whichever crate `X` lives in.

pub use oanquan_game::*;
pub use oanquan_store_postgres::{
    OpenError as PostgresOpenError, PostgresOptions, PostgresStore, is_postgres_url,
};
pub use oanquan_store_sqlite::{
    APPLICATION_ID, BackupError, BackupReport, MAX_BATCH, OpenError, SCHEMA_VERSION, SqliteStore,
    backup,
};
