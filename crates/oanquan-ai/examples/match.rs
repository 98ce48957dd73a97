//! Plays two levels against each other and prints wins, draws and losses for A.
//!
//! ```text
//! cargo run --release -p oanquan-ai --example match -- --a LEVEL --b LEVEL [--games N]
//!     [--ms MS | --nodes N] [--preset PRESET] [--seed S] [--opening PLIES] [--balanced POINTS]
//!     [--verbose]
//! ```
//!
//! Levels are names or numbers (`random`=1 … `master`=7). Games come in pairs: both games of a
//! pair start with the same `--opening` random plies (default 2), A moves first in the first
//! game and second in the other. With `--balanced B` only openings that a quick search scores
//! within ±B points are used (the game strongly favours whoever is ahead after the opening).
//! `--nodes` replaces the time budget with a node budget per move: the whole match is then
//! reproducible for a given `--seed`. Each side keeps one engine per
//! game and searches with the game's history (repetition rule).

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use oanquan_ai::{Engine, Level, SearchLimits, choose_move};
use oanquan_rules::{EndReason, Game, Player, Preset};

struct Args {
    a: Level,
    b: Level,
    games: u64,
    limits: SearchLimits,
    preset: Preset,
    seed: u64,
    opening: u32,
    balanced: Option<i32>,
    verbose: bool,
}

fn usage(msg: &str) -> ! {
    eprintln!("{msg}");
    eprintln!(
        "usage: match --a LEVEL --b LEVEL [--games N] [--ms MS | --nodes N] [--preset P] [--seed S] [--opening PLIES] [--balanced POINTS] [--verbose]"
    );
    std::process::exit(2);
}

fn parse<T: std::str::FromStr>(flag: &str, value: &str) -> T
where
    T::Err: std::fmt::Display,
{
    value
        .parse()
        .unwrap_or_else(|e| usage(&format!("{flag} {value}: {e}")))
}

fn parse_args() -> Args {
    let mut args = Args {
        a: Level::STRONGEST,
        b: Level::Greedy,
        games: 100,
        limits: SearchLimits::time(Duration::from_millis(100)),
        preset: Preset::Standard,
        seed: 1,
        opening: 2,
        balanced: None,
        verbose: false,
    };
    let mut nodes = None;
    let mut ms = 100;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--verbose" {
            args.verbose = true;
            continue;
        }
        let value = it
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--a" => args.a = parse(&flag, &value),
            "--b" => args.b = parse(&flag, &value),
            "--games" => args.games = parse(&flag, &value),
            "--ms" => ms = parse(&flag, &value),
            "--nodes" => nodes = Some(parse(&flag, &value)),
            "--preset" => args.preset = parse(&flag, &value),
            "--seed" => args.seed = parse(&flag, &value),
            "--opening" => args.opening = parse(&flag, &value),
            "--balanced" => args.balanced = Some(parse(&flag, &value)),
            _ => usage(&format!("unknown flag {flag}")),
        }
    }
    args.limits = match nodes {
        Some(n) => SearchLimits::nodes(n),
        None => SearchLimits::time(Duration::from_millis(ms)),
    };
    args
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The opening of a pair: `--opening` random plies; with `--balanced B`, the first such opening
/// (trying seeds in turn) that a 200 000-node search scores within ±B points.
fn opening(args: &Args, pair: u64, cancel: &AtomicBool) -> Game {
    for attempt in 0u64.. {
        let mut game = Game::new(args.preset.rules()).expect("presets are valid");
        for ply in 0..args.opening {
            let seed = mix(args.seed ^ mix(pair) ^ u64::from(ply) << 48 ^ attempt << 56);
            let Some(mv) = choose_move(
                Level::Random,
                game.position(),
                seed,
                SearchLimits::NONE,
                cancel,
            ) else {
                break;
            };
            game.play(mv).expect("legal");
        }
        let Some(bound) = args.balanced else {
            return game;
        };
        if game.is_over() {
            continue;
        }
        let r =
            Engine::with_tt_bytes(1 << 22).search_game(&game, SearchLimits::nodes(200_000), cancel);
        if r.eval_points.abs() <= bound || attempt >= 1000 {
            return game;
        }
    }
    unreachable!("the loop returns")
}

fn main() {
    let args = parse_args();
    let cancel = AtomicBool::new(false);
    let started = Instant::now();
    let (mut wins, mut draws, mut losses) = (0u64, 0u64, 0u64);
    let mut diff_sum = 0i64;
    let mut plies = 0u64;
    let mut reasons = [0u64; 3];
    // [A first, A second][win, draw, loss]
    let mut by_colour = [[0u64; 3]; 2];
    for g in 0..args.games {
        let pair = g / 2;
        let a_side = if g % 2 == 0 {
            Player::First
        } else {
            Player::Second
        };
        let game = opening(&args, pair, &cancel);
        let mut game = Game::replay(*game.start(), game.moves()).expect("legal");
        let mut engines = [Engine::new(), Engine::new()];
        while !game.is_over() {
            let mover = game.position().to_move();
            let (level, engine) = if mover == a_side {
                (args.a, &mut engines[0])
            } else {
                (args.b, &mut engines[1])
            };
            let seed = mix(args.seed ^ mix(g ^ 0xABCD) ^ u64::from(game.position().ply()) << 40);
            let mv = engine
                .choose_move_in_game(level, &game, seed, args.limits, &cancel)
                .expect("the game is not over");
            game.play(mv).expect("the engine plays legal moves");
        }
        let scores = game.scores();
        let diff = scores[a_side] - scores[a_side.other()];
        match diff.signum() {
            1 => wins += 1,
            0 => draws += 1,
            _ => losses += 1,
        }
        by_colour[a_side.index()][(1 - diff.signum()) as usize] += 1;
        diff_sum += i64::from(diff);
        plies += game.moves().len() as u64;
        reasons[match game.end_reason() {
            Some(EndReason::Mandarins) => 0,
            Some(EndReason::Repetition) => 1,
            _ => 2,
        }] += 1;
        if args.verbose {
            eprintln!(
                "game {g}: A ({}) as {a_side}: {} : {} after {} plies ({}): {}",
                args.a,
                scores[a_side],
                scores[a_side.other()],
                game.moves().len(),
                game.end_reason().map_or("?".into(), |r| r.to_string()),
                game.moves()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
    }
    let n = args.games.max(1);
    let budget = match (args.limits.nodes, args.limits.time) {
        (Some(nodes), _) => format!("{nodes} nodes/move"),
        (None, Some(t)) => format!("{} ms/move", t.as_millis()),
        _ => "no limit".into(),
    };
    let opening = match args.balanced {
        Some(b) => format!("{} random plies within ±{b}", args.opening),
        None => format!("{} random plies", args.opening),
    };
    let [f, sc] = by_colour;
    println!(
        "{} ({}) vs {} ({}), {}, {budget}, opening {opening}, seed {}: {} games: W {wins} D {draws} L {losses} = {:.1}% score (A first {}/{}/{}, A second {}/{}/{}), mean diff {:+.1} points, mean {:.0} plies, ends mandarins/repetition/ply-limit {}/{}/{}, {:.0}s",
        args.a,
        args.a.number(),
        args.b,
        args.b.number(),
        args.preset,
        args.seed,
        args.games,
        100.0 * (wins as f64 + draws as f64 / 2.0) / n as f64,
        f[0],
        f[1],
        f[2],
        sc[0],
        sc[1],
        sc[2],
        diff_sum as f64 / n as f64,
        plies as f64 / n as f64,
        reasons[0],
        reasons[1],
        reasons[2],
        started.elapsed().as_secs_f64()
    );
}
