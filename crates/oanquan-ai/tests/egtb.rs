//! Endgame tables: agreement with the exact solver, the file format's checks, and how the
//! engine uses them (only where their value holds for the game at hand).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use oanquan_ai::egtb::{TableError, Tablebase};
use oanquan_ai::exact::{ExactOutcome, ExactSolver};
use oanquan_ai::{EVAL_SCALE, Engine, Level, SearchLimits, score_difference};
use oanquan_rules::{ByPlayer, Game, Player, Position, Preset, Rules, Setup};

fn table(preset: Preset, n: u32) -> Tablebase {
    let cancel = AtomicBool::new(false);
    Tablebase::generate(preset.rules(), n, 2, &cancel)
        .unwrap()
        .0
}

/// The standard tables up to 5 stones, built once for the whole test binary (small, so that
/// debug builds stay quick; the example checks the large ones).
fn standard5() -> &'static Arc<Tablebase> {
    static TABLE: OnceLock<Arc<Tablebase>> = OnceLock::new();
    TABLE.get_or_init(|| Arc::new(table(Preset::Standard, 5)))
}

/// `position` moved to `ply`.
fn at_ply(position: &Position, ply: u32) -> Position {
    let mut setup = position.to_setup();
    setup.ply = ply;
    Position::from_setup(setup, *position.rules()).unwrap()
}

/// Compares `count` random proved positions with the exact solver (no limits, no tables, an
/// empty history), at the tightest ply the table claims its value for and up to `slack` plies
/// earlier. Returns how many agree.
fn agreement(tables: &Tablebase, count: u64, slack: u32, seed: u64) -> u64 {
    let cancel = AtomicBool::new(false);
    let mut agree = 0;
    for i in 0..count {
        let pos = tables.sample(seed + i, true).unwrap();
        let probe = tables.probe(&pos).unwrap();
        let ply = (pos.rules().max_plies - probe.depth())
            .saturating_sub((i % u64::from(slack + 1)) as u32)
            .max(pos.ply());
        let pos = at_ply(&pos, ply);
        assert!(probe.fits_ply_limit(&pos));
        let r = Engine::with_tt_bytes(1 << 18).search(&pos, SearchLimits::NONE, &cancel);
        if r.exact && r.eval_points == probe.final_difference(&pos) {
            agree += 1;
        } else {
            eprintln!(
                "{pos:?}: table {:+}, solver {:+} (exact {})",
                probe.final_difference(&pos),
                r.eval_points,
                r.exact
            );
        }
    }
    agree
}

#[test]
fn standard_tables_agree_with_the_exact_solver() {
    let tables = standard5();
    assert!(tables.resolved() > 500, "{tables:?}");
    assert_eq!(agreement(tables, 300, 4, 1), 300);
}

#[test]
fn traditional_and_mancala_world_tables_agree_with_the_exact_solver() {
    for (preset, n) in [(Preset::Traditional, 5), (Preset::MancalaWorld, 4)] {
        let tables = table(preset, n);
        assert!(tables.resolved() > 100, "{preset}: {tables:?}");
        assert_eq!(agreement(&tables, 150, 4, 7), 150, "{preset}");
    }
}

/// Every proof of every table size up to 6 stones, seeded ones included, checked move by move
/// against its children as the generator finishes each size (a failing one is an error).
#[test]
fn every_generated_proof_checks_move_by_move() {
    for (preset, n) in [
        (Preset::Standard, 6),
        (Preset::Traditional, 5),
        (Preset::MancalaWorld, 4),
    ] {
        let (tables, stats) =
            Tablebase::generate(preset.rules(), n, 2, &AtomicBool::new(false)).unwrap();
        assert!(stats.resolved > 100, "{preset}: {stats:?}");
        assert_eq!(stats.proofs_checked, stats.resolved, "{preset}");
        assert_eq!(tables.resolved() as u64, stats.resolved, "{preset}");
    }
}

