//! The cases every [`GameStore`] passes, so that a new backend (PostgreSQL) is held to what the
//! others do. Each case takes a fresh, empty store; [`store_suite!`](crate::store_suite!) makes
//! one test per case from an expression that opens one.
//!
//! Built for this crate's tests and, with the `store-suite` feature, for other stores' tests.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oanquan_rules::{Move, Outcome, Player, Preset};
use tokio::sync::broadcast;

use crate::account::{Account, AccountId, AccountUpdate, ApiKey, ApiKeyRecord, Record};
use crate::clock::TimeControl;
use crate::hub::Hub;
use crate::manager::{GameManager, ManagerLimits, NewGame, Seated, seat_account};
use crate::memory::{MAX_API_KEY_RECORDS, MAX_API_KEYS};
use crate::model::{
    DrawAction, GameEvent, GameEventKind, GameFilter, GameId, GameInfo, GameState, GameStatus,
    RematchAction, Termination,
};
use crate::rating::{Rating, Speed};
use crate::store::{
    Commit, Committed, GameStore, PlayerGameFilter, PlayerResult, Ranked, Since, StoreError,
    page_cursor,
};
use crate::timing;
use crate::transition::{self, Transition};
use crate::username::Username;

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
            accounts_are_unique_by_username_key,
            api_keys_are_found_listed_and_revoked,
            account_updates_commit_with_their_game_or_not_at_all,
            leaderboards_rank_established_ratings_only,
            player_games_list_an_accounts_games_newest_first,
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
        display_name: "Guest Lan".to_owned(),
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
    let second = manager.join_game(&id, "Guest Minh").await.unwrap();
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
    let second = manager.join_game(&id, "Guest Minh").await.unwrap();
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
    let (active, _) = played(&manager, 1).await;
    manager.create_game(new_game()).await.unwrap();
    let (games, last) = store.lobby_snapshot(100).await.unwrap();
    assert_eq!(games.len(), 2);
    assert!(last >= 2);
    // The cap is per status: newer waiting games do not push the game being played out (an
    // outside probe's 210 waiting games left "Games being played" empty).
    let mut waiting = Vec::new();
    for _ in 0..2 {
        waiting.push(manager.create_game(new_game()).await.unwrap().game.id);
    }
    let (capped, _) = store.lobby_snapshot(2).await.unwrap();
    let mut ids: Vec<&GameId> = capped.iter().map(|g| &g.id).collect();
    assert!(
        capped
            .windows(2)
            .all(|pair| pair[0].created >= pair[1].created),
        "newest first"
    );
    ids.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    let mut expected = vec![&active, &waiting[0], &waiting[1]];
    expected.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    assert_eq!(ids, expected);
    let (games, last) = store.lobby_snapshot(100).await.unwrap();
    assert_eq!(games.len(), 4);
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
        GameEventKind::TurnStarted { clock, .. } if *clock == timing::reading(&info, started)
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
    assert_eq!(store.load(&next.id).await.unwrap().info().id, next.id);
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
    let deadline = timing::deadline(state.info()).unwrap();
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

    // An untimed game whose player to move, after a first move, stays away is claimed.
    let (abandoned, [first, _]) = played(&manager, 3).await;
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

/// A time a store must keep to the nanosecond.
fn at(nanos: u32) -> SystemTime {
    UNIX_EPOCH + Duration::new(1_700_000_000, nanos)
}

/// A new account named `name`, registered at a time with nanoseconds.
fn account(name: &str) -> Account {
    Account::new(Username::parse(name).unwrap(), at(1))
}

/// A new API key's record, made at `at(nanos)`.
fn key(nanos: u32) -> ApiKeyRecord {
    ApiKey::generate(at(nanos)).1
}

/// A rating with values that would show one rounded or swapped.
fn rating(rating: f64, deviation: f64, games: u32) -> Rating {
    Rating {
        rating,
        deviation,
        volatility: 0.059_987_654_321,
        games,
    }
}

