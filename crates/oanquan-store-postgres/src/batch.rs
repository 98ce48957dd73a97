//! Group commit: the node's game commits (`create` and `commit`) go into one queue, and a few
//! writer tasks each take everything pending and write it in one transaction on one
//! connection, its statements pipelined, before acknowledging each commit. The notifications
//! follow in a transaction of their own that does not wait for the disk (see
//! [`writer::notify_sql`]).
//!
//! One transaction for many commits means one commit record and one WAL flush for all of
//! them, and the pipelined statements one round trip's wait for a whole batch rather than
//! one per statement per commit. A batch is all or nothing, so a batch that fails (a lost
//! race of one of its games, a stale account, a deadlock with another node's batch) is rolled
//! back and each of its commits written again alone: each gets exactly the answer it would
//! have had on its own.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use deadpool_postgres::{Object, Pool};
use futures::future::join_all;
use oanquan_game::{Commit, Committed, GameId, StoreError};
use tokio::sync::{Mutex, mpsc, oneshot, watch};
use tracing::{debug, warn};

use crate::cache::GameCache;
use crate::fault::{self, backend};
use crate::health;
use crate::writer::{self, Written};

/// A commit waiting for a writer, and where its answer goes.
pub(crate) struct Job {
    pub(crate) create: bool,
    pub(crate) commit: Commit,
    pub(crate) reply: oneshot::Sender<Result<Committed, StoreError>>,
}

/// What the writer tasks share.
pub(crate) struct Writers {
    pub(crate) queue: Mutex<mpsc::UnboundedReceiver<Job>>,
    pub(crate) pool: Pool,
    pub(crate) health: Arc<watch::Sender<bool>>,
    pub(crate) cache: Arc<GameCache>,
    pub(crate) max_batch: usize,
    /// Whether commits are notified: always, but for tests that stand for a notification
    /// lost in a crash between a commit and its notification.
    pub(crate) notify: AtomicBool,
    /// Told the number of commits of every batch written (the server's metrics), once set.
    pub(crate) batches: std::sync::OnceLock<Box<dyn Fn(usize) + Send + Sync>>,
}

impl Writers {
    /// One writer task: takes what is pending, up to `max_batch`, and writes it; ends when
    /// every sender is gone.
    pub(crate) async fn run(self: Arc<Self>) {
        loop {
            let batch = {
                let mut queue = self.queue.lock().await;
                let Some(first) = queue.recv().await else {
                    return;
                };
                let mut batch = vec![first];
                while batch.len() < self.max_batch {
                    match queue.try_recv() {
                        Ok(job) => batch.push(job),
                        Err(_) => break,
                    }
                }
                batch
            };
            self.write(batch).await;
        }
    }

    async fn write(&self, batch: Vec<Job>) {
        let mut client = match self.pool.get().await {
            Ok(client) => client,
            Err(error) => {
                let error = fault::pool(error);
                if !self.pool.is_closed() {
                    health::set(&self.health, false, &error);
                }
                for job in batch {
                    let _ = job.reply.send(Err(error.clone()));
                }
                return;
            }
        };
        let (replies, commits): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|job| (job.reply, (job.create, job.commit)))
            .unzip();
        if let Some(observe) = self.batches.get() {
            observe(commits.len());
        }
        let results = if commits.len() == 1 {
            let mut results = Vec::with_capacity(1);
            for (create, commit) in commits {
                results.push(alone(&mut client, create, commit).await);
            }
            results
        } else {
            // The originals stay for writing each commit alone if the batch is refused.
            let copies: Vec<(bool, Commit)> = commits
                .iter()
                .map(|(create, commit)| (*create, commit.clone()))
                .collect();
            match together(&mut client, copies).await {
                Ok(written) => written.into_iter().map(Ok).collect(),
                Err(error) if client.is_closed() => {
                    commits.iter().map(|_| Err(error.clone())).collect()
                }
                Err(error) => {
                    debug!(%error, commits = commits.len(), "a batch of commits refused; writing each alone");
                    let mut results = Vec::with_capacity(commits.len());
                    for (create, commit) in commits {
                        results.push(alone(&mut client, create, commit).await);
                    }
                    results
                }
            }
        };
        // As for every write: a broken connection says the database is away; a conflict or a
        // damaged game says nothing about writes in general.
        if results.iter().any(Result::is_ok) {
            health::set(&self.health, true, &"");
        } else if let Some(Err(error @ StoreError::Unavailable(_))) = results.first()
            && client.is_closed()
        {
            health::set(&self.health, false, error);
        }
        let mut notices = Vec::with_capacity(results.len());
        for (reply, result) in replies.into_iter().zip(results) {
            let answer = result.map(|written| {
                // Before the answer, so that the caller's next load finds it.
                self.cache.put(&written.state, written.row_version);
                notices.push(written.notice);
                written.committed
            });
            let _ = reply.send(answer);
        }
        if !self.notify.load(Ordering::Relaxed) {
            return;
        }
        if let Some(sql) = writer::notify_sql(&notices)
            && let Err(error) = client.batch_execute(&sql).await
        {
            // The commits are durable; the other nodes' catch-up reads find them.
            warn!(error = %fault::describe(&error), "notifying the other nodes of commits");
        }
    }
}

/// A commit of a batch with its place in the batch, and whether it creates the game.
type Indexed = (usize, bool, Commit);

/// One commit in a transaction of its own.
async fn alone(client: &mut Object, create: bool, commit: Commit) -> Result<Written, StoreError> {
    let tx = client.transaction().await.map_err(backend)?;
    let written = writer::apply(&tx, create, commit).await?;
    tx.commit().await.map_err(backend)?;
    Ok(written)
}

/// Every commit in one transaction, in the order given. The commits of different games are
/// written at the same time, their statements pipelined on the one connection; those of one
/// game one after the other. Games are taken in id order, so two nodes' batches lock the
/// rows they share in the same order.
async fn together(
    client: &mut Object,
    commits: Vec<(bool, Commit)>,
) -> Result<Vec<Written>, StoreError> {
    let count = commits.len();
    let mut groups: Vec<(GameId, Vec<Indexed>)> = Vec::new();
    let mut group_of: HashMap<GameId, usize> = HashMap::new();
    for (index, (create, commit)) in commits.into_iter().enumerate() {
        let id = commit.state.info().id.clone();
        let group = *group_of.entry(id.clone()).or_insert_with(|| {
            groups.push((id, Vec::new()));
            groups.len() - 1
        });
        groups[group].1.push((index, create, commit));
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let tx = client.transaction().await.map_err(backend)?;
    let written = join_all(groups.into_iter().map(|(_, group)| {
        let tx = &tx;
        async move {
            let mut written = Vec::with_capacity(group.len());
            for (index, create, commit) in group {
                written.push((index, writer::apply(tx, create, commit).await?));
            }
            Ok::<_, StoreError>(written)
        }
    }))
    .await;
    let mut ordered: Vec<Option<Written>> = (0..count).map(|_| None).collect();
    for group in written {
        for (index, one) in group? {
            ordered[index] = Some(one);
        }
    }
    tx.commit().await.map_err(backend)?;
    ordered
        .into_iter()
        .map(|one| {
            one.ok_or_else(|| StoreError::Backend("a commit of a batch went missing".to_owned()))
        })
        .collect()
}
