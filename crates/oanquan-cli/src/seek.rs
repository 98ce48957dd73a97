//! `oanquan seek`: wait on the Seek stream until the server pairs this seek, then hand the new
//! game to `play`.
//!
//! The seek lives as long as its stream: cancelling the call withdraws it. Ctrl-C while waiting
//! does that on purpose (and says so) instead of killing the process mid-line.

use std::time::Duration;

use oanquan_proto::v1::{
    ComputerFallback, RatingRange, RulesSpec, SeekRequest, SeekResponse, rules_spec, seek_response,
};

use crate::cli::{DEFAULT_SEEK_LEVEL, SeekArgs, level_name};
use crate::client::Clients;
use crate::commands::{Seating, record_seat, seat_of};
use crate::context::Context;
use crate::error::{CliError, code};
use crate::json;
use crate::moves::Side;
use crate::output::{clear_status, out, shown_name};
use crate::timecontrol::{TimeControl, format_span, from_proto_duration, to_proto_duration};

/// The server sends a heartbeat about every 15 seconds while a seek waits; this allows two to
/// go missing before the stream is presumed dead.
const IDLE_TIMEOUT: Duration = Duration::from_secs(40);

/// Seeks and waits; returns the game id and the seat taken once paired.
///
/// # Errors
///
/// [`code::INTERRUPTED`] (quietly, after saying the seek is withdrawn) on Ctrl-C; the server's
/// refusal of the request; [`code::UNAVAILABLE`] when the stream breaks (a seek does not
/// survive it: the server forgets it).
pub async fn seek(
    ctx: &Context,
    clients: &mut Clients,
    args: &SeekArgs,
) -> Result<(String, Side), CliError> {
    let seating = Seating::new(ctx, &args.name, args.account.anonymous)?;
    let tc = args.time_control();
    seating.check_rated(args.rated, tc)?;
    let name = seating.name.clone();
    let store = ctx.token_store()?.ready_to_store()?;
    let request = SeekRequest {
        rules: Some(RulesSpec {
            kind: Some(rules_spec::Kind::Preset(args.preset.clone())),
        }),
        time_control: tc.to_proto(),
        display_name: name.clone(),
        computer: args.computer_after.map(|after| ComputerFallback {
            after: Some(to_proto_duration(after)),
            level: args.level.unwrap_or(DEFAULT_SEEK_LEVEL),
        }),
        rated: args.rated,
        rating_range: args.range.map(|r| RatingRange {
            min: r.min,
            max: r.max,
        }),
    };
    // Listening before the request: a Ctrl-C from here on withdraws the seek.
    let interrupt = crate::signals::interrupt();
    tokio::pin!(interrupt);
    // No deadline: the stream lasts as long as the wait.
    let mut stream = clients
        .games
        .seek(seating.sign(tonic::Request::new(request))?)
        .await
        .map_err(|s| CliError::from_status("seek", &s))?
        .into_inner();
    let mut seek_id: Option<String> = None;
    loop {
        let message = tokio::select! {
            // A handler that could not be installed disables the branch (SIGINT's default).
            Ok(()) = &mut interrupt => {
                // Dropping the stream cancels the call: the server withdraws the seek.
                drop(stream);
                clear_status();
                let what = seek_id.map_or_else(
                    || "the seek".to_owned(),
                    |id| format!("seek {}", shown_name(&id)),
                );
                if !ctx.json {
                    out(format!("{what} withdrawn"))?;
                }
                return Err(CliError::new(code::INTERRUPTED, ""));
            }
            message = tokio::time::timeout(IDLE_TIMEOUT, stream.message()) => message,
        };
        let response = match message {
            Err(_) => {
                return Err(CliError::unavailable(
                    &ctx.server.name,
                    format!(
                        "no word from the server for {} s while the seek waited; seek again",
                        IDLE_TIMEOUT.as_secs()
                    ),
                ));
            }
            Ok(Err(status)) => {
                // Once waiting, the server had the seek: whatever broke, it withdrew it.
                if let Some(id) = &seek_id
                    && let Some(err) = CliError::connection_lost(
                        &format!("seek {}", shown_name(id)),
                        &status,
                        "a seek lasts as long as its connection, so the server has withdrawn \
                         it (as after a sleep or a network change): seek again",
                    )
                {
                    return Err(err);
                }
                let mut err = CliError::from_status("seek", &status);
                if err.code == code::UNAVAILABLE {
                    err.message
                        .push_str(" (the server forgets seeks when it stops; seek again)");
                }
                return Err(err);
            }
            Ok(Ok(None)) => return Err(CliError::bad_answer("the seek ended without a game")),
            Ok(Ok(Some(response))) => response,
        };
        match response.kind {
            Some(seek_response::Kind::Waiting(seek)) => {
                if ctx.json {
                    json::print(&SeekResponse {
                        kind: Some(seek_response::Kind::Waiting(seek.clone())),
                    })?;
                } else {
                    out(waiting_line(&seek))?;
                    if let Some(after) = seek.computer_after.as_ref() {
                        let level = args.level.unwrap_or(DEFAULT_SEEK_LEVEL);
                        out(format!(
                            "if nobody comes within {}, the computer (level {level}, {}) plays you",
                            format_span(from_proto_duration(Some(after))),
                            level_name(level)
                        ))?;
                    }
                }
                seek_id = Some(seek.id);
            }
            Some(seek_response::Kind::Paired(paired)) => {
                let seat = seat_of(paired.seat, "seek pairing")?;
                if !ctx.json && args.rated && paired.game.as_ref().is_some_and(|g| !g.rated) {
                    out(
                        "nobody answered in time: you play the computer, and a game against the \
                         computer is not rated",
                    )?;
                }
                if ctx.json {
                    // The API's message, less the token (it goes to the token file only).
                    let mut shown = paired.clone();
                    shown.player_token.clear();
                    json::print(&SeekResponse {
                        kind: Some(seek_response::Kind::Paired(shown)),
                    })?;
                }
                let id = record_seat(
                    ctx,
                    &store,
                    paired.game,
                    paired.player_token,
                    seat,
                    &name,
                    "paired into",
                )?;
                return Ok((id, seat));
            }
            Some(seek_response::Kind::Heartbeat(_)) | None => {}
        }
    }
}

