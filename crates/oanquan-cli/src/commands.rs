//! The one-shot subcommands: create, join, list, show, moves, presets, resign, abort, seeks,
//! accept; and finding the seat a command acts for in the token file.

use std::time::Instant;

use oanquan_proto::v1::{
    AbortGameRequest, AcceptSeekRequest, ClaimVictoryRequest, ComputerOpponent, CreateGameRequest,
    EndReason, Game, GameFilter, GameStatus, GetGameRequest, GetGameResponse, JoinGameRequest,
    ListGamesRequest, ListGamesResponse, ListPresetsRequest, ListSeeksRequest, Player, PlayerKind,
    ResignRequest, RulesSpec, Seek, rules_spec,
};

use crate::accounts::{playing_account, seat_of_player};
use crate::board::{self, BoardState, View};
use crate::cli::{
    AcceptArgs, CreateArgs, Filter, JoinArgs, ListArgs, MovesArgs, NameArg, SeatArgs, ShowArgs,
};
use crate::client::{Clients, all_moves, as_account, authed, request};
use crate::clocks::{LocalClocks, format_clock};
use crate::context::Context;
use crate::error::{CliError, code, typed};
use crate::json;
use crate::live::{end_line, game_over_line, summary_lines};
use crate::moves::Side;
use crate::output::table;
use crate::output::{counted, note, out, out_inline, out_lines, shown, shown_name};
use crate::ratings::{rating_lines, seat_label, seat_rating};
use crate::shown::shown_at_most;
use crate::timecontrol::{TimeControl, format_span, from_proto_duration};
use crate::tokens::{Entry, TokenStore};
use unicode_normalization::UnicodeNormalization as _;

pub fn display_name(arg: &NameArg) -> Result<String, CliError> {
    // Say where a bad name came from: the flag (or OANQUAN_NAME, which clap reads into it), or
    // $USER, which the user never typed here.
    let (name, source) = match &arg.name {
        Some(name) => (name.clone(), "--name"),
        None => (std::env::var("USER").unwrap_or_default(), "$USER"),
    };
    // Counted as the server counts it: in NFC (`e` + combining acute is one character).
    let name = name.trim().to_owned();
    let len = name.nfc().count();
    if len == 0 {
        return Err(CliError::new(
            code::USAGE,
            if source == "--name" {
                "--name is empty (or only spaces): a display name has 1-32 characters"
            } else {
                "a display name of 1-32 characters is needed: pass --name NAME (or set \
                 OANQUAN_NAME)"
            },
        ));
    }
    if len > 32 {
        // Not the name itself: it may be anything, of any length.
        return Err(CliError::new(
            code::USAGE,
            if source == "--name" {
                format!("--name: {len} characters; a display name has 1-32")
            } else {
                format!(
                    "{source} ({len} characters) is too long for a display name (1-32): \
                     pass --name NAME"
                )
            },
        ));
    }
    Ok(name)
}

fn rated_needs_account() -> CliError {
    CliError::new(
        code::REJECTED,
        "--rated needs an account, and none is stored for this server (or --anonymous was \
         given): register with `oanquan register NAME` first",
    )
}

/// Who takes a seat: an account (its API key goes with the request, its username is the
/// seat's name) or an anonymous display name. No `Debug`: it holds the key.
pub struct Seating {
    pub name: String,
    pub api_key: Option<String>,
}

impl Seating {
    /// The stored account unless `anonymous`; otherwise `--name` (or $USER).
    pub fn new(ctx: &Context, name: &NameArg, anonymous: bool) -> Result<Self, CliError> {
        Self::resolve(ctx, name, anonymous, true, false)
    }

    /// As [`Seating::new`], without a word about a `--name` the account overrides: for the
    /// check before connecting, which the command's own seating follows (an outside probe saw
    /// that note twice). A `rated` seat without an account is refused for that before any
    /// display name is asked for: it would not be used (an outside probe was asked for
    /// `--name`, then told `--rated` needs an account).
    pub fn check(
        ctx: &Context,
        name: &NameArg,
        anonymous: bool,
        rated: bool,
    ) -> Result<(), CliError> {
        Self::resolve(ctx, name, anonymous, false, rated).map(drop)
    }

    fn resolve(
        ctx: &Context,
        name: &NameArg,
        anonymous: bool,
        say: bool,
        rated: bool,
    ) -> Result<Self, CliError> {
        match playing_account(ctx, anonymous)? {
            Some(account) => {
                // An outside probe's `--name Foo` was seated as its account without a word.
                if let Some(asked) = name.name.as_deref()
                    && asked.trim() != account.username
                    && say
                    && !ctx.json
                {
                    note(format!(
                        "oanquan: playing as your account {}: --name (or OANQUAN_NAME) names \
                         anonymous seats only; --anonymous plays without the account",
                        shown_name(&account.username)
                    ));
                }
                Ok(Self {
                    name: account.username,
                    api_key: Some(account.api_key),
                })
            }
            None if rated => Err(rated_needs_account()),
            None => Ok(Self {
                name: display_name(name)?,
                api_key: None,
            }),
        }
    }

    /// `request` with the account's key, if any.
    pub fn sign<T>(&self, request: tonic::Request<T>) -> Result<tonic::Request<T>, CliError> {
        as_account(request, self.api_key.as_deref())
    }

