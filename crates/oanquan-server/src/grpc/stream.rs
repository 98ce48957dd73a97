//! Runs a domain [`Watch`] as a gRPC server stream: heartbeats while idle, and a clear
//! UNAVAILABLE status (with the sequence to resume from) when the server shuts down.

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tracing::Instrument as _;

use crate::domain::{Feed, Watch, WatchItem};

/// Messages buffered per stream. When a client reads slower than events arrive, the stream task
/// waits here, its hub receiver lags, and it catches up from the store's log (or a snapshot)
/// later: memory per slow client stays bounded.
const STREAM_BUFFER: usize = 16;

/// What every stream needs from the server.
#[derive(Debug, Clone)]
pub struct StreamSettings {
    /// Idle time before a heartbeat.
    pub heartbeat: Duration,
    /// Turns `true` when the server starts shutting down.
    pub shutdown: watch::Receiver<bool>,
}

/// Spawns the task that feeds a stream from `watch`.
pub(crate) fn spawn<F, M>(
    mut watch: Watch<F>,
    settings: &StreamSettings,
    item: fn(WatchItem<F>) -> M,
    heartbeat: fn(u64) -> M,
) -> ReceiverStream<Result<M, Status>>
where
    F: Feed,
    M: Send + 'static,
{
    let (tx, rx) = mpsc::channel(STREAM_BUFFER);
    let mut shutdown = settings.shutdown.clone();
    let period = settings.heartbeat.max(Duration::from_millis(10));
    let task = async move {
        let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let last = watch.last_sequence();
            let out = tokio::select! {
                biased;
                // An error means the server dropped the sender: shutting down as well.
                _ = shutdown.wait_for(|stopping| *stopping) => Err(Status::unavailable(format!(
                    "server is shutting down; reconnect with after_sequence={last}"
                ))),
                () = tx.closed() => break,
                next = watch.next() => match next {
                    Ok(Some(next)) => {
                        ticker.reset();
                        Ok(item(next))
                    }
                    // Complete: ending the task closes the stream with status OK.
                    Ok(None) => break,
                    Err(error) => Err(Status::from(error)),
                },
                _ = ticker.tick() => Ok(heartbeat(last)),
            };
            let fatal = out.is_err();
            if tx.send(out).await.is_err() || fatal {
                break;
            }
        }
        tracing::debug!("stream ended");
    };
    tokio::spawn(task.in_current_span());
    ReceiverStream::new(rx)
}
