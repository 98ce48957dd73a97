//! Accounts, their ratings and API keys, and the links from accounts to the games they play
//! (schema version 4). Writes run on the writer thread (an account update inside its game's
//! commit, see `writer::apply`), reads on the reader pool.

use std::collections::BTreeMap;
use std::time::SystemTime;

use oanquan_game::account::{Account, AccountId, AccountUpdate, ApiKeyRecord, Record};
use oanquan_game::rating::{Rating, Speed};
use oanquan_game::username::Username;
use oanquan_game::{
    GameInfo, LeaderboardAfter, LeaderboardPage, Page, PlayerGameFilter, PlayerResult, Ranked,
    StoreError, TokenHash, leaderboard_cursor,
};
use oanquan_rules::Player;
use rusqlite::types::ToSql;
use rusqlite::{Connection, OptionalExtension as _, params, params_from_iter};

use crate::codec::{time_from_db, time_to_db};
use crate::fault::{Damage, backend, is_unique_violation};
use crate::reads::decode_row;

/// Working API keys one account may have, and key records it keeps (revoked ones beyond are
/// forgotten, the one revoked first first): the memory store's bounds (`oanquan_game`'s
/// `MAX_API_KEYS` and `MAX_API_KEY_RECORDS`), so that every store answers alike.
pub(crate) const MAX_API_KEYS: i64 = 20;
pub(crate) const MAX_API_KEY_RECORDS: i64 = 100;

/// `error`, with a taken username key (the only `UNIQUE` constraint of `accounts`) as
/// [`StoreError::AlreadyExists`].
fn unique_name(error: rusqlite::Error) -> StoreError {
    if is_unique_violation(&error) {
        StoreError::AlreadyExists
    } else {
        backend(error)
    }
}

/// An account row that does not decode: damaged data outside any one game, named by its
/// account.
fn damaged(id: &str, why: impl std::fmt::Display) -> StoreError {
    StoreError::DamagedData(format!("account {id} does not decode: {why}"))
}

fn count(value: u32) -> i64 {
    i64::from(value)
}

fn count_from_db(id: &str, what: &str, value: i64) -> Result<u32, StoreError> {
    u32::try_from(value).map_err(|_| damaged(id, format_args!("{what} {value} is out of range")))
}

