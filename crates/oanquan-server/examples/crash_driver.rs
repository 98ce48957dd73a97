//! Drives `.ci/crash-test.sh`: plays many games against a server that is about to be killed
//! with SIGKILL, keeps a journal of everything the server acknowledged, and after the restart
//! checks the journal against the server.
//!
//! ```text
//! crash_driver --addr 127.0.0.1:50051 --journal journal.json [--verify-only] [--ready-file F]
//! crash_driver --addr A --addr B --addr C --computer-every 4 --timed-every 3 --journal journal.json
//! ```
//!
//! With several `--addr` (server nodes sharing one PostgreSQL database, `.ci/crash-test-nodes.sh`)
//! the journal is verified against the first, and the players and watchers are spread over all
//! of them, each game watched on another node than the one it is played on; the first player to
//! see its node go away stops every player, so that the run ends soon after a kill.
//!
//! Each run first verifies the journal (if any) against the server:
//!
//! * every acknowledged move is stored, in order (at most one more move per game, the one in
//!   flight at the kill, may be stored without having been acknowledged);
//! * every game replays from its move list (ListMoves) to its stored position (GetGame);
//! * its event log, read from the start, has strictly increasing sequences, one MovePlayed per
//!   stored move, numbered in order, and (for a finished game) exactly one GameOver: no move
//!   or end was written twice, by one node or by two;
//! * a game against the computer (`--computer-every`) gets its computer's move within 30 s,
//!   whichever node died: another one takes over the computer's turns;
//! * a WatchGame / WatchLobby resumed with `after_sequence` = the last sequence seen before the
//!   kill delivers every following event, without gap or duplicate, up to the current one;
//! * a timed game (`--timed-every`) is over: lost on time by the player to move at its last
//!   stored move (aborted by them if it had fewer than two moves), with one GameOver and no move
//!   after it;
//!
//! then (without `--verify-only`) plays: continues every unfinished game with the tokens from
//! the journal, starts new games to keep `--games` going, watches all of them and the lobby,
//! until the server goes away. Then it writes the journal and exits 0. Any violation exits 1.
//!
//! Timed games (real time, [`TIMED_INITIAL`] + 0) are played for a few moves and then left: the
//! player to move stops, so their flag falls about two seconds later, while the nodes are being
//! killed (or, before the second move, their first-move limit passes: the crash test starts the
//! servers with `--first-move-time 3s`). Each is watched
//! from another node, resuming on the next one when that node dies; once the players have
//! stopped, the driver waits for every such game's GameOver and checks who lost, and that it
//! came at most [`FLAG_LATENESS`] after the deadline the server announced.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use clap::Parser;
use oanquan_proto::v1 as pb;
use oanquan_proto::v1::game_service_client::GameServiceClient;
use oanquan_rules::{Direction, Game, Move, Player, Preset};
use oanquan_server::grpc::convert;
use rand::seq::IndexedRandom as _;
use serde::{Deserialize, Serialize};
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_types::StatusExt as _;

type Client = GameServiceClient<Channel>;

/// Each player's time in a timed game (no increment): the shortest the server takes is one
/// second; two leave the moving player room on a loaded machine, so that the flag that falls
/// is the one of the player who stopped.
const TIMED_INITIAL: Duration = Duration::from_secs(2);

/// How long after its deadline a timed game's GameOver may reach a watcher. When the leader
/// (which runs the timekeeper) is killed, the database ends its session and releases the lease
/// at once; the other nodes try for it every second (`LEASE_RETRY` of the PostgreSQL store), and
/// the new leader's timekeeper reads the active games and applies every deadline that passed,
/// so a flag due meanwhile falls about a second late. Another two seconds cover the new
/// leader's start, the commit and the notification to the watcher's node on a busy machine.
const FLAG_LATENESS: Duration = Duration::from_secs(3);

