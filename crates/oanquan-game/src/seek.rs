//! Seeks: players asking for an opponent with a given rule set and time control. The pool
//! pairs compatible seeks first come, first served; a seek lives as long as its seeker waits
//! (the [`SeekTicket`]) and is gone when it is dropped.
//!
//! Pairing is decided under one lock: a waiting seek is removed from the pool before its game
//! is created, so it can be paired once only, whatever the races. Seeks are presence, not
//! history: they live in this process's memory, are listed and announced as they come and go
//! ([`SeekPool::subscribe`]), and vanish with a restart (their seekers' streams end with it).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use oanquan_ai::Level;
use oanquan_rules::{ByPlayer, Player, Preset, Rules};
use tokio::sync::{broadcast, oneshot};
use tracing::{debug, info};

use crate::account::{Account, SeatAccount};
use crate::clock::TimeControl;
use crate::error::GameError;
use crate::limits::client_key;
use crate::manager::{GameManager, PairedGame, Seated, seat_account};
use crate::model::GameId;
use crate::text;
use crate::token::{PlayerToken, random_game_id};

/// A seek as everyone sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeekInfo {
    /// Opaque id, for [`SeekPool::accept`].
    pub id: String,
    /// The seeker's display name.
    pub display_name: String,
    /// The rules wanted.
    pub rules: Rules,
    /// The preset they came from, if any.
    pub preset: Option<Preset>,
    /// The time control wanted.
    pub time_control: TimeControl,
    /// When the seek was made.
    pub created: SystemTime,
    /// Play the computer if nobody answers within this time.
    pub computer_after: Option<Duration>,
    /// The seeker's account, if they seek as one (its username is `display_name`).
    pub account: Option<SeatAccount>,
    /// A rated game is wanted (only between accounts).
    pub rated: bool,
    /// The opponent's rating at the game's speed must be within this range (inclusive).
    pub rating_range: Option<(i32, i32)>,
}

/// A change to the set of open seeks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeekUpdate {
    /// A seek was made.
    Added(SeekInfo),
    /// A seek was taken by an opponent, withdrawn, or handed to the computer.
    Removed {
        /// The seek.
        id: String,
        /// Reserved for the game it led to; not known when the seek leaves the pool.
        game_id: Option<GameId>,
    },
}

/// A request for an opponent.
#[derive(Debug, Clone)]
pub struct SeekRequest {
    /// The rules wanted.
    pub rules: Rules,
    /// The preset they came from.
    pub preset: Option<Preset>,
    /// The time control wanted.
    pub time_control: TimeControl,
    /// The seeker's display name, unchecked.
    pub display_name: String,
    /// Play the computer at this level if nobody answers within this time.
    pub computer: Option<(Duration, Level)>,
    /// The seeker's address.
    pub client: Option<IpAddr>,
    /// The seeker's account (then its username is the seat's name).
    pub account: Option<Account>,
    /// A rated game is wanted (needs an account and a time control).
    pub rated: bool,
    /// Only opponents rated within this range (inclusive) at the game's speed; anonymous
    /// seekers have no rating and never match a range.
    pub rating_range: Option<(i32, i32)>,
}

/// Whether two seeks can be paired: the same rules, time control and rated-ness; different
/// accounts; each one's rating inside the other's range.
fn compatible(a: &SeekInfo, b: &SeekInfo) -> bool {
    let in_range = |range: Option<(i32, i32)>, player: &SeekInfo| match range {
        None => true,
        Some((low, high)) => player
            .account
            .as_ref()
            .and_then(|account| account.rating)
            .is_some_and(|rating| (low..=high).contains(&rating)),
    };
    let same_account = a
        .account
        .as_ref()
        .zip(b.account.as_ref())
        .is_some_and(|(x, y)| x.id == y.id);
    a.rules == b.rules
        && a.time_control == b.time_control
        && a.rated == b.rated
        && !same_account
        && in_range(a.rating_range, b)
        && in_range(b.rating_range, a)
}

/// Limits of the pool.
#[derive(Debug, Clone, Copy)]
pub struct SeekLimits {
    /// Open seeks in all.
    pub max_seeks: usize,
    /// Open seeks of one client address (0 = no limit).
    pub max_per_client: usize,
    /// Loopback clients are exempt from the per-client limit.
    pub exempt_loopback: bool,
}

