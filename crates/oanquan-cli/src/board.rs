//! Drawing the board the way a player sees it, and replaying a move's trace for animation.
//!
//! The viewer's seat is at the bottom. For the first player (and spectators) that is the drawing
//! of RULES.md; for the second player it is rotated 180°: their squares 7..11 run left to right
//! along the bottom, mandarin square 6 is on their left and 0 on their right.
//!
//! Every line the renderer returns starts with two spaces. Scripts reading `play`/`watch`
//! output can skip such lines: they are for eyes only.

use oanquan_proto::v1::{Position, Step, step};

use unicode_width::UnicodeWidthStr as _;

use crate::moves::Side;
use crate::output::shown_name;

/// How to draw: box-drawing characters and ANSI colours, or plain ASCII.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub unicode: bool,
    pub color: bool,
}

impl Style {
    pub const PLAIN: Style = Style {
        unicode: false,
        color: false,
    };
    pub const FANCY: Style = Style {
        unicode: true,
        color: true,
    };
}

/// The board contents the renderer needs, decoupled from the proto so that a trace can be
/// replayed onto it frame by frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardState {
    pub squares: [u32; 12],
    pub pieces: [u32; 12],
    /// Scores, first player then second.
    pub scores: [i64; 2],
}

impl BoardState {
    /// Copies a position. A malformed position (wrong number of squares) is padded or cut rather
    /// than rejected: drawing something is better than aborting a game over a display detail.
    pub fn from_position(position: &Position) -> Self {
        let mut squares = [0; 12];
        let mut pieces = [0; 12];
        for (dst, src) in squares.iter_mut().zip(&position.squares) {
            *dst = *src;
        }
        for (dst, src) in pieces.iter_mut().zip(&position.pieces) {
            *dst = *src;
        }
        let scores = position
            .scores
            .map_or([0, 0], |s| [i64::from(s.first), i64::from(s.second)]);
        Self {
            squares,
            pieces,
            scores,
        }
    }

    fn score(&mut self, side: Side) -> &mut i64 {
        match side {
            Side::First => &mut self.scores[0],
            Side::Second => &mut self.scores[1],
        }
    }
}

/// Who is looking, and what to point out.
#[derive(Debug, Clone)]
pub struct View<'a> {
    /// The seat drawn at the bottom.
    pub bottom: Side,
    /// The viewer's own seat, if they play in this game.
    pub you: Option<Side>,
    /// Display names, first player then second ("" for an empty seat).
    pub names: [&'a str; 2],
    /// Whose turn it is, if the game is on.
    pub to_move: Option<Side>,
    /// A ring index to highlight (the square a stone just landed in, during animation).
    pub highlight: Option<u32>,
    /// Stones in the mover's hand, during animation.
    pub hand: Option<u32>,
    /// A timed game's clocks as shown (`4:59`), first player then second.
    pub clocks: Option<[String; 2]>,
    /// Each seat's rating as shown next to its name (`1523?`), for a seat that is an account
    /// in a timed game; first player then second.
    pub ratings: [Option<String>; 2],
    /// The terminal's width, if known: a name too long for it is shortened, so that the
    /// player's line keeps its score and turn marker on one row.
    pub width: Option<usize>,
}

const ESC_RESET: &str = "\x1b[0m";
const ESC_BOLD: &str = "\x1b[1m";
const ESC_DIM: &str = "\x1b[2m";
const ESC_REVERSE: &str = "\x1b[7m";
const ESC_GREEN: &str = "\x1b[32m";
const ESC_CYAN: &str = "\x1b[36m";
const ESC_YELLOW: &str = "\x1b[1;33m";

