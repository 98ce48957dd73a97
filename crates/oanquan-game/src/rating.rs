//! Ratings: Glicko-2 per speed category, updated after every rated game.
//!
//! Pure values and functions, no storage: a [`Speed`] says which rating a time control plays
//! for, a [`Rating`] is one player's Glicko-2 rating at one speed, and [`rate`] gives both
//! players' ratings after a game. The formulas are the `skillratings` crate's; this module
//! chooses the constants and keeps every value finite and within bounds.
//!
//! Like lichess, a rating is updated at once after each game (a rating period of one game),
//! each player against the other's rating from before the game, rather than in batches at the
//! end of a rating period as in Glickman's paper. The deviation does not grow with time away
//! from the game here: that would need the time of each player's last game.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use oanquan_rules::{Outcome, Player};
use skillratings::Outcomes;
use skillratings::glicko2::{Glicko2Config, Glicko2Rating, glicko2};

use crate::clock::TimeControl;
use crate::text::quoted;

/// Moves per player assumed when estimating how long a real-time game lasts (lichess's rule).
pub const ESTIMATED_MOVES: u32 = 40;
/// Estimated durations below this are bullet (3 minutes). Lichess's ultrabullet (below 30 s)
/// is folded into bullet: too few games would be played at it for a rating of its own.
pub const BULLET_BELOW: Duration = Duration::from_secs(180);
/// Estimated durations below this (and not bullet) are blitz (8 minutes).
pub const BLITZ_BELOW: Duration = Duration::from_secs(480);
/// Estimated durations below this (and not blitz) are rapid (25 minutes); longer is classical.
pub const RAPID_BELOW: Duration = Duration::from_secs(1500);

/// The speed category of a game, which has a rating of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Speed {
    /// Real time, estimated under 3 minutes a game.
    Bullet,
    /// Real time, estimated from 3 to under 8 minutes.
    Blitz,
    /// Real time, estimated from 8 to under 25 minutes.
    Rapid,
    /// Real time, estimated 25 minutes or more.
    Classical,
    /// A fixed time for each move.
    Correspondence,
}

impl Speed {
    /// Every speed, fastest first.
    pub const ALL: [Speed; 5] = [
        Speed::Bullet,
        Speed::Blitz,
        Speed::Rapid,
        Speed::Classical,
        Speed::Correspondence,
    ];

    /// The speed a game with this time control is rated at; `None` for an untimed game,
    /// which cannot be rated: a player could stall it forever.
    ///
    /// Real time is classified by its [`estimated_duration`](Speed::estimated_duration). Lichess
    /// counts 6 hours or more as correspondence, but no real-time control accepted here
    /// (at most 3 hours plus 40 × 3 minutes) comes near that, so all of them are classical.
    #[must_use]
    pub fn of(time_control: TimeControl) -> Option<Speed> {
        match time_control {
            TimeControl::Untimed => None,
            TimeControl::RealTime { initial, increment } => {
                let estimate = Self::estimated_duration(initial, increment);
                Some(if estimate < BULLET_BELOW {
                    Speed::Bullet
                } else if estimate < BLITZ_BELOW {
                    Speed::Blitz
                } else if estimate < RAPID_BELOW {
                    Speed::Rapid
                } else {
                    Speed::Classical
                })
            }
            TimeControl::Correspondence { .. } => Some(Speed::Correspondence),
        }
    }

    /// How long a real-time game is expected to take on one player's clock: the initial time
    /// plus [`ESTIMATED_MOVES`] increments.
    #[must_use]
    pub fn estimated_duration(initial: Duration, increment: Duration) -> Duration {
        initial.saturating_add(increment.saturating_mul(ESTIMATED_MOVES))
    }

    /// The stable lowercase name, for APIs, storage and the command line.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Speed::Bullet => "bullet",
            Speed::Blitz => "blitz",
            Speed::Rapid => "rapid",
            Speed::Classical => "classical",
            Speed::Correspondence => "correspondence",
        }
    }
}

impl fmt::Display for Speed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A speed name that is none of [`Speed::ALL`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown speed {}: expected one of bullet, blitz, rapid, classical, correspondence",
    quoted(.0)
)]
pub struct UnknownSpeed(pub String);

