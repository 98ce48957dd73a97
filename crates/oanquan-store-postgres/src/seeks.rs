//! Open seeks shared by every node on the database: the [`SeekBoard`] that
//! `oanquan_game::seek::SeekPool::shared` pairs through.
//!
//! * A seek is a row of `seeks`, owned by the node its seeker waits on (`node`). Pairing takes
//!   the transaction-scoped advisory lock [`SEEK_LOCK`], so that two seekers arriving together
//!   on two nodes see each other (one posts, the other takes it), then locks the open
//!   candidates of the same kind (`FOR UPDATE SKIP LOCKED`: a row being withdrawn or claimed is
//!   not waited for), checks them in Rust and marks the first that fits as taken by this node
//!   (`taken_by`), in one transaction: a seek is taken once, whatever the races. Withdrawing
//!   deletes a row only while it is not taken.
//! * The pairing node then writes the game and the waiter's seat (`game`, `seat`) on the row;
//!   the waiter's node, which alone knows the waiter's token (the row holds its SHA-256),
//!   reads it, answers its stream and deletes the row.
//! * Every change sends `NOTIFY oanquan_seek, '<schema> <id>'`; each node listens, and also
//!   re-reads every [`HEARTBEAT`], so that a lost notification only delays.
//! * Each node writes a heartbeat row (`seek_nodes`) every [`HEARTBEAT`], by the database's
//!   clock. Seeks of a node silent for [`NODE_TIMEOUT`] are not listed nor paired, and are
//!   deleted by the next heartbeat of any node: a node that dies leaves no seek behind for
//!   more than a few seconds.
//! * Each node also holds a session advisory lock ([`NODE_KEY`]) on a connection of its own,
//!   and says so in its heartbeat row (`locked`). PostgreSQL releases it the moment the node's
//!   process dies and its connections close, so a killed node's seeks stop being listed and
//!   paired at once rather than after [`NODE_TIMEOUT`]: an outside probe restarted a killed
//!   server and its new seekers were paired with the dead seekers, in games against nobody.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use oanquan_game::account::{AccountId, SeatAccount};
use oanquan_game::seek::{
    BoardFuture, Claim, Fits, Posted, PostedSeek, SeekBoard, SeekInfo, SeekState,
};
use oanquan_game::{GameId, StoreError, TokenHash};
use oanquan_rules::{Player, Preset, Rules};
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;
use tracing::{debug, warn};

use crate::PostgresStore;
use crate::codec::{
    TimeControlDto, duration_from_db, duration_to_db, parse_player, player_name, time_from_db,
    time_to_db,
};
use crate::fault::{self, backend};
use crate::nodes::BACKOFF;
use oanquan_game::outage::Outage;

/// A dedicated session's messages: they end when the session does.
type NodeSession = tokio::sync::mpsc::UnboundedReceiver<AsyncMessage>;

/// The channel of seek changes; the payload is `<schema> <seek id>` (channels are per
/// database, and nodes of other schemas listen on it too).
pub const SEEK_CHANNEL: &str = "oanquan_seek";

/// How often a node says it is alive and re-reads the board.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// A node not heard from for this long is taken for dead: its seeks are ignored, then deleted.
const NODE_TIMEOUT: &str = "5 seconds";

/// A seek taken this long ago whose game was never posted is given up (its pairing node lost
/// the database half way).
const PAIRING_TIMEOUT: &str = "30 seconds";

/// Heartbeat rows of nodes gone this long are deleted.
const NODE_FORGOTTEN: &str = "1 hour";

/// The first number of the pairing lock's key (`pg_advisory_xact_lock(int, int)`); the second
/// is a hash of the schema. Not the migration's nor the leader's.
const SEEK_LOCK: i32 = 0x4f41_4e53; // "OANS"

/// The first number of the key of the lock each node holds while it runs; the second is a
/// hash of its id. Not the migration's, the leader's nor the pairing's.
pub(crate) const NODE_KEY: i32 = 0x4f41_4e4e; // "OANN"

/// The condition on a seek row that its node has been heard from lately: the seeks of other
/// nodes are deleted when it fails (a connection that blinks must not cost a node its seeks).
fn heard() -> String {
    format!(
        "node IN (SELECT id FROM seek_nodes
                  WHERE seen > now() - interval '{NODE_TIMEOUT}' AND left_at IS NULL)"
    )
}

