//! Writing to the terminal. A closed stdout or stderr is an error to return or to ignore, never
//! a panic as with `println!`; every command and the live view write through here.
//!
//! On a terminal, one line can be a *status line* that is rewritten in place (the ticking
//! clocks): either the last line, with the cursor at its end (`watch`), or the line just above
//! an input prompt (`play`), so that what the player is typing on the prompt line is never
//! touched. Any other output ends the status line's life: the next tick writes nothing until
//! a new status line is shown. Callers show status lines on terminals only.

use std::io::Write as _;
use std::sync::Mutex;

use unicode_width::UnicodeWidthStr as _;

use crate::error::CliError;
pub use crate::shown::{shown, shown_name};

/// Where the status line is, if one is on screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    None,
    /// The cursor is at the end of the status line (no newline after it).
    AtCursor,
    /// The status line is just above the prompt line the cursor is on.
    AbovePrompt,
}

static STATUS: Mutex<Status> = Mutex::new(Status::None);

/// Clear to the end of the line, after a carriage return.
const ERASE_LINE: &str = "\r\x1b[K";

/// Forgets the status line; returns what to write first so that the next output does not end
/// up after it on the same line.
fn take_status() -> &'static str {
    let mut status = STATUS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let prefix = match *status {
        Status::AtCursor => ERASE_LINE,
        Status::None | Status::AbovePrompt => "",
    };
    *status = Status::None;
    prefix
}

fn set_status(value: Status) {
    *STATUS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = value;
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
    write_stdout(&format!("{}{text}\n", take_status()))
}

pub fn out_lines(lines: &[String]) -> Result<(), CliError> {
    let mut text = take_status().to_owned();
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    write_stdout(&text)
}

/// A line on stderr. Unlike `eprintln!`, a closed stderr is ignored rather than a panic: there
/// is nowhere left to report it.
pub fn note(text: impl std::fmt::Display) {
    clear_status();
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// Writes without a newline (an interactive prompt).
pub fn out_inline(text: &str) -> Result<(), CliError> {
    write_stdout(&format!("{}{text}", take_status()))
}

/// Erases a status line at the cursor and forgets it, before something else (stderr) writes
/// on the terminal.
pub fn clear_status() {
    let prefix = take_status();
    if !prefix.is_empty() {
        let _ = write_stdout(prefix);
    }
}

/// Shows `text` as the status line at the cursor (terminals only), replacing the current one.
pub fn status_at_cursor(text: &str) -> Result<(), CliError> {
    write_stdout(&format!("{}{text}", take_status()))?;
    set_status(Status::AtCursor);
    Ok(())
}

/// Shows `line` as the status line, then the prompt below it (terminals only).
pub fn status_above_prompt(line: &str, prompt: &str) -> Result<(), CliError> {
    write_stdout(&format!("{}{line}\n{prompt}", take_status()))?;
    set_status(Status::AbovePrompt);
    Ok(())
}

/// Rewrites the status line in place, if one is on screen; otherwise writes nothing.
pub fn tick(text: &str) -> Result<(), CliError> {
    let status = *STATUS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match tick_sequence(status, text) {
        Some(sequence) => write_stdout(&sequence),
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

/// Columns as wide as their widest cell, in terminal columns (names such as "Computer
/// (random)", "Lân" or "Lan 🐉" must not push the columns after them out of line: the dragon
/// takes two columns, a combining accent none). `right[i]` aligns column `i` to the right.
pub fn table<const N: usize>(rows: &[[String; N]], right: &[bool; N]) -> Vec<String> {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.width());
        }
    }
    rows.iter()
        .map(|row| {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
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
}