/// Writes an account's fields (not its id) and ratings over the stored ones, if it is still at
/// `expected` (`None`: a new account, inserted).
fn write_account(
    conn: &Connection,
    account: &Account,
    expected: Option<u64>,
) -> Result<(), StoreError> {
    let id = account.id.as_str();
    let Record {
        wins,
        draws,
        losses,
    } = account.record;
    let (key, look) = (account.username.key(), account.username.look());
    let fields: [&dyn ToSql; 9] = [
        &id,
        &account.username.as_str(),
        &key,
        &time_to_db(account.created),
        &count(wins),
        &count(draws),
        &count(losses),
        &(account.version as i64),
        &look,
    ];
    match expected {
        None => {
            // Alike in small letters is one key (the unique column); alike only in capitals is
            // a key meeting a look, either way. Checked on the writer, in the insert's
            // transaction, so no other registration comes between.
            let taken = conn
                .prepare_cached(
                    "SELECT 1 FROM accounts WHERE username_key IN (?1, ?2)
                                               OR username_look IN (?1, ?2)",
                )
                .and_then(|mut s| s.exists([&key, &look]))
                .map_err(backend)?;
            if taken {
                return Err(StoreError::AlreadyExists);
            }
            conn.prepare_cached(
                "INSERT INTO accounts (id, username, username_key, created, wins, draws, losses,
                                       version, username_look)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .and_then(|mut s| s.execute(fields))
            .map_err(unique_name)?;
        }
        Some(expected) => {
            let expected = expected as i64;
            let updated = conn
                .prepare_cached(
                    "UPDATE accounts SET username = ?2, username_key = ?3, created = ?4, wins = ?5,
                            draws = ?6, losses = ?7, version = ?8, username_look = ?9
                     WHERE id = ?1 AND version = ?10",
                )
                .and_then(|mut s| {
                    s.execute(params_from_iter(
                        fields.into_iter().chain([&expected as &dyn ToSql]),
                    ))
                })
                .map_err(unique_name)?;
            if updated == 0 {
                let current: Option<i64> = conn
                    .prepare_cached("SELECT version FROM accounts WHERE id = ?1")
                    .and_then(|mut s| s.query_row([id], |row| row.get(0)).optional())
                    .map_err(backend)?;
                return Err(match current {
                    None => StoreError::NotFound,
                    Some(current) => StoreError::Conflict {
                        current: current as u64,
                    },
                });
            }
            // Replaced whole: at most one row per speed.
            conn.prepare_cached("DELETE FROM ratings WHERE account = ?1")
                .and_then(|mut s| s.execute([id]))
                .map_err(backend)?;
        }
    }
    for (speed, rating) in &account.ratings {
        // SQLite stores NaN as NULL, which would read back as something else.
        if [rating.rating, rating.deviation, rating.volatility]
            .iter()
            .any(|value| value.is_nan())
        {
            return Err(StoreError::Backend(format!(
                "account {id}: its {speed} rating is not a number; refused"
            )));
        }
        conn.prepare_cached(
            "INSERT INTO ratings (account, speed, rating, deviation, volatility, games,
                                  provisional)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                speed.name(),
                rating.rating,
                rating.deviation,
                rating.volatility,
                count(rating.games),
                rating.is_provisional(),
            ])
        })
        .map_err(backend)?;
    }
    Ok(())
}

/// The account updates of a game's commit; runs inside the commit's savepoint, so a conflict
/// here leaves nothing of the commit written.
pub(crate) fn apply_updates(
    conn: &Connection,
    updates: &[AccountUpdate],
) -> Result<(), StoreError> {
    for update in updates {
        write_account(conn, &update.account, Some(update.expected_version))?;
    }
    Ok(())
}

fn insert_key(conn: &Connection, id: &AccountId, key: &ApiKeyRecord) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO api_keys (id, account, hash, created, revoked) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut s| {
        s.execute(params![
            key.id,
            id.as_str(),
            key.hash.to_bytes(),
            time_to_db(key.created),
            key.revoked.map(time_to_db),
        ])
    })
    .map_err(backend)?;
    Ok(())
}

/// Registers `account` with its first key.
pub(crate) fn create(
    conn: &Connection,
    account: &Account,
    key: &ApiKeyRecord,
) -> Result<(), StoreError> {
    write_account(conn, account, None)?;
    // A key its owner chose may carry another's id; one writer at a time makes this exact.
    let id_taken = conn
        .prepare_cached("SELECT 1 FROM api_keys WHERE id = ?1")
        .and_then(|mut s| s.exists([&key.id]))
        .map_err(backend)?;
    if id_taken {
        return Err(StoreError::AlreadyExists);
    }
    insert_key(conn, &account.id, key)
}