/// An account's username is unique by its key (ignoring case): a second registration of the
/// same name, or a key with another's id, is refused and leaves nothing behind, not even its
/// API key. Returns the accounts.
pub async fn accounts_are_unique_by_username_key(store: Arc<dyn GameStore>) -> Vec<AccountId> {
    let lan = account("Lan");
    let lan_key = key(2);
    store
        .create_account(lan.clone(), lan_key.clone())
        .await
        .unwrap();
    assert_eq!(store.account(&lan.id).await.unwrap(), lan);
    assert_eq!(
        store.account_by_name(&lan.username.key()).await.unwrap(),
        lan
    );

    let twin = account("LAN");
    let twin_key = key(3);
    assert_eq!(
        store.create_account(twin.clone(), twin_key.clone()).await,
        Err(StoreError::AlreadyExists)
    );
    assert_eq!(store.account(&twin.id).await, Err(StoreError::NotFound));
    assert_eq!(
        store.account_by_api_key(&twin_key.id).await.unwrap_err(),
        StoreError::NotFound
    );
    assert_eq!(
        store.account_by_name(&twin.username.key()).await.unwrap(),
        lan,
        "the name stays the first account's"
    );

    // A key its owner chose may carry another key's id: refused like a taken name, and the
    // id still finds the first key.
    let hoa = account("Hoa");
    let borrowed = ApiKeyRecord {
        id: lan_key.id.clone(),
        ..key(4)
    };
    assert_eq!(
        store.create_account(hoa.clone(), borrowed).await,
        Err(StoreError::AlreadyExists)
    );
    assert_eq!(store.account(&hoa.id).await, Err(StoreError::NotFound));
    assert_eq!(
        store.account_by_name(&hoa.username.key()).await,
        Err(StoreError::NotFound)
    );
    assert_eq!(
        store.account_by_api_key(&lan_key.id).await.unwrap(),
        (lan.clone(), lan_key)
    );

    assert_eq!(
        store.account_by_name("nobody").await,
        Err(StoreError::NotFound)
    );
    assert_eq!(
        store.account(&AccountId::generate()).await,
        Err(StoreError::NotFound)
    );

    // Alike only in capitals, in either order: a later `Ian` beside `lan`, Cyrillic `ТОМ`
    // beside `Tom`; and a later `TOM` beside an earlier Cyrillic `ТОМ`, or Greek `ΤΟΜ` beside it.
    let mut ids = vec![lan.id];
    for (first, later) in [
        ("lan", "Ian"),
        ("Tom", "ТОМ"),
        ("НОВ", "HOB"),
        ("НОВ", "ΗΟΒ"),
        // Shown alike on a screen: the digit takes its place by the bidirectional algorithm.
        ("\u{5e9}\u{5e8}\u{5d4}7", "7\u{5e9}\u{5e8}\u{5d4}"),
    ] {
        let earlier = account(first);
        if store.create_account(earlier.clone(), key(40)).await.is_ok() {
            ids.push(earlier.id.clone());
        }
        let look_alike = account(later);
        assert_eq!(
            store.create_account(look_alike.clone(), key(41)).await,
            Err(StoreError::AlreadyExists),
            "{later} beside {first}"
        );
        assert_eq!(
            store.account(&look_alike.id).await,
            Err(StoreError::NotFound)
        );
    }
    // A name that only shares letters is free.
    let ivan = account("Ivan");
    store.create_account(ivan.clone(), key(42)).await.unwrap();
    ids.push(ivan.id);

    // Found by its look as well as by its key: the Greek `Νίκος` keys with a small nu, read
    // as `v`, and looks with the capital, read as `N`, as a Latin N in its place does.
    let nikos = account("\u{39d}\u{3af}\u{3ba}\u{3bf}\u{3c2}");
    store.create_account(nikos.clone(), key(43)).await.unwrap();
    ids.push(nikos.id.clone());
    assert_ne!(nikos.username.key(), nikos.username.look());
    for by in [nikos.username.key(), nikos.username.look()] {
        assert_eq!(store.account_by_name(&by).await.unwrap(), nikos, "{by:?}");
    }
    ids
}

