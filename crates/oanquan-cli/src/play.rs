//! `play` and `watch`: following a game live, and for `play` reading moves.

use std::io::BufRead as _;
use std::time::Duration;

use oanquan_proto::v1::{
    AbortGameRequest, AnalyzeRequest, LegalMovesRequest, PlayMoveRequest, ResignRequest, RulesSpec,
    rules_spec,
};
use tokio::sync::mpsc;

use crate::cli::{DisplayArgs, WatchArgs};
use crate::client::{Clients, authed, request};
use crate::commands::{self, Seats};
use crate::context::Context;
use crate::error::{CliError, code};
use crate::feed::{self, FeedItem, FeedOptions};
use crate::live::{Connection, Live, Output};
use crate::moves::{Input, LocalMove, Side, parse_input};
use crate::output::{note, out, out_inline};

const PROMPT_HELP: &str = "\
  Type a move as your square 1-5, counted from YOUR left, and a direction as you see the board:
    3 r   3r   3 right     sow square 3 to your right
    2 l   2 left           sow square 2 to your left
  Commands: moves (legal moves), board (draw the board), hint (a suggested move from the
  server's engine), help, resign (asks to confirm), abort (call the game off; only before
  the first move), quit (leave; the game goes on and `oanquan play GAME` resumes it).";

/// Thinking time of a `hint`.
const HINT_TIME_MS: u32 = 1000;

fn output(ctx: &Context, display: &DisplayArgs, json: bool) -> Output {
    Output {
        json,
        style: ctx.style,
        animate: (ctx.stdout_tty && !display.no_animate && !json)
            .then(|| Duration::from_millis(display.animate_ms)),
    }
}

fn feed_options(display: &DisplayArgs) -> FeedOptions {
    FeedOptions {
        give_up: (display.give_up > 0).then(|| Duration::from_secs(display.give_up)),
    }
}

pub async fn watch(ctx: &Context, clients: Clients, args: &WatchArgs) -> Result<(), CliError> {
    if ctx.json && args.from_start {
        return Err(CliError::new(
            code::USAGE,
            format!(
                "--from-start does not combine with --json: --json prints the game's event \
                 stream as the server sends it, and the earlier moves are not on it; print them \
                 with `oanquan moves {} --json`",
                args.game
            ),
        ));
    }
    let mut connection = Connection::new(&ctx.server.name);
    let mut live = Live::new(
        clients,
        args.view.unwrap_or(Side::First),
        None,
        output(ctx, &args.display, ctx.json),
    );
    live.from_start = args.from_start;
    let mut events = feed::spawn(
        ctx.server.clone(),
        args.game.clone(),
        None,
        feed_options(&args.display),
    );
    while let Some(item) = events.recv().await {
        match item {
            FeedItem::Event(event) => {
                live.handle(*event).await?;
                if live.over {
                    return Ok(());
                }
            }
            FeedItem::Down {
                why,
                attempt,
                retry_in,
            } => connection.down(&why, attempt, retry_in),
            FeedItem::Up { after } => connection.up(after),
            FeedItem::Fatal(err) => return Err(err),
        }
    }
    if live.over {
        Ok(())
    } else {
        Err(CliError::new(
            code::FAILURE,
            "the event stream stopped unexpectedly",
        ))
    }
}

/// Lines from standard input, read on a plain thread (tokio's stdin is blocking underneath
/// anyway). The channel closes at end of input.
fn stdin_lines() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// State of the prompt.
struct Player {
    game_id: String,
    token: String,
    me: Side,
    /// stdin and stdout are terminals: inline prompt; input read at any time.
    interactive: bool,
    /// The ply for which the prompt was last shown, so that it is shown once per turn.
    prompted: Option<u32>,
    /// `resign` was typed: the next line says whether it is meant.
    confirming_resign: bool,
}

