//! The one-shot subcommands: create, join, list, show, moves, presets.

use oanquan_proto::v1::{
    ComputerOpponent, CreateGameRequest, Game, GameFilter, GameStatus, GetGameRequest,
    JoinGameRequest, ListGamesRequest, ListMovesRequest, ListPresetsRequest, Player, PlayerKind,
    RulesSpec, rules_spec,
};
use serde_json::json;

use crate::Context;
use crate::board::{self, BoardState, View};
use crate::cli::{CreateArgs, Filter, JoinArgs, ListArgs, MovesArgs, NameArg, ShowArgs};
use crate::client::{Clients, request};
use crate::error::{CliError, code};
use crate::json;
use crate::live::{game_over_line, move_line, out, out_lines};
use crate::moves::Side;
use crate::tokens::{Entry, TokenStore};

fn display_name(arg: &NameArg) -> Result<String, CliError> {
    let name = arg
        .name
        .clone()
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_default();
    let name = name.trim().to_owned();
    let len = name.chars().count();
    if !(1..=32).contains(&len) {
        return Err(CliError::new(
            code::USAGE,
            "a display name of 1-32 characters is needed: pass --name NAME (or set OANQUAN_NAME)",
        ));
    }
    Ok(name)
}

fn seat_of(value: i32, what: &str) -> Result<Side, CliError> {
    Side::from_i32(value).ok_or_else(|| CliError::bad_answer(&format!("{what} without a seat")))
}