impl Default for SeekLimits {
    fn default() -> Self {
        SeekLimits {
            max_seeks: 10_000,
            max_per_client: 4,
            exempt_loopback: true,
        }
    }
}

/// What a seek led to at once.
#[derive(Debug)]
// One outcome per seek call, moved out at once: boxing the larger variant would only add an
// allocation (and change the type callers match on).
#[allow(clippy::large_enum_variant)]
pub enum SeekOutcome {
    /// A compatible seek was waiting: the game, and the caller's seat.
    Paired(Seated),
    /// Nobody yet: wait on the ticket (dropping it withdraws the seek).
    Waiting(SeekTicket),
}

struct Waiting {
    info: SeekInfo,
    token: PlayerToken,
    client: Option<IpAddr>,
    reply: oneshot::Sender<Result<Seated, GameError>>,
}

#[derive(Default)]
struct Inner {
    /// Oldest first.
    waiting: Vec<Waiting>,
    per_client: HashMap<IpAddr, usize>,
}

impl Inner {
    fn take(&mut self, index: usize) -> Waiting {
        let waiting = self.waiting.remove(index);
        if let Some(client) = waiting.client
            && let Some(count) = self.per_client.get_mut(&client)
        {
            *count -= 1;
            if *count == 0 {
                self.per_client.remove(&client);
            }
        }
        waiting
    }
}

/// See the module docs.
pub struct SeekPool {
    manager: Arc<GameManager>,
    inner: Mutex<Inner>,
    updates: broadcast::Sender<SeekUpdate>,
    limits: SeekLimits,
}

impl std::fmt::Debug for SeekPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeekPool")
            .field("seeks", &self.lock().waiting.len())
            .finish_non_exhaustive()
    }
}

/// A seek waiting for an opponent. Dropping it withdraws the seek.
#[derive(Debug)]
pub struct SeekTicket {
    pool: Arc<SeekPool>,
    info: SeekInfo,
    computer: Option<(Duration, Level)>,
    reply: oneshot::Receiver<Result<Seated, GameError>>,
}

impl SeekTicket {
    /// The seek.
    #[must_use]
    pub fn info(&self) -> &SeekInfo {
        &self.info
    }

    /// Waits until the seek is paired (or, if asked, handed to the computer).
    ///
    /// # Errors
    ///
    /// Whatever creating the game failed with.
    pub async fn wait(&mut self) -> Result<Seated, GameError> {
        if let Some((after, level)) = self.computer {
            tokio::select! {
                reply = &mut self.reply => return flatten(reply),
                () = tokio::time::sleep(after) => {}
            }
            if let Some(waiting) = self.pool.withdraw(&self.info.id, None) {
                return self.pool.pair_with_computer(waiting, level).await;
            }
            // Paired just now by someone else: the answer is on its way.
        }
        flatten((&mut self.reply).await)
    }
}

fn flatten(
    reply: Result<Result<Seated, GameError>, oneshot::error::RecvError>,
) -> Result<Seated, GameError> {
    reply.unwrap_or_else(|_| {
        Err(GameError::Unavailable(
            "the seek was dropped; seek again".into(),
        ))
    })
}

impl Drop for SeekTicket {
    fn drop(&mut self) {
        self.pool.withdraw(&self.info.id, None);
    }
}

