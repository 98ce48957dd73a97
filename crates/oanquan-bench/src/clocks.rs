//! The clocks benchmark: many timed games whose clocks run at once on one server, then nobody
//! moves, and every flag must fall on time by the server alone.
//!
//! 1. **Setup**: each game is created with a real-time control, joined, and its first player's
//!    first move played (`parallel` games at a time).
//! 2. **Second moves, on a schedule**: game `i`'s second move (which starts the first player's
//!    clock) is sent at `t0 + i·step`, and its initial time was chosen at creation as
//!    `lead + spread·i/n − i·step`, so that its deadline falls at about `t0 + lead + spread·i/n`
//!    whenever the setup ended: the deadlines cover `spread` (0 or 100 ms = a burst).
//! 3. **Idle**: nobody calls; the server's CPU and memory are read from `/proc` over the
//!    window between the last second move (plus a settling second) and the first deadline.
//! 4. **Flags**: a lobby watch records when each `GameFinished` reaches a client.
//! 5. **Collection**: each game's events are read back (`WatchGame` from sequence 1): the
//!    deadline of its last `TurnStarted` and the time of its `GameOver`, both stamped by the
//!    server's clock. Lateness = GameOver time − deadline.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use futures::StreamExt as _;
use oanquan_proto::v1 as pb;
use oanquan_proto::v1::game_service_client::GameServiceClient;
use oanquan_rules::{Direction, Game, Move, Preset};
use serde::Serialize;
use tokio::sync::watch;

use crate::load::Pool;
use crate::procs::ProcSample;

/// Between the last second move and the start of the idle window: late responses and the
/// server's own settling (allocator, timers) are not idleness.
const SETTLE: Duration = Duration::from_secs(1);
/// The idle window ends this long before the first deadline.
const BEFORE_FIRST_DEADLINE: Duration = Duration::from_millis(300);
/// Longest wait after the last deadline for the lobby to report every game finished.
const MAX_WAIT_AFTER_LAST_DEADLINE: Duration = Duration::from_secs(15);
/// Deadline of each unary call and of each read of a replayed stream.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How to run the clocks benchmark.
#[derive(Debug, Clone)]
pub struct ClockLoad {
    /// Timed games.
    pub games: usize,
    /// Games set up (and read back) at once.
    pub parallel: usize,
    /// The second moves are spread evenly over this long.
    pub schedule: Duration,
    /// Idle window in which nobody calls and the server's CPU is measured.
    pub idle: Duration,
    /// The deadlines are spread evenly over this long (0 or a little: a burst).
    pub spread: Duration,
}

impl ClockLoad {
    /// From the start of the second moves to the first deadline.
    #[must_use]
    pub fn lead(&self) -> Duration {
        self.schedule + SETTLE + self.idle + BEFORE_FIRST_DEADLINE + Duration::from_millis(200)
    }

    /// Game `index`'s initial time: its second move is sent `index·step` after the first, and
    /// its deadline should come `lead + spread·index/games` after the first second move.
    #[must_use]
    pub fn initial_time(&self, index: usize) -> Duration {
        let n = self.games.max(1) as f64;
        let at = self.lead().as_secs_f64() + self.spread.as_secs_f64() * index as f64 / n;
        let sent = self.schedule.as_secs_f64() * index as f64 / n;
        Duration::from_secs_f64((at - sent).max(1.0))
    }

    fn send_offset(&self, index: usize) -> Duration {
        self.schedule
            .mul_f64(index as f64 / self.games.max(1) as f64)
    }
}

/// Signed lateness quantiles in milliseconds (negative = early), nearest-rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Lateness {
    /// Samples.
    pub count: usize,
    /// Earliest.
    pub min_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Latest.
    pub max_ms: f64,
    /// Samples at or above 100 ms.
    pub late_100ms: usize,
    /// Samples below 0 (before the deadline: a flag that fell early).
    pub early: usize,
}

impl Lateness {
    /// The quantiles of `micros` (lateness in µs, any order).
    #[must_use]
    pub fn of(micros: &[i64]) -> Lateness {
        if micros.is_empty() {
            return Lateness::default();
        }
        let mut sorted = micros.to_vec();
        sorted.sort_unstable();
        let n = sorted.len();
        // Nearest rank: the smallest sample with at least q·n samples at or below it.
        let rank = |q: f64| {
            let rank = (q * n as f64).ceil() as usize;
            sorted[rank.clamp(1, n) - 1] as f64 / 1000.0
        };
        Lateness {
            count: n,
            min_ms: sorted[0] as f64 / 1000.0,
            p50_ms: rank(0.5),
            p99_ms: rank(0.99),
            max_ms: sorted[n - 1] as f64 / 1000.0,
            late_100ms: sorted.iter().filter(|&&us| us >= 100_000).count(),
            early: sorted.iter().filter(|&&us| us < 0).count(),
        }
    }
}

