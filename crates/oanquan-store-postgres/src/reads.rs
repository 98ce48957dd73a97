//! Reads: loading and replaying games, summaries, listings, and the event logs.
//!
//! A read that needs more than one statement runs in one `REPEATABLE READ` transaction, so that
//! a snapshot and its sequence agree; a read of one statement is consistent on its own.

use std::collections::HashMap;
use std::sync::Arc;

use deadpool_postgres::GenericClient;
use oanquan_game::{
    GameEvent, GameFilter, GameId, GameInfo, GameState, GameStatus, LobbyEvent, MoveRecord,
    PlayedMove, Since, StoreError, TokenHash,
};
use oanquan_rules::{ByPlayer, Position};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::codec::{
    GameEventDto, History, InfoDto, LobbyEventDto, parse_player, status_name, time_from_db,
};
use crate::fault::{Damage, backend, corrupt};

/// A lobby resume missing more events than this gets a snapshot instead (as the other
/// stores): replaying thousands of lobby events is slower than a fresh list.
pub(crate) const LOBBY_REPLAY_LIMIT: u64 = 10_000;

/// Rows fetched at a time by listings: a page and one more, unless damaged games (skipped)
/// make another round necessary.
const MIN_CHUNK: i64 = 16;

/// Runs `sql` as a cached prepared statement.
pub(crate) async fn query<C: GenericClient>(
    client: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, StoreError> {
    let statement = client.prepare_cached(sql).await.map_err(backend)?;
    client.query(&statement, params).await.map_err(backend)
}

/// [`query`] of at most one row.
pub(crate) async fn query_opt<C: GenericClient>(
    client: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, StoreError> {
    let statement = client.prepare_cached(sql).await.map_err(backend)?;
    client.query_opt(&statement, params).await.map_err(backend)
}

/// [`query`] of a statement without rows: how many it changed.
pub(crate) async fn execute<C: GenericClient>(
    client: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, StoreError> {
    let statement = client.prepare_cached(sql).await.map_err(backend)?;
    client.execute(&statement, params).await.map_err(backend)
}

/// Column `index` of `row`, a type mismatch being a damaged game.
fn get<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    index: usize,
    id: &GameId,
) -> Result<T, StoreError> {
    row.try_get(index).map_err(|e| corrupt(id, e))
}

pub(crate) fn token(id: &GameId, bytes: Option<Vec<u8>>) -> Result<Option<TokenHash>, StoreError> {
    bytes
        .map(|bytes| {
            <[u8; 32]>::try_from(bytes.as_slice())
                .map(TokenHash::from_bytes)
                .map_err(|_| corrupt(id, "a token hash is not 32 bytes"))
        })
        .transpose()
}

/// The whole game in one statement (one snapshot): its row and its moves as arrays.
const LOAD: &str = "
    SELECT token_first, token_second, rematch_token_first, rematch_token_second, info, creator,
           ARRAY(SELECT number FROM moves WHERE game = g.ord ORDER BY number),
           ARRAY(SELECT player FROM moves WHERE game = g.ord ORDER BY number),
           ARRAY(SELECT mv FROM moves WHERE game = g.ord ORDER BY number),
           ARRAY(SELECT time FROM moves WHERE game = g.ord ORDER BY number),
           sequence, xmin::text::int8
    FROM games g WHERE id = $1";

/// Loads a whole game and replays it, cross-checking the stored position.
pub(crate) async fn load_state<C: GenericClient>(
    client: &C,
    id: &GameId,
) -> Result<GameState, StoreError> {
    Ok(load_versioned(client, id).await?.0)
}

/// [`load_state`], with the version of the row it read (see `cache`).
pub(crate) async fn load_versioned<C: GenericClient>(
    client: &C,
    id: &GameId,
) -> Result<(GameState, RowVersion), StoreError> {
    let row = query_opt(client, LOAD, &[&id.as_str()])
        .await?
        .ok_or(StoreError::NotFound)?;
    let version = RowVersion {
        sequence: get(&row, 10, id)?,
        xmin: get(&row, 11, id)?,
    };
    let tokens: [Option<Vec<u8>>; 4] = [
        get(&row, 0, id)?,
        get(&row, 1, id)?,
        get(&row, 2, id)?,
        get(&row, 3, id)?,
    ];
    let json: String = get(&row, 4, id)?;
    let creator: Option<String> = get(&row, 5, id)?;
    let numbers: Vec<i32> = get(&row, 6, id)?;
    let players: Vec<String> = get(&row, 7, id)?;
    let notations: Vec<String> = get(&row, 8, id)?;
    let times: Vec<i64> = get(&row, 9, id)?;

    let creator = creator
        .map(|text| {
            text.parse()
                .map_err(|e| corrupt(id, format_args!("creator: {e}")))
        })
        .transpose()?;
    let dto: InfoDto = serde_json::from_str(&json).map_err(|e| corrupt(id, e))?;
    let decoded = dto.decode().map_err(|e| corrupt(id, e))?;
    if decoded.info.id != *id {
        return Err(corrupt(
            id,
            format_args!("its data is that of game {}", decoded.info.id),
        ));
    }
    let [first, second, rematch_first, rematch_second] = tokens;
    let token_hashes = ByPlayer::new(token(id, first)?, token(id, second)?);
    let rematch_tokens = ByPlayer::new(token(id, rematch_first)?, token(id, rematch_second)?);

    let mut moves: Vec<PlayedMove> = Vec::with_capacity(numbers.len());
    for (((number, player), mv), time) in numbers.into_iter().zip(players).zip(notations).zip(times)
    {
        if i64::from(number) != moves.len() as i64 + 1 {
            return Err(corrupt(id, format_args!("move {number} out of order")));
        }
        moves.push(PlayedMove {
            player: parse_player(&player).map_err(|e| corrupt(id, e))?,
            mv: mv.parse().map_err(|e| corrupt(id, e))?,
            time: time_from_db(time),
        });
    }
    let stored_position = decoded.position_known.then_some(decoded.info.position);
    let state = GameState::restore(
        decoded.info,
        token_hashes,
        rematch_tokens,
        moves,
        creator,
        stored_position,
    )
    .map_err(|e| corrupt(id, e))?;
    Ok((state, version))
}

/// Which version of a game's row a state was read from or written as: its sequence, and the
/// transaction that wrote the row (`xmin`), which any change of the row changes, an
/// operator's repair included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowVersion {
    pub(crate) sequence: i64,
    pub(crate) xmin: i64,
}

/// The version of game `id`'s row now.
pub(crate) async fn row_version<C: GenericClient>(
    client: &C,
    id: &GameId,
) -> Result<RowVersion, StoreError> {
    let row = query_opt(
        client,
        "SELECT sequence, xmin::text::int8 FROM games WHERE id = $1",
        &[&id.as_str()],
    )
    .await?
    .ok_or(StoreError::NotFound)?;
    Ok(RowVersion {
        sequence: get(&row, 0, id)?,
        xmin: get(&row, 1, id)?,
    })
}

/// Decodes the `games.info` column of game `id`, replaying the game only if the position needs
/// it (a game ended by repetition).
pub(crate) async fn decode_info<C: GenericClient>(
    client: &C,
    id: &GameId,
    json: &str,
) -> Result<GameInfo, StoreError> {
    let dto: InfoDto = serde_json::from_str(json).map_err(|e| corrupt(id, e))?;
    let decoded = dto.decode().map_err(|e| corrupt(id, e))?;
    if decoded.info.id != *id {
        return Err(corrupt(
            id,
            format_args!("its data is that of game {}", decoded.info.id),
        ));
    }
    if decoded.position_known {
        Ok(decoded.info)
    } else {
        Ok(load_state(client, id).await?.into_info())
    }
}

pub(crate) async fn read_info<C: GenericClient>(
    client: &C,
    id: &GameId,
) -> Result<GameInfo, StoreError> {
    let row = query_opt(
        client,
        "SELECT info FROM games WHERE id = $1",
        &[&id.as_str()],
    )
    .await?
    .ok_or(StoreError::NotFound)?;
    let json: String = get(&row, 0, id)?;
    decode_info(client, id, &json).await
}

/// Decodes one `(ord, id, info)` row of `games`: the game, or what to report as damaged.
pub(crate) async fn decode_row<C: GenericClient>(
    client: &C,
    row: &Row,
) -> Result<GameInfo, (String, StoreError)> {
    let raw_id: String = row.try_get(1).unwrap_or_else(|_| "(not text)".to_owned());
    let id = GameId::parse(&raw_id).map_err(|e| {
        let error = StoreError::Backend(format!("a stored game id does not parse: {e}"));
        (format!("game {raw_id}"), error)
    })?;
    let info = match row.try_get::<_, String>(2) {
        Ok(json) => decode_info(client, &id, &json).await,
        Err(error) => Err(corrupt(&id, error)),
    };
    info.map_err(|error| (format!("game {id}"), error))
}

/// The `games.status` values a filter accepts.
pub(crate) fn statuses(filter: GameFilter) -> Vec<&'static str> {
    let [waiting, active, finished, aborted] = [
        GameStatus::WaitingForPlayers,
        GameStatus::Active,
        GameStatus::Finished,
        GameStatus::Aborted,
    ]
    .map(status_name);
    match filter {
        GameFilter::Open => vec![waiting],
        GameFilter::Active => vec![active],
        GameFilter::Finished => vec![finished, aborted],
        GameFilter::All => vec![waiting, active, finished, aborted],
    }
}

