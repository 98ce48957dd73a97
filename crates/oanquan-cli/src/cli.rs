//! Command-line definition (clap derive). The help texts are the manual: keep them accurate.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::moves::Side;
use crate::timecontrol::{TimeControl, parse_correspondence, parse_time, parse_wait};

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
    `create`, `join`, `seek`, `accept` and `rematch` (at the prompt) receive a secret token for your seat and keep it in \
$XDG_CONFIG_HOME/oanquan/tokens.json (or ~/.config/oanquan/tokens.json, or \
$OANQUAN_CONFIG_DIR/tokens.json), mode 0600, one entry per server, game and seat. `play GAME` \
finds it there, so you can stop the client and come back to a game later. Two people on one \
machine (or one person playing both sides) keep both seats of a game side by side: `play GAME \
--seat first|second` picks one (without --seat, `play` asks on a terminal). The server is \
recognised however it is written: `127.0.0.1:50051`, `http://127.0.0.1:50051` and \
`http://127.0.0.1:50051/` are the same. A token that could not be saved (the file not \
writable) is printed instead, with how to use it: `OANQUAN_TOKEN=TOKEN oanquan play GAME --seat \
SEAT` (or --token; `resign`, `abort` and `claim` take it too).

ACCOUNTS
    Anonymous play needs nothing: a seat is a display name. `oanquan register NAME` makes an \
account on the server and keeps its secret API key in $XDG_CONFIG_HOME/oanquan/account.json \
(next to the token file, mode 0600, one account per server; the key is not printed). From \
then on `create`, `join`, `seek` and `accept` play as the account: the board shows your \
username and rating, `--rated` games change the ratings (Glicko-2, one per speed: bullet, \
blitz, rapid, classical, correspondence; a `?` marks a provisional rating), and `seek --range \
1400-1700` pairs only with opponents rated within the range. `--anonymous` plays without the \
account. `oanquan me`, `player NAME`, `top [SPEED]` and `games [NAME]` show profiles, \
leaderboards and game histories; `oanquan keys` lists, makes and revokes API keys.

CLOCKS
    `create --time 5+3` starts a game with a Fischer clock (5 minutes each, 3 seconds added \
after each move); `--correspondence 2d` gives every move two days. The clocks are the \
server's: the board shows both players' times, counted down locally from each event's reading, \
and the server ends the game when a flag falls, also when nobody is connected. Each player's \
first move has its own limit (30 seconds by default on the server) during which no clock runs; \
missing it aborts the game.

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
    A game with a clock: 5 minutes each plus 3 seconds a move; or two days a move:
        oanquan create --name Lan --time 5+3 --play
        oanquan create --name Lan --correspondence 2d
    Find an opponent for a 3+2 game (two terminals; the first waits, the second pairs):
        oanquan seek 3+2 --name Lan
        oanquan seek 3+2 --name Minh
    ... or take one of the open seeks:
        oanquan seeks
        oanquan accept s8d2kq --name Minh
    Come back to a game after closing the client:
        oanquan play 7fq3k2
    Give up, or call off a game before its first move:
        oanquan resign 7fq3k2
        oanquan abort 7fq3k2
    Watch a game as a spectator, or as JSON lines for a script:
        oanquan watch 7fq3k2
        oanquan watch 7fq3k2 --json | jq -c '.event.movePlayed.record.move // empty'
    Register an account, play a rated game, see the ratings:
        oanquan register Lan
        oanquan seek 5+0 --rated --range 1400-1700
        oanquan me
        oanquan top blitz
        oanquan games --result win
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

    /// Directory of the token file and the account file [default: $XDG_CONFIG_HOME/oanquan or
    /// ~/.config/oanquan].
    #[arg(long, global = true, env = "OANQUAN_CONFIG_DIR", value_name = "DIR")]
    pub config_dir: Option<PathBuf>,

    /// The server moved: a command that acts for your seat (play, resign, abort, claim) takes
    /// the seat saved for this old address when none is saved for --server, and saves it for
    /// --server from then on.
    #[arg(long, global = true, value_name = "OLD-URL")]
    pub seat_from: Option<String>,

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

    /// Plain output without colours even on a terminal: an ASCII board and markers, names as
    /// the players wrote them (also implied by NO_COLOR,
    /// TERM=dumb, a locale that is not UTF-8, or when standard output is not a terminal;
    /// TERM=dumb is written to as a pipe is, without moving the cursor).
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

With --time M+S the game has a Fischer clock: M minutes each (or the initial time with a unit: \
90s+0, 1h+30), S seconds added after each move; 1 second to 3 hours, increment up to 180 \
seconds. With --correspondence TIME every move has a fixed time (2d, 12h, 30m; 1 minute to 30 \
days). Without either the game is untimed. With --json the answer's `game.timeControl` and \
`game.clocks` carry them.

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

    /// Find an opponent: wait for someone who wants the same game, then play it.
    #[command(long_about = "\
Find an opponent: asks the server for a game with these rules and this time control, and waits \
until someone else seeks the same (or accepts this seek with `oanquan accept`). The server pairs \
compatible seeks first come, first served. While waiting, the seek is listed by `oanquan seeks` \
and the line `seek SEEK: TIME, RULES; waiting for an opponent` names its id. Once paired, the \
seat's token is stored in the token file (as `create` and `join` do) and the game is played \
here at once, as with `oanquan play` (see its help for the prompt).

