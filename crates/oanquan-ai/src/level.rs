//! Playing levels, from a random mover to the full-strength search.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use oanquan_rules::{Game, Move, Position};

use crate::book::{BookEntry, OpeningBook};
use crate::eval::EVAL_SCALE;
use crate::eval::difference_after;
use crate::rng::SplitMix64;
use crate::search::{Engine, SearchLimits, SearchResult};

/// How strong the computer plays. Numbered 1 (weakest) to 7 (strongest); the names are what a
/// client shows.
///
/// | # | name | plays |
/// | --- | --- | --- |
/// | 1 | `random` | a uniformly random legal move |
/// | 2 | `greedy` | the move that gains the most points at once (ties at random) |
/// | 3 | `novice` | searches 2 plies |
/// | 4 | `casual` | searches 4 plies |
/// | 5 | `club` | searches 6 plies |
/// | 6 | `expert` | searches 9 plies, solves endgames exactly |
/// | 7 | `master` | searches as deep as the limits allow, solves endgames exactly |
///
/// Every searching level also obeys the caller's [`SearchLimits`]; only `master` uses the
/// whole time budget on every move. `master` plays the opening book's move, without searching,
/// in the positions the book holds (see [`Engine::book_move`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// 1: a uniformly random legal move.
    Random = 1,
    /// 2: the best immediate gain in points.
    Greedy = 2,
    /// 3: a 2-ply search.
    Novice = 3,
    /// 4: a 4-ply search.
    Casual = 4,
    /// 5: a 6-ply search.
    Club = 5,
    /// 6: a 9-ply search, exact in endgames.
    Expert = 6,
    /// 7: iterative deepening until the limits, exact in endgames.
    Master = 7,
}

impl Level {
    /// Every level, weakest first.
    pub const ALL: [Level; 7] = [
        Level::Random,
        Level::Greedy,
        Level::Novice,
        Level::Casual,
        Level::Club,
        Level::Expert,
        Level::Master,
    ];

    /// The strongest level.
    pub const STRONGEST: Level = Level::Master;

    /// The level's number, 1 to 7.
    #[must_use]
    pub const fn number(self) -> u8 {
        self as u8
    }

    /// The level numbered `number` (1 to 7).
    #[must_use]
    pub const fn from_number(number: u8) -> Option<Level> {
        Some(match number {
            1 => Level::Random,
            2 => Level::Greedy,
            3 => Level::Novice,
            4 => Level::Casual,
            5 => Level::Club,
            6 => Level::Expert,
            7 => Level::Master,
            _ => return None,
        })
    }

    /// The level's name, as [`FromStr`] reads it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Level::Random => "random",
            Level::Greedy => "greedy",
            Level::Novice => "novice",
            Level::Casual => "casual",
            Level::Club => "club",
            Level::Expert => "expert",
            Level::Master => "master",
        }
    }

    /// One line on how the level plays.
    #[must_use]
    pub const fn description(self) -> &'static str {
        match self {
            Level::Random => "plays a random legal move",
            Level::Greedy => "takes the biggest capture it sees, nothing more",
            Level::Novice => "looks 2 moves ahead",
            Level::Casual => "looks 4 moves ahead",
            Level::Club => "looks 6 moves ahead",
            Level::Expert => "looks 9 moves ahead and plays endgames perfectly",
            Level::Master => "uses its whole thinking time and plays endgames perfectly",
        }
    }

    /// The search depth cap, in plies; `None` for the levels that do not search (`random`,
    /// `greedy`) and for `master` (no cap).
    #[must_use]
    pub const fn depth(self) -> Option<u32> {
        match self {
            Level::Random | Level::Greedy | Level::Master => None,
            Level::Novice => Some(2),
            Level::Casual => Some(4),
            Level::Club => Some(6),
            Level::Expert => Some(9),
        }
    }

    /// Whether the level searches (levels 3 and up).
    #[must_use]
    pub const fn searches(self) -> bool {
        !matches!(self, Level::Random | Level::Greedy)
    }

    /// Whether the level solves endgames exactly (lifts its depth cap with few stones left).
    #[must_use]
    pub const fn solves_endgames(self) -> bool {
        matches!(self, Level::Expert | Level::Master)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A level that is neither a known name nor a number from 1 to 7.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownLevel(pub String);

impl fmt::Display for UnknownLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown level {:?}; levels are 1-7 or random, greedy, novice, casual, club, expert, master",
            self.0
        )
    }
}

impl std::error::Error for UnknownLevel {}

impl FromStr for Level {
    type Err = UnknownLevel;

