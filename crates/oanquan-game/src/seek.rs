//! Seeks: players asking for an opponent with a given rule set and time control. The pool
//! pairs compatible seeks first come, first served; a seek lives as long as its seeker waits
//! (the [`SeekTicket`]) and is gone when it is dropped.
//!
//! Pairing is decided under one lock: a waiting seek is removed from the pool before its game
//! is created, so it can be paired once only, whatever the races. Seeks are presence, not
//! history: they live in this process's memory, are listed and announced as they come and go
//! ([`SeekPool::subscribe`]), and vanish with a restart (their seekers' streams end with it).
//!
//! With several server nodes on one database, the open seeks live in a [`SeekBoard`] that
//! every node shares ([`SeekPool::shared`]): the board takes a waiting seek for one pairing
//! only, the pairing node creates the game and posts its id and the waiter's seat there, and
//! the waiter's node, which alone holds the waiter's token, answers its stream. Each node
//! mirrors the board's open seeks for its listings and lobby streams, re-reading it on every
//! change the board announces and at least every second.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use oanquan_ai::Level;
use oanquan_rules::{ByPlayer, Player, Preset, Rules};
use tokio::sync::{Notify, broadcast, oneshot};
use tracing::{debug, info, warn};

use crate::account::{Account, SeatAccount};
use crate::clock::TimeControl;
use crate::error::GameError;
use crate::limits::{self, OpenGameSlot, client_key};
use crate::manager::{GameManager, PairedGame, RatedAsk, Seated, check_rated, seat_account};
use crate::model::{GameId, GameInfo};
use crate::outage::Outage;
use crate::rating::{MAX_RATING, MIN_RATING, Speed};
use crate::store::StoreError;
use crate::text;
use crate::token::{PlayerToken, TokenHash, random_game_id};
use crate::walkaway::{Walkaways, Walker};

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
#[must_use]
pub fn compatible(a: &SeekInfo, b: &SeekInfo) -> bool {
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

/// Why `mine` cannot accept `seek` ([`compatible`] said no; accepting takes the seek's rules,
/// clock and rated-ness, so only the account or the rating can be in the way): said for the
/// person accepting.
fn refusal(seek: &SeekInfo, mine: &SeekInfo) -> GameError {
    let own = seek
        .account
        .as_ref()
        .zip(mine.account.as_ref())
        .is_some_and(|(x, y)| x.id == y.id);
    let why = match (own, seek.rating_range) {
        (true, _) => "it is your own seek".to_owned(),
        (false, Some((low, high))) => {
            let wanted = if any_rating(low, high) {
                "a rated opponent".to_owned()
            } else {
                format!(
                    "an opponent rated {} at its speed",
                    wanted_rating(low, high)
                )
            };
            match &mine.account {
                Some(account) => match account.rating {
                    Some(rating) => format!("it wants {wanted}, and yours is {rating}"),
                    // Seeks with a range have a clock (checked when made), so an account
                    // always has a rating there; said plainly should that change.
                    None => format!("it wants {wanted}, and this game's clock rates nobody"),
                },
                None => format!("it wants {wanted}, and you have no rating (play as an account)"),
            }
        }
        (false, None) => "it does not take you".to_owned(),
    };
    GameError::SeekRefused(why)
}

/// A rating range as a person reads it: a bound the seek left open (0 for no minimum, the
/// top for no maximum) is not a rating anyone has, and "rated 0 to 1400" read like one.
fn wanted_rating(low: i32, high: i32) -> String {
    match bounds_left_open(low, high) {
        (true, false) => format!("at most {high}"),
        (false, true) => format!("at least {low}"),
        (true, true) => "at all".to_owned(),
        (false, false) => format!("{low} to {high}"),
    }
}

/// Whether a range leaves (no minimum, no maximum): each bound at or past the ratings' own.
fn bounds_left_open(low: i32, high: i32) -> (bool, bool) {
    (
        f64::from(low) <= crate::rating::MIN_RATING,
        f64::from(high) >= crate::rating::MAX_RATING,
    )
}

/// Whether a range takes any rating at all.
fn any_rating(low: i32, high: i32) -> bool {
    bounds_left_open(low, high) == (true, true)
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

/// A seek on a [`SeekBoard`]: what everyone sees, and the hash of its seeker's token (the
/// token itself stays on the seeker's node).
#[derive(Debug, Clone)]
pub struct PostedSeek {
    /// The seek.
    pub info: SeekInfo,
    /// The hash of the token the seeker's seat gets.
    pub token: TokenHash,
}

/// What [`SeekBoard::post`] did.
#[derive(Debug)]
// One per call, moved out at once (as `SeekOutcome`).
#[allow(clippy::large_enum_variant)]
pub enum Posted {
    /// Took this waiting seek for the caller to pair with: nobody else can have it.
    Took(PostedSeek),
    /// Nothing fitted: the seek was posted and waits.
    Waiting,
    /// Nothing fitted, and this many seeks are open, the limit: nothing was posted.
    Full(usize),
}

/// What [`SeekBoard::claim`] did.
#[derive(Debug)]
pub enum Claim {
    /// Took the seek for the caller to pair with.
    Took(PostedSeek),
    /// The seek is not open (any more).
    NotFound,
    /// The seek is open but the check refused it; it stays open.
    Refused(SeekInfo),
}

/// Where a posted seek stands, as its seeker's node reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeekState {
    /// Waiting for an opponent.
    Open,
    /// Taken by a pairing whose game is being created.
    Taken,
    /// Paired: the game, and the seeker's seat in it.
    Paired {
        /// The game.
        game: GameId,
        /// The seeker's seat.
        seat: Player,
    },
    /// The pairing failed, or its node stopped before it was done.
    Failed(String),
    /// Not on the board: withdrawn, or removed with a node that was not heard from.
    Gone,
}

/// What a [`SeekBoard`] call returns.
pub type BoardFuture<'a, T> = BoxFuture<'a, Result<T, StoreError>>;

/// Whether a seek fits, decided by the pool on the board's candidates.
pub type Fits<'a> = &'a (dyn Fn(&SeekInfo) -> bool + Send + Sync);

/// Open seeks shared by several server nodes (a database): see the module docs. Every call is
/// atomic on its own; a seek is taken ([`SeekBoard::post`], [`SeekBoard::claim`]) by one
/// caller at most, and is withdrawn ([`SeekBoard::withdraw`]) only if nobody took it.
pub trait SeekBoard: Send + Sync + std::fmt::Debug {
    /// Takes the oldest open seek that `fits` accepts, or else, if fewer than `max_seeks` are
    /// open, posts `mine` as this node's.
    fn post<'a>(
        &'a self,
        mine: &'a PostedSeek,
        fits: Fits<'a>,
        max_seeks: usize,
    ) -> BoardFuture<'a, Posted>;

    /// Takes the open seek `id` if `fits` accepts it.
    fn claim<'a>(&'a self, id: &'a str, fits: Fits<'a>) -> BoardFuture<'a, Claim>;

    /// Records that the taken seek `id` led to `game`, its seeker playing `seat`; `false` if
    /// the seek is no longer there (its seeker forgot it while the game was made).
    fn paired<'a>(&'a self, id: &'a str, game: &'a GameId, seat: Player) -> BoardFuture<'a, bool>;

    /// Records that pairing the taken seek `id` failed.
    fn failed<'a>(&'a self, id: &'a str, reason: &'a str) -> BoardFuture<'a, ()>;

    /// Removes seek `id` if it is still open; says whether it was.
    fn withdraw<'a>(&'a self, id: &'a str) -> BoardFuture<'a, bool>;

    /// Removes seek `id` whatever its state (its seeker is done with it); the game and seat it
    /// was paired into, if it was.
    fn forget<'a>(&'a self, id: &'a str) -> BoardFuture<'a, Option<(GameId, Player)>>;

    /// Where seek `id` stands.
    fn state<'a>(&'a self, id: &'a str) -> BoardFuture<'a, SeekState>;

    /// The open seeks of every node, oldest first.
    fn list(&self) -> BoardFuture<'_, Vec<SeekInfo>>;

    /// The board's changes: `Some(id)` when seek `id` changed, `None` when anything may have
    /// (a reconnection, a periodic tick, seeks of a silent node dropped).
    fn changes(&self) -> broadcast::Receiver<Option<String>>;
}

