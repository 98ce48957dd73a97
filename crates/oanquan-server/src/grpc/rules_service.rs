//! `oanquan.v1.RulesService`: stateless access to the rules engine.

use std::sync::Arc;

use oanquan_proto::v1 as pb;
use oanquan_rules::{Game, Preset};
use tokio::time::Instant;
use tonic::{Request, Response, Status};

use super::deadline;
use super::status::{self, into_status};
use crate::domain::computer::{self, AnalysisError, SearchCapacity, SearchPool};
use crate::domain::{GameError, GameId, GameManager};
use oanquan_convert as convert;

/// The RulesService adapter. Holds no game state; `Analyze` searches in a shared pool, and
/// requests naming a hosted game read it from the manager (never writing to it).
#[derive(Debug, Clone)]
pub struct RulesApi {
    searches: Arc<SearchPool>,
    games: Option<Arc<GameManager>>,
}

impl RulesApi {
    /// An adapter whose `Analyze` calls search in `searches`, the pool the computer player
    /// uses too (each with its own slots; one `stop` ends both). It knows no hosted games:
    /// a request's `game_id` is NOT_FOUND until [`RulesApi::with_games`] gives it some.
    #[must_use]
    pub fn new(searches: Arc<SearchPool>) -> RulesApi {
        RulesApi {
            searches,
            games: None,
        }
    }

    /// This adapter, reading the hosted games that requests name by `game_id` from `games`.
    #[must_use]
    pub fn with_games(self, games: Arc<GameManager>) -> RulesApi {
        RulesApi {
            games: Some(games),
            ..self
        }
    }

    /// Loads a hosted game with its history.
    async fn hosted(&self, id: GameId) -> Result<Game, GameError> {
        match &self.games {
            Some(games) => games.game_history(&id).await,
            None => Err(GameError::GameNotFound(id)),
        }
    }
}

impl Default for RulesApi {
    /// With a search pool of its own, of the default capacity, and no hosted games.
    fn default() -> Self {
        RulesApi::new(SearchPool::new(SearchCapacity::default()))
    }
}

/// The `game` oneof of a RulesService request, whichever request it is.
#[derive(Clone, Copy)]
enum Source<'a> {
    GameId(&'a str),
    History(&'a pb::MoveHistory),
}

impl<'a> From<&'a pb::legal_moves_request::Game> for Source<'a> {
    fn from(game: &'a pb::legal_moves_request::Game) -> Self {
        match game {
            pb::legal_moves_request::Game::GameId(id) => Source::GameId(id),
            pb::legal_moves_request::Game::History(history) => Source::History(history),
        }
    }
}

impl<'a> From<&'a pb::apply_move_request::Game> for Source<'a> {
    fn from(game: &'a pb::apply_move_request::Game) -> Self {
        match game {
            pb::apply_move_request::Game::GameId(id) => Source::GameId(id),
            pb::apply_move_request::Game::History(history) => Source::History(history),
        }
    }
}

impl<'a> From<&'a pb::analyze_request::Game> for Source<'a> {
    fn from(game: &'a pb::analyze_request::Game) -> Self {
        match game {
            pb::analyze_request::Game::GameId(id) => Source::GameId(id),
            pb::analyze_request::Game::History(history) => Source::History(history),
        }
    }
}

/// A request's game, validated; a hosted one still to be loaded (after the rest of the request
/// is checked, so that a malformed request is refused the same way whether or not its game
/// exists).
enum Subject {
    Ready(Game),
    Hosted(GameId),
}

