//! A tiny seeded generator (SplitMix64): reproducible tie-breaking without a dependency.

/// SplitMix64 by Sebastiano Vigna: 64 bits of state, passes BigCrush, and is plenty for
/// shuffling ten moves.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

/// One SplitMix64 output step, usable in `const` context (Zobrist keys).
pub(crate) const fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix64 {
    pub(crate) const fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let state = self.0;
        self.0 = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(state)
    }

    /// A uniform index below `n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        // Multiply-shift: bias below 2^-50 for n <= 10, irrelevant here.
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Fisher-Yates shuffle.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}
