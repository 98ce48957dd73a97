//! Responses a client does not read: dropped after a while, so that they do not hold memory.
//!
//! HTTP/2 lets a client stop reading (a flow-control window of 0, never opened): hyper then
//! stops asking the response body for data and keeps it, with everything it holds, for as long
//! as the connection lives; a client that answers pings keeps it forever. A `ListMoves` of a
//! long game parked so costs a quarter of a megabyte, and one address could park thousands
//! (its connections times their streams) — gigabytes, with no deadline (the request timeout
//! ends when the handler returns its response, not when the body is sent).
//!
//! [`UnreadLayer`] wraps every response body. A body that has handed hyper data and has not
//! been asked for more within [`Unread::limit`] (a body waiting for data of its own, like a
//! quiet watch stream, does not count) is dropped by a sweep; hyper then gets an error if it
//! ever asks again, and resets the stream. Large data frames are handed over in pieces of at
//! most [`PIECE`] bytes, so that h2's own buffer (which takes a whole frame once any window is
//! open, even one byte of it) holds at most a piece of a parked response, and the rest stays
//! here, where the sweep can drop it.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::sync::watch;
use tonic::Status;
use tonic::body::Body;
use tower::{Layer, Service};

/// The largest piece of a data frame handed to hyper at once.
pub const PIECE: usize = 16 * 1024;

/// The sweeps per [`Unread::limit`]: a parked body is dropped between 1 and 1 + 1/SWEEPS
/// limits after it was last asked.
const SWEEPS: u32 = 4;

/// What every wrapped body reports to, and the sweep that drops the parked ones.
#[derive(Debug)]
pub struct Unread {
    limit: Duration,
    /// Sweeps since start: the coarse clock of [`Slot::parked_since`], shared with the bodies.
    tick: Arc<AtomicU64>,
    bodies: Mutex<Vec<Weak<Slot>>>,
    /// Bodies dropped by a sweep, for the metrics.
    dropped: AtomicU64,
}

impl Unread {
    /// Bodies parked for `limit` are dropped.
    #[must_use]
    pub fn new(limit: Duration) -> Arc<Unread> {
        Arc::new(Unread {
            limit,
            tick: Arc::new(AtomicU64::new(1)),
            bodies: Mutex::new(Vec::new()),
            dropped: AtomicU64::new(0),
        })
    }

    /// How long a body may wait for its client.
    #[must_use]
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Bodies dropped so far.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn register(&self, slot: &Arc<Slot>) {
        self.bodies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(slot));
    }

    /// One sweep: forgets finished bodies, drops those parked for the limit. Returns how many
    /// it dropped.
    pub fn sweep(&self) -> usize {
        let now = self.tick.fetch_add(1, Ordering::Relaxed) + 1;
        // Taken out of the registry and looked at outside its lock: under load the list holds
        // every response since the last sweep, and new responses must not wait for the walk.
        let bodies =
            std::mem::take(&mut *self.bodies.lock().unwrap_or_else(PoisonError::into_inner));
        let mut dropped = Vec::new();
        let mut kept = Vec::new();
        for weak in bodies {
            let Some(slot) = weak.upgrade() else {
                continue;
            };
            let since = slot.parked_since.load(Ordering::Relaxed);
            if since == 0 || now.saturating_sub(since) <= u64::from(SWEEPS) {
                kept.push(weak);
            } else if let Some(inner) = slot.lock().take() {
                dropped.push(inner);
            }
        }
        self.bodies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(kept);
        self.dropped
            .fetch_add(dropped.len() as u64, Ordering::Relaxed);
        // Dropped here, outside the registry's lock: a watch stream's drop does work.
        dropped.len()
    }

    /// Sweeps every quarter of the limit until `stop` turns `true`.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut ticker = tokio::time::interval(self.limit / SWEEPS);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.wait_for(|stopping| *stopping) => return,
                _ = ticker.tick() => {
                    let dropped = self.sweep();
                    if dropped > 0 {
                        tracing::info!(
                            dropped,
                            limit = ?self.limit,
                            "responses their clients did not read dropped"
                        );
                    }
                }
            }
        }
    }
}

/// One response body and what the sweep reads of it.
#[derive(Debug)]
struct Slot {
    inner: Mutex<Option<Inner>>,
    /// The tick at which the body last handed data over (or was made) and has not been asked
    /// since; 0 while it waits for data of its own.
    parked_since: AtomicU64,
}

