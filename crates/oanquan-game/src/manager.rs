//! The game service proper: every command and query, in domain types. A command loads its
//! game, decides with a pure function of [`crate::transition`], commits, and publishes.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use oanquan_rules::{ByPlayer, Game, Move, Player, Position, Preset, Rules};
use tracing::{debug, info, warn};

use oanquan_ai::Level;

use crate::account::{
    Account, AccountId, AccountUpdate, ApiKey, ApiKeyRecord, RatingChange, SeatAccount,
};
use crate::clock::{DeadlineKind, TimeControl, TimePolicy};
use crate::error::GameError;
use crate::hub::{Hub, TooManyWatchers, WatchLimits, Watcher};
use crate::limits::{self, OpenGameSlot, OpenGames, client_key};
use crate::model::{GameEventKind, GameStatus, LobbyEventKind};
use crate::model::{GameFilter, GameId, GameInfo, GameState, MoveLog, MoveRecord};
use crate::names::CheckedNames;
use crate::rating::{self, Speed};
use crate::store::{Commit, Committed, GameStore, Page, StoreError};
use crate::store::{LeaderboardPage, PlayerGameFilter};
use crate::text;
use crate::token::{PlayerToken, TokenHash};
use crate::transition::{self, Mover, Opponent, RematchOffer, Transition};
use crate::username::Username;
use crate::watch::{GameFeed, LobbyFeed, Watch};

/// Page size when the client asks for 0.
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// Largest page size; bigger requests are capped.
pub const MAX_PAGE_SIZE: usize = 100;

/// The default of [`ManagerLimits::rated_games_per_pair`].
pub const DEFAULT_RATED_GAMES_PER_PAIR: usize = 5;

/// The window of [`ManagerLimits::rated_games_per_pair`], by the games' creation.
pub const RATED_PAIR_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);

/// Games of one account at one speed read to apply [`ManagerLimits::rated_games_per_pair`].
const RATED_PAIR_SCAN: usize = 2_000;
/// A command that keeps losing optimistic-concurrency races gives up after this many tries.
const MAX_ATTEMPTS: usize = 16;

/// Streams one seat may have open on its game (see [`ManagerLimits::max_streams_per_seat`]).
pub const DEFAULT_MAX_STREAMS_PER_SEAT: usize = 4;

/// Limits the manager enforces itself (the store and the transport have their own).
#[derive(Debug, Clone, Copy)]
pub struct ManagerLimits {
    /// Concurrent spectators of one game. A seated player's own streams do not count.
    pub max_watchers_per_game: usize,
    /// Spectator streams of one game on one connection; 0 = no limit.
    pub max_watchers_per_connection: usize,
    /// Spectator streams of one game from one client address; 0 = no limit.
    pub max_watchers_per_client: usize,
    /// Streams of one game a seated player may have with its token, besides the spectators:
    /// room for a second device or a reconnection, too few to be an abuse.
    pub max_streams_per_seat: usize,
    /// Games in a lobby snapshot.
    pub lobby_snapshot_limit: usize,
    /// Waiting or active games one client address may have created (0 = no limit); see
    /// [`crate::limits::OpenGames`].
    pub max_open_games_per_client: usize,
    /// Whether loopback clients are exempt from per-client limits.
    pub exempt_loopback: bool,
    /// Rated games between the same two accounts at one speed, created within
    /// [`RATED_PAIR_WINDOW`] of each other, that change their ratings; later ones count in both
    /// records only, as an unrated game would. 0 = no limit.
    pub rated_games_per_pair: usize,
    /// First-move limit, abandonment time and rematch window.
    pub time: TimePolicy,
}

impl Default for ManagerLimits {
    fn default() -> Self {
        ManagerLimits {
            max_watchers_per_game: 100,
            max_watchers_per_connection: 0,
            max_watchers_per_client: 0,
            max_streams_per_seat: DEFAULT_MAX_STREAMS_PER_SEAT,
            lobby_snapshot_limit: 200,
            max_open_games_per_client: 0,
            exempt_loopback: true,
            rated_games_per_pair: DEFAULT_RATED_GAMES_PER_PAIR,
            time: TimePolicy::default(),
        }
    }
}

/// A request to create a game.
#[derive(Debug, Clone)]
pub struct NewGame {
    /// The full rule set.
    pub rules: Rules,
    /// The preset it came from, if any.
    pub preset: Option<Preset>,
    /// A custom start position (validated under `rules`), or the rules' start.
    pub start: Option<Position>,
    /// The seat wanted; `None` = any (picked at random).
    pub seat: Option<Player>,
    /// The creator's display name.
    pub display_name: String,
    /// Seat the server's computer at this level in the other seat (the game starts at once).
    pub computer: Option<Level>,
    /// The players' time control.
    pub time_control: TimeControl,
    /// The creator's account, if they play as one (then its username is the seat's name).
    pub account: Option<Account>,
    /// Whether the result changes ratings: needs an account, a time control and a person as
    /// the opponent (checked here).
    pub rated: bool,
}

/// How a seat shows `account` in a game with `time_control`.
#[must_use]
pub fn seat_account(account: &Account, time_control: TimeControl) -> SeatAccount {
    let rating = Speed::of(time_control).map(|speed| account.rating(speed));
    SeatAccount {
        id: account.id.clone(),
        username: account.username.as_str().to_owned(),
        rating: rating.map(|r| r.rounded()),
        provisional: rating.is_some_and(|r| r.is_provisional()),
    }
}

/// Who makes a call on a game: a seat's token, or an account (by its API key) whose seat it is.
#[derive(Debug, Clone)]
pub enum Credential {
    /// The seat token from CreateGame, JoinGame, a seek or a rematch offer.
    Seat(PlayerToken),
    /// An authenticated account: it acts for the seat it holds in the game.
    Account(AccountId),
}

impl From<&PlayerToken> for Credential {
    fn from(token: &PlayerToken) -> Credential {
        Credential::Seat(token.clone())
    }
}

impl From<PlayerToken> for Credential {
    fn from(token: PlayerToken) -> Credential {
        Credential::Seat(token)
    }
}

impl Credential {
    /// The token hash of the seat this credential acts for in `state`: a seat token's own
    /// hash (which may match no seat: the transition refuses it), or the token of the seat
    /// the account holds.
    ///
    /// # Errors
    ///
    /// [`GameError::WrongToken`] for an account that holds no seat of the game.
    pub fn seat_hash(&self, state: &GameState) -> Result<crate::token::TokenHash, GameError> {
        match self {
            Credential::Seat(token) => Ok(token.hash()),
            Credential::Account(id) => crate::model::seat_of_account(state.info(), id)
                .and_then(|seat| state.token_hashes()[seat])
                .ok_or(GameError::WrongToken),
        }
    }
}

/// What an offer of a rematch returns.
#[derive(Debug, Clone)]
pub struct RematchOffered {
    /// The finished game after the offer.
    pub game: GameInfo,
    /// The caller's token for the rematch (shown once).
    pub token: PlayerToken,
    /// The caller's seat in the rematch.
    pub seat: Player,
    /// The rematch, if this offer started it.
    pub rematch: Option<GameInfo>,
}

/// A game between two players already paired (by a seek): both seated, started at once.
#[derive(Debug, Clone)]
pub struct PairedGame {
    /// The full rule set.
    pub rules: Rules,
    /// The preset it came from, if any.
    pub preset: Option<Preset>,
    /// The players' time control.
    pub time_control: TimeControl,
    /// Each seat's display name (checked) and the hash of its token: the seeker waiting on
    /// another server node keeps its token there, and only its hash crosses.
    pub players: ByPlayer<(String, TokenHash)>,
    /// The second seat is the computer's at this level instead of `players.second`'s.
    pub computer: Option<Level>,
    /// The address of the player who completed the pairing.
    pub creator: Option<IpAddr>,
    /// Each seat's account, if it plays as one.
    pub accounts: ByPlayer<Option<SeatAccount>>,
    /// Whether the result changes ratings (both seats are accounts).
    pub rated: bool,
}

/// A seat taken: the game, the seat and its secret token (shown once).
#[derive(Debug, Clone)]
pub struct Seated {
    /// The game after sitting down.
    pub game: GameInfo,
    /// The seat.
    pub seat: Player,
    /// The seat's token.
    pub token: PlayerToken,
}

/// An account registered ([`GameManager::register_with_key`]).
#[derive(Debug, Clone)]
pub struct Registered {
    /// The account.
    pub account: Account,
    /// Its key (shown once, or again to the retry of a registration that made it).
    pub key: ApiKey,
    /// When the key was made.
    pub key_created: SystemTime,
    /// Whether this call made the account; false for a retry answered with the account an
    /// earlier call made.
    pub made: bool,
}

