//! Following a game: the client's copy of the game state, kept up to date from the event feed,
//! and what gets printed for each event. Shared by `watch` and `play`.
//!
//! The client holds state only to draw it: every position comes from the server (snapshots,
//! move records); traces are replayed locally only to animate between two server positions.

use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant, SystemTime};

use oanquan_proto::v1::{
    Clocks, EndReason, Game, GameEvent, GameResult, GameStatus, MoveRecord, Position, Seat,
    WatchGameResponse, game_event,
};

use crate::board::{self, BoardState, Style, View};
use crate::client::{Clients, all_moves};
use crate::clocks::{LocalClocks, clocks_line, format_clock, server_span, system_time};
use crate::error::CliError;
use crate::json;
use crate::moves::{Dir, LocalMove, Side};
use crate::output::{self, clear_status, counted, note, out, out_inline, out_lines, shown_name};
use crate::ratings::{rating_lines, seat_rating};
use crate::timecontrol::TimeControl;

/// The one line on stderr that says the server cannot be reached: on a terminal it is redrawn
/// in place at each attempt; otherwise it is written once per change (lost, then reconnected),
/// so a log is not flooded by a server that stays down. `--verbose` adds every attempt with the
/// transport's or the server's own words.
#[derive(Debug)]
pub struct Connection {
    server: String,
    tty: bool,
    down: bool,
}

impl Connection {
    pub fn new(server: &str) -> Self {
        Self {
            server: server.to_owned(),
            tty: std::io::stderr().is_terminal() && !crate::context::dumb_terminal(),
            down: false,
        }
    }

    /// The stream broke; attempt `attempt` (0-based) comes in `retry_in`.
    pub fn down(&mut self, why: &str, attempt: u32, retry_in: Duration) {
        clear_status();
        if crate::error::verbose() {
            self.clear_line();
            note(format!(
                "notice: connection lost ({why}); reconnect attempt {} in {} ms",
                attempt.saturating_add(1),
                retry_in.as_millis()
            ));
        }
        if self.tty {
            // Cut to the terminal's width: a notice that wraps leaves a row behind at every
            // attempt, since `\x1b[K` erases only the row it is on (an outside probe's 80
            // columns filled with them).
            let notice = format!(
                "server {} unreachable; reconnecting (attempt {}, next in {:.1} s)",
                self.server,
                attempt.saturating_add(1),
                retry_in.as_secs_f64()
            );
            let notice = crate::output::fit_marked(&notice, crate::output::terminal_width());
            let _ = write!(std::io::stderr().lock(), "\r\x1b[K{notice}");
        } else if !self.down {
            note(format!(
                "server {} unreachable; reconnecting (no move is missed meanwhile)",
                self.server
            ));
        }
        self.down = true;
    }

    /// A stream is open again.
    pub fn up(&mut self, after: u64) {
        if !self.down {
            return;
        }
        // Erased while still down (`clear_line` erases only then): an outside probe saw
        // `…next in 5.3 s)reconnected to …` on one row.
        self.clear_line();
        self.down = false;
        if crate::error::verbose() {
            note(format!(
                "reconnected to {}; resuming after event {after}",
                self.server
            ));
        } else {
            note(format!("reconnected to {}", self.server));
        }
    }

    fn clear_line(&self) {
        if self.tty && self.down {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
        }
    }
}

/// How events are shown.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// The stream's own messages, one JSON object per line (`watch --json`), and no text.
    pub json: bool,
    pub style: Style,
    /// Redraw moves frame by frame with this delay (terminal only); `None` prints the trace as
    /// text lines.
    pub animate: Option<Duration>,
    /// Print a stable `clocks:` line after each `turn:` line of a timed game (not on a
    /// terminal, where the clocks tick on a status line instead).
    pub clock_lines: bool,
}

/// One line summing up a move, in the mover's own terms (stable format, see `play --help`):
/// `move 3: second plays 2 left (ring 8 -1), captured 6, score 6:5`.
pub fn move_line(record: &MoveRecord, quan_value: u32) -> String {
    let side = Side::from_i32(record.player);
    let mv = record.r#move.unwrap_or_default();
    let local = side.and_then(|s| LocalMove::from_proto(s, &mv));
    let dir = Dir::from_proto(mv.direction()).map_or("?", Dir::ring_step);
    let (stones, pieces) = board::captured_total(&record.steps);
    let captured = stones + u64::from(pieces) * u64::from(quan_value);
    let scores = record
        .position
        .as_ref()
        .and_then(|p| p.scores)
        .unwrap_or_default();
    format!(
        "move {}: {} plays {} (ring {} {dir}), captured {captured}, score {}:{}",
        record.number,
        side.map_or("?", Side::name),
        local.map_or_else(|| "? ?".to_owned(), |m| m.to_string()),
        mv.square.map_or_else(|| "?".to_owned(), |s| s.to_string()),
        scores.first,
        scores.second,
    )
}

/// After a game's last move, what the end-of-game collection gave each player (stable format,
/// see `play --help`): `end of game: the 2 stones left on the board go to the players, first
/// +1, second +1 (score 29:41)`. The move line's `captured` counts captures only, while its
/// score includes the collection too: without this line the two would not add up. `None`
/// when the trace has no collection, or one of nothing.
pub fn collection_line(record: &MoveRecord) -> Option<String> {
    let collected = record.steps.iter().find_map(|step| match &step.kind {
        Some(oanquan_proto::v1::step::Kind::GameOver(over)) => over.collected,
        _ => None,
    })?;
    let (first, second) = (i64::from(collected.first), i64::from(collected.second));
    let total = first.saturating_add(second);
    if total == 0 {
        return None;
    }
    let scores = record
        .position
        .as_ref()
        .and_then(|p| p.scores)
        .unwrap_or_default();
    let (stones, go) = if total == 1 {
        ("stone", "goes")
    } else {
        ("stones", "go")
    };
    Some(format!(
        "end of game: the {total} {stones} left on the board {go} to the players, first \
         +{first}, second +{second} (score {}:{})",
        scores.first, scores.second
    ))
}

