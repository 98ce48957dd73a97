//! Accounts through the manager and the seek pool, over a memory store: registration and API
//! keys, an account acting for its seat, rated and unrated games settled in the game's commit,
//! rated seeks and rating ranges, a player's games and the leaderboard.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use oanquan_ai::Level;
use oanquan_rules::{ByPlayer, Outcome, Player, Preset};

use crate::account::{Account, AccountId, ApiKey, RatingChange, SeatAccount};
use crate::clock::TimeControl;
use crate::error::GameError;
use crate::faulty_store::FaultyStore;
use crate::hub::Hub;
use crate::manager::{
    Credential, DEFAULT_RATED_GAMES_PER_PAIR, GameManager, ManagerLimits, NewGame,
    RATED_PAIR_WINDOW, Seated, rated_in_pair_window,
};
use crate::memory::{MemoryLimits, MemoryStore};
use crate::model::{
    GameEventKind, GameFilter, GameId, GameInfo, GameStatus, LobbyEventKind, Termination,
};
use crate::rating::{self, Rating, Speed};
use crate::seek::{SeekLimits, SeekOutcome, SeekPool, SeekRequest, SeekTicket};
use crate::store::{GameStore, LeaderboardPage, PlayerGameFilter, PlayerResult, Since};
use crate::token::PlayerToken;
use crate::username::Username;

const FIRST: Player = Player::First;
const SECOND: Player = Player::Second;
const FIRST_WINS: Outcome = Outcome::Decisive { winner: FIRST };
const SECOND_WINS: Outcome = Outcome::Decisive { winner: SECOND };

struct Service {
    store: Arc<MemoryStore>,
    manager: Arc<GameManager>,
}

fn service() -> Service {
    service_with(ManagerLimits::default())
}

fn service_with(limits: ManagerLimits) -> Service {
    let store = Arc::new(MemoryStore::new(MemoryLimits::default()));
    let manager = GameManager::new(
        Arc::clone(&store) as Arc<dyn GameStore>,
        Hub::new(1024),
        limits,
    );
    Service {
        store,
        manager: Arc::new(manager),
    }
}

/// 3+2: blitz (3 minutes + 40 × 2 s = 260 s).
fn blitz() -> TimeControl {
    TimeControl::real_time(Duration::from_secs(180), Duration::from_secs(2)).unwrap()
}

/// 10+0: rapid.
fn rapid() -> TimeControl {
    TimeControl::real_time(Duration::from_secs(600), Duration::ZERO).unwrap()
}

fn new_game(account: Option<&Account>, time_control: TimeControl, rated: bool) -> NewGame {
    NewGame {
        rules: Preset::Standard.rules(),
        preset: Some(Preset::Standard),
        start: None,
        seat: Some(FIRST),
        display_name: "Anonymous".to_owned(),
        computer: None,
        time_control,
        account: account.cloned(),
        rated,
    }
}

/// Each seat of `id` makes its first move (a rated game is rated only once both have moved).
async fn both_move(manager: &GameManager, id: &GameId, first: &Account, second: &Account) {
    for account in [first, second] {
        first_legal_move(manager, id, Credential::Account(account.id.clone())).await;
    }
}

/// `who` plays the first legal move of `id`.
async fn first_legal_move(manager: &GameManager, id: &GameId, who: impl Into<Credential>) {
    let mv = manager.get_game(id).await.unwrap().position.legal_moves()[0];
    manager.play_move(id, who, mv, None).await.unwrap();
}

fn settled(rating: f64) -> Rating {
    Rating {
        rating,
        deviation: 60.0,
        volatility: 0.06,
        games: 30,
    }
}

impl Service {
    async fn register(&self, name: &str) -> (Account, ApiKey) {
        self.manager.register(name).await.unwrap()
    }

    /// An account written straight into the store with `ratings` already earned.
    async fn veteran(&self, name: &str, ratings: &[(Speed, Rating)]) -> Account {
        let now = SystemTime::now();
        let mut account = Account::new(Username::parse(name).unwrap(), now);
        account.ratings.extend(ratings.iter().copied());
        let (_, record) = ApiKey::generate(now);
        self.store
            .create_account(account.clone(), record)
            .await
            .unwrap();
        account
    }

    /// The account as stored now.
    async fn fresh(&self, account: &Account) -> Account {
        self.store.account(&account.id).await.unwrap()
    }

    /// A game between `first` (who creates it in the first seat) and `second` (who joins).
    async fn game(
        &self,
        first: &Account,
        second: &Account,
        time_control: TimeControl,
        rated: bool,
    ) -> (GameId, ByPlayer<PlayerToken>) {
        let first = self.fresh(first).await;
        let second = self.fresh(second).await;
        let created = self
            .manager
            .create_game(new_game(Some(&first), time_control, rated))
            .await
            .unwrap();
        let joined = self
            .manager
            .join_game_as(&created.game.id, "ignored", Some(&second))
            .await
            .unwrap();
        assert_eq!(joined.seat, SECOND);
        assert_eq!(joined.game.status, GameStatus::Active);
        assert_eq!(joined.game.rated, rated);
        (created.game.id, ByPlayer::new(created.token, joined.token))
    }

    /// A finished game between `first` and `second` won by `winner` (the other resigns) or
    /// drawn by agreement (`None`).
    async fn played(
        &self,
        first: &Account,
        second: &Account,
        time_control: TimeControl,
        rated: bool,
        winner: Option<Player>,
    ) -> GameInfo {
        let (id, tokens) = self.game(first, second, time_control, rated).await;
        both_move(&self.manager, &id, first, second).await;
        match winner {
            Some(winner) => {
                let loser = match winner.other() {
                    FIRST => first,
                    SECOND => second,
                };
                self.manager
                    .resign(&id, Credential::Account(loser.id.clone()))
                    .await
                    .unwrap()
            }
            None => {
                self.manager.offer_draw(&id, &tokens[FIRST]).await.unwrap();
                self.manager
                    .offer_draw(&id, &tokens[SECOND])
                    .await
                    .unwrap()
                    .0
            }
        }
    }

    async fn game_over(&self, id: &GameId) -> GameEventKind {
        let Since::Events { events, .. } = self.store.game_events_since(id, 0).await.unwrap()
        else {
            panic!("the log of {id} is whole");
        };
        let over: Vec<GameEventKind> = events
            .iter()
            .map(|e| e.kind.clone())
            .filter(|k| matches!(k, GameEventKind::GameOver { .. }))
            .collect();
        assert_eq!(over.len(), 1, "one GameOver in {events:?}");
        over.into_iter().next().unwrap()
    }

    async fn lobby_finished(&self, id: &GameId) -> Vec<LobbyEventKind> {
        let Since::Events { events, .. } = self.store.lobby_events_since(0).await.unwrap() else {
            panic!("the lobby log is whole");
        };
        events
            .iter()
            .map(|e| e.kind.clone())
            .filter(|k| matches!(k, LobbyEventKind::GameFinished { game_id, .. } if game_id == id))
            .collect()
    }

    async fn games_of(&self, name: &str, filter: PlayerGameFilter) -> Vec<GameId> {
        let page = self
            .manager
            .player_games(name, filter, 0, None)
            .await
            .unwrap();
        assert!(page.next_cursor.is_none());
        page.games.into_iter().map(|g| g.id).collect()
    }

    async fn leaders(&self, speed: Speed) -> Vec<(u64, String)> {
        let page = self.manager.leaderboard(speed, 0, None).await.unwrap();
        assert!(page.next_cursor.is_none());
        page.players
            .into_iter()
            .map(|r| (r.rank, r.account.username.as_str().to_owned()))
            .collect()
    }
}

fn change(before: Rating, after: Rating) -> RatingChange {
    RatingChange {
        before: before.rounded(),
        after: after.rounded(),
        provisional: after.is_provisional(),
    }
}

// --- Registration and keys -----------------------------------------------------------------

#[tokio::test]
async fn register_refuses_a_name_taken_under_its_key() {
    let s = service();
    let (lan, key) = s.register("Lan").await;
    assert_eq!(lan.username.as_str(), "Lan");
    assert_eq!(lan.record, crate::account::Record::default());
    assert!(lan.ratings.is_empty());
    assert!(ApiKey::is_meant(key.expose()));
    for taken in ["Lan", "lan", "LAN"] {
        match s.manager.register(taken).await {
            Err(GameError::UsernameTaken(name)) => assert!(name.contains(taken), "{name}"),
            other => panic!("{taken}: {other:?}"),
        }
    }
    // The refused registrations made nothing: the name still belongs to the first account.
    assert_eq!(s.manager.player("lAN").await.unwrap().id, lan.id);
    let keys = s.manager.api_keys(&lan.id).await.unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].id, key.id());
    assert!(keys[0].revoked.is_none());
    assert!(matches!(
        s.manager.player("Minh").await,
        Err(GameError::PlayerNotFound(_))
    ));
    // Alike only in capitals: `Ian` (capital i) reads as `lan`, Cyrillic and Greek `ТОМ`/`ΤΟΜ`
    // as an existing `Tom`. Refused as taken, and nothing is made: looked up, each finds the
    // account it was taken for, as any look-alike spelling of a name does.
    let (tom, _) = s.register("Tom").await;
    // And Greek `ΜΙΝΗ`, whose capital iota the skeleton writes `l`, as an existing `Minh`.
    let (minh, _) = s.register("Minh").await;
    let (kim, _) = s.register("Kim").await;
    for (impostor, owner) in [
        ("Ian", &lan),
        ("ТОМ", &tom),
        ("ΤΟΜ", &tom),
        ("\u{39c}\u{399}\u{39d}\u{397}", &minh),
        // Small `l` and Cyrillic small palochka for `I`.
        ("MlNH", &minh),
        ("\u{41a}\u{4cf}\u{41c}", &kim),
    ] {
        match s.manager.register(impostor).await {
            Err(GameError::UsernameTaken(name)) => assert!(name.contains(impostor), "{name}"),
            other => panic!("{impostor}: {other:?}"),
        }
        let found = s.manager.player(impostor).await.unwrap();
        assert_eq!(found.id, owner.id, "{impostor}");
    }
    // A name whose capitals look like no account is free: Cyrillic `МІНН` reads `MIHH`.
    s.register("Ivan").await;
    s.register("\u{41c}\u{406}\u{41d}\u{41d}").await;
}

