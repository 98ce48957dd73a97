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
        let stdout_tty = std::io::stdout().is_terminal();
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

/// Box drawing and colour only for a person at a terminal who has not opted out
/// (https://no-color.org: NO_COLOR set to anything non-empty).
fn style(stdout_tty: bool, plain: bool) -> Style {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    if stdout_tty && !no_color && !plain {
        Style::FANCY
    } else {
        Style::PLAIN
    }
}
