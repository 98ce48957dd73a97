//! Playing for the opponent's mistakes: a greedy opponent's, and anyone's after a sure loss.
//!
//! Minimax assumes a perfect opponent. In a position it does not rate won, it picks the move
//! that does best against the best reply, and a greedy opponent (one that takes the biggest
//! immediate gain, as beginners and [`crate::Level::Greedy`] do) can be led into a capture that
//! loses the game. This pass looks for such moves, and only against such an opponent:
//!
//! * **The evidence**: the opponent's moves so far in the game. It counts as greedy once it has
//!   taken the biggest immediate gain in at least [`GREEDY_SHARE`] of its moves where some legal
//!   move gained less, and in at least [`GREEDY_EVIDENCE`] of them. Against any other opponent
//!   (and for a bare position, which has no history) the engine searches as it always has.
//! * **The budget**: the main search runs with the whole budget until an iteration values the
//!   position at or below [`LOST_POINTS`]; then it keeps [`MAIN_SHARE`] of the budget and the
//!   pass gets what is left. A position the main search rates won costs nothing.
//! * **The pass**: every (move, reply) pair is searched with an equal share of what is left.
//!   Each move's expected result mixes its result against the best reply the pass found
//!   (weight 1 − [`GREEDY_WEIGHT`]) and against the greedy replies (their mean, weight
//!   [`GREEDY_WEIGHT`]). Points become results by a logistic curve ([`expected_result`]): losing
//!   by 12 instead of 2 costs little when neither can be saved, a reply that hands over a win
//!   counts fully.
//! * **The switch**: another move replaces the main search's only when its expected result is
//!   higher by more than [`SWITCH_MARGIN`] and its value against the best reply is at most
//!   [`RISK_POINTS`] below the main search's value, so a wrong guess about the opponent costs
//!   little. The measurements that chose these numbers are in BENCHMARKS.md ("Playing for the
//!   opponent's mistakes").
//! * **A sure loss**: against any opponent, in a game with history, when the main search's move
//!   ends the game with its player behind, the same pass runs (the main search keeps
//!   [`MAIN_SHARE`] once an iteration picks such a move). All the opponent's replies then weigh
//!   [`SURE_LOSS_WEIGHT`] alike, and the points limit is lifted: no move can lose more than the
//!   game, and a move that keeps it going lets a fallible opponent go wrong. A finished game's
//!   result counts as it is (a win, a draw or a loss), not through [`expected_result`]'s curve,
//!   which allows for a searched value's noise. BENCHMARKS.md ("A sure loss") has the matches.

use std::sync::atomic::{AtomicBool, Ordering};

use oanquan_rules::{Game, Move, Player};

use crate::eval::{EVAL_SCALE, difference_after};
use crate::search::{Engine, LostCap, SearchLimits, SearchResult, ends_lost};

/// The share of the budget the main search keeps once it rates the position at or below
/// [`LOST_POINTS`] against a greedy opponent; the pass gets the rest.
pub const MAIN_SHARE: f64 = 0.75;

/// How much higher (in expected result, 0 to 1) a move must score than the main search's move
/// to replace it: the pass's values come from small searches and carry noise.
pub const SWITCH_MARGIN: f64 = 0.02;

/// The most points (against the best reply) a switch may give up on the main search's value.
pub const RISK_POINTS: i32 = 5;

/// The greedy replies' weight in a move's expected result against a greedy opponent.
pub const GREEDY_WEIGHT: f64 = 0.5;

/// The weight of all replies alike (their mean) in a move's expected result when the main
/// search's move is a sure loss: any opponent may go wrong, and no move can lose more than the
/// game.
pub const SURE_LOSS_WEIGHT: f64 = 0.5;

/// The fewest of the opponent's moves that must have shown a greedy choice.
pub const GREEDY_EVIDENCE: u32 = 2;

/// The share of those in which the opponent must have taken the biggest gain.
pub const GREEDY_SHARE: f64 = 0.9;

/// The main search's value for the player to move, in points, at or below which the pass runs
/// (0: every position the search does not rate won).
pub const LOST_POINTS: i32 = 0;

/// Points of margin that move the expected result from ½ to about 0.73.
const RESULT_SCALE_POINTS: f64 = 2.0;

/// The fewest nodes a (move, reply) search must get for the pass to run.
const MIN_PAIR_NODES: u64 = 64;

