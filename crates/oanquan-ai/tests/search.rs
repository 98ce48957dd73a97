//! Search correctness: legal moves, determinism, cancellation, agreement with plain minimax and
//! an exact endgame solver checked against exhaustive minimax.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use oanquan_ai::{
    EVAL_SCALE, Engine, Level, SearchLimits, choose_move, evaluate, score_difference,
};
use oanquan_rules::{ByPlayer, Game, MAX_DEBT, Position, Preset, Rules, Setup};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A position after `plies` random moves (fewer if the game would end), with its rule set.
fn random_position(rules: Rules, plies: u32, rng: &mut Rng) -> Position {
    let mut pos = Position::new(rules).unwrap();
    for _ in 0..plies {
        let moves = pos.legal_moves();
        let mut next = pos;
        next.play_unchecked(moves[rng.below(moves.len())]);
        if next.is_over() {
            break;
        }
        pos = next;
    }
    pos
}

/// A position from a random game played until at most `max_stones` stones remain on the board
/// (or `None` if the game ended first).
fn random_endgame(rules: Rules, max_stones: u32, rng: &mut Rng) -> Option<Position> {
    let mut pos = Position::new(rules).unwrap();
    while !pos.is_over() {
        if pos.squares().iter().map(|&s| u32::from(s)).sum::<u32>() <= max_stones {
            return Some(pos);
        }
        let moves = pos.legal_moves();
        pos.play_unchecked(moves[rng.below(moves.len())]);
    }
    None
}

/// Plain negamax to `depth` (no pruning, no table), with the rules crate's `Game` applying the
/// repetition rule, and the engine's static evaluation at the horizon. `budget` counts nodes
/// down; `None` once it is exhausted.
fn minimax(game: &Game, depth: u32, budget: &mut u64) -> Option<i32> {
    *budget = budget.checked_sub(1)?;
    let pos = game.position();
    if pos.is_over() {
        return Some(EVAL_SCALE * score_difference(pos));
    }
    if depth == 0 {
        return Some(evaluate(pos));
    }
    let mut best = i32::MIN;
    for &mv in &pos.legal_moves() {
        let mut child = game.clone();
        child.play(mv).unwrap();
        best = best.max(-minimax(&child, depth - 1, budget)?);
    }
    Some(best)
}

const PRESETS: [Preset; 3] = Preset::ALL;

#[test]
fn chosen_moves_are_legal_at_every_level() {
    let cancel = AtomicBool::new(false);
    let mut rng = Rng(1);
    for preset in PRESETS {
        for i in 0..12 {
            let pos = random_position(preset.rules(), i * 5, &mut rng);
            for level in Level::ALL {
                let mv = choose_move(level, &pos, i.into(), SearchLimits::nodes(3_000), &cancel)
                    .expect("the game is not over");
                assert!(pos.legal_moves().contains(&mv), "{level} {mv} in {pos}");
            }
            let mut engine = Engine::with_tt_bytes(1 << 16);
            let r = engine.search(&pos, SearchLimits::nodes(2_000), &cancel);
            let best = r.best_move.unwrap();
            assert!(pos.legal_moves().contains(&best));
            assert_eq!(r.pv.first(), Some(&best), "{pos}");
            // The principal variation is a legal line.
            let mut p = pos;
            for &mv in &r.pv {
                assert!(p.check(mv).is_ok(), "pv {:?} from {pos}", r.pv);
                p.play_unchecked(mv);
            }
        }
    }
}

#[test]
fn game_over_has_no_move() {
    let setup = "0,0,0,1,0,0,1,0,0,1,0,0 28:39 2 60".parse().unwrap();
    let pos = Position::from_setup(setup, Rules::STANDARD).unwrap();
    let mv = "9-".parse().unwrap();
    let (over, _) = pos.play(mv).unwrap();
    assert!(over.is_over());
    let cancel = AtomicBool::new(false);
    let r = Engine::new().search(&over, SearchLimits::depth(3), &cancel);
    assert_eq!(r.best_move, None);
    assert!(r.exact);
    assert_eq!(r.eval_points, score_difference(&over));
    assert_eq!(
        choose_move(Level::Master, &over, 0, SearchLimits::NONE, &cancel),
        None
    );
}