/// API keys are found by id with their account, listed oldest first, revoked once (a second
/// revocation keeps the first time), only through their own account, and bounded per account.
/// Returns the accounts.
pub async fn api_keys_are_found_listed_and_revoked(store: Arc<dyn GameStore>) -> Vec<AccountId> {
    let (lan, minh) = (account("lan"), account("minh"));
    let (first, minh_key) = (key(2), key(4));
    store
        .create_account(lan.clone(), first.clone())
        .await
        .unwrap();
    store
        .create_account(minh.clone(), minh_key.clone())
        .await
        .unwrap();
    assert_eq!(
        store.account_by_api_key(&first.id).await.unwrap(),
        (lan.clone(), first.clone())
    );
    let second = key(3);
    store.add_api_key(&lan.id, second.clone()).await.unwrap();
    assert_eq!(
        store.api_keys(&lan.id).await.unwrap(),
        [first.clone(), second.clone()]
    );

    // Not through another account, nor a key that does not exist.
    assert!(
        !store
            .revoke_api_key(&lan.id, &minh_key.id, at(5))
            .await
            .unwrap()
    );
    assert_eq!(
        store.account_by_api_key(&minh_key.id).await.unwrap(),
        (minh.clone(), minh_key.clone())
    );
    assert!(
        !store
            .revoke_api_key(&lan.id, "nosuchkey", at(5))
            .await
            .unwrap()
    );
    assert!(
        !store
            .revoke_api_key(&AccountId::generate(), &first.id, at(5))
            .await
            .unwrap()
    );

    assert!(
        store
            .revoke_api_key(&lan.id, &first.id, at(6))
            .await
            .unwrap()
    );
    assert!(
        store
            .revoke_api_key(&lan.id, &first.id, at(7))
            .await
            .unwrap(),
        "still its key"
    );
    let revoked = ApiKeyRecord {
        revoked: Some(at(6)),
        ..first.clone()
    };
    assert_eq!(
        store.account_by_api_key(&first.id).await.unwrap(),
        (lan.clone(), revoked.clone())
    );
    assert_eq!(
        store.api_keys(&lan.id).await.unwrap(),
        [revoked, second.clone()]
    );

    assert_eq!(
        store.add_api_key(&AccountId::generate(), key(8)).await,
        Err(StoreError::NotFound)
    );
    assert!(
        store
            .api_keys(&AccountId::generate())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.account_by_api_key("nosuchkey").await.unwrap_err(),
        StoreError::NotFound
    );

    // Working keys are bounded; a revoked one (here `first`) frees its place.
    let mut working = vec![second.id.clone()];
    for n in 2..=MAX_API_KEYS {
        let added = key(10 + n as u32);
        store.add_api_key(&lan.id, added.clone()).await.unwrap();
        working.push(added.id);
    }
    let refused = store.add_api_key(&lan.id, key(9)).await;
    assert!(matches!(refused, Err(StoreError::Full(_))), "{refused:?}");
    assert_eq!(
        store.api_keys(&lan.id).await.unwrap().len(),
        MAX_API_KEYS + 1
    );

    // Rotating keys for years never locks the account out: records past the bound forget
    // the key revoked first, and only revoked ones.
    let mut revoked_in_order = vec![first.id.clone()];
    let mut n = 100;
    while revoked_in_order.len() < MAX_API_KEY_RECORDS + 5 {
        let oldest_working = working.remove(0);
        n += 1;
        assert!(
            store
                .revoke_api_key(&lan.id, &oldest_working, at(n))
                .await
                .unwrap()
        );
        revoked_in_order.push(oldest_working);
        let added = key(n);
        store.add_api_key(&lan.id, added.clone()).await.unwrap();
        working.push(added.id);
    }
    let kept = store.api_keys(&lan.id).await.unwrap();
    assert_eq!(kept.len(), MAX_API_KEY_RECORDS);
    assert_eq!(
        kept.iter().filter(|k| k.revoked.is_none()).count(),
        MAX_API_KEYS
    );
    let forgotten = revoked_in_order.len() + MAX_API_KEYS - MAX_API_KEY_RECORDS;
    for id in &revoked_in_order[..forgotten] {
        assert_eq!(
            store.account_by_api_key(id).await,
            Err(StoreError::NotFound),
            "{id} is forgotten"
        );
        assert!(!kept.iter().any(|k| &k.id == id));
    }
    for id in revoked_in_order[forgotten..].iter().chain(&working) {
        assert_eq!(store.account_by_api_key(id).await.unwrap().0.id, lan.id);
    }
    assert_eq!(store.api_keys(&minh.id).await.unwrap(), [minh_key]);
    vec![lan.id, minh.id]
}

