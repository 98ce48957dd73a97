//! The checks on an anonymous display name that depend on the text alone, remembered.
//!
//! Normalising a name, finding a bracket in any look-alike form and computing the keys by which
//! it meets accounts (confusable skeletons, case folds until stable) cost about 15,000
//! instructions a name: most of what `CreateGame` and `JoinGame` spend beyond the commit, twice
//! a game. Players come back under the same name, so the outcome for a name already accepted
//! is kept. Whether an account holds the name's keys is not: accounts come and go, and the
//! store is asked every time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::GameError;
use crate::text;
use crate::username;

/// Names kept before the memory is emptied and starts again: a few hundred KiB at most, and
/// a flood of distinct names costs what it would cost without the memory.
const MAX_NAMES: usize = 1024;

/// Longer requests are checked every time: a name that passes is at most
/// [`text::MAX_DISPLAY_NAME_CHARS`] characters once trimmed, but the request may pad it.
const MAX_REMEMBERED_BYTES: usize = 4 * 4 * text::MAX_DISPLAY_NAME_CHARS;

/// A display name that passed the text checks, with its keys ([`username::keys_of_text`]).
#[derive(Debug)]
pub(crate) struct CheckedName {
    pub(crate) name: String,
    pub(crate) keys: Vec<String>,
}

/// The text checks' outcome for names accepted lately, by the text as the client sent it.
#[derive(Debug, Default)]
pub(crate) struct CheckedNames {
    // SipHash: the keys are the clients' own text.
    names: Mutex<HashMap<Box<str>, Arc<CheckedName>>>,
}

