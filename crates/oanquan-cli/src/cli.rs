//! Command-line definition (clap derive). The help texts are the manual: keep them accurate.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::moves::Side;

const ABOUT: &str = "Play and watch Ô Ăn Quan (Vietnamese mancala) games on an oanquan server.";

const LONG_ABOUT: &str = "\
Play and watch Ô Ăn Quan (Vietnamese mancala) games on an oanquan server.

oanquan is a thin client: the server keeps the games and judges every move; this program draws \
the board, reads your moves and follows the game's live event stream.

THE BOARD
    Your seat is always drawn at the bottom. The first player's squares are ring 1..5, the \
second player's ring 7..11, the mandarin squares (ô quan) ring 0 and 6. You name a move in your \
own terms: your square 1-5 counted from YOUR left, and a direction as YOU see it: `3 r`, `3r`, \
`3 right`, `2 l`, `2 left`.

TOKENS
    `create` and `join` receive a secret token for your seat and keep it in \
$XDG_CONFIG_HOME/oanquan/tokens.json (or ~/.config/oanquan/tokens.json, or \
$OANQUAN_CONFIG_DIR/tokens.json), mode 0600, one entry per server, game and seat. `play GAME` \
finds it there, so you can stop the client and come back to a game later. Two people on one \
machine (or one person playing both sides) keep both seats of a game side by side: `play GAME \
--seat first|second` picks one (without --seat, `play` asks on a terminal). The server is \
recognised however it is written: `127.0.0.1:50051`, `http://127.0.0.1:50051` and \
`http://127.0.0.1:50051/` are the same.

CONNECTIONS
    `play` and `watch` follow the game's event stream. When the connection drops they reconnect \
with exponential backoff (capped at 10 s, jittered) and resume after the last event they saw: \
no move is missed and none is shown twice. While the server cannot be reached, one line on \
standard error says so (updated in place on a terminal; one line per change otherwise); \
--verbose shows every attempt with its error.

TLS
    `--server https://HOST:PORT` connects with TLS (rustls), `http://HOST:PORT` or a bare \
HOST:PORT in cleartext. A server certificate from a public CA is trusted as it is (Mozilla's \
root certificates are built in; the system's store is not read). For a self-signed certificate \
or a private CA, pass the CA certificate with --ca-cert FILE (PEM); it implies TLS for a bare \
HOST:PORT and contradicts http://. The host in the address must be a name (or IP address) the \
server's certificate lists. A certificate that is not trusted or not valid for the name fails \
with exit code 69 and says so.";

const AFTER_LONG_HELP: &str = "\
EXAMPLES:
    Start a game and wait for an opponent (prints the game id):
        oanquan create --name Lan --play
    Play against the computer (levels 1-7 or random ... master); type `hint` at the prompt:
        oanquan create --name Lan --computer club --play
    Find open games and join one:
        oanquan list --filter open
        oanquan join 7fq3k2 --name Minh --play
    Come back to a game after closing the client:
        oanquan play 7fq3k2
    Give up, or call off a game before its first move:
        oanquan resign 7fq3k2
        oanquan abort 7fq3k2
    Watch a game as a spectator, or as JSON lines for a script:
        oanquan watch 7fq3k2
        oanquan watch 7fq3k2 --json | jq -c '.event.movePlayed.record.move // empty'
    Another server:
        OANQUAN_SERVER=http://games.example:50051 oanquan list
    A server with TLS, its certificate self-signed or from a private CA:
        oanquan --server https://games.example:443 --ca-cert ca.pem list

";

#[derive(Debug, Parser)]
#[command(
    name = "oanquan",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_long_help = format!("{AFTER_LONG_HELP}{}", crate::error::EXIT_CODES_HELP)
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,

    #[command(subcommand)]
    pub command: Command,
}

