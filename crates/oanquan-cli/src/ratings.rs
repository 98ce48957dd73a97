//! How accounts and ratings read in text: seats with their ratings (`Lan (1523?)`), rating
//! changes at a game's end (`Lan 1500 → 1512 (+12)`), speeds and dates.

use oanquan_proto::v1::{EndReason, GameResult, RatingChange, Seat, Speed};

use crate::cli;
use crate::moves::Side;
use crate::output::shown_name;

/// What a rated game that ended before both players moved says instead of rating changes: the
/// server rates only games in which both have moved.
pub const UNRATED_END: &str = "rating: unchanged (the game ended before both players moved)";

/// A rating as shown: `1523`, or `1523?` while provisional.
pub fn rating_text(rating: i32, provisional: bool) -> String {
    if provisional {
        format!("{rating}?")
    } else {
        rating.to_string()
    }
}

/// The rating a seat shows next to its name: an account's rating at the game's speed when the
/// seat was taken. None for an anonymous seat, and for an account in an untimed game (no speed,
/// so no rating: the server sends 0).
pub fn seat_rating(seat: Option<&Seat>) -> Option<String> {
    let account = seat?.account.as_ref()?;
    (account.rating != 0).then(|| rating_text(account.rating, account.provisional))
}

/// A seat as a table cell or a line names it: `Lan (1523?)` for an account, the display name
/// otherwise (as [`shown_name`] shows it), `-` for an empty seat.
pub fn seat_label(seat: Option<&Seat>) -> String {
    match seat {
        Some(s) if s.occupied => match seat_rating(Some(s)) {
            Some(rating) => format!("{} ({rating})", shown_name(&s.display_name)),
            None => shown_name(&s.display_name).into_owned(),
        },
        _ => "-".to_owned(),
    }
}

/// `1500 → 1512 (+12)`; `1512?` while the new rating is provisional.
pub fn change_numbers(change: &RatingChange) -> String {
    let diff = i64::from(change.after) - i64::from(change.before);
    format!(
        "{} → {} ({diff:+})",
        change.before,
        rating_text(change.after, change.provisional)
    )
}

/// `Lan 1500 → 1512 (+12)`.
pub fn change_text(name: &str, change: &RatingChange) -> String {
    format!("{name} {}", change_numbers(change))
}

/// The lines a rated game's end adds after `game over:` (stable format, see `play --help`):
/// `rating: Lan 1500 → 1512 (+12)`, first player then second; `rating: unchanged (...)` for a
/// rated game that ended before both players moved. None for an unrated or aborted game.
pub fn rating_lines(rated: bool, result: &GameResult, names: [&str; 2]) -> Vec<String> {
    if rated
        && result.first_rating.is_none()
        && result.second_rating.is_none()
        && result.end_reason() != EndReason::Aborted
        && result.end_reason() != EndReason::Unspecified
    {
        return vec![UNRATED_END.to_owned()];
    }
    [
        (result.first_rating.as_ref(), Side::First),
        (result.second_rating.as_ref(), Side::Second),
    ]
    .into_iter()
    .filter_map(|(change, side)| {
        let name = names[usize::from(side == Side::Second)].trim();
        let name = if name.is_empty() {
            side.name().into()
        } else {
            shown_name(name)
        };
        change.map(|c| format!("rating: {}", change_text(&name, c)))
    })
    .collect()
}

pub fn speed_name(speed: Speed) -> &'static str {
    match speed {
        Speed::Unspecified => "-",
        Speed::Bullet => "bullet",
        Speed::Blitz => "blitz",
        Speed::Rapid => "rapid",
        Speed::Classical => "classical",
        Speed::Correspondence => "correspondence",
    }
}

pub fn speed_to_proto(speed: cli::Speed) -> Speed {
    match speed {
        cli::Speed::Bullet => Speed::Bullet,
        cli::Speed::Blitz => Speed::Blitz,
        cli::Speed::Rapid => Speed::Rapid,
        cli::Speed::Classical => Speed::Classical,
        cli::Speed::Correspondence => Speed::Correspondence,
    }
}

