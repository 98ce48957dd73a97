//! The computer opponent through the API: whole games against every level and preset, moves
//! that arrive as ordinary events, cancellation on resignation and shutdown, resuming after a
//! restart; and `RulesService.Analyze`.

mod common;

use std::time::{Duration, Instant};

use common::*;
use oanquan_proto::v1 as pb;
use oanquan_proto::v1::rules_service_client::RulesServiceClient;
use oanquan_rules::{Position, Preset, Rules};
use oanquan_server::grpc::convert;
use oanquan_server::{Config, Storage};
use pb::game_event::Kind;
use tokio::sync::mpsc;
use tonic::{Code, Status};
use tonic_types::StatusExt as _;

const PRESETS: [&str; 3] = ["standard", "traditional", "mancala-world"];

/// A quick computer: 10 ms per move.
fn quick() -> Config {
    let mut settings = config();
    settings.computer.computer_move_time = Duration::from_millis(10);
    settings
}

fn rules_of(preset: &str) -> Rules {
    preset.parse::<Preset>().unwrap().rules()
}

fn vs_computer(preset: &str, seat: pb::Player, level: u32) -> pb::CreateGameRequest {
    pb::CreateGameRequest {
        rules: common::preset(preset),
        start_position: None,
        seat: seat.into(),
        display_name: "Lan".into(),
        computer: Some(pb::ComputerOpponent { level }),
        ..Default::default()
    }
}

fn other(seat: pb::Player) -> pb::Player {
    match seat {
        pb::Player::First => pb::Player::Second,
        _ => pb::Player::First,
    }
}

/// A tiny deterministic generator for the person's random moves.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from((self.0 >> 33) % n as u64).unwrap()
    }
}

/// Creates a game against the computer and plays random legal moves for the person, driven by
/// the game's event stream, until GameOver. Returns the game id and every real event.
async fn play_to_the_end(
    server: &TestServer,
    preset: &str,
    seat: pb::Player,
    level: u32,
    seed: u64,
) -> (String, Vec<pb::GameEvent>) {
    let mut client = server.games().await;
    let rules = rules_of(preset);
    let created = client
        .create_game(vs_computer(preset, seat, level))
        .await
        .unwrap()
        .into_inner();
    let game = created.game.unwrap();
    assert_eq!(game.status(), pb::GameStatus::Active, "starts at once");
    assert_eq!(created.seat, i32::from(seat));
    let computer_seat = match other(seat) {
        pb::Player::First => game.first_seat.clone().unwrap(),
        _ => game.second_seat.clone().unwrap(),
    };
    assert_eq!(computer_seat.kind(), pb::PlayerKind::Computer);
    assert_eq!(computer_seat.computer_level, level);
    assert!(computer_seat.occupied);
    let token = created.player_token;
    let mut watch = client
        .watch_game(pb::WatchGameRequest {
            game_id: game.id.clone(),
            // From event 2 on: the computer joining, the start, then every move.
            after_sequence: Some(1),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut rng = Lcg(seed);
    let mut position = convert::position(game.position.as_ref(), rules, "position").unwrap();
    let mut events = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), next_game_event(&mut watch))
            .await
            .expect("the game goes on")
            .expect("the stream ends only after GameOver");
        let kind = event.kind.clone().unwrap();
        match &kind {
            Kind::Snapshot(snapshot) => {
                let game = snapshot.game.as_ref().unwrap();
                position = convert::position(game.position.as_ref(), rules, "position").unwrap();
            }
            Kind::MovePlayed(played) => {
                let record = played.record.as_ref().unwrap();
                position = convert::position(record.position.as_ref(), rules, "position").unwrap();
            }
            _ => {}
        }
        let done = matches!(kind, Kind::GameOver(_));
        if !matches!(kind, Kind::Snapshot(_)) {
            events.push(event);
        }
        if done {
            break;
        }
        // The person's turn: after the snapshot or a TurnStarted for their seat.
        let my_turn = match &kind {
            Kind::Snapshot(s) => {
                let game = s.game.as_ref().unwrap();
                game.status() == pb::GameStatus::Active
                    && game.position.as_ref().unwrap().to_move == i32::from(seat)
            }
            Kind::TurnStarted(turn) => turn.player == i32::from(seat),
            _ => false,
        };
        if my_turn && !position.is_over() {
            let moves = position.legal_moves();
            let mv = moves[rng.below(moves.len())];
            client
                .play_move(authed(
                    pb::PlayMoveRequest {
                        game_id: game.id.clone(),
                        r#move: Some(convert::move_out(mv)),
                        expected_ply: Some(position.ply()),
                    },
                    &token,
                ))
                .await
                .unwrap();
        }
    }
    (game.id, events)
}