impl SeekPool {
    /// An empty pool creating its games through `manager`.
    #[must_use]
    pub fn new(manager: Arc<GameManager>, limits: SeekLimits) -> Arc<SeekPool> {
        Arc::new(SeekPool {
            manager,
            inner: Mutex::new(Inner::default()),
            updates: broadcast::channel(1024).0,
            limits,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the pool's data consistent (each change is one
        // `Vec` operation), so a poisoned lock is still usable.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The open seeks, oldest first.
    #[must_use]
    pub fn list(&self) -> Vec<SeekInfo> {
        self.lock().waiting.iter().map(|w| w.info.clone()).collect()
    }

    /// The open seeks and the updates that follow them, with nothing in between.
    #[must_use]
    pub fn subscribe(&self) -> (Vec<SeekInfo>, broadcast::Receiver<SeekUpdate>) {
        let inner = self.lock();
        let rx = self.updates.subscribe();
        (inner.waiting.iter().map(|w| w.info.clone()).collect(), rx)
    }

    /// Seeks a game: pairs with the oldest compatible seek (the same rules and time control),
    /// or waits.
    ///
    /// # Errors
    ///
    /// [`GameError::InvalidArgument`] for a bad name, [`GameError::LimitExceeded`] when the
    /// pool or the client's share of it is full, failures creating the game.
    pub async fn seek(self: &Arc<Self>, request: SeekRequest) -> Result<SeekOutcome, GameError> {
        if request.rated {
            if request.account.is_none() {
                return Err(GameError::RatedNeedsAccount);
            }
            if !request.time_control.is_timed() {
                return Err(GameError::invalid(
                    "rated",
                    "untimed games are not rated (a rating is per speed); choose a time control",
                ));
            }
        }
        if let Some((low, high)) = request.rating_range
            && low > high
        {
            return Err(GameError::invalid(
                "rating_range",
                format!("the lowest rating ({low}) is above the highest ({high})"),
            ));
        }
        let display_name = match &request.account {
            Some(account) => account.username.as_str().to_owned(),
            None => text::display_name(&request.display_name)?,
        };
        let mine = SeekInfo {
            id: random_game_id(),
            display_name: display_name.clone(),
            rules: request.rules,
            preset: request.preset,
            time_control: request.time_control,
            created: SystemTime::now(),
            computer_after: request.computer.map(|(after, _)| after),
            account: request
                .account
                .as_ref()
                .map(|a| seat_account(a, request.time_control)),
            rated: request.rated,
            rating_range: request.rating_range,
        };
        let client = request
            .client
            .filter(|ip| !(self.limits.exempt_loopback && ip.is_loopback()))
            .map(client_key);
        let token = PlayerToken::generate();
        let found = {
            let mut inner = self.lock();
            // Seekers who went away meanwhile are not paired.
            let stale: Vec<String> = inner
                .waiting
                .iter()
                .filter(|w| w.reply.is_closed())
                .map(|w| w.info.id.clone())
                .collect();
            for id in stale {
                self.remove_locked(&mut inner, &id, None);
            }
            let index = inner
                .waiting
                .iter()
                .position(|w| compatible(&w.info, &mine));
            match index {
                Some(index) => {
                    let waiting = inner.take(index);
                    let _ = self.updates.send(SeekUpdate::Removed {
                        id: waiting.info.id.clone(),
                        game_id: None,
                    });
                    Some(waiting)
                }
                None => {
                    if inner.waiting.len() >= self.limits.max_seeks {
                        return Err(GameError::LimitExceeded(format!(
                            "the server has {} open seeks, its limit",
                            self.limits.max_seeks
                        )));
                    }
                    if let Some(client) = client {
                        let count = inner.per_client.entry(client).or_default();
                        if self.limits.max_per_client > 0 && *count >= self.limits.max_per_client {
                            return Err(GameError::LimitExceeded(format!(
                                "this client already has {} open seeks, the limit per client",
                                self.limits.max_per_client
                            )));
                        }
                        *count += 1;
                    }
                    let info = mine.clone();
                    let (reply, rx) = oneshot::channel();
                    inner.waiting.push(Waiting {
                        info: info.clone(),
                        token,
                        client,
                        reply,
                    });
                    let _ = self.updates.send(SeekUpdate::Added(info.clone()));
                    debug!(seek = %info.id, "seek waiting");
                    return Ok(SeekOutcome::Waiting(SeekTicket {
                        pool: Arc::clone(self),
                        info,
                        computer: request.computer,
                        reply: rx,
                    }));
                }
            }
        };
        let waiting = found.expect("a seek was found above");
        let seated = self.pair(waiting, mine, token, request.client).await?;
        Ok(SeekOutcome::Paired(seated))
    }

    /// Accepts the open seek `id`: a game between its seeker and the caller.
    ///
    /// # Errors
    ///
    /// [`GameError::SeekNotFound`] if it is not open (any more), [`GameError::InvalidArgument`]
    /// for a bad name, failures creating the game.
    pub async fn accept(
        &self,
        id: &str,
        display_name: &str,
        client: Option<IpAddr>,
        account: Option<&Account>,
    ) -> Result<Seated, GameError> {
        let display_name = match account {
            Some(account) => account.username.as_str().to_owned(),
            None => text::display_name(display_name)?,
        };
        let waiting = {
            let mut inner = self.lock();
            let index = inner
                .waiting
                .iter()
                .position(|w| w.info.id == id && !w.reply.is_closed())
                .ok_or_else(|| GameError::SeekNotFound(text::quoted(id)))?;
            let seek = &inner.waiting[index].info;
            if seek.rated && account.is_none() {
                return Err(GameError::RatedNeedsAccount);
            }
            let mine = SeekInfo {
                id: String::new(),
                display_name: display_name.clone(),
                account: account.map(|a| seat_account(a, seek.time_control)),
                rating_range: None,
                computer_after: None,
                created: SystemTime::now(),
                ..seek.clone()
            };
            if !compatible(seek, &mine) {
                return Err(GameError::SeekRefused(
                    "the seek wants an opponent rated within its range, or it is your own"
                        .to_owned(),
                ));
            }
            let waiting = inner.take(index);
            let _ = self.updates.send(SeekUpdate::Removed {
                id: waiting.info.id.clone(),
                game_id: None,
            });
            waiting
        };
        let mine = SeekInfo {
            display_name,
            account: account.map(|a| seat_account(a, waiting.info.time_control)),
            ..waiting.info.clone()
        };
        self.pair(waiting, mine, PlayerToken::generate(), client)
            .await
    }

    /// Creates the game of a pairing decided under the lock, sends the waiting seeker its seat,
    /// and returns the caller's.
    async fn pair(
        &self,
        waiting: Waiting,
        me: SeekInfo,
        token: PlayerToken,
        client: Option<IpAddr>,
    ) -> Result<Seated, GameError> {
        let seeker_first = rand::random::<bool>();
        let mine = (me.display_name.clone(), token.clone());
        let theirs = (waiting.info.display_name.clone(), waiting.token.clone());
        let (players, accounts) = if seeker_first {
            (
                ByPlayer::new(theirs, mine),
                ByPlayer::new(waiting.info.account.clone(), me.account.clone()),
            )
        } else {
            (
                ByPlayer::new(mine, theirs),
                ByPlayer::new(me.account.clone(), waiting.info.account.clone()),
            )
        };
        let created = self
            .manager
            .create_paired(PairedGame {
                rules: waiting.info.rules,
                preset: waiting.info.preset,
                time_control: waiting.info.time_control,
                players,
                computer: None,
                creator: client,
                accounts,
                rated: waiting.info.rated,
            })
            .await;
        match created {
            Ok(game) => {
                let (their_seat, my_seat) = if seeker_first {
                    (Player::First, Player::Second)
                } else {
                    (Player::Second, Player::First)
                };
                info!(seek = %waiting.info.id, game_id = %game.id, "seek paired");
                let _ = waiting.reply.send(Ok(Seated {
                    game: game.clone(),
                    seat: their_seat,
                    token: waiting.token,
                }));
                Ok(Seated {
                    game,
                    seat: my_seat,
                    token,
                })
            }
            Err(error) => {
                let _ = waiting.reply.send(Err(error.clone()));
                Err(error)
            }
        }
    }

    async fn pair_with_computer(
        &self,
        waiting: Waiting,
        level: Level,
    ) -> Result<Seated, GameError> {
        let name = waiting.info.display_name.clone();
        let game = self
            .manager
            .create_paired(PairedGame {
                rules: waiting.info.rules,
                preset: waiting.info.preset,
                time_control: waiting.info.time_control,
                players: ByPlayer::new(
                    (name.clone(), waiting.token.clone()),
                    (name, waiting.token.clone()),
                ),
                computer: Some(level),
                creator: waiting.client,
                accounts: ByPlayer::new(waiting.info.account.clone(), None),
                // The computer's games are not rated.
                rated: false,
            })
            .await?;
        info!(seek = %waiting.info.id, game_id = %game.id, "seek handed to the computer");
        Ok(Seated {
            game,
            seat: Player::First,
            token: waiting.token,
        })
    }

    /// Removes seek `id` if it is still waiting, announcing it.
    fn withdraw(&self, id: &str, game_id: Option<GameId>) -> Option<Waiting> {
        let mut inner = self.lock();
        self.remove_locked(&mut inner, id, game_id)
    }

    fn remove_locked(
        &self,
        inner: &mut Inner,
        id: &str,
        game_id: Option<GameId>,
    ) -> Option<Waiting> {
        let index = inner.waiting.iter().position(|w| w.info.id == id)?;
        let waiting = inner.take(index);
        let _ = self.updates.send(SeekUpdate::Removed {
            id: id.to_owned(),
            game_id,
        });
        Some(waiting)
    }
}