    /// Reads a level's name (any case) or number: `master`, `7`.
    fn from_str(s: &str) -> Result<Level, UnknownLevel> {
        let t = s.trim();
        t.parse::<u8>()
            .ok()
            .and_then(Level::from_number)
            .or_else(|| {
                Level::ALL
                    .into_iter()
                    .find(|l| l.name().eq_ignore_ascii_case(t))
            })
            .ok_or_else(|| UnknownLevel(s.to_owned()))
    }
}

/// A uniformly random legal move; `None` if the game is over.
fn random_move(position: &Position, seed: u64) -> Option<Move> {
    let moves = position.legal_moves();
    if moves.is_empty() {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    Some(moves[rng.below(moves.len())])
}

/// The move with the best score difference right after it (captures, the end-of-game
/// collection), ties broken by `seed`; `None` if the game is over.
fn greedy_move(position: &Position, seed: u64) -> Option<Move> {
    let mut moves = position.legal_moves().to_vec();
    SplitMix64::new(seed).shuffle(&mut moves);
    // `max_by_key` keeps the last maximum; the shuffle already made the order random.
    moves
        .into_iter()
        .max_by_key(|&mv| difference_after(position, mv))
}

/// `Some(move)` for a level that plays without a search (`random`, `greedy`); `None` for the
/// levels that search. Apart, so that [`choose_move`] need not build an [`Engine`] for them.
fn move_without_search(level: Level, position: &Position, seed: u64) -> Option<Option<Move>> {
    match level {
        Level::Random => Some(random_move(position, seed)),
        Level::Greedy => Some(greedy_move(position, seed)),
        _ => None,
    }
}

impl Engine {
    /// The opening book's entry for `position` (the crate's built-in book, see
    /// [`OpeningBook`]): the move [`Level::Master`] plays there without searching, with the
    /// value, depth and nodes of the deep search that chose it. `None` when the position is not
    /// in the book. Answers whatever [`Engine::set_use_book`] says, so that analysis can report
    /// the book.
    #[must_use]
    pub fn book_move(&self, position: &Position) -> Option<BookEntry> {
        OpeningBook::builtin().get(position)
    }

    /// Whether [`Level::Master`] plays from the opening book (on in a new engine). Off, it
    /// searches every move; for measuring the book.
    pub fn set_use_book(&mut self, on: bool) {
        self.use_book = on;
    }

    /// Analysis of the current position of `game`, as `RulesService.Analyze` answers it: the
    /// opening book's entry when the book holds the position and [`Engine::uses_book`]
    /// ([`SearchResult::book`] is then true, the principal variation follows the book as far
    /// as it goes, and `depth`, `nodes` and `exact` are those of the book's deep search);
    /// otherwise a search with the game's history ([`Engine::search_game`]; a game of no moves
    /// searches exactly as [`Engine::search`]), which probes the endgame tables if set.
    pub fn analyze_game(
        &mut self,
        game: &Game,
        limits: SearchLimits,
        cancel: &AtomicBool,
    ) -> SearchResult {
        if self.use_book
            && let Some(answer) = book_analysis(game.position())
        {
            return answer;
        }
        self.search_for_mistakes(game, limits, cancel)
    }

    /// Whether [`Level::Master`] plays from the opening book.
    #[must_use]
    pub fn uses_book(&self) -> bool {
        self.use_book
    }

    /// The move `level` plays in `position` (the position alone counts for the repetition rule;
    /// see [`Engine::choose_move_in_game`]). `seed` varies the play between equally good moves;
    /// the same seed, level, position and engine state give the same move when `limits` has no
    /// time budget. Returns at once when there is only one legal move.
    ///
    /// Returns `None` only if the game is over. When `cancel` is set, returns promptly with the
    /// best move found so far.
    pub fn choose_move(
        &mut self,
        level: Level,
        position: &Position,
        seed: u64,
        limits: SearchLimits,
        cancel: &AtomicBool,
    ) -> Option<Move> {
        self.choose(level, position, None, seed, limits, cancel)
    }

    /// As [`Engine::choose_move`] for the current position of `game`, applying the repetition
    /// rule with the game's history.
    pub fn choose_move_in_game(
        &mut self,
        level: Level,
        game: &Game,
        seed: u64,
        limits: SearchLimits,
        cancel: &AtomicBool,
    ) -> Option<Move> {
        self.choose(level, game.position(), Some(game), seed, limits, cancel)
    }

    fn choose(
        &mut self,
        level: Level,
        position: &Position,
        game: Option<&Game>,
        seed: u64,
        limits: SearchLimits,
        cancel: &AtomicBool,
    ) -> Option<Move> {
        if let Some(unsearched) = move_without_search(level, position, seed) {
            return unsearched;
        }
        let moves = position.legal_moves();
        if moves.len() <= 1 {
            return moves.first().copied();
        }
        if level == Level::Master
            && self.use_book
            && let Some(entry) = self.book_move(position)
        {
            return Some(entry.mv);
        }
        let depth = match (level.depth(), limits.depth) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let limits = SearchLimits { depth, ..limits };
        let saved_seed = self.seed();
        let saved_threshold = self.endgame_threshold();
        let saved_tables = self.tablebase().cloned();
        self.set_seed(seed);
        if !level.solves_endgames() {
            self.set_endgame_threshold(None);
            // The weaker levels stay as weak as they were: no perfect endgames from tables.
            self.set_tablebase(None);
        }
        let result = match (level, game) {
            (Level::Master, Some(game)) => self.search_for_mistakes(game, limits, cancel),
            (Level::Master, None) => {
                self.search_for_mistakes(&Game::from_position(*position), limits, cancel)
            }
            (_, Some(game)) => self.search_game(game, limits, cancel),
            (_, None) => self.search(position, limits, cancel),
        };
        self.set_seed(saved_seed);
        self.set_endgame_threshold(saved_threshold);
        self.set_tablebase(saved_tables);
        result.best_move
    }
}

/// The opening book's answer for `position`, as [`Engine::analyze_game`] gives it when the book
/// holds the position: its move, value and deep search's depth and nodes, and the principal
/// variation following the book as far as it goes. `None` when the book does not hold it (or
/// the position is over). Needs no engine: a server can answer it without a search slot.
#[must_use]
pub fn book_analysis(position: &Position) -> Option<SearchResult> {
    let book = OpeningBook::builtin();
    if position.is_over() {
        return None;
    }
    let entry = book.get(position)?;
    let mut pv = vec![entry.mv];
    let mut next = *position;
    next.play_unchecked(entry.mv);
    while pv.len() < 64
        && !next.is_over()
        && let Some(more) = book.get(&next)
    {
        pv.push(more.mv);
        next.play_unchecked(more.mv);
    }
    Some(SearchResult {
        best_move: Some(entry.mv),
        eval_points: entry.eval_points,
        eval: entry.eval_points.saturating_mul(EVAL_SCALE),
        exact: entry.exact,
        pv,
        depth: entry.depth,
        nodes: entry.nodes,
        time: Duration::ZERO,
        stopped: false,
        tablebase: false,
        tablebase_hits: 0,
        book: true,
        for_mistakes: false,
    })
}

/// The move `level` plays in `position`, with a fresh engine (a 1 MiB transposition table).
/// A server seating the computer for a whole game should keep one [`Engine`] per game and call
/// [`Engine::choose_move_in_game`] instead: the table carries over between moves and the
/// repetition rule sees the game's history.
///
/// Returns `None` only if the game is over.
pub fn choose_move(
    level: Level,
    position: &Position,
    seed: u64,
    limits: SearchLimits,
    cancel: &AtomicBool,
) -> Option<Move> {
    if let Some(unsearched) = move_without_search(level, position, seed) {
        return unsearched;
    }
    Engine::with_tt_bytes(1 << 20).choose_move(level, position, seed, limits, cancel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_by_name_and_number() {
        for level in Level::ALL {
            assert_eq!(level.name().parse::<Level>(), Ok(level));
            assert_eq!(level.number().to_string().parse::<Level>(), Ok(level));
            assert_eq!(Level::from_number(level.number()), Some(level));
        }
        assert!("grandmaster".parse::<Level>().is_err());
        assert!("0".parse::<Level>().is_err());
        assert_eq!(" MASTER ".parse::<Level>(), Ok(Level::Master));
    }

    #[test]
    fn levels_without_search_play_alike_with_or_without_an_engine() {
        let cancel = AtomicBool::new(false);
        let mut engine = Engine::with_tt_bytes(1 << 16);
        let mut position = Position::new(oanquan_rules::Rules::STANDARD).unwrap();
        for ply in 0_u64..40 {
            for level in [Level::Random, Level::Greedy] {
                let free = choose_move(level, &position, ply, SearchLimits::NONE, &cancel);
                let kept = engine.choose_move(level, &position, ply, SearchLimits::NONE, &cancel);
                assert_eq!(free, kept, "{level} at ply {ply}");
            }
            match choose_move(Level::Random, &position, ply, SearchLimits::NONE, &cancel) {
                Some(mv) => position.play_unchecked(mv),
                None => break,
            }
        }
    }

    #[test]
    fn analysis_answers_from_the_book_while_it_holds_the_position() {
        let cancel = AtomicBool::new(false);
        let mut engine = Engine::with_tt_bytes(1 << 16);
        let mut game = Game::new(oanquan_rules::Rules::STANDARD).unwrap();
        let limits = SearchLimits::nodes(2_000);
        let from_book = engine.analyze_game(&game, limits, &cancel);
        let entry = engine
            .book_move(game.position())
            .expect("the start is in the book");
        assert!(from_book.book);
        assert_eq!(from_book.best_move, Some(entry.mv));
        assert_eq!(from_book.pv[0], entry.mv);
        assert_eq!(
            (from_book.depth, from_book.nodes),
            (entry.depth, entry.nodes)
        );
        // The variation is the book's, move by move, as far as the book goes.
        for &mv in &from_book.pv {
            assert_eq!(engine.book_move(game.position()).map(|e| e.mv), Some(mv));
            game.play(mv).unwrap();
        }
        assert_eq!(engine.book_move(game.position()), None);
        // Past the book, and with the book off, it searches.
        let searched = engine.analyze_game(&game, limits, &cancel);
        assert!(!searched.book && searched.best_move.is_some());
        engine.set_use_book(false);
        let start = Game::new(oanquan_rules::Rules::STANDARD).unwrap();
        let off = engine.analyze_game(&start, limits, &cancel);
        assert!(!off.book);
        assert!(off.nodes <= 2_000 + 1_024, "{off:?}");
    }

    #[test]
    fn master_plays_the_book_move_and_only_master() {
        let cancel = AtomicBool::new(false);
        let mut engine = Engine::with_tt_bytes(1 << 16);
        for preset in oanquan_rules::Preset::ALL {
            let mut game = Game::new(preset.rules()).unwrap();
            // Follow the book for as long as it has the position.
            while let Some(entry) = engine.book_move(game.position()) {
                // One node cannot find the book's move by search in every position; the book
                // answers without searching.
                let limits = SearchLimits::nodes(1);
                let mv = engine.choose_move_in_game(Level::Master, &game, 3, limits, &cancel);
                assert_eq!(mv, Some(entry.mv), "{preset} after {:?}", game.moves());
                game.play(entry.mv).unwrap();
            }
            assert!(
                game.moves().len() >= 3,
                "{preset}: the book covers the first plies"
            );
        }
        // A position outside the book: no entry (far from the start, ply 40).
        let mut pos = Position::new(oanquan_rules::Rules::STANDARD).unwrap();
        for ply in 0..40 {
            match choose_move(Level::Random, &pos, ply, SearchLimits::NONE, &cancel) {
                Some(mv) => pos.play_unchecked(mv),
                None => break,
            }
        }
        assert_eq!(engine.book_move(&pos), None);
    }

    #[test]
    fn the_book_can_be_turned_off() {
        let cancel = AtomicBool::new(false);
        let start = Position::new(oanquan_rules::Rules::STANDARD).unwrap();
        // The start and every position after one move are in the book.
        let mut positions = vec![start];
        for &mv in &start.legal_moves() {
            let mut p = start;
            p.play_unchecked(mv);
            positions.push(p);
        }
        let limits = SearchLimits::nodes(1);
        let mut engine = Engine::with_tt_bytes(1 << 16);
        let mut differ = [0; 2];
        for pos in &positions {
            let entry = engine.book_move(pos).expect("in the book");
            engine.set_use_book(true);
            assert!(engine.uses_book());
            assert_eq!(
                engine.choose_move(Level::Master, pos, 1, limits, &cancel),
                Some(entry.mv)
            );
            // Off (or another level), it plays what the search finds, book or not.
            engine.set_use_book(false);
            for (i, level) in [Level::Master, Level::Expert].into_iter().enumerate() {
                engine.clear();
                let mv = engine.choose_move(level, pos, 1, limits, &cancel);
                let mut fresh = Engine::with_tt_bytes(1 << 16);
                fresh.set_seed(1);
                if level == Level::Expert {
                    fresh.set_endgame_threshold(None);
                }
                assert_eq!(mv, fresh.search(pos, limits, &cancel).best_move);
                differ[i] += usize::from(mv != Some(entry.mv));
            }
        }
        assert!(differ.iter().all(|&d| d > 0), "{differ:?}");
    }
}
