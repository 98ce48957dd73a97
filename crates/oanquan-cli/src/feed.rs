//! A game's event stream that survives dropped connections.
//!
//! One task owns the WatchGame stream. When it breaks, the task reconnects with exponential
//! backoff (200 ms doubling to a 10 s cap, each delay jittered to 50-100 % so that many clients
//! cut off at once do not come back in lockstep) and resumes with `after_sequence` = the last
//! sequence it saw. The server then sends exactly the missed events, or a fresh snapshot if they
//! are gone from its log. The task also drops events whose sequence it has already passed on,
//! so a consumer never sees a real event twice whatever the server does.

use std::time::{Duration, Instant};

use oanquan_proto::v1::game_service_client::GameServiceClient;
use oanquan_proto::v1::{GameEvent, GameStatus, WatchGameRequest, game_event};
use tokio::sync::mpsc;
use tonic::Code;
use tonic_types::StatusExt as _;

use crate::client::Server;
use crate::error::{CliError, code, error_chain};

/// What the feed hands to its consumer.
#[derive(Debug)]
pub enum FeedItem {
    /// A snapshot or a real event, in order, each real event once, with the instant it arrived
    /// (clocks count down from there, not from when the consumer got to it). Heartbeats are
    /// filtered out.
    Event(Box<GameEvent>, Instant),
    /// The stream broke; reconnect attempt `attempt` (0-based) follows in `retry_in`. `why` is
    /// the transport's or the server's own wording, for `--verbose`.
    Down {
        why: String,
        attempt: u32,
        retry_in: Duration,
    },
    /// A new stream is open again after `Down`, resuming after event `after`.
    Up { after: u64 },
    /// The feed stopped for good (unknown game, gave up reconnecting, ...).
    Fatal(CliError),
}

/// Reconnect policy.
#[derive(Debug, Clone, Copy)]
pub struct FeedOptions {
    /// Stop with exit code 69 after this long without a working stream; `None` = never.
    pub give_up: Option<Duration>,
    /// Keep the stream open after the game's end for its rematch events (`play`).
    pub follow_rematch: bool,
}

/// A stream that says nothing for this long is presumed dead. The server sends a heartbeat about
/// every 15 seconds while idle, so this allows two to go missing.
const IDLE_TIMEOUT: Duration = Duration::from_secs(40);
const BACKOFF_BASE: Duration = Duration::from_millis(200);
const BACKOFF_CAP: Duration = Duration::from_secs(10);

/// The delay before reconnect attempt `attempt` (0-based), given a jitter fraction in [0, 1].
pub fn backoff(attempt: u32, jitter: f64) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(2u32.saturating_pow(attempt.min(16)));
    let full = exp.min(BACKOFF_CAP);
    let jitter = if jitter.is_finite() {
        jitter.clamp(0.0, 1.0)
    } else {
        1.0
    };
    full.mul_f64(0.5 + 0.5 * jitter)
}

/// Starts the feed for `game_id`; it runs until the game is over, a fatal error, or the
/// receiver is dropped. A player passes its seat's `token`, so that its stream takes one of the
/// places the server keeps for each seat and is never crowded out by spectators.
pub fn spawn(
    server: Server,
    game_id: String,
    token: Option<String>,
    options: FeedOptions,
) -> mpsc::Receiver<FeedItem> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        Feed {
            server,
            game_id,
            token,
            options,
            tx,
            last_sequence: 0,
            over: false,
        }
        .run()
        .await;
    });
    rx
}

struct Feed {
    server: Server,
    game_id: String,
    /// The seat's token when a player watches its own game.
    token: Option<String>,
    options: FeedOptions,
    tx: mpsc::Sender<FeedItem>,
    /// The sequence of the last real event (or snapshot) passed on; 0 = nothing yet.
    last_sequence: u64,
    /// The game is over as far as the events passed on say.
    over: bool,
}

/// How one connection ended.
enum Ended {
    /// The game is over and the server closed the stream: done.
    Finished,
    /// The consumer is gone: done.
    ConsumerGone,
    /// Do not retry.
    Fatal(CliError),
    /// Retry. `progress` says whether anything arrived, which resets the backoff.
    Dropped { why: String, progress: bool },
}

impl Feed {
    async fn run(mut self) {
        let mut attempt = 0u32;
        let mut down_since: Option<Instant> = None;
        let mut was_down = false;
        loop {
            let ended = self.watch_once(&mut was_down).await;
            let (why, progress) = match ended {
                Ended::Finished | Ended::ConsumerGone => return,
                Ended::Fatal(err) => {
                    let _ = self.tx.send(FeedItem::Fatal(err)).await;
                    return;
                }
                Ended::Dropped { why, progress } => (why, progress),
            };
            if progress {
                attempt = 0;
                down_since = None;
            }
            let since = *down_since.get_or_insert_with(Instant::now);
            if let Some(limit) = self.options.give_up
                && since.elapsed() >= limit
            {
                let err = CliError::unavailable(
                    &self.server.name,
                    format!("{why}; gave up after {} s", limit.as_secs()),
                );
                let _ = self.tx.send(FeedItem::Fatal(err)).await;
                return;
            }
            let delay = backoff(attempt, rand::random::<f64>());
            let down = FeedItem::Down {
                why,
                attempt,
                retry_in: delay,
            };
            attempt = attempt.saturating_add(1);
            was_down = true;
            if self.tx.send(down).await.is_err() {
                return;
            }
            tokio::time::sleep(delay).await;
        }
    }