/// A key as a client would make it for [`GameManager::register_with_key`].
fn chosen_key() -> String {
    ApiKey::generate(SystemTime::now()).0.expose().to_owned()
}

#[tokio::test]
async fn a_registration_with_a_chosen_key_can_be_retried() {
    let s = service();
    let key = chosen_key();
    let first = s
        .manager
        .register_with_key("Lan", Some(&key))
        .await
        .unwrap();
    assert!(first.made);
    assert_eq!(first.key.expose(), key);
    assert_eq!(
        s.manager.authenticate(&key).await.unwrap().id,
        first.account.id
    );
    // The answer was lost; the retry, in any case of the name, gets the same account and key.
    for name in ["Lan", "lan"] {
        let again = s.manager.register_with_key(name, Some(&key)).await.unwrap();
        assert!(!again.made, "{name}");
        assert_eq!(again.account.id, first.account.id);
        assert_eq!(again.key.expose(), key);
        assert_eq!(again.key_created, first.key_created);
    }
    assert_eq!(
        s.manager.api_keys(&first.account.id).await.unwrap().len(),
        1
    );
    // Another key, no key, or the key's id with another secret: the name is taken.
    let forged = format!(
        "{}{}",
        &key[..key.len() - 32],
        "Zz0-_Yy1Xx2Ww3Vv4Uu5Tt6Ss7Rr8Qq9"
    );
    for other in [Some(chosen_key()), None, Some(forged)] {
        match s.manager.register_with_key("Lan", other.as_deref()).await {
            Err(GameError::UsernameTaken(_)) => {}
            answer => panic!("{other:?}: {answer:?}"),
        }
    }
    // The key under another name: its id is the account's, so refused on the key.
    match s.manager.register_with_key("Minh", Some(&key)).await {
        Err(GameError::KeyIdTaken) => {}
        answer => panic!("{answer:?}"),
    }
    assert!(matches!(
        s.manager.player("Minh").await,
        Err(GameError::PlayerNotFound(_))
    ));
    // Revoked, it proves nothing any more.
    s.manager
        .revoke_api_key(&first.account.id, first.key.id())
        .await
        .unwrap();
    assert!(matches!(
        s.manager.register_with_key("Lan", Some(&key)).await,
        Err(GameError::UsernameTaken(_))
    ));
}

#[tokio::test]
async fn two_calls_of_one_registration_at_once_make_one_account() {
    // Both find the name free; the second's write meets the first's account.
    let (store, manager) = FaultyStore::with_manager();
    store.batched.store(true, Ordering::SeqCst);
    let key = chosen_key();
    let (a, b) = tokio::join!(
        manager.register_with_key("Hoa", Some(&key)),
        manager.register_with_key("Hoa", Some(&key)),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.account.id, b.account.id);
    assert!(a.made != b.made, "one made it, one found it");
}

#[tokio::test]
async fn a_chosen_key_must_look_random() {
    let s = service();
    let id = "0123456789abcdef";
    for bad in [
        String::new(),
        "oqk_".to_owned(),
        format!("oqk_{id}_short"),
        format!("oqk_{id}_{}", "A".repeat(32)),
        format!("oqk_{id}_{}", "AB".repeat(16)),
        format!("oqk_{id}_{}", "Ab1-_".repeat(7).get(..32).unwrap()),
        format!(
            "oqk_{}_{}",
            "0123456789ABCDEF", "abcdefghijklmnopqrstuvwxyzABCDEF"
        ),
        format!("oqk_{id}_{}é", "abcdefghijklmnopqrstuvwxyzABCDE"),
    ] {
        match s.manager.register_with_key("Lan", Some(&bad)).await {
            Err(GameError::InvalidArgument { field, .. }) => assert_eq!(field, "api_key", "{bad}"),
            answer => panic!("{bad:?}: {answer:?}"),
        }
    }
    // Nothing was made by the refusals.
    assert!(matches!(
        s.manager.player("Lan").await,
        Err(GameError::PlayerNotFound(_))
    ));
    // Twelve distinct characters are enough; the alphabet's every character may appear.
    let twelve = "abcdefghijkl".repeat(3);
    let key = format!("oqk_{id}_{}", &twelve[..32]);
    s.manager
        .register_with_key("Lan", Some(&key))
        .await
        .unwrap();
}

#[tokio::test]
async fn authenticate_accepts_only_a_live_key_of_the_account() {
    let s = service();
    let (lan, key) = s.register("Lan").await;
    assert_eq!(
        s.manager.authenticate(key.expose()).await.unwrap().id,
        lan.id
    );

    let seat_token = PlayerToken::generate();
    let (unknown, _) = ApiKey::generate(SystemTime::now());
    // The right id with another secret: the id finds the record, the hash refuses it.
    let forged = format!("{}{}", &key.expose()[..key.expose().len() - 1], {
        if key.expose().ends_with('A') {
            'B'
        } else {
            'A'
        }
    });
    assert!(ApiKey::is_meant(&forged));
    for bad in [
        "",
        "nope",
        seat_token.expose(),
        unknown.expose(),
        forged.as_str(),
        &key.expose()[1..],
    ] {
        assert_eq!(
            s.manager.authenticate(bad).await.unwrap_err(),
            GameError::BadApiKey,
            "{bad}"
        );
    }

    let (second, _) = s.manager.create_api_key(&lan.id).await.unwrap();
    s.manager.revoke_api_key(&lan.id, key.id()).await.unwrap();
    // Revocation takes effect from the very next call; the other key still works.
    assert_eq!(
        s.manager.authenticate(key.expose()).await.unwrap_err(),
        GameError::BadApiKey
    );
    assert_eq!(
        s.manager.authenticate(second.expose()).await.unwrap().id,
        lan.id
    );
}

#[tokio::test]
async fn keys_are_listed_created_and_revoked_per_account() {
    let s = service();
    let (lan, first) = s.register("Lan").await;
    let (minh, minh_key) = s.register("Minh").await;
    let (second, record) = s.manager.create_api_key(&lan.id).await.unwrap();
    assert_eq!(record.id, second.id());
    assert_ne!(second.id(), first.id());
    assert!(record.hash.matches(&second.hash()));

    let listed = s.manager.api_keys(&lan.id).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|k| k.id.as_str()).collect();
    assert_eq!(ids, [first.id(), second.id()], "oldest first");
    assert!(listed.iter().all(|k| k.revoked.is_none()));

    // Another account's key, or no key at all, is not found, and stays valid.
    for other in [minh_key.id(), "0123456789abcdef", ""] {
        match s.manager.revoke_api_key(&lan.id, other).await {
            Err(GameError::ApiKeyNotFound(_)) => {}
            result => panic!("{other}: {result:?}"),
        }
    }
    assert_eq!(
        s.manager.authenticate(minh_key.expose()).await.unwrap().id,
        minh.id
    );

    s.manager
        .revoke_api_key(&lan.id, second.id())
        .await
        .unwrap();
    let listed = s.manager.api_keys(&lan.id).await.unwrap();
    let revoked = listed[1].revoked.expect("the second key is revoked");
    assert!(listed[0].revoked.is_none());
    // Revoking again is harmless and keeps the first revocation's time.
    s.manager
        .revoke_api_key(&lan.id, second.id())
        .await
        .unwrap();
    assert_eq!(
        s.manager.api_keys(&lan.id).await.unwrap()[1].revoked,
        Some(revoked)
    );
    assert_eq!(s.manager.api_keys(&minh.id).await.unwrap().len(), 1);

    // At the bound of working keys (the revoked second one does not count), the refusal says
    // to revoke one (not "retry later", which a limit that frees up by itself says), and
    // revoking one frees its place.
    let mut made = Vec::new();
    for _ in 1..crate::memory::MAX_API_KEYS {
        made.push(s.manager.create_api_key(&lan.id).await.unwrap().0);
    }
    let refused = s.manager.create_api_key(&lan.id).await.unwrap_err();
    assert_eq!(
        refused,
        GameError::ApiKeysExhausted {
            max: crate::memory::MAX_API_KEYS
        }
    );
    let said = refused.to_string();
    assert!(
        said.contains("revoke one") && !said.contains("retry later"),
        "{said}"
    );
    s.manager
        .revoke_api_key(&lan.id, made[3].id())
        .await
        .unwrap();
    let (newest, _) = s.manager.create_api_key(&lan.id).await.unwrap();
    assert_eq!(
        s.manager.authenticate(newest.expose()).await.unwrap().id,
        lan.id
    );
}

// --- An account acting for its seat --------------------------------------------------------

#[tokio::test]
async fn an_account_acts_for_its_own_seat_only() {
    let s = service();
    let (lan, _) = s.register("Lan").await;
    let (minh, _) = s.register("Minh").await;
    let (hoa, _) = s.register("Hoa").await;
    let (id, tokens) = s.game(&lan, &minh, TimeControl::Untimed, false).await;
    let game = s.manager.get_game(&id).await.unwrap();
    let seat = |p: Player| game.seats[p].as_ref().unwrap();
    assert_eq!(seat(FIRST).display_name, "Lan");
    assert_eq!(seat(SECOND).display_name, "Minh");
    assert_eq!(
        seat(FIRST).account,
        Some(SeatAccount {
            id: lan.id.clone(),
            username: "Lan".to_owned(),
            rating: None, // untimed: no speed, no rating
            provisional: false,
        })
    );

    let mv = game.position.legal_moves()[0];
    // An account without a seat here is refused, as is a seat's account out of turn.
    assert_eq!(
        s.manager
            .play_move(&id, Credential::Account(hoa.id.clone()), mv, None)
            .await
            .unwrap_err(),
        GameError::WrongToken
    );
    assert_eq!(
        s.manager
            .play_move(&id, Credential::Account(minh.id.clone()), mv, None)
            .await
            .unwrap_err(),
        GameError::NotYourTurn { to_move: FIRST }
    );
    let (record, _) = s
        .manager
        .play_move(&id, Credential::Account(lan.id.clone()), mv, Some(0))
        .await
        .unwrap();
    assert_eq!(record.player, FIRST);
    // The seat token still works for the same seat.
    let mv = s
        .manager
        .get_game(&id)
        .await
        .unwrap()
        .position
        .legal_moves()[0];
    let (record, _) = s
        .manager
        .play_move(&id, &tokens[SECOND], mv, None)
        .await
        .unwrap();
    assert_eq!(record.player, SECOND);

    assert_eq!(
        s.manager
            .resign(&id, Credential::Account(hoa.id.clone()))
            .await
            .unwrap_err(),
        GameError::WrongToken
    );
    let over = s
        .manager
        .resign(&id, Credential::Account(minh.id.clone()))
        .await
        .unwrap();
    let result = over.result.unwrap();
    assert_eq!(result.ended_by, Some(SECOND));
    assert_eq!(result.outcome, Some(FIRST_WINS));

    // An anonymous seat has no account to act for it.
    let anonymous = s
        .manager
        .create_game(new_game(None, TimeControl::Untimed, false))
        .await
        .unwrap();
    assert_eq!(
        s.manager
            .abort(&anonymous.game.id, Credential::Account(lan.id.clone()))
            .await
            .unwrap_err(),
        GameError::WrongToken
    );
    s.manager
        .abort(&anonymous.game.id, &anonymous.token)
        .await
        .unwrap();
}