/// The condition on a seek row that its node is alive now: heard from lately, and holding its
/// lock if it took one (only pairing and listing ask this).
fn live() -> String {
    format!(
        "node IN (SELECT id FROM seek_nodes
                  WHERE seen > now() - interval '{NODE_TIMEOUT}' AND left_at IS NULL
                  AND (NOT locked OR EXISTS (
                      SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
                      AND classid = {NODE_KEY}::int::oid AND objid = hashtext(seek_nodes.id)::oid
                      AND objsubid = 2)))"
    )
}

/// Sends the change of seek `id` (the schema is added by the database).
const NOTIFY: &str = "SELECT pg_notify($1::text, current_schema() || ' ' || $2::text)";

/// A [`SeekInfo`] as stored in `seeks.info`; times and durations in nanoseconds.
#[derive(Debug, Serialize, Deserialize)]
struct SeekDto {
    id: String,
    display_name: String,
    rules: Rules,
    preset: Option<Preset>,
    time_control: TimeControlDto,
    created: i64,
    computer_after: Option<u64>,
    account: Option<AccountDto>,
    rated: bool,
    rating_range: Option<(i32, i32)>,
}

#[derive(Debug, Serialize, Deserialize)]
struct AccountDto {
    id: String,
    username: String,
    rating: Option<i32>,
    provisional: bool,
}

fn encode(info: &SeekInfo) -> Result<String, StoreError> {
    let dto = SeekDto {
        id: info.id.clone(),
        display_name: info.display_name.clone(),
        rules: info.rules,
        preset: info.preset,
        time_control: info.time_control.into(),
        created: time_to_db(info.created),
        computer_after: info.computer_after.map(duration_to_db),
        account: info.account.as_ref().map(|account| AccountDto {
            id: account.id.as_str().to_owned(),
            username: account.username.clone(),
            rating: account.rating,
            provisional: account.provisional,
        }),
        rated: info.rated,
        rating_range: info.rating_range,
    };
    serde_json::to_string(&dto).map_err(|e| StoreError::Backend(format!("encoding a seek: {e}")))
}

fn decode(text: &str) -> Result<SeekInfo, String> {
    let dto: SeekDto = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Ok(SeekInfo {
        id: dto.id,
        display_name: dto.display_name,
        rules: dto.rules,
        preset: dto.preset,
        time_control: dto.time_control.into(),
        created: time_from_db(dto.created),
        computer_after: dto.computer_after.map(duration_from_db),
        account: dto.account.map(|account| SeatAccount {
            id: AccountId::from_stored(account.id),
            username: account.username,
            rating: account.rating,
            provisional: account.provisional,
        }),
        rated: dto.rated,
        rating_range: dto.rating_range,
    })
}

/// What must be equal for two seeks to pair: only rows of the seeker's kind are candidates.
fn kind(info: &SeekInfo) -> Result<String, StoreError> {
    serde_json::to_string(&(
        info.rules,
        TimeControlDto::from(info.time_control),
        info.rated,
    ))
    .map_err(|e| StoreError::Backend(format!("encoding a seek's kind: {e}")))
}

/// A posted seek read back: `None` (logged) if its row does not decode, which only hides it.
fn posted(row: &tokio_postgres::Row) -> Option<PostedSeek> {
    let id: String = row.try_get("id").ok()?;
    let info: Result<SeekInfo, String> = row
        .try_get::<_, String>("info")
        .map_err(|e| e.to_string())
        .and_then(|text| decode(&text));
    let token: Result<[u8; 32], String> = row
        .try_get::<_, Vec<u8>>("token")
        .map_err(|e| e.to_string())
        .and_then(|bytes| bytes.try_into().map_err(|_| "not 32 bytes".to_owned()));
    match (info, token) {
        (Ok(info), Ok(token)) => Some(PostedSeek {
            info,
            token: TokenHash::from_bytes(token),
        }),
        (Err(error), _) | (_, Err(error)) => {
            warn!(seek = %id, %error, "a seek row that does not decode; skipped");
            None
        }
    }
}