/// What one clocks run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClockRun {
    /// Games asked for.
    pub games: usize,
    /// Games whose two first moves were accepted (their clocks ran).
    pub running: usize,
    /// Setup (create, join, first move) of every game, seconds.
    pub setup_s: f64,
    /// From the first second move sent to the last acknowledged, seconds.
    pub second_moves_s: f64,
    /// From the first deadline to the last, ms (as the server set them).
    pub deadline_span_ms: f64,
    /// Most deadlines in any 100 ms window.
    pub most_deadlines_in_100ms: usize,
    /// Games that ended with END_REASON_TIMEOUT, the second player winning.
    pub timeouts: usize,
    /// Games that ended otherwise.
    pub other_endings: usize,
    /// Games not over when read back, or whose events could not be read.
    pub not_over: usize,
    /// GameOver time − deadline, by the server's clock.
    pub lateness: Lateness,
    /// Arrival of GameFinished at a lobby watcher − deadline (the same machine's clock).
    pub observed: Lateness,
    /// Length of the idle window, seconds.
    pub idle_window_s: f64,
    /// Server CPU in the idle window, in cores (1.0 = one core busy); `None` without a pid.
    pub idle_cpu_cores: Option<f64>,
    /// Server RSS at the end of the idle window, MiB.
    pub idle_rss_mib: Option<f64>,
    /// Server CPU from the end of the idle window until every game was over, seconds.
    pub flag_cpu_s: Option<f64>,
    /// Server peak RSS, MiB.
    pub peak_rss_mib: Option<f64>,
    /// Failed calls or streams.
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<String>,
    /// Something to know about the run (a short idle window, ...).
    pub notes: Vec<String>,
}

impl ClockRun {
    fn error(&mut self, what: impl std::fmt::Display) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what.to_string());
        }
    }

    /// Whether every game's clock ran and every flag fell by timeout.
    #[must_use]
    pub fn all_flags_fell(&self) -> bool {
        self.running == self.games && self.timeouts == self.games
    }
}

fn to_pb(mv: Move) -> pb::Move {
    pb::Move {
        square: Some(u32::from(mv.square)),
        direction: match mv.direction {
            Direction::Left => pb::Direction::Left,
            Direction::Right => pb::Direction::Right,
        }
        .into(),
    }
}

fn authorized<T>(message: T, token: &str) -> anyhow::Result<tonic::Request<T>> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse()?);
    Ok(request)
}

/// Microseconds since the epoch of a protobuf timestamp.
fn micros(ts: &prost_types::Timestamp) -> i64 {
    ts.seconds.saturating_mul(1_000_000) + i64::from(ts.nanos) / 1000
}

fn micros_of(time: SystemTime) -> i64 {
    match time.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_micros()).unwrap_or(i64::MAX),
    }
}

/// A game whose first move is played: what its second move needs.
#[derive(Clone)]
struct Ready {
    index: usize,
    id: String,
    second_token: String,
    second_move: Move,
    ply: u32,
}

async fn set_up(pool: &Pool, load: &ClockLoad, index: usize) -> anyhow::Result<Ready> {
    let mut client = GameServiceClient::new(pool.get(index));
    let initial = prost_types::Duration::try_from(load.initial_time(index))
        .context("initial time out of range")?;
    let created = client
        .create_game(pb::CreateGameRequest {
            seat: pb::Player::First.into(),
            display_name: "clock-first".to_owned(),
            time_control: Some(pb::TimeControl {
                kind: Some(pb::time_control::Kind::RealTime(
                    pb::time_control::RealTime {
                        initial: Some(initial),
                        increment: Some(prost_types::Duration::default()),
                    },
                )),
            }),
            ..Default::default()
        })
        .await
        .context("CreateGame")?
        .into_inner();
    let id = created.game.context("CreateGame: no game")?.id;
    let joined = client
        .join_game(pb::JoinGameRequest {
            game_id: id.clone(),
            display_name: "clock-second".to_owned(),
        })
        .await
        .context("JoinGame")?
        .into_inner();
    let mut game = Game::new(Preset::Standard.rules()).context("standard rules")?;
    let first = game.position().legal_moves()[0];
    client
        .play_move(authorized(
            pb::PlayMoveRequest {
                game_id: id.clone(),
                r#move: Some(to_pb(first)),
                expected_ply: Some(game.position().ply()),
            },
            &created.player_token,
        )?)
        .await
        .context("first PlayMove")?;
    game.play(first)
        .map_err(|e| anyhow::anyhow!("local engine: {e}"))?;
    let second_move = *game
        .position()
        .legal_moves()
        .first()
        .context("no second move")?;
    Ok(Ready {
        index,
        id,
        second_token: joined.player_token,
        second_move,
        ply: game.position().ply(),
    })
}