// --- Rated and unrated games ---------------------------------------------------------------

#[tokio::test]
async fn a_rated_game_rates_both_accounts_once_in_its_result() {
    let s = service();
    let (lan, _) = s.register("Lan").await;
    let (minh, _) = s.register("Minh").await;
    let (id, tokens) = s.game(&lan, &minh, blitz(), true).await;
    let game = s.manager.get_game(&id).await.unwrap();
    assert!(game.rated);
    for (seat, account) in [(FIRST, &lan), (SECOND, &minh)] {
        assert_eq!(
            game.seats[seat].as_ref().unwrap().account,
            Some(SeatAccount {
                id: account.id.clone(),
                username: account.username.as_str().to_owned(),
                rating: Some(1500),
                provisional: true,
            })
        );
    }

    both_move(&s.manager, &id, &lan, &minh).await;
    let over = s
        .manager
        .resign(&id, Credential::Account(minh.id.clone()))
        .await
        .unwrap();

    let (lan_after, minh_after) = rating::rate(Rating::INITIAL, Rating::INITIAL, FIRST_WINS);
    let expected = ByPlayer::new(
        change(Rating::INITIAL, lan_after),
        change(Rating::INITIAL, minh_after),
    );
    assert_eq!(
        expected,
        ByPlayer::new(
            RatingChange {
                before: 1500,
                after: 1662,
                provisional: true
            },
            RatingChange {
                before: 1500,
                after: 1338,
                provisional: true
            }
        )
    );
    assert_eq!(over.result.unwrap().ratings, Some(expected));
    let stored = s.manager.get_game(&id).await.unwrap().result.unwrap();
    assert_eq!(stored.termination, Termination::Resignation);
    assert_eq!(stored.ratings, Some(expected));
    let GameEventKind::GameOver { result, .. } = s.game_over(&id).await else {
        unreachable!()
    };
    assert_eq!(result.ratings, Some(expected));
    let lobby = s.lobby_finished(&id).await;
    assert!(
        matches!(lobby.as_slice(), [LobbyEventKind::GameFinished { result, .. }] if result.ratings == Some(expected)),
        "{lobby:?}"
    );

    let check = |account: &Account, after: Rating, wins: u32, losses: u32| {
        assert_eq!(account.ratings.len(), 1, "{account:?}");
        assert_eq!(account.ratings[&Speed::Blitz], after, "exactly rate()'s");
        assert_eq!(account.rating(Speed::Blitz).games, 1);
        assert_eq!(
            (
                account.record.wins,
                account.record.draws,
                account.record.losses
            ),
            (wins, 0, losses)
        );
        assert_eq!(account.version, 2, "one change");
    };
    let lan_now = s.fresh(&lan).await;
    let minh_now = s.fresh(&minh).await;
    check(&lan_now, lan_after, 1, 0);
    check(&minh_now, minh_after, 0, 1);

    // What follows the end changes the game, never the accounts again.
    assert_eq!(
        s.manager
            .resign(&id, Credential::Account(lan.id.clone()))
            .await
            .unwrap_err(),
        GameError::GameOver
    );
    s.manager.offer_rematch(&id, &tokens[FIRST]).await.unwrap();
    s.manager
        .decline_rematch(&id, &tokens[SECOND])
        .await
        .unwrap();
    assert_eq!(s.manager.apply_deadline(&id).await.unwrap(), None);
    assert_eq!(s.fresh(&lan).await, lan_now);
    assert_eq!(s.fresh(&minh).await, minh_now);
    // Still one GameOver, with the same ratings.
    let GameEventKind::GameOver { result, .. } = s.game_over(&id).await else {
        unreachable!()
    };
    assert_eq!(result.ratings, Some(expected));

    // The next rated game shows the new ratings on the seats.
    let (next, _) = s.game(&minh, &lan, blitz(), true).await;
    let next = s.manager.get_game(&next).await.unwrap();
    assert_seats_after_first_game(&next);

    // So does a rematch, which the game's result leads straight to.
    let (again, tokens) = s.game(&lan, &minh, blitz(), true).await;
    both_move(&s.manager, &again, &lan, &minh).await;
    s.manager.resign(&again, &tokens[SECOND]).await.unwrap();
    let lan_now = s.fresh(&lan).await.rating(Speed::Blitz);
    let minh_now = s.fresh(&minh).await.rating(Speed::Blitz);
    s.manager
        .offer_rematch(&again, &tokens[SECOND])
        .await
        .unwrap();
    let rematch = s
        .manager
        .offer_rematch(&again, &tokens[FIRST])
        .await
        .unwrap()
        .rematch
        .expect("both offered");
    assert!(rematch.rated);
    let shown = |seat: Player| {
        let account = rematch.seats[seat]
            .as_ref()
            .unwrap()
            .account
            .clone()
            .unwrap();
        (account.username, account.rating, account.provisional)
    };
    assert_eq!(
        shown(FIRST),
        (
            "Minh".to_owned(),
            Some(minh_now.rounded()),
            minh_now.is_provisional()
        )
    );
    assert_eq!(
        shown(SECOND),
        (
            "Lan".to_owned(),
            Some(lan_now.rounded()),
            lan_now.is_provisional()
        )
    );
    assert_ne!(
        lan_now.rounded(),
        1662,
        "the rematch shows the rating after the game"
    );
}

#[tokio::test]
async fn a_rated_game_ended_before_both_players_moved_changes_no_rating() {
    let s = service();
    let (lan, _) = s.register("Lan").await;
    let (minh, _) = s.register("Minh").await;

    // Resigned before any move, resigned after one, drawn by agreement after one: each a
    // result for the record, none a rating change.
    let (at_once, _) = s.game(&lan, &minh, blitz(), true).await;
    let at_once = s
        .manager
        .resign(&at_once, Credential::Account(minh.id.clone()))
        .await
        .unwrap();
    let (after_one, tokens) = s.game(&lan, &minh, blitz(), true).await;
    first_legal_move(&s.manager, &after_one, &tokens[FIRST]).await;
    let after_one = s.manager.resign(&after_one, &tokens[SECOND]).await.unwrap();
    let (drawn, tokens) = s.game(&minh, &lan, blitz(), true).await;
    first_legal_move(&s.manager, &drawn, &tokens[FIRST]).await;
    s.manager.offer_draw(&drawn, &tokens[FIRST]).await.unwrap();
    let (drawn, _) = s.manager.offer_draw(&drawn, &tokens[SECOND]).await.unwrap();

    for over in [&at_once, &after_one, &drawn] {
        assert_eq!(over.status, GameStatus::Finished);
        assert!(over.rated, "still a rated game");
        let result = over.result.as_ref().unwrap();
        assert!(result.outcome.is_some());
        assert_eq!(result.ratings, None, "{over:?}");
        let GameEventKind::GameOver { result, .. } = s.game_over(&over.id).await else {
            unreachable!()
        };
        assert_eq!(result.ratings, None);
    }
    for (account, record) in [(&lan, (2, 1, 0)), (&minh, (0, 1, 2))] {
        let now = s.fresh(account).await;
        assert!(now.ratings.is_empty(), "{now:?}");
        assert_eq!(now.rating(Speed::Blitz), Rating::INITIAL);
        assert_eq!(
            (now.record.wins, now.record.draws, now.record.losses),
            record
        );
    }

    // Once both have moved, the same resignation is rated.
    let over = s.played(&lan, &minh, blitz(), true, Some(FIRST)).await;
    assert!(over.result.unwrap().ratings.is_some());
    assert_eq!(s.fresh(&lan).await.rating(Speed::Blitz).games, 1);
}

#[tokio::test]
async fn only_five_rated_games_of_one_pair_a_day_change_ratings() {
    let s = service();
    let (lan, _) = s.register("Lan").await;
    let (minh, _) = s.register("Minh").await;
    let (hoa, _) = s.register("Hoa").await;

    // Unrated games between the pair spend nothing.
    for _ in 0..3 {
        s.played(&lan, &minh, blitz(), false, Some(FIRST)).await;
    }
    // Five rated games change ratings, in either seat order; the sixth counts in the records
    // only, as the sixth with the seats swapped does.
    for n in 0..DEFAULT_RATED_GAMES_PER_PAIR {
        let (first, second) = if n % 2 == 0 {
            (&lan, &minh)
        } else {
            (&minh, &lan)
        };
        let over = s.played(first, second, blitz(), true, Some(FIRST)).await;
        assert!(over.result.unwrap().ratings.is_some(), "game {n}: {over:?}");
    }
    let rated = s.fresh(&lan).await;
    assert_eq!(rated.rating(Speed::Blitz).games, 5);
    for (first, second) in [(&lan, &minh), (&minh, &lan)] {
        let over = s.played(first, second, blitz(), true, Some(FIRST)).await;
        assert!(over.rated, "still a rated game");
        assert_eq!(over.result.unwrap().ratings, None, "{over:?}");
        let GameEventKind::GameOver { result, .. } = s.game_over(&over.id).await else {
            unreachable!()
        };
        assert_eq!(result.ratings, None);
    }
    let now = s.fresh(&lan).await;
    assert_eq!(now.ratings, rated.ratings, "no rating moved");
    assert_eq!(
        (now.record.wins, now.record.draws, now.record.losses),
        (3 + 3 + 1, 0, 2 + 1),
        "every game is in the record"
    );

    // Another opponent, or another speed with the same one, has an allowance of its own.
    let over = s.played(&lan, &hoa, blitz(), true, Some(FIRST)).await;
    assert!(over.result.unwrap().ratings.is_some());
    let over = s.played(&minh, &lan, rapid(), true, Some(SECOND)).await;
    assert!(over.result.unwrap().ratings.is_some());
}

