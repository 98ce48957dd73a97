//! `play` and `watch`: following a game live, and for `play` reading moves.

use std::time::{Duration, Instant};

use oanquan_proto::v1::{
    AbortGameRequest, AnalyzeRequest, AnalyzeResponse, ClaimVictoryRequest, DeclineDrawRequest,
    DeclineRematchRequest, ErrorReason, GameStatus, LegalMovesRequest, OfferDrawRequest,
    OfferRematchRequest, PlayMoveRequest, ResignRequest, RulesSpec, analyze_request, game_event,
    rules_spec,
};
use tokio::sync::mpsc;
use tonic_types::StatusExt as _;

use crate::cli::{DisplayArgs, LiveArgs, WatchArgs};
use crate::client::{Clients, authed, request};
use crate::clocks::format_clock;
use crate::commands::{self, Seats};
use crate::context::Context;
use crate::error::{CliError, code};
use crate::feed::{self, FeedItem, FeedOptions};
use crate::live::{Connection, Live, Output};
use crate::moves::{Input, LocalMove, Side, empty_square, parse_input};
use crate::output::{
    self, note, out, out_inline, shown_name, status_above_prompt, status_at_cursor,
};
use crate::tokens::{Entry, TokenStore};

const PROMPT_HELP: &str = "\
  Type a move as your square 1-5, counted from YOUR left, and a direction
  as you see the board:
    3 r   3r   3 right     sow square 3 to your right
    2 l   2 left           sow square 2 to your left
  Commands:
    moves     the legal moves
    board     draw the board
    hint      a suggested move from the server's engine
    resign    resign the game (asks to confirm)
    abort     call the game off (only before the first move)
    draw      offer a draw, or accept the opponent's
    decline   refuse the opponent's draw offer
    claim     claim the win when the opponent has stayed away too long
    quit      leave; the game goes on, and `oanquan play GAME` resumes it
    help      this text
  After the game: rematch (offer or accept one), no (decline it), quit.";

/// Thinking time of a `hint`.
const HINT_TIME_MS: u32 = 1000;

/// How often ticking clocks are redrawn on a terminal.
const TICK: Duration = Duration::from_secs(1);

/// `clock_lines`: print stable `clocks:` lines (no status line ticks in place).
fn output(ctx: &Context, display: &DisplayArgs, json: bool, clock_lines: bool) -> Output {
    Output {
        json,
        style: ctx.style,
        animate: (ctx.stdout_tty && !display.no_animate && !json)
            .then(|| Duration::from_millis(display.animate_ms)),
        clock_lines,
    }
}

fn feed_options(display: &DisplayArgs, follow_rematch: bool) -> FeedOptions {
    FeedOptions {
        give_up: (display.give_up > 0).then(|| Duration::from_secs(display.give_up)),
        follow_rematch,
    }
}

/// A ticker for redrawing clocks, its missed ticks skipped (a busy terminal does not get a
/// burst of redraws).
fn ticker() -> tokio::time::Interval {
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    ticker
}

pub async fn watch(ctx: &Context, clients: Clients, args: &WatchArgs) -> Result<(), CliError> {
    if ctx.json && args.from_start {
        return Err(CliError::new(
            code::USAGE,
            format!(
                "--from-start does not combine with --json: --json prints the game's event \
                 stream as the server sends it, and the earlier moves are not on it; print them \
                 with `oanquan moves {} --json`",
                crate::error::typed(&args.game)
            ),
        ));
    }
    let mut connection = Connection::new(&ctx.server.name);
    // On a terminal the clocks tick on the last line; elsewhere they come as stable lines.
    let status_line = ctx.stdout_tty && !ctx.json;
    let mut live = Live::new(
        clients,
        args.view.unwrap_or(Side::First),
        None,
        output(ctx, &args.display, ctx.json, !ctx.stdout_tty),
    );
    live.from_start = args.from_start;
    let mut events = feed::spawn(
        ctx.server.clone(),
        args.game.clone(),
        None,
        feed_options(&args.display, false),
    );
    let mut ticker = ticker();
    // A spectator's Ctrl-C ends the client with 130, as `play`'s does; heard here because a
    // move's animation listens for it too (to stop at once), which takes SIGINT's default
    // action away for the rest of the process.
    let interrupt = crate::signals::interrupt();
    tokio::pin!(interrupt);
    let mut interrupt_armed = true;
    // Off a terminal, whether the reader of the output is still there (see
    // `output::stdout_reader_gone`): once a second.
    let mut reader_check = tokio::time::interval(std::time::Duration::from_secs(1));
    reader_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let ticking = status_line && live.ticking();
        let item = tokio::select! {
            item = events.recv() => item,
            _ = ticker.tick(), if ticking => {
                if let Some(line) = live.clock_line(Instant::now()) {
                    output::tick(&line)?;
                }
                continue;
            }
            _ = reader_check.tick(), if !ctx.stdout_tty => {
                if output::stdout_reader_gone() {
                    return Err(CliError::output_closed());
                }
                continue;
            }
            interrupted = &mut interrupt, if interrupt_armed => {
                interrupt_armed = false;
                if interrupted.is_err() {
                    continue;
                }
                if ctx.stdout_tty {
                    // Off the status line, so that the shell's prompt starts a line of its own.
                    out("")?;
                }
                return Err(CliError::new(code::INTERRUPTED, ""));
            }
        };
        let Some(item) = item else { break };
        match item {
            FeedItem::Event(event, received) => {
                live.handle(*event, received).await?;
                if live.over {
                    return Ok(());
                }
                if status_line
                    && live.ticking()
                    && let Some(line) = live.clock_line(Instant::now())
                {
                    status_at_cursor(&line)?;
                }
            }
            FeedItem::Down {
                why,
                attempt,
                retry_in,
            } => connection.down(&why, attempt, retry_in),
            FeedItem::Up { after } => {
                connection.up(after);
                // The notices took the status line away, and a resumed stream with nothing
                // missed brings no event that would show it again: the clocks would stand
                // still until the next move.
                if status_line
                    && live.ticking()
                    && let Some(line) = live.clock_line(Instant::now())
                {
                    status_at_cursor(&line)?;
                }
            }
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

/// The longest input line kept: no move or command comes near it. The rest of a longer line is
/// read and dropped, so a 100 MB line costs no memory, and the line still fails as a move.
const MAX_LINE: usize = 1024;

/// Lines from standard input, each with when it was read, on a plain thread (tokio's stdin is blocking underneath
/// anyway). The channel closes at end of input (or when it cannot be read). Bytes that are not
/// UTF-8 are replaced (U+FFFD), so such a line is refused as a move like any other, rather than
/// ending the input; a line over [`MAX_LINE`] bytes is cut there and marked with `…`.
fn stdin_lines() -> mpsc::UnboundedReceiver<(String, Instant)> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        while let Some(line) = read_line_capped(&mut input, MAX_LINE) {
            output::input_read();
            // When it was typed (its Enter), for a terminal's moves typed ahead of their turn.
            if tx.send((line, Instant::now())).is_err() {
                break;
            }
        }
    });
    rx
}

