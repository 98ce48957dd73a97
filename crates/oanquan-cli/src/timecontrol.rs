//! Time controls as players write them (`5+3`, `90s+0`, `2d`) and as the API carries them.
//!
//! The parsers check the server's bounds too (initial time 1 s to 3 h, increment up to 180 s,
//! correspondence 1 minute to 30 days), so that a typo is explained in the terms the player
//! typed instead of as an API field name after a round trip.

use std::fmt;
use std::time::Duration;

use oanquan_proto::v1::{TimeControl as ProtoTimeControl, time_control};

/// Shortest initial time of a real-time game (the server's bound).
const MIN_INITIAL: Duration = Duration::from_secs(1);
/// Longest initial time of a real-time game: three hours.
const MAX_INITIAL: Duration = Duration::from_secs(3 * 3600);
/// Longest increment: three minutes.
const MAX_INCREMENT: Duration = Duration::from_secs(180);
/// Shortest time per move of a correspondence game: one minute.
const MIN_PER_MOVE: Duration = Duration::from_secs(60);
/// Longest time per move of a correspondence game: thirty days.
const MAX_PER_MOVE: Duration = Duration::from_secs(30 * 86_400);
/// `seek --computer-after`: the server's bounds.
const MIN_COMPUTER_AFTER: Duration = Duration::from_secs(1);
const MAX_COMPUTER_AFTER: Duration = Duration::from_secs(600);

/// How much time the players have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeControl {
    #[default]
    Untimed,
    /// Fischer: `initial` each, `increment` added after each move.
    RealTime {
        initial: Duration,
        increment: Duration,
    },
    /// A fixed time for every move.
    Correspondence { per_move: Duration },
}

impl TimeControl {
    /// The API's message; `None` for untimed (the field is left unset).
    pub fn to_proto(self) -> Option<ProtoTimeControl> {
        let kind = match self {
            TimeControl::Untimed => return None,
            TimeControl::RealTime { initial, increment } => {
                time_control::Kind::RealTime(time_control::RealTime {
                    initial: Some(to_proto_duration(initial)),
                    increment: Some(to_proto_duration(increment)),
                })
            }
            TimeControl::Correspondence { per_move } => {
                time_control::Kind::Correspondence(time_control::Correspondence {
                    per_move: Some(to_proto_duration(per_move)),
                })
            }
        };
        Some(ProtoTimeControl { kind: Some(kind) })
    }

    /// Reads the API's message; an unset one (or one with neither case) is untimed.
    pub fn from_proto(tc: Option<&ProtoTimeControl>) -> Self {
        match tc.and_then(|t| t.kind.as_ref()) {
            None => TimeControl::Untimed,
            Some(time_control::Kind::RealTime(rt)) => TimeControl::RealTime {
                initial: from_proto_duration(rt.initial.as_ref()),
                increment: from_proto_duration(rt.increment.as_ref()),
            },
            Some(time_control::Kind::Correspondence(c)) => TimeControl::Correspondence {
                per_move: from_proto_duration(c.per_move.as_ref()),
            },
        }
    }
}

impl fmt::Display for TimeControl {
    /// `untimed`, `3+2` (minutes + seconds), `90s+0`, `2d per move`: what the parsers read
    /// back (less ` per move`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TimeControl::Untimed => f.write_str("untimed"),
            TimeControl::RealTime { initial, increment } => {
                if initial.as_secs() % 60 == 0 && initial.subsec_nanos() == 0 {
                    write!(f, "{}", initial.as_secs() / 60)?;
                } else {
                    write!(f, "{}s", decimal(initial))?;
                }
                write!(f, "+{}", decimal(increment))
            }
            TimeControl::Correspondence { per_move } => {
                write!(f, "{} per move", format_span(per_move))
            }
        }
    }
}

