//! The game aggregate and its read views, in plain Rust types (no protobuf).

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use oanquan_ai::Level;
use oanquan_rules::{
    ByPlayer, EndReason, Game, Move, Outcome, PlayError, Player, Position, Preset, Rules, Step,
};

use crate::account::{AccountId, RatingChange, SeatAccount};
use crate::clock::{Clock, ClockReading, Rematch, TimeControl};
pub use crate::id::{GameId, GameIdError};
use crate::token::TokenHash;

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
    /// The server's computer player (see [`crate::computer`]).
    Computer {
        /// How strong it plays.
        level: Level,
    },
}

/// The public face of an occupied seat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatInfo {
    /// For display only: not unique, not authenticated. For an account, its username.
    pub display_name: String,
    /// Human or computer.
    pub kind: PlayerKind,
    /// The account that took the seat, if it was taken with an API key.
    pub account: Option<SeatAccount>,
}

/// How a game ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Termination {
    /// By the rules: mandarins, repetition or ply limit.
    Rules(EndReason),
    /// `ended_by` resigned.
    Resignation,
    /// `ended_by` aborted before the first move, or did not make their first move in time; no
    /// one when the server aborted an idle game.
    Aborted,
    /// `ended_by`'s time ran out; the opponent wins.
    Timeout,
    /// Both players agreed to a draw.
    Agreement,
    /// `ended_by` stopped moving in an untimed game and the opponent claimed the win.
    Abandonment,
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
    /// Who resigned, aborted, ran out of time or abandoned the game.
    pub ended_by: Option<Player>,
    /// A rated game's rating changes, each side's before and after.
    pub ratings: Option<ByPlayer<RatingChange>>,
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

/// Every move of a game, oldest first: an append-only log whose clones share their records.
///
/// A store hands out a copy of a game for every change, and a change only ever appends a move:
/// the log is a chain of reference-counted nodes from the newest move back to the first, so a
/// clone is a pointer copy and [`MoveLog::push`] adds one node, both O(1) whatever the game's
/// length. Reading the newest moves is cheap ([`MoveLog::since`], [`MoveLog::last`]); reading
/// the whole log in order ([`MoveLog::iter`]) walks it once, O(moves).
#[derive(Clone, Default)]
pub struct MoveLog {
    newest: Option<Arc<MoveNode>>,
    len: usize,
}

struct MoveNode {
    /// Shared with the move's `MovePlayed` event and the reply to the player who made it.
    record: Arc<MoveRecord>,
    previous: Option<Arc<MoveNode>>,
}

impl MoveLog {
    /// No moves.
    #[must_use]
    pub const fn new() -> MoveLog {
        MoveLog {
            newest: None,
            len: 0,
        }
    }

    /// Moves played.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// No move yet.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends a move. O(1): no record is copied, clones made earlier are unaffected.
    pub fn push(&mut self, record: impl Into<Arc<MoveRecord>>) {
        let previous = self.newest.take();
        self.newest = Some(Arc::new(MoveNode {
            record: record.into(),
            previous,
        }));
        self.len += 1;
    }

    /// The newest move.
    #[must_use]
    pub fn last(&self) -> Option<&MoveRecord> {
        self.newest.as_deref().map(|node| &*node.record)
    }

    /// Newest first.
    pub fn iter_newest_first(&self) -> impl Iterator<Item = &MoveRecord> {
        std::iter::successors(self.newest.as_deref(), |node| node.previous.as_deref())
            .map(|node| &*node.record)
    }

    /// The moves after the first `skip`, oldest first (`None` if there are fewer than `skip`).
    /// O(moves returned).
    #[must_use]
    pub fn since(&self, skip: usize) -> Option<Vec<&MoveRecord>> {
        let count = self.len.checked_sub(skip)?;
        let mut moves: Vec<&MoveRecord> = self.iter_newest_first().take(count).collect();
        moves.reverse();
        Some(moves)
    }

    /// Every move, oldest first. O(moves).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &MoveRecord> + ExactSizeIterator {
        self.since(0).unwrap_or_default().into_iter()
    }

    /// The move at 0-based `index`. O(moves after it): for the newest moves.
    #[must_use]
    pub fn get(&self, index: usize) -> Option<&MoveRecord> {
        let after = self.len.checked_sub(index + 1)?;
        self.iter_newest_first().nth(after)
    }

    /// Copies every move out, oldest first.
    #[must_use]
    pub fn to_vec(&self) -> Vec<MoveRecord> {
        self.iter().cloned().collect()
    }
}

