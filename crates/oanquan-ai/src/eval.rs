//! The static evaluation: the score difference plus a weighted sum of features of the board.

use oanquan_rules::{Move, Player, Position};

/// Evaluation units per point: [`evaluate`] and the search count in 1/`EVAL_SCALE` points so that
/// the heuristic can weigh a stone on the board at a fraction of a captured point.
pub const EVAL_SCALE: i32 = 4;

/// Weights are in 1/`WEIGHT_SCALE` point: finer than the search's unit, so that a tuned weight
/// need not be a multiple of a quarter point. The weighted sum is rounded to [`EVAL_SCALE`] once.
pub const WEIGHT_SCALE: i32 = 64;

/// How many features [`eval_features`] measures.
pub const FEATURES: usize = 5;

/// The features' names, in the order of [`eval_features`] and [`EvalWeights::weights`].
pub const FEATURE_NAMES: [&str; FEATURES] =
    ["tempo", "side_stones", "occupied", "refill", "threat"];

/// The weights of the evaluation's features, in 1/[`WEIGHT_SCALE`] point per unit of feature
/// (see [`eval_features`] for what each measures).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EvalWeights {
    /// One weight per feature, in the order of [`FEATURE_NAMES`].
    pub weights: [i32; FEATURES],
}

impl EvalWeights {
    /// The evaluation before issue 21: a quarter point per stone on the mover's own citizen
    /// squares minus the same for the opponent's, nothing else.
    pub const BASELINE: EvalWeights = EvalWeights {
        weights: [0, WEIGHT_SCALE / EVAL_SCALE, 0, 0, 0],
    };

    /// Issue 21's evaluation, fitted by least squares to 50 000-node search values of 10 427
    /// positions from 600 self-play games on the three presets:
    ///
    /// ```text
    /// cargo run --release -p oanquan-ai --example tune -- --games 600 --label-nodes 50000 --threads 2
    /// ```
    ///
    /// In points: tempo −1.59, side stones −0.03, occupied squares +1.87, refill −4.27, threat
    /// +0.77. It beats [`EvalWeights::BASELINE`] by about 60 Elo at equal nodes (BENCHMARKS.md).
    pub const TUNED: EvalWeights = EvalWeights {
        weights: [-102, -2, 120, -273, 49],
    };

    /// What [`evaluate`] and a new [`crate::Engine`] use: [`EvalWeights::TUNED`].
    pub const DEFAULT: EvalWeights = EvalWeights::TUNED;

    /// The weights by name: `baseline`, `tuned`, `default`, or five comma-separated integers in
    /// 1/[`WEIGHT_SCALE`] point (`0,16,0,0,0` is the baseline).
    ///
    /// # Errors
    ///
    /// A message naming what could not be read.
    pub fn parse(s: &str) -> Result<EvalWeights, String> {
        match s.trim() {
            "baseline" => return Ok(EvalWeights::BASELINE),
            "tuned" => return Ok(EvalWeights::TUNED),
            "default" => return Ok(EvalWeights::DEFAULT),
            _ => {}
        }
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        if parts.len() != FEATURES {
            return Err(format!(
                "evaluation {s:?}: expected baseline, tuned, default or {FEATURES} comma-separated weights ({})",
                FEATURE_NAMES.join(",")
            ));
        }
        let mut weights = [0; FEATURES];
        for (w, p) in weights.iter_mut().zip(&parts) {
            // Bounded so that a weighted sum of features (each at most a few hundred) cannot
            // overflow.
            *w = p
                .parse::<i32>()
                .ok()
                .filter(|w| w.abs() <= 1 << 16)
                .ok_or_else(|| {
                    format!("evaluation weight {p:?} is not an integer within ±65536")
                })?;
        }
        Ok(EvalWeights { weights })
    }

    /// The static evaluation with these weights, in units of 1/[`EVAL_SCALE`] point (see
    /// [`evaluate`]).
    #[must_use]
    pub fn evaluate(&self, position: &Position) -> i32 {
        self.value(position, true)
    }

    /// As [`EvalWeights::evaluate`] without the features that play moves: cheap enough to score
    /// every child of a node for move ordering.
    pub(crate) fn evaluate_for_ordering(&self, position: &Position) -> i32 {
        self.value(position, false)
    }