/// Plays the second move; returns the deadline the server gave the first player (µs).
async fn second_move(pool: &Pool, ready: &Ready) -> anyhow::Result<i64> {
    let mut client = GameServiceClient::new(pool.get(ready.index));
    let response = client
        .play_move(authorized(
            pb::PlayMoveRequest {
                game_id: ready.id.clone(),
                r#move: Some(to_pb(ready.second_move)),
                expected_ply: Some(ready.ply),
            },
            &ready.second_token,
        )?)
        .await
        .context("second PlayMove")?
        .into_inner();
    response
        .game
        .and_then(|g| g.clocks)
        .and_then(|c| c.deadline)
        .map(|d| micros(&d))
        .context("second PlayMove: the game has no clock deadline")
}

/// How a game ended, read back from its event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ending {
    /// The deadline of the last TurnStarted, µs.
    deadline: Option<i64>,
    /// The GameOver event's time, µs.
    over_at: i64,
    reason: pb::EndReason,
    winner: pb::Player,
}

async fn read_back(pool: &Pool, index: usize, id: String) -> anyhow::Result<Option<Ending>> {
    let mut client = GameServiceClient::new(pool.get(index));
    let mut stream = client
        .watch_game(pb::WatchGameRequest {
            game_id: id,
            after_sequence: Some(1),
            follow_rematch: false,
        })
        .await
        .context("WatchGame")?
        .into_inner();
    let mut deadline = None;
    loop {
        let message = tokio::time::timeout(CALL_TIMEOUT, stream.message())
            .await
            .context("WatchGame: no event within 10 s")?
            .context("WatchGame stream")?;
        let Some(message) = message else {
            return Ok(None);
        };
        let Some(event) = message.event else { continue };
        match event.kind {
            Some(pb::game_event::Kind::TurnStarted(turn)) => {
                deadline = turn.clocks.and_then(|c| c.deadline).map(|d| micros(&d));
            }
            Some(pb::game_event::Kind::GameOver(over)) => {
                let result = over.result.unwrap_or_default();
                return Ok(Some(Ending {
                    deadline,
                    over_at: event.time.as_ref().map_or(0, micros),
                    reason: result.end_reason(),
                    winner: result.winner(),
                }));
            }
            // The log is gone: the game is not read back (never for a run this short).
            Some(pb::game_event::Kind::Snapshot(_)) => return Ok(None),
            _ => {}
        }
    }
}