/// `seat`: the seat just taken (`create --play`, `join --play`) or `--seat`; without it, the
/// only seat stored for the game, or on a terminal the player's answer if both are.
/// `from_start`: the player has seen none of the game yet (it was just created or joined), so
/// moves made before the board comes up (a computer's opening move) are shown too.
pub async fn play(
    ctx: &Context,
    mut clients: Clients,
    game_id: &str,
    seat: Option<Side>,
    from_start: bool,
    display: &DisplayArgs,
) -> Result<(), CliError> {
    let interactive = ctx.stdin_tty && ctx.stdout_tty;
    let mut lines = stdin_lines();
    let entry = match commands::saved_seats(ctx, &mut clients, game_id, seat).await? {
        Seats::One(entry) => entry,
        Seats::Both(first, second) if interactive => loop {
            out_inline(&format!(
                "you hold both seats of game {game_id}: play which? (first/second) "
            ))?;
            let Some(line) = lines.recv().await else {
                return Err(commands::both_seats(game_id));
            };
            match commands::seat_answer(&line) {
                Some(Side::First) => break first,
                Some(Side::Second) => break second,
                None => {}
            }
        },
        Seats::Both(..) => return Err(commands::both_seats(game_id)),
    };
    let me = entry.side()?;
    let mut player = Player {
        game_id: game_id.to_owned(),
        token: entry.token,
        me,
        interactive,
        prompted: None,
        confirming_resign: false,
    };
    let mut live = Live::new(clients, me, Some(me), output(ctx, display, false));
    live.from_start = from_start;
    out(format!("playing {game_id} as {me}"))?;
    let mut connection = Connection::new(&ctx.server.name);
    let mut events = feed::spawn(
        ctx.server.clone(),
        game_id.to_owned(),
        Some(player.token.clone()),
        feed_options(display),
    );
    loop {
        let my_turn = live.to_move() == Some(me);
        // The prompt waits for the turn's announcement, so `turn:` is printed before it.
        if my_turn && player.prompted != Some(live.ply()) && live.turn_announced == Some(live.ply())
        {
            player.prompted = Some(live.ply());
            player.prompt(&mut live).await?;
        }
        // Scripts may pipe all their moves at once: read the next line only when a move is
        // wanted, so that lines are not consumed (and rejected) during the opponent's turn.
        let want_input = my_turn || player.interactive || player.confirming_resign;
        tokio::select! {
            item = events.recv() => match item {
                Some(FeedItem::Event(event)) => {
                    live.handle(*event).await?;
                    if live.over {
                        return Ok(());
                    }
                }
                Some(FeedItem::Down { why, attempt, retry_in }) => {
                    connection.down(&why, attempt, retry_in);
                }
                Some(FeedItem::Up { after }) => {
                    connection.up(after);
                    // The notice went over the prompt: show it again (a turn's first prompt
                    // is still to come at the top of the loop).
                    let my_turn = live.to_move() == Some(me);
                    if !my_turn || player.prompted == Some(live.ply()) {
                        player.reprompt(&mut live, my_turn).await?;
                    }
                }
                Some(FeedItem::Fatal(err)) => return Err(err),
                None if live.over => return Ok(()),
                None => return Err(CliError::new(code::FAILURE, "the event stream stopped unexpectedly")),
            },
            line = lines.recv(), if want_input => match line {
                Some(line) => {
                    if player.on_line(&mut live, &line).await? {
                        note(format!("left game {game_id}; it goes on: resume with `oanquan play {game_id}`"));
                        return Ok(());
                    }
                }
                None => {
                    return Err(CliError::new(
                        code::UNFINISHED,
                        format!("input ended before the game did; resume with `oanquan play {game_id}`"),
                    ));
                }
            },
        }
    }
}

impl Player {
    /// Shows legal moves and the prompt. The board is not redrawn: it was printed with the
    /// snapshot or after the last move, a line or two above.
    async fn prompt(&mut self, live: &mut Live) -> Result<(), CliError> {
        let legal = self.legal_moves(live).await;
        let listed: Vec<String> = legal.iter().map(|m| m.short()).collect();
        out(format!("legal moves: {}", listed.join(" ")))?;
        if self.interactive {
            out_inline("your move> ")
        } else {
            out("your move")
        }
    }

