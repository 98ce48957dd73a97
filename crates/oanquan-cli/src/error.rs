//! Failures and the exit codes they map to.
//!
//! Scripts branch on the exit code, so every failure path goes through [`CliError`] and one table
//! ([`CliError::from_status`]) instead of ad-hoc `process::exit` calls.

use std::fmt;

use oanquan_proto::v1::ErrorReason;
use tonic::Code;
use tonic_types::StatusExt as _;

/// Exit codes, documented in `oanquan --help`. Keep this table and [`EXIT_CODES_HELP`] in sync.
pub mod code {
    /// Success (for `play`: the game ended).
    pub const OK: u8 = 0;
    /// Anything not covered below: an unexpected server answer, a local I/O error.
    pub const FAILURE: u8 = 1;
    /// Bad command line, or the server rejected the request as malformed (INVALID_ARGUMENT).
    /// clap itself also exits with 2 on usage errors.
    pub const USAGE: u8 = 2;
    /// No such game (NOT_FOUND).
    pub const NOT_FOUND: u8 = 3;
    /// The server refused the request in the game's current state (FAILED_PRECONDITION: seat
    /// taken, game over, not started, illegal move, ...).
    pub const REJECTED: u8 = 4;
    /// No stored token for the game, or the server refused it (UNAUTHENTICATED,
    /// PERMISSION_DENIED).
    pub const AUTH: u8 = 5;
    /// `play`: standard input ended while the game was still going.
    pub const UNFINISHED: u8 = 6;
    /// The server cannot be reached (sysexits EX_UNAVAILABLE).
    pub const UNAVAILABLE: u8 = 69;
    /// A server limit was hit (RESOURCE_EXHAUSTED); retry later (sysexits EX_TEMPFAIL).
    pub const TEMPFAIL: u8 = 75;
}

/// The exit-code table as shown at the end of `oanquan --help`.
pub const EXIT_CODES_HELP: &str = "\
EXIT CODES:
    0   success; for `play`, the game is over
    1   unexpected failure (local I/O error, unexpected server answer)
    2   usage error, or the server rejected the request as malformed
    3   no such game
    4   rejected by the game's state (seat taken, game over, not started, illegal move)
    5   no stored token for the game, or the server refused it
    6   `play`: input ended before the game did
    69  server unavailable (cannot connect, TLS certificate refused, connection lost
        and --give-up elapsed)
    75  server limit reached (too many games or watchers); retry later";

/// A failure with the exit code it should produce.
#[derive(Debug)]
pub struct CliError {
    /// Process exit code, one of [`code`].
    pub code: u8,
    /// One-line explanation for stderr.
    pub message: String,
}

impl CliError {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// Maps a gRPC status to an exit code and a message. `what` names the request, for context
    /// ("join game abc").
    pub fn from_status(what: &str, status: &tonic::Status) -> Self {
        if broken_connection(status) {
            let detail = match std::error::Error::source(status) {
                Some(source) => crate::client::error_chain(source),
                None => status.message().to_owned(),
            };
            return Self::new(
                code::UNAVAILABLE,
                format!(
                    "{what}: the connection failed ({detail}); if the server uses TLS, connect \
                     with --server https://HOST:PORT"
                ),
            );
        }
        let reason = error_reason(status);
        let code = match status.code() {
            Code::NotFound => code::NOT_FOUND,
            Code::InvalidArgument | Code::OutOfRange => code::USAGE,
            Code::FailedPrecondition | Code::AlreadyExists | Code::Aborted => code::REJECTED,
            Code::Unauthenticated | Code::PermissionDenied => code::AUTH,
            Code::Unavailable | Code::DeadlineExceeded => code::UNAVAILABLE,
            Code::ResourceExhausted => code::TEMPFAIL,
            _ => code::FAILURE,
        };
        let detail = if status.message().is_empty() {
            format!("{:?}", status.code())
        } else {
            status.message().to_owned()
        };
        let hint = reason
            .and_then(reason_hint)
            .map_or(String::new(), |h| format!(" ({h})"));
        Self::new(code, format!("{what}: {detail}{hint}"))
    }

    pub fn io(what: &str, err: &std::io::Error) -> Self {
        Self::new(code::FAILURE, format!("{what}: {err}"))
    }

