//! Writing one commit: the game's row under optimistic concurrency, its moves and events, the
//! accounts it changes and lobby numbers from the locked counter; all in the caller's
//! transaction. The notifications are not sent here but returned ([`Notice`]): they go out
//! after the transaction is durable (see `batch`).

use std::sync::Arc;

use deadpool_postgres::GenericClient;
use oanquan_game::{
    Commit, Committed, GameEvent, GameEventKind, GameId, GameInfo, GameState, LobbyEvent,
    LobbyEventKind, StoreError,
};
use oanquan_rules::Move;

use crate::accounts;
use crate::codec::{
    GameEventDto, InfoDto, LobbyEventDto, player_name, status_name, time_to_db, token_columns,
};
use crate::reads::{RowVersion, execute, query_opt};

/// The channel every commit with game events notifies, with `<game id>:<last sequence>`.
pub const GAME_CHANNEL: &str = "oanquan_game";

/// The channel every commit with lobby events notifies, with `<last lobby sequence>`.
pub const LOBBY_CHANNEL: &str = "oanquan_lobby";

/// What a commit tells the other nodes once it is durable: the game's id and new last
/// sequence, and the lobby's last sequence, each if the commit numbered such events.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Notice {
    pub(crate) game: Option<(GameId, u64)>,
    pub(crate) lobby: Option<u64>,
}

/// One commit as written: what the caller gets, what to notify, and the state as stored with
/// its row's version (`xmin`), for the node's cache of games.
#[derive(Debug)]
pub(crate) struct Written {
    pub(crate) committed: Committed,
    pub(crate) notice: Notice,
    pub(crate) state: GameState,
    pub(crate) row_version: RowVersion,
}