/// Rows of games chosen by `sql` (parameters `$1` an `ord` bound, `$2` a row limit, then
/// `params`), newest first, decoded and filtered by `accept`, at most `limit`, plus the
/// `ord` of the next accepted one if there is one. A game that does not decode is skipped
/// (and reported): one damaged row must not hide every other game.
pub(crate) async fn collect_games<C: GenericClient>(
    client: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    limit: usize,
    end: i64,
    damage: &Damage,
    accept: impl Fn(&GameInfo) -> bool,
) -> Result<(Vec<GameInfo>, Option<i64>), StoreError> {
    let chunk = i64::try_from(limit.saturating_add(1))
        .unwrap_or(i64::MAX)
        .max(MIN_CHUNK);
    let mut games = Vec::new();
    let mut end = end;
    loop {
        let mut all: Vec<&(dyn ToSql + Sync)> = vec![&end, &chunk];
        all.extend_from_slice(params);
        let rows = query(client, sql, &all).await?;
        let fetched = rows.len();
        for row in &rows {
            let ord: i64 = row.try_get(0).map_err(|e| {
                StoreError::Backend(format!("postgres: a game's ord does not read: {e}"))
            })?;
            end = ord;
            match decode_row(client, row).await {
                Ok(info) if damage.known(&info.id).is_some() => {}
                Ok(info) if accept(&info) => {
                    if games.len() == limit {
                        return Ok((games, Some(ord)));
                    }
                    games.push(info);
                }
                Ok(_) => {}
                Err((_, error @ StoreError::Unavailable(_))) => return Err(error),
                Err((what, error)) => damage.report(&what, &error),
            }
        }
        if (fetched as i64) < chunk {
            return Ok((games, None));
        }
    }
}

