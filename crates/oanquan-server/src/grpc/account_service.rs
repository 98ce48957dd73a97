//! `oanquan.v1.AccountService`: unpack, call the [`GameManager`], convert. No account logic here.

use std::sync::Arc;

use oanquan_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::fit::{FRAMING, page_that_fits};
use super::game_service::bearer;
use super::status::{self, into_status};
use crate::domain::account::Account;
use crate::domain::limits::RateLimiter;
use crate::domain::registration::Registrar;
use crate::domain::{GameError, GameManager, PlayerGameFilter};
use crate::grpc::deadline;
use oanquan_convert as convert;

/// The AccountService adapter.
#[derive(Debug, Clone)]
pub struct AccountApi {
    manager: Arc<GameManager>,
    registrar: Arc<Registrar>,
    /// The largest response encoded (`--max-message-size`): a page of a player's games stops
    /// short of it.
    max_response: usize,
}

impl AccountApi {
    /// An adapter over `manager`, with no limit on registrations.
    #[must_use]
    pub fn new(manager: Arc<GameManager>) -> AccountApi {
        let unlimited = Arc::new(RateLimiter::new(None, false));
        AccountApi {
            registrar: Arc::new(Registrar::new(Arc::clone(&manager), unlimited)),
            manager,
            max_response: usize::MAX,
        }
    }

    /// The same adapter, keeping pages of games within `max` bytes.
    #[must_use]
    pub fn with_max_response(mut self, max: usize) -> AccountApi {
        self.max_response = max;
        self
    }

    /// The same adapter, registering at most what `limiter` lets each client address.
    #[must_use]
    pub fn with_registrations(mut self, limiter: Arc<RateLimiter>) -> AccountApi {
        self.registrar = Arc::new(Registrar::new(Arc::clone(&self.manager), limiter));
        self
    }

    /// The caller's account, for the calls that need its API key. Without `authorization` the
    /// client is told which credential is wanted, and a value that is not `Bearer <key>` what
    /// form it takes; anything else that is not a valid key (a seat token, a revoked key) is a
    /// bad key.
    async fn caller<T>(&self, request: &Request<T>) -> Result<Account, Status> {
        let key = match bearer(request) {
            Ok(key) => key,
            Err(GameError::MissingToken) => return Err(status::missing_api_key()),
            Err(error) => return Err(into_status(error)),
        };
        self.manager.authenticate(key).await.map_err(into_status)
    }
}

/// A page size as the manager takes it (0 = its default; anything larger is capped there).
fn page_size(size: u32) -> usize {
    usize::try_from(size).unwrap_or(usize::MAX)
}

/// A page token as the manager takes it (empty = the first page).
fn page_token(token: &str) -> Option<&str> {
    Some(token).filter(|t| !t.is_empty())
}

#[tonic::async_trait]
impl pb::account_service_server::AccountService for AccountApi {
    async fn register(
        &self,
        request: Request<pb::RegisterRequest>,
    ) -> Result<Response<pb::RegisterResponse>, Status> {
        // Not cut by the server's request timeout once begun: its answer holds a secret shown
        // once (see `deadline`).
        deadline::begin_once(&request);
        let client = request.remote_addr().map(|addr| addr.ip());
        let request = request.into_inner();
        let chosen = Some(request.api_key.as_str()).filter(|key| !key.is_empty());
        let registered = self
            .registrar
            .register(client, &request.username, chosen)
            .await
            .map_err(into_status)?;
        // The key's record is not read back: the account exists now, and a failed read must not
        // lose the only copy of its key.
        let record = pb::ApiKey {
            id: registered.key.id().to_owned(),
            create_time: convert::timestamp(registered.key_created),
            revoke_time: None,
        };
        Ok(Response::new(pb::RegisterResponse {
            player: Some(convert::profile_out(&registered.account)),
            api_key: registered.key.expose().to_owned(),
            key: Some(record),
        }))
    }

