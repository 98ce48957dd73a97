//! Accounts, their ratings and API keys, and the links from accounts to the games they play.

use std::collections::BTreeMap;
use std::time::SystemTime;

use deadpool_postgres::GenericClient;
use oanquan_game::account::{Account, AccountId, AccountUpdate, ApiKeyRecord, Record};
use oanquan_game::rating::{Rating, Speed};
use oanquan_game::username::Username;
use oanquan_game::{
    GameInfo, LeaderboardAfter, LeaderboardPage, PlayerGameFilter, PlayerResult, Ranked,
    StoreError, TokenHash, leaderboard_cursor,
};
use oanquan_rules::Player;
use tokio_postgres::Row;

use crate::codec::{time_from_db, time_to_db};
use crate::fault::{Damage, backend};
use crate::reads::{collect_games, execute, query, query_opt};
use crate::schema::violates;

/// Working API keys one account may have, and key records it keeps (revoked ones beyond are
/// forgotten, the one revoked first first): the memory store's bounds (`oanquan_game`'s
/// `MAX_API_KEYS` and `MAX_API_KEY_RECORDS`), so that every store answers alike.
pub(crate) const MAX_API_KEYS: i64 = 20;
pub(crate) const MAX_API_KEY_RECORDS: i64 = 100;

/// An account row that does not decode: damaged data outside any one game, named by its
/// account.
fn damaged(id: &str, why: impl std::fmt::Display) -> StoreError {
    StoreError::DamagedData(format!("account {id} does not decode: {why}"))
}

fn count_from_db(id: &str, what: &str, value: i64) -> Result<u32, StoreError> {
    u32::try_from(value).map_err(|_| damaged(id, format_args!("{what} {value} is out of range")))
}

/// Writes an account's fields (not its id) and ratings over the stored ones, if it is still at
/// `expected` (`None`: a new account, inserted).
async fn write_account<C: GenericClient>(
    client: &C,
    account: &Account,
    expected: Option<u64>,
) -> Result<(), StoreError> {
    let id = account.id.as_str();
    let Record {
        wins,
        draws,
        losses,
    } = account.record;
    let (username, key, look) = (
        account.username.as_str(),
        account.username.key(),
        account.username.look(),
    );
    let created = time_to_db(account.created);
    let [wins, draws, losses] = [wins, draws, losses].map(i64::from);
    let version = i64::try_from(account.version)
        .map_err(|_| StoreError::Backend(format!("account {id}: version out of range")))?;
    match expected {
        None => {
            // Alike in small letters is one key (the unique column); alike only in capitals a
            // key meeting a look, either way. Registrations take this lock in turn, so that two
            // nodes cannot both find the other's look free.
            client
                .execute(
                    "SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))",
                    &[&REGISTER_LOCK],
                )
                .await
                .map_err(backend)?;
            let taken = client
                .query_opt(
                    "SELECT 1 FROM accounts WHERE username_key IN ($1, $2)
                                               OR username_look IN ($1, $2) LIMIT 1",
                    &[&key, &look],
                )
                .await
                .map_err(backend)?;
            if taken.is_some() {
                return Err(StoreError::AlreadyExists);
            }
            let statement = client
                .prepare_cached(
                    "INSERT INTO accounts (id, username, username_key, created, wins, draws,
                                           losses, version, username_look)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .await
                .map_err(backend)?;
            client
                .execute(
                    &statement,
                    &[
                        &id, &username, &key, &created, &wins, &draws, &losses, &version, &look,
                    ],
                )
                .await
                .map_err(|error| {
                    if violates(&error, "accounts_username_key_key") {
                        StoreError::AlreadyExists
                    } else {
                        backend(error)
                    }
                })?;
        }
        Some(expected) => {
            let expected = i64::try_from(expected).unwrap_or(i64::MAX);
            let statement = client
                .prepare_cached(
                    "UPDATE accounts SET username = $2, username_key = $3, created = $4,
                            wins = $5, draws = $6, losses = $7, version = $8, username_look = $10
                     WHERE id = $1 AND version = $9",
                )
                .await
                .map_err(backend)?;
            let updated = client
                .execute(
                    &statement,
                    &[
                        &id, &username, &key, &created, &wins, &draws, &losses, &version,
                        &expected, &look,
                    ],
                )
                .await
                .map_err(|error| {
                    if violates(&error, "accounts_username_key_key") {
                        StoreError::AlreadyExists
                    } else {
                        backend(error)
                    }
                })?;
            if updated == 0 {
                let current =
                    query_opt(client, "SELECT version FROM accounts WHERE id = $1", &[&id]).await?;
                return Err(match current {
                    None => StoreError::NotFound,
                    Some(row) => StoreError::Conflict {
                        current: row
                            .try_get::<_, i64>(0)
                            .ok()
                            .and_then(|v| u64::try_from(v).ok())
                            .unwrap_or(0),
                    },
                });
            }
            // Replaced whole: at most one row per speed.
            execute(client, "DELETE FROM ratings WHERE account = $1", &[&id]).await?;
        }
    }
    if !account.ratings.is_empty() {
        let mut speeds = Vec::new();
        let mut values = [Vec::new(), Vec::new(), Vec::new()];
        let mut games = Vec::new();
        let mut provisional = Vec::new();
        for (speed, rating) in &account.ratings {
            speeds.push(speed.name());
            values[0].push(rating.rating);
            values[1].push(rating.deviation);
            values[2].push(rating.volatility);
            games.push(i64::from(rating.games));
            provisional.push(rating.is_provisional());
        }
        let [ratings, deviations, volatilities] = &values;
        execute(
            client,
            "INSERT INTO ratings (account, speed, rating, deviation, volatility, games, provisional)
             SELECT $1::text, * FROM UNNEST($2::text[], $3::float8[], $4::float8[], $5::float8[],
                                      $6::int8[], $7::bool[])",
            &[
                &id,
                &speeds,
                ratings,
                deviations,
                volatilities,
                &games,
                &provisional,
            ],
        )
        .await?;
    }
    Ok(())
}