/// Games whose status is one of `statuses` with `ord < end`, newest first; see
/// [`collect_games`].
pub(crate) async fn list_games<C: GenericClient>(
    client: &C,
    statuses: &[&str],
    limit: usize,
    end: i64,
    damage: &Damage,
) -> Result<(Vec<GameInfo>, Option<i64>), StoreError> {
    collect_games(
        client,
        "SELECT ord, id, info FROM games WHERE ord < $1 AND status = ANY($3)
         ORDER BY ord DESC LIMIT $2",
        &[&statuses],
        limit,
        end,
        damage,
        |_| true,
    )
    .await
}

/// A game's start and moves, for decoding its events; loaded only when an event needs them.
#[derive(Default)]
struct Replayed {
    state: Option<(Position, Vec<MoveRecord>)>,
    /// An event asked for them before they were loaded.
    wanted: bool,
}

/// What [`Replayed`] answers before the game is loaded: decode again once it is.
const NOT_LOADED: &str = "(the game's moves are not loaded yet)";

impl History for Replayed {
    fn record(&mut self, number: u32) -> Result<MoveRecord, String> {
        let Some((_, moves)) = &self.state else {
            self.wanted = true;
            return Err(NOT_LOADED.to_owned());
        };
        (number as usize)
            .checked_sub(1)
            .and_then(|index| moves.get(index))
            .cloned()
            .ok_or_else(|| format!("an event refers to move {number}, which is not stored"))
    }

