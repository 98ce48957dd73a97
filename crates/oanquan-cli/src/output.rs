//! Writing to the terminal. A closed stdout or stderr is an error to return or to ignore, never
//! a panic as with `println!`; every command and the live view write through here.
//!
//! On a terminal, one line can be a *status line* that is rewritten in place (the ticking
//! clocks): either the last line, with the cursor at its end (`watch`), or the line just above
//! an input prompt (`play`), so that what the player is typing on the prompt line is never
//! touched. Any other output ends the status line's life: the next tick writes nothing until
//! a new status line is shown. Callers show status lines on terminals only.

use std::borrow::Cow;
use std::io::Write as _;
use std::sync::Mutex;

use crate::error::CliError;

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

/// At most this many characters of a server's message or description (see [`shown`]).
pub const MESSAGE_CHARS: usize = 200;

/// At most this many characters of a display name, username or id from the server (see
/// [`shown_name`]); a sane server sends names of at most 32.
pub const NAME_CHARS: usize = 64;

/// Text the server sent (a status message, a violation's description), as the terminal may
/// show it: see [`shown_at_most`], at most [`MESSAGE_CHARS`] characters.
pub fn shown(text: &str) -> Cow<'_, str> {
    shown_at_most(text, MESSAGE_CHARS)
}

/// A display name, username or id the server sent: see [`shown_at_most`], at most
/// [`NAME_CHARS`] characters.
pub fn shown_name(text: &str) -> Cow<'_, str> {
    shown_at_most(text, NAME_CHARS)
}

/// Server-supplied text made safe to print: control characters (C0 with newline and tab, DEL,
/// C1) and bidirectional controls (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C,
/// and the line and paragraph separators U+2028, U+2029) are written as visible escapes
/// (`\u{1b}`, `\n`, `\u{202e}`), so that a hostile server cannot clear the screen, retitle
/// the window, fake a prompt, reorder a line or break the line count the board's animation
/// redraws by. Longer than `max_chars` characters (counted after escaping), it is cut and ends
/// in `…`. Other text, Vietnamese, CJK or emoji, is left as it is (borrowed, not copied).
/// Applying it twice changes nothing more.
pub fn shown_at_most(text: &str, max_chars: usize) -> Cow<'_, str> {
    if !text.chars().any(escaped) && text.chars().nth(max_chars).is_none() {
        return Cow::Borrowed(text);
    }
    let mut out = String::new();
    let mut count = 0usize;
    let mut buf = [0u8; 4];
    for c in text.chars() {
        let escape;
        let piece = if !escaped(c) {
            &*c.encode_utf8(&mut buf)
        } else if c.is_control() {
            // `\n`, `\t`, `\r`, `\0` or `\u{1b}`.
            escape = c.escape_debug().to_string();
            escape.as_str()
        } else {
            escape = c.escape_unicode().to_string();
            escape.as_str()
        };
        let width = piece.chars().count();
        if count + width > max_chars {
            out.push('…');
            break;
        }
        count += width;
        out.push_str(piece);
    }
    Cow::Owned(out)
}

/// What [`shown_at_most`] writes as an escape: control characters (`char::is_control`: C0,
/// DEL, C1), bidirectional controls and the Unicode line and paragraph separators.
fn escaped(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{061c}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// Columns as wide as their widest cell, counted in characters (names such as "Computer
/// (random)" or "Lân" must not push the columns after them out of line). `right[i]` aligns
/// column `i` to the right.
pub fn table<const N: usize>(rows: &[[String; N]], right: &[bool; N]) -> Vec<String> {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    rows.iter()
        .map(|row| {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                let pad = " ".repeat(widths[i].saturating_sub(cell.chars().count()));
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
    fn server_text_is_shown_escaped_and_capped() {
        // Ordinary text, in any script, is left as it is (and not copied).
        for plain in [
            "Lan",
            "Nguyễn Thị Lân",
            "Ô Ăn Quan",
            "王小明",
            "🙂 đi nào 👍🏽",
            "unknown preset `chess`; \"quoted\" \\ too",
        ] {
            assert!(
                matches!(shown(plain), Cow::Borrowed(t) if t == plain),
                "{plain}"
            );
            assert!(matches!(shown_name(plain), Cow::Borrowed(_)), "{plain}");
        }
        // Escape sequences: a window title, a cleared screen, a cursor moved up.
        assert_eq!(shown("\x1b]0;pwned\x07x"), r"\u{1b}]0;pwned\u{7}x");
        assert_eq!(shown("a\x1b[2Jb\x1b[1A"), r"a\u{1b}[2Jb\u{1b}[1A");
        // A C1 control (CSI) and DEL.
        assert_eq!(shown("a\u{9b}2J\u{7f}"), r"a\u{9b}2J\u{7f}");
        // Newlines and tabs cannot fake a prompt or shift the lines the board redraws.
        assert_eq!(
            shown("refused\nyour move> \r\t"),
            r"refused\nyour move> \r\t"
        );
        assert!(!shown("a\nb\u{2028}c").contains(['\n', '\u{2028}']));
        // Bidirectional overrides and isolates cannot reorder what follows them.
        assert_eq!(shown_name("Lan\u{202e}gnp.exe"), r"Lan\u{202e}gnp.exe");
        for bidi in [
            '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200e}', '\u{200f}', '\u{61c}',
        ] {
            let text = format!("x{bidi}y");
            let cleaned = shown_name(&text);
            assert!(!cleaned.contains(bidi), "{bidi:?}");
            assert_eq!(cleaned, format!("x{}y", bidi.escape_unicode()));
        }
        // Long text is cut: names at 64 characters, messages at 200, then `…`.
        let name = "ễ".repeat(100);
        assert_eq!(shown_name(&name), format!("{}…", "ễ".repeat(NAME_CHARS)));
        assert_eq!(shown_name(&name[..64 * "ễ".len()]), "ễ".repeat(64));
        let message = "x".repeat(10_000);
        assert_eq!(shown(&message).chars().count(), MESSAGE_CHARS + 1);
        assert!(shown(&message).ends_with('…'));
        // The cap counts what is shown: escapes are not split, and cannot make it longer.
        let hostile = "\x1b".repeat(1_000);
        let cleaned = shown_name(&hostile);
        assert_eq!(cleaned, format!("{}…", r"\u{1b}".repeat(NAME_CHARS / 6)));
        // Showing shown text again changes nothing.
        for text in [&hostile, &name, &message, &"a\u{202e}\n".repeat(40)] {
            let once = shown_name(text).into_owned();
            assert_eq!(shown_name(&once), once);
            let once = shown(text).into_owned();
            assert_eq!(shown(&once), once);
        }
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