/// One line of `input` without its end (`\n` or `\r\n`), at most `max` bytes of it kept (then
/// `…`), as UTF-8 with replacements; `None` at end of input or on a read error.
fn read_line_capped(input: &mut impl std::io::BufRead, max: usize) -> Option<String> {
    let mut line = Vec::new();
    let mut cut = false;
    let mut read_any = false;
    loop {
        let buffer = match input.fill_buf() {
            Ok(buffer) => buffer,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        if buffer.is_empty() {
            if !read_any {
                return None;
            }
            break;
        }
        read_any = true;
        let (take, ends) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&buffer[..take.min(room)]);
        cut |= take > room;
        input.consume(take);
        if ends {
            break;
        }
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    let mut text = String::from_utf8_lossy(&line).into_owned();
    if cut {
        text.push('…');
    }
    Some(text)
}

/// State of the prompt.
struct Player {
    game_id: String,
    token: String,
    me: Side,
    /// The display name stored with the seat, for the rematch's entry.
    display_name: String,
    /// stdin and stdout are terminals: inline prompt; input read at any time.
    interactive: bool,
    /// The ply for which the prompt was last shown, so that it is shown once per turn.
    prompted: Option<u32>,
    /// The ply for which the waiting prompt (with the clocks) was last shown, on a terminal.
    waiting_prompted: Option<u32>,
    /// `resign` was typed: the next line says whether it is meant.
    confirming_resign: bool,
    /// The server accepted this seat's resignation or abort: the game is over whether or not
    /// its GameOver event has arrived yet, so input may end without leaving anything unfinished.
    ended: bool,
    /// The ply at which the server accepted this seat's last move. Until the move's event
    /// arrives (and the ply moves on) the game as shown still has this seat to move, but it is
    /// not its turn: a line read meanwhile would be sent for a position already left.
    moved_at: Option<u32>,
    /// When this seat's current turn was prompted. On a terminal a move typed before then
    /// (pasted with others, or typed while a move was animated) was typed for another
    /// position: it is refused, not played on a board its player has not seen.
    turn_since: Option<Instant>,
    /// After the game: `rematch?` has been asked.
    rematch_prompted: bool,
    /// This seat's token for the rematch (from OfferRematch), and its seat there, until the
    /// rematch's game id is known.
    rematch_token: Option<(String, Side)>,
    /// A piped move the server could not take because it was unavailable: sent again until it
    /// can be, and no further line is read meanwhile (the script's next line is for the next
    /// turn, not a replacement for this one).
    unsent: Option<Unsent>,
}

/// A move waiting for the server to come back (see [`Player::unsent`]).
#[derive(Debug, Clone, Copy)]
struct Unsent {
    mv: LocalMove,
    /// The ply it was typed for: once the game has moved on, it is not sent.
    ply: u32,
    next_try: Instant,
    delay: Duration,
}

/// The first wait before a move the server could not take is sent again; it doubles up to
/// [`MAX_RESEND_DELAY`].
const FIRST_RESEND_DELAY: Duration = Duration::from_millis(500);
const MAX_RESEND_DELAY: Duration = Duration::from_secs(5);

/// What became of a move sent to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sent {
    /// Accepted: it arrives as an event.
    Accepted,
    /// Refused, and said so.
    Refused,
    /// Refused because the game is past the ply the move was sent for: the position changed
    /// since, which for a move sent again means it was played (its answer was lost).
    Stale(String),
    /// The server could not be reached or could not store it: the message says why.
    Unavailable(String),
}

