//! Failures and the exit codes they map to.
//!
//! Scripts branch on the exit code, so every failure path goes through [`CliError`] and one table
//! ([`CliError::from_status`]) instead of ad-hoc `process::exit` calls.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use oanquan_proto::v1::ErrorReason;
use tonic::Code;
use tonic_types::StatusExt as _;

use crate::shown::shown;

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
    /// `seek`: interrupted (Ctrl-C, SIGINT) while waiting; the seek is withdrawn (128 + 2, as
    /// shells report a process stopped by SIGINT).
    pub const INTERRUPTED: u8 = 130;
}

/// The exit-code table as shown at the end of `oanquan --help`.
pub const EXIT_CODES_HELP: &str = "\
EXIT CODES:
    0   success; for `play`, the game is over; also when standard output is closed
        by its reader (`oanquan watch GAME | head`): the client stops quietly
    1   unexpected failure (local I/O error, unexpected server answer)
    2   usage error, or the server rejected the request as malformed
    3   no such game (or `accept`: no such open seek; `player`, `games`: no such
        player; `keys revoke`: no such key)
    4   rejected by the game's state (seat taken, game over, not started, illegal move,
        time up), or by the server's rules (username taken, a rated game without an
        account, a seek's rating range)
    5   no stored token for the game, no account stored for the server, or the server
        refused either (an API key revoked or unknown)
    6   `play`: input ended before the game did
    69  server unavailable (cannot connect, TLS certificate refused, connection lost
        and --give-up elapsed)
    75  server limit reached (too many games or watchers); retry later
    130 `seek`, `accept` or `play` interrupted with Ctrl-C (a waiting seek is withdrawn)";

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
            let detail = connection_detail(status);
            return Self::new(
                code::UNAVAILABLE,
                format!(
                    "{what}: the connection failed ({detail}): the server went away, or the \
                     address is not an oanquan server (gRPC over HTTP/2; check --server). If \
                     the server uses TLS, connect with --server https://HOST:PORT"
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
        let mut message = format!("{what}: {}", plain_words(status, reason));
        if verbose() {
            message.push_str(&api_words(status, reason));
        }
        Self::new(code, message)
    }

    /// A waiting call whose connection broke after the server had taken it: the server was
    /// reached, so [`CliError::from_status`]'s hints about the address and TLS would send the
    /// user after the wrong problem (an outside probe's laptop slept through a seek's
    /// keepalives). `None` when `status` is not a broken connection or an unavailable server.
    pub fn connection_lost(what: &str, status: &tonic::Status, consequence: &str) -> Option<Self> {
        if !broken_connection(status) && status.code() != Code::Unavailable {
            return None;
        }
        let detail = connection_detail(status);
        Some(Self::new(
            code::UNAVAILABLE,
            format!("{what}: the connection to the server broke ({detail}); {consequence}"),
        ))
    }

    /// Standard output was closed by its reader (`oanquan list | head`): the reader has what it
    /// wanted, so the command ends quietly and successfully, as `ripgrep` and `ls` do, rather
    /// than with an error about a broken pipe.
    pub fn output_closed() -> Self {
        Self::new(code::OK, "")
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
/// What broke a connection: the transport's error chain, or the status's own words.
fn connection_detail(status: &tonic::Status) -> String {
    match std::error::Error::source(status) {
        Some(source) => error_chain(source),
        None => shown(status.message()).into_owned(),
    }
}

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

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// `--verbose`: errors and notices also carry the API's own words.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// A refusal in the words of the game: the server's messages are written for API clients
/// ("list games with ListGames", "ask RulesService.LegalMoves"), so a person gets these, and
/// `--verbose` adds the server's own. Where the server's words are shown, they go through
/// [`shown`]: control characters escaped, at most 200 characters.
fn plain_words(status: &tonic::Status, reason: Option<ErrorReason>) -> String {
    let words = match reason {
        Some(ErrorReason::GameNotFound) => {
            "there is no such game on this server (`oanquan list` shows its games)"
        }
        Some(ErrorReason::NotYourTurn) => "it is not your turn; wait for the opponent's move",
        Some(ErrorReason::IllegalMove) => illegal_move(status),
        Some(ErrorReason::GameOver) if status.message().contains("withdrawn") => {
            "the game is over: it was withdrawn before it started, as an API key of the \
             account waiting in it was revoked after it was created"
        }
        Some(ErrorReason::GameOver) => "the game is over",
        Some(ErrorReason::GameNotStarted) => {
            "the game has not started: it waits for a second player to join"
        }
        Some(ErrorReason::SeatTaken) => "the game is full; watch it with `oanquan watch`",
        Some(ErrorReason::StalePly) => {
            "another move was played meanwhile; look at the board and try again"
        }
        Some(ErrorReason::GameAlreadyStarted) => {
            "a move has been played, so the game can no longer be aborted; resign instead"
        }
        Some(ErrorReason::MissingToken | ErrorReason::WrongToken) => {
            "the server does not accept the seat token used for this game (saved, or given \
             with --token or OANQUAN_TOKEN)"
        }
        Some(ErrorReason::TimeUp) => "too late: your time for this move has run out",
        // The server says how long the opponent still has before a claim is possible.
        Some(ErrorReason::CannotClaim) if !status.message().is_empty() => {
            return shown(status.message()).into_owned();
        }
        Some(ErrorReason::CannotClaim) => "you cannot claim the win now",
        // The server says which: the computer takes no draws, or this move's offer was
        // declined (an outside probe was told "declined" of an offer to the computer).
        Some(ErrorReason::CannotOffer) if !status.message().is_empty() => {
            let message = status.message();
            return shown(
                message
                    .strip_prefix("cannot offer a draw: ")
                    .unwrap_or(message),
            )
            .into_owned();
        }
        Some(ErrorReason::CannotOffer) => "you cannot offer a draw now",
        Some(ErrorReason::NoOffer) => "there is no draw offer to decline",
        Some(ErrorReason::RematchUnavailable) => {
            "no rematch is possible for this game any more (declined, started, too late, or the \
             game was aborted)"
        }
        Some(ErrorReason::SeekNotFound) => {
            "that seek is not open any more (`oanquan seeks` lists the open ones)"
        }
        Some(ErrorReason::UsernameTaken) => {
            "that username is taken (names are compared ignoring case and look-alike letters); \
             pick another"
        }
        Some(ErrorReason::BadApiKey) => {
            "the server refuses the API key in your account file (revoked, or not this \
             server's): bring a working key with `oanquan login --force` (make one with \
             `oanquan keys new` where the account works), or play with --anonymous"
        }
        Some(ErrorReason::RatedNeedsAccount) => {
            "rated games are for accounts only: register with `oanquan register NAME` (and \
             leave out --anonymous)"
        }
        Some(ErrorReason::PlayerNotFound) => {
            "there is no player with that username (`oanquan top` lists rated players)"
        }
        Some(ErrorReason::ApiKeyNotFound) => {
            "your account has no API key with that id (`oanquan keys` lists them)"
        }
        // The server says which: your own seek, or the rating it wants against yours.
        Some(ErrorReason::SeekRefused) => {
            return shown(&people_words(status.message())).into_owned();
        }
        // The server words its limits for people already ("...; retry later").
        Some(ErrorReason::LimitExceeded) => return shown(status.message()).into_owned(),
        _ => match status.code() {
            Code::NotFound => "not found",
            Code::InvalidArgument => return invalid_argument(status),
            Code::Unavailable => "the server is unavailable; try again later",
            Code::DeadlineExceeded => "the server did not answer in time",
            Code::ResourceExhausted => "the server is busy; try again later",
            _ if status.message().is_empty() => "the server could not do it",
            _ => return shown(&people_words(status.message())).into_owned(),
        },
    };
    words.to_owned()
}

/// Why a move was refused. The server says it with ring squares (0-11), which are not the
/// squares 1-5 the player typed, so only the kind of refusal is taken from its words.
fn illegal_move(status: &tonic::Status) -> &'static str {
    let message = status.message();
    if message.contains("is empty") {
        "that square is empty: choose a square of yours that holds stones"
    } else if message.contains("belongs to") || message.contains("mandarin") {
        "that square is not yours: choose one of your squares 1-5, counted from your left, \
         that holds stones"
    } else {
        "that move is not allowed in this position: choose a square of yours that holds stones \
         (`moves` lists the legal moves)"
    }
}

/// A malformed request names a field of the API; say which option of this program it was.
fn invalid_argument(status: &tonic::Status) -> String {
    let violation = status
        .get_details_bad_request()
        .and_then(|b| b.field_violations.into_iter().next());
    let Some(violation) = violation else {
        return shown(&people_words(status.message())).into_owned();
    };
    let option = match violation.field.as_str() {
        "rules.preset" | "rules" => "--preset (`oanquan presets` lists them)",
        "display_name" => "--name",
        "game_id" => "the game id",
        "computer.level" | "computer" => "--computer",
        "seat" => "--seat",
        "seek_id" => "the seek id",
        field if field.starts_with("time_control.real_time") => "--time",
        field if field.starts_with("time_control.correspondence") => "--correspondence",
        "time_control" => "--time",
        "computer.after" => "--computer-after",
        "username" => "the username",
        "rated" => "--rated",
        field if field.starts_with("rating_range") => "--range",
        "speed" => "--speed",
        "result" => "--result",
        "page_token" => "--page-token",
        "page_size" => "--page-size",
        "key_id" => "the key id",
        _ => return shown(&people_words(status.message())).into_owned(),
    };
    let description = people_words(&violation.description);
    // "game_id is empty" became "the game id is empty": the option is named already.
    match description.strip_prefix(option) {
        Some(rest) if rest.starts_with(' ') => shown(&description).into_owned(),
        // A thing named by a noun reads on into the sentence: "the username is reserved", not
        // "the username: is reserved".
        _ if option.starts_with("the ") && starts_with_verb(&description) => {
            format!("{option} {}", shown(&description))
        }
        _ => format!("{option}: {}", shown(&description)),
    }
}

/// Whether a field's description starts as a sentence about the field ("is reserved", "mixes
/// Latin and Cyrillic letters") rather than with a noun phrase of its own ("too low").
fn starts_with_verb(description: &str) -> bool {
    const VERBS: &[&str] = &[
        "is", "are", "must", "may", "can", "cannot", "has", "have", "does", "mixes", "looks",
        "contains", "ends", "starts", "holds", "names", "uses",
    ];
    description
        .split(' ')
        .next()
        .is_some_and(|word| VERBS.contains(&word))
}

/// The API's field names that reach a person in the server's words, and what the person typed
/// instead. Longest first: one name may end another.
const API_FIELDS: &[(&str, &str)] = &[
    (
        "next_page_token from the previous response",
        "the --page-token that the previous page's `more:` line gave",
    ),
    ("request.game_id", "the game id"),
    ("after_sequence", "the last event seen"),
    ("expected_ply", "the move number"),
    ("display_name", "--name"),
    ("player_token", "your saved seat"),
    ("move.square", "the square"),
    ("page_token", "--page-token"),
    ("page_size", "--page-size"),
    ("game_id", "the game id"),
    ("seek_id", "the seek id"),
    ("key_id", "the key id"),
];

/// The server's words, written for API clients, in a person's terms: field names become what
/// was typed (`game_id is empty` → `the game id is empty`), `invalid FIELD: why` becomes
/// `WORDS: why`, and the clauses that point at API calls (`; list games with ListGames`) are
/// dropped, as this program makes those calls itself. `--verbose` still shows the original.
fn people_words(message: &str) -> String {
    let mut clauses = message.split("; ");
    let mut text = clauses.next().unwrap_or_default().to_owned();
    for clause in clauses {
        if !names_an_api_call(clause) {
            text.push_str("; ");
            text.push_str(clause);
        }
    }
    if let Some(rest) = text.strip_prefix("invalid ")
        && let Some((field, why)) = rest.split_once(": ")
        && let Some((_, words)) = API_FIELDS.iter().find(|(name, _)| *name == field)
    {
        text = format!("{words}: {why}");
    }
    for (name, words) in API_FIELDS {
        text = replace_names(&text, name, words);
    }
    text
}

/// `text` with each `name` that stands alone (not inside a longer identifier such as
/// `next_page_token` for `page_token`) written as `words`.
fn replace_names(text: &str, name: &str, words: &str) -> String {
    let part_of_name = |c: char| c.is_alphanumeric() || c == '_' || c == '.';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(name) {
        let (before, after) = (&rest[..at], &rest[at + name.len()..]);
        let alone = !before.ends_with(part_of_name) && !after.starts_with(part_of_name);
        out.push_str(before);
        out.push_str(if alone { words } else { name });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Whether a clause names an RPC or message of the API (`ListGames`, `RulesService.LegalMoves`,
/// `authorization: Bearer`): a word with a capital after a lower-case letter.
fn names_an_api_call(clause: &str) -> bool {
    clause.contains("authorization")
        || clause.split_whitespace().any(|word| {
            let mut lower_seen = false;
            word.chars().skip(1).any(|c| {
                let camel = lower_seen && c.is_uppercase();
                lower_seen = c.is_lowercase();
                camel
            }) && word.starts_with(char::is_uppercase)
        })
}

/// `--verbose`: the status code, the error reason and the server's message, as the API has them.
fn api_words(status: &tonic::Status, reason: Option<ErrorReason>) -> String {
    let reason = reason.map_or(String::new(), |r| format!(" {}", r.as_str_name()));
    format!(
        " [{:?}{reason}: {}]",
        status.code(),
        shown(status.message())
    )
}

/// tonic's transport errors say "transport error" at the top and the useful part (connection
/// refused, ...) in their sources.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// What the user typed (a game id, a username), as a message may show it: at most 64
/// characters, escaped (`\u{1b}`), then `…`, as the server quotes client text. A long or
/// hostile argument must not fill the terminal or write control sequences into it.
pub fn typed(input: &str) -> String {
    const MAX_CHARS: usize = 64;
    // Nothing at all would read as a gap in the sentence (`get game : ...`).
    if input.is_empty() {
        return "\"\"".to_owned();
    }
    let mut chars = input.chars();
    let head: String = chars.by_ref().take(MAX_CHARS).collect();
    let ellipsis = if chars.next().is_some() { "…" } else { "" };
    format!("{}{ellipsis}", head.escape_debug())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal of a malformed request: `message`, and `description` of `field`.
    fn invalid(message: &str, field: &str, description: &str) -> tonic::Status {
        tonic::Status::with_error_details(
            Code::InvalidArgument,
            message,
            tonic_types::ErrorDetails::with_bad_request_violation(field, description),
        )
    }

    #[test]
    fn typed_input_is_cut_at_64_characters_and_escaped() {
        assert_eq!(typed("abc-12_Z"), "abc-12_Z");
        assert_eq!(typed("Lân"), "Lân");
        assert_eq!(typed("a\u{1b}[2J\nb"), r"a\u{1b}[2J\nb");
        let long = "é".repeat(65);
        assert_eq!(typed(&long), format!("{}…", "é".repeat(64)));
        assert_eq!(typed(&long[..128]), "é".repeat(64));
    }

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
            assert!(err.message.starts_with("x: "), "{}", err.message);
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
        // A game withdrawn as someone came to join it says why.
        let withdrawn = tonic::Status::with_error_details(
            Code::FailedPrecondition,
            "the game was withdrawn before it started: an API key of the account waiting in it \
             was revoked after the game was created; create or join another game",
            tonic_types::ErrorDetails::with_error_info(
                "ERROR_REASON_GAME_OVER",
                "oanquan.v1",
                std::collections::HashMap::new(),
            ),
        );
        let err = CliError::from_status("join", &withdrawn);
        assert!(
            err.message.contains("withdrawn") && err.message.contains("revoked"),
            "{}",
            err.message
        );
    }

    #[test]
    fn online_play_refusals_in_plain_words() {
        let refusal = |reason: &str, message: &str| {
            tonic::Status::with_error_details(
                Code::FailedPrecondition,
                message,
                tonic_types::ErrorDetails::with_error_info(
                    reason,
                    "oanquan.v1",
                    std::collections::HashMap::new(),
                ),
            )
        };
        let words = |reason, message| {
            let err = CliError::from_status("x", &refusal(reason, message));
            assert_eq!(err.code, code::REJECTED, "{reason}");
            err.message
        };
        // A claim made too early: the server's own words say how long is left.
        assert_eq!(
            words(
                "ERROR_REASON_CANNOT_CLAIM",
                "you can claim the win once they have not moved for 1d (in 3h)"
            ),
            "x: you can claim the win once they have not moved for 1d (in 3h)"
        );
        assert_eq!(
            words(
                "ERROR_REASON_CANNOT_OFFER",
                "cannot offer a draw: the computer does not take draws: play on, or resign"
            ),
            "x: the computer does not take draws: play on, or resign"
        );
        assert_eq!(
            words(
                "ERROR_REASON_CANNOT_OFFER",
                "cannot offer a draw: you already offered a draw on this move and it was \
                 declined; offer again after your next move"
            ),
            "x: you already offered a draw on this move and it was declined; offer again after \
             your next move"
        );
        assert!(words("ERROR_REASON_NO_OFFER", "api").contains("no draw offer to decline"));
        assert!(words("ERROR_REASON_TIME_UP", "api").contains("time for this move has run out"));
        assert!(words("ERROR_REASON_REMATCH_UNAVAILABLE", "api").contains("no rematch"));
        let gone = tonic::Status::with_error_details(
            Code::NotFound,
            "no seek s1",
            tonic_types::ErrorDetails::with_error_info(
                "ERROR_REASON_SEEK_NOT_FOUND",
                "oanquan.v1",
                std::collections::HashMap::new(),
            ),
        );
        let err = CliError::from_status("accept seek s1", &gone);
        assert_eq!(err.code, code::NOT_FOUND);
        assert!(err.message.contains("`oanquan seeks`"), "{}", err.message);
        // A time control the server refuses names the option, not the API field.
        let bad = invalid(
            "invalid time_control.real_time.initial",
            "time_control.real_time.initial",
            "must be between 1s and 3h",
        );
        assert_eq!(
            CliError::from_status("create game", &bad).message,
            "create game: --time: must be between 1s and 3h"
        );
    }

    #[test]
    fn account_refusals_in_plain_words() {
        let refusal_saying = |reason: &str, code: Code, message: &str| {
            tonic::Status::with_error_details(
                code,
                message,
                tonic_types::ErrorDetails::with_error_info(
                    reason,
                    "oanquan.v1",
                    std::collections::HashMap::new(),
                ),
            )
        };
        let refusal = |reason: &str, code: Code| refusal_saying(reason, code, "api words");
        let err = |reason, status_code| CliError::from_status("x", &refusal(reason, status_code));
        let taken = err("ERROR_REASON_USERNAME_TAKEN", Code::AlreadyExists);
        assert_eq!(taken.code, code::REJECTED);
        assert!(
            taken.message.contains("username is taken"),
            "{}",
            taken.message
        );
        let bad_key = err("ERROR_REASON_BAD_API_KEY", Code::Unauthenticated);
        assert_eq!(bad_key.code, code::AUTH);
        for needle in ["account file", "oanquan login --force", "--anonymous"] {
            assert!(bad_key.message.contains(needle), "{}", bad_key.message);
        }
        let rated = err("ERROR_REASON_RATED_NEEDS_ACCOUNT", Code::FailedPrecondition);
        assert_eq!(rated.code, code::REJECTED);
        assert!(
            rated.message.contains("oanquan register NAME"),
            "{}",
            rated.message
        );
        let missing = err("ERROR_REASON_PLAYER_NOT_FOUND", Code::NotFound);
        assert_eq!(missing.code, code::NOT_FOUND);
        assert!(missing.message.contains("no player"), "{}", missing.message);
        assert!(
            err("ERROR_REASON_API_KEY_NOT_FOUND", Code::NotFound)
                .message
                .contains("`oanquan keys`")
        );
        // The server says why, for people already.
        let own = refusal_saying(
            "ERROR_REASON_SEEK_REFUSED",
            Code::FailedPrecondition,
            "cannot accept this seek: it is your own seek",
        );
        let said = CliError::from_status("accept", &own);
        assert_eq!(said.code, code::REJECTED);
        assert_eq!(
            said.message,
            "accept: cannot accept this seek: it is your own seek"
        );
        let forged = invalid(
            "invalid page_token",
            "page_token",
            "not a page token of this listing; pass next_page_token from the previous \
                 response with the same filter, or nothing",
        );
        let said = CliError::from_status("top", &forged).message;
        assert!(
            said.contains("the --page-token that the previous page's `more:` line gave")
                && !said.contains("next_--page-token"),
            "{said}"
        );
        assert_eq!(
            replace_names("game_id, request.game_id, my_game_id", "game_id", "X"),
            "X, request.game_id, my_game_id"
        );
        let bad_name = invalid(
            "invalid username",
            "username",
            "mixes Latin and Cyrillic letters",
        );
        assert_eq!(
            CliError::from_status("register", &bad_name).message,
            "register: the username mixes Latin and Cyrillic letters"
        );
        let reserved = invalid("invalid username", "username", "is reserved: it is admin");
        assert_eq!(
            CliError::from_status("register", &reserved).message,
            "register: the username is reserved: it is admin"
        );
        let range = invalid("invalid rating_range", "rating_range.min", "too low");
        assert_eq!(
            CliError::from_status("seek", &range).message,
            "seek: --range: too low"
        );
    }

    #[test]
    fn the_servers_words_reach_the_terminal_escaped_and_capped() {
        let hostile = "\x1b]0;owned\x07\x1b[2J\nyour move> \u{202e}evil";
        let with_reason = |reason: &str, code: Code| {
            tonic::Status::with_error_details(
                code,
                hostile,
                tonic_types::ErrorDetails::with_error_info(
                    reason,
                    "oanquan.v1",
                    std::collections::HashMap::new(),
                ),
            )
        };
        let statuses = [
            with_reason("ERROR_REASON_CANNOT_CLAIM", Code::FailedPrecondition),
            with_reason("ERROR_REASON_LIMIT_EXCEEDED", Code::ResourceExhausted),
            // No reason, a code without words of its own: the server's message.
            tonic::Status::new(Code::Internal, hostile),
            tonic::Status::new(Code::Aborted, hostile),
            // Malformed, without a field violation; with one for a field this client does not
            // know; and the violation's description.
            tonic::Status::invalid_argument(hostile),
            tonic::Status::with_error_details(
                Code::InvalidArgument,
                hostile,
                tonic_types::ErrorDetails::with_bad_request_violation("new_field", "x"),
            ),
            tonic::Status::with_error_details(
                Code::InvalidArgument,
                "m",
                tonic_types::ErrorDetails::with_bad_request_violation("display_name", hostile),
            ),
            // A broken connection's words, when it has no source.
            tonic::Status::unknown(format!("h2 protocol error: {hostile}")),
        ];
        let clean = |message: &str| {
            assert!(
                !message.contains(['\x1b', '\x07', '\n', '\u{202e}']),
                "{message:?}"
            );
        };
        for status in &statuses {
            let message = CliError::from_status("x", status).message;
            clean(&message);
            assert!(message.contains(r"\u{1b}]0;owned\u{7}"), "{message}");
            assert!(message.contains(r"\nyour move> \u{202e}evil"), "{message}");
            // --verbose adds the server's words: escaped as well.
            let api = api_words(status, error_reason(status));
            clean(&api);
        }
        // A long message is cut at 200 characters.
        let long = tonic::Status::new(Code::Internal, "x".repeat(5_000));
        let message = CliError::from_status("x", &long).message;
        assert_eq!(message, format!("x: {}…", "x".repeat(200)));
        assert!(api_words(&long, None).chars().count() < 250);
        // Ordinary words in any language are kept as they are.
        let viet = tonic::Status::with_error_details(
            Code::FailedPrecondition,
            "bạn có thể thắng sau 3 giờ",
            tonic_types::ErrorDetails::with_error_info(
                "ERROR_REASON_CANNOT_CLAIM",
                "oanquan.v1",
                std::collections::HashMap::new(),
            ),
        );
        assert_eq!(
            CliError::from_status("claim", &viet).message,
            "claim: bạn có thể thắng sau 3 giờ"
        );
    }

    #[test]
    fn an_illegal_move_says_why_in_the_players_terms() {
        let illegal = |message: &str| {
            let status = tonic::Status::with_error_details(
                Code::FailedPrecondition,
                message,
                tonic_types::ErrorDetails::with_error_info(
                    "ERROR_REASON_ILLEGAL_MOVE",
                    "oanquan.v1",
                    std::collections::HashMap::new(),
                ),
            );
            let err = CliError::from_status("move 2r", &status);
            assert_eq!(err.code, code::REJECTED);
            err.message
        };
        // Ring 8 is the second player's square 2: the ring number must not be shown.
        assert_eq!(
            illegal(
                "illegal move: square 8 is empty; choose a square with stones; ask RulesService.LegalMoves"
            ),
            "move 2r: that square is empty: choose a square of yours that holds stones"
        );
        let foreign = illegal("illegal move: square 8 belongs to the second player; ...");
        assert!(foreign.contains("not yours"), "{foreign}");
        assert!(!foreign.contains('8'), "{foreign}");
        let other = illegal("illegal move: something new");
        assert!(other.contains("holds stones"), "{other}");
    }

    #[test]
    fn server_words_name_what_was_typed_not_api_fields() {
        let malformed = |field: &str, description: &str| {
            let status = tonic::Status::with_error_details(
                Code::InvalidArgument,
                format!("invalid {field}: {description}"),
                tonic_types::ErrorDetails::with_bad_request_violation(field, description),
            );
            CliError::from_status("get game x", &status).message
        };
        assert_eq!(
            malformed(
                "game_id",
                "game_id is not a valid id (at most 64 characters of A-Z a-z 0-9 - _)"
            ),
            "get game x: the game id is not a valid id (at most 64 characters of A-Z a-z 0-9 - _)"
        );
        assert_eq!(
            malformed(
                "game_id",
                "game_id is empty; pass the id returned by CreateGame or ListGames"
            ),
            "get game x: the game id is empty"
        );
        // A field this client has no option for: the server's message, in the same words.
        assert_eq!(
            malformed("request.game_id", "must be set"),
            "get game x: the game id: must be set"
        );
        let bare = |code: Code, message: &str| {
            CliError::from_status("move 3r", &tonic::Status::new(code, message)).message
        };
        assert_eq!(
            bare(
                Code::FailedPrecondition,
                "expected_ply 4 is not the game's ply; refresh with GetGame and retry"
            ),
            "move 3r: the move number 4 is not the game's ply"
        );
        assert_eq!(
            bare(
                Code::InvalidArgument,
                "invalid after_sequence: beyond the last event"
            ),
            "move 3r: the last event seen: beyond the last event"
        );
        // Clauses without API names are kept.
        assert_eq!(
            bare(Code::Internal, "the store is busy; retry later"),
            "move 3r: the store is busy; retry later"
        );
    }

    #[test]
    fn people_read_no_api_names() {
        let refusal = |reason: &str, code: Code, message: &str| {
            tonic::Status::with_error_details(
                code,
                message,
                tonic_types::ErrorDetails::with_error_info(
                    reason,
                    "oanquan.v1",
                    std::collections::HashMap::new(),
                ),
            )
        };
        let cases = [
            refusal(
                "ERROR_REASON_GAME_NOT_FOUND",
                Code::NotFound,
                "no game with id g; list games with ListGames",
            ),
            refusal(
                "ERROR_REASON_ILLEGAL_MOVE",
                Code::FailedPrecondition,
                "illegal move: square 3 is empty; ask RulesService.LegalMoves for the legal ones",
            ),
            refusal(
                "ERROR_REASON_STALE_PLY",
                Code::FailedPrecondition,
                "expected ply 2 but the game is at ply 3; refresh with GetGame and retry",
            ),
        ];
        for status in &cases {
            let err = CliError::from_status("move 3r", status);
            for api in [
                "ListGames",
                "RulesService",
                "GetGame",
                "ERROR_REASON",
                "ply",
            ] {
                assert!(!err.message.contains(api), "{}", err.message);
            }
        }
        let bad = invalid(
            "invalid rules.preset: unknown preset `chess`",
            "rules.preset",
            "unknown preset `chess`",
        );
        let err = CliError::from_status("create game", &bad);
        assert_eq!(err.code, code::USAGE);
        assert!(err.message.contains("--preset"), "{}", err.message);
        assert!(
            api_words(&cases[1], error_reason(&cases[1])).contains("ERROR_REASON_ILLEGAL_MOVE")
        );
    }
}