/// Fills in the look of accounts registered before schema version 6 (or by a server that did
/// not write it), from their usernames; a username that no longer parses keeps its key as its
/// look. Returns how many rows it wrote.
pub(crate) fn fill_looks(conn: &Connection) -> Result<usize, StoreError> {
    let missing: Vec<(String, String, String)> = conn
        .prepare("SELECT id, username, username_key FROM accounts WHERE username_look IS NULL")
        .and_then(|mut s| {
            s.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
                .collect()
        })
        .map_err(backend)?;
    for (id, name, key) in &missing {
        let look = Username::parse(name).map_or_else(|_| key.clone(), |name| name.look());
        conn.prepare_cached("UPDATE accounts SET username_look = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute([id, &look]))
            .map_err(backend)?;
    }
    Ok(missing.len())
}

/// Adds a key to an account that has fewer than [`MAX_API_KEYS`].
pub(crate) fn add_key(
    conn: &Connection,
    id: &AccountId,
    key: &ApiKeyRecord,
) -> Result<(), StoreError> {
    let exists = conn
        .prepare_cached("SELECT 1 FROM accounts WHERE id = ?1")
        .and_then(|mut s| s.exists([id.as_str()]))
        .map_err(backend)?;
    if !exists {
        return Err(StoreError::NotFound);
    }
    let (keys, working): (i64, i64) = conn
        .prepare_cached(
            "SELECT count(*), count(*) FILTER (WHERE revoked IS NULL) FROM api_keys
             WHERE account = ?1",
        )
        .and_then(|mut s| s.query_row([id.as_str()], |row| Ok((row.get(0)?, row.get(1)?))))
        .map_err(backend)?;
    if working >= MAX_API_KEYS {
        return Err(StoreError::Full(format!(
            "an account has at most {MAX_API_KEYS} working API keys"
        )));
    }
    if keys >= MAX_API_KEY_RECORDS {
        conn.prepare_cached(
            "DELETE FROM api_keys WHERE id IN (SELECT id FROM api_keys
             WHERE account = ?1 AND revoked IS NOT NULL ORDER BY revoked, id LIMIT ?2)",
        )
        .and_then(|mut s| s.execute(params![id.as_str(), keys - MAX_API_KEY_RECORDS + 1]))
        .map_err(backend)?;
    }
    insert_key(conn, id, key)
}

/// Revokes a key at `now` unless it is revoked already; whether the account has the key.
pub(crate) fn revoke_key(
    conn: &Connection,
    id: &AccountId,
    key_id: &str,
    now: SystemTime,
) -> Result<bool, StoreError> {
    conn.prepare_cached(
        "UPDATE api_keys SET revoked = COALESCE(revoked, ?3) WHERE id = ?2 AND account = ?1",
    )
    .and_then(|mut s| s.execute(params![id.as_str(), key_id, time_to_db(now)]))
    .map(|changed| changed > 0)
    .map_err(backend)
}

/// The account with this id, if there is one.
pub(crate) fn read(conn: &Connection, id: &str) -> Result<Option<Account>, StoreError> {
    read_where(conn, "id", id)
}

/// The account with this username key, if there is one.
pub(crate) fn read_by_name(conn: &Connection, key: &str) -> Result<Option<Account>, StoreError> {
    // By key or look (see `GameStore::account_by_name`); a key first, should accounts
    // registered before looks were kept ever share one.
    let id: Option<String> = conn
        .prepare_cached(
            "SELECT id FROM accounts WHERE username_key = ?1 OR username_look = ?1
             ORDER BY username_key = ?1 DESC LIMIT 1",
        )
        .and_then(|mut s| s.query_row([key], |row| row.get(0)).optional())
        .map_err(backend)?;
    match id {
        Some(id) => read_where(conn, "id", &id),
        None => Ok(None),
    }
}

fn read_where(conn: &Connection, column: &str, value: &str) -> Result<Option<Account>, StoreError> {
    type Row = (String, String, i64, [i64; 3], i64);
    let row: Option<Row> = conn
        .prepare_cached(&format!(
            "SELECT id, username, created, wins, draws, losses, version FROM accounts
             WHERE {column} = ?1"
        ))
        .and_then(|mut s| {
            s.query_row([value], |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    [row.get(3)?, row.get(4)?, row.get(5)?],
                    row.get(6)?,
                ))
            })
            .optional()
        })
        .map_err(backend)?;
    let Some((id, username, created, [wins, draws, losses], version)) = row else {
        return Ok(None);
    };
    let username = Username::parse(&username)
        .map_err(|e| damaged(&id, format_args!("its username {username:?}: {e}")))?;
    let ratings = read_ratings(conn, &id)?;
    Ok(Some(Account {
        username,
        created: time_from_db(created),
        ratings,
        record: Record {
            wins: count_from_db(&id, "wins", wins)?,
            draws: count_from_db(&id, "draws", draws)?,
            losses: count_from_db(&id, "losses", losses)?,
        },
        version: u64::try_from(version)
            .map_err(|_| damaged(&id, format_args!("version {version}")))?,
        id: AccountId::from_stored(id),
    }))
}

