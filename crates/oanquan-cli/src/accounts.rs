//! The account commands: register, me, player, top, games, keys.

use oanquan_proto::v1::{
    ApiKey, CreateApiKeyRequest, Game, GameStatus, GetMeRequest, GetPlayerRequest,
    LeaderboardEntry, LeaderboardRequest, LeaderboardResponse, ListApiKeysRequest,
    ListPlayerGamesRequest, ListPlayerGamesResponse, Outcome, PlayerProfile, PlayerResult,
    RegisterRequest, RegisterResponse, RevokeApiKeyRequest,
};

use crate::account_file::{Account, AccountFile, key_id};
use crate::cli::{
    GamesArgs, KeysAction, KeysArgs, KeysNewArgs, LoginArgs, PageArgs, PlayerArgs, RegisterArgs,
    ResultFilter, TopArgs,
};
use crate::client::{Clients, as_account, request};
use crate::context::Context;
use crate::error::{CliError, code, typed};
use crate::json;
use crate::moves::Side;
use crate::output::{note, out, out_lines, shown, shown_name};
use crate::output::{table, table_keeping};
use crate::ratings::{change_numbers, date, rating_text, seat_label, speed_name, speed_to_proto};
use crate::timecontrol::TimeControl;

/// The account stored for this server, or an error saying how to get one.
pub fn required_account(ctx: &Context, what: &str) -> Result<Account, CliError> {
    let file = ctx.account_file()?;
    file.get(&ctx.server.name)?.ok_or_else(|| {
        CliError::new(
            code::AUTH,
            format!(
                "{what} needs an account: none is stored for server {} (in {}); register one \
                 with `oanquan register NAME`, or store a key of yours with `oanquan login`",
                ctx.server.name,
                file.path().display()
            ),
        )
    })
}

/// The account to play as: the stored one unless `--anonymous`.
pub fn playing_account(ctx: &Context, anonymous: bool) -> Result<Option<Account>, CliError> {
    if anonymous {
        return Ok(None);
    }
    ctx.account()
}

/// `oanquan register NAME`.
///
/// The key is made here and kept in the account file, marked pending, before the server is
/// asked: if the answer is lost (the connection or the server fails after the account is
/// made), the same command again sends the same key, and the server answers with the account
/// instead of "taken" (`RegisterRequest.api_key`). The pending entry goes only once the server
/// has said that nothing was made with its key.
pub async fn register(
    ctx: &Context,
    clients: &mut Clients,
    args: &RegisterArgs,
) -> Result<(), CliError> {
    let file = ctx.account_file()?;
    // One `register` or `login` at a time in a directory: two at once each stored their own
    // key over the other's, and one account's key was lost (an outside probe's).
    let _alone = file.exclusive()?;
    let server = &ctx.server.name;
    let previous = file.stored(server)?;
    let resumed = previous
        .as_ref()
        .filter(|p| p.pending && p.username.to_lowercase() == args.username.to_lowercase());
    let api_key = match resumed {
        Some(unfinished) => {
            note(format_args!(
                "finishing the registration of {} begun earlier",
                shown_name(&unfinished.username)
            ));
            unfinished.api_key.clone()
        }
        // Checked before asking the server, so that no account is made only to be thrown away.
        None => {
            may_store(&file, server, args.force)?;
            new_api_key()
        }
    };
    file.put(Account {
        server: server.clone(),
        username: args.username.clone(),
        key_id: key_id(&api_key).unwrap_or_default().to_owned(),
        api_key: api_key.clone(),
        pending: true,
    })?;
    let what = format!("register {}", typed(&args.username));
    // Whether a try, in this run or an earlier one, may have made the account.
    let mut maybe_made = resumed.is_some();
    let response = match register_call(clients, &args.username, &api_key, &mut maybe_made).await {
        Ok(response) => response,
        // A refusal that says nothing was made with this key: the name is another's (this
        // key's own account would have been the answer), or the name or key is malformed. A
        // refusal of any other kind (the registration limit, say) proves nothing once an
        // earlier try may have made the account: an outside probe's lost answer, then its
        // retry refused by the limit, lost the key for good when its entry was dropped.
        Err(status)
            if !answer_may_be_lost(&status)
                && (!maybe_made
                    || matches!(
                        status.code(),
                        tonic::Code::AlreadyExists | tonic::Code::InvalidArgument
                    )) =>
        {
            match previous.filter(|p| !p.pending) {
                Some(previous) => file.put(previous)?,
                None => {
                    file.remove(server)?;
                }
            }
            return Err(CliError::from_status(&what, &status));
        }
        Err(status) => {
            let mut error = CliError::from_status(&what, &status);
            error.message = format!(
                "{}; the account may have been made by an earlier try: run the same command \
                 again to finish (its key is kept in {})",
                error.message,
                file.path().display()
            );
            return Err(error);
        }
    };
    let player = response
        .player
        .clone()
        .ok_or_else(|| CliError::bad_answer("Register without a player"))?;
    if response.api_key != api_key {
        return Err(CliError::bad_answer("Register with another API key"));
    }
    file.put(Account {
        server: server.clone(),
        username: player.username.clone(),
        key_id: response.key.as_ref().map_or_else(
            || key_id(&api_key).unwrap_or_default().to_owned(),
            |k| k.id.clone(),
        ),
        api_key,
        pending: false,
    })?;
    if ctx.json {
        // The API's answer, less the key (it goes to the account file only).
        let mut answer = response;
        answer.api_key.clear();
        return json::print(&answer);
    }
    out_lines(&[
        format!(
            "registered {} on {}",
            shown_name(&player.username),
            ctx.server.name
        ),
        format!(
            "API key stored in {} (keep it private: it plays as you)",
            file.path().display()
        ),
        "create, join, seek and accept now play as this account; --rated games change \
         ratings"
            .to_owned(),
    ])
}

