//! The one table from domain errors to gRPC status codes and error details ([`classify`]), and
//! every other status the server answers on its own: the request rate limit, a refused
//! analysis, a health watch over its cap, a watch stream ended by shutdown or left unread, an
//! undecodable request. No other
//! file builds a status from a server condition.
//!
//! Details follow `errors.proto`: INVALID_ARGUMENT carries a `google.rpc.BadRequest` naming the
//! field; FAILED_PRECONDITION, PERMISSION_DENIED, UNAUTHENTICATED, NOT_FOUND, ALREADY_EXISTS and
//! RESOURCE_EXHAUSTED carry a `google.rpc.ErrorInfo` with domain `oanquan.v1` and the
//! `ErrorReason` value name as reason.

use std::collections::HashMap;

use oanquan_proto::v1::ErrorReason;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt as _};

use crate::domain::GameError;
use crate::domain::computer::Refused;
use crate::domain::limits::RateLimited;

/// `ErrorInfo.domain` of every error.
pub const ERROR_DOMAIN: &str = "oanquan.v1";

/// What goes into the status details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detail {
    /// `google.rpc.ErrorInfo` with this reason.
    Reason(ErrorReason),
    /// `google.rpc.BadRequest` with one field violation.
    Field {
        /// Path of the offending field.
        field: String,
        /// What is wrong.
        description: String,
    },
    /// No details.
    None,
}

/// The table.
#[must_use]
pub fn classify(error: &GameError) -> (Code, Detail) {
    use Detail::Reason;
    use ErrorReason as R;
    match error {
        GameError::GameNotFound(_) => (Code::NotFound, Reason(R::GameNotFound)),
        GameError::InvalidArgument { field, description } => (
            Code::InvalidArgument,
            Detail::Field {
                field: field.clone(),
                description: description.clone(),
            },
        ),
        GameError::KeyIdTaken => (
            Code::InvalidArgument,
            Detail::Field {
                field: "api_key".to_owned(),
                description: crate::domain::KEY_ID_TAKEN.to_owned(),
            },
        ),
        GameError::NotYourTurn { .. } => (Code::FailedPrecondition, Reason(R::NotYourTurn)),
        GameError::IllegalMove(_) => (Code::FailedPrecondition, Reason(R::IllegalMove)),
        GameError::GameOver | GameError::PositionOver | GameError::GameWithdrawn => {
            (Code::FailedPrecondition, Reason(R::GameOver))
        }
        GameError::GameNotStarted => (Code::FailedPrecondition, Reason(R::GameNotStarted)),
        GameError::SeatTaken(_) => (Code::FailedPrecondition, Reason(R::SeatTaken)),
        GameError::StalePly { .. } => (Code::FailedPrecondition, Reason(R::StalePly)),
        GameError::GameAlreadyStarted => (Code::FailedPrecondition, Reason(R::GameAlreadyStarted)),
        GameError::MissingToken
        | GameError::MalformedAuthorization
        | GameError::SeveralAuthorizations => (Code::Unauthenticated, Reason(R::MissingToken)),
        GameError::WrongToken => (Code::PermissionDenied, Reason(R::WrongToken)),
        GameError::NoSpectators => (Code::PermissionDenied, Detail::None),
        GameError::LimitExceeded(_)
        | GameError::RegistrationsExhausted { .. }
        | GameError::ApiKeysExhausted { .. }
        | GameError::SeekPaused { .. }
        | GameError::FirstMovesPending { .. } => {
            (Code::ResourceExhausted, Reason(R::LimitExceeded))
        }
        GameError::TimeUp { .. } => (Code::FailedPrecondition, Reason(R::TimeUp)),
        GameError::CannotClaim(_) => (Code::FailedPrecondition, Reason(R::CannotClaim)),
        GameError::CannotOffer(_) => (Code::FailedPrecondition, Reason(R::CannotOffer)),
        GameError::NoOffer(_) => (Code::FailedPrecondition, Reason(R::NoOffer)),
        GameError::RematchUnavailable(_) => {
            (Code::FailedPrecondition, Reason(R::RematchUnavailable))
        }
        GameError::SeekNotFound(_) => (Code::NotFound, Reason(R::SeekNotFound)),
        GameError::RatedNeedsAccount => (Code::FailedPrecondition, Reason(R::RatedNeedsAccount)),
        GameError::BadApiKey | GameError::NotAnApiKey => {
            (Code::Unauthenticated, Reason(R::BadApiKey))
        }
        GameError::UsernameTaken(_) => (Code::AlreadyExists, Reason(R::UsernameTaken)),
        GameError::PlayerNotFound(_) => (Code::NotFound, Reason(R::PlayerNotFound)),
        GameError::ApiKeyNotFound(_) => (Code::NotFound, Reason(R::ApiKeyNotFound)),
        GameError::SeekRefused(_) => (Code::FailedPrecondition, Reason(R::SeekRefused)),
        // Background agents only: reaching a client would be a bug.
        GameError::NotDue => (Code::Internal, Detail::None),
        GameError::SequenceAhead { .. } => (Code::OutOfRange, Reason(R::SequenceAhead)),
        GameError::GameDamaged(_) | GameError::StoreDamaged(_) => (Code::DataLoss, Detail::None),
        GameError::Unavailable(_) => (Code::Unavailable, Detail::None),
        GameError::Internal(_) => (Code::Internal, Detail::None),
    }
}