/// Writes one commit in the caller's transaction, which the caller commits. On error the
/// caller rolls back: nothing of the commit stays.
pub(crate) async fn apply<C: GenericClient>(
    client: &C,
    create: bool,
    mut commit: Commit,
) -> Result<Written, StoreError> {
    let expected = commit.expected_sequence;
    let (tokens, rematch_tokens) = token_columns(&commit.state);
    let [first, second, rematch_first, rematch_second] = [
        tokens.first,
        tokens.second,
        rematch_tokens.first,
        rematch_tokens.second,
    ]
    .map(|token| token.map(|bytes| bytes.to_vec()));
    let sequence = expected + commit.game_events.len() as u64;
    commit.state.set_sequence(sequence);
    let state = &commit.state;
    let id = &state.info().id;
    let info_json = encode_json(&InfoDto::new(state.info()))
        .map_err(|e| StoreError::Backend(format!("encoding game {id}: {e}")))?;
    check_info_reads_back(state.info(), &info_json).map_err(unreadable(id))?;
    let status = status_name(state.info().status);
    let move_count = i32::try_from(state.info().move_count)
        .map_err(|_| StoreError::Backend(format!("game {id}: too many moves")))?;
    let sequence_db = to_db(sequence)?;
    let expected_db = to_db(expected)?;

    let (ord, stored_moves, xmin) = if create {
        if expected != 0 {
            return Err(StoreError::Conflict { current: 0 });
        }
        // Another node may create the same id at the same moment: the unique id decides,
        // without an error that would abort the transaction.
        let row = query_opt(
            client,
            "INSERT INTO games (id, status, sequence, move_count, token_first, token_second,
                                rematch_token_first, rematch_token_second, creator, info)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
             ON CONFLICT (id) DO NOTHING RETURNING ord, xmin::text::int8",
            &[
                &id.as_str(),
                &status,
                &sequence_db,
                &move_count,
                &first,
                &second,
                &rematch_first,
                &rematch_second,
                &state.creator().map(|ip| ip.to_string()),
                &info_json,
            ],
        )
        .await?
        .ok_or(StoreError::Conflict { current: 0 })?;
        (column::<i64>(&row, 0)?, 0, column::<i64>(&row, 1)?)
    } else {
        // The row is locked by the first statement that changes it: a node committing the same
        // game at the same moment waits for this transaction, then finds the sequence moved on
        // (PostgreSQL checks the condition again on the newest row) and changes nothing.
        let row = query_opt(
            client,
            "WITH old AS (
                 SELECT ord, move_count FROM games WHERE id = $1 AND sequence = $2 FOR UPDATE
             )
             UPDATE games SET status = $3, sequence = $4, move_count = $5, token_first = $6,
                    token_second = $7, rematch_token_first = $8, rematch_token_second = $9,
                    info = $10
             FROM old WHERE games.ord = old.ord
             RETURNING games.ord, old.move_count, games.xmin::text::int8",
            &[
                &id.as_str(),
                &expected_db,
                &status,
                &sequence_db,
                &move_count,
                &first,
                &second,
                &rematch_first,
                &rematch_second,
                &info_json,
            ],
        )
        .await?;
        match row {
            Some(row) => (
                column::<i64>(&row, 0)?,
                column::<i32>(&row, 1)?,
                column::<i64>(&row, 2)?,
            ),
            None => {
                let current = query_opt(
                    client,
                    "SELECT sequence FROM games WHERE id = $1",
                    &[&id.as_str()],
                )
                .await?
                .ok_or(StoreError::NotFound)?;
                let current = column::<i64>(&current, 0)?;
                return Err(StoreError::Conflict {
                    current: u64::try_from(current).unwrap_or(0),
                });
            }
        }
    };
    // After the game's row, in id order (see `accounts::apply_updates`): a stale account
    // refuses the whole commit.
    accounts::apply_updates(client, &commit.accounts).await?;
    accounts::link_players(client, ord, state.info()).await?;

    let stored_moves = usize::try_from(stored_moves)
        .map_err(|_| StoreError::Backend(format!("game {id}: a negative move count")))?;
    let new_moves = state.moves().since(stored_moves).ok_or_else(|| {
        StoreError::Backend(format!(
            "a commit to game {id} removes moves; they only append"
        ))
    })?;
    if !new_moves.is_empty() {
        let mut numbers = Vec::with_capacity(new_moves.len());
        let mut players = Vec::with_capacity(new_moves.len());
        let mut notations = Vec::with_capacity(new_moves.len());
        let mut times = Vec::with_capacity(new_moves.len());
        for (index, record) in new_moves.into_iter().enumerate() {
            let notation = record.mv.to_string();
            if notation.parse::<Move>().ok() != Some(record.mv) {
                return Err(unreadable(id)(format!(
                    "move {} does not read back",
                    record.number
                )));
            }
            if record.number as usize != stored_moves + index + 1 {
                return Err(StoreError::Backend(format!(
                    "game {id}: move number {} out of order",
                    record.number
                )));
            }
            numbers.push(i32::try_from(record.number).unwrap_or(i32::MAX));
            players.push(player_name(record.player));
            notations.push(notation);
            times.push(time_to_db(record.time));
        }
        execute(
            client,
            "INSERT INTO moves (game, number, player, mv, time)
             SELECT $1::int8, * FROM UNNEST($2::int4[], $3::text[], $4::text[], $5::int8[])",
            &[&ord, &numbers, &players, &notations, &times],
        )
        .await?;
    }

    let mut notice = Notice::default();
    let time = time_to_db(commit.time);
    let mut game_events = Vec::with_capacity(commit.game_events.len());
    if !commit.game_events.is_empty() {
        let mut sequences = Vec::with_capacity(commit.game_events.len());
        let mut jsons = Vec::with_capacity(commit.game_events.len());
        for (sequence, kind) in (expected + 1..).zip(commit.game_events) {
            if let GameEventKind::GameStarted { game } = &kind {
                check_game_reads_back(game).map_err(unreadable(id))?;
            }
            jsons.push(encode_json(&GameEventDto::new(&kind)).map_err(|e| {
                StoreError::Backend(format!("encoding an event of game {id}: {e}"))
            })?);
            sequences.push(to_db(sequence)?);
            game_events.push(Arc::new(GameEvent {
                game_id: id.clone(),
                sequence,
                time: commit.time,
                kind,
            }));
        }
        execute(
            client,
            "INSERT INTO game_events (game, sequence, time, event)
             SELECT $1::int8, s, $2::int8, e FROM UNNEST($3::int8[], $4::text[]) AS u (s, e)",
            &[&ord, &time, &sequences, &jsons],
        )
        .await?;
        notice.game = Some((id.clone(), sequence));
    }

    let mut lobby_events = Vec::with_capacity(commit.lobby_events.len());
    if !commit.lobby_events.is_empty() {
        let mut jsons = Vec::with_capacity(commit.lobby_events.len());
        for kind in &commit.lobby_events {
            if let LobbyEventKind::GameCreated { game } = kind {
                check_game_reads_back(game).map_err(unreadable(id))?;
            }
            jsons.push(
                encode_json(&LobbyEventDto::new(kind))
                    .map_err(|e| StoreError::Backend(format!("encoding a lobby event: {e}")))?,
            );
        }
        // Last, so that the counter's row stays locked for as short a time as possible: the
        // lock is held until COMMIT, which numbers the lobby in commit order without gaps.
        let count = i64::try_from(jsons.len()).unwrap_or(i64::MAX);
        let last = query_opt(
            client,
            "UPDATE lobby_counter SET last = last + $1 RETURNING last",
            &[&count],
        )
        .await?
        .ok_or_else(|| StoreError::Backend("the lobby counter row is missing".to_owned()))?;
        let last = u64::try_from(column::<i64>(&last, 0)?)
            .map_err(|_| StoreError::Backend("the lobby counter is negative".to_owned()))?;
        let first_sequence = last + 1 - jsons.len() as u64;
        let sequences: Vec<i64> = (first_sequence..=last)
            .map(to_db)
            .collect::<Result<_, _>>()?;
        execute(
            client,
            "INSERT INTO lobby_events (sequence, time, event)
             SELECT s, $1::int8, e FROM UNNEST($2::int8[], $3::text[]) AS u (s, e)",
            &[&time, &sequences, &jsons],
        )
        .await?;
        notice.lobby = Some(last);
        for (sequence, kind) in (first_sequence..).zip(commit.lobby_events) {
            lobby_events.push(Arc::new(LobbyEvent {
                sequence,
                time: commit.time,
                kind,
            }));
        }
    }

    Ok(Written {
        committed: Committed {
            info: commit.state.info().clone(),
            game_events,
            lobby_events,
        },
        notice,
        state: commit.state,
        row_version: RowVersion {
            sequence: sequence_db,
            xmin,
        },
    })
}