    async fn get_me(
        &self,
        request: Request<pb::GetMeRequest>,
    ) -> Result<Response<pb::GetMeResponse>, Status> {
        let account = self.caller(&request).await?;
        Ok(Response::new(pb::GetMeResponse {
            player: Some(convert::profile_out(&account)),
        }))
    }

    async fn create_api_key(
        &self,
        request: Request<pb::CreateApiKeyRequest>,
    ) -> Result<Response<pb::CreateApiKeyResponse>, Status> {
        // Not cut by the server's request timeout once begun: its answer holds a secret shown
        // once (see `deadline`).
        deadline::begin_once(&request);
        let account = self.caller(&request).await?;
        let (key, record) = self
            .manager
            .create_api_key(&account.id)
            .await
            .map_err(into_status)?;
        Ok(Response::new(pb::CreateApiKeyResponse {
            api_key: key.expose().to_owned(),
            key: Some(convert::api_key_out(&record)),
        }))
    }

    async fn list_api_keys(
        &self,
        request: Request<pb::ListApiKeysRequest>,
    ) -> Result<Response<pb::ListApiKeysResponse>, Status> {
        let account = self.caller(&request).await?;
        let keys = self
            .manager
            .api_keys(&account.id)
            .await
            .map_err(into_status)?;
        Ok(Response::new(pb::ListApiKeysResponse {
            keys: keys.iter().map(convert::api_key_out).collect(),
        }))
    }

    async fn revoke_api_key(
        &self,
        request: Request<pb::RevokeApiKeyRequest>,
    ) -> Result<Response<pb::RevokeApiKeyResponse>, Status> {
        let account = self.caller(&request).await?;
        let key_id = request.into_inner().key_id;
        self.manager
            .revoke_api_key(&account.id, &key_id)
            .await
            .map_err(into_status)?;
        let keys = self
            .manager
            .api_keys(&account.id)
            .await
            .map_err(into_status)?;
        let key = keys
            .iter()
            .find(|record| record.id == key_id)
            .map(convert::api_key_out);
        Ok(Response::new(pb::RevokeApiKeyResponse { key }))
    }

    async fn get_player(
        &self,
        request: Request<pb::GetPlayerRequest>,
    ) -> Result<Response<pb::GetPlayerResponse>, Status> {
        let account = self
            .manager
            .player(&request.into_inner().username)
            .await
            .map_err(into_status)?;
        Ok(Response::new(pb::GetPlayerResponse {
            player: Some(convert::profile_out(&account)),
        }))
    }

    async fn list_player_games(
        &self,
        request: Request<pb::ListPlayerGamesRequest>,
    ) -> Result<Response<pb::ListPlayerGamesResponse>, Status> {
        let request = request.into_inner();
        let filter = PlayerGameFilter {
            result: convert::player_result(request.result, "result").map_err(into_status)?,
            speed: convert::optional_speed(request.speed, "speed").map_err(into_status)?,
        };
        let (page, games) = page_that_fits(
            page_size(request.page_size),
            self.max_response.saturating_sub(FRAMING),
            |size| {
                self.manager.player_games(
                    &request.username,
                    filter,
                    size,
                    page_token(&request.page_token),
                )
            },
            |page| page.games.iter().map(convert::game_out).collect(),
        )
        .await
        .map_err(into_status)?;
        Ok(Response::new(pb::ListPlayerGamesResponse {
            games,
            next_page_token: page.next_cursor.unwrap_or_default(),
        }))
    }

    async fn leaderboard(
        &self,
        request: Request<pb::LeaderboardRequest>,
    ) -> Result<Response<pb::LeaderboardResponse>, Status> {
        let request = request.into_inner();
        let speed = convert::speed(request.speed, "speed").map_err(into_status)?;
        let page = self
            .manager
            .leaderboard(
                speed,
                page_size(request.page_size),
                page_token(&request.page_token),
            )
            .await
            .map_err(into_status)?;
        Ok(Response::new(pb::LeaderboardResponse {
            entries: page
                .players
                .iter()
                .map(|ranked| convert::leaderboard_entry_out(speed, ranked))
                .collect(),
            next_page_token: page.next_cursor.unwrap_or_default(),
        }))
    }
}