/// The expected result (1 a win, ½ a draw, 0 a loss) of a value of `points` for the player it
/// is counted for.
#[must_use]
pub fn expected_result(points: f64) -> f64 {
    1.0 / (1.0 + (-points / RESULT_SCALE_POINTS).exp())
}

/// The greedy replies' weight in the model of the opponent of `game`'s player to move:
/// [`GREEDY_WEIGHT`] when the opponent took the biggest immediate gain in at least
/// [`GREEDY_SHARE`] of its moves where that choice showed (some legal move gained less), and
/// there were at least [`GREEDY_EVIDENCE`] of those; otherwise 0.
pub(crate) fn greedy_weight(game: &Game) -> f64 {
    let opponent = game.position().to_move().other();
    let (mut shown, mut taken) = (0_u32, 0_u32);
    let mut pos = *game.start();
    for &mv in game.moves() {
        if pos.is_over() || pos.check(mv).is_err() {
            break;
        }
        if pos.to_move() == opponent {
            let gains: Vec<i32> = pos
                .legal_moves()
                .iter()
                .map(|&m| difference_after(&pos, m))
                .collect();
            let top = gains.iter().copied().max().unwrap_or(0);
            if gains.iter().any(|&g| g < top) {
                shown += 1;
                taken += u32::from(difference_after(&pos, mv) == top);
            }
        }
        pos.play_unchecked(mv);
    }
    let share = f64::from(taken) / f64::from(shown.max(1));
    if shown >= GREEDY_EVIDENCE && share >= GREEDY_SHARE {
        GREEDY_WEIGHT
    } else {
        0.0
    }
}

/// The weights of the opponent model the pass plays against; the rest goes to the best reply.
#[derive(Debug, Clone, Copy)]
struct Model {
    /// The greedy replies' (their mean).
    greedy: f64,
    /// All replies' alike (their mean).
    any: f64,
}

/// What the pass found for one move.
#[derive(Debug, Clone)]
pub(crate) struct MoveOutlook {
    pub mv: Move,
    /// Expected result against the mixed opponent.
    pub expected: f64,
    /// Value in evaluation units against the best reply the pass found (root player's view).
    pub worst: i32,
    /// That reply and the line after it (empty when the move ends the game).
    pub line: Vec<Move>,
}

/// The result of a finished game of value `v`: no search noise to allow for, so a loss by one
/// point is a loss, where [`expected_result`] would count a searched −1 as nearly a draw.
fn final_result(v: i32) -> f64 {
    match v.signum() {
        1 => 1.0,
        0 => 0.5,
        _ => 0.0,
    }
}

/// The value of a finished game for `player`, in evaluation units.
fn final_value(game: &Game, player: Player) -> i32 {
    let scores = game.scores();
    EVAL_SCALE * (scores[player] - scores[player.other()])
}

impl Engine {
    /// Whether [`crate::Level::Master`] and [`Engine::analyze_game`] play for the opponent's
    /// mistakes in a game with history: a greedy opponent's where the main search finds no win,
    /// anyone's where its best move would end the game lost (on in a new engine; see the
    /// module docs).
    pub fn set_play_for_mistakes(&mut self, on: bool) {
        self.play_for_mistakes = on;
    }

    /// Whether the engine plays for the opponent's mistakes.
    #[must_use]
    pub fn plays_for_mistakes(&self) -> bool {
        self.play_for_mistakes
    }