    fn value(&self, position: &Position, threat: bool) -> i32 {
        let diff = EVAL_SCALE * score_difference(position);
        if position.is_over() {
            return diff;
        }
        // Each feature is measured only when its weight is not zero: the evaluation runs at
        // every leaf and for every child's move ordering.
        let [tempo, side, occ, refill, threat_w] = self.weights.map(i64::from);
        let squares = position.squares();
        let me = position.to_move();
        let them = me.other();
        let mut fine = tempo;
        let (mine, theirs) = (side_stones(&squares, me), side_stones(&squares, them));
        fine += side * i64::from(mine - theirs);
        if occ != 0 {
            fine += occ * i64::from(occupied(&squares, me) - occupied(&squares, them));
        }
        fine += refill * i64::from(i32::from(theirs == 0) - i32::from(mine == 0));
        if threat && threat_w != 0 {
            fine += threat_w * i64::from(best_gain(position));
        }
        let per_unit = i64::from(WEIGHT_SCALE / EVAL_SCALE);
        let bonus = (fine + per_unit / 2).div_euclid(per_unit);
        diff + i32::try_from(bonus.clamp(-(1 << 24), 1 << 24)).unwrap_or(0)
    }
}

impl Default for EvalWeights {
    fn default() -> Self {
        EvalWeights::DEFAULT
    }
}

impl std::fmt::Display for EvalWeights {
    /// The comma-separated weights, as [`EvalWeights::parse`] reads them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.weights.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

/// `mover's points - opponent's points`, in points, for the player to move (after the game's
/// end: the player who would have moved next).
#[must_use]
pub fn score_difference(position: &Position) -> i32 {
    let scores = position.scores();
    let me = position.to_move();
    scores[me] - scores[me.other()]
}

/// [`score_difference`] for the player who plays `mv`, right after it: what a greedy player
/// maximises (its gain plus the difference before the move, the same for every move).
pub(crate) fn difference_after(position: &Position, mv: Move) -> i32 {
    let mut next = *position;
    next.play_unchecked(mv);
    -score_difference(&next)
}

pub(crate) fn side_stones(squares: &[u8; 12], player: Player) -> i32 {
    player
        .citizen_squares()
        .iter()
        .map(|&s| i32::from(squares[s as usize]))
        .sum()
}

fn occupied(squares: &[u8; 12], player: Player) -> i32 {
    player
        .citizen_squares()
        .iter()
        .filter(|&&s| squares[s as usize] > 0)
        .count() as i32
}

/// The features of an unfinished position, each from the point of view of the player to move
/// (mover's minus opponent's where it applies), in the order of [`FEATURE_NAMES`]:
///
/// * `tempo`: 1 (being the one to move);
/// * `side_stones`: stones on the mover's own citizen squares minus the opponent's (each player
///   collects their own side at the end, but until then the stones are exposed to capture);
/// * `occupied`: the mover's non-empty citizen squares minus the opponent's (mobility);
/// * `refill`: 1 if the opponent's side is empty (they must borrow 5 points to refill it unless
///   the mover sows into it), minus 1 if the mover's is;
/// * `threat`: the most points the mover gains with one move (captures, or the end-of-game
///   collection), 0 if no move gains anything — the capture the search's horizon would
///   otherwise cut off. The only feature that plays moves: the search leaves it out of move
///   ordering, and no evaluation measures it when its weight is zero.
#[must_use]
pub fn eval_features(position: &Position) -> [i32; FEATURES] {
    let squares = position.squares();
    let me = position.to_move();
    let them = me.other();
    let (mine, theirs) = (side_stones(&squares, me), side_stones(&squares, them));
    [
        1,
        mine - theirs,
        occupied(&squares, me) - occupied(&squares, them),
        i32::from(theirs == 0) - i32::from(mine == 0),
        best_gain(position),
    ]
}

/// The most points the mover gains with one move, at least 0.
fn best_gain(position: &Position) -> i32 {
    if position.is_over() {
        return 0;
    }
    let before = score_difference(position);
    position
        .legal_moves()
        .iter()
        .map(|&mv| difference_after(position, mv) - before)
        .max()
        .unwrap_or(0)
        .max(0)
}

/// The static evaluation from the point of view of the player to move, in units of
/// 1/[`EVAL_SCALE`] point, with [`EvalWeights::DEFAULT`].
///
/// * A finished game scores its exact final difference: `EVAL_SCALE × (mine − theirs)`.
/// * Otherwise: `EVAL_SCALE × (mine − theirs)` plus the weighted features of [`eval_features`]
///   (by default a quarter point per stone on the mover's own citizen squares minus the same for
///   the opponent's: those stones are collected by their side's owner when the game ends).
#[must_use]
pub fn evaluate(position: &Position) -> i32 {
    EvalWeights::DEFAULT.evaluate(position)
}

/// The exact final difference (in points, for the player to move in `position`) if the game ended
/// by repetition right here: each player collects their own side, stones left in the mandarin
/// squares are split evenly with the odd stone to the player to move (who did not make the last
/// move), and pieces still standing count for nobody. Mirrors the rules crate's ending.
pub(crate) fn repetition_final_difference(position: &Position) -> i32 {
    let squares = position.squares();
    let me = position.to_move();
    let scores = position.scores();
    let leftover = i32::from(squares[0]) + i32::from(squares[6]);
    let mine = scores[me] + side_stones(&squares, me) + (leftover - leftover / 2);
    let theirs = scores[me.other()] + side_stones(&squares, me.other()) + leftover / 2;
    mine - theirs
}

#[cfg(test)]
mod tests {
    use super::*;
    use oanquan_rules::{Preset, Setup};

