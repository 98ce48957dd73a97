//! A tower layer that applies the per-client request [`RateLimiter`] before any RPC runs, so a
//! flooding client is refused cheaply (no decoding, no store access) and others carry on.
//!
//! Health checks (`grpc.health.v1`) count in a bucket of their own: load balancers probe often
//! from one address, and their answer must not depend on other traffic; but a client that
//! floods them (each costs about what any call does) is refused like any other.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::{Either, Ready, ready};
use tower::{Layer, Service};

use super::status;
use crate::domain::limits::RateLimiter;
use crate::metrics::Metrics;
use crate::peer::peer_ip;

/// See the module docs.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    limiter: Arc<RateLimiter>,
    health: Arc<RateLimiter>,
    metrics: Option<Arc<Metrics>>,
}

impl RateLimitLayer {
    /// A layer checking `limiter`, with health checks unlimited.
    #[must_use]
    pub fn new(limiter: Arc<RateLimiter>) -> RateLimitLayer {
        RateLimitLayer {
            limiter,
            health: Arc::new(RateLimiter::new(None, false)),
            metrics: None,
        }
    }

    /// The same layer, checking health checks against `health` instead.
    #[must_use]
    pub fn with_health(mut self, health: Arc<RateLimiter>) -> RateLimitLayer {
        self.health = health;
        self
    }

    /// The same layer, counting its refusals in `metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Option<Arc<Metrics>>) -> RateLimitLayer {
        self.metrics = metrics;
        self
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimitService<S>;
    fn layer(&self, inner: S) -> RateLimitService<S> {
        RateLimitService {
            inner,
            limiter: Arc::clone(&self.limiter),
            health: Arc::clone(&self.health),
            metrics: self.metrics.clone(),
        }
    }
}

/// The service [`RateLimitLayer`] makes.
#[derive(Debug, Clone)]
pub struct RateLimitService<S> {
    inner: S,
    limiter: Arc<RateLimiter>,
    health: Arc<RateLimiter>,
    metrics: Option<Arc<Metrics>>,
}

impl<S, B, R> Service<http::Request<B>> for RateLimitService<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    R: Default,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<http::Response<R>, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let health = request.uri().path().starts_with("/grpc.health.");
        let limiter = if health { &self.health } else { &self.limiter };
        if let Some(ip) = peer_ip(&request)
            && let Err(limited) = limiter.check(ip)
        {
            tracing::debug!(%ip, path = %request.uri().path(), "rate limited");
            if let Some(metrics) = &self.metrics {
                metrics.rate_limited();
            }
            let refusal = if health {
                status::health_rate_limited(&limited)
            } else {
                status::rate_limited(&limited)
            };
            return Either::Right(ready(Ok(refusal.into_http())));
        }
        Either::Left(self.inner.call(request))
    }
}
