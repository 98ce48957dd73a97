//! What can go wrong in the game service, independent of the transport. `grpc::status` maps
//! each variant to a status code in one table.

use oanquan_rules::{PlayError, Player};

use crate::id::GameId;

/// What is wrong with `api_key` in [`GameError::KeyIdTaken`].
pub const KEY_ID_TAKEN: &str = "is taken by another account's key: make a new one";

/// A request failed. Messages say what to do next; they never contain a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GameError {
    /// No game with that id.
    #[error("no game with id {0}; list games with ListGames")]
    GameNotFound(GameId),
    /// A field of the request is malformed.
    #[error("invalid {field}: {description}")]
    InvalidArgument {
        /// The field's path in the request, e.g. `move.square`.
        field: String,
        /// What is wrong and what would be right.
        description: String,
    },
    /// It is the other player's turn.
    #[error("it is the {to_move}'s turn; wait for a TurnStarted event for your seat")]
    NotYourTurn {
        /// Who is to move.
        to_move: Player,
    },
    /// The move is not legal in the current position.
    #[error("illegal move: {0}; ask RulesService.LegalMoves for the legal ones")]
    IllegalMove(PlayError),
    /// The game is finished or aborted.
    #[error("the game is over; create or join another game")]
    GameOver,
    /// A waiting game aborted as someone came to join it: an account seated in it revoked
    /// an API key after it was created, and whoever held that key may have created it.
    #[error(
        "the game was withdrawn before it started: an API key of the account waiting in it was \
         revoked after the game was created; create or join another game"
    )]
    GameWithdrawn,
    /// A position given to the stateless rules calls (ApplyMove, Analyze) that is already over:
    /// [`GameError::GameOver`]'s meaning, without a hosted game to leave.
    #[error("the position is already over: no move can be played or analysed from it")]
    PositionOver,
    /// Still waiting for the second player.
    #[error("the game has not started: it is waiting for a second player to join")]
    GameNotStarted,
    /// No free seat (or not the requested one).
    #[error("{0}")]
    SeatTaken(&'static str),
    /// `expected_ply` is not the current ply.
    #[error(
        "expected ply {expected} but the game is at ply {current}; refresh with GetGame and retry"
    )]
    StalePly {
        /// What the client expected.
        expected: u32,
        /// The game's current ply.
        current: u32,
    },
    /// Abort after the first move.
    #[error("a move has already been played, so the game cannot be aborted; resign instead")]
    GameAlreadyStarted,
    /// No bearer token on a call that needs one.
    #[error(
        "this call needs the player token: send metadata `authorization: Bearer <player_token>` as returned by CreateGame or JoinGame"
    )]
    MissingToken,
    /// An `authorization` value that is not `Bearer <credential>`: another scheme, no scheme
    /// (a bare token), nothing after the scheme, or bytes that are not visible ASCII.
    #[error(
        "the `authorization` metadata is not `Bearer <token>`: send the word Bearer, a space, then the player token (or API key) as CreateGame, JoinGame or AccountService.Register returned it"
    )]
    MalformedAuthorization,
    /// More than one `authorization` value: which credential acts would be the server's guess
    /// (the first, for one reader; the last, for a proxy in front).
    #[error(
        "the request carries more than one `authorization` metadata value; send exactly one: `Bearer <token>`"
    )]
    SeveralAuthorizations,
    /// A spectator on a server that takes none (`--max-spectators-per-game 0`): only the
    /// players may watch, with their seats' tokens. Not a limit that frees up.
    #[error(
        "this server takes no spectators: only a game's players can watch it, each with their \
         seat's token"
    )]
    NoSpectators,
    /// A token that belongs to no seat of this game.
    #[error("this credential (player token or API key) does not hold a seat of this game")]
    WrongToken,
    /// A server limit.
    #[error("{0}; retry later")]
    LimitExceeded(String),
    /// The caller's address made as many accounts as it may for now.
    #[error(
        "too many accounts registered from your address (at most {per_hour} an hour); retry in {} s",
        .retry_after.as_secs().max(1)
    )]
    RegistrationsExhausted {
        /// The limit, in accounts an hour.
        per_hour: u32,
        /// When the address may register again.
        retry_after: std::time::Duration,
    },
    /// `RegisterRequest.api_key` has the id of another account's key. Unlike other malformed
    /// fields it says something: that such a key exists (see [`crate::registration`]).
    #[error("invalid api_key: {}", KEY_ID_TAKEN)]
    KeyIdTaken,
    /// An account holds as many working API keys as it may: waiting frees no place, revoking
    /// one does (hence not [`GameError::LimitExceeded`]'s "retry later").
    #[error(
        "an account has at most {max} working API keys, and this one has them all: revoke one it no longer uses (ListApiKeys lists them) and create the new one again"
    )]
    ApiKeysExhausted {
        /// The most working keys an account may have.
        max: usize,
    },
    /// Resume point beyond the last event.
    #[error(
        "after_sequence {requested} is beyond the last event ({last}); resume from a sequence you received, or omit it for a snapshot"
    )]
    SequenceAhead {
        /// What the client asked for.
        requested: u64,
        /// The last sequence there is.
        last: u64,
    },
    /// The game's stored data is damaged: it cannot be loaded, the rest of the service goes on.
    #[error(
        "game {0} cannot be read: its stored data is damaged. Other games are not affected; \
         retrying does not help. Tell the server's operator, whose log names this game"
    )]
    GameDamaged(GameId),
    /// The database is damaged where a request that is not about one game read (a
    /// listing, an account, the lobby). The detail is for the operator's log, not the client.
    #[error(
        "the server's database is damaged where this request read; retrying does not help. \
         Tell the server's operator, whose log says where"
    )]
    StoreDamaged(String),
    /// The server is shutting down or the store is unreachable.
    #[error("{0}")]
    Unavailable(String),
    /// The mover's time (or first-move time) ran out before the move arrived; the game ends on
    /// time (or is aborted) as the server applies the deadline.
    #[error("{}", if *first_move {
        "your first move came too late: the game is aborted (a player who does not make their first move in time ends the game with no result)"
    } else {
        "your time ran out before the move arrived: you lose on time"
    })]
    TimeUp {
        /// It was the player's first move (the game is aborted rather than lost).
        first_move: bool,
    },
    /// A deadline was applied that is not (or no longer) due: for the background agents only.
    #[error("nothing is due in this game")]
    NotDue,
    /// A victory claim that the rules do not allow now.
    #[error("cannot claim the win: {0}")]
    CannotClaim(String),
    /// A draw offer that cannot be made now.
    #[error("cannot offer a draw: {0}")]
    CannotOffer(String),
    /// An answer to an offer that does not stand.
    #[error("nothing to answer: {0}")]
    NoOffer(&'static str),
    /// A rematch that cannot be offered or declined.
    #[error("no rematch: {0}")]
    RematchUnavailable(String),
    /// No open seek with that id (taken, withdrawn, or never there).
    #[error("no open seek with id {0}; list them with ListSeeks")]
    SeekNotFound(String),
    /// A rated game or seek without an account.
    #[error(
        "rated games are between two accounts: send `authorization: Bearer <api key>` (register with AccountService.Register), or play unrated"
    )]
    RatedNeedsAccount,
    /// An API key that is malformed, unknown or revoked.
    #[error("the API key is not valid (unknown or revoked); create a new one or register")]
    BadApiKey,
    /// A bearer on a call that seats its caller (CreateGame, JoinGame, Seek, AcceptSeek) that
    /// is neither an API key nor a seat token: most likely a mangled key, and playing
    /// anonymously instead would surprise its sender.
    #[error(
        "the bearer is not an API key (oqk_…, as Register or CreateApiKey returned it, whole); send the key to play as its account, or no authorization to play anonymously"
    )]
    NotAnApiKey,
    /// A username that is taken (by its case- and look-alike-insensitive key).
    #[error("the username {0} is taken (names are unique ignoring case and look-alike letters)")]
    UsernameTaken(String),
    /// No account with that username.
    #[error("no player named {0}")]
    PlayerNotFound(String),
    /// No such API key on the caller's account.
    #[error("your account has no API key with id {0}; list them with ListApiKeys")]
    ApiKeyNotFound(String),
    /// A seek that the caller cannot accept (a rating range it is outside of, its own seek).
    #[error("cannot accept this seek: {0}")]
    SeekRefused(String),
    /// The caller walked away from too many of the games seeks and joins put it in: it may not
    /// seek, accept a seek or join a game for a while (see [`crate::walkaway`]).
    #[error(
        "{who} walked away from {walkaways} games with other players within the last hour (games it sought, accepted or joined, and then aborted or did not make its first move in time), so it may not seek, accept a seek or join a game for {}; it may still create a game",
        crate::clock::format_duration(std::time::Duration::from_secs(.retry_after.as_secs() + 1))
    )]
    SeekPaused {
        /// "your address" or "your account".
        who: &'static str,
        /// The walkaways counted.
        walkaways: usize,
        /// How long the pause lasts from now.
        retry_after: std::time::Duration,
    },
    /// The caller has as many games with others on a live clock waiting for its first move as
    /// it may (see [`crate::walkaway`]): it frees up when the caller moves, not by waiting.
    #[error(
        "{who} has {games} games with other players on a clock that wait for its first move: play them before seeking, accepting a seek or joining another"
    )]
    FirstMovesPending {
        /// "your address" or "your account".
        who: &'static str,
        /// The games waiting.
        games: usize,
    },
    /// A bug or a broken store. The message is logged; clients get a generic one.
    #[error("internal error: {0}")]
    Internal(String),
}

impl GameError {
    /// An [`GameError::InvalidArgument`] for `field`.
    pub fn invalid(field: impl Into<String>, description: impl Into<String>) -> GameError {
        GameError::InvalidArgument {
            field: field.into(),
            description: description.into(),
        }
    }
}

impl From<PlayError> for GameError {
    /// A move refused by the engine: out-of-range squares are malformed requests, the rest
    /// are well-formed moves that the position does not allow.
    fn from(error: PlayError) -> GameError {
        match error {
            PlayError::GameOver => GameError::GameOver,
            PlayError::NoSuchSquare { .. } => GameError::invalid("move.square", error.to_string()),
            error => GameError::IllegalMove(error),
        }
    }
}
