//! The game aggregate and its read views, in plain Rust types (no protobuf).

use std::fmt;
use std::time::SystemTime;

use oanquan_ai::Level;
use oanquan_rules::{
    ByPlayer, EndReason, Game, Move, Outcome, Player, Position, Preset, Rules, Step,
};

use super::token::{TokenHash, random_game_id};

/// Longest game id accepted from a client; ours are 16 characters.
const MAX_GAME_ID_LEN: usize = 64;

/// An opaque, URL-safe game id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GameId(String);

/// Why a client-supplied game id is malformed (as opposed to unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GameIdError {
    /// Empty string.
    #[error("game_id is empty; pass the id returned by CreateGame or ListGames")]
    Empty,
    /// Too long or not URL-safe: cannot be one of ours.
    #[error("game_id is not a valid id (at most {MAX_GAME_ID_LEN} characters of A-Z a-z 0-9 - _)")]
    Malformed,
}

impl GameId {
    /// A fresh random id.
    #[must_use]
    pub fn generate() -> GameId {
        GameId(random_game_id())
    }

    /// Checks the shape of an id from a client or a store.
    ///
    /// # Errors
    ///
    /// [`GameIdError`] if it is empty, too long or not URL-safe.
    pub fn parse(s: &str) -> Result<GameId, GameIdError> {
        if s.is_empty() {
            Err(GameIdError::Empty)
        } else if s.len() > MAX_GAME_ID_LEN
            || !s
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        {
            Err(GameIdError::Malformed)
        } else {
            Ok(GameId(s.to_owned()))
        }
    }

    /// The id's text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GameId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Lifecycle of a game.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GameStatus {
    /// One seat is free; no move can be played.
    WaitingForPlayers,
    /// Both seats taken, moves being played.
    Active,
    /// Ended by the rules or by resignation.
    Finished,
    /// Aborted before the first move.
    Aborted,
}

impl GameStatus {
    /// Finished or aborted: nothing will change any more.
    #[must_use]
    pub const fn is_over(self) -> bool {
        matches!(self, GameStatus::Finished | GameStatus::Aborted)
    }
}

/// Which games a listing returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GameFilter {
    /// Waiting for a second player.
    Open,
    /// Being played.
    Active,
    /// Finished or aborted.
    Finished,
    /// Everything.
    #[default]
    All,
}

impl GameFilter {
    /// Whether a game with `status` passes the filter.
    #[must_use]
    pub const fn accepts(self, status: GameStatus) -> bool {
        match self {
            GameFilter::Open => matches!(status, GameStatus::WaitingForPlayers),
            GameFilter::Active => matches!(status, GameStatus::Active),
            GameFilter::Finished => status.is_over(),
            GameFilter::All => true,
        }
    }

    /// A short stable name, used inside page cursors.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            GameFilter::Open => "open",
            GameFilter::Active => "active",
            GameFilter::Finished => "finished",
            GameFilter::All => "all",
        }
    }
}

/// Who sits in a seat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlayerKind {
    /// A person using a client.
    Human,
    /// The server's computer player (see [`super::computer`]).
    Computer {
        /// How strong it plays.
        level: Level,
    },
}

/// The public face of an occupied seat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatInfo {
    /// For display only: not unique, not authenticated.
    pub display_name: String,
    /// Human or computer.
    pub kind: PlayerKind,
}

/// How a game ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Termination {
    /// By the rules: mandarins, repetition or ply limit.
    Rules(EndReason),
    /// `ended_by` resigned.
    Resignation,
    /// `ended_by` aborted before the first move.
    Aborted,
}

/// The result of a finished or aborted game.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GameResult {
    /// `None` only for an aborted game.
    pub outcome: Option<Outcome>,
    /// Scores when the game ended.
    pub scores: ByPlayer<i32>,
    /// Why it ended.
    pub termination: Termination,
    /// Who resigned or aborted.
    pub ended_by: Option<Player>,
}

/// One move of a game with what it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveRecord {
    /// 1-based move number.
    pub number: u32,
    /// Who played it.
    pub player: Player,
    /// The move.
    pub mv: Move,
    /// The engine's trace, including the next player's refill and the game-over step.
    pub steps: Vec<Step>,
    /// The position after the move (and after the refill).
    pub position: Position,
    /// When it was played.
    pub time: SystemTime,
}

