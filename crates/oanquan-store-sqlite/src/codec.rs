//! The on-disk format: serde mirrors of the domain types, kept apart from them so that renaming
//! a domain field cannot silently change what is stored. Changing anything here needs a
//! migration (see `schema`).
//!
//! Only facts are stored; what the rules engine derives is rebuilt on load:
//!
//! * a move is its player, its notation and its time; the trace and the position after it come
//!   from replaying the game;
//! * a `MovePlayed` event refers to its move by number;
//! * a position is stored as its plain [`Setup`] plus its end reason. [`Position::from_setup`]
//!   recomputes the end for mandarins and the ply limit, but not for a repetition, which depends
//!   on history: such a position is taken from a replay instead (see [`DecodedInfo`]).
//!
//! Times are integer nanoseconds since the Unix epoch ([`time_to_db`]) and durations integer
//! nanoseconds ([`duration_to_db`]), so both read back exactly.
//!
//! # Fields added later
//!
//! Schema version 3 (clocks, draw offers, rematches) added fields to [`InfoDto`] and to the
//! game events without rewriting old rows: every new field is `#[serde(default)]`, so a row
//! written before reads as an **untimed** game (no clock; no turn start, so an abandonment claim
//! counts from the game's last change until its next move) with **no draw offer and no
//! rematch** (no link, no offer, no window: a finished game's log is closed), and its
//! `MovePlayed`, `TurnStarted` and `GameOver` events as events without clocks or rematch
//! window. That is what such a game was. The rematch tokens live in columns of their own
//! (`games.rematch_token_first`, `_second`, NULL in old rows).
//!
//! Schema version 4 (accounts) added a seat's account, a game's `rated` flag and a result's
//! rating changes the same way, and writes each only when present: a row written before reads
//! as anonymous seats in an unrated game, and an anonymous, unrated game is still written
//! exactly as version 3 wrote it. Accounts themselves live in tables of their own (see
//! `accounts`).

//!
//! # Unknown keys are refused
//!
//! Every mirror here (and the rules crate's stored types) denies unknown fields. No version
//! has removed a field, so no row written by an older server carries one; a key this build does
//! not know is damage (one flipped byte in `"clock"`), and read as missing it would have turned
//! a timed game untimed without a word. Such a row is corrupt, as undecodable JSON is. A field
//! removed in a later version must first be accepted and ignored by name.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oanquan_ai::Level;
use oanquan_rules::{ByPlayer, EndReason, Outcome, Player, Position, Preset, Rules, Setup};
use serde::{Deserialize, Serialize};

use oanquan_game::account::{AccountId, RatingChange, SeatAccount};
use oanquan_game::clock::{Clock, Rematch};
use oanquan_game::{
    ClockReading, DrawAction, GameEventKind, GameId, GameInfo, GameResult, GameState, GameStatus,
    LobbyEventKind, MoveRecord, PlayerKind, RematchAction, SeatInfo, Termination, TimeControl,
    TokenHash,
};

/// Nanoseconds since the Unix epoch (negative before it): exact for any time until 2262.
pub(super) fn time_to_db(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_nanos()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_nanos()).map_or(i64::MIN, |n| -n),
    }
}

/// The inverse of [`time_to_db`].
pub(super) fn time_from_db(nanos: i64) -> SystemTime {
    let magnitude = Duration::from_nanos(nanos.unsigned_abs());
    if nanos >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

/// Nanoseconds: exact for any duration up to 584 years (longer saturates, and such a commit is
/// refused by the read-back check).
pub(super) fn duration_to_db(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The inverse of [`duration_to_db`].
pub(super) const fn duration_from_db(nanos: u64) -> Duration {
    Duration::from_nanos(nanos)
}

/// The `games.status` column.
pub(super) const fn status_name(status: GameStatus) -> &'static str {
    match status {
        GameStatus::WaitingForPlayers => "waiting",
        GameStatus::Active => "active",
        GameStatus::Finished => "finished",
        GameStatus::Aborted => "aborted",
    }
}

/// A token hash per seat, as a `games` row's token columns hold them.
pub(super) type TokenColumns = ByPlayer<Option<[u8; 32]>>;

/// The token hashes of a game's seats and of its rematch's seats, as the `games` row's
/// `token_*` and `rematch_token_*` columns hold them.
pub(super) fn token_columns(state: &GameState) -> (TokenColumns, TokenColumns) {
    (
        state
            .token_hashes()
            .map(|hash| hash.map(TokenHash::to_bytes)),
        state
            .rematch_tokens()
            .map(|hash| hash.map(TokenHash::to_bytes)),
    )
}

/// The `moves.player` column.
pub(super) const fn player_name(player: Player) -> &'static str {
    match player {
        Player::First => "first",
        Player::Second => "second",
    }
}

/// The inverse of [`player_name`].
pub(super) fn parse_player(text: &str) -> Result<Player, String> {
    match text {
        "first" => Ok(Player::First),
        "second" => Ok(Player::Second),
        other => Err(format!("unknown player {other:?}")),
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "snake_case")]
enum StatusDto {
    Waiting,
    Active,
    Finished,
    Aborted,
}

impl From<GameStatus> for StatusDto {
    fn from(status: GameStatus) -> Self {
        match status {
            GameStatus::WaitingForPlayers => StatusDto::Waiting,
            GameStatus::Active => StatusDto::Active,
            GameStatus::Finished => StatusDto::Finished,
            GameStatus::Aborted => StatusDto::Aborted,
        }
    }
}

