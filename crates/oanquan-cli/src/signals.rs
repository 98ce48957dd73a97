//! Ctrl-C (SIGINT) as a future that is listening from the moment it is made.
//!
//! `tokio::signal::ctrl_c()` installs its handler only when first polled; a `select!` that
//! happens to take another ready branch first prints its line (`seek …: waiting`) before the
//! handler exists, and a Ctrl-C right after it kills the process the default way: no
//! `withdrawn` line, no exit code 130. Registering here, before anything is printed, closes
//! that window.

use std::future::Future;
use std::io;

/// A future that completes at the next Ctrl-C, listening from now on. `Err` when the handler
/// cannot be installed (SIGINT then keeps its default: the process ends).
pub fn interrupt() -> impl Future<Output = io::Result<()>> {
    #[cfg(unix)]
    {
        let signal = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
        async move {
            let mut signal = signal?;
            signal.recv().await;
            Ok(())
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c()
    }
}

/// Ctrl-C as a stream of presses for work that is awaited inside a `select!` branch (a move's
/// animation), where the caller's own [`interrupt`] is not polled: each listener hears every
/// press, so the work stops early and the caller's future still sees the same press.
pub struct Presses {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Presses {
    /// Listening from now on; a handler that cannot be installed never reports a press.
    pub fn new() -> Presses {
        Presses {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok(),
        }
    }

    /// The next press.
    pub async fn next(&mut self) {
        #[cfg(unix)]
        if let Some(signal) = self.signal.as_mut() {
            signal.recv().await;
            return;
        }
        std::future::pending::<()>().await;
    }
}