TIME is MINUTES+SECONDS as for `create --time` (3+2, 1+0, 90s+0), or `untimed` (also without \
TIME); --correspondence 1d seeks a correspondence game. Ctrl-C while waiting withdraws the seek \
(exit 130); a restart of the server ends it too (exit 69: seek again).

With an account stored (`oanquan register`) the seek is the account's: --rated pairs only \
with rated seeks of other accounts and the result changes both ratings; --range 1400-1700 \
pairs only with opponents whose rating at this speed is within the range. --anonymous seeks \
without the account.

With --computer-after WAIT the server's computer plays you if nobody has come after WAIT (30s, \
2m; 1 second to 10 minutes), at --level (1-7 or a name, see `create --help`; default casual).

With --json, prints the Seek stream's messages, one SeekResponse per line: `waiting` (the \
seek), then `paired` (the game, less its `playerToken`); then plays the game as text.")]
    Seek(SeekArgs),

    /// List the open seeks (players waiting for an opponent).
    #[command(long_about = "\
List the open seeks, oldest first: players waiting for an opponent with `oanquan seek`. Accept \
one with `oanquan accept SEEK`. With --json, the ListSeeksResponse (`.seeks[]`).")]
    Seeks,

    /// Accept an open seek: its game starts at once, and you play it.
    #[command(long_about = "\
Accept an open seek (see `oanquan seeks`): the game between its seeker and you starts at once, \
with the seek's rules and time control. The seat's token is stored in the token file and the \
game is played here, as with `oanquan play`. Exits 3 if the seek is not open any more (taken, \
withdrawn). With --json, prints the AcceptSeekResponse without its `playerToken` first.")]
    Accept(AcceptArgs),

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

    /// Claim the win of an untimed game whose opponent has stopped moving.
    #[command(long_about = "\
Claim the win of an untimed game you hold a seat in, when your opponent has had the move for \
longer than the server's abandonment time (24 hours by default): the game ends, you win \
(abandonment). An opponent who never made a first move has the game aborted instead, with no \
result. Timed games end by their clocks instead. When it is too early, the server says how long \
is left (exit 4). Prints the result; with --json the API's ClaimVictoryResponse. \
`claim` at the play prompt does the same.")]
    Claim(SeatArgs),

    /// Follow a game as a spectator.
    #[command(long_about = "\
Follow a game as a spectator: the board, then every move as it is played, until the game ends \
(exit 0). Survives dropped connections (reconnect and resume, no move shown twice). A timed \
game's clocks are shown on the board and, on a terminal, ticking on the last line; otherwise a \
`clocks:` line follows each `turn:` line (see `oanquan play --help`). Draw offers are shown \
as they are made.

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

    /// Register an account and keep its API key: play as yourself, with ratings.
    #[command(long_about = "\
Register an account on the server. Its secret API key is stored in account.json in the config \
directory (next to the token file; mode 0600, one account per server) and is not printed: \
`create`, `join`, `seek` and `accept` then play as the account (--anonymous plays without \
it), and `me`, `games` and `keys` use it. Anyone with the key plays as you: keep the file \
private. An account already stored for the server is not replaced without --force (its key \
stays valid on the server; `oanquan keys` lists keys, `keys revoke` ends one).

Usernames are 2-20 characters: letters of one script (Latin with Vietnamese diacritics, \
Cyrillic, Greek, ...), digits, `_` and `-` (not first, last or doubled); unique ignoring case \
and look-alike letters (`1an`/`lan`, Cyrillic `сор`/`cop`, and letters alike only in capitals, \
such as `Ian`/`lan` or Cyrillic `ТОМ`/`TOM`). A taken name exits 4, a refused one 2 with the \
reason.

With --json, prints the RegisterResponse without its `apiKey` (the key goes to the account \
file only).")]
    Register(RegisterArgs),

    /// Keep an API key of your account (from `oanquan keys new` elsewhere), read from stdin.
    #[command(long_about = "\
Use an account that was registered elsewhere: reads one of its API keys (`oqk_...`, as \
`oanquan keys new` prints it on the machine that has the account) from the first line of \
standard input, so that it stays out of the shell's history and the process list, checks it \
with the server, and stores it in account.json in the config directory like `register` does. \
An account already stored for the server is not replaced without --force. A key the server \
does not know (or revoked) exits 5 and stores nothing.

Example: `oanquan login < key.txt`, or type the key at the prompt.

With --json, prints the GetMeResponse of the account.")]
    Login(LoginArgs),

    /// Your own profile: ratings, wins, draws and losses.
    #[command(long_about = "\
Your own profile, as the server knows the account in the account file (see `oanquan \
register`): ratings per speed (a `?` marks a provisional one: fewer than 10 games or still \
uncertain), rating deviation, rated games, wins, draws and losses, registration date. Exits 5 \
without an account or if the server refuses its key. With --json, the GetMeResponse.")]
    Me,

    /// A player's profile: ratings, wins, draws and losses.
    #[command(long_about = "\
A player's public profile by username (any case): ratings per speed (a `?` marks a \
provisional one), rating deviation, rated games, wins, draws and losses, registration date. \
Exits 3 if there is no such player. With --json, the GetPlayerResponse.")]
    Player(PlayerArgs),

    /// The best players at one speed (default blitz).
    #[command(long_about = "\