#[test]
fn node_limited_searches_are_reproducible() {
    let cancel = AtomicBool::new(false);
    let mut rng = Rng(2);
    for preset in PRESETS {
        let pos = random_position(preset.rules(), 6, &mut rng);
        for seed in [0, 99] {
            let run = || {
                let mut engine = Engine::with_tt_bytes(1 << 18);
                engine.set_seed(seed);
                let mut r = engine.search(&pos, SearchLimits::nodes(30_000), &cancel);
                r.time = Duration::ZERO;
                r
            };
            let (a, b) = (run(), run());
            assert_eq!(a, b, "{preset} seed {seed}");
            assert!(a.stopped, "30 000 nodes do not solve the opening");
            let level_move = || {
                choose_move(
                    Level::Master,
                    &pos,
                    seed,
                    SearchLimits::nodes(20_000),
                    &cancel,
                )
            };
            assert_eq!(level_move(), level_move());
            let random = || choose_move(Level::Random, &pos, seed, SearchLimits::NONE, &cancel);
            assert_eq!(random(), random());
        }
    }
}

#[test]
fn positions_at_the_rules_bounds_are_searched() {
    // The fullest board the rules allow, with each debt at its deepest in turn.
    let cancel = AtomicBool::new(false);
    for (first, second) in [(-MAX_DEBT, MAX_DEBT - 185), (MAX_DEBT - 185, -MAX_DEBT)] {
        let mut setup: Setup = "1,1,0,0,0,0,0,0,0,0,0,253 0:0 1 0".parse().unwrap();
        setup.captured = ByPlayer::new(first, second);
        let pos = Position::from_setup(setup, Rules::STANDARD).unwrap();
        let result =
            Engine::with_tt_bytes(1 << 18).search(&pos, SearchLimits::nodes(20_000), &cancel);
        assert!(result.best_move.is_some(), "{pos:?}");
        for level in Level::ALL {
            assert!(choose_move(level, &pos, 1, SearchLimits::nodes(5_000), &cancel).is_some());
        }
    }
}

#[test]
fn seeds_vary_the_random_level() {
    let cancel = AtomicBool::new(false);
    let pos = Position::new(Rules::STANDARD).unwrap();
    let moves: std::collections::HashSet<_> = (0..64)
        .map(|seed| choose_move(Level::Random, &pos, seed, SearchLimits::NONE, &cancel).unwrap())
        .collect();
    assert_eq!(moves.len(), 10);
}

#[test]
fn cancel_stops_a_search_promptly() {
    let pos = Position::new(Rules::STANDARD).unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        flag.store(true, Ordering::Relaxed);
        Instant::now()
    });
    let mut engine = Engine::new();
    let r = engine.search(&pos, SearchLimits::NONE, &cancel);
    let returned = Instant::now();
    let cancelled_at = setter.join().unwrap();
    assert!(r.stopped);
    assert!(
        returned.saturating_duration_since(cancelled_at) < Duration::from_millis(100),
        "returned {:?} after the flag",
        returned.saturating_duration_since(cancelled_at)
    );
    assert!(pos.legal_moves().contains(&r.best_move.unwrap()));
    assert!(r.depth >= 1, "100 ms complete at least one iteration");

    // Cancelled before it starts: still a legal move, at once.
    let t = Instant::now();
    let r = Engine::new().search(&pos, SearchLimits::NONE, &cancel);
    assert!(t.elapsed() < Duration::from_millis(100));
    assert!(pos.legal_moves().contains(&r.best_move.unwrap()));
    assert_eq!(r.depth, 0);
}

#[test]
fn time_limit_is_respected() {
    let pos = Position::new(Rules::STANDARD).unwrap();
    let cancel = AtomicBool::new(false);
    let r = Engine::new().search(&pos, SearchLimits::time(Duration::from_millis(60)), &cancel);
    // The clock is read every 1024 nodes: the overshoot is far below a millisecond, but a busy
    // test machine may not schedule the thread at once.
    assert!(r.time < Duration::from_millis(250), "{:?}", r.time);
    assert!(r.best_move.is_some());
}

#[test]
fn fixed_depth_search_agrees_with_minimax() {
    let cancel = AtomicBool::new(false);
    let mut rng = Rng(3);
    for preset in PRESETS {
        for i in 0..10 {
            let pos = random_position(preset.rules(), 3 * i, &mut rng);
            for depth in 1..=4 {
                let mut budget = u64::MAX;
                let expected = minimax(&Game::from_position(pos), depth, &mut budget).unwrap();
                let mut engine = Engine::with_tt_bytes(1 << 18);
                engine.set_endgame_threshold(None);
                let r = engine.search(&pos, SearchLimits::depth(depth), &cancel);
                assert_eq!(r.eval, expected, "{preset} depth {depth} {pos}");
                // The best move's own value is the position's value.
                let mut child = Game::from_position(pos);
                child.play(r.best_move.unwrap()).unwrap();
                let mut budget = u64::MAX;
                assert_eq!(-minimax(&child, depth - 1, &mut budget).unwrap(), expected);
            }
        }
    }
}

