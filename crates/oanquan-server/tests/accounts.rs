//! Accounts through a real server: registration and usernames, API keys (as the account's
//! credential on GameService too), rated games and their rating changes (also across a
//! restart and a kill), rated seeks and rating ranges, leaderboards and game history, and the
//! hostile cases around them.

mod common;

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use common::*;
use oanquan_proto::v1 as pb;
use oanquan_proto::v1::account_service_client::AccountServiceClient;
use oanquan_rules::{Outcome, Player};
use oanquan_server::domain::rating::{self, Rating};
use oanquan_server::{Config, Storage};
use pb::game_event::Kind;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

type Accounts = AccountServiceClient<Channel>;

async fn account_client(server: &TestServer) -> Accounts {
    AccountServiceClient::new(server.channel().await)
}

/// Registers `name`: (profile, API key, key id).
async fn register(accounts: &mut Accounts, name: &str) -> (pb::PlayerProfile, String, String) {
    let response = accounts
        .register(pb::RegisterRequest {
            username: name.to_owned(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|status| panic!("register {name:?}: {status:?}"))
        .into_inner();
    (
        response.player.unwrap(),
        response.api_key,
        response.key.unwrap().id,
    )
}

async fn register_error(accounts: &mut Accounts, name: &str) -> Status {
    accounts
        .register(pb::RegisterRequest {
            username: name.to_owned(),
            ..Default::default()
        })
        .await
        .expect_err(name)
}

/// Registers `name` with an API key of the client's own making.
async fn register_with_key(
    accounts: &mut Accounts,
    name: &str,
    key: &str,
) -> Result<pb::RegisterResponse, Status> {
    accounts
        .register(pb::RegisterRequest {
            username: name.to_owned(),
            api_key: key.to_owned(),
        })
        .await
        .map(tonic::Response::into_inner)
}

/// A key as a client makes it for `RegisterRequest.api_key`.
fn own_key() -> String {
    oanquan_server::domain::account::ApiKey::generate(std::time::SystemTime::now())
        .0
        .expose()
        .to_owned()
}

/// A new API key of the account `key` belongs to.
async fn create_key(accounts: &mut Accounts, key: &str) -> pb::CreateApiKeyResponse {
    accounts
        .create_api_key(authed(pb::CreateApiKeyRequest {}, key))
        .await
        .unwrap()
        .into_inner()
}

async fn get_me(accounts: &mut Accounts, key: &str) -> Result<pb::PlayerProfile, Status> {
    accounts
        .get_me(authed(pb::GetMeRequest {}, key))
        .await
        .map(|r| r.into_inner().player.unwrap())
}

async fn player(accounts: &mut Accounts, name: &str) -> pb::PlayerProfile {
    accounts
        .get_player(pb::GetPlayerRequest {
            username: name.to_owned(),
        })
        .await
        .unwrap_or_else(|status| panic!("player {name:?}: {status:?}"))
        .into_inner()
        .player
        .unwrap()
}

fn rating_at(profile: &pb::PlayerProfile, speed: pb::Speed) -> Option<pb::Rating> {
    profile
        .ratings
        .iter()
        .find(|r| r.speed == i32::from(speed))
        .cloned()
}

fn seconds(seconds: i64) -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds, nanos: 0 })
}

fn real_time(initial: i64, increment: i64) -> Option<pb::TimeControl> {
    Some(pb::TimeControl {
        kind: Some(pb::time_control::Kind::RealTime(
            pb::time_control::RealTime {
                initial: seconds(initial),
                increment: seconds(increment),
            },
        )),
    })
}

/// 3+2: estimated 3 min + 40 × 2 s = 4 min 20 s, blitz.
fn blitz() -> Option<pb::TimeControl> {
    real_time(180, 2)
}

/// 1+0: bullet.
fn bullet() -> Option<pb::TimeControl> {
    real_time(60, 0)
}

fn create_request(rated: bool, time_control: Option<pb::TimeControl>) -> pb::CreateGameRequest {
    pb::CreateGameRequest {
        seat: pb::Player::First.into(),
        display_name: "Anonymous Lan".into(),
        time_control,
        rated,
        ..Default::default()
    }
}

/// Creates an anonymous game; the seat's token.
async fn anonymous_seat(games: &mut Games) -> String {
    games
        .create_game(create_request(false, None))
        .await
        .unwrap()
        .into_inner()
        .player_token
}

fn join_request(id: &str) -> pb::JoinGameRequest {
    pb::JoinGameRequest {
        game_id: id.to_owned(),
        display_name: "Anonymous Minh".into(),
    }
}

/// A game between two accounts, the first key's in the first seat: (game, first token,
/// second token).
async fn account_game(
    games: &mut Games,
    first_key: &str,
    second_key: &str,
    rated: bool,
    time_control: Option<pb::TimeControl>,
) -> (pb::Game, String, String) {
    let created = games
        .create_game(authed(create_request(rated, time_control), first_key))
        .await
        .unwrap()
        .into_inner();
    let id = created.game.unwrap().id;
    let joined = games
        .join_game(authed(join_request(&id), second_key))
        .await
        .unwrap()
        .into_inner();
    (
        joined.game.unwrap(),
        created.player_token,
        joined.player_token,
    )
}

async fn resign(games: &mut Games, id: &str, credential: &str) -> Result<pb::Game, Status> {
    games
        .resign(authed(
            pb::ResignRequest {
                game_id: id.to_owned(),
            },
            credential,
        ))
        .await
        .map(|r| r.into_inner().game.unwrap())
}

/// A rated game that `winner_key`'s account wins by the other's resignation.
async fn rated_win(
    games: &mut Games,
    winner_key: &str,
    loser_key: &str,
    time_control: Option<pb::TimeControl>,
) -> pb::Game {
    let (game, first, second) =
        account_game(games, winner_key, loser_key, true, time_control).await;
    both_move(games, &game.id, (&first, &second)).await;
    resign(games, &game.id, loser_key).await.unwrap()
}

/// Each seat makes its first move: a rated game that ends before both players have moved
/// changes no rating.
async fn both_move(games: &mut Games, id: &str, tokens: (&str, &str)) {
    play_one(games, id, tokens).await;
    play_one(games, id, tokens).await;
}

fn seat_account(seat: Option<&pb::Seat>) -> pb::SeatAccount {
    seat.and_then(|s| s.account.clone())
        .unwrap_or_else(|| panic!("no account in {seat:?}"))
}

/// The rating a newcomer reaches by beating (or losing to) another newcomer, as the server
/// must compute it.
fn newcomers_after_one_game() -> (i32, i32) {
    let (winner, loser) = rating::rate(
        Rating::INITIAL,
        Rating::INITIAL,
        Outcome::Decisive {
            winner: Player::First,
        },
    );
    (winner.rounded(), loser.rounded())
}

