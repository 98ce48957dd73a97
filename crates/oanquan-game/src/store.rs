//! The storage seam: where games and their event logs live.
//!
//! Every method is one atomic unit, so that a SQLite backend maps each to a transaction and a
//! PostgreSQL one to a transaction plus `NOTIFY`. Events get their sequence numbers inside the
//! store, in the same unit that writes the new state, so that a state and the events leading to
//! it can never disagree.
//!
//! Methods return boxed `Send` futures (rather than `async fn` in the trait) so that the trait
//! stays object-safe: the server holds an `Arc<dyn GameStore>` chosen at startup.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::SystemTime;

use futures::future::BoxFuture;
use tokio::sync::watch;

use crate::account::{Account, AccountId, AccountUpdate, ApiKeyRecord};
use crate::model::{
    GameEvent, GameEventKind, GameFilter, GameId, GameInfo, GameState, LobbyEvent, LobbyEventKind,
};
use crate::rating::Speed;

/// A store's boxed future.
pub type StoreFuture<'a, T> = BoxFuture<'a, Result<T, StoreError>>;

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No such game.
    #[error("no such game")]
    NotFound,
    /// Optimistic concurrency: the game changed since it was loaded. Reload and retry.
    #[error("the game changed concurrently (now at sequence {current})")]
    Conflict {
        /// The game's sequence now.
        current: u64,
    },
    /// A page cursor this store did not issue (or issued for another filter).
    #[error("bad page cursor")]
    BadCursor,
    /// A capacity limit of the store.
    #[error("{0}")]
    Full(String),
    /// One game's stored data does not decode (a damaged row, or a form this build cannot
    /// read). Only that game is affected: listings and the lobby skip it.
    #[error("game {id} is damaged in the store: {detail}")]
    Damaged {
        /// The game.
        id: GameId,
        /// What does not decode.
        detail: String,
    },
    /// The store cannot write (or read) right now: a full disk, a read-only file, an I/O error.
    /// Nothing was changed; the same request may succeed later.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The backend failed otherwise (a bug, a broken invariant).
    #[error("storage backend: {0}")]
    Backend(String),
    /// The stored data is damaged where the call read: a broken page or an index that no
    /// longer agrees with its table (found by the backend itself), or an account row that does
    /// not decode. A read for one game reports [`StoreError::Damaged`] for that game instead,
    /// so that its calls answer as for any damaged game.
    #[error("the stored data is damaged: {0}")]
    DamagedData(String),
    /// A unique value is taken (a username, by its key).
    #[error("already exists")]
    AlreadyExists,
}

/// A state change to write atomically.
#[derive(Debug, Clone)]
pub struct Commit {
    /// The new state. The store stamps it with the sequence of the last event written
    /// ([`GameState::set_sequence`]).
    pub state: GameState,
    /// The sequence the state was loaded at (0 to create): the write fails with
    /// [`StoreError::Conflict`] if the stored game is elsewhere. This is stricter than checking
    /// the ply alone: joins, resignations and aborts change a game without changing its ply.
    pub expected_sequence: u64,
    /// Events of this game, numbered from `expected_sequence + 1`.
    pub game_events: Vec<GameEventKind>,
    /// Lobby events, numbered after the server's last one.
    pub lobby_events: Vec<LobbyEventKind>,
    /// Time stamp of every event.
    pub time: SystemTime,
    /// Accounts changed with the game (ratings and results of a game that ended), written in
    /// the same unit; the write fails with [`StoreError::Conflict`] if one of them is no longer
    /// at its `expected_version`.
    pub accounts: Vec<AccountUpdate>,
}

/// What a commit wrote, with sequence numbers, ready to publish.
#[derive(Debug, Clone)]
pub struct Committed {
    /// The state as stored.
    pub info: GameInfo,
    /// The numbered game events.
    pub game_events: Vec<Arc<GameEvent>>,
    /// The numbered lobby events.
    pub lobby_events: Vec<Arc<LobbyEvent>>,
}

