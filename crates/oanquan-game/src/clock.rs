//! Time in a game: the time control the players chose, the clock the server keeps, and the
//! deadlines that end a game without anyone calling (a flag falling, a first move not made, a
//! rematch window closing).
//!
//! The clock is plain data in the game's state, charged by the move transition from the time
//! the turn started to the time the move is accepted; no timer runs inside a game. The
//! [`timekeeper`](crate::timekeeper) wakes at each game's [`deadline`] and asks the manager to
//! apply it.

use std::time::{Duration, SystemTime};

use oanquan_rules::{ByPlayer, Player};

/// Shortest initial time of a real-time game.
pub const MIN_INITIAL: Duration = Duration::from_secs(1);
/// Longest initial time of a real-time game: three hours.
pub const MAX_INITIAL: Duration = Duration::from_secs(3 * 3600);
/// Longest increment of a real-time game: three minutes.
pub const MAX_INCREMENT: Duration = Duration::from_secs(180);
/// Shortest time per move of a correspondence game: one minute.
pub const MIN_PER_MOVE: Duration = Duration::from_secs(60);
/// Longest time per move of a correspondence game: thirty days.
pub const MAX_PER_MOVE: Duration = Duration::from_secs(30 * 86_400);

/// How much time the players have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimeControl {
    /// No clock. A player who stops moving can be claimed against after the server's
    /// abandonment time (see [`crate::transition::claim_victory`]).
    #[default]
    Untimed,
    /// Fischer: `initial` each, `increment` added after each of one's moves.
    RealTime {
        /// Each player's time at the start.
        initial: Duration,
        /// Added to the mover's time after each move.
        increment: Duration,
    },
    /// A fixed time for every move; what is left of it is not carried over.
    Correspondence {
        /// Time for each move.
        per_move: Duration,
    },
}

/// Why a time control is refused: the field and what would be right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {description}")]
pub struct TimeControlError {
    /// The field's name within the time control (`initial`, `increment`, `per_move`).
    pub field: &'static str,
    /// What is wrong.
    pub description: String,
}

impl TimeControl {
    /// A checked real-time control.
    ///
    /// # Errors
    ///
    /// [`TimeControlError`] outside [`MIN_INITIAL`]..=[`MAX_INITIAL`] or above
    /// [`MAX_INCREMENT`].
    pub fn real_time(initial: Duration, increment: Duration) -> Result<Self, TimeControlError> {
        if !(MIN_INITIAL..=MAX_INITIAL).contains(&initial) {
            return Err(TimeControlError {
                field: "initial",
                description: format!(
                    "must be between {} and {} (got {})",
                    format_duration(MIN_INITIAL),
                    format_duration(MAX_INITIAL),
                    format_duration(initial)
                ),
            });
        }
        if increment > MAX_INCREMENT {
            return Err(TimeControlError {
                field: "increment",
                description: format!(
                    "must be at most {} (got {})",
                    format_duration(MAX_INCREMENT),
                    format_duration(increment)
                ),
            });
        }
        Ok(TimeControl::RealTime { initial, increment })
    }

    /// A checked correspondence control.
    ///
    /// # Errors
    ///
    /// [`TimeControlError`] outside [`MIN_PER_MOVE`]..=[`MAX_PER_MOVE`].
    pub fn correspondence(per_move: Duration) -> Result<Self, TimeControlError> {
        if !(MIN_PER_MOVE..=MAX_PER_MOVE).contains(&per_move) {
            return Err(TimeControlError {
                field: "per_move",
                description: format!(
                    "must be between {} and {} (got {})",
                    format_duration(MIN_PER_MOVE),
                    format_duration(MAX_PER_MOVE),
                    format_duration(per_move)
                ),
            });
        }
        Ok(TimeControl::Correspondence { per_move })
    }

    /// Whether a clock runs.
    #[must_use]
    pub const fn is_timed(self) -> bool {
        !matches!(self, TimeControl::Untimed)
    }

    /// Each player's time when the game starts.
    #[must_use]
    pub const fn start_time(self) -> Option<Duration> {
        match self {
            TimeControl::Untimed => None,
            TimeControl::RealTime { initial, .. } => Some(initial),
            TimeControl::Correspondence { per_move } => Some(per_move),
        }
    }
}

impl std::fmt::Display for TimeControl {
    /// `untimed`, `3+2` (minutes + seconds, as players say it), `2d per move`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            TimeControl::Untimed => f.write_str("untimed"),
            TimeControl::RealTime { initial, increment } => {
                let secs = initial.as_secs_f64();
                if initial.as_secs() % 60 == 0 && initial.subsec_nanos() == 0 {
                    write!(f, "{}", initial.as_secs() / 60)?;
                } else {
                    write!(f, "{}s", trim(secs))?;
                }
                write!(f, "+{}", trim(increment.as_secs_f64()))
            }
            TimeControl::Correspondence { per_move } => {
                write!(f, "{} per move", format_duration(per_move))
            }
        }
    }
}