/// The account updates of a game's commit, in the commit's transaction: a conflict here
/// rolls the whole commit back. In the order of their ids, so that two commits updating the
/// same accounts lock them in the same order and cannot deadlock.
pub(crate) async fn apply_updates<C: GenericClient>(
    client: &C,
    updates: &[AccountUpdate],
) -> Result<(), StoreError> {
    let mut ordered: Vec<&AccountUpdate> = updates.iter().collect();
    ordered.sort_by(|a, b| a.account.id.cmp(&b.account.id));
    for update in ordered {
        write_account(client, &update.account, Some(update.expected_version)).await?;
    }
    Ok(())
}

async fn insert_key<C: GenericClient>(
    client: &C,
    id: &AccountId,
    key: &ApiKeyRecord,
) -> Result<(), StoreError> {
    let hash = key.hash.to_bytes();
    execute(
        client,
        "INSERT INTO api_keys (id, account, hash, created, revoked) VALUES ($1, $2, $3, $4, $5)",
        &[
            &key.id,
            &id.as_str(),
            &hash.as_slice(),
            &time_to_db(key.created),
            &key.revoked.map(time_to_db),
        ],
    )
    .await?;
    Ok(())
}

/// Registers `account` with its first key, in the caller's transaction.
/// The first number of the registrations' lock (`pg_advisory_xact_lock(int, int)`); the second
/// is a hash of the schema. Not the migration's, the leader's nor the seeks'.
const REGISTER_LOCK: i32 = 0x4f41_4e52; // "OANR"

/// Fills in the look of accounts registered before schema version 4, from their usernames; a
/// username that no longer parses keeps its key as its look.
pub(crate) async fn fill_looks<C: GenericClient>(client: &C) -> Result<(), StoreError> {
    let missing = client
        .query(
            "SELECT id, username, username_key FROM accounts WHERE username_look IS NULL",
            &[],
        )
        .await
        .map_err(backend)?;
    for row in missing {
        let (id, name, key): (String, String, String) = (
            row.try_get(0).map_err(backend)?,
            row.try_get(1).map_err(backend)?,
            row.try_get(2).map_err(backend)?,
        );
        let look = Username::parse(&name).map_or(key, |name| name.look());
        client
            .execute(
                "UPDATE accounts SET username_look = $2 WHERE id = $1",
                &[&id, &look],
            )
            .await
            .map_err(backend)?;
    }
    Ok(())
}