    fn position_after(&mut self, moves: u32) -> Result<Position, String> {
        let Some((start, records)) = &self.state else {
            self.wanted = true;
            return Err(NOT_LOADED.to_owned());
        };
        position_after(*start, records, moves)
    }
}

fn position_after(start: Position, records: &[MoveRecord], moves: u32) -> Result<Position, String> {
    match moves {
        0 => Ok(start),
        n => records
            .get(n as usize - 1)
            .map(|record| record.position)
            .ok_or_else(|| format!("an event refers to move {n}, which is not stored")),
    }
}

/// A game's events after `after`, in the caller's (repeatable read) transaction.
pub(crate) async fn game_events_since<C: GenericClient>(
    client: &C,
    id: &GameId,
    after: u64,
) -> Result<Since<GameEvent>, StoreError> {
    let row = query_opt(
        client,
        "SELECT ord, sequence, status, info FROM games WHERE id = $1",
        &[&id.as_str()],
    )
    .await?
    .ok_or(StoreError::NotFound)?;
    let ord: i64 = get(&row, 0, id)?;
    let last: i64 = get(&row, 1, id)?;
    let status: String = get(&row, 2, id)?;
    let last = u64::try_from(last).map_err(|_| corrupt(id, format_args!("sequence {last}")))?;
    if after > last {
        return Ok(Since::Ahead { last });
    }
    // Over is not enough: a finished game's log goes on while a rematch can be offered. The
    // summary is decoded only then; the position it may lack does not matter here.
    let over =
        status == status_name(GameStatus::Finished) || status == status_name(GameStatus::Aborted);
    let done = over && {
        let info: String = get(&row, 3, id)?;
        let dto: InfoDto = serde_json::from_str(&info).map_err(|e| corrupt(id, e))?;
        dto.decode().map_err(|e| corrupt(id, e))?.info.log_closed()
    };
    let after_db = i64::try_from(after).unwrap_or(i64::MAX);
    let rows = query(
        client,
        "SELECT sequence, time, event FROM game_events
         WHERE game = $1 AND sequence > $2 ORDER BY sequence",
        &[&ord, &after_db],
    )
    .await?;
    let mut dtos = Vec::with_capacity(rows.len());
    for row in &rows {
        let sequence: i64 = get(row, 0, id)?;
        let time: i64 = get(row, 1, id)?;
        let json: String = get(row, 2, id)?;
        let dto: GameEventDto = serde_json::from_str(&json).map_err(|e| corrupt(id, e))?;
        dtos.push((sequence, time, dto));
    }
    let mut history = Replayed::default();
    let mut events = decode_events(id, &dtos, &mut history);
    if history.wanted {
        let state = load_state(client, id).await?;
        history.state = Some((state.info().start, state.moves().to_vec()));
        events = decode_events(id, &dtos, &mut history);
    }
    let events = events?;
    if events.len() as u64 != last - after {
        return Err(corrupt(id, "its event log has gaps"));
    }
    Ok(Since::Events { events, done })
}

fn decode_events(
    id: &GameId,
    dtos: &[(i64, i64, GameEventDto)],
    history: &mut Replayed,
) -> Result<Vec<Arc<GameEvent>>, StoreError> {
    let mut events = Vec::with_capacity(dtos.len());
    for (sequence, time, dto) in dtos {
        let kind = match dto.clone().decode(history) {
            Ok(kind) => kind,
            // Decoded again once the moves are loaded.
            Err(_) if history.wanted && history.state.is_none() => continue,
            Err(e) => return Err(corrupt(id, e)),
        };
        events.push(Arc::new(GameEvent {
            game_id: id.clone(),
            sequence: u64::try_from(*sequence)
                .map_err(|_| corrupt(id, format_args!("event sequence {sequence}")))?,
            time: time_from_db(*time),
            kind,
        }));
    }
    Ok(events)
}