/// The allowance is read page by page: rated games of the pair behind more than a page of
/// other games still count.
#[tokio::test]
async fn the_pair_allowance_reads_past_a_page_of_other_games() {
    let s = service();
    let (lan, _) = s.register("Lan").await;
    let (minh, _) = s.register("Minh").await;
    for _ in 0..DEFAULT_RATED_GAMES_PER_PAIR {
        let over = s.played(&lan, &minh, blitz(), true, Some(FIRST)).await;
        assert!(over.result.unwrap().ratings.is_some());
    }
    for _ in 0..=super::manager::MAX_PAGE_SIZE {
        s.played(&lan, &minh, blitz(), false, Some(FIRST)).await;
    }
    let over = s.played(&lan, &minh, blitz(), true, Some(FIRST)).await;
    assert_eq!(over.result.unwrap().ratings, None, "{over:?}");
}

#[tokio::test]
async fn the_pair_allowance_counts_games_created_within_a_day_either_way() {
    let s = service();
    let (lan, _) = s.register("Lan").await;
    let (minh, _) = s.register("Minh").await;
    let (hoa, _) = s.register("Hoa").await;
    let rated = s.played(&lan, &minh, blitz(), true, Some(FIRST)).await;
    let unrated = s.played(&lan, &minh, blitz(), false, Some(FIRST)).await;
    let other = s.played(&lan, &hoa, blitz(), true, Some(FIRST)).await;
    let game = s.played(&minh, &lan, blitz(), true, Some(FIRST)).await;
    let minh = minh.id;

    let at = |info: &GameInfo, created: SystemTime| {
        let mut info = info.clone();
        info.created = created;
        info
    };
    let day = RATED_PAIR_WINDOW;
    let second = Duration::from_secs(1);
    for (created, counts) in [
        (game.created, true),
        (game.created - day, true),
        (game.created + day, true),
        (game.created - day - second, false),
        (game.created + day + second, false),
    ] {
        let other_game = at(&rated, created);
        assert_eq!(
            rated_in_pair_window(&other_game, &game, &minh),
            counts,
            "{created:?}"
        );
    }
    // Not itself, not an unrated game, not a game against someone else.
    assert!(!rated_in_pair_window(&game, &game, &minh));
    assert!(!rated_in_pair_window(&unrated, &game, &minh));
    assert!(!rated_in_pair_window(&other, &game, &minh));
}

/// Minh (first) and Lan (second) shown with the ratings their first game left them.
fn assert_seats_after_first_game(next: &GameInfo) {
    let shown = |seat: Player| {
        let account = next.seats[seat].as_ref().unwrap().account.as_ref().unwrap();
        (account.username.clone(), account.rating)
    };
    assert_eq!(shown(FIRST), ("Minh".to_owned(), Some(1338)));
    assert_eq!(shown(SECOND), ("Lan".to_owned(), Some(1662)));
}

#[tokio::test]
async fn an_unrated_game_between_accounts_counts_results_only() {
    let s = service();
    let (lan, _) = s.register("Lan").await;
    let (minh, _) = s.register("Minh").await;
    let over = s.played(&lan, &minh, blitz(), false, Some(SECOND)).await;
    let result = over.result.unwrap();
    assert_eq!(result.outcome, Some(SECOND_WINS));
    assert_eq!(result.ratings, None);
    let GameEventKind::GameOver { result, .. } = s.game_over(&over.id).await else {
        unreachable!()
    };
    assert_eq!(result.ratings, None);
    let lan_now = s.fresh(&lan).await;
    let minh_now = s.fresh(&minh).await;
    assert!(lan_now.ratings.is_empty() && minh_now.ratings.is_empty());
    assert_eq!((lan_now.record.wins, lan_now.record.losses), (0, 1));
    assert_eq!((minh_now.record.wins, minh_now.record.losses), (1, 0));

    // A draw counts as one for both.
    s.played(&lan, &minh, TimeControl::Untimed, false, None)
        .await;
    assert_eq!(s.fresh(&lan).await.record.draws, 1);
    assert_eq!(s.fresh(&minh).await.record.draws, 1);

    // An aborted game counts for nothing, rated or not.
    let (id, tokens) = s.game(&lan, &minh, blitz(), true).await;
    let before = (s.fresh(&lan).await, s.fresh(&minh).await);
    let aborted = s.manager.abort(&id, &tokens[SECOND]).await.unwrap();
    assert_eq!(aborted.status, GameStatus::Aborted);
    assert_eq!(aborted.result.unwrap().ratings, None);
    assert_eq!((s.fresh(&lan).await, s.fresh(&minh).await), before);

    // Against an anonymous player, only the account's own result counts.
    let created = s
        .manager
        .create_game(new_game(Some(&s.fresh(&lan).await), blitz(), false))
        .await
        .unwrap();
    let joined = s.manager.join_game(&created.game.id, "Hoa").await.unwrap();
    assert_eq!(joined.game.seats[SECOND].as_ref().unwrap().account, None);
    s.manager
        .resign(&created.game.id, &joined.token)
        .await
        .unwrap();
    let lan_now = s.fresh(&lan).await;
    assert_eq!(
        (
            lan_now.record.wins,
            lan_now.record.draws,
            lan_now.record.losses
        ),
        (1, 1, 1)
    );
    assert!(lan_now.ratings.is_empty());
}

#[tokio::test]
async fn rated_games_need_an_account_a_clock_and_a_person() {
    let s = service();
    let (lan, _) = s.register("Lan").await;
    assert_eq!(
        s.manager
            .create_game(new_game(None, blitz(), true))
            .await
            .unwrap_err(),
        GameError::RatedNeedsAccount
    );
    let field_of = |error: GameError| match error {
        GameError::InvalidArgument { field, .. } => field,
        other => panic!("{other:?}"),
    };
    let untimed = s
        .manager
        .create_game(new_game(Some(&lan), TimeControl::Untimed, true))
        .await
        .unwrap_err();
    assert_eq!(field_of(untimed), "rated");
    let computer = s
        .manager
        .create_game(NewGame {
            computer: Some(Level::Random),
            ..new_game(Some(&lan), blitz(), true)
        })
        .await
        .unwrap_err();
    assert_eq!(field_of(computer), "rated");
    // A custom rule set or start position could decide a rated result before the first move.
    let custom_rules = s
        .manager
        .create_game(NewGame {
            preset: None,
            rules: oanquan_rules::Rules {
                max_plies: 1,
                ..Preset::Standard.rules()
            },
            ..new_game(Some(&lan), blitz(), true)
        })
        .await
        .unwrap_err();
    assert_eq!(field_of(custom_rules), "rated");
    let custom_start = s
        .manager
        .create_game(NewGame {
            start: Some(oanquan_rules::Position::new(Preset::Standard.rules()).unwrap()),
            ..new_game(Some(&lan), blitz(), true)
        })
        .await
        .unwrap_err();
    assert_eq!(field_of(custom_start), "rated");
    let mut seek = seek_request(Some(&lan), true, None);
    seek.preset = None;
    let custom_seek = pool(&s).seek(seek).await.unwrap_err();
    assert_eq!(field_of(custom_seek), "rated");
    // Nothing was created by the refusals.
    let all = s
        .manager
        .list_games(GameFilter::All, 0, None)
        .await
        .unwrap();
    assert!(all.games.is_empty());

    // The same game unrated against the computer is fine, and a correspondence game is rated.
    s.manager
        .create_game(NewGame {
            computer: Some(Level::Random),
            ..new_game(Some(&lan), blitz(), false)
        })
        .await
        .unwrap();
    let correspondence = TimeControl::Correspondence {
        per_move: Duration::from_secs(86_400),
    };
    let created = s
        .manager
        .create_game(new_game(Some(&lan), correspondence, true))
        .await
        .unwrap();
    assert!(created.game.rated);
}

#[tokio::test]
async fn a_rated_game_is_joined_by_another_account_only() {
    let s = service();
    let (lan, _) = s.register("Lan").await;
    let (minh, _) = s.register("Minh").await;
    let created = s
        .manager
        .create_game(new_game(Some(&lan), blitz(), true))
        .await
        .unwrap();
    let id = created.game.id;
    assert_eq!(
        s.manager.join_game(&id, "Hoa").await.unwrap_err(),
        GameError::RatedNeedsAccount
    );
    assert!(matches!(
        s.manager.join_game_as(&id, "Lan", Some(&lan)).await,
        Err(GameError::SeatTaken(_))
    ));
    let game = s.manager.get_game(&id).await.unwrap();
    assert_eq!(game.status, GameStatus::WaitingForPlayers);
    assert!(game.seats[SECOND].is_none());
    let joined = s
        .manager
        .join_game_as(&id, "whatever", Some(&minh))
        .await
        .unwrap();
    let seat = joined.game.seats[SECOND].as_ref().unwrap();
    assert_eq!(
        seat.display_name, "Minh",
        "an account plays under its username"
    );
    assert_eq!(seat.account.as_ref().unwrap().id, minh.id);

    // One account cannot take both seats of an unrated game either.
    let unrated = s
        .manager
        .create_game(new_game(Some(&lan), TimeControl::Untimed, false))
        .await
        .unwrap();
    assert!(matches!(
        s.manager
            .join_game_as(&unrated.game.id, "", Some(&lan))
            .await,
        Err(GameError::SeatTaken(_))
    ));
    s.manager.join_game(&unrated.game.id, "Hoa").await.unwrap();
}