/// Tries of one `Register` whose answer may have been lost on the way: with the backoff
/// between them, 3 to 6 s in all, about as long as a server takes to restart (four tries gave
/// up after 1.3 s of an outside probe's restart).
const REGISTER_TRIES: u32 = 7;

/// No try begins after this long: a server that takes the call and never answers costs each
/// try the whole request timeout (an outside probe waited 1 min 22 s).
const REGISTER_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// `Register` with `api_key`, tried again while the answer may have been lost: the key makes
/// a retry safe. `maybe_made` is set once a try may have reached the server.
async fn register_call(
    clients: &mut Clients,
    username: &str,
    api_key: &str,
    maybe_made: &mut bool,
) -> Result<RegisterResponse, tonic::Status> {
    let mut attempt = 0;
    let began = std::time::Instant::now();
    loop {
        let answer = clients
            .accounts
            .register(request(RegisterRequest {
                username: username.to_owned(),
                api_key: api_key.to_owned(),
            }))
            .await;
        match answer {
            Err(status) if answer_may_be_lost(&status) => {
                *maybe_made = true;
                if attempt + 1 >= REGISTER_TRIES || began.elapsed() >= REGISTER_PATIENCE {
                    return Err(status);
                }
                tokio::time::sleep(crate::feed::backoff(attempt, rand::random::<f64>())).await;
                attempt += 1;
            }
            answer => return answer.map(tonic::Response::into_inner),
        }
    }
}

/// Whether a call that failed with `status` may have been carried out all the same.
fn answer_may_be_lost(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::Unavailable
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Unknown
            | tonic::Code::Cancelled
            | tonic::Code::Internal
    )
}

/// An API key made here, in the shape of the server's (`RegisterRequest.api_key`): `oqk_`, a
/// 16-character id, `_`, and 32 characters (192 bits) from the thread's cryptographic random
/// generator.
fn new_api_key() -> String {
    use rand::Rng as _;
    const ID: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
    const SECRET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut rng = rand::rng();
    let id: String = (0..16)
        .map(|_| char::from(ID[rng.random_range(0..ID.len())]))
        .collect();
    let secret: String = (0..32)
        .map(|_| char::from(SECRET[rng.random_range(0..SECRET.len())]))
        .collect();
    format!("oqk_{id}_{secret}")
}

/// Longest line read as an API key (a key is 53 characters).
const MAX_KEY_LINE: usize = 1024;

/// `oanquan login`: an API key of an account registered elsewhere, from stdin.
pub async fn login(ctx: &Context, clients: &mut Clients, args: &LoginArgs) -> Result<(), CliError> {
    let file = ctx.account_file()?;
    // Alone from the first look at the file to the write, as `register` is: a `login --force`
    // beside a `register` still waiting for its answer gave up that registration's key while it
    // went on to make the account (an outside probe's).
    let _alone = file.exclusive()?;
    may_store(&file, &ctx.server.name, args.force)?;
    let key = read_key_unseen().await?;
    let key_id = crate::account_file::key_id(&key)
        .map(str::to_owned)
        .ok_or_else(not_a_key)?;
    let response = clients
        .accounts
        .get_me(as_account(request(GetMeRequest {}), Some(&key)).map_err(|_| not_a_key())?)
        .await
        .map_err(|s| match s.code() {
            tonic::Code::Unauthenticated => CliError::new(
                code::AUTH,
                format!(
                    "server {} does not know this API key (mistyped, revoked, or another \
                     server's); nothing was stored",
                    ctx.server.name
                ),
            ),
            _ => CliError::from_status("check the API key", &s),
        })?
        .into_inner();
    let player = response
        .player
        .clone()
        .ok_or_else(|| CliError::bad_answer("GetMe without a player"))?;
    file.put(Account {
        server: ctx.server.name.clone(),
        username: player.username.clone(),
        api_key: key,
        key_id,
        pending: false,
    })?;
    if ctx.json {
        return json::print(&response);
    }
    out_lines(&[
        format!(
            "logged in as {} on {}",
            shown_name(&player.username),
            ctx.server.name
        ),
        format!(
            "API key stored in {} (keep it private: it plays as you)",
            file.path().display()
        ),
    ])
}