#[tokio::test]
async fn registration_checks_usernames_and_refuses_taken_ones() {
    let server = start(config()).await;
    let mut accounts = account_client(&server).await;
    let (profile, key, key_id) = register(&mut accounts, "Lan").await;
    assert_eq!(profile.username, "Lan");
    assert!(profile.ratings.is_empty());
    assert_eq!((profile.wins, profile.draws, profile.losses), (0, 0, 0));
    assert!(profile.create_time.is_some());
    assert!(key.starts_with("oqk_"), "{key}");
    assert!(key.contains(&key_id), "the key id is the key's public part");

    // The same name in any case, with look-alikes, or spelt with decomposed accents.
    for taken in ["lan", "LAN", "1an", "lAn"] {
        let status = register_error(&mut accounts, taken).await;
        assert_reason(&status, Code::AlreadyExists, "ERROR_REASON_USERNAME_TAKEN");
        assert!(
            status.message().contains("taken"),
            "{taken}: {}",
            status.message()
        );
    }
    register(&mut accounts, "Phương").await;
    let decomposed = "Phu\u{31b}o\u{31b}ng";
    assert_ne!(decomposed, "Phương");
    assert_reason(
        &register_error(&mut accounts, decomposed).await,
        Code::AlreadyExists,
        "ERROR_REASON_USERNAME_TAKEN",
    );
    assert_reason(
        &register_error(&mut accounts, "PHƯƠNG").await,
        Code::AlreadyExists,
        "ERROR_REASON_USERNAME_TAKEN",
    );

    // Refused outright, each with the field named.
    let huge = "a".repeat(1 << 20);
    let refused = [
        "",
        "a",
        "abcdefghijklmnopqrstu",
        " Hoa",
        "Hoa ",
        "Ho a",
        "_hoa",
        "hoa-",
        "h__oa",
        "Ｈoa",
        "Ho\u{200b}a",
        "Ho\u{202e}a",
        "Ho\u{0}a",
        "Hoa😀",
        "pаypal",
        "admin",
        "Ad-min",
        "r00t",
        huge.as_str(),
    ];
    for name in refused {
        let status = register_error(&mut accounts, name).await;
        assert_field(&status, "username");
        assert!(
            status.message().chars().count() <= 513,
            "{} chars",
            status.message().chars().count()
        );
    }
    // A Vietnamese name with every kind of diacritic, and one in another script.
    for name in ["Nguyễn_Đức-2", "Сергей", "Αθηνά"] {
        let (profile, _, _) = register(&mut accounts, name).await;
        assert_eq!(profile.username, name);
    }
    // Nothing above left the server unable to answer.
    assert_eq!(get_me(&mut accounts, &key).await.unwrap().username, "Lan");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn api_keys_are_created_listed_and_revoked_from_the_next_call() {
    let server = start(config()).await;
    let mut accounts = account_client(&server).await;
    let (_, first_key, first_id) = register(&mut accounts, "Lan").await;
    let (_, other_key, other_id) = register(&mut accounts, "Minh").await;
    assert_eq!(
        get_me(&mut accounts, &first_key).await.unwrap().username,
        "Lan"
    );

    // Without a key, with a seat token, with a key-shaped forgery.
    let status = accounts
        .get_me(Request::new(pb::GetMeRequest {}))
        .await
        .unwrap_err();
    assert_reason(&status, Code::Unauthenticated, "ERROR_REASON_MISSING_TOKEN");
    assert!(status.message().contains("API key"), "{}", status.message());
    let mut games = server.games().await;
    let seat_token = anonymous_seat(&mut games).await;
    let forged = format!("oqk_{first_id}_{}", "A".repeat(32));
    for bad in [seat_token.as_str(), forged.as_str(), "oqk_", "Bearer"] {
        let status = get_me(&mut accounts, bad).await.unwrap_err();
        assert_reason(&status, Code::Unauthenticated, "ERROR_REASON_BAD_API_KEY");
    }

    let created = create_key(&mut accounts, &first_key).await;
    let second_key = created.api_key;
    let second_id = created.key.unwrap().id;
    assert_ne!(second_key, first_key);
    assert_eq!(
        get_me(&mut accounts, &second_key).await.unwrap().username,
        "Lan"
    );

    let listed = accounts
        .list_api_keys(authed(pb::ListApiKeysRequest {}, &second_key))
        .await
        .unwrap()
        .into_inner()
        .keys;
    let ids: Vec<&str> = listed.iter().map(|k| k.id.as_str()).collect();
    assert_eq!(ids, [first_id.as_str(), second_id.as_str()], "oldest first");
    assert!(listed.iter().all(|k| k.revoke_time.is_none()));
    let listing = format!("{listed:?}");
    for key in [&first_key, &second_key] {
        // `oqk_` + 16 characters of id + `_`, then the secret.
        let secret = &key[21..];
        assert_eq!(secret.len(), 32);
        assert!(!listing.contains(secret), "a listing shows no secret");
    }

    // Another account's key id is not ours to revoke; unknown and hostile ids are not found.
    let long_id = "k".repeat(100_000);
    for id in [
        other_id.as_str(),
        "nope",
        "",
        "ключ🔑\u{202e}",
        long_id.as_str(),
    ] {
        let status = accounts
            .revoke_api_key(authed(
                pb::RevokeApiKeyRequest {
                    key_id: id.to_owned(),
                },
                &first_key,
            ))
            .await
            .unwrap_err();
        assert_reason(&status, Code::NotFound, "ERROR_REASON_API_KEY_NOT_FOUND");
        assert!(status.message().chars().count() <= 513);
    }
    assert_eq!(
        get_me(&mut accounts, &other_key).await.unwrap().username,
        "Minh"
    );

    // Revoking the first key with the second: the first fails from the next call on.
    let revoked = accounts
        .revoke_api_key(authed(
            pb::RevokeApiKeyRequest {
                key_id: first_id.clone(),
            },
            &second_key,
        ))
        .await
        .unwrap()
        .into_inner()
        .key
        .unwrap();
    assert_eq!(revoked.id, first_id);
    assert!(revoked.revoke_time.is_some());
    let status = get_me(&mut accounts, &first_key).await.unwrap_err();
    assert_reason(&status, Code::Unauthenticated, "ERROR_REASON_BAD_API_KEY");
    // Also on GameService: a revoked key plays as nobody rather than anonymously.
    let status = games
        .create_game(authed(create_request(false, None), &first_key))
        .await
        .unwrap_err();
    assert_reason(&status, Code::Unauthenticated, "ERROR_REASON_BAD_API_KEY");

    // A key can revoke itself; then nothing is left to authenticate with.
    accounts
        .revoke_api_key(authed(
            pb::RevokeApiKeyRequest {
                key_id: second_id.clone(),
            },
            &second_key,
        ))
        .await
        .unwrap();
    let status = accounts
        .list_api_keys(authed(pb::ListApiKeysRequest {}, &second_key))
        .await
        .unwrap_err();
    assert_reason(&status, Code::Unauthenticated, "ERROR_REASON_BAD_API_KEY");

    // Working keys are bounded per account: Minh has 1, may make 19 more; revoked ones do not
    // count, so revoking one makes room.
    let mut made = Vec::new();
    for _ in 0..19 {
        made.push(create_key(&mut accounts, &other_key).await.key.unwrap().id);
    }
    let status = accounts
        .create_api_key(authed(pb::CreateApiKeyRequest {}, &other_key))
        .await
        .unwrap_err();
    assert_reason(
        &status,
        Code::ResourceExhausted,
        "ERROR_REASON_LIMIT_EXCEEDED",
    );
    let listed = accounts
        .list_api_keys(authed(pb::ListApiKeysRequest {}, &other_key))
        .await
        .unwrap()
        .into_inner()
        .keys;
    assert_eq!(listed.len(), 20);
    assert!(status.message().contains("revoke one"), "{status:?}");
    accounts
        .revoke_api_key(authed(
            pb::RevokeApiKeyRequest {
                key_id: made[0].clone(),
            },
            &other_key,
        ))
        .await
        .unwrap();
    create_key(&mut accounts, &other_key).await;
    server.stop().await.unwrap();
}

#[tokio::test]
async fn an_api_key_plays_as_its_account_and_acts_for_its_seat_only() {
    let server = start(config()).await;
    let mut accounts = account_client(&server).await;
    let mut games = server.games().await;
    let (_, lan, _) = register(&mut accounts, "Lan").await;
    let (_, minh, _) = register(&mut accounts, "Minh").await;
    let (_, hoa, _) = register(&mut accounts, "Hoa").await;

    let (game, lan_token, _) = account_game(&mut games, &lan, &minh, true, blitz()).await;
    assert!(game.rated);
    assert_eq!(game.status, i32::from(pb::GameStatus::Active));
    for (seat, name) in [
        (game.first_seat.as_ref(), "Lan"),
        (game.second_seat.as_ref(), "Minh"),
    ] {
        let account = seat_account(seat);
        assert_eq!(account.username, name);
        assert_eq!(account.rating, 1500);
        assert!(account.provisional);
        assert_eq!(
            seat.unwrap().display_name,
            name,
            "the username, not the display name sent"
        );
    }

    // The key plays the seat without its token; the token still works too.
    let moved = play(&mut games, &game.id, &lan, 1, pb::Direction::Right, Some(0))
        .await
        .unwrap();
    assert_eq!(moved.game.unwrap().move_count, 1);
    // Another account's key (not in the game) is no credential for a seat of it.
    let status = play(&mut games, &game.id, &hoa, 7, pb::Direction::Right, None)
        .await
        .unwrap_err();
    assert_reason(&status, Code::PermissionDenied, "ERROR_REASON_WRONG_TOKEN");
    // Lan's key is Lan's seat, not the seat to move.
    let status = play(&mut games, &game.id, &lan, 7, pb::Direction::Right, None)
        .await
        .unwrap_err();
    assert_reason(
        &status,
        Code::FailedPrecondition,
        "ERROR_REASON_NOT_YOUR_TURN",
    );
    let status = resign(&mut games, &game.id, &hoa).await.unwrap_err();
    assert_reason(&status, Code::PermissionDenied, "ERROR_REASON_WRONG_TOKEN");
    let status = games
        .offer_draw(authed(
            pb::OfferDrawRequest {
                game_id: game.id.clone(),
            },
            &hoa,
        ))
        .await
        .unwrap_err();
    assert_reason(&status, Code::PermissionDenied, "ERROR_REASON_WRONG_TOKEN");
    // Watching with a key: as the seat for the key's account, refused for another account's.
    let mut watch = games
        .watch_game(authed(
            pb::WatchGameRequest {
                game_id: game.id.clone(),
                ..Default::default()
            },
            &minh,
        ))
        .await
        .unwrap()
        .into_inner();
    let snapshot = next_game_event(&mut watch).await.unwrap();
    assert!(matches!(snapshot.kind, Some(Kind::Snapshot(_))));
    let status = match games
        .watch_game(authed(
            pb::WatchGameRequest {
                game_id: game.id.clone(),
                ..Default::default()
            },
            &hoa,
        ))
        .await
    {
        Ok(response) => next(&mut response.into_inner()).await.unwrap_err(),
        Err(status) => status,
    };
    assert_reason(&status, Code::PermissionDenied, "ERROR_REASON_WRONG_TOKEN");

    // A seat token on CreateGame means nothing (anonymous, as before accounts).
    let created = games
        .create_game(authed(create_request(false, None), &lan_token))
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap();
    let seat = created.first_seat.unwrap();
    assert!(seat.account.is_none());
    assert_eq!(seat.display_name, "Anonymous Lan");
    assert!(!created.rated);
    // Anything else on the calls that seat their caller is most likely a mangled key: refused,
    // never played as anonymous. The key in capitals, without its prefix, under another
    // scheme, a word, an empty value.
    let lan_key = hoa.clone(); // any account's key will do
    let without_prefix = lan_key.strip_prefix("oqk_").unwrap().to_owned();
    for (value, reason) in [
        (
            format!("Bearer {}", lan_key.to_uppercase()),
            "ERROR_REASON_BAD_API_KEY",
        ),
        (
            format!("Bearer {without_prefix}"),
            "ERROR_REASON_BAD_API_KEY",
        ),
        ("Bearer hello".to_owned(), "ERROR_REASON_BAD_API_KEY"),
        (format!("Basic {lan_key}"), "ERROR_REASON_MISSING_TOKEN"),
        (String::new(), "ERROR_REASON_MISSING_TOKEN"),
    ] {
        let mut request = Request::new(create_request(false, None));
        request
            .metadata_mut()
            .insert("authorization", value.parse().unwrap());
        let status = games.create_game(request).await.unwrap_err();
        assert_reason(&status, Code::Unauthenticated, reason);
        if reason == "ERROR_REASON_BAD_API_KEY" {
            assert!(status.message().contains("not an API key"), "{status:?}");
        }
        let mut request = Request::new(join_request(&created.id));
        request
            .metadata_mut()
            .insert("authorization", value.parse().unwrap());
        let status = games.join_game(request).await.unwrap_err();
        assert_reason(&status, Code::Unauthenticated, reason);
    }

    // An account cannot take both seats of one game.
    let own = games
        .create_game(authed(create_request(false, None), &hoa))
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap();
    let status = games
        .join_game(authed(join_request(&own.id), &hoa))
        .await
        .unwrap_err();
    assert_reason(&status, Code::FailedPrecondition, "ERROR_REASON_SEAT_TAKEN");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn rated_games_are_between_two_accounts() {
    let server = start(config()).await;
    let mut accounts = account_client(&server).await;
    let mut games = server.games().await;
    let (_, lan, _) = register(&mut accounts, "Lan").await;

    // Anonymous creator, with nothing or with a seat token.
    let status = games
        .create_game(create_request(true, blitz()))
        .await
        .unwrap_err();
    assert_reason(
        &status,
        Code::FailedPrecondition,
        "ERROR_REASON_RATED_NEEDS_ACCOUNT",
    );
    assert!(status.message().contains("api key"), "{}", status.message());
    let seat_token = anonymous_seat(&mut games).await;
    let status = games
        .create_game(authed(create_request(true, blitz()), &seat_token))
        .await
        .unwrap_err();
    assert_reason(
        &status,
        Code::FailedPrecondition,
        "ERROR_REASON_RATED_NEEDS_ACCOUNT",
    );
    // Untimed, or against the computer: nothing to rate.
    let status = games
        .create_game(authed(create_request(true, None), &lan))
        .await
        .unwrap_err();
    assert_field(&status, "rated");
    let status = games
        .create_game(authed(
            pb::CreateGameRequest {
                computer: Some(pb::ComputerOpponent { level: 1 }),
                ..create_request(true, blitz())
            },
            &lan,
        ))
        .await
        .unwrap_err();
    assert_field(&status, "rated");

    // A rated game refuses an anonymous second player, and stays open for an account.
    let game = games
        .create_game(authed(create_request(true, blitz()), &lan))
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap();
    assert!(game.rated);
    for bearer in [None, Some(seat_token.as_str())] {
        let request = match bearer {
            None => Request::new(join_request(&game.id)),
            Some(token) => authed(join_request(&game.id), token),
        };
        let status = games.join_game(request).await.unwrap_err();
        assert_reason(
            &status,
            Code::FailedPrecondition,
            "ERROR_REASON_RATED_NEEDS_ACCOUNT",
        );
    }
    let (_, minh, _) = register(&mut accounts, "Minh").await;
    let joined = games
        .join_game(authed(join_request(&game.id), &minh))
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap();
    assert_eq!(joined.status, i32::from(pb::GameStatus::Active));

    // Rated seeks too.
    let status = games
        .seek(pb::SeekRequest {
            time_control: blitz(),
            rated: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_reason(
        &status,
        Code::FailedPrecondition,
        "ERROR_REASON_RATED_NEEDS_ACCOUNT",
    );
    let status = games
        .seek(authed(
            pb::SeekRequest {
                rated: true,
                ..Default::default()
            },
            &lan,
        ))
        .await
        .unwrap_err();
    assert_field(&status, "rated");

    // An unrated game between accounts counts the result but changes no rating.
    let (unrated, _, _) = account_game(&mut games, &lan, &minh, false, blitz()).await;
    assert!(!unrated.rated);
    assert!(seat_account(unrated.first_seat.as_ref()).username == "Lan");
    let over = resign(&mut games, &unrated.id, &minh).await.unwrap();
    let result = over.result.unwrap();
    assert!(result.first_rating.is_none() && result.second_rating.is_none());
    let lan_profile = player(&mut accounts, "lan").await;
    assert_eq!(lan_profile.wins, 1);
    assert!(lan_profile.ratings.is_empty());
    assert_eq!(player(&mut accounts, "MINH").await.losses, 1);

    // So does a rated game resigned before both players have moved: nothing was played.
    let (rated, _, _) = account_game(&mut games, &lan, &minh, true, blitz()).await;
    let over = resign(&mut games, &rated.id, &minh).await.unwrap();
    assert!(over.rated);
    let result = over.result.unwrap();
    assert!(result.first_rating.is_none() && result.second_rating.is_none());
    let lan_profile = player(&mut accounts, "Lan").await;
    assert_eq!(lan_profile.wins, 2);
    assert!(lan_profile.ratings.is_empty(), "{lan_profile:?}");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn one_pair_rates_only_its_allowance_of_games_a_day() {
    let mut config = config();
    config.games.rated_games_per_pair = 2;
    let server = start(config).await;
    let mut accounts = account_client(&server).await;
    let mut games = server.games().await;
    let (_, lan, _) = register(&mut accounts, "Lan").await;
    let (_, minh, _) = register(&mut accounts, "Minh").await;
    let (_, hoa, _) = register(&mut accounts, "Hoa").await;

    let mut rated = Vec::new();
    for (winner, loser) in [(&lan, &minh), (&minh, &lan), (&lan, &minh), (&minh, &lan)] {
        let over = rated_win(&mut games, winner, loser, blitz()).await;
        assert!(over.rated);
        let result = over.result.unwrap();
        assert_eq!(
            result.first_rating.is_some(),
            result.second_rating.is_some(),
            "{result:?}"
        );
        rated.push(result.first_rating.is_some());
    }
    assert_eq!(rated, [true, true, false, false]);
    let profile = player(&mut accounts, "Lan").await;
    assert_eq!((profile.wins, profile.losses), (2, 2), "every game counts");
    let blitz_rating = rating_at(&profile, pb::Speed::Blitz).unwrap();
    assert_eq!(blitz_rating.games, 2);

    // Another pair has its own allowance.
    let over = rated_win(&mut games, &hoa, &lan, blitz()).await;
    assert!(over.result.unwrap().first_rating.is_some());
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_rated_game_changes_both_ratings_once_and_announces_them() {
    let server = start(config()).await;
    let mut accounts = account_client(&server).await;
    let mut games = server.games().await;
    let (_, lan, _) = register(&mut accounts, "Lan").await;
    let (_, minh, _) = register(&mut accounts, "Minh").await;
    let (game, lan_token, minh_token) = account_game(&mut games, &lan, &minh, true, blitz()).await;
    both_move(&mut games, &game.id, (&lan_token, &minh_token)).await;
    let (mut watch, _) = watch_snapshot(&mut games, &game.id).await;

    // Minh resigns with the seat token: Lan wins.
    let over = resign(&mut games, &game.id, &minh_token).await.unwrap();
    let (winner_after, loser_after) = newcomers_after_one_game();
    assert!(winner_after > 1500 && loser_after < 1500);
    let expected_first = pb::RatingChange {
        before: 1500,
        after: winner_after,
        provisional: true,
    };
    let expected_second = pb::RatingChange {
        before: 1500,
        after: loser_after,
        provisional: true,
    };
    let result = over.result.unwrap();
    assert_eq!(result.first_rating, Some(expected_first));
    assert_eq!(result.second_rating, Some(expected_second));
    let game_over = loop {
        let event = next_game_event(&mut watch).await.unwrap();
        if let Some(Kind::GameOver(over)) = event.kind {
            break over;
        }
    };
    assert_eq!(game_over.result, Some(result));
    assert_eq!(get_game(&mut games, &game.id).await.result, Some(result));

    let check = |profile: &pb::PlayerProfile, rating: i32, record: (u32, u32, u32)| {
        let blitz = rating_at(profile, pb::Speed::Blitz).expect("a blitz rating");
        assert_eq!(profile.ratings.len(), 1, "{profile:?}");
        assert_eq!(blitz.rating, rating);
        assert_eq!(blitz.games, 1);
        assert!(blitz.provisional);
        assert!(blitz.deviation < 350 && blitz.deviation > 0, "{blitz:?}");
        assert!(blitz.volatility > 0.0);
        assert_eq!((profile.wins, profile.draws, profile.losses), record);
    };
    check(&player(&mut accounts, "Lan").await, winner_after, (1, 0, 0));
    check(&player(&mut accounts, "Minh").await, loser_after, (0, 0, 1));
    check(
        &get_me(&mut accounts, &lan).await.unwrap(),
        winner_after,
        (1, 0, 0),
    );

    // Nothing that follows the end counts it again.
    let status = resign(&mut games, &game.id, &lan).await.unwrap_err();
    assert_reason(&status, Code::FailedPrecondition, "ERROR_REASON_GAME_OVER");
    let status = games
        .claim_victory(authed(
            pb::ClaimVictoryRequest {
                game_id: game.id.clone(),
            },
            &lan,
        ))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition);
    tokio::time::sleep(Duration::from_millis(300)).await;
    check(&player(&mut accounts, "Lan").await, winner_after, (1, 0, 0));
    check(&player(&mut accounts, "Minh").await, loser_after, (0, 0, 1));

    // The next game starts from the new ratings, shown in the seats.
    let (next_game, _, _) = account_game(&mut games, &minh, &lan, true, blitz()).await;
    assert_eq!(
        seat_account(next_game.first_seat.as_ref()).rating,
        loser_after
    );
    assert_eq!(
        seat_account(next_game.second_seat.as_ref()).rating,
        winner_after
    );
    server.stop().await.unwrap();
}

fn on_disk(path: &Path) -> Config {
    let mut settings = config();
    settings.storage = Storage::Sqlite(path.to_owned());
    settings
}

/// What a restart must leave as it was: both profiles and the game's result.
async fn after_the_game(
    accounts: &mut Accounts,
    games: &mut Games,
    id: &str,
) -> (pb::PlayerProfile, pb::PlayerProfile, Option<pb::GameResult>) {
    (
        player(accounts, "Lan").await,
        player(accounts, "Minh").await,
        get_game(games, id).await.result,
    )
}

#[tokio::test]
async fn ratings_are_unchanged_by_a_restart_right_after_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    let server = start(on_disk(&path)).await;
    let mut accounts = account_client(&server).await;
    let mut games = server.games().await;
    let (_, lan, _) = register(&mut accounts, "Lan").await;
    let (_, minh, _) = register(&mut accounts, "Minh").await;
    let over = rated_win(&mut games, &lan, &minh, blitz()).await;
    let before = after_the_game(&mut accounts, &mut games, &over.id).await;
    server.stop().await.unwrap();

    let server = start(on_disk(&path)).await;
    let mut accounts = account_client(&server).await;
    let mut games = server.games().await;
    let after = after_the_game(&mut accounts, &mut games, &over.id).await;
    assert_eq!(after, before);
    assert_eq!(
        rating_at(&after.0, pb::Speed::Blitz).unwrap().rating,
        newcomers_after_one_game().0
    );
    // The keys still work, and the next rated game goes on from the stored ratings.
    let over = rated_win(&mut games, &minh, &lan, blitz()).await;
    let result = over.result.unwrap();
    assert_eq!(
        result.first_rating.unwrap().before,
        newcomers_after_one_game().1
    );
    assert_eq!(
        result.second_rating.unwrap().before,
        newcomers_after_one_game().0
    );
    assert_eq!(
        rating_at(&player(&mut accounts, "Lan").await, pb::Speed::Blitz)
            .unwrap()
            .games,
        2
    );
    server.stop().await.unwrap();
}

/// An account row damaged in the file (a rating of a speed this build does not know) is the
/// database's damage, said as such (`DATA_LOSS`, not a generic internal error), and it stays
/// that account's: other accounts and new ones go on.
#[tokio::test]
async fn a_damaged_account_answers_data_loss_and_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    let server = start(on_disk(&path)).await;
    let mut accounts = account_client(&server).await;
    register(&mut accounts, "Lan").await;
    register(&mut accounts, "Minh").await;
    server.stop().await.unwrap();
    let inserted = rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "INSERT INTO ratings SELECT id, 'warp', 1500.0, 350.0, 0.06, 0, 1 FROM accounts \
             WHERE username = 'Lan'",
            [],
        )
        .unwrap();
    assert_eq!(inserted, 1);

    let server = start(on_disk(&path)).await;
    let mut accounts = account_client(&server).await;
    let status = accounts
        .get_player(pb::GetPlayerRequest {
            username: "Lan".into(),
        })
        .await
        .expect_err("a damaged account");
    assert_eq!(status.code(), Code::DataLoss, "{status:?}");
    assert!(
        status.message().contains("database is damaged") && !status.message().contains("warp"),
        "{status:?}"
    );
    assert_eq!(player(&mut accounts, "Minh").await.username, "Minh");
    register(&mut accounts, "Hoa").await;
    server.stop().await.unwrap();
}

#[tokio::test]
async fn ratings_are_unchanged_by_a_kill_right_after_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    let server = ServerBinary::start(&path);
    let channel = server.channel().await;
    let mut accounts = Accounts::new(channel.clone());
    let mut games = Games::new(channel);
    let (_, lan, _) = register(&mut accounts, "Lan").await;
    let (_, minh, _) = register(&mut accounts, "Minh").await;
    let (game, lan_token, minh_token) = account_game(&mut games, &lan, &minh, true, bullet()).await;
    both_move(&mut games, &game.id, (&lan_token, &minh_token)).await;
    let over = resign(&mut games, &game.id, &minh).await.unwrap();
    // Killed the moment the end is acknowledged: no drain, no close.
    drop(server);

    let server = ServerBinary::start(&path);
    let channel = server.channel().await;
    let mut accounts = Accounts::new(channel.clone());
    let mut games = Games::new(channel);
    let (lan_profile, minh_profile, result) =
        after_the_game(&mut accounts, &mut games, &game.id).await;
    assert_eq!(result, over.result);
    let (winner, loser) = newcomers_after_one_game();
    for (profile, rating, record) in [
        (&lan_profile, winner, (1, 0, 0)),
        (&minh_profile, loser, (0, 0, 1)),
    ] {
        let bullet = rating_at(profile, pb::Speed::Bullet).unwrap();
        assert_eq!((bullet.rating, bullet.games), (rating, 1), "{profile:?}");
        assert_eq!((profile.wins, profile.draws, profile.losses), record);
    }
    // The timekeeper of the restarted server does not end the finished game again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        after_the_game(&mut accounts, &mut games, &game.id).await,
        (lan_profile, minh_profile, result)
    );
    assert_eq!(get_me(&mut accounts, &lan).await.unwrap().username, "Lan");
}