    /// Refuses `--rated` here rather than at the server when it cannot work, saying why.
    pub fn check_rated(&self, rated: bool, tc: TimeControl) -> Result<(), CliError> {
        if !rated {
            return Ok(());
        }
        if self.api_key.is_none() {
            return Err(rated_needs_account());
        }
        if tc == TimeControl::Untimed {
            return Err(CliError::new(
                code::USAGE,
                "--rated needs a clock (untimed games are never rated): add a time control, \
                 e.g. 5+3, or a correspondence time",
            ));
        }
        Ok(())
    }
}

pub fn seat_of(value: i32, what: &str) -> Result<Side, CliError> {
    Side::from_i32(value).ok_or_else(|| CliError::bad_answer(&format!("{what} without a seat")))
}

/// A time control in a table cell: `3+2`, `2d/move`, `-` for untimed.
fn time_cell(tc: TimeControl) -> String {
    match tc {
        TimeControl::Untimed => "-".to_owned(),
        TimeControl::RealTime { .. } => tc.to_string(),
        TimeControl::Correspondence { per_move } => format!("{}/move", format_span(per_move)),
    }
}

/// The longest token `--token` takes: the server's are 32 characters.
const MAX_GIVEN_TOKEN: usize = 512;

/// Stores the token of a seat just taken (`create`, `join`, `seek`, `accept`, a rematch). The
/// server holds the seat already: when the token cannot be stored, it is said on standard error
/// with the game, the seat and how to play with it (`OANQUAN_TOKEN`), before the error returns,
/// for without its token the seat could be neither played nor aborted.
///
/// # Errors
///
/// The store's error, said after the token, with [`code::FAILURE`].
pub fn keep_seat(ctx: &Context, store: &TokenStore, entry: Entry) -> Result<(), CliError> {
    let Err(err) = store.put(entry.clone()) else {
        return Ok(());
    };
    note(unsaved_token(&ctx.server.name, &err, &entry));
    Err(CliError::new(
        code::FAILURE,
        format!(
            "the token of your {} seat in game {} was not saved (it is shown above)",
            entry.seat,
            shown_name(&entry.game_id)
        ),
    ))
}

/// What [`keep_seat`] says when the token could not be stored: what failed, the game, the seat,
/// the token itself and the commands that take it.
fn unsaved_token(server: &str, err: &CliError, entry: &Entry) -> String {
    // The server's text, escaped (a hostile server's token cannot drive the terminal), never cut.
    let token = shown_at_most(&entry.token, usize::MAX);
    let game = shown_name(&entry.game_id);
    let seat = &entry.seat;
    format!(
        "oanquan: could not save the token of your seat: {err}\n\
         oanquan: you hold the {seat} seat of game {game} on {server}, and this token is the only \
         key to it (keep it secret):\n\
         \n    {token}\n\n\
         oanquan: play with it: OANQUAN_TOKEN='{token}' oanquan --server {server} play {game} \
         --seat {seat}\n\
         oanquan: `resign`, `abort` and `claim` take it the same way (or --token TOKEN)"
    )
}

/// Stores a fresh seat token and prints the outcome in text (with --json the caller prints the
/// API's answer); returns the game id.
pub fn record_seat(
    ctx: &Context,
    store: &TokenStore,
    game: Option<Game>,
    token: String,
    seat: Side,
    name: &str,
    verb: &str,
) -> Result<String, CliError> {
    let game = game.ok_or_else(|| CliError::bad_answer(&format!("{verb} without a game")))?;
    keep_seat(
        ctx,
        store,
        Entry {
            server: ctx.server.name.clone(),
            game_id: game.id.clone(),
            seat: seat.name().to_owned(),
            token,
            display_name: name.to_owned(),
        },
    )?;
    if !ctx.json {
        let id = shown_name(&game.id);
        out(format!("{verb} game {id} as the {seat} player"))?;
        out(format!("token saved in {}", store.path().display()))?;
        let tc = TimeControl::from_proto(game.time_control.as_ref());
        if tc != TimeControl::Untimed {
            out(format!("time control: {tc}"))?;
        }
        if game.status() == GameStatus::WaitingForPlayers {
            out(format!(
                "waiting for an opponent: they run `oanquan join {id}`"
            ))?;
        }
        let opponent = match seat {
            Side::First => game.second_seat.as_ref(),
            Side::Second => game.first_seat.as_ref(),
        };
        if let Some(computer) = opponent.filter(|s| s.kind() == PlayerKind::Computer) {
            out(format!(
                "playing against the computer, level {} ({})",
                computer.computer_level,
                crate::cli::level_name(computer.computer_level)
            ))?;
        } else if let Some(person) = opponent.filter(|s| s.occupied) {
            out(format!("opponent: {}", seat_label(Some(person))))?;
        }
        if game.rated {
            out("rated game: the result changes both players' ratings")?;
        }
        out(format!("play with: oanquan play {id}"))?;
    }
    Ok(game.id)
}