/// Options shared by every subcommand, under one heading of their own in every help text so that
/// a command's own options stand apart.
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// Server address: https://HOST:PORT for TLS; http://HOST:PORT or HOST:PORT for cleartext
    /// HTTP/2.
    #[arg(
        long,
        global = true,
        env = "OANQUAN_SERVER",
        default_value = "http://127.0.0.1:50051",
        value_name = "URL"
    )]
    pub server: String,

    /// Also trust this PEM CA certificate for TLS (a self-signed server certificate, a private
    /// CA). Implies TLS for a bare HOST:PORT; an error with http://.
    #[arg(long, global = true, env = "OANQUAN_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,

    /// Directory of the token file [default: $XDG_CONFIG_HOME/oanquan or ~/.config/oanquan].
    #[arg(long, global = true, env = "OANQUAN_CONFIG_DIR", value_name = "DIR")]
    pub config_dir: Option<PathBuf>,

    /// Print the API's own messages as JSON instead of text, in the canonical protobuf JSON
    /// mapping that grpcurl and buf curl print (camelCase fields, enum names such as
    /// PLAYER_FIRST, RFC 3339 times, 64-bit numbers as strings, default values left out): one
    /// object per line. See each command's help for which message it prints.
    #[arg(long, global = true)]
    pub json: bool,

    /// Also show the API's own words in errors and connection notices (status codes, error
    /// reasons, the server's message, every reconnect attempt).
    #[arg(long, short, global = true)]
    pub verbose: bool,

    /// Plain ASCII output without colours even on a terminal (also implied by NO_COLOR or when
    /// standard output is not a terminal).
    #[arg(long, global = true)]
    pub plain: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a game and take a seat in it.
    #[command(long_about = "\
Create a game and take a seat in it. The game waits for a second player (`oanquan join GAME`). \
Prints the game id; the seat's token is stored in the token file. With --play, goes straight to \
the board and waits there for the opponent. With --json, prints the CreateGameResponse without \
its `playerToken` (the token goes to the token file only).

With --computer LEVEL the server's computer takes the other seat and the game starts at once. \
Levels, weakest to strongest (a name or its number):

    1 random   plays a random legal move
    2 greedy   takes the biggest capture it sees, nothing more
    3 novice   looks 2 moves ahead
    4 casual   looks 4 moves ahead
    5 club     looks 6 moves ahead
    6 expert   looks 9 moves ahead and plays endgames perfectly
    7 master   uses its whole thinking time and plays endgames perfectly")]
    Create(CreateArgs),

    /// Join a waiting game (takes the free seat).
    #[command(long_about = "\
Join a waiting game: takes its free seat and starts the game. The seat's token is stored in the \
token file so that `oanquan play GAME` works afterwards; a seat of the same game already stored \
there (the creator's, on the same machine) is kept. Exits 4 if the game is full. With --json, \
prints the JoinGameResponse without its `playerToken`.")]
    Join(JoinArgs),

    /// Play a game you have a seat in (interactive).
    #[command(long_about = PLAY_LONG_ABOUT)]
    Play(PlayArgs),

    /// Give up a game you play in: the opponent wins.
    #[command(long_about = "\
Resign a game you hold a seat in (from the token file): the opponent wins and the game is over. \
If you hold both seats, say which resigns with --seat (on a terminal, `resign` asks). Prints the \
result; with --json the API's ResignResponse. Exits 4 if the game is already over.")]
    Resign(SeatArgs),

    /// Call off a game before its first move.
    #[command(long_about = "\
Abort a game you hold a seat in, before its first move: it ends without a winner. A game in \
which a move has been played cannot be aborted (exit 4): resign it instead. Prints the result; \
with --json the API's AbortGameResponse.")]
    Abort(SeatArgs),

    /// Follow a game as a spectator.
    #[command(long_about = "\
Follow a game as a spectator: the board, then every move as it is played, until the game ends \
(exit 0). Survives dropped connections (reconnect and resume, no move shown twice).

With --json, prints the WatchGame stream itself: one WatchGameResponse per line, `{\"event\": \
{...}}`, exactly as the server sends them (heartbeats left out). The first is a snapshot \
(`event.snapshot.game`); for a game that is already over it is the only one, and its \
`game.status` (GAME_STATUS_FINISHED or GAME_STATUS_ABORTED) and `game.result` say how it ended. \
A live game's stream ends with `event.gameOver`. After a reconnect the stream goes on with the \
missed events, or with a fresh snapshot if the server no longer has them. --from-start does not \
combine with --json: the earlier moves are not on the stream; `oanquan moves GAME --json` prints \
them (ListMovesResponse).

Text output without a terminal uses the same stable lines as `play` (see `oanquan play --help`).")]
    Watch(WatchArgs),

    /// List games.
    #[command(long_about = "\