/// Stones a refill puts on the board, one in each of the player's five squares, and so takes
/// from their captured count (RULES.md, "Refill").
const REFILL_STONES: i64 = 5;

/// After a move, the refill of the next player's empty side (stable format, see `play --help`):
/// `refill: second's squares were empty, 1 stone put in each: second -5 (score 33:31)`, and
/// when the count goes below zero what was borrowed and the debt: `..., second -5, 4 of them
/// borrowed, a debt of 4 (score 66:-4)`. The move line's `captured` counts the mover's
/// captures only, while its score already has the refill taken off: without this line the two
/// would not add up. `None` when the trace has no refill.
pub fn refill_line(record: &MoveRecord) -> Option<String> {
    let refill = record.steps.iter().find_map(|step| match &step.kind {
        Some(oanquan_proto::v1::step::Kind::Refill(refill)) => Some(refill),
        _ => None,
    })?;
    let who = Side::from_i32(refill.player).map_or("?", Side::name);
    let after = i64::from(refill.captured_after);
    let debt = if after < 0 {
        // Of the five stones, those the player's captured count did not cover.
        let borrowed = after.saturating_neg().min(REFILL_STONES);
        format!(
            ", {borrowed} of them borrowed, a debt of {}",
            after.saturating_neg()
        )
    } else {
        String::new()
    };
    let scores = record
        .position
        .as_ref()
        .and_then(|p| p.scores)
        .unwrap_or_default();
    Some(format!(
        "refill: {who}'s squares were empty, 1 stone put in each: {who} -{REFILL_STONES}{debt} \
         (score {}:{})",
        scores.first, scores.second
    ))
}

/// Everything said about a move in stable lines: its `move N:` line, then the refill of the
/// next player's side or the end-of-game collection that its score includes (see
/// [`refill_line`], [`collection_line`]), so that the numbers shown add up to the score.
pub fn summary_lines(record: &MoveRecord, quan_value: u32) -> Vec<String> {
    let mut lines = vec![move_line(record, quan_value)];
    lines.extend(refill_line(record));
    lines.extend(collection_line(record));
    lines
}

/// `game over: first wins 29:41 (mandarins)` (stable format, see `play --help`).
pub fn game_over_line(result: Option<&GameResult>) -> String {
    let result = result.cloned().unwrap_or_default();
    let reason = result.end_reason();
    let outcome = if reason == EndReason::Aborted {
        "aborted"
    } else {
        json::outcome_name(result.outcome())
    };
    let scores = result.scores.unwrap_or_default();
    let mut reason_text = json::end_reason_name(reason).to_owned();
    if let Some(by) = Side::from_i32(result.ended_by) {
        reason_text.push_str(&format!(" by {by}"));
    }
    format!(
        "game over: {outcome} {}:{} ({reason_text})",
        scores.first, scores.second
    )
}

/// The line under the board during a first move: `you must make your first move within 0:27`
/// to the player who must, the name to anyone else.
fn first_move_line(you: Option<Side>, to_move: Side, name: &str, left: Duration) -> String {
    if you == Some(to_move) {
        format!(
            "  you must make your first move within {}",
            format_clock(left)
        )
    } else {
        format!(
            "  {name} must make their first move within {}",
            format_clock(left)
        )
    }
}

/// The seats' display names, first then second, for the lines that name players: as the
/// server sent them; the lines show them through [`shown_name`].
pub type Names<'a> = [&'a str; 2];

fn named(names: Names<'_>, side: Side) -> String {
    let name = names[usize::from(side == Side::Second)].trim();
    if name.is_empty() {
        format!("the {side} player")
    } else {
        shown_name(name).into_owned()
    }
}

/// The line that says how a game ended, for the ways the stable `game over:` line alone does
/// not make clear (stable format, see `play --help`): its `(aborted by first)` reads as if the
/// first player had chosen to, when the server may have called the game off for them.
/// `you`: the viewer's seat, named `you`. `first_move_missed`: the game was aborted at the
/// first-move deadline (`Some(true)`) or by a player (`Some(false)`); `None` when the client
/// cannot tell (a finished game's answer no longer holds the deadline).
pub fn end_line(
    result: &GameResult,
    names: Names<'_>,
    you: Option<Side>,
    first_move_missed: Option<bool>,
) -> Option<String> {
    let ended_by = Side::from_i32(result.ended_by);
    let winner = Side::from_i32(result.winner).or(ended_by.map(Side::other));
    match (result.end_reason(), ended_by, winner) {
        (EndReason::Timeout, Some(loser), Some(winner)) => Some(format!(
            "{} ran out of time — {} wins on time",
            named(names, loser),
            named(names, winner)
        )),
        (EndReason::Agreement, ..) => Some("drawn by agreement".to_owned()),
        (EndReason::Abandonment, Some(loser), Some(winner)) => Some(format!(
            "{} abandoned the game — {} wins by claim",
            named(names, loser),
            named(names, winner)
        )),
        (EndReason::Aborted, Some(by), _) => {
            let mine = you == Some(by);
            let who = if mine {
                "you".to_owned()
            } else {
                named(names, by)
            };
            let their = if mine { "your" } else { "their" };
            Some(match first_move_missed {
                Some(true) => {
                    format!("the game was aborted: {who} did not make {their} first move in time")
                }
                Some(false) => {
                    format!("the game was aborted: {who} called it off before the first move")
                }
                None => format!(
                    "the game was aborted before the first move: {who} called it off or did \
                     not move in time"
                ),
            })
        }
        _ => None,
    }
}