/// What the session does next.
enum Next {
    /// Stay in this game.
    Stay,
    /// Done: the game is over (and no rematch follows), or the player left.
    Done,
    /// Go on with the rematch, as this seat.
    Rematch(String, Side),
}

/// `seat`: the seat just taken (`create --play`, `join --play`, `seek`, `accept`) or `--seat`;
/// without it, the only seat stored for the game, or on a terminal the player's answer if both
/// are. `from_start`: the player has seen none of the game yet (it was just created or joined),
/// so moves made before the board comes up (a computer's opening move) are shown too. A
/// rematch started at the prompt is played on in the same session. `token`: `--token` (with
/// `--seat`), for the first game only, in place of the token file's.
pub async fn play(
    ctx: &Context,
    clients: Clients,
    game_id: &str,
    seat: Option<Side>,
    from_start: bool,
    args: &LiveArgs,
    token: Option<&str>,
) -> Result<(), CliError> {
    let mut token = token;
    let mut lines = stdin_lines();
    let mut game_id = game_id.to_owned();
    let mut seat = seat;
    let mut from_start = from_start;
    loop {
        let next = play_one(
            ctx,
            clients.clone(),
            &game_id,
            Wanted {
                seat,
                token: token.take(),
            },
            from_start,
            args,
            &mut lines,
        )
        .await?;
        match next {
            Next::Rematch(next_id, next_seat) => {
                game_id = next_id;
                seat = Some(next_seat);
                from_start = true;
            }
            Next::Stay | Next::Done => return Ok(()),
        }
    }
}

/// Which seat [`play_one`] plays: `--seat` or the seat just taken, and `--token` for it.
#[derive(Debug, Clone, Copy)]
struct Wanted<'a> {
    seat: Option<Side>,
    token: Option<&'a str>,
}