/// The last lobby sequence.
pub(crate) async fn last_lobby_sequence<C: GenericClient>(client: &C) -> Result<u64, StoreError> {
    let row = query_opt(client, "SELECT last FROM lobby_counter", &[])
        .await?
        .ok_or_else(|| StoreError::Backend("the lobby counter row is missing".to_owned()))?;
    let last: i64 = row
        .try_get(0)
        .map_err(|e| StoreError::Backend(format!("postgres: the lobby counter: {e}")))?;
    u64::try_from(last)
        .map_err(|_| StoreError::Backend(format!("the lobby counter is negative: {last}")))
}

/// Lobby events after `after`, in the caller's (repeatable read) transaction. An event that
/// does not decode (of a damaged game, or damaged itself) is left out: watchers skip over its
/// sequence number rather than lose the lobby.
pub(crate) async fn lobby_events_since<C: GenericClient>(
    client: &C,
    after: u64,
    damage: &Damage,
) -> Result<Since<LobbyEvent>, StoreError> {
    let last = last_lobby_sequence(client).await?;
    if after > last {
        return Ok(Since::Ahead { last });
    }
    if last - after > LOBBY_REPLAY_LIMIT {
        return Ok(Since::Gone);
    }
    let after_db = i64::try_from(after).unwrap_or(i64::MAX);
    let rows = query(
        client,
        "SELECT sequence, time, event FROM lobby_events WHERE sequence > $1 ORDER BY sequence",
        &[&after_db],
    )
    .await?;
    // Positions that a game's setup does not determine, by game: loaded once, between passes.
    let mut positions: HashMap<GameId, Result<(Position, Vec<MoveRecord>), String>> =
        HashMap::new();
    let mut wanted: Vec<GameId> = Vec::new();
    let mut decoded = Vec::with_capacity(rows.len());
    for pass in 0..2 {
        decoded.clear();
        for row in &rows {
            let sequence: i64 = row.try_get(0).unwrap_or(-1);
            let time: i64 = row.try_get(1).unwrap_or(0);
            let kind = row
                .try_get::<_, String>(2)
                .map_err(|e| e.to_string())
                .and_then(|json| {
                    serde_json::from_str::<LobbyEventDto>(&json).map_err(|e| e.to_string())
                })
                .and_then(|dto| {
                    dto.decode(&mut |game: &GameId, moves: u32| match positions.get(game) {
                        Some(Ok((start, records))) => position_after(*start, records, moves),
                        Some(Err(error)) => Err(error.clone()),
                        None => {
                            wanted.push(game.clone());
                            Err(NOT_LOADED.to_owned())
                        }
                    })
                });
            decoded.push((sequence, time, kind));
        }
        if pass == 1 || wanted.is_empty() {
            break;
        }
        for game in wanted.drain(..) {
            let state = load_state(client, &game).await;
            if let Err(error @ StoreError::Unavailable(_)) = state {
                return Err(error);
            }
            let state = state
                .map(|state| (state.info().start, state.moves().to_vec()))
                .map_err(|e| e.to_string());
            positions.insert(game, state);
        }
    }
    let mut events = Vec::with_capacity(decoded.len());
    for (sequence, time, kind) in decoded {
        match (u64::try_from(sequence), kind) {
            (Ok(sequence), Ok(kind)) => events.push(Arc::new(LobbyEvent {
                sequence,
                time: time_from_db(time),
                kind,
            })),
            (_, Err(error)) => damage.report(&format!("lobby event {sequence}"), &error),
            (Err(_), Ok(_)) => {
                damage.report(&format!("lobby event {sequence}"), &"a negative sequence");
            }
        }
    }
    Ok(Since::Events {
        events,
        done: false,
    })
}