/// The seeks of every node on one database schema, as this node sees them. See the module
/// docs.
pub struct PostgresSeeks {
    store: PostgresStore,
    /// This node's id: random, one per process.
    node: String,
    /// The schema the tables are in, to tell our notifications from other schemas'.
    schema: String,
    changes: broadcast::Sender<Option<String>>,
    /// Whether this node holds its lock ([`NODE_KEY`]) now; its heartbeat says so.
    locked: std::sync::atomic::AtomicBool,
    /// Failures of the liveness session, the heartbeat and the listener, said once a minute.
    session_outage: Outage,
    beat_outage: Outage,
    listen_outage: Outage,
}

impl std::fmt::Debug for PostgresSeeks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSeeks")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// This node's seek board: writes its first heartbeat, then keeps beating, cleans up the
    /// seeks of silent nodes and listens for changes on a task of its own until `stop` turns
    /// true, when it withdraws this node's seeks.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] if the database cannot be reached for the first heartbeat.
    pub async fn spawn_seeks(
        &self,
        stop: watch::Receiver<bool>,
    ) -> Result<(Arc<PostgresSeeks>, JoinHandle<()>), StoreError> {
        let client = self.pool.get().await.map_err(fault::pool)?;
        let schema: Option<String> = client
            .query_one("SELECT current_schema()", &[])
            .await
            .map_err(backend)?
            .try_get(0)
            .map_err(backend)?;
        drop(client);
        let seeks = Arc::new(PostgresSeeks {
            store: self.handle(),
            node: GameId::generate().as_str().to_owned(),
            schema: schema.unwrap_or_default(),
            changes: broadcast::channel(4096).0,
            locked: std::sync::atomic::AtomicBool::new(false),
            session_outage: Outage::new(
                "cannot open the seek board's liveness session",
                "the seek board's liveness session is open again",
            ),
            beat_outage: Outage::new("the seek heartbeat fails", "the seek heartbeat works again"),
            listen_outage: Outage::new(
                "cannot listen for seek changes",
                "listening for seek changes again",
            ),
        });
        // Taken before the first heartbeat says so, and before any seek is posted.
        let lock = seeks.take_lock().await;
        seeks.beat().await?;
        let task = tokio::spawn(Arc::clone(&seeks).run(stop, lock));
        Ok((seeks, task))
    }
}

impl PostgresSeeks {
    /// This node's id on the board.
    #[must_use]
    pub fn node(&self) -> &str {
        &self.node
    }

    /// This node's lock ([`NODE_KEY`]) on a connection of its own, if it can be had; the
    /// returned session holds it until it closes.
    async fn take_lock(&self) -> Option<(tokio_postgres::Client, NodeSession)> {
        let (client, messages) = match self.store.dedicated().await {
            Ok(session) => session,
            Err(error) => {
                self.session_outage.failed(&fault::describe(&error));
                return None;
            }
        };
        self.session_outage.succeeded();
        let taken = client
            .query_one(
                "SELECT pg_try_advisory_lock($1, hashtext($2))",
                &[&NODE_KEY, &self.node],
            )
            .await
            .ok()
            .and_then(|row| row.try_get::<_, bool>(0).ok())
            .unwrap_or(false);
        self.locked
            .store(taken, std::sync::atomic::Ordering::SeqCst);
        taken.then_some((client, messages))
    }

    async fn run(
        self: Arc<Self>,
        mut stop: watch::Receiver<bool>,
        mut lock: Option<(tokio_postgres::Client, NodeSession)>,
    ) {
        let holding = async {
            let mut failures = 0;
            loop {
                if let Some((client, mut messages)) = lock.take() {
                    failures = 0;
                    // Held until the session ends; then the next heartbeat says so.
                    while messages.recv().await.is_some() {}
                    drop(client);
                    self.locked
                        .store(false, std::sync::atomic::Ordering::SeqCst);
                }
                tokio::time::sleep(BACKOFF[failures.min(BACKOFF.len() - 1)]).await;
                failures += 1;
                lock = self.take_lock().await;
            }
        };
        let beating = async {
            loop {
                tokio::time::sleep(HEARTBEAT).await;
                match self.beat().await {
                    Ok(()) => self.beat_outage.succeeded(),
                    Err(error) => self.beat_outage.failed(&error),
                }
                // The bounded re-read: whatever a notification missed.
                let _ = self.changes.send(None);
            }
        };
        let listening = async {
            let mut failures = 0;
            loop {
                match self.listen().await {
                    Ok(true) => {
                        failures = 0;
                        self.listen_outage.succeeded();
                    }
                    Ok(false) => {
                        failures += 1;
                        self.listen_outage.succeeded();
                    }
                    Err(error) => {
                        self.listen_outage.failed(&fault::describe(&error));
                        failures += 1;
                    }
                }
                tokio::time::sleep(BACKOFF[failures.min(BACKOFF.len() - 1)]).await;
            }
        };
        tokio::select! {
            () = beating => {}
            () = listening => {}
            () = holding => {}
            _ = stop.wait_for(|stopping| *stopping) => {}
        }
        // This node's seekers' streams end with it: their seeks go now rather than when the
        // other nodes stop hearing from it.
        if let Err(error) = self.leave().await {
            warn!(%error, "withdrawing this node's seeks");
        }
    }

