//! The idle reaper: games nobody joins or plays in for too long are aborted with the normal
//! events, so watchers see them end. A client of the [`GameManager`] like any caller, woken by
//! a timer; the manager knows nothing of it.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::error::GameError;
use crate::manager::{GameManager, MAX_PAGE_SIZE};
use crate::model::{GameFilter, GameStatus};

/// Aborts every waiting game whose last change is older than `idle`, and every active untimed
/// game nobody has moved in for `idle` past the abandonment time (so its waiting player had
/// `idle` to claim the win first), with the normal `GameOver` and lobby events. Timed games
/// are left to their clocks. Returns how many it aborted.
///
/// A waiting game's idle time counts from `up_since` (when this server started) at the
/// earliest: nobody could join it while no server ran, and a restart after a long outage
/// would otherwise abort every waiting game at once. Active games need no such care: a
/// restart starts their turns again ([`GameManager::resume_clock`]).
///
/// # Errors
///
/// Store failures while listing.
pub async fn expire_idle_games(
    manager: &GameManager,
    idle: Duration,
    up_since: SystemTime,
) -> Result<usize, GameError> {
    let now = crate::service_clock::now();
    let Some(cutoff) = now.checked_sub(idle) else {
        return Ok(0);
    };
    let active_cutoff = now
        .checked_sub(idle.saturating_add(manager.time_policy().abandon_after))
        .unwrap_or(std::time::UNIX_EPOCH);
    let mut idle_ids = Vec::new();
    for filter in [GameFilter::Open, GameFilter::Active] {
        let mut cursor: Option<String> = None;
        loop {
            let page = manager
                .list_games(filter, MAX_PAGE_SIZE, cursor.as_deref())
                .await?;
            idle_ids.extend(page.games.iter().filter_map(|g| match g.status {
                GameStatus::WaitingForPlayers if g.idle_since() < cutoff && up_since < cutoff => {
                    Some((g.id.clone(), cutoff))
                }
                GameStatus::Active
                    if !g.time_control.is_timed() && g.idle_since() < active_cutoff =>
                {
                    Some((g.id.clone(), active_cutoff))
                }
                _ => None,
            }));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
    }
    let mut expired = 0;
    for (id, cutoff) in idle_ids {
        match manager.expire_idle(&id, cutoff).await {
            Ok(true) => {
                expired += 1;
                info!(game_id = %id, idle = ?idle, "idle game aborted");
            }
            Ok(false) => {}
            Err(error) => debug!(game_id = %id, %error, "could not expire an idle game"),
        }
    }
    Ok(expired)
}

/// How often the reaper looks for idle games: a quarter of the idle time, between 10 ms and
/// one minute.
#[must_use]
pub fn sweep_interval(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(60))
}

/// Runs [`expire_idle_games`] every [`sweep_interval`] until `stop` turns `true`.
pub fn spawn_idle_reaper(
    manager: Arc<GameManager>,
    idle: Duration,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let period = sweep_interval(idle);
    let up_since = crate::service_clock::now();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.wait_for(|stopping| *stopping) => break,
                _ = ticker.tick() => {}
            }
            if let Err(error) = expire_idle_games(&manager, idle, up_since).await {
                warn!(%error, "looking for idle games failed");
            }
        }
    })
}
