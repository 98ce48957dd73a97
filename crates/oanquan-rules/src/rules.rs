use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Stones in each citizen square at the start, in every rule set.
pub const CITIZEN_STONES: u8 = 5;
/// Plain stones in each mandarin square at the start under [`MandarinSetup::Stones`].
pub const MANDARIN_STONES: u8 = 10;

/// What a mandarin square holds at the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum MandarinSetup {
    /// Ten plain stones in each mandarin square (standard).
    Stones,
    /// One mandarin piece worth `value` points in each mandarin square, and no stones.
    Piece {
        /// What a captured piece scores (10 or 5 by tradition).
        value: u8,
    },
}

/// What happens when the square after the last sown stone is an empty mandarin square.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "snake_case")]
pub enum EmptyMandarinNext {
    /// The turn ends, as it does for any mandarin square (standard).
    EndsTurn,
    /// The empty mandarin square is a gap like an empty citizen square: capture beyond it
    /// (traditional).
    EmptySquare,
}

/// When the game ends by itself (besides repetition and the ply limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "snake_case")]
pub enum EndCondition {
    /// Both mandarin squares hold nothing (standard).
    MandarinSquaresEmpty,
    /// Both mandarin pieces are captured; stones left in mandarin squares are split evenly, the
    /// odd stone to the opponent of the last mover. Needs [`MandarinSetup::Piece`].
    PiecesCaptured,
}

/// A complete rule set: every knob of `RULES.md`.
///
/// Games store the whole rule set, not a preset name, so a stored game replays exactly even if a
/// preset changes. Build one from a [`Preset`] and adjust fields; [`Rules::validate`] (called by
/// every constructor that takes rules) rejects contradictory combinations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// What the mandarin squares hold at the start.
    pub mandarin: MandarinSetup,
    /// An empty mandarin square right after the last stone.
    pub empty_mandarin_next: EmptyMandarinNext,
    /// Mandarin squares cannot be captured during the first `protected_plies` moves of the game.
    pub protected_plies: u32,
    /// Immature mandarin (quan non): with [`MandarinSetup::Piece`], a square still holding its
    /// piece with fewer than this many stones cannot be captured. `0` turns the rule off.
    pub immature_mandarin: u8,
    /// When the game ends.
    pub end_condition: EndCondition,
    /// The game ends when a position occurs for this many times; `0` turns the rule off.
    pub repetition_limit: u32,
    /// The game ends after this many moves (at least 1).
    pub max_plies: u32,
}

/// Why a [`Rules`] value cannot be played.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RulesError {
    /// A mandarin piece must be worth at least one point.
    ZeroPieceValue,
    /// The immature-mandarin rule only exists with mandarin pieces.
    ImmatureWithoutPieces,
    /// "Both pieces captured" cannot end a game without pieces.
    PiecesCapturedWithoutPieces,
    /// A repetition limit of 1 would end every game at its start position.
    RepetitionLimitOne,
    /// `max_plies` must be at least 1, so that every game ends.
    ZeroMaxPlies,
}

impl fmt::Display for RulesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RulesError::ZeroPieceValue => "a mandarin piece must be worth at least 1 point",
            RulesError::ImmatureWithoutPieces => {
                "the immature-mandarin rule needs the mandarin piece setup"
            }
            RulesError::PiecesCapturedWithoutPieces => {
                "the end condition 'pieces captured' needs the mandarin piece setup"
            }
            RulesError::RepetitionLimitOne => {
                "repetition limit must be 0 (off) or at least 2; 1 would end every game at once"
            }
            RulesError::ZeroMaxPlies => "max plies must be at least 1 so that every game ends",
        })
    }
}

impl std::error::Error for RulesError {}

impl Rules {
    /// The `standard` preset: what the product calls Ô Ăn Quan.
    pub const STANDARD: Rules = Rules {
        mandarin: MandarinSetup::Stones,
        empty_mandarin_next: EmptyMandarinNext::EndsTurn,
        protected_plies: 1,
        immature_mandarin: 0,
        end_condition: EndCondition::MandarinSquaresEmpty,
        repetition_limit: 3,
        max_plies: 300,
    };

    /// The `traditional` preset (Vietnamese Wikipedia): an empty mandarin square after the last
    /// stone is an ordinary gap, and the opening is not protected.
    pub const TRADITIONAL: Rules = Rules {
        empty_mandarin_next: EmptyMandarinNext::EmptySquare,
        protected_plies: 0,
        ..Rules::STANDARD
    };

    /// The `mancala-world` preset: one mandarin piece worth 10 per mandarin square, no opening
    /// protection, and the game ends when both pieces are captured.
    pub const MANCALA_WORLD: Rules = Rules {
        mandarin: MandarinSetup::Piece { value: 10 },
        protected_plies: 0,
        end_condition: EndCondition::PiecesCaptured,
        ..Rules::STANDARD
    };

