//! Two real server nodes on one PostgreSQL database racing for the same ply: the player to move
//! sends PlayMove for the same ply to both nodes at once, 1,000 times; exactly one of each pair
//! is played, the other is refused as a single node refuses a stale move, and every game's log
//! has exactly one move per ply, the winners' moves.
//!
//! Needs a PostgreSQL server: `OANQUAN_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test
//! cargo test -p oanquan-server --test nodes_race`. Without the variable the test says so and
//! passes without doing anything.

mod common;

use std::time::Instant;

use common::nodes::{Node, Schema};
use common::*;
use oanquan_proto::v1 as pb;
use oanquan_rules::{Direction, Game, Move, Player, Position, Preset};
use tonic::Code;
use tonic_types::StatusExt as _;

const ROUNDS: usize = 1_000;
/// Games raced at once, each over ROUNDS / GAMES plies (a new game when one ends).
const GAMES: usize = 20;

fn wire(mv: Move) -> (u32, pb::Direction) {
    let direction = match mv.direction {
        Direction::Right => pb::Direction::Right,
        Direction::Left => pb::Direction::Left,
    };
    (u32::from(mv.square), direction)
}

/// What one race found wrong, if anything.
type Outcome = Result<(), String>;

/// Races `rounds` plies on games started by `clients[0]`, each ply sent to both nodes at once;
/// checks each pair and, at the end of each game, its log. Returns the games raced.
async fn race(mut clients: [Games; 2], rounds: usize, lane: usize) -> Result<usize, String> {
    let mut done = 0;
    let mut games = 0;
    while done < rounds {
        let (id, first, second) = started(&mut clients[0], "standard").await;
        games += 1;
        let mut game = Game::replay(Position::new(Preset::Standard.rules()).unwrap(), &[])
            .map_err(|e| e.to_string())?;
        let mut won: Vec<Move> = Vec::new();
        while done < rounds && !game.position().is_over() {
            let position = *game.position();
            let legal = position.legal_moves();
            // Different moves where there is a choice, so that a double play could not hide as
            // one move stored twice; the node each goes to alternates with the lane and ply.
            let moves = [legal[0], legal[legal.len() - 1]];
            let token = match position.to_move() {
                Player::First => &first,
                Player::Second => &second,
            };
            let ply = position.ply();
            let (a, b) = clients.split_at_mut(1);
            let send = |client: &mut Games, mv: Move| {
                let (square, direction) = wire(mv);
                let mut client = client.clone();
                let (id, token) = (id.clone(), token.clone());
                async move { play(&mut client, &id, &token, square, direction, Some(ply)).await }
            };
            let (left, right) = tokio::join!(send(&mut a[0], moves[0]), send(&mut b[0], moves[1]));
            let winner = match (&left, &right) {
                (Ok(_), Err(lost)) => (0, lost),
                (Err(lost), Ok(_)) => (1, lost),
                (Ok(_), Ok(_)) => {
                    return Err(format!(
                        "lane {lane}, game {id}, ply {ply}: both nodes played"
                    ));
                }
                (Err(l), Err(r)) => {
                    return Err(format!(
                        "lane {lane}, game {id}, ply {ply}: neither played: {l:?} / {r:?}"
                    ));
                }
            };
            let (index, lost) = winner;
            game.play(moves[index]).map_err(|e| e.to_string())?;
            let reason = lost
                .get_details_error_info()
                .map(|info| info.reason)
                .unwrap_or_default();
            // As on one node: the move came too late, or (the winner's move ended the game)
            // there is nothing left to play.
            let expected = lost.code() == Code::FailedPrecondition
                && match reason.as_str() {
                    "ERROR_REASON_STALE_PLY" | "ERROR_REASON_NOT_YOUR_TURN" => true,
                    "ERROR_REASON_GAME_OVER" => game.position().is_over(),
                    _ => false,
                };
            if !expected {
                return Err(format!(
                    "lane {lane}, game {id}, ply {ply}: the loser got {lost:?}, not \
                     FAILED_PRECONDITION STALE_PLY / NOT_YOUR_TURN (or GAME_OVER after the last \
                     move)"
                ));
            }
            let response = if index == 0 { &left } else { &right };
            let count = response
                .as_ref()
                .ok()
                .and_then(|r| r.game.as_ref())
                .map(|g| g.move_count);
            if count != Some(ply + 1) {
                return Err(format!(
                    "lane {lane}, game {id}, ply {ply}: the winner's game has {count:?} moves"
                ));
            }
            won.push(moves[index]);
            done += 1;
        }
        check_log(&mut clients[1], &id, &won).await?;
    }
    Ok(games)
}

