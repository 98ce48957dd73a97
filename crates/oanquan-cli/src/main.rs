//! `oanquan`: the command-line client of the Ô Ăn Quan service. See `oanquan --help`.

mod account_file;
mod accounts;
mod board;
mod cli;
mod client;
mod clocks;
mod commands;
mod context;
mod error;
mod feed;
mod json;
mod live;
mod moves;
mod output;
mod play;
mod ratings;
mod seek;
mod timecontrol;
mod tokens;

use std::process::ExitCode;

use clap::Parser as _;

use crate::cli::{Cli, Command};
use crate::context::Context;
use crate::error::CliError;

async fn run(cli: Cli) -> Result<(), CliError> {
    error::set_verbose(cli.global.verbose);
    let ctx = Context::new(&cli.global)?;
    seating_first(&ctx, &cli.command)?;
    let mut clients = client::connect(&ctx.server).await?;
    match &cli.command {
        Command::Create(args) => {
            let (id, seat) = commands::create(&ctx, &mut clients, args).await?;
            if args.play {
                play::play(&ctx, clients, &id, Some(seat), true, &args.live).await?;
            }
        }
        Command::Join(args) => {
            let (id, seat) = commands::join(&ctx, &mut clients, args).await?;
            if args.play {
                play::play(&ctx, clients, &id, Some(seat), true, &args.live).await?;
            }
        }
        Command::Play(args) => {
            play::play(&ctx, clients, &args.game, args.seat, false, &args.live).await?;
        }
        Command::Seek(args) => {
            let (id, seat) = seek::seek(&ctx, &mut clients, args).await?;
            seek::exit_on_interrupt(id.clone());
            play::play(&ctx, clients, &id, Some(seat), true, &args.live).await?;
        }
        Command::Seeks => commands::seeks(&ctx, &mut clients).await?,
        Command::Accept(args) => {
            let (id, seat) = commands::accept(&ctx, &mut clients, args).await?;
            play::play(&ctx, clients, &id, Some(seat), true, &args.live).await?;
        }
        Command::Resign(args) => commands::resign(&ctx, &mut clients, args).await?,
        Command::Abort(args) => commands::abort(&ctx, &mut clients, args).await?,
        Command::Claim(args) => commands::claim(&ctx, &mut clients, args).await?,
        Command::Watch(args) => play::watch(&ctx, clients, args).await?,
        Command::List(args) => commands::list(&ctx, &mut clients, args).await?,
        Command::Show(args) => commands::show(&ctx, &mut clients, args).await?,
        Command::Moves(args) => commands::moves(&ctx, &mut clients, args).await?,
        Command::Presets => commands::presets(&ctx, &mut clients).await?,
        Command::Register(args) => accounts::register(&ctx, &mut clients, args).await?,
        Command::Me => accounts::me(&ctx, &mut clients).await?,
        Command::Player(args) => accounts::player(&ctx, &mut clients, args).await?,
        Command::Top(args) => accounts::top(&ctx, &mut clients, args).await?,
        Command::Games(args) => accounts::games(&ctx, &mut clients, args).await?,
        Command::Keys(args) => accounts::keys(&ctx, &mut clients, args).await?,
    }
    Ok(())
}

/// The commands that take a seat check who sits (a display name in range, or the stored
/// account) before connecting: a mistyped --name is a usage error even with the server down.
fn seating_first(ctx: &Context, command: &Command) -> Result<(), CliError> {
    let (name, account) = match command {
        Command::Create(args) => (&args.name, &args.account),
        Command::Join(args) => (&args.name, &args.account),
        Command::Seek(args) => (&args.name, &args.account),
        Command::Accept(args) => (&args.name, &args.account),
        _ => return Ok(()),
    };
    commands::Seating::new(ctx, name, account.anonymous).map(drop)
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
            output::note(format!("oanquan: cannot start the async runtime: {e}"));
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
                output::note(format!("oanquan: {err}"));
            }
            ExitCode::from(err.code)
        }
    }
}