impl Slot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Inner>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Debug)]
struct Inner {
    body: Body,
    /// The rest of a data frame larger than [`PIECE`].
    rest: Bytes,
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct UnreadLayer {
    unread: Arc<Unread>,
}

impl UnreadLayer {
    /// Bodies report to `unread`, whose [`Unread::run`] sweeps them.
    #[must_use]
    pub fn new(unread: Arc<Unread>) -> UnreadLayer {
        UnreadLayer { unread }
    }
}

impl<S> Layer<S> for UnreadLayer {
    type Service = UnreadService<S>;
    fn layer(&self, inner: S) -> UnreadService<S> {
        UnreadService {
            inner,
            unread: Arc::clone(&self.unread),
        }
    }
}

/// The service [`UnreadLayer`] makes.
#[derive(Debug, Clone)]
pub struct UnreadService<S> {
    inner: S,
    unread: Arc<Unread>,
}

impl<S, B> Service<http::Request<B>> for UnreadService<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<http::Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let future = self.inner.call(request);
        let unread = Arc::clone(&self.unread);
        Box::pin(async move {
            let response = future.await?;
            Ok(response.map(|body| guard(&unread, body)))
        })
    }
}

/// `body`, reporting to `unread`.
fn guard(unread: &Unread, body: Body) -> Body {
    let slot = Arc::new(Slot {
        inner: Mutex::new(Some(Inner {
            body,
            rest: Bytes::new(),
        })),
        parked_since: AtomicU64::new(unread.tick.load(Ordering::Relaxed)),
    });
    unread.register(&slot);
    Body::new(Guarded {
        slot,
        tick: Arc::clone(&unread.tick),
    })
}

/// What a dropped body answers when hyper asks it again. Its status cannot reach the client
/// (the response's headers are gone, its trailers with the body): hyper resets the stream,
/// with the reason of the first `h2::Error` among the error's sources, else INTERNAL_ERROR,
/// which gRPC clients report as INTERNAL, a server fault. ENHANCE_YOUR_CALM is what gRPC maps
/// to RESOURCE_EXHAUSTED, which is what this is: a limit of the server on the client.
fn dropped() -> Status {
    let mut status =
        Status::resource_exhausted("the response was not read in time and was dropped");
    status.set_source(Arc::new(h2::Error::from(h2::Reason::ENHANCE_YOUR_CALM)));
    status
}

/// A body that reports to [`Unread`].
#[derive(Debug)]
struct Guarded {
    slot: Arc<Slot>,
    tick: Arc<AtomicU64>,
}