    async fn watch_once(&mut self, was_down: &mut bool) -> Ended {
        let clients = match crate::client::connect(&self.server).await {
            Ok(c) => c,
            Err(e) if e.code == code::USAGE => return Ended::Fatal(e),
            Err(e) => {
                return Ended::Dropped {
                    why: e.message,
                    progress: false,
                };
            }
        };
        let mut games: GameServiceClient<_> = clients.games;
        let request = WatchGameRequest {
            game_id: self.game_id.clone(),
            after_sequence: (self.last_sequence > 0).then_some(self.last_sequence),
            follow_rematch: self.options.follow_rematch,
        };
        let request = match &self.token {
            Some(token) => match crate::client::bearer(tonic::Request::new(request), token) {
                Ok(request) => request,
                Err(err) => return Ended::Fatal(err),
            },
            None => tonic::Request::new(request),
        };
        let mut stream = match games.watch_game(request).await {
            Ok(response) => response.into_inner(),
            Err(status) => return self.classify(&status, false),
        };
        if std::mem::take(was_down) {
            let up = FeedItem::Up {
                after: self.last_sequence,
            };
            if self.tx.send(up).await.is_err() {
                return Ended::ConsumerGone;
            }
        }
        let mut progress = false;
        loop {
            let message = match tokio::time::timeout(IDLE_TIMEOUT, stream.message()).await {
                Err(_) => {
                    return Ended::Dropped {
                        why: format!("no event or heartbeat for {} s", IDLE_TIMEOUT.as_secs()),
                        progress,
                    };
                }
                Ok(Err(status)) => return self.classify(&status, progress),
                Ok(Ok(None)) if self.over => return Ended::Finished,
                Ok(Ok(None)) => {
                    return Ended::Dropped {
                        why: "the server ended the stream".into(),
                        progress,
                    };
                }
                Ok(Ok(Some(message))) => message,
            };
            progress = true;
            let received = Instant::now();
            let Some(event) = message.event else { continue };
            if let Some(item) = self.accept(event)
                && self
                    .tx
                    .send(FeedItem::Event(Box::new(item), received))
                    .await
                    .is_err()
            {
                return Ended::ConsumerGone;
            }
        }
    }

    /// Filters one event: `None` for heartbeats and for real events already passed on.
    fn accept(&mut self, event: GameEvent) -> Option<GameEvent> {
        match event.kind.as_ref() {
            None | Some(game_event::Kind::Heartbeat(_)) => return None,
            Some(game_event::Kind::Snapshot(s)) => {
                // A snapshot replaces the state; it is not counted, but its sequence is the
                // point to resume after.
                let status = s.game.as_ref().map(|g| g.status());
                self.over = matches!(status, Some(GameStatus::Finished | GameStatus::Aborted));
            }
            Some(kind) => {
                if self.last_sequence > 0 && event.sequence <= self.last_sequence {
                    return None;
                }
                if matches!(kind, game_event::Kind::GameOver(_)) {
                    self.over = true;
                }
            }
        }
        self.last_sequence = event.sequence;
        Some(event)
    }

    fn classify(&mut self, status: &tonic::Status, progress: bool) -> Ended {
        // The id as typed (`oanquan watch ID`): escaped and cut, as arguments are quoted.
        let what = format!("watch game {}", crate::error::typed(&self.game_id));
        match status.code() {
            Code::NotFound
            | Code::InvalidArgument
            | Code::PermissionDenied
            | Code::Unauthenticated
            | Code::Unimplemented
            // A damaged game stays damaged: an outside probe's `watch` said "unreachable;
            // reconnecting" for ever.
            | Code::DataLoss => Ended::Fatal(CliError::from_status(&what, status)),
            // Refused at the door with no retry delay: the game's watcher places are taken, and
            // hammering it would not free one. The rate limit (which attaches a delay) and a
            // stream dropped later for not reading are retried below.
            Code::ResourceExhausted if !progress && status.get_details_retry_info().is_none() => {
                Ended::Fatal(CliError::from_status(&what, status))
            }
            Code::OutOfRange => {
                // Our sequence is beyond the server's log: it lost its history (restarted).
                // Start over from a snapshot rather than wait for events that never come.
                self.last_sequence = 0;
                Ended::Dropped {
                    why: "the server no longer knows our position in the event log".into(),
                    progress,
                }
            }
            _ => Ended::Dropped {
                why: status_text(status),
                progress,
            },
        }
    }
}

