//! The game domain as the server's adapters name it: [`oanquan_game`] and the SQLite store of
//! [`oanquan_store_sqlite`], under one path so that the adapters, `main` and the tests say
//! `domain::X` whichever crate `X` lives in.

pub use oanquan_game::*;
pub use oanquan_store_sqlite::{
    APPLICATION_ID, BackupError, BackupReport, MAX_BATCH, OpenError, SCHEMA_VERSION, SqliteStore,
    backup,
};