impl From<StatusDto> for GameStatus {
    fn from(status: StatusDto) -> Self {
        match status {
            StatusDto::Waiting => GameStatus::WaitingForPlayers,
            StatusDto::Active => GameStatus::Active,
            StatusDto::Finished => GameStatus::Finished,
            StatusDto::Aborted => GameStatus::Aborted,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "snake_case")]
pub(super) enum KindDto {
    Human,
    /// Added without a migration: older files have no such seats, and the
    /// encoding of `human` is unchanged.
    Computer {
        /// 1 to 7.
        level: u8,
    },
}

impl From<PlayerKind> for KindDto {
    fn from(kind: PlayerKind) -> Self {
        match kind {
            PlayerKind::Human => KindDto::Human,
            PlayerKind::Computer { level } => KindDto::Computer {
                level: level.number(),
            },
        }
    }
}

impl From<KindDto> for PlayerKind {
    fn from(kind: KindDto) -> Self {
        match kind {
            KindDto::Human => PlayerKind::Human,
            // Only this server writes levels; a number out of range is read as the nearest.
            KindDto::Computer { level } => PlayerKind::Computer {
                level: Level::from_number(level.clamp(1, Level::STRONGEST.number()))
                    .unwrap_or(Level::STRONGEST),
            },
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeatDto {
    display_name: String,
    kind: KindDto,
    /// Schema version 4 on; absent for an anonymous seat (and in every older row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    account: Option<SeatAccountDto>,
}

/// A [`SeatAccount`]: the account that took a seat, as the game shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeatAccountDto {
    id: String,
    username: String,
    rating: Option<i32>,
    provisional: bool,
}

impl From<&SeatAccount> for SeatAccountDto {
    fn from(account: &SeatAccount) -> Self {
        SeatAccountDto {
            id: account.id.as_str().to_owned(),
            username: account.username.clone(),
            rating: account.rating,
            provisional: account.provisional,
        }
    }
}

impl From<SeatAccountDto> for SeatAccount {
    fn from(account: SeatAccountDto) -> Self {
        SeatAccount {
            id: AccountId::from_stored(account.id),
            username: account.username,
            rating: account.rating,
            provisional: account.provisional,
        }
    }
}

/// A [`RatingChange`] announced with a rated game's result.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RatingChangeDto {
    before: i32,
    after: i32,
    provisional: bool,
}

impl From<RatingChange> for RatingChangeDto {
    fn from(change: RatingChange) -> Self {
        RatingChangeDto {
            before: change.before,
            after: change.after,
            provisional: change.provisional,
        }
    }
}

impl From<RatingChangeDto> for RatingChange {
    fn from(change: RatingChangeDto) -> Self {
        RatingChange {
            before: change.before,
            after: change.after,
            provisional: change.provisional,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "snake_case")]
enum TerminationDto {
    Rules(EndReason),
    Resignation,
    Aborted,
    /// Schema version 3 on.
    Timeout,
    /// Schema version 3 on.
    Agreement,
    /// Schema version 3 on.
    Abandonment,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ResultDto {
    outcome: Option<Outcome>,
    scores: ByPlayer<i32>,
    termination: TerminationDto,
    ended_by: Option<Player>,
    /// Schema version 4 on; absent for an unrated game (and in every older row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ratings: Option<ByPlayer<RatingChangeDto>>,
}

impl From<GameResult> for ResultDto {
    fn from(result: GameResult) -> Self {
        ResultDto {
            outcome: result.outcome,
            scores: result.scores,
            termination: match result.termination {
                Termination::Rules(reason) => TerminationDto::Rules(reason),
                Termination::Resignation => TerminationDto::Resignation,
                Termination::Aborted => TerminationDto::Aborted,
                Termination::Timeout => TerminationDto::Timeout,
                Termination::Agreement => TerminationDto::Agreement,
                Termination::Abandonment => TerminationDto::Abandonment,
            },
            ended_by: result.ended_by,
            ratings: result
                .ratings
                .map(|ratings| ratings.map(RatingChangeDto::from)),
        }
    }
}

impl From<ResultDto> for GameResult {
    fn from(result: ResultDto) -> Self {
        GameResult {
            outcome: result.outcome,
            scores: result.scores,
            termination: match result.termination {
                TerminationDto::Rules(reason) => Termination::Rules(reason),
                TerminationDto::Resignation => Termination::Resignation,
                TerminationDto::Aborted => Termination::Aborted,
                TerminationDto::Timeout => Termination::Timeout,
                TerminationDto::Agreement => Termination::Agreement,
                TerminationDto::Abandonment => Termination::Abandonment,
            },
            ended_by: result.ended_by,
            ratings: result
                .ratings
                .map(|ratings| ratings.map(RatingChange::from)),
        }
    }
}

/// A [`TimeControl`]; durations in nanoseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum TimeControlDto {
    /// Also what a row from before schema version 3 reads as.
    #[default]
    Untimed,
    RealTime {
        initial: u64,
        increment: u64,
    },
    Correspondence {
        per_move: u64,
    },
}

impl From<TimeControl> for TimeControlDto {
    fn from(control: TimeControl) -> Self {
        match control {
            TimeControl::Untimed => TimeControlDto::Untimed,
            TimeControl::RealTime { initial, increment } => TimeControlDto::RealTime {
                initial: duration_to_db(initial),
                increment: duration_to_db(increment),
            },
            TimeControl::Correspondence { per_move } => TimeControlDto::Correspondence {
                per_move: duration_to_db(per_move),
            },
        }
    }
}

impl From<TimeControlDto> for TimeControl {
    /// As stored, unchecked against today's bounds: a game keeps the control it was created
    /// with, even if a later server would refuse it for a new game.
    fn from(control: TimeControlDto) -> Self {
        match control {
            TimeControlDto::Untimed => TimeControl::Untimed,
            TimeControlDto::RealTime { initial, increment } => TimeControl::RealTime {
                initial: duration_from_db(initial),
                increment: duration_from_db(increment),
            },
            TimeControlDto::Correspondence { per_move } => TimeControl::Correspondence {
                per_move: duration_from_db(per_move),
            },
        }
    }
}

/// More time than any clock can hold (time controls are far shorter): a stored reading over it
/// is damage.
const MAX_CLOCK_NANOS: u64 = 10 * 365 * 24 * 3600 * 1_000_000_000;

/// A [`Clock`]; durations in nanoseconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClockDto {
    remaining: ByPlayer<u64>,
    first_move: u64,
}

impl From<Clock> for ClockDto {
    fn from(clock: Clock) -> Self {
        ClockDto {
            remaining: clock.remaining.map(duration_to_db),
            first_move: duration_to_db(clock.first_move),
        }
    }
}

impl From<ClockDto> for Clock {
    fn from(clock: ClockDto) -> Self {
        Clock {
            remaining: clock.remaining.map(duration_from_db),
            first_move: duration_from_db(clock.first_move),
        }
    }
}

/// A [`ClockReading`] inside an event; durations in nanoseconds, times as in [`time_to_db`].
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ClockReadingDto {
    remaining: ByPlayer<u64>,
    measured_at: i64,
    running: Option<Player>,
    deadline: Option<i64>,
}

impl From<ClockReading> for ClockReadingDto {
    fn from(reading: ClockReading) -> Self {
        ClockReadingDto {
            remaining: reading.remaining.map(duration_to_db),
            measured_at: time_to_db(reading.measured_at),
            running: reading.running,
            deadline: reading.deadline.map(time_to_db),
        }
    }
}

impl From<ClockReadingDto> for ClockReading {
    fn from(reading: ClockReadingDto) -> Self {
        ClockReading {
            remaining: reading.remaining.map(duration_from_db),
            measured_at: time_from_db(reading.measured_at),
            running: reading.running,
            deadline: reading.deadline.map(time_from_db),
        }
    }
}

/// A game's [`Rematch`]: the linked games' ids, the standing offer, the window's end.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RematchDto {
    #[serde(default)]
    of: Option<String>,
    #[serde(default)]
    next: Option<String>,
    #[serde(default)]
    offered_by: Option<Player>,
    #[serde(default)]
    open_until: Option<i64>,
}

impl RematchDto {
    fn new(rematch: &Rematch) -> Self {
        RematchDto {
            of: rematch.of.as_ref().map(|id| id.as_str().to_owned()),
            next: rematch.next.as_ref().map(|id| id.as_str().to_owned()),
            offered_by: rematch.offered_by,
            open_until: rematch.open_until.map(time_to_db),
        }
    }