The leaderboard of one speed, best first: rank, player, rating, rating deviation and rated \
games. Provisional ratings are left out until they settle. One page at a time (--page-size, \
at most 100); the last line names the command for the next page (--page-token), or --all \
fetches every page. With --json, the LeaderboardResponse (with --all, every entry in one, \
without `nextPageToken`).")]
    Top(TopArgs),

    /// A player's games, newest first (default: yours).
    #[command(long_about = "\
A player's games, newest first (without NAME: the account in the account file): date, game, \
time control, whether rated, the result for the player, the opponent, the score and, for \
rated games, the player's rating change. --result and --speed filter them. One page at a \
time (--page-size, at most 100); the last line names the command for the next page \
(--page-token, with the same filters), or --all fetches every page. With --json, the \
ListPlayerGamesResponse (with --all, every game in one, without `nextPageToken`).")]
    Games(GamesArgs),

    /// Your API keys: list them, make a new one, revoke one.
    #[command(long_about = "\
Your account's API keys (the account in the account file): `oanquan keys` lists them, \
revoked ones too, without their secrets (the one stored here is marked); `oanquan keys new` \
makes a new key and prints it once (for another machine or a program), or with --store keeps \
it here in place of the stored one; `oanquan keys revoke ID` ends a key from the next call \
on (revoking the one stored here also removes it from the account file). With --json, the \
ListApiKeysResponse, CreateApiKeyResponse (less `apiKey` with --store) or \
RevokeApiKeyResponse.")]
    Keys(KeysArgs),
}

const PLAY_LONG_ABOUT: &str = "\
Play a game you hold a seat in (from `create`, `join`, `seek` or `accept` with the same \
--server; or a seat of your account, with its API key from the account file, also where the \
seat's token is not stored). The board is \
drawn from your seat; when it is your turn, type a move in your own terms: your square 1-5 \
counted from your left, then l/left or r/right as you see the board: `3 r`, `3r`, `2 left`. \
Other commands at the prompt: `moves` (legal moves), `board`, `hint` (the server's engine \
suggests a move, with its evaluation, knowing the game's moves so far), `help`, `resign` (asks to confirm with y), `abort` (only \
before the first move: calls the game off), `draw` (offer a draw, or accept the opponent's \
offer), `decline` (refuse the opponent's draw offer), `claim` (claim the win of an untimed game \
whose opponent has not moved for a long time; the server says how long is left; a script, whose \
`play` reads input only on its own turn, uses `oanquan claim GAME`), `quit` \
(leave; the game goes on and `oanquan play GAME` resumes it).

CLOCKS
    In a timed game both players' times are on the board. They are the server's: each event \
brings the times left, and the client counts the running one down from there (on a terminal, \
the clock line above the prompt is redrawn every second). During each player's first move no \
clock runs; the time left for that move is shown instead. The server ends the game when a flag \
falls or a first move is not made in time, and says so here.

REMATCH
    When the game is over and the server allows a rematch (for a few minutes), `rematch` offers \
one, or accepts the opponent's; `no` (or `decline`) refuses. When both asked, the rematch \
starts (seats swapped, the same rules and time control), its token is stored, and play goes on \
with it. On a terminal play waits for that choice after the game; otherwise only with \
--rematch (it then reads `rematch`, `no` or `quit` from standard input), and exits at the game's \
end as before without it.

