//! Writing to the terminal. A closed stdout or stderr is an error to return or to ignore, never
//! a panic as with `println!`; every command and the live view write through here.

use std::io::Write as _;

use crate::error::CliError;

/// A failed write to stdout. Its reader going away (`oanquan watch G | head`) ends the command
/// quietly with exit 0 (see [`CliError::output_closed`]); any other failure is reported.
fn stdout_error(err: &std::io::Error) -> CliError {
    if err.kind() == std::io::ErrorKind::BrokenPipe {
        CliError::output_closed()
    } else {
        CliError::io("writing to standard output", err)
    }
}

/// Writes lines to stdout. A closed stdout is an error to return, not a panic as with
/// `println!`.
pub fn out(text: impl std::fmt::Display) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}")
        .and_then(|()| stdout.flush())
        .map_err(|e| stdout_error(&e))
}

pub fn out_lines(lines: &[String]) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    lines
        .iter()
        .try_for_each(|l| writeln!(stdout, "{l}"))
        .and_then(|()| stdout.flush())
        .map_err(|e| stdout_error(&e))
}

/// A line on stderr. Unlike `eprintln!`, a closed stderr is ignored rather than a panic: there
/// is nowhere left to report it.
pub fn note(text: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// Writes without a newline (an interactive prompt).
pub fn out_inline(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{text}")
        .and_then(|()| stdout.flush())
        .map_err(|e| stdout_error(&e))
}
