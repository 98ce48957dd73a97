//! The game service in plain Rust types: no protobuf, no tonic.
//!
//! * [`GameManager`] runs every command and query against a [`GameStore`] and publishes what it
//!   commits to the [`Hub`], which [`Watch`]es read.
//! * [`MemoryStore`] keeps games in memory; [`SqliteStore`] keeps them durably in one file.

pub mod computer;
mod error;
mod hub;
pub mod limits;
mod manager;
mod memory;
mod model;
mod sqlite;
mod store;
mod text;
mod token;
mod watch;

pub use error::GameError;
pub use hub::{Hub, TooManyWatchers, WatchLimits, Watcher, WatcherGuard};
pub use manager::{
    DEFAULT_MAX_STREAMS_PER_SEAT, DEFAULT_PAGE_SIZE, GameManager, MAX_PAGE_SIZE, ManagerLimits,
    NewGame, Seated,
};
pub use memory::{MemoryLimits, MemoryStore};
pub use model::{
    GameEvent, GameEventKind, GameFilter, GameId, GameIdError, GameInfo, GameResult, GameState,
    GameStatus, LobbyEvent, LobbyEventKind, MoveLog, MoveRecord, PlayerKind, SeatInfo, Termination,
};
pub use sqlite::{
    APPLICATION_ID, BackupError, BackupReport, MAX_BATCH, OpenError, SCHEMA_VERSION, SqliteStore,
    backup,
};
pub use store::{Commit, Committed, GameStore, Page, Since, StoreError, StoreFuture};
pub use text::{MAX_DISPLAY_NAME_CHARS, MAX_QUOTED_CHARS, display_name, quoted};
pub use token::{PlayerToken, TokenHash};
pub use watch::{Feed, GameFeed, LobbyFeed, Sequenced, Watch, WatchItem};
