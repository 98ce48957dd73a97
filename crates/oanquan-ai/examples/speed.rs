//! Measures search speed (nodes per second) and the depth reached.
//!
//! ```text
//! cargo run --release -p oanquan-ai --example speed -- [PRESET] [MS_PER_POSITION] [POSITIONS]
//!     [EVAL...]
//! ```
//!
//! Searches the start position and positions from random games (seeded, so the set is the same
//! on every run), each with a fresh engine and a time budget, and prints one line per position
//! (`ply nodes depth seconds nodes/s`), then the totals. Use the nodes/s figure to turn a time
//! budget into a node budget for reproducible matches. With several evaluations (`baseline`,
//! `tuned`, `default` or five weights, as the match example reads them; default: `default`),
//! each position is searched with each in turn and the totals are printed per evaluation, so
//! that their speeds compare within one run.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use oanquan_ai::{Engine, EvalWeights, Level, SearchLimits, choose_move};
use oanquan_rules::{Position, Preset};

fn main() {
    let mut args = std::env::args().skip(1);
    let preset: Preset = args
        .next()
        .map_or(Ok(Preset::Standard), |s| s.parse())
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2);
        });
    let ms: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let count: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(8);
    let mut evals: Vec<EvalWeights> = args
        .map(|s| {
            EvalWeights::parse(&s).unwrap_or_else(|e| {
                eprintln!("{e}");
                std::process::exit(2);
            })
        })
        .collect();
    if evals.is_empty() {
        evals.push(EvalWeights::DEFAULT);
    }
    let cancel = AtomicBool::new(false);
    let mut positions = vec![Position::new(preset.rules()).expect("presets are valid")];
    for seed in 1..count {
        // A random game, stopped after 4 * seed plies (or just before its end).
        let mut pos = positions[0];
        for ply in 0..4 * seed {
            let Some(mv) = choose_move(
                Level::Random,
                &pos,
                seed * 1000 + ply,
                SearchLimits::NONE,
                &cancel,
            ) else {
                break;
            };
            let mut next = pos;
            next.play_unchecked(mv);
            if next.is_over() {
                break;
            }
            pos = next;
        }
        positions.push(pos);
    }
    let mut totals = vec![(0u64, 0f64); evals.len()];
    println!("{preset}: {ms} ms per position");
    for pos in &positions {
        for (eval, (nodes, secs)) in evals.iter().zip(&mut totals) {
            let mut engine = Engine::new();
            engine.set_eval(*eval);
            let r = engine.search(pos, SearchLimits::time(Duration::from_millis(ms)), &cancel);
            *nodes += r.nodes;
            *secs += r.time.as_secs_f64();
            println!(
                "eval {eval} ply {:3} nodes {:10} depth {:3}{} eval {:+4} time {:.3}s {:.0} nodes/s",
                pos.ply(),
                r.nodes,
                r.depth,
                if r.exact { " (exact)" } else { "" },
                r.eval_points,
                r.time.as_secs_f64(),
                r.nodes_per_second()
            );
        }
    }
    for (eval, (nodes, secs)) in evals.iter().zip(&totals) {
        println!(
            "eval {eval}: total {nodes} nodes in {secs:.3}s: {:.0} nodes/s",
            *nodes as f64 / secs
        );
    }
}