/// A game with `first` and `second` seated (as accounts where given), not started.
async fn with_accounts(
    manager: &GameManager,
    time_control: TimeControl,
    first: Option<&Account>,
    second: Option<&Account>,
) -> (GameId, [Seated; 2]) {
    let created = manager
        .create_game(NewGame {
            time_control,
            account: first.cloned(),
            rated: first.is_some() && second.is_some() && time_control.is_timed(),
            ..new_game()
        })
        .await
        .unwrap();
    let id = created.game.id.clone();
    // Anonymous, under a name no account of these tests has.
    let joined = manager.join_game_as(&id, "Guest", second).await.unwrap();
    (id, [created, joined])
}

/// Account updates are written with their game's commit, or not at all: a stale (or unknown)
/// account refuses the whole commit, and neither the game nor any account changes. A rated
/// game ended through the manager updates both accounts once. Returns the accounts.
pub async fn account_updates_commit_with_their_game_or_not_at_all(
    store: Arc<dyn GameStore>,
) -> Vec<AccountId> {
    let manager = manager(&store);
    let (lan, minh) = (account("lan"), account("minh"));
    store.create_account(lan.clone(), key(2)).await.unwrap();
    store.create_account(minh.clone(), key(3)).await.unwrap();
    let (id, seats) = with_accounts(&manager, blitz(), Some(&lan), Some(&minh)).await;
    play(&manager, &id, &seats, 2).await;
    let before = store.info(&id).await.unwrap();
    assert_eq!(
        before.seats.first.as_ref().unwrap().account,
        Some(seat_account(&lan, blitz()))
    );
    assert_eq!(
        before.seats.second.as_ref().unwrap().account,
        Some(seat_account(&minh, blitz()))
    );
    assert!(before.rated);
    let (events_before, _) = log(&store, &id).await;

    // Lan resigns; the accounts as the game's end would change them.
    let now = SystemTime::now();
    let (state, transition) =
        transition::resign(store.load(&id).await.unwrap(), &seats[0].token.hash(), now).unwrap();
    let update = |account: &Account, record: Record, rating: Rating| AccountUpdate {
        account: Account {
            ratings: BTreeMap::from([(Speed::Blitz, rating)]),
            record,
            version: account.version + 1,
            ..account.clone()
        },
        expected_version: account.version,
    };
    let lan_after = update(
        &lan,
        Record {
            losses: 1,
            ..Record::default()
        },
        self::rating(1_433.123_456_789, 301.5, 1),
    );
    // Established, so that the leaderboard shows it.
    let minh_after = update(
        &minh,
        Record {
            wins: 1,
            ..Record::default()
        },
        self::rating(1_612.987_654_321, 87.25, 12),
    );
    let commit = |accounts| Commit {
        state: state.clone(),
        expected_sequence: before.sequence,
        game_events: transition.game_events.clone(),
        lobby_events: transition.lobby_events.clone(),
        time: now,
        accounts,
    };
    let unchanged = async || {
        assert_eq!(store.info(&id).await.unwrap(), before);
        assert_eq!(store.load(&id).await.unwrap().info(), &before);
        assert_eq!(log(&store, &id).await.0, events_before);
        assert_eq!(store.account(&lan.id).await.unwrap(), lan);
        assert_eq!(store.account(&minh.id).await.unwrap(), minh);
    };

    let stale = AccountUpdate {
        expected_version: 7,
        ..minh_after.clone()
    };
    assert_eq!(
        store
            .commit(commit(vec![lan_after.clone(), stale]))
            .await
            .unwrap_err(),
        StoreError::Conflict { current: 1 }
    );
    unchanged().await;
    let ghost = update(&account("ghost"), Record::default(), Rating::INITIAL);
    assert_eq!(
        store
            .commit(commit(vec![lan_after.clone(), ghost]))
            .await
            .unwrap_err(),
        StoreError::NotFound
    );
    unchanged().await;

    let committed = store
        .commit(commit(vec![lan_after.clone(), minh_after.clone()]))
        .await
        .unwrap();
    holds(&store, &committed).await;
    assert_eq!(committed.info.status, GameStatus::Finished);
    for after in [&lan_after, &minh_after] {
        let id = &after.account.id;
        assert_eq!(store.account(id).await.unwrap(), after.account);
        assert_eq!(
            store
                .account_by_name(&after.account.username.key())
                .await
                .unwrap(),
            after.account
        );
    }
    let board = store.leaderboard(Speed::Blitz, 10, None).await.unwrap();
    assert_eq!(
        board.players,
        [Ranked {
            account: minh_after.account.clone(),
            rank: 1
        }],
        "only the established rating"
    );
    assert_eq!(board.next_cursor, None);

    // The same versions again, with another game: stale now.
    let (other, other_seats) = with_accounts(&manager, blitz(), Some(&lan), None).await;
    let other_before = store.info(&other).await.unwrap();
    let (state, transition) = transition::abort(
        store.load(&other).await.unwrap(),
        &other_seats[0].token.hash(),
        now,
    )
    .unwrap();
    let refused = store
        .commit(Commit {
            state,
            expected_sequence: other_before.sequence,
            game_events: transition.game_events,
            lobby_events: transition.lobby_events,
            time: now,
            accounts: vec![lan_after.clone()],
        })
        .await
        .unwrap_err();
    assert_eq!(refused, StoreError::Conflict { current: 2 });
    assert_eq!(store.info(&other).await.unwrap(), other_before);
    assert_eq!(store.account(&lan.id).await.unwrap(), lan_after.account);

    // Through the manager: a rated game's end rates both players once, in its commit.
    let (lan, minh) = (lan_after.account, minh_after.account);
    let (rated, seats) = with_accounts(&manager, blitz(), Some(&minh), Some(&lan)).await;
    play(&manager, &rated, &seats, 2).await;
    let ended = manager.resign(&rated, &seats[1].token).await.unwrap();
    let changes = ended.result.unwrap().ratings.expect("a rated result");
    assert_eq!(store.info(&rated).await.unwrap(), ended);
    let (minh_now, lan_now) = (
        store.account(&minh.id).await.unwrap(),
        store.account(&lan.id).await.unwrap(),
    );
    assert_eq!((minh_now.version, lan_now.version), (3, 3));
    assert_eq!((minh_now.record.wins, lan_now.record.losses), (2, 2));
    for (before, now, change) in [
        (&minh, &minh_now, changes.first),
        (&lan, &lan_now, changes.second),
    ] {
        let (was, is) = (before.rating(Speed::Blitz), now.rating(Speed::Blitz));
        assert_eq!(is.games, was.games + 1);
        assert_eq!((change.before, change.after), (was.rounded(), is.rounded()));
    }
    vec![lan.id, minh.id]
}