/// The notifications of durable commits, as one statement string for the simple query
/// protocol: a transaction of its own that does not wait for its commit record to reach the
/// disk. A transaction that notifies holds PostgreSQL's notification-queue lock from its
/// commit until its commit record is flushed; inside the commits themselves that serialised
/// every commit behind one WAL flush each (docs/SCALING.md). Here the lock is held for
/// microseconds. A notification lost in a crash only delays delivery: the listeners' catch-up
/// reads find what it announced (see `nodes`). `None` when there is nothing to say.
pub(crate) fn notify_sql<'a>(notices: impl IntoIterator<Item = &'a Notice>) -> Option<String> {
    let mut sql = String::new();
    let mut lobby: Option<u64> = None;
    for notice in notices {
        if let Some((id, sequence)) = &notice.game {
            sql.push_str(&format!(
                "NOTIFY {GAME_CHANNEL}, {};",
                quote(&format!("{id}:{sequence}"))
            ));
        }
        // The listeners read the lobby from their last sequence on: the highest is enough.
        lobby = lobby.max(notice.lobby);
    }
    if let Some(last) = lobby {
        sql.push_str(&format!("NOTIFY {LOBBY_CHANNEL}, '{last}';"));
    }
    if sql.is_empty() {
        return None;
    }
    Some(format!(
        "BEGIN; SET LOCAL synchronous_commit = off; {sql} COMMIT"
    ))
}

/// `text` as an SQL string literal. Game ids are letters, digits, `-` and `_`, but a quote is
/// doubled all the same.
pub(crate) fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A sequence number as PostgreSQL's `BIGINT`.
fn to_db(value: u64) -> Result<i64, StoreError> {
    i64::try_from(value)
        .map_err(|_| StoreError::Backend(format!("sequence {value} is out of range")))
}

fn column<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a tokio_postgres::Row,
    index: usize,
) -> Result<T, StoreError> {
    row.try_get(index)
        .map_err(|e| StoreError::Backend(format!("postgres: reading a column: {e}")))
}

/// A commit refused because what it would store does not decode back to what was accepted:
/// storing it would leave a game nobody can load.
pub(crate) fn unreadable(id: &GameId) -> impl Fn(String) -> StoreError + '_ {
    move |why| {
        StoreError::Backend(format!(
            "game {id} would be stored in a form that does not read back ({why}); refused"
        ))
    }
}

/// Whether `json` (the encoding of `info`) decodes to `info` again.
pub(crate) fn check_info_reads_back(info: &GameInfo, json: &str) -> Result<(), String> {
    let dto: InfoDto = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let decoded = dto.decode()?;
    let mut back = decoded.info;
    if !decoded.position_known {
        // Taken from the replay of the stored moves on load, which is checked on its own.
        back.position = info.position;
    }
    if back == *info {
        Ok(())
    } else {
        Err("it decodes to a different game".to_owned())
    }
}

pub(crate) fn check_game_reads_back(info: &GameInfo) -> Result<(), String> {
    let json = encode_json(&InfoDto::new(info)).map_err(|e| e.to_string())?;
    check_info_reads_back(info, &json)
}

/// `serde_json::to_string` into a buffer sized for our rows up front.
pub(crate) fn encode_json(value: &impl serde::Serialize) -> serde_json::Result<String> {
    let mut buffer = Vec::with_capacity(1024);
    serde_json::to_writer(&mut buffer, value)?;
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(buffer)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}
