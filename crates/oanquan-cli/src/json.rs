//! `--json` output: proto messages as plain JSON objects with lowercase enum names.
//!
//! The generated proto types do not implement serde, and their raw shape (enums as numbers,
//! oneofs as nested options) is awkward for scripts, so the shape is written out here once.
//! Field names follow the proto; enum values drop their prefix (`PLAYER_FIRST` → `"first"`);
//! unknown enum numbers become `"unknown"`; unset players are `null`.

use oanquan_proto::v1::{
    Direction, EmptyMandarinRule, EndCondition, EndReason, Game, GameEvent, GameResult, GameStatus,
    MandarinSetup, MoveRecord, Outcome, PlayerKind, PlayerPair, Position, Preset, RuleSet, Seat,
    Step, game_event, step,
};
use serde_json::{Value, json};

use crate::moves::{LocalMove, Side};

fn enum_name<E>(value: i32, name: impl Fn(E) -> &'static str) -> Value
where
    E: TryFrom<i32>,
{
    match E::try_from(value) {
        Ok(e) => Value::from(name(e)),
        Err(_) => Value::from("unknown"),
    }
}

pub fn player(value: i32) -> Value {
    Side::from_i32(value).map_or(Value::Null, |s| Value::from(s.name()))
}

pub fn status_name(status: GameStatus) -> &'static str {
    match status {
        GameStatus::Unspecified => "unspecified",
        GameStatus::WaitingForPlayers => "waiting",
        GameStatus::Active => "active",
        GameStatus::Finished => "finished",
        GameStatus::Aborted => "aborted",
    }
}

pub fn end_reason_name(reason: EndReason) -> &'static str {
    match reason {
        EndReason::Unspecified => "none",
        EndReason::Mandarins => "mandarins",
        EndReason::Repetition => "repetition",
        EndReason::PlyLimit => "ply limit",
        EndReason::Resignation => "resignation",
        EndReason::Aborted => "aborted",
    }
}

pub fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Unspecified => "none",
        Outcome::FirstWins => "first wins",
        Outcome::SecondWins => "second wins",
        Outcome::Draw => "draw",
    }
}

fn pair(p: Option<&PlayerPair>) -> Value {
    p.map_or(
        Value::Null,
        |p| json!({"first": p.first, "second": p.second}),
    )
}

pub fn rule_set(r: &RuleSet) -> Value {
    json!({
        "mandarin_setup": enum_name(r.mandarin_setup, |e: MandarinSetup| match e {
            MandarinSetup::Unspecified => "unspecified",
            MandarinSetup::Stones => "stones",
            MandarinSetup::Piece => "piece",
        }),
        "quan_value": r.quan_value,
        "empty_mandarin": enum_name(r.empty_mandarin, |e: EmptyMandarinRule| match e {
            EmptyMandarinRule::Unspecified => "unspecified",
            EmptyMandarinRule::EndsTurn => "ends_turn",
            EmptyMandarinRule::EmptySquare => "empty_square",
        }),
        "protected_plies": r.protected_plies,
        "immature_mandarin_min_stones": r.immature_mandarin_min_stones,
        "end_condition": enum_name(r.end_condition, |e: EndCondition| match e {
            EndCondition::Unspecified => "unspecified",
            EndCondition::MandarinSquaresEmpty => "mandarin_squares_empty",
            EndCondition::PiecesCaptured => "pieces_captured",
        }),
        "repetition_limit": r.repetition_limit,
        "max_plies": r.max_plies,
    })
}

pub fn preset(p: &Preset) -> Value {
    json!({
        "name": p.name,
        "description": p.description,
        "rule_set": p.rule_set.as_ref().map_or(Value::Null, rule_set),
    })
}

pub fn position(p: &Position) -> Value {
    json!({
        "squares": p.squares,
        "pieces": p.pieces,
        "captured": pair(p.captured.as_ref()),
        "captured_pieces": pair(p.captured_pieces.as_ref()),
        "scores": pair(p.scores.as_ref()),
        "to_move": player(p.to_move),
        "ply": p.ply,
        "over": p.over,
        "end_reason": enum_name(p.end_reason, end_reason_name),
        "outcome": enum_name(p.outcome, outcome_name),
        "notation": p.notation,
    })
}

fn seat(s: Option<&Seat>) -> Value {
    let Some(s) = s else { return Value::Null };
    json!({
        "occupied": s.occupied,
        "display_name": s.display_name,
        "kind": enum_name(s.kind, |k: PlayerKind| match k {
            PlayerKind::Unspecified => "none",
            PlayerKind::Human => "human",
            PlayerKind::Computer => "computer",
        }),
        "computer_level": s.computer_level,
    })
}

pub fn result(r: &GameResult) -> Value {
    json!({
        "outcome": enum_name(r.outcome, outcome_name),
        "winner": player(r.winner),
        "scores": pair(r.scores.as_ref()),
        "end_reason": enum_name(r.end_reason, end_reason_name),
        "ended_by": player(r.ended_by),
    })
}