impl MoveRecord {
    /// The next player's refill in this move's trace: their captured count afterwards.
    #[must_use]
    pub fn refill(&self) -> Option<(Player, i32)> {
        self.steps.iter().find_map(|step| match *step {
            Step::Refill {
                player,
                captured_after,
            } => Some((player, captured_after)),
            _ => None,
        })
    }
}

/// Everything public about a game: what lists, snapshots and responses show. Cheap to clone
/// (no move history, no secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GameInfo {
    /// The id.
    pub id: GameId,
    /// The full rule set.
    pub rules: Rules,
    /// The preset the rules came from, if any.
    pub preset: Option<Preset>,
    /// Who sits where.
    pub seats: ByPlayer<Option<SeatInfo>>,
    /// Lifecycle state.
    pub status: GameStatus,
    /// The position the game started from.
    pub start: Position,
    /// The current position.
    pub position: Position,
    /// Moves played.
    pub move_count: u32,
    /// Set once finished or aborted.
    pub result: Option<GameResult>,
    /// Creation time.
    pub created: SystemTime,
    /// Last change.
    pub updated: SystemTime,
    /// Sequence number of the last event of this game: the version optimistic concurrency
    /// checks, and what a snapshot of this state reflects.
    pub sequence: u64,
}

/// The whole game as a store keeps it.
///
/// `engine` (the rules crate's [`Game`], which tracks repetitions) is derived data: a durable
/// store persists `info`, `token_hashes` and `moves` and rebuilds it on load with
/// [`Game::replay`]`(info.start, moves.map(|m| m.mv))`.
#[derive(Debug, Clone)]
pub struct GameState {
    /// Public data.
    pub info: GameInfo,
    /// SHA-256 of each seat's token.
    pub token_hashes: ByPlayer<Option<TokenHash>>,
    /// Every move with its trace.
    pub moves: Vec<MoveRecord>,
    /// The engine, positioned after the last move.
    pub engine: Game,
}

impl GameState {
    /// The seat whose token hashes to `hash`, checking both seats in constant time.
    #[must_use]
    pub fn seat_of(&self, hash: &TokenHash) -> Option<Player> {
        let mut found = None;
        // No early return: both comparisons always run.
        for player in Player::ALL {
            let matches = self.token_hashes[player].is_some_and(|h| h.matches(hash));
            if matches {
                found = Some(player);
            }
        }
        found
    }
}

/// A change to one game, as stored in its event log and streamed to watchers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GameEventKind {
    /// A seat was taken (also for the creator, as event 1).
    PlayerJoined {
        /// Which seat.
        seat: Player,
        /// Display name.
        display_name: String,
        /// Human or computer.
        kind: PlayerKind,
    },
    /// Both seats taken; the game is active.
    GameStarted {
        /// The game at that moment.
        game: Box<GameInfo>,
    },
    /// A move was played.
    MovePlayed {
        /// The move, trace and resulting position.
        record: Box<MoveRecord>,
    },
    /// A player's turn starts.
    TurnStarted {
        /// The player to move.
        player: Player,
        /// The ply to pass as `expected_ply`.
        ply: u32,
        /// The refill that started the turn, as the mover's captured count afterwards.
        refill: Option<i32>,
    },
    /// The game ended: the last event.
    GameOver {
        /// The result.
        result: GameResult,
    },
}

/// A committed game event with its per-game sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GameEvent {
    /// The game.
    pub game_id: GameId,
    /// 1, 2, 3, ... per game.
    pub sequence: u64,
    /// When it happened.
    pub time: SystemTime,
    /// What happened.
    pub kind: GameEventKind,
}

/// A change to the set of games.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LobbyEventKind {
    /// A game was created.
    GameCreated {
        /// The new game.
        game: Box<GameInfo>,
    },
    /// A seat was taken.
    SeatTaken {
        /// The game.
        game_id: GameId,
        /// Which seat.
        seat: Player,
        /// Display name.
        display_name: String,
    },
    /// A game became active.
    GameStarted {
        /// The game.
        game_id: GameId,
    },
    /// A game finished or was aborted.
    GameFinished {
        /// The game.
        game_id: GameId,
        /// Its result.
        result: GameResult,
    },
}

/// A committed lobby event with its global sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LobbyEvent {
    /// 1, 2, 3, ... for the whole server.
    pub sequence: u64,
    /// When it happened.
    pub time: SystemTime,
    /// What happened.
    pub kind: LobbyEventKind,
}
