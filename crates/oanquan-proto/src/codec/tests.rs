use prost::Message;
use prost_types::{Duration, Timestamp};

use super::encode_to_vec;
use crate::v1::{self, step};

/// A small deterministic generator (xorshift), so that failures reproduce.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn flag(&mut self) -> bool {
        self.below(2) == 0
    }

    /// Zero (the default, left out) a third of the time; otherwise one- to five-byte varints.
    fn u32(&mut self) -> u32 {
        match self.below(6) {
            0 | 1 => 0,
            2 => 1,
            3 => u32::try_from(self.below(300)).unwrap_or(0),
            4 => u32::MAX,
            _ => u32::try_from(self.below(1 << 32)).unwrap_or(0),
        }
    }

    /// Negative values too, which take ten bytes on the wire.
    fn i32(&mut self) -> i32 {
        match self.below(6) {
            0 | 1 => 0,
            2 => -1,
            3 => i32::MIN,
            4 => i32::MAX,
            _ => i32::try_from(self.below(1 << 32)).unwrap_or(0) - (1 << 30),
        }
    }

    /// Enum fields hold any `i32` on the wire, unknown values included.
    fn enumeration(&mut self) -> i32 {
        if self.below(8) == 0 {
            self.i32()
        } else {
            i32::try_from(self.below(5)).unwrap_or(0)
        }
    }

    /// Empty, short, exactly 127/128 bytes (one- and two-byte lengths) or long.
    fn string(&mut self) -> String {
        let len = match self.below(6) {
            0 | 1 => 0,
            2 => 127,
            3 => 128,
            4 => usize::try_from(self.below(20_000)).unwrap_or(0),
            _ => usize::try_from(self.below(40)).unwrap_or(0),
        };
        "ăq".chars().cycle().take(len).collect()
    }

    fn option<T>(&mut self, make: impl FnOnce(&mut Self) -> T) -> Option<T> {
        (self.below(4) != 0).then(|| make(self))
    }

    fn vec<T>(&mut self, max: u64, mut make: impl FnMut(&mut Self) -> T) -> Vec<T> {
        let len = self.below(max + 1);
        (0..len).map(|_| make(self)).collect()
    }

    fn pair(&mut self) -> v1::PlayerPair {
        v1::PlayerPair {
            first: self.i32(),
            second: self.i32(),
        }
    }

    fn timestamp(&mut self) -> Timestamp {
        Timestamp {
            seconds: i64::from(self.i32()),
            nanos: self.i32(),
        }
    }

    fn duration(&mut self) -> Duration {
        Duration {
            seconds: i64::from(self.i32()),
            nanos: self.i32(),
        }
    }

    fn position(&mut self) -> v1::Position {
        v1::Position {
            squares: self.vec(14, Self::u32),
            pieces: self.vec(14, Self::u32),
            captured: self.option(Self::pair),
            captured_pieces: self.option(Self::pair),
            scores: self.option(Self::pair),
            to_move: self.enumeration(),
            ply: self.u32(),
            over: self.flag(),
            end_reason: self.enumeration(),
            outcome: self.enumeration(),
            notation: self.string(),
        }
    }

    fn square(&mut self) -> Option<u32> {
        self.option(Self::u32)
    }

    fn step(&mut self) -> v1::Step {
        let kind = match self.below(10) {
            0 => None,
            1 => Some(step::Kind::PickUp(step::PickUp {
                square: self.square(),
                stones: self.u32(),
                relay: self.flag(),
            })),
            2 => Some(step::Kind::Sow(step::Sow {
                square: self.square(),
            })),
            3 => Some(step::Kind::StopAtMandarin(step::StopAtMandarin {
                square: self.square(),
            })),
            4 => Some(step::Kind::StopTwoEmpty(step::StopTwoEmpty {
                gap: self.square(),
                next: self.square(),
            })),
            5 => Some(step::Kind::Capture(step::Capture {
                square: self.square(),
                stones: self.u32(),
                pieces: self.u32(),
                player: self.enumeration(),
            })),
            6 => Some(step::Kind::CaptureProtected(step::CaptureProtected {
                square: self.square(),
            })),
            7 => Some(step::Kind::CaptureImmature(step::CaptureImmature {
                square: self.square(),
            })),
            8 => Some(step::Kind::Refill(step::Refill {
                player: self.enumeration(),
                captured_after: self.i32(),
            })),
            _ => Some(step::Kind::GameOver(step::GameOver {
                reason: self.enumeration(),
                collected: self.option(Self::pair),
            })),
        };
        v1::Step { kind }
    }

    fn record(&mut self) -> v1::MoveRecord {
        v1::MoveRecord {
            number: self.u32(),
            player: self.enumeration(),
            r#move: self.option(|g| v1::Move {
                square: g.square(),
                direction: g.enumeration(),
            }),
            steps: self.vec(200, Self::step),
            position: self.option(Self::position),
            play_time: self.option(Self::timestamp),
        }
    }

    fn seat(&mut self) -> v1::Seat {
        v1::Seat {
            player: self.enumeration(),
            occupied: self.flag(),
            display_name: self.string(),
            kind: self.enumeration(),
            computer_level: self.u32(),
            account: self.option(|g| v1::SeatAccount {
                username: g.string(),
                rating: g.i32(),
                provisional: g.flag(),
            }),
        }
    }

    fn rating_change(&mut self) -> v1::RatingChange {
        v1::RatingChange {
            before: self.i32(),
            after: self.i32(),
            provisional: self.flag(),
        }
    }

    fn game(&mut self, position: Option<v1::Position>) -> v1::Game {
        use v1::time_control::{Correspondence, Kind, RealTime};
        v1::Game {
            id: self.string(),
            rule_set: self.option(|g| v1::RuleSet {
                mandarin_setup: g.enumeration(),
                quan_value: g.u32(),
                empty_mandarin: g.enumeration(),
                protected_plies: g.u32(),
                immature_mandarin_min_stones: g.u32(),
                end_condition: g.enumeration(),
                repetition_limit: g.u32(),
                max_plies: g.u32(),
            }),
            preset: self.string(),
            first_seat: self.option(Self::seat),
            second_seat: self.option(Self::seat),
            status: self.enumeration(),
            start_position: self.option(Self::position),
            position,
            move_count: self.u32(),
            result: self.option(|g| v1::GameResult {
                outcome: g.enumeration(),
                winner: g.enumeration(),
                scores: g.option(Self::pair),
                end_reason: g.enumeration(),
                ended_by: g.enumeration(),
                first_rating: g.option(Self::rating_change),
                second_rating: g.option(Self::rating_change),
            }),
            create_time: self.option(Self::timestamp),
            update_time: self.option(Self::timestamp),
            time_control: self.option(|g| v1::TimeControl {
                kind: match g.below(3) {
                    0 => None,
                    1 => Some(Kind::RealTime(RealTime {
                        initial: g.option(Self::duration),
                        increment: g.option(Self::duration),
                    })),
                    _ => Some(Kind::Correspondence(Correspondence {
                        per_move: g.option(Self::duration),
                    })),
                },
            }),
            clocks: self.option(|g| v1::Clocks {
                first_remaining: g.option(Self::duration),
                second_remaining: g.option(Self::duration),
                measured_at: g.option(Self::timestamp),
                running: g.enumeration(),
                deadline: g.option(Self::timestamp),
            }),
            turn_start_time: self.option(Self::timestamp),
            draw_offer: self.enumeration(),
            rematch_of: self.string(),
            rematch: self.string(),
            rematch_offer: self.enumeration(),
            rematch_deadline: self.option(Self::timestamp),
            rated: self.flag(),
        }
    }

    /// A response whose game's position is the record's (as the server sends it), another
    /// position, one that differs from the record's in a single field, or none.
    fn response(&mut self) -> v1::PlayMoveResponse {
        let record = self.option(Self::record);
        let record_position = record.as_ref().and_then(|r| r.position.clone());
        let position = match self.below(4) {
            0 => record_position,
            1 => record_position.map(|mut p| {
                p.ply = p.ply.wrapping_add(1);
                p
            }),
            2 => Some(self.position()),
            _ => None,
        };
        let game = self.option(|g| g.game(position));
        v1::PlayMoveResponse { record, game }
    }
}