/// How often a waiting seeker's node reads its seek's state even without a change announced
/// (a lost notification only delays the answer by this much).
const RECHECK: Duration = Duration::from_secs(1);

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
    /// Oldest first (this node's alone; empty with a board).
    waiting: Vec<Waiting>,
    per_client: HashMap<IpAddr, usize>,
    /// With a board: its open seeks as last read, oldest first.
    listed: Vec<SeekInfo>,
    /// With a board: this node's waiting seekers, woken when their seek changes.
    woken: HashMap<String, Arc<Notify>>,
}

impl Inner {
    fn take(&mut self, index: usize) -> Waiting {
        let waiting = self.waiting.remove(index);
        if let Some(client) = waiting.client {
            self.release(client);
        }
        waiting
    }

    /// Gives back one of `client`'s seeks.
    fn release(&mut self, client: IpAddr) {
        if let Some(count) = self.per_client.get_mut(&client) {
            *count -= 1;
            if *count == 0 {
                self.per_client.remove(&client);
            }
        }
    }

    /// Takes one of `client`'s seeks, if it has one left.
    fn reserve(&mut self, client: IpAddr, limits: &SeekLimits) -> Result<(), GameError> {
        let count = self.per_client.entry(client).or_default();
        if limits.max_per_client > 0 && *count >= limits.max_per_client {
            return Err(GameError::LimitExceeded(format!(
                "this client already has {} open seeks, the limit per client",
                limits.max_per_client
            )));
        }
        *count += 1;
        Ok(())
    }
}