/// Stores a fresh seat token and prints the outcome; returns the game id.
fn record_seat(
    ctx: &Context,
    store: &TokenStore,
    game: Option<Game>,
    token: String,
    seat: Side,
    name: &str,
    verb: &str,
) -> Result<String, CliError> {
    let game = game.ok_or_else(|| CliError::bad_answer(&format!("{verb} without a game")))?;
    store.put(Entry {
        server: ctx.server.name.clone(),
        game_id: game.id.clone(),
        seat: seat.name().to_owned(),
        token,
        display_name: name.to_owned(),
    })?;
    if ctx.json {
        out(json!({
            "game_id": game.id,
            "seat": seat.name(),
            "game": json::game(&game),
            "token_file": store.path(),
        }))?;
    } else {
        out(format!("{verb} game {} as the {seat} player", game.id))?;
        out(format!("token saved in {}", store.path().display()))?;
        if game.status() == GameStatus::WaitingForPlayers {
            out(format!(
                "waiting for an opponent: they run `oanquan join {}`",
                game.id
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
        }
        out(format!("play with: oanquan play {}", game.id))?;
    }
    Ok(game.id)
}

pub async fn create(
    ctx: &Context,
    clients: &mut Clients,
    args: &CreateArgs,
) -> Result<String, CliError> {
    let name = display_name(&args.name)?;
    let store = ctx.token_store()?;
    let seat = args.seat.side().map_or(Player::Unspecified, Side::to_proto);
    let response = clients
        .games
        .create_game(request(CreateGameRequest {
            rules: Some(RulesSpec {
                kind: Some(rules_spec::Kind::Preset(args.preset.clone())),
            }),
            start_position: None,
            seat: seat.into(),
            display_name: name.clone(),
            computer: args.computer.map(|level| ComputerOpponent { level }),
        }))
        .await
        .map_err(|s| CliError::from_status("create game", &s))?
        .into_inner();
    let seat = seat_of(response.seat, "create answer")?;
    record_seat(
        ctx,
        &store,
        response.game,
        response.player_token,
        seat,
        &name,
        "created",
    )
}

pub async fn join(
    ctx: &Context,
    clients: &mut Clients,
    args: &JoinArgs,
) -> Result<String, CliError> {
    let name = display_name(&args.name)?;
    let store = ctx.token_store()?;
    let response = clients
        .games
        .join_game(request(JoinGameRequest {
            game_id: args.game.clone(),
            display_name: name.clone(),
        }))
        .await
        .map_err(|s| CliError::from_status(&format!("join game {}", args.game), &s))?
        .into_inner();
    let seat = seat_of(response.seat, "join answer")?;
    record_seat(
        ctx,
        &store,
        response.game,
        response.player_token,
        seat,
        &name,
        "joined",
    )
}

fn filter(f: Filter) -> GameFilter {
    match f {
        Filter::Open => GameFilter::Open,
        Filter::Active => GameFilter::Active,
        Filter::Finished => GameFilter::Finished,
        Filter::All => GameFilter::All,
    }
}

fn seat_name(game: &Game, side: Side) -> String {
    let seat = match side {
        Side::First => game.first_seat.as_ref(),
        Side::Second => game.second_seat.as_ref(),
    };
    match seat {
        Some(s) if s.occupied => s.display_name.clone(),
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
        return out(json!({ "games": games.iter().map(json::game).collect::<Vec<_>>() }));
    }
    if games.is_empty() {
        return out("no games");
    }
    let mut lines = vec![format!(
        "{:<16} {:<9} {:<14} {:<16} {:<16} {:>5} {:>7}",
        "GAME", "STATUS", "RULES", "FIRST", "SECOND", "MOVES", "SCORE"
    )];
    for g in &games {
        let scores = g
            .position
            .as_ref()
            .and_then(|p| p.scores)
            .unwrap_or_default();
        let preset = if g.preset.is_empty() {
            "custom"
        } else {
            g.preset.as_str()
        };
        lines.push(format!(
            "{:<16} {:<9} {:<14} {:<16} {:<16} {:>5} {:>7}",
            g.id,
            json::status_name(g.status()),
            preset,
            seat_name(g, Side::First),
            seat_name(g, Side::Second),
            g.move_count,
            format!("{}:{}", scores.first, scores.second),
        ));
    }
    out_lines(&lines)
}

async fn get_game(clients: &mut Clients, game_id: &str) -> Result<Game, CliError> {
    clients
        .games
        .get_game(request(GetGameRequest {
            game_id: game_id.to_owned(),
        }))
        .await
        .map_err(|s| CliError::from_status(&format!("get game {game_id}"), &s))?
        .into_inner()
        .game
        .ok_or_else(|| CliError::bad_answer("GetGame without a game"))
}

pub async fn show(ctx: &Context, clients: &mut Clients, args: &ShowArgs) -> Result<(), CliError> {
    let game = get_game(clients, &args.game).await?;
    if ctx.json {
        return out(json::game(&game));
    }
    // Your own seat at the bottom if you play in this game.
    let mine = ctx
        .token_store()
        .ok()
        .and_then(|s| s.get(&ctx.server.name, &game.id).ok().flatten())
        .and_then(|e| e.seat.parse::<Side>().ok());
    let bottom = args.view.or(mine).unwrap_or(Side::First);
    let position = game.position.clone().unwrap_or_default();
    let over = matches!(game.status(), GameStatus::Finished | GameStatus::Aborted);
    let preset = if game.preset.is_empty() {
        "custom rules"
    } else {
        game.preset.as_str()
    };
    let mut lines = vec![format!(
        "game {}: {}, {preset}, {} moves played",
        game.id,
        json::status_name(game.status()),
        game.move_count
    )];
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
    };
    lines.extend(board::render(
        &BoardState::from_position(&position),
        &view,
        ctx.style,
    ));
    if over {
        lines.push(game_over_line(game.result.as_ref()));
    }
    out_lines(&lines)
}

pub async fn moves(ctx: &Context, clients: &mut Clients, args: &MovesArgs) -> Result<(), CliError> {
    let game = get_game(clients, &args.game).await?;
    let response = clients
        .games
        .list_moves(request(ListMovesRequest {
            game_id: args.game.clone(),
        }))
        .await
        .map_err(|s| CliError::from_status(&format!("list moves of {}", args.game), &s))?
        .into_inner();
    if ctx.json {
        return out(json!({
            "game_id": args.game,
            "start_position": response.start_position.as_ref().map(json::position),
            "moves": response.moves.iter().map(json::move_record).collect::<Vec<_>>(),
        }));
    }
    let quan_value = game.rule_set.as_ref().map_or(0, |r| r.quan_value);
    let mut lines = Vec::new();
    for record in &response.moves {
        lines.push(move_line(record, quan_value));
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
    let presets = clients
        .rules
        .list_presets(request(ListPresetsRequest {}))
        .await
        .map_err(|s| CliError::from_status("list presets", &s))?
        .into_inner()
        .presets;
    if ctx.json {
        return out(json!({ "presets": presets.iter().map(json::preset).collect::<Vec<_>>() }));
    }
    let mut lines = Vec::new();
    for p in &presets {
        lines.push(p.name.clone());
        lines.extend(
            wrap(&p.description, 76)
                .into_iter()
                .map(|l| format!("    {l}")),
        );
    }
    out_lines(&lines)
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

    #[test]
    fn wraps_words() {
        assert_eq!(wrap("a bb ccc dd", 6), ["a bb", "ccc dd"]);
        assert!(wrap("", 6).is_empty());
        assert_eq!(wrap("toolongword x", 4), ["toolongword", "x"]);
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
        assert_eq!(
            display_name(&long)
                .map_err(|e| e.code)
                .expect_err("too long"),
            code::USAGE
        );
    }
}