/// What a Draw event says, to a player (`you`) or a spectator (stable format, see `play
/// --help`).
pub fn draw_line(
    by: Side,
    action: game_event::DrawAction,
    you: Option<Side>,
    names: Names<'_>,
) -> Option<String> {
    use game_event::DrawAction;
    let mine = you == Some(by);
    let who = named(names, by);
    let line = match action {
        DrawAction::Offered if mine => format!(
            "you offer a draw; it stands until {} moves or answers",
            named(names, by.other())
        ),
        DrawAction::Offered if you.is_some() => {
            format!("{who} offers a draw — type draw to accept, decline to refuse")
        }
        DrawAction::Offered => format!("{who} offers a draw"),
        DrawAction::Declined if mine => "you decline the draw".to_owned(),
        DrawAction::Declined => format!("{who} declines the draw"),
        DrawAction::Accepted if mine => "you accept the draw".to_owned(),
        DrawAction::Accepted => format!("{who} accepts the draw"),
        DrawAction::Unspecified => return None,
    };
    Some(line)
}

/// What a Rematch event says (stable format, see `play --help`).
pub fn rematch_line(
    rematch: &game_event::Rematch,
    you: Option<Side>,
    names: Names<'_>,
) -> Option<String> {
    use game_event::RematchAction;
    let by = Side::from_i32(rematch.by);
    let mine = by.is_some() && by == you;
    let who = by.map_or_else(|| "a player".to_owned(), |b| named(names, b));
    let line = match rematch.action() {
        RematchAction::Offered if mine => format!(
            "rematch offered; waiting for {}",
            by.map_or_else(|| "the opponent".to_owned(), |b| named(names, b.other()))
        ),
        RematchAction::Offered if you.is_some() => {
            format!("{who} offers a rematch — type rematch to accept, no to decline")
        }
        RematchAction::Offered => format!("{who} offers a rematch"),
        RematchAction::Declined if mine => "no rematch: you declined".to_owned(),
        RematchAction::Declined => format!("no rematch: {who} declined"),
        RematchAction::Expired => "no rematch: the time to offer one has passed".to_owned(),
        RematchAction::Started => format!("rematch: game {}", shown_name(&rematch.game_id)),
        RematchAction::Unspecified => return None,
    };
    Some(line)
}

/// The client's view of one game.
#[derive(Debug)]
pub struct Live {
    pub game: Game,
    /// A snapshot has arrived; before that `game` is a placeholder.
    pub known: bool,
    /// The highest move number shown, so that no move is shown twice.
    pub shown_moves: u32,
    /// The game is over (GameOver seen, or a snapshot of a finished game).
    pub over: bool,
    /// Seat drawn at the bottom.
    pub bottom: Side,
    /// The viewer's seat when playing.
    pub you: Option<Side>,
    /// Show moves played before the first snapshot (`watch --from-start`).
    pub from_start: bool,
    /// The ply whose turn has been announced (a TurnStarted, or a snapshot of a game under way):
    /// the prompt for a turn waits for it, so that `turn:` comes before `your move`.
    pub turn_announced: Option<u32>,
    pub output: Output,
    /// A timed game's clocks, from the last reading.
    pub clocks: Option<LocalClocks>,
    /// While a player's first move is under way: when (server time) it must be made. Tells a
    /// game aborted at that deadline from one aborted by a player.
    first_move_deadline: Option<SystemTime>,
    /// The player whose draw offer stands.
    pub draw_offer: Option<Side>,
    /// The player whose rematch offer stands.
    pub rematch_offer: Option<Side>,
    /// The rematch started: its game id.
    pub rematch_started: Option<String>,
    /// No rematch can come any more (declined, or too late).
    pub rematch_closed: bool,
    /// How long a rematch could still be offered when the game's end (or its snapshot)
    /// arrived, and when that was.
    rematch_window: Option<(Duration, Instant)>,
    clients: Clients,
}

impl Live {
    pub fn new(clients: Clients, bottom: Side, you: Option<Side>, output: Output) -> Self {
        Self {
            game: Game::default(),
            known: false,
            shown_moves: 0,
            over: false,
            bottom,
            you,
            from_start: false,
            turn_announced: None,
            output,
            clocks: None,
            first_move_deadline: None,
            draw_offer: None,
            rematch_offer: None,
            rematch_started: None,
            rematch_closed: false,
            rematch_window: None,
            clients,
        }
    }

    /// Takes a clock reading that arrived at `received`; none (an untimed game, or an event
    /// without one) keeps the last.
    fn take_clocks(&mut self, clocks: Option<&Clocks>, received: Instant) {
        let Some(clocks) = clocks else { return };
        let mut local = LocalClocks::new(clocks, received);
        if let Some(earlier) = &self.clocks {
            local.keep_sooner_deadline(earlier);
        }
        self.first_move_deadline = if local.running().is_none() {
            system_time(clocks.deadline.as_ref())
        } else {
            None
        };
        self.clocks = Some(local);
    }

    /// Something counts down on the clocks (worth redrawing every second).
    pub fn ticking(&self) -> bool {
        !self.over && self.clocks.is_some_and(|c| c.ticking())
    }

    /// The viewer's own time, when it is limited: their clock's reading (running or not), or
    /// their first move's limit while it counts down. `None` for a spectator or an untimed game.
    fn own_time_left(&self, now: Instant) -> Option<Duration> {
        let (you, clocks) = (self.you?, self.clocks.as_ref()?);
        if self.over {
            return None;
        }
        match clocks.running() {
            Some(_) => Some(clocks.remaining(you, now)),
            None if self.to_move() == Some(you) => clocks.first_move_left(now),
            None => None,
        }
    }

    /// The `clocks:` line at `now`, for a timed game.
    pub fn clock_line(&self, now: Instant) -> Option<String> {
        let clocks = self.clocks.as_ref()?;
        let mut clocks = *clocks;
        if self.over {
            clocks.stop(now);
        }
        Some(clocks_line(&clocks, self.to_move(), now))
    }

    /// While the game can still get a rematch: it ended with a rematch window and nothing has
    /// closed it.
    pub fn rematch_open(&self) -> bool {
        self.over
            && self.game.rematch_deadline.is_some()
            && self.game.rematch.is_empty()
            && self.rematch_started.is_none()
            && !self.rematch_closed
    }

    /// How long a rematch can still be offered, counted down from the server's word.
    pub fn rematch_left(&self, now: Instant) -> Option<Duration> {
        let (window, received) = self.rematch_window?;
        Some(window.saturating_sub(now.saturating_duration_since(received)))
    }