#[derive(Debug, Parser)]
struct Args {
    /// The server, host:port; repeated (or comma-separated) for several nodes on one
    /// database. The journal is verified against the first.
    #[arg(long, required = true, value_delimiter = ',')]
    addr: Vec<String>,
    /// One player in this many plays games against the computer (level 1) instead of both
    /// seats; 0 = none.
    #[arg(long, default_value_t = 0)]
    computer_every: usize,
    /// Journal file: read if present, written at the end.
    #[arg(long)]
    journal: PathBuf,
    /// One player in this many (of those not playing the computer) plays timed games it
    /// abandons after a few moves, so that flags fall while nodes are killed; 0 = none.
    #[arg(long, default_value_t = 0)]
    timed_every: usize,
    /// Games played at once.
    #[arg(long, default_value_t = 24)]
    games: usize,
    /// Give up playing after this many seconds even if the server is still up.
    #[arg(long, default_value_t = 30)]
    max_seconds: u64,
    /// Verify only; then play one move in each unfinished game to prove the tokens work.
    #[arg(long)]
    verify_only: bool,
    /// Created once the journal is verified, so that the crash test starts its kill timer only
    /// when the load starts: verifying a long journal may itself take seconds on a busy machine.
    #[arg(long)]
    ready_file: Option<PathBuf>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Journal {
    games: Vec<GameEntry>,
    /// Last lobby sequence a watcher received.
    lobby_seen: u64,
    rounds: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct GameEntry {
    id: String,
    first: Option<String>,
    second: Option<String>,
    /// Moves acknowledged by PlayMove, in notation.
    acked: Vec<String>,
    /// Last game-event sequence a watcher received.
    seen: u64,
    over: bool,
    /// Against the computer (second seat): its moves are journalled as they are seen stored.
    #[serde(default)]
    computer: bool,
    /// Real time, [`TIMED_INITIAL`] + 0, abandoned after a few moves: it must end by the clock.
    #[serde(default)]
    timed: bool,
}

#[derive(Debug, Default)]
struct Failures(Mutex<Vec<String>>);

impl Failures {
    fn add(&self, message: String) {
        eprintln!("crash_driver: FAIL: {message}");
        self.0.lock().unwrap().push(message);
    }
    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

fn rules() -> oanquan_rules::Rules {
    Preset::Standard.rules()
}

fn authed<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request.set_timeout(Duration::from_secs(10));
    request
}

fn timed<T>(message: T) -> Request<T> {
    let mut request = Request::new(message);
    request.set_timeout(Duration::from_secs(10));
    request
}

/// Errors a killed server causes; anything else is a bug.
fn server_gone(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::Unknown | Code::Cancelled | Code::DeadlineExceeded
    )
}

async fn connect(addr: &str) -> Result<Client, tonic::transport::Error> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect()
        .await?;
    Ok(GameServiceClient::new(channel))
}

// ---------------------------------------------------------------------------------------------
// Verification

async fn snapshot_sequence(client: &mut Client, id: &str) -> Result<u64, Status> {
    let mut stream = client
        .watch_game(timed(pb::WatchGameRequest {
            game_id: id.to_owned(),
            after_sequence: None,
            ..Default::default()
        }))
        .await?
        .into_inner();
    let event = stream
        .message()
        .await?
        .and_then(|m| m.event)
        .ok_or_else(|| Status::internal("empty watch stream"))?;
    match event.kind {
        Some(pb::game_event::Kind::Snapshot(_)) => Ok(event.sequence),
        other => Err(Status::internal(format!(
            "expected a snapshot, got {other:?}"
        ))),
    }
}

/// Resumes a watch after `after` and checks it delivers exactly `after + 1 ..= last`.
async fn check_game_resume(client: &mut Client, id: &str, after: u64) -> Result<(), String> {
    let last = snapshot_sequence(client, id)
        .await
        .map_err(|e| format!("{id}: snapshot: {e}"))?;
    if after > last {
        return Err(format!(
            "{id}: a watcher saw sequence {after} before the kill but the game is at {last}"
        ));
    }
    if after == 0 || after == last {
        return Ok(());
    }
    let mut stream = client
        .watch_game(timed(pb::WatchGameRequest {
            game_id: id.to_owned(),
            after_sequence: Some(after),
            ..Default::default()
        }))
        .await
        .map_err(|e| format!("{id}: resume after {after}: {e}"))?
        .into_inner();
    let mut expected = after + 1;
    while expected <= last {
        let event = tokio::time::timeout(Duration::from_secs(5), stream.message())
            .await
            .map_err(|_| format!("{id}: resumed stream stalled before {expected}"))?
            .map_err(|e| format!("{id}: resumed stream: {e}"))?
            .and_then(|m| m.event)
            .ok_or_else(|| format!("{id}: resumed stream ended before {expected}"))?;
        match event.kind {
            Some(pb::game_event::Kind::Heartbeat(_)) => continue,
            Some(pb::game_event::Kind::Snapshot(_)) => {
                return Err(format!(
                    "{id}: resume after {after} got a snapshot, not the events"
                ));
            }
            _ => {}
        }
        if event.sequence != expected {
            return Err(format!(
                "{id}: resumed stream gave {} where {expected} was due",
                event.sequence
            ));
        }
        expected += 1;
    }
    Ok(())
}

