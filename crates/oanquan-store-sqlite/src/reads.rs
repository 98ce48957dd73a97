//! Reads on a pool of read-only connections: loading and replaying games, listings, and the
//! check of every unfinished game at start.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use oanquan_game::{
    GameFilter, GameId, GameInfo, GameState, GameStatus, MoveRecord, PlayedMove, StoreError,
    TokenHash,
};
use oanquan_rules::{ByPlayer, Position};
use rusqlite::{Connection, OptionalExtension as _};
use tracing::{info, warn};

use crate::codec::{
    DecodedInfo, GameEventDto, History, InfoDto, parse_player, status_name, time_from_db,
};
use crate::fault::{self, Damage, backend, corrupt};
use crate::plain::{PlainPart, after_plain_move, plain_part};
use crate::schema::{self, OpenError};

/// Idle read connections kept open.
pub(crate) const MAX_IDLE_READERS: usize = 8;

/// Reads running at once; the others wait their turn, in order. Each running read holds a
/// blocking thread and a connection with its own page cache: unbounded, a burst of reads (a
/// thousand spectators subscribing to one game) made one of each per read, hundreds of threads
/// and over 500 MiB (BENCHMARKS.md, session 10).
pub(crate) const MAX_READERS: usize = 16;

/// Replays every unfinished game once at start: a game that no longer loads is reported now,
/// by id, rather than when its players come back.
pub(crate) fn check_unfinished(
    conn: &Connection,
    path: &Path,
    damage: &Damage,
) -> Result<(), OpenError> {
    let error = |source| OpenError::Sqlite {
        path: path.to_owned(),
        context: "listing unfinished games",
        source,
    };
    let ids: Vec<String> = conn
        .prepare("SELECT id FROM games WHERE status IN ('waiting', 'active') ORDER BY ord")
        .and_then(|mut statement| {
            statement
                .query_map([], |row| {
                    // Lossy: a damaged id is one broken game below, not a refused database.
                    Ok(
                        String::from_utf8_lossy(row.get_ref(0)?.as_bytes().unwrap_or_default())
                            .into_owned(),
                    )
                })?
                .collect::<Result<_, _>>()
        })
        .map_err(error)?;
    let mut broken = 0;
    for id in &ids {
        let loaded = GameId::parse(id)
            .map_err(|e| StoreError::Backend(e.to_string()))
            .and_then(|id| fault::of_game(&id, load_state(conn, &id)));
        if let Err(error) = damage.check(loaded) {
            broken += 1;
            if !matches!(error, StoreError::Damaged { .. }) {
                damage.report(&format!("game {id}"), &error);
            }
        }
    }
    info!(
        path = %path.display(),
        unfinished = ids.len() - broken,
        broken,
        "database open; unfinished games resume"
    );
    Ok(())
}

#[derive(Debug)]
pub(crate) struct Readers {
    path: PathBuf,
    state: Mutex<ReaderState>,
    /// Signalled whenever a busy connection is given back.
    returned: Condvar,
    /// [`MAX_READERS`] permits: a read takes one before it takes a blocking thread.
    permits: Arc<tokio::sync::Semaphore>,
}

#[derive(Debug, Default)]
pub(crate) struct ReaderState {
    idle: Vec<Connection>,
    /// Connections out on a query.
    busy: usize,
    /// The most `busy` has been (tests check it stays within [`MAX_READERS`]).
    pub(crate) peak: usize,
    closed: bool,
}

impl Readers {
    pub(crate) fn new(path: PathBuf) -> Readers {
        Readers {
            path,
            state: Mutex::default(),
            returned: Condvar::new(),
            permits: Arc::new(tokio::sync::Semaphore::new(MAX_READERS)),
        }
    }