async fn play_one(
    ctx: &Context,
    mut clients: Clients,
    game_id: &str,
    wanted: Wanted<'_>,
    from_start: bool,
    args: &LiveArgs,
    lines: &mut mpsc::UnboundedReceiver<(String, Instant)>,
) -> Result<Next, CliError> {
    let interactive = ctx.stdin_tty && ctx.stdout_tty;
    // Wait for a rematch choice after the game: always on a terminal, with --rematch elsewhere.
    let stay = interactive || args.rematch;
    let seats = commands::saved_seats(ctx, &mut clients, game_id, wanted.seat, wanted.token);
    let entry = match seats.await? {
        Seats::One(entry) => entry,
        Seats::Both(first, second) if interactive => loop {
            out_inline(&format!(
                "you hold both seats of game {game_id}: play which? (first/second) "
            ))?;
            let Some((line, _)) = lines.recv().await else {
                return Err(commands::both_seats(game_id));
            };
            match commands::seat_answer(&line) {
                Some(Side::First) => break first,
                Some(Side::Second) => break second,
                // Asked again, with why: the same question alone looked like nothing was read.
                None => out(format!(
                    "`{}` is not a seat: answer first or second",
                    crate::error::typed(&line)
                ))?,
            }
        },
        Seats::Both(..) => return Err(commands::both_seats(game_id)),
    };
    let me = entry.side()?;
    let mut player = Player {
        game_id: game_id.to_owned(),
        token: entry.token,
        me,
        display_name: entry.display_name,
        interactive,
        prompted: None,
        waiting_prompted: None,
        confirming_resign: false,
        ended: false,
        moved_at: None,
        turn_since: None,
        rematch_prompted: false,
        rematch_token: None,
        unsent: None,
    };
    let mut live = Live::new(
        clients,
        me,
        Some(me),
        output(ctx, &args.display, false, !interactive),
    );
    live.from_start = from_start;
    // The id of a rematch comes from the server.
    let game_id_shown = shown_name(game_id);
    out(format!("playing {game_id_shown} as {me}"))?;
    let mut connection = Connection::new(&ctx.server.name);
    let mut events = feed::spawn(
        ctx.server.clone(),
        game_id.to_owned(),
        Some(player.token.clone()),
        feed_options(&args.display, stay),
    );
    let mut ticker = ticker();
    // Input ended after the seat resigned or aborted: only the game's end is awaited.
    let mut input_closed = false;
    // Ctrl-C leaves the client, not the game: it says so and how to come back, rather than
    // dying silently as SIGINT's default would.
    let interrupt = crate::signals::interrupt();
    tokio::pin!(interrupt);
    // A finished future must not be polled again (an error installing the handler).
    let mut interrupt_armed = true;
    loop {
        if live.over {
            if let Some(rematch) = live.rematch_started.clone() {
                return player.switch(ctx, &rematch);
            }
            if input_closed || !(stay && live.rematch_open()) {
                return Ok(Next::Done);
            }
            if !player.rematch_prompted {
                player.rematch_prompted = true;
                player.rematch_prompt(&live)?;
            }
        }
        let my_turn = player.my_turn(&live);
        // The prompt waits for the turn's announcement, so `turn:` is printed before it.
        let announced = live.turn_announced == Some(live.ply());
        if my_turn && player.prompted != Some(live.ply()) && announced {
            player.prompted = Some(live.ply());
            player.turn_since = Some(Instant::now());
            player.prompt(&mut live).await?;
        }
        // On a terminal, the opponent's turn of a timed game shows the ticking clocks above a
        // waiting prompt.
        if interactive
            && !my_turn
            && live.ticking()
            && announced
            && player.waiting_prompted != Some(live.ply())
        {
            player.waiting_prompted = Some(live.ply());
            player.reprompt(&mut live, false).await?;
        }
        // Scripts may pipe all their moves at once: read the next line only when a move is
        // wanted, so that lines are not consumed (and rejected) during the opponent's turn;
        // and only once the turn was announced and prompted, so that a move read ahead never
        // comes out before its own `turn:`, `legal moves:` and `your move` lines.
        let prompted = my_turn && player.prompted == Some(live.ply());
        let want_input = !input_closed
            && player.unsent.is_none()
            && (prompted || player.interactive || player.confirming_resign || (live.over && stay));
        let ticking = interactive && live.ticking();
        tokio::select! {
            item = events.recv() => match item {
                Some(FeedItem::Event(event, received)) => {
                    // An accepted draw is followed by the game's end: no prompt (with its
                    // `legal moves:` line, which a script reads as a turn) in between.
                    let offer = match &event.kind {
                        Some(game_event::Kind::Draw(draw)) => {
                            draw.action() != game_event::DrawAction::Accepted
                        }
                        Some(game_event::Kind::Rematch(_)) => true,
                        _ => false,
                    };
                    live.handle(*event, received).await?;
                    // An offer's line went above the prompt, which is still there; but after
                    // the one the offer answered, a new one is due.
                    if offer && interactive && !live.over && !output::prompt_shown() {
                        let my_turn = player.my_turn(&live);
                        player.reprompt(&mut live, my_turn).await?;
                    } else if offer && interactive && live.rematch_open() && !output::prompt_shown() {
                        player.rematch_prompt(&live)?;
                    }
                }
                Some(FeedItem::Down { why, attempt, retry_in }) => {
                    connection.down(&why, attempt, retry_in);
                }
                Some(FeedItem::Up { after }) => {
                    connection.up(after);
                    // On a terminal the notice went over the prompt: show it again (a turn's
                    // first prompt is still to come at the top of the loop). A script's
                    // prompt is a request for one line, which it has had: a second would be
                    // answered with a line read at a later turn.
                    if !interactive {
                        continue;
                    }
                    if live.over {
                        if player.rematch_prompted && live.rematch_open() {
                            player.rematch_prompt(&live)?;
                        }
                    } else {
                        let my_turn = player.my_turn(&live);
                        if !my_turn || player.prompted == Some(live.ply()) {
                            player.reprompt(&mut live, my_turn).await?;
                        }
                    }
                }
                Some(FeedItem::Fatal(err)) => return Err(err),
                None if live.over => return Ok(Next::Done),
                None => return Err(CliError::new(code::FAILURE, "the event stream stopped unexpectedly")),
            },
            line = lines.recv(), if want_input => match line {
                Some((line, typed)) => match player.on_line(ctx, &mut live, &line, typed).await? {
                    Next::Stay => {}
                    Next::Done if live.over => return Ok(Next::Done),
                    Next::Done => {
                        note(format!("left game {game_id_shown}; it goes on: resume with `oanquan play {game_id_shown} --seat {}`", player.me.name()));
                        return Ok(Next::Done);
                    }
                    next @ Next::Rematch(..) => return Ok(next),
                },
                None if live.over => return Ok(Next::Done),
                // Resigned or aborted, and input ended before the GameOver event came: wait for
                // it (the event stream ends the session), reading nothing more.
                None if player.ended => {
                    input_closed = true;
                }
                None => {
                    if interactive {
                        // Ctrl-D at the prompt: the prompt stays as typed, and what follows
                        // starts on a line of its own, with no prompt drawn again after it.
                        output::input_read();
                        out("")?;
                    }
                    return Err(CliError::new(
                        code::UNFINISHED,
                        // With the seat: the token file may hold both (two players on one
                        // machine), and then `play` without it is a usage error.
                        format!("input ended before the game did; resume with `oanquan play {game_id_shown} --seat {}`", player.me.name()),
                    ));
                }
            },
            () = tokio::time::sleep_until(
                player.unsent.map_or_else(Instant::now, |u| u.next_try).into()
            ), if player.unsent.is_some() => {
                player.resend(&mut live).await?;
            }
            _ = ticker.tick(), if ticking => {
                if let Some(line) = live.clock_line(Instant::now()) {
                    output::tick(&line)?;
                }
            }
            interrupted = &mut interrupt, if interrupt_armed => {
                interrupt_armed = false;
                if interrupted.is_err() {
                    continue;
                }
                if interactive {
                    // The cursor is on the prompt line, after `^C`: both stay as typed.
                    output::input_read();
                    out("")?;
                }
                let timed = live.clocks.is_some() && live.game.status() == GameStatus::Active;
                let waiting = live.game.status() == GameStatus::WaitingForPlayers;
                note(interrupted_line(&game_id_shown, live.over, waiting, timed));
                return Err(CliError::new(code::INTERRUPTED, ""));
            }
        }
    }
}