/// The events after a sequence number.
#[derive(Debug, Clone)]
pub enum Since<E> {
    /// All of them, in order (possibly none).
    Events {
        /// The events.
        events: Vec<Arc<E>>,
        /// No event will ever follow (the game is over).
        done: bool,
    },
    /// Some were dropped from the log: the reader needs a snapshot.
    Gone,
    /// The sequence asked for is beyond the last event.
    Ahead {
        /// The last sequence there is.
        last: u64,
    },
}

/// Which of a player's games a listing returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlayerGameFilter {
    /// Only games the player won, drew or lost (finished games only).
    pub result: Option<PlayerResult>,
    /// Only games of this speed.
    pub speed: Option<Speed>,
}

/// A game's result from one player's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlayerResult {
    /// The player won.
    Win,
    /// A draw.
    Draw,
    /// The player lost.
    Loss,
}

impl PlayerGameFilter {
    /// A short stable name, used inside page cursors.
    #[must_use]
    pub fn name(self) -> String {
        let result = match self.result {
            None => "any",
            Some(PlayerResult::Win) => "win",
            Some(PlayerResult::Draw) => "draw",
            Some(PlayerResult::Loss) => "loss",
        };
        let speed = self.speed.map_or("any", Speed::name);
        format!("{result}-{speed}")
    }

    /// Whether `game`, in which `account` holds a seat, passes.
    #[must_use]
    pub fn accepts(self, game: &GameInfo, account: &AccountId) -> bool {
        if let Some(speed) = self.speed
            && Speed::of(game.time_control) != Some(speed)
        {
            return false;
        }
        let Some(wanted) = self.result else {
            return true;
        };
        let seat = crate::model::seat_of_account(game, account);
        let outcome = game.result.and_then(|r| r.outcome);
        match (seat, outcome) {
            (Some(seat), Some(outcome)) => {
                let result = match outcome.winner() {
                    None => PlayerResult::Draw,
                    Some(winner) if winner == seat => PlayerResult::Win,
                    Some(_) => PlayerResult::Loss,
                };
                result == wanted
            }
            _ => false,
        }
    }
}

/// One rated player on a leaderboard.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// The account.
    pub account: Account,
    /// 1 for the best.
    pub rank: u64,
}

/// One page of a leaderboard.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderboardPage {
    /// Best first.
    pub players: Vec<Ranked>,
    /// Opaque cursor for the next page, if there is one.
    pub next_cursor: Option<String>,
}

/// One page of a listing.
#[derive(Debug, Clone)]
pub struct Page {
    /// Newest first.
    pub games: Vec<GameInfo>,
    /// Opaque cursor for the next page, if there is one.
    pub next_cursor: Option<String>,
}