fn not_a_key() -> CliError {
    CliError::new(
        code::USAGE,
        "that is not an API key: keys look like oqk_..., as `oanquan keys new` prints them",
    )
}

/// [`read_key`], typed at a terminal without being shown: a key on screen stays in the
/// scrollback (and in screenshots and screen shares). Echo comes back once the line is read,
/// and on Ctrl-C, which ends the command with exit code 130.
async fn read_key_unseen() -> Result<String, CliError> {
    let hidden = HiddenInput::start();
    let interrupt = crate::signals::interrupt();
    let reading = tokio::task::spawn_blocking(read_key);
    let read = tokio::select! {
        read = reading => read,
        _ = interrupt => {
            drop(hidden);
            eprintln!();
            return Err(CliError::new(code::INTERRUPTED, "interrupted; no key was stored"));
        }
    };
    if hidden.is_some() {
        // The newline typed was not echoed either.
        eprintln!();
    }
    drop(hidden);
    read.map_err(|e| CliError::new(code::FAILURE, format!("reading the API key: {e}")))?
}

/// Echo turned off on the terminal that is stdin, until dropped (Unix; elsewhere, and when
/// stdin is not a terminal, nothing).
struct HiddenInput {
    #[cfg(unix)]
    saved: rustix::termios::Termios,
}

impl HiddenInput {
    fn start() -> Option<HiddenInput> {
        #[cfg(unix)]
        {
            use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
            use std::io::IsTerminal as _;
            let stdin = std::io::stdin();
            if !stdin.is_terminal() {
                return None;
            }
            let saved = tcgetattr(&stdin).ok()?;
            let mut quiet = saved.clone();
            quiet.local_modes.remove(LocalModes::ECHO);
            tcsetattr(&stdin, OptionalActions::Now, &quiet).ok()?;
            Some(HiddenInput { saved })
        }
        #[cfg(not(unix))]
        None
    }
}

impl Drop for HiddenInput {
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            let _ = rustix::termios::tcsetattr(
                std::io::stdin(),
                rustix::termios::OptionalActions::Now,
                &self.saved,
            );
        }
    }
}

/// The first line of stdin, trimmed: the API key (prompted for on a terminal).
fn read_key() -> Result<String, CliError> {
    use std::io::{BufRead as _, IsTerminal as _, Read as _, Write as _};
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprint!("API key: ");
        let _ = std::io::stderr().flush();
    }
    let mut line = Vec::new();
    stdin
        .lock()
        .take(MAX_KEY_LINE as u64)
        .read_until(b'\n', &mut line)
        .map_err(|e| CliError::io("reading the API key from stdin", &e))?;
    let key = String::from_utf8_lossy(&line).trim().to_owned();
    if key.is_empty() {
        return Err(CliError::new(
            code::USAGE,
            "no API key on stdin: pipe one in (`oanquan login < key.txt`) or type it at the \
             prompt",
        ));
    }
    Ok(key)
}

/// Whether a new account may be stored for `server`: not over another one without `force`.
fn may_store(file: &AccountFile, server: &str, force: bool) -> Result<(), CliError> {
    match file.stored(server)? {
        Some(unfinished) if unfinished.pending && !force => Err(CliError::new(
            code::REJECTED,
            format!(
                "the registration of {} on server {server} did not finish (its answer never \
                 came, and the account may exist): run `oanquan register {}` to finish it, or \
                 pass --force to give it up",
                shown_name(&unfinished.username),
                shown_name(&unfinished.username),
            ),
        )),
        Some(unfinished) if unfinished.pending => {
            note(format_args!(
                "giving up the unfinished registration of {} (--force): if its account was \
                 made, its key is lost with it",
                shown_name(&unfinished.username)
            ));
            Ok(())
        }
        Some(existing) if !force => Err(CliError::new(
            code::REJECTED,
            format!(
                "an account ({}) is already stored for server {server} in {}: for a second \
                 account on this machine, use another config directory (--config-dir DIR or \
                 OANQUAN_CONFIG_DIR); to replace this one, pass --force (a key that still works \
                 keeps working until revoked with `oanquan keys revoke`)",
                shown_name(&existing.username),
                file.path().display()
            ),
        )),
        _ => Ok(()),
    }
}

