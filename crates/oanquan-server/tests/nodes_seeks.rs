//! Seeks across several real server binaries on one PostgreSQL database: a seek on one node
//! pairs with a seek or an AcceptSeek on another, every node lists and announces every node's
//! seeks, a killed node's seeks are neither listed nor paired within 2 s, and the computer
//! fallback makes one game.
//!
//! Needs a PostgreSQL server: `OANQUAN_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test
//! cargo test -p oanquan-server --test nodes_seeks`. Without the variable the tests say so and
//! pass without doing anything; with it, a server that cannot be reached fails them.

mod common;

use std::time::{Duration, Instant};

use common::nodes::{Node, Schema};
use common::*;
use oanquan_proto::v1 as pb;

type SeekStream = tonic::Streaming<pb::SeekResponse>;

fn seek_request(name: &str) -> pb::SeekRequest {
    pb::SeekRequest {
        rules: preset("standard"),
        display_name: name.to_owned(),
        ..Default::default()
    }
}

/// Starts a seek; returns its stream and its first message's kind.
async fn seek(
    client: &mut Games,
    request: pb::SeekRequest,
) -> (SeekStream, pb::seek_response::Kind) {
    let mut stream = client.seek(request).await.unwrap().into_inner();
    let first = next_seek_message(&mut stream).await;
    (stream, first)
}

/// The next message of a seek stream that is not a heartbeat.
async fn next_seek_message(stream: &mut SeekStream) -> pb::seek_response::Kind {
    loop {
        let kind = next(stream)
            .await
            .unwrap()
            .expect("the seek stream ended")
            .kind
            .unwrap();
        if !matches!(kind, pb::seek_response::Kind::Heartbeat(_)) {
            return kind;
        }
    }
}

/// A seek that must wait: its stream and its id.
async fn waiting_seek(client: &mut Games, request: pb::SeekRequest) -> (SeekStream, String) {
    match seek(client, request).await {
        (stream, pb::seek_response::Kind::Waiting(seek)) => (stream, seek.id),
        (_, other) => panic!("expected to wait, got {other:?}"),
    }
}

fn paired(kind: pb::seek_response::Kind) -> pb::seek_response::Paired {
    match kind {
        pb::seek_response::Kind::Paired(paired) => paired,
        other => panic!("expected a pairing, got {other:?}"),
    }
}

