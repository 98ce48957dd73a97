//! SIGKILL under load, on the real binary: every move the server acknowledged is in the database
//! after a restart, at most the one move in flight of each game is there unacknowledged, and the
//! games go on with the players' tokens. README "What is guaranteed".

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use oanquan_proto::v1 as pb;
use oanquan_rules::Preset;
use oanquan_server::grpc::convert;

/// Games played at once, each by its own task on its own connection.
const PLAYERS: usize = 12;

/// What the client knows of one game when the server dies.
#[derive(Debug, Default)]
struct Seen {
    tokens: (String, String),
    acknowledged: Vec<pb::Move>,
    in_flight: Option<pb::Move>,
}

type Log = Arc<Mutex<HashMap<String, Seen>>>;

/// A small deterministic generator, so that games differ without another dependency.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Plays random legal moves in new games one after another until the server stops answering.
async fn player(addr: std::net::SocketAddr, seed: u64, log: Log, acknowledged: Arc<AtomicUsize>) {
    let rules = Preset::Standard.rules();
    let mut random = seed | 1;
    let Ok(channel) = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
    else {
        return;
    };
    let mut client = Games::new(channel);
    loop {
        // Creating or joining may be what the kill interrupts: such a game was never played.
        let Ok(created) = client
            .create_game(pb::CreateGameRequest {
                rules: preset("standard"),
                seat: pb::Player::First.into(),
                display_name: "Lan".into(),
                ..Default::default()
            })
            .await
        else {
            return;
        };
        let created = created.into_inner();
        let mut game = created.game.unwrap();
        let Ok(joined) = client
            .join_game(pb::JoinGameRequest {
                game_id: game.id.clone(),
                display_name: "Minh".into(),
            })
            .await
        else {
            return;
        };
        let tokens = (created.player_token, joined.into_inner().player_token);
        log.lock().unwrap().insert(
            game.id.clone(),
            Seen {
                tokens: tokens.clone(),
                ..Seen::default()
            },
        );
        while game.status != i32::from(pb::GameStatus::Finished) {
            let position = convert::position(game.position.as_ref(), rules, "position").unwrap();
            let moves = position.legal_moves();
            let chosen = moves[usize::try_from(next_random(&mut random)).unwrap() % moves.len()];
            let token = match position.to_move() {
                oanquan_rules::Player::First => &tokens.0,
                oanquan_rules::Player::Second => &tokens.1,
            };
            let direction = match chosen.direction {
                oanquan_rules::Direction::Right => pb::Direction::Right,
                oanquan_rules::Direction::Left => pb::Direction::Left,
            };
            let sent = mv(u32::from(chosen.square), direction).unwrap();
            log.lock().unwrap().get_mut(&game.id).unwrap().in_flight = Some(sent);
            let answer = play(
                &mut client,
                &game.id,
                token,
                u32::from(chosen.square),
                direction,
                Some(position.ply()),
            )
            .await;
            let Ok(answer) = answer else {
                return;
            };
            let mut log = log.lock().unwrap();
            let seen = log.get_mut(&game.id).unwrap();
            seen.acknowledged.push(seen.in_flight.take().unwrap());
            acknowledged.fetch_add(1, Ordering::Relaxed);
            game = answer.game.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_move_survives_a_sigkill_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    let server = ServerBinary::start(&path);
    let log: Log = Arc::default();
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let players: Vec<_> = (0..PLAYERS)
        .map(|i| {
            let seed = 0x9E37_79B9_7F4A_7C15_u64.wrapping_mul(i as u64 + 1);
            tokio::spawn(player(server.addr, seed, log.clone(), acknowledged.clone()))
        })
        .collect();
    // Killed in the middle of the stream of moves, group commits and all.
    let started = Instant::now();
    while acknowledged.load(Ordering::Relaxed) < 600 && started.elapsed() < Duration::from_secs(20)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.kill();
    for player in players {
        tokio::time::timeout(Duration::from_secs(30), player)
            .await
            .expect("a player still waits for the killed server")
            .unwrap();
    }
    let log = std::mem::take(&mut *log.lock().unwrap());
    let total: usize = log.values().map(|seen| seen.acknowledged.len()).sum();
    assert!(
        total >= 100,
        "too few moves before the kill to test anything: {total}"
    );

    let server = ServerBinary::start(&path);
    let mut client = Games::new(server.channel().await);
    let mut unacknowledged_but_kept = 0;
    for (id, seen) in &log {
        let stored: Vec<pb::Move> = client
            .list_moves(pb::ListMovesRequest {
                game_id: id.clone(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("game {id} lost: {e}"))
            .into_inner()
            .moves
            .into_iter()
            .map(|record| record.r#move.unwrap())
            .collect();
        let acked = seen.acknowledged.len();
        assert!(
            stored.len() >= acked,
            "game {id}: {acked} moves acknowledged, {} stored",
            stored.len()
        );
        assert_eq!(stored[..acked], seen.acknowledged[..], "game {id}");
        if stored.len() > acked {
            // Only the move in flight may have been committed without its answer reaching us.
            assert_eq!(stored.len(), acked + 1, "game {id}");
            assert_eq!(Some(&stored[acked]), seen.in_flight.as_ref(), "game {id}");
            unacknowledged_but_kept += 1;
        }
        let game = get_game(&mut client, id).await;
        assert_eq!(game.move_count as usize, stored.len(), "game {id}");
        if game.status == i32::from(pb::GameStatus::Active) {
            // The same tokens still play: the next move is accepted.
            let after = play_one(&mut client, id, (&seen.tokens.0, &seen.tokens.1)).await;
            assert_eq!(after.move_count as usize, stored.len() + 1, "game {id}");
        }
    }
    eprintln!(
        "{} games, {total} acknowledged moves, all kept; {unacknowledged_but_kept} moves in flight kept",
        log.len()
    );
}

/// A SIGKILL in the middle of a timed turn: after the restart the player to move has what they
/// had when the server died (to within its tenth-of-a-second heartbeat), not the whole turn back, and
/// the time the server was down is not charged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_in_a_timed_turn_charges_the_turn_but_not_the_outage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    let server = ServerBinary::start(&path);
    let mut client = Games::new(server.channel().await);
    let (id, first, second) = minute_game(&mut client).await;
    // Each player's first move has its own limit; the clocks run from the third.
    let mut game = play_one(&mut client, &id, (&first, &second)).await;
    for _ in 0..2 {
        game = play_one(&mut client, &id, (&first, &second)).await;
    }
    let left = |game: &pb::Game| -> Duration {
        let running = game.clocks.as_ref().unwrap().running();
        assert_eq!(running, pb::Player::Second, "{game:?}");
        remaining_of(game, running)
    };
    let at_start = left(&game);
    let turn_start = std::time::SystemTime::try_from(game.turn_start_time.unwrap()).unwrap();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    server.kill();
    let ran = turn_start.elapsed().unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;

    let restarted = Instant::now();
    let server = ServerBinary::start(&path);
    let mut client = Games::new(server.channel().await);
    let game = get_game(&mut client, &id).await;
    let since_restart = restarted.elapsed();
    assert_eq!(game.status, i32::from(pb::GameStatus::Active));
    let now_left = left(&game);
    // The turn up to the last heartbeat (a tenth of a second before the kill, give or take the
    // scheduler) is charged.
    assert!(
        now_left + ran <= at_start + Duration::from_millis(500),
        "had {at_start:?}, ran {ran:?} before the kill, has {now_left:?}"
    );
    // The two seconds down are not.
    assert!(
        now_left + ran + since_restart + Duration::from_millis(100) >= at_start,
        "had {at_start:?}, ran {ran:?} before the kill, has {now_left:?}"
    );
}

/// A server that keeps dying soon after it starts still charges the running turn: each restart
/// gives back at most the heartbeat's tenth of a second since the last mark, not the time the
/// last server ran. (With a one-second heartbeat, a server killed within its first second gave
/// the whole of its run back, and a crash loop stopped the clock.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_loop_does_not_stop_the_running_clock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    let server = ServerBinary::start(&path);
    let mut client = Games::new(server.channel().await);
    let (id, first, second) = minute_game(&mut client).await;
    // Each player's first move has its own limit; the clocks run from the third.
    for _ in 0..3 {
        play_one(&mut client, &id, (&first, &second)).await;
    }
    let mut server = Some(server);
    let mut before: Option<(Duration, Duration)> = None;
    for _ in 0..4 {
        let running = server.take().unwrap_or_else(|| ServerBinary::start(&path));
        let mut client = Games::new(running.channel().await);
        let seen = Instant::now();
        let game = get_game(&mut client, &id).await;
        let left = remaining_of(&game, pb::Player::Second);
        if let Some((earlier, ran)) = before {
            // What ran before the kill, less the last heartbeat's gap and some scheduling slack.
            let charged = earlier.saturating_sub(left);
            assert!(
                charged + Duration::from_millis(300) >= ran,
                "the last server ran {ran:?} of the turn; only {charged:?} was charged"
            );
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
        let ran = seen.elapsed();
        running.kill();
        before = Some((left, ran));
    }
}