/// What Ctrl-C during `play` says: the game is the server's and goes on without this client
/// (in a timed game, with the clock of whoever is to move running), and how to come back to it.
fn interrupted_line(game_id_shown: &str, over: bool, waiting: bool, timed: bool) -> String {
    if over {
        return format!("left game {game_id_shown}; it is over");
    }
    // Nobody has joined: nothing goes on yet, and the game can still be called off.
    if waiting {
        return format!(
            "interrupted: game {game_id_shown} still waits on the server for an opponent; come \
             back to it with `oanquan play {game_id_shown}`, or call it off with \
             `oanquan abort {game_id_shown}`"
        );
    }
    let clock = if timed {
        " with the clocks running: yours runs on your turn, also while you are away"
    } else {
        ""
    };
    format!(
        "interrupted: game {game_id_shown} goes on on the server{clock}; come back to it with \
         `oanquan play {game_id_shown}`, or follow it with `oanquan watch {game_id_shown}`"
    )
}

impl Player {
    /// Whether this seat is to move and has not moved at this ply already.
    fn my_turn(&self, live: &Live) -> bool {
        live.to_move() == Some(self.me) && self.moved_at != Some(live.ply())
    }

    /// Shows legal moves and the prompt. The board is not redrawn: it was printed with the
    /// snapshot or after the last move, a line or two above.
    async fn prompt(&mut self, live: &mut Live) -> Result<(), CliError> {
        let legal = self.legal_moves(live).await;
        let listed: Vec<String> = legal.iter().map(|m| m.short()).collect();
        out(format!("legal moves: {}", listed.join(" ")))?;
        if self.interactive {
            self.inline_prompt(live, "your move> ")
        } else {
            out("your move")
        }
    }

    /// An inline prompt on a terminal; in a timed game the clocks on the line above it, where
    /// they tick without touching what is being typed.
    fn inline_prompt(&self, live: &Live, prompt: &str) -> Result<(), CliError> {
        match live.clock_line(Instant::now()).filter(|_| !live.over) {
            Some(clocks) => status_above_prompt(&clocks, prompt),
            None => output::prompt(prompt),
        }
    }

