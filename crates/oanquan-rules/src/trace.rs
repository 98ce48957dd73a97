use serde::{Deserialize, Serialize};

use crate::outcome::EndReason;
use crate::player::{ByPlayer, Player};

/// One step of a move, in the order it happened, so that a client can animate the move.
///
/// Squares are ring indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "snake_case", tag = "step")]
pub enum Step {
    /// All stones taken from `square`: the chosen square, or a relay from the square after the
    /// last stone.
    PickUp {
        /// Where the stones were taken.
        square: u8,
        /// How many.
        stones: u8,
        /// `false` for the chosen square, `true` for a relay.
        relay: bool,
    },
    /// One stone dropped into `square`.
    Sow {
        /// Where it was dropped.
        square: u8,
    },
    /// The square after the last stone is a mandarin square: the turn ends.
    StopAtMandarin {
        /// The mandarin square.
        square: u8,
    },
    /// Two empty squares in a row: the turn ends with nothing (more) captured.
    StopTwoEmpty {
        /// The first empty square.
        gap: u8,
        /// The empty square after it.
        next: u8,
    },
    /// Everything in `square` captured by `player`.
    Capture {
        /// The capturing player (the mover).
        player: Player,
        /// The captured square.
        square: u8,
        /// Plain stones taken.
        stones: u8,
        /// Mandarin pieces taken (0 or 1).
        pieces: u8,
    },
    /// A mandarin square would have been captured, but the opening protection forbids it: the
    /// turn ends.
    CaptureProtected {
        /// The protected mandarin square.
        square: u8,
    },
    /// A mandarin square would have been captured, but it still holds its piece with too few
    /// stones (quan non): the turn ends.
    CaptureImmature {
        /// The immature mandarin square.
        square: u8,
    },
    /// The player to move had no stones on their side: one stone put in each of their squares,
    /// borrowed from their captured count.
    Refill {
        /// Whose side was refilled.
        player: Player,
        /// Their captured stones afterwards (negative means debt).
        captured_after: i32,
    },
    /// The game ended; each player collected `collected` stones (their own side, plus their
    /// share of stones left in mandarin squares).
    GameOver {
        /// Why.
        reason: EndReason,
        /// Stones each player collected.
        collected: ByPlayer<i32>,
    },
}

/// Receives the steps of a move. Generic so that the untraced fast path compiles to nothing.
pub(crate) trait Tracer {
    const ENABLED: bool;
    fn step(&mut self, step: Step);
}

pub(crate) struct NoTrace;

impl Tracer for NoTrace {
    const ENABLED: bool = false;
    #[inline(always)]
    fn step(&mut self, _: Step) {}
}

impl Tracer for Vec<Step> {
    const ENABLED: bool = true;
    fn step(&mut self, step: Step) {
        self.push(step);
    }
}
