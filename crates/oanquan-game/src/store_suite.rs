//! The cases every [`GameStore`] passes, so that a new backend (PostgreSQL) is held to what the
//! others do. Each case takes a fresh, empty store; [`store_suite!`](crate::store_suite!) makes
//! one test per case from an expression that opens one.
//!
//! Built for this crate's tests and, with the `store-suite` feature, for other stores' tests.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use oanquan_rules::{Move, Outcome, Player, Preset};
use tokio::sync::broadcast;

use crate::clock::{self, TimeControl};
use crate::hub::Hub;
use crate::manager::{GameManager, ManagerLimits, NewGame, Seated};
use crate::model::{
    DrawAction, GameEvent, GameEventKind, GameFilter, GameId, GameInfo, GameState, GameStatus,
    RematchAction, Termination,
};
use crate::store::{Commit, Committed, GameStore, Since, StoreError};
use crate::transition::{self, Transition};

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
            a_timed_game_keeps_its_clock_and_turn_start,
            draw_offers_and_their_answers_read_back,
            rematch_offers_tokens_and_links_read_back,
            games_ended_by_time_or_abandonment_and_closed_rematches_read_back,
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
    manager_and_hub(store).0
}

fn manager_and_hub(store: &Arc<dyn GameStore>) -> (GameManager, Arc<Hub>) {
    let hub = Hub::new(1024);
    let manager = GameManager::new(
        Arc::clone(store),
        Arc::clone(&hub),
        ManagerLimits::default(),
    );
    (manager, hub)
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
        account: None,
        rated: false,
    }
}

/// A game with both seats taken and `moves` moves played (the first legal move each time).
async fn played(manager: &GameManager, moves: usize) -> (GameId, [Seated; 2]) {
    let first = manager.create_game(new_game()).await.unwrap();
    let id = first.game.id.clone();
    let second = manager.join_game(&id, "Minh").await.unwrap();
    let seats = [first, second];
    play(manager, &id, &seats, moves).await;
    (id, seats)
}

/// The first legal move, `moves` times.
async fn play(manager: &GameManager, id: &GameId, seats: &[Seated; 2], moves: usize) {
    for _ in 0..moves {
        let game = manager.get_game(id).await.unwrap();
        let mv: Move = game.position.legal_moves()[0];
        let seat = &seats[usize::from(game.position.to_move() == Player::Second)];
        manager
            .play_move(id, &seat.token, mv, Some(game.position.ply()))
            .await
            .unwrap();
    }
}

/// 3+2: long enough that no flag falls during a test.
fn blitz() -> TimeControl {
    TimeControl::real_time(Duration::from_secs(180), Duration::from_secs(2)).unwrap()
}

/// A game under `time_control` with both seats taken and `moves` moves played, and a
/// subscription to its events from the join on.
async fn timed(
    manager: &GameManager,
    hub: &Arc<Hub>,
    time_control: TimeControl,
    moves: usize,
) -> (GameId, [Seated; 2], Published) {
    let first = manager
        .create_game(NewGame {
            time_control,
            ..new_game()
        })
        .await
        .unwrap();
    let id = first.game.id.clone();
    let published = Published::new(hub, &id);
    let second = manager.join_game(&id, "Minh").await.unwrap();
    let seats = [first, second];
    play(manager, &id, &seats, moves).await;
    (id, seats, published)
}

/// The events a game's watchers were sent, as committed.
struct Published {
    rx: broadcast::Receiver<Arc<GameEvent>>,
    _guard: crate::hub::WatcherGuard,
    events: Vec<Arc<GameEvent>>,
}

impl Published {
    fn new(hub: &Arc<Hub>, id: &GameId) -> Published {
        let (rx, guard) = hub.subscribe_game(id, 10).unwrap();
        Published {
            rx,
            _guard: guard,
            events: Vec::new(),
        }
    }

    /// Everything sent so far.
    fn events(&mut self) -> &[Arc<GameEvent>] {
        while let Ok(event) = self.rx.try_recv() {
            self.events.push(event);
        }
        &self.events
    }
}

/// The game's whole log, and whether it is closed.
async fn log(store: &Arc<dyn GameStore>, id: &GameId) -> (Vec<Arc<GameEvent>>, bool) {
    match store.game_events_since(id, 0).await.unwrap() {
        Since::Events { events, done } => (events, done),
        other => panic!("the whole log of {id} expected: {other:?}"),
    }
}

