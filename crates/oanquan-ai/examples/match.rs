//! Plays two players (a level, an evaluation, the opening book on or off) against each other in
//! colour-swapped pairs and prints the score, the Elo difference with its 95 % interval and,
//! with `--sprt`, a sequential probability ratio test's verdict.
//!
//! ```text
//! cargo run --release -p oanquan-ai --example match -- --a LEVEL --b LEVEL [--games N]
//!     [--a-eval W] [--b-eval W] [--a-book on|off] [--b-book on|off] [--a-mistakes on|off] [--b-mistakes on|off] [--a-nodes N] [--b-nodes N]
//!     [--ms MS | --nodes N] [--preset PRESET] [--seed S] [--opening PLIES] [--balanced POINTS] [--playable]
//!     [--threads T] [--sprt ELO0,ELO1] [--alpha A] [--beta B] [--verbose]
//! ```
//!
//! Levels are names or numbers (`random`=1 … `master`=7). An evaluation `W` is `baseline` (the
//! one before issue 21), `tuned`, `default` (what the engine uses) or five weights in 1/64 point
//! (see `EvalWeights::parse`). `--a-book off` keeps `master` from playing the opening book;
//! `--a-mistakes off` keeps it from playing for the opponent's mistakes where it finds no win.
//! `--a-nodes` gives A a node budget of its own (to offset an evaluation that costs more time
//! per node). Games come in pairs: both games of a pair start with the same
//! `--opening` random plies (default 2), A moves first in the first game and second in the other.
//! With `--balanced B` only openings that a quick search scores within ±B points are used (the
//! game strongly favours whoever is ahead after the opening). With `--playable`, openings in which
//! the side to move has a move that ends the game are skipped too: in one game of such a pair the
//! engine that moves second may never move (its opponent ends the game first), so the game
//! measures the opening and not the engines. `--nodes` replaces the time budget
//! with a node budget per move: the whole match is then reproducible for a given `--seed`, and
//! its result does not depend on `--threads` (pairs are played on that many threads, each game
//! with its own engines, and counted in pair order). Each side keeps one engine per game and
//! searches with the game's history (repetition rule).
//!
//! The Elo difference is given twice: from the games alone (trinomial: win, draw, loss) and
//! from the pairs (pentanomial: a pair scores 0, ¼, ½, ¾ or 1), which removes the opening's
//! share of the variance; the pentanomial interval is the one to quote. `--sprt ELO0,ELO1`
//! tests H0 "A is ELO0 stronger" against H1 "A is ELO1 stronger" (logistic Elo) with error rates
//! `--alpha` and `--beta` (default 0.05 each), by the pentanomial log-likelihood ratio (normal
//! approximation, as fishtest does); the LLR is reported after the whole match, with the first
//! pair count at which it crossed a bound.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use oanquan_ai::{Engine, EvalWeights, Level, SearchLimits, choose_move};
use oanquan_rules::{EndReason, Game, Player, Position, Preset};

#[derive(Clone, Copy)]
struct Side {
    level: Level,
    eval: EvalWeights,
    book: bool,
    /// Whether `master` plays for the opponent's mistakes (`--a-mistakes`, `--b-mistakes`).
    mistakes: bool,
    /// A node budget of this side's own, instead of the match's (`--a-nodes`, `--b-nodes`).
    nodes: Option<u64>,
}

impl Side {
    /// A side at `level` with the default evaluation, the book and the match's node budget.
    fn new(level: Level) -> Self {
        Side {
            level,
            eval: EvalWeights::DEFAULT,
            book: true,
            mistakes: true,
            nodes: None,
        }
    }

    fn label(&self) -> String {
        let mut s = format!("{} ({})", self.level, self.level.number());
        if self.eval != EvalWeights::DEFAULT {
            s += &format!(" eval {}", self.eval);
        }
        if !self.book {
            s += " no book";
        }
        if !self.mistakes {
            s += " not for mistakes";
        }
        if let Some(n) = self.nodes {
            s += &format!(" {n} nodes/move");
        }
        s
    }
}

struct Args {
    a: Side,
    b: Side,
    games: u64,
    limits: SearchLimits,
    preset: Preset,
    seed: u64,
    opening: u32,
    balanced: Option<i32>,
    playable: bool,
    threads: usize,
    sprt: Option<(f64, f64)>,
    alpha: f64,
    beta: f64,
    verbose: bool,
}

/// The match without flags.
impl Default for Args {
    fn default() -> Self {
        Args {
            a: Side::new(Level::STRONGEST),
            b: Side::new(Level::Greedy),
            games: 100,
            limits: SearchLimits::time(Duration::from_millis(100)),
            preset: Preset::Standard,
            seed: 1,
            opening: 2,
            balanced: None,
            playable: false,
            threads: 1,
            sprt: None,
            alpha: 0.05,
            beta: 0.05,
            verbose: false,
        }
    }
}

