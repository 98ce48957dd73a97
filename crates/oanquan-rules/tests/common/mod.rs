//! Test helpers: a deterministic random source, random rule sets, and a second, deliberately
//! naive implementation of RULES.md written straight from the text, to compare the engine with.

#![allow(dead_code)]

use oanquan_rules::{
    ByPlayer, EmptyMandarinNext, EndCondition, Game, MandarinSetup, Move, Player, Rules,
};

/// SplitMix64: tiny, seedable, good enough to pick moves.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// A random valid rule set: every knob of RULES.md in play.
pub fn random_rules(rng: &mut Rng) -> Rules {
    let pieces = rng.below(2) == 0;
    let rules = Rules {
        mandarin: if pieces {
            MandarinSetup::Piece {
                value: [5, 10][rng.below(2)],
            }
        } else {
            MandarinSetup::Stones
        },
        empty_mandarin_next: [EmptyMandarinNext::EndsTurn, EmptyMandarinNext::EmptySquare]
            [rng.below(2)],
        protected_plies: rng.below(4) as u32,
        immature_mandarin: if pieces { [0, 3, 5][rng.below(3)] } else { 0 },
        end_condition: if pieces && rng.below(2) == 0 {
            EndCondition::PiecesCaptured
        } else {
            EndCondition::MandarinSquaresEmpty
        },
        repetition_limit: [0, 2, 3][rng.below(3)],
        max_plies: [40, 120, 300][rng.below(3)],
    };
    rules.validate().expect("random rules are valid");
    rules
}

/// Plays random legal moves to the end of the game.
pub fn random_game(rules: Rules, rng: &mut Rng) -> Game {
    let mut game = Game::new(rules).unwrap();
    while !game.is_over() {
        let moves = game.position().legal_moves();
        game.play(moves[rng.below(moves.len())]).unwrap();
    }
    game
}

/// The naive implementation's whole state: RULES.md read literally, with plain vectors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Naive {
    pub rules: Rules,
    pub stones: Vec<i64>,
    pub piece: Vec<bool>,
    pub captured: [i64; 2],
    pub captured_pieces: [i64; 2],
    pub to_move: usize,
    pub ply: u32,
    pub over: Option<&'static str>,
    history: Vec<(Vec<i64>, Vec<bool>, usize)>,
}

impl Naive {
    pub fn new(rules: Rules) -> Naive {
        let pieces = matches!(rules.mandarin, MandarinSetup::Piece { .. });
        let mut stones = vec![5; 12];
        let mut piece = vec![false; 12];
        for m in [0, 6] {
            stones[m] = if pieces { 0 } else { 10 };
            piece[m] = pieces;
        }
        let mut n = Naive {
            rules,
            stones,
            piece,
            captured: [0, 0],
            captured_pieces: [0, 0],
            to_move: 0,
            ply: 0,
            over: None,
            history: Vec::new(),
        };
        n.history.push(n.key());
        n
    }

    fn key(&self) -> (Vec<i64>, Vec<bool>, usize) {
        (self.stones.clone(), self.piece.clone(), self.to_move)
    }

    fn own(player: usize) -> std::ops::RangeInclusive<usize> {
        if player == 0 { 1..=5 } else { 7..=11 }
    }

    fn empty(&self, sq: usize) -> bool {
        self.stones[sq] == 0 && !self.piece[sq]
    }

    pub fn legal(&self) -> Vec<(usize, i64)> {
        if self.over.is_some() {
            return vec![];
        }
        let mut out = vec![];
        for sq in Naive::own(self.to_move) {
            if self.stones[sq] > 0 {
                out.push((sq, -1));
                out.push((sq, 1));
            }
        }
        out
    }

    fn value(&self) -> i64 {
        match self.rules.mandarin {
            MandarinSetup::Stones => 0,
            MandarinSetup::Piece { value } => i64::from(value),
        }
    }

    pub fn scores(&self) -> [i64; 2] {
        [0, 1].map(|p| self.captured[p] + self.value() * self.captured_pieces[p])
    }

    fn end_game(&mut self, reason: &'static str, last_mover: usize) {
        for p in 0..2 {
            for sq in Naive::own(p) {
                self.captured[p] += self.stones[sq];
                self.stones[sq] = 0;
            }
        }
        let left = self.stones[0] + self.stones[6];
        self.stones[0] = 0;
        self.stones[6] = 0;
        self.captured[last_mover] += left / 2;
        self.captured[1 - last_mover] += left - left / 2;
        self.over = Some(reason);
    }

