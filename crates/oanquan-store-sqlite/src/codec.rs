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

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oanquan_ai::Level;
use oanquan_rules::{ByPlayer, EndReason, Outcome, Player, Position, Preset, Rules, Setup};
use serde::{Deserialize, Serialize};

use oanquan_game::{
    GameEventKind, GameId, GameInfo, GameResult, GameStatus, LobbyEventKind, MoveRecord,
    PlayerKind, SeatInfo, Termination,
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

/// The `games.status` column.
pub(super) const fn status_name(status: GameStatus) -> &'static str {
    match status {
        GameStatus::WaitingForPlayers => "waiting",
        GameStatus::Active => "active",
        GameStatus::Finished => "finished",
        GameStatus::Aborted => "aborted",
    }
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
struct SeatDto {
    display_name: String,
    kind: KindDto,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum TerminationDto {
    Rules(EndReason),
    Resignation,
    Aborted,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct ResultDto {
    outcome: Option<Outcome>,
    scores: ByPlayer<i32>,
    termination: TerminationDto,
    ended_by: Option<Player>,
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
            },
            ended_by: result.ended_by,
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
            },
            ended_by: result.ended_by,
        }
    }
}

/// A position: its setup and how it ended.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
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
        }
    }

    pub(super) fn decode(self) -> Result<DecodedInfo, String> {
        let id = GameId::parse(&self.id).map_err(|e| format!("game id {:?}: {e}", self.id))?;
        let start = Position::from_setup(self.start, self.rules)
            .map_err(|e| format!("start position of {id}: {e}"))?;
        let position = self.position.rebuild(self.rules);
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
            },
        })
    }
}

/// A game event as stored in `game_events.event`.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    },
    TurnStarted {
        player: Player,
        ply: u32,
        refill: Option<i32>,
    },
    GameOver {
        result: ResultDto,
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
            GameEventKind::MovePlayed { record } => GameEventDto::MovePlayed {
                number: record.number,
            },
            GameEventKind::TurnStarted {
                player,
                ply,
                refill,
            } => GameEventDto::TurnStarted {
                player: *player,
                ply: *ply,
                refill: *refill,
            },
            GameEventKind::GameOver { result } => GameEventDto::GameOver {
                result: (*result).into(),
            },
        }
    }
}

/// A lobby event as stored in `lobby_events.event`.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
            GameEventDto::MovePlayed { number } => GameEventKind::MovePlayed {
                record: Box::new(history.record(number)?),
            },
            GameEventDto::TurnStarted {
                player,
                ply,
                refill,
            } => GameEventKind::TurnStarted {
                player,
                ply,
                refill,
            },
            GameEventDto::GameOver { result } => GameEventKind::GameOver {
                result: result.into(),
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
            assert_eq!(moves, 3);
            Ok(self.0)
        }
    }

    #[test]
    fn a_position_ended_by_repetition_comes_from_the_history() {
        let rules = Preset::Standard.rules();
        let start = Position::new(rules).unwrap();
        let mv = start.legal_moves()[0];
        let (after, _) = start.play(mv).unwrap();
        let now = SystemTime::now();
        let info = GameInfo {
            id: GameId::parse("abc").unwrap(),
            rules,
            preset: Some(Preset::Standard),
            seats: ByPlayer::new(
                Some(SeatInfo {
                    display_name: "Lan".to_owned(),
                    kind: PlayerKind::Human,
                }),
                None,
            ),
            status: GameStatus::Finished,
            start,
            position: after,
            move_count: 3,
            result: None,
            created: now,
            updated: now,
            sequence: 9,
        };
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
}
