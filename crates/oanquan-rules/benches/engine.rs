//! Engine speed: moves played per second and perft nodes per second from the start position.
//!
//! `cargo bench -p oanquan-rules --bench engine` (see BENCHMARKS.md).
//!
//! The recorded games are many (10,000 per preset) on purpose: replaying a few hundred games
//! over and over lets the branch predictor learn them, which more than triples the figure
//! without saying anything about real play.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use oanquan_rules::{Game, Move, Position, Preset, perft};

/// SplitMix64, so the benchmark's games are the same on every run.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn random_games(preset: Preset, count: usize) -> Vec<Vec<Move>> {
    let mut seed = 42;
    (0..count)
        .map(|_| {
            let mut game = Game::new(preset.rules()).unwrap();
            while !game.is_over() {
                let moves = game.position().legal_moves();
                let pick = (next(&mut seed) % moves.len() as u64) as usize;
                game.play(moves[pick]).unwrap();
            }
            game.moves().to_vec()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    for preset in Preset::ALL {
        let start = Position::new(preset.rules()).unwrap();
        let games = random_games(preset, 10_000);
        let total: usize = games.iter().map(Vec::len).sum();

        let mut group = c.benchmark_group(format!("{preset}"));
        group.throughput(Throughput::Elements(total as u64));
        group.bench_function("play_unchecked, recorded games (moves)", |b| {
            b.iter(|| {
                let mut plies = 0;
                for game in &games {
                    let mut pos = start;
                    for &mv in game {
                        pos.play_unchecked(mv);
                    }
                    plies += pos.ply();
                }
                assert_eq!(plies as usize, total);
                black_box(plies)
            });
        });
        group.bench_function(
            "random playouts: legal_moves + pick + play_unchecked (moves)",
            |b| {
                let mut seed = 7;
                b.iter(|| {
                    let mut plies = 0;
                    while plies < total {
                        let mut pos = start;
                        while !pos.is_over() {
                            let moves = pos.legal_moves();
                            pos.play_unchecked(
                                moves[(next(&mut seed) % moves.len() as u64) as usize],
                            );
                        }
                        plies += pos.ply() as usize;
                    }
                    black_box(plies)
                });
            },
        );
        group.bench_function("play with trace, recorded games (moves)", |b| {
            b.iter(|| {
                let mut plies = 0;
                for game in &games {
                    let mut pos = start;
                    for &mv in game {
                        pos = pos.play(mv).unwrap().0;
                    }
                    plies += pos.ply();
                }
                assert_eq!(plies as usize, total);
                black_box(plies)
            });
        });
        let nodes = perft(&start, 6);
        group.throughput(Throughput::Elements(nodes));
        group.bench_function("perft 6 (leaf nodes)", |b| {
            b.iter(|| assert_eq!(perft(black_box(&start), 6), nodes));
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