/// See the module docs. Cheap to share: clone the `Arc`.
#[derive(Debug)]
pub struct GameManager {
    store: Arc<dyn GameStore>,
    hub: Arc<Hub>,
    limits: ManagerLimits,
    open_games: Arc<OpenGames>,
    observer: Option<Arc<dyn CommitObserver>>,
    checked_names: Arc<CheckedNames>,
    /// Games that end on this node take their accounts' stripes here, in order, until their
    /// commit is done: each ending reads an account and writes it back only if unchanged, so
    /// without it a simul player whose games all ended at once lost most of the races in a
    /// group commit (one winner a batch) and those calls gave up after [`MAX_ATTEMPTS`].
    settling: Arc<Stripes>,
    /// Rematch offers on this node take their game's stripe (see [`GameManager::offer_rematch`]).
    rematch_offers: Arc<Stripes>,
    /// Counts the keys revoked on this node, so that calls that last (seeks) check their key
    /// again at once rather than at their next heartbeat.
    key_revocations: tokio::sync::watch::Sender<u64>,
}

/// Locks by key, a fixed number of them shared by hashing: for work on this node that must not
/// interleave for one key (an account, a game) and is rare enough that two keys sharing a
/// stripe costs nothing.
#[derive(Debug)]
struct Stripes {
    stripes: Vec<Arc<tokio::sync::Mutex<()>>>,
}

impl Default for Stripes {
    fn default() -> Self {
        Stripes {
            stripes: (0..64).map(|_| Arc::default()).collect(),
        }
    }
}

impl Stripes {
    fn stripe_of(&self, key: &impl std::hash::Hash) -> usize {
        let mut hasher = std::hash::DefaultHasher::new();
        key.hash(&mut hasher);
        (std::hash::Hasher::finish(&hasher) % self.stripes.len() as u64) as usize
    }

    /// Holds the stripes of `keys` (lowest first, so two holders never wait on each other).
    async fn hold<K: std::hash::Hash>(&self, keys: &[&K]) -> Vec<tokio::sync::OwnedMutexGuard<()>> {
        let mut stripes: Vec<usize> = keys.iter().map(|key| self.stripe_of(key)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        let mut held = Vec::with_capacity(stripes.len());
        for stripe in stripes {
            held.push(Arc::clone(&self.stripes[stripe]).lock_owned().await);
        }
        held
    }
}

/// Told of every create and commit the manager makes, whichever store it runs on: how the
/// server counts moves, games and commit latency without instrumenting each store.
pub trait CommitObserver: Send + Sync + fmt::Debug + 'static {
    /// A create (`create`) or commit took `elapsed` and ended with `result`. Called on the
    /// commit's own task, before the change is published: keep it cheap.
    fn committed(&self, create: bool, elapsed: Duration, result: Result<&Committed, &StoreError>);
}

impl From<StoreError> for GameError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::BadCursor => GameError::invalid(
                "page_token",
                "not a page token of this listing; pass next_page_token from the previous response with the same filter, or nothing",
            ),
            StoreError::Full(why) => GameError::LimitExceeded(why),
            StoreError::Conflict { .. } => GameError::Unavailable(
                "the game is changing too fast to apply this request; retry".to_owned(),
            ),
            StoreError::Damaged { id, .. } => GameError::GameDamaged(id),
            // The detail (disk full, read-only, I/O) is logged by the store.
            StoreError::Unavailable(_) => GameError::Unavailable(
                "storage unavailable: the server cannot use its database right now; nothing was changed, retry later".to_owned(),
            ),
            StoreError::DamagedData(detail) => GameError::StoreDamaged(detail),
            StoreError::NotFound | StoreError::Backend(_) | StoreError::AlreadyExists => {
                GameError::Internal(error.to_string())
            }
        }
    }
}

impl GameManager {
    /// A manager over `store`, publishing to `hub`.
    #[must_use]
    pub fn new(store: Arc<dyn GameStore>, hub: Arc<Hub>, limits: ManagerLimits) -> GameManager {
        GameManager {
            open_games: OpenGames::new(limits.max_open_games_per_client, limits.exempt_loopback),
            store,
            hub,
            limits,
            observer: None,
            checked_names: Arc::default(),
            settling: Arc::default(),
            rematch_offers: Arc::default(),
            key_revocations: tokio::sync::watch::Sender::new(0),
        }
    }

    /// The same manager, telling `observer` of each create and commit.
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn CommitObserver>) -> GameManager {
        self.observer = Some(observer);
        self
    }

    /// Subscribes to every game's state after each commit: how background agents (the
    /// computer player) learn that they have something to do.
    #[must_use]
    pub fn subscribe_commits(&self) -> tokio::sync::broadcast::Receiver<Arc<GameInfo>> {
        self.hub.subscribe_commits()
    }

    fn not_found(id: &GameId) -> impl FnOnce(StoreError) -> GameError + '_ {
        move |e| match e {
            StoreError::NotFound => GameError::GameNotFound(id.clone()),
            e => e.into(),
        }
    }

    /// Creates a game and seats its creator.
    ///
    /// # Errors
    ///
    /// [`GameError::InvalidArgument`] for a bad name or a finished start position;
    /// [`GameError::LimitExceeded`] when the store is full.
    pub async fn create_game(&self, new: NewGame) -> Result<Seated, GameError> {
        self.create_game_from(None, new).await
    }

    /// [`GameManager::create_game`] for a client at `client`, which counts towards its open
    /// games ([`ManagerLimits::max_open_games_per_client`]).
    ///
    /// # Errors
    ///
    /// As [`GameManager::create_game`]; [`GameError::LimitExceeded`] also when the client has
    /// too many open games.
    pub async fn create_game_from(
        &self,
        client: Option<IpAddr>,
        new: NewGame,
    ) -> Result<Seated, GameError> {
        if new.rated {
            check_rated(RatedAsk {
                account: new.account.is_some(),
                computer: new.computer.is_some(),
                timed: new.time_control.is_timed(),
                preset_start: new.preset.is_some() && new.start.is_none(),
            })?;
        }
        limits::hosted_rules(&new.rules, "rules")?;
        let slot = self.open_games.reserve(client)?;
        let display_name = match &new.account {
            Some(account) => account.username.as_str().to_owned(),
            None => self.anonymous_display_name(&new.display_name).await?,
        };
        let start = match new.start {
            Some(start) if start.is_over() => {
                return Err(GameError::invalid(
                    "start_position",
                    "the position is already over; give one with legal moves",
                ));
            }
            Some(start) => start,
            None => Position::new(new.rules)
                .map_err(|e| GameError::invalid("rules.rule_set", e.to_string()))?,
        };
        let seat = new.seat.unwrap_or_else(|| {
            if rand::random::<bool>() {
                Player::First
            } else {
                Player::Second
            }
        });
        let token = PlayerToken::generate();
        let now = crate::service_clock::now();
        let (
            state,
            Transition {
                game_events,
                lobby_events,
                output: (),
            },
        ) = transition::create(
            transition::Create {
                id: GameId::generate(),
                rules: new.rules,
                preset: new.preset,
                start,
                seat,
                display_name,
                token: token.hash(),
                opponent: new.computer.map_or(Opponent::Wait, Opponent::Computer),
                creator: client.map(crate::limits::client_key),
                time_control: new.time_control,
                policy: self.limits.time,
                rematch_of: None,
                account: new
                    .account
                    .as_ref()
                    .map(|a| seat_account(a, new.time_control)),
                rated: new.rated,
            },
            now,
        );
        let committed = self
            .commit_and_publish(
                true,
                Commit {
                    state,
                    expected_sequence: 0,
                    game_events,
                    lobby_events,
                    time: now,
                    accounts: Vec::new(),
                },
            )
            .await?;
        slot.bind(&committed.info.id);
        info!(game_id = %committed.info.id, ?seat, "game created");
        Ok(Seated {
            game: committed.info,
            seat,
            token,
        })
    }

    /// Counts the unfinished games in the store towards their creators' open games
    /// ([`ManagerLimits::max_open_games_per_client`]); a server calls it once at start, so that
    /// a restart does not hand every client a fresh allowance. Returns how many were counted.
    ///
    /// # Errors
    ///
    /// [`GameError::Internal`] if the store cannot list them.
    pub async fn restore_open_games(&self) -> Result<usize, GameError> {
        let games = self
            .store
            .open_games_by_creator()
            .await
            .map_err(|e| GameError::Internal(format!("listing open games: {e}")))?;
        for (id, creator) in &games {
            self.open_games.restore(id, *creator);
        }
        Ok(games.len())
    }

    /// Seats a second player in the free seat of a waiting game.
    ///
    /// # Errors
    ///
    /// [`GameError::SeatTaken`] if the game is full, [`GameError::GameOver`] if it ended,
    /// [`GameError::GameNotFound`], [`GameError::InvalidArgument`] for a bad name.
    pub async fn join_game(&self, id: &GameId, display_name: &str) -> Result<Seated, GameError> {
        self.join_game_as(id, display_name, None).await
    }

    /// [`GameManager::join_game`] as `account` (its username is the seat's name), if given.
    ///
    /// # Errors
    ///
    /// As [`GameManager::join_game`]; [`GameError::RatedNeedsAccount`] for a rated game
    /// without an account.
    pub async fn join_game_as(
        &self,
        id: &GameId,
        display_name: &str,
        account: Option<&Account>,
    ) -> Result<Seated, GameError> {
        let display_name = match account {
            Some(account) => account.username.as_str().to_owned(),
            None => self.anonymous_display_name(display_name).await?,
        };
        self.withdraw_if_revoked_since(id).await?;
        let token = PlayerToken::generate();
        let hash = token.hash();
        let (committed, seat) = self
            .update(id, |state, now| {
                let seat_account = account.map(|a| seat_account(a, state.info().time_control));
                transition::join(state, &display_name, hash, seat_account, now)
            })
            .await?;
        info!(game_id = %id, ?seat, "player joined");
        Ok(Seated {
            game: committed.info,
            seat,
            token,
        })
    }

    /// One game's public data.
    ///
    /// # Errors
    ///
    /// [`GameError::GameNotFound`].
    pub async fn get_game(&self, id: &GameId) -> Result<GameInfo, GameError> {
        self.store.info(id).await.map_err(Self::not_found(id))
    }

    /// A page of games, newest first. `page_size` 0 means [`DEFAULT_PAGE_SIZE`]; larger than
    /// [`MAX_PAGE_SIZE`] is capped.
    ///
    /// # Errors
    ///
    /// [`GameError::InvalidArgument`] for a page token not from this listing.
    pub async fn list_games(
        &self,
        filter: GameFilter,
        page_size: usize,
        page_token: Option<&str>,
    ) -> Result<Page, GameError> {
        let limit = match page_size {
            0 => DEFAULT_PAGE_SIZE,
            n => n.min(MAX_PAGE_SIZE),
        };
        Ok(self.store.list(filter, limit, page_token).await?)
    }

    /// Plays a move for the token's seat. With `expected_ply`, only if the game is at that ply,
    /// so a retried request cannot play twice.
    ///
    /// # Errors
    ///
    /// [`GameError::WrongToken`], [`GameError::GameNotStarted`], [`GameError::GameOver`],
    /// [`GameError::StalePly`], [`GameError::NotYourTurn`], [`GameError::IllegalMove`],
    /// [`GameError::GameNotFound`].
    pub async fn play_move(
        &self,
        id: &GameId,
        who: impl Into<Credential>,
        mv: Move,
        expected_ply: Option<u32>,
    ) -> Result<(Arc<MoveRecord>, GameInfo), GameError> {
        let who: Credential = who.into();
        let (committed, record) = match self
            .update_as_seat(id, &who, |state, hash, now| {
                transition::play(state, Mover::Token(*hash), mv, expected_ply, now)
            })
            .await
        {
            Ok(done) => done,
            Err(error @ GameError::TimeUp { .. }) => {
                // The deadline has passed: end the game now rather than when the timekeeper
                // gets to it, so the refused player sees the result at once.
                let _ = self.apply_deadline(id).await;
                return Err(error);
            }
            Err(error) => return Err(error),
        };
        debug!(game_id = %id, mv = %record.mv, ply = record.position.ply(), "move played");
        Ok((record, committed.info))
    }

    /// Plays the computer's move `mv` in game `id` at ply `ply`, through the same checks,
    /// commit and events as [`GameManager::play_move`]. For [`crate::computer`]'s driver.
    ///
    /// # Errors
    ///
    /// [`GameError::NotYourTurn`] if the player to move is not the computer, else as
    /// [`GameManager::play_move`].
    pub(crate) async fn play_computer_move(
        &self,
        id: &GameId,
        mv: Move,
        ply: u32,
    ) -> Result<Arc<MoveRecord>, GameError> {
        let (_, record) = self
            .update(id, |state, now| {
                transition::play(state, Mover::Computer, mv, Some(ply), now)
            })
            .await?;
        Ok(record)
    }

    /// A hosted game with its whole history (start position, rule set, moves), as it stands
    /// now, for an analysis of it. Read-only: nothing is written to the game.
    ///
    /// # Errors
    ///
    /// [`GameError::GameNotFound`], store failures.
    pub async fn game_history(&self, id: &GameId) -> Result<Game, GameError> {
        Ok(self.load_state(id).await?.into_engine())
    }

    /// A whole game, for the computer's turn.
    ///
    /// # Errors
    ///
    /// [`GameError::GameNotFound`], store failures.
    pub(crate) async fn load_state(&self, id: &GameId) -> Result<GameState, GameError> {
        self.store.load(id).await.map_err(Self::not_found(id))
    }
}

