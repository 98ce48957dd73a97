//! Plain moves: what one changes in its game's summary, so that schema version 5 need not
//! rewrite the `games` row for it (see `writer`). Kept out of `codec`, which the PostgreSQL
//! store shares and which has no such rows.

use std::time::SystemTime;

use oanquan_game::{ClockReading, GameInfo};

use crate::codec::GameEventDto;

/// What a plain move changes in its game's summary, beside the position (which comes from
/// replaying the moves): the move count, the time of the last change and of the turn's start,
/// and the clock as of that start. A plain move's commit is a `MovePlayed` and a
/// `TurnStarted` and nothing else; from schema version 5 its `games` row is not rewritten when
/// this function reproduces the new summary from the row exactly (the writer checks), and a
/// load applies it for every move logged after the row's sequence.
pub(crate) fn after_plain_move(
    info: &mut GameInfo,
    number: u32,
    clock: Option<&ClockReading>,
    time: SystemTime,
) {
    info.move_count = number;
    info.updated = time;
    info.turn_started = Some(time);
    if let (Some(stored), Some(reading)) = (info.clock.as_mut(), clock) {
        stored.remaining = reading.remaining;
    }
}

/// What a logged event is to [`after_plain_move`].
pub(crate) enum PlainPart {
    /// A move: its number and the clocks after it.
    Move {
        number: u32,
        clock: Option<ClockReading>,
    },
    /// The next turn's start.
    Turn,
}

/// `None` for an event that is not part of a plain move.
pub(crate) fn plain_part(event: &GameEventDto) -> Option<PlainPart> {
    match event {
        GameEventDto::MovePlayed { number, clock } => Some(PlainPart::Move {
            number: *number,
            clock: clock.map(ClockReading::from),
        }),
        GameEventDto::TurnStarted { .. } => Some(PlainPart::Turn),
        _ => None,
    }
}