    /// A search of `game`'s position that plays for the opponent's mistakes (the module docs).
    /// [`SearchResult::for_mistakes`] says whether the move changed; `eval` is then the chosen
    /// move's value against the best reply the pass found and `pv` that line. Exactly
    /// [`Engine::search_game`] with the pass off, without limits, for a game without moves, or
    /// against an opponent not shown greedy as long as no iteration's best move ends the game
    /// lost.
    pub(crate) fn search_for_mistakes(
        &mut self,
        game: &Game,
        limits: SearchLimits,
        cancel: &AtomicBool,
    ) -> SearchResult {
        let unbounded = limits.nodes.is_none() && limits.time.is_none() && limits.depth.is_none();
        // A bare position has no opponent to read: the plain search, as documented.
        if !self.play_for_mistakes || unbounded || game.moves().is_empty() {
            return self.search_game(game, limits, cancel);
        }
        let greedy = greedy_weight(game);
        // Against an opponent not shown greedy, only a sure loss starts the pass.
        let lost = (greedy > 0.0).then_some(-LOST_POINTS * EVAL_SCALE);
        let cap = LostCap {
            at_or_below: lost,
            keep: MAIN_SHARE,
        };
        let mut main = self.search_game_capped(game, limits, cap, cancel);
        let Some(best) = main.best_move else {
            return main;
        };
        let sure_loss = ends_lost(game.position(), best);
        if !sure_loss && lost.is_none_or(|lost| main.eval > lost) {
            return main;
        }
        let model = Model {
            greedy,
            any: if sure_loss { SURE_LOSS_WEIGHT } else { 0.0 },
        };
        let pairs: usize = game
            .position()
            .legal_moves()
            .iter()
            .map(|&mv| {
                let mut next = *game.position();
                next.play_unchecked(mv);
                next.legal_moves().len().max(1)
            })
            .sum();
        // What the main search left of the budget.
        let pass = SearchLimits {
            time: limits.time.map(|t| t.saturating_sub(main.time)),
            nodes: limits.nodes.map(|n| n.saturating_sub(main.nodes)),
            depth: limits.depth.map(|d| d.saturating_sub(2).max(1)),
        };
        let pairs = pairs.max(1);
        if pass
            .nodes
            .is_some_and(|n| n < pairs as u64 * MIN_PAIR_NODES)
            || pass.time.is_some_and(|t| t.is_zero())
        {
            // The main search used the budget up (its last iteration ran past the cap).
            return main;
        }
        let per_pair = SearchLimits {
            time: pass.time.map(|t| t / pairs as u32),
            nodes: pass.nodes.map(|n| n / pairs as u64),
            depth: pass.depth,
        };
        let started = std::time::Instant::now();
        let mut outlooks = Vec::new();
        let mut nodes = 0;
        for &mv in game.position().legal_moves().iter() {
            match self.outlook(game, mv, model, per_pair, &mut nodes, cancel) {
                Some(outlook) => outlooks.push(outlook),
                None => break,
            }
        }
        main.nodes += nodes;
        main.time += started.elapsed();
        if outlooks.len() < game.position().legal_moves().len() {
            // Cancelled part-way: the main search's move stands.
            return main;
        }
        let of_best = outlooks
            .iter()
            .find(|o| o.mv == best)
            .map_or(0.0, |o| o.expected);
        // After a sure loss no move can do worse in result, so the limit on points given up
        // does not apply.
        let risk = RISK_POINTS * EVAL_SCALE;
        let chosen = outlooks
            .iter()
            .filter(|o| o.mv != best && (sure_loss || o.worst >= main.eval - risk))
            .max_by(|a, b| a.expected.total_cmp(&b.expected))
            .filter(|o| o.expected > of_best + SWITCH_MARGIN);
        if let Some(o) = chosen {
            main.best_move = Some(o.mv);
            main.eval = o.worst;
            main.eval_points = (o.worst + EVAL_SCALE / 2).div_euclid(EVAL_SCALE);
            main.exact = false;
            main.pv = std::iter::once(o.mv)
                .chain(o.line.iter().copied())
                .collect();
            main.for_mistakes = true;
        }
        main
    }