    /// After the game: asks for a rematch (stable line `rematch? (rematch/no)`).
    fn rematch_prompt(&self, live: &Live) -> Result<(), CliError> {
        if !self.interactive {
            return out("rematch? (rematch/no)");
        }
        let left = live
            .rematch_left(Instant::now())
            .map_or_else(String::new, |d| format!(", within {}", format_clock(d)));
        // Asked already: not the question again (an outside probe's offer was met with
        // `rematch?` once more), but what is left to say.
        if self.rematch_token.is_some() {
            return output::prompt(&format!(
                "(no to call off the rematch{left}; quit to leave)> "
            ));
        }
        output::prompt(&format!("rematch? (rematch/no{left}; quit to leave)> "))
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
                game: None,
                rules,
                position: position.clone(),
            }))
            .await;
        if let Ok(response) = asked {
            let mut moves: Vec<LocalMove> = response
                .into_inner()
                .moves
                .iter()
                .filter_map(|m| LocalMove::from_proto(self.me, m))
                .collect();
            LocalMove::in_player_order(&mut moves);
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

    /// Handles one input line.
    /// Whether a line read at `typed` came before this turn's prompt, on a terminal. A script's
    /// lines are all read ahead (piped at once) and each is meant for the turn it is read at.
    fn typed_ahead(&self, typed: Instant) -> bool {
        self.interactive && self.turn_since.is_some_and(|since| typed < since)
    }

    async fn on_line(
        &mut self,
        ctx: &Context,
        live: &mut Live,
        line: &str,
        typed: Instant,
    ) -> Result<Next, CliError> {
        if live.over {
            return self.on_line_after(ctx, live, line).await;
        }
        let my_turn = self.my_turn(live);
        if std::mem::take(&mut self.confirming_resign) {
            if matches!(line.trim().to_lowercase().as_str(), "y" | "yes") {
                return self.resign(live).await;
            }
            out("not resigned; the game goes on")?;
            self.reprompt(live, my_turn).await?;
            return Ok(Next::Stay);
        }
        let input = match parse_input(line) {
            Ok(input) => input,
            Err(err) => {
                out(format!("error: {err}"))?;
                self.reprompt(live, my_turn).await?;
                return Ok(Next::Stay);
            }
        };
        match input {
            Input::Quit => return Ok(Next::Done),
            Input::Empty => {}
            Input::Help => out(PROMPT_HELP)?,
            Input::Board => live.print_board()?,
            // On your turn the prompt below lists them.
            Input::Moves if my_turn => {}
            Input::Moves if live.game.status() == GameStatus::WaitingForPlayers => {
                out("no moves yet: the game waits for an opponent to join")?;
            }
            Input::Moves => out("no moves for you now: it is the opponent's turn")?,
            Input::Resign => {
                self.confirming_resign = true;
                return if self.interactive {
                    output::prompt("resign? (y/N) ").map(|()| Next::Stay)
                } else {
                    out("resign? (y/N)").map(|()| Next::Stay)
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
                    Ok(_) => {
                        self.ended = true;
                        return Ok(Next::Stay);
                    }
                    Err(status) => out(format!(
                        "error: {}",
                        CliError::from_status("abort", &status)
                    ))?,
                }
            }
            Input::Draw => {
                let offered = live_games(live)
                    .offer_draw(authed(
                        OfferDrawRequest {
                            game_id: self.game_id.clone(),
                        },
                        &self.token,
                    )?)
                    .await;
                match offered {
                    // The Draw event says what happened (and GameOver ends an accepted one).
                    Ok(response) if response.get_ref().accepted => return Ok(Next::Stay),
                    Ok(_) => {}
                    Err(status) => self.refused("draw", &status)?,
                }
            }
            Input::Decline => {
                let declined = live_games(live)
                    .decline_draw(authed(
                        DeclineDrawRequest {
                            game_id: self.game_id.clone(),
                        },
                        &self.token,
                    )?)
                    .await;
                if let Err(status) = declined {
                    self.refused("decline", &status)?;
                }
            }
            Input::Claim => {
                let claimed = live_games(live)
                    .claim_victory(authed(
                        ClaimVictoryRequest {
                            game_id: self.game_id.clone(),
                        },
                        &self.token,
                    )?)
                    .await;
                match claimed {
                    // The GameOver event ends the session.
                    Ok(_) => return Ok(Next::Stay),
                    Err(status) => self.refused("claim", &status)?,
                }
            }
            Input::Rematch => out("error: a rematch can be offered once the game is over")?,
            Input::Hint if my_turn => self.hint(live).await?,
            Input::Hint if live.game.status() == GameStatus::WaitingForPlayers => {
                out("error: hints are for your turn; the game waits for an opponent to join")?;
            }
            Input::Hint => out("error: hints are for your turn; wait for the opponent's move")?,
            // An outside probe pasted four moves at the first prompt: some were refused, some
            // played a turn or two later on positions never seen.
            Input::Move(_) if my_turn && self.typed_ahead(typed) => out(
                "error: that move was typed before your turn and is not sent; type your move now",
            )?,
            Input::Move(mv) if my_turn => match self.send_move(live, mv).await? {
                Sent::Accepted => return Ok(Next::Stay),
                Sent::Refused => {}
                Sent::Stale(why) => out(format!("error: {why}"))?,
                // A script's move waits for the server (its next line is for the next turn);
                // a person at a terminal sees why and types it again.
                Sent::Unavailable(why) if !self.interactive => {
                    out(format!(
                        "error: {why}; the move is sent again once the server is back"
                    ))?;
                    self.unsent = Some(Unsent {
                        mv,
                        ply: live.ply(),
                        next_try: Instant::now() + FIRST_RESEND_DELAY,
                        delay: FIRST_RESEND_DELAY,
                    });
                    return Ok(Next::Stay);
                }
                Sent::Unavailable(why) => out(format!("error: {why}"))?,
            },
            Input::Move(_) if live.game.status() == GameStatus::WaitingForPlayers => {
                out("error: the game has not started: it waits for an opponent to join")?;
            }
            Input::Move(_) => out("error: it is not your turn; wait for the opponent's move")?,
        }
        let my_turn = self.my_turn(live);
        if !live.over {
            self.reprompt(live, my_turn).await?;
        }
        Ok(Next::Stay)
    }

    /// A line after the game: `rematch`, `no`, `quit`, `board`, `help`.
    async fn on_line_after(
        &mut self,
        ctx: &Context,
        live: &mut Live,
        line: &str,
    ) -> Result<Next, CliError> {
        match parse_input(line) {
            Ok(Input::Quit) => return Ok(Next::Done),
            Ok(Input::Empty) => {}
            Ok(Input::Help) => out(PROMPT_HELP)?,
            Ok(Input::Board) => live.print_board()?,
            Ok(Input::Rematch) => {
                // The rematch's seat token comes with the answer: where it could not be saved,
                // ask for nothing.
                if let Err(err) = ctx.token_store().and_then(TokenStore::ready_to_store) {
                    out(format!("error: rematch: {}", err.message))?;
                    return Ok(Next::Stay);
                }
                let offered = live_games(live)
                    .offer_rematch(authed(
                        OfferRematchRequest {
                            game_id: self.game_id.clone(),
                        },
                        &self.token,
                    )?)
                    .await;
                match offered {
                    Ok(response) => {
                        let response = response.into_inner();
                        let seat = commands::seat_of(response.seat, "rematch answer")?;
                        self.rematch_token = Some((response.player_token, seat));
                        // This offer completed the pairing: the rematch is on already.
                        if let Some(rematch) = response.rematch {
                            out(format!("rematch: game {}", shown_name(&rematch.id)))?;
                            return self.switch(ctx, &rematch.id);
                        }
                        // Otherwise the Rematch event says it is offered; STARTED follows.
                        return Ok(Next::Stay);
                    }
                    Err(status) => self.refused("rematch", &status)?,
                }
            }
            Ok(Input::Decline) => {
                let declined = live_games(live)
                    .decline_rematch(authed(
                        DeclineRematchRequest {
                            game_id: self.game_id.clone(),
                        },
                        &self.token,
                    )?)
                    .await;
                match declined {
                    // The Rematch DECLINED event closes the game's stream.
                    Ok(_) => return Ok(Next::Stay),
                    Err(status) => self.refused("decline", &status)?,
                }
            }
            Ok(_) | Err(_) => {
                out(
                    "error: the game is over: type rematch for a rematch, no to decline, quit to leave",
                )?;
            }
        }
        if live.rematch_open() {
            self.rematch_prompt(live)?;
        }
        Ok(Next::Stay)
    }

    /// Goes on with the rematch `game_id` if this seat asked for it here (its token came with
    /// the offer); stores that token first, as `create` and `join` do.
    fn switch(&mut self, ctx: &Context, game_id: &str) -> Result<Next, CliError> {
        let Some((token, seat)) = self.rematch_token.take() else {
            out(format!(
                "the rematch is played where it was asked for; follow it with `oanquan watch {}`",
                shown_name(game_id)
            ))?;
            return Ok(Next::Done);
        };
        commands::keep_seat(
            ctx,
            &ctx.token_store()?,
            Entry {
                server: ctx.server.name.clone(),
                game_id: game_id.to_owned(),
                seat: seat.name().to_owned(),
                token,
                display_name: self.display_name.clone(),
            },
        )?;
        Ok(Next::Rematch(game_id.to_owned(), seat))
    }

    /// A refused request at the prompt: an error line, unless the seat itself is refused.
    fn refused(&self, what: &str, status: &tonic::Status) -> Result<(), CliError> {
        let err = CliError::from_status(what, status);
        if err.code == code::AUTH {
            return Err(err);
        }
        out(format!("error: {}", err.message))
    }

    /// Resigns (confirmed); the GameOver event then ends the session.
    async fn resign(&mut self, live: &mut Live) -> Result<Next, CliError> {
        let resigned = live_games(live)
            .resign(authed(
                ResignRequest {
                    game_id: self.game_id.clone(),
                },
                &self.token,
            )?)
            .await;
        match resigned {
            Ok(_) => self.ended = true,
            Err(status) => {
                out(format!(
                    "error: {}",
                    CliError::from_status("resign", &status)
                ))?;
                let my_turn = self.my_turn(live);
                self.reprompt(live, my_turn).await?;
            }
        }
        Ok(Next::Stay)
    }

    /// Asks the server's engine for the best move in the current position and prints it in
    /// the player's own terms: `hint: 3 right (3r), eval +4, depth 9`.
    ///
    /// The server is given the hosted game by id, so that the search knows its history (the
    /// repetition rule, the ply limit); only if it refuses the id (a server that cannot load
    /// it) is the bare position sent instead.
    async fn hint(&self, live: &Live) -> Result<(), CliError> {
        let by_id = AnalyzeRequest {
            game: Some(analyze_request::Game::GameId(self.game_id.clone())),
            time_limit_ms: HINT_TIME_MS,
            ..AnalyzeRequest::default()
        };
        let mut analyzed = live_rules(live).analyze(request(by_id)).await;
        if analyzed.as_ref().is_err_and(refuses_game_id) {
            let by_position = AnalyzeRequest {
                rules: live.game.rule_set.map(|r| RulesSpec {
                    kind: Some(rules_spec::Kind::RuleSet(r)),
                }),
                position: live.game.position.clone(),
                time_limit_ms: HINT_TIME_MS,
                ..AnalyzeRequest::default()
            };
            analyzed = live_rules(live).analyze(request(by_position)).await;
        }
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
        out(hint_line(mv, &analysis))
    }

    async fn reprompt(&mut self, live: &mut Live, my_turn: bool) -> Result<(), CliError> {
        if my_turn {
            self.prompt(live).await
        } else if self.interactive {
            self.inline_prompt(live, "(waiting for the opponent)> ")
        } else {
            Ok(())
        }
    }

    /// Sends the move the server could not take before, if the game still waits for it;
    /// quietly while the server stays unavailable.
    async fn resend(&mut self, live: &mut Live) -> Result<(), CliError> {
        let Some(unsent) = self.unsent.take() else {
            return Ok(());
        };
        if live.over || !self.my_turn(live) || live.ply() != unsent.ply {
            // Played after all (its answer was lost), or the game ended meanwhile.
            return Ok(());
        }
        match self.send_move(live, unsent.mv).await? {
            Sent::Accepted => {}
            // The server took the first send before it went down: wait for its event, as
            // after an accepted move, rather than read the script's next line for this ply.
            Sent::Stale(_) => self.moved_at = Some(unsent.ply),
            Sent::Refused => self.reprompt(live, self.my_turn(live)).await?,
            Sent::Unavailable(_) => {
                let delay = (unsent.delay * 2).min(MAX_RESEND_DELAY);
                self.unsent = Some(Unsent {
                    next_try: Instant::now() + delay,
                    delay,
                    ..unsent
                });
            }
        }
        Ok(())
    }

    /// Sends a move. A refusal is said here; an unavailable server is left to the caller.
    async fn send_move(&mut self, live: &mut Live, mv: LocalMove) -> Result<Sent, CliError> {
        if let Some(why) = live
            .game
            .position
            .as_ref()
            .and_then(|position| empty_square(position, self.me, mv))
        {
            out(format!("error: {why}"))?;
            return Ok(Sent::Refused);
        }
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
            Ok(_) => {
                self.moved_at = Some(live.ply());
                Ok(Sent::Accepted)
            }
            Err(status) => {
                let err = CliError::from_status(&format!("move {}", mv.short()), &status);
                if err.code == code::AUTH {
                    return Err(err);
                }
                // Also a connection broken under the call (the server died): not only the
                // server's own UNAVAILABLE.
                if err.code == code::UNAVAILABLE {
                    return Ok(Sent::Unavailable(err.message));
                }
                if crate::error::error_reason(&status) == Some(ErrorReason::StalePly) {
                    return Ok(Sent::Stale(err.message));
                }
                out(format!("error: {}", err.message))?;
                Ok(Sent::Refused)
            }
        }
    }
}