    /// Runs `query` on a read connection on the blocking pool, once one of the
    /// [`MAX_READERS`] places is free.
    pub(crate) async fn read<T: Send + 'static>(
        self: Arc<Self>,
        query: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        // Owned and moved into the blocking task: a caller that goes away while its read runs
        // does not free a place the read still holds.
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| {
                StoreError::Unavailable(
                    "the database is closed (the server is stopping)".to_owned(),
                )
            })?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            self.with(query)
        })
        .await
        .map_err(|e| StoreError::Backend(format!("database reader task: {e}")))?
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, ReaderState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `query` in a read transaction (one consistent snapshot) on a pooled connection.
    pub(crate) fn with<T>(
        &self,
        query: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let pooled = {
            let mut state = self.state();
            if state.closed {
                return Err(StoreError::Unavailable(
                    "the database is closed (the server is stopping)".to_owned(),
                ));
            }
            state.busy += 1;
            state.peak = state.peak.max(state.busy);
            state.idle.pop()
        };
        let give_back = |conn: Option<Connection>| {
            let mut state = self.state();
            state.busy -= 1;
            if let Some(conn) = conn {
                if !state.closed && state.idle.len() < MAX_IDLE_READERS {
                    state.idle.push(conn);
                } else {
                    drop(conn);
                }
            }
            drop(state);
            self.returned.notify_all();
        };
        let mut conn = match pooled.map_or_else(|| schema::open_reader(&self.path), Ok) {
            Ok(conn) => conn,
            Err(error) => {
                give_back(None);
                return Err(backend(error));
            }
        };
        let result = conn
            .transaction()
            .map_err(backend)
            .and_then(|tx| query(&tx));
        give_back(conn.is_autocommit().then_some(conn));
        result
    }

    /// Closes the idle connections and waits (a few seconds at most) for the busy ones, which
    /// close as they come back; later reads fail.
    pub(crate) fn close(&self) {
        // Reads still waiting for their turn fail now rather than after the running ones.
        self.permits.close();
        let mut state = self.state();
        state.closed = true;
        state.idle.clear();
        let (state, timeout) = self
            .returned
            .wait_timeout_while(state, schema::BUSY_TIMEOUT, |state| state.busy > 0)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if timeout.timed_out() {
            warn!(
                busy = state.busy,
                "database reads still running at close; the write-ahead log may stay"
            );
        }
    }
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

/// Loads a whole game and replays it, cross-checking the stored position.
pub(crate) fn load_state(conn: &Connection, id: &GameId) -> Result<GameState, StoreError> {
    type Row = (i64, [Option<Vec<u8>>; 4], String, Option<String>);
    let (ord, [first, second, rematch_first, rematch_second], json, creator): Row = conn
        .prepare_cached(
            "SELECT ord, token_first, token_second, rematch_token_first, rematch_token_second,
                    info, creator
             FROM games WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.query_row([id.as_str()], |row| {
                Ok((
                    row.get(0)?,
                    [row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?],
                    row.get(5)?,
                    row.get(6)?,
                ))
            })
            .optional()
        })
        .map_err(backend)?
        .ok_or(StoreError::NotFound)?;
    let creator = creator
        .map(|text| {
            text.parse()
                .map_err(|e| corrupt(id, format_args!("creator: {e}")))
        })
        .transpose()?;
    let dto: InfoDto = serde_json::from_str(&json).map_err(|e| corrupt(id, e))?;
    let DecodedInfo {
        mut info,
        mut position_known,
    } = dto.decode().map_err(|e| corrupt(id, e))?;
    let token_hashes = ByPlayer::new(token(id, first)?, token(id, second)?);
    let rematch_tokens = ByPlayer::new(token(id, rematch_first)?, token(id, rematch_second)?);

    // The whole log: the moves from their `MovePlayed` rows, and what the plain moves logged
    // after the row changed in the summary (see `plain::after_plain_move`).
    // The count is the row's word, checked against the log below: a damaged one must not size
    // an allocation (4 billion moves would abort the process, not fail one game).
    let presize = usize::try_from(info.move_count).map_or(0, |count| count.min(1 << 12));
    let mut moves: Vec<PlayedMove> = Vec::with_capacity(presize);
    let mut statement = conn
        .prepare_cached(
            "SELECT sequence, time, event, player, mv, mv_time FROM game_log
             WHERE game = ?1 ORDER BY sequence",
        )
        .map_err(backend)?;
    let mut rows = statement.query([ord]).map_err(backend)?;
    while let Some(row) = rows.next().map_err(backend)? {
        let sequence: i64 = row.get(0).map_err(backend)?;
        let time: i64 = row.get(1).map_err(backend)?;
        let mv: Option<String> = row.get(4).map_err(backend)?;
        if let Some(mv) = &mv {
            let player: Option<String> = row.get(3).map_err(backend)?;
            let player = player.ok_or_else(|| corrupt(id, "a move without its player"))?;
            let mv_time: Option<i64> = row.get(5).map_err(backend)?;
            moves.push(PlayedMove {
                player: parse_player(&player).map_err(|e| corrupt(id, e))?,
                mv: mv.parse().map_err(|e| corrupt(id, e))?,
                time: time_from_db(mv_time.unwrap_or(time)),
            });
        }
        let sequence = sequence as u64;
        if sequence <= info.sequence {
            continue;
        }
        if sequence != info.sequence + 1 {
            return Err(corrupt(
                id,
                format_args!("its log skips to event {sequence}"),
            ));
        }
        // Text that is not UTF-8 is a damaged game, not a failed query.
        let event = row
            .get_ref(2)
            .map_err(backend)?
            .as_str()
            .map_err(|_| corrupt(id, "an event is not UTF-8 text"))?;
        let dto: GameEventDto = serde_json::from_str(event).map_err(|e| corrupt(id, e))?;
        match plain_part(&dto) {
            Some(PlainPart::Move { number, clock }) => {
                if mv.is_none() || number as usize != moves.len() {
                    return Err(corrupt(
                        id,
                        format_args!("event {sequence} does not hold move {number}"),
                    ));
                }
                after_plain_move(&mut info, number, clock.as_ref(), time_from_db(time));
                position_known = false;
            }
            Some(PlainPart::Turn) => {}
            None => {
                return Err(corrupt(
                    id,
                    format_args!("event {sequence}, after its stored summary, is not a move"),
                ));
            }
        }
        info.sequence = sequence;
    }
    let stored_position = position_known.then_some(info.position);
    GameState::restore(
        info,
        token_hashes,
        rematch_tokens,
        moves,
        creator,
        stored_position,
    )
    .map_err(|e| corrupt(id, e))
}

