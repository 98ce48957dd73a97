//! Text notation: `Move`, `Setup` and `Preset` parsers never panic, and whatever they accept
//! prints back to text that parses to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oanquan_rules::{Move, Position, Preset, Rules, Setup};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(mv) = text.parse::<Move>() {
        assert_eq!(mv.to_string().parse::<Move>(), Ok(mv), "{text:?}");
    }
    if let Ok(preset) = text.parse::<Preset>() {
        assert_eq!(preset.name().parse::<Preset>().ok(), Some(preset));
    }
    if let Ok(setup) = text.parse::<Setup>() {
        let printed = setup.to_string();
        assert_eq!(
            printed.parse::<Setup>(),
            Ok(setup),
            "{text:?} printed as {printed:?}"
        );
        // A parsed setup under any preset either is a playable position or a typed error.
        for rules in [Rules::STANDARD, Rules::TRADITIONAL, Rules::MANCALA_WORLD] {
            if let Ok(position) = Position::from_setup(setup, rules) {
                assert_eq!(position.to_setup(), setup);
                let _ = position.legal_moves();
            }
        }
    }
});
