//! Counts perft nodes of one position: `cargo run --release -p oanquan-rules --example
//! perft_position -- PRESET "POSITION" DEPTH`.

use oanquan_rules::{Position, Preset, Setup, perft};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [preset, position, depth] = &args[..] else {
        return Err("usage: perft_position PRESET POSITION DEPTH".into());
    };
    let preset: Preset = preset.parse()?;
    let setup: Setup = position.parse()?;
    let pos = Position::from_setup(setup, preset.rules())?;
    for d in 1..=depth.parse()? {
        println!("{d} {}", perft(&pos, d));
    }
    Ok(())
}
