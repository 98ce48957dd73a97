//! `grpc.health.v1.Health`: tonic-health's service, with `Watch` streams that end when the
//! server shuts down, and a `Watch` of an unknown service told `SERVICE_UNKNOWN` and kept open,
//! as the health spec has it.
//!
//! tonic-health ends a `Watch` stream only when its status is removed, and a removed status
//! answers `Check` with `NOT_FOUND`, which a load balancer draining the server must not see.
//! Left open, a `Watch` stream holds a graceful shutdown for the whole drain timeout. So each
//! stream here delivers every status change first (the `NOT_SERVING` the server sets before it
//! stops is always seen) and then, once the server stops, ends with `UNAVAILABLE` like the
//! other streams.
//!
//! Open `Watch` streams are capped server-wide (`--max-health-watches`): one more is refused
//! with RESOURCE_EXHAUSTED, whatever the client's address (loopback included), and a stream's
//! place comes back when it is dropped, whether it ended or its client went away. `Check` is
//! never refused by the cap. Each client address may hold at most
//! `--max-health-watches-per-client` of them (loopback exempt like the other per-client
//! limits), so one address cannot take every place.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt as _};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tonic::{Request, Response, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_health::server::{HealthReporter, HealthService};

use super::status;
use crate::domain::limits::{ClientPlace, ClientPlaces};

/// The health service; see the module docs.
#[derive(Debug)]
pub struct HealthApi {
    inner: HealthService,
    shutdown: watch::Receiver<bool>,
    /// A permit per open `Watch` stream.
    watches: Arc<Semaphore>,
    max_watches: usize,
    /// Places per client address.
    per_client: Arc<ClientPlaces>,
}

impl HealthApi {
    /// The service answering from `reporter`'s statuses, with at most `max_watches` `Watch`
    /// streams open at once (at least 1) and what `per_client` allows each client address,
    /// which end when `shutdown` turns `true`.
    #[must_use]
    pub fn server(
        reporter: HealthReporter,
        max_watches: usize,
        per_client: Arc<ClientPlaces>,
        shutdown: watch::Receiver<bool>,
    ) -> HealthServer<Self> {
        let max_watches = max_watches.clamp(1, Semaphore::MAX_PERMITS);
        HealthServer::new(HealthApi {
            inner: HealthService::from_health_reporter(reporter),
            shutdown,
            watches: Arc::new(Semaphore::new(max_watches)),
            max_watches,
            per_client,
        })
    }
}

#[tonic::async_trait]
impl Health for HealthApi {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        self.inner.check(request).await
    }

    type WatchStream = HealthWatch;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthWatch>, Status> {
        // Taken before the inner service looks at the request: a refused watch costs nothing.
        // The client's own place first, so that a client at its limit takes no server place.
        let client_place = self
            .per_client
            .take(request.remote_addr().map(|addr| addr.ip()))
            .ok_or_else(|| status::health_watches_full_for_client(self.per_client.max()))?;
        let place = Arc::clone(&self.watches)
            .try_acquire_owned()
            .map_err(|_| status::health_watches_full(self.max_watches))?;
        let inner: WatchInner = match self.inner.watch(request).await {
            Ok(response) => Box::pin(response.into_inner()),
            // The health spec: a watch of a service the server does not know is told
            // SERVICE_UNKNOWN and kept open, not ended (tonic-health's NOT_FOUND), so that a
            // watcher started before the service would see it come.
            Err(refused) if refused.code() == tonic::Code::NotFound => Box::pin(
                futures::stream::once(futures::future::ready(Ok(HealthCheckResponse {
                    status: ServingStatus::ServiceUnknown.into(),
                })))
                .chain(futures::stream::pending()),
            ),
            Err(refused) => return Err(refused),
        };
        let mut shutdown = self.shutdown.clone();
        Ok(Response::new(HealthWatch {
            inner,
            _place: place,
            _client_place: client_place,
            stopping: Some(Box::pin(async move {
                // An error means the server dropped the sender: stopping as well.
                let _ = shutdown.wait_for(|stopping| *stopping).await;
            })),
            stopped: false,
            ended: false,
        }))
    }
}

/// The statuses a `Watch` stream passes on.
type WatchInner = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

/// A `Watch` stream of [`HealthApi`].
pub struct HealthWatch {
    inner: WatchInner,
    /// This stream's place under `--max-health-watches`, given back when tonic drops the
    /// stream: at its end, or when its client resets it or goes away.
    _place: OwnedSemaphorePermit,
    /// Its place among its client's, given back likewise.
    _client_place: ClientPlace,
    /// Resolves when the server stops; `None` once it has (it must not be polled again).
    stopping: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    stopped: bool,
    ended: bool,
}

impl std::fmt::Debug for HealthWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthWatch")
            .field("stopped", &self.stopped)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Stream for HealthWatch {
    type Item = Result<HealthCheckResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if let Some(stopping) = self.stopping.as_mut() {
            if stopping.as_mut().poll(cx).is_ready() {
                self.stopping = None;
                self.stopped = true;
            }
        }
        // The status before the end: the server turns NOT_SERVING before it stops, and a
        // watcher must hear that rather than only see the stream end.
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(Some(item)) => return Poll::Ready(Some(item)),
            Poll::Ready(None) => {
                self.ended = true;
                return Poll::Ready(None);
            }
            Poll::Pending => {}
        }
        if !self.stopped {
            return Poll::Pending;
        }
        self.ended = true;
        Poll::Ready(Some(Err(status::health_shutting_down())))
    }
}
