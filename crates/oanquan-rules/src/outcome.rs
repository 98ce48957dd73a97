//! How a game ended: the reason and the result. A module of its own because both the position
//! (which decides the end) and the move trace (which reports it) name these types.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::player::Player;

/// Why a game ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// Both mandarin squares empty (or, under
    /// [`EndCondition::PiecesCaptured`](crate::EndCondition::PiecesCaptured), both pieces
    /// captured).
    Mandarins,
    /// A position occurred for the rule set's repetition limit.
    Repetition,
    /// The rule set's `max_plies` moves were played, or the player to move had to refill but
    /// the loan would have broken the engine's bounds
    /// ([`MAX_BOARD_STONES`](crate::MAX_BOARD_STONES), [`MAX_DEBT`](crate::MAX_DEBT)).
    PlyLimit,
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EndReason::Mandarins => "mandarins",
            EndReason::Repetition => "repetition",
            EndReason::PlyLimit => "ply limit",
        })
    }
}

/// The result of a finished game.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// One player has more points.
    Decisive {
        /// The player with more points.
        winner: Player,
    },
    /// Equal points.
    Draw,
}

impl Outcome {
    /// The winner, if any.
    #[must_use]
    pub const fn winner(self) -> Option<Player> {
        match self {
            Outcome::Decisive { winner } => Some(winner),
            Outcome::Draw => None,
        }
    }
}
