//! The players' clocks as the client shows them: the server's last reading, counted down
//! locally from the moment it arrived.
//!
//! The server's clock is the only one that counts. Each event carries the remaining times as
//! the server measured them; the client takes them as the times left *when the event arrived*
//! and subtracts what its own monotonic clock says has passed since. It never compares the
//! server's timestamps with its own wall clock: the two machines' clocks may disagree by
//! seconds. Differences between two server timestamps (the first-move deadline minus the
//! reading's time) are safe and used.

use std::time::{Duration, Instant, SystemTime};

use oanquan_proto::v1::Clocks;

use crate::moves::Side;
use crate::timecontrol::from_proto_duration;

/// One clock reading, anchored at the local instant it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalClocks {
    /// Time left at `received`, first player then second.
    remaining: [Duration; 2],
    /// Whose clock runs from `received`.
    running: Option<Side>,
    /// When no clock runs yet (the first moves): the player to move's deadline.
    first_move: Option<FirstMove>,
    received: Instant,
}

/// A first-move deadline: the server's, and when it falls by this client's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FirstMove {
    deadline: SystemTime,
    due: Instant,
}

/// A server timestamp as a `SystemTime`, for subtracting two of them; `None` if malformed.
pub fn system_time(t: Option<&prost_types::Timestamp>) -> Option<SystemTime> {
    let t = t?;
    let secs = u64::try_from(t.seconds).ok()?;
    let nanos = u32::try_from(t.nanos).ok().filter(|n| *n < 1_000_000_000)?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

/// `later - earlier` between two server timestamps, zero if `later` is not later.
pub fn server_span(
    earlier: Option<&prost_types::Timestamp>,
    later: Option<&prost_types::Timestamp>,
) -> Option<Duration> {
    let (earlier, later) = (system_time(earlier)?, system_time(later)?);
    Some(later.duration_since(earlier).unwrap_or_default())
}

impl LocalClocks {
    /// Takes a reading that arrived at `received`.
    pub fn new(clocks: &Clocks, received: Instant) -> Self {
        let running = Side::from_i32(clocks.running);
        let first_move = if running.is_none() {
            server_span(clocks.measured_at.as_ref(), clocks.deadline.as_ref()).and_then(|left| {
                Some(FirstMove {
                    deadline: system_time(clocks.deadline.as_ref())?,
                    due: received.checked_add(left)?,
                })
            })
        } else {
            None
        };
        Self {
            remaining: [
                from_proto_duration(clocks.first_remaining.as_ref()),
                from_proto_duration(clocks.second_remaining.as_ref()),
            ],
            running,
            first_move,
            received,
        }
    }

    /// Takes over an earlier reading's estimate of the same first-move deadline when it falls
    /// sooner. Every reading of one deadline names the same server instant, but one that
    /// arrived late (a replayed event after a reconnect, a snapshot built before it was sent)
    /// makes it look later: the soonest estimate is the closest, and with one instant the board
    /// and the clock line count down together instead of seconds apart.
    pub fn keep_sooner_deadline(&mut self, earlier: &LocalClocks) {
        if let (Some(mine), Some(theirs)) = (self.first_move.as_mut(), earlier.first_move)
            && mine.deadline == theirs.deadline
            && theirs.due < mine.due
        {
            mine.due = theirs.due;
        }
    }

    /// The player's time left at `now`: the reading, less the time passed since it arrived if
    /// their clock runs. Never below zero: the flag falls on the server, not here.
    pub fn remaining(&self, side: Side, now: Instant) -> Duration {
        let at_receipt = self.remaining[usize::from(side == Side::Second)];
        if self.running == Some(side) {
            at_receipt.saturating_sub(now.saturating_duration_since(self.received))
        } else {
            at_receipt
        }
    }

    /// Whose clock runs.
    pub fn running(&self) -> Option<Side> {
        self.running
    }

    /// During a player's first move (no clock runs): the time left to make it.
    pub fn first_move_left(&self, now: Instant) -> Option<Duration> {
        self.first_move
            .map(|f| f.due.saturating_duration_since(now))
    }

    /// Whether something counts down (worth redrawing every second).
    pub fn ticking(&self) -> bool {
        self.running.is_some() || self.first_move.is_some()
    }

    /// The game ended: the times stay as they are, nothing runs.
    pub fn stop(&mut self, now: Instant) {
        for side in [Side::First, Side::Second] {
            self.remaining[usize::from(side == Side::Second)] = self.remaining(side, now);
        }
        self.running = None;
        self.first_move = None;
        self.received = now;
    }
}

/// A clock as players read one: `4:59`, `1:02:03` from an hour, `2d 3h` from a day, and with
/// tenths under ten seconds (`0:09.4`), where they matter. Rounded down, as chess clocks do:
/// `0:00` is shown only when the time is really gone.
pub fn format_clock(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 86_400 {
        return format!("{}d {}h", secs / 86_400, secs % 86_400 / 3600);
    }
    if secs >= 3600 {
        return format!("{}:{:02}:{:02}", secs / 3600, secs % 3600 / 60, secs % 60);
    }
    if secs >= 10 {
        return format!("{}:{:02}", secs / 60, secs % 60);
    }
    format!("0:0{secs}.{}", d.subsec_millis() / 100)
}

/// The stable one-line summary (see `play --help`):
/// `clocks: first 2:58 (running), second 3:00`, or during the first moves
/// `clocks: first 1:00, second 1:00; first moves first, within 0:27`.
pub fn clocks_line(clocks: &LocalClocks, to_move: Option<Side>, now: Instant) -> String {
    let one = |side: Side| {
        let running = if clocks.running() == Some(side) {
            " (running)"
        } else {
            ""
        };
        format!(
            "{side} {}{running}",
            format_clock(clocks.remaining(side, now))
        )
    };
    let mut line = format!("clocks: {}, {}", one(Side::First), one(Side::Second));
    if let (Some(left), Some(side)) = (clocks.first_move_left(now), to_move) {
        line.push_str(&format!(
            "; {side} to make their first move within {}",
            format_clock(left)
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use oanquan_proto::v1::Player;

    fn dur(secs: i64, nanos: i32) -> prost_types::Duration {
        prost_types::Duration {
            seconds: secs,
            nanos,
        }
    }

    fn at(secs: i64) -> prost_types::Timestamp {
        prost_types::Timestamp {
            seconds: 1_700_000_000 + secs,
            nanos: 0,
        }
    }

    fn reading(first: i64, second: i64, running: Player, deadline: Option<i64>) -> Clocks {
        Clocks {
            first_remaining: Some(dur(first, 0)),
            second_remaining: Some(dur(second, 0)),
            measured_at: Some(at(0)),
            running: running.into(),
            deadline: deadline.map(at),
        }
    }

    #[test]
    fn formats_like_a_chess_clock() {
        let ms = Duration::from_millis;
        for (d, want) in [
            (Duration::from_secs(299), "4:59"),
            (Duration::from_secs(300), "5:00"),
            (ms(59_999), "0:59"),
            (Duration::from_secs(10), "0:10"),
            (ms(9_999), "0:09.9"),
            (ms(9_400), "0:09.4"),
            (ms(99), "0:00.0"),
            (Duration::ZERO, "0:00.0"),
            (Duration::from_secs(3600), "1:00:00"),
            (Duration::from_secs(3723), "1:02:03"),
            (Duration::from_secs(86_399), "23:59:59"),
            (Duration::from_secs(2 * 86_400 + 3 * 3600 + 59), "2d 3h"),
            (Duration::MAX, "213503982334601d 7h"),
        ] {
            assert_eq!(format_clock(d), want, "{d:?}");
        }
    }

    #[test]
    fn the_running_clock_counts_down_from_receipt() {
        let t0 = Instant::now();
        let c = LocalClocks::new(&reading(180, 170, Player::Second, Some(170)), t0);
        let later = t0 + Duration::from_millis(2500);
        assert_eq!(c.remaining(Side::First, later), Duration::from_secs(180));
        assert_eq!(
            c.remaining(Side::Second, later),
            Duration::from_millis(167_500)
        );
        assert!(c.ticking());
        assert_eq!(
            c.first_move_left(later),
            None,
            "a clock runs: no first move"
        );
        // It stops at zero, whatever the delay.
        assert_eq!(
            c.remaining(Side::Second, t0 + Duration::from_secs(1000)),
            Duration::ZERO
        );
        // A reading from before `received` (an instant in the past) does not run backwards.
        assert_eq!(
            c.remaining(Side::Second, t0 - Duration::from_secs(1)),
            Duration::from_secs(170)
        );
        assert_eq!(
            clocks_line(&c, Some(Side::Second), later),
            "clocks: first 3:00, second 2:47 (running)"
        );
    }

    #[test]
    fn a_new_reading_corrects_the_local_count() {
        let t0 = Instant::now();
        let before = LocalClocks::new(&reading(60, 60, Player::First, Some(60)), t0);
        let t1 = t0 + Duration::from_secs(5);
        assert_eq!(before.remaining(Side::First, t1), Duration::from_secs(55));
        // The server says first had 57 s left when its move was accepted (+2 increment):
        // that, not the local count, is what is shown from then on.
        let after = LocalClocks::new(&reading(57, 60, Player::Second, Some(60)), t1);
        let t2 = t1 + Duration::from_secs(1);
        assert_eq!(after.remaining(Side::First, t2), Duration::from_secs(57));
        assert_eq!(after.remaining(Side::Second, t2), Duration::from_secs(59));
    }

    #[test]
    fn first_move_deadline_from_server_times_only() {
        let t0 = Instant::now();
        let c = LocalClocks::new(&reading(60, 60, Player::Unspecified, Some(30)), t0);
        assert!(c.ticking());
        let later = t0 + Duration::from_secs(3);
        assert_eq!(c.first_move_left(later), Some(Duration::from_secs(27)));
        assert_eq!(c.remaining(Side::First, later), Duration::from_secs(60));
        assert_eq!(
            clocks_line(&c, Some(Side::First), later),
            "clocks: first 1:00, second 1:00; first to make their first move within 0:27"
        );
        assert_eq!(
            c.first_move_left(t0 + Duration::from_secs(99)),
            Some(Duration::ZERO)
        );
        // A deadline before the reading (late delivery) is no time at all, not a panic.
        let late = LocalClocks::new(&reading(60, 60, Player::Unspecified, Some(-5)), t0);
        assert_eq!(late.first_move_left(t0), Some(Duration::ZERO));
    }

    #[test]
    fn readings_of_one_deadline_count_down_to_one_instant() {
        let t0 = Instant::now();
        let fresh = LocalClocks::new(&reading(60, 60, Player::Unspecified, Some(30)), t0);
        // The same deadline, read 2 s before it arrived at t0 + 1 s (a replayed event): on its
        // own it would put the deadline 3 s later than the fresh reading does.
        let stale = Clocks {
            measured_at: Some(at(-2)),
            ..reading(60, 60, Player::Unspecified, Some(30))
        };
        let mut later = LocalClocks::new(&stale, t0 + Duration::from_secs(1));
        let now = t0 + Duration::from_secs(5);
        assert_eq!(later.first_move_left(now), Some(Duration::from_secs(28)));
        later.keep_sooner_deadline(&fresh);
        assert_eq!(later.first_move_left(now), fresh.first_move_left(now));
        assert_eq!(later.first_move_left(now), Some(Duration::from_secs(25)));
        // Another deadline (the second player's first move) is not mixed in.
        let mut second = LocalClocks::new(&reading(60, 60, Player::Unspecified, Some(90)), now);
        second.keep_sooner_deadline(&fresh);
        assert_eq!(second.first_move_left(now), Some(Duration::from_secs(90)));
    }

    #[test]
    fn game_over_and_junk_readings() {
        let t0 = Instant::now();
        let mut c = LocalClocks::new(&reading(10, 20, Player::First, Some(10)), t0);
        c.stop(t0 + Duration::from_secs(4));
        assert!(!c.ticking());
        assert_eq!(
            c.remaining(Side::First, t0 + Duration::from_secs(60)),
            Duration::from_secs(6)
        );
        let junk = Clocks {
            first_remaining: Some(dur(-3, 0)),
            second_remaining: None,
            measured_at: Some(prost_types::Timestamp {
                seconds: -1,
                nanos: 5,
            }),
            running: 42,
            deadline: Some(at(1)),
        };
        let c = LocalClocks::new(&junk, t0);
        assert_eq!(c.remaining(Side::First, t0), Duration::ZERO);
        assert_eq!(c.running(), None);
        assert_eq!(c.first_move_left(t0), None, "no usable reading time");
        assert_eq!(system_time(None), None);
    }
}
