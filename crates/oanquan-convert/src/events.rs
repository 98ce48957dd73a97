//! Domain events and snapshots → the protobuf events of `WatchGame` and `WatchLobby`.

use oanquan_proto::v1 as pb;

use super::output::{
    clocks_out, game_out, game_out_at, kind_out, move_record_out, optional_player_out, player_out,
    refill_out, result_out, seek_out, timestamp,
};
use oanquan_game::seek::{SeekInfo, SeekUpdate};
use oanquan_game::{
    DrawAction, GameEvent, GameEventKind, GameInfo, LobbyEvent, LobbyEventKind, RematchAction,
};

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
            game: Some(game_out_at(game, event.time)),
        }),
        GameEventKind::MovePlayed { record, clock } => ge::Kind::MovePlayed(ge::MovePlayed {
            record: Some(move_record_out(record)),
            clocks: clock.as_ref().map(clocks_out),
        }),
        GameEventKind::TurnStarted {
            player,
            ply,
            refill,
            clock,
        } => ge::Kind::TurnStarted(ge::TurnStarted {
            player: player_out(*player),
            ply: *ply,
            refill: refill.map(|captured_after| refill_out(*player, captured_after)),
            clocks: clock.as_ref().map(clocks_out),
        }),
        GameEventKind::GameOver {
            result,
            clock,
            rematch_until,
        } => ge::Kind::GameOver(ge::GameOver {
            result: Some(result_out(result)),
            clocks: clock.as_ref().map(clocks_out),
            rematch_deadline: rematch_until.and_then(timestamp),
        }),
        GameEventKind::Draw { by, action } => ge::Kind::Draw(ge::Draw {
            by: player_out(*by),
            action: match action {
                DrawAction::Offered => ge::DrawAction::Offered,
                DrawAction::Declined => ge::DrawAction::Declined,
                DrawAction::Accepted => ge::DrawAction::Accepted,
            }
            .into(),
        }),
        GameEventKind::Rematch { by, action } => {
            let (action, game_id) = match action {
                RematchAction::Offered => (ge::RematchAction::Offered, String::new()),
                RematchAction::Declined => (ge::RematchAction::Declined, String::new()),
                RematchAction::Expired => (ge::RematchAction::Expired, String::new()),
                RematchAction::Started { game_id } => {
                    (ge::RematchAction::Started, game_id.to_string())
                }
            };
            ge::Kind::Rematch(ge::Rematch {
                by: optional_player_out(*by),
                action: action.into(),
                game_id,
            })
        }
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
        time: timestamp(oanquan_game::service_clock::now()),
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
        time: timestamp(oanquan_game::service_clock::now()),
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
            game: Some(game_out_at(game, event.time)),
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

/// A lobby snapshot, with the seeks open now.
#[must_use]
pub fn lobby_snapshot_out(games: &[GameInfo], seeks: &[SeekInfo], sequence: u64) -> pb::LobbyEvent {
    pb::LobbyEvent {
        sequence,
        time: timestamp(oanquan_game::service_clock::now()),
        kind: Some(pb::lobby_event::Kind::Snapshot(pb::lobby_event::Snapshot {
            games: games.iter().map(game_out).collect(),
            seeks: seeks.iter().map(seek_out).collect(),
        })),
    }
}

/// A change to the seeks, or all of them (`None`: the list), at lobby sequence `sequence`.
#[must_use]
pub fn lobby_seeks_out(update: SeekChange, sequence: u64) -> pb::LobbyEvent {
    use pb::lobby_event as le;
    let kind = match update {
        SeekChange::Update(SeekUpdate::Added(seek)) => le::Kind::SeekAdded(le::SeekAdded {
            seek: Some(seek_out(&seek)),
        }),
        SeekChange::Update(SeekUpdate::Removed { id, .. }) => {
            le::Kind::SeekRemoved(le::SeekRemoved { seek_id: id })
        }
        SeekChange::List(seeks) => le::Kind::SeekList(le::SeekList {
            seeks: seeks.iter().map(seek_out).collect(),
        }),
    };
    pb::LobbyEvent {
        sequence,
        time: timestamp(oanquan_game::service_clock::now()),
        kind: Some(kind),
    }
}

/// What a lobby stream tells of the seeks.
#[derive(Debug, Clone)]
pub enum SeekChange {
    /// One seek came or went.
    Update(SeekUpdate),
    /// All of them.
    List(Vec<SeekInfo>),
}

/// A lobby heartbeat.
#[must_use]
pub fn lobby_heartbeat_out(sequence: u64) -> pb::LobbyEvent {
    pb::LobbyEvent {
        sequence,
        time: timestamp(oanquan_game::service_clock::now()),
        kind: Some(pb::lobby_event::Kind::Heartbeat(
            pb::lobby_event::Heartbeat {},
        )),
    }
}