/// Polls ListSeeks every 50 ms until `check` holds, for up to `within`.
async fn seeks_become(
    client: &mut Games,
    within: Duration,
    what: &str,
    check: impl Fn(&[pb::Seek]) -> bool,
) {
    let deadline = Instant::now() + within;
    loop {
        let seeks = list_seeks(client).await;
        if check(&seeks) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not within {within:?}: {what}: {seeks:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Both seats of one game, each with its token: plays a move for each, on alternating nodes.
async fn play_both(
    clients: [&mut Games; 2],
    one: &pb::seek_response::Paired,
    other: &pb::seek_response::Paired,
) {
    let id = one.game.as_ref().unwrap().id.clone();
    assert_eq!(other.game.as_ref().unwrap().id, id, "the same game");
    assert_ne!(one.seat, other.seat, "different seats");
    let tokens = if one.seat == pb::Player::First as i32 {
        (one.player_token.as_str(), other.player_token.as_str())
    } else {
        (other.player_token.as_str(), one.player_token.as_str())
    };
    let [a, b] = clients;
    assert_eq!(play_one(a, &id, tokens).await.move_count, 1);
    assert_eq!(play_one(b, &id, tokens).await.move_count, 2);
}

/// Two nodes and their clients.
async fn two_nodes(schema: &Schema, dir: &std::path::Path) -> ([Node; 2], [Games; 2]) {
    let nodes = [
        Node::start(&schema.database, dir, &[]),
        Node::start(&schema.database, dir, &[]),
    ];
    let clients = [nodes[0].games().await, nodes[1].games().await];
    (nodes, clients)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeks_on_two_nodes_pair_into_one_game_both_can_play() {
    let Some(schema) = Schema::new("nodes_seeks").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (nodes, [mut a, mut b]) = two_nodes(&schema, dir.path()).await;
    let (mut lan, _) = waiting_seek(&mut a, seek_request("Lan")).await;
    let (_, minh) = seek(&mut b, seek_request("Minh")).await;
    let minh = paired(minh);
    let lan = paired(next_seek_message(&mut lan).await);
    play_both([&mut a, &mut b], &lan, &minh).await;
    drop(nodes);
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seek_on_one_node_is_accepted_on_another() {
    let Some(schema) = Schema::new("nodes_seeks").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (nodes, [mut a, mut b]) = two_nodes(&schema, dir.path()).await;
    let (mut lan, id) = waiting_seek(&mut a, seek_request("Lan")).await;
    // Listed on B at once: A wrote it before answering.
    let listed = list_seeks(&mut b).await;
    assert!(listed.iter().any(|seek| seek.id == id), "{listed:?}");
    let accepted = b
        .accept_seek(pb::AcceptSeekRequest {
            seek_id: id.clone(),
            display_name: "Minh".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let minh = pb::seek_response::Paired {
        game: accepted.game,
        player_token: accepted.player_token,
        seat: accepted.seat,
    };
    let lan = paired(next_seek_message(&mut lan).await);
    play_both([&mut b, &mut a], &lan, &minh).await;
    // Taken once: a second accept, on either node, finds nothing.
    for client in [&mut a, &mut b] {
        let again = client
            .accept_seek(pb::AcceptSeekRequest {
                seek_id: id.clone(),
                display_name: "Hoa".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(again.code(), tonic::Code::NotFound, "{again:?}");
    }
    drop(nodes);
    schema.drop().await;
}

/// The next seek change on a lobby stream (heartbeats and game events skipped).
async fn next_seek_change(
    lobby: &mut tonic::Streaming<pb::WatchLobbyResponse>,
) -> pb::lobby_event::Kind {
    loop {
        let event = next(lobby).await.unwrap().unwrap().event.unwrap();
        if let kind @ (pb::lobby_event::Kind::SeekAdded(_)
        | pb::lobby_event::Kind::SeekRemoved(_)
        | pb::lobby_event::Kind::SeekList(_)) = event.kind.unwrap()
        {
            return kind;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_node_lists_and_announces_a_seek_and_its_withdrawal() {
    let Some(schema) = Schema::new("nodes_seeks").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let nodes: Vec<Node> = (0..3)
        .map(|_| Node::start(&schema.database, dir.path(), &[]))
        .collect();
    let mut a = nodes[0].games().await;
    let mut c = nodes[2].games().await;
    let mut lobby = c
        .watch_lobby(pb::WatchLobbyRequest {
            after_sequence: None,
        })
        .await
        .unwrap()
        .into_inner();
    let snapshot = next(&mut lobby).await.unwrap().unwrap().event.unwrap();
    match snapshot.kind.unwrap() {
        pb::lobby_event::Kind::Snapshot(snapshot) => assert!(snapshot.seeks.is_empty()),
        other => panic!("expected the snapshot, got {other:?}"),
    }
    let (lan, id) = waiting_seek(&mut a, seek_request("Lan")).await;
    match next_seek_change(&mut lobby).await {
        pb::lobby_event::Kind::SeekAdded(added) => {
            let seek = added.seek.unwrap();
            assert_eq!(
                (seek.id.as_str(), seek.display_name.as_str()),
                (id.as_str(), "Lan")
            );
        }
        other => panic!("expected SeekAdded, got {other:?}"),
    }
    let listed = list_seeks(&mut c).await;
    assert_eq!(
        listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        [id.as_str()]
    );
    // The seeker goes away: its node withdraws the seek.
    drop(lan);
    match next_seek_change(&mut lobby).await {
        pb::lobby_event::Kind::SeekRemoved(removed) => assert_eq!(removed.seek_id, id),
        other => panic!("expected SeekRemoved, got {other:?}"),
    }
    assert!(list_seeks(&mut c).await.is_empty());
    drop(nodes);
    schema.drop().await;
}

/// A killed node's seeks are not paired even in the seconds before its heartbeat is missed:
/// an outside probe restarted a killed server, and its first seekers were paired with the
/// dead node's seekers, in games against nobody. The node's lock goes with its process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_nodes_seek_is_not_paired_before_its_heartbeat_is_missed() {
    let Some(schema) = Schema::new("nodes_seeks").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ([a_node, b_node], [mut a, mut b]) = two_nodes(&schema, dir.path()).await;
    let (_lan, id) = waiting_seek(&mut a, seek_request("Lan")).await;
    seeks_become(&mut b, Duration::from_secs(5), "listed on B", |seeks| {
        seeks.iter().any(|seek| seek.id == id)
    })
    .await;
    drop(a_node); // SIGKILL: nothing withdrawn, the heartbeat row still fresh.
    seeks_become(
        &mut b,
        Duration::from_secs(2),
        "gone from B at once",
        <[pb::Seek]>::is_empty,
    )
    .await;
    let (_minh, _) = waiting_seek(&mut b, seek_request("Minh")).await;
    drop(b_node);
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_computer_fallback_on_two_nodes_makes_one_game() {
    let Some(schema) = Schema::new("nodes_seeks").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (nodes, [mut a, mut b]) = two_nodes(&schema, dir.path()).await;
    let mut games = 0;
    // The second seeker comes around the moment the first one's wait for a person ends.
    for (round, lag) in [950u64, 1000, 1050].into_iter().enumerate() {
        let (mut lan, _) = waiting_seek(
            &mut a,
            pb::SeekRequest {
                computer: Some(pb::ComputerFallback {
                    after: Some(prost_types::Duration {
                        seconds: 1,
                        nanos: 0,
                    }),
                    level: 1,
                }),
                ..seek_request(&format!("Lan {round}"))
            },
        )
        .await;
        tokio::time::sleep(Duration::from_millis(lag)).await;
        let (minh_stream, minh) = seek(&mut b, seek_request(&format!("Minh {round}"))).await;
        let lan = paired(next_seek_message(&mut lan).await);
        let game = lan.game.unwrap();
        let against_computer = [&game.first_seat, &game.second_seat]
            .into_iter()
            .flatten()
            .any(|seat| seat.kind() == pb::PlayerKind::Computer);
        match minh {
            pb::seek_response::Kind::Paired(minh) => {
                assert_eq!(minh.game.unwrap().id, game.id, "round {round}");
                assert!(!against_computer, "round {round}");
            }
            _ => assert!(against_computer, "round {round}: Lan was left waiting"),
        }
        drop(minh_stream);
        // A Minh left waiting has gone: the next round starts once the board says so (else the
        // next Lan could be paired with a seeker whose stream is just closing).
        seeks_become(
            &mut a,
            Duration::from_secs(10),
            "the seeks are gone",
            <[_]>::is_empty,
        )
        .await;
        games += 1;
        let listed = a
            .list_games(pb::ListGamesRequest::default())
            .await
            .unwrap()
            .into_inner()
            .games;
        assert_eq!(listed.len(), games, "round {round}: one game per round");
    }
    drop(nodes);
    schema.drop().await;
}