/// Returns the game id and the seat taken.
pub async fn create(
    ctx: &Context,
    clients: &mut Clients,
    args: &CreateArgs,
) -> Result<(String, Side), CliError> {
    let seating = Seating::new(ctx, &args.name, args.account.anonymous)?;
    let tc = args.clock.time_control();
    seating.check_rated(args.rated, tc)?;
    let name = seating.name.clone();
    let store = ctx.token_store()?.ready_to_store()?;
    let seat = args.seat.side().map_or(Player::Unspecified, Side::to_proto);
    let response = clients
        .games
        .create_game(seating.sign(request(CreateGameRequest {
            rules: Some(RulesSpec {
                kind: Some(rules_spec::Kind::Preset(args.preset.clone())),
            }),
            start_position: None,
            seat: seat.into(),
            display_name: name.clone(),
            computer: args.computer.map(|level| ComputerOpponent { level }),
            time_control: tc.to_proto(),
            rated: args.rated,
        }))?)
        .await
        .map_err(|s| CliError::from_status("create game", &s))?
        .into_inner();
    let seat = seat_of(response.seat, "create answer")?;
    // --json: the API's answer, less the token (it goes to the token file only).
    let mut answer = response.clone();
    answer.player_token.clear();
    let id = record_seat(
        ctx,
        &store,
        response.game,
        response.player_token,
        seat,
        &name,
        "created",
    )?;
    if ctx.json {
        json::print(&answer)?;
    }
    Ok((id, seat))
}

/// Returns the game id and the seat taken.
pub async fn join(
    ctx: &Context,
    clients: &mut Clients,
    args: &JoinArgs,
) -> Result<(String, Side), CliError> {
    let seating = Seating::new(ctx, &args.name, args.account.anonymous)?;
    let name = seating.name.clone();
    let store = ctx.token_store()?.ready_to_store()?;
    let response = clients
        .games
        .join_game(seating.sign(request(JoinGameRequest {
            game_id: args.game.clone(),
            display_name: name.clone(),
        }))?)
        .await
        .map_err(|s| CliError::from_status(&format!("join game {}", typed(&args.game)), &s))?
        .into_inner();
    let seat = seat_of(response.seat, "join answer")?;
    // --json: the API's answer, less the token (it goes to the token file only).
    let mut answer = response.clone();
    answer.player_token.clear();
    let id = record_seat(
        ctx,
        &store,
        response.game,
        response.player_token,
        seat,
        &name,
        "joined",
    )?;
    if ctx.json {
        json::print(&answer)?;
    }
    Ok((id, seat))
}

fn filter(f: Filter) -> GameFilter {
    match f {
        Filter::Open => GameFilter::Open,
        Filter::Active => GameFilter::Active,
        Filter::Finished => GameFilter::Finished,
        Filter::All => GameFilter::All,
    }
}

fn seat(game: &Game, side: Side) -> Option<&oanquan_proto::v1::Seat> {
    match side {
        Side::First => game.first_seat.as_ref(),
        Side::Second => game.second_seat.as_ref(),
    }
}

/// A seat's display name as [`shown_name`] shows it, `-` for an empty seat.
fn seat_name(game: &Game, side: Side) -> String {
    match seat(game, side) {
        Some(s) if s.occupied => shown_name(&s.display_name).into_owned(),
        _ => "-".to_owned(),
    }
}

pub async fn list(ctx: &Context, clients: &mut Clients, args: &ListArgs) -> Result<(), CliError> {
    let mut games: Vec<Game> = Vec::new();
    let mut page_token = String::new();
    let limit = usize::try_from(args.limit).unwrap_or(usize::MAX);
    // Bounded so that a server that keeps answering with a next-page token cannot keep us here.
    for _ in 0..1000 {
        if games.len() >= limit {
            break;
        }
        let response = clients
            .games
            .list_games(request(ListGamesRequest {
                filter: filter(args.filter).into(),
                page_size: args.limit.min(100),
                page_token: page_token.clone(),
            }))
            .await
            .map_err(|s| CliError::from_status("list games", &s))?
            .into_inner();
        games.extend(response.games);
        if response.next_page_token.is_empty() || response.next_page_token == page_token {
            break;
        }
        page_token = response.next_page_token;
    }
    games.truncate(limit);
    if ctx.json {
        return json::print(&ListGamesResponse {
            games,
            next_page_token: String::new(),
        });
    }
    if games.is_empty() {
        return out("no games");
    }
    let header = [
        "GAME", "STATUS", "RULES", "TIME", "FIRST", "SECOND", "RESULT", "MOVES", "SCORE",
    ];
    let mut rows: Vec<[String; 9]> = vec![header.map(str::to_owned)];
    for g in &games {
        let scores = g
            .position
            .as_ref()
            .and_then(|p| p.scores)
            .unwrap_or_default();
        // Cells from the server are shown escaped (and their width counted so).
        let preset = if g.preset.is_empty() {
            "custom".into()
        } else {
            shown_name(&g.preset)
        };
        rows.push([
            shown_name(&g.id).into_owned(),
            json::status_name(g.status()).to_owned(),
            preset.into_owned(),
            time_cell(TimeControl::from_proto(g.time_control.as_ref())),
            seat_label(seat(g, Side::First)),
            seat_label(seat(g, Side::Second)),
            result_cell(g),
            g.move_count.to_string(),
            format!("{}:{}", scores.first, scores.second),
        ]);
    }
    out_lines(&table(
        &rows,
        &[false, false, false, false, false, false, false, true, true],
    ))
}

