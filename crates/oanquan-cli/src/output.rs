//! Writing to the terminal. A closed stdout or stderr is an error to return or to ignore, never
//! a panic as with `println!`; every command and the live view write through here.
//!
//! On a terminal, one line can be a *status line* that is rewritten in place (the ticking
//! clocks): either the last line, with the cursor at its end (`watch`), or the line just above
//! an input prompt (`play`), so that what the player is typing on the prompt line is never
//! touched. Any other output ends the life of a status line at the cursor: the next tick
//! writes nothing until a new status line is shown. Callers show status lines on terminals
//! only.
//!
//! An input prompt on screen (`your move> `) is known here too, so that a message arriving
//! while it waits (a move, an offer, a notice) is written in its place and the prompt (with
//! the status line over it) drawn again below, instead of the message running on after it.

use std::io::Write as _;
use std::sync::Mutex;

use unicode_width::UnicodeWidthStr as _;

use crate::error::CliError;
pub use crate::shown::{shown, shown_name};

/// `1 move`, `0 moves`, `2 moves`: a count with its noun, in the plural unless it is one.
pub fn counted(count: impl Into<u64>, noun: &str) -> String {
    match count.into() {
        1 => format!("1 {noun}"),
        count => format!("{count} {noun}s"),
    }
}

/// Where the status line is, if one is on screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    None,
    /// The cursor is at the end of the status line (no newline after it).
    AtCursor,
    /// The status line is just above the prompt line the cursor is on.
    AbovePrompt,
}

/// What is on the last lines of the terminal that later output must step around.
#[derive(Debug)]
struct Screen {
    status: Status,
    /// The status line's text, to draw it again above the prompt after a message.
    status_text: String,
    /// The input prompt the cursor stands after (behind what is being typed), if any. A message
    /// printed meanwhile must not land inside the prompt's line: it takes the prompt's place,
    /// and the prompt is drawn again below it.
    prompt: Option<String>,
}

static SCREEN: Mutex<Screen> = Mutex::new(Screen {
    status: Status::None,
    status_text: String::new(),
    prompt: None,
});

fn screen() -> std::sync::MutexGuard<'static, Screen> {
    SCREEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Clear to the end of the line, after a carriage return.
const ERASE_LINE: &str = "\r\x1b[K";

/// What to write before a message and after it, so that the message comes out on lines of its
/// own: above the prompt (and above the status line over it), never after them on their line.
/// A status line at the cursor is erased and forgotten, as its owner shows it again.
fn around_message(screen: &mut Screen) -> (String, String) {
    let Some(prompt) = screen.prompt.as_deref() else {
        let before = match screen.status {
            Status::AtCursor => ERASE_LINE,
            Status::None | Status::AbovePrompt => "",
        };
        screen.status = Status::None;
        return (before.to_owned(), String::new());
    };
    // What is typed at the prompt is erased from the screen with it, but stays in the
    // terminal's line buffer: Enter still sends it whole.
    if screen.status == Status::AbovePrompt {
        (
            format!("{ERASE_LINE}\x1b[1A{ERASE_LINE}"),
            format!("{}\n{prompt}", screen.status_text),
        )
    } else {
        screen.status = Status::None;
        (ERASE_LINE.to_owned(), prompt.to_owned())
    }
}

/// A failed write to stdout. Its reader going away (`oanquan watch G | head`) ends the command
/// quietly with exit 0 (see [`CliError::output_closed`]); any other failure is reported.
fn stdout_error(err: &std::io::Error) -> CliError {
    if err.kind() == std::io::ErrorKind::BrokenPipe {
        CliError::output_closed()
    } else {
        CliError::io("writing to standard output", err)
    }
}

/// Whether standard output is a pipe whose reader has gone. A write would tell, but a quiet
/// game writes nothing: an outside probe's `oanquan watch G | head -1` ran on for good after
/// `head` had exited. The kernel reports the closed reader on the pipe's end as an error
/// condition, which `poll` sees without writing.
#[cfg(unix)]
pub fn stdout_reader_gone() -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(poll(&mut fds, Some(&now)), Ok(n) if n > 0)
        && fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP)
}