impl FromStr for Speed {
    type Err = UnknownSpeed;

    /// A speed by its [`name`](Speed::name), ignoring ASCII case (`Blitz` typed on a command
    /// line means blitz).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Speed::ALL
            .into_iter()
            .find(|speed| speed.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownSpeed(s.to_owned()))
    }
}

/// Lowest rating (lichess's floor): a string of losses cannot push a rating down forever.
pub const MIN_RATING: f64 = 400.0;
/// Highest rating (lichess's ceiling).
pub const MAX_RATING: f64 = 4000.0;
/// Lowest deviation (lichess's): a rating never becomes so certain that games stop moving it.
pub const MIN_DEVIATION: f64 = 45.0;
/// Highest deviation: a newcomer's; nothing is less certain than knowing nothing.
pub const MAX_DEVIATION: f64 = 350.0;
/// Lowest volatility. Glicko-2 takes the logarithm of the volatility, so it must stay above
/// zero; real volatilities stay near the starting 0.06.
pub const MIN_VOLATILITY: f64 = 0.01;
/// Highest volatility (lichess's): one surprising result must not make a rating erratic.
pub const MAX_VOLATILITY: f64 = 0.1;
/// Glicko-2's τ, which limits how fast volatility changes; lichess's value (Glickman suggests
/// 0.3 to 1.2).
pub const TAU: f64 = 0.75;
/// A rating is provisional while its deviation is above this (lichess's threshold)…
pub const PROVISIONAL_DEVIATION: f64 = 110.0;
/// … or while fewer rated games than this have been played at its speed.
pub const PROVISIONAL_GAMES: u32 = 10;

const CONFIG: Glicko2Config = Glicko2Config {
    tau: TAU,
    convergence_tolerance: 0.000_001,
};

/// One player's Glicko-2 rating at one speed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rating {
    /// The rating, 1500 for a newcomer.
    pub rating: f64,
    /// The rating deviation (how uncertain the rating is), 350 for a newcomer.
    pub deviation: f64,
    /// The volatility (how erratic the player's results are), 0.06 for a newcomer.
    pub volatility: f64,
    /// Rated games played at this speed.
    pub games: u32,
}

impl Rating {
    /// A newcomer's rating: Glicko-2's defaults, no games.
    pub const INITIAL: Rating = Rating {
        rating: 1500.0,
        deviation: MAX_DEVIATION,
        volatility: 0.06,
        games: 0,
    };

    /// A newcomer's rating, [`Rating::INITIAL`].
    #[must_use]
    pub const fn new() -> Rating {
        Rating::INITIAL
    }

