//! A tower layer that refuses calls naming a host [`HostCheck`] does not allow (DNS
//! rebinding, see there) with PERMISSION_DENIED, before anything else runs.

use std::task::{Context, Poll};

use futures::future::{Either, Ready, ready};
use tower::{Layer, Service};

use super::status;
use crate::peer::connection_ips;
use crate::web::HostCheck;

/// See the module docs.
#[derive(Debug, Clone)]
pub struct HostCheckLayer {
    hosts: HostCheck,
}

impl HostCheckLayer {
    /// A layer admitting the names `hosts` allows.
    #[must_use]
    pub fn new(hosts: HostCheck) -> HostCheckLayer {
        HostCheckLayer { hosts }
    }
}

impl<S> Layer<S> for HostCheckLayer {
    type Service = HostCheckService<S>;
    fn layer(&self, inner: S) -> HostCheckService<S> {
        HostCheckService {
            inner,
            hosts: self.hosts.clone(),
        }
    }
}

/// The service [`HostCheckLayer`] makes.
#[derive(Debug, Clone)]
pub struct HostCheckService<S> {
    inner: S,
    hosts: HostCheck,
}

impl<S, B, R> Service<http::Request<B>> for HostCheckService<S>
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
        let (peer, local) = connection_ips(&request);
        if let Err(refused) = self
            .hosts
            .admit(peer, local, request.uri(), request.headers())
        {
            tracing::debug!(?peer, path = %request.uri().path(), "host not allowed");
            return Either::Right(ready(Ok(status::host_refused(&refused).into_http())));
        }
        Either::Left(self.inner.call(request))
    }
}