async fn check_lobby_resume(client: &mut Client, after: u64) -> Result<(), String> {
    let mut stream = client
        .watch_lobby(timed(pb::WatchLobbyRequest {
            after_sequence: None,
        }))
        .await
        .map_err(|e| format!("lobby snapshot: {e}"))?
        .into_inner();
    let last = stream
        .message()
        .await
        .map_err(|e| format!("lobby snapshot: {e}"))?
        .and_then(|m| m.event)
        .ok_or("lobby stream ended")?
        .sequence;
    drop(stream);
    if after > last {
        return Err(format!(
            "the lobby watcher saw {after} before the kill but the lobby is at {last}"
        ));
    }
    if after == 0 || after == last {
        return Ok(());
    }
    let mut stream = client
        .watch_lobby(timed(pb::WatchLobbyRequest {
            after_sequence: Some(after),
        }))
        .await
        .map_err(|e| format!("lobby resume: {e}"))?
        .into_inner();
    let mut expected = after + 1;
    while expected <= last {
        let event = tokio::time::timeout(Duration::from_secs(5), stream.message())
            .await
            .map_err(|_| format!("lobby resume stalled before {expected}"))?
            .map_err(|e| format!("lobby resume: {e}"))?
            .and_then(|m| m.event)
            .ok_or("lobby resume ended")?;
        match event.kind {
            Some(pb::lobby_event::Kind::Heartbeat(_)) => continue,
            Some(pb::lobby_event::Kind::Snapshot(_)) => {
                return Err(format!("lobby resume after {after} got a snapshot"));
            }
            _ => {}
        }
        if event.sequence != expected {
            return Err(format!(
                "lobby resume gave {} where {expected} was due",
                event.sequence
            ));
        }
        expected += 1;
    }
    Ok(())
}