pub(crate) async fn create<C: GenericClient>(
    client: &C,
    account: &Account,
    key: &ApiKeyRecord,
) -> Result<(), StoreError> {
    write_account(client, account, None).await?;
    // A key its owner chose may carry another's id. Registrations take one lock
    // (`REGISTER_LOCK`, in `write_account`), so no other can insert it meanwhile.
    if query_opt(client, "SELECT 1 FROM api_keys WHERE id = $1", &[&key.id])
        .await?
        .is_some()
    {
        return Err(StoreError::AlreadyExists);
    }
    insert_key(client, &account.id, key).await
}

/// Adds a key to an account that has fewer than [`MAX_API_KEYS`], in the caller's
/// transaction. The account's row is locked first, so that two nodes adding keys at once
/// count one after the other.
pub(crate) async fn add_key<C: GenericClient>(
    client: &C,
    id: &AccountId,
    key: &ApiKeyRecord,
) -> Result<(), StoreError> {
    let exists = query_opt(
        client,
        "SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE",
        &[&id.as_str()],
    )
    .await?;
    if exists.is_none() {
        return Err(StoreError::NotFound);
    }
    let (keys, working): (i64, i64) = query_opt(
        client,
        "SELECT count(*), count(*) FILTER (WHERE revoked IS NULL) FROM api_keys
         WHERE account = $1",
        &[&id.as_str()],
    )
    .await?
    .and_then(|row| Some((row.try_get(0).ok()?, row.try_get(1).ok()?)))
    .unwrap_or((0, 0));
    if working >= MAX_API_KEYS {
        return Err(StoreError::Full(format!(
            "an account has at most {MAX_API_KEYS} working API keys"
        )));
    }
    if keys >= MAX_API_KEY_RECORDS {
        execute(
            client,
            "DELETE FROM api_keys WHERE id IN (SELECT id FROM api_keys
             WHERE account = $1 AND revoked IS NOT NULL ORDER BY revoked, id LIMIT $2)",
            &[&id.as_str(), &(keys - MAX_API_KEY_RECORDS + 1)],
        )
        .await?;
    }
    insert_key(client, id, key).await
}

/// Revokes a key at `now` unless it is revoked already; whether the account has the key.
pub(crate) async fn revoke_key<C: GenericClient>(
    client: &C,
    id: &AccountId,
    key_id: &str,
    now: SystemTime,
) -> Result<bool, StoreError> {
    let changed = execute(
        client,
        "UPDATE api_keys SET revoked = COALESCE(revoked, $3) WHERE id = $2 AND account = $1",
        &[&id.as_str(), &key_id, &time_to_db(now)],
    )
    .await?;
    Ok(changed > 0)
}

/// An account and its ratings in one statement (one snapshot).
const ACCOUNT: &str = "
    SELECT a.id, a.username, a.created, a.wins, a.draws, a.losses, a.version,
           r.speed, r.rating, r.deviation, r.volatility, r.games
    FROM accounts a LEFT JOIN ratings r ON r.account = a.id";

/// The account with this id, if there is one.
pub(crate) async fn read<C: GenericClient>(
    client: &C,
    id: &str,
) -> Result<Option<Account>, StoreError> {
    let rows = query(client, &format!("{ACCOUNT} WHERE a.id = $1"), &[&id]).await?;
    decode_account(&rows)
}

/// The account with this username key or look, if there is one (see
/// `GameStore::account_by_name`); a key first, should accounts registered before looks were
/// kept ever share one.
pub(crate) async fn read_by_name<C: GenericClient>(
    client: &C,
    key: &str,
) -> Result<Option<Account>, StoreError> {
    let rows = query(
        client,
        &format!(
            "{ACCOUNT} WHERE a.id = (SELECT id FROM accounts WHERE username_key = $1
                                        OR username_look = $1
                                     ORDER BY username_key = $1 DESC LIMIT 1)"
        ),
        &[&key],
    )
    .await?;
    decode_account(&rows)
}