/// Where games live. See the module docs.
///
/// Two backends exist: [`MemoryStore`](crate::MemoryStore) and
/// `oanquan_store_sqlite::SqliteStore` (one file, one server, group commit). The seam is shaped
/// for a PostgreSQL backend shared by many server nodes:
///
/// * **Transactions.** Each method is one transaction. `create`/`commit` run
///   `UPDATE games SET … WHERE id = $1 AND sequence = $expected` (zero rows: `Conflict`), insert
///   the events with their sequence numbers, and take lobby numbers from a counter row locked
///   in the same transaction (or a sequence plus a gap-tolerant reader). Reads run at
///   `REPEATABLE READ` so a snapshot and its sequence agree.
/// * **Optimistic concurrency.** `expected_sequence` is the only lock across nodes: the
///   manager reloads and retries on `Conflict`, so no node needs to own a game.
/// * **Change notifications.** Each commit sends `NOTIFY oanquan_game, '<id>:<sequence>'` (and
///   `oanquan_lobby`) inside its transaction, so it is delivered only if it commits. Every
///   node `LISTEN`s and feeds its [`Hub`](crate::Hub) from the log
///   ([`GameStore::game_events_since`]); watchers already fall back to the log on any gap, so
///   a lost notification delays an event but never loses it.
/// * **Durability** is the database's: acknowledge after `COMMIT` with `synchronous_commit = on`.
pub trait GameStore: Send + Sync + fmt::Debug + 'static {
    /// Creates a game (`commit.expected_sequence` is 0).
    ///
    /// # Errors
    ///
    /// [`StoreError::Full`] at capacity, [`StoreError::Conflict`] if the id exists.
    fn create(&self, commit: Commit) -> StoreFuture<'_, Committed>;

    /// Replaces a game's state and appends its events, if the game is still at
    /// `commit.expected_sequence`.
    ///
    /// # Errors
    ///
    /// [`StoreError::Conflict`] if it moved on, [`StoreError::NotFound`].
    fn commit(&self, commit: Commit) -> StoreFuture<'_, Committed>;

    /// Loads a whole game.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`].
    fn load<'a>(&'a self, id: &'a GameId) -> StoreFuture<'a, GameState>;

    /// Loads a game's public data only (cheaper than [`GameStore::load`]).
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`].
    fn info<'a>(&'a self, id: &'a GameId) -> StoreFuture<'a, GameInfo>;

    /// Lists games newest first, `limit` at a time, resuming after `cursor`.
    ///
    /// # Errors
    ///
    /// [`StoreError::BadCursor`].
    fn list<'a>(
        &'a self,
        filter: GameFilter,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> StoreFuture<'a, Page>;

    /// A game's events after sequence `after`.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`].
    fn game_events_since<'a>(
        &'a self,
        id: &'a GameId,
        after: u64,
    ) -> StoreFuture<'a, Since<GameEvent>>;

    /// Lobby events after sequence `after`.
    ///
    /// # Errors
    ///
    /// Backend failures only.
    fn lobby_events_since(&self, after: u64) -> StoreFuture<'_, Since<LobbyEvent>>;

    /// The waiting and active games, newest first (at most `limit` of each, so that many new
    /// waiting games cannot push the games being played out), and the lobby sequence this list
    /// reflects, read atomically.
    ///
    /// # Errors
    ///
    /// Backend failures only.
    fn lobby_snapshot(&self, limit: usize) -> StoreFuture<'_, (Vec<GameInfo>, u64)>;

    /// Every waiting or active game whose creator's address is known, with that address: a
    /// restarted server counts them again towards each client's open games.
    ///
    /// # Errors
    ///
    /// Backend failures only.
    fn open_games_by_creator(&self) -> StoreFuture<'_, Vec<(GameId, IpAddr)>>;

    /// When the server that used this store before this process was last known alive, for a
    /// store that outlives its server: a restart charges the turns that were running up to that
    /// moment, and only the outage after it goes uncharged (see
    /// [`crate::transition::resume_clock`]). `None` when unknown: the running turns start again.
    fn last_alive(&self) -> Option<SystemTime> {
        None
    }

    /// The server has resumed the running turns ([`crate::timekeeper::resume_clocks`]): from
    /// now on the store's signs of life mark time that turns ran. A store that keeps them keeps
    /// the last server's until then, so that a start killed before its resume does not pass for
    /// time the turns ran, and the next start gives the whole outage back.
    fn turns_resumed(&self) {}

    /// Whether the store can write now: `true` while writes succeed, `false` from a write that
    /// failed for a lasting reason (full disk, read-only file, I/O error) until one succeeds
    /// again. `None` for a store that cannot fail that way. The server's health follows it.
    fn writable(&self) -> Option<watch::Receiver<bool>> {
        None
    }

    /// Registers an account with its first API key.
    ///
    /// # Errors
    ///
    /// [`StoreError::AlreadyExists`] if an account has the same username key
    /// ([`Username::key`](crate::username::Username::key)), or a key has the same id (a key
    /// its owner chose, [`ApiKey::chosen`](crate::ApiKey::chosen)).
    fn create_account(&self, account: Account, key: ApiKeyRecord) -> StoreFuture<'_, ()>;

    /// An account by id.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`].
    fn account<'a>(&'a self, id: &'a AccountId) -> StoreFuture<'a, Account>;

    /// The account whose username key or look ([`Username::key`](crate::Username::key),
    /// [`Username::look`](crate::Username::look)) is `key`: registration keeps both apart from
    /// every other account's, so there is at most one. A display name meets an account by
    /// either (an outside probe sat as `Nίκος`, a Latin N in the Greek `Νίκος`, whose look
    /// alone it matched).
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`].
    fn account_by_name<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Account>;

    /// The account that owns API key `key_id`, and the key's record (revoked or not).
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`].
    fn account_by_api_key<'a>(
        &'a self,
        key_id: &'a str,
    ) -> StoreFuture<'a, (Account, ApiKeyRecord)>;

    /// Adds an API key to an account.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`] for an unknown account, [`StoreError::Full`] past the store's
    /// keys per account.
    fn add_api_key<'a>(&'a self, id: &'a AccountId, key: ApiKeyRecord) -> StoreFuture<'a, ()>;

    /// Revokes an account's key at `now` (a key already revoked keeps its time). `false` if the
    /// account has no such key.
    ///
    /// # Errors
    ///
    /// Backend failures only.
    fn revoke_api_key<'a>(
        &'a self,
        id: &'a AccountId,
        key_id: &'a str,
        now: SystemTime,
    ) -> StoreFuture<'a, bool>;

    /// An account's keys, oldest first.
    ///
    /// # Errors
    ///
    /// Backend failures only.
    fn api_keys<'a>(&'a self, id: &'a AccountId) -> StoreFuture<'a, Vec<ApiKeyRecord>>;

    /// The accounts with a rating at `speed` that is not provisional, best first, `limit` at a
    /// time, resuming after `cursor`.
    ///
    /// # Errors
    ///
    /// [`StoreError::BadCursor`].
    fn leaderboard<'a>(
        &'a self,
        speed: Speed,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> StoreFuture<'a, LeaderboardPage>;

    /// The games in which `id` holds a seat, newest first, `limit` at a time.
    ///
    /// # Errors
    ///
    /// [`StoreError::BadCursor`].
    fn player_games<'a>(
        &'a self,
        id: &'a AccountId,
        filter: PlayerGameFilter,
        limit: usize,
        cursor: Option<&'a str>,
    ) -> StoreFuture<'a, Page>;

    /// Finishes the queued writes and closes the store for good: for SQLite, folds the
    /// write-ahead log into the database file and removes it. Later calls fail with
    /// [`StoreError::Unavailable`]. Called once the server has drained; idempotent.
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// The store itself, for a server that wires a backend's own work to the store it was
    /// given (the PostgreSQL store's listener and leader lease). `None` unless a store offers
    /// such work.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// A page cursor: the filter's name and a position in the store's listing order, so that a