/// A finished game's result in `list`: who won and how (`second wins (timeout)`), `draw`,
/// `aborted`; `-` while the game is on.
fn result_cell(game: &Game) -> String {
    let Some(result) = game.result.as_ref() else {
        return "-".to_owned();
    };
    if !matches!(game.status(), GameStatus::Finished | GameStatus::Aborted) {
        return "-".to_owned();
    }
    let reason = result.end_reason();
    if reason == EndReason::Aborted || game.status() == GameStatus::Aborted {
        return "aborted".to_owned();
    }
    let outcome = json::outcome_name(result.outcome());
    match reason {
        EndReason::Unspecified => outcome.to_owned(),
        reason => format!("{outcome} ({})", json::end_reason_name(reason)),
    }
}

async fn get_game(clients: &mut Clients, game_id: &str) -> Result<Game, CliError> {
    clients
        .games
        .get_game(request(GetGameRequest {
            game_id: game_id.to_owned(),
        }))
        .await
        .map_err(|s| CliError::from_status(&format!("get game {}", typed(game_id)), &s))?
        .into_inner()
        .game
        .ok_or_else(|| CliError::bad_answer("GetGame without a game"))
}

pub async fn show(ctx: &Context, clients: &mut Clients, args: &ShowArgs) -> Result<(), CliError> {
    let game = get_game(clients, &args.game).await?;
    if ctx.json {
        return json::print(&GetGameResponse { game: Some(game) });
    }
    // Your own seat at the bottom if you play in this game (and only one of its seats).
    let mine = ctx
        .token_store()
        .ok()
        .and_then(|s| s.seats(&ctx.server.name, &game.id).ok())
        .filter(|seats| seats.len() == 1)
        .and_then(|seats| seats[0].seat.parse::<Side>().ok());
    let bottom = args.view.or(mine).unwrap_or(Side::First);
    let position = game.position.clone().unwrap_or_default();
    let over = matches!(game.status(), GameStatus::Finished | GameStatus::Aborted);
    let preset = if game.preset.is_empty() {
        "custom rules".into()
    } else {
        shown_name(&game.preset)
    };
    let tc = TimeControl::from_proto(game.time_control.as_ref());
    let timed = if tc == TimeControl::Untimed {
        String::new()
    } else {
        format!(", {tc}")
    };
    let mut lines = vec![format!(
        "game {}: {}, {preset}{timed}, {} played",
        shown_name(&game.id),
        json::status_name(game.status()),
        counted(game.move_count, "move")
    )];
    // The reading is as of the answer: close enough to now for a one-shot look.
    let now = Instant::now();
    let clocks = game.clocks.as_ref().map(|c| LocalClocks::new(c, now));
    let names = [
        seat_name(&game, Side::First),
        seat_name(&game, Side::Second),
    ];
    let view = View {
        bottom,
        you: mine,
        names: [names[0].as_str(), names[1].as_str()],
        to_move: if game.status() == GameStatus::Active {
            Side::from_i32(position.to_move)
        } else {
            None
        },
        highlight: None,
        hand: None,
        clocks: clocks
            .map(|c| [Side::First, Side::Second].map(|side| format_clock(c.remaining(side, now)))),
        ratings: [Side::First, Side::Second].map(|side| seat_rating(seat(&game, side))),
        // As `play` and `watch` draw it: a player's line fits the terminal.
        width: crate::output::terminal_width(),
    };
    lines.extend(board::render(
        &BoardState::from_position(&position),
        &view,
        ctx.style,
    ));
    if let (Some(left), Some(side), false) = (
        clocks.and_then(|c| c.first_move_left(now)),
        view.to_move,
        over,
    ) {
        lines.push(format!(
            "  {} to make their first move within {}",
            names[usize::from(side == Side::Second)],
            format_clock(left)
        ));
    }
    if let Some(by) = Side::from_i32(game.draw_offer).filter(|_| !over) {
        lines.push(format!(
            "{} offers a draw",
            names[usize::from(by == Side::Second)]
        ));
    }
    if over {
        let names = [names[0].as_str(), names[1].as_str()];
        // The first-move deadline is not in a finished game's answer: whether a player called
        // an aborted game off or missed the deadline cannot be told.
        if let Some(line) = game
            .result
            .as_ref()
            .and_then(|r| end_line(r, names, None, None))
        {
            lines.push(line);
        }
        lines.push(game_over_line(game.result.as_ref()));
        if let Some(result) = game.result.as_ref() {
            lines.extend(rating_lines(game.rated, result, names));
        }
    } else if game.rated {
        lines.push("rated game".to_owned());
    }
    out_lines(&lines)
}

pub async fn moves(ctx: &Context, clients: &mut Clients, args: &MovesArgs) -> Result<(), CliError> {
    let game = get_game(clients, &args.game).await?;
    let response = all_moves(&clients.games, &args.game)
        .await
        .map_err(|s| CliError::from_status(&format!("list moves of {}", typed(&args.game)), &s))?;
    if ctx.json {
        return json::print(&response);
    }
    let quan_value = game.rule_set.as_ref().map_or(0, |r| r.quan_value);
    let mut lines = Vec::new();
    for record in &response.moves {
        lines.extend(summary_lines(record, quan_value));
        if args.trace {
            lines.extend(board::trace_lines(&record.steps));
        }
    }
    if lines.is_empty() {
        lines.push("no moves yet".to_owned());
    }
    if matches!(game.status(), GameStatus::Finished | GameStatus::Aborted) {
        lines.push(game_over_line(game.result.as_ref()));
    }
    out_lines(&lines)
}