/// The game reads back the same whole, as a summary and through its manager; its log ends with
/// the events sent to its watchers, as they were sent; and it says it is closed exactly when
/// the game says so. Returns the summary.
async fn reads_back(
    store: &Arc<dyn GameStore>,
    manager: &GameManager,
    id: &GameId,
    published: &mut Published,
) -> GameInfo {
    let info = store.info(id).await.unwrap();
    assert_eq!(store.load(id).await.unwrap().info(), &info);
    assert_eq!(manager.get_game(id).await.unwrap(), info);
    let (events, done) = log(store, id).await;
    let sent = published.events();
    assert!(!sent.is_empty());
    assert_eq!(events[events.len() - sent.len()..], *sent, "as sent");
    assert_eq!(events.last().map(|e| e.sequence), Some(info.sequence));
    assert_eq!(done, info.log_closed());
    info
}

/// Commits what a transition decided, as the manager would.
async fn commit<T>(
    store: &Arc<dyn GameStore>,
    decided: (GameState, Transition<T>),
    expected_sequence: u64,
    now: std::time::SystemTime,
) -> Committed {
    let (state, transition) = decided;
    store
        .commit(Commit {
            state,
            expected_sequence,
            game_events: transition.game_events,
            lobby_events: transition.lobby_events,
            time: now,
            accounts: Vec::new(),
        })
        .await
        .unwrap()
}

