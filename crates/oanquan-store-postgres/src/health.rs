//! Whether the database takes writes now ([`GameStore::writable`](oanquan_game::GameStore)),
//! which the server's health follows: a probe every second that asks the database to accept
//! an update (it changes nothing), and every commit's outcome in between. A database that is
//! away, refuses connections, no longer answers, or was switched to read-only turns it `false`
//! within about [`PROBE_INTERVAL`] + [`PROBE_TIMEOUT`]; the first probe or commit that goes
//! through turns it `true` again.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::fault;

/// How often the probe runs, busy or idle: one statement a second is nothing for the database,
/// and a probe that runs only when idle would leave a node that only reads believing itself
/// writable.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// A probe unanswered for this long counts as a failure: a database cut off behind a network
/// that drops packets answers nothing, not an error, until TCP gives up minutes later.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Never executed on a row (`WHERE false`), but PostgreSQL refuses it in a read-only session
/// or on a standby, as it would refuse a commit; it takes no row lock.
const PROBE: &str = "UPDATE lobby_counter SET last = last WHERE false";

/// Records whether writes work, logging the changes only.
pub(crate) fn set(health: &watch::Sender<bool>, writable: bool, why: &dyn std::fmt::Display) {
    let changed = health.send_if_modified(|now| std::mem::replace(now, writable) != writable);
    match (changed, writable) {
        (true, false) => warn!(
            error = %why,
            "the database cannot take writes: health is NOT_SERVING until it can (the error \
             says why)"
        ),
        (true, true) => info!("the database takes writes again: health is SERVING"),
        (false, _) => {}
    }
}

/// Probes the database every [`PROBE_INTERVAL`] until the pool is closed.
pub(crate) async fn probe(pool: Pool, health: Arc<watch::Sender<bool>>) {
    let mut ticks = tokio::time::interval(PROBE_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if pool.is_closed() {
            return;
        }
        let outcome = tokio::time::timeout(PROBE_TIMEOUT, async {
            let client = pool.get().await.map_err(|e| fault::pool(e).to_string())?;
            client
                .batch_execute(PROBE)
                .await
                .map_err(|e| fault::describe(&e))
        })
        .await;
        match outcome {
            Ok(Ok(())) => set(&health, true, &""),
            // Closed by the server's stop: its health has the last word then.
            Ok(Err(_)) if pool.is_closed() => return,
            Ok(Err(why)) => set(&health, false, &why),
            Err(_) => set(
                &health,
                false,
                &format!("no answer within {}s", PROBE_TIMEOUT.as_secs()),
            ),
        }
    }
}
