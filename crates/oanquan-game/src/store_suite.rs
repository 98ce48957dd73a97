//! The cases every [`GameStore`] passes, so that a new backend (PostgreSQL) is held to what the
//! others do. Each case takes a fresh, empty store; [`store_suite!`](crate::store_suite!) makes
//! one test per case from an expression that opens one.
//!
//! Built for this crate's tests and, with the `store-suite` feature, for other stores' tests.

use std::net::IpAddr;
use std::sync::Arc;

use oanquan_rules::{Move, Player, Preset};

use crate::hub::Hub;
use crate::manager::{GameManager, ManagerLimits, NewGame, Seated};
use crate::model::{GameFilter, GameId, GameStatus};
use crate::store::{Commit, GameStore, Since, StoreError};

/// One test per case of this module, each on the store that `$open` makes. `$open` is
/// evaluated in each test and gives `(Arc<dyn GameStore>, guard)`; the guard (a temporary
/// directory, say) lives until the test ends.
#[macro_export]
macro_rules! store_suite {
    ($open:expr) => {
        $crate::store_suite!(@cases $open;
            a_game_reads_back_as_committed,
            an_unknown_game_is_not_found,
            a_stale_commit_conflicts_and_changes_nothing,
            game_events_resume_after_any_sequence,
            listings_page_and_refuse_foreign_cursors,
            lobby_events_and_snapshot_agree,
            open_games_are_listed_by_creator_until_they_end,
        );
    };
    (@cases $open:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let (store, _guard) = $open;
                $crate::store_suite::$case(store).await;
            }
        )*
    };
}

fn manager(store: &Arc<dyn GameStore>) -> GameManager {
    GameManager::new(Arc::clone(store), Hub::new(64), ManagerLimits::default())
}

fn new_game() -> NewGame {
    NewGame {
        rules: Preset::Standard.rules(),
        preset: Some(Preset::Standard),
        start: None,
        seat: Some(Player::First),
        display_name: "Lan".to_owned(),
        computer: None,
        time_control: crate::clock::TimeControl::Untimed,
    }
}

/// A game with both seats taken and `moves` moves played (the first legal move each time).
async fn played(manager: &GameManager, moves: usize) -> (GameId, [Seated; 2]) {
    let first = manager.create_game(new_game()).await.unwrap();
    let id = first.game.id.clone();
    let second = manager.join_game(&id, "Minh").await.unwrap();
    let seats = [first, second];
    for _ in 0..moves {
        let game = manager.get_game(&id).await.unwrap();
        let mv: Move = game.position.legal_moves()[0];
        let seat = &seats[usize::from(game.position.to_move() == Player::Second)];
        manager
            .play_move(&id, &seat.token, mv, Some(game.position.ply()))
            .await
            .unwrap();
    }
    (id, seats)
}

/// What is committed loads back the same, whole and as a summary.
pub async fn a_game_reads_back_as_committed(store: Arc<dyn GameStore>) {
    let manager = manager(&store);
    let (id, _) = played(&manager, 3).await;
    let info = manager.get_game(&id).await.unwrap();
    let state = store.load(&id).await.unwrap();
    assert_eq!(state.info(), &info);
    assert_eq!(store.info(&id).await.unwrap(), info);
    assert_eq!(state.position(), &info.position);
    assert_eq!(info.position.ply(), 3);
    assert_eq!(info.status, GameStatus::Active);
}

/// Every read of a game that does not exist says so.
pub async fn an_unknown_game_is_not_found(store: Arc<dyn GameStore>) {
    let id = GameId::parse("no-such-game").unwrap();
    assert_eq!(store.load(&id).await.unwrap_err(), StoreError::NotFound);
    assert_eq!(store.info(&id).await.unwrap_err(), StoreError::NotFound);
}