/// Leaderboards list the accounts with an established rating at one speed, best first (ties
/// by account id), ranked, page by page; provisional ratings (too few games or too uncertain)
/// and other speeds are left out; a cursor is only good for its own speed. Returns the accounts.
pub async fn leaderboards_rank_established_ratings_only(
    store: Arc<dyn GameStore>,
) -> Vec<AccountId> {
    let rated = |name: &str, speed, value| {
        let mut account = account(name);
        account.ratings.insert(speed, value);
        account
    };
    let accounts = [
        rated("alpha", Speed::Blitz, rating(1_700.0, 60.0, 30)),
        rated("bravo", Speed::Blitz, rating(1_850.5, 80.0, 12)),
        // Ties with alpha: ordered by id.
        rated("charlie", Speed::Blitz, rating(1_700.0, 50.0, 40)),
        rated("delta", Speed::Blitz, rating(2_100.0, 200.0, 50)),
        rated("echo", Speed::Blitz, rating(2_200.0, 50.0, 9)),
        // Just established: exactly the threshold of both.
        rated("foxtrot", Speed::Blitz, rating(1_500.25, 110.0, 10)),
        rated("golf", Speed::Rapid, rating(1_900.0, 50.0, 20)),
        account("hotel"),
    ];
    for (n, account) in accounts.iter().enumerate() {
        store
            .create_account(account.clone(), key(n as u32 + 2))
            .await
            .unwrap();
    }
    let mut expected: Vec<&Account> = accounts
        .iter()
        .filter(|a| {
            a.ratings
                .get(&Speed::Blitz)
                .is_some_and(|r| !r.is_provisional())
        })
        .collect();
    expected.sort_by(|a, b| {
        b.rating(Speed::Blitz)
            .rating
            .total_cmp(&a.rating(Speed::Blitz).rating)
            .then_with(|| a.id.cmp(&b.id))
    });
    let names: Vec<&str> = expected.iter().map(|a| a.username.as_str()).collect();
    assert_eq!(names.len(), 4);
    assert_eq!((names[0], names[3]), ("bravo", "foxtrot"));

    for limit in [1, 3, 4, 10] {
        let mut seen: Vec<Ranked> = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = store
                .leaderboard(Speed::Blitz, limit, cursor.as_deref())
                .await
                .unwrap();
            assert!(page.players.len() <= limit);
            assert!(!page.players.is_empty(), "no empty page");
            seen.extend(page.players);
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
            assert!(seen.len() <= expected.len(), "the leaderboard does not end");
        }
        let want: Vec<Ranked> = expected
            .iter()
            .enumerate()
            .map(|(index, account)| Ranked {
                account: (*account).clone(),
                rank: index as u64 + 1,
            })
            .collect();
        assert_eq!(seen, want, "pages of {limit}");
    }

    let rapid = store.leaderboard(Speed::Rapid, 10, None).await.unwrap();
    assert_eq!(rapid.players.len(), 1);
    assert_eq!(rapid.players[0].account, accounts[6]);
    let bullet = store.leaderboard(Speed::Bullet, 10, None).await.unwrap();
    assert!(bullet.players.is_empty());
    assert_eq!(bullet.next_cursor, None);

    let cursor = store
        .leaderboard(Speed::Blitz, 1, None)
        .await
        .unwrap()
        .next_cursor
        .unwrap();
    assert_eq!(
        store.leaderboard(Speed::Rapid, 1, Some(&cursor)).await,
        Err(StoreError::BadCursor)
    );
    let good = &cursor;
    let (named, id) = good.rsplit_once('.').unwrap();
    let (named, bits) = named.rsplit_once('.').unwrap();
    let nan = format!("{named}.{:016x}.{id}", f64::NAN.to_bits());
    let upper = format!("{named}.{}.{id}", bits.to_uppercase());
    let short = format!("{named}.{}.{id}", &bits[1..]);
    let dotted = format!("{named}.{bits}.{id}.x");
    let no_id = format!("{named}.{bits}.");
    let odd_id = format!("{named}.{bits}.a b");
    let lead = format!("top-blitz.01.{bits}.{id}");
    let wraps = format!("top-blitz.{}.{bits}.{id}", u64::MAX - 1);
    let trillions = format!("top-blitz.1000000000001.{bits}.{id}");
    for junk in [
        "",
        "junk",
        "top-blitz.",
        "top-blitz.-1",
        "top-blitz.x",
        "top-blitz.+2",
        "top-blitz.02",
        // An offset, as the cursors were before they named a place.
        "top-blitz.1",
        "blitz.1",
        &nan,
        &upper,
        &short,
        &dotted,
        &no_id,
        &odd_id,
        &lead,
        &wraps,
        &trillions,
    ] {
        assert_eq!(
            store.leaderboard(Speed::Blitz, 1, Some(junk)).await,
            Err(StoreError::BadCursor),
            "{junk:?}"
        );
    }
    let past = store.leaderboard(Speed::Blitz, 10, None).await.unwrap();
    assert_eq!(past.players.len(), 4);

    // A player who enters the top between two pages moves only themselves: the next page
    // goes on after the last player shown, where an offset would show that player again.
    let first = store.leaderboard(Speed::Blitz, 2, None).await.unwrap();
    let top = rated("india", Speed::Blitz, rating(2_400.0, 50.0, 30));
    store.create_account(top.clone(), key(40)).await.unwrap();
    let second = store
        .leaderboard(Speed::Blitz, 2, first.next_cursor.as_deref())
        .await
        .unwrap();
    let names = |page: &crate::store::LeaderboardPage| -> Vec<(String, u64)> {
        page.players
            .iter()
            .map(|r| (r.account.username.as_str().to_owned(), r.rank))
            .collect()
    };
    let want = |range: std::ops::Range<usize>| -> Vec<(String, u64)> {
        range
            .map(|i| (expected[i].username.as_str().to_owned(), i as u64 + 1))
            .collect()
    };
    assert_eq!(names(&first), want(0..2));
    assert_eq!(names(&second), want(2..4));
    assert_eq!(second.next_cursor, None);
    let mut ids: Vec<AccountId> = accounts.into_iter().map(|a| a.id).collect();
    ids.push(top.id);
    ids
}