List games, newest first, one per line. With --json, one ListGamesResponse holding every game \
listed (`.games[]`).")]
    List(ListArgs),

    /// Show one game: players, status, board.
    #[command(long_about = "\
Show one game: players, status, board. With --json, the GetGameResponse (`{\"game\": {...}}`), \
as grpcurl prints it.")]
    Show(ShowArgs),

    /// Print a game's moves, with --trace their step-by-step effects.
    #[command(long_about = "\
Print a game's moves, with --trace their step-by-step effects. With --json, the \
ListMovesResponse (`.moves[]`, `.startPosition`).")]
    Moves(MovesArgs),

    /// List the rule presets a game can be created with.
    #[command(long_about = "\
List the rule presets a game can be created with. With --json, the ListPresetsResponse.")]
    Presets,
}

const PLAY_LONG_ABOUT: &str = "\
Play a game you hold a seat in (from `create` or `join` with the same --server). The board is \
drawn from your seat; when it is your turn, type a move in your own terms: your square 1-5 \
counted from your left, then l/left or r/right as you see the board: `3 r`, `3r`, `2 left`. \
Other commands at the prompt: `moves` (legal moves), `board`, `hint` (the server's engine \
suggests a move, with its evaluation), `help`, `resign` (asks to confirm with y), `abort` (only \
before the first move: calls the game off), `quit` (leave; the game goes on and `oanquan play \
GAME` resumes it).

Opponent moves arrive through the live event stream, shown step by step (sowing, relays, \
captures, refills): animated on a terminal, as text lines otherwise.

SCRIPTS
    When standard input or output is not a terminal, `play` reads one move per line from \
standard input and prints plain, stable lines. Lines starting with a space (the board, move \
traces) are for people; the others are, one per line:

    playing GAME as SEAT                        at start (SEAT is first or second)
    game GAME: STATUS, N moves played           the state found on connecting (STATUS is
                                                waiting, active, finished or aborted)
    joined: SEAT NAME                           a player took a seat
    game started
    waiting for an opponent to join
    turn: SEAT                                  whose turn it is now
    move N: SEAT plays S DIR (ring R +1|-1), captured C, score F:S
                                                S and DIR in the mover's own terms
    legal moves: 1r 1l 3r ...                   before each prompt, in your own terms
    your move                                   waiting for one line of input
    hint: S DIR (Sd), eval E, depth D[, exact]  answer to `hint`: S DIR in your terms
                                                (Sd its short form, e.g. 3r), E the
                                                expected final score difference for you
    error: MESSAGE                              bad input or a rejected move; re-prompts
    resign? (y/N)                               after `resign`: the next line confirms it
                                                (y or yes); anything else keeps playing
    game over: OUTCOME F:S (REASON)             OUTCOME is `first wins`, `second wins`,
                                                `draw` or `aborted`

    The turn line comes before the prompt. Notices about the connection (`server unreachable: \
...`, `reconnected`) go to standard error, one line per change; after a reconnect the prompt \
is shown again. `play` exits 0 when the game is over, 6 if standard input ends first.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SeatChoice {
    /// Move first (South).
    First,
    /// Move second (North).
    Second,
    /// Let the server pick at random.
    Any,
}

impl SeatChoice {
    pub fn side(self) -> Option<Side> {
        match self {
            SeatChoice::First => Some(Side::First),
            SeatChoice::Second => Some(Side::Second),
            SeatChoice::Any => None,
        }
    }
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Rule preset (see `oanquan presets`).
    #[arg(long, default_value = "standard", value_name = "NAME")]
    pub preset: String,

    /// Which seat to take.
    #[arg(long, value_enum, default_value_t = SeatChoice::First)]
    pub seat: SeatChoice,

    #[command(flatten)]
    pub name: NameArg,

    /// Go straight to `play` after creating (waits for the opponent).
    #[arg(long)]
    pub play: bool,

    /// Play against the server's computer at this level: 1-7 or random, greedy, novice, casual,
    /// club, expert, master (weakest to strongest). It takes the other seat; the game starts at
    /// once.
    #[arg(long, value_name = "LEVEL", value_parser = parse_level)]
    pub computer: Option<u32>,

    #[command(flatten, next_help_heading = "With --play")]
    pub display: DisplayArgs,
}