fn read_ratings(conn: &Connection, id: &str) -> Result<BTreeMap<Speed, Rating>, StoreError> {
    let rows: Vec<(String, f64, f64, f64, i64)> = conn
        .prepare_cached(
            "SELECT speed, rating, deviation, volatility, games FROM ratings WHERE account = ?1",
        )
        .and_then(|mut s| {
            s.query_map([id], |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                ))
            })?
            .collect()
        })
        .map_err(backend)?;
    rows.into_iter()
        .map(|(speed, rating, deviation, volatility, games)| {
            let speed: Speed = speed.parse().map_err(|e| damaged(id, e))?;
            let rating = Rating {
                rating,
                deviation,
                volatility,
                games: count_from_db(id, "rated games", games)?,
            };
            if let Some(fault) = rating.stored_fault() {
                return Err(damaged(id, format_args!("its {speed} {fault}")));
            }
            Ok((speed, rating))
        })
        .collect()
}

/// The account owning API key `key_id`, and the key.
pub(crate) fn read_by_key(
    conn: &Connection,
    key_id: &str,
) -> Result<Option<(Account, ApiKeyRecord)>, StoreError> {
    let row: Option<KeyRow> = conn
        .prepare_cached("SELECT account, id, hash, created, revoked FROM api_keys WHERE id = ?1")
        .and_then(|mut s| s.query_row([key_id], key_row).optional())
        .map_err(backend)?;
    let Some(row) = row else {
        return Ok(None);
    };
    let (account, key) = decode_key(row)?;
    let account = read(conn, &account)?
        .ok_or_else(|| damaged(&account, format_args!("API key {key_id} has no account")))?;
    Ok(Some((account, key)))
}

/// An account's keys, oldest first.
pub(crate) fn keys(conn: &Connection, id: &AccountId) -> Result<Vec<ApiKeyRecord>, StoreError> {
    // Insertion order (the rowid) rather than `created`: two keys made in the same instant
    // still list in the order they were added.
    let rows: Vec<KeyRow> = conn
        .prepare_cached(
            "SELECT account, id, hash, created, revoked FROM api_keys WHERE account = ?1
             ORDER BY rowid",
        )
        .and_then(|mut s| s.query_map([id.as_str()], key_row)?.collect())
        .map_err(backend)?;
    rows.into_iter()
        .map(|row| decode_key(row).map(|(_, key)| key))
        .collect()
}

/// A row of `api_keys`: `(account, id, hash, created, revoked)`.
type KeyRow = (String, String, Vec<u8>, i64, Option<i64>);

fn key_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<KeyRow> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
    ))
}

