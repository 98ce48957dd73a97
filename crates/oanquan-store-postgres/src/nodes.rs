//! What makes several server nodes on one database behave as one: every node hears the
//! others' commits ([`PostgresStore::spawn_listener`]), and one node at a time runs the
//! background agents ([`PostgresStore::spawn_lease`]).
//!
//! Both use a dedicated connection, outside the pool: a `LISTEN` and a session advisory lock
//! belong to one session, which a pooled connection would hand to other calls.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt as _;
use oanquan_game::service_clock::{self, ClockSample};
use oanquan_game::{GameId, GameStore, Hub, Since, StoreError};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, Client, NoTls};
use tracing::{debug, info, warn};

use crate::fault;
use crate::writer::{GAME_CHANNEL, LOBBY_CHANNEL};
use crate::{PostgresStore, reads};
use oanquan_game::outage::Outage;

/// Watched games read per catch-up statement: a node watching more reads them in pages, so
/// that no statement carries an unbounded array.
pub(crate) const CATCH_UP_PAGE: usize = 10_000;

/// The first number of the leader lock's key (`pg_try_advisory_lock(int, int)`); the second is
/// a hash of the schema, so that servers on other schemas of the database (tests, staging)
/// elect their own leader. Not the migration lock's number: a leader holds its lock for good,
/// and nodes starting up would wait for it.
pub(crate) const LEASE_KEY: i32 = 0x4f41_4e4c; // "OANL"

/// The first number of the key of the lock under which a starting node gives the running
/// turns their time back ([`PostgresStore::clock_resumption`]); the second is the schema's
/// hash, as for [`LEASE_KEY`].
pub(crate) const RESUME_KEY: i32 = 0x4f41_4e43; // "OANC"

/// How the `seek_nodes` rows that mark a resumption of the clocks begin (node ids are game-id
/// shaped, so none begins so).
const RESUMED_MARK: &str = "clocks-resumed-";

/// Waits after a lost or refused connection, doubling up to the last.
pub(crate) const BACKOFF: [Duration; 5] = [
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
];

/// How often a node without the lease tries to take it, and how often the holder checks that
/// its session (hence the lock) is still there.
const LEASE_RETRY: Duration = Duration::from_secs(1);

/// A node whose database connection went silent for this long gives up the lease, before the
/// database (whose own keepalives may be slower) hands the lock to another node.
const LEASE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The database ends a lease session that sends nothing for this long (`idle_session_timeout`):
/// the holder checks it every [`LEASE_RETRY`], so only a node that stopped running does not. A
/// frozen process (SIGSTOP, a paused VM) keeps its connection open, and the kernel answers the
/// keepalives for it: without this its lock was held for as long as it stayed frozen, and no
/// flag fell and no computer moved anywhere. An outside probe froze the leader for 45 s.
pub(crate) const LEASE_IDLE_LIMIT: Duration = Duration::from_secs(5);

/// How often the listener compares the sequences of the games this node serves with what it
/// published, and the lobby's: notifications are sent after the commits they announce, in a
/// transaction that does not wait for the disk (see `batch`), so one can be lost (a node or the
/// database stopping between the two); then its events reach this node this much later, never
/// not. The games it serves: those watched here, and every unfinished one while this node runs
/// the background agents (they act on any game) — see [`Scope`].
pub(crate) const CATCH_UP: Duration = Duration::from_secs(1);

impl PostgresStore {
    /// A second handle on the same pool, for a task of its own.
    pub(crate) fn handle(&self) -> PostgresStore {
        PostgresStore {
            pool: self.pool.clone(),
            target: self.target.clone(),
            damage: Arc::clone(&self.damage),
            config: self.config.clone(),
            health: Arc::clone(&self.health),
            writable: self.writable.clone(),
            probe: Arc::clone(&self.probe),
            commits: self.commits.clone(),
            writers: Arc::clone(&self.writers),
            cache: Arc::clone(&self.cache),
            last_alive: Arc::clone(&self.last_alive),
        }
    }