fn usage(msg: &str) -> ! {
    eprintln!("{msg}");
    eprintln!(
        "usage: match --a LEVEL --b LEVEL [--a-eval W] [--b-eval W] [--a-book on|off] [--b-book on|off] [--a-mistakes on|off] [--b-mistakes on|off] [--a-nodes N] [--b-nodes N] [--games N] [--ms MS | --nodes N] [--preset P] [--seed S] [--opening PLIES] [--balanced POINTS] [--playable] [--threads T] [--sprt ELO0,ELO1] [--alpha A] [--beta B] [--verbose]"
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

fn on_off(flag: &str, value: &str) -> bool {
    match value {
        "on" => true,
        "off" => false,
        _ => usage(&format!("{flag} {value}: expected on or off")),
    }
}

fn parse_args() -> Args {
    let mut args = Args::default();
    let mut nodes = None;
    let mut ms = 100;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--verbose" {
            args.verbose = true;
            continue;
        }
        if flag == "--playable" {
            args.playable = true;
            continue;
        }
        let value = it
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        let eval = |v: &str| EvalWeights::parse(v).unwrap_or_else(|e| usage(&e));
        match flag.as_str() {
            "--a" => args.a.level = parse(&flag, &value),
            "--b" => args.b.level = parse(&flag, &value),
            "--a-eval" => args.a.eval = eval(&value),
            "--b-eval" => args.b.eval = eval(&value),
            "--a-book" => args.a.book = on_off(&flag, &value),
            "--b-book" => args.b.book = on_off(&flag, &value),
            "--a-mistakes" => args.a.mistakes = on_off(&flag, &value),
            "--b-mistakes" => args.b.mistakes = on_off(&flag, &value),
            "--a-nodes" => args.a.nodes = Some(parse(&flag, &value)),
            "--b-nodes" => args.b.nodes = Some(parse(&flag, &value)),
            "--games" => args.games = parse(&flag, &value),
            "--ms" => ms = parse(&flag, &value),
            "--nodes" => nodes = Some(parse(&flag, &value)),
            "--preset" => args.preset = parse(&flag, &value),
            "--seed" => args.seed = parse(&flag, &value),
            "--opening" => args.opening = parse(&flag, &value),
            "--balanced" => args.balanced = Some(parse(&flag, &value)),
            "--threads" => args.threads = parse::<usize>(&flag, &value).max(1),
            "--alpha" => args.alpha = parse(&flag, &value),
            "--beta" => args.beta = parse(&flag, &value),
            "--sprt" => {
                let (e0, e1) = value
                    .split_once(',')
                    .unwrap_or_else(|| usage("--sprt needs ELO0,ELO1"));
                args.sprt = Some((parse(&flag, e0), parse(&flag, e1)));
            }
            _ => usage(&format!("unknown flag {flag}")),
        }
    }
    if !(args.alpha > 0.0 && args.alpha < 1.0 && args.beta > 0.0 && args.beta < 1.0) {
        usage("--alpha and --beta must lie strictly between 0 and 1");
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
/// (trying seeds in turn) that a 200 000-node search scores within ±B points; with `--playable`,
/// also one where no move of the side to move ends the game.
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
        if args.playable && (game.is_over() || ends_at_once(game.position())) && attempt < 1000 {
            continue;
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

/// Whether some move of the side to move ends the game.
fn ends_at_once(position: &Position) -> bool {
    position.legal_moves().iter().any(|&mv| {
        let mut next = *position;
        next.play_unchecked(mv);
        next.is_over()
    })
}

/// One finished game, from A's point of view.
#[derive(Clone)]
struct GameResult {
    a_side: Player,
    diff: i32,
    plies: usize,
    reason: Option<EndReason>,
    line: String,
}

fn play_game(args: &Args, g: u64, start: &Game, cancel: &AtomicBool) -> GameResult {
    let a_side = if g % 2 == 0 {
        Player::First
    } else {
        Player::Second
    };
    let mut game = Game::replay(*start.start(), start.moves()).expect("legal");
    let mut engines = [Engine::new(), Engine::new()];
    engines[0].set_eval(args.a.eval);
    engines[1].set_eval(args.b.eval);
    engines[0].set_use_book(args.a.book);
    engines[1].set_use_book(args.b.book);
    engines[0].set_play_for_mistakes(args.a.mistakes);
    engines[1].set_play_for_mistakes(args.b.mistakes);
    while !game.is_over() {
        let mover = game.position().to_move();
        let (side, engine) = if mover == a_side {
            (args.a, &mut engines[0])
        } else {
            (args.b, &mut engines[1])
        };
        let seed = mix(args.seed ^ mix(g ^ 0xABCD) ^ u64::from(game.position().ply()) << 40);
        let limits = side.nodes.map_or(args.limits, SearchLimits::nodes);
        let mv = engine
            .choose_move_in_game(side.level, &game, seed, limits, cancel)
            .expect("the game is not over");
        game.play(mv).expect("the engine plays legal moves");
    }
    let scores = game.scores();
    GameResult {
        a_side,
        diff: scores[a_side] - scores[a_side.other()],
        plies: game.moves().len(),
        reason: game.end_reason(),
        line: format!(
            "game {g}: A as {a_side}: {} : {} after {} plies ({}): {}",
            scores[a_side],
            scores[a_side.other()],
            game.moves().len(),
            game.end_reason().map_or("?".into(), |r| r.to_string()),
            game.moves()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

fn score_of(diff: i32) -> f64 {
    match diff.signum() {
        1 => 1.0,
        0 => 0.5,
        _ => 0.0,
    }
}

/// The logistic Elo difference of a score in (0, 1).
fn elo(score: f64) -> f64 {
    let s = score.clamp(1e-6, 1.0 - 1e-6);
    -400.0 * (1.0 / s - 1.0).log10()
}

fn expected_score(elo: f64) -> f64 {
    1.0 / (1.0 + 10f64.powf(-elo / 400.0))
}

/// Mean and per-sample variance of `xs`.
fn mean_var(xs: &[f64]) -> (f64, f64) {
    let n = xs.len().max(1) as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var)
}

/// "Elo ± half-width [low, high]" at 95 %, from samples of a score (games or pairs).
fn elo_interval(xs: &[f64]) -> String {
    let (mean, var) = mean_var(xs);
    let se = (var / xs.len().max(1) as f64).sqrt();
    let (lo, hi) = (elo(mean - 1.96 * se), elo(mean + 1.96 * se));
    format!(
        "{:+.1} ± {:.1} [{lo:+.1}, {hi:+.1}]",
        elo(mean),
        (hi - lo) / 2.0
    )
}

/// The generalised SPRT's log-likelihood ratio over the pair scores `xs` (normal approximation).
fn llr(xs: &[f64], elo0: f64, elo1: f64) -> f64 {
    let (mean, var) = mean_var(xs);
    if var <= 0.0 {
        return 0.0;
    }
    let (s0, s1) = (expected_score(elo0), expected_score(elo1));
    xs.len() as f64 * ((mean - s0).powi(2) - (mean - s1).powi(2)) / (2.0 * var)
}

fn main() {
    let args = parse_args();
    let started = Instant::now();
    let games = play_pairs(&args, true);
    report(&args, &games, started.elapsed());
}

/// Plays the match's pairs on `--threads` threads; the games in pair order, whatever the
/// threads' timing.
fn play_pairs(args: &Args, progress: bool) -> Vec<GameResult> {
    let cancel = AtomicBool::new(false);
    let started = Instant::now();
    let pairs = args.games.div_ceil(2);
    let next = AtomicU64::new(0);
    let results: Mutex<Vec<Option<Vec<GameResult>>>> =
        Mutex::new(vec![None; usize::try_from(pairs).unwrap_or(usize::MAX)]);
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..args.threads {
            s.spawn(|| {
                loop {
                    let pair = next.fetch_add(1, Ordering::Relaxed);
                    if pair >= pairs {
                        break;
                    }
                    let start = opening(args, pair, &cancel);
                    let games: Vec<GameResult> = (2 * pair..(2 * pair + 2).min(args.games))
                        .map(|g| play_game(args, g, &start, &cancel))
                        .collect();
                    results.lock().expect("no worker panics")[pair as usize] = Some(games);
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if progress && n % 50 == 0 {
                        eprintln!("{n}/{pairs} pairs, {:.0}s", started.elapsed().as_secs_f64());
                    }
                }
            });
        }
    });
    results
        .into_inner()
        .expect("no worker panics")
        .into_iter()
        .flatten()
        .flatten()
        .collect()
}

fn report(args: &Args, games: &[GameResult], elapsed: Duration) {
    let (mut wins, mut draws, mut losses) = (0u64, 0u64, 0u64);
    let mut reasons = [0u64; 3];
    // [A first, A second][win, draw, loss]
    let mut by_colour = [[0u64; 3]; 2];
    for r in games {
        match r.diff.signum() {
            1 => wins += 1,
            0 => draws += 1,
            _ => losses += 1,
        }
        by_colour[r.a_side.index()][(1 - r.diff.signum()) as usize] += 1;
        reasons[match r.reason {
            Some(EndReason::Mandarins) => 0,
            Some(EndReason::Repetition) => 1,
            _ => 2,
        }] += 1;
        if args.verbose {
            eprintln!("{}", r.line);
        }
    }
    let n = games.len().max(1) as f64;
    let game_scores: Vec<f64> = games.iter().map(|r| score_of(r.diff)).collect();
    let pair_scores: Vec<f64> = games
        .chunks(2)
        .map(|p| p.iter().map(|r| score_of(r.diff)).sum::<f64>() / p.len() as f64)
        .collect();
    // Pentanomial counts: pairs scoring 0, ¼, ½, ¾, 1.
    let mut penta = [0u64; 5];
    for &p in &pair_scores {
        penta[((p * 4.0).round() as usize).min(4)] += 1;
    }
    let budget = match (args.limits.nodes, args.limits.time) {
        (Some(nodes), _) => format!("{nodes} nodes/move"),
        (None, Some(t)) => format!("{} ms/move", t.as_millis()),
        _ => "no limit".into(),
    };
    let mut opening = match args.balanced {
        Some(b) => format!("{} random plies within ±{b}", args.opening),
        None => format!("{} random plies", args.opening),
    };
    if args.playable {
        opening.push_str(", no move ending the game");
    }
    let [f, sc] = by_colour;
    println!(
        "{} vs {}, {}, {budget}, opening {opening}, seed {}: {} games: W {wins} D {draws} L {losses} = {:.1}% score (A first {}/{}/{}, A second {}/{}/{}), mean diff {:+.1} points, mean {:.0} plies, ends mandarins/repetition/ply-limit {}/{}/{}, {:.0}s",
        args.a.label(),
        args.b.label(),
        args.preset,
        args.seed,
        games.len(),
        100.0 * (wins as f64 + draws as f64 / 2.0) / n,
        f[0],
        f[1],
        f[2],
        sc[0],
        sc[1],
        sc[2],
        games.iter().map(|r| f64::from(r.diff)).sum::<f64>() / n,
        games.iter().map(|r| r.plies as f64).sum::<f64>() / n,
        reasons[0],
        reasons[1],
        reasons[2],
        elapsed.as_secs_f64()
    );
    println!(
        "Elo (95%): pairs {} (pentanomial 0/¼/½/¾/1: {}/{}/{}/{}/{}), games {}",
        elo_interval(&pair_scores),
        penta[0],
        penta[1],
        penta[2],
        penta[3],
        penta[4],
        elo_interval(&game_scores)
    );
    if let Some((elo0, elo1)) = args.sprt {
        let lower = (args.beta / (1.0 - args.alpha)).ln();
        let upper = ((1.0 - args.beta) / args.alpha).ln();
        // The first prefix of pairs (in pair order, so independent of --threads) at which the
        // test would have stopped.
        let crossed = (1..=pair_scores.len()).find_map(|k| {
            let l = llr(&pair_scores[..k], elo0, elo1);
            (l <= lower || l >= upper).then_some((k, l >= upper))
        });
        let l = llr(&pair_scores, elo0, elo1);
        let verdict = match crossed {
            Some((k, true)) => format!("H1 accepted after {k} pairs"),
            Some((k, false)) => format!("H0 accepted after {k} pairs"),
            None => "no verdict yet".to_owned(),
        };
        println!(
            "SPRT elo0 {elo0} elo1 {elo1} alpha {} beta {}: LLR {l:.2} (bounds {lower:.2}, {upper:.2}): {verdict}",
            args.alpha, args.beta
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elo_and_expected_score_are_inverse() {
        assert!(elo(0.5).abs() < 1e-9);
        assert!((elo(0.75) - 190.85).abs() < 0.01);
        for e in [-300.0, -10.0, 0.0, 35.0, 400.0] {
            assert!((elo(expected_score(e)) - e).abs() < 1e-6);
        }
    }

    #[test]
    fn llr_favours_the_hypothesis_the_data_fit() {
        // 60 % over pairs that vary: H1 (elo1 = 70, 59.9 %) fits better than H0 (0).
        let xs: Vec<f64> = (0..400)
            .map(|i| [0.25, 0.5, 0.75, 1.0, 0.5][i % 5])
            .collect();
        assert!(llr(&xs, 0.0, 70.0) > 2.94);
        assert!(llr(&xs, 140.0, 200.0) < -2.94);
        assert!(
            llr(&[0.5, 0.5], 0.0, 10.0).abs() < 1e-12,
            "no variance, no evidence"
        );
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let mut args = Args {
            a: Side::new(Level::Master),
            b: Side {
                eval: EvalWeights::parse("0,16,0,0,32").unwrap(),
                ..Side::new(Level::Master)
            },
            games: 8,
            limits: SearchLimits::nodes(3_000),
            seed: 5,
            opening: 3,
            ..Args::default()
        };
        let one: Vec<String> = play_pairs(&args, false)
            .into_iter()
            .map(|g| g.line)
            .collect();
        args.threads = 3;
        let three: Vec<String> = play_pairs(&args, false)
            .into_iter()
            .map(|g| g.line)
            .collect();
        assert_eq!(one.len(), 8);
        assert_eq!(one, three);
    }
}
