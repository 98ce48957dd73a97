//! Tunes the evaluation's weights by regression on deep-search values.
//!
//! ```text
//! cargo run --release -p oanquan-ai --example tune -- [--games N] [--play-nodes N]
//!     [--label-nodes N] [--threads T] [--seed S] [--presets P,P,...]
//! ```
//!
//! 1. Plays `--games` games (presets in turn, default all three), each from 2–5 random plies,
//!    master against master at `--play-nodes` per move (default 5 000) with the baseline
//!    evaluation and no book; every unfinished position of every game is kept.
//! 2. Labels each position with a `--label-nodes` search (default 100 000) with the baseline
//!    evaluation: its value in points for the player to move.
//! 3. Fits, by least squares, the label minus the current score difference on the features of
//!    `eval_features`, and prints the weights in 1/64 point as `--a-eval` of the match example
//!    reads them, with the residual error of the baseline and of the fit.
//!
//! The result depends only on the flags (node budgets, positions split across `--threads` by
//! index, a cleared engine per position), not on the machine or the thread count.

mod common;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use common::flag;
use oanquan_ai::{
    EVAL_SCALE, Engine, EvalWeights, FEATURE_NAMES, FEATURES, Level, SearchLimits, WEIGHT_SCALE,
    choose_move, eval_features, score_difference,
};
use oanquan_rules::{Game, Position};

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Runs `work(i)` for `0..n` on `threads` threads and returns the results in index order.
fn parallel<T: Send + Clone>(n: usize, threads: usize, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let out = Mutex::new(vec![None; n]);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let r = work(i);
                    out.lock().expect("no worker panics")[i] = Some(r);
                }
            });
        }
    });
    out.into_inner()
        .expect("no worker panics")
        .into_iter()
        .flatten()
        .collect()
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting; `None` if singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() < 1e-12 {
            return None;
        }
        a.swap(c, p);
        b.swap(c, p);
        let b_c = b[c];
        let (top, rest) = a.split_at_mut(c + 1);
        let pivot = &top[c];
        for (row, rhs) in rest.iter_mut().zip(&mut b[c + 1..]) {
            let f = row[c] / pivot[c];
            for (x, p) in row[c..].iter_mut().zip(&pivot[c..]) {
                *x -= f * p;
            }
            *rhs -= f * b_c;
        }
    }
    let mut x = vec![0.0; n];
    for c in (0..n).rev() {
        let s: f64 = (c + 1..n).map(|k| a[c][k] * x[k]).sum();
        x[c] = (b[c] - s) / a[c][c];
    }
    Some(x)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let games: usize = flag(&args, "--games", 600);
    let play_nodes: u64 = flag(&args, "--play-nodes", 5_000);
    let label_nodes: u64 = flag(&args, "--label-nodes", 100_000);
    let threads: usize = flag(&args, "--threads", 1);
    let seed: u64 = flag(&args, "--seed", 1);
    let presets = common::presets(&args);
    let cancel = AtomicBool::new(false);
    let started = Instant::now();

    let positions: Vec<Position> = parallel(games, threads, |g| {
        let preset = presets[g % presets.len()];
        let mut game = Game::new(preset.rules()).expect("presets are valid");
        let mut engine = Engine::with_tt_bytes(1 << 22);
        engine.set_eval(EvalWeights::BASELINE);
        engine.set_use_book(false);
        let opening = 2 + mix(seed ^ g as u64) % 4;
        let mut out = Vec::new();
        while !game.is_over() {
            out.push(*game.position());
            let ply = u64::from(game.position().ply());
            let s = mix(seed ^ mix(g as u64) ^ ply << 40);
            let mv = if ply < opening {
                choose_move(
                    Level::Random,
                    game.position(),
                    s,
                    SearchLimits::NONE,
                    &cancel,
                )
            } else {
                engine.choose_move_in_game(
                    Level::Master,
                    &game,
                    s,
                    SearchLimits::nodes(play_nodes),
                    &cancel,
                )
            };
            game.play(mv.expect("the game is not over")).expect("legal");
        }
        out
    })
    .into_iter()
    .flatten()
    .collect();
    eprintln!(
        "{} positions from {games} games, {:.0}s",
        positions.len(),
        started.elapsed().as_secs_f64()
    );

    let labels: Vec<f64> = parallel(positions.len(), threads, |i| {
        let mut engine = Engine::with_tt_bytes(1 << 22);
        engine.set_eval(EvalWeights::BASELINE);
        let r = engine.search(&positions[i], SearchLimits::nodes(label_nodes), &cancel);
        f64::from(r.eval) / f64::from(EVAL_SCALE)
    });
    eprintln!("labelled, {:.0}s", started.elapsed().as_secs_f64());

    let rows: Vec<([f64; FEATURES], f64)> = positions
        .iter()
        .zip(&labels)
        .map(|(p, &y)| {
            let f = eval_features(p).map(f64::from);
            (f, y - f64::from(score_difference(p)))
        })
        .collect();
    let mut xtx = vec![vec![0.0; FEATURES]; FEATURES];
    let mut xty = vec![0.0; FEATURES];
    for (f, y) in &rows {
        for i in 0..FEATURES {
            xty[i] += f[i] * y;
            for j in 0..FEATURES {
                xtx[i][j] += f[i] * f[j];
            }
        }
    }
    let Some(w) = solve(xtx, xty) else {
        eprintln!("the features are collinear on these positions; play more games");
        std::process::exit(1);
    };
    let rmse = |weights: &[f64]| {
        let sse: f64 = rows
            .iter()
            .map(|(f, y)| {
                let p: f64 = f.iter().zip(weights).map(|(a, b)| a * b).sum();
                (y - p).powi(2)
            })
            .sum();
        (sse / rows.len().max(1) as f64).sqrt()
    };
    let baseline: Vec<f64> = EvalWeights::BASELINE
        .weights
        .iter()
        .map(|&x| f64::from(x) / f64::from(WEIGHT_SCALE))
        .collect();
    let tuned = EvalWeights {
        weights: std::array::from_fn(|i| (w[i] * f64::from(WEIGHT_SCALE)).round() as i32),
    };
    for (name, x) in FEATURE_NAMES.iter().zip(&w) {
        println!("{name:12} {x:+.3} points");
    }
    println!(
        "{} positions, label {label_nodes} nodes: rms error of label - score difference: zero {:.2}, baseline {:.2}, fit {:.2} points",
        rows.len(),
        rmse(&[0.0; FEATURES]),
        rmse(&baseline),
        rmse(&w)
    );
    println!("weights (1/{WEIGHT_SCALE} point): {tuned}");
}