// --- Seeks ---------------------------------------------------------------------------------

fn seek_request(
    account: Option<&Account>,
    rated: bool,
    rating_range: Option<(i32, i32)>,
) -> SeekRequest {
    SeekRequest {
        rules: Preset::Standard.rules(),
        preset: Some(Preset::Standard),
        time_control: blitz(),
        display_name: "Anonymous".to_owned(),
        computer: None,
        client: None::<IpAddr>,
        account: account.cloned(),
        rated,
        rating_range,
    }
}

fn pool(s: &Service) -> Arc<SeekPool> {
    SeekPool::new(Arc::clone(&s.manager), SeekLimits::default())
}

fn waiting(outcome: SeekOutcome) -> SeekTicket {
    match outcome {
        SeekOutcome::Waiting(ticket) => ticket,
        SeekOutcome::Paired(seated) => panic!("paired at once: {:?}", seated.game),
    }
}

fn paired(outcome: SeekOutcome) -> Seated {
    match outcome {
        SeekOutcome::Paired(seated) => seated,
        SeekOutcome::Waiting(ticket) => panic!("still waiting: {:?}", ticket.info()),
    }
}

async fn answer(ticket: &mut SeekTicket) -> Seated {
    tokio::time::timeout(Duration::from_secs(10), ticket.wait())
        .await
        .expect("the waiting seeker hears of the pairing")
        .unwrap()
}

/// The accounts seated in `game`, in any order.
fn seated_accounts(game: &GameInfo) -> Vec<AccountId> {
    let mut ids: Vec<AccountId> = Player::ALL
        .into_iter()
        .filter_map(|p| {
            game.seats[p]
                .as_ref()?
                .account
                .as_ref()
                .map(|a| a.id.clone())
        })
        .collect();
    ids.sort();
    ids
}

fn sorted(mut ids: Vec<AccountId>) -> Vec<AccountId> {
    ids.sort();
    ids
}

#[tokio::test]
async fn rated_seeks_pair_only_with_rated_seeks_of_other_accounts() {
    let s = service();
    let pool = pool(&s);
    let (lan, _) = s.register("Lan").await;
    let (minh, _) = s.register("Minh").await;
    let (hoa, _) = s.register("Hoa").await;

    assert_eq!(
        pool.seek(seek_request(None, true, None)).await.unwrap_err(),
        GameError::RatedNeedsAccount
    );
    let untimed = pool
        .seek(SeekRequest {
            time_control: TimeControl::Untimed,
            ..seek_request(Some(&lan), true, None)
        })
        .await
        .unwrap_err();
    assert!(matches!(untimed, GameError::InvalidArgument { ref field, .. } if field == "rated"));
    assert!(pool.list().is_empty());

    let mut lan_rated = waiting(
        pool.seek(seek_request(Some(&lan), true, None))
            .await
            .unwrap(),
    );
    assert_eq!(lan_rated.info().display_name, "Lan");
    assert_eq!(
        lan_rated.info().account.as_ref().map(|a| a.rating),
        Some(Some(1500))
    );
    // Not with an unrated seek of another account, nor with another seek of the same account.
    let _minh_unrated = waiting(
        pool.seek(seek_request(Some(&minh), false, None))
            .await
            .unwrap(),
    );
    let _lan_again = waiting(
        pool.seek(seek_request(Some(&lan), true, None))
            .await
            .unwrap(),
    );
    assert_eq!(pool.list().len(), 3);
    // An anonymous player cannot accept it by id either.
    let lan_seek = lan_rated.info().id.clone();
    assert_eq!(
        pool.accept(&lan_seek, "Anonymous", None, None)
            .await
            .unwrap_err(),
        GameError::RatedNeedsAccount
    );

    // Hoa's rated seek pairs with the oldest rated seek of another account: Lan's first.
    let hoa_seat = paired(
        pool.seek(seek_request(Some(&hoa), true, None))
            .await
            .unwrap(),
    );
    let lan_seat = answer(&mut lan_rated).await;
    assert_eq!(hoa_seat.game.id, lan_seat.game.id);
    assert_eq!(hoa_seat.seat, lan_seat.seat.other());
    assert!(hoa_seat.game.rated);
    assert_eq!(
        seated_accounts(&hoa_seat.game),
        sorted(vec![lan.id.clone(), hoa.id.clone()])
    );
    assert_eq!(pool.list().len(), 2);
    // An anonymous unrated seek pairs with the unrated one, as before.
    let game = paired(pool.seek(seek_request(None, false, None)).await.unwrap()).game;
    assert!(!game.rated);
    assert_eq!(seated_accounts(&game), vec![minh.id.clone()]);
    assert_eq!(pool.list().len(), 1);
}

#[tokio::test]
async fn rating_ranges_are_respected_both_ways() {
    let s = service();
    let pool = pool(&s);
    let mid = s.veteran("Mid", &[(Speed::Blitz, settled(1500.0))]).await;
    let strong = s
        .veteran("Strong", &[(Speed::Blitz, settled(1800.0))])
        .await;
    let weak = s.veteran("Weak", &[(Speed::Blitz, settled(1200.0))]).await;
    let near = s
        .veteran(
            "Near",
            // Rated at other speeds only: its blitz rating is a newcomer's 1500.
            &[(Speed::Rapid, settled(2500.0))],
        )
        .await;

    let mut mid_seek = waiting(
        pool.seek(seek_request(Some(&mid), true, Some((1100, 1600))))
            .await
            .unwrap(),
    );
    // Strong is outside Mid's range.
    let mut strong_seek = waiting(
        pool.seek(seek_request(Some(&strong), true, None))
            .await
            .unwrap(),
    );
    // Weak is inside Mid's range, but Mid is outside Weak's: no pairing with Mid. Strong is
    // inside Weak's, and Strong asks nothing: Weak pairs with Strong, skipping the older Mid.
    let weak_seat = paired(
        pool.seek(seek_request(Some(&weak), true, Some((1700, 1900))))
            .await
            .unwrap(),
    );
    let strong_seat = answer(&mut strong_seek).await;
    assert_eq!(weak_seat.game.id, strong_seat.game.id);
    assert_eq!(
        seated_accounts(&weak_seat.game),
        sorted(vec![weak.id.clone(), strong.id.clone()])
    );
    let ids: Vec<String> = pool.list().into_iter().map(|i| i.id).collect();
    assert_eq!(ids, [mid_seek.info().id.clone()]);

    // Accepting by id checks the range too, and one's own seek is refused.
    let id = mid_seek.info().id.clone();
    for refused in [&strong, &mid] {
        assert!(
            matches!(
                pool.accept(&id, "", None, Some(refused)).await,
                Err(GameError::SeekRefused(_))
            ),
            "{}",
            refused.username
        );
    }
    assert_eq!(
        pool.list().len(),
        1,
        "a refused accept leaves the seek open"
    );
    let near_seat = pool.accept(&id, "", None, Some(&near)).await.unwrap();
    let mid_seat = answer(&mut mid_seek).await;
    assert_eq!(near_seat.game.id, mid_seat.game.id);
    assert!(near_seat.game.rated);
    let near_shown = near_seat.game.seats[near_seat.seat]
        .as_ref()
        .unwrap()
        .account
        .clone()
        .unwrap();
    assert_eq!(
        (near_shown.username.as_str(), near_shown.rating),
        ("Near", Some(1500))
    );
    assert!(pool.list().is_empty());

    // Anonymous seekers have no rating: they never match a range, even unrated.
    let ranged = waiting(
        pool.seek(seek_request(Some(&mid), false, Some((400, 4000))))
            .await
            .unwrap(),
    );
    let _anonymous = waiting(pool.seek(seek_request(None, false, None)).await.unwrap());
    let ranged_id = ranged.info().id.clone();
    assert!(matches!(
        pool.accept(&ranged_id, "Anonymous", None, None).await,
        Err(GameError::SeekRefused(ref why))
            if why == "it wants a rated opponent, and you have no rating (play as an account)"
    ));
    // A backwards range is refused outright, and so is one that no rating falls in; one that
    // reaches into the ratings is taken.
    for range in [
        (1600, 1400),
        (0, 0),
        (-5, 10),
        (4001, i32::MAX),
        (i32::MIN, 399),
    ] {
        assert!(
            matches!(
                pool.seek(seek_request(Some(&weak), true, Some(range))).await,
                Err(GameError::InvalidArgument { ref field, .. }) if field == "rating_range"
            ),
            "{range:?}"
        );
    }
    // Untimed games have no speed, so nobody's rating: an outside probe's range waited for ever.
    let untimed = SeekRequest {
        time_control: TimeControl::Untimed,
        ..seek_request(Some(&weak), false, Some((400, 4000)))
    };
    assert!(matches!(
        pool.seek(untimed).await,
        Err(GameError::InvalidArgument { ref field, ref description })
            if field == "rating_range" && description.contains("untimed game has no speed")
    ),);
    for range in [(i32::MIN, 400), (4000, i32::MAX), (i32::MIN, i32::MAX)] {
        // Dropping the ticket withdraws the seek.
        drop(waiting(
            pool.seek(seek_request(Some(&weak), true, Some(range)))
                .await
                .unwrap(),
        ));
    }
}

// --- A player's games and the leaderboard --------------------------------------------------

