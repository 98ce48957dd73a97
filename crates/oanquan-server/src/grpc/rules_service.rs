//! `oanquan.v1.RulesService`: stateless access to the rules engine.

use std::sync::Arc;

use oanquan_proto::v1 as pb;
use oanquan_rules::Preset;
use tonic::{Request, Response, Status};

use super::convert;
use super::status::{self, into_status};
use crate::domain::GameError;
use crate::domain::computer::{self, AnalysisError, SearchCapacity, SearchPool};

/// The RulesService adapter. Holds no game state; `Analyze` searches in a shared pool.
#[derive(Debug, Clone)]
pub struct RulesApi {
    searches: Arc<SearchPool>,
}

impl RulesApi {
    /// An adapter whose `Analyze` calls search in `searches`, the pool the computer player
    /// uses too (each with its own slots; one `stop` ends both).
    #[must_use]
    pub fn new(searches: Arc<SearchPool>) -> RulesApi {
        RulesApi { searches }
    }
}

impl Default for RulesApi {
    /// With a search pool of its own, of the default capacity.
    fn default() -> Self {
        RulesApi::new(SearchPool::new(SearchCapacity::default()))
    }
}

#[tonic::async_trait]
impl pb::rules_service_server::RulesService for RulesApi {
    async fn list_presets(
        &self,
        _request: Request<pb::ListPresetsRequest>,
    ) -> Result<Response<pb::ListPresetsResponse>, Status> {
        Ok(Response::new(pb::ListPresetsResponse {
            presets: Preset::ALL.into_iter().map(convert::preset_out).collect(),
        }))
    }

    async fn legal_moves(
        &self,
        request: Request<pb::LegalMovesRequest>,
    ) -> Result<Response<pb::LegalMovesResponse>, Status> {
        let request = request.into_inner();
        let (rules, _) =
            convert::rules_spec(request.rules.as_ref(), "rules").map_err(into_status)?;
        let position =
            convert::position(request.position.as_ref(), rules, "position").map_err(into_status)?;
        Ok(Response::new(convert::legal_moves_out(&position)))
    }

    async fn apply_move(
        &self,
        request: Request<pb::ApplyMoveRequest>,
    ) -> Result<Response<pb::ApplyMoveResponse>, Status> {
        let request = request.into_inner();
        let (rules, _) =
            convert::rules_spec(request.rules.as_ref(), "rules").map_err(into_status)?;
        let position =
            convert::position(request.position.as_ref(), rules, "position").map_err(into_status)?;
        let mv = convert::mv(request.r#move.as_ref(), "move").map_err(into_status)?;
        let (after, steps) = position
            .play(mv)
            .map_err(GameError::from)
            .map_err(into_status)?;
        Ok(Response::new(pb::ApplyMoveResponse {
            position: Some(convert::position_out(&after)),
            steps: convert::steps_out(&steps),
        }))
    }

    async fn analyze(
        &self,
        request: Request<pb::AnalyzeRequest>,
    ) -> Result<Response<pb::AnalyzeResponse>, Status> {
        let client = request.remote_addr().map(|addr| addr.ip());
        let request = request.into_inner();
        let (rules, _) =
            convert::rules_spec(request.rules.as_ref(), "rules").map_err(into_status)?;
        let position =
            convert::position(request.position.as_ref(), rules, "position").map_err(into_status)?;
        let limits = computer::analysis_limits(
            request.time_limit_ms,
            request.node_limit,
            request.depth_limit,
        )
        .map_err(into_status)?;
        // Dropping this future (the client went away, or the deadline passed) cancels the
        // search.
        match self.searches.analyze(position, limits, client).await {
            Ok(result) => Ok(Response::new(convert::analysis_out(&result))),
            Err(AnalysisError::Refused(refused)) => {
                tracing::debug!(?client, %refused, "analysis refused");
                Err(status::analysis_refused(&refused))
            }
            Err(AnalysisError::Failed(error)) => Err(into_status(error)),
        }
    }
}