impl Drop for MoveLog {
    /// Frees the nodes only this log holds one by one, not recursively: a long game must not
    /// exhaust the stack.
    fn drop(&mut self) {
        let mut next = self.newest.take();
        while let Some(node) = next {
            // `into_inner` gives the node to exactly one of its last owners, even under races.
            next = Arc::into_inner(node).and_then(|mut node| node.previous.take());
        }
    }
}

impl FromIterator<MoveRecord> for MoveLog {
    fn from_iter<I: IntoIterator<Item = MoveRecord>>(records: I) -> MoveLog {
        let mut log = MoveLog::new();
        for record in records {
            log.push(record);
        }
        log
    }
}

impl PartialEq for MoveLog {
    fn eq(&self, other: &MoveLog) -> bool {
        let nodes =
            |log: &MoveLog| std::iter::successors(log.newest.clone(), |node| node.previous.clone());
        if self.len != other.len {
            return false;
        }
        for (a, b) in nodes(self).zip(nodes(other)) {
            if Arc::ptr_eq(&a, &b) {
                // The same node: the same history from here back.
                return true;
            }
            if a.record != b.record {
                return false;
            }
        }
        true
    }
}

impl Eq for MoveLog {}

impl fmt::Debug for MoveLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
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
    /// The current position: in a [`GameState`], a copy of its engine's, written by the state
    /// alone.
    pub position: Position,
    /// Moves played: in a [`GameState`], the length of its move log.
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
    /// The players' time control.
    pub time_control: TimeControl,
    /// The clock of a timed game (`None` when untimed).
    pub clock: Option<Clock>,
    /// When the current turn started (the commit of the previous move, or of the start): set
    /// while the game is active.
    pub turn_started: Option<SystemTime>,
    /// A draw offer that stands: by whom, and at which move count (see
    /// [`crate::transition::offer_draw`]).
    pub draw_offer: Option<Player>,
    /// The move count at each player's last draw offer: one offer per player per move.
    pub last_draw_offer: ByPlayer<Option<u32>>,
    /// Rematch offers and links.
    pub rematch: Rematch,
    /// Whether the result changes the players' ratings (both seats are accounts).
    pub rated: bool,
}

impl GameInfo {
    /// Since when nothing has happened to the game, for the idle reaper: its last change, or
    /// the start of its turn when a restart moved that later (the outage is nobody's idleness:
    /// an outside probe's untimed game was aborted the moment its server came back).
    #[must_use]
    pub fn idle_since(&self) -> SystemTime {
        self.turn_started
            .map_or(self.updated, |started| started.max(self.updated))
    }

    /// No event will follow: the game is over and no rematch can be offered any more.
    #[must_use]
    pub fn log_closed(&self) -> bool {
        self.status.is_over() && self.rematch.open_until().is_none()
    }
}

/// The whole game as a store keeps it, with its invariants: the current position lives in the
/// engine alone, and `info.position` and `info.move_count` are set from the engine and the move
/// log by [`GameState`] itself after every change, never by hand.
///
/// `engine` (the rules crate's [`Game`], which tracks repetitions) is derived data: a durable
/// store persists `info`, `token_hashes`, the moves and `creator`, and rebuilds the rest with
/// [`GameState::restore`], which replays the moves and checks them against what was stored.
/// Only the transitions of [`transition`](crate::transition) change a state (and a store its
/// [`sequence`](GameState::set_sequence)).
#[derive(Debug, Clone)]
pub struct GameState {
    /// Boxed, like `engine`: a state is moved by value through a move's load, decision, commit
    /// and store (about twenty moves), and boxing its two large parts makes each move a copy of
    /// ~100 bytes instead of ~1 KB (BENCHMARKS.md, issue 20).
    info: Box<GameInfo>,
    /// SHA-256 of each seat's token.
    token_hashes: ByPlayer<Option<TokenHash>>,
    /// SHA-256 of the token each player will have in the rematch, from their offer (see
    /// [`crate::transition::offer_rematch`]).
    rematch_tokens: ByPlayer<Option<TokenHash>>,
    /// Every move with its trace, shared between copies of the state (see [`MoveLog`]).
    moves: MoveLog,
    /// The engine, positioned after the last move: the one source of the current position.
    engine: Box<Game>,
    /// The address that created the game (in [`client_key`](crate::limits::client_key) form:
    /// IPv6 cut to its /64), for the open-games-per-client limit across restarts. Never sent to
    /// clients; `None` for games created in-process or before this was recorded.
    creator: Option<std::net::IpAddr>,
}