pub async fn presets(ctx: &Context, clients: &mut Clients) -> Result<(), CliError> {
    let response = clients
        .rules
        .list_presets(request(ListPresetsRequest {}))
        .await
        .map_err(|s| CliError::from_status("list presets", &s))?
        .into_inner();
    if ctx.json {
        return json::print(&response);
    }
    let presets = response.presets;
    let mut lines = Vec::new();
    for p in &presets {
        lines.push(shown_name(&p.name).into_owned());
        lines.extend(
            wrap(&shown(&p.description), 76)
                .into_iter()
                .map(|l| format!("    {l}")),
        );
    }
    out_lines(&lines)
}

/// `oanquan seeks`.
pub async fn seeks(ctx: &Context, clients: &mut Clients) -> Result<(), CliError> {
    let response = clients
        .games
        .list_seeks(request(ListSeeksRequest {}))
        .await
        .map_err(|s| CliError::from_status("list seeks", &s))?
        .into_inner();
    if ctx.json {
        return json::print(&response);
    }
    if response.seeks.is_empty() {
        return out("no open seeks; start one with `oanquan seek 3+2` (or `oanquan seek`)");
    }
    let header = [
        "SEEK", "NAME", "RULES", "TIME", "RATED", "RANGE", "COMPUTER",
    ];
    let mut rows: Vec<[String; 7]> = vec![header.map(str::to_owned)];
    rows.extend(response.seeks.iter().map(seek_row));
    out_lines(&table(&rows, &[false; 7]))
}

fn seek_row(seek: &Seek) -> [String; 7] {
    // Cells from the server are shown escaped (and their width counted so).
    let preset = if seek.preset.is_empty() {
        "custom".into()
    } else {
        shown_name(&seek.preset)
    };
    let name = match seek.account.as_ref() {
        Some(a) if a.rating != 0 => format!(
            "{} ({})",
            shown_name(&seek.display_name),
            crate::ratings::rating_text(a.rating, a.provisional)
        ),
        _ => shown_name(&seek.display_name).into_owned(),
    };
    [
        shown_name(&seek.id).into_owned(),
        name,
        preset.into_owned(),
        time_cell(TimeControl::from_proto(seek.time_control.as_ref())),
        if seek.rated { "rated" } else { "-" }.to_owned(),
        seek.rating_range
            .map_or_else(|| "-".to_owned(), |r| format!("{}-{}", r.min, r.max)),
        seek.computer_after.as_ref().map_or_else(
            || "-".to_owned(),
            |d| format!("after {}", format_span(from_proto_duration(Some(d)))),
        ),
    ]
}

/// `oanquan accept SEEK`: returns the game id and the seat taken.
pub async fn accept(
    ctx: &Context,
    clients: &mut Clients,
    args: &AcceptArgs,
) -> Result<(String, Side), CliError> {
    let seating = Seating::new(ctx, &args.name, args.account.anonymous)?;
    let name = seating.name.clone();
    let store = ctx.token_store()?.ready_to_store()?;
    let response = clients
        .games
        .accept_seek(seating.sign(request(AcceptSeekRequest {
            seek_id: args.seek.clone(),
            display_name: name.clone(),
        }))?)
        .await
        .map_err(|s| CliError::from_status(&format!("accept seek {}", typed(&args.seek)), &s))?
        .into_inner();
    let seat = seat_of(response.seat, "accept answer")?;
    // --json: the API's answer, less the token (it goes to the token file only).
    let mut answer = response.clone();
    answer.player_token.clear();
    if ctx.json {
        json::print(&answer)?;
    }
    let id = record_seat(
        ctx,
        &store,
        response.game,
        response.player_token,
        seat,
        &name,
        "joined",
    )?;
    Ok((id, seat))
}

/// The seats of one game that the token file holds.
#[derive(Debug)]
pub enum Seats {
    One(Entry),
    /// Both seats (two players on one machine): first, then second.
    Both(Entry, Entry),
}

impl Entry {
    /// The seat of a stored entry.
    ///
    /// # Errors
    ///
    /// A token file edited by hand with a seat that is neither `first` nor `second`.
    pub fn side(&self) -> Result<Side, CliError> {
        self.seat.parse().map_err(|e: String| {
            CliError::new(
                code::FAILURE,
                format!("token file, game {}: {e}", self.game_id),
            )
        })
    }
}