/// Checks one game; returns its stored moves (to continue from) on success.
async fn verify_game(client: &mut Client, entry: &GameEntry) -> Result<Vec<Move>, String> {
    let id = &entry.id;
    // A computer may move between the two reads (a node plays the turns pending from before
    // the kill): read again until they agree, for a while.
    let mut attempts = 0;
    let (game, listed) = loop {
        let game = client
            .get_game(timed(pb::GetGameRequest {
                game_id: id.clone(),
            }))
            .await
            .map_err(|e| format!("{id}: GetGame: {e}"))?
            .into_inner()
            .game
            .ok_or("no game")?;
        let listed = client
            .list_moves(timed(pb::ListMovesRequest {
                game_id: id.clone(),
                ..Default::default()
            }))
            .await
            .map_err(|e| format!("{id}: ListMoves: {e}"))?
            .into_inner();
        attempts += 1;
        if !entry.computer || game.move_count as usize == listed.moves.len() || attempts == 20 {
            break (game, listed);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stored: Vec<Move> = listed
        .moves
        .iter()
        .map(|m| convert::mv(m.r#move.as_ref(), "move").map_err(|e| format!("{id}: {e:?}")))
        .collect::<Result<_, _>>()?;
    let stored_text: Vec<String> = stored.iter().map(Move::to_string).collect();
    if stored_text.len() < entry.acked.len() || stored_text[..entry.acked.len()] != entry.acked {
        return Err(format!(
            "{id}: acknowledged moves lost: acknowledged {:?}, stored {:?}",
            entry.acked, stored_text
        ));
    }
    // In flight at the kill: one move, and against the computer its reply too.
    let in_flight = if entry.computer { 2 } else { 1 };
    if stored.len() > entry.acked.len() + in_flight {
        return Err(format!(
            "{id}: {} moves stored but only {} acknowledged (at most {in_flight} can be in \
             flight)",
            stored.len(),
            entry.acked.len()
        ));
    }
    if game.move_count as usize != stored.len() {
        return Err(format!(
            "{id}: GetGame says {} moves, ListMoves lists {}",
            game.move_count,
            stored.len()
        ));
    }
    let start = convert::position(listed.start_position.as_ref(), rules(), "start")
        .map_err(|e| format!("{id}: start: {e:?}"))?;
    let replayed = Game::replay(start, &stored).map_err(|e| format!("{id}: replay: {e}"))?;
    // Compared as the API shows positions: a finished one names nobody to move, and one that
    // ended by repetition is over only by its history, which the replay has.
    let expected = convert::position_out(replayed.position());
    if game.position.as_ref() != Some(&expected) {
        return Err(format!(
            "{id}: the moves replay to {expected:?} but the stored position is {:?}",
            game.position
        ));
    }
    for (record, index) in listed.moves.iter().zip(1..) {
        if record.number != index {
            return Err(format!("{id}: move numbered {} at {index}", record.number));
        }
    }
    check_game_resume(client, id, entry.seen).await?;
    let over = matches!(
        game.status(),
        pb::GameStatus::Finished | pb::GameStatus::Aborted
    );
    check_log(client, id, stored.len(), over).await?;
    // A timed game whose join was not acknowledged may never have started: nobody stopped in
    // it, and it waits for the idle reaper.
    if entry.timed && entry.second.is_some() {
        let result = game.result.as_ref().ok_or_else(|| {
            format!(
                "{id}: a timed game left long ago is still {:?}",
                game.status()
            )
        })?;
        let loser = replayed.position().to_move();
        check_timed_end(id, result, stored.len(), convert::player_out(loser))?;
    }
    Ok(stored)
}

/// Whether the rules ended the game with its last move (then nobody left it).
fn ended_by_the_rules(result: &pb::GameResult) -> bool {
    matches!(
        result.end_reason(),
        pb::EndReason::Mandarins | pb::EndReason::Repetition | pb::EndReason::PlyLimit
    )
}

/// A timed game left by the player to move ends because of them: on time, or, before each
/// player has made a first move, aborted when the first-move limit passes. Unless the last move
/// played before leaving ended the game by the rules: that is checked by the replay.
fn check_timed_end(
    id: &str,
    result: &pb::GameResult,
    moves: usize,
    loser: i32,
) -> Result<(), String> {
    if ended_by_the_rules(result) {
        return Ok(());
    }
    let (reason, winner) = if moves >= 2 {
        let winner = match pb::Player::try_from(loser) {
            Ok(pb::Player::First) => pb::Player::Second,
            Ok(pb::Player::Second) => pb::Player::First,
            _ => pb::Player::Unspecified,
        };
        (pb::EndReason::Timeout, winner)
    } else {
        (pb::EndReason::Aborted, pb::Player::Unspecified)
    };
    if result.end_reason() != reason || result.ended_by != loser || result.winner() != winner {
        return Err(format!(
            "{id}: a timed game left after {moves} moves by {:?} ended with {:?}, ended by {:?}, \
             won by {:?}; expected {reason:?}, won by {winner:?}",
            pb::Player::try_from(loser),
            result.end_reason(),
            result.ended_by(),
            result.winner()
        ));
    }
    Ok(())
}

/// Reads the game's log from its first event: strictly increasing sequences, MovePlayed
/// numbered 1, 2, … up to `moves`, and for a finished game (whose stream ends after it)
/// exactly one GameOver.
async fn check_log(client: &mut Client, id: &str, moves: usize, over: bool) -> Result<(), String> {
    let mut stream = client
        .watch_game(timed(pb::WatchGameRequest {
            game_id: id.to_owned(),
            // 0 would ask for a snapshot; 1 is the creation, which every game has.
            after_sequence: Some(1),
            ..Default::default()
        }))
        .await
        .map_err(|e| format!("{id}: log: {e}"))?
        .into_inner();
    let (mut sequence, mut played, mut ends) = (1, 0_usize, 0);
    while over || played < moves {
        let message = tokio::time::timeout(Duration::from_secs(5), stream.message())
            .await
            .map_err(|_| format!("{id}: the log stalled after {played} moves"))?
            .map_err(|e| format!("{id}: log: {e}"))?;
        let Some(event) = message.and_then(|m| m.event) else {
            break;
        };
        match &event.kind {
            Some(pb::game_event::Kind::Heartbeat(_)) => continue,
            Some(pb::game_event::Kind::MovePlayed(move_played)) => {
                if ends > 0 {
                    return Err(format!("{id}: the log has a move after the GameOver"));
                }
                played += 1;
                let number = move_played.record.as_ref().map(|r| r.number as usize);
                if number != Some(played) {
                    return Err(format!(
                        "{id}: the log's MovePlayed {number:?} where {played} was due"
                    ));
                }
            }
            Some(pb::game_event::Kind::GameOver(_)) => ends += 1,
            _ => {}
        }
        if event.sequence <= sequence {
            return Err(format!(
                "{id}: the log goes from {sequence} to {}",
                event.sequence
            ));
        }
        sequence = event.sequence;
    }
    if played != moves || (over && ends != 1) {
        return Err(format!(
            "{id}: the log has {played} MovePlayed and {ends} GameOver for {moves} stored moves \
             (finished: {over})"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Playing

#[derive(Debug)]
struct Shared {
    journal: Mutex<Journal>,
    failures: Failures,
    deadline: Instant,
    /// Set by the first player whose node went away: the others stop too.
    stop: AtomicBool,
    /// The timed games' ends as their watchers saw them.
    ends: Mutex<Vec<TimedEnd>>,
}

#[derive(Debug, Clone, Copy)]
struct TimedEnd {
    /// How long after it the GameOver came.
    lateness: Duration,
    /// On time (not aborted before the second move).
    flag: bool,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || Instant::now() > self.deadline
    }
}

/// Watches a game, checking live events arrive in order, recording the last sequence seen.
async fn watch_game(shared: Arc<Shared>, mut client: Client, index: usize, id: String) {
    let Ok(response) = client
        .watch_game(pb::WatchGameRequest {
            game_id: id.clone(),
            after_sequence: None,
            ..Default::default()
        })
        .await
    else {
        return;
    };
    let mut stream = response.into_inner();
    let mut last = None;
    while let Ok(Some(message)) = stream.message().await {
        let Some(event) = message.event else { continue };
        match event.kind {
            Some(pb::game_event::Kind::Heartbeat(_)) => continue,
            Some(pb::game_event::Kind::Snapshot(_)) => {}
            _ => {
                if let Some(last) = last {
                    if event.sequence != last + 1 {
                        shared.failures.add(format!(
                            "{id}: live watch went from {last} to {}",
                            event.sequence
                        ));
                    }
                }
            }
        }
        last = Some(event.sequence);
        let mut journal = shared.journal.lock().unwrap();
        let entry = &mut journal.games[index];
        entry.seen = entry.seen.max(event.sequence);
    }
}

/// What a timed game's watcher knows of it.
#[derive(Debug, Default)]
struct TimedView {
    last: Option<u64>,
    moves: usize,
    to_move: i32,
    deadline: Option<SystemTime>,
}

impl TimedView {
    fn turn(&mut self, to_move: i32, clocks: Option<&pb::Clocks>) {
        self.to_move = to_move;
        if let Some(deadline) = clocks.and_then(|c| c.deadline) {
            self.deadline = SystemTime::try_from(deadline).ok();
        }
    }
}

/// Watches a timed game until its GameOver, resuming after the last event seen on the next
/// node whenever the stream breaks (its node was killed); checks the end (see
/// [`check_timed_end`]) and that it came within [`FLAG_LATENESS`] of the announced deadline.
async fn watch_timed(
    shared: Arc<Shared>,
    nodes: Vec<Client>,
    first: usize,
    index: usize,
    id: String,
) {
    let mut view = TimedView::default();
    let mut node = first;
    let mut broken = 0;
    loop {
        let request = pb::WatchGameRequest {
            game_id: id.clone(),
            after_sequence: view.last,
            ..Default::default()
        };
        if let Ok(response) = nodes[node].clone().watch_game(request).await {
            let mut stream = response.into_inner();
            while let Ok(Some(message)) = stream.message().await {
                broken = 0;
                let Some(event) = message.event else { continue };
                let result = match event.kind {
                    Some(pb::game_event::Kind::Heartbeat(_)) => continue,
                    Some(pb::game_event::Kind::Snapshot(snapshot)) => {
                        let Some(game) = snapshot.game else { continue };
                        view.moves = game.move_count as usize;
                        let to_move = game.position.as_ref().map_or(0, |p| p.to_move);
                        view.turn(to_move, game.clocks.as_ref());
                        game.result
                    }
                    kind => {
                        if let Some(last) = view.last.filter(|last| event.sequence != last + 1) {
                            shared.failures.add(format!(
                                "{id}: watch resumed after {last} went on with {}",
                                event.sequence
                            ));
                        }
                        match kind {
                            Some(pb::game_event::Kind::MovePlayed(_)) => {
                                view.moves += 1;
                                None
                            }
                            Some(pb::game_event::Kind::TurnStarted(turn)) => {
                                view.turn(turn.player, turn.clocks.as_ref());
                                None
                            }
                            Some(pb::game_event::Kind::GameOver(over)) => over.result,
                            _ => None,
                        }
                    }
                };
                view.last = Some(event.sequence);
                {
                    let mut journal = shared.journal.lock().unwrap();
                    let entry = &mut journal.games[index];
                    entry.seen = entry.seen.max(event.sequence);
                }
                if let Some(result) = result {
                    return timed_over(&shared, index, &id, &view, &result);
                }
            }
        }
        // Its node is gone (or going): the next one, after a pause once all were tried.
        node = (node + 1) % nodes.len();
        broken += 1;
        if broken % nodes.len() == 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn timed_over(shared: &Shared, index: usize, id: &str, view: &TimedView, result: &pb::GameResult) {
    let seen = SystemTime::now();
    if let Err(message) = check_timed_end(id, result, view.moves, view.to_move) {
        shared.failures.add(message);
    }
    if ended_by_the_rules(result) {
        // No clock ran out: there is no deadline to be late for.
        shared.journal.lock().unwrap().games[index].over = true;
        return;
    }
    let Some(deadline) = view.deadline else {
        shared.failures.add(format!(
            "{id}: a timed game ended but no deadline was announced"
        ));
        return;
    };
    let lateness = seen.duration_since(deadline).unwrap_or(Duration::ZERO);
    if lateness > FLAG_LATENESS {
        shared.failures.add(format!(
            "{id}: the game ended {lateness:?} after its deadline (at most {FLAG_LATENESS:?})"
        ));
    }
    shared.ends.lock().unwrap().push(TimedEnd {
        lateness,
        flag: result.end_reason() == pb::EndReason::Timeout,
    });
    shared.journal.lock().unwrap().games[index].over = true;
}

async fn watch_lobby(shared: Arc<Shared>, mut client: Client) {
    let Ok(response) = client
        .watch_lobby(pb::WatchLobbyRequest {
            after_sequence: None,
        })
        .await
    else {
        return;
    };
    let mut stream = response.into_inner();
    let mut last = None;
    while let Ok(Some(message)) = stream.message().await {
        let Some(event) = message.event else { continue };
        match event.kind {
            Some(pb::lobby_event::Kind::Heartbeat(_)) => continue,
            Some(pb::lobby_event::Kind::Snapshot(_)) => {}
            _ => {
                if let Some(last) = last {
                    if event.sequence != last + 1 {
                        shared.failures.add(format!(
                            "live lobby watch went from {last} to {}",
                            event.sequence
                        ));
                    }
                }
            }
        }
        last = Some(event.sequence);
        let mut journal = shared.journal.lock().unwrap();
        journal.lobby_seen = journal.lobby_seen.max(event.sequence);
    }
}

/// Creates a standard game and seats both players; records it as soon as it exists.
async fn new_game(
    shared: &Shared,
    client: &mut Client,
    computer: bool,
    clocked: bool,
) -> Result<usize, Status> {
    let time_control = clocked.then(|| pb::TimeControl {
        kind: Some(pb::time_control::Kind::RealTime(
            pb::time_control::RealTime {
                initial: prost_types::Duration::try_from(TIMED_INITIAL).ok(),
                increment: Some(prost_types::Duration::default()),
            },
        )),
    });
    let created = client
        .create_game(timed(pb::CreateGameRequest {
            rules: Some(pb::RulesSpec {
                kind: Some(pb::rules_spec::Kind::Preset("standard".to_owned())),
            }),
            start_position: None,
            seat: pb::Player::First.into(),
            display_name: "crash".to_owned(),
            computer: computer.then_some(pb::ComputerOpponent { level: 1 }),
            time_control,
            ..Default::default()
        }))
        .await?
        .into_inner();
    let id = created.game.map(|g| g.id).unwrap_or_default();
    let index = {
        let mut journal = shared.journal.lock().unwrap();
        journal.games.push(GameEntry {
            id: id.clone(),
            first: Some(created.player_token),
            second: None,
            acked: Vec::new(),
            seen: 0,
            over: false,
            computer,
            timed: clocked,
        });
        journal.games.len() - 1
    };
    if computer {
        return Ok(index);
    }
    let joined = client
        .join_game(timed(pb::JoinGameRequest {
            game_id: id,
            display_name: "test".to_owned(),
        }))
        .await?
        .into_inner();
    shared.journal.lock().unwrap().games[index].second = Some(joined.player_token);
    Ok(index)
}

/// Plays a game from `moves` until it ends (Ok) or the server goes away (Err).
async fn play_game(
    shared: &Shared,
    client: &mut Client,
    index: usize,
    moves: &[Move],
    limit: Option<usize>,
) -> Result<(), Status> {
    let (id, first, second, computer, timed) = {
        let journal = shared.journal.lock().unwrap();
        let entry = &journal.games[index];
        (
            entry.id.clone(),
            entry.first.clone(),
            entry.second.clone(),
            entry.computer,
            entry.timed,
        )
    };
    let (Some(first), Some(second)) = (first, second.or_else(|| computer.then(String::new))) else {
        return Ok(()); // The join was not acknowledged: nobody can play it.
    };
    let start = oanquan_rules::Position::new(rules()).expect("standard rules");
    let mut game = Game::replay(start, moves).map_err(|e| Status::internal(e.to_string()))?;
    let mut played = 0;
    while !game.position().is_over() && limit.is_none_or(|limit| played < limit) {
        if shared.stopping() {
            return Ok(());
        }
        let position = *game.position();
        if computer && position.to_move() == Player::Second {
            let Some(replies) = computer_reply(shared, client, &id, position.ply()).await? else {
                return Ok(());
            };
            let mut journal = shared.journal.lock().unwrap();
            let entry = &mut journal.games[index];
            for reply in replies {
                game.play(reply)
                    .map_err(|e| Status::internal(format!("{id}: the computer's {reply}: {e}")))?;
                entry.acked.push(reply.to_string());
            }
            entry.over = game.position().is_over();
            continue;
        }
        let mv = *position
            .legal_moves()
            .choose(&mut rand::rng())
            .expect("a position not over has moves");
        let token = match position.to_move() {
            Player::First => &first,
            Player::Second => &second,
        };
        let direction = match mv.direction {
            Direction::Right => pb::Direction::Right,
            Direction::Left => pb::Direction::Left,
        };
        let played_move = client
            .play_move(authed(
                pb::PlayMoveRequest {
                    game_id: id.clone(),
                    r#move: Some(pb::Move {
                        square: Some(u32::from(mv.square)),
                        direction: direction.into(),
                    }),
                    expected_ply: Some(position.ply()),
                },
                token,
            ))
            .await;
        match played_move {
            Ok(_) => {}
            // A loaded machine made the mover of a timed game miss their deadline: the game is
            // left here as if they had stopped, and they lose it so.
            Err(status) if timed && is_time_up(&status) => return Ok(()),
            Err(status) => return Err(status),
        }
        game.play(mv).map_err(|e| Status::internal(e.to_string()))?;
        played += 1;
        let mut journal = shared.journal.lock().unwrap();
        let entry = &mut journal.games[index];
        entry.acked.push(mv.to_string());
        entry.over = game.position().is_over();
    }
    Ok(())
}

fn is_time_up(status: &Status) -> bool {
    status.code() == Code::FailedPrecondition
        && status
            .get_details_error_info()
            .is_some_and(|info| info.reason == "ERROR_REASON_TIME_UP")
}

/// The moves stored after `ply` once the computer has played it: `None` if the run stops
/// first. A computer that does not move within 30 s (time for another node to take the turns
/// over from a killed one) is a failure, reported as an internal error.
async fn computer_reply(
    shared: &Shared,
    client: &mut Client,
    id: &str,
    ply: u32,
) -> Result<Option<Vec<Move>>, Status> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = client
            .list_moves(timed(pb::ListMovesRequest {
                game_id: id.to_owned(),
                ..Default::default()
            }))
            .await?
            .into_inner();
        if listed.moves.len() > ply as usize {
            return listed.moves[ply as usize..]
                .iter()
                .map(|m| convert::mv(m.r#move.as_ref(), "move"))
                .collect::<Result<Vec<_>, _>>()
                .map(Some)
                .map_err(|e| Status::internal(format!("{id}: {e:?}")));
        }
        if shared.stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        if Instant::now() > deadline {
            return Err(Status::internal(format!(
                "{id}: the computer did not play ply {} within 30 s",
                ply + 1
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What one player task plays.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Both seats.
    Both,
    /// Against the computer.
    Computer,
    /// Both seats of timed games, left after a few moves.
    Timed,
}

/// One player task: continue `resume`, then keep starting new games until the server is gone.
/// Games are watched on `watchers[watch_node]`.
async fn player(
    shared: Arc<Shared>,
    mut client: Client,
    watchers: Vec<Client>,
    watch_node: usize,
    resume: Vec<(usize, Vec<Move>)>,
    new_games: bool,
    kind: Kind,
) {
    let watcher = watchers[watch_node].clone();
    let report = |status: Status| {
        if server_gone(&status) {
            shared.stop.store(true, Ordering::Relaxed);
        } else {
            shared
                .failures
                .add(format!("unexpected error while playing: {status:?}"));
        }
    };
    for (index, moves) in resume {
        let id = shared.journal.lock().unwrap().games[index].id.clone();
        tokio::spawn(watch_game(Arc::clone(&shared), watcher.clone(), index, id));
        let limit = (!new_games).then_some(1);
        if let Err(status) = play_game(&shared, &mut client, index, &moves, limit).await {
            return report(status);
        }
    }
    let (computer, timed) = (matches!(kind, Kind::Computer), matches!(kind, Kind::Timed));
    while new_games && !shared.stopping() {
        let index = match new_game(&shared, &mut client, computer, timed).await {
            Ok(index) => index,
            Err(status) => return report(status),
        };
        let id = shared.journal.lock().unwrap().games[index].id.clone();
        let limit = if timed {
            let watch = watch_timed(Arc::clone(&shared), watchers.clone(), watch_node, index, id);
            tokio::spawn(watch);
            // At least two, so that the clock of the one who stops runs (before, it is the
            // first-move limit); sometimes fewer happen when a node dies meanwhile.
            Some(rand::random_range(2..=6))
        } else {
            tokio::spawn(watch_game(Arc::clone(&shared), watcher.clone(), index, id));
            None
        };
        if let Err(status) = play_game(&shared, &mut client, index, &[], limit).await {
            return report(status);
        }
    }
}

/// Waits until every timed game left in this round has ended (its watcher saw the GameOver and
/// checked how late it came). Those still running after the server's default first-move limit
/// (30 s, the farthest a deadline can be) and [`FLAG_LATENESS`] are failures.
async fn wait_for_timed_ends(shared: &Shared) {
    let give_up = Instant::now() + Duration::from_secs(30) + FLAG_LATENESS;
    loop {
        let pending: Vec<String> = {
            let journal = shared.journal.lock().unwrap();
            journal
                .games
                .iter()
                .filter(|g| g.timed && g.second.is_some() && !g.over)
                .map(|g| g.id.clone())
                .collect()
        };
        if pending.is_empty() {
            return;
        }
        if Instant::now() > give_up {
            for id in pending {
                shared
                    .failures
                    .add(format!("{id}: a timed game left here never ended"));
            }
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The timed games' ends in this round: how many, and how late. One that came more than
/// [`WAITED`] after its deadline was due while no node ran the timekeeper (its leader killed, the
/// lease not yet taken over), or on a very busy machine.
fn timed_summary(shared: &Shared) -> String {
    let ends = shared.ends.lock().unwrap();
    let flags = ends.iter().filter(|e| e.flag).count();
    let waited = ends.iter().filter(|e| e.lateness > WAITED).count();
    let max = ends.iter().map(|e| e.lateness).max().unwrap_or_default();
    format!(
        "{flags} flags fell and {} first-move limits passed, {waited} of them more than {} ms \
         after the deadline, the latest {} ms after",
        ends.len() - flags,
        WAITED.as_millis(),
        max.as_millis()
    )
}

/// See [`timed_summary`].
const WAITED: Duration = Duration::from_millis(250);

async fn run(args: Args) -> Result<String, String> {
    let mut journal: Journal = match std::fs::read(&args.journal) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| format!("journal: {e}"))?,
        Err(_) => Journal::default(),
    };
    let mut clients = Vec::new();
    for addr in &args.addr {
        clients.push(
            connect(addr)
                .await
                .map_err(|e| format!("connect to {addr}: {e}"))?,
        );
    }
    let mut client = clients[0].clone();

    // 1. Verify what the previous rounds were told.
    let failures = Failures::default();
    let mut resume: Vec<(usize, Vec<Move>)> = Vec::new();
    for (index, entry) in journal.games.iter().enumerate() {
        match verify_game(&mut client, entry).await {
            Ok(stored) => {
                // A timed game was left for good: nobody moves in it again.
                if !entry.over && !entry.timed {
                    resume.push((index, stored));
                }
            }
            Err(message) => failures.add(message),
        }
    }
    if let Err(message) = check_lobby_resume(&mut client, journal.lobby_seen).await {
        failures.add(message);
    }
    let verified_games = journal.games.len();
    let verified_moves: usize = journal.games.iter().map(|g| g.acked.len()).sum();
    if failures.count() > 0 {
        return Err(format!("{} verification failures", failures.count()));
    }
    if let Some(path) = &args.ready_file {
        std::fs::write(path, b"verified\n").map_err(|e| format!("ready file: {e}"))?;
    }
    // Moves stored but not acknowledged (in flight at the kill) are now known: adopt them.
    for (index, stored) in &resume {
        journal.games[*index].acked = stored.iter().map(Move::to_string).collect();
    }

    // 2. Play until the server goes away (or, with --verify-only, one move per game).
    journal.rounds += 1;
    let shared = Arc::new(Shared {
        journal: Mutex::new(journal),
        failures,
        deadline: Instant::now() + Duration::from_secs(args.max_seconds),
        stop: AtomicBool::new(false),
        ends: Mutex::new(Vec::new()),
    });
    // Watch streams on connections of their own, as a separate client would.
    let mut watchers = Vec::new();
    for addr in &args.addr {
        watchers.push(
            connect(addr)
                .await
                .map_err(|e| format!("connect to {addr}: {e}"))?,
        );
    }
    tokio::spawn(watch_lobby(Arc::clone(&shared), watchers[0].clone()));
    let mut groups: HashMap<usize, Vec<(usize, Vec<Move>)>> = HashMap::new();
    for (n, game) in resume.into_iter().enumerate() {
        groups.entry(n % args.games.max(1)).or_default().push(game);
    }
    let mut tasks = Vec::new();
    let nodes = clients.len();
    for task in 0..args.games.max(1) {
        // Each game is watched on the next node: its events cross from node to node.
        let kind = if args.computer_every > 0 && task % args.computer_every == 0 {
            Kind::Computer
        } else if args.timed_every > 0 && task % args.timed_every == args.timed_every - 1 {
            Kind::Timed
        } else {
            Kind::Both
        };
        tasks.push(tokio::spawn(player(
            Arc::clone(&shared),
            clients[task % nodes].clone(),
            watchers.clone(),
            (task + 1) % nodes,
            groups.remove(&task).unwrap_or_default(),
            !args.verify_only,
            kind,
        )));
    }
    for task in tasks {
        task.await.map_err(|e| format!("player task: {e}"))?;
    }
    wait_for_timed_ends(&shared).await;
    // Let the watchers take in the last events before the journal is written.
    tokio::time::sleep(Duration::from_millis(if args.verify_only {
        500
    } else {
        100
    }))
    .await;

    let failures = shared.failures.count();
    let journal = shared.journal.lock().unwrap();
    let bytes = serde_json::to_vec(&*journal).map_err(|e| e.to_string())?;
    std::fs::write(&args.journal, bytes).map_err(|e| format!("journal: {e}"))?;
    if failures > 0 {
        return Err(format!("{failures} failures while playing"));
    }
    let acked: usize = journal.games.iter().map(|g| g.acked.len()).sum();
    let computer = journal.games.iter().filter(|g| g.computer).count();
    let timed = journal.games.iter().filter(|g| g.timed).count();
    Ok(format!(
        "round {}: verified {verified_games} games / {verified_moves} acknowledged moves; \
         now {} games ({computer} against the computer, {timed} timed), {acked} acknowledged \
         moves, lobby seen up to {}; {}",
        journal.rounds,
        journal.games.len(),
        journal.lobby_seen,
        timed_summary(&shared)
    ))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    match runtime.block_on(run(args)) {
        Ok(summary) => {
            println!("crash_driver: {summary}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("crash_driver: FAILED: {message}");
            ExitCode::FAILURE
        }
    }
}