impl http_body::Body for Guarded {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        let mut inner = this.slot.lock();
        let Some(inner) = inner.as_mut() else {
            return Poll::Ready(Some(Err(dropped())));
        };
        let polled = if inner.rest.is_empty() {
            match Pin::new(&mut inner.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(mut data) if data.len() > PIECE => {
                        let piece = data.split_to(PIECE);
                        inner.rest = data;
                        Poll::Ready(Some(Ok(Frame::data(piece))))
                    }
                    Ok(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
                    Err(frame) => Poll::Ready(Some(Ok(frame))),
                },
                other => other,
            }
        } else {
            let take = inner.rest.len().min(PIECE);
            Poll::Ready(Some(Ok(Frame::data(inner.rest.split_to(take)))))
        };
        // Parked: it handed data over and waits for hyper. Not parked: it waits for data of
        // its own, or it is over.
        let parked = match polled {
            Poll::Ready(Some(_)) => this.tick.load(Ordering::Relaxed),
            Poll::Pending | Poll::Ready(None) => 0,
        };
        this.slot.parked_since.store(parked, Ordering::Relaxed);
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.slot
            .lock()
            .as_ref()
            .is_some_and(|inner| inner.rest.is_empty() && inner.body.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        match self.slot.lock().as_ref() {
            Some(inner) if inner.rest.is_empty() => inner.body.size_hint(),
            Some(inner) => {
                let rest = inner.rest.len() as u64;
                let body = inner.body.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(body.lower().saturating_add(rest));
                if let Some(upper) = body.upper() {
                    hint.set_upper(upper.saturating_add(rest));
                }
                hint
            }
            None => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    /// A body that yields `frames` then ends, or stays pending after them with `pending`.
    fn body(frames: Vec<Bytes>, pending: bool) -> Body {
        let stream = futures::stream::iter(
            frames
                .into_iter()
                .map(|data| Ok::<_, Status>(Frame::data(data))),
        );
        if pending {
            Body::new(http_body_util::StreamBody::new(futures::StreamExt::chain(
                stream,
                futures::stream::pending(),
            )))
        } else {
            Body::new(http_body_util::StreamBody::new(stream))
        }
    }

    fn poll(body: &mut Body) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let waker = futures::task::noop_waker();
        Pin::new(body).poll_frame(&mut Context::from_waker(&waker))
    }

    fn data(polled: Poll<Option<Result<Frame<Bytes>, Status>>>) -> Bytes {
        match polled {
            Poll::Ready(Some(Ok(frame))) => frame.into_data().expect("a data frame"),
            other => panic!("expected data, got {other:?}"),
        }
    }

    #[test]
    fn large_frames_are_handed_over_in_pieces_and_whole() {
        let unread = Unread::new(Duration::from_secs(1));
        let big: Bytes = (0..40_000_u32).map(|i| i as u8).collect::<Vec<u8>>().into();
        let mut guarded = guard(
            &unread,
            body(vec![big.clone(), Bytes::from_static(b"x")], false),
        );
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        loop {
            match poll(&mut guarded) {
                Poll::Ready(Some(Ok(frame))) => {
                    let data = frame.into_data().unwrap();
                    sizes.push(data.len());
                    got.extend_from_slice(&data);
                }
                Poll::Ready(None) => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(sizes, [PIECE, PIECE, 40_000 - 2 * PIECE, 1]);
        assert_eq!(&got[..40_000], &big[..]);
        assert_eq!(got[40_000], b'x');
    }

    #[test]
    fn a_body_not_asked_again_is_dropped_and_then_fails() {
        let unread = Unread::new(Duration::from_secs(1));
        let big = Bytes::from(vec![7_u8; 3 * PIECE]);
        let mut parked = guard(&unread, body(vec![big], false));
        let mut never_asked = guard(&unread, body(vec![Bytes::from_static(b"x")], false));
        assert_eq!(data(poll(&mut parked)).len(), PIECE);
        for _ in 0..SWEEPS {
            assert_eq!(unread.sweep(), 0, "dropped before its limit");
        }
        assert_eq!(unread.sweep(), 2);
        assert_eq!(unread.dropped(), 2);
        for body in [&mut parked, &mut never_asked] {
            match poll(body) {
                Poll::Ready(Some(Err(status))) => {
                    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
                    // What hyper resets the stream with.
                    let reason = std::error::Error::source(&status)
                        .and_then(|source| source.downcast_ref::<h2::Error>())
                        .and_then(h2::Error::reason);
                    assert_eq!(reason, Some(h2::Reason::ENHANCE_YOUR_CALM));
                }
                other => panic!("{other:?}"),
            }
        }
        // Dropped bodies are forgotten.
        assert!(unread.bodies.lock().unwrap().is_empty());
    }

    #[test]
    fn bodies_read_on_time_or_waiting_for_their_own_data_stay() {
        let unread = Unread::new(Duration::from_secs(1));
        // A quiet stream: it handed its data over and waits for more of its own.
        let mut quiet = guard(&unread, body(vec![Bytes::from_static(b"a")], true));
        data(poll(&mut quiet));
        assert!(poll(&mut quiet).is_pending());
        // A body asked again before each limit.
        let mut read = guard(
            &unread,
            body(vec![Bytes::from(vec![1_u8; 10 * PIECE])], false),
        );
        for _ in 0..10 {
            data(poll(&mut read));
            for _ in 0..SWEEPS {
                unread.sweep();
            }
        }
        assert!(matches!(poll(&mut read), Poll::Ready(None)));
        for _ in 0..3 * SWEEPS {
            unread.sweep();
        }
        assert_eq!(unread.dropped(), 0);
        assert!(poll(&mut quiet).is_pending());
        // A finished body is forgotten at the next sweep.
        drop(read);
        unread.sweep();
        assert_eq!(unread.bodies.lock().unwrap().len(), 1);
    }
}