Opponent moves arrive through the live event stream, shown step by step (sowing, relays, \
captures, refills): animated on a terminal, as text lines otherwise (and on a terminal too \
narrow for the board).

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
    refill: SEAT's squares were empty, 1 stone  after a move whose opponent had no stones
      put in each: SEAT -5[, B of them          left on their side: their refill, taken from
      borrowed, a debt of D] (score F:S)        their count (counted in the score F:S, not in
                                                the move's C); B stones borrowed when the
                                                count goes below zero, D the debt so far
    end of game: the N stones left on the board after the last move, one line: what each
      go to the players, first +A, second +B    side collected (counted in the score F:S, not
      (score F:S)                               in the move's C)
    legal moves: 1r 1l 3r ...                   before each prompt, in your own terms
    time control: TC                            timed games, after the game line (TC as
                                                written: 3+2, 90s+0, 2d per move)
    clocks: first T (running), second T         timed games, after each turn line and the
                                                board found on connecting (T such as
                                                4:59, 0:09.4, 1:02:03, 2d 3h); during
                                                the first moves it ends `; SEAT to make
                                                their first move within T`
    NAME offers a draw — type draw to accept, decline to refuse
                                                the opponent offers a draw
    you offer a draw; ...                       your offer stands
    NAME declines the draw | NAME accepts the draw
    your move                                   waiting for one line of input
    hint: S DIR (Sd), eval E, depth D[, exact][, a try for the opponent's mistakes]
                                                answer to `hint`: S DIR in your terms
                                                (Sd its short form, e.g. 3r), E the
                                                expected final score difference for you
                                                (against the best reply when the move is
                                                a try for the opponent's mistakes: behind,
                                                one it may get wrong)
    error: MESSAGE                              bad input or a rejected move; re-prompts
    resign? (y/N)                               after `resign`: the next line confirms it
                                                (y or yes); anything else keeps playing
    NAME ran out of time — NAME wins on time    before `game over:` for a fallen flag;
                                                likewise `drawn by agreement`, `NAME
                                                abandoned the game — NAME wins by claim`,
                                                `the game was aborted: NAME did not make
                                                their first move in time` (or `NAME called
                                                it off before the first move`; NAME is
                                                `you` for your own seat)
    game over: OUTCOME F:S (REASON)             OUTCOME is `first wins`, `second wins`,
                                                `draw` or `aborted`; REASON mandarins,
                                                repetition, ply limit, resignation,
                                                aborted, timeout, agreement, abandonment
    rating: NAME BEFORE → AFTER (+D|-D)         rated games, after `game over:`, first
                                                player then second; AFTER ends with `?`
                                                while the rating is provisional
    rating: unchanged (the game ended before both players moved)
                                                a rated game resigned or drawn before
                                                both players moved: not rated
    rematch? (rematch/no)                       after the game (on a terminal, or with
                                                --rematch), while one can be offered
    NAME offers a rematch — type rematch to accept, no to decline
    rematch offered; waiting for NAME
    rematch: game GAME                          the rematch started: play goes on with it
                                                (`playing GAME as SEAT` follows)
    no rematch: REASON                          declined or too late; play exits 0

    The turn line comes before the prompt. Notices about the connection (`server unreachable: \
...`, `reconnected`) go to standard error, one line per change; after a reconnect the prompt \
is shown again. `play` exits 0 when the game is over (with --rematch: when no rematch follows), \
6 if standard input ends first.";

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

    #[command(flatten)]
    pub clock: ClockArgs,

    /// A rated game: the result changes both players' ratings. Needs your account (`oanquan
    /// register`), a clock (--time or --correspondence) and a person as the opponent; only an
    /// account can join it.
    #[arg(long, conflicts_with_all = ["anonymous", "computer"])]
    pub rated: bool,

    #[command(flatten)]
    pub account: AccountArg,

    #[command(flatten, next_help_heading = "With --play")]
    pub live: LiveArgs,
}

/// Whether to play as the stored account.
#[derive(Debug, Args)]
pub struct AccountArg {
    /// Play without your account even though one is stored: as a display name (--name), with
    /// no rating.
    #[arg(long)]
    pub anonymous: bool,
}

/// The time control of a new game (`create`).
#[derive(Debug, Args)]
pub struct ClockArgs {
    /// A clock: MINUTES+SECONDS added per move (Fischer), e.g. 5+3 or 1+0; the initial time
    /// may have a unit: 90s+0, 1h+30. 1 second to 3 hours; increment up to 180 seconds.
    #[arg(
        long,
        value_name = "M+S",
        value_parser = parse_time,
        allow_hyphen_values = true,
        conflicts_with = "correspondence"
    )]
    pub time: Option<TimeControl>,

    /// Correspondence: a fixed time for every move, with its unit: 2d, 12h, 30m (1 minute to
    /// 30 days).
    #[arg(
        long,
        value_name = "TIME",
        value_parser = parse_correspondence,
        allow_hyphen_values = true
    )]
    pub correspondence: Option<TimeControl>,
}

impl ClockArgs {
    /// The chosen time control; untimed when neither option is given.
    pub fn time_control(&self) -> TimeControl {
        self.time.or(self.correspondence).unwrap_or_default()
    }
}

/// What `play` (and the commands that go on to it) do beyond the board.
#[derive(Debug, Args, Clone)]
pub struct LiveArgs {
    /// After the game, stay for a rematch also when not on a terminal: read `rematch` (offer
    /// or accept one), `no` (decline) or `quit` from standard input. On a terminal play always
    /// waits for that choice while a rematch can be offered.
    #[arg(long)]
    pub rematch: bool,

    #[command(flatten)]
    pub display: DisplayArgs,
}

#[derive(Debug, Args)]
pub struct SeekArgs {
    /// The time control: MINUTES+SECONDS (3+2, 1+0, 90s+0) or `untimed` [default: untimed].
    #[arg(
        value_name = "TIME",
        value_parser = parse_time,
        allow_hyphen_values = true,
        conflicts_with = "correspondence"
    )]
    pub time: Option<TimeControl>,

    /// Seek a correspondence game: a fixed time for every move, with its unit: 1d, 12h, 30m.
    #[arg(
        long,
        value_name = "TIME",
        value_parser = parse_correspondence,
        allow_hyphen_values = true
    )]
    pub correspondence: Option<TimeControl>,

    /// Rule preset (see `oanquan presets`); only seeks of the same rules pair.
    #[arg(long, default_value = "standard", value_name = "NAME")]
    pub preset: String,

    #[command(flatten)]
    pub name: NameArg,

    /// Play the server's computer if nobody has come after this long: seconds, or with a unit
    /// (30s, 2m); 1 second to 10 minutes.
    #[arg(long, value_name = "WAIT", value_parser = parse_wait)]
    pub computer_after: Option<Duration>,

    /// The computer's level with --computer-after: 1-7 or random, greedy, novice, casual, club,
    /// expert, master [default: casual].
    #[arg(
        long,
        value_name = "LEVEL",
        value_parser = parse_level,
        requires = "computer_after"
    )]
    pub level: Option<u32>,

    /// A rated game: pairs only with rated seeks of other accounts. Needs your account
    /// (`oanquan register`) and a time control.
    #[arg(long, conflicts_with = "anonymous")]
    pub rated: bool,

    /// Only opponents rated MIN to MAX (inclusive) at this speed, e.g. 1400-1700 (1400- for
    /// 1400 or more, -1700 for up to 1700): players with an account (anonymous ones have no
    /// rating).
    #[arg(long, value_name = "MIN-MAX", value_parser = parse_range, allow_hyphen_values = true)]
    pub range: Option<RatingRange>,

    #[command(flatten)]
    pub account: AccountArg,

    #[command(flatten, next_help_heading = "Playing")]
    pub live: LiveArgs,
}