/// The account id and the key of a row, refusing a hash that is not 32 bytes.
fn decode_key(
    (account, id, hash, created, revoked): KeyRow,
) -> Result<(String, ApiKeyRecord), StoreError> {
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

/// A leaderboard page: `limit` non-provisional ratings at `speed` after `after`.
pub(crate) fn leaderboard(
    conn: &Connection,
    speed: Speed,
    limit: usize,
    after: Option<&LeaderboardAfter>,
    damage: &Damage,
) -> Result<LeaderboardPage, StoreError> {
    let limit = limit.max(1);
    // One more than the page, to know whether another page follows. The order is the
    // `ratings_leaderboard` index's; a page resumes after the last row's (rating, account).
    let rows: Vec<(String, f64)> = conn
        .prepare_cached(
            "SELECT account, rating FROM ratings WHERE speed = ?1 AND provisional = 0
               AND (?3 IS NULL OR rating < ?3 OR (rating = ?3 AND account > ?4))
             ORDER BY rating DESC, account LIMIT ?2",
        )
        .and_then(|mut s| {
            s.query_map(
                params![
                    speed.name(),
                    i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX),
                    after.map(|after| after.rating),
                    after.map(|after| after.account.as_str()),
                ],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?
            .collect()
        })
        .map_err(backend)?;
    let listed = after.map_or(0, |after| after.listed);
    let mut players = Vec::with_capacity(rows.len().min(limit));
    for ((id, _), rank) in rows.iter().take(limit).zip(listed + 1..) {
        // A damaged account is left out (its rank stays taken), as listings skip a damaged
        // game: one bad row must not hide the whole leaderboard.
        let account = read(conn, id).and_then(|account| {
            account.ok_or_else(|| damaged(id, "it has a rating but no account"))
        });
        match account {
            Ok(account) => players.push(Ranked { account, rank }),
            Err(error @ StoreError::Unavailable(_)) => return Err(error),
            Err(error) => damage.report(&format!("account {id}"), &error),
        }
    }
    let next_cursor = (rows.len() > limit).then(|| {
        let (id, rating) = &rows[limit - 1];
        leaderboard_cursor(
            speed,
            &LeaderboardAfter {
                rating: *rating,
                account: AccountId::from_stored(id.clone()),
                listed: listed + limit as u64,
            },
        )
    });
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
pub(crate) fn link_players(conn: &Connection, ord: i64, info: &GameInfo) -> Result<(), StoreError> {
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
        conn.prepare_cached(
            "INSERT INTO game_players (account, game, speed, result) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (account, game) DO UPDATE SET speed = excluded.speed,
                                                       result = excluded.result
             WHERE speed IS NOT excluded.speed OR result IS NOT excluded.result",
        )
        .and_then(|mut s| s.execute(params![account.id.as_str(), ord, speed, result]))
        .map_err(backend)?;
    }
    Ok(())
}

/// Games of account `id` with `ord < end` that pass `filter`, newest first, at most `limit`,
/// plus the `ord` of the next one if there is one. A game that does not decode is skipped (and
/// reported), as in listings.
pub(crate) fn player_games(
    conn: &Connection,
    id: &AccountId,
    filter: PlayerGameFilter,
    limit: usize,
    end: i64,
    damage: &Damage,
) -> Result<(Vec<GameInfo>, Option<i64>), StoreError> {
    let mut statement = conn
        .prepare_cached(
            "SELECT g.ord, g.id, g.info FROM game_players p JOIN games g ON g.ord = p.game
             WHERE p.account = ?1 AND p.game < ?2 AND (?3 IS NULL OR p.speed = ?3)
                   AND (?4 IS NULL OR p.result = ?4)
             ORDER BY p.game DESC",
        )
        .map_err(backend)?;
    let mut rows = statement
        .query(params![
            id.as_str(),
            end,
            filter.speed.map(Speed::name),
            filter.result.map(result_name),
        ])
        .map_err(backend)?;
    let mut games = Vec::new();
    while let Some(row) = rows.next().map_err(backend)? {
        let ord: i64 = row.get(0).map_err(backend)?;
        match decode_row(conn, row) {
            // The link's columns choose the rows; the game itself has the last word.
            Ok(info) if filter.accepts(&info, id) => {
                if games.len() == limit {
                    return Ok((games, Some(ord)));
                }
                games.push(info);
            }
            Ok(_) => {}
            Err((what, error)) => damage.report(&what, &error),
        }
    }
    Ok((games, None))
}

/// Page of [`player_games`] with its cursor.
pub(crate) fn player_page(
    (games, next): (Vec<GameInfo>, Option<i64>),
    cursor: impl Fn(u64) -> String,
) -> Page {
    Page {
        games,
        // Resume just above the first game not returned (rowids are positive).
        next_cursor: next.map(|ord| cursor(ord.unsigned_abs() + 1)),
    }
}