/// `oanquan me`.
pub async fn me(ctx: &Context, clients: &mut Clients) -> Result<(), CliError> {
    let account = required_account(ctx, "`oanquan me`")?;
    let response = clients
        .accounts
        .get_me(as_account(
            request(GetMeRequest {}),
            Some(&account.api_key),
        )?)
        .await
        .map_err(|s| CliError::from_status("get your profile", &s))?
        .into_inner();
    if ctx.json {
        return json::print(&response);
    }
    let player = response
        .player
        .ok_or_else(|| CliError::bad_answer("GetMe without a player"))?;
    out_lines(&profile_lines(&player))
}

/// `oanquan player NAME`.
pub async fn player(
    ctx: &Context,
    clients: &mut Clients,
    args: &PlayerArgs,
) -> Result<(), CliError> {
    let response = clients
        .accounts
        .get_player(request(GetPlayerRequest {
            username: args.username.clone(),
        }))
        .await
        .map_err(|s| CliError::from_status(&format!("player {}", typed(&args.username)), &s))?
        .into_inner();
    if ctx.json {
        return json::print(&response);
    }
    let player = response
        .player
        .ok_or_else(|| CliError::bad_answer("GetPlayer without a player"))?;
    out_lines(&profile_lines(&player))
}

/// A profile in text: name and date, the record, then one line per speed.
fn profile_lines(player: &PlayerProfile) -> Vec<String> {
    let mut lines = vec![
        format!(
            "{}, registered {}",
            shown_name(&player.username),
            date(player.create_time.as_ref())
        ),
        format!(
            "games: {} won, {} drawn, {} lost",
            player.wins, player.draws, player.losses
        ),
    ];
    if player.ratings.is_empty() {
        lines.push("no rated games yet".to_owned());
        return lines;
    }
    let mut rows = vec![["SPEED", "RATING", "RD", "GAMES"].map(str::to_owned)];
    for r in &player.ratings {
        rows.push([
            speed_name(r.speed()).to_owned(),
            rating_text(r.rating, r.provisional),
            r.deviation.to_string(),
            r.games.to_string(),
        ]);
    }
    lines.extend(table(&rows, &[false, true, true, true]));
    lines
}

/// Page after page of a list, as `PageArgs` asks: one page (from `--page-token`), or every page
/// with `--all`. `fetch(token)` returns a page's items and the next token. Returns the items
/// and the token of the page after them (empty when there is none, and always with --all).
async fn pages<T, F, Fut>(page: &PageArgs, mut fetch: F) -> Result<(Vec<T>, String), CliError>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<T>, String), CliError>>,
{
    let mut items = Vec::new();
    let mut token = page.page_token.clone().unwrap_or_default();
    // Bounded so that a server that keeps answering with a next-page token cannot keep us here.
    for _ in 0..10_000 {
        let (more, next) = fetch(token.clone()).await?;
        items.extend(more);
        if !page.all {
            return Ok((items, next));
        }
        if next.is_empty() || next == token {
            break;
        }
        token = next;
    }
    Ok((items, String::new()))
}

/// The line after a page that has another after it.
fn more_line(next: &str) -> String {
    format!(
        "more: the same command with --page-token {} (or --all for every page)",
        shown(next)
    )
}

/// `oanquan top [SPEED]`.
pub async fn top(ctx: &Context, clients: &mut Clients, args: &TopArgs) -> Result<(), CliError> {
    let speed = speed_to_proto(args.speed);
    let page_size = args.page.page_size.unwrap_or(0);
    let (entries, next) = pages(&args.page, |page_token| {
        let mut accounts = clients.accounts.clone();
        async move {
            let response = accounts
                .leaderboard(request(LeaderboardRequest {
                    speed: speed.into(),
                    page_size,
                    page_token,
                }))
                .await
                .map_err(|s| CliError::from_status("leaderboard", &s))?
                .into_inner();
            Ok((response.entries, response.next_page_token))
        }
    })
    .await?;
    if ctx.json {
        return json::print(&LeaderboardResponse {
            entries,
            next_page_token: next,
        });
    }
    let name = speed_name(speed);
    if entries.is_empty() {
        return out(format!(
            "no {name} leaderboard yet: players appear once their rating is no longer \
             provisional"
        ));
    }
    let mut lines = vec![format!("{name} leaderboard")];
    lines.extend(leaderboard_table(&entries));
    if !next.is_empty() {
        lines.push(more_line(&next));
    }
    out_lines(&lines)
}