struct Glyphs {
    h: &'static str,
    v: &'static str,
    top: [&'static str; 3],
    middle: [&'static str; 3],
    bottom: [&'static str; 3],
    turn: &'static str,
}

const UNICODE: Glyphs = Glyphs {
    h: "────",
    v: "│",
    top: ["╭", "┬", "╮"],
    middle: ["├", "┼", "┤"],
    bottom: ["╰", "┴", "╯"],
    turn: "◀ to move",
};

const ASCII: Glyphs = Glyphs {
    h: "----",
    v: "|",
    top: ["+", "+", "+"],
    middle: ["+", "+", "+"],
    bottom: ["+", "+", "+"],
    turn: "<- to move",
};

/// Ring indices as laid out for a viewer: (top row left to right, left mandarin, right
/// mandarin, bottom row left to right).
pub fn layout(bottom: Side) -> ([u32; 5], u32, u32, [u32; 5]) {
    match bottom {
        Side::First => ([11, 10, 9, 8, 7], 0, 6, [1, 2, 3, 4, 5]),
        Side::Second => ([5, 4, 3, 2, 1], 6, 0, [7, 8, 9, 10, 11]),
    }
}

fn paint(text: &str, codes: &[&str], style: Style) -> String {
    if !style.color || codes.is_empty() {
        return text.to_owned();
    }
    format!("{}{text}{ESC_RESET}", codes.concat())
}

/// A square's count as written, unpadded: `7`, `Q` (a mandarin piece and no stones), `Q12`;
/// `Q` left out when `split` ([`split_mandarin`]).
fn cell_text(board: &BoardState, ring: usize, split: bool) -> String {
    let stones = board.squares.get(ring).copied().unwrap_or(0);
    let pieces = board.pieces.get(ring).copied().unwrap_or(0);
    match (pieces, stones) {
        (0, s) => s.to_string(),
        (_, 0) => "Q".to_owned(),
        (_, s) if split => s.to_string(),
        (_, s) => format!("Q{s}"),
    }
}

/// Whether a mandarin square's `Q` and count do not fit its `cols` together (`Q100` in the
/// narrow board's three columns: custom positions reach up to 255 stones on a square). Its
/// `Q` then goes on the row above, within the same square, and the count stays beside the
/// middle line.
fn split_mandarin(board: &BoardState, ring: u32, cols: usize) -> bool {
    let idx = usize::try_from(ring).unwrap_or(usize::MAX);
    let has_piece = board.pieces.get(idx).copied().unwrap_or(0) > 0;
    has_piece && cell_text(board, idx, false).len() > cols
}

/// `text` in at most `cols` columns. Only a count the rules never reach (a board holds at
/// most 255 stones; this is a server that breaks them) is longer: it shows as the largest
/// that fits and `+`, and the board keeps its shape.
fn fitted(text: String, cols: usize) -> String {
    if text.len() <= cols {
        return text;
    }
    let q = if text.starts_with('Q') { "Q" } else { "" };
    let nines = cols.saturating_sub(1 + q.len()).max(1);
    format!("{q}{}+", "9".repeat(nines))
}

/// A square's count, painted, right-aligned in its column: three columns and a space on the
/// full board (a four-character `Q100` takes all four), three on the narrow one.
fn cell(
    board: &BoardState,
    view: &View<'_>,
    ring: u32,
    color: &'static str,
    style: Style,
    narrow: bool,
) -> String {
    let idx = usize::try_from(ring).unwrap_or(usize::MAX);
    let cols = if narrow { 3 } else { 4 };
    let split = split_mandarin(board, ring, cols);
    let text = fitted(cell_text(board, idx, split), cols);
    let text = if narrow || text.len() == cols {
        format!("{text:>cols$}")
    } else {
        format!("{text:>3} ")
    };
    let empty = board.squares.get(idx).copied().unwrap_or(0) == 0
        && board.pieces.get(idx).copied().unwrap_or(0) == 0;
    let mut codes = vec![if empty { ESC_DIM } else { color }];
    if view.highlight == Some(ring) {
        codes.push(ESC_REVERSE);
    }
    paint(&text, &codes, style)
}

/// What stands beside the top row over a mandarin square: blank, or its `Q` when the count
/// below cannot hold it ([`split_mandarin`]).
fn above_mandarin(board: &BoardState, ring: u32, cols: usize, style: Style) -> String {
    if split_mandarin(board, ring, cols) {
        paint(&format!("{:>cols$}", "Q"), &[ESC_YELLOW], style)
    } else {
        " ".repeat(cols)
    }
}

/// A player's line drawn in one form, with a name and whether the turn marker shows.
type Draw<'a> = &'a dyn Fn(&str, bool) -> String;

/// The forms of a player's line, fullest first: `first player: Lan (1523?)  score 3`,
/// `first: Lan  3 pts`, `first: Lan  3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Form {
    Full,
    Compact,
    Bare,
}

/// Both players' lines, in one form: the fuller that both fit (an outside probe's board showed
/// `second: Trần Hưng Đạo Quận M…  0 pts` above `first player: Nguy…  score 6`).
fn player_lines(board: &BoardState, view: &View<'_>, glyphs: &Glyphs, style: Style) -> [String; 2] {
    let [top, bottom] = [view.bottom.other(), view.bottom];
    let line = |side, least| player_line(board, view, side, glyphs, style, least);
    let ((top_line, top_form), (bottom_line, bottom_form)) =
        (line(top, Form::Full), line(bottom, Form::Full));
    if top_form == bottom_form {
        return [top_line, bottom_line];
    }
    let least = top_form.max(bottom_form);
    [line(top, least).0, line(bottom, least).0]
}

/// A player's line in the fullest form from `least` on that fits the view's width, and that
/// form.
fn player_line(
    board: &BoardState,
    view: &View<'_>,
    side: Side,
    glyphs: &Glyphs,
    style: Style,
    least: Form,
) -> (String, Form) {
    let idx = usize::from(side == Side::Second);
    let name = view.names[idx].trim();
    // From the server: escaped, so that it cannot move the cursor or add a line to the board
    // that the animation redraws.
    let name = if name.is_empty() {
        "(empty seat)".into()
    } else {
        shown_name(name)
    };
    let rating = view.ratings[idx]
        .as_ref()
        .filter(|_| !view.names[idx].trim().is_empty())
        .map_or_else(String::new, |r| format!(" ({r})"));
    let you = if view.you == Some(side) { " (you)" } else { "" };
    let to_move = view.to_move == Some(side);
    // The turn marker in full (`◀ to move`) or as its arrow alone; `shown` false measures the
    // line as if it were there. Each form is chosen for the line with the marker, so that a
    // seat's line keeps one form whoever is to move (an outside probe's 40-column terminal
    // switched between `second player: Computer (mas…` and `second: Computer (master)` as the
    // turn passed).
    let turn = |marker: &str, shown: bool| {
        if to_move || !shown {
            format!("  {}", paint(marker, &[ESC_BOLD], style))
        } else {
            String::new()
        }
    };
    let score = paint(&board.scores[idx].to_string(), &[ESC_BOLD], style);
    let painted_clock = view.clocks.as_ref().map(|c| {
        let codes: &[&str] = if to_move { &[ESC_BOLD] } else { &[] };
        paint(&c[idx], codes, style)
    });
    let clock = painted_clock
        .as_ref()
        .map_or_else(String::new, |c| format!("  clock {c}"));
    let full = |name: &str, shown: bool| {
        format!(
            "  {side} player: {name}{rating}{you}  score {score}{clock}{}",
            turn(glyphs.turn, shown)
        )
    };
    let Some(width) = view.width else {
        return (full(&name, true), Form::Full);
    };
    // Then the words around the figures (a 40-column terminal cut a clock's 0:59 to 0:5 and
    // the turn marker away): the rating goes, and the score, clock and marker stay whole;
    // narrower still, the score's word too. The first form that holds the whole name wins;
    // only where none does is the name shortened, in the fullest form that keeps a few of its
    // letters (an outside probe saw `Computer (mas…` where `second: Computer (master)  0 pts`
    // fitted).
    let clock = painted_clock.map_or_else(String::new, |c| format!("  {c}"));
    let arrow = glyphs.turn.split(' ').next().unwrap_or(glyphs.turn);
    let compact = |name: &str, shown: bool| {
        format!(
            "  {side}: {name}{you}  {score} pts{clock}{}",
            turn(arrow, shown)
        )
    };
    let bare = |name: &str, shown: bool| {
        format!(
            "  {side}: {name}{you}  {score}{clock}{}",
            turn(arrow, shown)
        )
    };
    let over = |form: &dyn Fn(&str, bool) -> String| {
        crate::output::columns(&form(&name, false)).saturating_sub(width)
    };
    let forms: [(Draw<'_>, Form); 2] = [(&full, Form::Full), (&compact, Form::Compact)];
    // The score keeps its word while it can: the bare form comes last.
    for (form, kind) in forms {
        if kind >= least && over(form) == 0 {
            return (form(&name, true), kind);
        }
    }
    for (form, kind) in forms {
        let fewest = if kind == Form::Full {
            MIN_NAME_COLUMNS
        } else {
            MIN_NAME_COLUMNS.min(name.width()).max(1)
        };
        let keep = name.width().saturating_sub(over(form) + 1);
        if kind >= least && keep >= fewest {
            return (form(&shortened(&name, keep), true), kind);
        }
    }
    if over(&bare) == 0 {
        return (bare(&name, true), Form::Bare);
    }
    // At least one letter of the name stays; what still does not fit is cut by the caller.
    let keep = name.width().saturating_sub(over(&bare) + 1).max(1);
    (bare(&shortened(&name, keep), true), Form::Bare)
}

/// The fewest columns of a name shortened on a player's line before the words around the
/// figures go instead.
const MIN_NAME_COLUMNS: usize = 4;

/// `name` cut to `keep` columns and marked `…`.
fn shortened(name: &str, keep: usize) -> String {
    format!("{}…", crate::output::fit(name, Some(keep)))
}

/// The columns the board's box takes (its widest lines): a terminal narrower than this
/// cannot show it without wrapping.
pub const BOARD_WIDTH: usize = 2 + 7 * 4 + 8;

/// The board drawn for a terminal narrower than [`BOARD_WIDTH`]: squares three columns wide,
/// and no lines between a row's five squares.
#[cfg(test)]
const NARROW_BOARD_WIDTH: usize = 2 + 4 + 3 * 7;

/// The board's five lines (borders and rows) for a narrow terminal: an outside probe's
/// 30-column terminal wrapped every row of the full drawing into two.
fn narrow_box(board: &BoardState, view: &View<'_>, g: &Glyphs, style: Style) -> [String; 5] {
    let (top, left, right, bottom) = layout(view.bottom);
    let h = |n: usize| {
        g.h.chars()
            .next()
            .map(|c| c.to_string().repeat(n))
            .unwrap_or_default()
    };
    let border = |ends: [&str; 3]| {
        format!(
            "  {}{}{}{}{}{}{}",
            ends[0],
            h(3),
            ends[1],
            h(15),
            ends[1],
            h(3),
            ends[2]
        )
    };
    let row = |rings: [u32; 5], color, [left_side, right_side]: [String; 2]| {
        let cells: String = rings
            .iter()
            .map(|&ring| cell(board, view, ring, color, style, true))
            .collect();
        format!("  {v}{left_side}{v}{cells}{v}{right_side}{v}", v = g.v)
    };
    let above = [
        above_mandarin(board, left, 3, style),
        above_mandarin(board, right, 3, style),
    ];
    let middle = format!(
        "  {}{}{}{}{}{}{}",
        g.v,
        cell(board, view, left, ESC_YELLOW, style, true),
        g.middle[0],
        h(15),
        g.middle[2],
        cell(board, view, right, ESC_YELLOW, style, true),
        g.v
    );
    [
        border(g.top),
        row(top, ESC_CYAN, above),
        middle,
        row(bottom, ESC_GREEN, ["   ".to_owned(), "   ".to_owned()]),
        border(g.bottom),
    ]
}

/// Draws the board for `view`; one string per line, each starting with two spaces. On a
/// terminal narrower than [`BOARD_WIDTH`] the squares are drawn closer together (27 columns).
pub fn render(board: &BoardState, view: &View<'_>, style: Style) -> Vec<String> {
    let g = if style.unicode { &UNICODE } else { &ASCII };
    if view.width.is_some_and(|width| width < BOARD_WIDTH) {
        let [top_border, top_row, middle, bottom_row, bottom_border] =
            narrow_box(board, view, g, style);
        let labels: String = (1..=5).map(|i| format!("{i:>3}")).collect();
        let [top_player, bottom_player] = player_lines(board, view, g, style);
        let mut lines = vec![
            top_player,
            top_border,
            top_row,
            middle,
            bottom_row,
            bottom_border,
            format!("       {labels}"),
            bottom_player,
        ];
        if let Some(hand) = view.hand {
            lines.push(format!("  in hand: {hand}"));
        }
        return lines;
    }
    let (top, left, right, bottom) = layout(view.bottom);
    let (top_color, bottom_color) = (ESC_CYAN, ESC_GREEN);
    let blank = "    ";
    let border = |ends: [&str; 3]| {
        let mut s = format!("  {}{}", ends[0], g.h);
        for _ in 0..6 {
            s.push_str(ends[1]);
            s.push_str(g.h);
        }
        s.push_str(ends[2]);
        s
    };
    let row = |rings: [u32; 5], color, [left_side, right_side]: [&str; 2]| {
        let mut s = format!("  {}{left_side}{}", g.v, g.v);
        for ring in rings {
            s.push_str(&cell(board, view, ring, color, style, false));
            s.push_str(g.v);
        }
        s.push_str(right_side);
        s.push_str(g.v);
        s
    };
    let above = [
        above_mandarin(board, left, 4, style),
        above_mandarin(board, right, 4, style),
    ];
    let middle = {
        let mut s = format!(
            "  {}{}{}",
            g.v,
            cell(board, view, left, ESC_YELLOW, style, false),
            g.middle[0]
        );
        for i in 0..5 {
            s.push_str(g.h);
            s.push_str(if i < 4 { g.middle[1] } else { g.middle[2] });
        }
        s.push_str(&cell(board, view, right, ESC_YELLOW, style, false));
        s.push_str(g.v);
        s
    };
    let mut labels = String::from("        ");
    for i in 1..=5 {
        labels.push_str(&format!("{i:>3}  "));
    }
    let [top_player, bottom_player] = player_lines(board, view, g, style);
    let mut lines = vec![
        top_player,
        border(g.top),
        row(top, top_color, [&above[0], &above[1]]),
        middle,
        row(bottom, bottom_color, [blank, blank]),
        border(g.bottom),
        labels.trim_end().to_owned(),
        bottom_player,
    ];
    if let Some(hand) = view.hand {
        lines.push(format!("  in hand: {hand}"));
    }
    lines
}

/// Applies one trace step to a board being animated; returns the square it touched. Only for
/// display: the position the server sends after the move is what the client keeps.
pub fn replay_step(
    board: &mut BoardState,
    hand: &mut u32,
    step: &Step,
    quan_value: u32,
) -> Option<u32> {
    let slot = |ring: u32| usize::try_from(ring).ok().filter(|i| *i < 12);
    match step.kind.as_ref()? {
        step::Kind::PickUp(p) => {
            let i = slot(p.square?)?;
            board.squares[i] = 0;
            *hand = p.stones;
            p.square
        }
        step::Kind::Sow(s) => {
            let i = slot(s.square?)?;
            board.squares[i] = board.squares[i].saturating_add(1);
            *hand = hand.saturating_sub(1);
            s.square
        }
        step::Kind::Capture(c) => {
            let i = slot(c.square?)?;
            board.squares[i] = 0;
            board.pieces[i] = 0;
            if let Some(side) = Side::from_i32(c.player) {
                // Saturating: the numbers are the server's, and a hostile one may send any.
                let gained = i64::from(c.stones)
                    .saturating_add(i64::from(c.pieces).saturating_mul(i64::from(quan_value)));
                let score = board.score(side);
                *score = score.saturating_add(gained);
            }
            c.square
        }
        step::Kind::Refill(r) => {
            let side = Side::from_i32(r.player)?;
            for ring in side.own_ring_squares() {
                if let Some(i) = slot(ring) {
                    board.squares[i] = 1;
                }
            }
            *board.score(side) -= 5;
            None
        }
        step::Kind::GameOver(g) => {
            if let Some(c) = g.collected {
                board.scores[0] += i64::from(c.first);
                board.scores[1] += i64::from(c.second);
            }
            for side in [Side::First, Side::Second] {
                for ring in side.own_ring_squares() {
                    if let Some(i) = slot(ring) {
                        board.squares[i] = 0;
                    }
                }
            }
            None
        }
        step::Kind::StopAtMandarin(_)
        | step::Kind::StopTwoEmpty(_)
        | step::Kind::CaptureProtected(_)
        | step::Kind::CaptureImmature(_) => None,
    }
}

/// Squares in trace lines are ring indices, mandarin squares marked `Q`: `Q0`, `Q6`; `?` if the
/// server left the square out (it never does).
fn sq(ring: Option<u32>) -> String {
    match ring {
        Some(ring @ (0 | 6)) => format!("Q{ring}"),
        Some(ring) => ring.to_string(),
        None => "?".to_owned(),
    }
}

fn player_name(value: i32) -> &'static str {
    Side::from_i32(value).map_or("?", Side::name)
}

/// A move's trace as concise text lines (each starting with two spaces); consecutive sowings
/// are joined into one line.
pub fn trace_lines(steps: &[Step]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut sown: Vec<String> = Vec::new();
    let flush = |sown: &mut Vec<String>, lines: &mut Vec<String>| {
        if !sown.is_empty() {
            lines.push(format!("  sow {}", sown.join(" ")));
            sown.clear();
        }
    };
    for step in steps {
        let Some(kind) = step.kind.as_ref() else {
            continue;
        };
        if let step::Kind::Sow(s) = kind {
            sown.push(sq(s.square));
            continue;
        }
        flush(&mut sown, &mut lines);
        lines.push(match kind {
            step::Kind::PickUp(p) if p.relay => {
                format!("  relay: pick up {} from {}", p.stones, sq(p.square))
            }
            step::Kind::PickUp(p) => format!("  pick up {} from {}", p.stones, sq(p.square)),
            step::Kind::StopAtMandarin(s) => format!("  stop: next is mandarin {}", sq(s.square)),
            step::Kind::StopTwoEmpty(s) => {
                format!("  stop: {} and {} are empty", sq(s.gap), sq(s.next))
            }
            step::Kind::Capture(c) => {
                let pieces = if c.pieces > 0 {
                    " and the mandarin piece"
                } else {
                    ""
                };
                format!(
                    "  {} captures {} from {}{pieces}",
                    player_name(c.player),
                    c.stones,
                    sq(c.square)
                )
            }
            step::Kind::CaptureProtected(c) => {
                format!(
                    "  no capture: mandarin {} is protected in the opening",
                    sq(c.square)
                )
            }
            step::Kind::CaptureImmature(c) => {
                format!("  no capture: mandarin {} is immature", sq(c.square))
            }
            step::Kind::Refill(r) => format!(
                "  refill: {} puts 1 stone in each square (captured now {})",
                player_name(r.player),
                r.captured_after
            ),
            step::Kind::GameOver(g) => {
                let c = g.collected.unwrap_or_default();
                format!("  end of game: collected {}:{}", c.first, c.second)
            }
            step::Kind::Sow(_) => continue,
        });
    }
    flush(&mut sown, &mut lines);
    lines
}

/// Stones captured in a trace, as "6" or "6 and a mandarin piece" — for the one-line summary.
pub fn captured_total(steps: &[Step]) -> (u64, u32) {
    steps
        .iter()
        .filter_map(|s| match s.kind.as_ref() {
            Some(step::Kind::Capture(c)) => Some((u64::from(c.stones), c.pieces)),
            _ => None,
        })
        .fold((0, 0), |(s, p), (s2, p2)| (s + s2, p.saturating_add(p2)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oanquan_proto::v1::{PlayerPair, step::Kind};

    fn start() -> Position {
        Position {
            squares: vec![10, 5, 5, 5, 5, 5, 10, 5, 5, 5, 5, 5],
            pieces: vec![0; 12],
            scores: Some(PlayerPair {
                first: 0,
                second: 0,
            }),
            ..Position::default()
        }
    }

    /// A position where every square holds a distinct count, so the layout is unambiguous.
    fn distinct() -> BoardState {
        BoardState {
            squares: [20, 1, 2, 3, 4, 5, 26, 7, 8, 9, 10, 11],
            pieces: [0; 12],
            scores: [3, 4],
        }
    }

    fn view(bottom: Side) -> View<'static> {
        View {
            bottom,
            you: Some(bottom),
            names: ["alice", "bob"],
            to_move: Some(Side::First),
            highlight: None,
            hand: None,
            clocks: None,
            ratings: [None, None],
            width: None,
        }
    }

    #[test]
    fn a_long_name_is_shortened_to_keep_the_score_on_the_row() {
        let long = "b".repeat(32);
        let view = View {
            names: ["alice", &long],
            to_move: Some(Side::Second),
            width: Some(50),
            ..view(Side::First)
        };
        for style in [Style::PLAIN, Style::FANCY] {
            let top = &render(&distinct(), &view, style)[0];
            // Colour codes take no columns.
            assert_eq!(crate::output::columns(top), 50, "{top:?}");
            assert!(top.contains("b… "), "{top:?}");
        }
        let plain = render(&distinct(), &view, Style::PLAIN);
        assert!(plain[0].ends_with("score 4  <- to move"), "{plain:?}");
        // Narrower, the name would keep less than a few letters: the words go instead.
        let narrow = View {
            width: Some(40),
            ..view.clone()
        };
        let plain = render(&distinct(), &narrow, Style::PLAIN);
        assert_eq!(crate::output::columns(&plain[0]), 40, "{plain:?}");
        assert!(plain[0].ends_with("bbbb…  4 pts  <-"), "{plain:?}");
        // Names that fit are left alone.
        let lines = render(
            &distinct(),
            &View {
                width: Some(80),
                ..view
            },
            Style::PLAIN,
        );
        assert!(lines[0].contains(&long), "{lines:?}");
    }

    #[test]
    fn on_a_narrow_terminal_the_clock_and_turn_marker_stay_whole() {
        // An outside probe's 40 columns: `clock 0:5` for 0:59, and no turn marker.
        let view = View {
            names: ["Nguyen Thi Lan", "Computer (greedy)"],
            you: Some(Side::First),
            to_move: Some(Side::Second),
            clocks: Some(["2:51".to_owned(), "0:59".to_owned()]),
            ratings: [Some("1500?".to_owned()), None],
            width: Some(40),
            ..view(Side::First)
        };
        for style in [Style::PLAIN, Style::FANCY] {
            let lines = render(&distinct(), &view, style);
            let players: Vec<&String> = lines
                .iter()
                .filter(|line| line.contains("first") || line.contains("second"))
                .collect();
            assert_eq!(players.len(), 2, "{lines:#?}");
            for line in players {
                assert!(crate::output::columns(line) <= 40, "{line:?}");
            }
        }
        let plain = render(&distinct(), &view, Style::PLAIN);
        let second = plain.iter().find(|l| l.contains("second")).unwrap();
        assert!(second.ends_with("  0:59  <-"), "{second:?}");
        assert!(second.contains(" pts"), "{second:?}");
        let first = plain.iter().find(|l| l.contains("first")).unwrap();
        assert!(
            first.contains("(you)") && first.contains("2:51"),
            "{first:?}"
        );
        // Wide enough for the words: the full line as before.
        let wide = render(
            &distinct(),
            &View {
                width: Some(100),
                ..view
            },
            Style::PLAIN,
        );
        assert!(
            wide.iter().any(|l| l
                .ends_with("second player: Computer (greedy)  score 4  clock 0:59  <- to move")),
            "{wide:#?}"
        );
    }

    /// A seat's line keeps one form as the turn passes (an outside probe's 40-column
    /// terminal showed `second player: Computer (mas…` on one turn and `second: Computer
    /// (master)  0 pts` on the next), and no name is cut where the other form fits it.
    #[test]
    fn a_seats_line_keeps_its_form_whoever_is_to_move() {
        for width in [30, 40, 44, 50, 80] {
            let lines = |to_move| {
                let view = View {
                    names: ["Tester", "Computer (master)"],
                    to_move: Some(to_move),
                    width: Some(width),
                    ..view(Side::First)
                };
                let lines = render(&distinct(), &view, Style::PLAIN);
                (lines[0].clone(), lines[7].clone())
            };
            let (top_a, bottom_a) = lines(Side::First);
            let (top_b, bottom_b) = lines(Side::Second);
            let form = |line: &str| line.contains(" player: ");
            assert_eq!(form(&top_a), form(&top_b), "{width}: {top_a:?} / {top_b:?}");
            assert_eq!(
                form(&bottom_a),
                form(&bottom_b),
                "{width}: {bottom_a:?} / {bottom_b:?}"
            );
            for line in [&top_a, &top_b, &bottom_a, &bottom_b] {
                assert!(crate::output::columns(line) <= width, "{width}: {line:?}");
            }
            if width >= 40 {
                assert!(top_a.contains("Computer (master)"), "{width}: {top_a:?}");
                assert!(top_b.contains("Computer (master)"), "{width}: {top_b:?}");
            }
        }
    }

    /// Both players' lines take one form (an outside probe's board showed `second: Trần Hưng
    /// Đạo Quận M…  0 pts` above `first player: Nguy…  score 6`).
    #[test]
    fn both_players_lines_take_one_form() {
        let (top, bottom) = (
            "Trần Hưng Đạo Quận Một Hai Ba Bố",
            "Nguyễn Văn An Bình Chánh Dương",
        );
        for width in 30..=90 {
            for to_move in [Side::First, Side::Second] {
                let view = View {
                    names: [bottom, top],
                    to_move: Some(to_move),
                    width: Some(width),
                    ..view(Side::First)
                };
                let lines = render(&distinct(), &view, Style::PLAIN);
                let form = |line: &str| (line.contains(" player: "), line.contains(" pts"));
                assert_eq!(form(&lines[0]), form(&lines[7]), "{width}: {lines:#?}");
                for line in [&lines[0], &lines[7]] {
                    assert!(crate::output::columns(line) <= width, "{width}: {line:?}");
                }
            }
        }
    }

    #[test]
    fn a_short_name_keeps_the_clock_and_marker_on_a_narrow_terminal() {
        // An outside probe's `Lan` at 30 to 56 columns: the full words, the name cut to
        // `L…`, and the line wrapped through the clock.
        for width in [30, 38, 40, 44, 50, 56] {
            let view = View {
                names: ["Lan", "Computer (random)"],
                you: Some(Side::First),
                to_move: Some(Side::First),
                clocks: Some(["1:00".to_owned(), "1:00".to_owned()]),
                width: Some(width),
                ..view(Side::First)
            };
            let plain = render(&distinct(), &view, Style::PLAIN);
            let first = plain.iter().find(|l| l.contains("first")).unwrap();
            assert!(crate::output::columns(first) <= width, "{width}: {first:?}");
            // Whole from 38 columns on; at 30 even the words gone leave too little.
            if width >= 38 {
                assert!(first.contains("Lan (you)"), "{width}: {first:?}");
            }
            assert!(
                first.ends_with("1:00  <-") || first.ends_with("1:00  <- to move"),
                "{width}: {first:?}"
            );
        }
    }

    #[test]
    fn the_box_is_board_width_wide() {
        // Plain style: no colour codes, one column per character.
        let lines = render(&distinct(), &view(Side::First), Style::PLAIN);
        let widest = lines[1..6].iter().map(|l| l.chars().count()).max();
        assert_eq!(widest, Some(BOARD_WIDTH), "{lines:#?}");
    }

    #[test]
    fn a_narrow_terminal_gets_a_narrow_board_with_the_same_squares() {
        for style in [
            Style::PLAIN,
            Style {
                unicode: true,
                color: false,
            },
        ] {
            for bottom in [Side::First, Side::Second] {
                let wide = render(&distinct(), &view(bottom), style);
                let narrow_view = View {
                    width: Some(30),
                    ..view(bottom)
                };
                let narrow = render(&distinct(), &narrow_view, style);
                for line in &narrow[1..7] {
                    assert!(line.chars().count() <= NARROW_BOARD_WIDTH, "{narrow:#?}");
                    assert!(line.starts_with("  "), "{line}");
                }
                let box_width = narrow[1].chars().count();
                assert_eq!(box_width, NARROW_BOARD_WIDTH, "{narrow:#?}");
                for line in &narrow[1..6] {
                    assert_eq!(line.chars().count(), box_width, "{narrow:#?}");
                }
                // The same numbers on the same rows, the labels under their squares.
                for row in 2..=6 {
                    assert_eq!(numbers(&narrow[row]), numbers(&wide[row]), "{narrow:#?}");
                }
                let bottom_row = &narrow[4];
                for (i, label) in (1..=5).enumerate() {
                    let at = narrow[6].find(&label.to_string()).unwrap();
                    let cell = &bottom_row.chars().collect::<Vec<_>>()[at - 2..=at];
                    assert!(
                        cell.iter().any(char::is_ascii_digit),
                        "label {i} under a square: {narrow:#?}"
                    );
                }
            }
        }
    }

    /// Custom positions put up to 255 stones on a square, beside a mandarin piece too; the
    /// narrow board drew `Q100` over its border, and the full one `Q100 ` over it. Every
    /// count the rules allow now shows whole in the same box, and one they do not (from a
    /// server that breaks them) keeps the box's shape.
    #[test]
    fn the_largest_counts_keep_the_box_in_shape() {
        let crowded = BoardState {
            squares: [255, 100, 0, 0, 0, 0, 100, 0, 0, 0, 0, 0],
            pieces: [1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0],
            scores: [0, 0],
        };
        let broken = BoardState {
            squares: [u32::MAX, u32::MAX, 0, 0, 0, 0, 1_000, 0, 0, 0, 0, 0],
            pieces: [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            scores: [0, 0],
        };
        for style in [Style::PLAIN, Style::FANCY] {
            for bottom in [Side::First, Side::Second] {
                for width in [None, Some(30)] {
                    let view = View {
                        width,
                        ..view(bottom)
                    };
                    let box_width = if width.is_some() {
                        NARROW_BOARD_WIDTH
                    } else {
                        BOARD_WIDTH
                    };
                    for board in [&crowded, &broken] {
                        let lines = render(board, &view, style);
                        for line in &lines[1..6] {
                            assert_eq!(
                                crate::output::columns(line),
                                box_width,
                                "{width:?}: {lines:#?}"
                            );
                        }
                    }
                    let plain = render(&crowded, &view, Style::PLAIN);
                    let (left, right) = if bottom == Side::First {
                        (255, 100)
                    } else {
                        (100, 255)
                    };
                    assert_eq!(numbers(&plain[3]), vec![left, right], "{plain:#?}");
                    let q_in = |line: &str| line.matches('Q').count();
                    if width.is_some() {
                        // The Q of each mandarin square over its count, in the same column.
                        assert_eq!(q_in(&plain[2]), 2, "{plain:#?}");
                        assert_eq!(q_in(&plain[3]), 0, "{plain:#?}");
                        let q = plain[2].find('Q').unwrap();
                        assert!(plain[3][..=q].ends_with(char::is_numeric), "{plain:#?}");
                    } else {
                        assert!(plain[3].contains(&format!("Q{left}")), "{plain:#?}");
                        assert!(plain[3].contains(&format!("Q{right}")), "{plain:#?}");
                        assert_eq!(q_in(&plain[2]), 0, "{plain:#?}");
                    }
                    let plain = render(&broken, &view, Style::PLAIN);
                    assert!(plain[3].contains("9+"), "{plain:#?}");
                }
            }
        }
    }

    fn numbers(line: &str) -> Vec<u32> {
        line.split(|c: char| !c.is_ascii_digit())
            .filter_map(|t| t.parse().ok())
            .collect()
    }

    #[test]
    fn first_player_sees_the_rules_drawing() {
        let lines = render(&distinct(), &view(Side::First), Style::PLAIN);
        assert_eq!(numbers(&lines[2]), vec![11, 10, 9, 8, 7]);
        assert_eq!(numbers(&lines[3]), vec![20, 26]);
        assert_eq!(numbers(&lines[4]), vec![1, 2, 3, 4, 5]);
        assert_eq!(numbers(&lines[6]), vec![1, 2, 3, 4, 5]);
        assert!(
            lines[0].contains("second player: bob  score 4"),
            "{}",
            lines[0]
        );
        assert!(
            lines[7].contains("first player: alice (you)  score 3  <- to move"),
            "{}",
            lines[7]
        );
    }

    #[test]
    fn second_player_sees_it_rotated() {
        let lines = render(&distinct(), &view(Side::Second), Style::PLAIN);
        assert_eq!(numbers(&lines[2]), vec![5, 4, 3, 2, 1]);
        // Mandarin 6 is on North's left, 0 on their right.
        assert_eq!(numbers(&lines[3]), vec![26, 20]);
        assert_eq!(numbers(&lines[4]), vec![7, 8, 9, 10, 11]);
        assert!(lines[0].contains("first player: alice  score 3  <- to move"));
        assert!(lines[7].contains("second player: bob (you)  score 4"));
    }

    #[test]
    fn plain_mode_is_ascii_and_aligned() {
        let lines = render(
            &BoardState::from_position(&start()),
            &view(Side::First),
            Style::PLAIN,
        );
        let expected = [
            "  second player: bob  score 0",
            "  +----+----+----+----+----+----+----+",
            "  |    |  5 |  5 |  5 |  5 |  5 |    |",
            "  | 10 +----+----+----+----+----+ 10 |",
            "  |    |  5 |  5 |  5 |  5 |  5 |    |",
            "  +----+----+----+----+----+----+----+",
            "          1    2    3    4    5",
            "  first player: alice (you)  score 0  <- to move",
        ];
        assert_eq!(lines, expected);
        assert!(lines.iter().all(|l| l.is_ascii() && l.starts_with("  ")));
    }

    #[test]
    fn clocks_stand_next_to_their_player() {
        let mut v = view(Side::Second);
        v.clocks = Some(["4:59".to_owned(), "0:09.4".to_owned()]);
        let lines = render(&distinct(), &v, Style::PLAIN);
        assert_eq!(
            lines[0],
            "  first player: alice  score 3  clock 4:59  <- to move"
        );
        assert_eq!(
            lines[7],
            "  second player: bob (you)  score 4  clock 0:09.4"
        );
    }

    #[test]
    fn ratings_stand_next_to_their_names() {
        let mut v = view(Side::First);
        v.ratings = [Some("1523?".to_owned()), None];
        let lines = render(&distinct(), &v, Style::PLAIN);
        assert_eq!(lines[0], "  second player: bob  score 4");
        assert_eq!(
            lines[7],
            "  first player: alice (1523?) (you)  score 3  <- to move"
        );
        // An empty seat has no rating to show.
        v.names = ["", "bob"];
        let lines = render(&distinct(), &v, Style::PLAIN);
        assert!(
            lines[7].contains("first player: (empty seat) (you)"),
            "{}",
            lines[7]
        );
    }

    #[test]
    fn fancy_mode_uses_box_drawing_and_colour() {
        let lines = render(
            &BoardState::from_position(&start()),
            &view(Side::Second),
            Style::FANCY,
        );
        assert!(lines[1].starts_with("  ╭────┬"), "{}", lines[1]);
        assert!(lines[3].contains('├') && lines[3].contains('┤'));
        assert!(lines.iter().any(|l| l.contains("\x1b[")));
        let no_colour = render(
            &BoardState::from_position(&start()),
            &view(Side::Second),
            Style {
                unicode: true,
                color: false,
            },
        );
        assert!(no_colour.iter().all(|l| !l.contains('\x1b')));
        // Same width in every row: the box is closed.
        let widths: Vec<usize> = no_colour[1..6].iter().map(|l| l.chars().count()).collect();
        assert!(widths.windows(2).all(|w| w[0] == w[1]), "{widths:?}");
    }

    #[test]
    fn mandarin_pieces_and_garbage_positions_render() {
        let mut p = start();
        p.pieces = vec![1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0];
        p.squares = vec![0, 1, 2, 3, 4, 5, 3, 7, 8, 9, 10]; // one square short
        p.scores = None;
        let lines = render(
            &BoardState::from_position(&p),
            &view(Side::First),
            Style::PLAIN,
        );
        assert!(lines[3].contains("|  Q +"), "{}", lines[3]);
        assert!(lines[3].contains("+ Q3 |"), "{}", lines[3]);
        let lines = render(
            &BoardState::from_position(&Position::default()),
            &View {
                names: ["", ""],
                you: None,
                to_move: None,
                ..view(Side::First)
            },
            Style::PLAIN,
        );
        assert!(lines[0].contains("(empty seat)"));
    }

    fn st(kind: Kind) -> Step {
        Step { kind: Some(kind) }
    }

    /// RULES.md example 2: (1, +1) from the start captures square 2.
    fn example_two() -> Vec<Step> {
        let mut steps = vec![st(Kind::PickUp(step::PickUp {
            square: Some(1),
            stones: 5,
            relay: false,
        }))];
        steps.extend((2..=6).map(|s| st(Kind::Sow(step::Sow { square: Some(s) }))));
        steps.push(st(Kind::PickUp(step::PickUp {
            square: Some(7),
            stones: 5,
            relay: true,
        })));
        steps.extend([8, 9, 10, 11, 0].map(|s| st(Kind::Sow(step::Sow { square: Some(s) }))));
        steps.push(st(Kind::Capture(step::Capture {
            square: Some(2),
            stones: 6,
            pieces: 0,
            player: 1,
        })));
        steps
    }

    /// A hostile server's capture of u32::MAX pieces worth u32::MAX each, twice: the score
    /// saturates instead of overflowing (a panic in a debug build, a wrong score otherwise).
    #[test]
    fn a_capture_worth_more_than_a_score_holds_saturates() {
        let mut board = BoardState::from_position(&start());
        let mut hand = 0;
        let huge = st(Kind::Capture(step::Capture {
            square: Some(0),
            stones: u32::MAX,
            pieces: u32::MAX,
            player: 1,
        }));
        for _ in 0..2 {
            assert_eq!(replay_step(&mut board, &mut hand, &huge, u32::MAX), Some(0));
        }
        assert_eq!(*board.score(Side::First), i64::MAX);
    }

    #[test]
    fn replaying_a_trace_reaches_the_final_position() {
        let mut board = BoardState::from_position(&start());
        let mut hand = 0;
        for s in &example_two() {
            replay_step(&mut board, &mut hand, s, 10);
        }
        assert_eq!(board.squares, [11, 0, 0, 6, 6, 6, 11, 0, 6, 6, 6, 6]);
        assert_eq!(board.scores, [6, 0]);
        assert_eq!(hand, 0);
        // Out-of-range squares and empty steps are ignored, not a panic.
        let junk = [
            st(Kind::Sow(step::Sow { square: Some(99) })),
            Step { kind: None },
            st(Kind::Refill(step::Refill {
                player: 9,
                captured_after: 0,
            })),
        ];
        for s in &junk {
            replay_step(&mut board, &mut hand, s, 10);
        }
    }

    #[test]
    fn trace_lines_are_concise() {
        let lines = trace_lines(&example_two());
        assert_eq!(
            lines,
            [
                "  pick up 5 from 1",
                "  sow 2 3 4 5 Q6",
                "  relay: pick up 5 from 7",
                "  sow 8 9 10 11 Q0",
                "  first captures 6 from 2",
            ]
        );
        assert_eq!(captured_total(&example_two()), (6, 0));
    }
}