/// A stored move, before it is replayed: what a durable store keeps of a [`MoveRecord`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlayedMove {
    /// Who played it.
    pub player: Player,
    /// The move.
    pub mv: Move,
    /// When.
    pub time: SystemTime,
}

/// Why stored data does not make a game: the store reports it as a damaged game.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    /// A move was stored for the player not to move.
    #[error("move {number} by the wrong player")]
    WrongPlayer {
        /// 1-based move number.
        number: u32,
    },
    /// A move the rules refuse in its position.
    #[error("move {number} ({mv}): {reason}")]
    IllegalMove {
        /// 1-based move number.
        number: u32,
        /// The move.
        mv: Move,
        /// The rules' reason.
        reason: String,
    },
    /// The summary counts another number of moves than the log holds.
    #[error("{stored} moves stored, {expected} expected")]
    MoveCount {
        /// Moves in the log.
        stored: usize,
        /// The summary's `move_count`.
        expected: u32,
    },
    /// The summary's position is not where the moves lead.
    #[error("the stored position differs from the replay")]
    PositionDiffers,
}

impl GameState {
    /// A new game before any move: the engine at `info.start`.
    pub(crate) fn new(
        info: GameInfo,
        token_hashes: ByPlayer<Option<TokenHash>>,
        creator: Option<std::net::IpAddr>,
    ) -> GameState {
        let mut state = GameState {
            engine: Box::new(Game::from_position(info.start)),
            info: Box::new(info),
            token_hashes,
            rematch_tokens: ByPlayer::default(),
            moves: MoveLog::new(),
            creator,
        };
        state.sync();
        state
    }

    /// Rebuilds a stored game by replaying `moves` from `info.start`, checking that each was
    /// legal and played by the player to move, that `info.move_count` counts them, and, when
    /// the store kept it, that `stored_position` is where they lead. `info.position` is then
    /// the replayed position, whatever was stored in it.
    ///
    /// # Errors
    ///
    /// [`RestoreError`] if the stored data is inconsistent.
    pub fn restore(
        info: GameInfo,
        token_hashes: ByPlayer<Option<TokenHash>>,
        rematch_tokens: ByPlayer<Option<TokenHash>>,
        moves: impl IntoIterator<Item = PlayedMove>,
        creator: Option<std::net::IpAddr>,
        stored_position: Option<Position>,
    ) -> Result<GameState, RestoreError> {
        let mut engine = Game::from_position(info.start);
        let mut log = MoveLog::new();
        for (played, number) in moves.into_iter().zip(1..) {
            if engine.position().to_move() != played.player {
                return Err(RestoreError::WrongPlayer { number });
            }
            let steps = engine
                .play(played.mv)
                .map_err(|e| RestoreError::IllegalMove {
                    number,
                    mv: played.mv,
                    reason: e.to_string(),
                })?;
            log.push(MoveRecord {
                number,
                player: played.player,
                mv: played.mv,
                steps,
                position: *engine.position(),
                time: played.time,
            });
        }
        if log.len() != info.move_count as usize {
            return Err(RestoreError::MoveCount {
                stored: log.len(),
                expected: info.move_count,
            });
        }
        if stored_position.is_some_and(|position| position != *engine.position()) {
            return Err(RestoreError::PositionDiffers);
        }
        let mut state = GameState {
            info: Box::new(info),
            token_hashes,
            rematch_tokens,
            moves: log,
            engine: Box::new(engine),
            creator,
        };
        state.sync();
        Ok(state)
    }

    /// Public data.
    #[must_use]
    pub fn info(&self) -> &GameInfo {
        &self.info
    }

