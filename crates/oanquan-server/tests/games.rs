//! Whole games through the API, for every preset, watched by a spectator.

mod common;

use common::*;
use oanquan_proto::v1 as pb;
use oanquan_rules::{Direction, Game, Move, Preset};
use oanquan_server::grpc::convert;
use pb::game_event::Kind;
use rand::seq::IndexedRandom as _;

async fn play_to_the_end(preset: Preset) {
    let server = start(config()).await;
    let mut client = server.games().await;
    let (id, first, second) = started(&mut client, preset.name()).await;
    let rules = preset.rules();

    // A spectator from the start: snapshot, then every event.
    let (mut watch, snapshot) = watch_snapshot(&mut client, &id).await;

    let mut rng = rand::rng();
    let mut game = client
        .get_game(pb::GetGameRequest {
            game_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap();
    let mut played: Vec<Move> = Vec::new();
    while game.status == i32::from(pb::GameStatus::Active) {
        let position = convert::position(game.position.as_ref(), rules, "position").unwrap();
        let mv = *position.legal_moves().choose(&mut rng).unwrap();
        let token = if position.to_move() == oanquan_rules::Player::First {
            &first
        } else {
            &second
        };
        let direction = match mv.direction {
            Direction::Right => pb::Direction::Right,
            Direction::Left => pb::Direction::Left,
        };
        let response = play(
            &mut client,
            &id,
            token,
            u32::from(mv.square),
            direction,
            Some(position.ply()),
        )
        .await
        .unwrap();
        played.push(mv);
        game = response.game.unwrap();
        assert_eq!(game.move_count as usize, played.len());
    }
    assert_eq!(game.status, i32::from(pb::GameStatus::Finished), "{preset}");
    let result = game.result.unwrap();
    assert_ne!(result.end_reason, i32::from(pb::EndReason::Unspecified));

    // The server's history replays to the same final position.
    let moves = client
        .list_moves(pb::ListMovesRequest {
            game_id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(moves.moves.len(), played.len());
    let replayed = Game::replay(oanquan_rules::Position::new(rules).unwrap(), &played).unwrap();
    // Compared as the API shows them: the same board, the same end, and nobody to move.
    assert_eq!(
        game.position.as_ref(),
        Some(&convert::position_out(replayed.position())),
        "{preset}"
    );
    let reason = match replayed.end_reason().expect("the replayed game is over") {
        oanquan_rules::EndReason::Mandarins => pb::EndReason::Mandarins,
        oanquan_rules::EndReason::Repetition => pb::EndReason::Repetition,
        oanquan_rules::EndReason::PlyLimit => pb::EndReason::PlyLimit,
    };
    assert_eq!(result.end_reason, i32::from(reason), "{preset}");
    for (i, record) in moves.moves.iter().enumerate() {
        assert_eq!(record.number as usize, i + 1);
        assert!(!record.steps.is_empty());
    }

    // The spectator saw every move, in order, then GameOver, then the stream closed OK.
    let mut sequence = snapshot.sequence;
    let mut moves_seen = 0;
    let mut pending_refill = None;
    loop {
        let Some(event) = next_game_event(&mut watch).await else {
            break;
        };
        assert_eq!(event.sequence, sequence + 1, "no gaps, no duplicates");
        sequence = event.sequence;
        match event.kind.unwrap() {
            Kind::MovePlayed(m) => {
                moves_seen += 1;
                let record = m.record.unwrap();
                assert_eq!(record.number, moves_seen);
                pending_refill = record.steps.iter().find_map(|step| match &step.kind {
                    Some(pb::step::Kind::Refill(refill)) => Some(*refill),
                    _ => None,
                });
            }
            Kind::GameOver(over) => {
                assert_eq!(over.result.unwrap(), result);
                assert!(
                    next(&mut watch).await.unwrap().is_none(),
                    "stream ends after GameOver"
                );
                break;
            }
            // The refill at the end of a move's trace is repeated in the next TurnStarted.
            Kind::TurnStarted(turn) => assert_eq!(turn.refill, pending_refill.take()),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(moves_seen as usize, played.len());
    server.stop().await.unwrap();
}

#[tokio::test]
async fn standard_games_play_to_the_end() {
    play_to_the_end(Preset::Standard).await;
}

#[tokio::test]
async fn traditional_games_play_to_the_end() {
    play_to_the_end(Preset::Traditional).await;
}

#[tokio::test]
async fn mancala_world_games_play_to_the_end() {
    play_to_the_end(Preset::MancalaWorld).await;
}

#[tokio::test]
async fn list_games_pages_and_filters() {
    let server = start(config()).await;
    let mut client = server.games().await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(create(&mut client, "standard").await.0.id);
    }
    let (active, _, _) = started(&mut client, "traditional").await;

    let mut seen = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = client
            .list_games(pb::ListGamesRequest {
                filter: pb::GameFilter::Open.into(),
                page_size: 2,
                page_token: page_token.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.games.len() <= 2);
        seen.extend(page.games.into_iter().map(|g| g.id));
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    ids.reverse();
    assert_eq!(seen, ids, "open games, newest first, each once");

    let active_list = client
        .list_games(pb::ListGamesRequest {
            filter: pb::GameFilter::Active.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(active_list.games.len(), 1);
    assert_eq!(active_list.games[0].id, active);
}

/// `ListMoves` in pages: `after_move` and `max_moves` pick a slice, and `more` says what is
/// left.
#[tokio::test]
async fn list_moves_gives_a_slice_and_says_whether_more_follow() {
    let server = start(config()).await;
    let mut client = server.games().await;
    let (id, first, second) = started(&mut client, "standard").await;
    for _ in 0..6 {
        play_one(&mut client, &id, (&first, &second)).await;
    }
    let mut list = async |after_move: u32, max_moves: u32| {
        let page = client
            .list_moves(pb::ListMovesRequest {
                game_id: id.clone(),
                after_move,
                max_moves,
            })
            .await
            .unwrap()
            .into_inner();
        let numbers: Vec<u32> = page.moves.iter().map(|m| m.number).collect();
        assert!(page.start_position.is_some());
        (numbers, page.more)
    };
    assert_eq!(list(0, 0).await, ((1..=6).collect(), false));
    assert_eq!(list(2, 3).await, (vec![3, 4, 5], true));
    assert_eq!(list(3, 3).await, (vec![4, 5, 6], false));
    assert_eq!(list(5, 0).await, (vec![6], false));
    assert_eq!(list(0, 1).await, (vec![1], true));
    for past in [6, 7, u32::MAX] {
        assert_eq!(list(past, 0).await, (vec![], false), "{past}");
        assert_eq!(list(past, u32::MAX).await, (vec![], false), "{past}");
    }
}

/// Messages of at most 4 KiB each way (`--max-message-size`, below the flag's minimum), so that
/// ordinary pages need cutting.
const BOUND: usize = 4 * 1024;

fn small_messages() -> oanquan_server::Config {
    let mut config = config();
    config.transport.max_message_size = BOUND;
    config.transport.max_request_size = BOUND;
    config
}

/// A page of games larger than one response (`--max-message-size`, set below the flag's
/// minimum here) holds the games that fit, and the next page goes on after them: an outside
/// probe's 100 games with long names made every client's ListGames fail.
#[tokio::test]
async fn a_page_of_games_larger_than_a_response_is_cut_to_fit() {
    let server = start(small_messages()).await;
    let mut client = server.games().await;
    let mut made = std::collections::BTreeSet::new();
    for i in 0..30 {
        let created = client
            .create_game(pb::CreateGameRequest {
                display_name: format!("{}{i}", "𒀱".repeat(30)),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        made.insert(created.game.unwrap().id);
    }
    let (mut listed, mut pages, mut token) = (Vec::new(), 0, String::new());
    loop {
        let page = client
            .list_games(pb::ListGamesRequest {
                page_size: 100,
                page_token: token.clone(),
                ..Default::default()
            })
            .await
            .expect("every page fits")
            .into_inner();
        pages += 1;
        assert!(prost::Message::encoded_len(&page) <= BOUND);
        assert!(!page.games.is_empty());
        listed.extend(page.games.into_iter().map(|g| g.id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert!(pages >= 3, "{pages} pages");
    assert_eq!(listed.len(), made.len(), "each game once");
    assert_eq!(
        listed
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>(),
        made
    );
}

/// A history larger than one response (`--max-message-size`; set below the flag's minimum here,
/// so that an ordinary game needs pages) comes in pages that each fit, and together are the
/// game.
#[tokio::test]
async fn a_history_larger_than_a_response_comes_in_pages() {
    let server = start(small_messages()).await;
    let mut client = server.games().await;
    let (id, first, second) = started(&mut client, "standard").await;
    let mut played = 0;
    while played < 400 {
        let game = play_one(&mut client, &id, (&first, &second)).await;
        played += 1;
        if game.status != i32::from(pb::GameStatus::Active) {
            break;
        }
    }
    let (mut moves, mut pages, mut bytes) = (Vec::new(), 0, 0);
    loop {
        let after_move = moves.last().map_or(0, |m: &pb::MoveRecord| m.number);
        let page = client
            .list_moves(pb::ListMovesRequest {
                game_id: id.clone(),
                after_move,
                max_moves: 0,
            })
            .await
            .expect("every page fits")
            .into_inner();
        pages += 1;
        bytes += prost::Message::encoded_len(&page);
        assert!(prost::Message::encoded_len(&page) <= BOUND);
        assert!(!page.moves.is_empty());
        moves.extend(page.moves);
        if !page.more {
            break;
        }
    }
    assert!(pages >= 2, "{played} moves in {bytes} bytes: one page");
    let numbers: Vec<u32> = moves.iter().map(|m| m.number).collect();
    assert_eq!(numbers, (1..=played).collect::<Vec<u32>>());
}