fn leaderboard_table(entries: &[LeaderboardEntry]) -> Vec<String> {
    let mut rows = vec![["RANK", "PLAYER", "RATING", "RD", "GAMES"].map(str::to_owned)];
    for e in entries {
        let rating = e.rating.unwrap_or_default();
        rows.push([
            e.rank.to_string(),
            shown_name(&e.username).into_owned(),
            rating_text(rating.rating, rating.provisional),
            rating.deviation.to_string(),
            rating.games.to_string(),
        ]);
    }
    table(&rows, &[true, false, true, true, true])
}

/// `oanquan games [NAME]`.
pub async fn games(ctx: &Context, clients: &mut Clients, args: &GamesArgs) -> Result<(), CliError> {
    let username = match &args.username {
        Some(name) => name.clone(),
        None => required_account(ctx, "`oanquan games` without a NAME")?.username,
    };
    let result = args.result.map_or(PlayerResult::Unspecified, |r| match r {
        ResultFilter::Win => PlayerResult::Win,
        ResultFilter::Draw => PlayerResult::Draw,
        ResultFilter::Loss => PlayerResult::Loss,
    });
    let speed = args
        .speed
        .map_or(oanquan_proto::v1::Speed::Unspecified, speed_to_proto);
    let page_size = args.page.page_size.unwrap_or(0);
    let (games, next) = pages(&args.page, |page_token| {
        let mut accounts = clients.accounts.clone();
        let username = username.clone();
        async move {
            let response = accounts
                .list_player_games(request(ListPlayerGamesRequest {
                    username: username.clone(),
                    result: result.into(),
                    speed: speed.into(),
                    page_size,
                    page_token,
                }))
                .await
                .map_err(|s| CliError::from_status(&format!("games of {}", typed(&username)), &s))?
                .into_inner();
            Ok((response.games, response.next_page_token))
        }
    })
    .await?;
    if ctx.json {
        return json::print(&ListPlayerGamesResponse {
            games,
            next_page_token: next,
        });
    }
    if games.is_empty() {
        return out(format!("no games of {} found", shown_name(&username)));
    }
    // The server finds a player under any case or look-alike spelling of the name (`Ian` for
    // `Lan`); the seats carry the name as registered, which is what finds the player's side.
    let username = if args.username.is_some() {
        clients
            .accounts
            .get_player(request(GetPlayerRequest {
                username: username.clone(),
            }))
            .await
            .ok()
            .and_then(|response| response.into_inner().player)
            .map_or(username, |player| player.username)
    } else {
        username
    };
    let mut rows = vec![
        [
            "DATE", "GAME", "TIME", "RATED", "RESULT", "OPPONENT", "RATING",
        ]
        .map(str::to_owned),
    ];
    rows.extend(games.iter().map(|g| game_row(g, &username)));
    let mut lines = table_keeping(&rows, &[false; 7], 1);
    if !next.is_empty() {
        lines.push(more_line(&next));
    }
    out_lines(&lines)
}

/// The seat `username`'s account holds in `game`, if any (usernames match ignoring case).
pub fn seat_of_player(game: &Game, username: &str) -> Option<Side> {
    let wanted = username.to_lowercase();
    [
        (game.first_seat.as_ref(), Side::First),
        (game.second_seat.as_ref(), Side::Second),
    ]
    .into_iter()
    .find(|(seat, _)| {
        seat.and_then(|s| s.account.as_ref())
            .is_some_and(|a| a.username.to_lowercase() == wanted)
    })
    .map(|(_, side)| side)
}

/// One game of a player's list, from the player's side.
fn game_row(game: &Game, username: &str) -> [String; 7] {
    let side = seat_of_player(game, username);
    let seat = |s: Side| match s {
        Side::First => game.first_seat.as_ref(),
        Side::Second => game.second_seat.as_ref(),
    };
    let opponent = side.map_or_else(|| "?".to_owned(), |s| seat_label(seat(s.other())));
    let result = game.result.unwrap_or_default();
    let reason = json::end_reason_name(result.end_reason());
    let outcome = match game.status() {
        GameStatus::WaitingForPlayers => "waiting".to_owned(),
        GameStatus::Active => "playing".to_owned(),
        GameStatus::Aborted => "aborted".to_owned(),
        GameStatus::Finished => {
            let word = match (result.outcome(), side) {
                (Outcome::Draw, _) => "draw",
                (Outcome::FirstWins, Some(Side::First))
                | (Outcome::SecondWins, Some(Side::Second)) => "win",
                (Outcome::FirstWins | Outcome::SecondWins, Some(_)) => "loss",
                _ => "?",
            };
            format!("{word} ({reason})")
        }
        GameStatus::Unspecified => "?".to_owned(),
    };
    let change = match side {
        Some(Side::First) => result.first_rating.as_ref(),
        Some(Side::Second) => result.second_rating.as_ref(),
        None => None,
    };
    let rating = change.map_or_else(|| "-".to_owned(), change_numbers);
    let tc = TimeControl::from_proto(game.time_control.as_ref());
    [
        date(game.create_time.as_ref()),
        shown_name(&game.id).into_owned(),
        if tc == TimeControl::Untimed {
            "-".to_owned()
        } else {
            tc.to_string()
        },
        if game.rated { "rated" } else { "-" }.to_owned(),
        outcome,
        opponent,
        rating,
    ]
}

