//! `oanquan`: the command-line client of the Ô Ăn Quan service. See `oanquan --help`.

mod board;
mod cli;
mod client;
mod commands;
mod error;
mod feed;
mod json;
mod live;
mod moves;
mod play;
mod tokens;

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser as _;

use crate::board::Style;
use crate::cli::{Cli, Command};
use crate::error::CliError;
use crate::tokens::TokenStore;

/// What every subcommand needs to know about the invocation and the terminal.
#[derive(Debug)]
pub struct Context {
    /// `--server` and `--ca-cert`: where to connect and how (its `name` is the token file's key).
    pub server: client::Server,
    pub json: bool,
    pub style: Style,
    pub stdout_tty: bool,
    pub stdin_tty: bool,
    config_dir: Option<PathBuf>,
}

impl Context {
    pub fn token_store(&self) -> Result<TokenStore, CliError> {
        TokenStore::locate(self.config_dir.as_deref())
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

async fn run(cli: Cli) -> Result<(), CliError> {
    error::set_verbose(cli.global.verbose);
    let stdout_tty = std::io::stdout().is_terminal();
    let ctx = Context {
        server: client::Server::new(&cli.global.server, cli.global.ca_cert.as_deref())?,
        json: cli.global.json,
        style: style(stdout_tty, cli.global.plain),
        stdout_tty,
        stdin_tty: std::io::stdin().is_terminal(),
        config_dir: cli.global.config_dir.clone(),
    };
    let mut clients = client::connect(&ctx.server).await?;
    match &cli.command {
        Command::Create(args) => {
            let (id, seat) = commands::create(&ctx, &mut clients, args).await?;
            if args.play {
                play::play(&ctx, clients, &id, Some(seat), true, &args.display).await?;
            }
        }
        Command::Join(args) => {
            let (id, seat) = commands::join(&ctx, &mut clients, args).await?;
            if args.play {
                play::play(&ctx, clients, &id, Some(seat), true, &args.display).await?;
            }
        }
        Command::Play(args) => {
            play::play(&ctx, clients, &args.game, args.seat, false, &args.display).await?;
        }
        Command::Resign(args) => commands::resign(&ctx, &mut clients, args).await?,
        Command::Abort(args) => commands::abort(&ctx, &mut clients, args).await?,
        Command::Watch(args) => play::watch(&ctx, clients, args).await?,
        Command::List(args) => commands::list(&ctx, &mut clients, args).await?,
        Command::Show(args) => commands::show(&ctx, &mut clients, args).await?,
        Command::Moves(args) => commands::moves(&ctx, &mut clients, args).await?,
        Command::Presets => commands::presets(&ctx, &mut clients).await?,
    }
    Ok(())
}

fn main() -> ExitCode {
    // clap exits with 2 on usage errors and 0 for --help/--version, as documented.
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            live::note(format!("oanquan: cannot start the async runtime: {e}"));
            return ExitCode::from(error::code::FAILURE);
        }
    };
    let result = runtime.block_on(run(cli));
    // The stdin reader thread may be blocked in read(); do not wait for it.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::from(error::code::OK),
        Err(err) => {
            // An empty message is a quiet ending (standard output closed by its reader).
            if !err.message.is_empty() {
                live::note(format!("oanquan: {err}"));
            }
            ExitCode::from(err.code)
        }
    }
}