impl CheckedNames {
    /// `raw` as a display name, with the keys by which it meets accounts.
    ///
    /// # Errors
    ///
    /// [`GameError::InvalidArgument`] on `display_name`: what [`text::display_name`] refuses,
    /// a name that ends in brackets (players' screens put a rating or a computer's level
    /// there), and one that reads as the service's or its staff's ([`username::staff_word`]).
    pub(crate) fn check(&self, raw: &str) -> Result<Arc<CheckedName>, GameError> {
        if let Some(known) = self.lock().get(raw) {
            return Ok(Arc::clone(known));
        }
        let name = text::display_name(raw)?;
        if text::ends_in_brackets(&name) {
            return Err(GameError::invalid(
                "display_name",
                format!(
                    "{} ends in a part in brackets, which players' screens use for a rating or a \
                     computer's level; choose a name without it",
                    text::quoted(&name)
                ),
            ));
        }
        if let Some(word) = username::staff_word(&name) {
            return Err(GameError::invalid(
                "display_name",
                format!(
                    "{} reads as \"{word}\", a name of the service and its staff; choose another",
                    text::quoted(&name)
                ),
            ));
        }
        let keys = username::keys_of_text(&name);
        let checked = Arc::new(CheckedName { name, keys });
        if raw.len() <= MAX_REMEMBERED_BYTES {
            let mut names = self.lock();
            if names.len() >= MAX_NAMES {
                names.clear();
            }
            names.insert(raw.into(), Arc::clone(&checked));
        }
        Ok(checked)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Arc<CheckedName>>> {
        // A map of finished checks cannot be left half-changed by a panic elsewhere.
        self.names.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(raw: &str) -> Result<(String, Vec<String>), GameError> {
        let name = text::display_name(raw)?;
        assert!(!text::ends_in_brackets(&name));
        let keys = username::keys_of_text(&name);
        Ok((name, keys))
    }

    #[test]
    fn a_remembered_name_answers_as_a_fresh_check_would() {
        let names = CheckedNames::default();
        for raw in [
            "Lan",
            "  Lan  ",
            "Ｌａｎ",
            "Nguyễn Văn An",
            "Guest",
            "Computer",
            "rn",
            "🙂 x",
        ] {
            for _ in 0..2 {
                let checked = names.check(raw).unwrap();
                let (name, keys) = fresh(raw).unwrap();
                assert_eq!((&checked.name, &checked.keys), (&name, &keys), "{raw:?}");
            }
        }
    }

    #[test]
    fn refusals_are_never_remembered_and_stay_refusals() {
        let names = CheckedNames::default();
        for raw in [
            "",
            "   ",
            "Lan (1500)",
            "Lan （1500）",
            "a\u{202e}b",
            &"x".repeat(33),
            "ADMlN",
        ] {
            for _ in 0..2 {
                let error = names.check(raw).unwrap_err();
                assert!(
                    matches!(&error, GameError::InvalidArgument { field, .. } if field == "display_name"),
                    "{raw:?}: {error:?}"
                );
            }
        }
        assert!(names.lock().is_empty());
    }

    #[test]
    fn a_flood_of_names_keeps_the_memory_bounded() {
        let names = CheckedNames::default();
        for i in 0..(3 * MAX_NAMES) {
            names.check(&format!("Guest {i}")).unwrap();
            assert!(names.lock().len() <= MAX_NAMES);
        }
        // A padded request is checked but not kept.
        let padded = format!("{}Lan{}", " ".repeat(300), " ".repeat(300));
        names.lock().clear();
        assert_eq!(names.check(&padded).unwrap().name, "Lan");
        assert!(names.lock().is_empty());
    }

    /// An outside probe sat down anonymously as "admin" and "root": the lobby showed them as
    /// anyone would take the operator.
    #[test]
    fn names_of_the_service_and_its_staff_are_refused_in_their_disguises() {
        let names = CheckedNames::default();
        for (raw, word) in [
            ("admin", "admin"),
            ("Root", "root"),
            ("ADMlN", "admin"),
            ("Admin_2", "admin"),
            ("Ｓｕｐｐｏｒｔ", "support"),
            ("m0derator", "moderator"),
            ("Quản trị", "quảntrị"),
            ("oanquan", "oanquan"),
            ("Админ", "админ"),
            ("客服", "客服"),
            ("운영 자", "운영자"),
            ("ᴬᴰᴹᴵᴺ", "admin"),
            ("ⓐⓓⓜⓘⓝ", "admin"),
            ("ＯＷＮＥＲ", "owner"),
            ("管理", "管理"),
            // Accents on the staff words of languages written without them, and enclosed
            // letters NFKC leaves alone: an outside probe sat down as each.
            ("Admín", "admin"),
            ("ṡtaff", "staff"),
            ("Sÿstem", "system"),
            ("🅰🅳🅼🅸🅽", "admin"),
            ("🅐🅓🅜🅘🅝", "admin"),
            ("🇦🇩🇲🇮🇳", "admin"),
            // A joiner between letters is kept, and read through.
            ("ad\u{200c}min", "admin"),
            // A second probe's: punctuation and symbols between or after the letters, small
            // capitals, Persian.
            ("Admin!", "admin"),
            ("Admin?", "admin"),
            ("A.d.m.i.n", "admin"),
            ("A\u{b7}d\u{b7}m\u{b7}i\u{b7}n", "admin"),
            ("Admin \u{2714}", "admin"),
            ("\u{2714} Admin", "admin"),
            ("Root\u{2122}", "root"),
            ("Admin\u{ae}", "admin"),
            // A third's: underlined or struck through.
            ("A\u{332}d\u{332}m\u{332}i\u{332}n\u{332}", "admin"),
            ("R\u{336}o\u{336}o\u{336}t\u{336}", "root"),
            // A fourth's: a staff word among other words.
            ("Oanquan Official", "oanquan"),
            ("Admin Team", "admin"),
            ("The Admin", "admin"),
            ("Support Team", "support"),
            ("Qu\u{1ea3}n tr\u{1ecb} vi\u{ea}n", "qu\u{1ea3}ntr\u{1ecb}"),
            ("Ban Qu\u{1ea3}n Tr\u{1ecb}", "qu\u{1ea3}ntr\u{1ecb}"),
            ("\u{1d00}\u{1d05}\u{1d0d}\u{26a}\u{274}", "admin"),
            // A fifth's: the staff in Vietnamese forum speech and more languages.
            ("H\u{1ed7} tr\u{1ee3}", "h\u{1ed7}tr\u{1ee3}"),
            (
                "H\u{1ed7} Tr\u{1ee3} Kh\u{e1}ch H\u{e0}ng",
                "h\u{1ed7}tr\u{1ee3}",
            ),
            ("BQT", "bqt"),
            ("QTV Lan", "qtv"),
            ("Amministratore", "amministratore"),
            ("Y\u{f6}netici", "y\u{f6}netici"),
            // A sixth's: plurals, compounds, the service's name in a longer one or three
            // words, Vietnamese customer care and operators, more languages.
            ("Admins", "admins"),
            ("Mods", "mods"),
            ("SysAdmin", "sysadmin"),
            ("OanquanAdmin", "oanquan"),
            ("\u{d4} \u{102}n Quan Team", "\u{f4}\u{103}nquan"),
            (
                "H\u{1ec7} th\u{1ed1}ng \u{d4} \u{102}n Quan",
                "\u{f4}\u{103}nquan",
            ),
            ("CSKH", "cskh"),
            (
                "Ban \u{111}i\u{1ec1}u h\u{e0}nh",
                "\u{111}i\u{1ec1}uh\u{e0}nh",
            ),
            (
                "Ch\u{103}m s\u{f3}c kh\u{e1}ch h\u{e0}ng",
                "ch\u{103}ms\u{f3}c",
            ),
            ("Destek Ekibi", "destek"),
            ("Customer Service", "customerservice"),
            ("Help Desk", "helpdesk"),
            ("Game Master", "gamemaster"),
            ("T\u{1ed5}ng \u{111}\u{e0}i", "t\u{1ed5}ng\u{111}\u{e0}i"),
            ("\u{2714} Verified", "verified"),
            (
                "\u{627}\u{62f}\u{645}\u{6cc}\u{646}",
                "\u{627}\u{62f}\u{645}\u{6cc}\u{646}",
            ),
        ] {
            match names.check(raw) {
                Err(GameError::InvalidArgument {
                    field,
                    description: why,
                }) => {
                    assert_eq!(field, "display_name");
                    assert!(why.contains(&format!("\"{word}\"")), "{raw:?}: {why}");
                }
                other => panic!("{raw:?}: {other:?}"),
            }
        }
        for raw in [
            "Guest",
            "Anonymous",
            "Computer",
            "Administrative Lan",
            "Rooted",
            // Words that hold a staff word but are none: only a whole word counts.
            "Rootberg Lan",
            "Badminton Club",
            "Madmin Nguyen",
            "Lan Supporter",
            "Modest Mouse",
            // Reserved words that claim no role among others.
            "Solar System",
            "Sistema Solar",
            "Guest Lan",
            // Vietnamese names whose accents make them other words than the reserved ones.
            "Quân Trí",
            "Hồ Trọng",
            // Given names and surnames that hold or meet the new words.
            "Trọng Tài",
            "Đoàn Quân",
            "Doan Quan",
            "Hoàn Quân",
            "Mod Lan",
            "Bột",
            "Ân Danh",
            "Khách Sạn",
            "Mây Tính",
            "🇻🇳 Lan",
            "Lan!",
            "Bột!",
            "Staffan",
            "Admiral",
            "Amin",
            "Root beer",
        ] {
            assert!(names.check(raw).is_ok(), "{raw:?}");
        }
    }
}
