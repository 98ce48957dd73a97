//! A failure that repeats every second or so while the database is away (a listener, a
//! heartbeat, a session reopened with backoff), logged as an operator wants to read it: the
//! first at WARN, then one line a minute saying how many more there were, and the recovery at
//! INFO. Logged at each attempt, an outside probe's hour of outage would have written 18,000
//! lines.

use std::fmt::Display;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

/// How often a failure that goes on is said again.
const REPEAT: Duration = Duration::from_secs(60);

/// One repeating attempt's failures.
#[derive(Debug)]
pub struct Outage {
    /// What fails, as the warning says it ("cannot listen for seek changes").
    failing: &'static str,
    /// What works again, as the recovery says it ("listening for seek changes again").
    recovered: &'static str,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    since: Option<Instant>,
    said_at: Option<Instant>,
    unsaid: u64,
}

impl Outage {
    /// An outage of an attempt that says `failing` when it fails and `recovered` when it
    /// works again.
    #[must_use]
    pub const fn new(failing: &'static str, recovered: &'static str) -> Outage {
        Outage {
            failing,
            recovered,
            state: Mutex::new(State {
                since: None,
                said_at: None,
                unsaid: 0,
            }),
        }
    }

    /// An attempt failed with `error`.
    pub fn failed(&self, error: &dyn Display) {
        self.failed_at(error, Instant::now());
    }

    /// Whether the failure was said (for tests).
    fn failed_at(&self, error: &dyn Display, now: Instant) -> bool {
        let mut state = self.lock();
        state.since.get_or_insert(now);
        match state.said_at {
            Some(at) if now.saturating_duration_since(at) < REPEAT => {
                state.unsaid += 1;
                debug!(%error, "{}; trying again", self.failing);
                false
            }
            _ => {
                let failing_for = now.saturating_duration_since(state.since.unwrap_or(now));
                warn!(%error, failed_again = state.unsaid, ?failing_for,
                    "{}; trying again", self.failing);
                state.said_at = Some(now);
                state.unsaid = 0;
                true
            }
        }
    }

    /// An attempt worked: a failure before it is said to be over.
    pub fn succeeded(&self) {
        let mut state = self.lock();
        if let Some(since) = state.since.take() {
            info!(failed_for = ?since.elapsed(), "{}", self.recovered);
            *state = State::default();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_said_once_a_minute_and_again_after_a_recovery() {
        let outage = Outage::new("cannot listen", "listening again");
        let t0 = Instant::now();
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        assert!(outage.failed_at(&"refused", at(0)));
        // Every attempt of the next minute: not said.
        assert!((1..60).all(|s| !outage.failed_at(&"refused", at(s))));
        assert_eq!(outage.lock().unsaid, 59);
        assert!(outage.failed_at(&"refused", at(60)));
        assert_eq!(outage.lock().unsaid, 0);
        outage.succeeded();
        assert!(outage.lock().since.is_none());
        // A new outage is said at once.
        assert!(outage.failed_at(&"refused", at(61)));
    }
}