/// Every page of `id`'s games under `filter`, `limit` at a time: the ids in order. Each game is
/// as the store has it; only the last page has no cursor, and no page is empty but a first.
async fn player_pages(
    store: &Arc<dyn GameStore>,
    id: &AccountId,
    filter: PlayerGameFilter,
    limit: usize,
) -> Vec<GameId> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store
            .player_games(id, filter, limit, cursor.as_deref())
            .await
            .unwrap();
        assert!(page.games.len() <= limit);
        assert!(cursor.is_none() || !page.games.is_empty(), "an empty page");
        for game in &page.games {
            assert_eq!(*game, store.info(&game.id).await.unwrap());
            seen.push(game.id.clone());
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return seen,
        }
        assert!(seen.len() < 100, "the listing does not end");
    }
}

/// An account's games, newest first and page by page, filtered by its result in them
/// (finished games only) and by speed; a cursor is only good for its own filter. Returns the
/// accounts.
pub async fn player_games_list_an_accounts_games_newest_first(
    store: Arc<dyn GameStore>,
) -> Vec<AccountId> {
    let manager = manager(&store);
    let (lan, minh, hoa) = (account("lan"), account("minh"), account("hoa"));
    for (n, account) in [&lan, &minh, &hoa].into_iter().enumerate() {
        store
            .create_account(account.clone(), key(n as u32 + 2))
            .await
            .unwrap();
    }
    // 15+10: about 22 minutes, rapid.
    let rapid =
        TimeControl::real_time(Duration::from_secs(15 * 60), Duration::from_secs(10)).unwrap();
    assert_eq!(Speed::of(rapid), Some(Speed::Rapid));

    // Lan beats Minh at blitz.
    let (won, seats) = with_accounts(&manager, blitz(), Some(&lan), Some(&minh)).await;
    play(&manager, &won, &seats, 2).await;
    manager.resign(&won, &seats[1].token).await.unwrap();
    // Lan draws an anonymous player, untimed.
    let (drawn, seats) = with_accounts(&manager, TimeControl::Untimed, Some(&lan), None).await;
    play(&manager, &drawn, &seats, 2).await;
    manager.offer_draw(&drawn, &seats[0].token).await.unwrap();
    manager.offer_draw(&drawn, &seats[1].token).await.unwrap();
    // Minh and Lan at rapid, under way.
    let (playing, seats) = with_accounts(&manager, rapid, Some(&minh), Some(&lan)).await;
    play(&manager, &playing, &seats, 1).await;
    // Lan waits for an opponent.
    let waiting = manager
        .create_game(NewGame {
            time_control: blitz(),
            account: Some(lan.clone()),
            ..new_game()
        })
        .await
        .unwrap()
        .game
        .id;
    // Two anonymous players.
    played(&manager, 1).await;
    // Lan and Hoa, aborted before the first move: no result for either.
    let (aborted, seats) = with_accounts(&manager, blitz(), Some(&lan), Some(&hoa)).await;
    manager.abort(&aborted, &seats[0].token).await.unwrap();

    let any = PlayerGameFilter::default();
    let result = |result| PlayerGameFilter {
        result: Some(result),
        speed: None,
    };
    let speed = |speed| PlayerGameFilter {
        result: None,
        speed: Some(speed),
    };
    let lan_all = [&aborted, &waiting, &playing, &drawn, &won];
    for limit in [1, 2, 5, 10] {
        assert_eq!(
            player_pages(&store, &lan.id, any, limit)
                .await
                .iter()
                .collect::<Vec<_>>(),
            lan_all,
            "pages of {limit}"
        );
    }
    let cases = [
        (&lan, result(PlayerResult::Win), vec![&won]),
        (&lan, result(PlayerResult::Draw), vec![&drawn]),
        (&lan, result(PlayerResult::Loss), vec![]),
        (&lan, speed(Speed::Blitz), vec![&aborted, &waiting, &won]),
        (&lan, speed(Speed::Rapid), vec![&playing]),
        (&lan, speed(Speed::Correspondence), vec![]),
        (
            &lan,
            PlayerGameFilter {
                result: Some(PlayerResult::Win),
                speed: Some(Speed::Blitz),
            },
            vec![&won],
        ),
        (
            &lan,
            PlayerGameFilter {
                result: Some(PlayerResult::Draw),
                speed: Some(Speed::Blitz),
            },
            vec![],
        ),
        (&minh, any, vec![&playing, &won]),
        (&minh, result(PlayerResult::Loss), vec![&won]),
        (&minh, result(PlayerResult::Win), vec![]),
        (&hoa, any, vec![&aborted]),
        (&hoa, result(PlayerResult::Loss), vec![]),
    ];
    for (account, filter, want) in cases {
        for limit in [1, 3] {
            assert_eq!(
                player_pages(&store, &account.id, filter, limit)
                    .await
                    .iter()
                    .collect::<Vec<_>>(),
                want,
                "{} {filter:?} by {limit}",
                account.username
            );
        }
    }
    assert!(
        player_pages(&store, &AccountId::generate(), any, 10)
            .await
            .is_empty()
    );

    let cursor = store
        .player_games(&lan.id, any, 1, None)
        .await
        .unwrap()
        .next_cursor
        .unwrap();
    assert_eq!(
        store
            .player_games(&lan.id, result(PlayerResult::Win), 1, Some(&cursor))
            .await
            .unwrap_err(),
        StoreError::BadCursor
    );
    let listing = page_cursor(GameFilter::All, 3);
    for junk in ["", "junk", "player-any-any.", "player-any-any.-1", &listing] {
        assert_eq!(
            store
                .player_games(&lan.id, any, 1, Some(junk))
                .await
                .unwrap_err(),
            StoreError::BadCursor,
            "{junk:?}"
        );
    }
    vec![lan.id, minh.id, hoa.id]
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
