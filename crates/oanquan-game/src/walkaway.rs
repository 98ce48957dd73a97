//! Players who walk away from the games that seeks and joins put them in.
//!
//! A seek pairs two strangers, and a seat that never moves costs the other player the wait for
//! the first-move limit and then an aborted game. An outside probe accepted every seek in the
//! lobby from one address and never moved: most honest seekers were paired with it instead of
//! each other. So each node remembers, for each client address and account, the games its
//! seeks, accepted seeks and joins put it in, and one that walked away from [`STRIKES`] of them
//! within [`WINDOW`] (aborted them, or let the first-move limit abort them: the game is aborted
//! and ended by its seat) may not seek, accept a seek or join a game for [`PAUSE`] after the
//! last. It may still create games: whoever joins one chose to. Nor may it take a fourth such
//! game while [`STRIKES`] of them on a live clock wait for its first move, so that walkaways in
//! the making cannot pile up before the first of them counts.
//!
//! Pairings are noted for the address and the account, but a caller with an account is judged
//! by its account alone: players behind one address (a household, a NAT) do not answer for
//! each other, and an account's walkaways still pause its address when it plays anonymously.
//!
//! Per node and in memory, like the other per-client limits: a restart forgets it.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use oanquan_rules::Player;

use crate::account::AccountId;
use crate::clock::TimeControl;
use crate::error::GameError;
use crate::manager::GameManager;
use crate::model::{GameId, GameStatus, PlayerKind, Termination};

/// Walkaways within [`WINDOW`] that pause a player.
pub const STRIKES: usize = 3;
/// How far back walkaways count.
pub const WINDOW: Duration = Duration::from_secs(60 * 60);
/// How long after its last walkaway a player is paused.
pub const PAUSE: Duration = Duration::from_secs(15 * 60);
/// Pairings remembered per player: enough to see [`STRIKES`] among its games played out.
const KEPT: usize = 8;
/// Players remembered at most; past it the ones with no recent pairing are forgotten first.
const MAX_PLAYERS: usize = 100_000;

/// Whom a pairing counts for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Walker {
    /// A client address, in [`client_key`](crate::limits::client_key) form.
    Client(IpAddr),
    /// An account.
    Account(AccountId),
}

impl Walker {
    /// How a message names it to the caller.
    fn says(&self) -> &'static str {
        match self {
            Walker::Client(_) => "your address",
            Walker::Account(_) => "your account",
        }
    }
}

/// A game a seek made for a player.
#[derive(Debug, Clone)]
struct Pairing {
    game: GameId,
    seat: Player,
    at: SystemTime,
    /// Once the game is over: when the player walked away from it, or `None` if it did not.
    settled: Option<Option<SystemTime>>,
}

/// The pairings of each player (see the [module](self)).
#[derive(Debug, Default)]
pub struct Walkaways {
    players: Mutex<HashMap<Walker, VecDeque<Pairing>>>,
}

impl Walkaways {
    /// Notes that a seek seated each of `walkers` in `game` at `seat`.
    pub fn record(&self, walkers: &[Walker], game: &GameId, seat: Player) {
        if walkers.is_empty() {
            return;
        }
        let now = crate::service_clock::now();
        let mut players = self.lock();
        if players.len() + walkers.len() > MAX_PLAYERS {
            players.retain(|_, pairings| {
                pairings
                    .back()
                    .is_some_and(|last| within(now, last.at, WINDOW))
            });
            if players.len() + walkers.len() > MAX_PLAYERS {
                players.clear();
            }
        }
        for walker in walkers {
            let pairings = players.entry(walker.clone()).or_default();
            if pairings.len() >= KEPT {
                pairings.pop_front();
            }
            pairings.push_back(Pairing {
                game: game.clone(),
                seat,
                at: now,
                settled: None,
            });
        }
    }

    /// Refuses a player who walked away from [`STRIKES`] games within [`WINDOW`], until
    /// [`PAUSE`] after the last of them.
    ///
    /// # Errors
    ///
    /// [`GameError::SeekPaused`].
    pub async fn check(&self, manager: &GameManager, walkers: &[Walker]) -> Result<(), GameError> {
        for walker in walkers {
            // The games not yet settled, looked up without the lock.
            let open: Vec<(GameId, Player)> = self
                .lock()
                .get(walker)
                .into_iter()
                .flatten()
                .filter(|p| p.settled.is_none())
                .map(|p| (p.game.clone(), p.seat))
                .collect();
            let mut settled = Vec::with_capacity(open.len());
            // Games going on in which this player has not moved yet: walkaways in the making,
            // which only count once over (an outside probe accepted 8 seeks in a burst before
            // the first of them was aborted).
            let mut unmoved = 0;
            for (game, seat) in open {
                // A game that cannot be read (forgotten, damaged) counts for nothing.
                let Ok(info) = manager.get_game(&game).await else {
                    settled.push((game, None));
                    continue;
                };
                if !info.status.is_over() {
                    // Only where the game waits for it (the other player's turn is not its
                    // fault: a sniper's victims wait too), and on a live clock: a
                    // correspondence or untimed game may wait days for a first move.
                    let holding_up = info.move_count < 2
                        && info.position.to_move() == seat
                        && matches!(info.time_control, TimeControl::RealTime { .. });
                    let against_a_person = info.seats[seat.other()]
                        .as_ref()
                        .is_some_and(|s| s.kind == PlayerKind::Human);
                    if holding_up && against_a_person && info.status == GameStatus::Active {
                        unmoved += 1;
                    }
                    continue;
                }
                let walked = info.status == GameStatus::Aborted
                    && info.result.is_some_and(|r| {
                        r.termination == Termination::Aborted && r.ended_by == Some(seat)
                    })
                    && info.seats[seat.other()]
                        .as_ref()
                        .is_some_and(|s| s.kind == PlayerKind::Human);
                settled.push((game, walked.then_some(info.updated)));
            }
            let now = crate::service_clock::now();
            let mut players = self.lock();
            let Some(pairings) = players.get_mut(walker) else {
                continue;
            };
            for (game, walked) in settled {
                for pairing in pairings.iter_mut().filter(|p| p.game == game) {
                    pairing.settled = Some(walked);
                }
            }
            if unmoved >= STRIKES {
                return Err(GameError::FirstMovesPending {
                    who: walker.says(),
                    games: unmoved,
                });
            }
            let walkaways: Vec<SystemTime> = pairings
                .iter()
                .filter_map(|p| p.settled.flatten())
                .filter(|&at| within(now, at, WINDOW))
                .collect();
            if walkaways.len() < STRIKES {
                continue;
            }
            let last = walkaways.iter().max().copied().unwrap_or(now);
            let until = last + PAUSE;
            if let Ok(left) = until.duration_since(now) {
                return Err(GameError::SeekPaused {
                    who: walker.says(),
                    walkaways: walkaways.len(),
                    retry_after: left,
                });
            }
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Walker, VecDeque<Pairing>>> {
        self.players
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether `at` is at most `span` before `now` (a time ahead of `now` counts as within).
fn within(now: SystemTime, at: SystemTime, span: Duration) -> bool {
    now.duration_since(at).map_or(true, |ago| ago <= span)
}