    /// A dedicated connection (not from the pool), its messages forwarded to the returned
    /// receiver by a task that ends when the connection does.
    pub(crate) async fn dedicated(
        &self,
    ) -> Result<(Client, mpsc::UnboundedReceiver<AsyncMessage>), tokio_postgres::Error> {
        let mut config = self.config.clone();
        // A dead peer is noticed within seconds, not the system's default two hours.
        config
            .keepalives_idle(Duration::from_secs(5))
            .keepalives_interval(Duration::from_secs(1))
            .keepalives_retries(3)
            .tcp_user_timeout(Duration::from_secs(5));
        let (client, mut connection) = config.connect(NoTls).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        let target = self.target.clone();
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(message) => {
                        if tx.send(message).is_err() {
                            break;
                        }
                    }
                    Err(error) => {
                        warn!(database = %target, error = %fault::describe(&error),
                            "a dedicated database connection was lost");
                        break;
                    }
                }
            }
        });
        Ok((client, rx))
    }

    /// Listens for every node's commits (the `NOTIFY` each one sends) and publishes what they
    /// wrote into `hub`: the game's new events to its watchers, the lobby's to the lobby's, and
    /// the game's state to the background agents. Own commits come back too and are published
    /// again; watchers drop events they have seen by sequence, and agents find nothing to do.
    ///
    /// A lost connection is opened again (with backoff); what was committed meanwhile reaches
    /// the lobby's watchers on reconnecting, and each game's with its next commit, or from the
    /// log when they notice the gap. Ends when `stop` turns true.
    pub fn spawn_listener(&self, hub: Arc<Hub>, mut stop: watch::Receiver<bool>) -> JoinHandle<()> {
        let store = self.handle();
        tokio::spawn(async move {
            let mut listener = Listener::new(store, hub);
            let mut failures = 0;
            let outage = Outage::new(
                "cannot listen for other nodes' commits",
                "listening for other nodes' commits again",
            );
            while !*stop.borrow() {
                let heard = tokio::select! {
                    heard = listener.listen() => heard,
                    _ = stop.wait_for(|stopping| *stopping) => break,
                };
                match heard {
                    // Heard something before losing it: the database was there.
                    Ok(true) => {
                        failures = 0;
                        outage.succeeded();
                    }
                    Ok(false) => {
                        failures += 1;
                        outage.succeeded();
                    }
                    Err(error) => {
                        outage.failed(&format_args!(
                            "{}: {}",
                            listener.store.target,
                            fault::describe(&error)
                        ));
                        failures += 1;
                    }
                }
                let wait = BACKOFF[failures.min(BACKOFF.len() - 1)];
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    _ = stop.wait_for(|stopping| *stopping) => break,
                }
            }
        })
    }

    /// Competes for the leader lease: the returned receiver is `true` while this node holds
    /// the session advisory lock that names the leader, on a connection of its own. Another
    /// node takes it over within a few seconds of this one's connection dying (the database
    /// releases a session's locks when it ends). Gives it up when `stop` turns true.
    pub fn spawn_lease(
        &self,
        stop: watch::Receiver<bool>,
    ) -> (watch::Receiver<bool>, JoinHandle<()>) {
        let (held_tx, held) = watch::channel(false);
        let store = self.handle();
        let task = tokio::spawn(async move {
            let mut stop = stop;
            let mut failures = 0;
            while !*stop.borrow() {
                let outcome = tokio::select! {
                    outcome = store.hold_lease(&held_tx) => outcome,
                    _ = stop.wait_for(|stopping| *stopping) => Ok(()),
                };
                if held_tx.send_replace(false) && !*stop.borrow() {
                    warn!(database = %store.target, "leader lease lost");
                }
                match outcome {
                    Ok(()) => failures = 0,
                    Err(error) => {
                        debug!(database = %store.target, error = %fault::describe(&error),
                            "leader lease connection failed; trying again");
                        failures += 1;
                    }
                }
                let wait = BACKOFF[failures.min(BACKOFF.len() - 1)];
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    _ = stop.wait_for(|stopping| *stopping) => break,
                }
            }
            held_tx.send_replace(false);
        });
        (held, task)
    }

    /// A starting node's turn at giving the running turns their time back after an outage:
    /// waits while another node takes its turn, then says whether the service is running
    /// (some node leads: there was no outage to give back) and, if it is not, moves the last
    /// sign of life found at connect to the latest resumption of a node before this one
    /// ([`ClockResumption::resumed`]). Nodes started together thus resume one after the
    /// other, each from where the one before left the turns; without the turns one at a time,
    /// a node found a turn the other had just resumed, took it for one started after the
    /// outage, and started it again in full.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] if the database cannot be asked.
    pub async fn clock_resumption(&self) -> Result<ClockResumption, StoreError> {
        let (client, _messages) = self.dedicated().await.map_err(fault::backend)?;
        client
            .execute(
                "SELECT pg_advisory_lock($1, hashtext(current_schema()))",
                &[&RESUME_KEY],
            )
            .await
            .map_err(fault::backend)?;
        let others_serve = self.leader_running().await?;
        if !others_serve {
            // Only the marks: the heartbeats of nodes starting now (this one's too) are not
            // signs of the last service's life, and would charge them the outage.
            let marked: Option<std::time::SystemTime> = client
                .query_one(
                    "SELECT max(seen) FROM seek_nodes WHERE id LIKE $1",
                    &[&format!("{RESUMED_MARK}%")],
                )
                .await
                .and_then(|row| row.try_get(0))
                .map_err(fault::backend)?;
            let mut alive = self
                .last_alive
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *alive = (*alive).max(marked);
        }
        Ok(ClockResumption {
            client,
            others_serve,
        })
    }

    /// Whether some node holds the leader lease now: then the service is running, and a node
    /// that starts must not give the running turns their time back as after an outage.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] if the database cannot be asked.
    pub async fn leader_running(&self) -> Result<bool, StoreError> {
        let client = self.pool.get().await.map_err(fault::pool)?;
        let row = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted \
                 AND classid = $1::int::oid AND objid = hashtext(current_schema())::oid \
                 AND objsubid = 2)",
                &[&LEASE_KEY],
            )
            .await
            .map_err(fault::backend)?;
        row.try_get(0).map_err(fault::backend)
    }

    /// On one connection: tries for the lock every [`LEASE_RETRY`], and once it has it, checks
    /// every [`LEASE_RETRY`] that the session is still alive. Returns when it is not.
    async fn hold_lease(&self, held: &watch::Sender<bool>) -> Result<(), tokio_postgres::Error> {
        let (client, _messages) = self.dedicated().await?;
        // PostgreSQL 14 and later; an older server keeps a frozen leader's lock (said once).
        if let Err(error) = client
            .batch_execute(&format!(
                "SET idle_session_timeout = {}",
                LEASE_IDLE_LIMIT.as_millis()
            ))
            .await
        {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                warn!(database = %self.target, error = %fault::describe(&error),
                    "cannot bound the leader lease's idle time (PostgreSQL 14 or later has \
                     idle_session_timeout): a frozen leader keeps the lease until it runs again");
            });
        }
        loop {
            let taken = tokio::time::timeout(
                LEASE_CHECK_TIMEOUT,
                client.query_one(
                    "SELECT pg_try_advisory_lock($1, hashtext(current_schema()))",
                    &[&LEASE_KEY],
                ),
            )
            .await;
            match taken {
                Ok(Ok(row)) if row.try_get::<_, bool>(0).unwrap_or(false) => break,
                Ok(Ok(_)) => {}
                Ok(Err(error)) => return Err(error),
                // The session is stuck; another one will try.
                Err(_) => return Ok(()),
            }
            tokio::time::sleep(LEASE_RETRY).await;
        }
        info!(database = %self.target, "this node holds the leader lease: it runs the background agents");
        held.send_replace(true);
        loop {
            tokio::time::sleep(LEASE_RETRY).await;
            match tokio::time::timeout(LEASE_CHECK_TIMEOUT, client.simple_query("SELECT 1")).await {
                Ok(Ok(_)) => {}
                Ok(Err(error)) => return Err(error),
                Err(_) => return Ok(()),
            }
        }
    }
}