/// The rows of [`ACCOUNT`] for one account: the account, with one rating per row (or none).
fn decode_account(rows: &[Row]) -> Result<Option<Account>, StoreError> {
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let id: String = first.try_get(0).map_err(backend)?;
    let column = |row: &Row, index| -> Result<i64, StoreError> {
        row.try_get(index).map_err(|e| damaged(&id, e))
    };
    let username: String = first.try_get(1).map_err(|e| damaged(&id, e))?;
    let username = Username::parse(&username)
        .map_err(|e| damaged(&id, format_args!("its username {username:?}: {e}")))?;
    let mut ratings = BTreeMap::new();
    for row in rows {
        let Some(speed) = row
            .try_get::<_, Option<String>>(7)
            .map_err(|e| damaged(&id, e))?
        else {
            continue;
        };
        let speed: Speed = speed.parse().map_err(|e| damaged(&id, e))?;
        let float =
            |index| -> Result<f64, StoreError> { row.try_get(index).map_err(|e| damaged(&id, e)) };
        let rating = Rating {
            rating: float(8)?,
            deviation: float(9)?,
            volatility: float(10)?,
            games: count_from_db(&id, "rated games", column(row, 11)?)?,
        };
        if let Some(fault) = rating.stored_fault() {
            return Err(damaged(&id, format_args!("its {speed} {fault}")));
        }
        ratings.insert(speed, rating);
    }
    let version = column(first, 6)?;
    Ok(Some(Account {
        username,
        created: time_from_db(column(first, 2)?),
        ratings,
        record: Record {
            wins: count_from_db(&id, "wins", column(first, 3)?)?,
            draws: count_from_db(&id, "draws", column(first, 4)?)?,
            losses: count_from_db(&id, "losses", column(first, 5)?)?,
        },
        version: u64::try_from(version)
            .map_err(|_| damaged(&id, format_args!("version {version}")))?,
        id: AccountId::from_stored(id),
    }))
}

/// Columns of `api_keys` in the order [`decode_key`] reads them.
const KEY_COLUMNS: &str = "account, id, hash, created, revoked";

/// The account owning API key `key_id`, and the key.
pub(crate) async fn read_by_key<C: GenericClient>(
    client: &C,
    key_id: &str,
) -> Result<Option<(Account, ApiKeyRecord)>, StoreError> {
    let row = query_opt(
        client,
        &format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = $1"),
        &[&key_id],
    )
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let (account, key) = decode_key(&row)?;
    let account = read(client, &account)
        .await?
        .ok_or_else(|| damaged(&account, format_args!("API key {key_id} has no account")))?;
    Ok(Some((account, key)))
}

/// An account's keys, oldest first.
pub(crate) async fn keys<C: GenericClient>(
    client: &C,
    id: &AccountId,
) -> Result<Vec<ApiKeyRecord>, StoreError> {
    // Insertion order rather than `created`: two keys made in the same instant still list in
    // the order they were added.
    let rows = query(
        client,
        &format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE account = $1 ORDER BY ord"),
        &[&id.as_str()],
    )
    .await?;
    rows.iter()
        .map(|row| decode_key(row).map(|(_, key)| key))
        .collect()
}

/// The account id and the key of a row, refusing a hash that is not 32 bytes.
fn decode_key(row: &Row) -> Result<(String, ApiKeyRecord), StoreError> {
    let account: String = row.try_get(0).map_err(backend)?;
    let id: String = row.try_get(1).map_err(|e| damaged(&account, e))?;
    let hash: Vec<u8> = row.try_get(2).map_err(|e| damaged(&account, e))?;
    let created: i64 = row.try_get(3).map_err(|e| damaged(&account, e))?;
    let revoked: Option<i64> = row.try_get(4).map_err(|e| damaged(&account, e))?;
    let hash = <[u8; 32]>::try_from(hash.as_slice())
        .map_err(|_| damaged(&account, format_args!("API key {id} has no valid hash")))?;
    let key = ApiKeyRecord {
        id,
        hash: TokenHash::from_bytes(hash),
        created: time_from_db(created),
        revoked: revoked.map(time_from_db),
    };
    Ok((account, key))
}

