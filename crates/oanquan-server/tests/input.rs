//! Hostile input at the edge: positions beyond the engine's bounds, client text echoed in
//! errors, and display names that would be invisible or reorder other players' screens.

mod common;

use common::*;
use oanquan_proto::v1 as pb;
use tonic::{Code, Status};
use tonic_types::StatusExt as _;

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
        ..Default::default()
    }
}

/// Asserts INVALID_ARGUMENT on `field`, and that neither the message nor the violation carries
/// more than a short quote of the client's text, nor any raw control or format character.
fn assert_short(status: &Status, field: &str) {
    assert_field(status, field);
    let bad = status.get_details_bad_request().unwrap();
    for text in [status.message(), &bad.field_violations[0].description] {
        assert!(text.chars().count() < 300, "{} chars: {text}", text.len());
        assert!(
            !text
                .chars()
                .any(|c| c.is_control() || matches!(c, '\u{200b}' | '\u{202e}' | '\u{2066}')),
            "{text:?}"
        );
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
            game: None,
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
            game: None,
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
            game: None,
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

    // The engine searches the fullest board with the deepest debt, and a search that runs
    // into a refused loan, without a panic.
    for (squares, first, second) in [
        ([1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 253], -100_000, 99_815),
        ([4, 0, 0, 0, 0, 1, 250, 0, 0, 0, 0, 0], -100, -85),
    ] {
        let analysis = rules
            .analyze(pb::AnalyzeRequest {
                game: None,
                rules: None,
                position: Some(standard_position(squares, first, second)),
                time_limit_ms: 200,
                node_limit: Some(20_000),
                depth_limit: None,
                best_play_only: false,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(analysis.best_move.is_some(), "{analysis:?}");
    }
}

#[tokio::test]
async fn client_text_is_quoted_short_in_errors() {
    let server = start(config()).await;
    let mut games = server.games().await;
    let long_ascii = "x".repeat(8 * 1024);
    let long_unicode = format!(
        "{}\u{202e}\n\u{1b}[31m{}",
        "Ô".repeat(2000),
        "😀".repeat(2000)
    );

    for name in [&long_ascii, &long_unicode] {
        let status = games
            .create_game(create_request(preset(name), None, "Lan"))
            .await
            .unwrap_err();
        assert_short(&status, "rules.preset");
        assert!(status.message().contains('…'), "{}", status.message());

        let status = games
            .get_game(pb::GetGameRequest {
                game_id: name.clone(),
            })
            .await
            .unwrap_err();
        assert_short(&status, "game_id");

        let status = games
            .create_game(create_request(None, None, name))
            .await
            .unwrap_err();
        assert_short(&status, "display_name");

        let status = games
            .list_games(pb::ListGamesRequest {
                page_token: name.clone(),
                ..pb::ListGamesRequest::default()
            })
            .await
            .unwrap_err();
        assert_short(&status, "page_token");
    }
    // A short unknown name is quoted whole, escaped.
    let status = games
        .create_game(create_request(preset("che\u{202e}ss"), None, "Lan"))
        .await
        .unwrap_err();
    assert_short(&status, "rules.preset");
    assert!(
        status.message().contains(r#""che\u{202e}ss""#),
        "{}",
        status.message()
    );
}

#[tokio::test]
async fn display_names_are_normalised_and_visible() {
    let server = start(config()).await;
    let mut games = server.games().await;
    for name in [
        "\u{200b}",
        "\u{200b}\u{200b} \u{feff}",
        "Lan\u{202e}nim",
        "\u{2066}Minh\u{2069}",
        "Lan\u{7}",
        "a\u{2028}b",
        " \t ",
    ] {
        let status = games
            .create_game(create_request(None, None, name))
            .await
            .unwrap_err();
        assert_short(&status, "display_name");
    }

    // NFC: "Ô" typed as O + combining circumflex is stored precomposed, and 32 such letters
    // (64 code points as sent) are 32 characters.
    let created = games
        .create_game(create_request(None, None, "  O\u{302} Quan  "))
        .await
        .unwrap()
        .into_inner();
    let game = created.game.unwrap();
    assert_eq!(game.first_seat.unwrap().display_name, "\u{d4} Quan");
    let status = games
        .join_game(pb::JoinGameRequest {
            game_id: game.id.clone(),
            display_name: "\u{202e}".into(),
        })
        .await
        .unwrap_err();
    assert_short(&status, "display_name");
    let joined = games
        .join_game(pb::JoinGameRequest {
            game_id: game.id,
            display_name: "o\u{302}".repeat(32),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        joined.game.unwrap().second_seat.unwrap().display_name,
        "\u{f4}".repeat(32)
    );
    let status = games
        .create_game(create_request(None, None, &"ô".repeat(33)))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("got 33"), "{}", status.message());
}
