//! The static evaluation.

use oanquan_rules::{Player, Position};

/// Evaluation units per point: [`evaluate`] and the search count in 1/`EVAL_SCALE` points so that
/// the heuristic can weigh a stone on the board at a fraction of a captured point.
pub const EVAL_SCALE: i32 = 4;

/// What a stone on the mover's own citizen squares is worth, in evaluation units (of
/// [`EVAL_SCALE`] per point). At the end of the game each player collects their own side, but
/// until then the stones are exposed to capture, so they count for less than a point.
const SIDE_STONE: i32 = 1;

/// `mover's points - opponent's points`, in points, for the player to move (after the game's
/// end: the player who would have moved next).
#[must_use]
pub fn score_difference(position: &Position) -> i32 {
    let scores = position.scores();
    let me = position.to_move();
    scores[me] - scores[me.other()]
}

pub(crate) fn side_stones(squares: &[u8; 12], player: Player) -> i32 {
    player
        .citizen_squares()
        .iter()
        .map(|&s| i32::from(squares[s as usize]))
        .sum()
}

/// The static evaluation from the point of view of the player to move, in units of
/// 1/[`EVAL_SCALE`] point.
///
/// * A finished game scores its exact final difference: `EVAL_SCALE × (mine − theirs)`.
/// * Otherwise: `EVAL_SCALE × (mine − theirs)` plus a small bonus for each stone on the mover's
///   own citizen squares and a malus for each on the opponent's (those stones are collected by
///   their side's owner when the game ends).
#[must_use]
pub fn evaluate(position: &Position) -> i32 {
    let diff = EVAL_SCALE * score_difference(position);
    if position.is_over() {
        return diff;
    }
    let squares = position.squares();
    let me = position.to_move();
    diff + SIDE_STONE * (side_stones(&squares, me) - side_stones(&squares, me.other()))
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