fn range(min: i32, max: i32) -> Option<pb::RatingRange> {
    Some(pb::RatingRange { min, max })
}

fn rated_seek(range: Option<pb::RatingRange>) -> pb::SeekRequest {
    pb::SeekRequest {
        time_control: blitz(),
        display_name: "Anonymous".into(),
        rated: true,
        rating_range: range,
        ..Default::default()
    }
}

/// Starts seeking; the first message must say the seek waits.
async fn seek_waiting(
    games: &mut Games,
    key: &str,
    request: pb::SeekRequest,
) -> (tonic::Streaming<pb::SeekResponse>, pb::Seek) {
    let mut stream = games.seek(authed(request, key)).await.unwrap().into_inner();
    match next(&mut stream).await.unwrap().unwrap().kind {
        Some(pb::seek_response::Kind::Waiting(seek)) => (stream, seek),
        other => panic!("expected to wait, got {other:?}"),
    }
}

/// Seeks and expects to be paired at once.
async fn seek_paired(
    games: &mut Games,
    key: &str,
    request: pb::SeekRequest,
) -> pb::seek_response::Paired {
    let mut stream = games.seek(authed(request, key)).await.unwrap().into_inner();
    match next(&mut stream).await.unwrap().unwrap().kind {
        Some(pb::seek_response::Kind::Paired(paired)) => paired,
        other => panic!("expected a pairing, got {other:?}"),
    }
}