#[tokio::test]
async fn player_games_filter_by_result_and_speed_newest_first() {
    let s = service();
    let (lan, _) = s.register("Lan").await;
    let (minh, _) = s.register("Minh").await;
    let (hoa, _) = s.register("Hoa").await;
    let won = s.played(&lan, &minh, blitz(), true, Some(FIRST)).await.id;
    let lost = s.played(&minh, &lan, rapid(), false, Some(FIRST)).await.id;
    let drawn = s.played(&lan, &minh, blitz(), false, None).await.id;
    let _others = s.played(&minh, &hoa, blitz(), true, Some(FIRST)).await.id;
    let open = s
        .manager
        .create_game(new_game(Some(&lan), TimeControl::Untimed, false))
        .await
        .unwrap()
        .game
        .id;

    let filter = |result, speed| PlayerGameFilter { result, speed };
    let cases = [
        (filter(None, None), vec![&open, &drawn, &lost, &won]),
        (filter(Some(PlayerResult::Win), None), vec![&won]),
        (filter(Some(PlayerResult::Draw), None), vec![&drawn]),
        (filter(Some(PlayerResult::Loss), None), vec![&lost]),
        (filter(None, Some(Speed::Blitz)), vec![&drawn, &won]),
        (filter(None, Some(Speed::Rapid)), vec![&lost]),
        (filter(None, Some(Speed::Bullet)), vec![]),
        (
            filter(Some(PlayerResult::Win), Some(Speed::Blitz)),
            vec![&won],
        ),
        (filter(Some(PlayerResult::Win), Some(Speed::Rapid)), vec![]),
    ];
    for (f, expected) in cases {
        let expected: Vec<GameId> = expected.into_iter().cloned().collect();
        // Any case of the name finds the player.
        assert_eq!(s.games_of("LAN", f).await, expected, "{f:?}");
    }
    let lan_now = s.fresh(&lan).await;
    assert_eq!(
        (
            lan_now.record.wins,
            lan_now.record.draws,
            lan_now.record.losses
        ),
        (1, 1, 1)
    );
    assert_eq!(lan_now.rating(Speed::Blitz).games, 1, "one rated game");
    assert_eq!(lan_now.rating(Speed::Rapid).games, 0);

    // Paging: newest first, two at a time, the cursor bound to its filter.
    let first = s
        .manager
        .player_games("Lan", PlayerGameFilter::default(), 2, None)
        .await
        .unwrap();
    assert_eq!(
        first.games.iter().map(|g| &g.id).collect::<Vec<_>>(),
        [&open, &drawn]
    );
    let cursor = first.next_cursor.expect("a second page");
    let second = s
        .manager
        .player_games("Lan", PlayerGameFilter::default(), 2, Some(&cursor))
        .await
        .unwrap();
    assert_eq!(
        second.games.iter().map(|g| &g.id).collect::<Vec<_>>(),
        [&lost, &won]
    );
    assert!(second.next_cursor.is_none());
    assert!(matches!(
        s.manager
            .player_games("Lan", filter(Some(PlayerResult::Win), None), 2, Some(&cursor))
            .await,
        Err(GameError::InvalidArgument { ref field, .. }) if field == "page_token"
    ));
    assert!(matches!(
        s.manager
            .player_games("Stranger", PlayerGameFilter::default(), 0, None)
            .await,
        Err(GameError::PlayerNotFound(_))
    ));
}

#[tokio::test]
async fn the_leaderboard_ranks_settled_ratings_of_its_speed() {
    let s = service();
    s.veteran("Second", &[(Speed::Blitz, settled(1900.0))])
        .await;
    s.veteran(
        "Top",
        &[
            (Speed::Blitz, settled(2100.0)),
            (Speed::Rapid, settled(1200.0)),
        ],
    )
    .await;
    s.veteran(
        "Uncertain",
        &[(
            Speed::Blitz,
            Rating {
                deviation: 200.0,
                ..settled(2500.0)
            },
        )],
    )
    .await;
    s.veteran(
        "Newcomer",
        &[(
            Speed::Blitz,
            Rating {
                games: rating::PROVISIONAL_GAMES - 1,
                ..settled(2300.0)
            },
        )],
    )
    .await;
    s.veteran("Rapid", &[(Speed::Rapid, settled(2000.0))]).await;

    assert_eq!(
        s.leaders(Speed::Blitz).await,
        [(1, "Top".to_owned()), (2, "Second".to_owned())]
    );
    assert_eq!(
        s.leaders(Speed::Rapid).await,
        [(1, "Rapid".to_owned()), (2, "Top".to_owned())]
    );
    assert!(s.leaders(Speed::Bullet).await.is_empty());

    let LeaderboardPage {
        players,
        next_cursor,
    } = s.manager.leaderboard(Speed::Blitz, 1, None).await.unwrap();
    assert_eq!(players.len(), 1);
    assert_eq!(
        (players[0].rank, players[0].account.username.as_str()),
        (1, "Top")
    );
    let cursor = next_cursor.expect("a second page");
    let page = s
        .manager
        .leaderboard(Speed::Blitz, 1, Some(&cursor))
        .await
        .unwrap();
    assert_eq!(
        (
            page.players[0].rank,
            page.players[0].account.username.as_str()
        ),
        (2, "Second")
    );
    assert!(page.next_cursor.is_none());
    assert!(matches!(
        s.manager.leaderboard(Speed::Rapid, 1, Some(&cursor)).await,
        Err(GameError::InvalidArgument { ref field, .. }) if field == "page_token"
    ));
}

/// Two newcomers playing rated games: off the leaderboard while provisional, on it once not.
#[tokio::test]
async fn players_reach_the_leaderboard_when_their_ratings_settle() {
    // Two accounts only, so without the pair limit.
    let s = service_with(ManagerLimits {
        rated_games_per_pair: 0,
        ..ManagerLimits::default()
    });
    let (lan, _) = s.register("Lan").await;
    let (minh, _) = s.register("Minh").await;
    let mut ratings = (Rating::INITIAL, Rating::INITIAL);
    let mut on_board_after = None;
    for game in 1..=30u32 {
        // Alternate seats and winners so that both ratings stay near each other.
        let (first, second) = if game % 2 == 0 {
            (&lan, &minh)
        } else {
            (&minh, &lan)
        };
        let winner = if game % 3 == 0 { SECOND } else { FIRST };
        let over = s.played(first, second, rapid(), true, Some(winner)).await;
        let before = if game % 2 == 0 {
            ratings
        } else {
            (ratings.1, ratings.0)
        };
        let outcome = Outcome::Decisive { winner };
        let (a, b) = rating::rate(before.0, before.1, outcome);
        assert_eq!(
            over.result.unwrap().ratings,
            Some(ByPlayer::new(change(before.0, a), change(before.1, b)))
        );
        ratings = if game % 2 == 0 { (a, b) } else { (b, a) };

        let lan_now = s.fresh(&lan).await;
        let minh_now = s.fresh(&minh).await;
        assert_eq!(lan_now.ratings[&Speed::Rapid], ratings.0);
        assert_eq!(minh_now.ratings[&Speed::Rapid], ratings.1);
        assert_eq!(lan_now.rating(Speed::Rapid).games, game);
        let mut expected: Vec<(f64, String)> = [(&lan_now, ratings.0), (&minh_now, ratings.1)]
            .into_iter()
            .filter(|(_, r)| !r.is_provisional())
            .map(|(a, r)| (r.rating, a.username.as_str().to_owned()))
            .collect();
        expected.sort_by(|x, y| y.0.total_cmp(&x.0));
        let board: Vec<String> = s
            .leaders(Speed::Rapid)
            .await
            .into_iter()
            .map(|(_, name)| name)
            .collect();
        let expected: Vec<String> = expected.into_iter().map(|(_, name)| name).collect();
        assert_eq!(board, expected, "after game {game}");
        if game < rating::PROVISIONAL_GAMES {
            assert!(board.is_empty(), "provisional after {game} games");
        }
        if board.len() == 2 && on_board_after.is_none() {
            on_board_after = Some(game);
        }
        assert!(s.leaders(Speed::Blitz).await.is_empty());
    }
    assert!(
        on_board_after.is_some_and(|g| g >= rating::PROVISIONAL_GAMES),
        "{on_board_after:?}"
    );
}

// --- Concurrency ---------------------------------------------------------------------------

#[tokio::test]
async fn two_rated_games_of_one_account_ending_at_once_both_count() {
    let (store, manager) = FaultyStore::with_manager();
    let (lan, _) = manager.register("Lan").await.unwrap();
    let (minh, _) = manager.register("Minh").await.unwrap();
    let (hoa, _) = manager.register("Hoa").await.unwrap();
    let mut games = Vec::new();
    for opponent in [&minh, &hoa] {
        let created = manager
            .create_game(new_game(Some(&lan), blitz(), true))
            .await
            .unwrap();
        manager
            .join_game_as(&created.game.id, "", Some(opponent))
            .await
            .unwrap();
        both_move(&manager, &created.game.id, &lan, opponent).await;
        games.push(created.game.id);
    }
    *store.gate.lock().unwrap() = Some(lan.id.clone());
    // On one node the second ending waits for the first's commit; the race is between nodes.
    let other_node = GameManager::new(
        Arc::clone(&store) as Arc<dyn GameStore>,
        Hub::new(1024),
        ManagerLimits::default(),
    );

    // Lan wins against Minh and loses to Hoa, both games ending together on two nodes: each
    // reads Lan's account at version 1 before either commits.
    let (against_minh, against_hoa) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(
            manager.resign(&games[0], Credential::Account(minh.id.clone())),
            other_node.resign(&games[1], Credential::Account(lan.id.clone())),
        )
    })
    .await
    .expect("neither game waits forever");
    let against_minh = against_minh.unwrap().result.unwrap();
    let against_hoa = against_hoa.unwrap().result.unwrap();
    assert_eq!(against_minh.outcome, Some(FIRST_WINS));
    assert_eq!(against_hoa.outcome, Some(SECOND_WINS));
    assert_eq!(
        store.conflicts.load(Ordering::SeqCst),
        1,
        "the second commit found Lan's account changed and was decided again"
    );
    assert!(
        store.gated.load(Ordering::SeqCst) >= 3,
        "the retry read it again"
    );

    // Whichever committed first rated Lan from the start; the other from that rating.
    let first_against_minh = against_minh.ratings.unwrap().first.before == 1500;
    let (lan_after_minh, minh_after, lan_after_hoa, hoa_after);
    if first_against_minh {
        (lan_after_minh, minh_after) = rating::rate(Rating::INITIAL, Rating::INITIAL, FIRST_WINS);
        (lan_after_hoa, hoa_after) = rating::rate(lan_after_minh, Rating::INITIAL, SECOND_WINS);
    } else {
        (lan_after_hoa, hoa_after) = rating::rate(Rating::INITIAL, Rating::INITIAL, SECOND_WINS);
        (lan_after_minh, minh_after) = rating::rate(lan_after_hoa, Rating::INITIAL, FIRST_WINS);
    }
    let (lan_before_minh, lan_before_hoa, lan_final) = if first_against_minh {
        (Rating::INITIAL, lan_after_minh, lan_after_hoa)
    } else {
        (lan_after_hoa, Rating::INITIAL, lan_after_minh)
    };
    assert_eq!(
        against_minh.ratings,
        Some(ByPlayer::new(
            change(lan_before_minh, lan_after_minh),
            change(Rating::INITIAL, minh_after)
        ))
    );
    assert_eq!(
        against_hoa.ratings,
        Some(ByPlayer::new(
            change(lan_before_hoa, lan_after_hoa),
            change(Rating::INITIAL, hoa_after)
        ))
    );

    let lan_now = store.inner.account(&lan.id).await.unwrap();
    assert_eq!(lan_now.rating(Speed::Blitz).games, 2);
    assert_eq!(lan_now.ratings[&Speed::Blitz], lan_final);
    assert_eq!((lan_now.record.wins, lan_now.record.losses), (1, 1));
    assert_eq!(lan_now.version, 3, "two changes, one after the other");
    for (opponent, after) in [(&minh, minh_after), (&hoa, hoa_after)] {
        let now = store.inner.account(&opponent.id).await.unwrap();
        assert_eq!(now.ratings[&Speed::Blitz], after);
        assert_eq!(now.version, 2);
    }
    for id in &games {
        let game = manager.get_game(id).await.unwrap();
        assert_eq!(game.status, GameStatus::Finished);
    }
}