    fn decode(self) -> Result<Rematch, String> {
        let id = |id: Option<String>, what: &str| {
            id.map(|id| GameId::parse(&id).map_err(|e| format!("{what} game id {id:?}: {e}")))
                .transpose()
        };
        Ok(Rematch {
            of: id(self.of, "rematch_of")?,
            next: id(self.next, "rematch")?,
            offered_by: self.offered_by,
            open_until: self.open_until.map(time_from_db),
        })
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "snake_case")]
pub(super) enum DrawActionDto {
    Offered,
    Declined,
    Accepted,
}

impl From<DrawAction> for DrawActionDto {
    fn from(action: DrawAction) -> Self {
        match action {
            DrawAction::Offered => DrawActionDto::Offered,
            DrawAction::Declined => DrawActionDto::Declined,
            DrawAction::Accepted => DrawActionDto::Accepted,
        }
    }
}

impl From<DrawActionDto> for DrawAction {
    fn from(action: DrawActionDto) -> Self {
        match action {
            DrawActionDto::Offered => DrawAction::Offered,
            DrawActionDto::Declined => DrawAction::Declined,
            DrawActionDto::Accepted => DrawAction::Accepted,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "snake_case")]
pub(super) enum RematchActionDto {
    Offered,
    Declined,
    Expired,
    Started { game_id: String },
}

impl From<&RematchAction> for RematchActionDto {
    fn from(action: &RematchAction) -> Self {
        match action {
            RematchAction::Offered => RematchActionDto::Offered,
            RematchAction::Declined => RematchActionDto::Declined,
            RematchAction::Expired => RematchActionDto::Expired,
            RematchAction::Started { game_id } => RematchActionDto::Started {
                game_id: game_id.as_str().to_owned(),
            },
        }
    }
}

impl RematchActionDto {
    fn decode(self) -> Result<RematchAction, String> {
        Ok(match self {
            RematchActionDto::Offered => RematchAction::Offered,
            RematchActionDto::Declined => RematchAction::Declined,
            RematchActionDto::Expired => RematchAction::Expired,
            RematchActionDto::Started { game_id } => RematchAction::Started {
                game_id: GameId::parse(&game_id)
                    .map_err(|e| format!("rematch game id {game_id:?}: {e}"))?,
            },
        })
    }
}

/// A position: its setup and how it ended.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PositionDto {
    setup: Setup,
    end: Option<EndReason>,
}

impl PositionDto {
    fn new(position: &Position) -> Self {
        PositionDto {
            setup: position.to_setup(),
            end: position.end_reason(),
        }
    }