#[test]
fn endgame_solver_agrees_with_exhaustive_minimax() {
    let cancel = AtomicBool::new(false);
    let mut rng = Rng(4);
    let mut compared = 0;
    for preset in PRESETS {
        for repetition_limit in [3, 2, 0] {
            let rules = Rules {
                repetition_limit,
                ..preset.rules()
            };
            let mut done = 0;
            let mut tried = 0;
            while done < 5 && tried < 200 {
                tried += 1;
                // Games with pieces end when both are captured, usually with more stones left.
                let max_stones = if rules.has_pieces() { 24 } else { 10 };
                let Some(pos) = random_endgame(rules, max_stones, &mut rng) else {
                    continue;
                };
                // Cap the game's length close to here so exhaustive minimax stays small.
                let mut setup = pos.to_setup();
                setup.ply = 0;
                let capped = Rules {
                    max_plies: 2 + rng.below(8) as u32,
                    protected_plies: 0,
                    ..rules
                };
                let pos = Position::from_setup(setup, capped).unwrap();
                let mut budget = 100_000;
                let Some(expected) = minimax(&Game::from_position(pos), u32::MAX, &mut budget)
                else {
                    continue;
                };
                let mut engine = Engine::with_tt_bytes(1 << 18);
                let r = engine.search(&pos, SearchLimits::NONE, &cancel);
                assert!(r.exact, "{pos:?} not solved");
                assert_eq!(r.eval, expected, "{preset} {pos:?}");
                assert_eq!(r.eval_points * EVAL_SCALE, expected);
                done += 1;
                compared += 1;
            }
            eprintln!(
                "{preset} repetition limit {repetition_limit}: {done} endgames in {tried} tries"
            );
        }
    }
    assert!(compared >= 40, "only {compared} endgames compared");
}

/// A random game (the repetition rule applies with the game's history), `plies` moves long or
/// shorter if it ends.
fn random_game(rules: Rules, plies: u32, rng: &mut Rng) -> Game {
    let mut game = Game::new(rules).unwrap();
    for _ in 0..plies {
        let moves = game.position().legal_moves();
        let mut next = game.clone();
        next.play(moves[rng.below(moves.len())]).unwrap();
        if next.is_over() {
            break;
        }
        game = next;
    }
    game
}

#[test]
fn game_searches_apply_the_repetition_rule_with_history() {
    let cancel = AtomicBool::new(false);
    let mut rng = Rng(5);
    for preset in PRESETS {
        // Limit 2: any position seen before in the game ends it, so the history matters.
        let rules = Rules {
            repetition_limit: 2,
            ..preset.rules()
        };
        for i in 0..12 {
            let game = random_game(rules, 10 + 4 * i, &mut rng);
            for depth in 1..=3 {
                let mut budget = u64::MAX;
                let expected = minimax(&game, depth, &mut budget).unwrap();
                let mut engine = Engine::with_tt_bytes(1 << 18);
                engine.set_endgame_threshold(None);
                let r = engine.search_game(&game, SearchLimits::depth(depth), &cancel);
                assert_eq!(
                    r.eval,
                    expected,
                    "{preset} depth {depth} {:?}",
                    game.record()
                );
            }
        }
    }
}

/// A node budget is what `nodes` may report at most: `Analyze` with `node_limit: 1` said it
/// had visited 2 positions (the root, then the child it stopped at), and children that repeat
/// a position were counted past the budget. And a search the budget stops has spent it all:
/// one stopped at N − 1, so budgets of 1 and 2 searched alike.
#[test]
fn a_search_never_reports_more_nodes_than_its_budget() {
    let cancel = AtomicBool::new(false);
    let mut rng = Rng(5);
    for preset in PRESETS {
        for plies in [0, 4, 12] {
            let pos = random_position(preset.rules(), plies, &mut rng);
            if pos.is_over() {
                continue;
            }
            for budget in [1, 2, 3, 7, 100, 1_000] {
                let mut engine = Engine::with_tt_bytes(1 << 16);
                let result = engine.search(&pos, SearchLimits::nodes(budget), &cancel);
                assert!(
                    result.nodes <= budget,
                    "{preset} after {plies} plies, budget {budget}: {result:?}"
                );
                if result.stopped {
                    assert_eq!(
                        result.nodes, budget,
                        "{preset} after {plies} plies: {result:?}"
                    );
                }
                assert!(result.best_move.is_some(), "{preset}, budget {budget}");
            }
        }
    }
}