    /// Why a stored rating cannot be one the server wrote: a rating outside
    /// [`MIN_RATING`]..=[`MAX_RATING`] (every update keeps it inside), or a value that is not a
    /// positive number. A store answers such a row as damaged rather than shown clamped (an
    /// outside probe's `1e300` read as 4000 without a word).
    #[must_use]
    pub fn stored_fault(&self) -> Option<String> {
        if !(MIN_RATING..=MAX_RATING).contains(&self.rating) {
            return Some(format!(
                "rating {} is outside {MIN_RATING}..{MAX_RATING}",
                self.rating
            ));
        }
        for (what, value) in [
            ("deviation", self.deviation),
            ("volatility", self.volatility),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Some(format!("{what} {value} is not a positive number"));
            }
        }
        None
    }

    /// The rating with every value within its bounds ([`MIN_RATING`]…): a value out of bounds
    /// is moved to the nearest bound, and one that is not a number takes a newcomer's value
    /// (the largest deviation for the deviation), so a damaged record rates as an unknown
    /// player rather than spreading NaN.
    #[must_use]
    pub fn clamped(self) -> Rating {
        Rating {
            rating: clamp_or(self.rating, Rating::INITIAL.rating, MIN_RATING, MAX_RATING),
            deviation: clamp_or(self.deviation, MAX_DEVIATION, MIN_DEVIATION, MAX_DEVIATION),
            volatility: clamp_or(
                self.volatility,
                Rating::INITIAL.volatility,
                MIN_VOLATILITY,
                MAX_VOLATILITY,
            ),
            games: self.games,
        }
    }

    /// Whether the rating is still provisional: fewer than [`PROVISIONAL_GAMES`] games, or a
    /// deviation above [`PROVISIONAL_DEVIATION`]. Both must be passed, so neither a few lucky
    /// games against established players nor many games among newcomers make a rating count
    /// (on leaderboards, for instance).
    #[must_use]
    pub fn is_provisional(&self) -> bool {
        self.games < PROVISIONAL_GAMES || self.clamped().deviation > PROVISIONAL_DEVIATION
    }

    /// The rating as shown: a whole number within [`MIN_RATING`]..=[`MAX_RATING`].
    #[must_use]
    pub fn rounded(&self) -> i32 {
        // In bounds after clamping, so the conversion is exact.
        self.clamped().rating.round() as i32
    }

    /// The deviation as shown: a whole number within [`MIN_DEVIATION`]..=[`MAX_DEVIATION`].
    #[must_use]
    pub fn rounded_deviation(&self) -> i32 {
        self.clamped().deviation.round() as i32
    }

    fn to_glicko2(self) -> Glicko2Rating {
        Glicko2Rating {
            rating: self.rating,
            deviation: self.deviation,
            volatility: self.volatility,
        }
    }

    /// `self` (clamped) after one more game ending in `new`; a value the formulas could not
    /// compute keeps its value from before the game.
    fn after(self, new: Glicko2Rating) -> Rating {
        Rating {
            rating: clamp_or(new.rating, self.rating, MIN_RATING, MAX_RATING),
            deviation: clamp_or(new.deviation, self.deviation, MIN_DEVIATION, MAX_DEVIATION),
            volatility: clamp_or(
                new.volatility,
                self.volatility,
                MIN_VOLATILITY,
                MAX_VOLATILITY,
            ),
            games: self.games.saturating_add(1),
        }
    }
}

impl Default for Rating {
    fn default() -> Self {
        Rating::INITIAL
    }
}

impl fmt::Display for Rating {
    /// The rounded rating, followed by `?` while provisional (as lichess shows it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.rounded())?;
        if self.is_provisional() {
            f.write_str("?")?;
        }
        Ok(())
    }
}

fn clamp_or(value: f64, if_nan: f64, min: f64, max: f64) -> f64 {
    if value.is_nan() {
        if_nan
    } else {
        value.clamp(min, max)
    }
}

/// Both players' new ratings after one game between them, `first` and `second` in the order of
/// the game's seats, each rated against the other's rating from before the game.
///
/// The inputs are [`clamped`](Rating::clamped) first, and each new value is kept within bounds,
/// so the results are finite whatever the inputs. Each player's game count goes up by one.
#[must_use]
pub fn rate(first: Rating, second: Rating, outcome: Outcome) -> (Rating, Rating) {
    let (first, second) = (first.clamped(), second.clamped());
    let result = match outcome {
        Outcome::Decisive {
            winner: Player::First,
        } => Outcomes::WIN,
        Outcome::Decisive {
            winner: Player::Second,
        } => Outcomes::LOSS,
        Outcome::Draw => Outcomes::DRAW,
    };
    let (new_first, new_second) =
        glicko2(&first.to_glicko2(), &second.to_glicko2(), &result, &CONFIG);
    (first.after(new_first), second.after(new_second))
}

/// One player's rating before and after a game, as a game's end announces it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatingChange {
    /// The rating the game was played at (clamped, as it was rated).
    pub before: Rating,
    /// The rating after the game.
    pub after: Rating,
}

impl RatingChange {
    /// Both players' changes after one game: [`rate`], with the ratings it started from.
    #[must_use]
    pub fn of_game(
        first: Rating,
        second: Rating,
        outcome: Outcome,
    ) -> (RatingChange, RatingChange) {
        let (after_first, after_second) = rate(first, second, outcome);
        (
            RatingChange {
                before: first.clamped(),
                after: after_first,
            },
            RatingChange {
                before: second.clamped(),
                after: after_second,
            },
        )
    }