/// The computer's levels, weakest (1) first.
pub const COMPUTER_LEVELS: [&str; 7] = [
    "random", "greedy", "novice", "casual", "club", "expert", "master",
];

/// A computer level by name (any case) or number, 1-7.
pub fn parse_level(text: &str) -> Result<u32, String> {
    let text = text.trim();
    let by_number = text.parse::<u32>().ok().filter(|n| (1..=7).contains(n));
    let by_name = || {
        (1u32..)
            .zip(COMPUTER_LEVELS)
            .find(|(_, name)| name.eq_ignore_ascii_case(text))
            .map(|(n, _)| n)
    };
    by_number.or_else(by_name).ok_or_else(|| {
        format!(
            "`{text}` is not a level: use 1-7 or {}",
            COMPUTER_LEVELS.join(", ")
        )
    })
}

/// The name of computer level `level` (1-7), or `level N` for one this client does not know.
pub fn level_name(level: u32) -> String {
    usize::try_from(level)
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| COMPUTER_LEVELS.get(i))
        .map_or_else(|| format!("level {level}"), |name| (*name).to_owned())
}

#[derive(Debug, Args)]
pub struct NameArg {
    /// Your display name (1-32 characters; not authenticated) [default: $USER].
    #[arg(long, env = "OANQUAN_NAME", value_name = "NAME")]
    pub name: Option<String>,
}

#[derive(Debug, Args)]
pub struct JoinArgs {
    /// The game id. Ids may start with `-`: they are still read as the id.
    #[arg(allow_hyphen_values = true)]
    pub game: String,

    #[command(flatten)]
    pub name: NameArg,

    /// Go straight to `play` after joining.
    #[arg(long)]
    pub play: bool,

    #[command(flatten, next_help_heading = "With --play")]
    pub display: DisplayArgs,
}

/// Options of the live board (`play`, `watch`).
#[derive(Debug, Args, Clone)]
pub struct DisplayArgs {
    /// Do not animate moves on a terminal; print their steps as text lines instead.
    #[arg(long)]
    pub no_animate: bool,

    /// Delay between two animation frames, in milliseconds.
    #[arg(long, default_value_t = 90, value_name = "MS")]
    pub animate_ms: u64,

    /// Give up (exit 69) after this many seconds without a working connection; 0 = never.
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    pub give_up: u64,
}

#[derive(Debug, Args)]
pub struct PlayArgs {
    /// The game id. Ids may start with `-`: they are still read as the id.
    #[arg(allow_hyphen_values = true)]
    pub game: String,

    /// Which of your seats to play when the token file holds both seats of the game (two
    /// players on one machine). Without it, `play` asks on a terminal and is a usage error
    /// (exit 2) otherwise.
    #[arg(long, value_name = "SEAT")]
    pub seat: Option<Side>,

    #[command(flatten)]
    pub display: DisplayArgs,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The game id. Ids may start with `-`: they are still read as the id.
    #[arg(allow_hyphen_values = true)]
    pub game: String,

    /// Also print the moves played before the watch started.
    #[arg(long)]
    pub from_start: bool,

    /// Draw the board from this seat (default: first player at the bottom).
    #[arg(long, value_name = "SEAT")]
    pub view: Option<Side>,

    #[command(flatten)]
    pub display: DisplayArgs,
}

#[derive(Debug, Args)]
pub struct SeatArgs {
    /// The game id. Ids may start with `-`: they are still read as the id.
    #[arg(allow_hyphen_values = true)]
    pub game: String,

    /// Which of your seats, when the token file holds both seats of the game.
    #[arg(long, value_name = "SEAT")]
    pub seat: Option<Side>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Filter {
    /// Waiting for a second player: the ones you can join.
    Open,
    /// Being played.
    Active,
    /// Over (finished or aborted).
    Finished,
    /// Everything.
    All,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Which games.
    #[arg(long, value_enum, default_value_t = Filter::All)]
    pub filter: Filter,

    /// At most this many games (newest first).
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub limit: u32,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The game id. Ids may start with `-`: they are still read as the id.
    #[arg(allow_hyphen_values = true)]
    pub game: String,

    /// Draw the board from this seat [default: your seat if you play in it, else first].
    #[arg(long, value_name = "SEAT")]
    pub view: Option<Side>,
}

#[derive(Debug, Args)]
pub struct MovesArgs {
    /// The game id. Ids may start with `-`: they are still read as the id.
    #[arg(allow_hyphen_values = true)]
    pub game: String,

