//! The timekeeper over a store that refuses to write: a deadline that fails is tried again
//! until the store is back, without holding up the deadlines of other games. Real time, as the
//! manager's clocks are the system's; the retries are shortened so that the tests stay short.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use oanquan_rules::{ByPlayer, Outcome, Player, Preset};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::clock::TimeControl;
use crate::faulty_store::FaultyStore;
use crate::manager::{GameManager, NewGame};
use crate::model::{GameId, GameInfo, GameStatus, Termination};
use crate::timekeeper::{Backoff, spawn_with_backoff};
use crate::token::PlayerToken;

const FIRST: Player = Player::First;
const SECOND: Player = Player::Second;

/// Short retries: 50 ms, 100 ms, then every 200 ms.
const BACKOFF: Backoff = Backoff {
    first: Duration::from_millis(50),
    most: Duration::from_millis(200),
};

/// A manager over a flaky store, and its timekeeper (stopped by dropping the sender).
fn keeper() -> (
    Arc<FaultyStore>,
    Arc<GameManager>,
    watch::Sender<bool>,
    JoinHandle<()>,
) {
    let (store, manager) = FaultyStore::with_manager();
    let (stop, stopped) = watch::channel(false);
    let keeper = spawn_with_backoff(Arc::clone(&manager), false, stopped, BACKOFF);
    (store, manager, stop, keeper)
}

/// A game of `seconds`+0 between Lan (first) and Minh, with both first moves played: the first
/// player's clock runs. Returns it with the time the first player's flag falls.
async fn flag_running(manager: &GameManager, seconds: u64) -> (GameInfo, SystemTime) {
    let lan = manager
        .create_game(NewGame {
            rules: Preset::Standard.rules(),
            preset: Some(Preset::Standard),
            start: None,
            seat: Some(FIRST),
            display_name: "Lan".to_owned(),
            computer: None,
            time_control: TimeControl::real_time(Duration::from_secs(seconds), Duration::ZERO)
                .unwrap(),
            account: None,
            rated: false,
        })
        .await
        .unwrap();
    let minh = manager.join_game(&lan.game.id, "Minh").await.unwrap();
    let tokens: ByPlayer<PlayerToken> = ByPlayer::new(lan.token, minh.token);
    let mut info = minh.game;
    for _ in 0..2 {
        let mover = info.position.to_move();
        let mv = info.position.legal_moves()[0];
        info = manager
            .play_move(&info.id, &tokens[mover], mv, Some(info.position.ply()))
            .await
            .unwrap()
            .1;
    }
    assert_eq!(info.position.to_move(), FIRST);
    let flag = info.turn_started.unwrap() + Duration::from_secs(seconds);
    (info, flag)
}

/// Waits (at most `within`) for the commit that ends game `id`; says when it came.
async fn ended(
    commits: &mut tokio::sync::broadcast::Receiver<Arc<GameInfo>>,
    id: &GameId,
    within: Duration,
) -> Option<(Arc<GameInfo>, SystemTime)> {
    tokio::time::timeout(within, async {
        loop {
            let info = commits.recv().await.unwrap();
            if &info.id == id && info.status.is_over() {
                return (info, SystemTime::now());
            }
        }
    })
    .await
    .ok()
}

fn assert_lost_on_time(over: &GameInfo, flag: SystemTime) {
    assert_eq!(over.status, GameStatus::Finished);
    let result = over.result.unwrap();
    assert_eq!(result.termination, Termination::Timeout);
    assert_eq!(result.outcome, Some(Outcome::Decisive { winner: SECOND }));
    assert_eq!(result.ended_by, Some(FIRST));
    assert_eq!(over.clock.unwrap().remaining.first, Duration::ZERO);
    // The game ends at the deadline, however late the store let it.
    assert_eq!(over.updated, flag);
}

async fn sleep_until(at: SystemTime) {
    if let Ok(wait) = at.duration_since(SystemTime::now()) {
        tokio::time::sleep(wait).await;
    }
}

/// The store refuses the flag for 2 s, longer than the two tries a second apart the keeper
/// used to make before giving up (leaving the game active for ever, with a clock at zero).
#[tokio::test]
async fn a_flag_the_store_refused_falls_once_the_store_is_back() {
    let (store, manager, stop, keeper) = keeper();
    let mut commits = manager.subscribe_commits();
    let (game, flag) = flag_running(&manager, 1).await;
    store.refuse(&game.id);
    let outage = flag + Duration::from_secs(2);
    let wait = outage.duration_since(SystemTime::now()).unwrap();
    assert!(
        ended(&mut commits, &game.id, wait).await.is_none(),
        "the game ended while the store refused to write"
    );
    sleep_until(outage).await;
    assert_eq!(
        manager.get_game(&game.id).await.unwrap().status,
        GameStatus::Active
    );
    let refused = store.refusals();

    store.heal(&game.id);
    let healed = SystemTime::now();
    let (over, when) = ended(&mut commits, &game.id, Duration::from_secs(3))
        .await
        .expect("the timekeeper applied the flag once the store was back");
    let late = when.duration_since(healed).unwrap_or_default();
    assert!(
        late < Duration::from_secs(1),
        "applied {late:?} after the store came back"
    );
    // Tried all along the outage (50, 100, then every 200 ms), not twice.
    assert!(refused >= 5, "tried {refused} times in the outage");
    assert_lost_on_time(&over, flag);
    assert_eq!(manager.get_game(&game.id).await.unwrap(), *over);

    // Applied: the keeper tries no more (the game's next deadline is its rematch window's,
    // minutes away).
    let loads = store.loads();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(store.loads(), loads, "tried again after it was applied");

    stop.send(true).unwrap();
    keeper.await.unwrap();
}

/// While one game's flag keeps failing, another game's flag falls on time; once the refused
/// game is ended by someone else (as a refused late move ends it), the keeper stops trying.
#[tokio::test]
async fn a_failing_deadline_holds_up_no_other_game_and_stops_once_moot() {
    let (store, manager, stop, keeper) = keeper();
    let mut commits = manager.subscribe_commits();
    let (stuck, stuck_flag) = flag_running(&manager, 1).await;
    store.refuse(&stuck.id);
    // The other game's flag falls a second after the stuck one's, while it is retried.
    sleep_until(stuck_flag - Duration::from_millis(500)).await;
    let (other, other_flag) = flag_running(&manager, 1).await;
    assert!(other_flag > stuck_flag + Duration::from_millis(300));

    let (over, when) = ended(&mut commits, &other.id, Duration::from_secs(3))
        .await
        .expect("the other game's flag fell");
    let late = when
        .duration_since(other_flag)
        .expect("the flag fell before the deadline");
    assert!(
        late < Duration::from_millis(200),
        "the flag fell {late:?} late"
    );
    assert_lost_on_time(&over, other_flag);
    assert!(store.refusals() >= 2, "the stuck game was tried meanwhile");
    assert_eq!(
        manager.get_game(&stuck.id).await.unwrap().status,
        GameStatus::Active
    );

    // The store is back and the game is ended outside the keeper (a late move applies the
    // deadline so): the deadline the keeper retries is moot (unless its own next try won).
    store.heal(&stuck.id);
    manager.apply_deadline(&stuck.id).await.unwrap();
    let over = manager.get_game(&stuck.id).await.unwrap();
    assert_lost_on_time(&over, stuck_flag);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let loads = store.loads();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        store.loads(),
        loads,
        "the keeper kept trying a game that is over"
    );

    stop.send(true).unwrap();
    keeper.await.unwrap();
}