    /// The position, if its setup alone determines it (always, except after a repetition).
    fn rebuild(self, rules: Rules) -> Option<Position> {
        Position::from_setup(self.setup, rules)
            .ok()
            .filter(|position| position.end_reason() == self.end)
    }
}

/// A [`GameInfo`] as stored: in the `games.info` column and inside events.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InfoDto {
    id: String,
    rules: Rules,
    preset: Option<Preset>,
    seats: ByPlayer<Option<SeatDto>>,
    status: StatusDto,
    start: Setup,
    position: PositionDto,
    move_count: u32,
    result: Option<ResultDto>,
    created: i64,
    updated: i64,
    sequence: u64,
    // Schema version 3 on; see the module docs for what older rows read as.
    #[serde(default)]
    time_control: TimeControlDto,
    #[serde(default)]
    clock: Option<ClockDto>,
    #[serde(default)]
    turn_started: Option<i64>,
    #[serde(default)]
    draw_offer: Option<Player>,
    #[serde(default)]
    last_draw_offer: ByPlayer<Option<u32>>,
    #[serde(default)]
    rematch: RematchDto,
    // Schema version 4 on: older games were never rated. Written only when true, so that an
    // unrated game is stored as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    rated: bool,
}

/// A decoded [`InfoDto`]. When `position_known` is false, `info.position` is only a placeholder
/// (the start): the caller replays `info.move_count` moves and takes the position from there.
#[derive(Debug)]
pub(super) struct DecodedInfo {
    pub(super) info: GameInfo,
    pub(super) position_known: bool,
}

impl InfoDto {
    pub(super) fn new(info: &GameInfo) -> Self {
        InfoDto {
            id: info.id.as_str().to_owned(),
            rules: info.rules,
            preset: info.preset,
            seats: ByPlayer::new_with(|player| {
                info.seats[player].as_ref().map(|seat| SeatDto {
                    display_name: seat.display_name.clone(),
                    kind: seat.kind.into(),
                    account: seat.account.as_ref().map(SeatAccountDto::from),
                })
            }),
            status: info.status.into(),
            start: info.start.to_setup(),
            position: PositionDto::new(&info.position),
            move_count: info.move_count,
            result: info.result.map(ResultDto::from),
            created: time_to_db(info.created),
            updated: time_to_db(info.updated),
            sequence: info.sequence,
            time_control: info.time_control.into(),
            clock: info.clock.map(ClockDto::from),
            turn_started: info.turn_started.map(time_to_db),
            draw_offer: info.draw_offer,
            last_draw_offer: info.last_draw_offer,
            rematch: RematchDto::new(&info.rematch),
            rated: info.rated,
        }
    }

    pub(super) fn decode(self) -> Result<DecodedInfo, String> {
        let id = GameId::parse(&self.id).map_err(|e| format!("game id {:?}: {e}", self.id))?;
        let start = Position::from_setup(self.start, self.rules)
            .map_err(|e| format!("start position of {id}: {e}"))?;
        let position = self.position.rebuild(self.rules);
        // A stored position fixes the count; without one the replay checks it against the log.
        if let Some(position) = &position {
            let played = position.ply().checked_sub(start.ply());
            if played != Some(self.move_count) {
                return Err(format!(
                    "game {id} counts {} moves, but its position is {} plies after its start",
                    self.move_count,
                    i64::from(position.ply()) - i64::from(start.ply())
                ));
            }
        }
        // What no server writes: a clock without a time control (the `time_control` key cut
        // out read as untimed, and an outside probe's timed game came back with its clock
        // running and never charged), a rated game without one, or time beyond any clock.
        let time_control = TimeControl::from(self.time_control);
        if self.clock.is_some() && !time_control.is_timed() {
            return Err(format!("game {id} has a clock but no time control"));
        }
        if self.rated && !time_control.is_timed() {
            return Err(format!("game {id} is rated but has no time control"));
        }
        if let Some(clock) = &self.clock
            && [
                clock.remaining.first,
                clock.remaining.second,
                clock.first_move,
            ]
            .iter()
            .any(|&nanos| nanos > MAX_CLOCK_NANOS)
        {
            return Err(format!("game {id} has a clock reading over ten years"));
        }
        let rematch = self.rematch.decode()?;
        Ok(DecodedInfo {
            position_known: position.is_some(),
            info: GameInfo {
                id,
                rules: self.rules,
                preset: self.preset,
                seats: self.seats.map(|seat| {
                    seat.map(|seat| SeatInfo {
                        display_name: seat.display_name,
                        kind: seat.kind.into(),
                        account: seat.account.map(SeatAccount::from),
                    })
                }),
                status: self.status.into(),
                start,
                position: position.unwrap_or(start),
                move_count: self.move_count,
                result: self.result.map(GameResult::from),
                created: time_from_db(self.created),
                updated: time_from_db(self.updated),
                sequence: self.sequence,
                time_control,
                clock: self.clock.map(Clock::from),
                turn_started: self.turn_started.map(time_from_db),
                draw_offer: self.draw_offer,
                last_draw_offer: self.last_draw_offer,
                rematch,
                rated: self.rated,
            },
        })
    }
}