/// cursor issued for one filter is refused for another. Opaque to clients; shared by the
/// stores so that both accept and refuse the same texts.
pub fn page_cursor(filter: GameFilter, position: u64) -> String {
    format!("{}.{position}", filter.name())
}

/// Where a leaderboard page ended: its last player's place in the listing's order (rating
/// best first, ties by account id), and how many players the pages so far held, to rank the
/// next. The next page starts after that place, not after a count of players: a rating that
/// changes between two pages moves only its own player, where an offset would shift everyone
/// after it, repeating or skipping players who did not change.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderboardAfter {
    /// The last player's rating, exactly as stored.
    pub rating: f64,
    /// The last player's account.
    pub account: AccountId,
    /// Players listed before the next page.
    pub listed: u64,
}

impl LeaderboardAfter {
    /// Whether this place comes before a player with `rating` and `account` in the listing,
    /// so that the player belongs on the next pages.
    #[must_use]
    pub fn is_before(&self, rating: f64, account: &AccountId) -> bool {
        self.rating
            .total_cmp(&rating)
            .then_with(|| account.cmp(&self.account))
            .is_gt()
    }
}

/// The most players a leaderboard cursor may say were listed before it.
const MAX_LISTED: u64 = 1_000_000_000_000;

/// A leaderboard cursor: the speed and [`LeaderboardAfter`], as
/// `top-<speed>.<listed>.<rating's bits in hex>.<account id>`. Shared by the stores so that
/// all accept and refuse the same texts.
#[must_use]
pub fn leaderboard_cursor(speed: Speed, after: &LeaderboardAfter) -> String {
    format!(
        "top-{}.{}.{:016x}.{}",
        speed.name(),
        after.listed,
        after.rating.to_bits(),
        after.account
    )
}