/// Elsewhere only a write tells.
#[cfg(not(unix))]
pub fn stdout_reader_gone() -> bool {
    false
}

fn write_stdout(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| stdout_error(&e))
}

/// Writes lines to stdout. A closed stdout is an error to return, not a panic as with
/// `println!`.
pub fn out(text: impl std::fmt::Display) -> Result<(), CliError> {
    let mut screen = screen();
    let (before, after) = around_message(&mut screen);
    write_stdout(&format!("{before}{text}\n{after}"))
}

pub fn out_lines(lines: &[String]) -> Result<(), CliError> {
    let mut screen = screen();
    let (before, after) = around_message(&mut screen);
    let mut text = before;
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str(&after);
    write_stdout(&text)
}

/// A line on stderr. Unlike `eprintln!`, a closed stderr is ignored rather than a panic: there
/// is nowhere left to report it.
pub fn note(text: impl std::fmt::Display) {
    let mut screen = screen();
    let (before, after) = around_message(&mut screen);
    if !before.is_empty() {
        let _ = write_stdout(&before);
    }
    let _ = writeln!(std::io::stderr().lock(), "{text}");
    if !after.is_empty() {
        let _ = write_stdout(&after);
    }
}

/// Writes without a newline at the cursor: a question answered before anything else is
/// printed, or the cursor moves of the board's animation. A prompt or status line on screen
/// is erased and forgotten first.
pub fn out_inline(text: &str) -> Result<(), CliError> {
    let mut screen = screen();
    let before = take_off(&mut screen);
    write_stdout(&format!("{before}{text}"))
}

/// Erases the prompt and the status line over it, or a status line at the cursor, and forgets
/// them; returns what to write for that.
fn take_off(screen: &mut Screen) -> &'static str {
    let before = match (screen.prompt.is_some(), screen.status) {
        (true, Status::AbovePrompt) => "\r\x1b[K\x1b[1A\r\x1b[K",
        (true, _) | (false, Status::AtCursor) => ERASE_LINE,
        (false, Status::None | Status::AbovePrompt) => "",
    };
    screen.prompt = None;
    screen.status = Status::None;
    before
}

/// A prompt (and its status line) taken off the screen for a while, to show again.
#[derive(Debug)]
#[must_use = "the prompt is gone until shown again"]
pub struct Hidden {
    prompt: Option<String>,
    status: Option<String>,
}

impl Hidden {
    /// The status line to show over the prompt when it comes back: `now`, the line as it reads
    /// at that moment, rather than the one taken off (the clocks of an animation's start, up to
    /// a tick behind, and from before the move's new reading). Only a prompt that had a status
    /// line gets one back; `None` shows the prompt without it (the clocks stopped).
    pub fn with_status(mut self, now: Option<String>) -> Self {
        if self.status.is_some() {
            self.status = now;
        }
        self
    }
}

/// Takes the prompt off the screen while something redraws the lines above the cursor by
/// counting them (the board's animation), which a prompt drawn again after each frame would
/// throw off by one.
pub fn hide_prompt() -> Result<Hidden, CliError> {
    let mut screen = screen();
    let hidden = Hidden {
        prompt: screen.prompt.clone(),
        status: (screen.status == Status::AbovePrompt).then(|| screen.status_text.clone()),
    };
    let before = take_off(&mut screen);
    write_stdout(before)?;
    Ok(hidden)
}

/// Shows a prompt hidden by [`hide_prompt`] again, if there was one.
pub fn show_prompt(hidden: Hidden) -> Result<(), CliError> {
    match hidden {
        Hidden {
            prompt: Some(prompt),
            status: Some(status),
        } => status_above_prompt(&status, &prompt),
        Hidden {
            prompt: Some(prompt),
            status: None,
        } => self::prompt(&prompt),
        Hidden { prompt: None, .. } => Ok(()),
    }
}

/// Shows an input prompt (terminals only), in place of the one on screen if there is one.
/// Messages printed while it is shown go above it; [`input_read`] says it was answered.
pub fn prompt(text: &str) -> Result<(), CliError> {
    let mut screen = screen();
    // A status line over the prompt being replaced goes with it: this prompt has none.
    let before = take_off(&mut screen);
    screen.prompt = Some(text.to_owned());
    write_stdout(&format!("{before}{text}"))
}