/// The pairing a waiting seek stream reports next.
async fn paired_on(stream: &mut tonic::Streaming<pb::SeekResponse>) -> pb::seek_response::Paired {
    loop {
        match next(stream).await.unwrap().unwrap().kind {
            Some(pb::seek_response::Kind::Paired(paired)) => return paired,
            Some(pb::seek_response::Kind::Heartbeat(_)) => {}
            other => panic!("expected a pairing, got {other:?}"),
        }
    }
}

fn usernames(game: &pb::Game) -> HashSet<String> {
    [game.first_seat.as_ref(), game.second_seat.as_ref()]
        .into_iter()
        .map(|seat| seat_account(seat).username)
        .collect()
}

#[tokio::test]
async fn rated_seeks_pair_only_within_their_rating_ranges() {
    let server = start(config()).await;
    let mut accounts = account_client(&server).await;
    let mut games = server.games().await;
    let mut keys = std::collections::HashMap::new();
    for name in ["Lan", "Minh", "Hoa", "Tuan", "Phong", "Quynh"] {
        keys.insert(name, register(&mut accounts, name).await.1);
    }
    // Phong beats Quynh: 1500 → above 1600 at blitz.
    rated_win(&mut games, &keys["Phong"], &keys["Quynh"], blitz()).await;
    let phong = rating_at(&player(&mut accounts, "Phong").await, pb::Speed::Blitz)
        .unwrap()
        .rating;
    assert!(phong > 1600, "{phong}");

    // Lan wants an opponent rated 1600 to 2000; Minh (1500) seeks without a range.
    let (mut lan_stream, lan_seek) =
        seek_waiting(&mut games, &keys["Lan"], rated_seek(range(1600, 2000))).await;
    assert!(lan_seek.rated);
    assert_eq!(lan_seek.rating_range, range(1600, 2000));
    let lan_account = lan_seek.account.clone().unwrap();
    assert_eq!(
        (lan_account.username.as_str(), lan_account.rating),
        ("Lan", 1500)
    );
    assert_eq!(lan_seek.display_name, "Lan");
    let (mut minh_stream, minh_seek) =
        seek_waiting(&mut games, &keys["Minh"], rated_seek(None)).await;
    let listed = list_seeks(&mut games).await;
    assert!(
        listed.contains(&lan_seek) && listed.contains(&minh_seek),
        "{listed:?}"
    );

    // Accepting Lan's seek: anonymously, from 1500, or by Lan herself — each refused.
    let accept = |id: &str| pb::AcceptSeekRequest {
        seek_id: id.to_owned(),
        display_name: "Anonymous".into(),
    };
    let status = games.accept_seek(accept(&lan_seek.id)).await.unwrap_err();
    assert_reason(
        &status,
        Code::FailedPrecondition,
        "ERROR_REASON_RATED_NEEDS_ACCOUNT",
    );
    for (who, why) in [
        ("Hoa", "it wants an opponent rated"),
        ("Lan", "your own seek"),
    ] {
        let status = games
            .accept_seek(authed(accept(&lan_seek.id), &keys[who]))
            .await
            .unwrap_err();
        assert_reason(
            &status,
            Code::FailedPrecondition,
            "ERROR_REASON_SEEK_REFUSED",
        );
        assert!(status.message().contains(why), "{who}: {status:?}");
    }
    // An unrated seek of the same time control does not pair with rated ones.
    let (_unrated_stream, _) = seek_waiting(
        &mut games,
        &keys["Hoa"],
        pb::SeekRequest {
            rated: false,
            ..rated_seek(None)
        },
    )
    .await;

    // Tuan (1500) asks for 1400 to 1600: Minh is in it, Lan's range excludes Tuan.
    let paired = seek_paired(&mut games, &keys["Tuan"], rated_seek(range(1400, 1600))).await;
    let game = paired.game.unwrap();
    assert!(game.rated);
    assert_eq!(
        usernames(&game),
        HashSet::from(["Tuan".into(), "Minh".into()])
    );
    let minh_paired = paired_on(&mut minh_stream).await;
    assert_eq!(minh_paired.game.unwrap().id, game.id);

    // Phong (above 1600, no range) is what Lan waits for.
    let paired = seek_paired(&mut games, &keys["Phong"], rated_seek(None)).await;
    let game = paired.game.unwrap();
    assert_eq!(
        usernames(&game),
        HashSet::from(["Lan".into(), "Phong".into()])
    );
    let lan_paired = paired_on(&mut lan_stream).await;
    assert_eq!(lan_paired.game.as_ref().unwrap().id, game.id);
    // Lan plays the paired game with her key as well as with the seat token.
    let lan_seat = lan_paired.seat;
    assert_ne!(lan_seat, paired.seat);

    // A range upside down is named.
    let status = games
        .seek(authed(rated_seek(range(1600, 1400)), &keys["Quynh"]))
        .await
        .unwrap_err();
    assert_field(&status, "rating_range");
    server.stop().await.unwrap();
}

