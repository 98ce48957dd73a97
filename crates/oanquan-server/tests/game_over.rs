//! A finished position names no player to move, and `LegalMoves` says whether a position is over
//! and why, for a position taken from a hosted game as it is.

mod common;

use common::*;
use oanquan_proto::v1 as pb;
use tonic::Code;

/// Standard rules, FIRST to move, one move from the end: square 0 is already empty, and square
/// 3's single stone sown to the right lands on 4, so the empty 5 lets FIRST capture mandarin
/// square 6, emptying the last mandarin square.
fn one_move_from_the_end() -> pb::Position {
    pb::Position {
        squares: vec![0, 0, 0, 1, 0, 0, 10, 5, 5, 5, 5, 5],
        captured: Some(pb::PlayerPair {
            first: 20,
            second: 14,
        }),
        to_move: pb::Player::First.into(),
        ply: 20,
        ..pb::Position::default()
    }
}

fn legal_moves_request(game: &pb::Game, position: Option<pb::Position>) -> pb::LegalMovesRequest {
    pb::LegalMovesRequest {
        game: None,
        rules: Some(pb::RulesSpec {
            kind: game.rule_set.map(pb::rules_spec::Kind::RuleSet),
        }),
        position,
    }
}

#[tokio::test]
async fn a_finished_game_has_no_player_to_move_and_legal_moves_says_why() {
    let server = start(config()).await;
    let mut games = server.games().await;
    let mut rules = server.rules().await;
    let created = games
        .create_game(pb::CreateGameRequest {
            rules: preset("standard"),
            start_position: Some(one_move_from_the_end()),
            seat: pb::Player::First.into(),
            display_name: "Lan".into(),
            computer: None,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let id = created.game.unwrap().id;
    games
        .join_game(pb::JoinGameRequest {
            game_id: id.clone(),
            display_name: "Minh".into(),
        })
        .await
        .unwrap();
    // Running: a player to move, and LegalMoves on the game's position (as GetGame returns it)
    // says the position is not over.
    let running = get_game(&mut games, &id).await;
    let position = running.position.clone().unwrap();
    assert_eq!(position.to_move(), pb::Player::First);
    assert!(!position.over);
    let legal = rules
        .legal_moves(legal_moves_request(&running, Some(position)))
        .await
        .unwrap()
        .into_inner();
    assert!(!legal.over);
    assert_eq!(legal.end_reason(), pb::EndReason::Unspecified);
    assert_eq!(legal.outcome(), pb::Outcome::Unspecified);
    assert!(legal.moves.contains(&pb::Move {
        square: Some(3),
        direction: pb::Direction::Right.into(),
    }));

    // The last move ends the game by the rules.
    let played = play(
        &mut games,
        &id,
        &created.player_token,
        3,
        pb::Direction::Right,
        Some(20),
    )
    .await
    .unwrap();
    let after = played.record.unwrap().position.unwrap();
    assert!(after.over);
    assert_eq!(after.to_move(), pb::Player::Unspecified, "{after:?}");

    let finished = get_game(&mut games, &id).await;
    assert_eq!(finished.status(), pb::GameStatus::Finished);
    let result = finished.result.unwrap();
    let position = finished.position.clone().unwrap();
    assert!(position.over);
    assert_eq!(position.end_reason(), pb::EndReason::Mandarins);
    assert_eq!(position.to_move(), pb::Player::Unspecified, "{position:?}");
    // The notation is the engine's text form, which always names a player: not the API's word
    // on who moves.

    // GetGame's position goes back to LegalMoves as it is: over, why, and who won.
    let legal = rules
        .legal_moves(legal_moves_request(&finished, Some(position.clone())))
        .await
        .unwrap()
        .into_inner();
    assert!(legal.over);
    assert!(legal.moves.is_empty());
    assert_eq!(legal.end_reason(), pb::EndReason::Mandarins);
    assert_eq!(legal.outcome, result.outcome);
    assert_ne!(legal.outcome(), pb::Outcome::Unspecified);

    // So does it to ApplyMove, which refuses to play on.
    let status = rules
        .apply_move(pb::ApplyMoveRequest {
            game: None,
            rules: legal_moves_request(&finished, None).rules,
            position: Some(position),
            r#move: mv(3, pb::Direction::Right),
        })
        .await
        .unwrap_err();
    assert_reason(&status, Code::FailedPrecondition, "ERROR_REASON_GAME_OVER");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn only_a_finished_position_may_leave_the_player_to_move_unset() {
    let server = start(config()).await;
    let mut rules = server.rules().await;
    let standard = || preset("standard");

    // ApplyMove's ending move: the resulting position names nobody.
    let applied = rules
        .apply_move(pb::ApplyMoveRequest {
            game: None,
            rules: standard(),
            position: Some(one_move_from_the_end()),
            r#move: mv(3, pb::Direction::Right),
        })
        .await
        .unwrap()
        .into_inner();
    let position = applied.position.unwrap();
    assert!(position.over);
    assert_eq!(position.to_move(), pb::Player::Unspecified);

    // At the ply limit with every stone still on the board: over by the ply alone, but the
    // move that ends a game collects the stones, so no game shows this; reading a winner off
    // it would leave them out. Refused, with or without a player to move.
    let mut at_limit = pb::Position {
        squares: vec![10, 5, 5, 5, 5, 5, 10, 5, 5, 5, 5, 5],
        ply: 300,
        ..pb::Position::default()
    };
    for to_move in [pb::Player::Unspecified, pb::Player::Second] {
        at_limit.to_move = to_move.into();
        let status = rules
            .legal_moves(pb::LegalMovesRequest {
                game: None,
                rules: standard(),
                position: Some(at_limit.clone()),
            })
            .await
            .unwrap_err();
        assert_field(&status, "position.squares");
        assert!(
            status
                .message()
                .contains("70 stones are still on the board"),
            "{status:?}"
        );
    }
    // The same game once collected, as the server shows it: over, with its final score. The
    // empty board meets the end condition, which is the end a position shows by itself.
    let collected = pb::Position {
        squares: vec![0; 12],
        captured: Some(pb::PlayerPair {
            first: 35,
            second: 35,
        }),
        ply: 300,
        ..pb::Position::default()
    };
    let legal = rules
        .legal_moves(pb::LegalMovesRequest {
            game: None,
            rules: standard(),
            position: Some(collected),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(legal.over);
    assert!(legal.moves.is_empty());
    assert_eq!(legal.end_reason(), pb::EndReason::Mandarins);
    assert_eq!(legal.outcome(), pb::Outcome::Draw);

    // A position that is not over needs its player to move: unset is not "FIRST".
    let mut running = one_move_from_the_end();
    running.to_move = pb::Player::Unspecified.into();
    let status = rules
        .legal_moves(pb::LegalMovesRequest {
            game: None,
            rules: standard(),
            position: Some(running),
        })
        .await
        .unwrap_err();
    assert_field(&status, "position.to_move");

    // The start (no position): not over.
    let legal = rules
        .legal_moves(pb::LegalMovesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(!legal.over);
    assert_eq!(legal.moves.len(), 10);
    server.stop().await.unwrap();
}
