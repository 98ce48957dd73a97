//! `--json` output: the API's own messages in the canonical protobuf JSON mapping (what grpcurl
//! and buf curl print), one object per line, so that one `jq` filter reads both. The mapping
//! itself lives in `oanquan_proto::json`; here are the words for people that text output uses.

use oanquan_proto::v1::{EndReason, GameStatus, Outcome};

use crate::error::{CliError, code};
use crate::output::out;

/// Prints `message` as one line of canonical protobuf JSON.
pub fn print<M: prost::Message + prost::Name>(message: &M) -> Result<(), CliError> {
    let line = oanquan_proto::json::to_json(message)
        .map_err(|e| CliError::new(code::FAILURE, format!("cannot write JSON: {e}")))?;
    out(line)
}

pub fn status_name(status: GameStatus) -> &'static str {
    match status {
        GameStatus::Unspecified => "unspecified",
        GameStatus::WaitingForPlayers => "waiting",
        GameStatus::Active => "active",
        GameStatus::Finished => "finished",
        GameStatus::Aborted => "aborted",
    }
}

pub fn end_reason_name(reason: EndReason) -> &'static str {
    match reason {
        EndReason::Unspecified => "none",
        EndReason::Mandarins => "mandarins",
        EndReason::Repetition => "repetition",
        EndReason::PlyLimit => "ply limit",
        EndReason::Resignation => "resignation",
        EndReason::Aborted => "aborted",
        EndReason::Timeout => "timeout",
        EndReason::Agreement => "agreement",
        EndReason::Abandonment => "abandonment",
    }
}

pub fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Unspecified => "none",
        Outcome::FirstWins => "first wins",
        Outcome::SecondWins => "second wins",
        Outcome::Draw => "draw",
    }
}
