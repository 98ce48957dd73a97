//! Hostile input at the edge: positions beyond the engine's bounds.

mod common;

use common::*;
use oanquan_proto::v1 as pb;

fn standard_position(squares: [u32; 12], first: i32, second: i32) -> pb::Position {
    pb::Position {
        squares: squares.to_vec(),
        captured: Some(pb::PlayerPair { first, second }),
        to_move: pb::Player::First.into(),
        ..pb::Position::default()
    }
}

fn create_request(
    rules: Option<pb::RulesSpec>,
    start: Option<pb::Position>,
    name: &str,
) -> pb::CreateGameRequest {
    pb::CreateGameRequest {
        rules,
        start_position: start,
        seat: pb::Player::First.into(),
        display_name: name.into(),
        computer: None,
    }
}

#[tokio::test]
async fn positions_beyond_the_bounds_are_refused_with_their_field() {
    let server = start(config()).await;
    let mut games = server.games().await;
    let mut rules = server.rules().await;

    // Issue 12: 1000 stones in square 1, balanced by a debt of 995, used to be stored clamped.
    let piled = standard_position([10, 1000, 5, 5, 5, 5, 10, 5, 5, 5, 5, 5], -995, 0);
    let status = games
        .create_game(create_request(None, Some(piled), "Lan"))
        .await
        .unwrap_err();
    assert_field(&status, "start_position.squares[1]");
    assert!(status.message().contains("255"), "{}", status.message());
    let listed = games
        .list_games(pb::ListGamesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(listed.games.is_empty(), "{listed:?}");

    // Issue 12: 255 stones in square 0, a board of 315: `1 LEFT` wrapped square 0 to 0.
    let full = standard_position([255, 5, 5, 5, 5, 5, 10, 5, 5, 5, 5, 5], -245, 0);
    let status = rules
        .apply_move(pb::ApplyMoveRequest {
            rules: None,
            position: Some(full),
            r#move: mv(1, pb::Direction::Left),
        })
        .await
        .unwrap_err();
    assert_field(&status, "position.squares");

    let deep = standard_position([10, 5, 5, 5, 5, 5, 10, 5, 5, 5, 5, 5], -100_001, 100_001);
    let status = rules
        .legal_moves(pb::LegalMovesRequest {
            rules: None,
            position: Some(deep),
        })
        .await
        .unwrap_err();
    assert_field(&status, "position.captured.first");

    // The fullest board there may be plays, and keeps every stone.
    let fullest = standard_position([1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 253], -185, 0);
    let after = rules
        .apply_move(pb::ApplyMoveRequest {
            rules: None,
            position: Some(fullest),
            r#move: mv(1, pb::Direction::Left),
        })
        .await
        .unwrap()
        .into_inner()
        .position
        .unwrap();
    let scores = after.scores.unwrap();
    let board: u32 = after.squares.iter().sum();
    assert_eq!(
        i64::from(board) + i64::from(scores.first + scores.second),
        70
    );
}