/// A leaderboard page: `limit` non-provisional ratings at `speed` after `after`, in the
/// caller's (repeatable read) transaction.
pub(crate) async fn leaderboard<C: GenericClient>(
    client: &C,
    speed: Speed,
    limit: usize,
    after: Option<&LeaderboardAfter>,
    damage: &Damage,
) -> Result<LeaderboardPage, StoreError> {
    let limit = limit.max(1);
    // One more than the page, to know whether another page follows. Ties by account id in
    // byte order (COLLATE "C"), as the other stores, whatever the database's collation; a
    // page resumes after the last row's (rating, account).
    let rows = query(
        client,
        r#"SELECT account, rating FROM ratings WHERE speed = $1 AND NOT provisional
             AND ($3::float8 IS NULL OR rating < $3
                  OR (rating = $3 AND account COLLATE "C" > $4::text COLLATE "C"))
           ORDER BY rating DESC, account COLLATE "C" LIMIT $2"#,
        &[
            &speed.name(),
            &i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX),
            &after.map(|after| after.rating),
            &after.map(|after| after.account.as_str()),
        ],
    )
    .await?;
    let listed = after.map_or(0, |after| after.listed);
    let mut players = Vec::with_capacity(rows.len().min(limit));
    for (row, rank) in rows.iter().take(limit).zip(listed + 1..) {
        let id: String = row.try_get(0).map_err(backend)?;
        // A damaged account is left out (its rank stays taken), as listings skip a damaged
        // game: one bad row must not hide the whole leaderboard.
        let account = read(client, &id).await.and_then(|account| {
            account.ok_or_else(|| damaged(&id, "it has a rating but no account"))
        });
        match account {
            Ok(account) => players.push(Ranked { account, rank }),
            Err(error @ StoreError::Unavailable(_)) => return Err(error),
            Err(error) => damage.report(&format!("account {id}"), &error),
        }
    }
    let next_cursor = if rows.len() > limit {
        let last = &rows[limit - 1];
        let after = LeaderboardAfter {
            rating: last.try_get(1).map_err(backend)?,
            account: AccountId::from_stored(last.try_get(0).map_err(backend)?),
            listed: listed + limit as u64,
        };
        Some(leaderboard_cursor(speed, &after))
    } else {
        None
    };
    Ok(LeaderboardPage {
        players,
        next_cursor,
    })
}

/// The `game_players.result` value for `filter`'s result.
pub(crate) const fn result_name(result: PlayerResult) -> &'static str {
    match result {
        PlayerResult::Win => "win",
        PlayerResult::Draw => "draw",
        PlayerResult::Loss => "loss",
    }
}

/// Links each account seated in `info` to its game row `ord`, with the columns that
/// [`PlayerGameFilter`] filters on. Rewrites a link only when a column changes (a seat taken,
/// the game over), so that a move writes nothing here.
pub(crate) async fn link_players<C: GenericClient>(
    client: &C,
    ord: i64,
    info: &GameInfo,
) -> Result<(), StoreError> {
    let speed = Speed::of(info.time_control).map(Speed::name);
    let mut linked: Option<&AccountId> = None;
    for seat in Player::ALL {
        let Some(account) = info.seats[seat].as_ref().and_then(|s| s.account.as_ref()) else {
            continue;
        };
        // An account in both seats counts by its first, as `seat_of_account` does.
        if linked == Some(&account.id) {
            continue;
        }
        linked = Some(&account.id);
        let result = info
            .result
            .and_then(|result| result.outcome)
            .map(|outcome| match outcome.winner() {
                None => PlayerResult::Draw,
                Some(winner) if winner == seat => PlayerResult::Win,
                Some(_) => PlayerResult::Loss,
            })
            .map(result_name);
        execute(
            client,
            "INSERT INTO game_players (account, game, speed, result) VALUES ($1, $2, $3, $4)
             ON CONFLICT (account, game) DO UPDATE SET speed = excluded.speed,
                                                       result = excluded.result
             WHERE game_players.speed IS DISTINCT FROM excluded.speed
                OR game_players.result IS DISTINCT FROM excluded.result",
            &[&account.id.as_str(), &ord, &speed, &result],
        )
        .await?;
    }
    Ok(())
}

/// Games of account `id` with `ord < end` that pass `filter`, newest first, at most `limit`,
/// plus the `ord` of the next one if there is one. A game that does not decode is skipped (and
/// reported), as in listings.
pub(crate) async fn player_games<C: GenericClient>(
    client: &C,
    id: &AccountId,
    filter: PlayerGameFilter,
    limit: usize,
    end: i64,
    damage: &Damage,
) -> Result<(Vec<GameInfo>, Option<i64>), StoreError> {
    let speed = filter.speed.map(Speed::name);
    let result = filter.result.map(result_name);
    collect_games(
        client,
        "SELECT g.ord, g.id, g.info FROM game_players p JOIN games g ON g.ord = p.game
         WHERE p.account = $3 AND p.game < $1
               AND ($4::text IS NULL OR p.speed = $4) AND ($5::text IS NULL OR p.result = $5)
         ORDER BY p.game DESC LIMIT $2",
        &[&id.as_str(), &speed, &result],
        limit,
        end,
        damage,
        // The link's columns choose the rows; the game itself has the last word.
        |info| filter.accepts(info, id),
    )
    .await
}