/// Leaderboard pages of `speed`, `size` at a time: every entry.
async fn leaderboard(
    accounts: &mut Accounts,
    speed: pb::Speed,
    size: u32,
) -> Vec<Vec<pb::LeaderboardEntry>> {
    let mut pages = Vec::new();
    let mut token = String::new();
    loop {
        let page = accounts
            .leaderboard(pb::LeaderboardRequest {
                speed: speed.into(),
                page_size: size,
                page_token: token.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        pages.push(page.entries);
        if page.next_page_token.is_empty() {
            return pages;
        }
        assert!(pages.len() < 100, "pages never end");
        token = page.next_page_token;
    }
}

#[tokio::test]
async fn leaderboards_rank_established_ratings_page_by_page() {
    // Three accounts play each other until they settle: more games than one pair may rate a day.
    let mut config = config();
    config.games.rated_games_per_pair = 0;
    let server = start(config).await;
    let mut accounts = account_client(&server).await;
    let mut games = server.games().await;
    let names = ["Lan", "Minh", "Hoa"];
    let mut keys = Vec::new();
    for name in names {
        keys.push(register(&mut accounts, name).await.1);
    }
    let (_, newcomer, _) = register(&mut accounts, "Tuan").await;

    // Rounds of bullet games until nobody's rating is provisional: Lan wins most, Hoa least.
    let mut rounds = 0;
    loop {
        rounds += 1;
        assert!(rounds <= 40, "ratings still provisional after 40 rounds");
        let lan_minh = if rounds % 3 == 0 { (1, 0) } else { (0, 1) };
        let minh_hoa = if rounds % 4 == 0 { (2, 1) } else { (1, 2) };
        for (winner, loser) in [lan_minh, minh_hoa, (0, 2)] {
            rated_win(&mut games, &keys[winner], &keys[loser], bullet()).await;
        }
        let mut established = 0;
        for name in names {
            let rating = rating_at(&player(&mut accounts, name).await, pb::Speed::Bullet).unwrap();
            established += usize::from(!rating.provisional);
        }
        if established == names.len() {
            break;
        }
    }
    // One game leaves Tuan provisional, so off the board.
    rated_win(&mut games, &keys[2], &newcomer, bullet()).await;
    assert!(
        rating_at(&player(&mut accounts, "Tuan").await, pb::Speed::Bullet)
            .unwrap()
            .provisional
    );

    let pages = leaderboard(&mut accounts, pb::Speed::Bullet, 2).await;
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [2, 1]);
    let entries: Vec<pb::LeaderboardEntry> = pages.into_iter().flatten().collect();
    let order: Vec<&str> = entries.iter().map(|e| e.username.as_str()).collect();
    assert_eq!(order, names, "{entries:?}");
    let ranks: Vec<u64> = entries.iter().map(|e| e.rank).collect();
    assert_eq!(ranks, [1, 2, 3]);
    for entry in &entries {
        let rating = entry.rating.unwrap();
        assert_eq!(rating.speed, i32::from(pb::Speed::Bullet));
        assert!(!rating.provisional);
        let profile = player(&mut accounts, &entry.username).await;
        assert_eq!(Some(rating), rating_at(&profile, pb::Speed::Bullet));
    }
    assert!(
        entries.windows(2).all(|w| {
            w[0].rating.as_ref().unwrap().rating >= w[1].rating.as_ref().unwrap().rating
        })
    );
    // One page of everything; the default page size.
    let whole = leaderboard(&mut accounts, pb::Speed::Bullet, 0).await;
    assert_eq!(whole.concat(), entries);
    // Other speeds have nobody yet.
    assert_eq!(
        leaderboard(&mut accounts, pb::Speed::Blitz, 10).await,
        [Vec::new()]
    );

    // The speed is required and must be known; a page token belongs to its speed.
    for speed in [0, 99, -1] {
        let status = accounts
            .leaderboard(pb::LeaderboardRequest {
                speed,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_field(&status, "speed");
    }
    let first = accounts
        .leaderboard(pb::LeaderboardRequest {
            speed: pb::Speed::Bullet.into(),
            page_size: 1,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    for (speed, token) in [
        (pb::Speed::Blitz, first.next_page_token.clone()),
        (pb::Speed::Bullet, "garbage".to_owned()),
        (
            pb::Speed::Bullet,
            "top-bullet.99999999999999999999999".to_owned(),
        ),
        (pb::Speed::Bullet, "ô".repeat(10_000)),
    ] {
        let status = accounts
            .leaderboard(pb::LeaderboardRequest {
                speed: speed.into(),
                page_size: 1,
                page_token: token,
            })
            .await
            .unwrap_err();
        assert_field(&status, "page_token");
    }
    server.stop().await.unwrap();
}

async fn player_games(
    accounts: &mut Accounts,
    request: pb::ListPlayerGamesRequest,
) -> Result<(Vec<String>, String), Status> {
    accounts.list_player_games(request).await.map(|r| {
        let r = r.into_inner();
        (
            r.games.into_iter().map(|g| g.id).collect(),
            r.next_page_token,
        )
    })
}

fn games_of(name: &str) -> pb::ListPlayerGamesRequest {
    pb::ListPlayerGamesRequest {
        username: name.to_owned(),
        ..Default::default()
    }
}

#[tokio::test]
async fn player_games_are_listed_newest_first_filtered_and_paged() {
    let server = start(config()).await;
    let mut accounts = account_client(&server).await;
    let mut games = server.games().await;
    let (_, lan, _) = register(&mut accounts, "Lan").await;
    let (_, minh, _) = register(&mut accounts, "Minh").await;

    // Oldest first: a blitz win, a blitz loss, a bullet draw, an untimed game still open.
    let win = rated_win(&mut games, &lan, &minh, blitz()).await.id;
    let loss = rated_win(&mut games, &minh, &lan, blitz()).await.id;
    let (drawn, _, _) = account_game(&mut games, &lan, &minh, false, bullet()).await;
    for key in [&lan, &minh] {
        games
            .offer_draw(authed(
                pb::OfferDrawRequest {
                    game_id: drawn.id.clone(),
                },
                key,
            ))
            .await
            .unwrap();
    }
    let draw = drawn.id;
    let open = games
        .create_game(authed(create_request(false, None), &lan))
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap()
        .id;
    // Someone else's game is not Lan's.
    anonymous_seat(&mut games).await;

    let all = player_games(&mut accounts, games_of("lan")).await.unwrap();
    assert_eq!(
        all,
        (
            vec![open.clone(), draw.clone(), loss.clone(), win.clone()],
            String::new()
        )
    );
    let profile = player(&mut accounts, "Lan").await;
    assert_eq!((profile.wins, profile.draws, profile.losses), (1, 1, 1));

    // Filters, alone and together.
    let filtered = |result: pb::PlayerResult, speed: pb::Speed| pb::ListPlayerGamesRequest {
        result: result.into(),
        speed: speed.into(),
        ..games_of("Lan")
    };
    for (result, speed, expected) in [
        (
            pb::PlayerResult::Win,
            pb::Speed::Unspecified,
            vec![win.clone()],
        ),
        (
            pb::PlayerResult::Loss,
            pb::Speed::Unspecified,
            vec![loss.clone()],
        ),
        (
            pb::PlayerResult::Draw,
            pb::Speed::Unspecified,
            vec![draw.clone()],
        ),
        (
            pb::PlayerResult::Unspecified,
            pb::Speed::Blitz,
            vec![loss.clone(), win.clone()],
        ),
        (
            pb::PlayerResult::Unspecified,
            pb::Speed::Bullet,
            vec![draw.clone()],
        ),
        (pb::PlayerResult::Win, pb::Speed::Bullet, vec![]),
        (
            pb::PlayerResult::Unspecified,
            pb::Speed::Correspondence,
            vec![],
        ),
    ] {
        let (ids, token) = player_games(&mut accounts, filtered(result, speed))
            .await
            .unwrap();
        assert_eq!(ids, expected, "{result:?} {speed:?}");
        assert!(token.is_empty());
    }
    // Minh sees the same games from the other side.
    let minh_wins = player_games(
        &mut accounts,
        pb::ListPlayerGamesRequest {
            result: pb::PlayerResult::Win.into(),
            ..games_of("MINH")
        },
    )
    .await
    .unwrap()
    .0;
    assert_eq!(minh_wins, std::slice::from_ref(&loss));

    // Pages of one, then of three, each continuing with its filter.
    for size in [1, 3] {
        let mut seen = Vec::new();
        let mut token = String::new();
        loop {
            let (ids, next_token) = player_games(
                &mut accounts,
                pb::ListPlayerGamesRequest {
                    page_size: size,
                    page_token: token.clone(),
                    ..games_of("Lan")
                },
            )
            .await
            .unwrap();
            assert!(ids.len() <= size as usize);
            seen.extend(ids);
            if next_token.is_empty() {
                break;
            }
            token = next_token;
        }
        assert_eq!(seen, all.0, "pages of {size}");
    }
    let (_, token) = player_games(
        &mut accounts,
        pb::ListPlayerGamesRequest {
            page_size: 1,
            ..games_of("Lan")
        },
    )
    .await
    .unwrap();
    // A token with other filters, of another player's listing, or made up, is refused on
    // page_token.
    for request in [
        pb::ListPlayerGamesRequest {
            page_token: token.clone(),
            ..filtered(pb::PlayerResult::Win, pb::Speed::Unspecified)
        },
        pb::ListPlayerGamesRequest {
            page_token: token.clone(),
            ..games_of("Minh")
        },
        pb::ListPlayerGamesRequest {
            page_token: token.split_once('~').expect("tagged").1.to_owned(),
            ..games_of("Lan")
        },
        pb::ListPlayerGamesRequest {
            page_token: "\u{202e}garbage".into(),
            ..games_of("Lan")
        },
    ] {
        let status = player_games(&mut accounts, request).await.unwrap_err();
        assert_field(&status, "page_token");
    }
    // Unknown enum values name their field; unknown and hostile names are not found.
    let status = player_games(
        &mut accounts,
        pb::ListPlayerGamesRequest {
            result: 42,
            ..games_of("Lan")
        },
    )
    .await
    .unwrap_err();
    assert_field(&status, "result");
    let status = player_games(
        &mut accounts,
        pb::ListPlayerGamesRequest {
            speed: -3,
            ..games_of("Lan")
        },
    )
    .await
    .unwrap_err();
    assert_field(&status, "speed");
    let huge = "ư".repeat(100_000);
    for name in ["Nobody", "", "L\u{200b}an", "Ｌan", huge.as_str()] {
        let status = player_games(&mut accounts, games_of(name))
            .await
            .unwrap_err();
        assert_reason(&status, Code::NotFound, "ERROR_REASON_PLAYER_NOT_FOUND");
        assert!(status.message().chars().count() <= 513);
        let status = accounts
            .get_player(pb::GetPlayerRequest {
                username: name.to_owned(),
            })
            .await
            .unwrap_err();
        assert_reason(&status, Code::NotFound, "ERROR_REASON_PLAYER_NOT_FOUND");
    }
    server.stop().await.unwrap();
}

#[tokio::test]
async fn hostile_keys_and_names_are_refused_without_harm() {
    let server = start(config()).await;
    let mut accounts = account_client(&server).await;
    let mut games = server.games().await;
    let (_, lan, lan_id) = register(&mut accounts, "Lan").await;
    let (game, lan_token, _) = {
        let (_, minh, _) = register(&mut accounts, "Minh").await;
        account_game(&mut games, &lan, &minh, true, blitz()).await
    };

    // Key-shaped bearers that are not keys, on every kind of call.
    let mut tampered = lan.clone().into_bytes();
    let last = tampered.len() - 1;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let unknown = format!("oqk_{}_{}", "z".repeat(16), "x".repeat(32));
    // Malformed: what begins like a key but has not its shape is a bad key too, not a bearer
    // to ignore (on CreateGame it would have seated its sender anonymously).
    let long_key = format!("oqk_{}_{}", "z".repeat(16), "x".repeat(43));
    for bad in [
        tampered.as_str(),
        unknown.as_str(),
        long_key.as_str(),
        "oqk_garbage",
        "oqk_",
    ] {
        let status = games
            .create_game(authed(create_request(false, None), bad))
            .await
            .unwrap_err();
        assert_reason(&status, Code::Unauthenticated, "ERROR_REASON_BAD_API_KEY");
        let status = get_me(&mut accounts, bad).await.unwrap_err();
        assert_reason(&status, Code::Unauthenticated, "ERROR_REASON_BAD_API_KEY");
        let status = resign(&mut games, &game.id, bad).await.unwrap_err();
        assert_reason(&status, Code::Unauthenticated, "ERROR_REASON_BAD_API_KEY");
        let status = games
            .join_game(authed(join_request(&game.id), bad))
            .await
            .unwrap_err();
        assert_reason(&status, Code::Unauthenticated, "ERROR_REASON_BAD_API_KEY");
        let status = games.seek(authed(rated_seek(None), bad)).await.unwrap_err();
        assert_reason(&status, Code::Unauthenticated, "ERROR_REASON_BAD_API_KEY");
    }
    // Not a key at all: a seat token that fits no seat, on a game's call.
    let long = "o".repeat(8_000);
    // Bytes outside ASCII are no readable credential at all.
    for (bad, code, reason) in [
        (
            long.as_str(),
            Code::PermissionDenied,
            "ERROR_REASON_WRONG_TOKEN",
        ),
        ("oqk", Code::PermissionDenied, "ERROR_REASON_WRONG_TOKEN"),
        (
            "oqk_\u{1F511}",
            Code::Unauthenticated,
            "ERROR_REASON_MISSING_TOKEN",
        ),
    ] {
        let value = format!("Bearer {bad}").parse().unwrap();
        let mut request = Request::new(pb::ResignRequest {
            game_id: game.id.clone(),
        });
        request.metadata_mut().insert("authorization", value);
        let status = games.resign(request).await.unwrap_err();
        assert_reason(&status, code, reason);
    }
    // Ids and names of every size and script reach no panic.
    for (text, a_bad_name) in [
        ("x".repeat(1 << 20), true),
        ("\u{0}".into(), true),
        ("𝕃𝕒𝕟".into(), true),
        (lan_id.to_uppercase(), false),
        (format!("{lan_id}\u{301}"), false),
    ] {
        let status = accounts
            .revoke_api_key(authed(
                pb::RevokeApiKeyRequest {
                    key_id: text.clone(),
                },
                &lan,
            ))
            .await
            .unwrap_err();
        assert_reason(&status, Code::NotFound, "ERROR_REASON_API_KEY_NOT_FOUND");
        if a_bad_name {
            assert_field(&register_error(&mut accounts, &text).await, "username");
        }
    }
    // Everything still works for the real key and token.
    assert_eq!(get_me(&mut accounts, &lan).await.unwrap().username, "Lan");
    resign(&mut games, &game.id, &lan_token).await.unwrap();
    server.stop().await.unwrap();
}

/// `message` signed with `first`, then with `second` as well.
fn two<T>(message: T, first: &str, second: &str) -> Request<T> {
    let mut request = authed(message, first);
    request
        .metadata_mut()
        .append("authorization", format!("Bearer {second}").parse().unwrap());
    request
}

/// Two `authorization` values are refused on every kind of call, whichever comes first: the
/// server does not guess which credential acts (nor play anonymously beside a key).
#[tokio::test]
async fn two_authorization_values_are_refused_not_guessed() {
    let server = start(config()).await;
    let mut accounts = account_client(&server).await;
    let mut games = server.games().await;
    let (_, lan, _) = register(&mut accounts, "Lan").await;
    let (_, minh, _) = register(&mut accounts, "Minh").await;
    let (game, lan_token, _) = account_game(&mut games, &lan, &minh, false, None).await;
    let refused = |status: Status| {
        assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
        assert!(
            status.message().contains("more than one `authorization`"),
            "{status:?}"
        );
    };
    for (a, b) in [(&lan, &minh), (&minh, &lan)] {
        refused(
            accounts
                .get_me(two(pb::GetMeRequest {}, a, b))
                .await
                .unwrap_err(),
        );
        refused(
            games
                .create_game(two(create_request(false, None), a, b))
                .await
                .unwrap_err(),
        );
    }
    refused(
        games
            .resign(two(
                pb::ResignRequest {
                    game_id: game.id.clone(),
                },
                &lan_token,
                &minh,
            ))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        get_game(&mut games, &game.id).await.status,
        i32::from(pb::GameStatus::Active)
    );
    server.stop().await.unwrap();
}

/// An anonymous seat or seek cannot pose as an account, nor carry what clients add after a
/// name (a rating, a computer's level): an outside probe seated `Lan (1500?)` beside the
/// account Lan, and both seats read the same on screen.
#[tokio::test]
async fn anonymous_names_cannot_pose_as_accounts_or_annotations() {
    let server = start(config()).await;
    let mut accounts = account_client(&server).await;
    let mut games = server.games().await;
    register(&mut accounts, "Lan").await;
    register(&mut accounts, "\u{39d}\u{3af}\u{3ba}\u{3bf}\u{3c2}").await;
    let open = games
        .create_game(create_request(false, None))
        .await
        .unwrap()
        .into_inner()
        .game
        .unwrap();
    // The name itself in another case, with capital i or a one for l, dressed up with symbols
    // or spaces; annotations in round, square or fullwidth brackets; the Greek Νίκος with a
    // Latin N, which only its look (capitals as written) meets.
    for name in [
        "N\u{3af}\u{3ba}\u{3bf}\u{3c2}",
        "Lan",
        "lan",
        "Ian",
        "1an",
        "Lan \u{2714}",
        "L a n",
        "Lan\u{2122}",
        "Lan (1500?)",
        "Computer (master)",
        "Minh [1500]",
        "Minh \u{ff08}1500\u{ff09}",
    ] {
        let create = games
            .create_game(pb::CreateGameRequest {
                display_name: name.to_owned(),
                ..create_request(false, None)
            })
            .await
            .unwrap_err();
        let join = games
            .join_game(pb::JoinGameRequest {
                game_id: open.id.clone(),
                display_name: name.to_owned(),
            })
            .await
            .unwrap_err();
        let seek = games
            .seek(pb::SeekRequest {
                display_name: name.to_owned(),
                rated: false,
                ..rated_seek(None)
            })
            .await
            .unwrap_err();
        for status in [create, join, seek] {
            assert_eq!(status.code(), Code::InvalidArgument, "{name}: {status:?}");
            assert_field(&status, "display_name");
            assert!(
                status.message().contains("account") || status.message().contains("brackets"),
                "{name}: {status:?}"
            );
        }
    }
    // Other names, brackets inside a name, and the account itself with its key are fine.
    for name in ["Lanh", "(Lan) Minh", "Minh :)x"] {
        games
            .create_game(pb::CreateGameRequest {
                display_name: name.to_owned(),
                ..create_request(false, None)
            })
            .await
            .unwrap_or_else(|status| panic!("{name}: {status:?}"));
    }
}

/// A seek is a call that lasts: revoking the key it was made with withdraws it at once, also
/// when its next heartbeat is a minute away. An outside probe revoked a key and still got a
/// rated game in its account's name; a later one accepted such a seek in the heartbeat's
/// window and got a game that was aborted before it began.
#[tokio::test]
async fn revoking_a_key_ends_the_seeks_made_with_it() {
    for heartbeat in [Duration::from_millis(100), Duration::from_secs(60)] {
        let mut settings = config();
        settings.streams.heartbeat_interval = heartbeat;
        let server = start(settings).await;
        let mut accounts = account_client(&server).await;
        let mut games = server.games().await;
        let (_, lan, lan_first) = register(&mut accounts, "Lan").await;
        let other = create_key(&mut accounts, &lan).await.api_key;
        let (_, minh, _) = register(&mut accounts, "Minh").await;
        // A seek on Lan's other key stays: only the revoked key's seek ends.
        let (mut kept, kept_seek) = seek_waiting(&mut games, &other, rated_seek(None)).await;
        let (mut stream, seek) = seek_waiting(&mut games, &lan, rated_seek(None)).await;
        accounts
            .revoke_api_key(authed(
                pb::RevokeApiKeyRequest { key_id: lan_first },
                &other,
            ))
            .await
            .unwrap();
        let status = loop {
            match tokio::time::timeout(Duration::from_secs(2), next(&mut stream))
                .await
                .expect("the seek ends within 2 s of the revocation")
            {
                Ok(Some(response)) => assert!(
                    matches!(response.kind, Some(pb::seek_response::Kind::Heartbeat(_))),
                    "{response:?}"
                ),
                Err(status) => break status,
                Ok(None) => panic!("the stream ended without a status"),
            }
        };
        assert_reason(&status, Code::Unauthenticated, "ERROR_REASON_BAD_API_KEY");
        // Gone from the lobby: accepting it is NOT_FOUND, not a seat in an aborted game.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while list_seeks(&mut games).await.iter().any(|s| s.id == seek.id) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the seek is still listed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let refused = games
            .accept_seek(authed(
                pb::AcceptSeekRequest {
                    seek_id: seek.id.clone(),
                    display_name: String::new(),
                },
                &minh,
            ))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
        let listed = list_seeks(&mut games).await;
        assert!(listed.iter().any(|s| s.id == kept_seek.id), "{listed:?}");
        assert!(
            tokio::time::timeout(Duration::from_millis(300), next(&mut kept))
                .await
                .map_or(true, |item| matches!(
                    item,
                    Ok(Some(pb::SeekResponse {
                        kind: Some(pb::seek_response::Kind::Heartbeat(_))
                    }))
                )),
            "the other key's seek goes on"
        );
        server.stop().await.unwrap();
    }
}

/// A server that lets an address (loopback too) register two accounts an hour, with no other
/// rate limit in the way.
async fn registering_two_an_hour() -> TestServer {
    let mut settings = config();
    settings.clients.exempt_loopback = false;
    settings.clients.rate_limit = 0.0;
    settings.clients.registrations_per_hour = 2;
    start(settings).await
}

/// Registrations are bounded per client address (`--registrations-per-hour`): each account
/// also takes every look-alike of its name, and an outside probe registered 461 accounts in
/// 7 s from one address. Past the bound: RESOURCE_EXHAUSTED with a retry delay.
#[tokio::test]
async fn registrations_are_bounded_per_address() {
    let server = registering_two_an_hour().await;
    let mut accounts = account_client(&server).await;
    register(&mut accounts, "Lan").await;
    register(&mut accounts, "Minh").await;
    let refused = register_error(&mut accounts, "Hoa").await;
    assert_reason(
        &refused,
        Code::ResourceExhausted,
        "ERROR_REASON_LIMIT_EXCEEDED",
    );
    assert!(
        refused.message().contains("at most 2 an hour"),
        "{refused:?}"
    );
    let delay = tonic_types::StatusExt::get_details_retry_info(&refused)
        .and_then(|info| info.retry_delay)
        .expect("a retry delay");
    assert!(
        delay > Duration::from_secs(60) && delay <= Duration::from_secs(1800),
        "{delay:?}"
    );
    // Nothing was made: the name is still free.
    let missing = accounts
        .get_player(pb::GetPlayerRequest {
            username: "Hoa".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
}

/// The bound counts accounts made, not attempts: an outside probe's newcomer tried ten names
/// that were too short, then a good one, and was told "too many accounts registered" though
/// none had been. Names refused or already taken give their place back.
#[tokio::test]
async fn refused_and_taken_names_do_not_use_up_the_registrations_of_an_address() {
    let server = registering_two_an_hour().await;
    let mut accounts = account_client(&server).await;
    register(&mut accounts, "Lan").await;
    for name in ["a", "a", "lan", "LAN", "", "x\u{0}y"] {
        let refused = register_error(&mut accounts, name).await;
        assert!(
            matches!(refused.code(), Code::InvalidArgument | Code::AlreadyExists),
            "{name:?}: {refused:?}"
        );
    }
    register(&mut accounts, "Minh").await;
    let refused = register_error(&mut accounts, "Hoa").await;
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
}

/// A client that makes its own key can retry `Register` whose answer it lost (the server
/// killed after the commit; an outside probe's retry met ALREADY_EXISTS and the key was never
/// seen): the retry, also after a restart, answers with the account and that key, and uses up
/// no registration of the address. Another key, or the key under another name, does not.
#[tokio::test]
async fn a_register_with_its_own_key_can_be_retried_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    let mut settings = config();
    settings.storage = Storage::Sqlite(path.clone());
    settings.clients.exempt_loopback = false;
    settings.clients.rate_limit = 0.0;
    settings.clients.registrations_per_hour = 2;
    let server = start(settings.clone()).await;
    let mut accounts = account_client(&server).await;
    let key = own_key();
    let first = register_with_key(&mut accounts, "Lan", &key).await.unwrap();
    assert_eq!(first.api_key, key);
    assert!(key.contains(&first.key.as_ref().unwrap().id));
    server.stop().await.unwrap();

    let server = start(settings).await;
    let mut accounts = account_client(&server).await;
    for _ in 0..3 {
        let again = register_with_key(&mut accounts, "Lan", &key).await.unwrap();
        assert_eq!(again, first, "the retry answers as the first call did");
    }
    assert_eq!(get_me(&mut accounts, &key).await.unwrap().username, "Lan");
    // Another key, or none: the name is taken.
    for other in [own_key(), String::new()] {
        let taken = register_with_key(&mut accounts, "Lan", &other)
            .await
            .unwrap_err();
        assert_reason(&taken, Code::AlreadyExists, "ERROR_REASON_USERNAME_TAKEN");
    }
    // Malformed or plainly not random keys are refused on the field, before the name.
    let id = "0123456789abcdef";
    for bad in [
        "oqk_".to_owned(),
        format!("oqk_{id}_{}", "A".repeat(32)),
        format!("oqk_{id}_{}", "x".repeat(1 << 20)),
        format!("{key} "),
        "\u{202e}".to_owned(),
    ] {
        let refused = register_with_key(&mut accounts, "Hoa", &bad)
            .await
            .unwrap_err();
        assert_field(&refused, "api_key");
        assert!(refused.message().len() < 600, "{}", refused.message());
    }
    // The retries made nothing: this address may still register two accounts this hour.
    let minh_key = own_key();
    let minh = register_with_key(&mut accounts, "Minh", &minh_key)
        .await
        .unwrap();
    register(&mut accounts, "Hoa").await;
    let refused = register_error(&mut accounts, "Kim").await;
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    // Past the limit, a retry is still answered: its account is made, and its key must not
    // wait an hour (an outside probe's last registration of the hour lost its answer).
    assert_eq!(
        register_with_key(&mut accounts, "minh", &minh_key)
            .await
            .unwrap(),
        minh
    );
    assert_eq!(
        register_with_key(&mut accounts, "Lan", &key).await.unwrap(),
        first
    );
}

/// Identical registrations at once (a retry racing its first call, still at work) are all
/// answered with the one account, however few registrations the address has left: an outside
/// probe's four calls at once were three refused by the limit.
#[tokio::test]
async fn identical_registrations_at_once_all_get_the_one_account() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = config();
    settings.storage = Storage::Sqlite(dir.path().join("oanquan.db"));
    settings.clients.exempt_loopback = false;
    settings.clients.rate_limit = 0.0;
    settings.clients.registrations_per_hour = 1;
    let server = start(settings).await;
    let key = own_key();
    let mut calls = Vec::new();
    for _ in 0..8 {
        // Each on a connection of its own.
        let mut accounts = AccountServiceClient::new(server.channel().await);
        let key = key.clone();
        calls.push(tokio::spawn(async move {
            register_with_key(&mut accounts, "Lan", &key).await
        }));
    }
    let mut answers = Vec::new();
    for call in calls {
        answers.push(
            call.await
                .unwrap()
                .expect("every call answered with the account"),
        );
    }
    assert!(
        answers.windows(2).all(|pair| pair[0] == pair[1]),
        "{answers:?}"
    );
    assert_eq!(answers[0].api_key, key);
}

/// A key whose id another account's key has is refused on `api_key`, and the refusal is/// A key whose id another account's key has is refused on `api_key`, and the refusal is
/// counted: each says that key id exists, and an outside probe asked without limit.
#[tokio::test]
async fn a_key_refused_for_its_id_counts_as_a_registration() {
    let server = registering_two_an_hour().await;
    let mut accounts = account_client(&server).await;
    let key = own_key();
    register_with_key(&mut accounts, "Lan", &key).await.unwrap();
    let borrowed = register_with_key(&mut accounts, "Minh", &key)
        .await
        .unwrap_err();
    assert_field(&borrowed, "api_key");
    let refused = register_with_key(&mut accounts, "Hoa", &key)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
}

/// `Register`'s answer holds the account's only copy of its API key: once begun, the call is
/// answered when done, past the server's `--request-timeout`. Cut there, it made the account
/// and lost the key (an outside probe's short deadlines did).
#[tokio::test]
async fn a_register_slower_than_the_request_timeout_is_answered_with_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oanquan.db");
    let mut settings = config();
    settings.storage = Storage::Sqlite(path.clone());
    settings.transport.request_timeout = Duration::from_millis(300);
    let server = start(settings).await;
    let mut accounts = account_client(&server).await;
    register(&mut accounts, "Early").await;

    // Another connection holds the database's write lock for 1.5 s.
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let released = tokio::task::spawn_blocking(move || {
        std::thread::sleep(Duration::from_millis(1_500));
        holder.execute_batch("COMMIT").unwrap();
    });
    let started = std::time::Instant::now();
    let answer = accounts
        .register(pb::RegisterRequest {
            username: "Slowpoke".into(),
            ..Default::default()
        })
        .await;
    released.await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(1_000));
    let key = answer
        .expect("answered with its key, not cut by the request timeout")
        .into_inner()
        .api_key;
    let mut me = Request::new(pb::GetMeRequest {});
    me.metadata_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    let me = accounts.get_me(me).await.unwrap().into_inner();
    assert_eq!(me.player.unwrap().username, "Slowpoke");
}