    /// Public data, taken out.
    #[must_use]
    pub fn into_info(self) -> GameInfo {
        *self.info
    }

    /// SHA-256 of each seat's token.
    #[must_use]
    pub fn token_hashes(&self) -> &ByPlayer<Option<TokenHash>> {
        &self.token_hashes
    }

    /// SHA-256 of the token each player will have in the rematch, once they offered one.
    #[must_use]
    pub fn rematch_tokens(&self) -> &ByPlayer<Option<TokenHash>> {
        &self.rematch_tokens
    }

    /// Every move with its trace, oldest first.
    #[must_use]
    pub fn moves(&self) -> &MoveLog {
        &self.moves
    }

    /// The engine, positioned after the last move (it knows the repetitions).
    #[must_use]
    pub fn engine(&self) -> &Game {
        &self.engine
    }

    /// The engine, taken out (for a search that needs its repetitions).
    #[must_use]
    pub fn into_engine(self) -> Game {
        *self.engine
    }

    /// The current position.
    #[must_use]
    pub fn position(&self) -> &Position {
        self.engine.position()
    }

    /// The creator's address in [`client_key`](crate::limits::client_key) form, if recorded.
    #[must_use]
    pub fn creator(&self) -> Option<std::net::IpAddr> {
        self.creator
    }

    /// Stamps the sequence number of the last event committed with this state: the store's
    /// part of a commit (see [`Commit`](crate::Commit)).
    pub fn set_sequence(&mut self, sequence: u64) {
        self.info.sequence = sequence;
    }

    /// Changes the summary; what it says of the position is then set again from the engine, so
    /// an edit cannot make it a second, diverging copy.
    pub(crate) fn edit(&mut self, change: impl FnOnce(&mut GameInfo)) {
        change(&mut self.info);
        self.sync();
    }

    /// Gives `seat` the token that hashes to `hash`.
    pub(crate) fn set_token(&mut self, seat: Player, hash: TokenHash) {
        self.token_hashes[seat] = Some(hash);
    }

    /// Keeps the hash of the token `seat` will have in the rematch.
    pub(crate) fn set_rematch_token(&mut self, seat: Player, hash: TokenHash) {
        self.rematch_tokens[seat] = Some(hash);
    }

    /// Plays `mv` for `player` (whose turn the caller checked) and logs it.
    pub(crate) fn play(
        &mut self,
        player: Player,
        mv: Move,
        now: SystemTime,
    ) -> Result<Arc<MoveRecord>, PlayError> {
        let mut steps = self.engine.play(mv)?;
        // The trace was grown step by step; the record keeps it for the game's life.
        steps.shrink_to_fit();
        let record = Arc::new(MoveRecord {
            number: self.info.move_count + 1,
            player,
            mv,
            steps,
            position: *self.engine.position(),
            time: now,
        });
        self.moves.push(Arc::clone(&record));
        self.sync();
        Ok(record)
    }

    /// The one place the summary's position and move count are written: from the engine and
    /// the log.
    fn sync(&mut self) {
        self.info.position = *self.engine.position();
        self.info.move_count = u32::try_from(self.moves.len()).unwrap_or(u32::MAX);
    }

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
        record: Arc<MoveRecord>,
        /// The clocks after the move (increment added), for a timed game.
        clock: Option<ClockReading>,
    },
    /// A player's turn starts; also sent again, with the same ply, when a restarted server
    /// resumes a timed game's clock.
    TurnStarted {
        /// The player to move.
        player: Player,
        /// The ply to pass as `expected_ply`.
        ply: u32,
        /// The refill that started the turn, as the mover's captured count afterwards.
        refill: Option<i32>,
        /// The clocks as the turn starts, for a timed game.
        clock: Option<ClockReading>,
    },
    /// The game ended. The last event, unless a rematch can still be offered.
    GameOver {
        /// The result.
        result: GameResult,
        /// The clocks at the end, for a timed game.
        clock: Option<ClockReading>,
        /// Until when a rematch can be offered (none: no rematch, this is the last event).
        rematch_until: Option<SystemTime>,
    },
    /// A draw was offered, declined or accepted (an accepted draw is followed by `GameOver`).
    Draw {
        /// Who offered, declined or accepted.
        by: Player,
        /// Which.
        action: DrawAction,
    },
    /// A rematch was offered, declined, started, or its window closed. Declined, expired and
    /// started are the game's last event.
    Rematch {
        /// Who offered or declined; none when the window closed or the rematch started.
        by: Option<Player>,
        /// Which.
        action: RematchAction,
    },
}

