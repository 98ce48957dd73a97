//! `oanquan.v1.GameService`: unpack, call the [`GameManager`], convert. No game logic here.

use std::sync::Arc;

use oanquan_proto::v1 as pb;
use prost::Message as _;
use tonic::{Request, Response, Status};

use std::pin::Pin;

use futures::Stream;
use tokio::sync::mpsc;

use super::fit::{FRAMING, fit, fitting, page_that_fits};
use super::status::into_status;
use super::stream::{self, Side, StreamSettings, WatchStream};
use crate::domain::account::{Account, ApiKey};
use crate::domain::seek::{SeekInfo, SeekOutcome, SeekPool, SeekRequest};
use crate::domain::{
    Credential, GameError, GameFeed, GameId, GameManager, LobbyFeed, NewGame, PlayerToken, Seated,
    Watch, WatchItem,
};
use crate::grpc::deadline;
use crate::metrics::StreamKind;
use oanquan_convert::{self as convert, SeekChange};

/// The GameService adapter.
#[derive(Debug, Clone)]
pub struct GameApi {
    manager: Arc<GameManager>,
    seeks: Arc<SeekPool>,
    streams: StreamSettings,
    /// The largest response encoded (`--max-message-size`): `ListMoves` stops short of it.
    max_response: usize,
}

impl GameApi {
    /// An adapter over `manager`, pairing seeks in `seeks`.
    #[must_use]
    pub fn new(
        manager: Arc<GameManager>,
        seeks: Arc<SeekPool>,
        streams: StreamSettings,
    ) -> GameApi {
        GameApi {
            manager,
            seeks,
            streams,
            max_response: usize::MAX,
        }
    }

    /// The same adapter, keeping `ListMoves` answers within `max` bytes.
    #[must_use]
    pub fn with_max_response(mut self, max: usize) -> GameApi {
        self.max_response = max;
        self
    }

    /// What every watch stream of this service runs with.
    pub(super) fn streams(&self) -> &StreamSettings {
        &self.streams
    }
}

/// The bearer credential of a request, as sent. Scheme matching is case-insensitive (RFC 7235).
pub(super) fn bearer<T>(request: &Request<T>) -> Result<&str, GameError> {
    let mut values = request.metadata().get_all("authorization").iter();
    let value = values.next().ok_or(GameError::MissingToken)?;
    if values.next().is_some() {
        return Err(GameError::SeveralAuthorizations);
    }
    let value = value
        .to_str()
        .map_err(|_| GameError::MalformedAuthorization)?;
    crate::bearer::credential(value).ok_or(GameError::MalformedAuthorization)
}

/// Who makes a call on a game: an API key's account (authenticated here, so that a revoked key
/// fails even on a game's calls), or else a seat token (checked by the game itself).
async fn credential(manager: &GameManager, bearer: &str) -> Result<Credential, GameError> {
    if ApiKey::is_meant(bearer) {
        Ok(Credential::Account(manager.authenticate(bearer).await?.id))
    } else {
        Ok(Credential::Seat(PlayerToken::from_client(bearer)))
    }
}

/// The credential of a game's own call (PlayMove, Resign, …), which needs one.
async fn required_credential<T>(
    manager: &GameManager,
    request: &Request<T>,
) -> Result<Credential, GameError> {
    credential(manager, bearer(request)?).await
}

/// A call a seat makes on one game (Resign, OfferDraw, …).
trait SeatCall {
    /// The request's `game_id`.
    fn game_id(&self) -> &str;
}

macro_rules! seat_calls {
    ($($request:ty),* $(,)?) => {
        $(impl SeatCall for $request {
            fn game_id(&self) -> &str {
                &self.game_id
            }
        })*
    };
}

seat_calls!(
    pb::ResignRequest,
    pb::AbortGameRequest,
    pb::OfferDrawRequest,
    pb::DeclineDrawRequest,
    pb::ClaimVictoryRequest,
    pb::OfferRematchRequest,
    pb::DeclineRematchRequest,
);