/// An inclusive range of ratings (`seek --range`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RatingRange {
    pub min: i32,
    pub max: i32,
}

/// The highest rating `--range` accepts: far above any Glicko-2 rating, low enough to catch a
/// typo.
const MAX_RATING: i32 = 4000;

/// `1400-1700`: MIN-MAX, inclusive, MIN ≤ MAX; `1400-` has no upper bound and `-1700` no lower
/// one.
pub fn parse_range(text: &str) -> Result<RatingRange, String> {
    let usage =
        || format!("`{text}` is not a rating range: use MIN-MAX, MIN- or -MAX, e.g. 1400-1700");
    let (min, max) = text.trim().split_once('-').ok_or_else(usage)?;
    let (min, max) = match (min.trim().is_empty(), max.trim().is_empty()) {
        (true, true) => return Err(usage()),
        (true, false) => ("0", max),
        (false, true) => (min, "4000"),
        (false, false) => (min, max),
    };
    let number = |s: &str| -> Result<i32, String> {
        let s = s.trim();
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(usage());
        }
        s.parse::<i32>()
            .ok()
            .filter(|n| *n <= MAX_RATING)
            .ok_or_else(|| format!("ratings in --range go up to {MAX_RATING}"))
    };
    let (min, max) = (number(min)?, number(max)?);
    // Only a typed max can be 0 (a missing one is 4000), and the API would read 0 as no upper
    // bound: the range meant none, and `--range 0-0` must not pair with anyone.
    if max == 0 {
        return Err(format!(
            "--range {text}: no rating is 0 or less; ratings run from 400 to 4000"
        ));
    }
    if min > max {
        return Err(format!("--range {min}-{max}: the lower bound comes first"));
    }
    Ok(RatingRange { min, max })
}

impl SeekArgs {
    pub fn time_control(&self) -> TimeControl {
        self.time.or(self.correspondence).unwrap_or_default()
    }
}

/// The computer's level when `seek --computer-after` is given without `--level`.
pub const DEFAULT_SEEK_LEVEL: u32 = 4;

#[derive(Debug, Args)]
pub struct AcceptArgs {
    /// The seek's id (see `oanquan seeks`). Ids may start with `-`: they are still read as the
    /// id.
    #[arg(allow_hyphen_values = true)]
    pub seek: String,

    #[command(flatten)]
    pub name: NameArg,

    #[command(flatten)]
    pub account: AccountArg,

    #[command(flatten, next_help_heading = "Playing")]
    pub live: LiveArgs,
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

/// A count of 1 or more (clap's own range check words its refusal as `0 is not in
/// 1..=4294967295`, which an outside probe found no help).
pub fn parse_count(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "`{text}` is not a count: use a whole number, 1 or more"
        )),
    }
}

/// A page size, 1 to 100.
pub fn parse_page_size(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=100).contains(&n) => Ok(n),
        _ => Err(format!(
            "`{text}` is not a page size: use a whole number from 1 to 100"
        )),
    }
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
    /// Your display name (1-32 characters; not authenticated) [default: $USER]. Playing as your
    /// account, the seat shows its username instead.
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

    #[command(flatten)]
    pub account: AccountArg,

    /// Go straight to `play` after joining.
    #[arg(long)]
    pub play: bool,

    #[command(flatten, next_help_heading = "With --play")]
    pub live: LiveArgs,
}

/// Options of the live board (`play`, `watch`).
#[derive(Debug, Args, Clone)]
pub struct DisplayArgs {
    /// Do not animate moves on a terminal; print their steps as text lines instead.
    #[arg(long)]
    pub no_animate: bool,

    /// Delay between two animation frames, in milliseconds. A seated player's animations take
    /// at most a twentieth of their time left beyond its last 30 seconds, and none in those.
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
    pub given: GivenToken,

    #[command(flatten)]
    pub live: LiveArgs,
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

/// `--token`, for the commands that act for a seat.
#[derive(Debug, Args)]
pub struct GivenToken {
    /// The seat's token, for a seat the token file does not hold (when `create`, `join`,
    /// `seek`, `accept` or a rematch cannot save a token, they print it with this advice);
    /// needs --seat. Better given in the environment than on the command line, where other
    /// users of the machine can read it.
    #[arg(
        long,
        env = "OANQUAN_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        requires = "seat"
    )]
    pub token: Option<String>,
}

#[derive(Debug, Args)]
pub struct SeatArgs {
    /// The game id. Ids may start with `-`: they are still read as the id.
    #[arg(allow_hyphen_values = true)]
    pub game: String,

    /// Which of your seats, when the token file holds both seats of the game.
    #[arg(long, value_name = "SEAT")]
    pub seat: Option<Side>,

    #[command(flatten)]
    pub given: GivenToken,
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

    /// At most this many games (newest first), 1 or more.
    #[arg(long, default_value_t = 50, value_name = "N", value_parser = parse_count)]
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

#[derive(Debug, Args)]
pub struct RegisterArgs {
    /// The username: 2-20 letters, digits, `_` or `-`.
    pub username: String,