/// Whether `store` still holds what `committed` wrote: the state, and the events at the end of
/// the log.
async fn holds(store: &Arc<dyn GameStore>, committed: &Committed) {
    let id = &committed.info.id;
    assert_eq!(store.info(id).await.unwrap(), committed.info);
    assert_eq!(store.load(id).await.unwrap().info(), &committed.info);
    let (events, done) = log(store, id).await;
    assert!(events.ends_with(&committed.game_events), "as committed");
    assert_eq!(done, committed.info.log_closed());
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
            accounts: Vec::new(),
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

/// A timed game's clock, turn start and time control read back as committed, and so do the
/// clocks its events carry. Returns the game.
pub async fn a_timed_game_keeps_its_clock_and_turn_start(store: Arc<dyn GameStore>) -> Vec<GameId> {
    let (manager, hub) = manager_and_hub(&store);
    let (id, _, mut published) = timed(&manager, &hub, blitz(), 3).await;
    let info = reads_back(&store, &manager, &id, &mut published).await;
    assert_eq!(info.time_control, blitz());
    assert!(info.clock.is_some());
    let started = info.turn_started.expect("an active game has a turn start");
    let (events, done) = log(&store, &id).await;
    assert!(!done);
    let mut moves = 0;
    for event in &events {
        match &event.kind {
            GameEventKind::MovePlayed { clock, .. } => {
                moves += 1;
                assert!(clock.is_some(), "{event:?}");
            }
            GameEventKind::TurnStarted { clock, .. } => assert!(clock.is_some(), "{event:?}"),
            _ => {}
        }
    }
    assert_eq!(moves, 3);
    // The running turn's clocks are the summary's, as the turn started.
    assert!(matches!(
        &events.last().unwrap().kind,
        GameEventKind::TurnStarted { clock, .. } if *clock == clock::reading(&info, started)
    ));
    // A correspondence game keeps its control too.
    let per_move = TimeControl::correspondence(Duration::from_secs(2 * 86_400)).unwrap();
    let (other, _, mut published) = timed(&manager, &hub, per_move, 1).await;
    let info = reads_back(&store, &manager, &other, &mut published).await;
    assert_eq!(info.time_control, per_move);
    assert_eq!(
        info.clock.map(|c| c.remaining.first),
        Some(Duration::from_secs(2 * 86_400))
    );
    vec![id, other]
}

/// A standing draw offer, the move count of each player's last one, a declined offer and an
/// accepted one read back, with their events; a game drawn by agreement keeps its log open for
/// a rematch. Returns the game.
pub async fn draw_offers_and_their_answers_read_back(store: Arc<dyn GameStore>) -> Vec<GameId> {
    let (manager, hub) = manager_and_hub(&store);
    let (id, [first, second], mut published) = timed(&manager, &hub, blitz(), 2).await;
    let (offered, action) = manager.offer_draw(&id, &first.token).await.unwrap();
    assert_eq!(action, DrawAction::Offered);
    let info = reads_back(&store, &manager, &id, &mut published).await;
    assert_eq!(info, offered);
    assert_eq!(info.draw_offer, Some(Player::First));
    assert_eq!(info.last_draw_offer.first, Some(2));

    manager.decline_draw(&id, &second.token).await.unwrap();
    let info = reads_back(&store, &manager, &id, &mut published).await;
    assert_eq!(info.draw_offer, None);
    assert_eq!(info.last_draw_offer.first, Some(2), "kept after a decline");

    manager.offer_draw(&id, &second.token).await.unwrap();
    let info = reads_back(&store, &manager, &id, &mut published).await;
    assert_eq!(info.draw_offer, Some(Player::Second));
    assert_eq!(info.last_draw_offer.second, Some(2));

    let (drawn, action) = manager.offer_draw(&id, &first.token).await.unwrap();
    assert_eq!(action, DrawAction::Accepted);
    let info = reads_back(&store, &manager, &id, &mut published).await;
    assert_eq!(info, drawn);
    let result = info.result.unwrap();
    assert_eq!(result.termination, Termination::Agreement);
    assert_eq!(result.outcome, Some(Outcome::Draw));
    assert!(info.rematch.open_until.is_some());
    let kinds: Vec<GameEventKind> = published.events().iter().map(|e| e.kind.clone()).collect();
    let draws: Vec<(Player, DrawAction)> = kinds
        .iter()
        .filter_map(|kind| match *kind {
            GameEventKind::Draw { by, action } => Some((by, action)),
            _ => None,
        })
        .collect();
    assert_eq!(
        draws,
        [
            (Player::First, DrawAction::Offered),
            (Player::Second, DrawAction::Declined),
            (Player::Second, DrawAction::Offered),
            (Player::First, DrawAction::Accepted),
        ]
    );
    assert!(matches!(
        kinds.last(),
        Some(GameEventKind::GameOver { clock: Some(_), rematch_until, .. })
            if *rematch_until == info.rematch.open_until
    ));
    vec![id]
}

/// A rematch offer (with the hash of the offerer's token for the rematch), the link to the
/// rematch both ways, and the rematch's seats read back; once the rematch starts the old
/// game's log is closed. Returns the old game and the rematch.
pub async fn rematch_offers_tokens_and_links_read_back(store: Arc<dyn GameStore>) -> Vec<GameId> {
    let (manager, hub) = manager_and_hub(&store);
    let (id, [first, second], mut published) = timed(&manager, &hub, blitz(), 2).await;
    manager.resign(&id, &first.token).await.unwrap();
    let info = reads_back(&store, &manager, &id, &mut published).await;
    assert!(!info.log_closed(), "a rematch can be offered");

    let crate::RematchOffered {
        game: offered,
        token: first_next,
        rematch: started,
        ..
    } = manager.offer_rematch(&id, &first.token).await.unwrap();
    assert!(started.is_none());
    let info = reads_back(&store, &manager, &id, &mut published).await;
    assert_eq!(info, offered);
    assert_eq!(info.rematch.offered_by, Some(Player::First));
    let tokens = store
        .load(&id)
        .await
        .unwrap()
        .rematch_tokens()
        .map(|t| t.map(|t| t.to_bytes()));
    assert_eq!(tokens.first, Some(first_next.hash().to_bytes()));
    assert_eq!(tokens.second, None);

    let crate::RematchOffered {
        game: linked,
        token: second_next,
        rematch: started,
        ..
    } = manager.offer_rematch(&id, &second.token).await.unwrap();
    let next = started.expect("both asked: the rematch starts");
    let info = reads_back(&store, &manager, &id, &mut published).await;
    assert_eq!(info, linked);
    assert_eq!(info.rematch.next.as_ref(), Some(&next.id));
    assert_eq!(info.rematch.offered_by, None);
    assert!(info.log_closed());
    let old = store.load(&id).await.unwrap();
    assert_eq!(
        old.rematch_tokens().map(|t| t.map(|t| t.to_bytes())),
        oanquan_rules::ByPlayer::new(
            Some(first_next.hash().to_bytes()),
            Some(second_next.hash().to_bytes())
        )
    );
    let kinds: Vec<GameEventKind> = published.events().iter().map(|e| e.kind.clone()).collect();
    assert_eq!(
        kinds[kinds.len() - 2..],
        [
            GameEventKind::Rematch {
                by: Some(Player::First),
                action: RematchAction::Offered,
            },
            GameEventKind::Rematch {
                by: None,
                action: RematchAction::Started {
                    game_id: next.id.clone(),
                },
            },
        ]
    );

    // The rematch: linked back, same control, seats swapped, each player's new token.
    let rematch = store.load(&next.id).await.unwrap();
    assert_eq!(rematch.info(), &store.info(&next.id).await.unwrap());
    assert_eq!(rematch.info(), &next);
    assert_eq!(next.rematch.of.as_ref(), Some(&id));
    assert_eq!(next.time_control, blitz());
    assert!(next.clock.is_some() && next.turn_started.is_some());
    assert_eq!(rematch.seat_of(&first_next.hash()), Some(Player::Second));
    assert_eq!(rematch.seat_of(&second_next.hash()), Some(Player::First));
    let (events, done) = log(&store, &next.id).await;
    assert!(!done);
    assert!(matches!(
        events.last().map(|e| &e.kind),
        Some(GameEventKind::TurnStarted { clock: Some(_), .. })
    ));
    vec![id, next.id]
}

/// Games ended by a flag falling and by an abandonment claim, a rematch window that closed and
/// a declined rematch read back, with their events. Returns the games.
pub async fn games_ended_by_time_or_abandonment_and_closed_rematches_read_back(
    store: Arc<dyn GameStore>,
) -> Vec<GameId> {
    let (manager, hub) = manager_and_hub(&store);

    // The flag falls: past the deadline, as the timekeeper would apply it.
    let (flagged, _, _) = timed(&manager, &hub, blitz(), 3).await;
    let state = store.load(&flagged).await.unwrap();
    let sequence = state.info().sequence;
    let deadline = clock::deadline(state.info()).unwrap();
    let now = deadline.at + Duration::from_millis(3);
    let (mut state, mut decided) = transition::apply_deadline(state, now).unwrap();
    let until = now + Duration::from_secs(60);
    transition::open_rematch_window(&mut state, &mut decided, until);
    let committed = commit(&store, (state, decided), sequence, now).await;
    holds(&store, &committed).await;
    let info = &committed.info;
    let result = info.result.unwrap();
    assert_eq!(result.termination, Termination::Timeout);
    assert_eq!(result.ended_by, Some(Player::Second));
    assert_eq!(info.clock.unwrap().remaining.second, Duration::ZERO);
    assert_eq!(info.rematch.open_until, Some(until));
    assert!(matches!(
        committed.game_events.last().map(|e| &e.kind),
        Some(GameEventKind::GameOver { rematch_until: Some(at), clock: Some(_), .. }) if *at == until
    ));
    // Nobody asks for a rematch: the window closes, and with it the log.
    let state = store.load(&flagged).await.unwrap();
    let sequence = state.info().sequence;
    let decided = transition::apply_deadline(state, until).unwrap();
    let committed = commit(&store, decided, sequence, until).await;
    holds(&store, &committed).await;
    assert!(committed.info.log_closed());
    assert_eq!(committed.info.rematch.open_until, None);
    assert!(matches!(
        committed.game_events.last().map(|e| &e.kind),
        Some(GameEventKind::Rematch {
            by: None,
            action: RematchAction::Expired
        })
    ));

    // An untimed game whose player to move stays away is claimed.
    let (abandoned, [first, _]) = played(&manager, 1).await;
    let state = store.load(&abandoned).await.unwrap();
    let sequence = state.info().sequence;
    let wait = Duration::from_secs(60);
    let now = state.info().turn_started.unwrap() + wait + Duration::from_nanos(7);
    let decided = transition::claim_victory(state, &first.token.hash(), wait, now).unwrap();
    let committed = commit(&store, decided, sequence, now).await;
    holds(&store, &committed).await;
    let result = committed.info.result.unwrap();
    assert_eq!(result.termination, Termination::Abandonment);
    assert_eq!(result.ended_by, Some(Player::Second));
    assert_eq!(committed.info.time_control, TimeControl::Untimed);
    assert_eq!(committed.info.clock, None);

    // A rematch declined: the log closes at once.
    let (declined, [first, second], mut published) = timed(&manager, &hub, blitz(), 2).await;
    manager.resign(&declined, &first.token).await.unwrap();
    manager
        .decline_rematch(&declined, &second.token)
        .await
        .unwrap();
    let info = reads_back(&store, &manager, &declined, &mut published).await;
    assert!(info.log_closed());
    assert!(matches!(
        published.events().last().map(|e| &e.kind),
        Some(GameEventKind::Rematch {
            by: Some(Player::Second),
            action: RematchAction::Declined
        })
    ));
    vec![flagged, abandoned, declined]
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