/// Which games a catch-up reads.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every unfinished game: this node runs the background agents, which act on any game.
    Unfinished,
    /// Only these, the games watched on this node: another node's commit to any other game
    /// concerns nobody here (whoever starts watching reads the log first).
    Watched(Vec<GameId>),
}

/// The listener's state across reconnections.
pub(crate) struct Listener {
    store: PostgresStore,
    hub: Arc<Hub>,
    /// The last sequence published per game: of the games watched here, and while this node
    /// runs the agents, of the unfinished games. Each catch-up forgets the others, so it holds
    /// no more than what the catch-up reads (no fixed bound to clear at, which made every
    /// game past it look new to each catch-up and be read again).
    games: HashMap<GameId, u64>,
    /// The last lobby sequence published; `None` until the first connection reads it.
    lobby: Option<u64>,
    /// Whether the first catch-up ran: it only notes where every game is, since what was
    /// committed before this node listened is read from the log by whoever needs it.
    baseline: bool,
    /// Failures to read the lobby's new events, said once a minute.
    lobby_outage: Outage,
}

impl Listener {
    pub(crate) fn new(store: PostgresStore, hub: Arc<Hub>) -> Listener {
        Listener {
            store,
            hub,
            games: HashMap::new(),
            lobby: None,
            baseline: false,
            lobby_outage: Outage::new(
                "cannot read the lobby events other nodes committed",
                "reading the lobby events other nodes committed again",
            ),
        }
    }

