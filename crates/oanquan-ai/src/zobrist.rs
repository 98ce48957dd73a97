//! Zobrist keys.
//!
//! Two keys per position:
//!
//! * the **repetition key** hashes what the repetition rule compares (the twelve squares, the
//!   mandarin pieces and the player to move);
//! * the **search key** adds the ply, because the ply limit and the opening protection make the
//!   value of a board depend on it.
//!
//! Scores are deliberately left out: nothing in the rules depends on the captured counts, so the
//! transposition table stores values *relative to the current score difference* (see
//! `search.rs`) and positions that differ only in their scores share an entry.

use oanquan_rules::{Player, Position, SQUARES};

use crate::rng::mix;

/// Stones per square fit a `u8`.
const COUNTS: usize = 256;

static SQUARE_KEYS: [[u64; COUNTS]; SQUARES] = square_keys();
const PIECE_KEYS: [u64; 2] = [mix(0x000A_11CE_0001), mix(0x000A_11CE_0002)];
const SECOND_TO_MOVE: u64 = mix(0x000A_11CE_0003);
const PLY_SALT: u64 = 0x005E_ED0F_A1AE_0000;

const fn square_keys() -> [[u64; COUNTS]; SQUARES] {
    let mut table = [[0; COUNTS]; SQUARES];
    let mut square = 0;
    while square < SQUARES {
        // Count 0 hashes to 0, so an empty board and the side to move alone decide the key.
        let mut count = 1;
        while count < COUNTS {
            table[square][count] = mix(((square * COUNTS + count) as u64) << 8 | 0x17);
            count += 1;
        }
        square += 1;
    }
    table
}

/// The key of what the repetition rule compares: board, pieces and player to move.
pub(crate) fn repetition_key(position: &Position) -> u64 {
    let squares = position.squares();
    let mut key = 0;
    for (keys, &count) in SQUARE_KEYS.iter().zip(&squares) {
        key ^= keys[count as usize];
    }
    for (i, m) in [0u8, 6].into_iter().enumerate() {
        if position.has_piece(m) {
            key ^= PIECE_KEYS[i];
        }
    }
    if position.to_move() == Player::Second {
        key ^= SECOND_TO_MOVE;
    }
    key
}

/// The transposition-table key: the repetition key plus the ply.
pub(crate) fn search_key(repetition_key: u64, ply: u32) -> u64 {
    repetition_key ^ mix(PLY_SALT ^ u64::from(ply))
}