/// Whether an Analyze by `game_id` failed because of the id itself (the game not found, or the
/// id refused): then the position alone can still be analyzed. Any other failure (the engine
/// busy, the server unreachable) would fail the same way again.
fn refuses_game_id(status: &tonic::Status) -> bool {
    match status.code() {
        tonic::Code::NotFound => true,
        tonic::Code::InvalidArgument => status
            .get_details_bad_request()
            .is_some_and(|b| b.field_violations.iter().any(|v| v.field == "game_id")),
        _ => false,
    }
}

/// `hint: 3 right (3r), eval +4, depth 9` (stable format, see `play --help`).
/// The `hint:` line for `mv`, the analysis's best move in the player's terms. When the move is
/// the server's try for the opponent's mistakes rather than the best against perfect play
/// (`for_mistakes`), the line says so, since its evaluation is then that move's against the
/// best reply.
fn hint_line(mv: LocalMove, analysis: &AnalyzeResponse) -> String {
    let exact = if analysis.exact { ", exact" } else { "" };
    let trap = if analysis.for_mistakes {
        ", a try for the opponent's mistakes"
    } else {
        ""
    };
    format!(
        "hint: {mv} ({}), eval {:+}, depth {}{exact}{trap}",
        mv.short(),
        analysis.eval_points,
        analysis.depth
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
    fn the_prompt_help_fits_an_80_column_terminal() {
        // An outside probe's 80-column terminal broke the old help's 88-column lines again.
        for line in PROMPT_HELP.lines() {
            assert!(line.chars().count() <= 78, "{line}");
        }
    }

    /// Only a refusal of the id itself makes the hint fall back to the bare position.
    #[test]
    fn a_hint_falls_back_to_the_position_only_when_the_id_is_refused() {
        let bad = |field: &str| {
            tonic::Status::with_error_details(
                tonic::Code::InvalidArgument,
                "bad",
                tonic_types::ErrorDetails::with_bad_request_violation(field, "bad"),
            )
        };
        assert!(refuses_game_id(&tonic::Status::not_found("no such game")));
        assert!(refuses_game_id(&bad("game_id")));
        assert!(!refuses_game_id(&bad("time_limit_ms")));
        assert!(!refuses_game_id(&tonic::Status::invalid_argument("bare")));
        assert!(!refuses_game_id(&tonic::Status::resource_exhausted("busy")));
        assert!(!refuses_game_id(&tonic::Status::unavailable("down")));
    }

    #[test]
    fn ctrl_c_says_the_game_goes_on_and_how_to_come_back() {
        let timed = interrupted_line("g1", false, false, true);
        for needle in [
            "goes on on the server",
            "clocks running",
            "`oanquan play g1`",
            "`oanquan watch g1`",
        ] {
            assert!(timed.contains(needle), "{needle}: {timed}");
        }
        let untimed = interrupted_line("g1", false, false, false);
        assert!(!untimed.contains("clock"), "{untimed}");
        assert!(untimed.contains("`oanquan play g1`"), "{untimed}");
        assert_eq!(
            interrupted_line("g1", true, false, true),
            "left game g1; it is over"
        );
        // Before anyone joined, nothing goes on: it waits, and can be called off.
        let waiting = interrupted_line("g1", false, true, true);
        assert!(!waiting.contains("goes on"), "{waiting}");
        assert!(
            waiting.contains("waits on the server for an opponent"),
            "{waiting}"
        );
        assert!(waiting.contains("`oanquan abort g1`"), "{waiting}");
    }

    #[test]
    fn input_lines_are_capped_and_survive_bytes_that_are_not_utf8() {
        let mut input = std::io::Cursor::new(b"\xff\n1r\r\nxxxxxxxxxx\n3 l".to_vec());
        let mut read = || read_line_capped(&mut input, 5);
        assert_eq!(read().as_deref(), Some("\u{fffd}"));
        assert_eq!(read().as_deref(), Some("1r"));
        assert_eq!(read().as_deref(), Some("xxxxx…"), "cut, the rest dropped");
        assert_eq!(
            read().as_deref(),
            Some("3 l"),
            "the last line without its newline"
        );
        assert_eq!(read(), None);
        assert_eq!(read_line_capped(&mut std::io::Cursor::new(b""), 5), None);
    }

    #[test]
    fn hint_lines() {
        let mv = LocalMove {
            square: 3,
            dir: Dir::Right,
        };
        assert_eq!(
            hint_line(
                mv,
                &AnalyzeResponse {
                    eval_points: 4,
                    depth: 9,
                    ..AnalyzeResponse::default()
                }
            ),
            "hint: 3 right (3r), eval +4, depth 9"
        );
        assert_eq!(
            hint_line(
                mv,
                &AnalyzeResponse {
                    eval_points: -2,
                    depth: 30,
                    exact: true,
                    ..AnalyzeResponse::default()
                }
            ),
            "hint: 3 right (3r), eval -2, depth 30, exact"
        );
        assert_eq!(
            hint_line(
                mv,
                &AnalyzeResponse {
                    eval_points: 0,
                    depth: 1,
                    ..AnalyzeResponse::default()
                }
            ),
            "hint: 3 right (3r), eval +0, depth 1"
        );
        assert_eq!(
            hint_line(
                mv,
                &AnalyzeResponse {
                    eval_points: -12,
                    depth: 9,
                    for_mistakes: true,
                    ..AnalyzeResponse::default()
                }
            ),
            "hint: 3 right (3r), eval -12, depth 9, a try for the opponent's mistakes"
        );
    }
}