/// Seconds with up to three decimals, no trailing zeros: `90`, `1.5`.
fn decimal(d: Duration) -> String {
    let text = format!("{:.3}", d.as_secs_f64());
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// `2d`, `1d 12h`, `30m`, `1.5s`: a span in its largest whole units, for messages.
pub fn format_span(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 || (secs < 60 && d.subsec_nanos() != 0) {
        return format!("{}s", decimal(d));
    }
    let parts = [
        (secs / 86_400, "d"),
        (secs % 86_400 / 3600, "h"),
        (secs % 3600 / 60, "m"),
        (secs % 60, "s"),
    ];
    parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn to_proto_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// A duration from the server; negative or malformed ones read as zero (a clock that has run
/// out), absurdly long ones are capped rather than overflowing.
pub fn from_proto_duration(d: Option<&prost_types::Duration>) -> Duration {
    let Some(d) = d else {
        return Duration::ZERO;
    };
    if d.seconds < 0 || (d.seconds == 0 && d.nanos <= 0) {
        return Duration::ZERO;
    }
    let secs = u64::try_from(d.seconds).unwrap_or(0);
    let nanos = u32::try_from(d.nanos.clamp(0, 999_999_999)).unwrap_or(0);
    Duration::new(secs, nanos)
}

/// Time units a player may write, in nanoseconds.
const SECOND: u128 = 1_000_000_000;
const MINUTE: u128 = 60 * SECOND;
const HOUR: u128 = 60 * MINUTE;
const DAY: u128 = 24 * HOUR;

fn unit(word: &str) -> Option<u128> {
    match word {
        "s" | "sec" | "secs" | "second" | "seconds" => Some(SECOND),
        "m" | "min" | "mins" | "minute" | "minutes" => Some(MINUTE),
        "h" | "hour" | "hours" => Some(HOUR),
        "d" | "day" | "days" => Some(DAY),
        _ => None,
    }
}

/// One amount such as `5`, `1.5`, `90s`, `2d`: a decimal number (at most three decimals, no
/// sign, no exponent) and an optional unit; without a unit `default` applies, or the amount is
/// refused when there is none. `what` names the amount in messages.
fn parse_amount(text: &str, default: Option<u128>, what: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("the {what} is missing"));
    }
    if text.starts_with('-') {
        return Err(format!("the {what} `{text}` is negative"));
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, word) = text.split_at(split);
    let word = word.trim();
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return Err(format!("the {what} `{text}` is not a number"));
    }
    if fraction.contains('.') || fraction.len() > 3 {
        return Err(format!(
            "the {what} `{text}` is not a number with at most three decimals"
        ));
    }
    let unit = if word.is_empty() {
        default.ok_or_else(|| {
            format!("the {what} `{text}` needs a unit: d (days), h (hours) or m (minutes)")
        })?
    } else {
        unit(&word.to_ascii_lowercase()).ok_or_else(|| {
            // `3h1s`: a unit, then more. Said as such, not as a unit `h1s` nobody wrote.
            let first_unit: String = word.chars().take_while(char::is_ascii_alphabetic).collect();
            if first_unit.len() < word.len() && unit(&first_unit.to_ascii_lowercase()).is_some() {
                format!(
                    "the {what} `{text}` mixes units: give one number and one unit (s, m, h \
                     or d), such as 90s or 1.5m"
                )
            } else {
                format!(
                    "`{}` in the {what} `{text}` is not a unit: use s, m, h or d",
                    word.escape_debug()
                )
            }
        })?
    };
    // Anything this long is refused by the bounds anyway; capping the digits keeps the
    // arithmetic below from overflowing.
    let whole = whole.trim_start_matches('0');
    if whole.len() > 9 {
        return Err(format!("the {what} `{text}` is far too long"));
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole
            .parse()
            .map_err(|_| format!("the {what} `{text}` is not a number"))?
    };
    let fraction_value: u128 = if fraction.is_empty() {
        0
    } else {
        let padded = format!("{fraction:0<3}");
        padded
            .parse()
            .map_err(|_| format!("the {what} `{text}` is not a number"))?
    };
    let nanos = whole * unit + fraction_value * unit / 1000;
    let secs = u64::try_from(nanos / SECOND).map_err(|_| format!("the {what} is far too long"))?;
    let sub = u32::try_from(nanos % SECOND).unwrap_or(0);
    Ok(Duration::new(secs, sub))
}