#[test]
fn play_move_responses_are_prosts_bytes() {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    for i in 0..3000 {
        let response = g.response();
        assert_eq!(
            encode_to_vec(&response),
            response.encode_to_vec(),
            "response {i}: {response:?}"
        );
    }
}

#[test]
fn edge_cases_are_prosts_bytes() {
    let full_position = v1::Position {
        squares: vec![u32::MAX; 12],
        pieces: vec![1; 12],
        captured: Some(v1::PlayerPair {
            first: -100_000,
            second: 0,
        }),
        captured_pieces: Some(v1::PlayerPair::default()),
        scores: Some(v1::PlayerPair {
            first: 35,
            second: 35,
        }),
        to_move: 0,
        ply: 1000,
        over: true,
        end_reason: 2,
        outcome: 3,
        notation: "x".repeat(300),
    };
    let mut g = Gen(7);
    let finished = v1::Game {
        position: Some(full_position.clone()),
        status: 3,
        ..g.game(None)
    };
    let cases = [
        v1::PlayMoveResponse::default(),
        v1::PlayMoveResponse {
            record: Some(v1::MoveRecord::default()),
            game: Some(v1::Game::default()),
        },
        v1::PlayMoveResponse {
            record: Some(v1::MoveRecord {
                position: Some(v1::Position::default()),
                ..v1::MoveRecord::default()
            }),
            game: Some(v1::Game {
                position: Some(v1::Position::default()),
                ..v1::Game::default()
            }),
        },
        // A large history of steps and a finished game whose position is the record's.
        v1::PlayMoveResponse {
            record: Some(v1::MoveRecord {
                number: u32::MAX,
                steps: (0..5000).map(|_| g.step()).collect(),
                position: Some(full_position.clone()),
                ..g.record()
            }),
            game: Some(finished.clone()),
        },
        v1::PlayMoveResponse {
            record: None,
            game: Some(finished),
        },
    ];
    for response in cases {
        assert_eq!(encode_to_vec(&response), response.encode_to_vec());
        assert_eq!(
            v1::PlayMoveResponse::decode(encode_to_vec(&response).as_slice()).ok(),
            Some(response)
        );
    }
}

