//! The server's protobuf → domain conversions on arbitrary wire bytes, exactly as the gRPC
//! adapters call them: the first byte picks a request message, the rest is decoded with prost.
//! Nothing may panic; whatever converts is played and converted back to protobuf.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oanquan_proto::v1 as pb;
use oanquan_convert as convert;
use prost::Message as _;

fn rules_position_move(
    rules: Option<&pb::RulesSpec>,
    position: Option<&pb::Position>,
    mv: Option<&pb::Move>,
) {
    let Ok((rules, _preset)) = convert::rules_spec(rules, "rules") else {
        return;
    };
    let _ = convert::rule_set_out(&rules);
    let Ok(position) = convert::position(position, rules, "position") else {
        return;
    };
    let out = convert::position_out(&position);
    // What the server prints it reads back as the same position. A finished one prints no
    // player to move, so it reads back with one that no longer matters: all else is the same.
    let back = convert::position(Some(&out), rules, "position").expect("position_out reads back");
    if position.is_over() {
        let mut setup = back.to_setup();
        setup.to_move = position.to_move();
        assert_eq!(setup, position.to_setup());
        assert_eq!(back.end_reason(), position.end_reason());
    } else {
        assert_eq!(back, position);
    }
    for &legal in position.legal_moves().iter() {
        let out = convert::move_out(legal);
        assert_eq!(convert::mv(Some(&out), "move"), Ok(legal));
    }
    let Ok(mv) = convert::mv(mv, "move") else {
        return;
    };
    if let Ok((after, steps)) = position.play(mv) {
        let _ = convert::position_out(&after);
        let _ = convert::steps_out(&steps);
    }
}

/// A time control the server accepts prints back to the same one.
fn time_control(control: Option<&pb::TimeControl>) {
    if let Ok(control) = convert::time_control(control, "time_control") {
        let out = convert::time_control_out(control);
        assert_eq!(
            convert::time_control(out.as_ref(), "time_control"),
            Ok(control)
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&kind, bytes)) = data.split_first() else {
        return;
    };
    match kind % 8 {
        0 => {
            let Ok(request) = pb::CreateGameRequest::decode(bytes) else {
                return;
            };
            let _ = convert::optional_player(request.seat, "seat");
            time_control(request.time_control.as_ref());
            if let Ok((rules, _)) = convert::rules_spec(request.rules.as_ref(), "rules")
                && let Some(start) = request.start_position.as_ref()
            {
                let _ = convert::position(Some(start), rules, "start_position");
            }
        }
        1 => {
            if let Ok(request) = pb::ApplyMoveRequest::decode(bytes) {
                rules_position_move(
                    request.rules.as_ref(),
                    request.position.as_ref(),
                    request.r#move.as_ref(),
                );
            }
        }
        2 => {
            if let Ok(request) = pb::LegalMovesRequest::decode(bytes) {
                rules_position_move(request.rules.as_ref(), request.position.as_ref(), None);
            }
        }
        3 => {
            if let Ok(request) = pb::PlayMoveRequest::decode(bytes) {
                let _ = convert::game_id(&request.game_id, "game_id");
                let _ = convert::mv(request.r#move.as_ref(), "move");
            }
        }
        4 => {
            if let Ok(request) = pb::ListGamesRequest::decode(bytes) {
                let _ = convert::filter(request.filter);
            }
        }
        5 => {
            if let Ok(request) = pb::JoinGameRequest::decode(bytes) {
                let _ = convert::game_id(&request.game_id, "game_id");
            }
        }
        6 => {
            if let Ok(request) = pb::WatchGameRequest::decode(bytes) {
                let _ = convert::game_id(&request.game_id, "game_id");
            }
        }
        7 if bytes.first().is_some_and(|b| b % 2 == 0) => {
            if let Ok(request) = pb::SeekRequest::decode(&bytes[1..]) {
                let _ = convert::rules_spec(request.rules.as_ref(), "rules");
                time_control(request.time_control.as_ref());
                let _ = convert::computer_fallback(request.computer.as_ref(), "computer");
            }
        }
        _ => {
            if let Ok(set) = pb::RuleSet::decode(bytes)
                && let Ok(rules) = convert::rule_set(&set, "rules.rule_set")
            {
                // A rule set the server accepts prints back to the same rules.
                let out = convert::rule_set_out(&rules);
                assert_eq!(convert::rule_set(&out, "rules.rule_set"), Ok(rules));
            }
        }
    }
});