/// `--time` and `seek TIME`: `MINUTES+SECONDS` (`5+3`, `1+0`, `0.5+0`), the initial time with
/// a unit (`90s+0`, `1h+30`), or `untimed`.
///
/// # Errors
///
/// A message saying what is wrong and how to write it.
pub fn parse_time(text: &str) -> Result<TimeControl, String> {
    let trimmed = text.trim();
    if trimmed.eq_ignore_ascii_case("untimed") || trimmed.eq_ignore_ascii_case("none") {
        return Ok(TimeControl::Untimed);
    }
    let how = "write MINUTES+SECONDS, e.g. 5+3, 1+0 or 90s+0 (or `untimed`)";
    let Some((initial, increment)) = trimmed.split_once('+') else {
        return Err(format!("`{trimmed}` is not a time control: {how}"));
    };
    if increment.contains('+') {
        return Err(format!("`{trimmed}` is not a time control: {how}"));
    }
    let initial =
        parse_amount(initial, Some(MINUTE), "initial time").map_err(|e| format!("{e}: {how}"))?;
    let increment =
        parse_amount(increment, Some(SECOND), "increment").map_err(|e| format!("{e}: {how}"))?;
    if !(MIN_INITIAL..=MAX_INITIAL).contains(&initial) {
        return Err(format!(
            "the initial time must be between 1 second and 3 hours, not {} (e.g. 5+3, or 30s+0)",
            format_span(initial)
        ));
    }
    if increment > MAX_INCREMENT {
        return Err(format!(
            "the increment must be at most 180 seconds, not {}",
            format_span(increment)
        ));
    }
    Ok(TimeControl::RealTime { initial, increment })
}

/// `--correspondence`: a time per move with its unit: `2d`, `12h`, `30m`.
///
/// # Errors
///
/// A message saying what is wrong and how to write it.
pub fn parse_correspondence(text: &str) -> Result<TimeControl, String> {
    let per_move = parse_amount(text, None, "time per move")
        .map_err(|e| format!("{e}; e.g. 2d, 12h or 30m"))?;
    if !(MIN_PER_MOVE..=MAX_PER_MOVE).contains(&per_move) {
        return Err(format!(
            "the time per move must be between 1 minute and 30 days, not {}",
            format_span(per_move)
        ));
    }
    Ok(TimeControl::Correspondence { per_move })
}

