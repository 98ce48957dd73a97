//! Stored game records (JSON, as the CLI and the SQLite store write them): deserializing never
//! panics, and a record that replays re-serializes to one that replays the same way.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oanquan_rules::GameRecord;

fuzz_target!(|data: &[u8]| {
    let Ok(record) = serde_json::from_slice::<GameRecord>(data) else {
        return;
    };
    let Ok(game) = record.replay() else {
        return;
    };
    let again = game.record();
    assert_eq!(again, record);
    let json = serde_json::to_string(&again).unwrap();
    let parsed: GameRecord = serde_json::from_str(&json).unwrap();
    let replayed = parsed.replay().expect("a re-serialized record replays");
    assert_eq!(replayed.position(), game.position());
});
