//! The addresses of a request's connection, as tonic's transport records them in the
//! request's extensions: read by the rate limit, reflection's accounting and the host check.

use std::net::IpAddr;

use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

/// The peer address of a request, over plain TCP or TLS.
#[must_use]
pub fn peer_ip<B>(request: &http::Request<B>) -> Option<IpAddr> {
    connection_ips(request).0
}

/// The peer's and this end's addresses of a request's connection, over plain TCP or TLS.
#[must_use]
pub fn connection_ips<B>(request: &http::Request<B>) -> (Option<IpAddr>, Option<IpAddr>) {
    let extensions = request.extensions();
    let tcp = extensions.get::<TcpConnectInfo>().or_else(|| {
        extensions
            .get::<TlsConnectInfo<TcpConnectInfo>>()
            .map(TlsConnectInfo::get_ref)
    });
    match tcp {
        Some(info) => (
            info.remote_addr().map(|addr| addr.ip()),
            info.local_addr().map(|addr| addr.ip()),
        ),
        None => (None, None),
    }
}