/// The credential and the game of a [`SeatCall`], the credential checked first (a call without
/// one is UNAUTHENTICATED whatever its game id).
async fn seat_call<T: SeatCall>(
    manager: &GameManager,
    request: &Request<T>,
) -> Result<(Credential, GameId), Status> {
    let who = required_credential(manager, request)
        .await
        .map_err(into_status)?;
    let id = game_id(request.get_ref().game_id()).map_err(into_status)?;
    Ok((who, id))
}

/// The account a CreateGame, JoinGame, Seek or AcceptSeek plays as: that of an API key if the
/// request carries one, none without `authorization`. A seat token (from another game, say)
/// means nothing on these calls and is ignored, as it was before accounts. Anything else is
/// refused rather than ignored, so that nobody plays anonymously believing they play as their
/// account: an API key that does not authenticate, a mangled one (`Bearer OQK_…`, the key
/// without its prefix), another scheme (`Basic`), several values.
async fn playing_account<T>(
    manager: &GameManager,
    request: &Request<T>,
) -> Result<Option<Account>, GameError> {
    match bearer(request) {
        Ok(key) if ApiKey::is_meant(key) => manager.authenticate(key).await.map(Some),
        Ok(token) if PlayerToken::has_shape(token) => Ok(None),
        Ok(_) => Err(GameError::NotAnApiKey),
        Err(GameError::MissingToken) => Ok(None),
        Err(refused) => Err(refused),
    }
}

/// The credential of a request that may come without one (`WatchGame`): `None` without
/// `authorization` metadata; a malformed one is refused rather than ignored.
async fn optional_credential<T>(
    manager: &GameManager,
    request: &Request<T>,
) -> Result<Option<Credential>, GameError> {
    if request.metadata().get("authorization").is_none() {
        return Ok(None);
    }
    required_credential(manager, request).await.map(Some)
}

/// Starts a `WatchGame` watch: as the seat of the bearer (seat token or API key) if there is
/// one, else as a spectator of the connection the request came on. Also says whether it follows
/// the rematch.
pub(super) async fn start_game_watch(
    api: &GameApi,
    request: Request<pb::WatchGameRequest>,
) -> Result<(Watch<GameFeed>, bool), GameError> {
    let id = game_id(&request.get_ref().game_id)?;
    let who = optional_credential(&api.manager, &request).await?;
    let peer = request.remote_addr();
    let request = request.into_inner();
    let mut watch = api
        .manager
        .watch_game_from(&id, request.after_sequence, peer, who.as_ref())
        .await?;
    // Resumed after the end of a finished game, with nothing missed: the client has had the
    // GameOver, so the stream ends now as it would have after it (an outside probe's resume
    // got heartbeats until its deadline, holding a spectator's place). Only when the game's
    // last event is the one the client has: a GameOver committed since the watch read the log
    // is still on its way to it.
    if !request.follow_rematch && watch.is_up_to_date() {
        let game = api.manager.get_game(&id).await?;
        if game.status.is_over() && game.sequence == watch.last_sequence() {
            watch.close();
        }
    }
    Ok((watch, request.follow_rematch))
}

/// When a `WatchGame` stream ends before its game's log does: without `follow_rematch`, after
/// `GameOver` (or a snapshot of a game that is over), as before rematches existed.
pub(super) fn game_is_last(
    follow_rematch: bool,
) -> impl Fn(&WatchItem<GameFeed>) -> bool + Send + 'static {
    move |item| {
        !follow_rematch
            && match item {
                WatchItem::Event(event) => {
                    matches!(event.kind, crate::domain::GameEventKind::GameOver { .. })
                }
                WatchItem::Snapshot { snapshot, .. } => snapshot.status.is_over(),
            }
    }
}

/// Parses the game id and notes it on the RPC's span.
fn game_id(id: &str) -> Result<GameId, GameError> {
    let id = convert::game_id(id, "game_id")?;
    tracing::Span::current().record("game_id", id.as_str());
    Ok(id)
}

pub(super) fn game_item(item: WatchItem<GameFeed>) -> pb::WatchGameResponse {
    let event = match item {
        WatchItem::Snapshot { snapshot, sequence } => {
            convert::game_snapshot_out(&snapshot, sequence)
        }
        WatchItem::Event(event) => convert::game_event_out(&event),
    };
    pb::WatchGameResponse { event: Some(event) }
}