/// Records when each GameFinished reaches this lobby watcher, until `expected` have or `stop`.
fn watch_lobby(
    pool: &Pool,
    expected: usize,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<anyhow::Result<HashMap<String, i64>>> {
    let mut client = GameServiceClient::new(pool.get(0));
    tokio::spawn(async move {
        let mut stream = client
            .watch_lobby(pb::WatchLobbyRequest {
                after_sequence: None,
            })
            .await
            .context("WatchLobby")?
            .into_inner();
        let mut seen = HashMap::with_capacity(expected);
        while seen.len() < expected {
            tokio::select! {
                message = stream.message() => {
                    let Some(message) = message.context("WatchLobby stream")? else { break };
                    let now = micros_of(SystemTime::now());
                    if let Some(pb::lobby_event::Kind::GameFinished(finished)) =
                        message.event.and_then(|e| e.kind)
                    {
                        seen.insert(finished.game_id, now);
                    }
                }
                _ = stop.wait_for(|stopping| *stopping) => break,
            }
        }
        Ok(seen)
    })
}

fn sample(pid: Option<u32>) -> Option<ProcSample> {
    pid.and_then(|pid| ProcSample::read(pid).ok())
}

/// The instant `micros` (since the epoch) on this process's monotonic clock.
fn instant_of(micros: i64) -> Instant {
    let now = micros_of(SystemTime::now());
    let ahead = u64::try_from(micros - now).unwrap_or(0);
    Instant::now() + Duration::from_micros(ahead)
}

/// Most of the sorted `deadlines` (µs) inside any `window` µs.
fn densest(deadlines: &[i64], window: i64) -> usize {
    let mut best = 0;
    let mut start = 0;
    for end in 0..deadlines.len() {
        while deadlines[end] - deadlines[start] >= window {
            start += 1;
        }
        best = best.max(end - start + 1);
    }
    best
}

/// Runs the clocks benchmark against the server behind `pool`; `server_pid` (a separate
/// process) for its CPU and memory.
pub async fn run_clocks(pool: &Pool, load: &ClockLoad, server_pid: Option<u32>) -> ClockRun {
    let mut run = ClockRun {
        games: load.games,
        ..ClockRun::default()
    };

    let started = Instant::now();
    let setups: Vec<anyhow::Result<Ready>> = futures::stream::iter(0..load.games)
        .map(|index| set_up(pool, load, index))
        .buffer_unordered(load.parallel.max(1))
        .collect()
        .await;
    run.setup_s = started.elapsed().as_secs_f64();
    let mut ready = Vec::with_capacity(load.games);
    for setup in setups {
        match setup {
            Ok(game) => ready.push(game),
            Err(error) => run.error(format!("{error:#}")),
        }
    }
    ready.sort_by_key(|game| game.index);

    // The second moves, each at its time: the deadlines depend on it. Each call is a task of
    // its own so that the calls run while this loop waits for the next one's time.
    let t0 = Instant::now() + Duration::from_millis(50);
    let mut moves = Vec::with_capacity(ready.len());
    for (position, game) in ready.iter().enumerate() {
        tokio::time::sleep_until((t0 + load.send_offset(game.index)).into()).await;
        let pool = pool.clone();
        let game = game.clone();
        moves.push((
            position,
            tokio::spawn(async move { second_move(&pool, &game).await }),
        ));
    }
    let mut running: Vec<(&Ready, i64)> = Vec::with_capacity(ready.len());
    for (position, handle) in moves {
        match handle.await {
            Ok(Ok(deadline)) => running.push((&ready[position], deadline)),
            Ok(Err(error)) => run.error(format!("{error:#}")),
            Err(error) => run.error(format!("second move task: {error}")),
        }
    }
    run.second_moves_s = t0.elapsed().as_secs_f64();
    run.running = running.len();
    let mut deadlines: Vec<i64> = running.iter().map(|(_, d)| *d).collect();
    deadlines.sort_unstable();
    let (Some(&first), Some(&last)) = (deadlines.first(), deadlines.last()) else {
        run.notes.push("no game's clock ran".to_owned());
        return run;
    };
    run.deadline_span_ms = (last - first) as f64 / 1000.0;
    run.most_deadlines_in_100ms = densest(&deadlines, 100_000);

    // The lobby watch opens before the idle window, so that its opening is not counted.
    let (stop, stopped) = watch::channel(false);
    let lobby = watch_lobby(pool, running.len(), stopped);
    tokio::time::sleep(SETTLE).await;
    let idle_start = (Instant::now(), sample(server_pid));
    let idle_end = instant_of(first) - BEFORE_FIRST_DEADLINE;
    if idle_end <= idle_start.0 + Duration::from_millis(500) {
        run.notes.push(format!(
            "the setup ran late: the idle window was {:.2} s instead of {:.1} s",
            idle_end
                .saturating_duration_since(idle_start.0)
                .as_secs_f64(),
            load.idle.as_secs_f64()
        ));
    }
    tokio::time::sleep_until(idle_end.into()).await;
    let idle_stop = (Instant::now(), sample(server_pid));
    run.idle_window_s = (idle_stop.0 - idle_start.0).as_secs_f64();
    if let (Some(a), Some(b)) = (idle_start.1, idle_stop.1) {
        run.idle_cpu_cores = Some((b.cpu_seconds - a.cpu_seconds) / run.idle_window_s.max(1e-9));
        run.idle_rss_mib = Some(b.rss_kib as f64 / 1024.0);
    }

    // The flags: the lobby watch ends once every game finished (or after the bound).
    let bound = instant_of(last) + MAX_WAIT_AFTER_LAST_DEADLINE;
    let mut lobby = lobby;
    let lobby_seen = tokio::select! {
        joined = &mut lobby => joined,
        () = tokio::time::sleep_until(bound.into()) => {
            let _ = stop.send(true);
            run.notes.push("the lobby watch did not see every game finish".to_owned());
            lobby.await
        }
    };
    let seen = match lobby_seen {
        Ok(Ok(seen)) => seen,
        Ok(Err(error)) => {
            run.error(format!("{error:#}"));
            HashMap::new()
        }
        Err(error) => {
            run.error(format!("lobby watch task: {error}"));
            HashMap::new()
        }
    };
    let flags_done = sample(server_pid);
    if let (Some(a), Some(b)) = (idle_stop.1, flags_done) {
        run.flag_cpu_s = Some(b.cpu_seconds - a.cpu_seconds);
        run.peak_rss_mib = Some(b.hwm_kib as f64 / 1024.0);
    }

    let endings: Vec<(usize, i64, anyhow::Result<Option<Ending>>)> =
        futures::stream::iter(running.iter().map(|(game, deadline)| (game, *deadline)))
            .map(|(game, deadline)| async move {
                (
                    game.index,
                    deadline,
                    read_back(pool, game.index, game.id.clone()).await,
                )
            })
            .buffer_unordered(load.parallel.max(1))
            .collect()
            .await;
    let ids: HashMap<usize, &str> = running
        .iter()
        .map(|(game, _)| (game.index, game.id.as_str()))
        .collect();
    let mut lateness = Vec::with_capacity(endings.len());
    let mut observed = Vec::with_capacity(endings.len());
    for (index, answered_deadline, ending) in endings {
        match ending {
            Ok(Some(ending)) => {
                let deadline = ending.deadline.unwrap_or(answered_deadline);
                if ending.reason == pb::EndReason::Timeout && ending.winner == pb::Player::Second {
                    run.timeouts += 1;
                    lateness.push(ending.over_at - deadline);
                    if let Some(at) = ids.get(&index).and_then(|id| seen.get(*id)) {
                        observed.push(at - deadline);
                    }
                } else {
                    if run.other_endings == 0 {
                        run.notes.push(format!(
                            "a game ended by {:?}, {:?} winning",
                            ending.reason, ending.winner
                        ));
                    }
                    run.other_endings += 1;
                }
            }
            Ok(None) => run.not_over += 1,
            Err(error) => {
                run.not_over += 1;
                run.error(format!("{error:#}"));
            }
        }
    }
    run.lateness = Lateness::of(&lateness);
    run.observed = Lateness::of(&observed);
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_quantiles_are_nearest_rank_in_ms() {
        assert_eq!(Lateness::of(&[]), Lateness::default());
        // 1..=100 ms, shuffled: p50 is the 50th, p99 the 99th.
        let mut samples: Vec<i64> = (1..=100).map(|ms| ms * 1000).collect();
        samples.reverse();
        samples.swap(3, 77);
        let stats = Lateness::of(&samples);
        assert_eq!(stats.count, 100);
        assert_eq!(stats.min_ms, 1.0);
        assert_eq!(stats.p50_ms, 50.0);
        assert_eq!(stats.p99_ms, 99.0);
        assert_eq!(stats.max_ms, 100.0);
        assert_eq!((stats.late_100ms, stats.early), (1, 0));
        // One sample is every quantile; an early flag is counted as such.
        let one = Lateness::of(&[-2500]);
        assert_eq!(
            (one.min_ms, one.p50_ms, one.p99_ms, one.max_ms),
            (-2.5, -2.5, -2.5, -2.5)
        );
        assert_eq!((one.late_100ms, one.early), (0, 1));
        // p99 of 1,000 samples skips the 10 worst.
        let mut many: Vec<i64> = vec![5_000; 990];
        many.extend([400_000; 10]);
        let stats = Lateness::of(&many);
        assert_eq!(
            (stats.p99_ms, stats.max_ms, stats.late_100ms),
            (5.0, 400.0, 10)
        );
    }

    #[test]
    fn initial_times_put_the_deadlines_where_asked() {
        let load = ClockLoad {
            games: 1000,
            parallel: 64,
            schedule: Duration::from_secs(2),
            idle: Duration::from_secs(5),
            spread: Duration::from_secs(5),
        };
        // Deadline = send offset + initial time = lead + spread·i/n.
        for index in [0, 1, 500, 999] {
            let deadline = load.send_offset(index) + load.initial_time(index);
            let expected = load.lead() + load.spread.mul_f64(index as f64 / 1000.0);
            let error = deadline.as_secs_f64() - expected.as_secs_f64();
            assert!(error.abs() < 1e-6, "game {index}: off by {error} s");
            assert!(load.initial_time(index) >= Duration::from_secs(1));
        }
        assert!(load.lead() > load.schedule + load.idle);
    }

    #[test]
    fn densest_window_counts_deadlines_within_it() {
        assert_eq!(densest(&[], 100), 0);
        assert_eq!(densest(&[0, 50, 99, 100, 250, 260, 270, 280], 100), 4);
        assert_eq!(densest(&[0, 1000, 2000], 100), 1);
    }
}