    /// Replace the account already stored for this server (its key keeps working on the
    /// server until revoked).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// Replace the account already stored for this server (its key keeps working on the
    /// server until revoked).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct PlayerArgs {
    /// The username (any case).
    pub username: String,
}

/// A rating category, from a game's time control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Speed {
    /// Estimated duration (initial + 40 × increment) under 3 minutes: 1+0, 2+1.
    Bullet,
    /// Under 8 minutes: 3+0, 3+2, 5+0.
    Blitz,
    /// Under 25 minutes: 10+0, 15+10.
    Rapid,
    /// 25 minutes or more: 30+0.
    Classical,
    /// A fixed time per move (--correspondence).
    Correspondence,
}

/// Which page of a paginated list.
#[derive(Debug, Args)]
pub struct PageArgs {
    /// At most this many per page (1-100) [default: the server's, 50].
    #[arg(long, value_name = "N", value_parser = parse_page_size)]
    pub page_size: Option<u32>,

    /// The page after the one that printed this token (the same filters).
    #[arg(long, value_name = "TOKEN", conflicts_with = "all")]
    pub page_token: Option<String>,

    /// Every page, not only the first.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct TopArgs {
    /// The speed.
    #[arg(value_enum, default_value_t = Speed::Blitz)]
    pub speed: Speed,

    #[command(flatten)]
    pub page: PageArgs,
}

/// A game's result for the player (`games --result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ResultFilter {
    /// Games the player won.
    Win,
    /// Drawn games.
    Draw,
    /// Games the player lost.
    Loss,
}

#[derive(Debug, Args)]
pub struct GamesArgs {
    /// The player (any case) [default: your account].
    pub username: Option<String>,

    /// Only games with this result for the player.
    #[arg(long, value_enum)]
    pub result: Option<ResultFilter>,

    /// Only games of this speed.
    #[arg(long, value_enum)]
    pub speed: Option<Speed>,

    #[command(flatten)]
    pub page: PageArgs,
}

#[derive(Debug, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub action: Option<KeysAction>,
}

#[derive(Debug, Subcommand)]
pub enum KeysAction {
    /// Make a new API key and print it once (with --store: keep it here instead).
    New(KeysNewArgs),
    /// Revoke an API key by its id (see `oanquan keys`).
    Revoke(KeysRevokeArgs),
}

#[derive(Debug, Args)]
pub struct KeysNewArgs {
    /// Keep the new key in the account file in place of the stored one, without printing it
    /// (to replace a key: `keys new --store`, then `keys revoke OLD-ID`).
    #[arg(long)]
    pub store: bool,
}

#[derive(Debug, Args)]
pub struct KeysRevokeArgs {
    /// The key's id, as `oanquan keys` lists it. Ids may start with `-`.
    #[arg(allow_hyphen_values = true)]
    pub id: String,
}

/// The command line as parsed: [`Cli`], with each command's usage line fixed to the one its
/// help shows. clap's usage in an error lists the options it saw as if they were required
/// (`Usage: oanquan play --server <URL> --config-dir <DIR> <GAME>`), and it sees
/// `OANQUAN_SERVER` and `OANQUAN_CONFIG_DIR` from the environment too: a user who set them
/// would read that every command needs both.
pub fn command() -> clap::Command {
    let mut command = <Cli as clap::CommandFactory>::command();
    command.build();
    fix_usage(&mut command);
    command
}