    /// The change as shown: the difference of the rounded ratings, so that the shown ratings
    /// and the shown change always add up.
    #[must_use]
    pub fn difference(&self) -> i32 {
        self.after.rounded() - self.before.rounded()
    }
}

impl fmt::Display for RatingChange {
    /// `1500? → 1662? (+162)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} → {} ({:+})",
            self.before,
            self.after,
            self.difference()
        )
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use skillratings::glicko2::glicko2_rating_period;

    use super::*;

    #[test]
    fn a_stored_rating_outside_what_updates_keep_is_a_fault() {
        assert_eq!(Rating::INITIAL.stored_fault(), None);
        let settled = Rating {
            rating: 2_200.0,
            deviation: 30.0,
            ..Rating::INITIAL
        };
        assert_eq!(settled.stored_fault(), None, "bounds of the rating alone");
        for (rating, why) in [
            (
                Rating {
                    rating: 1e300,
                    ..Rating::INITIAL
                },
                "outside",
            ),
            (
                Rating {
                    rating: -100.0,
                    ..Rating::INITIAL
                },
                "outside",
            ),
            (
                Rating {
                    rating: f64::NAN,
                    ..Rating::INITIAL
                },
                "outside",
            ),
            (
                Rating {
                    deviation: f64::INFINITY,
                    ..Rating::INITIAL
                },
                "deviation",
            ),
            (
                Rating {
                    volatility: 0.0,
                    ..Rating::INITIAL
                },
                "volatility",
            ),
        ] {
            let fault = rating.stored_fault().expect("a fault");
            assert!(fault.contains(why), "{fault}");
        }
    }

    fn real_time(initial_secs: u64, increment_secs: u64) -> TimeControl {
        TimeControl::RealTime {
            initial: Duration::from_secs(initial_secs),
            increment: Duration::from_secs(increment_secs),
        }
    }

    fn glicko(rating: f64, deviation: f64, volatility: f64) -> Glicko2Rating {
        Glicko2Rating {
            rating,
            deviation,
            volatility,
        }
    }

    fn rating(rating: f64, deviation: f64, volatility: f64, games: u32) -> Rating {
        Rating {
            rating,
            deviation,
            volatility,
            games,
        }
    }

    const FIRST_WINS: Outcome = Outcome::Decisive {
        winner: Player::First,
    };
    const SECOND_WINS: Outcome = Outcome::Decisive {
        winner: Player::Second,
    };

    /// Glickman's worked example ("Example of the Glicko-2 system", glicko2.pdf): the crate
    /// computes the published numbers when given the paper's τ.
    #[test]
    fn the_crate_reproduces_glickmans_worked_example() {
        let config = Glicko2Config {
            tau: 0.5,
            convergence_tolerance: 0.000_001,
        };
        let results = [
            (glicko(1400.0, 30.0, 0.06), Outcomes::WIN),
            (glicko(1550.0, 100.0, 0.06), Outcomes::LOSS),
            (glicko(1700.0, 300.0, 0.06), Outcomes::LOSS),
        ];
        let new = glicko2_rating_period(&glicko(1500.0, 200.0, 0.06), &results, &config);
        // The paper prints μ' = −0.2069 and φ' = 0.8722 on the Glicko-2 scale, then converts
        // those rounded values: 1464.06 and 151.52. The unrounded μ' gives 1464.05, so the
        // rating is compared at the paper's precision on its own scale, and to 0.01 after.
        let mu = (new.rating - 1500.0) / 173.7178;
        let phi = new.deviation / 173.7178;
        assert!((mu - -0.2069).abs() < 0.000_05, "{new:?}: μ' {mu}");
        assert!((phi - 0.8722).abs() < 0.000_05, "{new:?}: φ' {phi}");
        assert!((new.rating - 1464.06).abs() < 0.01, "{new:?}");
        assert!((new.deviation - 151.52).abs() < 0.005, "{new:?}");
        assert!((new.volatility - 0.05999).abs() < 0.000_01, "{new:?}");
    }

    /// The per-game update is a rating period of one game, each against the other's rating
    /// from before the game, with this module's τ.
    #[test]
    fn rate_is_a_rating_period_of_one_game_against_the_rating_before_it() {
        let first = rating(1500.0, 200.0, 0.06, 3);
        // In bounds (the paper's RD 30 would be clamped to 45), so nothing but Glicko-2 acts.
        let second = rating(1400.0, 50.0, 0.06, 50);
        let (new_first, new_second) = rate(first, second, FIRST_WINS);
        let expect_first = glicko2_rating_period(
            &first.to_glicko2(),
            &[(second.to_glicko2(), Outcomes::WIN)],
            &CONFIG,
        );
        let expect_second = glicko2_rating_period(
            &second.to_glicko2(),
            &[(first.to_glicko2(), Outcomes::LOSS)],
            &CONFIG,
        );
        for (got, expect) in [(new_first, expect_first), (new_second, expect_second)] {
            assert!(
                (got.rating - expect.rating).abs() < 1e-9,
                "{got:?} {expect:?}"
            );
            assert!(
                (got.deviation - expect.deviation).abs() < 1e-9,
                "{got:?} {expect:?}"
            );
            assert!(
                (got.volatility - expect.volatility).abs() < 1e-12,
                "{got:?} {expect:?}"
            );
        }
        assert_eq!((new_first.games, new_second.games), (4, 51));
    }

    #[test]
    fn two_newcomers_first_game() {
        let (winner, loser) = rate(Rating::INITIAL, Rating::INITIAL, FIRST_WINS);
        assert_eq!((winner.rounded(), winner.rounded_deviation()), (1662, 290));
        assert_eq!((loser.rounded(), loser.rounded_deviation()), (1338, 290));
        assert_eq!((winner.games, loser.games), (1, 1));
        let (change, _) = RatingChange::of_game(Rating::INITIAL, Rating::INITIAL, FIRST_WINS);
        assert_eq!(change.difference(), 162);
        assert_eq!(change.to_string(), "1500? → 1662? (+162)");
    }

    #[test]
    fn defaults_are_glicko2s() {
        assert_eq!(Rating::default(), rating(1500.0, 350.0, 0.06, 0));
        assert_eq!(Rating::new(), Rating::INITIAL);
        assert!(Rating::INITIAL.is_provisional());
    }

    #[test]
    fn provisional_until_both_enough_games_and_a_small_deviation() {
        let settled = rating(1800.0, PROVISIONAL_DEVIATION, 0.06, PROVISIONAL_GAMES);
        assert!(!settled.is_provisional());
        assert_eq!(settled.to_string(), "1800");
        assert!(
            Rating {
                games: PROVISIONAL_GAMES - 1,
                ..settled
            }
            .is_provisional()
        );
        assert!(
            Rating {
                deviation: PROVISIONAL_DEVIATION + 0.01,
                ..settled
            }
            .is_provisional()
        );
        assert!(
            Rating {
                deviation: f64::NAN,
                ..settled
            }
            .is_provisional()
        );
        assert_eq!(
            Rating {
                games: 0,
                ..settled
            }
            .to_string(),
            "1800?"
        );
    }

    #[test]
    fn clamped_keeps_values_in_bounds_and_replaces_nan() {
        let wild = rating(f64::NAN, f64::NAN, f64::NAN, 7).clamped();
        assert_eq!(wild, rating(1500.0, MAX_DEVIATION, 0.06, 7));
        let far = rating(f64::INFINITY, 0.0, f64::INFINITY, 7).clamped();
        assert_eq!(far, rating(MAX_RATING, MIN_DEVIATION, MAX_VOLATILITY, 7));
        let low = rating(f64::NEG_INFINITY, 1e9, 0.0, 7).clamped();
        assert_eq!(low, rating(MIN_RATING, MAX_DEVIATION, MIN_VOLATILITY, 7));
        assert_eq!(Rating::INITIAL.clamped(), Rating::INITIAL);
    }

    #[test]
    fn rounding_for_display() {
        let r = rating(1623.5, 87.49, 0.06, 20);
        assert_eq!((r.rounded(), r.rounded_deviation()), (1624, 87));
        let nan = rating(f64::NAN, f64::NAN, 0.06, 0);
        assert_eq!((nan.rounded(), nan.rounded_deviation()), (1500, 350));
        assert_eq!(rating(1e300, 1.0, 0.06, 0).rounded(), 4000);
    }

    #[test]
    fn extreme_pairings_stay_finite_and_in_bounds() {
        let corners = [
            rating(MIN_RATING, MIN_DEVIATION, MIN_VOLATILITY, 0),
            rating(MIN_RATING, MAX_DEVIATION, MAX_VOLATILITY, 0),
            rating(MAX_RATING, MIN_DEVIATION, MAX_VOLATILITY, 0),
            rating(MAX_RATING, MAX_DEVIATION, MIN_VOLATILITY, u32::MAX),
        ];
        for a in corners {
            for b in corners {
                for outcome in [FIRST_WINS, SECOND_WINS, Outcome::Draw] {
                    let (x, y) = rate(a, b, outcome);
                    assert_in_bounds(&x);
                    assert_in_bounds(&y);
                }
            }
        }
        let (x, _) = rate(corners[3], corners[0], FIRST_WINS);
        assert_eq!(x.games, u32::MAX, "the count saturates");
    }

    fn assert_in_bounds(r: &Rating) {
        assert!((MIN_RATING..=MAX_RATING).contains(&r.rating), "{r:?}");
        assert!(
            (MIN_DEVIATION..=MAX_DEVIATION).contains(&r.deviation),
            "{r:?}"
        );
        assert!(
            (MIN_VOLATILITY..=MAX_VOLATILITY).contains(&r.volatility),
            "{r:?}"
        );
    }

    #[test]
    fn speed_boundaries() {
        let cases = [
            (real_time(15, 0), Speed::Bullet), // lichess's ultrabullet, folded in
            (real_time(60, 0), Speed::Bullet), // 1+0
            (real_time(120, 1), Speed::Bullet), // 2+1: 160 s
            (real_time(179, 0), Speed::Bullet), // just under 3 minutes
            (real_time(180, 0), Speed::Blitz), // 3+0
            (real_time(140, 1), Speed::Blitz), // 140 + 40 = 180 s
            (real_time(180, 2), Speed::Blitz), // 3+2: 260 s
            (real_time(300, 3), Speed::Blitz), // 5+3: 420 s
            (real_time(479, 0), Speed::Blitz), // just under 8 minutes
            (real_time(480, 0), Speed::Rapid), // 8+0
            (real_time(600, 0), Speed::Rapid), // 10+0
            (real_time(600, 5), Speed::Rapid), // 10+5: 800 s
            (real_time(1499, 0), Speed::Rapid), // just under 25 minutes
            (real_time(900, 15), Speed::Classical), // 15+15: 1500 s
            (real_time(1500, 0), Speed::Classical), // 25+0
            (real_time(1800, 20), Speed::Classical), // 30+20
            (real_time(3 * 3600, 180), Speed::Classical), // the longest accepted
        ];
        for (time_control, speed) in cases {
            assert_eq!(Speed::of(time_control), Some(speed), "{time_control:?}");
        }
        // 15+10 is 900 + 400 = 1300 s, still rapid; a tenth of a second under the line too.
        assert_eq!(Speed::of(real_time(900, 10)), Some(Speed::Rapid));
        let just_under = TimeControl::RealTime {
            initial: Duration::from_millis(179_900),
            increment: Duration::ZERO,
        };
        assert_eq!(Speed::of(just_under), Some(Speed::Bullet));
        let correspondence = TimeControl::Correspondence {
            per_move: Duration::from_secs(86_400),
        };
        assert_eq!(Speed::of(correspondence), Some(Speed::Correspondence));
        assert_eq!(Speed::of(TimeControl::Untimed), None);
        let huge = TimeControl::RealTime {
            initial: Duration::MAX,
            increment: Duration::MAX,
        };
        assert_eq!(
            Speed::of(huge),
            Some(Speed::Classical),
            "saturates, no overflow"
        );
    }

    #[test]
    fn speed_names_round_trip() {
        let names: Vec<&str> = Speed::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            ["bullet", "blitz", "rapid", "classical", "correspondence"]
        );
        for speed in Speed::ALL {
            assert_eq!(speed.name().parse::<Speed>(), Ok(speed));
            assert_eq!(speed.to_string(), speed.name());
            assert_eq!(speed.name().to_uppercase().parse::<Speed>(), Ok(speed));
        }
        let error = "ultrabullet".parse::<Speed>().unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with("unknown speed \"ultrabullet\""),
            "{message}"
        );
        for name in names {
            assert!(message.contains(name), "{message}");
        }
        assert!(" blitz".parse::<Speed>().is_err());
        assert!("".parse::<Speed>().is_err());
        let hostile = "\u{202e}x"
            .repeat(1000)
            .parse::<Speed>()
            .unwrap_err()
            .to_string();
        assert!(
            hostile.contains("\\u{202e}") && hostile.len() < 1000,
            "{hostile}"
        );
    }

    fn any_rating() -> impl Strategy<Value = Rating> {
        use proptest::num::f64::ANY;
        (ANY, ANY, ANY, any::<u32>()).prop_map(|(r, d, v, g)| rating(r, d, v, g))
    }

    fn in_bounds_rating() -> impl Strategy<Value = Rating> {
        (
            MIN_RATING..=MAX_RATING,
            MIN_DEVIATION..=MAX_DEVIATION,
            MIN_VOLATILITY..=MAX_VOLATILITY,
            0..u32::MAX,
        )
            .prop_map(|(r, d, v, g)| rating(r, d, v, g))
    }

    fn any_outcome() -> impl Strategy<Value = Outcome> {
        prop_oneof![Just(FIRST_WINS), Just(SECOND_WINS), Just(Outcome::Draw)]
    }

    fn swapped(outcome: Outcome) -> Outcome {
        match outcome {
            Outcome::Decisive { winner } => Outcome::Decisive {
                winner: winner.other(),
            },
            Outcome::Draw => Outcome::Draw,
        }
    }

    proptest! {
        #[test]
        fn any_inputs_give_finite_ratings_in_bounds(
            first in any_rating(),
            second in any_rating(),
            outcome in any_outcome(),
        ) {
            let (a, b) = rate(first, second, outcome);
            for (before, after) in [(first, a), (second, b)] {
                assert_in_bounds(&after);
                prop_assert_eq!(after.games, before.games.saturating_add(1));
            }
        }

        #[test]
        fn winner_gains_and_loser_loses(
            winner in in_bounds_rating(),
            loser in in_bounds_rating(),
        ) {
            let (w, l) = rate(winner, loser, FIRST_WINS);
            prop_assert!(w.rating >= winner.rating - 1e-9, "{:?} → {:?}", winner, w);
            prop_assert!(l.rating <= loser.rating + 1e-9, "{:?} → {:?}", loser, l);
            if winner.rating < MAX_RATING - 1.0 && loser.rating > winner.rating - 400.0 {
                prop_assert!(w.rating > winner.rating, "{:?} → {:?}", winner, w);
            }
            prop_assert_eq!((w.games, l.games), (winner.games + 1, loser.games + 1));
        }

        #[test]
        fn a_draw_between_equals_moves_no_rating(player in in_bounds_rating()) {
            let (a, b) = rate(player, player, Outcome::Draw);
            prop_assert_eq!(a, b);
            prop_assert!((a.rating - player.rating).abs() < 1e-9, "{:?} → {:?}", player, a);
            prop_assert_eq!(a.rounded(), player.rounded());
        }

        #[test]
        fn swapping_seats_and_outcome_swaps_results(
            first in any_rating(),
            second in any_rating(),
            outcome in any_outcome(),
        ) {
            let (a, b) = rate(first, second, outcome);
            let (b2, a2) = rate(second, first, swapped(outcome));
            prop_assert_eq!((a, b), (a2, b2));
        }

        #[test]
        fn shown_changes_add_up(
            first in in_bounds_rating(),
            second in in_bounds_rating(),
            outcome in any_outcome(),
        ) {
            let (x, y) = RatingChange::of_game(first, second, outcome);
            for change in [x, y] {
                prop_assert_eq!(change.before.rounded() + change.difference(), change.after.rounded());
            }
        }
    }
}