/// `seek --computer-after`: seconds, or with a unit (`30s`, `2m`), 1 second to 10 minutes.
///
/// # Errors
///
/// A message saying what is wrong.
pub fn parse_wait(text: &str) -> Result<Duration, String> {
    let wait = parse_amount(text, Some(SECOND), "wait")?;
    if !(MIN_COMPUTER_AFTER..=MAX_COMPUTER_AFTER).contains(&wait) {
        return Err(format!(
            "the wait must be between 1 second and 10 minutes, not {}",
            format_span(wait)
        ));
    }
    Ok(wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn real(initial: u64, increment: u64) -> TimeControl {
        TimeControl::RealTime {
            initial: Duration::from_secs(initial),
            increment: Duration::from_secs(increment),
        }
    }

    #[test]
    fn reads_time_controls_as_players_write_them() {
        for (text, want) in [
            ("5+3", real(300, 3)),
            ("1+0", real(60, 0)),
            (" 3 + 2 ", real(180, 2)),
            ("90s+0", real(90, 0)),
            ("1s+0", real(1, 0)),
            ("1h+30", real(3600, 30)),
            ("180+180", real(10_800, 180)),
            ("2m+5s", real(120, 5)),
            ("0.5+0", real(30, 0)),
            ("05+03", real(300, 3)),
            ("untimed", TimeControl::Untimed),
            ("UNTIMED", TimeControl::Untimed),
        ] {
            assert_eq!(parse_time(text), Ok(want), "{text:?}");
        }
        assert_eq!(
            parse_time("1.5s+0.25"),
            Ok(TimeControl::RealTime {
                initial: Duration::from_millis(1500),
                increment: Duration::from_millis(250),
            })
        );
    }

    #[test]
    fn refuses_bad_time_controls_with_a_reason() {
        for (text, needle) in [
            ("0+3", "between 1 second and 3 hours, not 0s"),
            ("0+0", "between 1 second and 3 hours"),
            ("0.5s+0", "between 1 second and 3 hours, not 0.5s"),
            ("181+0", "between 1 second and 3 hours, not 3h 1m"),
            ("99999999999999999999+0", "far too long"),
            ("5+181", "at most 180 seconds, not 3m 1s"),
            ("5+99999999999", "far too long"),
            ("-5+3", "negative"),
            ("5+-3", "negative"),
            ("5", "not a time control"),
            ("5+", "increment is missing"),
            ("+3", "initial time is missing"),
            ("5+3+1", "not a time control"),
            ("five+3", "not a number"),
            ("5x+3", "not a unit"),
            ("1e3+0", "not a unit"),
            ("3h1s+0", "`3h1s` mixes units: give one number and one unit"),
            ("1m30s+0", "mixes units"),
            ("1.2.3+0", "at most three decimals"),
            ("1.2345+0", "at most three decimals"),
            (".+0", "not a number"),
            ("inf+0", "not a number"),
            ("", "not a time control"),
        ] {
            match parse_time(text) {
                Err(message) => assert!(message.contains(needle), "{text:?}: {message}"),
                Ok(tc) => panic!("{text:?} parsed as {tc:?}"),
            }
        }
        // Every message says how to write one.
        assert!(parse_time("5x+3").unwrap_err().contains("e.g. 5+3"));
    }

    #[test]
    fn reads_correspondence_with_its_unit() {
        let per = |secs| TimeControl::Correspondence {
            per_move: Duration::from_secs(secs),
        };
        for (text, want) in [
            ("2d", per(2 * 86_400)),
            ("12h", per(12 * 3600)),
            ("1 day", per(86_400)),
            ("30d", per(30 * 86_400)),
            ("1m", per(60)),
            ("1.5d", per(36 * 3600)),
        ] {
            assert_eq!(parse_correspondence(text), Ok(want), "{text:?}");
        }
        for (text, needle) in [
            ("2", "needs a unit"),
            ("0d", "between 1 minute and 30 days, not 0s"),
            ("59s", "between 1 minute and 30 days"),
            ("31d", "between 1 minute and 30 days, not 31d"),
            ("-1d", "negative"),
            ("2w", "not a unit"),
            ("soon", "not a number"),
            ("9999999999d", "far too long"),
        ] {
            match parse_correspondence(text) {
                Err(message) => assert!(message.contains(needle), "{text:?}: {message}"),
                Ok(tc) => panic!("{text:?} parsed as {tc:?}"),
            }
        }
    }

    #[test]
    fn reads_the_computer_wait() {
        assert_eq!(parse_wait("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_wait("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_wait("2m"), Ok(Duration::from_secs(120)));
        assert!(
            parse_wait("0")
                .unwrap_err()
                .contains("between 1 second and 10 minutes")
        );
        assert!(parse_wait("11m").is_err());
        assert!(parse_wait("-3").unwrap_err().contains("negative"));
    }

    #[test]
    fn displays_as_the_parsers_read() {
        for text in ["5+3", "1+0", "90s+0", "1s+0", "1.5s+0.25", "180+180"] {
            let tc = parse_time(text).expect(text);
            assert_eq!(tc.to_string(), text);
            assert_eq!(parse_time(&tc.to_string()), Ok(tc));
        }
        assert_eq!(
            parse_correspondence("2d").expect("2d").to_string(),
            "2d per move"
        );
        assert_eq!(
            parse_correspondence("36h").expect("36h").to_string(),
            "1d 12h per move"
        );
        assert_eq!(TimeControl::Untimed.to_string(), "untimed");
    }

    #[test]
    fn proto_round_trip() {
        for tc in [
            TimeControl::Untimed,
            real(180, 2),
            TimeControl::RealTime {
                initial: Duration::from_millis(1500),
                increment: Duration::ZERO,
            },
            TimeControl::Correspondence {
                per_move: Duration::from_secs(86_400),
            },
        ] {
            assert_eq!(TimeControl::from_proto(tc.to_proto().as_ref()), tc);
        }
        assert_eq!(TimeControl::from_proto(None), TimeControl::Untimed);
        assert_eq!(
            TimeControl::from_proto(Some(&ProtoTimeControl { kind: None })),
            TimeControl::Untimed
        );
    }

    #[test]
    fn server_durations_never_panic() {
        let d = |seconds, nanos| prost_types::Duration { seconds, nanos };
        assert_eq!(from_proto_duration(None), Duration::ZERO);
        assert_eq!(from_proto_duration(Some(&d(-5, 0))), Duration::ZERO);
        assert_eq!(from_proto_duration(Some(&d(0, -5))), Duration::ZERO);
        assert_eq!(
            from_proto_duration(Some(&d(2, 500_000_000))),
            Duration::from_millis(2500)
        );
        assert_eq!(
            from_proto_duration(Some(&d(1, i32::MAX))),
            Duration::new(1, 999_999_999)
        );
        assert_eq!(
            from_proto_duration(Some(&d(i64::MAX, 0))).as_secs(),
            u64::try_from(i64::MAX).unwrap_or(0)
        );
    }
}
