//! perft counts from `tests/data/perft.txt`.
//!
//! Entries above a node limit are left to the long run (`OANQUAN_PERFT_NODES`, which `.ci/run`
//! raises in a release build) so that the default `cargo test` stays fast; the naive
//! implementation recomputes the small counts independently.

mod common;

use common::Naive;
use oanquan_rules::{Position, Preset, Setup, perft};

struct Entry {
    preset: Preset,
    position: Position,
    depth: u32,
    nodes: u64,
}

fn entries() -> Vec<Entry> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/perft.txt");
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split(';').map(str::trim).collect();
            let [preset, position, counts] = fields[..] else {
                panic!("bad line {line:?}")
            };
            let preset: Preset = preset.parse().unwrap();
            let position = if position == "start" {
                Position::new(preset.rules()).unwrap()
            } else {
                Position::from_setup(position.parse::<Setup>().unwrap(), preset.rules()).unwrap()
            };
            let (depth, nodes) = counts.split_once(' ').unwrap();
            Entry {
                preset,
                position,
                depth: depth.parse().unwrap(),
                nodes: nodes.parse().unwrap(),
            }
        })
        .collect()
}

fn node_limit() -> u64 {
    std::env::var("OANQUAN_PERFT_NODES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300_000)
}

#[test]
fn perft_matches_the_data_file() {
    let limit = node_limit();
    let all = entries();
    let mut checked = 0;
    for e in &all {
        if e.nodes <= limit {
            assert_eq!(
                perft(&e.position, e.depth),
                e.nodes,
                "{} {} depth {}",
                e.preset,
                e.position,
                e.depth
            );
            checked += 1;
        }
    }
    assert!(
        checked >= all.len() / 2,
        "only {checked} of {} entries under the node limit",
        all.len()
    );
    eprintln!(
        "perft: {checked} of {} entries checked (node limit {limit})",
        all.len()
    );
}

#[test]
fn naive_perft_agrees_on_small_counts() {
    for e in entries().iter().filter(|e| e.nodes <= 40_000) {
        assert_eq!(
            Naive::from_position(&e.position).perft(e.depth),
            e.nodes,
            "{} {} depth {}",
            e.preset,
            e.position,
            e.depth
        );
    }
}