    /// The pass's look at `mv`: every reply searched with `limits`, their nodes added to
    /// `nodes`. `None` when cancelled.
    fn outlook(
        &mut self,
        game: &Game,
        mv: Move,
        model: Model,
        limits: SearchLimits,
        nodes: &mut u64,
        cancel: &AtomicBool,
    ) -> Option<MoveOutlook> {
        let me = game.position().to_move();
        let mut after = game.clone();
        after.play(mv).ok()?;
        if after.is_over() {
            let v = final_value(&after, me);
            let expected = final_result(v);
            return Some(MoveOutlook {
                mv,
                expected,
                worst: v,
                line: Vec::new(),
            });
        }
        let replies = after.position().legal_moves().to_vec();
        let mut worst: Option<(i32, Vec<Move>, f64)> = None;
        // The replies a greedy opponent plays: the biggest immediate gain for them.
        let gain = |reply: Move| difference_after(after.position(), reply);
        let top_gain = replies.iter().map(|&r| gain(r)).max().unwrap_or(0);
        let (mut greedy_sum, mut greedy_n, mut all_sum) = (0.0, 0u32, 0.0);
        for &reply in &replies {
            if cancel.load(Ordering::Relaxed) {
                return None;
            }
            let mut next = after.clone();
            next.play(reply).ok()?;
            let (v, line, result) = if next.is_over() {
                let v = final_value(&next, me);
                (v, vec![reply], final_result(v))
            } else {
                let r = self.search_game(&next, limits, cancel);
                *nodes += r.nodes;
                let v = if next.position().to_move() == me {
                    r.eval
                } else {
                    -r.eval
                };
                let result = expected_result(f64::from(v) / f64::from(EVAL_SCALE));
                (v, std::iter::once(reply).chain(r.pv).collect(), result)
            };
            all_sum += result;
            if gain(reply) == top_gain {
                greedy_sum += result;
                greedy_n += 1;
            }
            if worst.as_ref().is_none_or(|(w, _, _)| v < *w) {
                worst = Some((v, line, result));
            }
        }
        let (worst, line, worst_result) = worst?;
        let greedy = greedy_sum / f64::from(greedy_n.max(1));
        let all = all_sum / replies.len().max(1) as f64;
        let expected = (1.0 - model.greedy - model.any) * worst_result
            + model.greedy * greedy
            + model.any * all;
        Some(MoveOutlook {
            mv,
            expected,
            worst,
            line,
        })
    }
}

#[cfg(test)]
mod tests {
    use oanquan_rules::Preset;

    use super::*;

    /// Two random plies, then a greedy first player against master: the game of seed 36 of a
    /// greedy-against-master run, where master (to move, behind) sets a trap.
    const TRAP: &str = "2- 7+ 4- 8+ 2-";

    fn game_of(line: &str) -> Game {
        let mut game = Game::new(Preset::Standard.rules()).unwrap();
        for mv in line.split_whitespace() {
            game.play(mv.parse().unwrap()).unwrap();
        }
        game
    }

    fn analyze(game: &Game, on: bool, nodes: u64) -> SearchResult {
        let mut engine = Engine::new();
        engine.set_play_for_mistakes(on);
        engine.analyze_game(game, SearchLimits::nodes(nodes), &AtomicBool::new(false))
    }

    /// `game` analysed with `nodes`, without the pass and with it, after checking that the pass
    /// chose another move within the budget.
    fn plain_and_switched(game: &Game, nodes: u64) -> (SearchResult, SearchResult) {
        let plain = analyze(game, false, nodes);
        let on = analyze(game, true, nodes);
        assert!(!plain.for_mistakes);
        assert!(on.for_mistakes, "{on:?}");
        assert!(
            on.nodes <= nodes,
            "the pass stays within the budget: {}",
            on.nodes
        );
        (plain, on)
    }

    /// The mean value, for the player to move in `game`, after `first` and each of the replies
    /// a greedy opponent may play (the biggest gains), by a deeper search than the pass's.
    fn against_greedy(game: &Game, first: Move) -> f64 {
        let cancel = AtomicBool::new(false);
        let mut after = game.clone();
        after.play(first).unwrap();
        let replies = after.position().legal_moves();
        let top = replies
            .iter()
            .map(|&r| difference_after(after.position(), r))
            .max()
            .unwrap();
        let greedy: Vec<Move> = replies
            .iter()
            .copied()
            .filter(|&r| difference_after(after.position(), r) == top)
            .collect();
        let me = game.position().to_move();
        let values = greedy
            .iter()
            .map(|&r| f64::from(deep_value_after(&after, r, me, &cancel)));
        values.sum::<f64>() / greedy.len() as f64
    }

    /// The value for `me`, in points, after `reply` in `game`, by a deeper search than the
    /// pass's (200,000 nodes).
    fn deep_value_after(game: &Game, reply: Move, me: Player, cancel: &AtomicBool) -> i32 {
        let mut next = game.clone();
        next.play(reply).unwrap();
        let v = Engine::new()
            .search_game(&next, SearchLimits::nodes(200_000), cancel)
            .eval_points;
        if next.position().to_move() == me {
            v
        } else {
            -v
        }
    }