/// Optimistic concurrency: a commit made from a state that is no longer the latest is refused
/// with the current sequence, and writes nothing.
pub async fn a_stale_commit_conflicts_and_changes_nothing(store: Arc<dyn GameStore>) {
    let manager = manager(&store);
    let (id, [first, _]) = played(&manager, 0).await;
    let stale = store.load(&id).await.unwrap();
    let stale_sequence = stale.info().sequence;
    // The game moves on without the stale copy.
    let position = stale.info().position;
    manager
        .play_move(
            &id,
            &first.token,
            position.legal_moves()[0],
            Some(position.ply()),
        )
        .await
        .unwrap();
    let current = store.info(&id).await.unwrap();
    let refused = store
        .commit(Commit {
            state: stale,
            expected_sequence: stale_sequence,
            game_events: Vec::new(),
            lobby_events: Vec::new(),
            time: std::time::SystemTime::now(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        StoreError::Conflict {
            current: current.sequence
        }
    );
    assert_eq!(store.info(&id).await.unwrap(), current);
}

/// Resuming the game log after any sequence number gives exactly the events after it, in
/// order, and a number past the end says where the end is.
pub async fn game_events_resume_after_any_sequence(store: Arc<dyn GameStore>) {
    let manager = manager(&store);
    let (id, _) = played(&manager, 2).await;
    let last = store.info(&id).await.unwrap().sequence;
    assert!(last >= 4, "create, join and two moves are events: {last}");
    for after in 0..=last {
        match store.game_events_since(&id, after).await.unwrap() {
            Since::Events { events, done } => {
                let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
                assert_eq!(sequences, ((after + 1)..=last).collect::<Vec<_>>());
                assert!(events.iter().all(|e| e.game_id == id));
                assert!(!done, "the game is still being played");
            }
            other => panic!("after {after}: {other:?}"),
        }
    }
    match store.game_events_since(&id, last + 5).await.unwrap() {
        Since::Ahead { last: at } => assert_eq!(at, last),
        other => panic!("{other:?}"),
    }
}

/// Listings come in pages that together hold every matching game once; a cursor is only good
/// for the filter it came from.
pub async fn listings_page_and_refuse_foreign_cursors(store: Arc<dyn GameStore>) {
    let manager = manager(&store);
    let mut open = Vec::new();
    for _ in 0..5 {
        open.push(manager.create_game(new_game()).await.unwrap().game.id);
    }
    let (active, _) = played(&manager, 1).await;

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = store
            .list(GameFilter::Open, 2, cursor.as_deref())
            .await
            .unwrap();
        assert!(page.games.len() <= 2);
        seen.extend(page.games.iter().map(|g| g.id.clone()));
        pages += 1;
        match page.next_cursor {
            Some(next) => {
                if pages == 1 {
                    assert_eq!(
                        store
                            .list(GameFilter::Active, 2, Some(&next))
                            .await
                            .unwrap_err(),
                        StoreError::BadCursor
                    );
                }
                cursor = Some(next);
            }
            None => break,
        }
        assert!(pages < 10, "the listing does not end");
    }
    seen.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    open.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    assert_eq!(seen, open);

    let page = store.list(GameFilter::Active, 10, None).await.unwrap();
    assert_eq!(
        page.games.iter().map(|g| &g.id).collect::<Vec<_>>(),
        vec![&active]
    );
    assert_eq!(
        store
            .list(GameFilter::Open, 2, Some("not a cursor"))
            .await
            .unwrap_err(),
        StoreError::BadCursor
    );
}

/// The lobby log is numbered 1, 2, 3, ... and its snapshot names the last number.
pub async fn lobby_events_and_snapshot_agree(store: Arc<dyn GameStore>) {
    let manager = manager(&store);
    played(&manager, 1).await;
    manager.create_game(new_game()).await.unwrap();
    let (games, last) = store.lobby_snapshot(100).await.unwrap();
    assert_eq!(games.len(), 2);
    assert!(last >= 2);
    match store.lobby_events_since(0).await.unwrap() {
        Since::Events { events, .. } => {
            let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
            assert_eq!(sequences, (1..=last).collect::<Vec<_>>());
        }
        other => panic!("{other:?}"),
    }
    match store.lobby_events_since(last).await.unwrap() {
        Since::Events { events, .. } => assert!(events.is_empty()),
        other => panic!("{other:?}"),
    }
}

/// Games keep their creator's address while they wait or run, so a restart can count them
/// again; a game that ended is no longer anybody's open game.
pub async fn open_games_are_listed_by_creator_until_they_end(store: Arc<dyn GameStore>) {
    let manager = manager(&store);
    let client: IpAddr = "192.0.2.7".parse().unwrap();
    let kept = manager
        .create_game_from(Some(client), new_game())
        .await
        .unwrap();
    let ended = manager
        .create_game_from(Some(client), new_game())
        .await
        .unwrap();
    manager.create_game_from(None, new_game()).await.unwrap();
    manager.abort(&ended.game.id, &ended.token).await.unwrap();

    let open = store.open_games_by_creator().await.unwrap();
    assert_eq!(open, vec![(kept.game.id, client)]);
}

#[cfg(test)]
mod tests {
    use crate::memory::{MemoryLimits, MemoryStore};
    use crate::store::GameStore;
    use std::sync::Arc;

    crate::store_suite!((
        Arc::new(MemoryStore::new(MemoryLimits::default())) as Arc<dyn GameStore>,
        ()
    ));
}