/// The game a request is about: its bare `position` (a game of no moves, as before history
/// was accepted), or its `game`, which excludes `position` and, for a hosted game, `rules`.
fn subject(
    rules: Option<&pb::RulesSpec>,
    position: Option<&pb::Position>,
    source: Option<Source<'_>>,
) -> Result<Subject, GameError> {
    let Some(source) = source else {
        let (rules, _) = convert::rules_spec(rules, "rules")?;
        let position = convert::position(position, rules, "position")?;
        return Ok(Subject::Ready(Game::from_position(position)));
    };
    // Refused rather than ranked: a request naming two positions has a bug, and either choice
    // would analyze a position its sender may not mean.
    if position.is_some() {
        return Err(GameError::invalid(
            "position",
            "must be unset when game_id or history is given: the game's last position is the \
             one used",
        ));
    }
    match source {
        Source::GameId(id) => {
            if rules.and_then(|r| r.kind.as_ref()).is_some() {
                return Err(GameError::invalid(
                    "rules",
                    "must be unset with game_id: the hosted game's own rule set is used",
                ));
            }
            Ok(Subject::Hosted(convert::game_id(id, "game_id")?))
        }
        Source::History(history) => {
            let (rules, _) = convert::rules_spec(rules, "rules")?;
            Ok(Subject::Ready(convert::history(history, rules, "history")?))
        }
    }
}

impl RulesApi {
    async fn load(&self, subject: Subject) -> Result<Game, GameError> {
        match subject {
            Subject::Ready(game) => Ok(game),
            Subject::Hosted(id) => self.hosted(id).await,
        }
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
        let subject = subject(
            request.rules.as_ref(),
            request.position.as_ref(),
            request.game.as_ref().map(Source::from),
        )
        .map_err(into_status)?;
        let game = self.load(subject).await.map_err(into_status)?;
        Ok(Response::new(convert::legal_moves_out(game.position())))
    }

    async fn apply_move(
        &self,
        request: Request<pb::ApplyMoveRequest>,
    ) -> Result<Response<pb::ApplyMoveResponse>, Status> {
        let request = request.into_inner();
        let subject = subject(
            request.rules.as_ref(),
            request.position.as_ref(),
            request.game.as_ref().map(Source::from),
        )
        .map_err(into_status)?;
        let mv = convert::mv(request.r#move.as_ref(), "move").map_err(into_status)?;
        let mut game = self.load(subject).await.map_err(into_status)?;
        // A game of one position plays exactly like `Position::play`: the position after a
        // move has the other player to move, so it cannot repeat the start.
        let steps = game
            .play(mv)
            .map_err(|e| into_status(stateless(GameError::from(e))))?;
        Ok(Response::new(pb::ApplyMoveResponse {
            position: Some(convert::position_out(game.position())),
            steps: convert::steps_out(&steps),
        }))
    }

    async fn analyze(
        &self,
        request: Request<pb::AnalyzeRequest>,
    ) -> Result<Response<pb::AnalyzeResponse>, Status> {
        let client = request.remote_addr().map(|addr| addr.ip());
        let call_deadline = request
            .extensions()
            .get::<deadline::CallDeadline>()
            .map(|d| d.0);
        let request = request.into_inner();
        let source = request.game.as_ref().map(Source::from);
        let subject = subject(request.rules.as_ref(), request.position.as_ref(), source)
            .map_err(into_status)?;
        // What the analysis knew of the game: a bare position counts no repetition before it.
        let given = match source {
            None => "position",
            Some(Source::GameId(_)) => "game_id",
            Some(Source::History(_)) => "history",
        };
        let limits = computer::analysis_limits(
            request.time_limit_ms,
            request.node_limit,
            request.depth_limit,
        )
        .map_err(into_status)?;
        let game = self.load(subject).await.map_err(into_status)?;
        let history_plies = game.moves().len();
        tracing::debug!(?client, given, history_plies, "analysis requested");
        // Dropping this future (the client went away, or the deadline passed) cancels the
        // search.
        match self
            .searches
            .analyze_by(
                game,
                limits,
                client,
                !request.best_play_only,
                call_deadline.map(Instant::into_std),
            )
            .await
        {
            Ok(result) => Ok(Response::new(convert::analysis_out(&result, history_plies))),
            Err(AnalysisError::Refused(refused)) => {
                tracing::debug!(?client, %refused, "analysis refused");
                Err(status::analysis_refused(&refused))
            }
            Err(AnalysisError::Failed(error)) => Err(into_status(stateless(error))),
        }
    }
}

/// An error of a stateless call as its caller should read it: a position that is over is not
/// a hosted game to leave for another.
fn stateless(error: GameError) -> GameError {
    match error {
        GameError::GameOver => GameError::PositionOver,
        error => error,
    }
}