/// See the module docs.
pub struct SeekPool {
    manager: Arc<GameManager>,
    inner: Mutex<Inner>,
    updates: broadcast::Sender<SeekUpdate>,
    limits: SeekLimits,
    /// Several nodes' seeks, when there is a board.
    board: Option<Arc<dyn SeekBoard>>,
    /// One re-read of the board at a time, so that the mirror moves only forwards.
    syncing: tokio::sync::Mutex<()>,
    /// Failures to re-read the board, said once a minute.
    sync_outage: Outage,
    /// Who walked away from the games seeks made (see [`crate::walkaway`]).
    walkaways: Walkaways,
}

impl std::fmt::Debug for SeekPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("SeekPool")
            .field("seeks", &(inner.waiting.len() + inner.listed.len()))
            .field("board", &self.board)
            .finish_non_exhaustive()
    }
}

/// A seek waiting for an opponent. Dropping it withdraws the seek.
#[derive(Debug)]
pub struct SeekTicket {
    pool: Arc<SeekPool>,
    info: SeekInfo,
    computer: Option<(Duration, Level)>,
    reply: Reply,
    /// Whom the pairing counts for (see [`crate::walkaway`]).
    walkers: Vec<Walker>,
}

/// How a waiting seeker learns its game.
#[derive(Debug)]
enum Reply {
    /// From the pairing, in this process.
    Local(oneshot::Receiver<Result<Seated, GameError>>),
    /// From the board, where the pairing node (maybe another) posts the game.
    Board {
        /// The seat's token, which only this node knows.
        token: PlayerToken,
        /// The per-client limit's key, given back with the ticket.
        client: Option<IpAddr>,
        woken: Arc<Notify>,
        /// The pairing was handed to the seeker: the seat is held, whatever becomes of the
        /// ticket.
        answered: bool,
    },
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
        let seated = self.wait_for_seat().await?;
        self.pool
            .walkaways
            .record(&self.walkers, &seated.game.id, seated.seat);
        Ok(seated)
    }

    async fn wait_for_seat(&mut self) -> Result<Seated, GameError> {
        if let Some((after, level)) = self.computer {
            tokio::select! {
                answer = self.answer() => return answer,
                () = tokio::time::sleep(after) => {}
            }
            match &self.reply {
                Reply::Local(_) => {
                    if let Some(waiting) = self.pool.withdraw(&self.info.id, None) {
                        return self
                            .pool
                            .pair_with_computer(&waiting.info, waiting.token, waiting.client, level)
                            .await;
                    }
                }
                Reply::Board { token, client, .. } => {
                    let board = self.pool.board()?;
                    // Withdrawn only if nobody took it: then it is this node's to hand to the
                    // computer, once.
                    if board.withdraw(&self.info.id).await? {
                        let (token, client) = (token.clone(), *client);
                        let seated = self
                            .pool
                            .pair_with_computer(&self.info, token, client, level)
                            .await;
                        self.pool.sync().await;
                        return seated;
                    }
                }
            }
            // Paired just now by someone else: the answer is on its way.
        }
        self.answer().await
    }

    /// The pairing's answer, however long it takes.
    async fn answer(&mut self) -> Result<Seated, GameError> {
        match &mut self.reply {
            Reply::Local(reply) => flatten(reply.await),
            Reply::Board {
                token,
                woken,
                answered,
                ..
            } => {
                let board = self.pool.board()?;
                loop {
                    let notified = woken.notified();
                    match board.state(&self.info.id).await {
                        Ok(SeekState::Open | SeekState::Taken) => {}
                        Ok(SeekState::Paired { game, seat }) => {
                            let game = self.pool.manager.get_game(&game).await?;
                            *answered = true;
                            return Ok(Seated {
                                game,
                                seat,
                                token: token.clone(),
                            });
                        }
                        Ok(SeekState::Failed(reason)) => {
                            return Err(GameError::Unavailable(format!(
                                "pairing the seek failed ({reason}); seek again"
                            )));
                        }
                        Ok(SeekState::Gone) => {
                            return Err(GameError::Unavailable(
                                "the seek is no longer open (this server lost the database for \
                                 a while); seek again"
                                    .to_owned(),
                            ));
                        }
                        // The database is away: the seek waits until it is back.
                        Err(error) => {
                            warn!(seek = %self.info.id, %error, "reading a seek's state");
                        }
                    }
                    tokio::select! {
                        () = notified => {}
                        () = tokio::time::sleep(RECHECK) => {}
                    }
                }
            }
        }
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

/// Who of `walkers` (see [`SeekPool::walkers`]: the address, then the account if any) a caller
/// is judged by: its account when it has one, else its address (see [`crate::walkaway`]).
fn judged(walkers: &[Walker]) -> &[Walker] {
    match walkers {
        [_, account @ Walker::Account(_)] => std::slice::from_ref(account),
        all => all,
    }
}

impl Drop for SeekTicket {
    fn drop(&mut self) {
        match &mut self.reply {
            Reply::Local(answer) => {
                self.pool.withdraw(&self.info.id, None);
                // Paired, but dropped before the seat was taken out (the stream ended at that
                // moment): nobody will hold the seat, so its game is aborted, not left for the
                // other player to wait in.
                if let (Ok(Ok(seated)), Ok(runtime)) =
                    (answer.try_recv(), tokio::runtime::Handle::try_current())
                {
                    let pool = Arc::clone(&self.pool);
                    runtime.spawn(async move { pool.manager.abandon_seat(&seated).await });
                }
            }
            Reply::Board {
                client,
                token,
                answered,
                ..
            } => {
                {
                    let mut inner = self.pool.lock();
                    inner.woken.remove(&self.info.id);
                    if let Some(client) = *client {
                        inner.release(client);
                    }
                }
                // Off the board whatever it led to: nobody waits for it any more. A ticket is
                // dropped on the runtime; if not, the seek goes with this node's heartbeat.
                if let (Some(board), Ok(runtime)) = (
                    self.pool.board.clone(),
                    tokio::runtime::Handle::try_current(),
                ) {
                    let id = self.info.id.clone();
                    let unheld = (!*answered).then(|| token.clone());
                    let pool = Arc::clone(&self.pool);
                    runtime.spawn(async move {
                        match board.forget(&id).await {
                            // Paired as its stream ended, on another node perhaps: nobody
                            // will hold the seat (an outside probe's stranger waited out the
                            // first-move limit).
                            Ok(Some((game, seat))) => {
                                let Some(token) = unheld else { return };
                                let seated = match pool.manager.get_game(&game).await {
                                    Ok(game) => Seated { game, seat, token },
                                    Err(error) => {
                                        warn!(seek = %id, %error, "reading a forgotten seek's game");
                                        return;
                                    }
                                };
                                pool.manager.abandon_seat(&seated).await;
                            }
                            Ok(None) => {}
                            Err(error) => warn!(seek = %id, %error, "withdrawing a seek"),
                        }
                    });
                }
            }
        }
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
            board: None,
            syncing: tokio::sync::Mutex::new(()),
            sync_outage: Outage::new("cannot read the open seeks", "reading the open seeks again"),
            walkaways: Walkaways::default(),
        })
    }

    /// A pool whose seeks live on `board`, shared with other nodes: `limits.max_seeks` counts
    /// every node's seeks, `limits.max_per_client` this node's. Follows the board's changes on
    /// a task of its own (on the current runtime), which ends with the pool.
    #[must_use]
    pub fn shared(
        manager: Arc<GameManager>,
        limits: SeekLimits,
        board: Arc<dyn SeekBoard>,
    ) -> Arc<SeekPool> {
        let mut changes = board.changes();
        let pool = Arc::new(SeekPool {
            manager,
            inner: Mutex::new(Inner::default()),
            updates: broadcast::channel(1024).0,
            limits,
            board: Some(board),
            syncing: tokio::sync::Mutex::new(()),
            sync_outage: Outage::new("cannot read the open seeks", "reading the open seeks again"),
            walkaways: Walkaways::default(),
        });
        let weak: Weak<SeekPool> = Arc::downgrade(&pool);
        tokio::spawn(async move {
            use broadcast::error::{RecvError, TryRecvError};
            loop {
                // Every change that came meanwhile, then one re-read for all of them. A tick
                // (`None`) re-reads the list only: waiters re-read their own seeks anyway.
                let mut changed = HashSet::new();
                let mut lost = false;
                match changes.recv().await {
                    Ok(Some(id)) => {
                        changed.insert(id);
                    }
                    Ok(None) => {}
                    Err(RecvError::Lagged(_)) => lost = true,
                    Err(RecvError::Closed) => return,
                }
                loop {
                    match changes.try_recv() {
                        Ok(Some(id)) => {
                            changed.insert(id);
                        }
                        Ok(None) => {}
                        Err(TryRecvError::Lagged(_)) => lost = true,
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Closed) => return,
                    }
                }
                let Some(pool) = weak.upgrade() else { return };
                {
                    let inner = pool.lock();
                    for (id, woken) in &inner.woken {
                        if lost || changed.contains(id) {
                            woken.notify_one();
                        }
                    }
                }
                pool.sync().await;
            }
        });
        pool
    }

    fn board(&self) -> Result<&Arc<dyn SeekBoard>, GameError> {
        self.board
            .as_ref()
            .ok_or_else(|| GameError::Internal("a shared seek without a board".to_owned()))
    }

    /// Re-reads the board's open seeks into this node's mirror, announcing the differences.
    async fn sync(&self) {
        let Some(board) = &self.board else { return };
        let _one = self.syncing.lock().await;
        let list = match board.list().await {
            Ok(list) => {
                self.sync_outage.succeeded();
                list
            }
            Err(error) => {
                self.sync_outage.failed(&error);
                return;
            }
        };
        let mut inner = self.lock();
        let now: HashSet<&str> = list.iter().map(|seek| seek.id.as_str()).collect();
        let before: HashSet<&str> = inner.listed.iter().map(|seek| seek.id.as_str()).collect();
        for gone in inner
            .listed
            .iter()
            .filter(|seek| !now.contains(seek.id.as_str()))
        {
            let _ = self.updates.send(SeekUpdate::Removed {
                id: gone.id.clone(),
                game_id: None,
            });
        }
        for new in list
            .iter()
            .filter(|seek| !before.contains(seek.id.as_str()))
        {
            let _ = self.updates.send(SeekUpdate::Added(new.clone()));
        }
        inner.listed = list;
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
        Self::listed(&self.lock())
    }

    /// The open seeks, oldest first, as they are now: with a board, read from it (every
    /// node's), not from this node's mirror of it.
    pub async fn list_now(&self) -> Vec<SeekInfo> {
        self.sync().await;
        self.list()
    }

    fn listed(inner: &Inner) -> Vec<SeekInfo> {
        if inner.waiting.is_empty() {
            inner.listed.clone()
        } else {
            inner.waiting.iter().map(|w| w.info.clone()).collect()
        }
    }

    /// The open seeks and the updates that follow them, with nothing in between.
    #[must_use]
    pub fn subscribe(&self) -> (Vec<SeekInfo>, broadcast::Receiver<SeekUpdate>) {
        let inner = self.lock();
        let rx = self.updates.subscribe();
        (Self::listed(&inner), rx)
    }

    /// Seeks a game: pairs with the oldest compatible seek (the same rules and time control),
    /// or waits.
    ///
    /// # Errors
    ///
    /// [`GameError::InvalidArgument`] for a bad name, [`GameError::LimitExceeded`] when the
    /// pool or the client's share of it is full, failures creating the game.
    pub async fn seek(self: &Arc<Self>, request: SeekRequest) -> Result<SeekOutcome, GameError> {
        let walkers = self.walkers(request.client, request.account.as_ref());
        self.walkaways
            .check(&self.manager, judged(&walkers))
            .await?;
        Ok(match self.seek_unpaused(request).await? {
            SeekOutcome::Paired(seated) => {
                self.walkaways
                    .record(&walkers, &seated.game.id, seated.seat);
                SeekOutcome::Paired(seated)
            }
            SeekOutcome::Waiting(mut ticket) => {
                ticket.walkers = walkers;
                SeekOutcome::Waiting(ticket)
            }
        })
    }

    /// Seats a caller at `client` as `account` in the open game `id` that someone else made
    /// (`JoinGame`): like [`GameManager::join_game_as`], but paused like a seek for a caller
    /// that walked away from too many games with strangers (see [`crate::walkaway`]), and
    /// counted if it walks away from this one. Joining strangers' open games and never moving
    /// harms them as a seek would, and the pool is where walkaways are kept.
    ///
    /// # Errors
    ///
    /// [`GameError::SeekPaused`] or [`GameError::FirstMovesPending`], and the errors of
    /// [`GameManager::join_game_as`].
    pub async fn join(
        &self,
        id: &GameId,
        display_name: &str,
        client: Option<IpAddr>,
        account: Option<&Account>,
    ) -> Result<Seated, GameError> {
        let walkers = self.walkers(client, account);
        self.walkaways
            .check(&self.manager, judged(&walkers))
            .await?;
        let seated = self.manager.join_game_as(id, display_name, account).await?;
        self.walkaways
            .record(&walkers, &seated.game.id, seated.seat);
        Ok(seated)
    }

    /// Whom a pairing of a caller at `client` as `account` counts for: nobody from an address
    /// exempt from the per-client limits.
    fn walkers(&self, client: Option<IpAddr>, account: Option<&Account>) -> Vec<Walker> {
        match client {
            Some(ip) if !(self.limits.exempt_loopback && ip.is_loopback()) => {
                std::iter::once(Walker::Client(client_key(ip)))
                    .chain(account.map(|a| Walker::Account(a.id.clone())))
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    async fn seek_unpaused(
        self: &Arc<Self>,
        request: SeekRequest,
    ) -> Result<SeekOutcome, GameError> {
        if request.rated {
            // A seek has no start position: it plays a rule set from its start.
            check_rated(RatedAsk {
                account: request.account.is_some(),
                computer: false,
                timed: request.time_control.is_timed(),
                preset_start: request.preset.is_some(),
            })?;
        }
        limits::hosted_rules(&request.rules, "rules")?;
        if let Some((low, high)) = request.rating_range {
            // Ratings are kept per speed, and an untimed game has none: such a range could
            // match nobody, and its seeker would wait for ever.
            if Speed::of(request.time_control).is_none() {
                return Err(GameError::invalid(
                    "rating_range",
                    "an untimed game has no speed, so no opponent has a rating for it: give a \
                     time control, or leave the range out",
                ));
            }
            if low > high {
                return Err(GameError::invalid(
                    "rating_range",
                    format!("the lowest rating ({low}) is above the highest ({high})"),
                ));
            }
            // A range no rating falls in would wait for nobody until its caller gave up.
            let (least, most) = (MIN_RATING as i32, MAX_RATING as i32);
            if high < least || low > most {
                return Err(GameError::invalid(
                    "rating_range",
                    format!(
                        "no rating is {}: ratings run from {least} to {most}",
                        wanted_rating(low, high)
                    ),
                ));
            }
        }
        let display_name = match &request.account {
            Some(account) => account.username.as_str().to_owned(),
            None => {
                self.manager
                    .anonymous_display_name(&request.display_name)
                    .await?
            }
        };
        // Before any waiting seek is taken: a pairing this call completes is a game it creates.
        let slot = self.manager.reserve_open_game(request.client)?;
        let mine = SeekInfo {
            id: random_game_id(),
            display_name: display_name.clone(),
            rules: request.rules,
            preset: request.preset,
            time_control: request.time_control,
            created: crate::service_clock::now(),
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
        if self.board.is_some() {
            // On a task of its own: a caller that goes away cannot leave a seek taken with no
            // game, nor posted with no ticket (dropped with the task's output, the ticket
            // withdraws it).
            let pool = Arc::clone(self);
            let (computer, ip) = (request.computer, request.client);
            return tokio::spawn(async move {
                pool.seek_on_board(mine, token, client, ip, computer, slot)
                    .await
            })
            .await
            .map_err(|e| GameError::Internal(format!("seek task: {e}")))?;
        }
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
                        inner.reserve(client, &self.limits)?;
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
                        reply: Reply::Local(rx),
                        walkers: Vec::new(),
                    }));
                }
            }
        };
        let waiting = found.expect("a seek was found above");
        let seated = self
            .pair(waiting, mine, token, request.client, slot)
            .await?;
        Ok(SeekOutcome::Paired(seated))
    }

    /// Accepts the open seek `id`: a game between its seeker and the caller.
    ///
    /// # Errors
    ///
    /// [`GameError::SeekNotFound`] if it is not open (any more), [`GameError::InvalidArgument`]
    /// for a bad name, failures creating the game.
    pub async fn accept(
        self: &Arc<Self>,
        id: &str,
        display_name: &str,
        client: Option<IpAddr>,
        account: Option<&Account>,
    ) -> Result<Seated, GameError> {
        let walkers = self.walkers(client, account);
        self.walkaways
            .check(&self.manager, judged(&walkers))
            .await?;
        let seated = self
            .accept_unpaused(id, display_name, client, account)
            .await?;
        self.walkaways
            .record(&walkers, &seated.game.id, seated.seat);
        Ok(seated)
    }

    async fn accept_unpaused(
        self: &Arc<Self>,
        id: &str,
        display_name: &str,
        client: Option<IpAddr>,
        account: Option<&Account>,
    ) -> Result<Seated, GameError> {
        let display_name = match account {
            Some(account) => account.username.as_str().to_owned(),
            None => self.manager.anonymous_display_name(display_name).await?,
        };
        // Before the seek is taken, as in `seek`.
        let slot = self.manager.reserve_open_game(client)?;
        if self.board.is_some() {
            let pool = Arc::clone(self);
            let (id, account) = (id.to_owned(), account.cloned());
            // On a task of its own, as `seek`'s pairing.
            return tokio::spawn(async move {
                pool.accept_on_board(&id, display_name, client, account.as_ref(), slot)
                    .await
            })
            .await
            .map_err(|e| GameError::Internal(format!("accept task: {e}")))?;
        }
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
                created: crate::service_clock::now(),
                ..seek.clone()
            };
            if !compatible(seek, &mine) {
                return Err(refusal(seek, &mine));
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
        self.pair(waiting, mine, PlayerToken::generate(), client, slot)
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
        slot: OpenGameSlot,
    ) -> Result<Seated, GameError> {
        let created = self
            .create_pair(
                &waiting.info,
                waiting.token.hash(),
                &me,
                &token,
                client,
                slot,
            )
            .await;
        match created {
            Ok((game, their_seat)) => {
                let theirs = Seated {
                    game: game.clone(),
                    seat: their_seat,
                    token: waiting.token,
                };
                if let Err(Ok(theirs)) = waiting.reply.send(Ok(theirs)) {
                    // The seeker went away while the game was made (its stream closed, or its
                    // key was revoked at that moment): a seat nobody holds would leave the
                    // caller in a game against no one (an outside probe's race did, 10 times
                    // in 20).
                    self.manager.abandon_seat(&theirs).await;
                    return Err(GameError::SeekNotFound(text::quoted(&waiting.info.id)));
                }
                Ok(Seated {
                    game,
                    seat: their_seat.other(),
                    token,
                })
            }
            Err(error) => {
                // A full store wrote nothing: the waiting seeker did nothing wrong and keeps
                // its place instead of losing the seek to the caller's failed pairing.
                let waiting = if matches!(error, GameError::LimitExceeded(_)) {
                    self.requeue(waiting)
                } else {
                    Some(waiting)
                };
                if let Some(waiting) = waiting {
                    let _ = waiting.reply.send(Err(error.clone()));
                }
                Err(error)
            }
        }
    }

    /// Puts a seek taken for a pairing that created no game back in the pool, in the order of
    /// its creation; gives it back if it cannot wait again (its client's share was taken
    /// meanwhile).
    fn requeue(&self, waiting: Waiting) -> Option<Waiting> {
        let mut inner = self.lock();
        if waiting.reply.is_closed() {
            return None;
        }
        if let Some(client) = waiting.client {
            if inner.reserve(client, &self.limits).is_err() {
                return Some(waiting);
            }
        }
        let index = inner
            .waiting
            .iter()
            .position(|w| w.info.created > waiting.info.created)
            .unwrap_or(inner.waiting.len());
        let _ = self.updates.send(SeekUpdate::Added(waiting.info.clone()));
        inner.waiting.insert(index, waiting);
        None
    }

    /// Creates the game between the waiting seek `theirs` (its seat's token known by its hash)
    /// and the caller `me`, seats drawn at random; returns it and the waiting seeker's seat.
    async fn create_pair(
        &self,
        theirs: &SeekInfo,
        their_token: TokenHash,
        me: &SeekInfo,
        token: &PlayerToken,
        client: Option<IpAddr>,
        slot: OpenGameSlot,
    ) -> Result<(GameInfo, Player), GameError> {
        let seeker_first = rand::random::<bool>();
        let mine = (me.display_name.clone(), token.hash());
        let their = (theirs.display_name.clone(), their_token);
        let (players, accounts) = if seeker_first {
            (
                ByPlayer::new(their, mine),
                ByPlayer::new(theirs.account.clone(), me.account.clone()),
            )
        } else {
            (
                ByPlayer::new(mine, their),
                ByPlayer::new(me.account.clone(), theirs.account.clone()),
            )
        };
        let game = self
            .manager
            .create_paired(
                PairedGame {
                    rules: theirs.rules,
                    preset: theirs.preset,
                    time_control: theirs.time_control,
                    players,
                    computer: None,
                    creator: client,
                    accounts,
                    rated: theirs.rated,
                },
                slot,
            )
            .await?;
        info!(seek = %theirs.id, game_id = %game.id, "seek paired");
        let their_seat = if seeker_first {
            Player::First
        } else {
            Player::Second
        };
        Ok((game, their_seat))
    }

    async fn pair_with_computer(
        &self,
        info: &SeekInfo,
        token: PlayerToken,
        client: Option<IpAddr>,
        level: Level,
    ) -> Result<Seated, GameError> {
        let name = info.display_name.clone();
        let slot = self.manager.reserve_open_game(client)?;
        let game = self
            .manager
            .create_paired(
                PairedGame {
                    rules: info.rules,
                    preset: info.preset,
                    time_control: info.time_control,
                    players: ByPlayer::new((name.clone(), token.hash()), (name, token.hash())),
                    computer: Some(level),
                    creator: client,
                    accounts: ByPlayer::new(info.account.clone(), None),
                    // The computer's games are not rated.
                    rated: false,
                },
                slot,
            )
            .await?;
        info!(seek = %info.id, game_id = %game.id, "seek handed to the computer");
        Ok(Seated {
            game,
            seat: Player::First,
            token,
        })
    }

    /// [`SeekPool::seek`] on the board: takes a fitting seek of any node and pairs with it, or
    /// posts `mine` and waits.
    async fn seek_on_board(
        self: Arc<Self>,
        mine: SeekInfo,
        token: PlayerToken,
        client: Option<IpAddr>,
        ip: Option<IpAddr>,
        computer: Option<(Duration, Level)>,
        slot: OpenGameSlot,
    ) -> Result<SeekOutcome, GameError> {
        let board = Arc::clone(self.board()?);
        if let Some(client) = client {
            self.lock().reserve(client, &self.limits)?;
        }
        // Registered before the seek is posted, so that no change is missed.
        let woken = Arc::new(Notify::new());
        self.lock()
            .woken
            .insert(mine.id.clone(), Arc::clone(&woken));
        let posted = PostedSeek {
            info: mine,
            token: token.hash(),
        };
        let fits = |other: &SeekInfo| compatible(other, &posted.info);
        let outcome = board.post(&posted, &fits, self.limits.max_seeks).await;
        if !matches!(outcome, Ok(Posted::Waiting)) {
            let mut inner = self.lock();
            inner.woken.remove(&posted.info.id);
            if let Some(client) = client {
                inner.release(client);
            }
        }
        match outcome? {
            Posted::Waiting => {
                debug!(seek = %posted.info.id, "seek waiting");
                self.sync().await;
                Ok(SeekOutcome::Waiting(SeekTicket {
                    pool: Arc::clone(&self),
                    info: posted.info,
                    computer,
                    reply: Reply::Board {
                        token,
                        client,
                        woken,
                        answered: false,
                    },
                    walkers: Vec::new(),
                }))
            }
            Posted::Full(open) => Err(GameError::LimitExceeded(format!(
                "the servers have {open} open seeks, their limit"
            ))),
            Posted::Took(theirs) => {
                let seated = self
                    .pair_on_board(board.as_ref(), theirs, posted.info, token, ip, slot)
                    .await;
                self.sync().await;
                seated.map(SeekOutcome::Paired)
            }
        }
    }

    /// [`SeekPool::accept`] on the board.
    async fn accept_on_board(
        &self,
        id: &str,
        display_name: String,
        client: Option<IpAddr>,
        account: Option<&Account>,
        slot: OpenGameSlot,
    ) -> Result<Seated, GameError> {
        let board = Arc::clone(self.board()?);
        let me = |seek: &SeekInfo| SeekInfo {
            id: String::new(),
            display_name: display_name.clone(),
            account: account.map(|a| seat_account(a, seek.time_control)),
            rating_range: None,
            computer_after: None,
            created: crate::service_clock::now(),
            ..seek.clone()
        };
        let fits =
            |seek: &SeekInfo| !(seek.rated && account.is_none()) && compatible(seek, &me(seek));
        let theirs = match board.claim(id, &fits).await? {
            Claim::Took(theirs) => theirs,
            Claim::NotFound => return Err(GameError::SeekNotFound(text::quoted(id))),
            Claim::Refused(seek) if seek.rated && account.is_none() => {
                return Err(GameError::RatedNeedsAccount);
            }
            Claim::Refused(seek) => return Err(refusal(&seek, &me(&seek))),
        };
        let mine = me(&theirs.info);
        let seated = self
            .pair_on_board(
                board.as_ref(),
                theirs,
                mine,
                PlayerToken::generate(),
                client,
                slot,
            )
            .await;
        self.sync().await;
        seated
    }

    /// Creates the game of a seek taken from the board, and posts it there for the waiting
    /// seeker's node.
    async fn pair_on_board(
        &self,
        board: &dyn SeekBoard,
        theirs: PostedSeek,
        me: SeekInfo,
        token: PlayerToken,
        client: Option<IpAddr>,
        slot: OpenGameSlot,
    ) -> Result<Seated, GameError> {
        let id = theirs.info.id.clone();
        let their_token = theirs.token;
        match self
            .create_pair(&theirs.info, theirs.token, &me, &token, client, slot)
            .await
        {
            Ok((game, their_seat)) => {
                match board.paired(&id, &game.id, their_seat).await {
                    Ok(true) => {}
                    // Its seeker forgot it while the game was made: nobody will hold that
                    // seat, and the caller is told so, as when it happens on one node.
                    Ok(false) => {
                        self.manager
                            .abandon_seat_by_hash(&game.id, &their_token)
                            .await;
                        return Err(GameError::SeekNotFound(text::quoted(&id)));
                    }
                    // Not posted (the database went away): the waiter's node gives up on it
                    // after a while, and the game is there, abandoned by one seat.
                    Err(error) => {
                        warn!(seek = %id, game_id = %game.id, %error, "posting a pairing");
                    }
                }
                Ok(Seated {
                    game,
                    seat: their_seat.other(),
                    token,
                })
            }
            Err(error) => {
                if let Err(post_error) = board.failed(&id, &error.to_string()).await {
                    warn!(seek = %id, error = %post_error, "posting a failed pairing");
                }
                Err(error)
            }
        }
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

#[cfg(test)]
mod tests {
    use super::wanted_rating;

    #[test]
    fn a_range_left_open_on_one_side_says_so() {
        assert_eq!(wanted_rating(0, 1400), "at most 1400");
        assert_eq!(wanted_rating(400, 1400), "at most 1400");
        assert_eq!(wanted_rating(1600, 4000), "at least 1600");
        assert_eq!(wanted_rating(1600, i32::MAX), "at least 1600");
        assert_eq!(wanted_rating(1400, 1600), "1400 to 1600");
        assert_eq!(wanted_rating(0, 4000), "at all");
    }
}