/// The stored seat(s) of `game_id` on this server; with `wanted`, that seat only.
///
/// # Errors
///
/// [`code::AUTH`] when none is stored (saying what is likely wrong), [`code::NOT_FOUND`] when
/// the server has no such game either.
pub async fn saved_seats(
    ctx: &Context,
    clients: &mut Clients,
    game_id: &str,
    wanted: Option<Side>,
    given: Option<&str>,
) -> Result<Seats, CliError> {
    // --token / OANQUAN_TOKEN: a seat the token file does not hold (clap requires --seat).
    if let Some(token) = given {
        let seat = wanted.ok_or_else(|| {
            CliError::new(code::USAGE, "a token (--token, OANQUAN_TOKEN) needs --seat")
        })?;
        // A token read from a file keeps its newline; anything else is not a token at all, and
        // the server would only answer a huge one as a header too large.
        let token = token.trim_ascii();
        if token.is_empty()
            || token.len() > MAX_GIVEN_TOKEN
            || !token.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(CliError::new(
                code::USAGE,
                format!(
                    "the token given with --token or OANQUAN_TOKEN is not a seat token (one \
                     word of letters, digits and signs, at most {MAX_GIVEN_TOKEN} characters)"
                ),
            ));
        }
        return Ok(Seats::One(Entry {
            server: ctx.server.name.clone(),
            game_id: game_id.to_owned(),
            seat: seat.name().to_owned(),
            token: token.to_owned(),
            display_name: String::new(),
        }));
    }
    let store = ctx.token_store()?.checked()?;
    let mut seats = store.seats(&ctx.server.name, game_id)?;
    if let (true, Some(old)) = (seats.is_empty(), ctx.seat_from.as_deref()) {
        // The server moved: its seats are saved for it at the new address too, so that the
        // next command needs no --seat-from.
        for entry in store.seats(old, game_id)? {
            store.put(Entry {
                server: ctx.server.name.clone(),
                ..entry
            })?;
        }
        seats = store.seats(&ctx.server.name, game_id)?;
    }
    if let Some(wanted) = wanted {
        let held: Vec<String> = seats.iter().map(|e| e.seat.clone()).collect();
        seats.retain(|e| e.seat == wanted.name());
        if seats.is_empty() && !held.is_empty() {
            return Err(CliError::new(
                code::AUTH,
                format!(
                    "your saved seat in game {game_id} is the {} one, not the {wanted} one",
                    held.join(" and ")
                ),
            ));
        }
    }
    let mut seats = seats.into_iter();
    match (seats.next(), seats.next()) {
        (Some(first), Some(second)) => Ok(Seats::Both(first, second)),
        (Some(one), None) => Ok(Seats::One(one)),
        _ => match account_seat(ctx, clients, game_id, wanted).await {
            Some(entry) => Ok(Seats::One(entry)),
            None => Err(no_seat(ctx, clients, &store, game_id).await),
        },
    }
}

/// The seat the stored account holds in `game_id`, with its API key in place of the seat's
/// token (the server takes either): the account's games can be played from any machine that
/// has the account, also without the seat's token (joined elsewhere, or the token file lost).
async fn account_seat(
    ctx: &Context,
    clients: &mut Clients,
    game_id: &str,
    wanted: Option<Side>,
) -> Option<Entry> {
    let account = ctx.account().ok()??;
    let game = get_game(clients, game_id).await.ok()?;
    let side = seat_of_player(&game, &account.username)?;
    if wanted.is_some_and(|w| w != side) {
        return None;
    }
    Some(Entry {
        server: ctx.server.name.clone(),
        game_id: game_id.to_owned(),
        seat: side.name().to_owned(),
        token: account.api_key,
        display_name: account.username,
    })
}

/// Why no seat of `game_id` is stored for this server, as far as the token file and the server
/// can tell: `join` is suggested only for a game that still has a free seat.
async fn no_seat(
    ctx: &Context,
    clients: &mut Clients,
    store: &TokenStore,
    game_id: &str,
) -> CliError {
    let server = &ctx.server.name;
    let mut message = format!(
        "no seat of game {} is saved for server {server} (in {})",
        typed(game_id),
        store.path().display()
    );
    let others = store.other_servers(server, game_id).unwrap_or_default();
    if let Some(other) = others.first() {
        message.push_str(&format!(
            "; one is saved for server {other}: pass --server {other}, or if that server moved \
             to {server}, --seat-from {other} takes its seat here"
        ));
        return CliError::new(code::AUTH, message);
    }
    match get_game(clients, game_id).await {
        Ok(game) => match game.status() {
            GameStatus::WaitingForPlayers => message.push_str(&format!(
                "; it waits for a second player: take the free seat with `oanquan join {game_id}`"
            )),
            GameStatus::Finished | GameStatus::Aborted => message.push_str(&format!(
                "; the game is over: `oanquan show {game_id}` shows how it ended"
            )),
            _ => message.push_str(&format!(
                "; you may have joined it from another machine or with another --server \
                 (or another config directory); follow it with `oanquan watch {game_id}`"
            )),
        },
        Err(err) if err.code == code::NOT_FOUND => {
            return CliError::new(
                code::NOT_FOUND,
                format!("there is no game {game_id} on server {server}"),
            );
        }
        // Not an id at all (`""`, `../x`): said as `show` says it, a usage error.
        Err(err) if err.code == code::USAGE => return err,
        Err(_) => message
            .push_str("; you may have joined it from another machine or with another --server"),
    }
    CliError::new(code::AUTH, message)
}

/// Holding both seats, a command that acts for one of them must be told which.
pub fn both_seats(game_id: &str) -> CliError {
    CliError::new(
        code::USAGE,
        format!(
            "you hold both seats of game {game_id} (two players on this machine): pass --seat \
             first or --seat second"
        ),
    )
}

/// Parses the answer to "which seat?"; `None` for anything else.
pub fn seat_answer(line: &str) -> Option<Side> {
    line.trim().parse().ok()
}