fn timestamp(t: Option<&prost_types::Timestamp>) -> Value {
    t.map_or(
        Value::Null,
        |t| json!({"seconds": t.seconds, "nanos": t.nanos}),
    )
}

pub fn game(g: &Game) -> Value {
    json!({
        "id": g.id,
        "preset": g.preset,
        "status": enum_name(g.status, status_name),
        "first_seat": seat(g.first_seat.as_ref()),
        "second_seat": seat(g.second_seat.as_ref()),
        "move_count": g.move_count,
        "rule_set": g.rule_set.as_ref().map_or(Value::Null, rule_set),
        "position": g.position.as_ref().map_or(Value::Null, position),
        "result": g.result.as_ref().map_or(Value::Null, result),
        "create_time": timestamp(g.create_time.as_ref()),
        "update_time": timestamp(g.update_time.as_ref()),
    })
}

pub fn step(s: &Step) -> Value {
    let Some(kind) = s.kind.as_ref() else {
        return json!({"type": "unknown"});
    };
    match kind {
        step::Kind::PickUp(p) => {
            json!({"type": "pick_up", "square": p.square, "stones": p.stones, "relay": p.relay})
        }
        step::Kind::Sow(x) => json!({"type": "sow", "square": x.square}),
        step::Kind::StopAtMandarin(x) => json!({"type": "stop_at_mandarin", "square": x.square}),
        step::Kind::StopTwoEmpty(x) => {
            json!({"type": "stop_two_empty", "gap": x.gap, "next": x.next})
        }
        step::Kind::Capture(c) => json!({
            "type": "capture", "square": c.square, "stones": c.stones, "pieces": c.pieces,
            "player": player(c.player),
        }),
        step::Kind::CaptureProtected(x) => {
            json!({"type": "capture_protected", "square": x.square})
        }
        step::Kind::CaptureImmature(x) => json!({"type": "capture_immature", "square": x.square}),
        step::Kind::Refill(r) => json!({
            "type": "refill", "player": player(r.player), "captured_after": r.captured_after,
        }),
        step::Kind::GameOver(g) => json!({
            "type": "game_over", "reason": enum_name(g.reason, end_reason_name),
            "collected": pair(g.collected.as_ref()),
        }),
    }
}

pub fn move_record(r: &MoveRecord) -> Value {
    let side = Side::from_i32(r.player);
    let mv = r.r#move.as_ref();
    let local = side
        .zip(mv)
        .and_then(|(side, mv)| LocalMove::from_proto(side, mv));
    json!({
        "number": r.number,
        "player": player(r.player),
        "square": mv.map(|m| m.square),
        "direction": mv.map_or(Value::Null, |m| enum_name(m.direction, |d: Direction| match d {
            Direction::Unspecified => "unspecified",
            Direction::Left => "left",
            Direction::Right => "right",
        })),
        // The mover's own terms, as typed at the `play` prompt.
        "local": local.map(LocalMove::short),
        "steps": r.steps.iter().map(step).collect::<Vec<_>>(),
        "position": r.position.as_ref().map_or(Value::Null, position),
        "play_time": timestamp(r.play_time.as_ref()),
    })
}

/// One `watch --json` line. Heartbeats are not printed, so they have no shape here.
pub fn event(e: &GameEvent) -> Value {
    let mut v = match e.kind.as_ref() {
        Some(game_event::Kind::Snapshot(s)) => json!({
            "type": "snapshot",
            "game": s.game.as_ref().map_or(Value::Null, game),
            "move_count": s.move_count,
        }),
        Some(game_event::Kind::PlayerJoined(j)) => json!({
            "type": "player_joined", "seat": player(j.seat), "display_name": j.display_name,
        }),
        Some(game_event::Kind::GameStarted(s)) => json!({
            "type": "game_started", "game": s.game.as_ref().map_or(Value::Null, game),
        }),
        Some(game_event::Kind::MovePlayed(m)) => json!({
            "type": "move_played",
            "record": m.record.as_ref().map_or(Value::Null, move_record),
        }),
        Some(game_event::Kind::TurnStarted(t)) => json!({
            "type": "turn_started", "player": player(t.player), "ply": t.ply,
            "refill": t.refill.as_ref().map_or(Value::Null, |r| json!({
                "player": player(r.player), "captured_after": r.captured_after,
            })),
        }),
        Some(game_event::Kind::GameOver(g)) => json!({
            "type": "game_over", "result": g.result.as_ref().map_or(Value::Null, result),
        }),
        Some(game_event::Kind::Heartbeat(_)) => json!({"type": "heartbeat"}),
        None => json!({"type": "unknown"}),
    };
    if let Value::Object(map) = &mut v {
        map.insert("sequence".into(), Value::from(e.sequence));
        map.insert("time".into(), timestamp(e.time.as_ref()));
    }
    v
}

/// A move the client learnt about from ListMoves instead of the stream (after a resume that
/// came back as a fresh snapshot). Same shape as a `move_played` event, without a sequence.
pub fn recovered_move(r: &MoveRecord) -> Value {
    json!({"type": "move_played", "sequence": Value::Null, "recovered": true, "record": move_record(r)})
}