    /// The display name of a seat, or `the first player` for an empty one.
    pub fn name(&self, side: Side) -> String {
        named(self.names(), side)
    }

    pub fn clients(&self) -> &Clients {
        &self.clients
    }

    fn quan_value(&self) -> u32 {
        self.game.rule_set.as_ref().map_or(0, |r| r.quan_value)
    }

    fn position(&self) -> Position {
        self.game.position.clone().unwrap_or_default()
    }

    /// Whose turn it is, while the game is on.
    pub fn to_move(&self) -> Option<Side> {
        let position = self.game.position.as_ref()?;
        if self.over || position.over || self.game.status() != GameStatus::Active {
            return None;
        }
        Side::from_i32(position.to_move)
    }

    pub fn ply(&self) -> u32 {
        self.game.position.as_ref().map_or(0, |p| p.ply)
    }

    fn names(&self) -> [&str; 2] {
        fn name(seat: Option<&Seat>) -> &str {
            seat.map_or("", |s| s.display_name.as_str())
        }
        [
            name(self.game.first_seat.as_ref()),
            name(self.game.second_seat.as_ref()),
        ]
    }

    fn view(&self) -> View<'_> {
        let now = Instant::now();
        View {
            bottom: self.bottom,
            you: self.you,
            names: self.names(),
            to_move: self.to_move(),
            highlight: None,
            hand: None,
            clocks: self.clocks.map(|c| {
                [Side::First, Side::Second].map(|side| format_clock(c.remaining(side, now)))
            }),
            ratings: [
                seat_rating(self.game.first_seat.as_ref()),
                seat_rating(self.game.second_seat.as_ref()),
            ],
            width: output::terminal_width(),
        }
    }

    pub fn board_lines(&self) -> Vec<String> {
        let mut lines = board::render(
            &BoardState::from_position(&self.position()),
            &self.view(),
            self.output.style,
        );
        // On a terminal the clocks' status line counts the first move's time down below; a
        // line here would stand still beside it (an outside probe read 0:29 above 0:27).
        let status_ticks = !self.output.clock_lines && !self.output.json;
        let first_move = self
            .clocks
            .filter(|_| !self.over && !status_ticks)
            .and_then(|c| {
                let left = c.first_move_left(Instant::now())?;
                let side = self.to_move()?;
                Some(first_move_line(self.you, side, &self.name(side), left))
            });
        lines.extend(first_move);
        lines
    }

    pub fn print_board(&self) -> Result<(), CliError> {
        if self.output.json {
            return Ok(());
        }
        out_lines(&self.board_lines())
    }

    fn text(&self, line: impl std::fmt::Display) -> Result<(), CliError> {
        if self.output.json {
            return Ok(());
        }
        out(line)
    }

    /// Prints the `clocks:` line of a timed game, where stable lines are wanted.
    fn print_clock_line(&self) -> Result<(), CliError> {
        if !self.output.clock_lines || self.output.json {
            return Ok(());
        }
        match self.clock_line(Instant::now()) {
            Some(line) => out(line),
            None => Ok(()),
        }
    }

    /// Applies one event from the feed, which arrived at `received`, and prints what it means.
    pub async fn handle(&mut self, event: GameEvent, received: Instant) -> Result<(), CliError> {
        let Some(kind) = event.kind.clone() else {
            return Ok(());
        };
        if self.output.json {
            // The stream as the server sent it (heartbeats never reach here).
            json::print(&WatchGameResponse {
                event: Some(event.clone()),
            })?;
        }
        match kind {
            game_event::Kind::Snapshot(snapshot) => {
                let game = snapshot
                    .game
                    .ok_or_else(|| CliError::bad_answer("snapshot without a game"))?;
                self.rematch_window =
                    server_span(event.time.as_ref(), game.rematch_deadline.as_ref())
                        .map(|window| (window, received));
                self.on_snapshot(game, received).await?;
            }
            game_event::Kind::PlayerJoined(joined) => {
                let seat = Seat {
                    player: joined.seat,
                    occupied: true,
                    display_name: joined.display_name.clone(),
                    kind: joined.kind,
                    computer_level: 0,
                    // The event does not say; GameStarted, which follows, brings the seats
                    // with their accounts.
                    account: None,
                };
                match Side::from_i32(joined.seat) {
                    Some(Side::First) => self.game.first_seat = Some(seat),
                    Some(Side::Second) => self.game.second_seat = Some(seat),
                    None => {}
                }
                let side = Side::from_i32(joined.seat).map_or("?", Side::name);
                self.text(format!(
                    "joined: {side} {}",
                    shown_name(&joined.display_name)
                ))?;
            }
            game_event::Kind::GameStarted(started) => {
                if let Some(game) = started.game {
                    self.take_clocks(game.clocks.as_ref(), received);
                    self.game = game;
                }
                self.text("game started")?;
                self.print_board()?;
            }
            game_event::Kind::MovePlayed(played) => {
                let record = played
                    .record
                    .ok_or_else(|| CliError::bad_answer("move event without a record"))?;
                self.take_clocks(played.clocks.as_ref(), received);
                // An offer stands until the offerer's opponent moves.
                if let Some(mover) = Side::from_i32(record.player)
                    && self.draw_offer == Some(mover.other())
                {
                    self.draw_offer = None;
                }
                if record.number > self.shown_moves.saturating_add(1) {
                    // Never expected (sequences have no gaps), but a missing move must not go
                    // unseen: fetch the ones in between.
                    self.show_missed_moves(record.number.saturating_sub(1))
                        .await?;
                }
                if record.number > self.shown_moves {
                    self.show_move(&record, true).await?;
                }
            }
            game_event::Kind::TurnStarted(turn) => {
                if let Some(position) = self.game.position.as_mut() {
                    position.to_move = turn.player;
                }
                self.take_clocks(turn.clocks.as_ref(), received);
                let side = Side::from_i32(turn.player).map_or("?", Side::name);
                self.text(format!("turn: {side}"))?;
                self.print_clock_line()?;
                self.turn_announced = Some(turn.ply);
            }
            game_event::Kind::GameOver(over) => {
                // Aborted at the first-move deadline (the server ends such a game at the
                // deadline itself), or by a player before it: two server times compared.
                let first_move_missed = matches!(
                    (self.first_move_deadline, system_time(event.time.as_ref())),
                    (Some(deadline), Some(at)) if at >= deadline
                );
                self.take_clocks(over.clocks.as_ref(), received);
                if let Some(clocks) = self.clocks.as_mut() {
                    clocks.stop(received);
                }
                self.rematch_window =
                    server_span(event.time.as_ref(), over.rematch_deadline.as_ref())
                        .map(|window| (window, received));
                self.game.rematch_deadline = over.rematch_deadline;
                self.finish(over.result, Some(first_move_missed))?;
            }
            game_event::Kind::Draw(draw) => {
                let Some(by) = Side::from_i32(draw.by) else {
                    return Ok(());
                };
                match draw.action() {
                    game_event::DrawAction::Offered => self.draw_offer = Some(by),
                    game_event::DrawAction::Declined | game_event::DrawAction::Accepted => {
                        self.draw_offer = None;
                    }
                    game_event::DrawAction::Unspecified => {}
                }
                if let Some(line) = draw_line(by, draw.action(), self.you, self.names()) {
                    self.text(line)?;
                }
            }
            game_event::Kind::Rematch(rematch) => {
                match rematch.action() {
                    game_event::RematchAction::Offered => {
                        self.rematch_offer = Side::from_i32(rematch.by);
                    }
                    game_event::RematchAction::Declined | game_event::RematchAction::Expired => {
                        self.rematch_offer = None;
                        self.rematch_closed = true;
                        // Nothing more is asked: the `rematch?` prompt goes rather than being
                        // drawn again under the line that closes the window, where it stayed
                        // above the shell's prompt once the client exited.
                        let _closed = output::hide_prompt()?;
                    }
                    game_event::RematchAction::Started => {
                        self.rematch_offer = None;
                        self.rematch_started = Some(rematch.game_id.clone());
                        // Answered: the `rematch?` prompt goes, rather than being drawn again
                        // before every line of the new game's header.
                        let _answered = output::hide_prompt()?;
                    }
                    game_event::RematchAction::Unspecified => {}
                }
                if let Some(line) = rematch_line(&rematch, self.you, self.names()) {
                    self.text(line)?;
                }
            }
            game_event::Kind::Heartbeat(_) => {}
        }
        Ok(())
    }

    fn finish(
        &mut self,
        result: Option<GameResult>,
        first_move_missed: Option<bool>,
    ) -> Result<(), CliError> {
        if self.over {
            return Ok(());
        }
        let status = if result.as_ref().map(GameResult::end_reason) == Some(EndReason::Aborted) {
            GameStatus::Aborted
        } else {
            GameStatus::Finished
        };
        self.game.set_status(status);
        if result.is_some() {
            self.game.result = result;
        }
        self.over = true;
        self.draw_offer = None;
        // A move prompt drawn again below the end's lines would ask for a move in a game that
        // is over; what comes next (a rematch question, or nothing) is the caller's to show.
        clear_status();
        if let Some(line) = self
            .game
            .result
            .as_ref()
            .and_then(|r| end_line(r, self.names(), self.you, first_move_missed))
        {
            self.text(line)?;
        }
        self.text(game_over_line(self.game.result.as_ref()))?;
        if let Some(result) = self.game.result.as_ref() {
            for line in rating_lines(self.game.rated, result, self.names()) {
                self.text(line)?;
            }
        }
        Ok(())
    }

    async fn on_snapshot(&mut self, game: Game, received: Instant) -> Result<(), CliError> {
        let first = !self.known;
        self.known = true;
        if first && !self.from_start {
            self.shown_moves = game.move_count;
        }
        // The state found comes first, then (`--from-start`) the moves that led to it.
        if first && !self.output.json {
            let status = json::status_name(game.status());
            out(format!(
                "game {}: {status}, {} played",
                shown_name(&game.id),
                counted(game.move_count, "move")
            ))?;
            let tc = TimeControl::from_proto(game.time_control.as_ref());
            if tc != TimeControl::Untimed {
                out(format!("time control: {tc}"))?;
            }
        }
        if game.move_count > self.shown_moves {
            // Resumed from a snapshot (the server's log no longer had our events), or
            // `--from-start`: fill in the moves not shown yet, from the move list.
            self.game.id.clone_from(&game.id);
            if self.game.rule_set.is_none() {
                self.game.rule_set.clone_from(&game.rule_set);
            }
            self.show_missed_moves(game.move_count).await?;
        }
        self.take_clocks(game.clocks.as_ref(), received);
        self.draw_offer = Side::from_i32(game.draw_offer);
        self.rematch_offer = Side::from_i32(game.rematch_offer);
        self.game = game;
        if self.game.status() == GameStatus::Active {
            self.turn_announced = Some(self.ply());
        }
        let status = self.game.status();
        if matches!(status, GameStatus::Finished | GameStatus::Aborted) {
            if let Some(clocks) = self.clocks.as_mut() {
                clocks.stop(received);
            }
            self.print_board()?;
            let result = self.game.result;
            return self.finish(result, None);
        }
        self.print_board()?;
        if status == GameStatus::WaitingForPlayers {
            self.text("waiting for an opponent to join")?;
        }
        if status == GameStatus::Active {
            self.print_clock_line()?;
            if let (Some(by), Some(you)) = (self.draw_offer, self.you)
                && by != you
            {
                let names = self.names();
                if let Some(line) = draw_line(by, game_event::DrawAction::Offered, Some(you), names)
                {
                    self.text(line)?;
                }
            }
        }
        Ok(())
    }

    /// Fetches the move list and shows moves `shown_moves + 1 ..= up_to`. Not for JSON: that
    /// prints the stream as it is, and a snapshot there already stands for the moves before it.
    async fn show_missed_moves(&mut self, up_to: u32) -> Result<(), CliError> {
        if self.output.json {
            self.shown_moves = up_to;
            return Ok(());
        }
        let response = all_moves(&self.clients.games, &self.game.id).await;
        let moves = match response {
            Ok(r) => r.moves,
            Err(status) => {
                note(format!(
                    "notice: could not fetch the moves missed while disconnected: {}",
                    CliError::from_status("list moves", &status)
                ));
                return Ok(());
            }
        };
        for record in moves {
            if record.number > self.shown_moves && record.number <= up_to {
                self.show_move(&record, false).await?;
            }
        }
        Ok(())
    }

    /// Prints one move (line, trace or animation, board) and takes its position.
    async fn show_move(&mut self, record: &MoveRecord, live: bool) -> Result<(), CliError> {
        let before = self.position();
        self.shown_moves = record.number;
        if let Some(position) = record.position.clone() {
            self.game.position = Some(position);
        }
        self.game.move_count = record.number;
        if self.output.json {
            return Ok(());
        }
        out_lines(&summary_lines(record, self.quan_value()))?;
        let consistent = before.ply.saturating_add(1) == self.ply();
        // Too narrow for the board's box: frames would wrap and be redrawn over the wrong
        // lines, so the steps come as text.
        let width = output::terminal_width();
        let fits = width.is_none_or(|w| w >= board::BOARD_WIDTH);
        match self.output.animate {
            Some(delay) if live && consistent && fits => {
                let hidden = output::hide_prompt()?;
                self.animate(&before, record, delay, width).await?;
                // The clock line comes back as it reads now, with the move's new reading, not
                // as it was before the animation until the next tick.
                let clocks = self.clock_line(Instant::now()).filter(|_| !self.over);
                output::show_prompt(hidden.with_status(clocks))
            }
            _ => {
                out_lines(&board::trace_lines(&record.steps))?;
                if live {
                    self.print_board()?;
                }
                Ok(())
            }
        }
    }

    async fn animate(
        &self,
        before: &Position,
        record: &MoveRecord,
        delay: Duration,
        width: Option<usize>,
    ) -> Result<(), CliError> {
        let mut board = BoardState::from_position(before);
        let mut hand = 0;
        let mut shown = 0usize;
        let mover = Side::from_i32(record.player);
        let redraw = |shown: usize, lines: &[String]| -> Result<usize, CliError> {
            if shown > 0 {
                // Cursor up over the previous frame, clear to the end of the screen.
                out_inline(&format!("\x1b[{shown}A\x1b[J"))?;
            }
            // Each line cut to one row, so that the count of rows to go back up is the count
            // of lines.
            let fitted: Vec<String> = lines
                .iter()
                .map(|l| output::fit(l, width).into_owned())
                .collect();
            out_lines(&fitted)?;
            Ok(fitted.len())
        };
        // Ctrl-C must not wait for the frames (seconds of a long relay move, more with a slow
        // --animate-ms): the animation stops, and the caller's own listener ends the session.
        let mut presses = crate::signals::Presses::new();
        let ends = self.own_time_left(Instant::now()).and_then(|left| {
            Instant::now().checked_add(left.saturating_sub(ANIMATION_RESERVE) / ANIMATION_SHARE)
        });
        for (index, step) in record.steps.iter().enumerate() {
            let touched = board::replay_step(&mut board, &mut hand, step, self.quan_value());
            let view = View {
                to_move: mover,
                highlight: touched,
                hand: Some(hand),
                ..self.view()
            };
            shown = redraw(shown, &board::render(&board, &view, self.output.style))?;
            let pause = match step.kind {
                Some(oanquan_proto::v1::step::Kind::Sow(_)) => delay,
                _ => delay.saturating_mul(4),
            };
            let steps_left = record.steps.len() - index;
            let Some(pause) = step_pause(pause, steps_left, ends, Instant::now()) else {
                break;
            };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = presses.next() => break,
            }
        }
        redraw(shown, &self.board_lines())?;
        Ok(())
    }
}