    pub fn unavailable(server: &str, detail: impl fmt::Display) -> Self {
        Self::new(
            code::UNAVAILABLE,
            format!("cannot reach the server at {server}: {detail}"),
        )
    }

    /// The server answered with something the API says it never sends (a missing field).
    pub fn bad_answer(what: &str) -> Self {
        Self::new(
            code::FAILURE,
            format!("unexpected answer from the server: {what}"),
        )
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// A status that tonic made up on this side because the connection broke, rather than one the
/// server sent: UNKNOWN or INTERNAL carrying the transport error as its source or worded
/// "h2 protocol error: ..." (a server's status, read from trailers, has neither), or CANCELLED
/// (hyper's "operation was canceled": the connection closed before the request went out; this
/// client never cancels a request itself). The usual cause is a cleartext client talking to a
/// TLS server: the TLS alert it gets back is no HTTP/2 frame.
fn broken_connection(status: &tonic::Status) -> bool {
    match status.code() {
        Code::Cancelled => true,
        Code::Unknown | Code::Internal => {
            std::error::Error::source(status).is_some()
                || status.message().starts_with("h2 protocol error")
        }
        _ => false,
    }
}

/// The machine-readable reason of a failed call, if the server attached one (ErrorInfo in the
/// status details, domain "oanquan.v1").
pub fn error_reason(status: &tonic::Status) -> Option<ErrorReason> {
    let info = status.get_details_error_info()?;
    if info.domain != "oanquan.v1" {
        return None;
    }
    ErrorReason::from_str_name(&info.reason)
}

/// What a user can do about a reason, where the server's message alone would not say.
fn reason_hint(reason: ErrorReason) -> Option<&'static str> {
    Some(match reason {
        ErrorReason::SeatTaken => "the game is full; watch it with `oanquan watch`",
        ErrorReason::GameNotStarted => "wait for a second player to join",
        ErrorReason::StalePly => "another move was played meanwhile",
        ErrorReason::MissingToken | ErrorReason::WrongToken => {
            "only the players of a game can do that; `join` or `create` first"
        }
        ErrorReason::LimitExceeded => "retry later",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_map_to_documented_exit_codes() {
        let cases = [
            (Code::NotFound, code::NOT_FOUND),
            (Code::InvalidArgument, code::USAGE),
            (Code::FailedPrecondition, code::REJECTED),
            (Code::Unauthenticated, code::AUTH),
            (Code::PermissionDenied, code::AUTH),
            (Code::Unavailable, code::UNAVAILABLE),
            (Code::ResourceExhausted, code::TEMPFAIL),
            (Code::Internal, code::FAILURE),
        ];
        for (status_code, exit) in cases {
            let err = CliError::from_status("x", &tonic::Status::new(status_code, "m"));
            assert_eq!(err.code, exit, "{status_code:?}");
            assert_eq!(err.message, "x: m");
        }
    }

    #[test]
    fn a_broken_connection_is_unavailable() {
        let status = tonic::Status::unknown("h2 protocol error: http2 error");
        let err = CliError::from_status("list presets", &status);
        assert_eq!(err.code, code::UNAVAILABLE);
        assert!(err.message.contains("https://"), "{}", err.message);
        let status = tonic::Status::cancelled("operation was canceled");
        assert_eq!(CliError::from_status("x", &status).code, code::UNAVAILABLE);
        // The same words from the server, under another code, are the server's.
        let status = tonic::Status::invalid_argument("h2 protocol error: x");
        assert_eq!(CliError::from_status("x", &status).code, code::USAGE);
    }

    #[test]
    fn reason_is_read_from_error_info() {
        let status = tonic::Status::with_error_details(
            Code::FailedPrecondition,
            "seat taken",
            tonic_types::ErrorDetails::with_error_info(
                "ERROR_REASON_SEAT_TAKEN",
                "oanquan.v1",
                std::collections::HashMap::new(),
            ),
        );
        assert_eq!(error_reason(&status), Some(ErrorReason::SeatTaken));
        let err = CliError::from_status("join", &status);
        assert_eq!(err.code, code::REJECTED);
        assert!(err.message.contains("the game is full"), "{}", err.message);
        assert_eq!(error_reason(&tonic::Status::internal("x")), None);
    }
}
