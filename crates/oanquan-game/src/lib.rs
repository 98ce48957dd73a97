//! The Ô Ăn Quan game service in plain Rust types: no protobuf, no tonic, no SQL.
//!
//! * [`GameManager`] runs every command and query against a [`GameStore`] and publishes what it
//!   commits to the [`Hub`], which [`Watch`]es read: load → decide → commit → publish, where
//!   deciding is a pure function of [`transition`] (state, command, now → new state and events).
//! * Background agents are clients of the manager: the computer player
//!   ([`computer::spawn_driver`]) is woken by the hub's feed of commits, the idle reaper
//!   ([`reaper::spawn_idle_reaper`]) by a timer. The manager never calls into them.
//! * [`MemoryStore`] keeps games in memory; the SQLite store lives in `oanquan-store-sqlite`.

pub mod account;
#[cfg(test)]
mod account_tests;
pub mod clock;
pub mod computer;
pub mod damage;
mod error;
#[cfg(test)]
mod faulty_store;
mod hub;
mod id;
pub mod limits;
mod manager;
mod memory;
mod model;
mod names;
#[cfg(test)]
mod online_tests;
pub mod outage;
pub mod rating;
pub mod reaper;
pub mod registration;
pub mod seek;
pub mod service_clock;
mod store;
#[cfg(any(test, feature = "store-suite"))]
pub mod store_suite;
mod text;
pub mod timekeeper;
#[cfg(test)]
mod timekeeper_tests;
pub mod timing;
mod token;
pub mod transition;
pub mod username;
pub mod walkaway;
mod watch;

pub use clock::{ClockReading, TimeControl, TimePolicy};
pub use error::{GameError, KEY_ID_TAKEN};
pub use hub::{COMMIT_FEED_CAPACITY, Hub, TooManyWatchers, WatchLimits, Watcher, WatcherGuard};
pub use manager::{
    CommitObserver, Credential, DEFAULT_MAX_STREAMS_PER_SEAT, DEFAULT_PAGE_SIZE, GameManager,
    MAX_PAGE_SIZE, ManagerLimits, NewGame, PairedGame, Registered, RematchOffered, Seated,
    seat_account,
};
pub use memory::{MemoryLimits, MemoryStore};
pub use model::{
    DrawAction, GameEvent, GameEventKind, GameFilter, GameId, GameIdError, GameInfo, GameResult,
    GameState, GameStatus, LobbyEvent, LobbyEventKind, MoveLog, MoveRecord, PlayedMove, PlayerKind,
    RematchAction, RestoreError, SeatInfo, Termination,
};
pub use store::{
    Commit, Committed, GameStore, LeaderboardAfter, LeaderboardPage, Page, PlayerGameFilter,
    PlayerResult, Ranked, Since, StoreError, StoreFuture, leaderboard_after, leaderboard_cursor,
    page_cursor, parse_named_cursor, parse_page_cursor,
};
pub use text::{MAX_DISPLAY_NAME_CHARS, MAX_QUOTED_CHARS, display_name, is_invisible, quoted};
pub use token::{PlayerToken, TokenHash};
pub use username::{Username, UsernameError};
pub use watch::{Feed, GameFeed, LobbyFeed, Sequenced, Watch, WatchItem};