pub(super) fn game_heartbeat(sequence: u64) -> pb::WatchGameResponse {
    pb::WatchGameResponse {
        event: Some(convert::game_heartbeat_out(sequence)),
    }
}

fn lobby_item(
    item: WatchItem<LobbyFeed>,
    seeks: &SeekPool,
    max_response: usize,
) -> pb::WatchLobbyResponse {
    let event = match item {
        WatchItem::Snapshot { snapshot, sequence } => {
            let mut event = convert::lobby_snapshot_out(&snapshot, &[], sequence);
            if let Some(pb::lobby_event::Kind::Snapshot(snapshot)) = &mut event.kind {
                // The newest games and the oldest seeks, as many as fit, the seeks kept up to
                // half the room: games alone filled it, and a new lobby showed none of 300
                // seeks that a resumed one listed.
                let room = max_response.saturating_sub(FRAMING);
                let mut listed: Vec<pb::Seek> =
                    seeks.list().iter().map(convert::seek_out).collect();
                let for_seeks = fitting(&listed, room / 2).bytes;
                let games = fitting(&snapshot.games, room - for_seeks);
                snapshot.games.truncate(games.count);
                fit(&mut listed, room - games.bytes);
                snapshot.seeks = listed;
            }
            event
        }
        WatchItem::Event(event) => convert::lobby_event_out(&event),
    };
    pb::WatchLobbyResponse { event: Some(event) }
}

fn lobby_seeks(change: SeekChange, sequence: u64) -> pb::WatchLobbyResponse {
    pb::WatchLobbyResponse {
        event: Some(convert::lobby_seeks_out(change, sequence)),
    }
}

/// The seeks' changes for a lobby stream: the whole list first when the stream resumes (its
/// snapshot, which has them, is not sent), then each change; the whole list again whenever
/// the stream fell behind them.
fn seek_changes(
    pool: Arc<SeekPool>,
    resumes: bool,
    max_response: usize,
) -> impl Stream<Item = SeekChange> + Send + Unpin + 'static {
    use futures::StreamExt as _;
    use tokio::sync::broadcast::error::RecvError;
    let room = max_response.saturating_sub(FRAMING);
    // Measured as messages, cut as seeks: the list is converted again on its way out.
    let list = move |mut seeks: Vec<SeekInfo>| {
        let listed: Vec<pb::Seek> = seeks.iter().map(convert::seek_out).collect();
        seeks.truncate(fitting(&listed, room).count);
        SeekChange::List(seeks)
    };
    let (seeks, rx) = pool.subscribe();
    let first = resumes.then(|| list(seeks));
    let changes = futures::stream::unfold((rx, pool), move |(mut rx, pool)| async move {
        let change = match rx.recv().await {
            Ok(update) => SeekChange::Update(update),
            Err(RecvError::Lagged(_)) => list(pool.list()),
            Err(RecvError::Closed) => return None,
        };
        Some((change, (rx, pool)))
    });
    Box::pin(futures::stream::iter(first).chain(changes))
}

fn seated_parts(seated: &Seated) -> (Option<pb::Game>, String, i32) {
    (
        Some(convert::game_out(&seated.game)),
        seated.token.expose().to_owned(),
        convert::player_out(seated.seat),
    )
}

/// The `Seek` stream.
pub type SeekStream = Pin<Box<dyn Stream<Item = Result<pb::SeekResponse, Status>> + Send>>;

fn seek_message(kind: pb::seek_response::Kind) -> Result<pb::SeekResponse, Status> {
    Ok(pb::SeekResponse { kind: Some(kind) })
}

fn paired(seated: &Seated) -> pb::seek_response::Kind {
    let (game, player_token, seat) = seated_parts(seated);
    pb::seek_response::Kind::Paired(pb::seek_response::Paired {
        game,
        player_token,
        seat,
    })
}

fn lobby_heartbeat(sequence: u64) -> pb::WatchLobbyResponse {
    pb::WatchLobbyResponse {
        event: Some(convert::lobby_heartbeat_out(sequence)),
    }
}