    /// Checks that the knobs fit together.
    ///
    /// # Errors
    ///
    /// The first contradiction found, as a [`RulesError`].
    pub fn validate(&self) -> Result<(), RulesError> {
        let pieces = match self.mandarin {
            MandarinSetup::Stones => false,
            MandarinSetup::Piece { value: 0 } => return Err(RulesError::ZeroPieceValue),
            MandarinSetup::Piece { .. } => true,
        };
        if !pieces && self.immature_mandarin > 0 {
            return Err(RulesError::ImmatureWithoutPieces);
        }
        if !pieces && self.end_condition == EndCondition::PiecesCaptured {
            return Err(RulesError::PiecesCapturedWithoutPieces);
        }
        if self.repetition_limit == 1 {
            return Err(RulesError::RepetitionLimitOne);
        }
        if self.max_plies == 0 {
            return Err(RulesError::ZeroMaxPlies);
        }
        Ok(())
    }

    /// What a captured mandarin piece scores (0 without pieces).
    #[must_use]
    pub const fn piece_value(&self) -> i32 {
        match self.mandarin {
            MandarinSetup::Stones => 0,
            MandarinSetup::Piece { value } => value as i32,
        }
    }

    /// Whether mandarin squares start with a piece.
    #[must_use]
    pub const fn has_pieces(&self) -> bool {
        matches!(self.mandarin, MandarinSetup::Piece { .. })
    }

    /// The points in play: stones on the board (a piece counting its value) plus both scores
    /// always add up to this (70 in every preset).
    #[must_use]
    pub const fn total(&self) -> i32 {
        let mandarin = match self.mandarin {
            MandarinSetup::Stones => MANDARIN_STONES as i32,
            MandarinSetup::Piece { value } => value as i32,
        };
        10 * CITIZEN_STONES as i32 + 2 * mandarin
    }
}

impl Default for Rules {
    fn default() -> Self {
        Rules::STANDARD
    }
}

/// A named rule set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum Preset {
    /// `standard`: see [`Rules::STANDARD`].
    #[serde(rename = "standard")]
    Standard,
    /// `traditional`: see [`Rules::TRADITIONAL`].
    #[serde(rename = "traditional")]
    Traditional,
    /// `mancala-world`: see [`Rules::MANCALA_WORLD`].
    #[serde(rename = "mancala-world")]
    MancalaWorld,
}

impl Preset {
    /// Every preset, `standard` first.
    pub const ALL: [Preset; 3] = [Preset::Standard, Preset::Traditional, Preset::MancalaWorld];

    /// The preset's name, as [`FromStr`] reads it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Preset::Standard => "standard",
            Preset::Traditional => "traditional",
            Preset::MancalaWorld => "mancala-world",
        }
    }

    /// One line on what sets the preset apart.
    #[must_use]
    pub const fn description(self) -> &'static str {
        match self {
            Preset::Standard => {
                "10 stones per mandarin square, first move protected, ends when both mandarin squares are empty"
            }
            Preset::Traditional => {
                "standard, but an empty mandarin square after the last stone is a gap, and no opening protection"
            }
            Preset::MancalaWorld => {
                "one mandarin piece worth 10 per mandarin square, no opening protection, ends when both pieces are captured"
            }
        }
    }

    /// The preset's full rule set.
    #[must_use]
    pub const fn rules(self) -> Rules {
        match self {
            Preset::Standard => Rules::STANDARD,
            Preset::Traditional => Rules::TRADITIONAL,
            Preset::MancalaWorld => Rules::MANCALA_WORLD,
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown preset name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPreset(pub String);

impl fmt::Display for UnknownPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown rule preset {:?}; known presets: standard, traditional, mancala-world",
            self.0
        )
    }
}

impl std::error::Error for UnknownPreset {}

impl FromStr for Preset {
    type Err = UnknownPreset;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownPreset(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_total_seventy() {
        for preset in Preset::ALL {
            let rules = preset.rules();
            assert_eq!(rules.validate(), Ok(()), "{preset}");
            assert_eq!(rules.total(), 70, "{preset}");
            assert_eq!(preset.name().parse::<Preset>(), Ok(preset));
        }
    }

    #[test]
    fn contradictions_are_rejected() {
        let mut r = Rules::STANDARD;
        r.immature_mandarin = 5;
        assert_eq!(r.validate(), Err(RulesError::ImmatureWithoutPieces));
        let mut r = Rules::STANDARD;
        r.end_condition = EndCondition::PiecesCaptured;
        assert_eq!(r.validate(), Err(RulesError::PiecesCapturedWithoutPieces));
        let mut r = Rules::MANCALA_WORLD;
        r.mandarin = MandarinSetup::Piece { value: 0 };
        assert_eq!(r.validate(), Err(RulesError::ZeroPieceValue));
        let mut r = Rules::STANDARD;
        r.repetition_limit = 1;
        assert_eq!(r.validate(), Err(RulesError::RepetitionLimitOne));
        r.repetition_limit = 0;
        r.max_plies = 0;
        assert_eq!(r.validate(), Err(RulesError::ZeroMaxPlies));
    }

    #[test]
    fn rules_round_trip_through_json() {
        for preset in Preset::ALL {
            let json = serde_json::to_string(&preset.rules()).unwrap();
            let back: Rules = serde_json::from_str(&json).unwrap();
            assert_eq!(back, preset.rules());
        }
    }

    #[test]
    fn unknown_preset_names_the_known_ones() {
        let err = "chess".parse::<Preset>().unwrap_err();
        assert!(err.to_string().contains("mancala-world"));
    }
}