/// A game event as stored in `game_events.event`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum GameEventDto {
    PlayerJoined {
        seat: Player,
        display_name: String,
        kind: KindDto,
    },
    GameStarted {
        game: Box<InfoDto>,
    },
    /// The move with this number, from the `moves` table.
    MovePlayed {
        number: u32,
        #[serde(default)]
        clock: Option<ClockReadingDto>,
    },
    TurnStarted {
        player: Player,
        ply: u32,
        refill: Option<i32>,
        #[serde(default)]
        clock: Option<ClockReadingDto>,
    },
    GameOver {
        result: ResultDto,
        #[serde(default)]
        clock: Option<ClockReadingDto>,
        #[serde(default)]
        rematch_until: Option<i64>,
    },
    /// Schema version 3 on.
    Draw {
        by: Player,
        action: DrawActionDto,
    },
    /// Schema version 3 on.
    Rematch {
        #[serde(default)]
        by: Option<Player>,
        action: RematchActionDto,
    },
}

impl GameEventDto {
    pub(super) fn new(kind: &GameEventKind) -> Self {
        match kind {
            GameEventKind::PlayerJoined {
                seat,
                display_name,
                kind,
            } => GameEventDto::PlayerJoined {
                seat: *seat,
                display_name: display_name.clone(),
                kind: (*kind).into(),
            },
            GameEventKind::GameStarted { game } => GameEventDto::GameStarted {
                game: Box::new(InfoDto::new(game)),
            },
            GameEventKind::MovePlayed { record, clock } => GameEventDto::MovePlayed {
                number: record.number,
                clock: clock.map(ClockReadingDto::from),
            },
            GameEventKind::TurnStarted {
                player,
                ply,
                refill,
                clock,
            } => GameEventDto::TurnStarted {
                player: *player,
                ply: *ply,
                refill: *refill,
                clock: clock.map(ClockReadingDto::from),
            },
            GameEventKind::GameOver {
                result,
                clock,
                rematch_until,
            } => GameEventDto::GameOver {
                result: (*result).into(),
                clock: clock.map(ClockReadingDto::from),
                rematch_until: rematch_until.map(time_to_db),
            },
            GameEventKind::Draw { by, action } => GameEventDto::Draw {
                by: *by,
                action: (*action).into(),
            },
            GameEventKind::Rematch { by, action } => GameEventDto::Rematch {
                by: *by,
                action: action.into(),
            },
        }
    }
}

/// A lobby event as stored in `lobby_events.event`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum LobbyEventDto {
    GameCreated {
        game: Box<InfoDto>,
    },
    SeatTaken {
        game_id: String,
        seat: Player,
        display_name: String,
    },
    GameStarted {
        game_id: String,
    },
    GameFinished {
        game_id: String,
        result: ResultDto,
    },
}

impl LobbyEventDto {
    pub(super) fn new(kind: &LobbyEventKind) -> Self {
        match kind {
            LobbyEventKind::GameCreated { game } => LobbyEventDto::GameCreated {
                game: Box::new(InfoDto::new(game)),
            },
            LobbyEventKind::SeatTaken {
                game_id,
                seat,
                display_name,
            } => LobbyEventDto::SeatTaken {
                game_id: game_id.as_str().to_owned(),
                seat: *seat,
                display_name: display_name.clone(),
            },
            LobbyEventKind::GameStarted { game_id } => LobbyEventDto::GameStarted {
                game_id: game_id.as_str().to_owned(),
            },
            LobbyEventKind::GameFinished { game_id, result } => LobbyEventDto::GameFinished {
                game_id: game_id.as_str().to_owned(),
                result: (*result).into(),
            },
        }
    }
}

/// What decoding events needs from the game's replayed history.
pub(super) trait History {
    /// Move `number` (1-based) with its trace and position.
    fn record(&mut self, number: u32) -> Result<MoveRecord, String>;
    /// The position after the first `moves` moves.
    fn position_after(&mut self, moves: u32) -> Result<Position, String>;
}

impl InfoDto {
    /// Decodes, taking the position from `history` if the setup does not determine it.
    pub(super) fn decode_with(self, history: &mut dyn History) -> Result<GameInfo, String> {
        let DecodedInfo {
            mut info,
            position_known,
        } = self.decode()?;
        if !position_known {
            info.position = history.position_after(info.move_count)?;
        }
        Ok(info)
    }
}

impl GameEventDto {
    pub(super) fn decode(self, history: &mut dyn History) -> Result<GameEventKind, String> {
        Ok(match self {
            GameEventDto::PlayerJoined {
                seat,
                display_name,
                kind,
            } => GameEventKind::PlayerJoined {
                seat,
                display_name,
                kind: kind.into(),
            },
            GameEventDto::GameStarted { game } => GameEventKind::GameStarted {
                game: Box::new(game.decode_with(history)?),
            },
            GameEventDto::MovePlayed { number, clock } => GameEventKind::MovePlayed {
                record: Arc::new(history.record(number)?),
                clock: clock.map(ClockReading::from),
            },
            GameEventDto::TurnStarted {
                player,
                ply,
                refill,
                clock,
            } => GameEventKind::TurnStarted {
                player,
                ply,
                refill,
                clock: clock.map(ClockReading::from),
            },
            GameEventDto::GameOver {
                result,
                clock,
                rematch_until,
            } => GameEventKind::GameOver {
                result: result.into(),
                clock: clock.map(ClockReading::from),
                rematch_until: rematch_until.map(time_from_db),
            },
            GameEventDto::Draw { by, action } => GameEventKind::Draw {
                by,
                action: action.into(),
            },
            GameEventDto::Rematch { by, action } => GameEventKind::Rematch {
                by,
                action: action.decode()?,
            },
        })
    }
}