#[tonic::async_trait]
impl pb::game_service_server::GameService for GameApi {
    async fn create_game(
        &self,
        request: Request<pb::CreateGameRequest>,
    ) -> Result<Response<pb::CreateGameResponse>, Status> {
        // Not cut by the server's request timeout once begun: its answer holds a secret shown
        // once (see `deadline`).
        deadline::begin_once(&request);
        let client = request.remote_addr().map(|addr| addr.ip());
        let account = playing_account(&self.manager, &request)
            .await
            .map_err(into_status)?;
        let request = request.into_inner();
        let (rules, preset) =
            convert::rules_spec(request.rules.as_ref(), "rules").map_err(into_status)?;
        let start = request
            .start_position
            .as_ref()
            .map(|p| convert::position(Some(p), rules, "start_position"))
            .transpose()
            .map_err(into_status)?;
        let seat = convert::optional_player(request.seat, "seat").map_err(into_status)?;
        let computer = convert::computer_opponent(request.computer.as_ref(), "computer")
            .map_err(into_status)?;
        let time_control = convert::time_control(request.time_control.as_ref(), "time_control")
            .map_err(into_status)?;
        let seated = self
            .manager
            .create_game_from(
                client,
                NewGame {
                    rules,
                    preset,
                    start,
                    seat,
                    display_name: request.display_name,
                    computer,
                    time_control,
                    account,
                    rated: request.rated,
                },
            )
            .await
            .map_err(into_status)?;
        tracing::Span::current().record("game_id", seated.game.id.as_str());
        Ok(Response::new(pb::CreateGameResponse {
            game: Some(convert::game_out(&seated.game)),
            player_token: seated.token.expose().to_owned(),
            seat: convert::player_out(seated.seat),
        }))
    }

    async fn join_game(
        &self,
        request: Request<pb::JoinGameRequest>,
    ) -> Result<Response<pb::JoinGameResponse>, Status> {
        // Not cut by the server's request timeout once begun: its answer holds a secret shown
        // once (see `deadline`).
        deadline::begin_once(&request);
        let client = request.remote_addr().map(|addr| addr.ip());
        let account = playing_account(&self.manager, &request)
            .await
            .map_err(into_status)?;
        let request = request.into_inner();
        let id = game_id(&request.game_id).map_err(into_status)?;
        let seated = self
            .seeks
            .join(&id, &request.display_name, client, account.as_ref())
            .await
            .map_err(into_status)?;
        Ok(Response::new(pb::JoinGameResponse {
            game: Some(convert::game_out(&seated.game)),
            player_token: seated.token.expose().to_owned(),
            seat: convert::player_out(seated.seat),
        }))
    }

    async fn get_game(
        &self,
        request: Request<pb::GetGameRequest>,
    ) -> Result<Response<pb::GetGameResponse>, Status> {
        let id = game_id(&request.get_ref().game_id).map_err(into_status)?;
        let game = self.manager.get_game(&id).await.map_err(into_status)?;
        Ok(Response::new(pb::GetGameResponse {
            game: Some(convert::game_out(&game)),
        }))
    }

    async fn list_games(
        &self,
        request: Request<pb::ListGamesRequest>,
    ) -> Result<Response<pb::ListGamesResponse>, Status> {
        let request = request.into_inner();
        let filter = convert::filter(request.filter).map_err(into_status)?;
        let page_size = usize::try_from(request.page_size).unwrap_or(usize::MAX);
        let token = Some(request.page_token.as_str()).filter(|t| !t.is_empty());
        let (page, games) = page_that_fits(
            page_size,
            self.max_response.saturating_sub(FRAMING),
            |size| self.manager.list_games(filter, size, token),
            |page| page.games.iter().map(convert::game_out).collect(),
        )
        .await
        .map_err(into_status)?;
        Ok(Response::new(pb::ListGamesResponse {
            games,
            next_page_token: page.next_cursor.unwrap_or_default(),
        }))
    }