/// Every other message is prost's `encode_raw`: the same bytes as `encode`.
#[test]
fn other_messages_are_prosts_bytes() {
    let mut g = Gen(42);
    for _ in 0..200 {
        let position = g.option(Gen::position);
        let game = g.game(position);
        let response = v1::GetGameResponse {
            game: Some(game.clone()),
        };
        assert_eq!(encode_to_vec(&response), response.encode_to_vec());
        assert_eq!(encode_to_vec(&game), game.encode_to_vec());
        let record = g.record();
        assert_eq!(encode_to_vec(&record), record.encode_to_vec());
    }
}

/// The start position's bytes are kept per thread: alternating start positions (games of
/// different rule sets on one thread) each get their own bytes.
#[test]
fn alternating_start_positions_are_prosts_bytes() {
    let mut g = Gen(3);
    let a = g.position();
    let b = v1::Position {
        ply: a.ply.wrapping_add(1),
        ..a.clone()
    };
    for start in [&a, &a, &b, &a, &b, &b, &a] {
        let response = v1::PlayMoveResponse {
            record: None,
            game: Some(v1::Game {
                start_position: Some(start.clone()),
                ..g.game(None)
            }),
        };
        assert_eq!(encode_to_vec(&response), response.encode_to_vec());
    }
}
