//! Runs a domain [`Watch`] as a gRPC server stream: heartbeats while idle, and a clear
//! UNAVAILABLE status (with the sequence to resume from) when the server shuts down.
//!
//! **Slow consumers.** Publishing a move never waits for a watcher: the hub's broadcast send
//! does not block, and each stream has a task of its own between the hub and the connection.
//! When a client reads slower than events arrive, its task waits on a small buffer
//! ([`STREAM_BUFFER`] messages; HTTP/2 flow control bounds what sits in the connection), its hub
//! receiver lags, and it later catches up from the store's log, or from a fresh snapshot if the
//! log no longer has the events. Memory per slow client stays bounded. A client that does not
//! read at all for [`StreamSettings::stall_timeout`] is dropped: its task ends (freeing its
//! watcher slot) and the stream, once the client reads what is buffered, ends with
//! RESOURCE_EXHAUSTED naming the `after_sequence` to resume from.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tonic::Status;
use tracing::Instrument as _;

use super::stalls::Stalls;
use super::status;
use crate::domain::{Feed, Watch, WatchItem};
use crate::metrics::{Metrics, StreamKind};

/// Messages buffered per stream besides what HTTP/2 flow control lets into the connection.
pub const STREAM_BUFFER: usize = 16;

/// What every stream needs from the server.
#[derive(Debug, Clone)]
pub struct StreamSettings {
    /// Idle time before a heartbeat.
    pub heartbeat: Duration,
    /// How long a stream may stay unread (its buffer full) before it is dropped.
    pub stall_timeout: Duration,
    /// Turns `true` when the server starts shutting down.
    pub shutdown: watch::Receiver<bool>,
    /// Where events sent and streams dropped are counted, if anywhere.
    pub metrics: Option<Arc<Metrics>>,
    /// Where a dropped stream is counted against its connection.
    pub stalls: Arc<Stalls>,
}

/// A server stream fed by a task: what the task buffered, then the status it ended with, if
/// it could not deliver it through the full buffer.
#[derive(Debug)]
pub struct WatchStream<M> {
    rx: mpsc::Receiver<Result<M, Status>>,
    last: Option<oneshot::Receiver<Status>>,
}

impl<M> Stream for WatchStream<M> {
    type Item = Result<M, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(None) => {}
            other => return other,
        }
        // The task has ended (the sender is gone), so the oneshot is settled either way.
        Poll::Ready(
            self.last
                .take()
                .and_then(|mut last| last.try_recv().ok())
                .map(Err),
        )
    }
}

/// What a stream sends besides its watch: nothing (`None`), or the items of a side stream (the
/// lobby's seeks), each made into a message at the sequence of the last real event.
pub(crate) struct Side<S, X, M> {
    /// The side stream.
    pub(crate) items: S,
    /// Its items as messages.
    pub(crate) message: fn(X, u64) -> M,
}

/// No side stream.
pub(crate) fn no_side<M>() -> Side<futures::stream::Pending<()>, (), M> {
    Side {
        items: futures::stream::pending(),
        message: |(), _| unreachable!("a pending stream yields nothing"),
    }
}

/// The server's stream settings, and the client address a stream serves (its connection is
/// closed after too many dropped streams, see [`super::stalls`]).
pub(crate) struct Served<'a> {
    pub(crate) settings: &'a StreamSettings,
    pub(crate) peer: Option<SocketAddr>,
}

/// Spawns the task that feeds a stream from `watch`: each item made into a message by `item`,
/// heartbeats while idle, the `side` stream's items between them; the stream ends after an
/// item for which `is_last` holds, or when the watch is complete. Its events are counted as
/// `kind`'s.
pub(crate) fn spawn<F, M, I, L, S, X>(
    mut watch: Watch<F>,
    Served { settings, peer }: Served<'_>,
    kind: StreamKind,
    item: I,
    heartbeat: fn(u64) -> M,
    is_last: L,
    side: Side<S, X, M>,
) -> WatchStream<M>
where
    F: Feed,
    M: Send + 'static,
    I: Fn(WatchItem<F>) -> M + Send + 'static,
    L: Fn(&WatchItem<F>) -> bool + Send + 'static,
    S: futures::Stream<Item = X> + Send + Unpin + 'static,
    X: Send + 'static,
{
    use futures::StreamExt as _;
    let (tx, rx) = mpsc::channel(STREAM_BUFFER);
    let (last_tx, last_rx) = oneshot::channel();
    let mut shutdown = settings.shutdown.clone();
    let metrics = settings.metrics.clone();
    let stalls = Arc::clone(&settings.stalls);
    let period = settings.heartbeat.max(Duration::from_millis(10));
    let stall = settings.stall_timeout.max(Duration::from_millis(10));
    let Side {
        items: mut side,
        message: side_message,
    } = side;
    // A stream that resumes with nothing missed says so at once with a heartbeat: a client
    // takes itself for connected only when something arrives, and an outside probe's browser
    // page sat "reconnecting…" for the whole heartbeat period (15 s) while its clock ran.
    let first_beat = if watch.is_up_to_date() {
        Instant::now()
    } else {
        Instant::now() + period
    };
    let task = async move {
        let mut ticker = tokio::time::interval_at(first_beat, period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut lagged = 0;
        let mut sent = false;
        loop {
            let last = watch.last_sequence();
            let mut ends = false;
            let out = tokio::select! {
                biased;
                // An error means the server dropped the sender: shutting down as well.
                _ = shutdown.wait_for(|stopping| *stopping) => Err(status::shutting_down(last)),
                () = tx.closed() => break,
                next = watch.next() => match next {
                    Ok(Some(next)) => {
                        ticker.reset();
                        if let (Some(metrics), WatchItem::Event(_)) = (&metrics, &next) {
                            metrics.event_sent(kind);
                        }
                        ends = is_last(&next);
                        Ok(item(next))
                    }
                    // Complete: ending the task closes the stream with status OK. One that
                    // resumed at a finished game's last event says first that it is up to
                    // date: an empty stream reads like one that died (an outside probe's).
                    Ok(None) if sent => break,
                    Ok(None) => {
                        ends = true;
                        Ok(heartbeat(last))
                    }
                    Err(error) => Err(status::into_status(error)),
                },
                Some(extra) = side.next() => Ok(side_message(extra, last)),
                _ = ticker.tick() => Ok(heartbeat(last)),
            };
            if let Some(metrics) = &metrics
                && watch.times_lagged() > lagged
            {
                metrics.stream_lagged(kind, watch.times_lagged() - lagged);
                lagged = watch.times_lagged();
            }
            let fatal = out.is_err();
            sent = true;
            match tokio::time::timeout(stall, tx.send(out)).await {
                Ok(Ok(())) if !fatal && !ends => {}
                Ok(_) => break,
                Err(_) => {
                    // Never read for `stall`: free the slot, tell the client when it reads.
                    // The message in hand is dropped; resuming from `last` replays it.
                    tracing::info!(stall = ?stall, "dropping a stream its client does not read");
                    if let Some(metrics) = &metrics {
                        metrics.stream_stalled();
                    }
                    let _ = last_tx.send(status::stream_dropped(stall, last));
                    if let Some(peer) = peer
                        && stalls.stalled(peer)
                    {
                        tracing::info!(%peer, "closing a connection that leaves its streams unread");
                    }
                    break;
                }
            }
        }
        tracing::debug!("stream ended");
    };
    tokio::spawn(task.in_current_span());
    WatchStream {
        rx,
        last: Some(last_rx),
    }
}