    async fn play_move(
        &self,
        request: Request<pb::PlayMoveRequest>,
    ) -> Result<Response<pb::PlayMoveResponse>, Status> {
        let who = required_credential(&self.manager, &request)
            .await
            .map_err(into_status)?;
        let request = request.into_inner();
        let id = game_id(&request.game_id).map_err(into_status)?;
        let mv = convert::mv(request.r#move.as_ref(), "move").map_err(into_status)?;
        let (record, game) = self
            .manager
            .play_move(&id, who, mv, request.expected_ply)
            .await
            .map_err(into_status)?;
        let (record, game) = convert::move_and_game_out(&record, &game);
        Ok(Response::new(pb::PlayMoveResponse {
            record: Some(record),
            game: Some(game),
        }))
    }

    async fn resign(
        &self,
        request: Request<pb::ResignRequest>,
    ) -> Result<Response<pb::ResignResponse>, Status> {
        let (who, id) = seat_call(&self.manager, &request).await?;
        let game = self.manager.resign(&id, who).await.map_err(into_status)?;
        Ok(Response::new(pb::ResignResponse {
            game: Some(convert::game_out(&game)),
        }))
    }

    async fn abort_game(
        &self,
        request: Request<pb::AbortGameRequest>,
    ) -> Result<Response<pb::AbortGameResponse>, Status> {
        let (who, id) = seat_call(&self.manager, &request).await?;
        let game = self.manager.abort(&id, who).await.map_err(into_status)?;
        Ok(Response::new(pb::AbortGameResponse {
            game: Some(convert::game_out(&game)),
        }))
    }

    async fn list_moves(
        &self,
        request: Request<pb::ListMovesRequest>,
    ) -> Result<Response<pb::ListMovesResponse>, Status> {
        let asked = request.get_ref();
        let id = game_id(&asked.game_id).map_err(into_status)?;
        let (after, most) = (asked.after_move, asked.max_moves);
        let (start, moves) = self.manager.list_moves(&id).await.map_err(into_status)?;
        let start_position = convert::position_out(&start);
        // What the moves may take of the response: its bound less the start position and the
        // fields around the moves.
        let room = self
            .max_response
            .saturating_sub(start_position.encoded_len() + FRAMING);
        let skip = usize::try_from(after).unwrap_or(usize::MAX);
        let most = match most {
            0 => usize::MAX,
            most => usize::try_from(most).unwrap_or(usize::MAX),
        };
        let mut out: Vec<pb::MoveRecord> = moves
            .iter()
            .skip(skip)
            .take(most)
            .map(convert::move_record_out)
            .collect();
        // A move that does not fit even alone goes alone: encoding it then fails with the size
        // bound's own error, which names the bound, rather than looping here.
        out.truncate(fitting(&out, room).count.max(1));
        let more = skip.saturating_add(out.len()) < moves.len();
        Ok(Response::new(pb::ListMovesResponse {
            moves: out,
            start_position: Some(start_position),
            more,
        }))
    }

    type WatchGameStream = WatchStream<pb::WatchGameResponse>;

    async fn watch_game(
        &self,
        request: Request<pb::WatchGameRequest>,
    ) -> Result<Response<Self::WatchGameStream>, Status> {
        let peer = request.remote_addr();
        let (watch, follow_rematch) = start_game_watch(self, request).await.map_err(into_status)?;
        Ok(Response::new(stream::spawn(
            watch,
            stream::Served {
                settings: &self.streams,
                peer,
            },
            StreamKind::Game,
            game_item,
            game_heartbeat,
            game_is_last(follow_rematch),
            stream::no_side(),
        )))
    }

    type WatchLobbyStream = WatchStream<pb::WatchLobbyResponse>;

    async fn watch_lobby(
        &self,
        request: Request<pb::WatchLobbyRequest>,
    ) -> Result<Response<Self::WatchLobbyStream>, Status> {
        let peer = request.remote_addr();
        let after = request.into_inner().after_sequence;
        // Subscribed to the seeks before the lobby is read: a change in between comes twice at
        // worst, and clients apply seek changes by id.
        let seeks = seek_changes(
            Arc::clone(&self.seeks),
            after.is_some_and(|a| a > 0),
            self.max_response,
        );
        let watch = self
            .manager
            .watch_lobby(after, peer)
            .await
            .map_err(into_status)?;
        let pool = Arc::clone(&self.seeks);
        let max_response = self.max_response;
        Ok(Response::new(stream::spawn(
            watch,
            stream::Served {
                settings: &self.streams,
                peer,
            },
            StreamKind::Lobby,
            move |item| lobby_item(item, &pool, max_response),
            lobby_heartbeat,
            |_| false,
            Side {
                items: seeks,
                message: lobby_seeks,
            },
        )))
    }

    async fn offer_draw(
        &self,
        request: Request<pb::OfferDrawRequest>,
    ) -> Result<Response<pb::OfferDrawResponse>, Status> {
        let (who, id) = seat_call(&self.manager, &request).await?;
        let (game, action) = self
            .manager
            .offer_draw(&id, who)
            .await
            .map_err(into_status)?;
        Ok(Response::new(pb::OfferDrawResponse {
            game: Some(convert::game_out(&game)),
            accepted: action == crate::domain::DrawAction::Accepted,
        }))
    }

    async fn decline_draw(
        &self,
        request: Request<pb::DeclineDrawRequest>,
    ) -> Result<Response<pb::DeclineDrawResponse>, Status> {
        let (who, id) = seat_call(&self.manager, &request).await?;
        let game = self
            .manager
            .decline_draw(&id, who)
            .await
            .map_err(into_status)?;
        Ok(Response::new(pb::DeclineDrawResponse {
            game: Some(convert::game_out(&game)),
        }))
    }

    async fn claim_victory(
        &self,
        request: Request<pb::ClaimVictoryRequest>,
    ) -> Result<Response<pb::ClaimVictoryResponse>, Status> {
        let (who, id) = seat_call(&self.manager, &request).await?;
        let game = self
            .manager
            .claim_victory(&id, who)
            .await
            .map_err(into_status)?;
        Ok(Response::new(pb::ClaimVictoryResponse {
            game: Some(convert::game_out(&game)),
        }))
    }

    async fn offer_rematch(
        &self,
        request: Request<pb::OfferRematchRequest>,
    ) -> Result<Response<pb::OfferRematchResponse>, Status> {
        // Not cut by the server's request timeout once begun: its answer holds a secret shown
        // once (see `deadline`).
        deadline::begin_once(&request);
        let (who, id) = seat_call(&self.manager, &request).await?;
        let offered = self
            .manager
            .offer_rematch(&id, who)
            .await
            .map_err(into_status)?;
        Ok(Response::new(pb::OfferRematchResponse {
            game: Some(convert::game_out(&offered.game)),
            player_token: offered.token.expose().to_owned(),
            rematch: offered.rematch.as_ref().map(convert::game_out),
            seat: convert::player_out(offered.seat),
        }))
    }

    async fn decline_rematch(
        &self,
        request: Request<pb::DeclineRematchRequest>,
    ) -> Result<Response<pb::DeclineRematchResponse>, Status> {
        let (who, id) = seat_call(&self.manager, &request).await?;
        let game = self
            .manager
            .decline_rematch(&id, who)
            .await
            .map_err(into_status)?;
        Ok(Response::new(pb::DeclineRematchResponse {
            game: Some(convert::game_out(&game)),
        }))
    }

    type SeekStream = SeekStream;

    async fn seek(
        &self,
        request: Request<pb::SeekRequest>,
    ) -> Result<Response<Self::SeekStream>, Status> {
        let client = request.remote_addr().map(|addr| addr.ip());
        let account = playing_account(&self.manager, &request)
            .await
            .map_err(into_status)?;
        // The key the seek stands on, checked again while it waits and once it is paired.
        let key = account
            .as_ref()
            .and_then(|_| bearer(&request).ok())
            .map(str::to_owned);
        let request = request.into_inner();
        let (rules, preset) =
            convert::rules_spec(request.rules.as_ref(), "rules").map_err(into_status)?;
        let time_control = convert::time_control(request.time_control.as_ref(), "time_control")
            .map_err(into_status)?;
        let computer = convert::computer_fallback(request.computer.as_ref(), "computer")
            .map_err(into_status)?;
        let outcome = self
            .seeks
            .seek(SeekRequest {
                rules,
                preset,
                time_control,
                display_name: request.display_name,
                computer,
                client,
                account,
                rated: request.rated,
                rating_range: convert::rating_range(request.rating_range.as_ref())
                    .map_err(into_status)?,
            })
            .await
            .map_err(into_status)?;
        let mut ticket = match outcome {
            SeekOutcome::Paired(seated) => {
                let once = futures::stream::once(async move { seek_message(paired(&seated)) });
                return Ok(Response::new(Box::pin(once)));
            }
            SeekOutcome::Waiting(ticket) => ticket,
        };
        let (tx, rx) = mpsc::channel(4);
        // How many messages the response stream has taken from `rx`: a `paired` taken is on its
        // way to the client, one still queued when the client goes never reaches it.
        let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let taking = Arc::clone(&taken);
        let mut sent = 0usize;
        let mut shutdown = self.streams.shutdown.clone();
        let period = self
            .streams
            .heartbeat
            .max(std::time::Duration::from_millis(10));
        let waiting = convert::seek_out(ticket.info());
        let manager = Arc::clone(&self.manager);
        let mut revocations = manager.key_revocations();
        tokio::spawn(async move {
            if tx
                .send(seek_message(pb::seek_response::Kind::Waiting(waiting)))
                .await
                .is_err()
            {
                return;
            }
            sent += 1;
            let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            // One wait for the whole stream: a fresh one each turn of the loop would restart
            // the computer fallback's wait at every heartbeat, and drop a pairing with the
            // computer half made.
            let wait = ticket.wait();
            tokio::pin!(wait);
            /// What the wait turned up; the awaits that follow are outside the `select!`,
            /// which would otherwise hold the shutdown watch's read guard across them.
            enum Turn {
                Stopping,
                Gone,
                // Boxed: a seat is large, and every heartbeat moves a `Turn`.
                Seated(Box<Result<crate::domain::Seated, GameError>>),
                Tick,
                // A key was revoked on this node: perhaps this seek's.
                Revoked,
            }
            loop {
                let turn = tokio::select! {
                    biased;
                    _ = shutdown.wait_for(|stopping| *stopping) => Turn::Stopping,
                    // The client went away: dropping the ticket withdraws the seek.
                    () = tx.closed() => Turn::Gone,
                    seated = &mut wait => Turn::Seated(Box::new(seated)),
                    _ = ticker.tick() => Turn::Tick,
                    Ok(()) = revocations.changed(), if key.is_some() => Turn::Revoked,
                };
                let out = match turn {
                    Turn::Stopping => Err(Status::unavailable(
                        "the server is shutting down; the seek is withdrawn, seek again",
                    )),
                    Turn::Gone => break,
                    Turn::Seated(seated) => {
                        let handed = match *seated {
                            Ok(seated) => manager.hand_out_seat(seated, key.as_deref()).await,
                            Err(error) => Err(error),
                        };
                        match handed {
                            // A seat the client never took, gone before its `paired` left
                            // the server, is held by nobody: an outside probe's accepter
                            // waited out the first-move limit in such games, 17 in 200.
                            Ok(seated) => {
                                let queued = tx.send(seek_message(paired(&seated))).await;
                                if queued.is_err() || !taken_by_stream(&tx, &taken, sent + 1).await
                                {
                                    manager.abandon_seat(&seated).await;
                                }
                                break;
                            }
                            Err(error) => Err(into_status(error)),
                        }
                    }
                    // A revoked key ends the loop, and dropping the ticket withdraws the seek.
                    Turn::Tick => match manager.key_still_good(key.as_deref()).await {
                        Err(error) => Err(into_status(error)),
                        Ok(()) => seek_message(pb::seek_response::Kind::Heartbeat(
                            pb::seek_response::Heartbeat {},
                        )),
                    },
                    Turn::Revoked => match manager.key_still_good(key.as_deref()).await {
                        Err(error) => Err(into_status(error)),
                        Ok(()) => continue,
                    },
                };
                let last = !matches!(
                    out,
                    Ok(pb::SeekResponse {
                        kind: Some(pb::seek_response::Kind::Heartbeat(_))
                    })
                );
                if tx.send(out).await.is_err() || last {
                    break;
                }
                sent += 1;
            }
        });
        let stream = futures::StreamExt::inspect(
            tokio_stream::wrappers::ReceiverStream::new(rx),
            move |_| {
                taking.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            },
        );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn accept_seek(
        &self,
        request: Request<pb::AcceptSeekRequest>,
    ) -> Result<Response<pb::AcceptSeekResponse>, Status> {
        // Not cut by the server's request timeout once begun: its answer holds a secret shown
        // once (see `deadline`).
        deadline::begin_once(&request);
        let client = request.remote_addr().map(|addr| addr.ip());
        let account = playing_account(&self.manager, &request)
            .await
            .map_err(into_status)?;
        let request = request.into_inner();
        let seek_id = convert::seek_id(&request.seek_id, "seek_id").map_err(into_status)?;
        let seated = self
            .seeks
            .accept(seek_id, &request.display_name, client, account.as_ref())
            .await
            .map_err(into_status)?;
        tracing::Span::current().record("game_id", seated.game.id.as_str());
        let (game, player_token, seat) = seated_parts(&seated);
        Ok(Response::new(pb::AcceptSeekResponse {
            game,
            player_token,
            seat,
        }))
    }

    async fn list_seeks(
        &self,
        _request: Request<pb::ListSeeksRequest>,
    ) -> Result<Response<pb::ListSeeksResponse>, Status> {
        let mut seeks = self
            .seeks
            .list_now()
            .await
            .iter()
            .map(convert::seek_out)
            .collect();
        fit(&mut seeks, self.max_response.saturating_sub(FRAMING));
        Ok(Response::new(pb::ListSeeksResponse { seeks }))
    }
}

/// Waits until the response stream has taken `sent` messages (counted in `taken`), for up to a
/// second: `false` if the client went away first. A message taken is on its way to the client
/// (see README, "Seeks"); one still queued when the client goes never reaches it.
async fn taken_by_stream<T>(
    tx: &mpsc::Sender<T>,
    taken: &std::sync::atomic::AtomicUsize,
    sent: usize,
) -> bool {
    let all_taken = || taken.load(std::sync::atomic::Ordering::SeqCst) >= sent;
    let deadline = tokio::time::sleep(std::time::Duration::from_secs(1));
    tokio::pin!(deadline);
    loop {
        if all_taken() {
            return true;
        }
        tokio::select! {
            // Taken just before the client went, it is the client's.
            () = tx.closed() => return all_taken(),
            () = &mut deadline => return true,
            () = tokio::time::sleep(std::time::Duration::from_millis(5)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_auth(value: &str) -> Request<()> {
        let mut request = Request::new(());
        request
            .metadata_mut()
            .insert("authorization", value.parse().unwrap());
        request
    }

    #[test]
    fn bearer_tokens_are_parsed_strictly() {
        assert_eq!(bearer(&with_auth("Bearer abc")).unwrap(), "abc");
        assert_eq!(bearer(&with_auth("bearer  abc ")).unwrap(), "abc");
        for bad in ["abc", "Basic abc", "Bearer ", "Bearer"] {
            assert_eq!(
                bearer(&with_auth(bad)).unwrap_err(),
                GameError::MalformedAuthorization,
                "{bad}"
            );
        }
        assert_eq!(
            bearer(&Request::new(())).unwrap_err(),
            GameError::MissingToken
        );
        let mut two = with_auth("Bearer abc");
        two.metadata_mut()
            .append("authorization", "Bearer def".parse().unwrap());
        assert_eq!(bearer(&two).unwrap_err(), GameError::SeveralAuthorizations);
    }

    /// A `paired` counts as delivered once the stream took it (even if the client went right
    /// after), and not if the client went away while it was still queued.
    #[tokio::test]
    async fn a_message_is_taken_by_the_stream_or_lost_with_the_client() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (tx, rx) = mpsc::channel::<u8>(4);
        let taken = Arc::new(AtomicUsize::new(0));
        tx.send(1).await.unwrap();
        let reader = {
            let taken = Arc::clone(&taken);
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(30)).await;
                let mut rx = rx;
                let got = rx.recv().await;
                taken.fetch_add(1, Ordering::SeqCst);
                // Gone at once after taking it.
                drop(rx);
                got
            })
        };
        assert!(taken_by_stream(&tx, &taken, 1).await);
        assert_eq!(reader.await.unwrap(), Some(1));

        let (tx, rx) = mpsc::channel::<u8>(4);
        let taken = AtomicUsize::new(0);
        tx.send(1).await.unwrap();
        let gone = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            drop(rx);
        });
        assert!(!taken_by_stream(&tx, &taken, 1).await);
        gone.await.unwrap();
    }
}