#[tokio::test]
async fn people_play_whole_games_against_every_level_and_preset() {
    let server = start(quick()).await;
    let mut games = Vec::new();
    for level in 1..=7u32 {
        let preset = PRESETS[level as usize % 3];
        let seat = if level % 2 == 0 {
            pb::Player::First
        } else {
            pb::Player::Second
        };
        games.push((preset, seat, level));
    }
    let played =
        futures::future::join_all(games.iter().map(|&(preset, seat, level)| {
            play_to_the_end(&server, preset, seat, level, level.into())
        }))
        .await;
    let mut client = server.games().await;
    for ((id, events), &(preset, seat, level)) in played.iter().zip(&games) {
        let computer = i32::from(other(seat));
        // The start: the computer joined (as a computer), the game started.
        let joined: Vec<_> = events
            .iter()
            .filter_map(|e| match &e.kind {
                Some(Kind::PlayerJoined(j)) => Some(j.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(joined.len(), 1, "{preset} level {level}: {joined:?}");
        assert_eq!(events[0].sequence, 2);
        assert_eq!(joined[0].seat, computer);
        assert_eq!(joined[0].kind(), pb::PlayerKind::Computer);
        assert!(joined[0].display_name.starts_with("Computer ("));
        assert!(
            events
                .iter()
                .any(|e| matches!(e.kind, Some(Kind::GameStarted(_))))
        );
        // The computer's moves are ordinary MovePlayed events with traces, alternating with
        // the person's, each followed by a TurnStarted unless it ended the game.
        let moves: Vec<_> = events
            .iter()
            .filter_map(|e| match &e.kind {
                Some(Kind::MovePlayed(p)) => p.record.clone(),
                _ => None,
            })
            .collect();
        assert!(!moves.is_empty(), "{preset} level {level}");
        assert!(moves.iter().any(|m| m.player == computer));
        for (i, record) in moves.iter().enumerate() {
            assert_eq!(record.number as usize, i + 1);
            assert!(!record.steps.is_empty());
        }
        for pair in moves.windows(2) {
            assert_ne!(pair[0].player, pair[1].player, "players alternate");
        }
        let Some(Kind::GameOver(over)) = &events.last().unwrap().kind else {
            panic!("ends with GameOver")
        };
        assert_ne!(
            over.result.as_ref().unwrap().end_reason(),
            pb::EndReason::Resignation
        );
        // Sequences have no gaps, and the stored moves are the ones streamed.
        for pair in events.windows(2) {
            assert_eq!(pair[0].sequence + 1, pair[1].sequence);
        }
        let listed = client
            .list_moves(pb::ListMovesRequest {
                game_id: id.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .moves;
        assert_eq!(listed, moves, "{preset} level {level}");
        let rules = rules_of(preset);
        let mut replay = oanquan_rules::Game::new(rules).unwrap();
        for record in &listed {
            let mv = convert::mv(record.r#move.as_ref(), "move").unwrap();
            replay.play(mv).expect("every stored move is legal");
        }
        assert!(replay.position().is_over());
    }
}

#[tokio::test]
async fn bad_computer_levels_are_rejected() {
    let server = start(quick()).await;
    let mut client = server.games().await;
    let status = client
        .create_game(vs_computer("standard", pb::Player::First, 8))
        .await
        .unwrap_err();
    assert_field(&status, "computer.level");
    // Level 0 means no computer: an ordinary waiting game.
    let game = client
        .create_game(vs_computer("standard", pb::Player::First, 0))
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap();
    assert_eq!(game.status(), pb::GameStatus::WaitingForPlayers);
}

/// Waits (at most 5 s) for the first MovePlayed of game `id`, which the computer plays.
async fn computer_reply(client: &mut Games, id: &str) -> pb::game_event::MovePlayed {
    let mut watch = client
        .watch_game(pb::WatchGameRequest {
            game_id: id.to_owned(),
            // After the first event (the person joining): the computer's move comes replayed
            // from the log if it was quicker than this call. 0 would mean a snapshot.
            after_sequence: Some(1),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    loop {
        match next_game_event(&mut watch).await.map(|e| e.kind) {
            Some(Some(Kind::MovePlayed(played))) => return played,
            Some(_) => {}
            None => panic!("the stream ended before the computer moved"),
        }
    }
}

#[tokio::test]
async fn resigning_cancels_the_computers_search_at_once() {
    // One computer-move slot and a very long thinking time: the slot is only free again if
    // the search was cancelled.
    let mut settings = config();
    settings.computer.computer_move_time = Duration::from_secs(120);
    settings.computer.max_searches = 1;
    let server = start(settings).await;
    let mut client = server.games().await;
    // Master plays the opening book's move at once in the first plies: start at ply 10, which
    // the book does not cover, so that it has to search.
    let mut request = vs_computer("standard", pb::Player::Second, 7);
    request.start_position = Some(past_the_book());
    let created = client.create_game(request).await.unwrap().into_inner();
    let id = created.game.unwrap().id;
    // Let the computer start thinking about its first move.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let resigned = client
        .resign(authed(
            pb::ResignRequest {
                game_id: id.clone(),
            },
            &created.player_token,
        ))
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap();
    assert_eq!(resigned.status(), pb::GameStatus::Finished);
    // Another game whose computer moves first needs that one slot.
    let began = Instant::now();
    let next = client
        .create_game(vs_computer("standard", pb::Player::Second, 1))
        .await
        .unwrap()
        .into_inner();
    computer_reply(&mut client, &next.game.unwrap().id).await;
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "the search slot was freed promptly: {:?}",
        began.elapsed()
    );
    let game = client
        .get_game(pb::GetGameRequest { game_id: id })
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap();
    assert_eq!(game.move_count, 0, "no move from a cancelled search");
}

#[tokio::test]
async fn a_computer_turn_pending_at_shutdown_is_played_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    let on_disk = |move_time: Duration| {
        let mut settings = config();
        settings.storage = Storage::Sqlite(path.clone());
        settings.computer.computer_move_time = move_time;
        settings
    };

    // Before: the computer moves first and thinks for two minutes; the server stops meanwhile.
    let server = start(on_disk(Duration::from_secs(120))).await;
    let mut client = server.games().await;
    let created = client
        .create_game(vs_computer("standard", pb::Player::Second, 7))
        .await
        .unwrap()
        .into_inner();
    let id = created.game.unwrap().id;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let began = Instant::now();
    server.stop().await.unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "shutdown cancels the search: {:?}",
        began.elapsed()
    );

    // After: the turn resumes and the person can answer.
    let server = start(on_disk(Duration::from_millis(10))).await;
    let mut client = server.games().await;
    let (mut watch, snapshot) = watch_snapshot(&mut client, &id).await;
    let Some(Kind::Snapshot(snapshot)) = snapshot.kind else {
        panic!("{snapshot:?}")
    };
    let mut moved = snapshot.move_count == 1;
    while !moved {
        let event = next_game_event(&mut watch).await.unwrap();
        if let Some(Kind::MovePlayed(played)) = event.kind {
            assert_eq!(played.record.unwrap().player, i32::from(pb::Player::First));
            moved = true;
        }
    }
    let game = client
        .get_game(pb::GetGameRequest {
            game_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap();
    assert_eq!(game.move_count, 1);
    let position =
        convert::position(game.position.as_ref(), rules_of("standard"), "position").unwrap();
    let mv = position.legal_moves()[0];
    client
        .play_move(authed(
            pb::PlayMoveRequest {
                game_id: id,
                r#move: Some(convert::move_out(mv)),
                expected_ply: Some(1),
            },
            &created.player_token,
        ))
        .await
        .expect("the person's token still works after the restart");
}

#[tokio::test]
async fn analyze_returns_a_legal_move_and_a_line_that_replays() {
    let server = start(quick()).await;
    let mut rules_client = server.rules().await;
    for preset_name in PRESETS {
        let rules = rules_of(preset_name);
        // A position a few moves in.
        let mut position = Position::new(rules).unwrap();
        for i in 0..5 {
            let moves = position.legal_moves();
            position = position.play(moves[i % moves.len()]).unwrap().0;
        }
        let request = pb::AnalyzeRequest {
            game: None,
            rules: preset(preset_name),
            position: Some(convert::position_out(&position)),
            time_limit_ms: 5000,
            node_limit: Some(20_000),
            depth_limit: None,
            best_play_only: false,
        };
        let analysis = rules_client
            .analyze(request.clone())
            .await
            .unwrap()
            .into_inner();
        let best = convert::mv(analysis.best_move.as_ref(), "best_move").unwrap();
        assert!(position.legal_moves().contains(&best), "{preset_name}");
        assert!(analysis.depth >= 1);
        assert!(analysis.nodes > 0);
        assert_eq!(
            analysis.principal_variation.first(),
            analysis.best_move.as_ref()
        );
        let mut line = position;
        for mv in &analysis.principal_variation {
            let mv = convert::mv(Some(mv), "pv").unwrap();
            line = line.play(mv).expect("the line replays legally").0;
        }
        // A node limit makes the answer reproducible.
        let again = rules_client.analyze(request).await.unwrap().into_inner();
        assert_eq!(again.best_move, analysis.best_move);
        assert_eq!(again.eval_points, analysis.eval_points);
        assert_eq!(again.nodes, analysis.nodes);
    }
    // The defaults: the standard start, which the opening book answers without searching.
    let analysis = rules_client
        .analyze(pb::AnalyzeRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(
        analysis.best_move.is_some() && analysis.book,
        "{analysis:?}"
    );
    // Past the book the limits apply.
    let analysis = rules_client
        .analyze(pb::AnalyzeRequest {
            depth_limit: Some(2),
            position: Some(past_the_book()),
            ..pb::AnalyzeRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(analysis.best_move.is_some() && !analysis.book);
    assert!(analysis.depth <= 2);
}

/// The standard start at ply 10: the opening book (the first plies) does not hold it, so an
/// analysis of it searches.
fn past_the_book() -> pb::Position {
    pb::Position {
        squares: vec![10, 5, 5, 5, 5, 5, 10, 5, 5, 5, 5, 5],
        pieces: vec![0; 12],
        captured: Some(pb::PlayerPair::default()),
        captured_pieces: Some(pb::PlayerPair::default()),
        to_move: pb::Player::First.into(),
        ply: 10,
        ..Default::default()
    }
}

#[tokio::test]
async fn analyze_rejects_bad_limits_and_finished_positions() {
    let server = start(quick()).await;
    let mut rules_client = server.rules().await;
    for (request, field) in [
        (
            pb::AnalyzeRequest {
                time_limit_ms: 5001,
                ..pb::AnalyzeRequest::default()
            },
            "time_limit_ms",
        ),
        (
            pb::AnalyzeRequest {
                node_limit: Some(0),
                ..pb::AnalyzeRequest::default()
            },
            "node_limit",
        ),
        (
            pb::AnalyzeRequest {
                depth_limit: Some(0),
                ..pb::AnalyzeRequest::default()
            },
            "depth_limit",
        ),
        (
            pb::AnalyzeRequest {
                depth_limit: Some(10_000),
                ..pb::AnalyzeRequest::default()
            },
            "depth_limit",
        ),
        (
            pb::AnalyzeRequest {
                rules: preset("chess"),
                ..pb::AnalyzeRequest::default()
            },
            "rules.preset",
        ),
    ] {
        let status = rules_client.analyze(request).await.unwrap_err();
        assert_field(&status, field);
    }
    // A finished position: nothing to analyze.
    let mut position = Position::new(rules_of("standard")).unwrap();
    while !position.is_over() {
        position = position.play(position.legal_moves()[0]).unwrap().0;
    }
    let status = rules_client
        .analyze(pb::AnalyzeRequest {
            position: Some(convert::position_out(&position)),
            ..pb::AnalyzeRequest::default()
        })
        .await
        .unwrap_err();
    assert_reason(&status, Code::FailedPrecondition, "ERROR_REASON_GAME_OVER");
}

/// `n` analyses of the start position at their longest (5 s), started at once on `channel`;
/// each result arrives on the receiver as its call ends.
fn long_analyses(
    channel: &tonic::transport::Channel,
    n: usize,
) -> mpsc::UnboundedReceiver<Result<pb::AnalyzeResponse, Status>> {
    let (sender, receiver) = mpsc::unbounded_channel();
    for _ in 0..n {
        let mut rules = RulesServiceClient::new(channel.clone());
        let sender = sender.clone();
        tokio::spawn(async move {
            let result = rules
                .analyze(pb::AnalyzeRequest {
                    time_limit_ms: 5000,
                    position: Some(past_the_book()),
                    ..pb::AnalyzeRequest::default()
                })
                .await
                .map(tonic::Response::into_inner);
            let _ = sender.send(result);
        });
    }
    receiver
}

/// The next analysis to end, within `within`.
async fn next_ended(
    ended: &mut mpsc::UnboundedReceiver<Result<pb::AnalyzeResponse, Status>>,
    within: Duration,
) -> Result<pb::AnalyzeResponse, Status> {
    tokio::time::timeout(within, ended.recv())
        .await
        .expect("an analysis ended in time")
        .expect("the analysis task reported")
}

/// RESOURCE_EXHAUSTED, LIMIT_EXCEEDED and a RetryInfo of at most the longest analysis.
fn assert_retry_later(status: &Status) {
    assert_reason(
        status,
        Code::ResourceExhausted,
        "ERROR_REASON_LIMIT_EXCEEDED",
    );
    let delay = status
        .get_details_retry_info()
        .and_then(|info| info.retry_delay)
        .unwrap_or_else(|| panic!("no RetryInfo in {status:?}"));
    assert!(delay > Duration::ZERO, "{status:?}");
    assert!(delay <= Duration::from_secs(5), "{status:?}");
}

#[tokio::test]
async fn analyses_cannot_starve_a_computer_opponent() {
    // As on a small machine: one computer-move slot and two analysis slots.
    let mut settings = quick();
    settings.computer.max_searches = 1;
    settings.computer.max_analyses = 2;
    // No wait: a call beyond the slots is refused at once (with a wait, a running analysis
    // would give way to it; see the next test).
    settings.computer.analysis_queue_timeout = Duration::ZERO;
    let server = start(settings).await;
    // Three analyses of 5 s: two take the slots, the third is refused (it would otherwise sit
    // in a queue until its deadline).
    let began = Instant::now();
    let mut ended = long_analyses(&server.channel().await, 3);
    let refused = next_ended(&mut ended, Duration::from_secs(4))
        .await
        .expect_err("the analysis beyond the slots is refused");
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "refused quickly: {:?}",
        began.elapsed()
    );
    assert_retry_later(&refused);
    assert!(
        refused.message().contains("maximum of 2 analyses"),
        "{refused:?}"
    );

    // Every analysis slot is busy: a position the opening book holds is still answered at
    // once, from the book (a lookup takes no slot).
    let mut rules = pb::rules_service_client::RulesServiceClient::new(server.channel().await);
    let began = Instant::now();
    let booked = rules
        .analyze(pb::AnalyzeRequest {
            // The standard start, which the book holds.
            time_limit_ms: 5000,
            ..pb::AnalyzeRequest::default()
        })
        .await
        .expect("a book answer while every slot is busy")
        .into_inner();
    assert!(booked.book, "{booked:?}");
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "{:?}",
        began.elapsed()
    );

    // Every analysis slot is busy: a level-1 computer still answers at once.
    let mut client = server.games().await;
    let began = Instant::now();
    let created = client
        .create_game(vs_computer("standard", pb::Player::Second, 1))
        .await
        .unwrap()
        .into_inner();
    let id = created.game.unwrap().id;
    let played = computer_reply(&mut client, &id).await;
    let waited = began.elapsed();
    assert_eq!(
        played.record.unwrap().player,
        i32::from(pb::Player::First),
        "the computer's move"
    );
    assert!(
        matches!(ended.try_recv(), Err(mpsc::error::TryRecvError::Empty)),
        "both analyses were still searching when the computer moved"
    );
    // Its move time is 10 ms; the bound leaves room for a loaded machine, far below the 5 s
    // it waited when computer moves queued behind analyses.
    assert!(
        waited < Duration::from_secs(2),
        "the computer replied in {waited:?}"
    );
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_long_analysis_gives_way_to_a_call_waiting_for_its_slot() {
    // As on a 2-core machine: one analysis slot, and one caller sending long analyses.
    let mut settings = quick();
    settings.computer.max_analyses = 1;
    settings.computer.analysis_queue_timeout = Duration::from_millis(400);
    let server = start(settings).await;
    let mut ended = long_analyses(&server.channel().await, 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let began = Instant::now();
    let quick_one = server
        .rules()
        .await
        .analyze(pb::AnalyzeRequest {
            node_limit: Some(2000),
            position: Some(past_the_book()),
            ..pb::AnalyzeRequest::default()
        })
        .await
        .expect("the waiting call is served, not refused")
        .into_inner();
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
    assert!(!quick_one.cut_short && quick_one.best_move.is_some());
    // The long analysis answered with what it had found, and says it was cut short.
    let long = next_ended(&mut ended, Duration::from_secs(2))
        .await
        .expect("the long analysis answers");
    assert!(long.cut_short, "{long:?}");
    assert!(long.best_move.is_some() && long.depth > 0, "{long:?}");
    assert!(long.time_ms < 2000, "{long:?}");
    server.stop().await.unwrap();
}

/// An analysis whose call has a deadline before its time limit (the client's `grpc-timeout`,
/// or the server's `--request-timeout`) ends in time to answer: before, the search ran on to
/// its 5 s in its slot while the caller got DEADLINE_EXCEEDED and nothing.
#[tokio::test]
async fn an_analysis_answers_before_its_calls_deadline() {
    let mut settings = quick();
    settings.transport.request_timeout = Duration::from_millis(1500);
    let server = start(settings).await;
    let mut rules = server.rules().await;
    for client_timeout in [Some(Duration::from_millis(700)), None] {
        let mut request = tonic::Request::new(pb::AnalyzeRequest {
            time_limit_ms: 5000,
            position: Some(past_the_book()),
            ..pb::AnalyzeRequest::default()
        });
        if let Some(timeout) = client_timeout {
            request.set_timeout(timeout);
        }
        let deadline = client_timeout.unwrap_or(Duration::from_millis(1500));
        let began = Instant::now();
        let answer = rules
            .analyze(request)
            .await
            .unwrap_or_else(|status| panic!("{client_timeout:?}: {status:?}"))
            .into_inner();
        assert!(began.elapsed() < deadline, "{:?}", began.elapsed());
        assert!(answer.best_move.is_some() && answer.depth > 0, "{answer:?}");
        assert!(!answer.cut_short, "{answer:?}");
        // Searched for most of the time there was, not a token amount.
        assert!(
            u128::from(answer.time_ms) * 2 > deadline.as_millis() / 2,
            "{client_timeout:?}: {answer:?}"
        );
    }
    server.stop().await.unwrap();
}

/// A call that must wait for a busy slot waits only while an answer could still come before
/// its deadline, then is refused as busy with a retry delay: an outside probe's call, queued
/// with 0.9 s left behind a 5 s analysis (the hand-over comes at half the 2 s wait), got
/// DEADLINE_EXCEEDED.
#[tokio::test]
async fn a_call_whose_deadline_comes_before_the_slot_is_refused_as_busy() {
    let mut settings = quick();
    settings.computer.max_analyses = 1;
    settings.computer.analysis_queue_timeout = Duration::from_secs(2);
    let server = start(settings).await;
    let mut ended = long_analyses(&server.channel().await, 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut request = tonic::Request::new(pb::AnalyzeRequest {
        node_limit: Some(2000),
        position: Some(past_the_book()),
        ..pb::AnalyzeRequest::default()
    });
    request.set_timeout(Duration::from_millis(600));
    let began = Instant::now();
    let refused = server.rules().await.analyze(request).await.unwrap_err();
    assert!(
        began.elapsed() < Duration::from_millis(600),
        "{:?}",
        began.elapsed()
    );
    assert_retry_later(&refused);
    // The running analysis was not cut for a caller that had gone.
    let long = next_ended(&mut ended, Duration::from_secs(8))
        .await
        .expect("the long analysis answers");
    assert!(!long.cut_short, "{long:?}");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn analyses_are_capped_per_client_address() {
    // Loopback is exempt by default; the test's client is on loopback.
    let mut settings = config();
    settings.clients.exempt_loopback = false;
    settings.clients.rate_limit = 0.0;
    settings.computer.max_analyses = 4;
    settings.computer.max_analyses_per_client = Some(1);
    settings.computer.analysis_queue_timeout = Duration::from_secs(10);
    let server = start(settings).await;
    let channel = server.channel().await;
    // Two at once from one address: one runs, the other is refused at once (a free slot
    // would not change that, and there is no waiting for one).
    let began = Instant::now();
    let mut ended = long_analyses(&channel, 2);
    let refused = next_ended(&mut ended, Duration::from_secs(4))
        .await
        .expect_err("the second analysis of the address is refused");
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "refused quickly: {:?}",
        began.elapsed()
    );
    assert_retry_later(&refused);
    assert!(
        refused
            .message()
            .contains("your address already has 1 analysis running"),
        "{refused:?}"
    );
    assert!(
        matches!(ended.try_recv(), Err(mpsc::error::TryRecvError::Empty)),
        "the first analysis still runs"
    );
    // Other calls of the client are not affected.
    server
        .rules()
        .await
        .list_presets(pb::ListPresetsRequest {})
        .await
        .unwrap();
    server.stop().await.unwrap();
}

#[tokio::test]
async fn an_analysis_in_progress_at_shutdown_gets_unavailable() {
    let mut settings = config();
    settings.computer.max_analyses = 1;
    // Refused at once: with a wait, the running analysis would give way to the second.
    settings.computer.analysis_queue_timeout = Duration::ZERO;
    let mut server = start(settings).await;
    // One slot, two analyses: once one is refused, the other is searching.
    let mut ended = long_analyses(&server.channel().await, 2);
    let refused = next_ended(&mut ended, Duration::from_secs(4))
        .await
        .expect_err("the analysis beyond the slot is refused");
    assert_retry_later(&refused);
    let began = Instant::now();
    server.trigger_shutdown();
    // Not a partial result that looks like a complete one: UNAVAILABLE, as for a call that
    // arrives during the shutdown, so the client asks again on the next server.
    let stopped = next_ended(&mut ended, Duration::from_secs(4))
        .await
        .expect_err("an analysis cut short by the shutdown gives no result");
    assert_eq!(stopped.code(), Code::Unavailable, "{stopped:?}");
    assert!(stopped.message().contains("shutting down"), "{stopped:?}");
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "ended at once, not at its time limit: {:?}",
        began.elapsed()
    );
    server.stop().await.unwrap();
}