/// A seated player's animations take at most this share of their time left beyond
/// [`ANIMATION_RESERVE`]: an outside probe's prompt came 6.4 s after the opponent's move in a
/// 1+0 game, on their clock. As the web page does (README, "The web page"), where a share of
/// each move's time still took 11 of a 15-second game's seconds.
const ANIMATION_SHARE: u32 = 20;

/// A seated player's last seconds, in which moves are shown at once.
const ANIMATION_RESERVE: Duration = Duration::from_secs(30);

/// The shortest pause worth showing; under it the rest of a move is drawn at once.
const SHORTEST_PAUSE: Duration = Duration::from_millis(10);

/// The pause after a frame, `steps_left` frames (this one included) before the move's end:
/// the chosen `pause`, or less so that the rest ends by `ends`; `None` to draw the end at once
/// (too little time left to see the frames).
fn step_pause(
    pause: Duration,
    steps_left: usize,
    ends: Option<Instant>,
    now: Instant,
) -> Option<Duration> {
    let Some(ends) = ends else {
        return Some(pause);
    };
    let share =
        ends.saturating_duration_since(now) / u32::try_from(steps_left.max(1)).unwrap_or(u32::MAX);
    (share >= SHORTEST_PAUSE).then(|| pause.min(share))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oanquan_proto::v1::{Direction, Move, Outcome, PlayerPair, Step, step};

    #[test]
    fn a_seated_players_animation_fits_a_share_of_their_time() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        // No limit: the chosen pause.
        assert_eq!(step_pause(ms(400), 10, None, now), Some(ms(400)));
        // 3 s for 10 frames: 300 ms each at most, the chosen pause if shorter.
        let ends = now.checked_add(ms(3000));
        assert_eq!(step_pause(ms(400), 10, ends, now), Some(ms(300)));
        assert_eq!(step_pause(ms(100), 10, ends, now), Some(ms(100)));
        // Too little to see: the end at once.
        assert_eq!(step_pause(ms(400), 1000, ends, now), None);
        assert_eq!(step_pause(ms(400), 1, now.checked_add(ms(5)), now), None);
        // Past the end.
        assert_eq!(step_pause(ms(400), 3, ends, now + ms(4000)), None);
    }

    #[test]
    fn move_line_uses_the_movers_terms() {
        let record = MoveRecord {
            number: 2,
            player: 2,
            r#move: Some(Move {
                square: Some(8),
                direction: Direction::Left.into(),
            }),
            steps: vec![Step {
                kind: Some(step::Kind::Capture(step::Capture {
                    square: Some(3),
                    stones: 6,
                    pieces: 1,
                    player: 2,
                })),
            }],
            position: Some(Position {
                scores: Some(PlayerPair {
                    first: 6,
                    second: 16,
                }),
                ..Position::default()
            }),
            play_time: None,
        };
        assert_eq!(
            move_line(&record, 10),
            "move 2: second plays 2 left (ring 8 -1), captured 16, score 6:16"
        );
        // A record with nothing in it still prints.
        assert_eq!(
            move_line(&MoveRecord::default(), 0),
            "move 0: ? plays ? ? (ring ? ?), captured 0, score 0:0"
        );
    }

    /// RULES.md's end-of-game example: 28:39, the second player captures 1 (mandarin square 6),
    /// then each collects the 1 stone left on their side: 29:41. The move line's `captured 1`
    /// and the score's +3 add up only with the collection said.
    #[test]
    fn the_end_of_game_collection_is_said_apart_from_the_capture() {
        let record = MoveRecord {
            number: 40,
            player: 2,
            r#move: Some(Move {
                square: Some(9),
                direction: Direction::Left.into(),
            }),
            steps: vec![
                Step {
                    kind: Some(step::Kind::Capture(step::Capture {
                        square: Some(6),
                        stones: 1,
                        pieces: 0,
                        player: 2,
                    })),
                },
                Step {
                    kind: Some(step::Kind::GameOver(step::GameOver {
                        reason: EndReason::Mandarins.into(),
                        collected: Some(PlayerPair {
                            first: 1,
                            second: 1,
                        }),
                    })),
                },
            ],
            position: Some(Position {
                scores: Some(PlayerPair {
                    first: 29,
                    second: 41,
                }),
                ..Position::default()
            }),
            play_time: None,
        };
        assert!(move_line(&record, 10).ends_with("captured 1, score 29:41"));
        assert_eq!(
            collection_line(&record).as_deref(),
            Some(
                "end of game: the 2 stones left on the board go to the players, first +1, \
                 second +1 (score 29:41)"
            )
        );
        // A move that does not end the game, or ends it with nothing left, has no such line.
        let mut ongoing = record.clone();
        ongoing.steps.truncate(1);
        assert_eq!(collection_line(&ongoing), None);
        // One stone goes.
        let mut one = record.clone();
        one.steps[1] = Step {
            kind: Some(step::Kind::GameOver(step::GameOver {
                collected: Some(PlayerPair {
                    first: 1,
                    second: 0,
                }),
                ..step::GameOver::default()
            })),
        };
        assert!(
            collection_line(&one)
                .unwrap()
                .starts_with("end of game: the 1 stone left on the board goes to the players"),
            "{:?}",
            collection_line(&one)
        );
        let mut empty = record;
        empty.steps[1] = Step {
            kind: Some(step::Kind::GameOver(step::GameOver::default())),
        };
        assert_eq!(collection_line(&empty), None);
    }

    /// RULES.md's examples 4 and 6: a move whose score changes by more than its capture,
    /// because the opponent's side was empty and refilled from their captured stones.
    #[test]
    fn a_refill_is_said_with_the_move_so_that_the_score_adds_up() {
        let record = |steps: Vec<Step>, first: i32, second: i32| MoveRecord {
            number: 51,
            player: 1,
            r#move: Some(Move {
                square: Some(5),
                direction: Direction::Right.into(),
            }),
            steps,
            position: Some(Position {
                scores: Some(PlayerPair { first, second }),
                ..Position::default()
            }),
            play_time: None,
        };
        let capture = |square, stones| Step {
            kind: Some(step::Kind::Capture(step::Capture {
                square: Some(square),
                stones,
                pieces: 0,
                player: 1,
            })),
        };
        let refill = |captured_after| Step {
            kind: Some(step::Kind::Refill(step::Refill {
                player: 2,
                captured_after,
            })),
        };
        // Example 4: 30:36, the first player captures 3, the second refills: 33:31.
        let four = record(
            vec![capture(8, 1), capture(10, 1), capture(0, 1), refill(31)],
            33,
            31,
        );
        assert_eq!(
            summary_lines(&four, 10),
            [
                "move 51: first plays 5 right (ring 5 +1), captured 3, score 33:31",
                "refill: second's squares were empty, 1 stone put in each: second -5 \
                 (score 33:31)",
            ]
        );
        // Example 6: 66:1, nothing captured, the second player refills with 1 and borrows 4.
        let six = record(vec![refill(-4)], 66, -4);
        assert_eq!(
            refill_line(&six).as_deref(),
            Some(
                "refill: second's squares were empty, 1 stone put in each: second -5, \
                 4 of them borrowed, a debt of 4 (score 66:-4)"
            )
        );
        // Already in debt: all five borrowed.
        let again = record(vec![refill(-9)], 70, -9);
        assert!(
            refill_line(&again)
                .is_some_and(|l| l.ends_with("5 of them borrowed, a debt of 9 (score 70:-9)")),
            "{:?}",
            refill_line(&again)
        );
        // Down to exactly zero: nothing borrowed.
        let zero = record(vec![refill(0)], 70, 0);
        assert!(
            refill_line(&zero).is_some_and(|l| l.ends_with(": second -5 (score 70:0)")),
            "{:?}",
            refill_line(&zero)
        );
        // No refill, no line.
        assert_eq!(refill_line(&record(vec![capture(2, 6)], 6, 0)), None);
        assert_eq!(summary_lines(&record(vec![], 0, 0), 10).len(), 1);
    }

    #[test]
    fn new_endings_are_spelled_out() {
        let names = ["alice", "bob"];
        let result = |reason: EndReason, winner: i32, ended_by: i32| GameResult {
            outcome: if winner == 0 {
                Outcome::Draw.into()
            } else {
                Outcome::SecondWins.into()
            },
            winner,
            scores: None,
            end_reason: reason.into(),
            ended_by,
            ..GameResult::default()
        };
        assert_eq!(
            end_line(&result(EndReason::Timeout, 2, 1), names, None, None).as_deref(),
            Some("alice ran out of time — bob wins on time")
        );
        // Without `winner` the opponent of the flagged player is the winner.
        assert_eq!(
            end_line(&result(EndReason::Timeout, 0, 2), ["alice", ""], None, None).as_deref(),
            Some("the second player ran out of time — alice wins on time")
        );
        assert_eq!(
            end_line(&result(EndReason::Agreement, 0, 0), names, None, None).as_deref(),
            Some("drawn by agreement")
        );
        assert_eq!(
            end_line(&result(EndReason::Abandonment, 2, 1), names, None, None).as_deref(),
            Some("alice abandoned the game — bob wins by claim")
        );
        let aborted = result(EndReason::Aborted, 0, 2);
        assert_eq!(
            end_line(&aborted, names, None, Some(true)).as_deref(),
            Some("the game was aborted: bob did not make their first move in time")
        );
        assert_eq!(
            end_line(&aborted, names, Some(Side::Second), Some(true)).as_deref(),
            Some("the game was aborted: you did not make your first move in time")
        );
        assert_eq!(
            end_line(&aborted, names, Some(Side::First), Some(false)).as_deref(),
            Some("the game was aborted: bob called it off before the first move")
        );
        assert_eq!(
            end_line(&aborted, names, None, None).as_deref(),
            Some(
                "the game was aborted before the first move: bob called it off or did not move \
                 in time"
            )
        );
        assert_eq!(
            end_line(&result(EndReason::Resignation, 2, 1), names, None, None),
            None
        );
        assert_eq!(
            game_over_line(Some(&result(EndReason::Timeout, 2, 1))),
            "game over: second wins 0:0 (timeout by first)"
        );
    }

    #[test]
    fn the_first_move_line_says_you_to_the_player_who_must_move() {
        let left = Duration::from_secs(27);
        assert_eq!(
            first_move_line(Some(Side::First), Side::First, "alice", left),
            "  you must make your first move within 0:27"
        );
        assert_eq!(
            first_move_line(Some(Side::Second), Side::First, "alice", left),
            "  alice must make their first move within 0:27"
        );
        assert_eq!(
            first_move_line(None, Side::First, "alice", left),
            "  alice must make their first move within 0:27"
        );
    }

    #[test]
    fn draw_offers_read_per_viewer() {
        use game_event::DrawAction;
        let names = ["alice", "bob"];
        let line = |by, action, you| draw_line(by, action, you, names);
        assert_eq!(
            line(Side::First, DrawAction::Offered, Some(Side::Second)).as_deref(),
            Some("alice offers a draw — type draw to accept, decline to refuse")
        );
        assert_eq!(
            line(Side::First, DrawAction::Offered, Some(Side::First)).as_deref(),
            Some("you offer a draw; it stands until bob moves or answers")
        );
        assert_eq!(
            line(Side::First, DrawAction::Offered, None).as_deref(),
            Some("alice offers a draw")
        );
        assert_eq!(
            line(Side::Second, DrawAction::Declined, Some(Side::First)).as_deref(),
            Some("bob declines the draw")
        );
        assert_eq!(
            line(Side::Second, DrawAction::Accepted, Some(Side::Second)).as_deref(),
            Some("you accept the draw")
        );
        assert_eq!(line(Side::Second, DrawAction::Unspecified, None), None);
    }

    #[test]
    fn rematch_events_read_per_viewer() {
        use game_event::{Rematch, RematchAction};
        let names = ["alice", "bob"];
        let event = |by: i32, action: RematchAction, game_id: &str| Rematch {
            by,
            action: action.into(),
            game_id: game_id.into(),
        };
        let offered = event(2, RematchAction::Offered, "");
        assert_eq!(
            rematch_line(&offered, Some(Side::First), names).as_deref(),
            Some("bob offers a rematch — type rematch to accept, no to decline")
        );
        assert_eq!(
            rematch_line(&offered, Some(Side::Second), names).as_deref(),
            Some("rematch offered; waiting for alice")
        );
        assert_eq!(
            rematch_line(
                &event(1, RematchAction::Declined, ""),
                Some(Side::First),
                names
            )
            .as_deref(),
            Some("no rematch: you declined")
        );
        assert_eq!(
            rematch_line(&event(0, RematchAction::Expired, ""), None, names).as_deref(),
            Some("no rematch: the time to offer one has passed")
        );
        assert_eq!(
            rematch_line(&event(0, RematchAction::Started, "g2"), None, names).as_deref(),
            Some("rematch: game g2")
        );
    }

    #[test]
    fn game_over_lines() {
        let result = GameResult {
            outcome: Outcome::SecondWins.into(),
            winner: 2,
            scores: Some(PlayerPair {
                first: 29,
                second: 41,
            }),
            end_reason: EndReason::Mandarins.into(),
            ended_by: 0,
            ..GameResult::default()
        };
        assert_eq!(
            game_over_line(Some(&result)),
            "game over: second wins 29:41 (mandarins)"
        );
        let resigned = GameResult {
            end_reason: EndReason::Resignation.into(),
            ended_by: 1,
            ..result
        };
        assert_eq!(
            game_over_line(Some(&resigned)),
            "game over: second wins 29:41 (resignation by first)"
        );
        let aborted = GameResult {
            end_reason: EndReason::Aborted.into(),
            outcome: 0,
            ..GameResult::default()
        };
        assert_eq!(
            game_over_line(Some(&aborted)),
            "game over: aborted 0:0 (aborted)"
        );
        assert_eq!(game_over_line(None), "game over: none 0:0 (none)");
    }
}