/// The seat a one-shot command acts for: the only one stored, `--seat`, or on a terminal the
/// answer to a question.
async fn one_seat(
    ctx: &Context,
    clients: &mut Clients,
    args: &SeatArgs,
    any_will_do: bool,
) -> Result<Entry, CliError> {
    match saved_seats(
        ctx,
        clients,
        &args.game,
        args.seat,
        args.given.token.as_deref(),
    )
    .await?
    {
        Seats::One(entry) => Ok(entry),
        Seats::Both(first, _) if any_will_do => Ok(first),
        Seats::Both(first, second) if ctx.stdin_tty => {
            out_inline(&format!(
                "you hold both seats of game {}: which one? (first/second) ",
                args.game
            ))?;
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .map_err(|e| CliError::io("reading standard input", &e))?;
            match seat_answer(&line) {
                Some(Side::First) => Ok(first),
                Some(Side::Second) => Ok(second),
                None => Err(both_seats(&args.game)),
            }
        }
        Seats::Both(..) => Err(both_seats(&args.game)),
    }
}

/// `oanquan resign GAME`.
pub async fn resign(ctx: &Context, clients: &mut Clients, args: &SeatArgs) -> Result<(), CliError> {
    let entry = one_seat(ctx, clients, args, false).await?;
    let response = clients
        .games
        .resign(authed(
            ResignRequest {
                game_id: args.game.clone(),
            },
            &entry.token,
        )?)
        .await
        .map_err(|s| CliError::from_status(&format!("resign game {}", typed(&args.game)), &s))?
        .into_inner();
    if ctx.json {
        return json::print(&response);
    }
    out(format!(
        "resigned game {} as the {} player",
        args.game, entry.seat
    ))?;
    let game = response.game.unwrap_or_default();
    out(game_over_line(game.result.as_ref()))?;
    out_rating_lines(&game)
}

/// A rated game's rating changes, after its `game over:` line.
fn out_rating_lines(game: &Game) -> Result<(), CliError> {
    let Some(result) = game.result.as_ref() else {
        return Ok(());
    };
    let names = [seat_name(game, Side::First), seat_name(game, Side::Second)];
    out_lines(&rating_lines(
        game.rated,
        result,
        [names[0].as_str(), names[1].as_str()],
    ))
}

/// `oanquan abort GAME`: either seat may call a game off, so holding both needs no choice.
pub async fn abort(ctx: &Context, clients: &mut Clients, args: &SeatArgs) -> Result<(), CliError> {
    let entry = one_seat(ctx, clients, args, true).await?;
    let response = clients
        .games
        .abort_game(authed(
            AbortGameRequest {
                game_id: args.game.clone(),
            },
            &entry.token,
        )?)
        .await
        .map_err(|s| CliError::from_status(&format!("abort game {}", typed(&args.game)), &s))?
        .into_inner();
    if ctx.json {
        return json::print(&response);
    }
    out(format!("aborted game {}", args.game))?;
    out(game_over_line(
        response.game.as_ref().and_then(|g| g.result.as_ref()),
    ))
}

/// `oanquan claim GAME`.
pub async fn claim(ctx: &Context, clients: &mut Clients, args: &SeatArgs) -> Result<(), CliError> {
    let entry = one_seat(ctx, clients, args, false).await?;
    let response = clients
        .games
        .claim_victory(authed(
            ClaimVictoryRequest {
                game_id: args.game.clone(),
            },
            &entry.token,
        )?)
        .await
        .map_err(|s| CliError::from_status(&format!("claim game {}", typed(&args.game)), &s))?
        .into_inner();
    if ctx.json {
        return json::print(&response);
    }
    let game = response.game.unwrap_or_default();
    let names = [
        seat_name(&game, Side::First),
        seat_name(&game, Side::Second),
    ];
    let names = [names[0].as_str(), names[1].as_str()];
    // A claim aborts a game only for an opponent who never made a first move.
    if let Some(line) = game
        .result
        .as_ref()
        .and_then(|r| end_line(r, names, None, Some(true)))
    {
        out(line)?;
    }
    out(game_over_line(game.result.as_ref()))?;
    out_rating_lines(&game)
}