/// The game's moves are exactly `won`, numbered 1, 2, …, and its event log has one MovePlayed
/// per move, in strictly increasing sequences.
async fn check_log(client: &mut Games, id: &str, won: &[Move]) -> Outcome {
    let listed = client
        .list_moves(pb::ListMovesRequest {
            game_id: id.to_owned(),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("{id}: ListMoves: {e:?}"))?
        .into_inner();
    let stored: Vec<(u32, Option<pb::Move>)> = listed
        .moves
        .into_iter()
        .map(|m| (m.number, m.r#move))
        .collect();
    let expected: Vec<(u32, Option<pb::Move>)> = won
        .iter()
        .zip(1..)
        .map(|(played, number)| {
            let (square, direction) = wire(*played);
            (number, mv(square, direction))
        })
        .collect();
    if stored != expected {
        return Err(format!(
            "{id}: stored moves {stored:?}, the winners played {expected:?}"
        ));
    }
    let last = get_game(client, id).await;
    let over = matches!(
        last.status(),
        pb::GameStatus::Finished | pb::GameStatus::Aborted
    );
    // The log from its first event (0 would ask for a snapshot): the stream of a finished game
    // ends after its GameOver; an active game's is read up to its last move.
    let mut watch = client
        .watch_game(pb::WatchGameRequest {
            game_id: id.to_owned(),
            after_sequence: Some(1),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("{id}: WatchGame: {e:?}"))?
        .into_inner();
    let (mut sequence, mut moves, mut ends) = (1, 0_u32, 0);
    while over || (moves as usize) < won.len() {
        let Some(event) = next_game_event(&mut watch).await else {
            break;
        };
        if event.sequence <= sequence {
            return Err(format!(
                "{id}: sequence {} after {sequence}",
                event.sequence
            ));
        }
        sequence = event.sequence;
        match &event.kind {
            Some(pb::game_event::Kind::MovePlayed(played)) => {
                moves += 1;
                let number = played.record.as_ref().map(|r| r.number);
                if number != Some(moves) {
                    return Err(format!("{id}: MovePlayed {number:?} where {moves} was due"));
                }
            }
            Some(pb::game_event::Kind::GameOver(_)) => ends += 1,
            _ => {}
        }
    }
    if moves as usize != won.len() || ends != u32::from(over) {
        return Err(format!(
            "{id}: the log has {moves} MovePlayed and {ends} GameOver for {} moves won (over: \
             {over})",
            won.len()
        ));
    }
    if last.move_count as usize != won.len() {
        return Err(format!(
            "{id}: GetGame says {} moves, {} were won",
            last.move_count,
            won.len()
        ));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_racing_the_same_ply_a_thousand_times_play_it_once_each_time() {
    let Some(schema) = Schema::new("nodes_race").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let nodes = [
        Node::start(&schema.database, dir.path(), &[]),
        Node::start(&schema.database, dir.path(), &[]),
    ];
    let clients = [nodes[0].games().await, nodes[1].games().await];
    let started_at = Instant::now();
    let mut lanes = Vec::new();
    for lane in 0..GAMES {
        // Half the lanes send their first move to the other node.
        let pair = if lane % 2 == 0 {
            [clients[0].clone(), clients[1].clone()]
        } else {
            [clients[1].clone(), clients[0].clone()]
        };
        lanes.push(tokio::spawn(race(pair, ROUNDS / GAMES, lane)));
    }
    let mut games = 0;
    for lane in lanes {
        games += lane.await.unwrap().unwrap_or_else(|e| panic!("{e}"));
    }
    eprintln!(
        "nodes_race: {ROUNDS} races over {games} games in {:?}",
        started_at.elapsed()
    );
    drop(nodes);
    schema.drop().await;
}