/// The place in a cursor made by [`leaderboard_cursor`] for the same speed.
///
/// # Errors
///
/// [`StoreError::BadCursor`] for any other text.
pub fn leaderboard_after(speed: Speed, cursor: &str) -> Result<LeaderboardAfter, StoreError> {
    let (named, account) = cursor.rsplit_once('.').ok_or(StoreError::BadCursor)?;
    let (named, bits) = named.rsplit_once('.').ok_or(StoreError::BadCursor)?;
    let listed = parse_named_cursor(&format!("top-{}", speed.name()), named)?;
    // No leaderboard holds a trillion players: a larger count is forged, and ranks counted
    // on from near u64::MAX wrapped to 0 (an outside probe's token).
    if listed > MAX_LISTED {
        return Err(StoreError::BadCursor);
    }
    // Only what a page issued: sixteen lower-case hex digits of a finite rating, and an id
    // in the alphabet ids are made of.
    let canonical_bits = bits.len() == 16
        && bits
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let rating = u64::from_str_radix(bits, 16)
        .ok()
        .filter(|_| canonical_bits)
        .map(f64::from_bits)
        .filter(|r| r.is_finite())
        .ok_or(StoreError::BadCursor)?;
    let id_like = !account.is_empty()
        && account.len() <= 64
        && account
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !id_like {
        return Err(StoreError::BadCursor);
    }
    Ok(LeaderboardAfter {
        rating,
        account: AccountId::from_stored(account.to_owned()),
        listed,
    })
}

/// The position in a cursor `<name>.<position>` (a player's games: `player-<filter>`).
///
/// # Errors
///
/// [`StoreError::BadCursor`] for a cursor of another name or a bad position.
pub fn parse_named_cursor(name: &str, cursor: &str) -> Result<u64, StoreError> {
    let (prefix, position) = cursor.split_once('.').ok_or(StoreError::BadCursor)?;
    if prefix != name || !canonical_number(position) {
        return Err(StoreError::BadCursor);
    }
    position.parse().map_err(|_| StoreError::BadCursor)
}

/// Whether `text` is a number as a cursor writes it: digits only, no sign, no leading zero.
/// Only the text a listing issued is one of its cursors (`top-blitz.+2` and `.02` are not).
fn canonical_number(text: &str) -> bool {
    !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'))
}

/// The position in a cursor made by [`page_cursor`] for the same filter.
///
/// # Errors
///
/// [`StoreError::BadCursor`] for any other text.
pub fn parse_page_cursor(filter: GameFilter, cursor: &str) -> Result<u64, StoreError> {
    let (name, position) = cursor.split_once('.').ok_or(StoreError::BadCursor)?;
    if name != filter.name() || !canonical_number(position) {
        return Err(StoreError::BadCursor);
    }
    position.parse().map_err(|_| StoreError::BadCursor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_bound_to_their_filter() {
        assert_eq!(
            parse_page_cursor(GameFilter::Open, &page_cursor(GameFilter::Open, 7)),
            Ok(7)
        );
        assert_eq!(
            parse_page_cursor(GameFilter::All, &page_cursor(GameFilter::Open, 7)),
            Err(StoreError::BadCursor)
        );
        for junk in ["junk", "all.-1", "all.", "all.7x", ".7"] {
            assert_eq!(
                parse_page_cursor(GameFilter::All, junk),
                Err(StoreError::BadCursor),
                "{junk}"
            );
        }
    }
}
