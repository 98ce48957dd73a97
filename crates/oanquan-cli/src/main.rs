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
mod files;
mod json;
mod live;
mod moves;
mod output;
mod play;
mod ratings;
mod seek;
mod shown;
mod signals;
mod timecontrol;
mod tokens;

use std::process::ExitCode;

use clap::FromArgMatches as _;
use clap::error::ContextValue;

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
                play::play(&ctx, clients, &id, Some(seat), true, &args.live, None).await?;
            }
        }
        Command::Join(args) => {
            let (id, seat) = commands::join(&ctx, &mut clients, args).await?;
            if args.play {
                play::play(&ctx, clients, &id, Some(seat), true, &args.live, None).await?;
            }
        }
        Command::Play(args) => {
            play::play(
                &ctx,
                clients,
                &args.game,
                args.seat,
                false,
                &args.live,
                args.given.token.as_deref(),
            )
            .await?;
        }
        Command::Seek(args) => {
            let (id, seat) = seek::seek(&ctx, &mut clients, args).await?;
            play::play(&ctx, clients, &id, Some(seat), true, &args.live, None).await?;
        }
        Command::Seeks => commands::seeks(&ctx, &mut clients).await?,
        Command::Accept(args) => {
            let (id, seat) = commands::accept(&ctx, &mut clients, args).await?;
            play::play(&ctx, clients, &id, Some(seat), true, &args.live, None).await?;
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
        Command::Login(args) => accounts::login(&ctx, &mut clients, args).await?,
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
    let (name, account, rated) = match command {
        Command::Create(args) => (&args.name, &args.account, args.rated),
        Command::Join(args) => (&args.name, &args.account, false),
        Command::Seek(args) => (&args.name, &args.account, args.rated),
        Command::Accept(args) => (&args.name, &args.account, false),
        _ => return Ok(()),
    };
    commands::Seating::check(ctx, name, account.anonymous, rated)
}

/// clap's message, with every value the user typed quoted as [`error::typed`] does: clap echoes
/// an invalid value whole, so 10,000 characters or an escape sequence would reach the terminal.
fn usage_error(e: &clap::Error) -> ! {
    let mut quoted = Vec::new();
    for (_, value) in e.context() {
        match value {
            ContextValue::String(v) => quoted.push(v.as_str()),
            ContextValue::Strings(vs) => quoted.extend(vs.iter().map(String::as_str)),
            _ => {}
        }
    }
    // An empty value (`--config-dir ''`) is not quoted: replacing "" would put quotes between
    // every two characters of the message.
    quoted.retain(|v| !v.is_empty() && error::typed(v) != *v);
    if quoted.is_empty() {
        e.exit();
    }
    // Longest first: a value may contain a shorter one. On the styled text, where the values
    // stand as typed (the plain rendering already strips escape sequences from them, so they
    // would no longer be found).
    quoted.sort_by_key(|v| std::cmp::Reverse(v.len()));
    let mut text = e.render().ansi().to_string();
    for v in quoted {
        text = text.replace(v, &error::typed(v));
    }
    output::note(plain(&text).trim_end());
    std::process::exit(e.exit_code());
}

/// `text` without clap's styles (CSI sequences, `ESC [ ... final byte`), and with any other
/// control character but the newline escaped: what a value parser's message quotes of a value
/// is not one of clap's values, and must not reach the terminal either.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // Parameters and intermediates, then one final byte in @..~.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else if c.is_control() && c != '\n' {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

fn main() -> ExitCode {
    // clap exits with 2 on usage errors and 0 for --help/--version, as documented.
    let cli = cli::command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches))
        .unwrap_or_else(|e| usage_error(&e));
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
                output::note(format!("oanquan: {}", shown::printable(&err.to_string())));
            }
            ExitCode::from(err.code)
        }
    }
}