/// The last sequence in game `id`'s log (its row's may be older), `None` for an unknown game.
pub(crate) fn last_sequence(conn: &Connection, id: &GameId) -> Result<Option<u64>, StoreError> {
    conn.prepare_cached(
        "SELECT max(sequence, (SELECT coalesce(max(sequence), 0) FROM game_log
                               WHERE game = games.ord))
         FROM games WHERE id = ?1",
    )
    .and_then(|mut s| {
        s.query_row([id.as_str()], |row| row.get::<_, i64>(0))
            .optional()
    })
    .map(|last| last.map(|last| last as u64))
    .map_err(backend)
}

/// A game's start position and moves for decoding its events, loaded on first use.
pub(crate) struct Lazy<'a> {
    pub(crate) conn: &'a Connection,
    pub(crate) id: &'a GameId,
    pub(crate) state: Option<(Position, Vec<MoveRecord>)>,
}

impl Lazy<'_> {
    pub(crate) fn state(&mut self) -> Result<&(Position, Vec<MoveRecord>), String> {
        if self.state.is_none() {
            let state = load_state(self.conn, self.id).map_err(|e| e.to_string())?;
            // Indexed by number below: one copy into a vector rather than a walk per lookup.
            self.state = Some((state.info().start, state.moves().to_vec()));
        }
        Ok(self.state.as_ref().expect("just loaded"))
    }
}

impl History for Lazy<'_> {
    fn record(&mut self, number: u32) -> Result<MoveRecord, String> {
        let (_, moves) = self.state()?;
        (number as usize)
            .checked_sub(1)
            .and_then(|index| moves.get(index))
            .cloned()
            .ok_or_else(|| format!("an event refers to move {number}, which is not stored"))
    }

    fn position_after(&mut self, moves: u32) -> Result<Position, String> {
        let (start, records) = self.state()?;
        match moves {
            0 => Ok(*start),
            n => records
                .get(n as usize - 1)
                .map(|record| record.position)
                .ok_or_else(|| format!("an event refers to move {n}, which is not stored")),
        }
    }
}

/// Decodes the `games.info` column of game `id`, replaying the game only if the position needs
/// it.
pub(crate) fn decode_info(
    conn: &Connection,
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
    // Plain moves logged after the row (see `writer`) are in the replay only.
    let current = last_sequence(conn, id)?.is_some_and(|last| last == decoded.info.sequence);
    if decoded.position_known && current {
        Ok(decoded.info)
    } else {
        Ok(load_state(conn, id)?.into_info())
    }
}

