//! Round trips through [`super::input`] and [`super::output`], and their refusals.

use std::time::SystemTime;

use oanquan_proto::v1 as pb;
use oanquan_rules::{ByPlayer, Direction, EndReason, Move, Player, Position, Preset, Rules, Setup};
use pb::step::Kind as StepKind;

use super::*;
use oanquan_game::{GameError, GameFilter, GameId, GameInfo, GameStatus, MoveRecord};

fn field_of(error: GameError) -> String {
    match error {
        GameError::InvalidArgument { field, .. } => field,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

/// A game of standard rules at sequence 6, untimed, no seats: what a test does not set.
fn game_info(status: GameStatus, start: Position, position: Position) -> GameInfo {
    GameInfo {
        id: GameId::parse("g1").unwrap(),
        rules: Rules::STANDARD,
        preset: None,
        seats: ByPlayer::new(None, None),
        status,
        start,
        position,
        move_count: 0,
        result: None,
        created: SystemTime::UNIX_EPOCH,
        updated: SystemTime::UNIX_EPOCH,
        sequence: 6,
        time_control: oanquan_game::TimeControl::Untimed,
        clock: None,
        turn_started: None,
        draw_offer: None,
        last_draw_offer: ByPlayer::default(),
        rematch: oanquan_game::clock::Rematch::default(),
        rated: false,
    }
}

#[test]
fn rule_sets_round_trip() {
    for preset in Preset::ALL {
        let rules = preset.rules();
        assert_eq!(
            rule_set(&rule_set_out(&rules), "r").unwrap(),
            rules,
            "{preset}"
        );
        let (back, named) = rules_spec(
            Some(&pb::RulesSpec {
                kind: Some(pb::rules_spec::Kind::Preset(preset.name().to_owned())),
            }),
            "rules",
        )
        .unwrap();
        assert_eq!((back, named), (rules, Some(preset)));
    }
    assert_eq!(
        rules_spec(None, "rules").unwrap(),
        (Rules::STANDARD, Some(Preset::Standard))
    );
}

#[test]
fn bad_rule_sets_name_the_field() {
    let good = rule_set_out(&Rules::MANCALA_WORLD);
    let cases: Vec<(pb::RuleSet, &str)> = vec![
        (
            pb::RuleSet {
                mandarin_setup: 0,
                ..good
            },
            "r.mandarin_setup",
        ),
        (
            pb::RuleSet {
                mandarin_setup: 99,
                ..good
            },
            "r.mandarin_setup",
        ),
        (
            pb::RuleSet {
                quan_value: 256,
                ..good
            },
            "r.quan_value",
        ),
        (
            pb::RuleSet {
                quan_value: 0,
                ..good
            },
            "r.quan_value",
        ),
        (
            pb::RuleSet {
                empty_mandarin: -1,
                ..good
            },
            "r.empty_mandarin",
        ),
        (
            pb::RuleSet {
                end_condition: 0,
                ..good
            },
            "r.end_condition",
        ),
        (
            pb::RuleSet {
                immature_mandarin_min_stones: 300,
                ..good
            },
            "r.immature_mandarin_min_stones",
        ),
        (
            pb::RuleSet {
                repetition_limit: 1,
                ..good
            },
            "r.repetition_limit",
        ),
        (
            pb::RuleSet {
                max_plies: 0,
                ..good
            },
            "r.max_plies",
        ),
    ];
    for (set, field) in cases {
        assert_eq!(field_of(rule_set(&set, "r").unwrap_err()), field, "{set:?}");
    }
    let unknown = pb::RulesSpec {
        kind: Some(pb::rules_spec::Kind::Preset("chess".into())),
    };
    assert_eq!(
        field_of(rules_spec(Some(&unknown), "rules").unwrap_err()),
        "rules.preset"
    );
}

#[test]
fn positions_round_trip() {
    for preset in Preset::ALL {
        let rules = preset.rules();
        let start = Position::new(rules).unwrap();
        let (after, _) = start.play(start.legal_moves()[0]).unwrap();
        for p in [start, after] {
            assert_eq!(position(Some(&position_out(&p)), rules, "p").unwrap(), p);
        }
    }
    let start = Position::new(Rules::STANDARD).unwrap();
    assert_eq!(position(None, Rules::STANDARD, "p").unwrap(), start);
    // Stone-setup clients may leave `pieces` empty.
    let mut no_pieces = position_out(&start);
    no_pieces.pieces.clear();
    assert_eq!(
        position(Some(&no_pieces), Rules::STANDARD, "p").unwrap(),
        start
    );
}

#[test]
fn a_finished_position_names_nobody_and_reads_back() {
    // At the ply limit with SECOND to move: over whoever would move. The stones are collected
    // and one piece still stands, scored by nobody, so the end condition does not hold.
    let rules = Rules::MANCALA_WORLD;
    let setup = Setup {
        to_move: Player::Second,
        ply: rules.max_plies,
        ..("q,0,0,0,0,0,0,0,0,0,0,0 25:25q 1 0".parse().unwrap())
    };
    let finished = Position::from_setup(setup, rules).unwrap();
    assert_eq!(finished.end_reason(), Some(EndReason::PlyLimit));
    let out = position_out(&finished);
    assert!(out.over);
    assert_eq!(out.to_move(), pb::Player::Unspecified);
    let back = position(Some(&out), rules, "p").unwrap();
    assert!(back.is_over());
    assert_eq!(back.end_reason(), finished.end_reason());
    assert_eq!(
        Setup {
            to_move: Player::Second,
            ..back.to_setup()
        },
        setup
    );
}

#[test]
fn a_play_move_response_converts_the_position_after_the_move_once() {
    let start = Position::new(Rules::STANDARD).unwrap();
    let mv = start.legal_moves()[0];
    let (after, steps) = start.play(mv).unwrap();
    let record = MoveRecord {
        number: 1,
        player: Player::First,
        mv,
        steps,
        position: after,
        time: SystemTime::UNIX_EPOCH,
    };
    let mut game = game_info(GameStatus::Active, start, after);
    game.move_count = 1;
    let (record_out, game_out_) = move_and_game_out(&record, &game);
    assert_eq!(record_out, move_record_out(&record));
    assert_eq!(game_out_, game_out(&game));
    // A game that moved on since (not what PlayMove returns) still shows its own position.
    game.position = start;
    assert_eq!(move_and_game_out(&record, &game).1, game_out(&game));
}

#[test]
fn bad_positions_name_the_field() {
    let good = position_out(&Position::new(Rules::STANDARD).unwrap());
    let mut short = good.clone();
    short.squares.pop();
    let mut huge = good.clone();
    huge.squares[3] = u32::MAX;
    let mut piece = good.clone();
    piece.pieces[0] = 1;
    let mut total = good.clone();
    total.squares[1] += 1;
    let mut nobody = good.clone();
    nobody.to_move = 0;
    let mut alien = good.clone();
    alien.to_move = 7;
    let mut debt = good.clone();
    debt.captured = Some(pb::PlayerPair {
        first: i32::MIN,
        second: 0,
    });
    let mut heap = good.clone();
    heap.squares[1] = 1000;
    heap.captured = Some(pb::PlayerPair {
        first: -995,
        second: 0,
    });
    let mut full = good.clone();
    full.squares[0] = 255;
    full.captured = Some(pb::PlayerPair {
        first: -245,
        second: 0,
    });
    let mut pieces = good.clone();
    pieces.captured_pieces = Some(pb::PlayerPair {
        first: 0,
        second: 3,
    });
    let mut huge_piece = good.clone();
    huge_piece.pieces[0] = u32::MAX;
    // Over by the ply limit with every stone still on the board.
    let mut uncollected = good.clone();
    uncollected.ply = Rules::STANDARD.max_plies;
    uncollected.to_move = 0;
    let cases = [
        (short, "p.squares"),
        (huge, "p.squares[3]"),
        (huge_piece, "p.pieces[0]"),
        (uncollected, "p.squares"),
        (piece, "p.pieces"),
        (total, "p"),
        (nobody, "p.to_move"),
        (alien, "p.to_move"),
        (debt, "p.captured.first"),
        (heap, "p.squares[1]"),
        (full, "p.squares"),
        (pieces, "p.captured_pieces.second"),
    ];
    for (p, field) in cases {
        assert_eq!(
            field_of(position(Some(&p), Rules::STANDARD, "p").unwrap_err()),
            field
        );
    }
    let mut huge_piece = good;
    huge_piece.pieces[6] = 1 << 31;
    let message = position(Some(&huge_piece), Rules::MANCALA_WORLD, "p")
        .unwrap_err()
        .to_string();
    assert!(message.contains("at most 1 mandarin piece"), "{message}");
}

#[test]
fn moves_round_trip_and_reject_bad_input() {
    for square in 0..12 {
        for direction in Direction::ALL {
            let m = Move::new(square, direction);
            assert_eq!(mv(Some(&move_out(m)), "move").unwrap(), m);
        }
    }
    let bad = |square, direction| pb::Move { square, direction };
    assert_eq!(field_of(mv(None, "move").unwrap_err()), "move");
    // Unset is not square 0: presence is what lets square 0 show in JSON.
    for square in [None, Some(12), Some(255), Some(256), Some(u32::MAX)] {
        assert_eq!(
            field_of(mv(Some(&bad(square, 1)), "move").unwrap_err()),
            "move.square"
        );
    }
    for direction in [0, 3, -1] {
        assert_eq!(
            field_of(mv(Some(&bad(Some(1), direction)), "move").unwrap_err()),
            "move.direction"
        );
    }
}

#[test]
fn enums_and_ids_reject_unknown_values() {
    assert_eq!(optional_player(0, "seat").unwrap(), None);
    assert_eq!(optional_player(2, "seat").unwrap(), Some(Player::Second));
    assert_eq!(field_of(optional_player(3, "seat").unwrap_err()), "seat");
    let GameError::InvalidArgument { description, .. } = optional_player(7, "seat").unwrap_err()
    else {
        panic!("not a field error")
    };
    assert!(description.contains("PLAYER_UNSPECIFIED"), "{description}");
    let GameError::InvalidArgument { description, .. } = player(7, "to_move").unwrap_err() else {
        panic!("not a field error")
    };
    assert!(!description.contains("PLAYER_UNSPECIFIED"), "{description}");
    assert_eq!(field_of(filter(5).unwrap_err()), "filter");
    assert_eq!(filter(0).unwrap(), GameFilter::All);
    assert_eq!(field_of(game_id("", "game_id").unwrap_err()), "game_id");
    assert_eq!(field_of(game_id("a/b", "game_id").unwrap_err()), "game_id");
    assert_eq!(
        field_of(game_id(&"a".repeat(65), "game_id").unwrap_err()),
        "game_id"
    );
}

#[test]
fn speeds_and_results_round_trip_and_reject_unknown_values() {
    use oanquan_game::PlayerResult;
    use oanquan_game::rating::Speed;
    for speed in Speed::ALL {
        let wire = i32::from(speed_out(speed));
        assert_eq!(optional_speed(wire, "speed").unwrap(), Some(speed));
        assert_eq!(self::speed(wire, "speed").unwrap(), speed);
    }
    assert_eq!(optional_speed(0, "speed").unwrap(), None);
    assert_eq!(field_of(self::speed(0, "speed").unwrap_err()), "speed");
    for bad in [-1, 6, i32::MAX] {
        assert_eq!(field_of(optional_speed(bad, "speed").unwrap_err()), "speed");
    }
    assert_eq!(field_of(player_result(4, "result").unwrap_err()), "result");
    assert_eq!(player_result(0, "result").unwrap(), None);
    assert_eq!(player_result(1, "result").unwrap(), Some(PlayerResult::Win));
    assert_eq!(
        player_result(2, "result").unwrap(),
        Some(PlayerResult::Draw)
    );
    assert_eq!(
        player_result(3, "result").unwrap(),
        Some(PlayerResult::Loss)
    );
}

#[test]
fn accounts_show_in_seats_results_and_profiles_without_their_ids() {
    use oanquan_game::account::{Account, AccountId, RatingChange, SeatAccount};
    use oanquan_game::rating::{Rating, Speed};
    use oanquan_game::username::Username;
    use oanquan_game::{GameResult, PlayerKind, SeatInfo, Termination};

    let id = AccountId::from_stored("secret-internal-id".into());
    let seat = SeatInfo {
        display_name: "Lan".into(),
        kind: PlayerKind::Human,
        account: Some(SeatAccount {
            id: id.clone(),
            username: "Lan".into(),
            rating: Some(1623),
            provisional: true,
        }),
    };
    let start = Position::new(Rules::STANDARD).unwrap();
    let mut game = game_info(GameStatus::Finished, start, start);
    game.seats = ByPlayer::new(Some(seat), None);
    game.rated = true;
    let change = RatingChange {
        before: 1500,
        after: 1662,
        provisional: true,
    };
    game.result = Some(GameResult {
        outcome: Some(oanquan_rules::Outcome::Draw),
        scores: ByPlayer::new(0, 0),
        termination: Termination::Agreement,
        ended_by: None,
        ratings: Some(ByPlayer::new(
            change,
            RatingChange {
                after: 1338,
                ..change
            },
        )),
    });
    let out = game_out(&game);
    assert!(out.rated);
    let account = out.first_seat.unwrap().account.unwrap();
    assert_eq!(
        account,
        pb::SeatAccount {
            username: "Lan".into(),
            rating: 1623,
            provisional: true
        }
    );
    assert!(out.second_seat.unwrap().account.is_none());
    let result = out.result.unwrap();
    assert_eq!(result.first_rating.unwrap().after, 1662);
    assert_eq!(result.second_rating.unwrap().after, 1338);

    let mut account = Account::new(Username::parse("Lan").unwrap(), SystemTime::UNIX_EPOCH);
    account.id = id;
    account.ratings.insert(
        Speed::Blitz,
        Rating {
            rating: 1712.4,
            deviation: 80.6,
            volatility: 0.059,
            games: 12,
        },
    );
    account.record.wins = 7;
    let profile = profile_out(&account);
    assert_eq!(profile.username, "Lan");
    assert_eq!(profile.wins, 7);
    assert_eq!(
        profile.ratings,
        [pb::Rating {
            speed: pb::Speed::Blitz.into(),
            rating: 1712,
            deviation: 81,
            volatility: 0.059,
            games: 12,
            provisional: false,
        }]
    );
    assert!(!format!("{profile:?}{out:?}", out = game_out(&game)).contains("secret-internal-id"));
}

#[test]
fn traces_convert_every_step() {
    let rules = Rules::STANDARD;
    let start = Position::new(rules).unwrap();
    let (_, trace) = start.play(Move::new(1, Direction::Right)).unwrap();
    let steps = steps_out(&trace);
    assert_eq!(steps.len(), trace.len());
    assert!(steps.iter().all(|s| s.kind.is_some()));
    assert!(matches!(
        steps.last().and_then(|s| s.kind.as_ref()),
        Some(StepKind::Capture(pb::step::Capture {
            square: Some(2),
            stones: 6,
            ..
        }))
    ));
}

fn pd(seconds: i64, nanos: i32) -> prost_types::Duration {
    prost_types::Duration { seconds, nanos }
}

fn real_time_in(
    initial: Option<prost_types::Duration>,
    increment: Option<prost_types::Duration>,
) -> pb::TimeControl {
    pb::TimeControl {
        kind: Some(pb::time_control::Kind::RealTime(
            pb::time_control::RealTime { initial, increment },
        )),
    }
}

fn correspondence_in(per_move: Option<prost_types::Duration>) -> pb::TimeControl {
    pb::TimeControl {
        kind: Some(pb::time_control::Kind::Correspondence(
            pb::time_control::Correspondence { per_move },
        )),
    }
}

#[test]
fn durations_must_be_present_normalised_and_not_negative() {
    use std::time::Duration;
    assert_eq!(
        duration(Some(&pd(1, 500_000_000)), "d").unwrap(),
        Duration::from_millis(1_500)
    );
    assert_eq!(duration(Some(&pd(0, 0)), "d").unwrap(), Duration::ZERO);
    // The largest normalised value converts without overflow.
    assert_eq!(
        duration(Some(&pd(i64::MAX, 999_999_999)), "d").unwrap(),
        Duration::new(i64::MAX.unsigned_abs(), 999_999_999)
    );
    for bad in [
        None,
        Some(pd(-1, 0)),
        Some(pd(0, -1)),
        Some(pd(5, -1)),
        Some(pd(-5, 1)),
        Some(pd(i64::MIN, i32::MIN)),
        Some(pd(0, 1_000_000_000)),
        Some(pd(1, i32::MAX)),
    ] {
        assert_eq!(
            field_of(duration(bad.as_ref(), "a.b").unwrap_err()),
            "a.b",
            "{bad:?}"
        );
    }
    // Mixed signs are named as such, not as a negative duration (an outside probe).
    for mixed in [pd(5, -999_999_999), pd(-5, 1)] {
        let why = duration(Some(&mixed), "d").unwrap_err().to_string();
        assert!(why.contains("the same sign"), "{mixed:?}: {why}");
    }
    assert!(
        duration(Some(&pd(-5, 0)), "d")
            .unwrap_err()
            .to_string()
            .contains("must not be negative")
    );
}

#[test]
fn time_controls_parse_within_bounds_and_name_the_bad_field() {
    use oanquan_game::TimeControl;
    use std::time::Duration;
    let tc = |value: &pb::TimeControl| time_control(Some(value), "time_control");
    assert_eq!(time_control(None, "tc").unwrap(), TimeControl::Untimed);
    assert_eq!(
        tc(&pb::TimeControl { kind: None }).unwrap(),
        TimeControl::Untimed
    );
    assert_eq!(
        tc(&real_time_in(Some(pd(180, 0)), Some(pd(2, 0)))).unwrap(),
        TimeControl::RealTime {
            initial: Duration::from_secs(180),
            increment: Duration::from_secs(2)
        }
    );
    // No increment is "+0"; the bounds are inclusive.
    assert_eq!(
        tc(&real_time_in(Some(pd(1, 0)), None)).unwrap(),
        TimeControl::RealTime {
            initial: Duration::from_secs(1),
            increment: Duration::ZERO
        }
    );
    assert!(tc(&real_time_in(Some(pd(3 * 3600, 0)), Some(pd(180, 0)))).is_ok());
    assert_eq!(
        tc(&correspondence_in(Some(pd(86_400, 0)))).unwrap(),
        TimeControl::Correspondence {
            per_move: Duration::from_secs(86_400)
        }
    );
    assert!(tc(&correspondence_in(Some(pd(60, 0)))).is_ok());
    assert!(tc(&correspondence_in(Some(pd(30 * 86_400, 0)))).is_ok());

    let initial = "time_control.real_time.initial";
    let increment = "time_control.real_time.increment";
    let per_move = "time_control.correspondence.per_move";
    let minute = Some(pd(60, 0));
    let cases = [
        (real_time_in(None, None), initial),
        (real_time_in(Some(pd(0, 0)), None), initial),
        (real_time_in(Some(pd(0, 999_999_999)), None), initial),
        (real_time_in(Some(pd(-1, 0)), None), initial),
        (real_time_in(Some(pd(1, 1_000_000_000)), None), initial),
        (real_time_in(Some(pd(3 * 3600, 1)), None), initial),
        (real_time_in(Some(pd(i64::MAX, 0)), None), initial),
        (real_time_in(minute, Some(pd(-1, 0))), increment),
        (real_time_in(minute, Some(pd(0, -1))), increment),
        (real_time_in(minute, Some(pd(180, 1))), increment),
        (
            real_time_in(minute, Some(pd(i64::MAX, 999_999_999))),
            increment,
        ),
        (correspondence_in(None), per_move),
        (correspondence_in(Some(pd(59, 999_999_999))), per_move),
        (correspondence_in(Some(pd(30 * 86_400, 1))), per_move),
        (correspondence_in(Some(pd(-60, 0))), per_move),
        (correspondence_in(Some(pd(i64::MAX, 0))), per_move),
    ];
    for (value, field) in cases {
        let error = tc(&value).unwrap_err();
        let GameError::InvalidArgument { description, .. } = &error else {
            panic!("{error:?}")
        };
        assert!(!description.is_empty());
        assert_eq!(field_of(error), field, "{value:?}");
    }
}

#[test]
fn time_controls_round_trip() {
    use oanquan_game::TimeControl;
    use std::time::Duration;
    assert_eq!(time_control_out(TimeControl::Untimed), None);
    for control in [
        TimeControl::real_time(Duration::from_secs(180), Duration::from_secs(2)).unwrap(),
        TimeControl::real_time(Duration::from_millis(1_500), Duration::ZERO).unwrap(),
        TimeControl::correspondence(Duration::from_secs(2 * 86_400)).unwrap(),
    ] {
        let out = time_control_out(control);
        assert_eq!(time_control(out.as_ref(), "tc").unwrap(), control);
    }
}

#[test]
fn computer_fallbacks_need_a_wait_of_1s_to_10min_and_a_level_of_1_to_7() {
    use oanquan_ai::Level;
    use std::time::Duration;
    let fallback =
        |after: Option<prost_types::Duration>, level| pb::ComputerFallback { after, level };
    let parse = |value: &pb::ComputerFallback| computer_fallback(Some(value), "computer");
    assert_eq!(computer_fallback(None, "computer").unwrap(), None);
    assert_eq!(
        parse(&fallback(Some(pd(1, 0)), 1)).unwrap(),
        Some((Duration::from_secs(1), Level::Random))
    );
    assert_eq!(
        parse(&fallback(Some(pd(600, 0)), 7)).unwrap(),
        Some((MAX_COMPUTER_AFTER, Level::Master))
    );
    for (value, field) in [
        (fallback(None, 1), "computer.after"),
        (fallback(Some(pd(0, 0)), 1), "computer.after"),
        (fallback(Some(pd(0, 999_999_999)), 1), "computer.after"),
        (fallback(Some(pd(600, 1)), 1), "computer.after"),
        (fallback(Some(pd(i64::MAX, 0)), 1), "computer.after"),
        (fallback(Some(pd(-1, 0)), 1), "computer.after"),
        (fallback(Some(pd(1, 1_000_000_000)), 1), "computer.after"),
        (fallback(Some(pd(5, 0)), 0), "computer.level"),
        (fallback(Some(pd(5, 0)), 8), "computer.level"),
        (fallback(Some(pd(5, 0)), 256 + 1), "computer.level"),
        (fallback(Some(pd(5, 0)), u32::MAX), "computer.level"),
    ] {
        assert_eq!(field_of(parse(&value).unwrap_err()), field, "{value:?}");
    }
    // Every level out of range is told the same range: 0 is no "no computer" here.
    for level in [0, 8, u32::MAX] {
        let error = parse(&fallback(Some(pd(5, 0)), level)).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains(&format!("must be 1 (random) to 7 (master); got {level}"))
                && !text.contains("no computer"),
            "{text}"
        );
    }
}

#[test]
fn clock_readings_convert_every_field() {
    use oanquan_game::clock::ClockReading;
    use std::time::Duration;
    let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
    let running = ClockReading {
        remaining: ByPlayer::new(Duration::from_millis(2_500), Duration::from_secs(60)),
        measured_at: at,
        running: Some(Player::Second),
        deadline: Some(at + Duration::from_secs(60)),
    };
    let out = clocks_out(&running);
    assert_eq!(out.first_remaining, Some(pd(2, 500_000_000)));
    assert_eq!(out.second_remaining, Some(pd(60, 0)));
    assert_eq!(out.measured_at, timestamp(at));
    assert_eq!(out.running(), pb::Player::Second);
    assert_eq!(out.deadline, timestamp(at + Duration::from_secs(60)));
    let stopped = clocks_out(&ClockReading {
        running: None,
        deadline: None,
        remaining: ByPlayer::new(Duration::ZERO, Duration::ZERO),
        ..running
    });
    assert_eq!(stopped.running(), pb::Player::Unspecified);
    assert_eq!(stopped.deadline, None);
    assert_eq!(stopped.first_remaining, Some(pd(0, 0)));
    // A duration beyond what protobuf can carry is clamped, not wrapped.
    assert_eq!(
        duration_out(Duration::MAX).map(|d| d.seconds),
        Some(i64::MAX)
    );
}

#[test]
fn seeks_convert_with_their_rules_time_control_and_fallback() {
    use oanquan_game::TimeControl;
    use oanquan_game::seek::SeekInfo;
    use std::time::Duration;
    let created = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let control = TimeControl::real_time(Duration::from_secs(180), Duration::from_secs(2)).unwrap();
    let seek = SeekInfo {
        id: "s1".into(),
        display_name: "Lan".into(),
        rules: Rules::MANCALA_WORLD,
        preset: Some(Preset::MancalaWorld),
        time_control: control,
        created,
        computer_after: Some(Duration::from_secs(30)),
        account: None,
        rated: false,
        rating_range: None,
    };
    let out = seek_out(&seek);
    assert_eq!(out.id, "s1");
    assert_eq!(out.display_name, "Lan");
    assert_eq!(out.preset, "mancala-world");
    assert_eq!(
        rule_set(out.rule_set.as_ref().unwrap(), "r").unwrap(),
        Rules::MANCALA_WORLD
    );
    assert_eq!(
        time_control(out.time_control.as_ref(), "tc").unwrap(),
        control
    );
    assert_eq!(out.create_time, timestamp(created));
    assert_eq!(out.computer_after, Some(pd(30, 0)));
    let plain = seek_out(&SeekInfo {
        preset: None,
        time_control: TimeControl::Untimed,
        computer_after: None,
        ..seek
    });
    assert_eq!(plain.preset, "");
    assert_eq!(plain.time_control, None);
    assert_eq!(plain.computer_after, None);
}

/// proto3 cannot tell an unset `max` from 0: a range with only a `min` has no upper bound
/// (an outside probe's `{min: 1400}` was refused as "1400 above 0").
#[test]
fn a_rating_range_without_a_max_has_no_upper_bound() {
    let range = |min, max| rating_range(Some(&pb::RatingRange { min, max })).unwrap();
    assert_eq!(range(1400, 0), Some((1400, 4000)));
    assert_eq!(range(0, 1700), Some((0, 1700)));
    assert_eq!(range(1400, 1700), Some((1400, 1700)));
    assert_eq!(rating_range(None).unwrap(), None);
}

/// An outside probe's `{min: -5}` and `{min: i32::MIN, max: i32::MAX}` were taken as "any
/// rating" and listed as typed.
#[test]
fn a_negative_rating_bound_is_refused_by_its_field() {
    for (min, max, field) in [
        (-5, 0, "rating_range.min"),
        (i32::MIN, i32::MAX, "rating_range.min"),
        (0, -1, "rating_range.max"),
        // With no maximum, a minimum past every rating is the minimum's fault, not a range
        // "5000..=4000" the caller never wrote.
        (5000, 0, "rating_range.min"),
    ] {
        match rating_range(Some(&pb::RatingRange { min, max })) {
            Err(GameError::InvalidArgument { field: got, .. }) => assert_eq!(got, field),
            other => panic!("{min}..{max}: {other:?}"),
        }
    }
}

#[test]
fn an_events_game_reads_its_clocks_when_the_event_happened() {
    use oanquan_game::{GameEvent, GameEventKind, LobbyEvent, LobbyEventKind};
    use std::time::Duration;
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let start = Position::new(Rules::STANDARD).unwrap();
    let mut game = game_info(GameStatus::Active, start, start);
    game.time_control =
        oanquan_game::TimeControl::real_time(Duration::from_secs(300), Duration::ZERO).unwrap();
    game.clock = Some(oanquan_game::clock::Clock {
        remaining: ByPlayer::new(Duration::from_secs(300), Duration::from_secs(300)),
        first_move: Duration::from_secs(30),
    });
    game.turn_started = Some(at);
    let started = GameEvent {
        game_id: game.id.clone(),
        sequence: 3,
        time: at,
        kind: GameEventKind::GameStarted {
            game: Box::new(game.clone()),
        },
    };
    // Sent live and replayed later, the event is the same.
    let live = game_event_out(&started);
    std::thread::sleep(Duration::from_millis(2));
    assert_eq!(game_event_out(&started), live);
    let Some(pb::game_event::Kind::GameStarted(sent)) = live.kind else {
        panic!("{live:?}")
    };
    let clocks = sent.game.unwrap().clocks.unwrap();
    assert_eq!(clocks.measured_at, timestamp(at));
    let created = LobbyEvent {
        sequence: 1,
        time: at,
        kind: LobbyEventKind::GameCreated {
            game: Box::new(game),
        },
    };
    let Some(pb::lobby_event::Kind::GameCreated(sent)) = lobby_event_out(&created).kind else {
        panic!()
    };
    assert_eq!(
        sent.game.unwrap().clocks.unwrap().measured_at,
        timestamp(at)
    );
}
