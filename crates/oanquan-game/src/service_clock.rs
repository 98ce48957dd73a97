//! The service's clock: what every node reads as "now" for games, seeks and keys.
//!
//! One node reads its system clock. Several nodes on one database must read one clock, or a
//! node running fast refuses moves in time and lets flags fall early, and one running slow
//! charges nothing for a move (an outside probe ran a node under `faketime` and saw each). A
//! shared store measures how far this node's clock is from the database's
//! ([`ClockOffset::sample`]) and the service's clock is the system clock corrected by it.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

/// The offset added to this node's system clock, in nanoseconds (positive: the shared clock is
/// ahead). Process-wide: every part of a node reads the same clock.
static OFFSET_NANOS: AtomicI64 = AtomicI64::new(0);

/// The service's time now: the system clock, corrected by the last offset measured.
#[must_use]
pub fn now() -> SystemTime {
    shifted(SystemTime::now(), OFFSET_NANOS.load(Ordering::Relaxed))
}

fn shifted(time: SystemTime, nanos: i64) -> SystemTime {
    let by = Duration::from_nanos(nanos.unsigned_abs());
    if nanos >= 0 {
        time.checked_add(by).unwrap_or(time)
    } else {
        time.checked_sub(by).unwrap_or(time)
    }
}

/// The offset in force, in nanoseconds.
#[must_use]
pub fn offset_nanos() -> i64 {
    OFFSET_NANOS.load(Ordering::Relaxed)
}

/// One measurement of the shared clock against this node's.
#[derive(Debug, Clone, Copy)]
pub struct ClockSample {
    /// This node's system clock when the question was sent.
    pub sent: SystemTime,
    /// The shared clock's answer.
    pub shared: SystemTime,
    /// How long the answer took.
    pub round_trip: Duration,
}

/// Answers slower than this say too little about the offset (it is known to half of it).
pub const MAX_ROUND_TRIP: Duration = Duration::from_millis(100);

/// Takes `sample` as the service's offset when it is good and says something new. Returns the
/// offset in force afterwards, in nanoseconds.
///
/// The shared clock read its time about half a round trip after `sent`. A sample moves the
/// offset only when it differs from it by more than that uncertainty (and at least 5 ms), so
/// that the clock does not jitter with each measurement.
pub fn sample(sample: ClockSample) -> i64 {
    let next = next_offset(OFFSET_NANOS.load(Ordering::Relaxed), sample);
    OFFSET_NANOS.store(next, Ordering::Relaxed);
    next
}

/// The offset after `sample`, from `current`.
fn next_offset(current: i64, sample: ClockSample) -> i64 {
    match offset_of(sample) {
        Some(measured) if measured.abs_diff(current) > uncertainty(sample) => measured,
        _ => current,
    }
}

/// The offset `sample` measures, unless its round trip is too slow to say.
fn offset_of(sample: ClockSample) -> Option<i64> {
    if sample.round_trip > MAX_ROUND_TRIP {
        return None;
    }
    let local = sample.sent.checked_add(sample.round_trip / 2)?;
    let nanos = |d: Duration| i64::try_from(d.as_nanos()).ok();
    match sample.shared.duration_since(local) {
        Ok(ahead) => nanos(ahead),
        Err(behind) => nanos(behind.duration()).map(|n| -n),
    }
}

fn uncertainty(sample: ClockSample) -> u64 {
    let half = u64::try_from((sample.round_trip / 2).as_nanos()).unwrap_or(u64::MAX);
    half.max(5_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Duration = Duration::from_secs(1_800_000_000);

    fn at(ms: i64) -> SystemTime {
        shifted(SystemTime::UNIX_EPOCH + T0, ms * 1_000_000)
    }

    #[test]
    fn offsets_come_from_good_samples_and_move_only_beyond_their_uncertainty() {
        // Pure: the process-wide offset is left alone, other tests read the clock meanwhile.
        let rtt = Duration::from_millis(2);
        let sample_of = |shared_ms: i64| ClockSample {
            sent: at(0),
            shared: at(shared_ms),
            round_trip: rtt,
        };
        // The database 3 s ahead (its answer read 1 ms into the 2 ms round trip).
        let ahead = next_offset(0, sample_of(3_001));
        assert_eq!(ahead, 3_000_000_000);
        // Within 5 ms of the offset in force: no change.
        assert_eq!(next_offset(ahead, sample_of(3_004)), ahead);
        // A slow answer says nothing.
        let slow = ClockSample {
            round_trip: Duration::from_millis(500),
            ..sample_of(-7_000)
        };
        assert_eq!(next_offset(ahead, slow), ahead);
        // Behind: a negative offset, which moves the service's clock back.
        let behind = next_offset(ahead, sample_of(-1_999));
        assert_eq!(behind, -2_000_000_000);
        assert_eq!(shifted(at(0), behind), at(-2_000));
        assert_eq!(shifted(at(0), ahead), at(3_000));
    }
}