impl GameManager {
    /// Resigns for the token's seat; the opponent wins.
    ///
    /// # Errors
    ///
    /// [`GameError::WrongToken`], [`GameError::GameNotStarted`] (abort instead),
    /// [`GameError::GameOver`], [`GameError::GameNotFound`].
    pub async fn resign(
        &self,
        id: &GameId,
        who: impl Into<Credential>,
    ) -> Result<GameInfo, GameError> {
        let who: Credential = who.into();
        let (committed, ()) = self
            .update_as_seat(id, &who, |state, hash, now| {
                transition::resign(state, hash, now)
            })
            .await?;
        info!(game_id = %id, "player resigned");
        Ok(committed.info)
    }

    /// Aborts a game before its first move.
    ///
    /// # Errors
    ///
    /// [`GameError::WrongToken`], [`GameError::GameAlreadyStarted`], [`GameError::GameOver`],
    /// [`GameError::GameNotFound`].
    pub async fn abort(
        &self,
        id: &GameId,
        who: impl Into<Credential>,
    ) -> Result<GameInfo, GameError> {
        let who: Credential = who.into();
        let (committed, ()) = self
            .update_as_seat(id, &who, |state, hash, now| {
                transition::abort(state, hash, now)
            })
            .await?;
        info!(game_id = %id, "game aborted");
        Ok(committed.info)
    }

