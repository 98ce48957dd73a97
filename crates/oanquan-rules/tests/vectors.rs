//! Reproduces every line of the rule vectors: random games played by an independent
//! implementation of RULES.md (copied from the shared vectors into `tests/data/`).

use oanquan_rules::{ByPlayer, Direction, EndReason, Game, Move, Player, Position, Preset, Setup};
use serde_json::Value;

fn data(name: &str) -> String {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn ints<const N: usize>(v: &Value) -> [i32; N] {
    let a = v.as_array().expect("array");
    assert_eq!(a.len(), N);
    std::array::from_fn(|i| i32::try_from(a[i].as_i64().expect("integer")).unwrap())
}

fn pair(v: &Value) -> ByPlayer<i32> {
    let [a, b] = ints::<2>(v);
    ByPlayer::new(a, b)
}

fn setup(v: &Value) -> Setup {
    Setup {
        squares: ints(&v["squares"]),
        pieces: ints(&v["pieces"]),
        captured: pair(&v["captured"]),
        captured_pieces: pair(&v["captured_pieces"]),
        to_move: Player::from_index(v["to_move"].as_u64().unwrap() as usize).unwrap(),
        ply: v["ply"].as_u64().unwrap() as u32,
    }
}

fn mv(square: &Value, direction: &Value) -> Move {
    Move::new(
        square.as_u64().unwrap() as u8,
        Direction::from_delta(direction.as_i64().unwrap()).unwrap(),
    )
}

fn check_moves(preset: Preset) -> usize {
    let rules = preset.rules();
    let text = data(&format!("{}.moves.jsonl", preset.name()));
    let mut count = 0;
    for (line_no, line) in text.lines().enumerate() {
        let line_no = line_no + 1;
        let v: Value = serde_json::from_str(line).unwrap();
        let before = Position::from_setup(setup(&v["before"]), rules)
            .unwrap_or_else(|e| panic!("{preset} line {line_no}: before: {e}"));
        let m = mv(&v["move"]["square"], &v["move"]["direction"]);
        assert!(
            before.legal_moves().contains(&m),
            "{preset} line {line_no}: {m} not legal"
        );
        let (after, _trace) = before
            .play(m)
            .unwrap_or_else(|e| panic!("{preset} line {line_no}: {m}: {e}"));
        let want = &v["after"];
        let context = format!("{preset} line {line_no}: {before} {m} -> {after}");
        assert_eq!(after.to_setup(), setup(want), "{context}");
        assert_eq!(after.scores(), pair(&want["score"]), "{context}");
        assert_eq!(
            after.is_over(),
            want["over"].as_bool().unwrap(),
            "{context}"
        );
        // The untraced fast path lands on the same position.
        let mut fast = before;
        fast.play_unchecked(m);
        assert_eq!(fast, after, "{context}: play_unchecked differs");
        count += 1;
    }
    count
}

fn check_games(preset: Preset) -> usize {
    let text = data(&format!("{}.games.jsonl", preset.name()));
    let mut count = 0;
    for (line_no, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line).unwrap();
        let moves: Vec<Move> = v["moves"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| mv(&m[0], &m[1]))
            .collect();
        let start = Position::new(preset.rules()).unwrap();
        let game = Game::replay(start, &moves)
            .unwrap_or_else(|e| panic!("{preset} game {}: {e}", line_no + 1));
        let want_end = match v["end"].as_str().unwrap() {
            "mandarins" => EndReason::Mandarins,
            "repetition" => EndReason::Repetition,
            "max_plies" => EndReason::PlyLimit,
            other => panic!("unknown end {other}"),
        };
        assert_eq!(
            game.end_reason(),
            Some(want_end),
            "{preset} game {}",
            line_no + 1
        );
        assert_eq!(
            game.scores(),
            pair(&v["score"]),
            "{preset} game {}",
            line_no + 1
        );
        count += 1;
    }
    count
}

#[test]
fn standard_moves() {
    assert_eq!(check_moves(Preset::Standard), 1675);
}

#[test]
fn traditional_moves() {
    assert_eq!(check_moves(Preset::Traditional), 1562);
}

#[test]
fn mancala_world_moves() {
    assert_eq!(check_moves(Preset::MancalaWorld), 944);
}

#[test]
fn whole_games() {
    for preset in Preset::ALL {
        assert_eq!(check_games(preset), 60, "{preset}");
    }
}