/// What happened to a draw offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DrawAction {
    /// Offered; it stands until the offerer's opponent moves or answers.
    Offered,
    /// The opponent declined.
    Declined,
    /// The opponent accepted: the game is drawn.
    Accepted,
}

/// What happened to a rematch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RematchAction {
    /// Offered; waits for the opponent.
    Offered,
    /// Declined: no rematch.
    Declined,
    /// Nobody asked (or answered) in time.
    Expired,
    /// Both asked: the new game.
    Started {
        /// The rematch's id.
        game_id: GameId,
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

/// The display name of a computer seat: `Computer (club)`.
#[must_use]
pub fn computer_name(level: Level) -> String {
    format!("Computer ({level})")
}

/// The seat `account` holds in `info`, if any.
#[must_use]
pub fn seat_of_account(info: &GameInfo, account: &AccountId) -> Option<Player> {
    Player::ALL.into_iter().find(|&p| {
        info.seats[p]
            .as_ref()
            .and_then(|s| s.account.as_ref())
            .is_some_and(|a| &a.id == account)
    })
}

/// Whether the computer holds a seat of the game.
#[must_use]
pub fn has_computer_seat(info: &GameInfo) -> bool {
    Player::ALL.into_iter().any(|seat| {
        info.seats[seat]
            .as_ref()
            .is_some_and(|s| matches!(s.kind, PlayerKind::Computer { .. }))
    })
}

/// The computer's seat and level if the game is active and the computer is to move.
#[must_use]
pub fn computer_to_move(info: &GameInfo) -> Option<(Player, Level)> {
    if info.status != GameStatus::Active || info.position.is_over() {
        return None;
    }
    let seat = info.position.to_move();
    match info.seats[seat].as_ref()?.kind {
        PlayerKind::Computer { level } => Some((seat, level)),
        PlayerKind::Human => None,
    }
}

#[cfg(test)]
mod tests {
    use oanquan_rules::Preset;

    use super::*;

    fn record(number: u32) -> MoveRecord {
        let start = Position::new(Preset::Standard.rules()).unwrap();
        let mv = start.legal_moves()[0];
        let (position, steps) = start.play(mv).unwrap();
        MoveRecord {
            number,
            player: Player::First,
            mv,
            steps,
            position,
            time: SystemTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn move_log_clones_share_and_appends_stay_apart() {
        let mut log: MoveLog = (1..=3).map(record).collect();
        let copy = log.clone();
        log.push(record(4));
        assert_eq!((log.len(), copy.len()), (4, 3));
        assert_eq!(log.last().map(|r| r.number), Some(4));
        assert_eq!(copy.last().map(|r| r.number), Some(3));
        let numbers = |log: &MoveLog| log.iter().map(|r| r.number).collect::<Vec<_>>();
        assert_eq!(numbers(&log), [1, 2, 3, 4]);
        assert_eq!(numbers(&copy), [1, 2, 3]);
        assert_eq!(
            log.since(2)
                .unwrap()
                .iter()
                .map(|r| r.number)
                .collect::<Vec<_>>(),
            [3, 4]
        );
        assert!(log.since(4).unwrap().is_empty());
        assert!(log.since(5).is_none());
        assert_eq!(log.get(0).map(|r| r.number), Some(1));
        assert_eq!(log.get(3).map(|r| r.number), Some(4));
        assert!(log.get(4).is_none());
        assert_ne!(log, copy);
        let mut other = copy.clone();
        other.push(record(4));
        assert_eq!(log, other);
        assert_eq!(log, log.to_vec().into_iter().collect());
        assert!(MoveLog::new().is_empty());
    }

    #[test]
    fn a_long_move_log_drops_without_recursion() {
        let record = record(1);
        let mut log = MoveLog::new();
        for _ in 0..1_000_000 {
            log.push(record.clone());
        }
        let shared = log.clone();
        drop(log);
        assert_eq!(shared.len(), 1_000_000);
        drop(shared);
    }
}