    /// What the next catch-up reads, by what this node does now.
    pub(crate) fn scope(&self) -> Scope {
        if self.hub.feeds_commits() {
            Scope::Unfinished
        } else {
            Scope::Watched(self.hub.watched_games())
        }
    }

    /// How many games have a last published sequence remembered.
    #[cfg(test)]
    pub(crate) fn tracked(&self) -> usize {
        self.games.len()
    }

    /// One connection's life: `LISTEN`, catch the lobby up, then publish each notification's
    /// commit. Returns whether any notification came, once the connection is gone.
    async fn listen(&mut self) -> Result<bool, tokio_postgres::Error> {
        let (client, mut messages) = self.store.dedicated().await?;
        client
            .batch_execute(&format!("LISTEN {GAME_CHANNEL}; LISTEN {LOBBY_CHANNEL}"))
            .await?;
        // Listening from now on: whatever the lobby committed before is read here.
        match self.lobby {
            Some(_) => self.publish_lobby().await,
            None => match self.last_lobby().await {
                Ok(last) => self.lobby = Some(last),
                Err(error) => warn!(%error, "reading the lobby's last sequence"),
            },
        }
        let mut heard = false;
        let mut catch_up = tokio::time::interval(CATCH_UP);
        catch_up.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let message = tokio::select! {
                message = messages.recv() => message,
                _ = catch_up.tick() => {
                    self.catch_up().await;
                    continue;
                }
            };
            let Some(message) = message else {
                break;
            };
            let AsyncMessage::Notification(notification) = message else {
                continue;
            };
            heard = true;
            if notification.channel() == LOBBY_CHANNEL {
                self.publish_lobby().await;
            } else if notification.channel() == GAME_CHANNEL {
                // `<id>:<sequence>`; ids have no ':'.
                let parsed = notification
                    .payload()
                    .rsplit_once(':')
                    .and_then(|(id, sequence)| {
                        Some((GameId::parse(id).ok()?, sequence.parse().ok()?))
                    });
                match parsed {
                    Some((id, sequence)) => self.publish_game(id, sequence).await,
                    None => debug!(
                        payload = notification.payload(),
                        "a game notification that does not parse"
                    ),
                }
            }
        }
        drop(client);
        Ok(heard)
    }

    /// Publishes what notifications should have announced but did not: the lobby's events
    /// after the last published, and every game of [`Listener::scope`] whose sequence is past
    /// the last published.
    pub(crate) async fn catch_up(&mut self) {
        self.publish_lobby().await;
        let scope = self.scope();
        let stored = match self.sequences(scope).await {
            Ok(stored) => stored,
            Err(error) => {
                debug!(%error, "reading the games' sequences to catch up");
                return;
            }
        };
        if !self.baseline {
            self.baseline = true;
            for (id, sequence) in stored {
                self.games.entry(id).or_insert(sequence);
            }
            return;
        }
        for (id, sequence) in stored {
            if self.games.get(&id).is_none_or(|last| *last < sequence) {
                self.publish_game(id, sequence).await;
            }
        }
    }

    /// The sequence of each game of `scope` (and with [`Scope::Unfinished`], of the tracked
    /// games that have ended since, so that their last events are published too). Tracked
    /// games out of the scope are forgotten.
    pub(crate) async fn sequences(
        &mut self,
        scope: Scope,
    ) -> Result<Vec<(GameId, u64)>, StoreError> {
        let client = self.store.pool.get().await.map_err(fault::pool)?;
        let Scope::Watched(watched) = scope else {
            return self.unfinished_sequences(&client).await;
        };
        let mut stored = Vec::new();
        for page in watched.chunks(CATCH_UP_PAGE) {
            let ids: Vec<&str> = page.iter().map(GameId::as_str).collect();
            let rows = reads::query(
                &client,
                "SELECT id, sequence FROM games WHERE id = ANY($1)",
                &[&ids],
            )
            .await?;
            stored.extend(rows.iter().filter_map(id_and_sequence));
        }
        let watched: HashSet<GameId> = watched.into_iter().collect();
        self.games.retain(|id, _| watched.contains(id));
        Ok(stored)
    }

    /// [`Listener::sequences`] of [`Scope::Unfinished`]. Tracked games that are gone from the
    /// table (a schema restored) are forgotten.
    async fn unfinished_sequences(
        &mut self,
        client: &deadpool_postgres::Object,
    ) -> Result<Vec<(GameId, u64)>, StoreError> {
        let rows = reads::query(
            client,
            "SELECT id, sequence FROM games WHERE status IN ('waiting', 'active')",
            &[],
        )
        .await?;
        let mut stored: HashMap<GameId, u64> = rows.iter().filter_map(id_and_sequence).collect();
        let ended: Vec<&str> = self
            .games
            .keys()
            .filter(|id| !stored.contains_key(*id))
            .map(GameId::as_str)
            .collect();
        if !ended.is_empty() {
            let rows = reads::query(
                client,
                "SELECT id, sequence FROM games WHERE id = ANY($1)",
                &[&ended],
            )
            .await?;
            let found: HashMap<GameId, u64> = rows.iter().filter_map(id_and_sequence).collect();
            self.games
                .retain(|id, _| stored.contains_key(id) || found.contains_key(id));
            stored.extend(found);
        }
        Ok(stored.into_iter().collect())
    }

    async fn last_lobby(&self) -> Result<u64, StoreError> {
        let client = self.store.pool.get().await.map_err(fault::pool)?;
        reads::last_lobby_sequence(&client).await
    }

    /// Publishes the lobby events after the last published one.
    async fn publish_lobby(&mut self) {
        let Some(after) = self.lobby else {
            return;
        };
        match self.store.lobby_events_since(after).await {
            Ok(Since::Events { events, .. }) => {
                self.lobby_outage.succeeded();
                for event in &events {
                    self.hub.publish_lobby(event);
                }
                if let Some(last) = events.last() {
                    self.lobby = Some(last.sequence);
                }
            }
            // Behind what the log keeps, or a counter that went back (a schema restored):
            // start again from now; watchers read the log for anything they miss.
            Ok(Since::Gone | Since::Ahead { .. }) => {
                if let Ok(last) = self.last_lobby().await {
                    self.lobby = Some(last);
                }
            }
            Err(error) => self.lobby_outage.failed(&error),
        }
    }

    /// Publishes a game's events up to `sequence` and its state to the agents.
    async fn publish_game(&mut self, id: GameId, sequence: u64) {
        let last = self.games.get(&id).copied();
        if last.is_some_and(|last| last >= sequence) {
            return;
        }
        // Nobody watches the game on this node: no events to read, and whoever starts watching
        // reads the log first. Nor its state, unless this node runs the agents.
        let watched = self.hub.watchers(&id) > 0;
        let agents = self.hub.feeds_commits();
        if !watched && !agents {
            return;
        }
        let mut published = sequence;
        if watched {
            match self.store.game_events_since(&id, last.unwrap_or(0)).await {
                Ok(Since::Events { events, .. }) => {
                    for event in &events {
                        self.hub.publish_game(event);
                    }
                    published = events.last().map_or(sequence, |e| e.sequence.max(sequence));
                }
                Ok(Since::Gone | Since::Ahead { .. }) => {}
                // A game of another schema on the same database (channels are per database).
                Err(StoreError::NotFound) => return,
                // The store logged it once; read again only once the game changes (an outside
                // probe's node warned of each damaged game every second).
                Err(StoreError::Damaged { .. }) => {
                    self.games.insert(id, sequence);
                    return;
                }
                Err(error) => {
                    warn!(game_id = %id, %error, "reading events another node committed");
                    return;
                }
            }
        }
        if !agents {
            self.games.insert(id, published);
            return;
        }
        let info = match self.store.info(&id).await {
            Ok(info) => info,
            Err(StoreError::NotFound) => return,
            Err(StoreError::Damaged { .. }) => {
                self.games.insert(id, sequence);
                return;
            }
            Err(error) => {
                warn!(game_id = %id, %error, "reading a game the database notified");
                return;
            }
        };
        if info.status.is_over() {
            self.games.remove(&id);
        } else {
            self.games.insert(id, published);
        }
        if oanquan_game::timing::needs_agents(&info) {
            self.hub.publish_commit(Arc::new(info));
        }
    }
}