fn trim(x: f64) -> String {
    let text = format!("{x:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// `1d 2h`, `3h`, `5m 30s`, `1.5s`: for messages. Exact to the nanosecond, so that a value
/// refused for being a hair past a limit does not read as the limit itself (`3h 0.000000001s`).
#[must_use]
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let seconds = |whole: u64| {
        let nanos = d.subsec_nanos();
        if nanos == 0 {
            format!("{whole}s")
        } else {
            let text = format!("{whole}.{nanos:09}");
            format!("{}s", text.trim_end_matches('0'))
        }
    };
    if secs < 60 {
        return seconds(secs);
    }
    let mut parts: Vec<String> = [
        (secs / 86_400, "d"),
        (secs % 86_400 / 3600, "h"),
        (secs % 3600 / 60, "m"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, unit)| format!("{n}{unit}"))
    .collect();
    if secs % 60 > 0 || d.subsec_nanos() > 0 {
        parts.push(seconds(secs % 60));
    }
    parts.join(" ")
}

/// The server's rules about time that are not the players' choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimePolicy {
    /// Time for each player's first move of a real-time game; missing it aborts the game with
    /// no result (the players' clocks start after both first moves).
    pub first_move: Duration,
    /// In an untimed game, how long the player to move may stay away before the opponent can
    /// claim the win.
    pub abandon_after: Duration,
    /// How long after a game ends a rematch can be offered; zero = no rematches.
    pub rematch_window: Duration,
}

impl Default for TimePolicy {
    fn default() -> Self {
        TimePolicy {
            first_move: Duration::from_secs(30),
            abandon_after: Duration::from_secs(24 * 3600),
            rematch_window: Duration::from_secs(120),
        }
    }
}

/// A timed game's clock as stored: each player's time left when the current turn started
/// ([`GameInfo::turn_started`]), and the first-move time fixed when the game was created (so a
/// server restarted with another policy does not change running games).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// Time left, as of the start of the current turn (for a game over: at its end).
    pub remaining: ByPlayer<Duration>,
    /// Time for each player's first move (real time), see [`TimePolicy::first_move`].
    pub first_move: Duration,
}

impl Clock {
    /// A fresh clock for `control`, `None` when untimed.
    #[must_use]
    pub fn new(control: TimeControl, policy: &TimePolicy) -> Option<Clock> {
        let start = control.start_time()?;
        Some(Clock {
            remaining: ByPlayer::new(start, start),
            first_move: match control {
                // A day-long move needs no shorter first one.
                TimeControl::Correspondence { per_move } => per_move,
                _ => policy.first_move,
            },
        })
    }
}

/// What happens at a [`Deadline`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeadlineKind {
    /// `player` has not made their first move: the game is aborted, no result.
    FirstMove {
        /// The player to move.
        player: Player,
    },
    /// `player`'s time runs out: the opponent wins on time.
    Flag {
        /// The player to move.
        player: Player,
    },
    /// The rematch window closes.
    RematchWindow,
}

/// When something happens to a game by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Deadline {
    /// When.
    pub at: SystemTime,
    /// What.
    pub kind: DeadlineKind,
}

/// The clocks at one instant, as clients are told: each player's time left at `measured_at`,
/// and whose clock is running from then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReading {
    /// Time left at `measured_at`.
    pub remaining: ByPlayer<Duration>,
    /// The server time of the reading.
    pub measured_at: SystemTime,
    /// The player whose time is running (none while waiting, during the first moves and
    /// once over).
    pub running: Option<Player>,
    /// When the player to move must have moved (first-move limit or flag); none once over.
    pub deadline: Option<SystemTime>,
}

/// What the rematch of a finished game is at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rematch {
    /// The game this one is a rematch of.
    pub of: Option<crate::id::GameId>,
    /// The rematch of this game, once both asked.
    pub next: Option<crate::id::GameId>,
    /// Who has offered a rematch (that the opponent has not answered).
    pub offered_by: Option<Player>,
    /// Until when a rematch can be offered: set when the game finishes (with a window), cleared
    /// when the rematch starts, is declined, or the window closes.
    pub open_until: Option<SystemTime>,
}

impl Rematch {
    /// Until when a rematch can still be offered, if it can.
    #[must_use]
    pub fn open_until(&self) -> Option<SystemTime> {
        if self.next.is_some() {
            None
        } else {
            self.open_until
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_controls_are_bounded_and_display_as_players_say_them() {
        let tc = TimeControl::real_time(Duration::from_secs(180), Duration::from_secs(2)).unwrap();
        assert_eq!(tc.to_string(), "3+2");
        let tc = TimeControl::real_time(Duration::from_secs(1), Duration::ZERO).unwrap();
        assert_eq!(tc.to_string(), "1s+0");
        let tc = TimeControl::correspondence(Duration::from_secs(2 * 86_400)).unwrap();
        assert_eq!(tc.to_string(), "2d per move");
        assert_eq!(
            TimeControl::real_time(Duration::ZERO, Duration::ZERO)
                .unwrap_err()
                .field,
            "initial"
        );
        assert_eq!(
            TimeControl::real_time(MAX_INITIAL + Duration::from_nanos(1), Duration::ZERO)
                .unwrap_err()
                .field,
            "initial"
        );
        assert_eq!(
            TimeControl::real_time(MIN_INITIAL, MAX_INCREMENT + Duration::from_secs(1))
                .unwrap_err()
                .field,
            "increment"
        );
        assert!(TimeControl::correspondence(Duration::from_secs(59)).is_err());
        assert!(TimeControl::correspondence(MAX_PER_MOVE * 2).is_err());
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_secs(93_784)), "1d 2h 3m 4s");
        assert_eq!(format_duration(Duration::ZERO), "0s");
        assert_eq!(format_duration(Duration::from_secs(3 * 3600)), "3h");
        // A hair past a limit does not read as the limit.
        assert_eq!(
            format_duration(Duration::from_secs(3 * 3600) + Duration::from_nanos(1)),
            "3h 0.000000001s"
        );
        assert_eq!(
            format_duration(Duration::from_nanos(999_999_999)),
            "0.999999999s"
        );
        assert_eq!(format_duration(Duration::from_millis(180_500)), "3m 0.5s");
    }
}
