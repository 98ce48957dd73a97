//! The transposition table: one entry per slot, replaced when the new result is at least as deep
//! or comes from another position.

use oanquan_rules::{Direction, Move};

/// Depth stored for a result that does not depend on any depth horizon: its whole subtree ended
/// in finished games, so it is exact at every depth.
pub(crate) const DEPTH_SOLVED: u8 = u8::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    Exact,
    /// The value is at least this (fail high).
    Lower,
    /// The value is at most this (fail low).
    Upper,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) key: u64,
    /// Relative to the score difference of the position (see `search.rs`).
    pub(crate) value: i32,
    pub(crate) mv: u8,
    pub(crate) depth: u8,
    pub(crate) bound: Bound,
}

const EMPTY: Entry = Entry {
    key: 0,
    value: 0,
    mv: 0,
    depth: 0,
    bound: Bound::Upper,
};

pub(crate) fn encode(mv: Move) -> u8 {
    mv.square * 2 + u8::from(mv.direction == Direction::Right) + 1
}

pub(crate) fn decode(code: u8) -> Option<Move> {
    let c = code.checked_sub(1)?;
    let direction = if c & 1 == 1 {
        Direction::Right
    } else {
        Direction::Left
    };
    Some(Move::new(c / 2, direction))
}

#[derive(Debug)]
pub(crate) struct Table {
    entries: Vec<Entry>,
    mask: usize,
}

impl Table {
    /// A table of about `bytes` bytes (rounded down to a power of two entries, at least 1024).
    pub(crate) fn with_bytes(bytes: usize) -> Table {
        let wanted = (bytes / size_of::<Entry>()).max(1024);
        let len = if wanted.is_power_of_two() {
            wanted
        } else {
            wanted.next_power_of_two() / 2
        };
        Table {
            entries: vec![EMPTY; len],
            mask: len - 1,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.entries.fill(EMPTY);
    }

    pub(crate) fn bytes(&self) -> usize {
        self.entries.len() * size_of::<Entry>()
    }

    pub(crate) fn probe(&self, key: u64) -> Option<Entry> {
        let e = self.entries[key as usize & self.mask];
        (e.key == key && e.mv != 0).then_some(e)
    }

    pub(crate) fn store(&mut self, key: u64, value: i32, mv: Move, depth: u8, bound: Bound) {
        let slot = &mut self.entries[key as usize & self.mask];
        if slot.key != key || depth >= slot.depth {
            *slot = Entry {
                key,
                value,
                mv: encode(mv),
                depth,
                bound,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_round_trip_through_codes() {
        for square in 1..=11 {
            for direction in Direction::ALL {
                let mv = Move::new(square, direction);
                assert_eq!(decode(encode(mv)), Some(mv));
            }
        }
        assert_eq!(decode(0), None);
    }
}