/// `oanquan keys`, `keys new`, `keys revoke ID`.
pub async fn keys(ctx: &Context, clients: &mut Clients, args: &KeysArgs) -> Result<(), CliError> {
    let account = required_account(ctx, "`oanquan keys`")?;
    match &args.action {
        None => list_keys(ctx, clients, &account).await,
        Some(KeysAction::New(new)) => new_key(ctx, clients, &account, new).await,
        Some(KeysAction::Revoke(revoke)) => revoke_key(ctx, clients, &account, &revoke.id).await,
    }
}

async fn list_keys(
    ctx: &Context,
    clients: &mut Clients,
    account: &Account,
) -> Result<(), CliError> {
    let response = clients
        .accounts
        .list_api_keys(as_account(
            request(ListApiKeysRequest {}),
            Some(&account.api_key),
        )?)
        .await
        .map_err(|s| CliError::from_status("list API keys", &s))?
        .into_inner();
    if ctx.json {
        return json::print(&response);
    }
    let mut rows = vec![["KEY", "CREATED", "STATUS"].map(str::to_owned)];
    rows.extend(response.keys.iter().map(|k| key_row(k, &account.key_id)));
    let mut lines = vec![format!("API keys of {}", shown_name(&account.username))];
    lines.extend(table(&rows, &[false; 3]));
    out_lines(&lines)
}

fn key_row(key: &ApiKey, stored_id: &str) -> [String; 3] {
    let status = match &key.revoke_time {
        Some(at) => format!("revoked {}", date(Some(at))),
        None if !stored_id.is_empty() && key.id == stored_id => "active (stored here)".to_owned(),
        None => "active".to_owned(),
    };
    [
        shown_name(&key.id).into_owned(),
        date(key.create_time.as_ref()),
        status,
    ]
}

async fn new_key(
    ctx: &Context,
    clients: &mut Clients,
    account: &Account,
    args: &KeysNewArgs,
) -> Result<(), CliError> {
    let mut response = clients
        .accounts
        .create_api_key(as_account(
            request(CreateApiKeyRequest {}),
            Some(&account.api_key),
        )?)
        .await
        .map_err(|s| CliError::from_status("make an API key", &s))?
        .into_inner();
    if response.api_key.is_empty() {
        return Err(CliError::bad_answer("CreateApiKey without a key"));
    }
    let id = response
        .key
        .as_ref()
        .map(|k| k.id.clone())
        .unwrap_or_default();
    if args.store {
        let file = ctx.account_file()?;
        file.put(Account {
            api_key: std::mem::take(&mut response.api_key),
            key_id: id.clone(),
            ..account.clone()
        })?;
        if ctx.json {
            return json::print(&response);
        }
        let before = shown_name(&account.key_id);
        return out_lines(&[
            format!(
                "new API key {} stored in {}",
                shown_name(&id),
                file.path().display()
            ),
            format!(
                "the key stored before ({before}) still works: revoke it with `oanquan keys \
                 revoke {before}`"
            ),
        ]);
    }
    if ctx.json {
        return json::print(&response);
    }
    out_lines(&[
        format!(
            "new API key {} (shown only this once; it is not stored here):",
            shown_name(&id)
        ),
        shown(&response.api_key).into_owned(),
    ])
}

