//! What time does to a game: its next deadline, its clocks at an instant, and whether the
//! background agents must hear of it. Functions of a game's state, apart from `clock`'s plain
//! time types so that the model can hold those without depending on the game.

use std::time::SystemTime;

use crate::clock::{ClockReading, Deadline, DeadlineKind};
use crate::model::{GameInfo, GameStatus, has_computer_seat};

/// Whether the player to move is making their first move of the game (each player's first
/// move has its own limit, and the clock does not run for it).
#[must_use]
pub fn is_first_move(info: &GameInfo) -> bool {
    info.move_count < 2
}

/// The next thing that happens to `info` by itself, if anything.
#[must_use]
pub fn deadline(info: &GameInfo) -> Option<Deadline> {
    match info.status {
        GameStatus::Active => {
            let clock = info.clock?;
            let started = info.turn_started?;
            let player = info.position.to_move();
            if is_first_move(info) {
                Some(Deadline {
                    at: started + clock.first_move,
                    kind: DeadlineKind::FirstMove { player },
                })
            } else {
                Some(Deadline {
                    at: started + clock.remaining[player],
                    kind: DeadlineKind::Flag { player },
                })
            }
        }
        GameStatus::Finished => {
            let closes = info.rematch.open_until()?;
            Some(Deadline {
                at: closes,
                kind: DeadlineKind::RematchWindow,
            })
        }
        GameStatus::WaitingForPlayers | GameStatus::Aborted => None,
    }
}

/// `info`'s clocks at `now` (`None` for an untimed game).
#[must_use]
pub fn reading(info: &GameInfo, now: SystemTime) -> Option<ClockReading> {
    let clock = info.clock?;
    let mut remaining = clock.remaining;
    let mut running = None;
    let mut deadline_at = None;
    if info.status == GameStatus::Active {
        if let Some(deadline) = deadline(info) {
            deadline_at = Some(deadline.at);
        }
        if !is_first_move(info) {
            let player = info.position.to_move();
            let elapsed = info
                .turn_started
                .and_then(|started| now.duration_since(started).ok())
                .unwrap_or_default();
            remaining[player] = remaining[player].saturating_sub(elapsed);
            running = Some(player);
        }
    }
    Some(ClockReading {
        remaining,
        measured_at: now,
        running,
        deadline: deadline_at,
    })
}

/// Whether a game needs the background agents' attention after a commit: a computer seat to
/// play, or a [`deadline`] to keep.
#[must_use]
pub fn needs_agents(info: &GameInfo) -> bool {
    has_computer_seat(info) || deadline(info).is_some()
}
