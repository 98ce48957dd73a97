//! Event streams: snapshot then deltas, exact resume, many spectators, races, the lobby.

mod common;

use std::time::Duration;

use common::*;
use oanquan_proto::v1 as pb;
use pb::Direction::{Left, Right};
use pb::game_event::Kind;
use pb::lobby_event::Kind as LobbyKind;

async fn watch_game(
    client: &mut Games,
    id: &str,
    after: Option<u64>,
) -> tonic::Streaming<pb::WatchGameResponse> {
    client
        .watch_game(pb::WatchGameRequest {
            game_id: id.to_owned(),
            after_sequence: after,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

/// A server whose streams send no heartbeat of their own for a minute, so that one that comes
/// at once was sent for the resume.
async fn quiet_server() -> (TestServer, Games) {
    let mut settings = config();
    settings.streams.heartbeat_interval = Duration::from_secs(60);
    let server = start(settings).await;
    let client = server.games().await;
    (server, client)
}

fn kind_name(event: &pb::GameEvent) -> &'static str {
    match event.kind.as_ref().unwrap() {
        Kind::Snapshot(_) => "snapshot",
        Kind::PlayerJoined(_) => "joined",
        Kind::GameStarted(_) => "started",
        Kind::MovePlayed(_) => "move",
        Kind::TurnStarted(_) => "turn",
        Kind::GameOver(_) => "over",
        Kind::Heartbeat(_) => "heartbeat",
        Kind::Draw(_) => "draw",
        Kind::Rematch(_) => "rematch",
    }
}

#[tokio::test]
async fn watch_starts_with_a_snapshot_then_deltas() {
    let server = start(config()).await;
    let mut client = server.games().await;
    let (game, first) = create(&mut client, "standard").await;
    let mut watch = watch_game(&mut client, &game.id, None).await;
    let snapshot = next_game_event(&mut watch).await.unwrap();
    let Some(Kind::Snapshot(snap)) = &snapshot.kind else {
        panic!("{snapshot:?}")
    };
    assert_eq!(
        snapshot.sequence, 1,
        "the creator's PlayerJoined is event 1"
    );
    assert_eq!(snap.game.as_ref().unwrap().id, game.id);

    let joined = client
        .join_game(pb::JoinGameRequest {
            game_id: game.id.clone(),
            display_name: "Minh".into(),
        })
        .await
        .unwrap()
        .into_inner();
    play(&mut client, &game.id, &first, 1, Right, Some(0))
        .await
        .unwrap();
    let mut kinds = Vec::new();
    for expected in 2..=6 {
        let event = next_game_event(&mut watch).await.unwrap();
        assert_eq!(event.sequence, expected);
        kinds.push(kind_name(&event));
        if let Some(Kind::TurnStarted(turn)) = &event.kind {
            assert_eq!(turn.ply, if expected == 4 { 0 } else { 1 });
        }
    }
    assert_eq!(kinds, ["joined", "started", "turn", "move", "turn"]);

    // Heartbeats while idle carry the last sequence.
    let beat = next(&mut watch).await.unwrap().unwrap().event.unwrap();
    assert_eq!(kind_name(&beat), "heartbeat");
    assert_eq!(beat.sequence, 6);
    drop(joined);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn reconnecting_gets_exactly_the_missed_events() {
    let server = start(config()).await;
    let mut client = server.games().await;
    let (id, first, second) = started(&mut client, "standard").await;
    let mut watch = watch_game(&mut client, &id, None).await;
    let snapshot = next_game_event(&mut watch).await.unwrap();
    play(&mut client, &id, &first, 1, Right, Some(0))
        .await
        .unwrap();
    let moved = next_game_event(&mut watch).await.unwrap();
    assert_eq!(kind_name(&moved), "move");
    assert_eq!(moved.sequence, snapshot.sequence + 1);
    drop(watch);

    // Missed while disconnected: TurnStarted (already published), then two more moves.
    play(&mut client, &id, &second, 8, Left, Some(1))
        .await
        .unwrap();
    play(&mut client, &id, &first, 3, Right, Some(2))
        .await
        .unwrap();

    let mut resumed = watch_game(&mut client, &id, Some(moved.sequence)).await;
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(next_game_event(&mut resumed).await.unwrap());
    }
    let sequences: Vec<u64> = got.iter().map(|e| e.sequence).collect();
    let expected: Vec<u64> = (moved.sequence + 1..=moved.sequence + 5).collect();
    assert_eq!(sequences, expected);
    let kinds: Vec<_> = got.iter().map(kind_name).collect();
    assert_eq!(kinds, ["turn", "move", "turn", "move", "turn"]);
    // Then live again, nothing duplicated.
    play(&mut client, &id, &second, 9, Left, Some(3))
        .await
        .unwrap();
    let live = next_game_event(&mut resumed).await.unwrap();
    assert_eq!(live.sequence, moved.sequence + 6);

    let turn = next_game_event(&mut resumed).await.unwrap();
    assert_eq!(
        (kind_name(&turn), turn.sequence),
        ("turn", live.sequence + 1)
    );

    // Resuming at the very end: a heartbeat says the stream is there.
    let mut caught_up = watch_game(&mut client, &id, Some(turn.sequence)).await;
    let beat = next(&mut caught_up).await.unwrap().unwrap().event.unwrap();
    assert_eq!(kind_name(&beat), "heartbeat");
    server.stop().await.unwrap();
}

/// A watch resumed at the end of a finished game (its GameOver already received) says it is up
/// to date with one heartbeat and ends at once with OK, as a fresh watch of a finished game
/// does after its snapshot. It used to send heartbeats until the client gave up, holding a
/// spectator's place; then nothing at all, which reads like a stream that died.
#[tokio::test]
async fn a_watch_resumed_after_the_game_over_ends_at_once() {
    let (server, mut client) = quiet_server().await;
    let (id, first, _) = started(&mut client, "standard").await;
    resign(&mut client, &id, &first).await;
    let mut watch = watch_game(&mut client, &id, None).await;
    let last = next_game_event(&mut watch).await.unwrap().sequence;
    let mut resumed = watch_game(&mut client, &id, Some(last)).await;
    let (beat, ended) = tokio::time::timeout(Duration::from_secs(2), async {
        (next(&mut resumed).await, next(&mut resumed).await)
    })
    .await
    .expect("the resumed watch of a finished game stayed open");
    let beat = beat.unwrap().unwrap().event.unwrap();
    assert_eq!(
        (kind_name(&beat), beat.sequence),
        ("heartbeat", last),
        "{beat:?}"
    );
    assert!(matches!(ended, Ok(None)), "{ended:?}");
    // Following rematches, it stays for the rematch window.
    let mut following = client
        .watch_game(pb::WatchGameRequest {
            game_id: id.clone(),
            after_sequence: Some(last),
            follow_rematch: true,
        })
        .await
        .unwrap()
        .into_inner();
    let beat = next(&mut following).await.unwrap().unwrap().event.unwrap();
    assert_eq!(kind_name(&beat), "heartbeat");
    server.stop().await.unwrap();
}

/// A stream resumed with nothing missed answers with a heartbeat at once, not after the
/// heartbeat period: clients take themselves for connected when something arrives, and an
/// outside probe's browser page sat "reconnecting…" for 15 s, unable to move, while its
/// clock ran. The game's stream and the lobby's alike.
#[tokio::test]
async fn a_stream_resumed_with_nothing_missed_says_so_at_once() {
    let (server, mut client) = quiet_server().await;
    let (id, first, _) = started(&mut client, "standard").await;
    play(&mut client, &id, &first, 1, Right, Some(0))
        .await
        .unwrap();
    let mut watch = watch_game(&mut client, &id, None).await;
    let last = next_game_event(&mut watch).await.unwrap().sequence;
    drop(watch);
    let mut resumed = watch_game(&mut client, &id, Some(last)).await;
    let beat = tokio::time::timeout(Duration::from_secs(2), next(&mut resumed))
        .await
        .expect("the resumed game stream stayed silent")
        .unwrap()
        .unwrap()
        .event
        .unwrap();
    assert_eq!((kind_name(&beat), beat.sequence), ("heartbeat", last));
    // A stream that starts with something to send sends that first.
    let mut behind = watch_game(&mut client, &id, Some(last - 1)).await;
    let missed = next(&mut behind).await.unwrap().unwrap().event.unwrap();
    assert_eq!(missed.sequence, last);

    let mut lobby = watch_lobby(&mut client, None).await;
    let snapshot = next_lobby(&mut lobby).await;
    let mut resumed = watch_lobby(&mut client, Some(snapshot.sequence)).await;
    let beat = tokio::time::timeout(Duration::from_secs(2), next(&mut resumed))
        .await
        .expect("the resumed lobby stream stayed silent")
        .unwrap()
        .unwrap()
        .event
        .unwrap();
    // The open seeks or a heartbeat, at the sequence it resumed from.
    assert!(
        matches!(
            beat.kind,
            Some(LobbyKind::Heartbeat(_) | LobbyKind::SeekList(_))
        ),
        "{beat:?}"
    );
    assert_eq!(beat.sequence, snapshot.sequence);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_watcher_beyond_the_log_gets_a_fresh_snapshot() {
    let mut settings = config();
    settings.memory.game_event_retention = 3;
    let server = start(settings).await;
    let mut client = server.games().await;
    let (id, first, second) = started(&mut client, "standard").await;
    play(&mut client, &id, &first, 1, Right, Some(0))
        .await
        .unwrap();
    play(&mut client, &id, &second, 8, Left, Some(1))
        .await
        .unwrap();
    let mut watch = watch_game(&mut client, &id, Some(1)).await;
    let event = next_game_event(&mut watch).await.unwrap();
    assert_eq!(kind_name(&event), "snapshot", "never a silent gap");
    let Some(Kind::Snapshot(snap)) = event.kind else {
        unreachable!()
    };
    assert_eq!(snap.move_count, 2);
    assert_eq!(event.sequence, 8);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn fifty_spectators_see_every_move() {
    let server = start(config()).await;
    let mut client = server.games().await;
    let (id, first, second) = started(&mut client, "standard").await;
    let channel = server.channel().await;
    let mut spectators = Vec::new();
    for _ in 0..50 {
        let mut spectator = pb::game_service_client::GameServiceClient::new(channel.clone());
        let mut watch = watch_game(&mut spectator, &id, None).await;
        let snapshot = next_game_event(&mut watch).await.unwrap();
        spectators.push((watch, snapshot.sequence));
    }
    let moves = [
        (1, Right, &first),
        (8, Left, &second),
        (3, Right, &first),
        (9, Left, &second),
    ];
    for (ply, (square, direction, token)) in moves.into_iter().enumerate() {
        play(&mut client, &id, token, square, direction, Some(ply as u32))
            .await
            .unwrap();
    }
    let tasks: Vec<_> = spectators
        .into_iter()
        .map(|(mut watch, mut sequence)| {
            tokio::spawn(async move {
                let mut moves = 0;
                while moves < 4 {
                    let event = next_game_event(&mut watch).await.unwrap();
                    assert_eq!(event.sequence, sequence + 1);
                    sequence = event.sequence;
                    if kind_name(&event) == "move" {
                        moves += 1;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    server.stop().await.unwrap();
}

#[tokio::test]
async fn racing_the_same_move_plays_it_once() {
    let server = start(config()).await;
    let mut client = server.games().await;
    for _ in 0..5 {
        let (id, first, _) = started(&mut client, "standard").await;
        let attempts: Vec<_> = (0..2)
            .map(|_| {
                let (mut client, id, first) = (client.clone(), id.clone(), first.clone());
                tokio::spawn(async move { play(&mut client, &id, &first, 2, Right, Some(0)).await })
            })
            .collect();
        let mut wins = 0;
        for attempt in attempts {
            match attempt.await.unwrap() {
                Ok(_) => wins += 1,
                Err(status) => assert_reason(
                    &status,
                    tonic::Code::FailedPrecondition,
                    "ERROR_REASON_STALE_PLY",
                ),
            }
        }
        assert_eq!(wins, 1);
        let game = client
            .get_game(pb::GetGameRequest { game_id: id })
            .await
            .unwrap()
            .into_inner()
            .game
            .unwrap();
        assert_eq!(game.move_count, 1);
    }
    server.stop().await.unwrap();
}

async fn next_lobby(stream: &mut tonic::Streaming<pb::WatchLobbyResponse>) -> pb::LobbyEvent {
    loop {
        let event = next(stream).await.unwrap().unwrap().event.unwrap();
        if !matches!(event.kind, Some(LobbyKind::Heartbeat(_))) {
            return event;
        }
    }
}

#[tokio::test]
async fn lobby_streams_lifecycle_events_and_resumes() {
    let mut settings = config();
    settings.memory.lobby_event_retention = 4;
    let server = start(settings).await;
    let mut client = server.games().await;
    let mut lobby = watch_lobby(&mut client, None).await;
    let snapshot = next_lobby(&mut lobby).await;
    assert!(matches!(snapshot.kind, Some(LobbyKind::Snapshot(_))));
    assert_eq!(snapshot.sequence, 0);

    let (id, first, _) = started(&mut client, "standard").await;
    resign(&mut client, &id, &first).await;
    let mut names = Vec::new();
    for sequence in 1..=4 {
        let event = next_lobby(&mut lobby).await;
        assert_eq!(event.sequence, sequence);
        names.push(match event.kind.unwrap() {
            LobbyKind::GameCreated(created) => {
                assert_eq!(created.game.unwrap().id, id);
                "created"
            }
            LobbyKind::SeatTaken(_) => "seat",
            LobbyKind::GameStarted(_) => "started",
            LobbyKind::GameFinished(finished) => {
                assert_eq!(finished.game_id, id);
                "finished"
            }
            other => panic!("{other:?}"),
        });
    }
    assert_eq!(names, ["created", "seat", "started", "finished"]);

    // Resume from 2: events 3 and 4.
    let mut resumed = watch_lobby(&mut client, Some(2)).await;
    assert_eq!(next_lobby(&mut resumed).await.sequence, 3);
    assert_eq!(next_lobby(&mut resumed).await.sequence, 4);

    // Two more events push 1 and 2 out of the log: resuming from 1 needs a snapshot.
    let (open, _) = create(&mut client, "traditional").await;
    create(&mut client, "standard").await;
    let mut stale = watch_lobby(&mut client, Some(1)).await;
    let fresh = next_lobby(&mut stale).await;
    let Some(LobbyKind::Snapshot(snap)) = fresh.kind else {
        panic!("{fresh:?}")
    };
    assert_eq!(fresh.sequence, 6);
    assert_eq!(snap.games.len(), 2, "only waiting and active games");
    assert_eq!(snap.games[1].id, open.id, "newest first");
    tokio::time::sleep(Duration::from_millis(1)).await;
    server.stop().await.unwrap();
}