fn status_text(status: &tonic::Status) -> String {
    use std::error::Error as _;
    match status.source() {
        // The source chain already says what the message says ("transport error", ...).
        Some(source) => error_chain(source),
        None if status.message().is_empty() => format!("{:?}", status.code()),
        // The server's words, for a notice on the terminal.
        None => crate::output::shown(status.message()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oanquan_proto::v1::Game;

    fn feed() -> (Feed, mpsc::Receiver<FeedItem>) {
        let (tx, rx) = mpsc::channel(4);
        (
            Feed {
                server: Server::new("s:1", None).expect("valid"),
                game_id: "g".into(),
                token: None,
                options: FeedOptions {
                    give_up: None,
                    follow_rematch: false,
                },
                tx,
                last_sequence: 0,
                over: false,
            },
            rx,
        )
    }

    fn ev(sequence: u64, kind: game_event::Kind) -> GameEvent {
        GameEvent {
            sequence,
            time: None,
            kind: Some(kind),
        }
    }

    fn turn(sequence: u64) -> GameEvent {
        ev(
            sequence,
            game_event::Kind::TurnStarted(game_event::TurnStarted::default()),
        )
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        assert_eq!(backoff(0, 1.0), Duration::from_millis(200));
        assert_eq!(backoff(0, 0.0), Duration::from_millis(100));
        assert_eq!(backoff(3, 1.0), Duration::from_millis(1600));
        assert_eq!(backoff(10, 1.0), BACKOFF_CAP);
        assert_eq!(backoff(u32::MAX, 0.0), BACKOFF_CAP / 2);
        assert_eq!(backoff(2, f64::NAN), backoff(2, 1.0));
    }

    #[test]
    fn duplicates_and_heartbeats_are_dropped() {
        let (mut f, _rx) = feed();
        let snapshot = ev(
            3,
            game_event::Kind::Snapshot(game_event::Snapshot {
                game: Some(Game::default()),
                move_count: 0,
            }),
        );
        assert!(f.accept(snapshot).is_some());
        assert!(f.accept(turn(3)).is_none(), "already in the snapshot");
        assert!(f.accept(turn(4)).is_some());
        assert!(
            f.accept(ev(4, game_event::Kind::Heartbeat(game_event::Heartbeat {})))
                .is_none()
        );
        assert!(f.accept(turn(4)).is_none(), "replayed after a resume");
        assert!(f.accept(turn(5)).is_some());
        assert_eq!(f.last_sequence, 5);
        assert!(!f.over);
        let over = ev(
            6,
            game_event::Kind::GameOver(game_event::GameOver::default()),
        );
        assert!(f.accept(over).is_some());
        assert!(f.over);
    }

    /// `oanquan watch ID` with an id the server refuses: the message quotes it as arguments
    /// are quoted, escaped and cut, so that it cannot write control sequences or fill the
    /// screen.
    #[test]
    fn a_refused_game_id_is_quoted_escaped_and_cut() {
        let (mut f, _rx) = feed();
        f.game_id = "a\x1b]0;pwn\x07b".into();
        let Ended::Fatal(err) = f.classify(&tonic::Status::invalid_argument("bad id"), false)
        else {
            panic!("not fatal");
        };
        assert!(!err.message.contains('\x1b'), "{:?}", err.message);
        assert!(
            err.message.contains(r"a\u{1b}]0;pwn\u{7}b"),
            "{:?}",
            err.message
        );
        f.game_id = "x".repeat(5000);
        let Ended::Fatal(err) = f.classify(&tonic::Status::not_found("no"), false) else {
            panic!("not fatal");
        };
        assert!(err.message.len() < 400, "{} bytes", err.message.len());
        assert!(err.message.contains(&format!("{}…", "x".repeat(64))));
    }

    #[test]
    fn out_of_range_restarts_from_a_snapshot() {
        let (mut f, _rx) = feed();
        f.last_sequence = 40;
        let ended = f.classify(&tonic::Status::out_of_range("beyond"), false);
        assert!(matches!(ended, Ended::Dropped { .. }));
        assert_eq!(f.last_sequence, 0);
        assert!(matches!(
            f.classify(&tonic::Status::not_found("no"), false),
            Ended::Fatal(CliError {
                code: code::NOT_FOUND,
                ..
            })
        ));
        assert!(matches!(
            f.classify(&tonic::Status::unavailable("down"), true),
            Ended::Dropped { progress: true, .. }
        ));
    }

    #[test]
    fn a_damaged_game_is_not_retried() {
        let (mut f, _rx) = feed();
        let damaged = tonic::Status::data_loss(
            "game g cannot be read: its stored data is damaged; retrying does not help",
        );
        let Ended::Fatal(err) = f.classify(&damaged, true) else {
            panic!("retried");
        };
        assert!(err.message.contains("damaged"), "{}", err.message);
    }
}