    /// Aborts a waiting or active game whose last change is older than `idle_since` (no seat
    /// ends it: `ended_by` stays empty), with the normal `GameOver` events. `Ok(false)` if the
    /// game is over or changed since. Used by [`crate::reaper::expire_idle_games`].
    ///
    /// # Errors
    ///
    /// [`GameError::GameNotFound`], store failures.
    pub async fn expire_idle(
        &self,
        id: &GameId,
        idle_since: SystemTime,
    ) -> Result<bool, GameError> {
        let outcome = self
            .update(id, |state, now| transition::expire(state, idle_since, now))
            .await;
        match outcome {
            Ok(_) => Ok(true),
            Err(GameError::GameOver) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Applies the game's deadline if it has passed (a flag falls, a first move not made aborts
    /// the game, a rematch window closes). `Ok(None)` if nothing is due. For the
    /// [`timekeeper`](crate::timekeeper).
    ///
    /// # Errors
    ///
    /// [`GameError::GameNotFound`], store failures.
    pub async fn apply_deadline(&self, id: &GameId) -> Result<Option<DeadlineKind>, GameError> {
        match self.update(id, transition::apply_deadline).await {
            Ok((committed, kind)) => {
                info!(game_id = %id, ?kind, sequence = committed.info.sequence, "deadline applied");
                Ok(Some(kind))
            }
            Err(GameError::NotDue) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Restarts the running turn of an active game: a restarted server calls it for each such
    /// game, so that the outage is not charged, but the part of the turn before it is
    /// ([`GameStore::last_alive`], see [`transition::resume_clock`]). `Ok(false)` if the game
    /// is not active.
    ///
    /// # Errors
    ///
    /// [`GameError::GameNotFound`], store failures.
    pub async fn resume_clock(&self, id: &GameId) -> Result<bool, GameError> {
        let alive = self.store.last_alive();
        match self
            .update(id, |state, now| transition::resume_clock(state, now, alive))
            .await
        {
            Ok(_) => Ok(true),
            Err(GameError::NotDue) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Tells the store that the running turns are resumed (see [`GameStore::turns_resumed`]).
    pub fn turns_resumed(&self) {
        self.store.turns_resumed();
    }

    /// Claims the win of an untimed game whose opponent has not moved for the server's
    /// abandonment time.
    ///
    /// # Errors
    ///
    /// [`GameError::CannotClaim`], [`GameError::WrongToken`], [`GameError::GameOver`],
    /// [`GameError::GameNotStarted`], [`GameError::GameNotFound`].
    pub async fn claim_victory(
        &self,
        id: &GameId,
        who: impl Into<Credential>,
    ) -> Result<GameInfo, GameError> {
        let who: Credential = who.into();
        let after = self.limits.time.abandon_after;
        let (committed, ()) = self
            .update_as_seat(id, &who, |state, hash, now| {
                transition::claim_victory(state, hash, after, now)
            })
            .await?;
        info!(game_id = %id, "victory claimed");
        Ok(committed.info)
    }

    /// Offers a draw, or accepts the opponent's standing offer.
    ///
    /// # Errors
    ///
    /// [`GameError::CannotOffer`], [`GameError::WrongToken`], [`GameError::GameOver`],
    /// [`GameError::GameNotStarted`], [`GameError::GameNotFound`].
    pub async fn offer_draw(
        &self,
        id: &GameId,
        who: impl Into<Credential>,
    ) -> Result<(GameInfo, crate::model::DrawAction), GameError> {
        let who: Credential = who.into();
        let (committed, action) = self
            .update_as_seat(id, &who, |state, hash, now| {
                transition::offer_draw(state, hash, now)
            })
            .await?;
        let info = match committed.game_events.is_empty() {
            // A repeated offer committed nothing: the game as it is.
            true => self.get_game(id).await?,
            false => committed.info,
        };
        Ok((info, action))
    }

    /// Declines the opponent's standing draw offer.
    ///
    /// # Errors
    ///
    /// [`GameError::NoOffer`], [`GameError::WrongToken`], [`GameError::GameOver`],
    /// [`GameError::GameNotStarted`], [`GameError::GameNotFound`].
    pub async fn decline_draw(
        &self,
        id: &GameId,
        who: impl Into<Credential>,
    ) -> Result<GameInfo, GameError> {
        let who: Credential = who.into();
        let (committed, ()) = self
            .update_as_seat(id, &who, |state, hash, now| {
                transition::decline_draw(state, hash, now)
            })
            .await?;
        Ok(committed.info)
    }

    /// Offers a rematch of a finished game. Returns the game, the caller's token for the
    /// rematch (shown once; it plays the rematch when it starts), and the rematch if this
    /// offer started it (the opponent had offered, or is the computer).
    ///
    /// # Errors
    ///
    /// [`GameError::RematchUnavailable`], [`GameError::WrongToken`],
    /// [`GameError::GameNotFound`], store failures.
    pub async fn offer_rematch(
        &self,
        id: &GameId,
        who: impl Into<Credential>,
    ) -> Result<RematchOffered, GameError> {
        let who: Credential = who.into();
        // One offer on a game at a time on this node. The rematch is created ahead from the
        // game as it stands, then linked; two offers in between each other's steps (both
        // players, or one player's retries, at once) each created one and withdrew the loser,
        // an aborted game in both players' history, or started the rematch with a token the
        // offerer had just replaced (an outside probe's 6 offers at once). Offers on one game
        // are a handful in its life, so the wait costs nothing.
        let _offering = self.rematch_offers.hold(&[id]).await;
        let next_token = PlayerToken::generate();
        let next_hash = next_token.hash();
        let next_id = GameId::generate();
        let policy = self.limits.time;
        // `create_rematch_first` also refuses the offer once a seated account has revoked a key
        // since the game began (see `refuse_rematch_after_revocation`), before anything is
        // written.
        // Nobody may hear of the rematch (this game's event names it) before it exists: a
        // client that opens it at once would be told there is no such game. So when this offer
        // is the second, the rematch is created first, then linked from this game.
        let created_first = self
            .create_rematch_first(id, &who, next_hash, &next_id)
            .await?;
        let (committed, offer) = match self
            .update_as_seat(id, &who, |state, hash, now| {
                transition::offer_rematch(state, hash, next_hash, next_id.clone(), &policy, now)
            })
            .await
        {
            Ok(done) => done,
            Err(error) => {
                self.withdraw_rematch(created_first.as_ref(), next_hash)
                    .await;
                return Err(error);
            }
        };
        // The caller's seat in this game, to tell its seat in the rematch (the other one).
        let state = self.store.load(id).await.map_err(Self::not_found(id))?;
        let seat = state
            .seat_of(&who.seat_hash(&state)?)
            .ok_or(GameError::WrongToken)?
            .other();
        let RematchOffer::Started(next) = offer else {
            // The offer did not start it after all (the window closed in between).
            self.withdraw_rematch(created_first.as_ref(), next_hash)
                .await;
            return Ok(RematchOffered {
                game: committed.info,
                token: next_token,
                seat,
                rematch: None,
            });
        };
        if let Some(created) = created_first {
            info!(game_id = %id, rematch = %next_id, "rematch started");
            return Ok(RematchOffered {
                game: committed.info,
                token: next_token,
                seat,
                rematch: Some(created),
            });
        }
        // The offer that looked like the first when the rematch was not created ahead turned
        // out the second (the other was committed in between): created after the link, then,
        // as the one way left. Should that fail, the link names a game that does not exist
        // (logged; players create anew).
        let created = self
            .create_rematch(id, *next, crate::service_clock::now())
            .await?;
        info!(game_id = %id, rematch = %next_id, "rematch started");
        Ok(RematchOffered {
            game: committed.info,
            token: next_token,
            seat,
            rematch: Some(created),
        })
    }

    /// A waiting game is not started once the account seated in it has revoked an API key
    /// since it was created: whoever held the key may have created it, and starting it
    /// would seat the account in a new game, as a seek made with the key would, and as a
    /// rematch would (see [`GameManager::refuse_rematch_after_revocation`]). An outside probe
    /// created a rated game with a stolen key, the owner revoked the key, and the thief's
    /// accomplice joined and won the game in the owner's name. The game is aborted instead,
    /// by its seat; the join is refused with [`GameError::GameWithdrawn`].
    async fn withdraw_if_revoked_since(&self, id: &GameId) -> Result<(), GameError> {
        let info = self.get_game(id).await?;
        if info.status != GameStatus::WaitingForPlayers {
            return Ok(());
        }
        for (seat, taken) in [
            (Player::First, &info.seats.first),
            (Player::Second, &info.seats.second),
        ] {
            let Some(account) = taken.as_ref().and_then(|s| s.account.as_ref()) else {
                continue;
            };
            let keys = self.store.api_keys(&account.id).await?;
            if !keys
                .iter()
                .any(|key| key.revoked.is_some_and(|at| at >= info.created))
            {
                continue;
            }
            return match self
                .update(id, |state, now| {
                    transition::withdraw_waiting(state, seat, now)
                })
                .await
            {
                Ok(_) => {
                    info!(game_id = %id, ?seat, "waiting game withdrawn: its account revoked a key");
                    Err(GameError::GameWithdrawn)
                }
                // Someone joined or it ended meanwhile: the join answers as the game stands.
                Err(GameError::GameAlreadyStarted | GameError::GameOver) => Ok(()),
                Err(error) => Err(error),
            };
        }
        Ok(())
    }

    /// A game is not rematched once an account seated in it has revoked an API key since it
    /// began: its seat tokens may be what a thief got with that key, and each rematch would
    /// seat the account in a new (rated) game with fresh tokens, so that an outside probe kept
    /// playing rated games in the name of an account with no valid key. Every game made after
    /// the revocation was made with a valid key, or is a rematch of such a game.
    async fn refuse_rematch_after_revocation(&self, info: &GameInfo) -> Result<(), GameError> {
        for seat in [&info.seats.first, &info.seats.second] {
            let Some(account) = seat.as_ref().and_then(|s| s.account.as_ref()) else {
                continue;
            };
            let keys = self.store.api_keys(&account.id).await?;
            if keys
                .iter()
                .any(|key| key.revoked.is_some_and(|at| at >= info.created))
            {
                return Err(GameError::RematchUnavailable(
                    "an API key of a player of this game was revoked after the game began, so it \
                     cannot be rematched; start a new game"
                        .to_owned(),
                ));
            }
        }
        Ok(())
    }

    /// If `who`'s offer on `id` would start the rematch as the game stands, creates it now
    /// (as the offer would, with `next_id` and the offerer's `next_hash`) and returns it.
    async fn create_rematch_first(
        &self,
        id: &GameId,
        who: &Credential,
        next_hash: TokenHash,
        next_id: &GameId,
    ) -> Result<Option<GameInfo>, GameError> {
        let state = self.store.load(id).await.map_err(Self::not_found(id))?;
        let hash = who.seat_hash(&state)?;
        self.refuse_rematch_after_revocation(state.info()).await?;
        let now = crate::service_clock::now();
        let offered = transition::offer_rematch(
            state,
            &hash,
            next_hash,
            next_id.clone(),
            &self.limits.time,
            now,
        );
        let Ok((
            _,
            Transition {
                output: RematchOffer::Started(next),
                ..
            },
        )) = offered
        else {
            // Not the second offer, or not allowed: the offer itself says why.
            return Ok(None);
        };
        Ok(Some(self.create_rematch(id, *next, now).await?))
    }

    /// Creates the rematch of `id` that an offer decided (`next`, its state and transition),
    /// counted among its creator's open games.
    async fn create_rematch(
        &self,
        id: &GameId,
        (state, transition): (GameState, Transition<()>),
        now: SystemTime,
    ) -> Result<GameInfo, GameError> {
        let creator = state.creator();
        let next_id = state.info().id.clone();
        // Counted among its creator's open games like any game it creates: otherwise each
        // finished game in its rematch window would be one more open game past the limit.
        let slot = self.open_games.reserve(creator).map_err(|_| {
            GameError::LimitExceeded(
                "the address that created this game already has its limit of open games; \
                 finish, resign or abort one, then offer the rematch again"
                    .to_owned(),
            )
        })?;
        let created = self
            .commit_and_publish(
                true,
                Commit {
                    state,
                    expected_sequence: 0,
                    game_events: transition.game_events,
                    lobby_events: transition.lobby_events,
                    time: now,
                    accounts: Vec::new(),
                },
            )
            .await
            .map_err(|error| {
                tracing::error!(game_id = %id, rematch = %next_id, %error, "the rematch could not be created");
                GameError::from(error)
            })?;
        slot.bind(&created.info.id);
        Ok(created.info)
    }

    /// A rematch created ahead whose offer then did not start it: aborted (as its offerer,
    /// before any move), so that no game nobody agreed to stays open.
    async fn withdraw_rematch(&self, created: Option<&GameInfo>, offerer: TokenHash) {
        let Some(created) = created else {
            return;
        };
        let aborted = self
            .update(&created.id, |state, now| {
                transition::abort(state, &offerer, now)
            })
            .await;
        if let Err(error) = aborted {
            tracing::error!(rematch = %created.id, %error, "a rematch created ahead could not be aborted");
        }
    }

    /// Declines a rematch: the window closes.
    ///
    /// # Errors
    ///
    /// [`GameError::RematchUnavailable`], [`GameError::WrongToken`],
    /// [`GameError::GameNotFound`].
    pub async fn decline_rematch(
        &self,
        id: &GameId,
        who: impl Into<Credential>,
    ) -> Result<GameInfo, GameError> {
        let who: Credential = who.into();
        let (committed, ()) = self
            .update_as_seat(id, &who, |state, hash, now| {
                transition::decline_rematch(state, hash, now)
            })
            .await?;
        Ok(committed.info)
    }

    /// Reserves a place among the open games of `client` (see [`crate::limits::OpenGames`]) for
    /// a game it is about to create other than by [`GameManager::create_game_from`]: a seek's
    /// pairing, reserved before a waiting seek is taken so that a client at its limit fails
    /// alone rather than with the seeker it would have been paired with.
    ///
    /// # Errors
    ///
    /// [`GameError::LimitExceeded`] if the client already has the maximum of open games.
    pub fn reserve_open_game(&self, client: Option<IpAddr>) -> Result<OpenGameSlot, GameError> {
        self.open_games.reserve(client)
    }

    /// Creates a game between two players already paired (a seek): both seated, started. The
    /// game takes `slot` (reserved for `paired.creator`) among its creator's open games.
    ///
    /// # Errors
    ///
    /// [`GameError::LimitExceeded`] when the store is full, store failures.
    pub async fn create_paired(
        &self,
        paired: PairedGame,
        slot: OpenGameSlot,
    ) -> Result<GameInfo, GameError> {
        let start = Position::new(paired.rules)
            .map_err(|e| GameError::invalid("rules.rule_set", e.to_string()))?;
        let now = crate::service_clock::now();
        let [first, second] = [Player::First, Player::Second].map(|p| paired.players[p].clone());
        let [first_account, second_account] =
            [Player::First, Player::Second].map(|p| paired.accounts[p].clone());
        let (state, transition) = transition::create(
            transition::Create {
                id: GameId::generate(),
                rules: paired.rules,
                preset: paired.preset,
                start,
                seat: Player::First,
                display_name: first.0,
                token: first.1,
                opponent: match paired.computer {
                    Some(level) => Opponent::Computer(level),
                    None => Opponent::Human {
                        display_name: second.0,
                        token: second.1,
                        account: second_account,
                    },
                },
                creator: paired.creator.map(crate::limits::client_key),
                time_control: paired.time_control,
                policy: self.limits.time,
                rematch_of: None,
                account: first_account,
                rated: paired.rated && paired.computer.is_none(),
            },
            now,
        );
        let committed = self
            .commit_and_publish(
                true,
                Commit {
                    state,
                    expected_sequence: 0,
                    game_events: transition.game_events,
                    lobby_events: transition.lobby_events,
                    time: now,
                    accounts: Vec::new(),
                },
            )
            .await?;
        slot.bind(&committed.info.id);
        info!(game_id = %committed.info.id, "paired game created");
        Ok(committed.info)
    }

    /// The server's time policy.
    #[must_use]
    pub fn time_policy(&self) -> TimePolicy {
        self.limits.time
    }

    /// The start position and every move with its trace.
    ///
    /// # Errors
    ///
    /// [`GameError::GameNotFound`].
    pub async fn list_moves(&self, id: &GameId) -> Result<(Position, MoveLog), GameError> {
        let state = self.store.load(id).await.map_err(Self::not_found(id))?;
        Ok((state.info().start, state.moves().clone()))
    }

    /// Watches a game as a spectator with no known address: a snapshot (no `after`, or 0)
    /// or the events after `after`, then live.
    ///
    /// # Errors
    ///
    /// [`GameError::GameNotFound`], [`GameError::LimitExceeded`] (too many watchers),
    /// [`GameError::SequenceAhead`].
    pub async fn watch_game(
        &self,
        id: &GameId,
        after: Option<u64>,
    ) -> Result<Watch<GameFeed>, GameError> {
        self.watch_game_from(id, after, None, None).await
    }

    /// Watches a game like [`GameManager::watch_game`], for a client on the connection from
    /// `peer`. With a `token`, as that seat's player: its streams have places of their own
    /// ([`ManagerLimits::max_streams_per_seat`]) that spectators cannot take. Without one, as a
    /// spectator, limited per game, per connection and per client address (loopback peers are
    /// exempt from the last two when [`ManagerLimits::exempt_loopback`] is set).
    ///
    /// # Errors
    ///
    /// [`GameError::GameNotFound`], [`GameError::WrongToken`] (not a seat of this game),
    /// [`GameError::LimitExceeded`] naming the limit, [`GameError::SequenceAhead`].
    pub async fn watch_game_from(
        &self,
        id: &GameId,
        after: Option<u64>,
        peer: Option<SocketAddr>,
        who: Option<&Credential>,
    ) -> Result<Watch<GameFeed>, GameError> {
        let seat = match who {
            Some(who) => {
                let state = self.store.load(id).await.map_err(Self::not_found(id))?;
                Some(
                    state
                        .seat_of(&who.seat_hash(&state)?)
                        .ok_or(GameError::WrongToken)?,
                )
            }
            None => {
                self.store.info(id).await.map_err(Self::not_found(id))?;
                None
            }
        };
        let limited = peer.filter(|peer| !(self.limits.exempt_loopback && peer.ip().is_loopback()));
        let watcher = Watcher {
            seat,
            connection: limited,
            client: limited.map(|peer| client_key(peer.ip())),
        };
        let limits = WatchLimits {
            spectators: self.limits.max_watchers_per_game,
            per_seat: self.limits.max_streams_per_seat,
            per_connection: self.limits.max_watchers_per_connection,
            per_client: self.limits.max_watchers_per_client,
        };
        let (rx, guard) = self
            .hub
            .subscribe_game_as(id, watcher, limits)
            .map_err(|refused| {
                debug!(game_id = %id, ?peer, %refused, "watch refused");
                match refused {
                    TooManyWatchers::Game(0) => GameError::NoSpectators,
                    refused => GameError::LimitExceeded(refused.to_string()),
                }
            })?;
        let feed = GameFeed {
            store: Arc::clone(&self.store),
            id: id.clone(),
        };
        Watch::start(feed, rx, Some(guard), after).await
    }

    /// Watches the lobby, like [`GameManager::watch_game`], for `peer` (counted against the
    /// spectators' per-connection and per-client limits, unless exempt).
    ///
    /// # Errors
    ///
    /// [`GameError::SequenceAhead`], [`GameError::LimitExceeded`].
    pub async fn watch_lobby(
        &self,
        after: Option<u64>,
        peer: Option<SocketAddr>,
    ) -> Result<Watch<LobbyFeed>, GameError> {
        let limited = peer.filter(|peer| !(self.limits.exempt_loopback && peer.ip().is_loopback()));
        let watcher = Watcher {
            seat: None,
            connection: limited,
            client: limited.map(|peer| client_key(peer.ip())),
        };
        let limits = WatchLimits {
            spectators: 0,
            per_seat: 0,
            per_connection: self.limits.max_watchers_per_connection,
            per_client: self.limits.max_watchers_per_client,
        };
        let (rx, guard) = self
            .hub
            .subscribe_lobby_as(watcher, limits)
            .map_err(|refused| {
                debug!(?peer, %refused, "lobby watch refused");
                GameError::LimitExceeded(refused.to_string())
            })?;
        let feed = LobbyFeed {
            store: Arc::clone(&self.store),
            snapshot_limit: self.limits.lobby_snapshot_limit,
        };
        Watch::start(feed, rx, Some(guard), after).await
    }

    /// Creates (`create`) or commits, then publishes, out of the caller's hands: a durable store
    /// takes a while to answer, and a caller that goes away meanwhile (a cancelled call) must
    /// not leave a committed change unpublished, or watchers would wait for it until the next
    /// event of the game.
    ///
    /// The work is polled once here first: a store that answers at once (the memory store)
    /// commits and publishes within that poll, where no cancellation can come between the
    /// two, and the call is spared a task spawn, its wake-up and a second poll of the whole
    /// call. Only work still pending after that poll goes to a task of its own.
    async fn commit_and_publish(
        &self,
        create: bool,
        commit: Commit,
    ) -> Result<Committed, StoreError> {
        let store = Arc::clone(&self.store);
        let hub = Arc::clone(&self.hub);
        let open_games = Arc::clone(&self.open_games);
        let observer = self.observer.clone();
        let mut work = Box::pin(async move {
            let started = std::time::Instant::now();
            let committed = if create {
                store.create(commit).await
            } else {
                store.commit(commit).await
            };
            if let Some(observer) = &observer {
                observer.committed(create, started.elapsed(), committed.as_ref());
            }
            let committed = committed?;
            hub.publish(&committed);
            if committed.info.status.is_over() {
                open_games.release(&committed.info.id);
            }
            Ok(committed)
        });
        // A noop waker is enough: a pending future is polled again by its task right after
        // the spawn, and registers the task's waker then.
        let first = work
            .as_mut()
            .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
        if let std::task::Poll::Ready(done) = first {
            return done;
        }
        tokio::spawn(work)
            .await
            .map_err(|e| StoreError::Backend(format!("commit task: {e}")))?
    }

    /// [`Self::update`] for a change asked for by a seat's holder: `decide` gets the hash of the
    /// token of `who`'s seat, checked against the game as it stands at each attempt.
    async fn update_as_seat<T>(
        &self,
        id: &GameId,
        who: &Credential,
        mut decide: impl FnMut(
            GameState,
            &crate::token::TokenHash,
            SystemTime,
        ) -> Result<(GameState, Transition<T>), GameError>,
    ) -> Result<(Committed, T), GameError> {
        self.update(id, |state, now| {
            let hash = who.seat_hash(&state)?;
            decide(state, &hash, now)
        })
        .await
    }

    /// Load, change, commit; on a concurrency conflict, reload and decide again (the change
    /// function re-validates against the fresh state, e.g. `expected_ply` becomes stale).
    async fn update<T>(
        &self,
        id: &GameId,
        mut decide: impl FnMut(GameState, SystemTime) -> Result<(GameState, Transition<T>), GameError>,
    ) -> Result<(Committed, T), GameError> {
        for _ in 0..MAX_ATTEMPTS {
            let state = self.store.load(id).await.map_err(Self::not_found(id))?;
            let expected_sequence = state.info().sequence;
            let now = crate::service_clock::now();
            let (
                state,
                Transition {
                    game_events,
                    lobby_events,
                    output,
                },
            ) = decide(state, now)?;
            let mut transition = Transition {
                game_events,
                lobby_events,
                output,
            };
            let mut state = state;
            if !self.limits.time.rematch_window.is_zero() {
                transition::open_rematch_window(
                    &mut state,
                    &mut transition,
                    now + self.limits.time.rematch_window,
                );
            }
            let (accounts, _settling) = self.settle_accounts(&mut state, &mut transition).await?;
            let Transition {
                game_events,
                lobby_events,
                output,
            } = transition;
            if game_events.is_empty() && lobby_events.is_empty() {
                // Nothing happened (a repeated offer): nothing to commit.
                let info = state.into_info();
                return Ok((
                    Committed {
                        info,
                        game_events: Vec::new(),
                        lobby_events: Vec::new(),
                    },
                    output,
                ));
            }
            match self
                .commit_and_publish(
                    false,
                    Commit {
                        state,
                        expected_sequence,
                        game_events,
                        lobby_events,
                        time: now,
                        accounts,
                    },
                )
                .await
            {
                Ok(committed) => return Ok((committed, output)),
                Err(StoreError::Conflict { .. }) => {
                    debug!(game_id = %id, "lost a commit race; retrying");
                }
                Err(e) => return Err(Self::not_found(id)(e)),
            }
        }
        Err(StoreError::Conflict { current: 0 }.into())
    }
}

/// How a finished game counts for each seat's account.
fn record_result(account: &mut Account, seat: Player, outcome: oanquan_rules::Outcome) {
    match outcome.winner() {
        None => account.record.draws += 1,
        Some(winner) if winner == seat => account.record.wins += 1,
        Some(_) => account.record.losses += 1,
    }
}

/// Whether `other` and `game` were created within [`RATED_PAIR_WINDOW`] of each other.
fn within_pair_window(other: &GameInfo, game: &GameInfo) -> bool {
    let apart = other
        .created
        .duration_since(game.created)
        .or_else(|_| game.created.duration_since(other.created))
        .unwrap_or(Duration::MAX);
    apart <= RATED_PAIR_WINDOW
}

/// Whether `other`, a game of `game`'s first account, is another game against `second` in the
/// window that changed ratings (see [`ManagerLimits::rated_games_per_pair`]).
pub(crate) fn rated_in_pair_window(other: &GameInfo, game: &GameInfo, second: &AccountId) -> bool {
    other.id != game.id
        && within_pair_window(other, game)
        && other.result.is_some_and(|r| r.ratings.is_some())
        && crate::model::seat_of_account(other, second).is_some()
}

impl GameManager {
    /// When `transition` has just finished `state`'s game with a result, the changes to the
    /// seats' accounts, to commit with it: each account's win, draw or loss, and for a rated
    /// game both players' new ratings, which are also written into the result (the state's and
    /// the events'). Accounts are read now and written only if unchanged by then, so two games
    /// ending at once for one account are rated one after the other; on this node the guards
    /// returned, held until the commit is done, make the second wait instead of losing a race.
    async fn settle_accounts<T>(
        &self,
        state: &mut GameState,
        transition: &mut Transition<T>,
    ) -> Result<(Vec<AccountUpdate>, Vec<tokio::sync::OwnedMutexGuard<()>>), GameError> {
        let ended = transition
            .game_events
            .iter()
            .any(|e| matches!(e, GameEventKind::GameOver { .. }));
        let info = state.info();
        let (Some(result), true, GameStatus::Finished) = (info.result, ended, info.status) else {
            return Ok(Default::default());
        };
        let Some(outcome) = result.outcome else {
            return Ok(Default::default());
        };
        let ids: Vec<&AccountId> = Player::ALL
            .iter()
            .filter_map(|&seat| info.seats[seat].as_ref()?.account.as_ref())
            .map(|seat| &seat.id)
            .collect();
        let held = self.settling.hold(&ids).await;
        let mut accounts: ByPlayer<Option<Account>> = ByPlayer::default();
        for seat in Player::ALL {
            if let Some(id) = info.seats[seat].as_ref().and_then(|s| s.account.as_ref()) {
                accounts[seat] = Some(self.store.account(&id.id).await.map_err(|e| match e {
                    // A store that cannot answer now is a retry, not a server fault.
                    StoreError::Unavailable(_)
                    | StoreError::Full(_)
                    | StoreError::Conflict { .. } => GameError::from(e),
                    // Damage answers DATA_LOSS, as wherever else it is read (an outside probe's
                    // move got INTERNAL for an account on a damaged file).
                    StoreError::DamagedData(detail) => {
                        GameError::StoreDamaged(format!("account {}: {detail}", id.id))
                    }
                    e => GameError::Internal(format!("account {}: {e}", id.id)),
                })?);
            }
        }
        let speed = Speed::of(info.time_control);
        let mut changes = None;
        // As on lichess, a game that ends before both players have moved (a resignation or an
        // agreed draw at once) proves nothing about either: rating it would let one person
        // farm points between two accounts without playing.
        let both_moved = info.move_count >= 2;
        if let (true, true, Some(speed), Some(first), Some(second)) = (
            info.rated,
            both_moved,
            speed,
            accounts.first.as_mut(),
            accounts.second.as_mut(),
        ) && !self
            .pair_allowance_spent(info, &first.id, &second.id, speed)
            .await?
        {
            let before = ByPlayer::new(first.rating(speed), second.rating(speed));
            let (a, b) = rating::rate(before.first, before.second, outcome);
            first.ratings.insert(speed, a);
            second.ratings.insert(speed, b);
            let change = |before: rating::Rating, after: rating::Rating| RatingChange {
                before: before.rounded(),
                after: after.rounded(),
                provisional: after.is_provisional(),
            };
            changes = Some(ByPlayer::new(
                change(before.first, a),
                change(before.second, b),
            ));
        }
        let mut updates = Vec::new();
        for seat in Player::ALL {
            if let Some(mut account) = accounts[seat].take() {
                record_result(&mut account, seat, outcome);
                let expected_version = account.version;
                account.version += 1;
                updates.push(AccountUpdate {
                    account,
                    expected_version,
                });
            }
        }
        if let Some(changes) = changes {
            state.edit(|info| {
                if let Some(result) = info.result.as_mut() {
                    result.ratings = Some(changes);
                }
            });
            for event in &mut transition.game_events {
                if let GameEventKind::GameOver { result, .. } = event {
                    result.ratings = Some(changes);
                }
            }
            for event in &mut transition.lobby_events {
                if let LobbyEventKind::GameFinished { result, .. } = event {
                    result.ratings = Some(changes);
                }
            }
        }
        Ok((updates, held))
    }

    /// Whether `first` and `second` already have [`ManagerLimits::rated_games_per_pair`] rated
    /// games at `speed`
    /// that changed their ratings, created within [`RATED_PAIR_WINDOW`] of `game` (before or
    /// after it, so that games created in advance and finished together count too). Two
    /// accounts of one person could otherwise farm points: P8 moved one from 1500 to 2058 in 193
    /// games of one move a side. Reads `first`'s games newest first down to the window's start;
    /// an account with more than [`RATED_PAIR_SCAN`] games in the window counts as spent, since
    /// the answer could not be read at a bounded cost.
    async fn pair_allowance_spent(
        &self,
        game: &GameInfo,
        first: &AccountId,
        second: &AccountId,
        speed: Speed,
    ) -> Result<bool, GameError> {
        let limit = self.limits.rated_games_per_pair;
        if limit == 0 {
            return Ok(false);
        }
        let filter = PlayerGameFilter {
            result: None,
            speed: Some(speed),
        };
        let mut counted = 0;
        let mut scanned = 0;
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .store
                .player_games(first, filter, MAX_PAGE_SIZE, cursor.as_deref())
                .await
                .map_err(|e| match e {
                    StoreError::Unavailable(_) | StoreError::Full(_) => GameError::from(e),
                    StoreError::DamagedData(detail) => {
                        GameError::StoreDamaged(format!("games of account {first}: {detail}"))
                    }
                    e => GameError::Internal(format!("games of account {first}: {e}")),
                })?;
            for other in &page.games {
                if other.created < game.created && !within_pair_window(other, game) {
                    // Newest first: every game after this one is older still.
                    return Ok(false);
                }
                scanned += 1;
                if scanned > RATED_PAIR_SCAN {
                    return Ok(true);
                }
                if rated_in_pair_window(other, game, second) {
                    counted += 1;
                    if counted >= limit {
                        return Ok(true);
                    }
                }
            }
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(false),
            }
        }
    }

    /// Registers an account and its first API key (shown once).
    ///
    /// # Errors
    ///
    /// [`GameError::InvalidArgument`] on `username` for a name the rules refuse,
    /// [`GameError::UsernameTaken`] for a name taken (ignoring case and look-alikes).
    pub async fn register(&self, username: &str) -> Result<(Account, ApiKey), GameError> {
        let registered = self.register_with_key(username, None).await?;
        Ok((registered.account, registered.key))
    }

    /// Registers an account with its first API key: `chosen`, made by the caller
    /// ([`ApiKey::chosen`]), or else a new one. With a chosen key the call can be retried
    /// after an answer that never came: while the key still plays as an account of that
    /// name, the retry answers with it ([`Registered::made`] false) instead of
    /// [`GameError::UsernameTaken`].
    ///
    /// # Errors
    ///
    /// [`GameError::InvalidArgument`] on `username` for a name the rules refuse, and on
    /// `api_key` for a chosen key that is malformed, not random or another account's;
    /// [`GameError::UsernameTaken`] for a name taken (ignoring case and look-alikes).
    pub async fn register_with_key(
        &self,
        username: &str,
        chosen: Option<&str>,
    ) -> Result<Registered, GameError> {
        let username =
            Username::parse(username).map_err(|e| GameError::invalid("username", e.to_string()))?;
        let chosen = chosen
            .map(|text| ApiKey::chosen(text).map_err(|why| GameError::invalid("api_key", why)))
            .transpose()?;
        let taken = || GameError::UsernameTaken(text::quoted(username.as_str()));
        // A store compares a new name's key and look with those it holds, in the insert's
        // transaction; a name that looks like another only read as capitals (Greek `ΜΙΝΗ`
        // beside `Minh`) meets it by a key the store does not keep, so it is looked up first.
        if self.account_by_keys(&username.keys()).await?.is_some() {
            return match &chosen {
                Some(key) => self
                    .registered_before(&username, key)
                    .await?
                    .ok_or_else(taken),
                None => Err(taken()),
            };
        }
        let now = crate::service_clock::now();
        let account = Account::new(username.clone(), now);
        let (key, record) = match chosen {
            Some(key) => {
                let record = key.record(now);
                (key, record)
            }
            None => ApiKey::generate(now),
        };
        match self.store.create_account(account.clone(), record).await {
            Ok(()) => {
                info!(account = %account.id, "account registered");
                Ok(Registered {
                    account,
                    key,
                    key_created: now,
                    made: true,
                })
            }
            // The name, or the key's id: a retry that raced its first call, another name's
            // key, or a name registered meanwhile.
            Err(StoreError::AlreadyExists) => match self.registered_before(&username, &key).await {
                Ok(Some(registered)) => Ok(registered),
                Ok(None) if self.account_by_keys(&username.keys()).await?.is_some() => Err(taken()),
                Ok(None) => Err(GameError::KeyIdTaken),
                Err(e) => Err(e),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// A retry of a registration that made its account: the account named `username` (any
    /// spelling of it) that the chosen `key` plays as, answered as [`Registered`] with
    /// `made` false. `None` when it is not one (nothing is checked but that: the caller goes
    /// on to [`GameManager::register_with_key`], which says what is wrong).
    ///
    /// # Errors
    ///
    /// Store failures.
    pub async fn registered_before_with(
        &self,
        username: &str,
        key: &str,
    ) -> Result<Option<Registered>, GameError> {
        let (Ok(username), Ok(key)) = (Username::parse(username), ApiKey::chosen(key)) else {
            return Ok(None);
        };
        self.registered_before(&username, &key).await
    }

    /// The account named `username` that `key` plays as, as a retried registration answers
    /// it; `None` if the key is unknown, revoked or another account's.
    async fn registered_before(
        &self,
        username: &Username,
        key: &ApiKey,
    ) -> Result<Option<Registered>, GameError> {
        let (account, record) = match self.store.account_by_api_key(key.id()).await {
            Ok(found) => found,
            Err(StoreError::NotFound) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let same = account.username.key() == username.key()
            && record.revoked.is_none()
            && record.hash.matches(&key.hash());
        Ok(same.then(|| Registered {
            account,
            key: key.clone(),
            key_created: record.created,
            made: false,
        }))
    }

    /// The account an API key belongs to, if the key is valid and not revoked.
    ///
    /// # Errors
    ///
    /// [`GameError::BadApiKey`] otherwise.
    pub async fn authenticate(&self, key: &str) -> Result<Account, GameError> {
        let key = ApiKey::from_client(key).ok_or(GameError::BadApiKey)?;
        let (account, record) = match self.store.account_by_api_key(key.id()).await {
            Ok(found) => found,
            Err(StoreError::NotFound) => return Err(GameError::BadApiKey),
            Err(e) => return Err(e.into()),
        };
        if record.revoked.is_some() || !record.hash.matches(&key.hash()) {
            return Err(GameError::BadApiKey);
        }
        Ok(account)
    }

    /// Whether the API key a call that lasts (a seek) was made with still plays as its
    /// account: revocation takes effect on the next call, and such a call must look again.
    /// `Ok` without a key, and while the store cannot answer (the next look decides).
    ///
    /// # Errors
    ///
    /// [`GameError::BadApiKey`] once the key is revoked (or gone).
    pub async fn key_still_good(&self, key: Option<&str>) -> Result<(), GameError> {
        match key {
            Some(key) => match self.authenticate(key).await {
                Err(GameError::BadApiKey) => Err(GameError::BadApiKey),
                _ => Ok(()),
            },
            None => Ok(()),
        }
    }

    /// The seat a pairing made for a seek on API key `key`, if the key still plays as its
    /// account ([`GameManager::key_still_good`]); otherwise the seat is withheld and its game
    /// aborted before it starts, so that a stolen key cannot keep a seek going in the
    /// account's name after the owner revoked it.
    ///
    /// # Errors
    ///
    /// [`GameError::BadApiKey`] for a revoked key.
    pub async fn hand_out_seat(
        &self,
        seated: Seated,
        key: Option<&str>,
    ) -> Result<Seated, GameError> {
        if let Err(revoked) = self.key_still_good(key).await {
            self.abandon_seat(&seated).await;
            return Err(revoked);
        }
        Ok(seated)
    }

    /// Aborts the game of a seat made for a seek that nobody will hold (its seeker went away
    /// as it was paired, or its key was revoked), as that seat's player before any move: the
    /// other player hears the game end at once rather than waiting out the first-move limit
    /// against no one.
    pub async fn abandon_seat(&self, seated: &Seated) {
        if let Err(error) = self.abort(&seated.game.id, seated.token.clone()).await {
            warn!(game_id = %seated.game.id, %error, "aborting a game whose seat nobody holds");
        }
    }

    /// [`GameManager::abandon_seat`] for a seat known by its token's hash alone: a node that
    /// paired another node's seek never saw that seeker's token.
    pub async fn abandon_seat_by_hash(&self, game: &GameId, hash: &crate::token::TokenHash) {
        let aborted = self
            .update(game, |state, now| transition::abort(state, hash, now))
            .await;
        if let Err(error) = aborted {
            warn!(game_id = %game, %error, "aborting a game whose seat nobody holds");
        }
    }

    /// Changes whenever a key is revoked on this node. A seek waiting on a key checks it again
    /// then, so that a revoked key's seek leaves the lobby before anyone can accept it (other
    /// nodes' revocations are seen at the seek's heartbeat).
    #[must_use]
    pub fn key_revocations(&self) -> tokio::sync::watch::Receiver<u64> {
        self.key_revocations.subscribe()
    }

    /// A new API key for `account` (shown once).
    ///
    /// # Errors
    ///
    /// [`GameError::ApiKeysExhausted`] past the keys an account may have.
    pub async fn create_api_key(
        &self,
        account: &AccountId,
    ) -> Result<(ApiKey, ApiKeyRecord), GameError> {
        let (key, record) = ApiKey::generate(crate::service_clock::now());
        match self.store.add_api_key(account, record.clone()).await {
            Ok(()) => {}
            Err(StoreError::Full(_)) => {
                return Err(GameError::ApiKeysExhausted {
                    max: crate::memory::MAX_API_KEYS,
                });
            }
            Err(e) => return Err(e.into()),
        }
        info!(account = %account, key = %record.id, "API key created");
        Ok((key, record))
    }

    /// Revokes one of `account`'s keys: it authenticates nothing from the next call on.
    ///
    /// # Errors
    ///
    /// [`GameError::ApiKeyNotFound`] if the account has no key with that id.
    pub async fn revoke_api_key(&self, account: &AccountId, key_id: &str) -> Result<(), GameError> {
        if self
            .store
            .revoke_api_key(account, key_id, crate::service_clock::now())
            .await?
        {
            info!(account = %account, key = %key_id, "API key revoked");
            self.key_revocations.send_modify(|n| *n = n.wrapping_add(1));
            Ok(())
        } else {
            Err(GameError::ApiKeyNotFound(text::quoted(key_id)))
        }
    }

    /// `account`'s keys (without their secrets), oldest first.
    ///
    /// # Errors
    ///
    /// Store failures.
    pub async fn api_keys(&self, account: &AccountId) -> Result<Vec<ApiKeyRecord>, GameError> {
        Ok(self.store.api_keys(account).await?)
    }

    /// The display name of an anonymous seat or seek, checked ([`text::display_name`]) and
    /// kept from posing as someone else: an account's username (in any case or look-alike
    /// spelling) belongs to that account, and a name ending in a part in brackets would read
    /// as the rating (`Lan (1500?)`) or computer level (`Computer (master)`) that clients add
    /// after a name. An outside probe seated `Lan (1500?)` anonymously beside the account Lan,
    /// and both seats read the same.
    ///
    /// # Errors
    ///
    /// [`GameError::InvalidArgument`] on `display_name`; store failures.
    pub async fn anonymous_display_name(&self, raw: &str) -> Result<String, GameError> {
        let checked = self.checked_names.check(raw)?;
        match self.account_by_keys(&checked.keys).await? {
            Some(account) => Err(GameError::invalid(
                "display_name",
                format!(
                    "{} is the name of the account {} (names match ignoring case and look-alike \
                     letters): play as it with its API key, or choose another name",
                    text::quoted(&checked.name),
                    text::quoted(account.username.as_str())
                ),
            )),
            None => Ok(checked.name.clone()),
        }
    }

    /// The account registered under the first of `keys` that has one (a name's key, then its
    /// look: the two ways a name meets a registered one that registration checks from this
    /// side), if any.
    async fn account_by_keys(&self, keys: &[String]) -> Result<Option<Account>, GameError> {
        for key in keys {
            match self.store.account_by_name(key).await {
                Ok(account) => return Ok(Some(account)),
                Err(StoreError::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(None)
    }

    /// A player's account by username (any case, any look-alike spelling of it).
    ///
    /// # Errors
    ///
    /// [`GameError::PlayerNotFound`].
    pub async fn player(&self, username: &str) -> Result<Account, GameError> {
        let not_found = || GameError::PlayerNotFound(text::quoted(username));
        let name = Username::parse(username).map_err(|_| not_found())?;
        // Its key, then what it looks like written (`Ian`, capital i, looks like `lan`).
        self.account_by_keys(&name.keys())
            .await?
            .ok_or_else(not_found)
    }

    /// A player's games, newest first, page by page.
    ///
    /// # Errors
    ///
    /// [`GameError::PlayerNotFound`], [`GameError::InvalidArgument`] for a page token not from
    /// this listing.
    pub async fn player_games(
        &self,
        username: &str,
        filter: PlayerGameFilter,
        page_size: usize,
        page_token: Option<&str>,
    ) -> Result<Page, GameError> {
        let account = self.player(username).await?;
        let limit = match page_size {
            0 => DEFAULT_PAGE_SIZE,
            n => n.min(MAX_PAGE_SIZE),
        };
        // The store's cursor knows the filter, not the player: a tag of the account in front
        // ties a token to the listing it came from, as the API promises.
        let tag = player_tag(&account.id);
        let cursor = match page_token {
            Some(token) => Some(
                token
                    .strip_prefix(tag.as_str())
                    .and_then(|rest| rest.strip_prefix('~'))
                    .ok_or(StoreError::BadCursor)?,
            ),
            None => None,
        };
        let mut page = self
            .store
            .player_games(&account.id, filter, limit, cursor)
            .await?;
        page.next_cursor = page.next_cursor.map(|next| format!("{tag}~{next}"));
        Ok(page)
    }

    /// The leaderboard of a speed (provisional ratings left out), best first, page by page.
    ///
    /// # Errors
    ///
    /// [`GameError::InvalidArgument`] for a page token not from this leaderboard.
    pub async fn leaderboard(
        &self,
        speed: Speed,
        page_size: usize,
        page_token: Option<&str>,
    ) -> Result<LeaderboardPage, GameError> {
        let limit = match page_size {
            0 => DEFAULT_PAGE_SIZE,
            n => n.min(MAX_PAGE_SIZE),
        };
        Ok(self.store.leaderboard(speed, limit, page_token).await?)
    }
}

/// A short, stable tag of an account for its game listing's page tokens: the first 8 bytes
/// of the SHA-256 of its id, in hex (the same on every node and after a restart, and not the
/// id itself, which no response shows).
fn player_tag(id: &AccountId) -> String {
    use sha2::{Digest as _, Sha256};
    let digest = Sha256::digest(id.to_string().as_bytes());
    digest[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// What decides whether a game may be rated, as a CreateGame or a Seek asks for it.
pub(crate) struct RatedAsk {
    /// The asker plays from an account.
    pub account: bool,
    /// The opponent is the computer.
    pub computer: bool,
    /// The game has a clock.
    pub timed: bool,
    /// A preset's rules from the preset's own start.
    pub preset_start: bool,
}

/// The one rule for rated games, for CreateGame and Seek alike: between accounts (a rating
/// belongs to one), people only, on a clock (a rating is per speed), and a preset from its own
/// start (a custom rule set or start could decide the result before the first move).
pub(crate) fn check_rated(ask: RatedAsk) -> Result<(), GameError> {
    if !ask.account {
        return Err(GameError::RatedNeedsAccount);
    }
    if ask.computer {
        return Err(GameError::invalid(
            "rated",
            "games against the computer are not rated; play it unrated",
        ));
    }
    if !ask.timed {
        return Err(GameError::invalid(
            "rated",
            "untimed games are not rated (a rating is per speed); choose a time control",
        ));
    }
    if !ask.preset_start {
        return Err(GameError::invalid(
            "rated",
            "rated games are played under a preset's rules from its own start; drop the custom \
             rules or start position, or play unrated",
        ));
    }
    Ok(())
}
