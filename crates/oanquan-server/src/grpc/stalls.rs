//! Closing a connection whose client leaves its streams unread.
//!
//! A watch stream nobody reads for the stall timeout is dropped ([`super::stream`]): its task
//! ends and its watcher place is free again. But the HTTP/2 stream itself stays open: hyper
//! waits for the client's flow-control window before it polls the body again, and only the
//! connection can end it. A client that never reads could so take a watcher place, let it be
//! dropped, take it again, and pile up open HTTP/2 streams (each with a frame of buffered data)
//! up to the streams per connection times its connections. So each connection counts its
//! dropped streams, and at [`STALLS_BEFORE_CLOSE`] the server closes it: every stream on it
//! ends, and an honest client reconnects and resumes from the sequence it last read.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Context;

use futures::task::AtomicWaker;

/// Streams dropped for stalling on one connection before it is closed. One is an accident (a
/// client suspended for a while keeps its other streams); several on one connection are a
/// client that does not read.
pub const STALLS_BEFORE_CLOSE: u32 = 4;

/// The open connections, by peer address, and what closes them.
#[derive(Debug, Default)]
pub struct Stalls {
    connections: Mutex<HashMap<SocketAddr, Arc<Doom>>>,
}

/// One connection's count of dropped streams, and its closing.
#[derive(Debug, Default)]
struct Doom {
    stalls: AtomicU32,
    closed: AtomicBool,
    /// The connection's task, woken to see that it is closed.
    waker: AtomicWaker,
}

impl Stalls {
    /// An empty registry.
    #[must_use]
    pub fn new() -> Arc<Stalls> {
        Arc::default()
    }

    /// Tracks the connection from `peer` until the returned registration is dropped.
    #[must_use]
    pub fn register(self: &Arc<Self>, peer: SocketAddr) -> Registration {
        let doom = Arc::new(Doom::default());
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(peer, Arc::clone(&doom));
        Registration {
            stalls: Arc::clone(self),
            peer,
            doom,
        }
    }

    /// Counts a stream of `peer`'s connection dropped for stalling; closes the connection at
    /// [`STALLS_BEFORE_CLOSE`]. Returns whether it is closed now.
    pub fn stalled(&self, peer: SocketAddr) -> bool {
        let Some(doom) = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&peer)
            .cloned()
        else {
            return false;
        };
        if doom.stalls.fetch_add(1, Ordering::Relaxed) + 1 < STALLS_BEFORE_CLOSE {
            return false;
        }
        doom.closed.store(true, Ordering::Release);
        doom.waker.wake();
        true
    }
}

/// A connection's place in [`Stalls`], held by the connection.
#[derive(Debug)]
pub struct Registration {
    stalls: Arc<Stalls>,
    peer: SocketAddr,
    doom: Arc<Doom>,
}

impl Registration {
    /// Whether the connection is to be closed.
    pub fn is_closed(&self) -> bool {
        self.doom.closed.load(Ordering::Acquire)
    }

    /// Whether the connection is to be closed; if not, `cx` is woken when it is.
    pub fn poll_closed(&self, cx: &Context<'_>) -> bool {
        if self.doom.closed.load(Ordering::Acquire) {
            return true;
        }
        self.doom.waker.register(cx.waker());
        self.doom.closed.load(Ordering::Acquire)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut connections = self
            .stalls
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Only this connection's entry: a new one from the same address and port (after this
        // one closed) may have taken the key.
        if connections
            .get(&self.peer)
            .is_some_and(|doom| Arc::ptr_eq(doom, &self.doom))
        {
            connections.remove(&self.peer);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::{Wake, Waker};

    use super::*;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn peer(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn a_connection_closes_at_the_limit_and_wakes_its_task() {
        let stalls = Stalls::new();
        let registration = stalls.register(peer(1000));
        let other = stalls.register(peer(1001));
        let woken = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&woken));
        let cx = Context::from_waker(&waker);
        for _ in 1..STALLS_BEFORE_CLOSE {
            assert!(!stalls.stalled(peer(1000)));
            assert!(!registration.poll_closed(&cx));
        }
        assert_eq!(woken.0.load(Ordering::SeqCst), 0);
        assert!(stalls.stalled(peer(1000)));
        assert_eq!(woken.0.load(Ordering::SeqCst), 1);
        assert!(registration.poll_closed(&cx));
        // Another connection's count is its own.
        assert!(!other.poll_closed(&cx));
    }

    #[test]
    fn a_closed_connection_leaves_no_entry_and_unknown_peers_are_ignored() {
        let stalls = Stalls::new();
        assert!(!stalls.stalled(peer(7)));
        let old = stalls.register(peer(7));
        // The same address and port again, registered before the old one's drop.
        let new = stalls.register(peer(7));
        drop(old);
        for _ in 0..STALLS_BEFORE_CLOSE {
            stalls.stalled(peer(7));
        }
        let waker = Waker::from(Arc::new(Count(AtomicUsize::new(0))));
        assert!(new.poll_closed(&Context::from_waker(&waker)));
        drop(new);
        assert!(stalls.connections.lock().unwrap().is_empty());
    }
}