/// A `(id, sequence)` row, or `None` (skipped) if it does not read.
fn id_and_sequence(row: &tokio_postgres::Row) -> Option<(GameId, u64)> {
    let id: String = row.try_get(0).ok()?;
    let sequence: i64 = row.try_get(1).ok()?;
    Some((GameId::parse(&id).ok()?, u64::try_from(sequence).ok()?))
}

/// A node's turn at resuming the clocks, held from [`PostgresStore::clock_resumption`] until
/// [`ClockResumption::resumed`] (or until dropped, which closes its session and so lets the
/// next node go on).
pub struct ClockResumption {
    client: Client,
    others_serve: bool,
}

impl std::fmt::Debug for ClockResumption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClockResumption")
            .field("others_serve", &self.others_serve)
            .finish_non_exhaustive()
    }
}

impl ClockResumption {
    /// Whether another node leads: then the clocks were never stopped and are not resumed.
    #[must_use]
    pub fn others_serve(&self) -> bool {
        self.others_serve
    }

    /// Records that this node resumed the clocks now (unless others serve, and it did not), as
    /// a sign of life that the next node's turn reads (a `seek_nodes` row that has left at
    /// once, forgotten with the others), and ends the turn.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] if the database cannot be written; the turn ends anyway.
    pub async fn resumed(self) -> Result<(), StoreError> {
        if !self.others_serve {
            let mark = format!("{RESUMED_MARK}{}", GameId::generate().as_str());
            self.client
                .execute(
                    "INSERT INTO seek_nodes (id, seen, left_at) VALUES ($1, now(), now())",
                    &[&mark],
                )
                .await
                .map_err(fault::backend)?;
        }
        self.client
            .execute(
                "SELECT pg_advisory_unlock($1, hashtext(current_schema()))",
                &[&RESUME_KEY],
            )
            .await
            .map_err(fault::backend)?;
        Ok(())
    }
}

