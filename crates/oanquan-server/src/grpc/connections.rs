//! A cap on open TCP connections per client address, checked as each connection is accepted.
//!
//! The per-connection limits (streams, concurrency) bound what one connection can hold; this
//! bounds how many connections one address can open, so that a single host cannot exhaust the
//! server's file descriptors and per-connection memory. A connection over the cap is closed at
//! once, before TLS or HTTP/2: there is no channel yet to send a gRPC status on, and a client
//! sees `UNAVAILABLE`. Addresses are grouped like the other per-client limits
//! ([`client_key`]), and loopback peers can be exempted the same way.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tonic::transport::server::{Connected, TcpConnectInfo};
use tracing::debug;

use prometheus_client::metrics::gauge::Gauge;

use crate::domain::limits::client_key;
use crate::metrics::Metrics;

/// Open connections per client address. See the module docs.
#[derive(Debug)]
pub struct ConnectionLimit {
    /// 0: no limit.
    max: usize,
    exempt_loopback: bool,
    open: Mutex<HashMap<IpAddr, usize>>,
    metrics: Option<Arc<Metrics>>,
}

impl ConnectionLimit {
    /// At most `max` connections per client address; 0 means no limit.
    #[must_use]
    pub fn new(max: usize, exempt_loopback: bool) -> Arc<ConnectionLimit> {
        ConnectionLimit::observed(max, exempt_loopback, None)
    }

    /// [`ConnectionLimit::new`], counting every open connection and each refusal in
    /// `metrics`.
    #[must_use]
    pub fn observed(
        max: usize,
        exempt_loopback: bool,
        metrics: Option<Arc<Metrics>>,
    ) -> Arc<ConnectionLimit> {
        Arc::new(ConnectionLimit {
            max,
            exempt_loopback,
            open: Mutex::default(),
            metrics,
        })
    }

    /// `stream`, counted in the open-connections gauges (in its handshake) until dropped.
    fn gauged(
        &self,
        stream: TcpStream,
        slot: Option<(Arc<ConnectionLimit>, IpAddr)>,
    ) -> CountedConnection {
        let gauges = self.metrics.as_ref().map(|metrics| {
            let gauges = metrics.connection_gauges();
            gauges.0.inc();
            gauges
        });
        CountedConnection {
            stream,
            slot,
            gauges,
            serving: false,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<IpAddr, usize>> {
        // Only counts change under the lock: a poisoned map is still consistent.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The accepted `stream`, counted until it is dropped; `None` (the caller drops the
    /// stream, closing it) if its address already has the maximum open.
    pub fn admit(self: &Arc<Self>, stream: TcpStream) -> Option<CountedConnection> {
        let peer = stream.peer_addr().ok().map(|addr| addr.ip());
        let counted = match peer {
            Some(ip) if self.max > 0 && !(self.exempt_loopback && ip.is_loopback()) => {
                client_key(ip)
            }
            _ => return Some(self.gauged(stream, None)),
        };
        {
            let mut open = self.lock();
            let count = open.entry(counted).or_insert(0);
            if *count >= self.max {
                debug!(peer = %counted, open = *count, "connection refused: too many from this address");
                if let Some(metrics) = &self.metrics {
                    metrics.connection_refused();
                }
                return None;
            }
            *count += 1;
        }
        Some(self.gauged(stream, Some((Arc::clone(self), counted))))
    }

    /// Connections counted for `ip` now.
    #[must_use]
    pub fn open(&self, ip: IpAddr) -> usize {
        self.lock().get(&client_key(ip)).copied().unwrap_or(0)
    }
}

/// An accepted TCP connection that gives its place back when the server drops it.
#[derive(Debug)]
pub struct CountedConnection {
    stream: TcpStream,
    slot: Option<(Arc<ConnectionLimit>, IpAddr)>,
    /// In their handshake, past it.
    gauges: Option<(Gauge, Gauge)>,
    serving: bool,
}

impl CountedConnection {
    /// Counts it as past its handshake from now on.
    pub fn serving(&mut self) {
        if let (Some((handshake, serving)), false) = (&self.gauges, self.serving) {
            handshake.dec();
            serving.inc();
        }
        self.serving = true;
    }
}

impl Drop for CountedConnection {
    fn drop(&mut self) {
        if let Some((handshake, serving)) = &self.gauges {
            if self.serving {
                serving.dec();
            } else {
                handshake.dec();
            }
        }
        if let Some((limit, ip)) = self.slot.take() {
            let mut open = limit.lock();
            if let Some(count) = open.get_mut(&ip) {
                *count -= 1;
                if *count == 0 {
                    open.remove(&ip);
                }
            }
        }
    }
}

impl Connected for CountedConnection {
    // The same as a bare `TcpStream`'s, so the rate limiter and handlers find the peer address
    // where they look for it.
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

// `TcpStream` is `Unpin`, so each call goes straight through.
impl AsyncRead for CountedConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for CountedConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::net::TcpListener;

    use super::*;

    /// A connected pair: what the server accepted, and the client's end.
    async fn accept(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (accepted, client) = tokio::join!(listener.accept(), client);
        (accepted.unwrap().0, client.unwrap())
    }

    #[tokio::test]
    async fn counts_connections_per_address_until_they_close() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let limit = ConnectionLimit::new(2, false);
        let mut kept = Vec::new();
        for _ in 0..2 {
            let (accepted, client) = accept(&listener).await;
            kept.push((limit.admit(accepted).expect("under the cap"), client));
        }
        assert_eq!(limit.open(ip), 2);
        let (accepted, _client) = accept(&listener).await;
        assert!(limit.admit(accepted).is_none(), "a third is refused");
        assert_eq!(limit.open(ip), 2);
        drop(kept.pop());
        assert_eq!(limit.open(ip), 1);
        let (accepted, _client) = accept(&listener).await;
        assert!(limit.admit(accepted).is_some(), "a place was given back");
    }

    #[tokio::test]
    async fn no_limit_and_exempt_loopback_count_nothing() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        for limit in [
            ConnectionLimit::new(0, false),
            ConnectionLimit::new(1, true),
        ] {
            let mut kept = Vec::new();
            for _ in 0..3 {
                let (accepted, client) = accept(&listener).await;
                kept.push((limit.admit(accepted).expect("not limited"), client));
            }
            assert_eq!(limit.open(ip), 0);
        }
    }
}