/// Whether an input prompt is on screen, unanswered.
pub fn prompt_shown() -> bool {
    screen().prompt.is_some()
}

/// A line was typed at the prompt: the terminal's echo of Enter moved the cursor below it, so
/// the prompt and the status line above it are no longer where the next output would step
/// around them.
pub fn input_read() {
    let mut screen = screen();
    screen.prompt = None;
    if screen.status == Status::AbovePrompt {
        screen.status = Status::None;
    }
}

/// Takes the prompt and the status line off the screen and forgets them, before something
/// writes on the terminal without going through here (the reconnect line on stderr). Whoever
/// shows the prompt again does so later.
pub fn clear_status() {
    let mut screen = screen();
    let before = take_off(&mut screen);
    if !before.is_empty() {
        let _ = write_stdout(before);
    }
}

/// Shows `text` as the status line at the cursor (terminals only), replacing the current one.
pub fn status_at_cursor(text: &str) -> Result<(), CliError> {
    let mut screen = screen();
    let before = take_off(&mut screen);
    let text = fit_marked(text, terminal_width());
    write_stdout(&format!("{before}{text}"))?;
    screen.status = Status::AtCursor;
    Ok(())
}

/// Shows `line` as the status line, then the prompt below it (terminals only).
pub fn status_above_prompt(line: &str, prompt: &str) -> Result<(), CliError> {
    let mut screen = screen();
    // A prompt already on screen (and its status line) is replaced, not pushed down.
    let before = take_off(&mut screen);
    // One row exactly: the ticks move the cursor up by one to reach it.
    let line = fit_marked(line, terminal_width()).into_owned();
    write_stdout(&format!("{before}{line}\n{prompt}"))?;
    screen.status = Status::AbovePrompt;
    screen.status_text = line;
    screen.prompt = Some(prompt.to_owned());
    Ok(())
}

/// Rewrites the status line in place, if one is on screen; otherwise writes nothing.
pub fn tick(text: &str) -> Result<(), CliError> {
    let mut screen = screen();
    let text = fit_marked(text, terminal_width()).into_owned();
    match tick_sequence(screen.status, &text) {
        Some(sequence) => {
            screen.status_text = text;
            write_stdout(&sequence)
        }
        None => Ok(()),
    }
}

/// What [`tick`] writes for a status line at `status`.
fn tick_sequence(status: Status, text: &str) -> Option<String> {
    match status {
        Status::None => None,
        Status::AtCursor => Some(format!("{ERASE_LINE}{text}")),
        // Save the cursor (on the prompt line, after what is typed), rewrite the line above,
        // restore the cursor.
        Status::AbovePrompt => Some(format!("\x1b7\x1b[1A{ERASE_LINE}{text}\x1b8")),
    }
}

/// The terminal's width in columns, if standard output is a terminal that tells.
pub fn terminal_width() -> Option<usize> {
    #[cfg(unix)]
    {
        rustix::termios::tcgetwinsize(std::io::stdout())
            .ok()
            .map(|size| usize::from(size.ws_col))
            .filter(|&cols| cols > 0)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The terminal columns `text` takes; escape sequences (colours) take none.
pub fn columns(text: &str) -> usize {
    fit_at(text, usize::MAX).1
}

/// Where to cut `text` to fit `width` columns (its length if it fits), and the columns kept.
fn fit_at(text: &str, width: usize) -> (usize, usize) {
    use unicode_width::UnicodeWidthChar as _;
    let mut used = 0usize;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ parameters, then a final byte in @..~.
            if chars.next_if(|&(_, c)| c == '[').is_some() {
                for (_, c) in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        let w = c.width().unwrap_or(0);
        if used.saturating_add(w) > width {
            return (at, used);
        }
        used += w;
    }
    (text.len(), used)
}

/// `text` cut to `width` terminal columns (`None`: as it is), so that it takes one row: a line
/// that wraps takes two, and whatever moves the cursor up by a count of lines to redraw them
/// would land on the wrong one. Escape sequences (colours) take no columns and are kept; a cut
/// line ends with a reset, in case the cut fell inside a coloured part.
pub fn fit(text: &str, width: Option<usize>) -> std::borrow::Cow<'_, str> {
    let Some(width) = width else {
        return text.into();
    };
    let (at, _) = fit_at(text, width);
    if at == text.len() {
        return text.into();
    }
    let mut cut = text[..at].to_owned();
    if cut.contains('\x1b') {
        cut.push_str("\x1b[0m");
    }
    cut.into()
}

/// [`fit`], with `…` in the last column of a line it cuts: a clock line cut to `second 1:0`
/// read as a wrong time.
pub fn fit_marked(text: &str, width: Option<usize>) -> std::borrow::Cow<'_, str> {
    match width {
        Some(width) if fit_at(text, width).0 < text.len() => {
            let mut cut = fit(text, Some(width.saturating_sub(1))).into_owned();
            if width > 0 {
                cut.push('…');
            }
            cut.into()
        }
        _ => text.into(),
    }
}