pub(crate) fn read_info(conn: &Connection, id: &GameId) -> Result<GameInfo, StoreError> {
    let json: Option<String> = conn
        .prepare_cached("SELECT info FROM games WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row([id.as_str()], |row| {
                // Not as a `String`: text that is not UTF-8 is a damaged game, not a failed query.
                Ok(row.get_ref(0)?.as_str().ok().map(str::to_owned))
            })
            .optional()
        })
        .map_err(backend)?
        .ok_or(StoreError::NotFound)?;
    let json = json.ok_or_else(|| corrupt(id, "its data is not UTF-8 text"))?;
    decode_info(conn, id, &json)
}

/// Decodes one `(ord, id, info)` row of `games`.
pub(crate) fn decode_row(
    conn: &Connection,
    row: &rusqlite::Row<'_>,
) -> Result<GameInfo, (String, StoreError)> {
    let text = |index| {
        row.get_ref(index)
            .ok()
            .and_then(|value| value.as_str().ok())
    };
    let raw_id = text(1).unwrap_or("(not text)").to_owned();
    let id = GameId::parse(&raw_id).map_err(|e| {
        let error = StoreError::Backend(format!("a stored game id does not parse: {e}"));
        (format!("game {raw_id}"), error)
    })?;
    let info = text(2)
        .ok_or_else(|| corrupt(&id, "its data is not UTF-8 text"))
        .and_then(|json| decode_info(conn, &id, json));
    info.map_err(|error| (format!("game {id}"), error))
}

/// The `games.status` values a filter accepts, padded to four for one prepared statement.
pub(crate) fn statuses(filter: GameFilter) -> [&'static str; 4] {
    let [waiting, active, finished, aborted] = [
        GameStatus::WaitingForPlayers,
        GameStatus::Active,
        GameStatus::Finished,
        GameStatus::Aborted,
    ]
    .map(status_name);
    match filter {
        GameFilter::Open => [waiting; 4],
        GameFilter::Active => [active; 4],
        GameFilter::Finished => [finished, aborted, finished, aborted],
        GameFilter::All => [waiting, active, finished, aborted],
    }
}

/// Games with `ord < end` whose status is one of `statuses`, newest first, at most `limit`,
/// plus the `ord` of the next one if there is one. A game that does not decode is skipped (and
/// reported): one damaged row must not hide every other game.
/// The listing's statement for `statuses` distinct statuses (`?1` the end, then each status).
pub(crate) fn listing_sql(statuses: usize) -> String {
    (0..statuses)
        .map(|i| {
            format!(
                "SELECT ord, id, info FROM games WHERE status = ?{} AND ord < ?1",
                i + 2
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ")
        + " ORDER BY 1 DESC"
}

pub(crate) fn list_games(
    conn: &Connection,
    statuses: [&str; 4],
    limit: usize,
    end: i64,
    damage: &Damage,
) -> Result<(Vec<GameInfo>, Option<i64>), StoreError> {
    let mut wanted = statuses.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    // One ordered walk of the status index per status, merged (`MERGE (UNION ALL)` in the
    // plan): rows come newest first as they are stepped, and no LIMIT is needed, so a page
    // reads as many as it takes to fill it. `status IN (…) ORDER BY ord` read and sorted every
    // matching row, info and all, before the first: with 36,000 waiting games, 130 ms a page
    // against 0.5 ms, and an outside probe held a core by opening lobby streams.
    let mut statement = conn
        .prepare_cached(&listing_sql(wanted.len()))
        .map_err(backend)?;
    let mut bound: Vec<&dyn rusqlite::ToSql> = vec![&end];
    bound.extend(wanted.iter().map(|status| status as &dyn rusqlite::ToSql));
    let mut rows = statement.query(bound.as_slice()).map_err(backend)?;
    let mut games = Vec::new();
    while let Some(row) = rows.next().map_err(backend)? {
        let ord: i64 = row.get(0).map_err(backend)?;
        if games.len() == limit {
            return Ok((games, Some(ord)));
        }
        match decode_row(conn, row) {
            Ok(info) if damage.known(&info.id).is_some() => {}
            Ok(info) => games.push(info),
            Err((what, error)) => damage.report(&what, &error),
        }
    }
    Ok((games, None))
}