    #[test]
    fn the_baseline_is_a_quarter_point_per_side_stone() {
        let mut pos = Position::new(Preset::Standard.rules()).unwrap();
        for mv in ["4+", "11+", "3+"] {
            pos.play_unchecked(mv.parse().unwrap());
        }
        let squares = pos.squares();
        let me = pos.to_move();
        let expected = EVAL_SCALE * score_difference(&pos) + side_stones(&squares, me)
            - side_stones(&squares, me.other());
        assert_eq!(EvalWeights::BASELINE.evaluate(&pos), expected);
    }

    #[test]
    fn threat_is_the_best_immediate_gain() {
        let mut pos = Position::new(Preset::Standard.rules()).unwrap();
        for mv in ["4+", "11+", "3+", "8+"] {
            pos.play_unchecked(mv.parse().unwrap());
        }
        let before = score_difference(&pos);
        let best = pos
            .legal_moves()
            .iter()
            .map(|&mv| {
                let mut next = pos;
                next.play_unchecked(mv);
                -score_difference(&next) - before
            })
            .max()
            .unwrap();
        assert_eq!(eval_features(&pos)[4], best.max(0));
        // Ordering never pays for the threat, so a threat-only evaluation orders by the score.
        let threat_only = EvalWeights {
            weights: [0, 0, 0, 0, WEIGHT_SCALE],
        };
        assert_eq!(
            threat_only.evaluate_for_ordering(&pos),
            EVAL_SCALE * score_difference(&pos)
        );
        assert_eq!(
            threat_only.evaluate(&pos),
            EVAL_SCALE * (score_difference(&pos) + best.max(0))
        );
    }

    #[test]
    fn refill_sees_an_empty_side() {
        let setup: Setup = Setup::start(&Preset::Standard.rules());
        let mut pos = Position::from_setup(setup, Preset::Standard.rules()).unwrap();
        assert_eq!(eval_features(&pos)[3], 0);
        // Play random-ish games until one side is empty with the other to move.
        let mut found = false;
        for game in 0..200_u64 {
            pos = Position::new(Preset::Standard.rules()).unwrap();
            let mut i = game;
            while !pos.is_over() {
                let moves = pos.legal_moves();
                i = i
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                pos.play_unchecked(moves[(i >> 33) as usize % moves.len()]);
                let sq = pos.squares();
                if !pos.is_over() && side_stones(&sq, pos.to_move().other()) == 0 {
                    assert_eq!(eval_features(&pos)[3], 1);
                    found = true;
                }
            }
        }
        assert!(found, "no position with an empty side in 200 games");
    }

    #[test]
    fn evaluate_is_the_weighted_sum_of_the_features() {
        let mut pos = Position::new(Preset::MancalaWorld.rules()).unwrap();
        let mut i = 7_u64;
        while !pos.is_over() {
            for w in [EvalWeights::BASELINE, EvalWeights::TUNED] {
                let fine: i32 = eval_features(&pos)
                    .iter()
                    .zip(&w.weights)
                    .map(|(x, w)| x * w)
                    .sum();
                let expected = EVAL_SCALE * score_difference(&pos) + (fine + 8).div_euclid(16);
                assert_eq!(w.evaluate(&pos), expected);
            }
            let moves = pos.legal_moves();
            i = i
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            pos.play_unchecked(moves[(i >> 33) as usize % moves.len()]);
        }
    }

    #[test]
    fn weights_parse_and_print() {
        assert_eq!(EvalWeights::parse("tuned"), Ok(EvalWeights::TUNED));
        assert_eq!(EvalWeights::parse("baseline"), Ok(EvalWeights::BASELINE));
        let w = EvalWeights::parse("1, -2,3,4,5").unwrap();
        assert_eq!(w.weights, [1, -2, 3, 4, 5]);
        assert_eq!(EvalWeights::parse(&w.to_string()), Ok(w));
        assert!(EvalWeights::parse("1,2,3").is_err());
        assert!(EvalWeights::parse("1,2,3,4,x").is_err());
        assert!(EvalWeights::parse("1,2,3,4,99999999").is_err());
    }
}