    /// Also print each move's steps.
    #[arg(long)]
    pub trace: bool,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn long_help_teaches() {
        let help = Cli::command().render_long_help().to_string();
        for needle in [
            "EXAMPLES:",
            "EXIT CODES:",
            "69  server unavailable",
            "OANQUAN_SERVER",
            "--ca-cert <FILE>",
            "OANQUAN_CA_CERT",
            "oanquan --server https://",
        ] {
            assert!(help.contains(needle), "missing {needle:?} in:\n{help}");
        }
    }

    #[test]
    fn help_keeps_global_options_apart_and_play_options_under_play() {
        let mut command = Cli::command();
        command.build();
        for name in [
            "create", "join", "play", "watch", "list", "show", "moves", "presets",
        ] {
            let help = command
                .find_subcommand_mut(name)
                .expect("subcommand")
                .render_long_help()
                .to_string();
            let global = help.find("Global options:").expect("a global heading");
            for flag in ["--server", "--ca-cert", "--config-dir", "--json", "--plain"] {
                // The option's own line, not a mention of it in the command's text.
                let at = help
                    .find(&format!("\n      {flag}"))
                    .unwrap_or_else(|| panic!("{name}: {flag}"));
                assert!(
                    at > global,
                    "{name}: {flag} is listed among its own options"
                );
            }
            assert!(!help.contains("--version"), "{name} repeats --version");
            if ["create", "join"].contains(&name) {
                let play = help.find("With --play:").expect("a --play heading");
                assert!(help.find("\n      --animate-ms").unwrap() > play, "{name}");
            }
        }
    }

    #[test]
    fn parses_global_flags_after_the_subcommand() {
        let cli = Cli::try_parse_from([
            "oanquan",
            "watch",
            "g1",
            "--server",
            "http://x:1",
            "--json",
            "--no-animate",
        ])
        .expect("parses");
        assert_eq!(cli.global.server, "http://x:1");
        assert!(cli.global.json);
        assert_eq!(cli.global.ca_cert, None);
        match cli.command {
            Command::Watch(w) => {
                assert_eq!(w.game, "g1");
                assert!(w.display.no_animate);
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from([
            "oanquan",
            "--server",
            "https://h:1",
            "presets",
            "--ca-cert",
            "ca.pem",
        ])
        .expect("parses");
        assert_eq!(cli.global.ca_cert, Some(PathBuf::from("ca.pem")));
        assert!(Cli::try_parse_from(["oanquan", "presets", "--ca-cert"]).is_err());
        let cli =
            Cli::try_parse_from(["oanquan", "show", "g", "--view", "second"]).expect("parses");
        assert!(matches!(
            cli.command,
            Command::Show(ShowArgs {
                view: Some(Side::Second),
                ..
            })
        ));
        assert!(Cli::try_parse_from(["oanquan", "show", "g", "--view", "west"]).is_err());
        for (text, level) in [("club", 5), ("MASTER", 7), ("1", 1), ("7", 7)] {
            match Cli::try_parse_from(["oanquan", "create", "--computer", text]).map(|c| c.command)
            {
                Ok(Command::Create(c)) => assert_eq!(c.computer, Some(level), "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        for bad in ["0", "8", "grandmaster"] {
            assert!(Cli::try_parse_from(["oanquan", "create", "--computer", bad]).is_err());
        }
        assert_eq!(level_name(5), "club");
        assert_eq!(level_name(9), "level 9");
        // Game ids are URL-safe base64 and may start with a hyphen.
        for args in [
            &["oanquan", "join", "-4ab", "--name", "x"][..],
            &["oanquan", "join", "--name", "x", "-4ab"][..],
            &["oanquan", "join", "--name", "x", "--", "-4ab"][..],
        ] {
            match Cli::try_parse_from(args).map(|c| c.command) {
                Ok(Command::Join(j)) => {
                    assert_eq!(j.game, "-4ab", "{args:?}");
                    assert_eq!(j.name.name.as_deref(), Some("x"), "{args:?}");
                }
                other => panic!("{args:?}: {other:?}"),
            }
        }
    }
}
