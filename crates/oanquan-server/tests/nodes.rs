//! Several real server binaries on one PostgreSQL database: a game played on alternating nodes
//! is seen whole by watchers on every node, and a computer game whose leader node dies goes on
//! from another.
//!
//! Needs a PostgreSQL server: `OANQUAN_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test
//! cargo test -p oanquan-server --test nodes`. Without the variable the tests say so and pass
//! without doing anything; with it, a server that cannot be reached fails them.

mod common;

use std::time::{Duration, Instant};

use common::nodes::{Node, Schema};
use common::*;
use oanquan_proto::v1 as pb;

async fn watch_lobby(client: &mut Games) -> tonic::Streaming<pb::WatchLobbyResponse> {
    let mut lobby = client
        .watch_lobby(pb::WatchLobbyRequest {
            after_sequence: None,
        })
        .await
        .unwrap()
        .into_inner();
    let first = next(&mut lobby).await.unwrap().unwrap().event.unwrap();
    assert!(
        matches!(first.kind, Some(pb::lobby_event::Kind::Snapshot(_))),
        "{first:?}"
    );
    lobby
}

/// A game created, joined and played move by move on three nodes in turn: a watcher on each
/// node sees every event in order, and each node's lobby stream sees the game created and
/// started, wherever that happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_game_played_on_alternating_nodes_is_seen_whole_on_every_node() {
    let Some(schema) = Schema::new("nodes").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let nodes: Vec<Node> = (0..3)
        .map(|_| Node::start(&schema.database, dir.path(), &[]))
        .collect();
    let mut clients = Vec::new();
    for node in &nodes {
        clients.push(node.games().await);
    }
    let mut lobbies = Vec::new();
    for client in &mut clients {
        lobbies.push(watch_lobby(client).await);
    }
    // The listeners have no "ready" signal; they connect in well under this.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let (game, first) = create(&mut clients[0], "standard").await;
    let id = game.id;
    let second = clients[1]
        .join_game(pb::JoinGameRequest {
            game_id: id.clone(),
            display_name: "Minh".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .player_token;

    for (node, lobby) in lobbies.iter_mut().enumerate() {
        let (mut created, mut started) = (false, false);
        while !(created && started) {
            let event = next(lobby).await.unwrap().unwrap().event.unwrap();
            match event.kind.unwrap() {
                pb::lobby_event::Kind::GameCreated(c) => {
                    created |= c.game.is_some_and(|g| g.id == id);
                }
                pb::lobby_event::Kind::GameStarted(s) => started |= s.game_id == id,
                _ => {}
            }
        }
        assert!(created && started, "node {node}'s lobby");
    }

    let mut watches = Vec::new();
    for client in &mut clients {
        watches.push(watch_snapshot(client, &id).await);
    }
    const MOVES: usize = 9;
    for i in 0..MOVES {
        let after = play_one(&mut clients[i % 3], &id, (&first, &second)).await;
        assert_eq!(after.move_count as usize, i + 1);
    }
    let last = get_game(&mut clients[2], &id).await;
    assert_eq!(last.move_count as usize, MOVES);

    for (node, (watch, snapshot)) in watches.iter_mut().enumerate() {
        let mut sequence = snapshot.sequence;
        let mut moves = 0;
        while moves < MOVES {
            let event = next_game_event(watch)
                .await
                .unwrap_or_else(|| panic!("node {node}'s stream ended"));
            assert_eq!(
                event.sequence,
                sequence + 1,
                "node {node}: in order, without gaps or doubles"
            );
            sequence = event.sequence;
            if matches!(event.kind, Some(pb::game_event::Kind::MovePlayed(_))) {
                moves += 1;
            }
        }
    }
    drop(nodes);
    schema.drop().await;
}

/// Waits (at most `within`) for the game to have `moves` moves, asking `client`.
async fn moves_become(client: &mut Games, id: &str, moves: u32, within: Duration) -> pb::Game {
    let deadline = Instant::now() + within;
    loop {
        let game = get_game(client, id).await;
        if game.move_count >= moves {
            return game;
        }
        assert!(
            Instant::now() < deadline,
            "the game has {} moves, not {moves}, after {within:?}",
            game.move_count
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Two nodes, the leader started first, and a computer game created on the follower with the
/// computer's first reply played by the leader: (leader, follower, a client of the follower,
/// the game, the human's token).
async fn computer_game_on_the_follower(
    schema: &Schema,
    dir: &std::path::Path,
) -> (Node, Node, Games, String, String) {
    let leader = Node::start(&schema.database, dir, &[]);
    // The leader takes the lease on its first try, right after connecting.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let follower = Node::start(&schema.database, dir, &[]);
    let mut client = follower.games().await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let created = client
        .create_game(pb::CreateGameRequest {
            rules: preset("standard"),
            seat: pb::Player::First.into(),
            display_name: "Guest Lan".into(),
            computer: Some(pb::ComputerOpponent { level: 1 }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let id = created.game.unwrap().id;
    let token = created.player_token;
    play_one(&mut client, &id, (&token, "")).await;
    // Played by the leader, which heard of the move through the database.
    moves_become(&mut client, &id, 2, Duration::from_secs(10)).await;
    (leader, follower, client, id, token)
}

/// A computer game on node B, whose computer is played by node A (the leader, started
/// first): when A is killed, B takes the lead and the computer goes on playing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_computer_game_goes_on_when_the_leader_node_is_killed() {
    let Some(schema) = Schema::new("nodes").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (leader, follower, mut client, id, token) =
        computer_game_on_the_follower(&schema, dir.path()).await;
    drop(leader);
    play_one(&mut client, &id, (&token, "")).await;
    // The follower takes over within a few seconds and plays the computer's turn it finds.
    let game = moves_become(&mut client, &id, 4, Duration::from_secs(15)).await;
    assert_eq!(game.status(), pb::GameStatus::Active);
    play_one(&mut client, &id, (&token, "")).await;
    moves_become(&mut client, &id, 6, Duration::from_secs(10)).await;
    drop(follower);
    schema.drop().await;
}

/// The same when the leader freezes instead (SIGSTOP, as a paused VM): its connections stay
/// open and the kernel answers their keepalives, so the database keeps its lock until it ends
/// the idle lease session. An outside probe froze the leader for 45 s, and no node took over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_computer_game_goes_on_when_the_leader_node_freezes() {
    let Some(schema) = Schema::new("nodes").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (leader, follower, mut client, id, token) =
        computer_game_on_the_follower(&schema, dir.path()).await;
    let signal = |name: &str| {
        let sent = std::process::Command::new("kill")
            .args([name, &leader.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill {name}");
    };
    signal("-STOP");
    play_one(&mut client, &id, (&token, "")).await;
    // The lease session is ended after 5 s idle; the follower tries every second.
    let game = moves_become(&mut client, &id, 4, Duration::from_secs(15)).await;
    assert_eq!(game.status(), pb::GameStatus::Active);
    signal("-CONT");
    drop(leader);
    drop(follower);
    schema.drop().await;
}

/// A node whose clock runs 5 s fast (as with a broken time source): a turn started on a
/// correct node and moved on at once through it is charged a moment, not 5 s. Every node reads
/// the database's clock for its games; an outside probe saw a player lose on time through
/// such a node with 2.5 s left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_a_clock_ahead_charges_a_move_by_the_databases_time() {
    let Some(schema) = Schema::new("nodes").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let right = Node::start(&schema.database, dir.path(), &[]);
    let Some(fast) = Node::start_skewed(&schema.database, dir.path(), "+5s", &[]) else {
        schema.drop().await;
        return;
    };
    let mut on_right = right.games().await;
    let mut on_fast = fast.games().await;
    let (id, first, second) = minute_game(&mut on_right).await;
    // Each player's first move runs no clock; the first player's clock starts after them.
    play_one(&mut on_right, &id, (&first, &second)).await;
    let started = play_one(&mut on_right, &id, (&first, &second)).await;
    let before = remaining_of(&started, pb::Player::First);
    let after = play_one(&mut on_fast, &id, (&first, &second)).await;
    let charged = before.saturating_sub(remaining_of(&after, pb::Player::First));
    assert!(
        charged < Duration::from_secs(2),
        "a prompt move through the fast node was charged {charged:?}"
    );
    drop(fast);
    drop(right);
    schema.drop().await;
}

/// A minute game with both first moves made, so that a clock runs: its id, the player to move
/// and what they had when their turn started (what a refund would give back).
async fn running_turn(client: &mut Games) -> (String, pb::Player, Duration) {
    let (id, first, second) = minute_game(client).await;
    play_one(client, &id, (&first, &second)).await;
    let game = play_one(client, &id, (&first, &second)).await;
    let to_move = game.position.as_ref().unwrap().to_move();
    let at_turn_start = remaining_of(&game, to_move);
    (id, to_move, at_turn_start)
}

/// Every node stops, and two start again together (as a deployment restarts them): the running
/// turn is charged up to the stop once, and neither node gives any of it back. Each node gives
/// the turns their time back at start when no other node serves; without that being one step
/// at a time, the second node found the turn the first had just resumed, took it for a turn
/// started after the stop, and started it again in full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_starting_together_after_an_outage_charge_the_turn_once() {
    let Some(schema) = Schema::new("nodes_resume").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(&schema.database, dir.path(), &[]);
    let mut client = node.games().await;
    let (id, to_move, at_turn_start) = running_turn(&mut client).await;
    // 1.5 s of the turn run before every node stops.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    drop(client);
    node.stop();
    tokio::time::sleep(Duration::from_millis(1_000)).await;

    let database = schema.database.clone();
    let path = dir.path().to_owned();
    let starting: Vec<_> = (0..2)
        .map(|_| {
            let (database, path) = (database.clone(), path.clone());
            std::thread::spawn(move || Node::start(&database, &path, &[]))
        })
        .collect();
    let nodes: Vec<Node> = starting.into_iter().map(|t| t.join().unwrap()).collect();
    for node in &nodes {
        let mut client = node.games().await;
        let game = client
            .get_game(pb::GetGameRequest {
                game_id: id.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .game
            .unwrap();
        let left = remaining_of(&game, to_move);
        assert!(
            left + Duration::from_millis(1_400) <= at_turn_start,
            "the 1.5 s of the turn before the stop were given back: {left:?} left, \
             {at_turn_start:?} at the turn's start"
        );
        // And the outage (a second) was not charged.
        assert!(
            left + Duration::from_millis(3_000) > at_turn_start,
            "charged more than the turn: {left:?} left, {at_turn_start:?} at its start"
        );
    }
    drop(nodes);
    schema.drop().await;
}

/// Every node stops, and one whose clock runs 30 s slow starts alone (a machine rebooted
/// before its time source synchronised): the running turn's deadline is set by the database's
/// clock, not by this node's. The node gave the turns their time back before its first
/// heartbeat had measured its clock, so the deadline was 30 s in the past and the player lost
/// on time with most of a minute left (an outside probe).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_a_clock_behind_starting_alone_resumes_the_turns_by_the_databases_time() {
    let Some(schema) = Schema::new("nodes_slow_start").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(&schema.database, dir.path(), &[]);
    let mut client = node.games().await;
    let (id, _, at_turn_start) = running_turn(&mut client).await;
    drop(client);
    node.stop();

    let Some(slow) = Node::start_skewed(&schema.database, dir.path(), "-30s", &[]) else {
        schema.drop().await;
        return;
    };
    let game = get_game(&mut slow.games().await, &id).await;
    assert_eq!(game.status(), pb::GameStatus::Active);
    let deadline = game.clocks.as_ref().unwrap().deadline.unwrap();
    let deadline = std::time::SystemTime::try_from(deadline).unwrap();
    let left = deadline
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    assert!(
        left + Duration::from_secs(10) > at_turn_start && left <= at_turn_start,
        "the turn's deadline is {left:?} away after the restart; {at_turn_start:?} were left \
         at its start"
    );
    drop(slow);
    schema.drop().await;
}