impl LobbyEventDto {
    /// Decodes; `position(game, moves)` supplies a position the setup does not determine.
    pub(super) fn decode(
        self,
        position: &mut dyn FnMut(&GameId, u32) -> Result<Position, String>,
    ) -> Result<LobbyEventKind, String> {
        let game_id = |id: String| GameId::parse(&id).map_err(|e| format!("game id {id:?}: {e}"));
        Ok(match self {
            LobbyEventDto::GameCreated { game } => {
                let DecodedInfo {
                    mut info,
                    position_known,
                } = game.decode()?;
                if !position_known {
                    info.position = position(&info.id, info.move_count)?;
                }
                LobbyEventKind::GameCreated {
                    game: Box::new(info),
                }
            }
            LobbyEventDto::SeatTaken {
                game_id: id,
                seat,
                display_name,
            } => LobbyEventKind::SeatTaken {
                game_id: game_id(id)?,
                seat,
                display_name,
            },
            LobbyEventDto::GameStarted { game_id: id } => LobbyEventKind::GameStarted {
                game_id: game_id(id)?,
            },
            LobbyEventDto::GameFinished {
                game_id: id,
                result,
            } => LobbyEventKind::GameFinished {
                game_id: game_id(id)?,
                result: result.into(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_to_the_nanosecond() {
        for time in [
            SystemTime::now(),
            UNIX_EPOCH,
            UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789),
            UNIX_EPOCH - Duration::new(5, 1),
        ] {
            assert_eq!(time_from_db(time_to_db(time)), time);
        }
    }

    #[test]
    fn players_round_trip() {
        for player in Player::ALL {
            assert_eq!(parse_player(player_name(player)), Ok(player));
        }
        assert!(parse_player("third").is_err());
    }

    #[test]
    fn a_start_position_rebuilds_from_its_setup() {
        let rules = Preset::Standard.rules();
        let start = Position::new(rules).unwrap();
        assert_eq!(PositionDto::new(&start).rebuild(rules), Some(start));
        // A repetition cannot be rebuilt from the setup: the caller must replay.
        let dto = PositionDto {
            setup: start.to_setup(),
            end: Some(EndReason::Repetition),
        };
        assert_eq!(dto.rebuild(rules), None);
    }

    struct Replayed(Position);

    impl History for Replayed {
        fn record(&mut self, number: u32) -> Result<MoveRecord, String> {
            Err(format!("no move {number}"))
        }
        fn position_after(&mut self, moves: u32) -> Result<Position, String> {
            assert_eq!(moves, self.0.ply(), "replayed from the standard start");
            Ok(self.0)
        }
    }

    /// An untimed game from `start` to `position`, as every game was before schema version 3.
    fn untimed_info(start: Position, position: Position) -> GameInfo {
        let now = UNIX_EPOCH + Duration::new(1_700_000_000, 31);
        GameInfo {
            id: GameId::parse("abc").unwrap(),
            rules: *start.rules(),
            preset: Some(Preset::Standard),
            seats: ByPlayer::new(
                Some(SeatInfo {
                    display_name: "Lan".to_owned(),
                    kind: PlayerKind::Human,
                    account: None,
                }),
                None,
            ),
            status: GameStatus::Finished,
            start,
            position,
            move_count: position.ply() - start.ply(),
            result: None,
            created: now,
            updated: now,
            sequence: 9,
            time_control: TimeControl::Untimed,
            clock: None,
            turn_started: None,
            draw_offer: None,
            last_draw_offer: ByPlayer::default(),
            rematch: Rematch::default(),
            rated: false,
        }
    }

    /// A timed game with every field of schema version 3 set, to values that would show a
    /// field lost, swapped between players or rounded.
    fn timed_info() -> GameInfo {
        let start = Position::new(Preset::Standard.rules()).unwrap();
        let at = |nanos| UNIX_EPOCH + Duration::new(1_700_000_000, nanos);
        GameInfo {
            status: GameStatus::Finished,
            result: Some(GameResult {
                outcome: Some(Outcome::Decisive {
                    winner: Player::Second,
                }),
                scores: ByPlayer::new(10, 15),
                termination: Termination::Timeout,
                ended_by: Some(Player::First),
                ratings: None,
            }),
            time_control: TimeControl::RealTime {
                initial: Duration::new(180, 1),
                increment: Duration::new(2, 3),
            },
            clock: Some(Clock {
                remaining: ByPlayer::new(Duration::new(5, 7), Duration::new(11, 13)),
                first_move: Duration::new(30, 17),
            }),
            turn_started: Some(at(19)),
            draw_offer: Some(Player::Second),
            last_draw_offer: ByPlayer::new(Some(4), None),
            rematch: Rematch {
                of: Some(GameId::parse("before").unwrap()),
                next: Some(GameId::parse("after").unwrap()),
                offered_by: Some(Player::First),
                open_until: Some(at(23)),
            },
            ..untimed_info(start, start)
        }
    }

    #[test]
    fn a_position_ended_by_repetition_comes_from_the_history() {
        let rules = Preset::Standard.rules();
        let start = Position::new(rules).unwrap();
        let mv = start.legal_moves()[0];
        let (after, _) = start.play(mv).unwrap();
        let info = untimed_info(start, after);
        let mut dto = InfoDto::new(&info);
        let json = serde_json::to_string(&dto).unwrap();
        let back: InfoDto = serde_json::from_str(&json).unwrap();
        assert_eq!(back.decode_with(&mut Replayed(start)).unwrap(), info);
        // Pretend it ended by repetition: the setup alone no longer says so.
        dto.position.end = Some(EndReason::Repetition);
        let decoded = dto.clone().decode().unwrap();
        assert!(!decoded.position_known);
        let replayed = dto.decode_with(&mut Replayed(after)).unwrap();
        assert_eq!(replayed.position, after);
    }

    #[test]
    fn clocks_offers_and_rematch_links_round_trip_to_the_nanosecond() {
        let info = timed_info();
        let json = serde_json::to_string(&InfoDto::new(&info)).unwrap();
        let back: InfoDto = serde_json::from_str(&json).unwrap();
        assert_eq!(back.decode().unwrap().info, info);
        for control in [
            TimeControl::Untimed,
            TimeControl::Correspondence {
                per_move: Duration::new(86_400, 5),
            },
        ] {
            // An untimed game has no clock (`Clock::new`), and one stored with a clock is damage.
            let info = GameInfo {
                time_control: control,
                clock: timed_info().clock.filter(|_| control.is_timed()),
                ..timed_info()
            };
            let json = serde_json::to_string(&InfoDto::new(&info)).unwrap();
            let back: InfoDto = serde_json::from_str(&json).unwrap();
            assert_eq!(back.decode().unwrap().info, info, "{control}");
        }
        for termination in [
            Termination::Rules(EndReason::Mandarins),
            Termination::Resignation,
            Termination::Aborted,
            Termination::Timeout,
            Termination::Agreement,
            Termination::Abandonment,
        ] {
            let result = GameResult {
                termination,
                ..timed_info().result.unwrap()
            };
            let json = serde_json::to_string(&ResultDto::from(result)).unwrap();
            let back: ResultDto = serde_json::from_str(&json).unwrap();
            assert_eq!(GameResult::from(back), result);
        }
    }

    /// Move 1 of the standard start.
    struct OneMove(MoveRecord);

    impl OneMove {
        fn new() -> OneMove {
            let start = Position::new(Preset::Standard.rules()).unwrap();
            let mv = start.legal_moves()[0];
            let (position, steps) = start.play(mv).unwrap();
            OneMove(MoveRecord {
                number: 1,
                player: start.to_move(),
                mv,
                steps,
                position,
                time: UNIX_EPOCH + Duration::new(1_700_000_000, 29),
            })
        }
    }

    impl History for OneMove {
        fn record(&mut self, number: u32) -> Result<MoveRecord, String> {
            if number == 1 {
                Ok(self.0.clone())
            } else {
                Err(format!("no move {number}"))
            }
        }
        fn position_after(&mut self, moves: u32) -> Result<Position, String> {
            Err(format!("no position after {moves}"))
        }
    }

    #[test]
    fn every_game_event_round_trips() {
        let mut history = OneMove::new();
        let reading = ClockReading {
            remaining: ByPlayer::new(Duration::new(5, 1), Duration::new(7, 2)),
            measured_at: UNIX_EPOCH + Duration::new(1_700_000_000, 3),
            running: Some(Player::Second),
            deadline: Some(UNIX_EPOCH + Duration::new(1_700_000_007, 5)),
        };
        let result = timed_info().result.unwrap();
        let mut events = vec![
            GameEventKind::MovePlayed {
                record: Arc::new(history.0.clone()),
                clock: Some(reading),
            },
            GameEventKind::TurnStarted {
                player: Player::Second,
                ply: 1,
                refill: Some(3),
                clock: Some(reading),
            },
            GameEventKind::GameOver {
                result,
                clock: Some(ClockReading {
                    running: None,
                    deadline: None,
                    ..reading
                }),
                rematch_until: Some(UNIX_EPOCH + Duration::new(1_700_000_120, 9)),
            },
            GameEventKind::Rematch {
                by: None,
                action: RematchAction::Started {
                    game_id: GameId::parse("next-game").unwrap(),
                },
            },
        ];
        for by in Player::ALL {
            for action in [
                DrawAction::Offered,
                DrawAction::Declined,
                DrawAction::Accepted,
            ] {
                events.push(GameEventKind::Draw { by, action });
            }
            for action in [
                RematchAction::Offered,
                RematchAction::Declined,
                RematchAction::Expired,
            ] {
                events.push(GameEventKind::Rematch {
                    by: Some(by),
                    action,
                });
            }
        }
        for event in events {
            let json = serde_json::to_string(&GameEventDto::new(&event)).unwrap();
            let back: GameEventDto = serde_json::from_str(&json).unwrap();
            assert_eq!(back.decode(&mut history).unwrap(), event, "{json}");
        }
        // A malformed id in a stored rematch is a damaged event, not a panic.
        let bad = r#"{"type":"rematch","by":null,"action":{"started":{"game_id":"no spaces"}}}"#;
        let dto: GameEventDto = serde_json::from_str(bad).unwrap();
        assert!(dto.decode(&mut history).unwrap_err().contains("no spaces"));
    }

    /// What no server writes reads as damage, not as another game: a timed game whose
    /// `time_control` key is gone (it read as untimed with its clock running), a rated game
    /// without a time control, a clock of centuries.
    #[test]
    fn a_clock_without_its_time_control_or_beyond_any_clock_is_damage() {
        let json = serde_json::to_string(&InfoDto::new(&timed_info())).unwrap();
        let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
        value.as_object_mut().unwrap().remove("time_control");
        let cut: InfoDto = serde_json::from_value(value.clone()).unwrap();
        assert!(
            cut.decode()
                .unwrap_err()
                .contains("has a clock but no time control")
        );
        value.as_object_mut().unwrap().remove("clock");
        value["rated"] = serde_json::Value::Bool(true);
        let rated: InfoDto = serde_json::from_value(value).unwrap();
        assert!(
            rated
                .decode()
                .unwrap_err()
                .contains("rated but has no time control")
        );
        let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
        value["clock"]["remaining"]["first"] = serde_json::json!(9_000_000_000_000_000_000u64);
        let huge: InfoDto = serde_json::from_value(value).unwrap();
        assert!(huge.decode().unwrap_err().contains("over ten years"));
        // The same game as written decodes.
        let sound: InfoDto = serde_json::from_str(&json).unwrap();
        assert_eq!(sound.decode().unwrap().info, timed_info());
    }

    /// A stored key that a damaged page changed by one byte read as the field left out: a timed
    /// game as untimed, a rated one as unrated. Every key of a stored game and event is checked.
    #[test]
    fn a_damaged_key_is_refused_not_read_as_missing() {
        fn keys(value: &serde_json::Value, out: &mut Vec<String>) {
            match value {
                serde_json::Value::Object(map) => {
                    for (key, inner) in map {
                        out.push(key.clone());
                        keys(inner, out);
                    }
                }
                serde_json::Value::Array(items) => items.iter().for_each(|i| keys(i, out)),
                _ => {}
            }
        }
        let info = serde_json::to_string(&InfoDto::new(&timed_info())).unwrap();
        let over = serde_json::to_string(&GameEventDto::new(&GameEventKind::Rematch {
            by: Some(Player::First),
            action: RematchAction::Declined,
        }))
        .unwrap();
        let mut checked = 0;
        for json in [&info, &over] {
            let mut found = Vec::new();
            keys(&serde_json::from_str(json).unwrap(), &mut found);
            for key in found {
                let damaged = json.replacen(&format!("\"{key}\":"), &format!("\"{key}x\":"), 1);
                let refused = if json == &info {
                    serde_json::from_str::<InfoDto>(&damaged).is_err()
                } else {
                    serde_json::from_str::<GameEventDto>(&damaged).is_err()
                };
                assert!(refused, "{damaged}");
                checked += 1;
            }
        }
        assert!(checked > 20, "{checked} keys");
    }

    /// Removes the keys schema version 3 added, wherever they are: what the previous version
    /// wrote for the same game or event.
    fn without_version_3_keys(json: &str) -> String {
        fn strip(value: &mut serde_json::Value) {
            match value {
                serde_json::Value::Object(map) => {
                    for key in [
                        "time_control",
                        "clock",
                        "turn_started",
                        "draw_offer",
                        "last_draw_offer",
                        "rematch",
                        "rematch_until",
                    ] {
                        map.remove(key);
                    }
                    map.values_mut().for_each(strip);
                }
                serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
                _ => {}
            }
        }
        let mut value: serde_json::Value = serde_json::from_str(json).unwrap();
        strip(&mut value);
        value.to_string()
    }

    #[test]
    fn rows_from_before_version_3_read_as_untimed_games_without_offers() {
        let start = Position::new(Preset::Standard.rules()).unwrap();
        let untimed = untimed_info(start, start);
        // Written as the previous version did, from the timed game: only the old fields.
        let old =
            without_version_3_keys(&serde_json::to_string(&InfoDto::new(&timed_info())).unwrap());
        assert!(!old.contains("clock") && !old.contains("rematch"), "{old}");
        let back: InfoDto = serde_json::from_str(&old).unwrap();
        let back = back.decode().unwrap().info;
        assert_eq!(back.time_control, TimeControl::Untimed);
        assert_eq!(back.clock, None);
        assert_eq!(back.turn_started, None);
        assert_eq!(back.draw_offer, None);
        assert_eq!(back.last_draw_offer, ByPlayer::default());
        assert_eq!(back.rematch, Rematch::default());
        assert!(back.log_closed());
        // Everything the old row had is kept.
        assert_eq!(back.result, timed_info().result);
        assert_eq!(
            GameInfo {
                result: None,
                ..back
            },
            untimed
        );

        let mut history = OneMove::new();
        let old_events = [
            (
                r#"{"type":"move_played","number":1}"#,
                GameEventKind::MovePlayed {
                    record: Arc::new(history.0.clone()),
                    clock: None,
                },
            ),
            (
                r#"{"type":"turn_started","player":"second","ply":1,"refill":null}"#,
                GameEventKind::TurnStarted {
                    player: Player::Second,
                    ply: 1,
                    refill: None,
                    clock: None,
                },
            ),
            (
                r#"{"type":"game_over","result":{"outcome":null,"scores":{"first":0,"second":0},"termination":"aborted","ended_by":"first"}}"#,
                GameEventKind::GameOver {
                    result: GameResult {
                        outcome: None,
                        scores: ByPlayer::new(0, 0),
                        termination: Termination::Aborted,
                        ended_by: Some(Player::First),
                        ratings: None,
                    },
                    clock: None,
                    rematch_until: None,
                },
            ),
        ];
        for (json, event) in old_events {
            let dto: GameEventDto = serde_json::from_str(json).unwrap();
            assert_eq!(dto.decode(&mut history).unwrap(), event, "{json}");
            // The old form is the new form less the new keys.
            let new = serde_json::to_string(&GameEventDto::new(&event)).unwrap();
            let expected: serde_json::Value = serde_json::from_str(json).unwrap();
            let stripped: serde_json::Value =
                serde_json::from_str(&without_version_3_keys(&new)).unwrap();
            assert_eq!(stripped, expected);
        }
    }
}