    /// The legal moves in the player's own terms: asked from the server's rules engine, so that
    /// the client holds no rules. If that fails, every own square with stones in both
    /// directions (which is what the rules say) keeps the prompt useful.
    async fn legal_moves(&self, live: &Live) -> Vec<LocalMove> {
        let position = live.game.position.clone();
        let rules = live.game.rule_set.map(|r| RulesSpec {
            kind: Some(rules_spec::Kind::RuleSet(r)),
        });
        let mut rules_client = live_rules(live);
        let asked = rules_client
            .legal_moves(request(LegalMovesRequest {
                rules,
                position: position.clone(),
            }))
            .await;
        if let Ok(response) = asked {
            let moves: Vec<LocalMove> = response
                .into_inner()
                .moves
                .iter()
                .filter_map(|m| LocalMove::from_proto(self.me, m))
                .collect();
            if !moves.is_empty() {
                return moves;
            }
        }
        let squares = position.map(|p| p.squares).unwrap_or_default();
        let mut moves = Vec::new();
        for (local, ring) in (1u8..).zip(self.me.own_ring_squares()) {
            let stones = usize::try_from(ring)
                .ok()
                .and_then(|i| squares.get(i))
                .copied()
                .unwrap_or(0);
            if stones > 0 {
                for dir in [crate::moves::Dir::Right, crate::moves::Dir::Left] {
                    moves.push(LocalMove { square: local, dir });
                }
            }
        }
        moves
    }

    /// Handles one input line; returns true to quit.
    async fn on_line(&mut self, live: &mut Live, line: &str) -> Result<bool, CliError> {
        let my_turn = live.to_move() == Some(self.me);
        if std::mem::take(&mut self.confirming_resign) {
            if matches!(line.trim().to_lowercase().as_str(), "y" | "yes") {
                return self.resign(live).await;
            }
            out("not resigned; the game goes on")?;
            self.reprompt(live, my_turn).await?;
            return Ok(false);
        }
        let input = match parse_input(line) {
            Ok(input) => input,
            Err(err) => {
                out(format!("error: {err}"))?;
                self.reprompt(live, my_turn).await?;
                return Ok(false);
            }
        };
        match input {
            Input::Quit => return Ok(true),
            Input::Empty => {}
            Input::Help => out(PROMPT_HELP)?,
            Input::Board => live.print_board()?,
            Input::Moves => {}
            Input::Resign => {
                self.confirming_resign = true;
                return if self.interactive {
                    out_inline("resign? (y/N) ").map(|()| false)
                } else {
                    out("resign? (y/N)").map(|()| false)
                };
            }
            Input::Abort if live.game.move_count > 0 => out(
                "error: a move has been played, so the game can no longer be aborted; `resign` to give up",
            )?,
            Input::Abort => {
                let aborted = live_games(live)
                    .abort_game(authed(
                        AbortGameRequest {
                            game_id: self.game_id.clone(),
                        },
                        &self.token,
                    )?)
                    .await;
                match aborted {
                    // The GameOver event ends the session.
                    Ok(_) => return Ok(false),
                    Err(status) => out(format!(
                        "error: {}",
                        CliError::from_status("abort", &status)
                    ))?,
                }
            }
            Input::Hint if my_turn => self.hint(live).await?,
            Input::Hint => out("error: hints are for your turn; wait for the opponent's move")?,
            Input::Move(mv) if my_turn => {
                if self.send_move(live, mv).await? {
                    return Ok(false);
                }
            }
            Input::Move(_) => out("error: it is not your turn; wait for the opponent's move")?,
        }
        self.reprompt(live, my_turn).await?;
        Ok(false)
    }

