//! Replays a game and prints the engine's view of every position.
//!
//! ```text
//! cargo run --release -p oanquan-ai --example analyze -- PRESET NODES MOVE...
//! ```
//!
//! For each position: the ply, the player to move, the move played, the engine's best move, its
//! evaluation in points for the player to move (`=` when exact), the search depth, nodes and time.

use std::sync::atomic::AtomicBool;

use oanquan_ai::{Engine, SearchLimits};
use oanquan_rules::{Game, Move, Preset};

fn main() {
    let mut args = std::env::args().skip(1);
    let preset: Preset = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(Preset::Standard);
    let nodes: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let moves: Vec<Move> = args.map(|s| s.parse().expect("a move like 3+")).collect();
    let cancel = AtomicBool::new(false);
    let mut game = Game::new(preset.rules()).expect("presets are valid");
    let mut engine = Engine::new();
    for mv in moves.iter().copied().map(Some).chain([None]) {
        let r = engine.search_game(&game, SearchLimits::nodes(nodes), &cancel);
        let pos = game.position();
        println!(
            "ply {:3} {:?} played {:4} best {:4} eval {}{:+} depth {} nodes {} time {:.1}s pv {}",
            pos.ply(),
            pos.to_move(),
            mv.map_or("-".into(), |m| m.to_string()),
            r.best_move.map_or("-".into(), |m| m.to_string()),
            if r.exact { "=" } else { "" },
            r.eval_points,
            r.depth,
            r.nodes,
            r.time.as_secs_f64(),
            r.pv.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        );
        let Some(mv) = mv else { break };
        game.play(mv).expect("a legal move");
    }
    println!("final {:?} {:?}", game.scores(), game.end_reason());
}
