//! Following a game: the client's copy of the game state, kept up to date from the event feed,
//! and what gets printed for each event. Shared by `watch` and `play`.
//!
//! The client holds state only to draw it: every position comes from the server (snapshots,
//! move records); traces are replayed locally only to animate between two server positions.

use std::io::{IsTerminal as _, Write as _};
use std::time::Duration;

use oanquan_proto::v1::{
    EndReason, Game, GameEvent, GameResult, GameStatus, ListMovesRequest, MoveRecord, Position,
    Seat, WatchGameResponse, game_event,
};

use crate::board::{self, BoardState, Style, View};
use crate::client::{Clients, request};
use crate::error::CliError;
use crate::json;
use crate::moves::{Dir, LocalMove, Side};
use crate::output::{note, out, out_inline, out_lines};

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
            tty: std::io::stderr().is_terminal(),
            down: false,
        }
    }

    /// The stream broke; attempt `attempt` (0-based) comes in `retry_in`.
    pub fn down(&mut self, why: &str, attempt: u32, retry_in: Duration) {
        if crate::error::verbose() {
            self.clear_line();
            note(format!(
                "notice: connection lost ({why}); reconnect attempt {} in {} ms",
                attempt.saturating_add(1),
                retry_in.as_millis()
            ));
        }
        if self.tty {
            let _ = write!(
                std::io::stderr().lock(),
                "\r\x1b[Kserver {} unreachable; reconnecting (attempt {}, next in {:.1} s)",
                self.server,
                attempt.saturating_add(1),
                retry_in.as_secs_f64()
            );
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
        if !std::mem::take(&mut self.down) {
            return;
        }
        self.clear_line();
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
            clients,
        }
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
        View {
            bottom: self.bottom,
            you: self.you,
            names: self.names(),
            to_move: self.to_move(),
            highlight: None,
            hand: None,
        }
    }

    pub fn board_lines(&self) -> Vec<String> {
        board::render(
            &BoardState::from_position(&self.position()),
            &self.view(),
            self.output.style,
        )
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

    /// Applies one event from the feed and prints what it means.
    pub async fn handle(&mut self, event: GameEvent) -> Result<(), CliError> {
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
                self.on_snapshot(game).await?;
            }
            game_event::Kind::PlayerJoined(joined) => {
                let seat = Seat {
                    player: joined.seat,
                    occupied: true,
                    display_name: joined.display_name.clone(),
                    kind: joined.kind,
                    computer_level: 0,
                };
                match Side::from_i32(joined.seat) {
                    Some(Side::First) => self.game.first_seat = Some(seat),
                    Some(Side::Second) => self.game.second_seat = Some(seat),
                    None => {}
                }
                let side = Side::from_i32(joined.seat).map_or("?", Side::name);
                self.text(format!("joined: {side} {}", joined.display_name))?;
            }
            game_event::Kind::GameStarted(started) => {
                if let Some(game) = started.game {
                    self.game = game;
                }
                self.text("game started")?;
                self.print_board()?;
            }
            game_event::Kind::MovePlayed(played) => {
                let record = played
                    .record
                    .ok_or_else(|| CliError::bad_answer("move event without a record"))?;
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
                let side = Side::from_i32(turn.player).map_or("?", Side::name);
                self.text(format!("turn: {side}"))?;
                self.turn_announced = Some(turn.ply);
            }
            game_event::Kind::GameOver(over) => {
                self.finish(over.result)?;
            }
            game_event::Kind::Heartbeat(_) => {}
        }
        Ok(())
    }

    fn finish(&mut self, result: Option<GameResult>) -> Result<(), CliError> {
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
        self.text(game_over_line(self.game.result.as_ref()))
    }

    async fn on_snapshot(&mut self, game: Game) -> Result<(), CliError> {
        let first = !self.known;
        self.known = true;
        if first && !self.from_start {
            self.shown_moves = game.move_count;
        }
        // The state found comes first, then (`--from-start`) the moves that led to it.
        if first && !self.output.json {
            let status = json::status_name(game.status());
            out(format!(
                "game {}: {status}, {} moves played",
                game.id, game.move_count
            ))?;
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
        self.game = game;
        if self.game.status() == GameStatus::Active {
            self.turn_announced = Some(self.ply());
        }
        let status = self.game.status();
        if matches!(status, GameStatus::Finished | GameStatus::Aborted) {
            self.print_board()?;
            let result = self.game.result;
            return self.finish(result);
        }
        self.print_board()?;
        if status == GameStatus::WaitingForPlayers {
            self.text("waiting for an opponent to join")?;
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
        let response = self
            .clients
            .games
            .clone()
            .list_moves(request(ListMovesRequest {
                game_id: self.game.id.clone(),
            }))
            .await;
        let moves = match response {
            Ok(r) => r.into_inner().moves,
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
        out(move_line(record, self.quan_value()))?;
        let consistent = before.ply.saturating_add(1) == self.ply();
        match self.output.animate {
            Some(delay) if live && consistent => self.animate(&before, record, delay).await,
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
            out_lines(lines)?;
            Ok(lines.len())
        };
        for step in &record.steps {
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
            tokio::time::sleep(pause).await;
        }
        redraw(shown, &self.board_lines())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oanquan_proto::v1::{Direction, Move, Outcome, PlayerPair, Step, step};

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