/// A rated blitz game between the accounts Lan (first) and Minh, started, on a store whose
/// faults a test turns on: (store, manager, Lan, Minh, the game).
async fn rated_game_on_a_faulty_store()
-> (Arc<FaultyStore>, Arc<GameManager>, Account, Account, GameId) {
    let (store, manager) = FaultyStore::with_manager();
    let (lan, _) = manager.register("Lan").await.unwrap();
    let (minh, _) = manager.register("Minh").await.unwrap();
    let created = manager
        .create_game(new_game(Some(&lan), blitz(), true))
        .await
        .unwrap();
    let id = created.game.id;
    manager.join_game_as(&id, "", Some(&minh)).await.unwrap();
    (store, manager, lan, minh, id)
}

/// The move that ends a game between accounts reads both accounts to settle the result: a
/// store that cannot answer then makes it UNAVAILABLE (retry), as any other write would, not
/// an internal error, and nothing is committed.
#[tokio::test]
async fn an_unavailable_store_at_the_end_of_a_game_between_accounts_is_a_retry() {
    let (store, manager, _, minh, id) = rated_game_on_a_faulty_store().await;
    store.accounts_down.store(true, Ordering::SeqCst);
    let refused = manager
        .resign(&id, Credential::Account(minh.id.clone()))
        .await
        .unwrap_err();
    assert!(matches!(refused, GameError::Unavailable(_)), "{refused:?}");
    assert_eq!(
        manager.get_game(&id).await.unwrap().status,
        GameStatus::Active,
        "nothing was committed"
    );
    store.accounts_down.store(false, Ordering::SeqCst);
    let over = manager
        .resign(&id, Credential::Account(minh.id.clone()))
        .await
        .unwrap();
    assert_eq!(over.result.unwrap().outcome, Some(FIRST_WINS));
}

/// An account that cannot be read for damage at the end of a game is the store's damage
/// (DATA_LOSS), as wherever else damage is read, not an internal error (an outside probe's
/// moves got INTERNAL on a damaged file).
#[tokio::test]
async fn a_damaged_account_at_the_end_of_a_game_is_damage_not_an_internal_error() {
    let (store, manager, lan, minh, id) = rated_game_on_a_faulty_store().await;
    store.accounts_damaged.store(true, Ordering::SeqCst);
    let refused = manager
        .resign(&id, Credential::Account(minh.id.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, GameError::StoreDamaged(detail) if detail.contains(minh.id.as_str()) || detail.contains(lan.id.as_str())),
        "{refused:?}"
    );
}

/// A simul player's games all ending at once on one node: an outside probe had 40 opponents
/// resign together, and with SQLite's group commit (one account write wins a batch) 10 to 14
/// of the resignations came back UNAVAILABLE ("changing too fast") after their retries.
#[tokio::test]
async fn forty_rated_games_of_one_account_ending_at_once_all_count() {
    let (store, manager) = FaultyStore::with_manager();
    let (lan, _) = manager.register("Lan").await.unwrap();
    let mut games = Vec::new();
    for index in 0..40 {
        let (opponent, _) = manager.register(&format!("Rival{index}")).await.unwrap();
        let created = manager
            .create_game(new_game(Some(&lan), blitz(), true))
            .await
            .unwrap();
        manager
            .join_game_as(&created.game.id, "", Some(&opponent))
            .await
            .unwrap();
        both_move(&manager, &created.game.id, &lan, &opponent).await;
        games.push((created.game.id, opponent));
    }
    store.batched.store(true, Ordering::SeqCst);
    let resigned =
        tokio::time::timeout(
            Duration::from_secs(30),
            futures::future::join_all(games.iter().map(|(id, opponent)| {
                manager.resign(id, Credential::Account(opponent.id.clone()))
            })),
        )
        .await
        .expect("no resignation waits forever");
    for outcome in &resigned {
        assert!(outcome.is_ok(), "{outcome:?}");
    }
    let lan = store.account(&lan.id).await.unwrap();
    assert_eq!(lan.record.wins, 40);
    assert_eq!(lan.rating(Speed::Blitz).games, 40);
}

/// A waiting game is not started once its account revoked a key: an outside probe created a
/// rated game with a stolen key, the owner revoked it, and an accomplice joined and won the
/// game in the owner's name. The join is refused, and the game is aborted by its seat.
#[tokio::test]
async fn a_waiting_game_is_withdrawn_when_its_account_revoked_a_key_since() {
    let s = service();
    let (lan, stolen) = s.register("Lan").await;
    let (minh, _) = s.register("Minh").await;
    let (hoa, _) = s.register("Hoa").await;
    let waiting = s
        .manager
        .create_game(new_game(Some(&lan), blitz(), true))
        .await
        .unwrap();
    let other = s
        .manager
        .create_game(new_game(Some(&lan), blitz(), true))
        .await
        .unwrap();
    s.manager
        .revoke_api_key(&lan.id, stolen.id())
        .await
        .unwrap();
    let refused = s
        .manager
        .join_game_as(&waiting.game.id, "", Some(&minh))
        .await
        .unwrap_err();
    assert!(matches!(refused, GameError::GameWithdrawn), "{refused:?}");
    assert!(refused.to_string().contains("revoked"), "{refused}");
    let game = s.manager.get_game(&waiting.game.id).await.unwrap();
    assert_eq!(game.status, GameStatus::Aborted);
    let result = game.result.unwrap();
    assert_eq!(
        (result.termination, result.ended_by),
        (Termination::Aborted, Some(waiting.seat))
    );
    assert!(game.seats.second.is_none(), "nobody was seated");
    // Anonymous joiners too; a second try meets a game that is over.
    assert!(matches!(
        s.manager.join_game(&other.game.id, "Guest").await,
        Err(GameError::GameWithdrawn)
    ));
    assert!(matches!(
        s.manager
            .join_game_as(&waiting.game.id, "", Some(&hoa))
            .await,
        Err(GameError::GameOver)
    ));
    // A game created after the revocation starts as usual.
    let fresh = s
        .manager
        .create_game(new_game(Some(&lan), blitz(), true))
        .await
        .unwrap();
    let joined = s
        .manager
        .join_game_as(&fresh.game.id, "", Some(&minh))
        .await
        .unwrap();
    assert_eq!(joined.game.status, GameStatus::Active);
}

/// Revoking a key ends what its thief can start in the account's name: an outside probe
/// revoked an account's only key and went on rematching its rated games with the seat tokens
/// the key had got, game after game (its rating fell from 1662 to 1310 with no valid key).
#[tokio::test]
async fn a_game_is_not_rematched_after_a_players_key_was_revoked() {
    let s = service();
    let (lan, _) = s.register("Lan").await;
    let (minh, minh_key) = s.register("Minh").await;
    let (id, tokens) = s.game(&lan, &minh, blitz(), true).await;
    both_move(&s.manager, &id, &lan, &minh).await;
    s.manager.resign(&id, &tokens[FIRST]).await.unwrap();
    s.manager
        .revoke_api_key(&minh.id, minh_key.id())
        .await
        .unwrap();
    for who in [
        Credential::Seat(tokens[SECOND].clone()),
        Credential::Account(lan.id.clone()),
        Credential::Seat(tokens[FIRST].clone()),
    ] {
        let refused = s.manager.offer_rematch(&id, who).await.unwrap_err();
        assert!(
            matches!(&refused, GameError::RematchUnavailable(why) if why.contains("revoked")),
            "{refused:?}"
        );
    }
    let game = s.manager.get_game(&id).await.unwrap();
    assert_eq!((game.rematch.next, game.rematch.offered_by), (None, None));
    // A game begun after the revocation is rematched as usual.
    let (again, tokens) = s.game(&lan, &minh, blitz(), true).await;
    both_move(&s.manager, &again, &lan, &minh).await;
    s.manager.resign(&again, &tokens[FIRST]).await.unwrap();
    s.manager
        .offer_rematch(&again, &tokens[FIRST])
        .await
        .unwrap();
    let offered = s
        .manager
        .offer_rematch(&again, &tokens[SECOND])
        .await
        .unwrap();
    assert!(offered.rematch.is_some());
}