    /// Says this node is alive, and deletes the seeks of nodes that are not.
    async fn beat(&self) -> Result<(), StoreError> {
        let client = self.store.pool.get().await.map_err(fault::pool)?;
        crate::nodes::measure_clock(&client).await;
        client
            .execute(
                "INSERT INTO seek_nodes (id, seen, locked) VALUES ($1, now(), $2)
                 ON CONFLICT (id) DO UPDATE SET seen = now(), locked = $2",
                &[
                    &self.node,
                    &self.locked.load(std::sync::atomic::Ordering::SeqCst),
                ],
            )
            .await
            .map_err(backend)?;
        let gone = client
            .query(
                &format!(
                    "WITH gone AS (DELETE FROM seeks WHERE NOT {} RETURNING id)
                     SELECT pg_notify($1::text, current_schema() || ' ' || id) FROM gone",
                    heard()
                ),
                &[&SEEK_CHANNEL],
            )
            .await
            .map_err(backend)?;
        if !gone.is_empty() {
            debug!(seeks = gone.len(), "seeks of silent nodes removed");
        }
        client
            .execute(
                &format!("DELETE FROM seek_nodes WHERE seen < now() - interval '{NODE_FORGOTTEN}'"),
                &[],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// Withdraws this node's seeks, and marks it gone: its row stays (until the other nodes
    /// forget it) to say when it stopped, for a restart after every node stopped.
    async fn leave(&self) -> Result<(), StoreError> {
        let client = self.store.pool.get().await.map_err(fault::pool)?;
        client
            .query(
                "WITH gone AS (DELETE FROM seeks WHERE node = $2 RETURNING id)
                 SELECT pg_notify($1::text, current_schema() || ' ' || id) FROM gone",
                &[&SEEK_CHANNEL, &self.node],
            )
            .await
            .map_err(backend)?;
        client
            .execute(
                "UPDATE seek_nodes SET left_at = now() WHERE id = $1",
                &[&self.node],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// One connection's life: `LISTEN`, then forward each change of this schema. Returns
    /// whether any notification came, once the connection is gone.
    async fn listen(&self) -> Result<bool, tokio_postgres::Error> {
        let (client, mut messages) = self.store.dedicated().await?;
        client
            .batch_execute(&format!("LISTEN {SEEK_CHANNEL}"))
            .await?;
        // Anything may have changed while nobody listened.
        let _ = self.changes.send(None);
        let mut heard = false;
        while let Some(message) = messages.recv().await {
            let AsyncMessage::Notification(notification) = message else {
                continue;
            };
            heard = true;
            if notification.channel() != SEEK_CHANNEL {
                continue;
            }
            if let Some((schema, id)) = notification.payload().split_once(' ')
                && schema == self.schema
            {
                let _ = self.changes.send(Some(id.to_owned()));
            }
        }
        drop(client);
        Ok(heard)
    }
}

impl SeekBoard for PostgresSeeks {
    fn post<'a>(
        &'a self,
        mine: &'a PostedSeek,
        fits: Fits<'a>,
        max_seeks: usize,
    ) -> BoardFuture<'a, Posted> {
        async move {
            let kind = kind(&mine.info)?;
            let info = encode(&mine.info)?;
            let mut client = self.store.pool.get().await.map_err(fault::pool)?;
            let tx = client.transaction().await.map_err(backend)?;
            tx.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))",
                &[&SEEK_LOCK],
            )
            .await
            .map_err(backend)?;
            let candidates = tx
                .query(
                    &format!(
                        "SELECT id, info, token FROM seeks
                         WHERE taken_by IS NULL AND kind = $1 AND {}
                         ORDER BY ord FOR UPDATE SKIP LOCKED",
                        live()
                    ),
                    &[&kind],
                )
                .await
                .map_err(backend)?;
            for row in &candidates {
                let Some(theirs) = posted(row) else { continue };
                if !fits(&theirs.info) {
                    continue;
                }
                tx.execute(
                    "UPDATE seeks SET taken_by = $2, taken_at = now() WHERE id = $1",
                    &[&theirs.info.id, &self.node],
                )
                .await
                .map_err(backend)?;
                tx.execute(NOTIFY, &[&SEEK_CHANNEL, &theirs.info.id])
                    .await
                    .map_err(backend)?;
                tx.commit().await.map_err(backend)?;
                return Ok(Posted::Took(theirs));
            }
            let open: i64 = tx
                .query_one(
                    &format!(
                        "SELECT count(*) FROM seeks WHERE taken_by IS NULL AND {}",
                        live()
                    ),
                    &[],
                )
                .await
                .map_err(backend)?
                .try_get(0)
                .map_err(backend)?;
            let open = usize::try_from(open).unwrap_or(usize::MAX);
            if open >= max_seeks {
                tx.rollback().await.map_err(backend)?;
                return Ok(Posted::Full(open));
            }
            tx.execute(
                "INSERT INTO seeks (id, node, kind, info, token) VALUES ($1, $2, $3, $4, $5)",
                &[
                    &mine.info.id,
                    &self.node,
                    &kind,
                    &info,
                    &mine.token.to_bytes().as_slice(),
                ],
            )
            .await
            .map_err(backend)?;
            tx.execute(NOTIFY, &[&SEEK_CHANNEL, &mine.info.id])
                .await
                .map_err(backend)?;
            tx.commit().await.map_err(backend)?;
            Ok(Posted::Waiting)
        }
        .boxed()
    }

    fn claim<'a>(&'a self, id: &'a str, fits: Fits<'a>) -> BoardFuture<'a, Claim> {
        async move {
            let mut client = self.store.pool.get().await.map_err(fault::pool)?;
            let tx = client.transaction().await.map_err(backend)?;
            let row = tx
                .query_opt(
                    &format!(
                        "SELECT id, info, token FROM seeks
                         WHERE id = $1 AND taken_by IS NULL AND {}
                         FOR UPDATE SKIP LOCKED",
                        live()
                    ),
                    &[&id],
                )
                .await
                .map_err(backend)?;
            let Some(theirs) = row.as_ref().and_then(posted) else {
                return Ok(Claim::NotFound);
            };
            if !fits(&theirs.info) {
                return Ok(Claim::Refused(theirs.info));
            }
            tx.execute(
                "UPDATE seeks SET taken_by = $2, taken_at = now() WHERE id = $1",
                &[&id, &self.node],
            )
            .await
            .map_err(backend)?;
            tx.execute(NOTIFY, &[&SEEK_CHANNEL, &id])
                .await
                .map_err(backend)?;
            tx.commit().await.map_err(backend)?;
            Ok(Claim::Took(theirs))
        }
        .boxed()
    }

    fn paired<'a>(&'a self, id: &'a str, game: &'a GameId, seat: Player) -> BoardFuture<'a, bool> {
        async move {
            let client = self.store.pool.get().await.map_err(fault::pool)?;
            let rows = client
                .query(
                    "WITH done AS (UPDATE seeks SET game = $3, seat = $4 WHERE id = $2 RETURNING id)
                     SELECT pg_notify($1::text, current_schema() || ' ' || id) FROM done",
                    &[&SEEK_CHANNEL, &id, &game.as_str(), &player_name(seat)],
                )
                .await
                .map_err(backend)?;
            Ok(!rows.is_empty())
        }
        .boxed()
    }

    fn failed<'a>(&'a self, id: &'a str, reason: &'a str) -> BoardFuture<'a, ()> {
        async move {
            let client = self.store.pool.get().await.map_err(fault::pool)?;
            client
                .query(
                    "WITH done AS (UPDATE seeks SET failed = $3 WHERE id = $2 RETURNING id)
                     SELECT pg_notify($1::text, current_schema() || ' ' || id) FROM done",
                    &[&SEEK_CHANNEL, &id, &reason],
                )
                .await
                .map_err(backend)?;
            Ok(())
        }
        .boxed()
    }

    fn withdraw<'a>(&'a self, id: &'a str) -> BoardFuture<'a, bool> {
        async move {
            let client = self.store.pool.get().await.map_err(fault::pool)?;
            // A row being taken is locked: this waits for that transaction, then finds it
            // taken and leaves it.
            let rows = client
                .query(
                    "WITH gone AS (DELETE FROM seeks WHERE id = $2 AND taken_by IS NULL RETURNING id)
                     SELECT pg_notify($1::text, current_schema() || ' ' || id) FROM gone",
                    &[&SEEK_CHANNEL, &id],
                )
                .await
                .map_err(backend)?;
            Ok(!rows.is_empty())
        }
        .boxed()
    }

    fn forget<'a>(&'a self, id: &'a str) -> BoardFuture<'a, Option<(GameId, Player)>> {
        async move {
            let client = self.store.pool.get().await.map_err(fault::pool)?;
            // Announced only if it was still listed: a taken seek was announced when taken.
            let row = client
                .query_opt(
                    "WITH gone AS (DELETE FROM seeks WHERE id = $2 RETURNING id, taken_by, game, seat),
                          told AS (SELECT pg_notify($1::text, current_schema() || ' ' || id)
                                   FROM gone WHERE taken_by IS NULL)
                     SELECT game, seat, (SELECT count(*) FROM told) FROM gone",
                    &[&SEEK_CHANNEL, &id],
                )
                .await
                .map_err(backend)?;
            let Some(row) = row else { return Ok(None) };
            let game: Option<String> = row.try_get(0).map_err(backend)?;
            let seat: Option<String> = row.try_get(1).map_err(backend)?;
            Ok(match (game, seat) {
                (Some(game), Some(seat)) => {
                    let game = GameId::parse(&game)
                        .map_err(|e| StoreError::Backend(format!("seek {id}'s game: {e}")))?;
                    Some((game, parse_player(&seat).map_err(StoreError::Backend)?))
                }
                _ => None,
            })
        }
        .boxed()
    }

    fn state<'a>(&'a self, id: &'a str) -> BoardFuture<'a, SeekState> {
        async move {
            let client = self.store.pool.get().await.map_err(fault::pool)?;
            let row = client
                .query_opt(
                    &format!(
                        "SELECT taken_by IS NOT NULL, game, seat, failed,
                                taken_at < now() - interval '{PAIRING_TIMEOUT}'
                                OR taken_by NOT IN (SELECT id FROM seek_nodes
                                                    WHERE seen > now() - interval '{NODE_TIMEOUT}'
                                                      AND left_at IS NULL)
                         FROM seeks WHERE id = $1"
                    ),
                    &[&id],
                )
                .await
                .map_err(backend)?;
            let Some(row) = row else {
                return Ok(SeekState::Gone);
            };
            let taken: bool = row.try_get(0).map_err(backend)?;
            let game: Option<String> = row.try_get(1).map_err(backend)?;
            let seat: Option<String> = row.try_get(2).map_err(backend)?;
            let failed: Option<String> = row.try_get(3).map_err(backend)?;
            let abandoned: Option<bool> = row.try_get(4).map_err(backend)?;
            Ok(match (game, seat, failed) {
                (Some(game), Some(seat), _) => {
                    let game = GameId::parse(&game)
                        .map_err(|e| StoreError::Backend(format!("seek {id}'s game: {e}")))?;
                    let seat = parse_player(&seat).map_err(StoreError::Backend)?;
                    SeekState::Paired { game, seat }
                }
                (_, _, Some(reason)) => SeekState::Failed(reason),
                _ if !taken => SeekState::Open,
                _ if abandoned == Some(true) => {
                    SeekState::Failed("the server node pairing it stopped".to_owned())
                }
                _ => SeekState::Taken,
            })
        }
        .boxed()
    }

    fn list(&self) -> BoardFuture<'_, Vec<SeekInfo>> {
        async move {
            let client = self.store.pool.get().await.map_err(fault::pool)?;
            let rows = client
                .query(
                    &format!(
                        "SELECT id, info, token FROM seeks WHERE taken_by IS NULL AND {}
                         ORDER BY ord",
                        live()
                    ),
                    &[],
                )
                .await
                .map_err(backend)?;
            Ok(rows
                .iter()
                .filter_map(posted)
                .map(|seek| seek.info)
                .collect())
        }
        .boxed()
    }

    fn changes(&self) -> broadcast::Receiver<Option<String>> {
        self.changes.subscribe()
    }
}
