//! `oanquan.v1.GameService`: unpack, call the [`GameManager`], convert. No game logic here.

use std::sync::Arc;

use oanquan_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::convert;
use super::status::into_status;
use super::stream::{self, StreamSettings, WatchStream};
use crate::domain::{
    GameError, GameFeed, GameId, GameManager, LobbyFeed, NewGame, PlayerToken, Watch, WatchItem,
};

/// The GameService adapter.
#[derive(Debug, Clone)]
pub struct GameApi {
    manager: Arc<GameManager>,
    streams: StreamSettings,
}

impl GameApi {
    /// An adapter over `manager`.
    #[must_use]
    pub fn new(manager: Arc<GameManager>, streams: StreamSettings) -> GameApi {
        GameApi { manager, streams }
    }

    /// What every watch stream of this service runs with.
    pub(super) fn streams(&self) -> &StreamSettings {
        &self.streams
    }
}

/// The bearer token of a request. Scheme matching is case-insensitive (RFC 7235).
fn bearer<T>(request: &Request<T>) -> Result<PlayerToken, GameError> {
    let value = request
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .ok_or(GameError::MissingToken)?;
    let (scheme, token) = value
        .trim()
        .split_once(' ')
        .ok_or(GameError::MissingToken)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(GameError::MissingToken);
    }
    Ok(PlayerToken::from_client(token))
}

/// The bearer token of a request that may come without one (`WatchGame`): `None` without
/// `authorization` metadata; a malformed one is refused rather than ignored.
fn optional_bearer<T>(request: &Request<T>) -> Result<Option<PlayerToken>, GameError> {
    if request.metadata().get("authorization").is_none() {
        return Ok(None);
    }
    bearer(request).map(Some)
}

/// Starts a `WatchGame` watch: as the seat of the bearer token if there is one, else as a
/// spectator of the connection the request came on.
pub(super) async fn start_game_watch(
    api: &GameApi,
    request: Request<pb::WatchGameRequest>,
) -> Result<Watch<GameFeed>, GameError> {
    let id = game_id(&request.get_ref().game_id)?;
    let token = optional_bearer(&request)?;
    let peer = request.remote_addr();
    let after = request.into_inner().after_sequence;
    api.manager
        .watch_game_from(&id, after, peer, token.as_ref())
        .await
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

fn lobby_item(item: WatchItem<LobbyFeed>) -> pb::WatchLobbyResponse {
    let event = match item {
        WatchItem::Snapshot { snapshot, sequence } => {
            convert::lobby_snapshot_out(&snapshot, sequence)
        }
        WatchItem::Event(event) => convert::lobby_event_out(&event),
    };
    pb::WatchLobbyResponse { event: Some(event) }
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
        let client = request.remote_addr().map(|addr| addr.ip());
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
        let request = request.into_inner();
        let id = game_id(&request.game_id).map_err(into_status)?;
        let seated = self
            .manager
            .join_game(&id, &request.display_name)
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
        let page = self
            .manager
            .list_games(filter, page_size, token)
            .await
            .map_err(into_status)?;
        Ok(Response::new(pb::ListGamesResponse {
            games: page.games.iter().map(convert::game_out).collect(),
            next_page_token: page.next_cursor.unwrap_or_default(),
        }))
    }

    async fn play_move(
        &self,
        request: Request<pb::PlayMoveRequest>,
    ) -> Result<Response<pb::PlayMoveResponse>, Status> {
        let token = bearer(&request).map_err(into_status)?;
        let request = request.into_inner();
        let id = game_id(&request.game_id).map_err(into_status)?;
        let mv = convert::mv(request.r#move.as_ref(), "move").map_err(into_status)?;
        let (record, game) = self
            .manager
            .play_move(&id, &token, mv, request.expected_ply)
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
        let token = bearer(&request).map_err(into_status)?;
        let id = game_id(&request.get_ref().game_id).map_err(into_status)?;
        let game = self
            .manager
            .resign(&id, &token)
            .await
            .map_err(into_status)?;
        Ok(Response::new(pb::ResignResponse {
            game: Some(convert::game_out(&game)),
        }))
    }

    async fn abort_game(
        &self,
        request: Request<pb::AbortGameRequest>,
    ) -> Result<Response<pb::AbortGameResponse>, Status> {
        let token = bearer(&request).map_err(into_status)?;
        let id = game_id(&request.get_ref().game_id).map_err(into_status)?;
        let game = self.manager.abort(&id, &token).await.map_err(into_status)?;
        Ok(Response::new(pb::AbortGameResponse {
            game: Some(convert::game_out(&game)),
        }))
    }

    async fn list_moves(
        &self,
        request: Request<pb::ListMovesRequest>,
    ) -> Result<Response<pb::ListMovesResponse>, Status> {
        let id = game_id(&request.get_ref().game_id).map_err(into_status)?;
        let (start, moves) = self.manager.list_moves(&id).await.map_err(into_status)?;
        Ok(Response::new(pb::ListMovesResponse {
            moves: moves.iter().map(convert::move_record_out).collect(),
            start_position: Some(convert::position_out(&start)),
        }))
    }

    type WatchGameStream = WatchStream<pb::WatchGameResponse>;

    async fn watch_game(
        &self,
        request: Request<pb::WatchGameRequest>,
    ) -> Result<Response<Self::WatchGameStream>, Status> {
        let watch = start_game_watch(self, request).await.map_err(into_status)?;
        Ok(Response::new(stream::spawn(
            watch,
            &self.streams,
            game_item,
            game_heartbeat,
        )))
    }

    type WatchLobbyStream = WatchStream<pb::WatchLobbyResponse>;

    async fn watch_lobby(
        &self,
        request: Request<pb::WatchLobbyRequest>,
    ) -> Result<Response<Self::WatchLobbyStream>, Status> {
        let watch = self
            .manager
            .watch_lobby(request.into_inner().after_sequence)
            .await
            .map_err(into_status)?;
        Ok(Response::new(stream::spawn(
            watch,
            &self.streams,
            lobby_item,
            lobby_heartbeat,
        )))
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
        assert_eq!(bearer(&with_auth("Bearer abc")).unwrap().expose(), "abc");
        assert_eq!(bearer(&with_auth("bearer  abc ")).unwrap().expose(), "abc");
        for bad in ["abc", "Basic abc", "Bearer ", "Bearer"] {
            assert_eq!(
                bearer(&with_auth(bad)).unwrap_err(),
                GameError::MissingToken,
                "{bad}"
            );
        }
        assert_eq!(
            bearer(&Request::new(())).unwrap_err(),
            GameError::MissingToken
        );
    }
}