/// Measures this node's clock against the database's, at each seek heartbeat (every second).
/// Every node of the service reads the database's time for its games through
/// `oanquan_game::service_clock`, so nodes whose clocks are apart charge moves and let flags
/// fall alike. Says so when this node's clock is a second or more
/// off (its time source is worth fixing: logs and metrics keep its own time). Returns whether
/// the answer came fast enough to say where the database's clock is.
pub(crate) async fn measure_clock(client: &deadpool_postgres::Object) -> bool {
    let sent = SystemTime::now();
    let started = std::time::Instant::now();
    let shared = client
        .query_one("SELECT clock_timestamp()", &[])
        .await
        .and_then(|row| row.try_get::<_, SystemTime>(0));
    let Ok(shared) = shared else {
        return false;
    };
    let round_trip = started.elapsed();
    let before = service_clock::offset_nanos();
    let offset = service_clock::sample(ClockSample {
        sent,
        shared,
        round_trip,
    });
    const SECOND: u64 = 1_000_000_000;
    if offset != before && (offset.unsigned_abs() >= SECOND || before.unsigned_abs() >= SECOND) {
        warn!(
            offset_ms = offset / 1_000_000,
            "this node's clock is off the database's; games run on the database's time"
        );
    }
    round_trip <= service_clock::MAX_ROUND_TRIP
}

/// Measures this node's clock against the database's before the store is used, so that the
/// first thing that reads the time (giving running turns their time back after an outage)
/// reads the database's: a node starting alone with its clock 30 s slow, before its first
/// heartbeat, resumed every clock 30 s in the past and flagged players who had time left (an
/// outside probe). A few tries, in case the first answers are slow; the heartbeat measures
/// again every second.
pub(crate) async fn measure_clock_at_start(client: &deadpool_postgres::Object) {
    for _ in 0..5 {
        if measure_clock(client).await {
            return;
        }
    }
    warn!(
        "the database answered too slowly to compare this node's clock with; games run on \
         this node's clock until a heartbeat can"
    );
}