/// A seek that a revocation could not withdraw in time (its pairing came first, or the key was
/// revoked on another node) hands out no seat: the game is aborted before it starts. A
/// revocation on this node is announced, so that waiting seeks check their key at once.
#[tokio::test]
async fn a_seat_paired_on_a_revoked_key_is_not_handed_out() {
    let s = service();
    let pool = pool(&s);
    let (lan, lan_key) = s.register("Lan").await;
    let (minh, minh_key) = s.register("Minh").await;
    let mut revocations = s.manager.key_revocations();
    let mut lan_seek = waiting(
        pool.seek(seek_request(Some(&lan), true, None))
            .await
            .unwrap(),
    );
    let minh_seat = paired(
        pool.seek(seek_request(Some(&minh), true, None))
            .await
            .unwrap(),
    );
    let lan_seat = answer(&mut lan_seek).await;
    assert!(!revocations.has_changed().unwrap());
    s.manager
        .revoke_api_key(&lan.id, lan_key.id())
        .await
        .unwrap();
    assert!(revocations.has_changed().unwrap());
    revocations.mark_unchanged();

    let kept = s
        .manager
        .hand_out_seat(minh_seat, Some(minh_key.expose()))
        .await
        .unwrap();
    let refused = s
        .manager
        .hand_out_seat(lan_seat, Some(lan_key.expose()))
        .await
        .unwrap_err();
    assert_eq!(refused, GameError::BadApiKey);
    let game = s.manager.get_game(&kept.game.id).await.unwrap();
    assert_eq!(game.status, GameStatus::Aborted, "{game:?}");
    // A key that is not found revokes nothing and announces nothing.
    assert!(s.manager.revoke_api_key(&lan.id, "nope").await.is_err());
    assert!(!revocations.has_changed().unwrap());
}

/// An outside probe accepted every seek in the lobby from one address and never moved: most
/// honest seekers were paired with it, waited out the first-move limit and got an aborted
/// game. A player that walked away from three such games within the hour may not seek or
/// accept a seek for a while; its victims, a loopback client and a game vs the computer are
/// not counted against anyone.
#[tokio::test]
async fn a_player_who_walks_away_from_seek_games_is_paused() {
    use crate::walkaway::{PAUSE, STRIKES};
    let s = service();
    let pool = pool(&s);
    let sniper: IpAddr = "192.0.2.2".parse().unwrap();
    let (sniper_account, _) = s.register("Sniper").await;
    let honest: IpAddr = "198.51.100.7".parse().unwrap();
    let honest_seek = || SeekRequest {
        client: Some(honest),
        ..seek_request(None, false, None)
    };
    for round in 0..STRIKES {
        let mut waiting_seek = waiting(pool.seek(honest_seek()).await.unwrap());
        let seated = pool
            .accept(
                &waiting_seek.info().id.clone(),
                "",
                Some(sniper),
                Some(&sniper_account),
            )
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let victim = answer(&mut waiting_seek).await;
        // The sniper aborts (as the first-move limit would for it): the game ends by its seat.
        s.manager
            .abort(&seated.game.id, seated.token.clone())
            .await
            .unwrap();
        // The victim is never paused for it.
        assert_eq!(victim.game.id, seated.game.id);
    }
    let honest_again = waiting(pool.seek(honest_seek()).await.unwrap());
    let paused = pool
        .accept(
            &honest_again.info().id.clone(),
            "",
            Some(sniper),
            Some(&sniper_account),
        )
        .await
        .unwrap_err();
    match &paused {
        GameError::SeekPaused {
            walkaways,
            retry_after,
            ..
        } => {
            assert_eq!(*walkaways, STRIKES);
            assert!(*retry_after <= PAUSE && *retry_after > PAUSE - Duration::from_secs(60));
        }
        other => panic!("expected a pause, got {other:?}"),
    }
    assert!(
        paused.to_string().contains("walked away from 3 games"),
        "{paused}"
    );
    // Seeking is paused too, from that address (anonymously) and for that account (from
    // another address); the honest seek is still open for others.
    let anonymous = pool
        .seek(SeekRequest {
            client: Some(sniper),
            ..seek_request(None, false, None)
        })
        .await;
    assert!(
        matches!(anonymous, Err(GameError::SeekPaused { .. })),
        "{anonymous:?}"
    );
    let elsewhere = pool
        .seek(SeekRequest {
            client: Some("203.0.113.9".parse().unwrap()),
            ..seek_request(Some(&sniper_account), false, None)
        })
        .await;
    assert!(
        matches!(elsewhere, Err(GameError::SeekPaused { .. })),
        "{elsewhere:?}"
    );
    assert_eq!(pool.list().len(), 1);
    // The honest player, whose games the sniper walked away from, seeks and is paired.
    let other: IpAddr = "198.51.100.99".parse().unwrap();
    let paired_honestly = pool
        .accept(&honest_again.info().id.clone(), "Guest", Some(other), None)
        .await
        .unwrap();
    assert!(!paired_honestly.game.status.is_over());
    drop(honest_again);
    let again = waiting(pool.seek(honest_seek()).await.unwrap());
    drop(again);
    // A loopback client is exempt, as from the other per-client limits.
    let local: IpAddr = "127.0.0.1".parse().unwrap();
    for _ in 0..=STRIKES {
        let mut waiting_seek = waiting(pool.seek(honest_seek()).await.unwrap());
        let seated = pool
            .accept(&waiting_seek.info().id.clone(), "Guest", Some(local), None)
            .await
            .unwrap();
        answer(&mut waiting_seek).await;
        s.manager
            .abort(&seated.game.id, seated.token.clone())
            .await
            .unwrap();
    }
}

/// A seek stream that ends the moment its seek is paired (its key revoked then, or its client
/// gone) leaves a seat nobody will hold: an outside probe's accepter sat in an active game
/// against no one, 10 times in 20. The game is aborted instead.
#[tokio::test]
async fn a_pairing_whose_seeker_left_at_that_moment_is_aborted() {
    let s = service();
    let pool = pool(&s);
    let ticket = waiting(pool.seek(seek_request(None, false, None)).await.unwrap());
    let accepted = pool
        .accept(&ticket.info().id.clone(), "Minh", None, None)
        .await
        .unwrap();
    // The seat is in the ticket, not yet taken out, when the stream ends.
    drop(ticket);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let game = s.manager.get_game(&accepted.game.id).await.unwrap();
        if game.status == GameStatus::Aborted {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{game:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Walkaways count once their games are over, so an outside probe accepted 8 seeks in a burst
/// before the first was aborted. A player may not take a fourth game with others while it has
/// not moved in three.
#[tokio::test]
async fn a_player_with_three_games_not_yet_moved_in_takes_no_fourth() {
    let s = service();
    let pool = pool(&s);
    let sniper: IpAddr = "192.0.2.3".parse().unwrap();
    // Each stranger on an address of its own, and each moves at once where it moves first:
    // then every game waits for the sniper.
    let mut strangers = (10..).map(|n| IpAddr::from([198, 51, 100, n]));
    let mut held_up = 0;
    while held_up < crate::walkaway::STRIKES {
        let ticket = stranger_seek(&pool, strangers.next()).await;
        pool.accept(&ticket.info().id.clone(), "Sniper", Some(sniper), None)
            .await
            .unwrap();
        stranger_moves_first(&s, ticket).await;
        held_up += 1;
    }
    let ticket = stranger_seek(&pool, strangers.next()).await;
    let refused = pool
        .accept(&ticket.info().id.clone(), "Sniper", Some(sniper), None)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, GameError::FirstMovesPending { games: 3, .. }),
        "{refused:?}"
    );
    assert!(!refused.to_string().contains("retry later"), "{refused}");
    // The strangers are not held up by the games that wait for the sniper: they seek on.
    assert!(
        pool.accept(&ticket.info().id.clone(), "Guest", strangers.next(), None)
            .await
            .is_ok()
    );
}

/// Probe E: a correspondence player with three fresh games, and players behind one address
/// (a household, a NAT), were blocked by the limit above. Games without a live clock do not
/// count, and a caller with an account is judged by its account, not by its address.
#[tokio::test]
async fn correspondence_games_and_housemates_are_not_held_up() {
    let s = service();
    let pool = pool(&s);
    let home: IpAddr = "192.0.2.4".parse().unwrap();
    let mut strangers = (30..).map(|n| IpAddr::from([198, 51, 100, n]));
    let correspondence = TimeControl::Correspondence {
        per_move: Duration::from_secs(3 * 24 * 3600),
    };
    // Four correspondence games from one address, none moved in.
    for _ in 0..=crate::walkaway::STRIKES {
        let ticket = waiting(
            pool.seek(SeekRequest {
                client: strangers.next(),
                time_control: correspondence,
                ..seek_request(None, false, None)
            })
            .await
            .unwrap(),
        );
        pool.accept(&ticket.info().id.clone(), "Guest", Some(home), None)
            .await
            .unwrap();
    }
    // Four accounts behind another address, each with a blitz game waiting for its first move:
    // three would hold the address up, but each is judged by its own account.
    let nat: IpAddr = "192.0.2.5".parse().unwrap();
    for name in ["Hoa", "Lan", "Minh", "Tuan"] {
        let (account, _) = s.register(name).await;
        let ticket = stranger_seek(&pool, strangers.next()).await;
        let mine = pool
            .accept(&ticket.info().id.clone(), "", Some(nat), Some(&account))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // The stranger moves first where it may, so the game waits for the account.
        let theirs = stranger_moves_first(&s, ticket).await;
        assert_eq!(mine.game.id, theirs.game.id);
    }
}

/// The seat a waiting ticket was given.
async fn ticket_seat(mut ticket: SeekTicket) -> Seated {
    answer(&mut ticket).await
}

/// An anonymous blitz seek of a stranger at `client`, waiting.
async fn stranger_seek(pool: &Arc<SeekPool>, client: Option<IpAddr>) -> SeekTicket {
    waiting(
        pool.seek(SeekRequest {
            client,
            ..seek_request(None, false, None)
        })
        .await
        .unwrap(),
    )
}

/// The stranger's seat once its seek is paired, after its first move if it moves first: the
/// game then waits for the other player.
async fn stranger_moves_first(s: &Service, ticket: SeekTicket) -> Seated {
    let stranger = ticket_seat(ticket).await;
    if stranger.seat == Player::First {
        let mv = stranger.game.position.legal_moves()[0];
        s.manager
            .play_move(&stranger.game.id, stranger.token.clone(), mv, None)
            .await
            .unwrap();
    }
    stranger
}