/// The full check of the issue: 10,000 random positions of the 8-stone standard tables (about
/// a minute in release: `cargo test --release -p oanquan-ai --test egtb -- --ignored`).
#[test]
#[ignore = "slow; run with --ignored in release"]
fn ten_thousand_positions_agree_with_the_exact_solver() {
    let tables = table(Preset::Standard, 8);
    assert_eq!(agreement(&tables, 10_000, 0, 1), 10_000);
}

#[test]
fn tables_round_trip_through_their_file_format() {
    let tables = standard5();
    let bytes = tables.to_bytes();
    let loaded = Tablebase::from_bytes(&bytes).unwrap();
    assert_eq!(&loaded, tables.as_ref());
}

#[test]
fn damaged_files_are_refused_with_a_reason() {
    let bytes = standard5().to_bytes();
    for at in [0, 9, 20, 100, bytes.len() / 2, bytes.len() - 1] {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x10;
        let err = Tablebase::from_bytes(&damaged).unwrap_err();
        let expected = if at == 0 {
            TableError::Magic
        } else {
            TableError::Checksum
        };
        assert_eq!(err, expected, "byte {at}");
    }
    for len in [0, 10, 49, bytes.len() - 1] {
        assert!(Tablebase::from_bytes(&bytes[..len]).is_err(), "{len} bytes");
    }
    assert_eq!(
        Tablebase::from_bytes(b"not a table at all, but long enough to hold a header.")
            .unwrap_err(),
        TableError::Magic
    );
    let dir = std::env::temp_dir().join(format!("oanquan-egtb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("damaged.egtb");
    let mut damaged = bytes.clone();
    damaged[bytes.len() / 3] ^= 1;
    std::fs::write(&path, &damaged).unwrap();
    let message = Tablebase::load(&path).unwrap_err();
    assert!(message.contains("damaged"), "{message}");
    assert!(Tablebase::load(&dir.join("missing.egtb")).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A proved standard position with at least two moves, at ply 10.
fn proved_position(tables: &Tablebase) -> Position {
    (0..)
        .map(|seed| tables.sample(seed, true).unwrap())
        .find(|p| p.legal_moves().len() >= 2)
        .map(|p| at_ply(&p, 10))
        .unwrap()
}

#[test]
fn the_engine_answers_from_the_tables_at_the_root() {
    let tables = standard5();
    let cancel = AtomicBool::new(false);
    for seed in 0..50 {
        let pos = at_ply(&tables.sample(seed, true).unwrap(), 10);
        let mut engine = Engine::new();
        engine.set_tablebase(Some(Arc::clone(tables)));
        let r = engine.search(&pos, SearchLimits::nodes(1000), &cancel);
        assert!(r.tablebase && r.exact, "{pos:?}");
        let expected = tables.probe(&pos).unwrap().final_difference(&pos);
        assert_eq!(r.eval_points, expected);
        assert_eq!(r.eval, EVAL_SCALE * expected);
        // The plain solver, where the ply limit keeps its tree small (at ply 10 it would walk
        // every cycle until the repetition rule ends it).
        let tight = at_ply(
            &pos,
            pos.rules().max_plies - tables.probe(&pos).unwrap().depth(),
        );
        let plain = Engine::new().search(&tight, SearchLimits::NONE, &cancel);
        assert!(!plain.tablebase && plain.exact);
        assert_eq!(plain.eval_points, expected, "{pos:?}");

        // Following the tables' moves ends the game with the margin they announced.
        let mover = pos.to_move();
        let mut line = pos;
        for mv in &r.pv {
            line.play_unchecked(*mv);
        }
        assert!(line.is_over(), "{pos:?}: pv {:?}", r.pv);
        let s = line.scores();
        assert_eq!(s[mover] - s[mover.other()], expected, "{pos:?}");
    }
}

#[test]
fn tables_are_not_trusted_near_the_ply_limit_nor_after_a_repetition() {
    let tables = standard5();
    let cancel = AtomicBool::new(false);
    let pos = proved_position(tables);
    let depth = tables.probe(&pos).unwrap().depth();
    let mut engine = Engine::new();
    engine.set_tablebase(Some(Arc::clone(tables)));

    let late = at_ply(&pos, pos.rules().max_plies - depth + 1);
    let r = engine.search(&late, SearchLimits::nodes(1000), &cancel);
    assert!(!r.tablebase, "{late:?}");

    // The same board reached a second time in the game: a third would end it, so the table's
    // history-free value may not hold and the root is searched instead.
    let game = (0..2000)
        .filter_map(|seed| game_reaching_twice(&at_ply(&tables.sample(seed, true).unwrap(), 10)))
        .next()
        .expect("some proved position lies on a short cycle");
    let r = engine.search_game(&game, SearchLimits::nodes(1000), &cancel);
    assert!(!r.tablebase, "{:?}", game.position());
    // The same position without that history is answered from the tables.
    let r = engine.search(game.position(), SearchLimits::nodes(1000), &cancel);
    assert!(r.tablebase, "{:?}", game.position());
}

/// A game whose current position occurred once before, built from a cycle of moves the
/// position allows (if one exists within a few plies).
fn game_reaching_twice(pos: &Position) -> Option<Game> {
    fn find(start: &Position, pos: &Position, path: &mut Vec<oanquan_rules::Move>) -> bool {
        if path.len() >= 6 {
            return false;
        }
        for &mv in &pos.legal_moves() {
            let mut next = *pos;
            next.play_unchecked(mv);
            if next.is_over() {
                continue;
            }
            path.push(mv);
            if next.repetition_key() == start.repetition_key() || find(start, &next, path) {
                return true;
            }
            path.pop();
        }
        false
    }
    let mut cycle = Vec::new();
    if !find(pos, pos, &mut cycle) {
        return None;
    }
    let mut game = Game::from_position(*pos);
    for mv in cycle {
        game.play(mv).ok()?;
    }
    Some(game)
}

#[test]
fn tables_of_another_rule_set_are_never_probed() {
    let traditional = Arc::new(table(Preset::Traditional, 5));
    let tables = standard5();
    let cancel = AtomicBool::new(false);
    for seed in 0..20 {
        let pos = at_ply(&tables.sample(seed, true).unwrap(), 10);
        assert!(!traditional.covers(&pos));
        assert_eq!(traditional.probe(&pos), None);
        let mut engine = Engine::new();
        engine.set_tablebase(Some(Arc::clone(&traditional)));
        let r = engine.search(&pos, SearchLimits::nodes(20_000), &cancel);
        assert!(!r.tablebase && r.tablebase_hits == 0);
        // Same rules but another repetition limit: another rule set, not probed either.
        let rules = Rules {
            repetition_limit: 4,
            ..Rules::STANDARD
        };
        let other = Position::from_setup(pos.to_setup(), rules).unwrap();
        assert_eq!(tables.probe(&other), None);
    }
}

#[test]
fn tables_cut_the_search_and_keep_its_values() {
    let tables = standard5();
    let cancel = AtomicBool::new(false);
    let rules = Rules::STANDARD;
    let mut with_nodes = 0;
    let mut without_nodes = 0;
    let mut hits = 0;
    let mut state = 99u64;
    let mut solved = 0;
    while solved < 10 {
        // Seven stones at random, 14 plies before the limit (so the plain solver ends).
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let mut setup = Setup::start(&rules);
        setup.squares = [0; 12];
        let mut s = state;
        for _ in 0..7 {
            s = s.rotate_left(7).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5555;
            setup.squares[(s >> 60) as usize % 12] += 1;
        }
        setup.to_move = if state >> 63 == 0 {
            Player::First
        } else {
            Player::Second
        };
        setup.ply = rules.max_plies - 14;
        setup.captured = ByPlayer::new(63, 0);
        let Ok(pos) = Position::from_setup(setup, rules) else {
            continue;
        };
        if pos.is_over() {
            continue;
        }
        let plain = Engine::new().search(&pos, SearchLimits::NONE, &cancel);
        let mut engine = Engine::new();
        engine.set_tablebase(Some(Arc::clone(tables)));
        let r = engine.search(&pos, SearchLimits::NONE, &cancel);
        assert!(plain.exact && r.exact);
        assert_eq!(plain.eval_points, r.eval_points, "{pos:?}");
        without_nodes += plain.nodes;
        with_nodes += r.nodes;
        hits += r.tablebase_hits;
        solved += 1;
    }
    assert!(hits > 0);
    assert!(
        with_nodes < without_nodes,
        "{with_nodes} vs {without_nodes}"
    );
}

#[test]
fn weak_levels_do_not_use_the_tables_and_strong_ones_do() {
    let tables = standard5();
    let cancel = AtomicBool::new(false);
    let pos = proved_position(tables);
    let (best, probe) = tables.best_move(&pos).unwrap();
    let mut engine = Engine::new();
    engine.set_tablebase(Some(Arc::clone(tables)));
    let mv = engine
        .choose_move(Level::Master, &pos, 1, SearchLimits::nodes(10), &cancel)
        .unwrap();
    assert_eq!(mv, best);
    let mut after = pos;
    after.play_unchecked(mv);
    let kept = if after.is_over() {
        -score_difference(&after)
    } else {
        -tables.probe(&after).unwrap().final_difference(&after)
    };
    assert_eq!(kept, probe.final_difference(&pos));
    // The engine keeps its tables after a weak level's move.
    engine.choose_move(Level::Novice, &pos, 1, SearchLimits::nodes(10), &cancel);
    assert!(engine.tablebase().is_some());
}

#[test]
fn load_refuses_other_files_by_their_first_bytes() {
    let dir = std::env::temp_dir().join(format!("oanquan-egtb-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let short = dir.join("short.egtb");
    std::fs::write(&short, b"OQ").unwrap();
    let error = Tablebase::load(&short).unwrap_err();
    assert!(
        error.contains("short.egtb") && error.contains("truncated"),
        "{error}"
    );
    let other = dir.join("other.db");
    std::fs::write(&other, vec![0u8; 4096]).unwrap();
    let error = Tablebase::load(&other).unwrap_err();
    assert!(
        error.contains("other.db") && error.contains("bad magic"),
        "{error}"
    );
    let error = Tablebase::load(&dir.join("missing.egtb")).unwrap_err();
    assert!(error.contains("cannot read endgame tables"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The fast exact solver ([`ExactSolver`]) against the tables: every sampled proved position,
/// at the tightest ply its value is claimed for and up to 4 plies earlier, is solved to the
/// table's final margin, with each kind of move-ordering hint (the generator's bounds, the
/// stored values, none): the outcome must not depend on them. The 8-stone tables' 10,000
/// positions are in `fast_solver_ten_thousand_positions` (ignored: release).
#[test]
fn the_fast_solver_agrees_with_the_tables_whatever_its_move_ordering() {
    let cancel = AtomicBool::new(false);
    for (preset, n, count) in [
        (Preset::Standard, 6, 200),
        (Preset::Traditional, 5, 60),
        (Preset::MancalaWorld, 4, 60),
    ] {
        let (tables, _, bounds) =
            Tablebase::generate_with_bounds(preset.rules(), n, 2, &cancel).unwrap();
        let (tables, bounds) = (Arc::new(tables), Arc::new(bounds));
        let mut plain = ExactSolver::with_tt_bytes(1 << 20);
        let mut by_table = ExactSolver::with_tt_bytes(1 << 20);
        by_table.set_hints(Some(Arc::clone(&tables)));
        let mut by_bounds = ExactSolver::with_tt_bytes(1 << 20);
        by_bounds.set_bound_hints(Some(Arc::clone(&bounds)));
        for i in 0..count {
            let pos = tables.sample(100 + i, true).unwrap();
            let probe = tables.probe(&pos).unwrap();
            let ply = (pos.rules().max_plies - probe.depth())
                .saturating_sub((i % 5) as u32)
                .max(pos.ply());
            let pos = at_ply(&pos, ply);
            let expected = ExactOutcome::Solved(probe.final_difference(&pos));
            for (name, solver) in [
                ("bounds", &mut by_bounds),
                ("table", &mut by_table),
                ("none", &mut plain),
            ]
            .into_iter()
            // Without the bounds the solver is slow on long proofs (in a debug build).
            .take(if i % 5 == 0 { 3 } else { 1 })
            {
                let r = solver.solve(&pos, None, &cancel);
                assert_eq!(r.outcome, expected, "{preset} {n}, hints {name}: {pos:?}");
                // A wrong first guess costs time, never the outcome.
                let r =
                    solver.solve_near(&pos, Some(probe.final_difference(&pos) + 1), None, &cancel);
                assert_eq!(
                    r.outcome, expected,
                    "{preset} {n}, hints {name}, bad guess: {pos:?}"
                );
            }
        }
    }
}

/// The fast solver against the engine's exact solver on random positions in and out of the
/// tables, a few plies from the limit: wherever both solve they must agree, and the fast one
/// must solve every proved position.
#[test]
fn the_fast_solver_agrees_with_the_engine_where_both_solve() {
    let cancel = AtomicBool::new(false);
    let tables = table(Preset::Standard, 6);
    let mut solver = ExactSolver::with_tt_bytes(1 << 20);
    let (mut proved_solved, mut other_solved, mut open) = (0, 0, 0);
    for i in 0..300u64 {
        let proved = i % 2 == 0;
        let pos = tables.sample(7_000 + i, proved).unwrap();
        let plies_left = if proved {
            tables.probe(&pos).unwrap().depth() + (i % 3) as u32
        } else {
            6 + (i % 7) as u32
        };
        let pos = at_ply(&pos, pos.rules().max_plies - plies_left);
        let fast = solver.solve(&pos, None, &cancel);
        let engine = Engine::with_tt_bytes(1 << 18).search(&pos, SearchLimits::NONE, &cancel);
        assert!(engine.exact, "{pos:?}");
        match fast.outcome {
            ExactOutcome::Solved(v) => {
                assert_eq!(v, engine.eval_points, "{pos:?}: {fast:?}");
                if proved {
                    proved_solved += 1;
                } else {
                    other_solved += 1;
                }
            }
            ExactOutcome::Open { .. } | ExactOutcome::Uncertified(_) if !proved => open += 1,
            other => panic!("{pos:?}: {other:?}"),
        }
    }
    assert_eq!(proved_solved, 150, "every proved position is solved");
    assert!(
        other_solved > 0 && open > 0,
        "{other_solved} other positions solved, {open} rest on a cycle"
    );
}

/// The check with the fast solver: 10,000 random positions of the 8-stone standard
/// tables, every one solved and equal (`cargo test --release -p oanquan-ai --test egtb --
/// --ignored`; the 12-stone run is `egtb verify`).
#[test]
#[ignore = "slow in debug; run with --ignored in release"]
fn fast_solver_ten_thousand_positions() {
    let cancel = AtomicBool::new(false);
    let (tables, _, bounds) =
        Tablebase::generate_with_bounds(Preset::Standard.rules(), 8, 2, &cancel).unwrap();
    let mut solver = ExactSolver::with_tt_bytes(16 << 20);
    solver.set_bound_hints(Some(Arc::new(bounds)));
    for i in 0..10_000 {
        let pos = tables.sample(1 + i, true).unwrap();
        let probe = tables.probe(&pos).unwrap();
        let pos = at_ply(&pos, pos.rules().max_plies - probe.depth());
        let r = solver.solve(&pos, None, &cancel);
        assert_eq!(
            r.outcome,
            ExactOutcome::Solved(probe.final_difference(&pos)),
            "{pos:?}"
        );
    }
}
