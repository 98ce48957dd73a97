//! The global options, resolved once into what every command is given.

use std::io::IsTerminal as _;
use std::path::PathBuf;

use crate::account_file::{Account, AccountFile};
use crate::board::Style;
use crate::cli::Global;
use crate::client::Server;
use crate::error::CliError;
use crate::tokens::TokenStore;

/// What every subcommand needs to know about the invocation and the terminal.
#[derive(Debug)]
pub struct Context {
    /// `--server` and `--ca-cert`: where to connect and how (its `name` is the token file's key).
    pub server: Server,
    pub json: bool,
    pub style: Style,
    pub stdout_tty: bool,
    pub stdin_tty: bool,
    config_dir: Option<PathBuf>,
    /// `--seat-from`: where the seats of a server that moved were saved.
    pub seat_from: Option<String>,
}

impl Context {
    /// The context the global options describe.
    pub fn new(global: &Global) -> Result<Self, CliError> {
        // A terminal that takes no cursor control is written to as a pipe is: stable lines,
        // no status line redrawn in place, no animation, no prompt redrawn under a message.
        let stdout_tty = std::io::stdout().is_terminal() && !dumb_terminal();
        Ok(Context {
            server: Server::new(&global.server, global.ca_cert.as_deref())?,
            json: global.json,
            style: style(stdout_tty, global.plain),
            stdout_tty,
            stdin_tty: std::io::stdin().is_terminal(),
            config_dir: global.config_dir.clone(),
            seat_from: global.seat_from.clone(),
        })
    }

    pub fn token_store(&self) -> Result<TokenStore, CliError> {
        TokenStore::locate(self.config_dir.as_deref())
    }

    /// The account file, next to the token file.
    pub fn account_file(&self) -> Result<AccountFile, CliError> {
        Ok(AccountFile::new(self.token_store()?.dir()))
    }

    /// The account stored for this server, if any.
    pub fn account(&self) -> Result<Option<Account>, CliError> {
        self.account_file()?.get(&self.server.name)
    }
}

/// Whether `TERM` says the terminal takes no escape sequences at all (`dumb`: Emacs's
/// `M-x shell`, some CI logs). An outside probe found cursor movements redrawing the clocks
/// every second there.
pub fn dumb_terminal() -> bool {
    std::env::var("TERM").is_ok_and(|term| term == "dumb")
}

/// Box drawing and colour only for a person at a terminal who has not opted out
/// (https://no-color.org: NO_COLOR set to anything non-empty), whose terminal takes escape
/// sequences (not `TERM=dumb`) and whose locale writes UTF-8.
fn style(stdout_tty: bool, plain: bool) -> Style {
    let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    if stdout_tty && !plain && terminal_takes_fancy(var) {
        Style::FANCY
    } else {
        Style::PLAIN
    }
}

/// Whether the environment `var` reads allows colour and box drawing. A locale is the first
/// of `LC_ALL`, `LC_CTYPE` and `LANG` that is set; none set is taken as UTF-8, as terminals
/// are these days.
fn terminal_takes_fancy(var: impl Fn(&str) -> Option<String>) -> bool {
    let utf8 = ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .find_map(|name| var(name))
        .is_none_or(|locale| {
            let locale = locale.to_ascii_lowercase();
            locale.contains("utf-8") || locale.contains("utf8")
        });
    var("NO_COLOR").is_none() && var("TERM").is_none_or(|term| term != "dumb") && utf8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumb_terminals_no_color_and_other_locales_get_plain_output() {
        let with = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            terminal_takes_fancy(move |name| {
                pairs
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            })
        };
        assert!(with(&[]));
        assert!(with(&[("TERM", "xterm-256color"), ("LANG", "vi_VN.UTF-8")]));
        assert!(with(&[("LC_ALL", "en_US.utf8"), ("LANG", "C")]));
        assert!(!with(&[("NO_COLOR", "1")]));
        assert!(!with(&[("TERM", "dumb")]));
        assert!(!with(&[("LANG", "C")]));
        assert!(!with(&[("LC_ALL", "POSIX"), ("LANG", "en_US.UTF-8")]));
        assert!(!with(&[
            ("LC_CTYPE", "vi_VN.TCVN"),
            ("LANG", "en_US.UTF-8")
        ]));
    }
}