/// The UTC date of a timestamp, `2025-03-07`; `-` when there is none.
pub fn date(time: Option<&prost_types::Timestamp>) -> String {
    let Some(time) = time else {
        return "-".to_owned();
    };
    let (year, month, day) = civil_from_days(time.seconds.div_euclid(86_400));
    format!("{year:04}-{month:02}-{day:02}")
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`), so that one date needs no calendar crate.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Both are small and positive by construction.
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use oanquan_proto::v1::SeatAccount;

    fn account_seat(name: &str, rating: i32, provisional: bool) -> Seat {
        Seat {
            occupied: true,
            display_name: name.into(),
            account: Some(SeatAccount {
                username: name.into(),
                rating,
                provisional,
            }),
            ..Seat::default()
        }
    }

    #[test]
    fn seats_show_their_ratings() {
        assert_eq!(
            seat_label(Some(&account_seat("Lan", 1523, true))),
            "Lan (1523?)"
        );
        assert_eq!(
            seat_label(Some(&account_seat("Minh", 1710, false))),
            "Minh (1710)"
        );
        // An untimed game has no speed, so no rating to show.
        assert_eq!(seat_label(Some(&account_seat("Lan", 0, true))), "Lan");
        let anonymous = Seat {
            occupied: true,
            display_name: "guest".into(),
            ..Seat::default()
        };
        assert_eq!(seat_label(Some(&anonymous)), "guest");
        assert_eq!(seat_rating(Some(&anonymous)), None);
        assert_eq!(seat_label(Some(&Seat::default())), "-");
        assert_eq!(seat_label(None), "-");
    }

    #[test]
    fn rating_changes_read_with_their_sign() {
        let change = |before, after, provisional| RatingChange {
            before,
            after,
            provisional,
        };
        assert_eq!(
            change_text("Lan", &change(1500, 1512, false)),
            "Lan 1500 → 1512 (+12)"
        );
        assert_eq!(
            change_text("Minh", &change(1500, 1488, true)),
            "Minh 1500 → 1488? (-12)"
        );
        assert_eq!(
            change_text("Lan", &change(1500, 1500, false)),
            "Lan 1500 → 1500 (+0)"
        );
        let result = GameResult {
            first_rating: Some(change(1500, 1662, true)),
            second_rating: Some(change(1500, 1338, true)),
            ..GameResult::default()
        };
        assert_eq!(
            rating_lines(true, &result, ["Lan", "Minh"]),
            [
                "rating: Lan 1500 → 1662? (+162)",
                "rating: Minh 1500 → 1338? (-162)"
            ]
        );
        assert!(rating_lines(false, &GameResult::default(), ["Lan", "Minh"]).is_empty());
        let ended = |reason: EndReason| GameResult {
            end_reason: reason.into(),
            ..GameResult::default()
        };
        assert_eq!(
            rating_lines(true, &ended(EndReason::Resignation), ["Lan", "Minh"]),
            [UNRATED_END]
        );
        assert!(rating_lines(false, &ended(EndReason::Resignation), ["Lan", "Minh"]).is_empty());
        assert!(rating_lines(true, &ended(EndReason::Aborted), ["Lan", "Minh"]).is_empty());
        assert!(rating_lines(true, &GameResult::default(), ["Lan", "Minh"]).is_empty());
    }

    #[test]
    fn dates_are_utc_days() {
        let at = |seconds| date(Some(&prost_types::Timestamp { seconds, nanos: 0 }));
        assert_eq!(at(0), "1970-01-01");
        assert_eq!(at(951_782_400), "2000-02-29");
        assert_eq!(at(1_741_305_599), "2025-03-06");
        assert_eq!(at(1_741_305_600), "2025-03-07");
        assert_eq!(at(-1), "1969-12-31");
        assert_eq!(date(None), "-");
    }

    #[test]
    fn speeds_map_to_the_api() {
        assert_eq!(speed_to_proto(cli::Speed::Blitz), Speed::Blitz);
        assert_eq!(
            speed_to_proto(cli::Speed::Correspondence),
            Speed::Correspondence
        );
        assert_eq!(speed_name(Speed::Rapid), "rapid");
    }
}