/// Columns as wide as their widest cell, in terminal columns (names such as "Computer
/// (random)", "Lân" or "Lan 🐉" must not push the columns after them out of line: the dragon
/// takes two columns, a combining accent none). `right[i]` aligns column `i` to the right.
/// On a terminal the rows fit its width: the widest columns give way first (down to
/// [`NARROWEST_COLUMN`]), their cells cut with `…`; a public lobby's 32-character name must not
/// wrap every row of `list`. The first column, which names the row (a game's or key's id, a
/// rank), is never cut: an id cut short is no use to copy.
pub fn table<const N: usize>(rows: &[[String; N]], right: &[bool; N]) -> Vec<String> {
    table_within(rows, right, 0, terminal_width())
}

/// [`table`] whose id is column `whole` rather than the first (`games`: its date comes first,
/// and an outside probe's 80-column terminal cut the game's id there).
pub fn table_keeping<const N: usize>(
    rows: &[[String; N]],
    right: &[bool; N],
    whole: usize,
) -> Vec<String> {
    table_within(rows, right, whole, terminal_width())
}

/// A column is not narrowed below this many terminal columns to fit the terminal.
const NARROWEST_COLUMN: usize = 8;

/// [`table`] for a terminal `width` columns wide (`None`: not a terminal, nothing is cut),
/// column `whole` never cut.
fn table_within<const N: usize>(
    rows: &[[String; N]],
    right: &[bool; N],
    whole: usize,
    width: Option<usize>,
) -> Vec<String> {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.width());
        }
    }
    if let Some(room) = width {
        let gaps = N.saturating_sub(1);
        while widths.iter().sum::<usize>() + gaps > room {
            let Some(widest) = (0..N)
                .filter(|&i| i != whole && widths[i] > NARROWEST_COLUMN)
                .max_by_key(|&i| widths[i])
            else {
                break;
            };
            widths[widest] -= 1;
        }
    }
    rows.iter()
        .map(|row| {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                let cut;
                let cell = if cell.width() > widths[i] {
                    // One column for the ellipsis.
                    cut = format!("{}…", fit(cell, Some(widths[i].saturating_sub(1))));
                    &cut
                } else {
                    cell
                };
                let pad = " ".repeat(widths[i].saturating_sub(cell.width()));
                if i > 0 {
                    line.push(' ');
                }
                if right[i] {
                    line.push_str(&pad);
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    // No trailing blanks after the last column.
                    if i + 1 < N {
                        line.push_str(&pad);
                    }
                }
            }
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_of_one_is_singular() {
        assert_eq!(counted(0u32, "move"), "0 moves");
        assert_eq!(counted(1u32, "move"), "1 move");
        assert_eq!(counted(2u32, "move"), "2 moves");
        assert_eq!(counted(u32::MAX, "move"), "4294967295 moves");
    }

    #[test]
    fn table_widths_count_the_shown_text() {
        let hostile = "Lan\u{202e}\x1b[2J";
        let rows = [
            ["NAME".to_owned(), "N".to_owned()],
            [shown_name(hostile).into_owned(), "1".to_owned()],
            ["Minh".to_owned(), "2".to_owned()],
        ];
        let lines = table(&rows, &[false, true]);
        assert_eq!(lines[1], r"Lan\u{202e}\u{1b}[2J 1");
        assert_eq!(lines[2].chars().count(), lines[1].chars().count());
    }

    /// An outside probe's 32-character CJK name (64 columns) wrapped every row of `list`.
    #[test]
    fn on_a_terminal_the_widest_columns_give_way() {
        let name = "漢字".repeat(16);
        let rows = [
            ["ID".to_owned(), "PLAYERS".to_owned(), "STATUS".to_owned()],
            [
                "410d12kjyxjk0j30".to_owned(),
                name.clone(),
                "waiting".to_owned(),
            ],
            ["abc".to_owned(), "Lan".to_owned(), "active".to_owned()],
        ];
        let right = [false; 3];
        let lines = table_within(&rows, &right, 0, Some(40));
        for line in &lines {
            assert!(line.width() <= 40, "{line:?} is {} wide", line.width());
        }
        assert!(lines[1].contains('…'), "{lines:#?}");
        assert!(lines[1].starts_with("410d12kjyxjk0j30 "), "{lines:#?}");
        // The columns still line up.
        let at = |line: &str| line.find("waiting").or_else(|| line.find("active"));
        assert_eq!(
            lines[1][..at(&lines[1]).unwrap()].width(),
            lines[2][..at(&lines[2]).unwrap()].width()
        );
        // Off a terminal nothing is cut.
        assert!(table_within(&rows, &right, 0, None)[1].contains(&name));
        // A terminal too narrow for even the narrowest columns gets them at that width, and
        // the first column whole.
        let narrow = table_within(&rows, &right, 0, Some(5));
        assert!(
            narrow.iter().all(|l| l.width() <= 16 + 1 + 8 + 1 + 7),
            "{narrow:#?}"
        );
        assert!(narrow[1].starts_with("410d12kjyxjk0j30 "), "{narrow:#?}");
    }

    /// `games` names its rows by the game's id in its second column, after the date.
    #[test]
    fn a_table_keeps_its_id_column_whole_wherever_it_stands() {
        let rows = [
            ["DATE", "GAME", "RESULT", "OPPONENT"].map(str::to_owned),
            [
                "2026-12-07",
                "rvfmc8mmr6bana7x",
                "draw (mandarins captured)",
                "Mai (1500?)",
            ]
            .map(str::to_owned),
        ];
        for width in [30, 40, 80] {
            let lines = table_within(&rows, &[false; 4], 1, Some(width));
            assert!(
                lines[1].contains("rvfmc8mmr6bana7x "),
                "{width}: {lines:#?}"
            );
            assert!(
                lines[1].width() <= width.max(8 + 1 + 16 + 1 + 8 + 1 + 8),
                "{lines:#?}"
            );
        }
    }

    #[test]
    fn table_columns_line_up_by_display_width() {
        let rows = [
            ["NAME".to_owned(), "N".to_owned()],
            ["Lan 🐉".to_owned(), "1".to_owned()],
            // "Lân" with a combining circumflex: four characters, three columns.
            ["La\u{302}n".to_owned(), "2".to_owned()],
            ["中文".to_owned(), "3".to_owned()],
        ];
        let lines = table(&rows, &[false, true]);
        let widths: Vec<usize> = lines.iter().map(|l| l.width()).collect();
        assert_eq!(widths, [8, 8, 8, 8], "{lines:#?}");
        assert_eq!(lines[1], "Lan 🐉 1");
        assert_eq!(lines[2], "La\u{302}n    2");
    }

    #[test]
    fn ticks_rewrite_only_their_own_line() {
        assert_eq!(tick_sequence(Status::None, "x"), None);
        assert_eq!(
            tick_sequence(Status::AtCursor, "clocks: a").as_deref(),
            Some("\r\x1b[Kclocks: a")
        );
        let above = tick_sequence(Status::AbovePrompt, "clocks: b").expect("a sequence");
        // The cursor comes back where it was: on the prompt line, after the typed text.
        assert!(above.starts_with("\x1b7\x1b[1A\r\x1b[K"), "{above:?}");
        assert!(above.ends_with("clocks: b\x1b8"), "{above:?}");
        assert!(!above.contains('\n'));
    }

    #[test]
    fn fitted_lines_take_one_row_and_keep_their_colours() {
        assert_eq!(fit("abcdef", Some(4)), "abcd");
        assert_eq!(fit_marked("abcdef", Some(4)), "abc…");
        assert_eq!(
            fit_marked("clocks: first 1:00, second 1:00", Some(30)),
            "clocks: first 1:00, second 1:…"
        );
        assert_eq!(fit_marked("abcdef", Some(0)), "");
        assert_eq!(fit_marked("abcdef", Some(6)), "abcdef");
        assert_eq!(fit_marked("abcdef", None), "abcdef");
        assert_eq!(fit("abcdef", None), "abcdef");
        assert_eq!(fit("abc", Some(3)), "abc");
        // Escape sequences take no columns; a cut inside colour ends with a reset.
        assert_eq!(
            fit("  \x1b[1m12\x1b[0m  score", Some(5)),
            "  \x1b[1m12\x1b[0m \x1b[0m"
        );
        // A two-column letter that would straddle the edge is left out whole.
        assert_eq!(fit("ab🐉", Some(3)), "ab");
        assert_eq!(fit("", Some(0)), "");
    }

    fn on_screen(prompt: Option<&str>, status: Status) -> Screen {
        Screen {
            status,
            status_text: "clocks: 4:59".to_owned(),
            prompt: prompt.map(str::to_owned),
        }
    }

    #[test]
    fn a_message_takes_the_prompts_place_and_the_prompt_comes_back_below() {
        let mut screen = on_screen(Some("your move> "), Status::None);
        assert_eq!(
            around_message(&mut screen),
            ("\r\x1b[K".to_owned(), "your move> ".to_owned())
        );
        assert_eq!(screen.prompt.as_deref(), Some("your move> "));

        // The clocks over the prompt go up with it, so that ticks still find them one row up.
        let mut screen = on_screen(Some("your move> "), Status::AbovePrompt);
        let (before, after) = around_message(&mut screen);
        assert_eq!(before, "\r\x1b[K\x1b[1A\r\x1b[K");
        assert_eq!(after, "clocks: 4:59\nyour move> ");
        assert_eq!(screen.status, Status::AbovePrompt);

        // No prompt: a status line at the cursor is erased and forgotten, as before.
        let mut screen = on_screen(None, Status::AtCursor);
        assert_eq!(
            around_message(&mut screen),
            ("\r\x1b[K".to_owned(), String::new())
        );
        assert_eq!(screen.status, Status::None);
        let mut screen = on_screen(None, Status::None);
        assert_eq!(around_message(&mut screen), (String::new(), String::new()));
    }

    #[test]
    fn a_prompt_shown_again_carries_the_status_line_as_it_reads_now() {
        let hidden = |status: Option<&str>| Hidden {
            prompt: Some("your move> ".to_owned()),
            status: status.map(str::to_owned),
        };
        let now = || Some("clocks: first 4:51 (running), second 5:02".to_owned());
        let shown = hidden(Some("clocks: first 4:58, second 5:00 (running)")).with_status(now());
        assert_eq!(shown.status, now());
        assert_eq!(shown.prompt.as_deref(), Some("your move> "));
        // A prompt without clocks over it does not get them; clocks that stopped go away.
        assert_eq!(hidden(None).with_status(now()).status, None);
        assert_eq!(hidden(Some("clocks: old")).with_status(None).status, None);
    }

    #[test]
    fn taking_the_prompt_off_erases_its_rows_and_forgets_it() {
        let mut screen = on_screen(Some("your move> "), Status::AbovePrompt);
        assert_eq!(take_off(&mut screen), "\r\x1b[K\x1b[1A\r\x1b[K");
        assert_eq!((screen.prompt, screen.status), (None, Status::None));
        let mut screen = on_screen(None, Status::None);
        assert_eq!(take_off(&mut screen), "");
    }
}