    #[test]
    fn a_greedy_opponent_is_recognised_by_its_moves() {
        assert_eq!(greedy_weight(&game_of(TRAP)), GREEDY_WEIGHT);
        // No history, no evidence.
        assert_eq!(greedy_weight(&game_of("")), 0.0);
        assert_eq!(greedy_weight(&game_of("2- 7+")), 0.0);
        // The same game with the opponent's last move one that gains less than its best.
        let before = game_of("2- 7+ 4- 8+");
        let modest = *before
            .position()
            .legal_moves()
            .iter()
            .min_by_key(|&&mv| difference_after(before.position(), mv))
            .unwrap();
        let mut declined = before.clone();
        declined.play(modest).unwrap();
        assert_eq!(greedy_weight(&declined), 0.0, "after {modest}");
    }

    #[test]
    fn behind_against_a_greedy_opponent_master_sets_a_trap_that_works() {
        let game = game_of(TRAP);
        let (plain, trap) = plain_and_switched(&game, 10_000);
        let chosen = trap.best_move.unwrap();
        assert_ne!(Some(chosen), plain.best_move);
        // The principal variation is the chosen move and a legal line after it.
        assert_eq!(trap.pv.first(), Some(&chosen));
        let mut replay = game.clone();
        for &mv in &trap.pv {
            replay.play(mv).unwrap();
        }
        // The trap does better against greedy's replies than the plain move, by a deeper search.
        let (with_trap, without) = (
            against_greedy(&game, chosen),
            against_greedy(&game, plain.best_move.unwrap()),
        );
        assert!(
            with_trap > without,
            "{chosen}: {with_trap}, {}: {without}",
            plain.best_move.unwrap()
        );
    }

    /// Four random plies of a master-against-random match (seed 1, game 272) after which every
    /// move of the first player loses against best play, and the best ends the game at once.
    const SURE_LOSS: &str = "1+ 10- 2+ 10+";

    #[test]
    fn facing_a_sure_loss_master_leaves_the_opponent_a_way_to_go_wrong() {
        let game = game_of(SURE_LOSS);
        let cancel = AtomicBool::new(false);
        let (plain, on) = plain_and_switched(&game, 20_000);
        assert!(
            ends_lost(game.position(), plain.best_move.unwrap()),
            "{plain:?}"
        );
        let chosen = on.best_move.unwrap();
        let mut after = game.clone();
        after.play(chosen).unwrap();
        assert!(!after.is_over(), "{chosen} keeps the game going");
        // Some reply of the opponent's hands the first player a win, by a deeper search.
        let me = game.position().to_move();
        let winning_replies = after
            .position()
            .legal_moves()
            .iter()
            .filter(|&&reply| deep_value_after(&after, reply, me, &cancel) > 0)
            .count();
        assert!(winning_replies > 0, "{chosen}: no reply goes wrong");
    }

    #[test]
    fn a_sure_loss_is_a_move_that_ends_the_game_behind() {
        let game = game_of(SURE_LOSS);
        let pos = game.position();
        let (ending, going): (Vec<Move>, Vec<Move>) = pos.legal_moves().iter().partition(|&&mv| {
            let mut next = *pos;
            next.play_unchecked(mv);
            next.is_over()
        });
        assert!(!ending.is_empty() && !going.is_empty());
        for mv in ending {
            let mut next = game.clone();
            next.play(mv).unwrap();
            let scores = next.scores();
            let behind = scores[pos.to_move()] < scores[pos.to_move().other()];
            assert_eq!(ends_lost(pos, mv), behind, "{mv}");
        }
        assert!(going.iter().all(|&mv| !ends_lost(pos, mv)));
    }

    #[test]
    fn without_history_the_search_is_unchanged() {
        for game in [
            Game::from_position(*game_of(TRAP).position()),
            Game::from_position(*game_of(SURE_LOSS).position()),
            game_of("2- 7+"),
        ] {
            let plain = analyze(&game, false, 10_000);
            let on = analyze(&game, true, 10_000);
            assert!(!on.for_mistakes);
            assert_eq!(
                SearchResult {
                    time: plain.time,
                    ..on
                },
                plain
            );
        }
    }

    #[test]
    fn results_follow_the_margin() {
        assert!((expected_result(0.0) - 0.5).abs() < 1e-12);
        assert!(expected_result(20.0) > 0.99);
        assert!(expected_result(-20.0) < 0.01);
        assert!(expected_result(1.0) > expected_result(0.5));
        // A finished game has no noise: a loss by a point is a loss.
        assert_eq!(final_result(-EVAL_SCALE), 0.0);
        assert_eq!(final_result(0), 0.5);
        assert_eq!(final_result(EVAL_SCALE), 1.0);
    }
}