    pub fn play(&mut self, square: usize, dir: i64) {
        let at = |i: i64| (i.rem_euclid(12)) as usize;
        let me = self.to_move;
        let mut cur = square;
        // Step 3 and 4: sow and look at the next square, relaying while it holds stones.
        let mut gap = loop {
            let mut hand = self.stones[cur];
            self.stones[cur] = 0;
            let mut i = cur as i64;
            while hand > 0 {
                i += dir;
                self.stones[at(i)] += 1;
                hand -= 1;
            }
            let n = at(i + dir);
            if n == 0 || n == 6 {
                let empty_counts = self.rules.empty_mandarin_next == EmptyMandarinNext::EmptySquare;
                if empty_counts && self.empty(n) {
                    break Some(n);
                }
                break None;
            }
            if self.stones[n] > 0 {
                cur = n;
                continue;
            }
            break Some(n);
        };
        // Step 5: the capture chain.
        while let Some(g) = gap {
            gap = None;
            let t = at(g as i64 + dir);
            if self.empty(t) {
                break;
            }
            if t == 0 || t == 6 {
                if self.ply < self.rules.protected_plies {
                    break;
                }
                let k = i64::from(self.rules.immature_mandarin);
                if self.piece[t] && self.stones[t] < k {
                    break;
                }
            }
            self.captured[me] += self.stones[t];
            self.stones[t] = 0;
            if self.piece[t] {
                self.piece[t] = false;
                self.captured_pieces[me] += 1;
            }
            let a = at(t as i64 + dir);
            let b = at(t as i64 + 2 * dir);
            if self.empty(a) && !self.empty(b) {
                gap = Some(a);
            }
        }
        self.ply += 1;
        self.to_move = 1 - me;
        // Step 6 and 8.
        let ended = match self.rules.end_condition {
            EndCondition::MandarinSquaresEmpty => self.empty(0) && self.empty(6),
            EndCondition::PiecesCaptured => !self.piece[0] && !self.piece[6],
        };
        if ended {
            self.end_game("mandarins", me);
            return;
        }
        if self.ply >= self.rules.max_plies {
            self.end_game("ply limit", me);
            return;
        }
        // Step 1 of the next turn: refill.
        let next = self.to_move;
        if Naive::own(next).all(|sq| self.stones[sq] == 0) {
            for sq in Naive::own(next) {
                self.stones[sq] = 1;
            }
            self.captured[next] -= 5;
        }
        let key = self.key();
        self.history.push(key.clone());
        let seen = self.history.iter().filter(|k| **k == key).count() as u32;
        if self.rules.repetition_limit > 0 && seen >= self.rules.repetition_limit {
            self.end_game("repetition", me);
        }
    }

    /// The state in the engine's terms, to compare with a `Position`.
    pub fn matches(&self, game: &Game) -> bool {
        let p = game.position();
        let setup = p.to_setup();
        let by = |a: [i64; 2]| ByPlayer::new(a[0] as i32, a[1] as i32);
        setup
            .squares
            .iter()
            .map(|&s| i64::from(s))
            .eq(self.stones.iter().copied())
            && setup
                .pieces
                .iter()
                .map(|&x| x == 1)
                .eq(self.piece.iter().copied())
            && setup.captured == by(self.captured)
            && setup.captured_pieces == by(self.captured_pieces)
            && p.to_move() == Player::from_index(self.to_move).unwrap()
            && p.ply() == self.ply
            && p.end_reason().map(|r| r.to_string()) == self.over.map(str::to_owned)
    }

    pub fn as_move(mv: (usize, i64)) -> Move {
        Move::new(
            mv.0 as u8,
            oanquan_rules::Direction::from_delta(mv.1).unwrap(),
        )
    }
}

impl Naive {
    /// The naive state of any engine position (no history: repetition starts counting here).
    pub fn from_position(p: &oanquan_rules::Position) -> Naive {
        let s = p.to_setup();
        let mut n = Naive {
            rules: *p.rules(),
            stones: s.squares.iter().map(|&x| i64::from(x)).collect(),
            piece: s.pieces.iter().map(|&x| x == 1).collect(),
            captured: [s.captured.first, s.captured.second].map(i64::from),
            captured_pieces: [s.captured_pieces.first, s.captured_pieces.second].map(i64::from),
            to_move: s.to_move.index(),
            ply: s.ply,
            over: p.end_reason().map(|_| "given"),
            history: Vec::new(),
        };
        n.history.push(n.key());
        n
    }

    /// perft by the naive rules (repetition switched off, as in the engine's perft).
    pub fn perft(&self, depth: u32) -> u64 {
        if depth == 0 {
            return 1;
        }
        self.legal()
            .into_iter()
            .map(|(sq, dir)| {
                let mut child = self.clone();
                child.rules.repetition_limit = 0;
                child.play(sq, dir);
                child.perft(depth - 1)
            })
            .sum()
    }
}
