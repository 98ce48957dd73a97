//! Domain events and snapshots → the protobuf events of `WatchGame` and `WatchLobby`.

use std::time::SystemTime;

use oanquan_proto::v1 as pb;

use super::output::{
    game_out, kind_out, move_record_out, player_out, refill_out, result_out, timestamp,
};
use crate::domain::{GameEvent, GameEventKind, GameInfo, LobbyEvent, LobbyEventKind};

/// A game event.
#[must_use]
pub fn game_event_out(event: &GameEvent) -> pb::GameEvent {
    use pb::game_event as ge;
    let kind = match &event.kind {
        GameEventKind::PlayerJoined {
            seat,
            display_name,
            kind,
        } => ge::Kind::PlayerJoined(ge::PlayerJoined {
            seat: player_out(*seat),
            display_name: display_name.clone(),
            kind: kind_out(*kind),
        }),
        GameEventKind::GameStarted { game } => ge::Kind::GameStarted(ge::GameStarted {
            game: Some(game_out(game)),
        }),
        GameEventKind::MovePlayed { record } => ge::Kind::MovePlayed(ge::MovePlayed {
            record: Some(move_record_out(record)),
        }),
        GameEventKind::TurnStarted {
            player,
            ply,
            refill,
        } => ge::Kind::TurnStarted(ge::TurnStarted {
            player: player_out(*player),
            ply: *ply,
            refill: refill.map(|captured_after| refill_out(*player, captured_after)),
        }),
        GameEventKind::GameOver { result } => ge::Kind::GameOver(ge::GameOver {
            result: Some(result_out(result)),
        }),
    };
    pb::GameEvent {
        sequence: event.sequence,
        time: timestamp(event.time),
        kind: Some(kind),
    }
}

/// A game snapshot (not a real event: it carries the sequence it reflects).
#[must_use]
pub fn game_snapshot_out(game: &GameInfo, sequence: u64) -> pb::GameEvent {
    pb::GameEvent {
        sequence,
        time: timestamp(SystemTime::now()),
        kind: Some(pb::game_event::Kind::Snapshot(pb::game_event::Snapshot {
            game: Some(game_out(game)),
            move_count: game.move_count,
        })),
    }
}

/// A game heartbeat.
#[must_use]
pub fn game_heartbeat_out(sequence: u64) -> pb::GameEvent {
    pb::GameEvent {
        sequence,
        time: timestamp(SystemTime::now()),
        kind: Some(pb::game_event::Kind::Heartbeat(
            pb::game_event::Heartbeat {},
        )),
    }
}

/// A lobby event.
#[must_use]
pub fn lobby_event_out(event: &LobbyEvent) -> pb::LobbyEvent {
    use pb::lobby_event as le;
    let kind = match &event.kind {
        LobbyEventKind::GameCreated { game } => le::Kind::GameCreated(le::GameCreated {
            game: Some(game_out(game)),
        }),
        LobbyEventKind::SeatTaken {
            game_id,
            seat,
            display_name,
        } => le::Kind::SeatTaken(le::SeatTaken {
            game_id: game_id.to_string(),
            seat: player_out(*seat),
            display_name: display_name.clone(),
        }),
        LobbyEventKind::GameStarted { game_id } => le::Kind::GameStarted(le::GameStarted {
            game_id: game_id.to_string(),
        }),
        LobbyEventKind::GameFinished { game_id, result } => {
            le::Kind::GameFinished(le::GameFinished {
                game_id: game_id.to_string(),
                result: Some(result_out(result)),
            })
        }
    };
    pb::LobbyEvent {
        sequence: event.sequence,
        time: timestamp(event.time),
        kind: Some(kind),
    }
}

/// A lobby snapshot.
#[must_use]
pub fn lobby_snapshot_out(games: &[GameInfo], sequence: u64) -> pb::LobbyEvent {
    pb::LobbyEvent {
        sequence,
        time: timestamp(SystemTime::now()),
        kind: Some(pb::lobby_event::Kind::Snapshot(pb::lobby_event::Snapshot {
            games: games.iter().map(game_out).collect(),
        })),
    }
}

/// A lobby heartbeat.
#[must_use]
pub fn lobby_heartbeat_out(sequence: u64) -> pb::LobbyEvent {
    pb::LobbyEvent {
        sequence,
        time: timestamp(SystemTime::now()),
        kind: Some(pb::lobby_event::Kind::Heartbeat(
            pb::lobby_event::Heartbeat {},
        )),
    }
}