/// `seek ID: 3+2, standard; waiting for an opponent (Ctrl-C withdraws it)` (stable format);
/// a rated seek adds `, rated`, a rating range `, opponents rated 1400-1700`, and a seeker
/// playing as an account `, as Lan (1523?)`.
fn waiting_line(seek: &oanquan_proto::v1::Seek) -> String {
    let tc = TimeControl::from_proto(seek.time_control.as_ref());
    let preset = if seek.preset.is_empty() {
        "custom rules".into()
    } else {
        shown_name(&seek.preset)
    };
    let mut terms = format!("{tc}, {preset}");
    if seek.rated {
        terms.push_str(", rated");
    }
    if let Some(range) = seek.rating_range {
        terms.push_str(&format!(", opponents rated {}-{}", range.min, range.max));
    }
    if let Some(account) = seek.account.as_ref() {
        terms.push_str(&format!(", as {}", shown_name(&account.username)));
        if account.rating != 0 {
            terms.push_str(&format!(
                " ({})",
                crate::ratings::rating_text(account.rating, account.provisional)
            ));
        }
    }
    format!(
        "seek {}: {terms}; waiting for an opponent (Ctrl-C withdraws it)",
        shown_name(&seek.id)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use oanquan_proto::v1::Seek;

    #[test]
    fn waiting_line_names_the_seek() {
        let seek = Seek {
            id: "s1".into(),
            preset: "standard".into(),
            time_control: crate::timecontrol::parse_time("3+2")
                .expect("3+2")
                .to_proto(),
            ..Seek::default()
        };
        assert_eq!(
            waiting_line(&seek),
            "seek s1: 3+2, standard; waiting for an opponent (Ctrl-C withdraws it)"
        );
        let untimed = Seek {
            id: "s2".into(),
            ..Seek::default()
        };
        assert_eq!(
            waiting_line(&untimed),
            "seek s2: untimed, custom rules; waiting for an opponent (Ctrl-C withdraws it)"
        );
        let rated = Seek {
            rated: true,
            rating_range: Some(RatingRange {
                min: 1400,
                max: 1700,
            }),
            account: Some(oanquan_proto::v1::SeatAccount {
                username: "Lan".into(),
                rating: 1523,
                provisional: true,
            }),
            ..seek
        };
        assert_eq!(
            waiting_line(&rated),
            "seek s1: 3+2, standard, rated, opponents rated 1400-1700, as Lan (1523?); waiting \
             for an opponent (Ctrl-C withdraws it)"
        );
    }
}