/// The most characters of a status message or detail description. Client text inside is quoted
/// short already ([`crate::domain::quoted`]); this is the backstop, so that no message can grow
/// past what clients accept in a header (grpc-core fails the call, details and all, beyond
/// 16 KiB of metadata).
pub const MAX_STATUS_TEXT_CHARS: usize = 512;

/// `text` cut to [`MAX_STATUS_TEXT_CHARS`] on a character boundary, with `…` if it was cut.
fn bounded(mut text: String) -> String {
    if let Some((cut, _)) = text.char_indices().nth(MAX_STATUS_TEXT_CHARS) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// The status a client receives for `error`. Internal errors are logged here and reach the
/// client without their text, which may describe server internals.
#[must_use]
pub fn to_status(error: &GameError) -> Status {
    let (code, detail) = classify(error);
    let message = if code == Code::Internal {
        tracing::error!(%error, "internal error");
        "internal server error; it has been logged, retry later".to_owned()
    } else if let GameError::StoreDamaged(detail) = error {
        // The client learns that the database is damaged; where and how is the operator's.
        tracing::error!(%detail, "the database is damaged where a request read");
        bounded(error.to_string())
    } else {
        bounded(error.to_string())
    };
    // A pause that ends by itself says when, as the rate limits do.
    if let GameError::SeekPaused { retry_after, .. }
    | GameError::RegistrationsExhausted { retry_after, .. } = error
    {
        return limit_exceeded(message, *retry_after);
    }
    match detail {
        Detail::Reason(reason) => Status::with_error_details(
            code,
            message,
            ErrorDetails::with_error_info(reason.as_str_name(), ERROR_DOMAIN, HashMap::new()),
        ),
        Detail::Field { field, description } => Status::with_error_details(
            code,
            message,
            ErrorDetails::with_bad_request_violation(bounded(field), bounded(description)),
        ),
        Detail::None => Status::new(code, message),
    }
}

/// UNAUTHENTICATED for an `AccountService` call that needs an API key and came without
/// `authorization` metadata: reason `ERROR_REASON_MISSING_TOKEN`, as for a game's call without
/// its seat token, but saying which credential is wanted.
#[must_use]
pub fn missing_api_key() -> Status {
    Status::with_error_details(
        Code::Unauthenticated,
        "this call needs your API key: send metadata `authorization: Bearer <api key>` as returned by AccountService.Register or CreateApiKey",
        ErrorDetails::with_error_info(
            ErrorReason::MissingToken.as_str_name(),
            ERROR_DOMAIN,
            HashMap::new(),
        ),
    )
}

/// RESOURCE_EXHAUSTED for a client over its request rate: see [`limit_exceeded`].
#[must_use]
pub fn rate_limited(limited: &RateLimited) -> Status {
    limit_exceeded(limited.to_string(), limited.retry_after)
}

/// RESOURCE_EXHAUSTED for a client over its health-check rate (`--health-rate-limit`): as
/// [`rate_limited`], saying which limit it is.
#[must_use]
pub fn health_rate_limited(limited: &RateLimited) -> Status {
    limit_exceeded(limited.refusal("health checks"), limited.retry_after)
}

/// PERMISSION_DENIED for a call that names this server by a host it does not answer to
/// (`--allowed-host`).
#[must_use]
pub fn host_refused(refused: &crate::web::HostRefused) -> Status {
    Status::permission_denied(refused.to_string())
}

/// RESOURCE_EXHAUSTED for a limit that frees up by itself: an `ErrorInfo` with reason
/// `ERROR_REASON_LIMIT_EXCEEDED` and a `google.rpc.RetryInfo` saying when to retry.
#[must_use]
pub fn limit_exceeded(message: String, retry_after: std::time::Duration) -> Status {
    let mut details = ErrorDetails::new();
    details
        .set_error_info(
            ErrorReason::LimitExceeded.as_str_name(),
            ERROR_DOMAIN,
            HashMap::new(),
        )
        .set_retry_info(Some(retry_after));
    Status::with_error_details(Code::ResourceExhausted, message, details)
}

/// RESOURCE_EXHAUSTED for a request message over the size limit: reason
/// `ERROR_REASON_LIMIT_EXCEEDED` as every limit, without a retry delay and without
/// [`GameError::LimitExceeded`]'s "retry later": the same request is refused again.
#[must_use]
pub fn request_too_large(message: String) -> Status {
    Status::with_error_details(
        Code::ResourceExhausted,
        bounded(message),
        ErrorDetails::with_error_info(
            ErrorReason::LimitExceeded.as_str_name(),
            ERROR_DOMAIN,
            HashMap::new(),
        ),
    )
}

/// RESOURCE_EXHAUSTED for an `Analyze` call refused for lack of search capacity: see
/// [`limit_exceeded`].
#[must_use]
pub fn analysis_refused(refused: &Refused) -> Status {
    limit_exceeded(refused.to_string(), refused.retry_after())
}

/// UNAVAILABLE ending a watch stream because the server is shutting down, with the sequence to
/// resume from on another server or after the restart.
#[must_use]
pub fn shutting_down(after_sequence: u64) -> Status {
    Status::unavailable(format!(
        "server is shutting down; reconnect with after_sequence={after_sequence}"
    ))
}

/// RESOURCE_EXHAUSTED for a health `Watch` beyond `--max-health-watches`: reason
/// `ERROR_REASON_LIMIT_EXCEEDED`, without a retry delay (a place comes back when another
/// watcher closes its stream, which nobody can foresee). `Check` still answers.
#[must_use]
pub fn health_watches_full(max: usize) -> Status {
    to_status(&GameError::LimitExceeded(format!(
        "this server has {max} health watches open, its limit: watch again once one closes \
         (Health.Check still answers)"
    )))
}

/// RESOURCE_EXHAUSTED for a health `Watch` beyond `--max-health-watches-per-client`, as
/// [`health_watches_full`] but for the caller's address alone.
#[must_use]
pub fn health_watches_full_for_client(max: usize) -> Status {
    to_status(&GameError::LimitExceeded(format!(
        "your address has {max} health watches open, its limit: watch again once one of them \
         closes (Health.Check still answers)"
    )))
}

/// UNAVAILABLE ending a health watch because the server is shutting down.
#[must_use]
pub fn health_shutting_down() -> Status {
    Status::unavailable(
        "server is shutting down; watch health again on another server or after the restart",
    )
}

/// RESOURCE_EXHAUSTED ending a watch stream its client left unread for `stall`: the limit on
/// unread streams, as every other limit, with the sequence to resume from.
#[must_use]
pub fn stream_dropped(stall: std::time::Duration, after_sequence: u64) -> Status {
    to_status(&GameError::LimitExceeded(format!(
        "this stream was not read for {stall:?} and was dropped; reconnect with after_sequence={after_sequence}"
    )))
}

/// A request that is not a valid protobuf message: INTERNAL, as the generated services answer
/// it (tonic's prost codec), so that the hand-served `WatchGame` answers the same.
#[must_use]
pub fn undecodable(error: &prost::DecodeError) -> Status {
    Status::internal(error.to_string())
}

/// [`to_status`] by value, for `map_err`: `GameError` lives in `oanquan-game` and `Status` in
/// tonic, so the orphan rule forbids a `From` impl between them.
pub fn into_status(error: GameError) -> Status {
    to_status(&error)
}

#[cfg(test)]
mod tests {
    use oanquan_rules::{PlayError, Player};

    use super::*;
    use crate::domain::GameId;

    fn reason(error: &GameError) -> Option<String> {
        to_status(error).get_details_error_info().map(|i| i.reason)
    }

    #[test]
    fn every_error_has_its_code_and_reason() {
        let id = GameId::parse("abc").unwrap();
        let table: Vec<(GameError, Code, Option<&str>)> = vec![
            (
                GameError::GameNotFound(id),
                Code::NotFound,
                Some("ERROR_REASON_GAME_NOT_FOUND"),
            ),
            (
                GameError::NotYourTurn {
                    to_move: Player::First,
                },
                Code::FailedPrecondition,
                Some("ERROR_REASON_NOT_YOUR_TURN"),
            ),
            (
                GameError::IllegalMove(PlayError::EmptySquare { square: 3 }),
                Code::FailedPrecondition,
                Some("ERROR_REASON_ILLEGAL_MOVE"),
            ),
            (
                GameError::GameOver,
                Code::FailedPrecondition,
                Some("ERROR_REASON_GAME_OVER"),
            ),
            (
                GameError::GameWithdrawn,
                Code::FailedPrecondition,
                Some("ERROR_REASON_GAME_OVER"),
            ),
            (
                GameError::PositionOver,
                Code::FailedPrecondition,
                Some("ERROR_REASON_GAME_OVER"),
            ),
            (
                GameError::GameNotStarted,
                Code::FailedPrecondition,
                Some("ERROR_REASON_GAME_NOT_STARTED"),
            ),
            (
                GameError::SeatTaken("full"),
                Code::FailedPrecondition,
                Some("ERROR_REASON_SEAT_TAKEN"),
            ),
            (
                GameError::StalePly {
                    expected: 1,
                    current: 2,
                },
                Code::FailedPrecondition,
                Some("ERROR_REASON_STALE_PLY"),
            ),
            (
                GameError::GameAlreadyStarted,
                Code::FailedPrecondition,
                Some("ERROR_REASON_GAME_ALREADY_STARTED"),
            ),
            (
                GameError::MissingToken,
                Code::Unauthenticated,
                Some("ERROR_REASON_MISSING_TOKEN"),
            ),
            (
                GameError::MalformedAuthorization,
                Code::Unauthenticated,
                Some("ERROR_REASON_MISSING_TOKEN"),
            ),
            (
                GameError::SeveralAuthorizations,
                Code::Unauthenticated,
                Some("ERROR_REASON_MISSING_TOKEN"),
            ),
            (
                GameError::WrongToken,
                Code::PermissionDenied,
                Some("ERROR_REASON_WRONG_TOKEN"),
            ),
            (GameError::NoSpectators, Code::PermissionDenied, None),
            (
                GameError::LimitExceeded("too many".into()),
                Code::ResourceExhausted,
                Some("ERROR_REASON_LIMIT_EXCEEDED"),
            ),
            (
                GameError::ApiKeysExhausted { max: 20 },
                Code::ResourceExhausted,
                Some("ERROR_REASON_LIMIT_EXCEEDED"),
            ),
            (
                GameError::FirstMovesPending {
                    who: "your account",
                    games: 3,
                },
                Code::ResourceExhausted,
                Some("ERROR_REASON_LIMIT_EXCEEDED"),
            ),
            (
                GameError::SeekPaused {
                    who: "your address",
                    walkaways: 3,
                    retry_after: std::time::Duration::from_secs(60),
                },
                Code::ResourceExhausted,
                Some("ERROR_REASON_LIMIT_EXCEEDED"),
            ),
            (
                GameError::RegistrationsExhausted {
                    per_hour: 5,
                    retry_after: std::time::Duration::from_secs(720),
                },
                Code::ResourceExhausted,
                Some("ERROR_REASON_LIMIT_EXCEEDED"),
            ),
            (
                GameError::SequenceAhead {
                    requested: 9,
                    last: 3,
                },
                Code::OutOfRange,
                Some("ERROR_REASON_SEQUENCE_AHEAD"),
            ),
            (
                GameError::GameDamaged(GameId::parse("abc").unwrap()),
                Code::DataLoss,
                None,
            ),
            (
                GameError::StoreDamaged("sqlite: database disk image is malformed".into()),
                Code::DataLoss,
                None,
            ),
            (
                GameError::Unavailable("bye".into()),
                Code::Unavailable,
                None,
            ),
            (GameError::Internal("boom".into()), Code::Internal, None),
            (
                GameError::TimeUp { first_move: false },
                Code::FailedPrecondition,
                Some("ERROR_REASON_TIME_UP"),
            ),
            (
                GameError::CannotClaim("wait".into()),
                Code::FailedPrecondition,
                Some("ERROR_REASON_CANNOT_CLAIM"),
            ),
            (
                GameError::CannotOffer("again".into()),
                Code::FailedPrecondition,
                Some("ERROR_REASON_CANNOT_OFFER"),
            ),
            (
                GameError::NoOffer("none"),
                Code::FailedPrecondition,
                Some("ERROR_REASON_NO_OFFER"),
            ),
            (
                GameError::RematchUnavailable("closed".into()),
                Code::FailedPrecondition,
                Some("ERROR_REASON_REMATCH_UNAVAILABLE"),
            ),
            (
                GameError::SeekNotFound("x".into()),
                Code::NotFound,
                Some("ERROR_REASON_SEEK_NOT_FOUND"),
            ),
            (GameError::NotDue, Code::Internal, None),
            (
                GameError::RatedNeedsAccount,
                Code::FailedPrecondition,
                Some("ERROR_REASON_RATED_NEEDS_ACCOUNT"),
            ),
            (
                GameError::BadApiKey,
                Code::Unauthenticated,
                Some("ERROR_REASON_BAD_API_KEY"),
            ),
            (
                GameError::NotAnApiKey,
                Code::Unauthenticated,
                Some("ERROR_REASON_BAD_API_KEY"),
            ),
            (
                GameError::UsernameTaken("\"lan\"".into()),
                Code::AlreadyExists,
                Some("ERROR_REASON_USERNAME_TAKEN"),
            ),
            (
                GameError::PlayerNotFound("\"nobody\"".into()),
                Code::NotFound,
                Some("ERROR_REASON_PLAYER_NOT_FOUND"),
            ),
            (
                GameError::ApiKeyNotFound("\"k\"".into()),
                Code::NotFound,
                Some("ERROR_REASON_API_KEY_NOT_FOUND"),
            ),
            (
                GameError::SeekRefused("out of range".into()),
                Code::FailedPrecondition,
                Some("ERROR_REASON_SEEK_REFUSED"),
            ),
        ];
        for (error, code, expected_reason) in table {
            let status = to_status(&error);
            assert_eq!(status.code(), code, "{error:?}");
            assert_eq!(reason(&error).as_deref(), expected_reason, "{error:?}");
            if let Some(info) = status.get_details_error_info() {
                assert_eq!(info.domain, ERROR_DOMAIN);
            }
            assert!(status.get_details_bad_request().is_none(), "{error:?}");
        }
    }

    #[test]
    fn a_damaged_file_is_said_without_the_backends_words() {
        let status = to_status(&GameError::StoreDamaged(
            "sqlite: database disk image is malformed".into(),
        ));
        assert_eq!(status.code(), Code::DataLoss);
        assert!(
            status.message().contains("database is damaged"),
            "{status:?}"
        );
        assert!(!status.message().contains("sqlite"), "{status:?}");
    }

    #[test]
    fn invalid_argument_names_the_field() {
        let status = to_status(&GameError::invalid("move.square", "must be 0 to 11"));
        assert_eq!(status.code(), Code::InvalidArgument);
        let bad = status.get_details_bad_request().expect("BadRequest");
        assert_eq!(bad.field_violations.len(), 1);
        assert_eq!(bad.field_violations[0].field, "move.square");
        assert!(status.message().contains("must be 0 to 11"));
        assert!(status.get_details_error_info().is_none());

        let status = to_status(&GameError::KeyIdTaken);
        assert_eq!(status.code(), Code::InvalidArgument);
        let bad = status.get_details_bad_request().expect("BadRequest");
        assert_eq!(bad.field_violations[0].field, "api_key");
        assert_eq!(
            status.message(),
            "invalid api_key: is taken by another account's key: make a new one"
        );
    }

    #[test]
    fn a_registration_limit_says_when_to_come_back() {
        let status = to_status(&GameError::RegistrationsExhausted {
            per_hour: 5,
            retry_after: std::time::Duration::from_secs(720),
        });
        assert_eq!(status.code(), Code::ResourceExhausted);
        let retry = status.get_details_retry_info().expect("RetryInfo");
        assert_eq!(retry.retry_delay, Some(std::time::Duration::from_secs(720)));
        assert!(
            status
                .message()
                .contains("(at most 5 an hour); retry in 720 s"),
            "{status:?}"
        );
    }

    #[test]
    fn rate_limits_carry_a_retry_delay() {
        use crate::domain::limits::RateLimit;
        let status = rate_limited(&RateLimited {
            retry_after: std::time::Duration::from_millis(250),
            limit: RateLimit {
                per_second: 4.0,
                burst: 8,
            },
        });
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(
            status.get_details_error_info().unwrap().reason,
            "ERROR_REASON_LIMIT_EXCEEDED"
        );
        assert_eq!(
            status.get_details_retry_info().unwrap().retry_delay,
            Some(std::time::Duration::from_millis(250))
        );
        assert!(
            status.message().contains("retry in 250 ms"),
            "{}",
            status.message()
        );
    }

    #[test]
    fn rate_limit_refusals_say_what_came_too_often() {
        use crate::domain::limits::RateLimit;
        let limited = RateLimited {
            retry_after: std::time::Duration::from_millis(250),
            limit: RateLimit {
                per_second: 0.5,
                burst: 3,
            },
        };
        assert_eq!(
            rate_limited(&limited).message(),
            "too many requests from your address (limit 0.5 per second, bursts of 3); retry in 250 ms"
        );
        assert_eq!(
            health_rate_limited(&limited).message(),
            "too many health checks from your address (limit 0.5 per second, bursts of 3); retry in 250 ms"
        );
    }

    #[test]
    fn statuses_without_a_domain_error_have_their_code_and_reason() {
        use std::time::Duration;

        use crate::domain::limits::RateLimit;
        let limit = "ERROR_REASON_LIMIT_EXCEEDED";
        let refused = Refused::Busy {
            max: 2,
            retry_after: Duration::from_millis(100),
        };
        let refused_text = refused.to_string();
        let garbage = <oanquan_proto::v1::WatchGameRequest as prost::Message>::decode(&[0xff][..])
            .expect_err("a truncated varint");
        let rate = RateLimited {
            retry_after: Duration::from_millis(250),
            limit: RateLimit {
                per_second: 4.0,
                burst: 8,
            },
        };
        /// Status, code, reason, retry delay, and text its message must hold.
        type Row<'a> = (Status, Code, Option<&'a str>, Option<Duration>, &'a str);
        let table: Vec<Row<'_>> = vec![
            (
                rate_limited(&rate),
                Code::ResourceExhausted,
                Some(limit),
                Some(Duration::from_millis(250)),
                "retry in 250 ms",
            ),
            (
                analysis_refused(&refused),
                Code::ResourceExhausted,
                Some(limit),
                Some(Duration::from_millis(100)),
                &refused_text,
            ),
            (
                stream_dropped(Duration::from_secs(3), 41),
                Code::ResourceExhausted,
                Some(limit),
                None,
                "reconnect with after_sequence=41",
            ),
            (
                shutting_down(42),
                Code::Unavailable,
                None,
                None,
                "reconnect with after_sequence=42",
            ),
            (
                health_watches_full(3),
                Code::ResourceExhausted,
                Some(limit),
                None,
                "this server has 3 health watches open, its limit",
            ),
            (
                health_watches_full_for_client(2),
                Code::ResourceExhausted,
                Some(limit),
                None,
                "your address has 2 health watches open, its limit",
            ),
            (
                health_shutting_down(),
                Code::Unavailable,
                None,
                None,
                "watch health again",
            ),
            (
                missing_api_key(),
                Code::Unauthenticated,
                Some("ERROR_REASON_MISSING_TOKEN"),
                None,
                "needs your API key",
            ),
            (
                undecodable(&garbage),
                Code::Internal,
                None,
                None,
                "failed to decode Protobuf message",
            ),
        ];
        for (status, code, reason, retry, text) in table {
            let info = status.get_details_error_info();
            assert_eq!(status.code(), code, "{status:?}");
            assert_eq!(
                info.as_ref().map(|i| i.reason.as_str()),
                reason,
                "{status:?}"
            );
            if let Some(info) = info {
                assert_eq!(info.domain, ERROR_DOMAIN);
            }
            assert_eq!(
                status.get_details_retry_info().and_then(|r| r.retry_delay),
                retry,
                "{status:?}"
            );
            assert!(status.message().contains(text), "{status:?}");
        }
    }

    #[test]
    fn long_messages_are_cut_on_a_character() {
        let long = "ô".repeat(3 * MAX_STATUS_TEXT_CHARS);
        let status = to_status(&GameError::invalid("display_name", long.clone()));
        for text in [
            status.message().to_owned(),
            status.get_details_bad_request().unwrap().field_violations[0]
                .description
                .clone(),
        ] {
            assert_eq!(text.chars().count(), MAX_STATUS_TEXT_CHARS + 1);
            assert!(text.ends_with("ô…"), "{text}");
        }
    }

    #[test]
    fn internal_errors_do_not_leak_their_text() {
        let status = to_status(&GameError::Internal("secret path /var/db".into()));
        assert!(!status.message().contains("/var/db"));
    }
}