async fn revoke_key(
    ctx: &Context,
    clients: &mut Clients,
    account: &Account,
    id: &str,
) -> Result<(), CliError> {
    let response = clients
        .accounts
        .revoke_api_key(as_account(
            request(RevokeApiKeyRequest {
                key_id: id.to_owned(),
            }),
            Some(&account.api_key),
        )?)
        .await
        .map_err(|s| CliError::from_status(&format!("revoke API key {}", typed(id)), &s))?
        .into_inner();
    // The stored key no longer works: keeping it would only make every later call fail.
    let stored = !account.key_id.is_empty() && account.key_id == id;
    let file = ctx.account_file()?;
    if stored {
        file.remove(&ctx.server.name)?;
    }
    if ctx.json {
        return json::print(&response);
    }
    out(format!("revoked API key {id}"))?;
    if stored {
        out(format!(
            "it was the key stored here: removed from {}; to play as the account again, \
             make a key with `oanquan keys new` where the account is stored and bring it here \
             with `oanquan login`",
            file.path().display()
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use oanquan_proto::v1::{GameResult, Rating, RatingChange, Seat, SeatAccount, Speed};
    use tonic::Code;

    fn seat(name: &str, rating: i32) -> Option<Seat> {
        Some(Seat {
            occupied: true,
            display_name: name.into(),
            account: Some(SeatAccount {
                username: name.into(),
                rating,
                provisional: true,
            }),
            ..Seat::default()
        })
    }

    #[test]
    fn profiles_show_ratings_record_and_date() {
        let player = PlayerProfile {
            username: "Lan".into(),
            ratings: vec![
                Rating {
                    speed: Speed::Blitz.into(),
                    rating: 1523,
                    deviation: 87,
                    games: 12,
                    provisional: false,
                    ..Rating::default()
                },
                Rating {
                    speed: Speed::Bullet.into(),
                    rating: 1490,
                    deviation: 290,
                    games: 1,
                    provisional: true,
                    ..Rating::default()
                },
            ],
            wins: 7,
            draws: 1,
            losses: 5,
            create_time: Some(prost_types::Timestamp {
                seconds: 1_741_305_600,
                nanos: 0,
            }),
        };
        assert_eq!(
            profile_lines(&player),
            [
                "Lan, registered 2025-03-07",
                "games: 7 won, 1 drawn, 5 lost",
                "SPEED  RATING  RD GAMES",
                "blitz    1523  87    12",
                "bullet  1490? 290     1",
            ]
        );
        let new = PlayerProfile {
            username: "Minh".into(),
            ..PlayerProfile::default()
        };
        assert_eq!(
            profile_lines(&new),
            [
                "Minh, registered -",
                "games: 0 won, 0 drawn, 0 lost",
                "no rated games yet"
            ]
        );
    }

    #[test]
    fn leaderboards_rank_players() {
        let entry = |rank, name: &str, rating| LeaderboardEntry {
            rank,
            username: name.into(),
            rating: Some(Rating {
                rating,
                deviation: 60,
                games: 30,
                ..Rating::default()
            }),
        };
        assert_eq!(
            leaderboard_table(&[entry(1, "Lan", 1820), entry(2, "Minh", 1705)]),
            [
                "RANK PLAYER RATING RD GAMES",
                "   1 Lan      1820 60    30",
                "   2 Minh     1705 60    30",
            ]
        );
    }

    #[test]
    fn a_players_games_read_from_their_side() {
        let game = Game {
            id: "g1".into(),
            first_seat: seat("Lan", 1500),
            second_seat: seat("Minh", 1510),
            status: GameStatus::Finished.into(),
            rated: true,
            time_control: crate::timecontrol::parse_time("3+2")
                .expect("3+2")
                .to_proto(),
            result: Some(GameResult {
                outcome: Outcome::SecondWins.into(),
                winner: 2,
                end_reason: oanquan_proto::v1::EndReason::Resignation.into(),
                ended_by: 1,
                first_rating: Some(RatingChange {
                    before: 1500,
                    after: 1338,
                    provisional: true,
                }),
                second_rating: Some(RatingChange {
                    before: 1510,
                    after: 1672,
                    provisional: true,
                }),
                ..GameResult::default()
            }),
            create_time: Some(prost_types::Timestamp {
                seconds: 0,
                nanos: 0,
            }),
            ..Game::default()
        };
        assert_eq!(
            game_row(&game, "lan"),
            [
                "1970-01-01",
                "g1",
                "3+2",
                "rated",
                "loss (resignation)",
                "Minh (1510?)",
                "1500 → 1338? (-162)"
            ]
        );
        assert_eq!(game_row(&game, "MINH")[4], "win (resignation)");
        assert_eq!(game_row(&game, "MINH")[5], "Lan (1500?)");
        assert_eq!(game_row(&game, "MINH")[6], "1510 → 1672? (+162)");
        assert_eq!(seat_of_player(&game, "nobody"), None);
        let unrated = Game {
            rated: false,
            status: GameStatus::Active.into(),
            result: None,
            time_control: None,
            ..game
        };
        let row = game_row(&unrated, "Lan");
        assert_eq!(
            [&row[2], &row[3], &row[4], &row[6]],
            ["-", "-", "playing", "-"]
        );
    }

    /// `pages` over a fake server of three pages (tokens "" → "p2" → "p3" → end), recording
    /// the tokens asked for.
    fn paged(page: &PageArgs) -> (Vec<u32>, String, Vec<String>) {
        let asked = std::cell::RefCell::new(Vec::new());
        let (items, next) = futures::executor::block_on(pages(page, |token: String| {
            asked.borrow_mut().push(token.clone());
            async move {
                Ok(match token.as_str() {
                    "" => (vec![1, 2], "p2".to_owned()),
                    "p2" => (vec![3, 4], "p3".to_owned()),
                    _ => (vec![5], String::new()),
                })
            }
        }))
        .expect("pages");
        (items, next, asked.into_inner())
    }

    #[test]
    fn one_page_or_all_of_them() {
        let page = |token: Option<&str>, all| PageArgs {
            page_size: None,
            page_token: token.map(str::to_owned),
            all,
        };
        assert_eq!(
            paged(&page(None, false)),
            (vec![1, 2], "p2".to_owned(), vec![String::new()])
        );
        assert_eq!(
            paged(&page(Some("p2"), false)),
            (vec![3, 4], "p3".to_owned(), vec!["p2".to_owned()])
        );
        let (items, next, asked) = paged(&page(None, true));
        assert_eq!(items, [1, 2, 3, 4, 5]);
        assert_eq!(next, "", "nothing after every page");
        assert_eq!(asked, ["", "p2", "p3"]);
        assert!(more_line("p2").contains("--page-token p2"));
    }

    /// The server refuses a key of another shape, or a secret of fewer than 12 distinct
    /// characters (`RegisterRequest.api_key`); two keys made here never repeat.
    #[test]
    fn keys_made_here_have_the_servers_shape() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let key = new_api_key();
            let (id, secret) = key
                .strip_prefix("oqk_")
                .and_then(|rest| rest.split_at_checked(16))
                .and_then(|(id, rest)| Some((id, rest.strip_prefix('_')?)))
                .unwrap_or_else(|| panic!("{key}"));
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()),
                "{key}"
            );
            assert_eq!(secret.len(), 32, "{key}");
            assert!(
                secret
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{key}"
            );
            let distinct: std::collections::HashSet<u8> = secret.bytes().collect();
            assert!(distinct.len() >= 12, "{key}");
            assert_eq!(key_id(&key), Some(id));
            assert!(seen.insert(key));
        }
    }

    #[test]
    fn only_a_call_whose_answer_may_be_lost_is_tried_again() {
        for code in [Code::Unavailable, Code::DeadlineExceeded, Code::Unknown] {
            assert!(
                answer_may_be_lost(&tonic::Status::new(code, "")),
                "{code:?}"
            );
        }
        for code in [
            Code::AlreadyExists,
            Code::InvalidArgument,
            Code::ResourceExhausted,
            Code::PermissionDenied,
        ] {
            assert!(
                !answer_may_be_lost(&tonic::Status::new(code, "")),
                "{code:?}"
            );
        }
    }

    #[test]
    fn an_account_is_not_replaced_without_force() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = AccountFile::new(dir.path());
        assert!(may_store(&file, "http://a:1", false).is_ok());
        file.put(Account {
            server: "http://a:1".into(),
            username: "Lan".into(),
            api_key: "oqk_s_secret".into(),
            key_id: "k1".into(),
            pending: false,
        })
        .expect("put");
        let err = may_store(&file, "a:1", false).expect_err("refused");
        assert_eq!(err.code, code::REJECTED);
        assert!(err.message.contains("(Lan)"), "{}", err.message);
        assert!(err.message.contains("--force"), "{}", err.message);
        assert!(!err.message.contains("oqk_s_secret"), "{}", err.message);
        assert!(may_store(&file, "a:1", true).is_ok());
        assert!(
            may_store(&file, "http://b:1", false).is_ok(),
            "another server"
        );
    }

    #[test]
    fn keys_say_which_is_stored_here() {
        let key = |id: &str, revoked: bool| ApiKey {
            id: id.into(),
            create_time: Some(prost_types::Timestamp {
                seconds: 0,
                nanos: 0,
            }),
            revoke_time: revoked.then_some(prost_types::Timestamp {
                seconds: 86_400,
                nanos: 0,
            }),
        };
        assert_eq!(
            key_row(&key("k1", false), "k1"),
            ["k1", "1970-01-01", "active (stored here)"]
        );
        assert_eq!(key_row(&key("k2", false), "k1")[2], "active");
        assert_eq!(key_row(&key("k1", true), "k1")[2], "revoked 1970-01-02");
        assert_eq!(key_row(&key("k3", false), "")[2], "active");
    }
}
