//! Every error the API promises, with its status code and details.

mod common;

use common::*;
use oanquan_proto::v1 as pb;
use pb::Direction::{Left, Right};
use tonic::{Code, Request};

#[tokio::test]
async fn every_error_code() {
    let mut settings = config();
    settings.streams.max_spectators_per_game = 1;
    let server = start(settings).await;
    let mut client = server.games().await;
    let mut rules = server.rules().await;

    // NOT_FOUND.
    let status = client
        .get_game(pb::GetGameRequest {
            game_id: "nosuchgame".into(),
        })
        .await
        .unwrap_err();
    assert_reason(&status, Code::NotFound, "ERROR_REASON_GAME_NOT_FOUND");
    assert_eq!(
        status.message(),
        "no game with id nosuchgame; list games with ListGames"
    );

    // INVALID_ARGUMENT, naming the field.
    let status = client
        .get_game(pb::GetGameRequest {
            game_id: String::new(),
        })
        .await
        .unwrap_err();
    assert_field(&status, "game_id");
    let bad_create = |rules: Option<pb::RulesSpec>, seat: i32, name: &str| pb::CreateGameRequest {
        rules,
        start_position: None,
        seat,
        display_name: name.into(),
        computer: None,
        ..Default::default()
    };
    let status = client
        .create_game(bad_create(preset("chess"), 0, "Lan"))
        .await
        .unwrap_err();
    assert_field(&status, "rules.preset");
    let status = client
        .create_game(bad_create(None, 0, "   "))
        .await
        .unwrap_err();
    assert_field(&status, "display_name");
    let status = client
        .create_game(bad_create(None, 9, "Lan"))
        .await
        .unwrap_err();
    assert_field(&status, "seat");
    let huge = pb::RulesSpec {
        kind: Some(pb::rules_spec::Kind::RuleSet(pb::RuleSet {
            mandarin_setup: pb::MandarinSetup::Piece.into(),
            quan_value: 1000,
            empty_mandarin: pb::EmptyMandarinRule::EndsTurn.into(),
            protected_plies: 0,
            immature_mandarin_min_stones: 0,
            end_condition: pb::EndCondition::PiecesCaptured.into(),
            repetition_limit: 3,
            max_plies: 300,
        })),
    };
    let status = client
        .create_game(bad_create(Some(huge), 0, "Lan"))
        .await
        .unwrap_err();
    assert_field(&status, "rules.rule_set.quan_value");
    let status = client
        .list_games(pb::ListGamesRequest {
            page_token: "garbage".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_field(&status, "page_token");
    let status = client
        .list_games(pb::ListGamesRequest {
            filter: 42,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_field(&status, "filter");

    // A waiting game: not started, and a fresh game to take tokens from.
    let (waiting, waiting_token) = create(&mut client, "standard").await;
    let status = play(&mut client, &waiting.id, &waiting_token, 1, Right, None)
        .await
        .unwrap_err();
    assert_reason(
        &status,
        Code::FailedPrecondition,
        "ERROR_REASON_GAME_NOT_STARTED",
    );

    let (id, first, second) = started(&mut client, "standard").await;

    // Malformed moves. A missing square is not square 0 (a mandarin square, so that would be an
    // illegal move, not a malformed one).
    for (square, direction, field) in [
        (None, 1, "move.square"),
        (Some(12), 1, "move.square"),
        (Some(u32::MAX), 1, "move.square"),
        (Some(1), 0, "move.direction"),
        (Some(1), 7, "move.direction"),
    ] {
        let status = client
            .play_move(authed(
                pb::PlayMoveRequest {
                    game_id: id.clone(),
                    r#move: Some(pb::Move { square, direction }),
                    expected_ply: None,
                },
                &first,
            ))
            .await
            .unwrap_err();
        assert_field(&status, field);
    }
    let status = client
        .play_move(authed(
            pb::PlayMoveRequest {
                game_id: id.clone(),
                r#move: None,
                expected_ply: None,
            },
            &first,
        ))
        .await
        .unwrap_err();
    assert_field(&status, "move");

    // UNAUTHENTICATED and PERMISSION_DENIED.
    let status = client
        .play_move(Request::new(pb::PlayMoveRequest {
            game_id: id.clone(),
            r#move: mv(1, Right),
            expected_ply: None,
        }))
        .await
        .unwrap_err();
    assert_reason(&status, Code::Unauthenticated, "ERROR_REASON_MISSING_TOKEN");
    let status = play(&mut client, &id, &waiting_token, 1, Right, None)
        .await
        .unwrap_err();
    assert_reason(&status, Code::PermissionDenied, "ERROR_REASON_WRONG_TOKEN");

    // FAILED_PRECONDITION: not your turn, illegal moves, stale ply, seat taken.
    let status = play(&mut client, &id, &second, 7, Right, None)
        .await
        .unwrap_err();
    assert_reason(
        &status,
        Code::FailedPrecondition,
        "ERROR_REASON_NOT_YOUR_TURN",
    );
    for square in [0, 7] {
        let status = play(&mut client, &id, &first, square, Right, None)
            .await
            .unwrap_err();
        assert_reason(
            &status,
            Code::FailedPrecondition,
            "ERROR_REASON_ILLEGAL_MOVE",
        );
    }
    let status = play(&mut client, &id, &first, 1, Right, Some(5))
        .await
        .unwrap_err();
    assert_reason(&status, Code::FailedPrecondition, "ERROR_REASON_STALE_PLY");
    let status = client
        .join_game(pb::JoinGameRequest {
            game_id: id.clone(),
            display_name: "Third".into(),
        })
        .await
        .unwrap_err();
    assert_reason(&status, Code::FailedPrecondition, "ERROR_REASON_SEAT_TAKEN");

    // (1, +1) empties square 1 (RULES.md example 2); then the second player moves, and square
    // 1 is an empty square of the first player's own.
    play(&mut client, &id, &first, 1, Right, Some(0))
        .await
        .unwrap();
    play(&mut client, &id, &second, 8, Left, Some(1))
        .await
        .unwrap();
    let status = play(&mut client, &id, &first, 1, Left, Some(2))
        .await
        .unwrap_err();
    assert_reason(
        &status,
        Code::FailedPrecondition,
        "ERROR_REASON_ILLEGAL_MOVE",
    );
    assert!(status.message().contains("empty"), "{status:?}");

    // Abort after a move; resign; then the game is over.
    let status = client
        .abort_game(authed(
            pb::AbortGameRequest {
                game_id: id.clone(),
            },
            &first,
        ))
        .await
        .unwrap_err();
    assert_reason(
        &status,
        Code::FailedPrecondition,
        "ERROR_REASON_GAME_ALREADY_STARTED",
    );
    let resigned = client
        .resign(authed(
            pb::ResignRequest {
                game_id: id.clone(),
            },
            &second,
        ))
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap();
    let result = resigned.result.unwrap();
    assert_eq!(result.winner, i32::from(pb::Player::First));
    assert_eq!(result.end_reason, i32::from(pb::EndReason::Resignation));
    assert_eq!(result.ended_by, i32::from(pb::Player::Second));
    let status = play(&mut client, &id, &first, 2, Right, None)
        .await
        .unwrap_err();
    assert_reason(&status, Code::FailedPrecondition, "ERROR_REASON_GAME_OVER");
    let status = client
        .join_game(pb::JoinGameRequest {
            game_id: id.clone(),
            display_name: "Late".into(),
        })
        .await
        .unwrap_err();
    assert_reason(&status, Code::FailedPrecondition, "ERROR_REASON_GAME_OVER");

    // Abort a waiting game.
    let aborted = client
        .abort_game(authed(
            pb::AbortGameRequest {
                game_id: waiting.id.clone(),
            },
            &waiting_token,
        ))
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap();
    assert_eq!(aborted.status, i32::from(pb::GameStatus::Aborted));
    assert_eq!(
        aborted.result.unwrap().end_reason,
        i32::from(pb::EndReason::Aborted)
    );

    // RESOURCE_EXHAUSTED: the limit is one watcher per game here.
    let (busy, _) = create(&mut client, "standard").await;
    let watch = |after| pb::WatchGameRequest {
        game_id: busy.id.clone(),
        after_sequence: after,
        ..Default::default()
    };
    let _first_watcher = client.watch_game(watch(None)).await.unwrap();
    let status = client.watch_game(watch(None)).await.unwrap_err();
    assert_reason(
        &status,
        Code::ResourceExhausted,
        "ERROR_REASON_LIMIT_EXCEEDED",
    );
    drop(_first_watcher);

    // OUT_OF_RANGE: resuming beyond the last event.
    let (other, _) = create(&mut client, "standard").await;
    let status = client
        .watch_game(pb::WatchGameRequest {
            game_id: other.id,
            after_sequence: Some(99),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_reason(&status, Code::OutOfRange, "ERROR_REASON_SEQUENCE_AHEAD");

    // RulesService: bad position, illegal move, game over.
    let status = rules
        .legal_moves(pb::LegalMovesRequest {
            game: None,
            rules: None,
            position: Some(pb::Position {
                squares: vec![5; 11],
                ..Default::default()
            }),
        })
        .await
        .unwrap_err();
    assert_field(&status, "position.squares");
    let status = rules
        .apply_move(pb::ApplyMoveRequest {
            game: None,
            rules: None,
            position: None,
            r#move: mv(8, Left),
        })
        .await
        .unwrap_err();
    assert_reason(
        &status,
        Code::FailedPrecondition,
        "ERROR_REASON_ILLEGAL_MOVE",
    );
    server.stop().await.unwrap();
}

#[tokio::test]
async fn rules_service_answers() {
    let server = start(config()).await;
    let mut rules = server.rules().await;
    let presets = rules
        .list_presets(pb::ListPresetsRequest {})
        .await
        .unwrap()
        .into_inner()
        .presets;
    let names: Vec<_> = presets.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["standard", "traditional", "mancala-world"]);
    let legal = rules
        .legal_moves(pb::LegalMovesRequest::default())
        .await
        .unwrap()
        .into_inner()
        .moves;
    assert_eq!(legal.len(), 10);
    // RULES.md worked example 2.
    let applied = rules
        .apply_move(pb::ApplyMoveRequest {
            game: None,
            rules: preset("standard"),
            position: None,
            r#move: mv(1, Right),
        })
        .await
        .unwrap()
        .into_inner();
    let position = applied.position.unwrap();
    assert_eq!(position.squares, [11, 0, 0, 6, 6, 6, 11, 0, 6, 6, 6, 6]);
    assert_eq!(position.captured.unwrap().first, 6);
    assert_eq!(position.notation, "11,0,0,6,6,6,11,0,6,6,6,6 6:0 2 1");
    assert!(!applied.steps.is_empty());
}

/// A seek id that cannot be one is refused as malformed and not echoed, as a game id is: an
/// outside probe got NOT_FOUND quoting its 65-character and right-to-left-override ids back.
#[tokio::test]
async fn a_malformed_seek_id_is_invalid_and_not_echoed() {
    let server = start(config()).await;
    let mut client = server.games().await;
    let accept = |seek_id: String| pb::AcceptSeekRequest {
        seek_id,
        display_name: "Lan".into(),
    };
    for bad in [
        "\u{202e}".to_owned(),
        "A".repeat(65),
        "x y".to_owned(),
        "ab/cd".to_owned(),
        "é".to_owned(),
    ] {
        let status = client.accept_seek(accept(bad.clone())).await.unwrap_err();
        assert_field(&status, "seek_id");
        assert!(
            !status.message().contains(&bad),
            "{bad:?}: {}",
            status.message()
        );
    }
    let status = client.accept_seek(accept(String::new())).await.unwrap_err();
    assert_field(&status, "seek_id");
    // A well-formed id that names no open seek is still NOT_FOUND.
    let status = client
        .accept_seek(accept("A".repeat(64)))
        .await
        .unwrap_err();
    assert_reason(&status, Code::NotFound, "ERROR_REASON_SEEK_NOT_FOUND");
}