/// Greedy word wrap for descriptions.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use oanquan_proto::v1::{GameResult, Outcome};

    /// A token that could not be stored is said whole, with the game, the seat, what failed
    /// and the command that plays with it; a hostile server's token cannot drive the terminal.
    #[test]
    fn an_unsaved_token_is_said_with_how_to_use_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The config directory's place is taken by a file: nothing can be stored there.
        let taken = dir.path().join("cfg");
        std::fs::write(&taken, b"").expect("write");
        let store = TokenStore::new(&taken);
        let token = format!("{}\u{1b}]0;x", "t".repeat(100));
        let entry = Entry {
            server: "http://h:1".into(),
            game_id: "g1".into(),
            seat: "second".into(),
            token: token.clone(),
            display_name: "Lan".into(),
        };
        let err = store.put(entry.clone()).expect_err("not a directory");
        let text = unsaved_token("http://h:1", &err, &entry);
        assert!(text.contains("could not save the token"), "{text}");
        assert!(text.contains(&taken.display().to_string()), "{text}");
        assert!(
            text.contains("the second seat of game g1 on http://h:1"),
            "{text}"
        );
        let shown = format!("{}\\u{{1b}}]0;x", "t".repeat(100));
        assert!(text.contains(&format!("\n    {shown}\n")), "{text}");
        assert!(
            text.contains(&format!(
                "OANQUAN_TOKEN='{shown}' oanquan --server http://h:1 play g1 --seat second"
            )),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "{text}");
    }

    #[test]
    fn list_shows_each_games_result() {
        let game = |status: GameStatus, result: Option<GameResult>| Game {
            status: status.into(),
            result,
            ..Game::default()
        };
        let result = |outcome: Outcome, reason: EndReason| GameResult {
            outcome: outcome.into(),
            end_reason: reason.into(),
            ..GameResult::default()
        };
        assert_eq!(result_cell(&game(GameStatus::Active, None)), "-");
        assert_eq!(
            result_cell(&game(
                GameStatus::Finished,
                Some(result(Outcome::SecondWins, EndReason::Timeout))
            )),
            "second wins (timeout)"
        );
        assert_eq!(
            result_cell(&game(
                GameStatus::Finished,
                Some(result(Outcome::Draw, EndReason::Agreement))
            )),
            "draw (agreement)"
        );
        assert_eq!(
            result_cell(&game(
                GameStatus::Aborted,
                Some(result(Outcome::Unspecified, EndReason::Aborted))
            )),
            "aborted"
        );
        // A result on a game still under way (a server bug) is not shown as final.
        assert_eq!(
            result_cell(&game(
                GameStatus::Active,
                Some(result(Outcome::FirstWins, EndReason::Mandarins))
            )),
            "-"
        );
    }

    #[test]
    fn wraps_words() {
        assert_eq!(wrap("a bb ccc dd", 6), ["a bb", "ccc dd"]);
        assert!(wrap("", 6).is_empty());
        assert_eq!(wrap("toolongword x", 4), ["toolongword", "x"]);
    }

    #[test]
    fn columns_fit_their_widest_cell_in_characters() {
        let rows = [
            ["GAME".to_owned(), "SECOND".to_owned(), "MOVES".to_owned()],
            [
                "g1".to_owned(),
                "Computer (random)".to_owned(),
                "3".to_owned(),
            ],
            ["g2".to_owned(), "Lân".to_owned(), "12".to_owned()],
        ];
        let lines = table(&rows, &[false, false, true]);
        assert_eq!(
            lines,
            [
                "GAME SECOND            MOVES",
                "g1   Computer (random)     3",
                "g2   Lân                  12",
            ]
        );
        assert_eq!(seat_answer(" second\n"), Some(Side::Second));
        assert_eq!(seat_answer("both"), None);
    }

    #[test]
    fn time_cells_are_short() {
        assert_eq!(time_cell(TimeControl::Untimed), "-");
        assert_eq!(
            time_cell(crate::timecontrol::parse_time("3+2").expect("3+2")),
            "3+2"
        );
        assert_eq!(
            time_cell(crate::timecontrol::parse_correspondence("36h").expect("36h")),
            "1d 12h/move"
        );
        let seek = Seek {
            id: "s1".into(),
            display_name: "Lan".into(),
            preset: String::new(),
            computer_after: Some(prost_types::Duration {
                seconds: 30,
                nanos: 0,
            }),
            ..Seek::default()
        };
        assert_eq!(
            seek_row(&seek),
            ["s1", "Lan", "custom", "-", "-", "-", "after 30s"]
        );
        let rated = Seek {
            id: "s2".into(),
            display_name: "Lan".into(),
            preset: "standard".into(),
            account: Some(oanquan_proto::v1::SeatAccount {
                username: "Lan".into(),
                rating: 1523,
                provisional: true,
            }),
            rated: true,
            rating_range: Some(oanquan_proto::v1::RatingRange {
                min: 1400,
                max: 1700,
            }),
            ..Seek::default()
        };
        assert_eq!(
            seek_row(&rated),
            [
                "s2",
                "Lan (1523?)",
                "standard",
                "-",
                "rated",
                "1400-1700",
                "-"
            ]
        );
    }

    #[test]
    fn rated_needs_an_account_and_a_clock() {
        let anonymous = Seating {
            name: "guest".into(),
            api_key: None,
        };
        let account = Seating {
            name: "Lan".into(),
            api_key: Some("oqk_x".into()),
        };
        let blitz = crate::timecontrol::parse_time("5+0").expect("5+0");
        assert!(anonymous.check_rated(false, TimeControl::Untimed).is_ok());
        let err = anonymous.check_rated(true, blitz).expect_err("no account");
        assert_eq!(err.code, code::REJECTED);
        assert!(
            err.message.contains("oanquan register NAME"),
            "{}",
            err.message
        );
        let err = account
            .check_rated(true, TimeControl::Untimed)
            .expect_err("untimed");
        assert_eq!(err.code, code::USAGE);
        assert!(account.check_rated(true, blitz).is_ok());
        // The key goes in the header only for an account.
        let signed = account.sign(request(())).expect("signed");
        assert_eq!(
            signed
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer oqk_x")
        );
        let plain = anonymous.sign(request(())).expect("plain");
        assert!(plain.metadata().get("authorization").is_none());
    }

    #[test]
    fn display_name_is_checked() {
        let ok = NameArg {
            name: Some("  Lan ".into()),
        };
        assert_eq!(display_name(&ok).expect("valid"), "Lan");
        let long = NameArg {
            name: Some("x".repeat(33)),
        };
        let refused = display_name(&long).expect_err("too long");
        assert_eq!(refused.code, code::USAGE);
        assert_eq!(
            refused.message,
            "--name: 33 characters; a display name has 1-32"
        );
        // 17 letters written decomposed (34 code points) are 17 characters to the server.
        let decomposed = NameArg {
            name: Some("e\u{301}".repeat(17)),
        };
        assert!(display_name(&decomposed).is_ok());
    }
}