fn fix_usage(command: &mut clap::Command) {
    let usage = command.render_usage().to_string();
    let usage = usage.trim_end();
    let usage = usage.strip_prefix("Usage: ").unwrap_or(usage).to_owned();
    *command = std::mem::take(command).override_usage(usage);
    for sub in command.get_subcommands_mut() {
        fix_usage(sub);
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn counts_and_page_sizes_are_refused_in_words() {
        for (args, said) in [
            (
                &["list", "--limit", "0"][..],
                "use a whole number, 1 or more",
            ),
            (
                &["list", "--limit", "9999999999"][..],
                "use a whole number, 1 or more",
            ),
            (&["top", "--page-size", "0"][..], "from 1 to 100"),
            (&["top", "--page-size", "101"][..], "from 1 to 100"),
        ] {
            let error = command()
                .try_get_matches_from(["oanquan"].iter().chain(args))
                .expect_err("refused");
            let text = error.render().to_string();
            assert!(text.contains(said), "{args:?}: {text}");
            assert!(!text.contains("..="), "{args:?}: {text}");
        }
        let ok = command()
            .try_get_matches_from(["oanquan", "list", "--limit", "1"])
            .expect("1 is a count");
        drop(ok);
    }

    #[test]
    fn usage_lines_show_options_with_defaults_as_optional() {
        let error = command()
            .try_get_matches_from([
                "oanquan",
                "--server",
                "127.0.0.1:1",
                "--config-dir",
                "/tmp/x",
                "play",
            ])
            .expect_err("GAME is missing");
        let text = error.render().to_string();
        assert!(
            text.contains("Usage: oanquan play [OPTIONS] <GAME>"),
            "{text}"
        );
        assert!(!text.contains("--server <URL>"), "{text}");
        assert!(!text.contains("--config-dir <DIR>"), "{text}");
        // Nested commands, and the usage their help shows, stay as they were.
        let mut command = command();
        let keys = command.find_subcommand_mut("keys").expect("keys");
        assert!(
            keys.render_usage().to_string().contains("oanquan keys"),
            "{}",
            keys.render_usage()
        );
        let revoke = keys.find_subcommand_mut("revoke").expect("revoke");
        assert!(
            revoke
                .render_usage()
                .to_string()
                .contains("oanquan keys revoke [OPTIONS] <ID>"),
            "{}",
            revoke.render_usage()
        );
    }

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
            "ACCOUNTS",
            "oanquan register Lan",
            "account.json",
        ] {
            assert!(help.contains(needle), "missing {needle:?} in:\n{help}");
        }
    }

    #[test]
    fn help_keeps_global_options_apart_and_play_options_under_play() {
        let mut command = Cli::command();
        command.build();
        for name in [
            "create", "join", "play", "watch", "list", "show", "moves", "presets", "seek", "seeks",
            "accept", "register", "me", "player", "top", "games", "keys",
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
                assert!(help.find("\n      --rematch").unwrap() > play, "{name}");
            }
            if ["seek", "accept"].contains(&name) {
                let play = help.find("Playing:").expect("a Playing heading");
                assert!(help.find("\n      --rematch").unwrap() > play, "{name}");
                assert!(help.find("\n      --name").unwrap() < play, "{name}");
            }
        }
    }

    fn create(args: &[&str]) -> Result<CreateArgs, clap::Error> {
        let argv = ["oanquan", "create"].iter().chain(args).copied();
        match Cli::try_parse_from(argv)?.command {
            Command::Create(c) => Ok(c),
            other => panic!("{other:?}"),
        }
    }

    fn seek(args: &[&str]) -> Result<SeekArgs, clap::Error> {
        let argv = ["oanquan", "seek"].iter().chain(args).copied();
        match Cli::try_parse_from(argv)?.command {
            Command::Seek(s) => Ok(s),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn time_controls_on_create() {
        let three = |m: u64| TimeControl::RealTime {
            initial: Duration::from_secs(m * 60),
            increment: Duration::from_secs(3),
        };
        assert_eq!(
            create(&["--time", "5+3"])
                .expect("parses")
                .clock
                .time_control(),
            three(5)
        );
        assert_eq!(
            create(&["--correspondence", "2d"])
                .expect("parses")
                .clock
                .time_control(),
            TimeControl::Correspondence {
                per_move: Duration::from_secs(2 * 86_400)
            }
        );
        assert_eq!(
            create(&[]).expect("parses").clock.time_control(),
            TimeControl::Untimed
        );
        // Bad values are usage errors that say why, also a negative one (not read as a flag).
        for (args, needle) in [
            (&["--time", "0+3"][..], "between 1 second and 3 hours"),
            (&["--time", "-5+3"][..], "negative"),
            (&["--time", "banana"][..], "MINUTES+SECONDS"),
            (&["--correspondence", "2"][..], "needs a unit"),
            (
                &["--correspondence", "0d"][..],
                "between 1 minute and 30 days",
            ),
        ] {
            let err = create(args).expect_err("refused");
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{args:?}"
            );
            assert!(err.to_string().contains(needle), "{args:?}: {err}");
        }
        let both = create(&["--time", "5+3", "--correspondence", "2d"]).expect_err("conflict");
        assert_eq!(both.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    #[test]
    fn seek_arguments() {
        let s = seek(&["3+2", "--name", "Lan", "--preset", "fast"]).expect("parses");
        assert_eq!(s.time_control().to_string(), "3+2");
        assert_eq!(s.name.name.as_deref(), Some("Lan"));
        assert_eq!(s.preset, "fast");
        assert_eq!(s.computer_after, None);
        let s = seek(&["--name", "Lan", "1+0"]).expect("flags first");
        assert_eq!(s.time_control().to_string(), "1+0");
        for untimed in [&[][..], &["untimed"][..]] {
            assert_eq!(
                seek(untimed).expect("parses").time_control(),
                TimeControl::Untimed
            );
        }
        assert_eq!(
            seek(&["--correspondence", "1d"])
                .expect("parses")
                .time_control()
                .to_string(),
            "1d per move"
        );
        let s = seek(&["3+2", "--computer-after", "30s", "--level", "club"]).expect("parses");
        assert_eq!(s.computer_after, Some(Duration::from_secs(30)));
        assert_eq!(s.level, Some(5));
        assert!(
            seek(&["--level", "4"]).is_err(),
            "--level needs --computer-after"
        );
        assert!(seek(&["3+2", "--computer-after", "0s"]).is_err());
        assert!(seek(&["3+2", "--correspondence", "1d"]).is_err());
        assert!(seek(&["0+0"]).is_err());
        match Cli::try_parse_from(["oanquan", "accept", "-s1", "--name", "x", "--rematch"])
            .map(|c| c.command)
        {
            Ok(Command::Accept(a)) => {
                assert_eq!(a.seek, "-s1");
                assert!(a.live.rematch);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Cli::try_parse_from(["oanquan", "seeks"]).map(|c| c.command),
            Ok(Command::Seeks)
        ));
    }

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        let argv = ["oanquan"].iter().chain(args).copied();
        Cli::try_parse_from(argv).map(|c| c.command)
    }

    #[test]
    fn rating_ranges() {
        assert_eq!(
            parse_range("1400-1700"),
            Ok(RatingRange {
                min: 1400,
                max: 1700
            })
        );
        assert_eq!(
            parse_range(" 0 - 4000 "),
            Ok(RatingRange { min: 0, max: 4000 })
        );
        // One-sided: an outside probe found no way to ask for "1400 or more".
        assert_eq!(
            parse_range("1400-"),
            Ok(RatingRange {
                min: 1400,
                max: 4000
            })
        );
        assert_eq!(parse_range("-1700"), Ok(RatingRange { min: 0, max: 1700 }));
        assert_eq!(
            parse_range("1500-1500"),
            Ok(RatingRange {
                min: 1500,
                max: 1500
            })
        );
        for (bad, needle) in [
            ("1700-1400", "lower bound comes first"),
            ("1400", "MIN-MAX"),
            ("-", "MIN-MAX"),
            (" - ", "MIN-MAX"),
            ("--1400", "MIN-MAX"),
            ("-0", "no rating is 0"),
            ("0-0", "no rating is 0"),
            ("a-b", "MIN-MAX"),
            ("+1-5", "MIN-MAX"),
            ("1400-99999999999", "up to 4000"),
            ("1400-1700-1900", "MIN-MAX"),
        ] {
            let err = parse_range(bad).expect_err(bad);
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }

    #[test]
    fn account_options_on_create_and_seek() {
        let c = create(&["--time", "5+3", "--rated"]).expect("parses");
        assert!(c.rated && !c.account.anonymous);
        assert!(create(&["--anonymous"]).expect("parses").account.anonymous);
        for conflict in [
            &["--rated", "--anonymous"][..],
            &["--rated", "--computer", "club"][..],
        ] {
            assert_eq!(
                create(conflict).expect_err("conflict").kind(),
                clap::error::ErrorKind::ArgumentConflict,
                "{conflict:?}"
            );
        }
        let s = seek(&["5+0", "--rated", "--range", "1400-1700"]).expect("parses");
        assert!(s.rated);
        assert_eq!(
            s.range,
            Some(RatingRange {
                min: 1400,
                max: 1700
            })
        );
        assert!(seek(&["--range", "1400-1700", "--anonymous"]).is_ok());
        assert!(seek(&["--range", "-1700"]).is_ok());
        assert!(seek(&["5+0", "--rated", "--anonymous"]).is_err());
        assert_eq!(
            seek(&["--range", "9-1"]).expect_err("bad").kind(),
            clap::error::ErrorKind::ValueValidation
        );
        for args in [
            &["join", "g", "--anonymous"][..],
            &["accept", "s", "--anonymous"][..],
        ] {
            match parse(args) {
                Ok(
                    Command::Join(JoinArgs { account, .. })
                    | Command::Accept(AcceptArgs { account, .. }),
                ) => {
                    assert!(account.anonymous, "{args:?}");
                }
                other => panic!("{args:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn account_commands() {
        match parse(&["register", "Lan", "--force"]) {
            Ok(Command::Register(r)) => assert!(r.username == "Lan" && r.force),
            other => panic!("{other:?}"),
        }
        assert!(parse(&["register"]).is_err(), "a username is needed");
        assert!(matches!(parse(&["me", "--json"]), Ok(Command::Me)));
        match parse(&["player", "lan"]) {
            Ok(Command::Player(p)) => assert_eq!(p.username, "lan"),
            other => panic!("{other:?}"),
        }
        match parse(&["top"]) {
            Ok(Command::Top(t)) => {
                assert_eq!(t.speed, Speed::Blitz, "blitz by default");
                assert!(!t.page.all && t.page.page_token.is_none() && t.page.page_size.is_none());
            }
            other => panic!("{other:?}"),
        }
        match parse(&["top", "rapid", "--page-token", "abc", "--page-size", "10"]) {
            Ok(Command::Top(t)) => {
                assert_eq!(t.speed, Speed::Rapid);
                assert_eq!(t.page.page_token.as_deref(), Some("abc"));
                assert_eq!(t.page.page_size, Some(10));
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&["top", "hyperbullet"]).is_err());
        assert!(parse(&["top", "--all", "--page-token", "x"]).is_err());
        assert!(parse(&["top", "--page-size", "0"]).is_err());
        assert!(parse(&["top", "--page-size", "101"]).is_err());
        match parse(&["games"]) {
            Ok(Command::Games(g)) => {
                assert_eq!(g.username, None, "yours by default");
                assert_eq!((g.result, g.speed), (None, None));
            }
            other => panic!("{other:?}"),
        }
        match parse(&[
            "games", "Minh", "--result", "loss", "--speed", "bullet", "--all",
        ]) {
            Ok(Command::Games(g)) => {
                assert_eq!(g.username.as_deref(), Some("Minh"));
                assert_eq!(g.result, Some(ResultFilter::Loss));
                assert_eq!(g.speed, Some(Speed::Bullet));
                assert!(g.page.all);
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&["games", "--result", "won"]).is_err());
        assert!(matches!(
            parse(&["keys"]),
            Ok(Command::Keys(KeysArgs { action: None }))
        ));
        assert!(matches!(
            parse(&["keys", "new", "--store"]),
            Ok(Command::Keys(KeysArgs {
                action: Some(KeysAction::New(KeysNewArgs { store: true }))
            }))
        ));
        match parse(&["keys", "revoke", "-k1"]) {
            Ok(Command::Keys(KeysArgs {
                action: Some(KeysAction::Revoke(r)),
            })) => assert_eq!(r.id, "-k1"),
            other => panic!("{other:?}"),
        }
        assert!(parse(&["keys", "revoke"]).is_err());
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