    /// Resigns (confirmed); the GameOver event then ends the session.
    async fn resign(&mut self, live: &mut Live) -> Result<bool, CliError> {
        let resigned = live_games(live)
            .resign(authed(
                ResignRequest {
                    game_id: self.game_id.clone(),
                },
                &self.token,
            )?)
            .await;
        if let Err(status) = resigned {
            out(format!(
                "error: {}",
                CliError::from_status("resign", &status)
            ))?;
            let my_turn = live.to_move() == Some(self.me);
            self.reprompt(live, my_turn).await?;
        }
        Ok(false)
    }

    /// Asks the server's engine for the best move in the current position and prints it in
    /// the player's own terms: `hint: 3 right (3r), eval +4, depth 9`.
    async fn hint(&self, live: &Live) -> Result<(), CliError> {
        let rules = live.game.rule_set.map(|r| RulesSpec {
            kind: Some(rules_spec::Kind::RuleSet(r)),
        });
        let analyzed = live_rules(live)
            .analyze(request(AnalyzeRequest {
                rules,
                position: live.game.position.clone(),
                time_limit_ms: HINT_TIME_MS,
                node_limit: None,
                depth_limit: None,
            }))
            .await;
        let analysis = match analyzed {
            Ok(response) => response.into_inner(),
            Err(status) => {
                let err = CliError::from_status("hint", &status);
                return out(format!("error: {}", err.message));
            }
        };
        let Some(mv) = analysis
            .best_move
            .as_ref()
            .and_then(|m| LocalMove::from_proto(self.me, m))
        else {
            return out("error: the server suggested no move for your seat");
        };
        out(hint_line(
            mv,
            analysis.eval_points,
            analysis.depth,
            analysis.exact,
        ))
    }

    async fn reprompt(&mut self, live: &mut Live, my_turn: bool) -> Result<(), CliError> {
        if my_turn {
            self.prompt(live).await
        } else if self.interactive {
            out_inline("(waiting for the opponent)> ")
        } else {
            Ok(())
        }
    }

    /// Sends a move; true if the server accepted it (the move then arrives as an event).
    async fn send_move(&mut self, live: &mut Live, mv: LocalMove) -> Result<bool, CliError> {
        let request = authed(
            PlayMoveRequest {
                game_id: self.game_id.clone(),
                r#move: Some(mv.to_proto(self.me)),
                // Guards against a move typed for a position that has changed meanwhile (e.g. a
                // retry after a lost answer whose move did get played).
                expected_ply: Some(live.ply()),
            },
            &self.token,
        )?;
        match live_games(live).play_move(request).await {
            Ok(_) => Ok(true),
            Err(status) => {
                let err = CliError::from_status(&format!("move {}", mv.short()), &status);
                if err.code == code::AUTH {
                    return Err(err);
                }
                out(format!("error: {}", err.message))?;
                Ok(false)
            }
        }
    }
}

/// `hint: 3 right (3r), eval +4, depth 9` (stable format, see `play --help`).
fn hint_line(mv: LocalMove, eval_points: i32, depth: u32, exact: bool) -> String {
    let exact = if exact { ", exact" } else { "" };
    format!(
        "hint: {mv} ({}), eval {eval_points:+}, depth {depth}{exact}",
        mv.short()
    )
}

fn live_games(
    live: &Live,
) -> oanquan_proto::v1::game_service_client::GameServiceClient<tonic::transport::Channel> {
    live.clients().games.clone()
}

fn live_rules(
    live: &Live,
) -> oanquan_proto::v1::rules_service_client::RulesServiceClient<tonic::transport::Channel> {
    live.clients().rules.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::moves::Dir;

    #[test]
    fn hint_lines() {
        let mv = LocalMove {
            square: 3,
            dir: Dir::Right,
        };
        assert_eq!(
            hint_line(mv, 4, 9, false),
            "hint: 3 right (3r), eval +4, depth 9"
        );
        assert_eq!(
            hint_line(mv, -2, 30, true),
            "hint: 3 right (3r), eval -2, depth 30, exact"
        );
        assert_eq!(
            hint_line(mv, 0, 1, false),
            "hint: 3 right (3r), eval +0, depth 1"
        );
    }
}
