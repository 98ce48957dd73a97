use crate::position::Position;

/// Counts the move sequences of exactly `depth` moves from `position` (leaf nodes of the game
/// tree). A game that ends earlier contributes nothing, as checkmate does in chess perft; the
/// repetition rule, which needs a game's history, is not applied.
#[must_use]
pub fn perft(position: &Position, depth: u32) -> u64 {
    match depth {
        0 => 1,
        // Bulk counting: the last ply needs no move played.
        1 => position.legal_moves().len() as u64,
        _ => position
            .legal_moves()
            .iter()
            .map(|&mv| {
                let mut child = *position;
                child.play_unchecked(mv);
                perft(&child, depth - 1)
            })
            .sum(),
    }
}
