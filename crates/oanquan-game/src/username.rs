//! Account usernames: what a username may be, and the key that decides when two are the same.
//!
//! A username is shown to other players next to their games and ratings, so the rules aim at one
//! thing: a name that one player sees can only belong to one account. Each rule below says what
//! it refuses and why.
//!
//! # What a username is
//!
//! [`Username::parse`] takes the text exactly as the client sent it and either refuses it with a
//! [`UsernameError`] (which becomes `INVALID_ARGUMENT` on the field `username`) or returns the
//! name to keep:
//!
//! 1. **Normalised to Unicode NFC.** "Phương" typed as `u` + combining horn is stored as the same
//!    precomposed characters as "Phương" typed on a Vietnamese keyboard. The name is kept as the
//!    user wrote it otherwise, capitals included.
//! 2. **2 to 20 characters**, counted as Unicode scalar values after NFC, not bytes: "Đức-2" is
//!    5 characters. Input of more than 80 characters is refused before any other work, so a
//!    megabyte costs one pass that counts it.
//! 3. **Not trimmed.** White space at either end is refused rather than removed: the name
//!    registered is exactly the name typed, and a client that wants trimming does it in its form.
//! 4. **Letters, digits `0-9`, `_` and `-` only:**
//!    * *letters* are Unicode letters (general category L) that UTS #39 lists as
//!      `Identifier_Status=Allowed`: the letters of the scripts in modern use, Vietnamese with
//!      all its diacritics included. That refuses compatibility forms (fullwidth `Ｌ`, ligatures
//!      such as `ﬁ`, superscripts, circled letters: "type `L`" is the hint), historic and
//!      limited-use scripts, and phonetic or technical letters such as `ɑ` or `ɡ` that exist to
//!      look like ordinary ones. Letters that look like punctuation (`ʼ`, `ʻ`) are refused too.
//!    * *digits* are ASCII only: digits of other numbering systems look like other digits or
//!      letters (`٥`, `০`), and `0-9` go with every script.
//!    * `_` and `-` are the ASCII ones (no other dash or connector), never first or last, and
//!      never two in a row: `_lan`, `lan-`, `a__b` and `a-_b` are easy to misread or miscopy.
//!    * no spaces, punctuation, symbols or emoji; no invisible characters at all (control and
//!      format characters, zero-width spaces and joiners, bidirectional overrides and isolates,
//!      variation selectors, Hangul fillers): they hide or reorder letters on other screens.
//! 5. **No loose combining marks.** After NFC a Vietnamese, Latin, Greek or Cyrillic letter with
//!    its accents is one character; an accent that is still separate (`x` + acute, an accent at
//!    the start) would let names stack decorations or fake a letter, so it is refused. Scripts
//!    whose vowel signs are marks by nature (Devanagari, Thai, …) keep them, without the same mark
//!    twice in a row or more than four marks in a row (UTS #39, 5.4).
//! 6. **One script per name** (UTS #39 mixed-script detection, with the Han + kana and Han +
//!    Hangul combinations that Japanese and Korean use). "pаypal" with a Cyrillic `а` is refused
//!    and the message names the letter it imitates. Digits, `_` and `-` go with any script.
//! 7. **Not reserved.** Names of the service, its staff and its computer player
//!    ([`reserved_usernames`]: `admin`, `root`, `computer`, `oanquan`, `quản_trị`, …) are refused,
//!    also in another case, with look-alike letters (`r00t`), with `_`/`-` inside (`ad-min`) or
//!    with digits and `_`/`-` around them (`admin_2`).
//!
//! # When two names are the same
//!
//! Two usernames are the same when their [`Username::key`]s are equal; a store keeps the key in a
//! unique column and answers `ALREADY_EXISTS` when it is taken. The key is
//!
//! * **case folded**, fully: each character's lowercase of its uppercase, repeated until it no
//!   longer changes, so `Lan`, `LAN` and `lan`, `straße`, `STRASSE` and `STRAẞE`, `ΣΟΦΟΣ` and
//!   `σοφος` (final sigma) each share a key;
//! * then reduced to its UTS #39 **confusable skeleton** (the `unicode-security` crate's
//!   `skeleton`, then case folded again, until stable), so names that differ only by look-alikes
//!   share a key: `0`/`o`, `1`/`l`, `rn`/`m` (and `cl`/`d`, `vv`/`w`, which Unicode lists but
//!   the crate's data lacks), and whole-script look-alikes such as Cyrillic
//!   "сор" and Latin "cop". Whoever registers first keeps the name; the other gets
//!   `ALREADY_EXISTS`. Such names are not refused outright, so that a Russian player can still be
//!   "Сара" (Cyrillic letters that read as the Latin "Capa") as long as no one took "Capa".
//!
//! Known limits of a single key: folding before the skeleton merges what looks alike in lower
//! case, not what only looks alike in capitals. So `Il` (capital i) and `ll` get different keys;
//! merging them would also merge `i` and `l` ("Mai" and "Mal"). So a store keeps a second
//! value per name, its [`Username::look`] (the skeleton as written, capitals and all, keyed),
//! and refuses a name whose key or look meets an existing key or look: `Ian` and `lan`, or
//! Cyrillic `ТОМ` and `TOM`, in either order. The one capital look-alike that
//! matters for Vietnamese names is handled: Icelandic `Ð`/`ð` and African `Ɖ`/`ɖ` key as `Đ`/`đ`,
//! so "Ðức" cannot pose as "Đức".
//!
//! The key depends on Unicode data (Rust's case mappings, `unicode-security`'s confusables);
//! updating either can change some keys, so a store that keeps keys recomputes them with
//! [`Username::parse`] after such an update. The key is opaque: compare it, never show it.

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use unicode_normalization::UnicodeNormalization as _;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory as _};
use unicode_security::mixed_script::AugmentedScriptSet;
use unicode_security::{GeneralSecurityProfile as _, skeleton};

use crate::error::GameError;
use crate::text::{is_invisible, quoted};

/// The request field that errors about a username name.
pub const USERNAME_FIELD: &str = "username";

/// The fewest characters in a username (after NFC).
/// Two, not three: the commonest Chinese, Korean and many Vietnamese names are two characters
/// (`王伟`, `Hà`, `Lý`, `An`), and an outside probe found each refused.
pub const MIN_USERNAME_CHARS: usize = 2;

/// The most characters in a username (after NFC).
pub const MAX_USERNAME_CHARS: usize = 20;

/// Input longer than this is refused before it is normalised. NFC never makes text longer, and
/// a Vietnamese letter typed decomposed takes at most three code points (`ệ` = `e` + dot below +
/// circumflex), so four per character leaves room for any name that can pass.
const MAX_INPUT_CHARS: usize = 4 * MAX_USERNAME_CHARS;

/// UTS #39 5.4: more combining marks in a row than this are refused.
const MAX_MARKS_IN_A_ROW: usize = 4;

/// Folding and skeletons reach their fixed point in one or two rounds for every name we accept
/// (a property test checks); the bound only keeps a surprise in the Unicode data from looping.
const MAX_KEY_ROUNDS: usize = 8;

/// Words that speak for the service or its staff. Refused as a username (see
/// [`reserved_usernames`]), as a display name, and as a word of a display name among others
/// (`Oanquan Official`, `The Admin`).
const STAFF_WORDS: &[&str] = &[
    "admin",
    "admins",
    "administrator",
    "administrators",
    "sysadmin",
    "superadmin",
    "webmaster",
    "sysop",
    "oanquan",
    "ôănquan",
    "moderator",
    "moderators",
    "mods",
    "staff",
    "support",
    "official",
    "owner",
    "verified",
    "noreply",
    "helpdesk",
    "customerservice",
    "gamemaster",
    // Vietnamese: administrator, support, management, with and without diacritics, and the
    // forum abbreviations of "board of administrators" and "administrator" (an outside probe
    // sat as `BQT` and `QTV`).
    "quantri",
    "quảntrị",
    "hotro",
    "hỗtrợ",
    "quảnlý",
    "bqt",
    "qtv",
    // Customer care, operators, moderators, staff, notices, as Vietnamese forums and games
    // write them (an outside probe sat as each). Not "trọng tài" (referee): Trọng Tài is a
    // given name.
    "cskh",
    "chămsóc",
    "điềuhành",
    "kiểmduyệt",
    "nhânviên",
    "thôngbáo",
    "tổngđài",
    "tưvấn",
    // The staff in the languages of the players a Vietnamese game meets most online, in their
    // own scripts: the confusable skeletons cannot reach "админ" from "admin" (д, и and н look
    // like no Latin letter), and an outside probe registered it.
    "админ",
    "администратор",
    "модератор",
    "поддержка",
    "адмін",
    "адміністратор",
    "модер",
    "админка",
    "管理员",
    "管理員",
    "管理者",
    "管理",
    "版主",
    "客服",
    "官方",
    "運営",
    "运营",
    "公式",
    "サポート",
    "관리자",
    "운영자",
    "운영진",
    "administrador",
    "administrateur",
    "amministratore",
    "adminisztrátor",
    "oficial",
    "supporto",
    "assistenza",
    "destek",
    "pengurus",
    "verwalter",
    "betreiber",
    "kundendienst",
    "beheerder",
    "ylläpitäjä",
    "správce",
    "διαχειριστής",
    "συντονιστής",
    "техподдержка",
    "技术支持",
    "アドミン",
    "モデレーター",
    "운영팀",
    "고객센터",
    "แอดมิน",
    "ผู้ดูแลระบบ",
    "व्यवस्थापक",
    "الإدارة",
    "الدعم",
    "moderador",
    "modérateur",
    "moderateur",
    "moderatore",
    "soporte",
    "suporte",
    "yönetici",
    "yonetici",
    "مدير",
    "مشرف",
    // Persian: administrator (with the Persian yeh), admin.
    "مدیر",
    "ادمین",
    "מנהל",
];

/// Words of the machine: refused as a username or as a whole display name, where they pose as
/// the server, but ordinary beside other words (`Root beer`, `Solar System`, `Sistema Solar`).
const SYSTEM_WORDS: &[&str] = &[
    "root",
    "system",
    "mod",
    "operator",
    "server",
    "sistema",
    // Vietnamese "system", with and without diacritics; Japanese and Chinese "system".
    "hethong",
    "hệthống",
    "システム",
    "系统",
    "系統",
];

/// Words refused as usernames only: display names may use them, since they speak for no one.
/// The page's default name is "Guest", and a computer's seat always reads "Computer (level
/// N)", in brackets that display names cannot end in. Any other reserved word is refused for
/// a display name too (an outside probe sat down as "admin" and "root" in the lobby, where
/// anyone could take it for the operator).
const OPEN_TO_DISPLAY_NAMES: &[&str] = &[
    "computer",
    "bot",
    "anonymous",
    "anon",
    "guest",
    "nobody",
    "everyone",
    "null",
    "undefined",
    // Vietnamese: computer, anonymous, guest, with and without diacritics.
    "maytinh",
    "máytính",
    "andanh",
    "ẩndanh",
    "khach",
    "khách",
];

/// Names that belong to the service, its staff or its computer player. A username is refused
/// when its key matches one of these, also with `_`/`-` inside or digits and `_`/`-` around it.
pub fn reserved_usernames() -> impl Iterator<Item = &'static str> {
    STAFF_WORDS
        .iter()
        .chain(SYSTEM_WORDS)
        .chain(OPEN_TO_DISPLAY_NAMES)
        .copied()
}

/// The reserved names as [`reserved_form`]s, each also with small `l` read as `i`, computed
/// once.
static RESERVED_FORMS: LazyLock<Vec<(&'static str, [String; 2])>> = LazyLock::new(|| {
    reserved_usernames()
        .map(|word| {
            let form = reserved_form(word);
            (word, [form.replace('l', "i"), form])
        })
        .collect()
});

/// The name of the service or its staff that `text` (a display name) reads as, in any of the
/// disguises a username is checked for ([`reserved_usernames`]).
#[must_use]
pub fn staff_word(text: &str) -> Option<&'static str> {
    if let Some(word) = staff_word_whole(text) {
        return Some(word);
    }
    // And a word that claims a staff role among other words, alone or as two of them:
    // `Oanquan Official`, `Admin Team`, `The Admin`, `Quản trị viên`, `Ban Quản Trị` (an
    // outside probe sat as each). Only a whole word counts (`Rootberg` and `Badminton` stay
    // free), and only such a word: `Root beer` and `Solar System` are no staff.
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() < 2 {
        return None;
    }
    // Three words too: `Hệ thống Ô Ăn Quan`, `Ban điều hành`.
    words
        .iter()
        .map(|word| (*word).to_owned())
        .chain(words.windows(2).map(|pair| pair.join(" ")))
        .chain(words.windows(3).map(|three| three.join(" ")))
        .filter_map(|part| staff_word_whole(&part))
        .find(|word| STAFF_WORDS.contains(word))
}

/// [`staff_word`] of the whole of `text`.
fn staff_word_whole(text: &str) -> Option<&'static str> {
    // A display name may hold spaces, which no username can: "Quản trị" reads as "quảntrị".
    // And symbols no username can, which NFKC reads as letters: ᴬᴰᴹᴵᴺ, ⓐⓓⓜⓘⓝ.
    let name: String = text.nfc().filter(|c| !c.is_whitespace()).collect();
    let compat: String = text
        .chars()
        .map(letter_lookalike)
        .collect::<String>()
        .nfkc()
        .filter(|c| !c.is_whitespace())
        .collect();
    // And with everything but letters, marks and digits left out, which a display name may
    // put between or after the letters: `A.d.m.i.n`, `Admin!`, `Admin ✔`, `Root™`.
    // (Left out before NFKC, which writes `™` as the letters `TM`.)
    let mapped: String = text.chars().map(letter_lookalike).collect();
    let letters: String = undecorated(&mapped, char::is_alphanumeric, false)
        .nfkc()
        .collect();
    let mut readings = reserved_candidates(&name);
    for reading in [compat, letters] {
        if reading != name {
            readings.extend(reserved_candidates(&reading));
        }
    }
    reserved_word(&readings, |word| !OPEN_TO_DISPLAY_NAMES.contains(&word))
}

/// `text` as spelled, without what dresses it up: only the characters `keep` takes (letters,
/// digits and the like) with their own accents, for meeting names through decoration. Left
/// out: symbols, punctuation, Arabic's stretching stroke (tatweel), and marks that decorate
/// rather than spell ([`spells`]); a mark repeated on one letter counts once. Letters spaced
/// out one by one (`M i n h`) are one word; other words stay apart, one space between them,
/// unless `words_apart` is false.
fn undecorated(text: &str, keep: impl Fn(char) -> bool, words_apart: bool) -> String {
    // Spaces narrower than a word space do not part words: `L\u{200A}an` shows as `Lan`.
    let words: Vec<String> = text
        .split(|c: char| c.is_whitespace() && !is_narrow_space(c))
        .map(|word| spelled(word, &keep))
        .filter(|word| !word.is_empty())
        .collect();
    let letters = |piece: &str| piece.chars().filter(|&c| !is_mark(c)).count();
    // A letter standing alone is no word of its own: `L an`, `Min h` and `M i n h` are one.
    if !words_apart || words.iter().any(|word| letters(word) <= 1) {
        return single_letters_joined(&words.concat());
    }
    let words: Vec<String> = words
        .iter()
        .map(|word| single_letters_joined(word))
        .collect();
    // A separator takes no spaces around it: `Lan - 1` is `Lan-1`.
    let mut joined = String::new();
    for word in &words {
        let glued =
            joined.is_empty() || joined.ends_with(['-', '_']) || word.starts_with(['-', '_']);
        if !glued {
            joined.push(' ');
        }
        joined.push_str(word);
    }
    joined
}

/// Spaces that show narrower than a word space: six-per-em, punctuation, thin, hair, narrow
/// no-break and medium mathematical.
fn is_narrow_space(c: char) -> bool {
    matches!(
        c,
        '\u{2006}' | '\u{2008}' | '\u{2009}' | '\u{200A}' | '\u{202F}' | '\u{205F}'
    )
}

/// `word` without its `-` and `_` when they part single letters (`L-a-n`, `M_i_n_h`, and
/// `M—i—n—h` once the dash reads as `-`): letters spaced out by separators.
fn single_letters_joined(word: &str) -> String {
    let pieces: Vec<&str> = word.split(['-', '_']).filter(|p| !p.is_empty()).collect();
    let single = |piece: &&str| piece.chars().filter(|&c| !is_mark(c)).count() <= 1;
    if pieces.len() > 1 && pieces.iter().all(single) {
        pieces.concat()
    } else {
        word.to_owned()
    }
}

/// One word of [`undecorated`], in NFC.
fn spelled(word: &str, keep: &impl Fn(char) -> bool) -> String {
    let mut out = String::new();
    let mut base = None;
    let mut marks: Vec<char> = Vec::new();
    // A letter's marks go out once the letter is done. More than two accents on one letter is
    // no language's spelling (Vietnamese writes the most, two: `ệ`) but a pile of decoration,
    // which goes as a whole: an outside probe sat as `M̀́̂̃ì́̂̃ǹ́̂̃h̀́̂̃` beside the account Minh.
    let flush = |out: &mut String, marks: &mut Vec<char>| {
        if marks.len() <= 2 || !marks.iter().all(|mark| ACCENTS.contains(mark)) {
            out.extend(marks.iter());
        }
        marks.clear();
    };
    // Decomposed: a precomposed letter's marks are judged like any others (`Ḻ` is `L` and a
    // line below it).
    for c in word.nfd() {
        if is_mark(c) {
            if let Some(base) = base
                && !marks.contains(&c)
                && spells(base, c)
            {
                marks.push(c);
            }
            continue;
        }
        flush(&mut out, &mut marks);
        if c != '\u{0640}' && keep(c) {
            base = Some(c);
            out.push(c);
        } else {
            base = None;
        }
    }
    flush(&mut out, &mut marks);
    out.nfc().collect()
}

/// The combining marks the orthographies of Latin, Greek and Cyrillic letters write: the
/// accents of Vietnamese (circumflex, breve, horn, hook above, dot below and the tones), of the
/// European languages (acute, grave, diaeresis, ring, caron, cedilla, ogonek, double acute,
/// macron, dot above, comma below), and Greek's breathings, perispomeni and iota subscript.
const ACCENTS: [char; 25] = [
    '\u{0300}', '\u{0301}', '\u{0302}', '\u{0303}', '\u{0304}', '\u{0306}', '\u{0307}', '\u{0308}',
    '\u{0309}', '\u{030A}', '\u{030B}', '\u{030C}', '\u{030F}', '\u{0311}', '\u{0313}', '\u{0314}',
    '\u{031B}', '\u{0323}', '\u{0326}', '\u{0327}', '\u{0328}', '\u{0342}', '\u{0343}', '\u{0344}',
    '\u{0345}',
];

/// Whether `mark` on `base` spells a letter rather than decorating it. On a Latin, Greek or
/// Cyrillic letter only [`ACCENTS`] do: an outside probe dressed `Lan` in lines below and
/// above (`L͟a͟n`, `L̠a̠n̠`), zalgo, ties (`L͡an`), Cyrillic's millions sign and Thai, Hebrew and
/// Devanagari marks. On a letter of another script, a mark of that script or of none
/// (Arabic's vowel signs, Hebrew's points, Indic vowel signs), except those of
/// [`is_decoration`].
fn spells(base: char, mark: char) -> bool {
    if is_decoration(mark) {
        return false;
    }
    // A dot above an `i`, a dotless `ı` or a `j` draws the letter's own dot again: `Mı̇nh` is
    // Minh.
    if mark == '\u{0307}' && matches!(base, 'i' | 'ı' | 'j' | 'ȷ') {
        return false;
    }
    // Hebrew's points and Arabic's vowel signs are optional aids to reading, left out of
    // ordinary writing: `דָּוִד` is `דוד`, `مُحَمَّد` is `محمد`.
    if matches!(
        mark,
        '\u{0591}'..='\u{05C7}' | '\u{064B}'..='\u{065F}' | '\u{0670}' | '\u{06D6}'..='\u{06ED}'
    ) {
        return false;
    }
    let own = AugmentedScriptSet::for_char(base);
    let of_script = |sample: char| {
        let mut both = own;
        both.intersect_with(AugmentedScriptSet::for_char(sample));
        !both.is_empty()
    };
    if !own.is_all() && (of_script('a') || of_script('\u{03B1}') || of_script('\u{0430}')) {
        return ACCENTS.contains(&mark);
    }
    let mut both = own;
    both.intersect_with(AugmentedScriptSet::for_char(mark));
    !both.is_empty()
}

/// A combining mark that underlines, overlines or strikes through what it follows, or draws a
/// symbol's frame around it, rather than being part of a letter in any orthography: `T̲u̲a̲n̲` and
/// `T̶u̶a̶n̶` are Tuan, decorated. (A letter's own marks stay: `Tuấn` is not `Tuan`.)
fn is_decoration(c: char) -> bool {
    matches!(
        c,
        '\u{0305}' | '\u{0332}' | '\u{0333}' | '\u{0334}'..='\u{0338}' | '\u{033F}'
    ) || ('\u{20D0}'..='\u{20FF}').contains(&c)
}

fn is_mark(c: char) -> bool {
    c.general_category_group() == GeneralCategoryGroup::Mark
}

/// The letter that a character NFKC leaves alone is drawn as, for display names: the enclosed
/// letters ([`enclosed_letter`]) and the small capitals (`ᴀᴅᴍɪɴ`, `ᴍɪɴʜ`), which outside probes
/// sat down as.
fn letter_lookalike(ch: char) -> char {
    match ch {
        '\u{1D00}' => 'a',
        '\u{0299}' => 'b',
        '\u{1D04}' => 'c',
        '\u{1D05}' => 'd',
        '\u{1D07}' => 'e',
        '\u{A730}' => 'f',
        '\u{0262}' => 'g',
        '\u{029C}' => 'h',
        '\u{026A}' => 'i',
        '\u{1D0A}' => 'j',
        '\u{1D0B}' => 'k',
        '\u{029F}' => 'l',
        '\u{1D0D}' => 'm',
        '\u{0274}' => 'n',
        '\u{1D0F}' => 'o',
        '\u{1D18}' => 'p',
        '\u{A7AF}' => 'q',
        '\u{0280}' => 'r',
        '\u{A731}' => 's',
        '\u{1D1B}' => 't',
        '\u{1D1C}' => 'u',
        '\u{1D20}' => 'v',
        '\u{1D21}' => 'w',
        '\u{028F}' => 'y',
        '\u{1D22}' => 'z',
        other => enclosed_letter(other),
    }
}

/// The capital letter that an enclosed letter NFKC leaves alone is drawn as: the negative
/// circled and negative squared letters (`🅰🅳🅼🅸🅽`) and the regional indicators, which show as
/// letters outside a flag's pair (an outside probe sat down as the first).
fn enclosed_letter(ch: char) -> char {
    let code = u32::from(ch);
    let letter = match code {
        0x1F150..=0x1F169 => code - 0x1F150,
        0x1F170..=0x1F189 => code - 0x1F170,
        0x1F1E6..=0x1F1FF => code - 0x1F1E6,
        _ => return ch,
    };
    char::from_u32(u32::from('A') + letter).unwrap_or(ch)
}

/// The first reserved word (among those `eligible`) that a group of forms reads as, the groups
/// in order: the name as written before its disguises undone, so that `Ô_Ăn_Quan` is refused
/// as `ôănquan` rather than as the `oanquan` it also reads as without its accents.
fn reserved_word(
    readings: &[Reading],
    eligible: impl Fn(&'static str) -> bool,
) -> Option<&'static str> {
    readings.iter().find_map(|reading| {
        let eligible = |word: &&'static str| eligible(word) && reading.may_read_as(word);
        RESERVED_FORMS
            .iter()
            .filter(|(word, _)| eligible(word))
            .find(|(_, reserved)| reading.forms.iter().any(|form| reserved.contains(form)))
            .map(|(word, _)| *word)
            .or_else(|| {
                // The service's name also at the start of a longer one: `OanquanAdmin`,
                // `Oanquan_Team`, `Ô Ăn Quan Team` (outside probes registered or sat as each).
                SERVICE_FORMS
                    .iter()
                    .filter(|(word, _)| eligible(word))
                    .find(|(_, service)| {
                        reading
                            .forms
                            .iter()
                            .any(|form| service.iter().any(|s| form.starts_with(s.as_str())))
                    })
                    .map(|(word, _)| *word)
            })
    })
}

/// The service's name, with and without its accents, as [`RESERVED_FORMS`] holds it.
static SERVICE_FORMS: LazyLock<Vec<(&'static str, [String; 2])>> = LazyLock::new(|| {
    RESERVED_FORMS
        .iter()
        .filter(|(word, _)| ["oanquan", "ôănquan"].contains(word))
        .cloned()
        .collect()
});

/// Reserved words that are Vietnamese written without its accents: with accents they are
/// other words (`Quân Trí` is two given names, not `quantri`), so a name's unaccented reading
/// is not compared with them.
const VIETNAMESE_UNACCENTED: &[&str] = &["quantri", "hethong", "hotro"];

/// Whether a name with accents added may read as `word` once its accents are taken off: the
/// staff words of languages written without Vietnamese's accents (`Admín` is `admin`), which
/// are the reserved words in ASCII less the Vietnamese ones and those open to display names.
fn is_unaccented_staff_word(word: &str) -> bool {
    word.is_ascii()
        && !VIETNAMESE_UNACCENTED.contains(&word)
        && !OPEN_TO_DISPLAY_NAMES.contains(&word)
}

/// One reading of a name, as [`reserved_candidates`] makes them: the forms it is compared by,
/// and which reserved words it may be taken for.
struct Reading {
    forms: Vec<String>,
    /// Digits and signs read as letters: staff words only, since a tag like `Bo7` poses as no
    /// one.
    leet: bool,
    /// Accents taken off: staff words only ([`is_unaccented_staff_word`]).
    unaccented: bool,
}

impl Reading {
    fn may_read_as(&self, word: &str) -> bool {
        let open = OPEN_TO_DISPLAY_NAMES.contains(&word);
        let staff_unaccented = is_unaccented_staff_word(word);
        (!self.leet || !open) && (!self.unaccented || staff_unaccented)
    }
}

/// An account's username: valid by the rules of the [module](self), in NFC, as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Username {
    name: String,
    key: String,
}

impl Username {
    /// Checks a username as the client sent it.
    ///
    /// # Errors
    ///
    /// A [`UsernameError`] saying what is refused and why; it converts into
    /// [`GameError::InvalidArgument`] on [`USERNAME_FIELD`].
    pub fn parse(text: &str) -> Result<Username, UsernameError> {
        if text.is_empty() {
            return Err(UsernameError::TooShort { chars: 0 });
        }
        let raw_chars = text.chars().count();
        if raw_chars > MAX_INPUT_CHARS {
            return Err(UsernameError::TooLong { chars: raw_chars });
        }
        if text.starts_with(char::is_whitespace) || text.ends_with(char::is_whitespace) {
            return Err(UsernameError::SurroundingWhitespace);
        }
        // Before NFC, which keeps them, so that the message names what was typed.
        if let Some(ch) = text.chars().find(|&c| is_invisible(c)) {
            return Err(UsernameError::Invisible { ch });
        }
        let name: String = text.nfc().collect();
        let chars = name.chars().count();
        if chars < MIN_USERNAME_CHARS {
            return Err(UsernameError::TooShort { chars });
        }
        if chars > MAX_USERNAME_CHARS {
            return Err(UsernameError::TooLong { chars });
        }
        check_characters(&name)?;
        check_separators(&name)?;
        check_scripts(&name)?;
        if let Some(word) = reserved_word(&reserved_candidates(&name), |_| true) {
            return Err(UsernameError::Reserved { word });
        }
        let key = key_of(&name);
        Ok(Username { name, key })
    }

    /// The name as the user wrote it, in NFC.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// The uniqueness key: equal for names that differ only in case or by look-alike characters
    /// (see the [module](self)). Opaque; store it in a unique column, never show it.
    #[must_use]
    pub fn key(&self) -> String {
        self.key.clone()
    }

    /// The key of what this name looks like as written, capitals and all, when that is not its
    /// own key: Cyrillic `ТОМ` reads as Latin `TOM`, `Ian` (capital i) as `lan`, which the key
    /// (folded to small letters first) cannot see. See [`Username::look`].
    /// What the name looks like, keyed: its `capital_alias`, or its key when it
    /// has none. Two names whose keys or looks meet look alike (see the [module](self)): a store
    /// keeps it beside the key, so that an older `ТОМ` stops a new `TOM` as well.
    /// A name with right-to-left letters looks like what a screen shows: its look is taken in
    /// that order ([`shown_look`]).
    #[must_use]
    pub fn look(&self) -> String {
        shown_look(&self.name)
            .or_else(|| self.capital_alias())
            .unwrap_or_else(|| self.key.clone())
    }

    fn capital_alias(&self) -> Option<String> {
        let alias = look_of(&self.name);
        (alias != self.key).then_some(alias)
    }

    /// The keys by which this name meets a registered one: its key, its look where that
    /// differs, and its [`look_read_as_i`] where that differs from both ([`keys_of_text`] for
    /// a valid name).
    #[must_use]
    pub fn keys(&self) -> Vec<String> {
        let mut keys = vec![self.key.clone()];
        keys.extend(shown_look(&self.name));
        keys.extend(self.capital_alias());
        let read_as_i = look_read_as_i(&self.name);
        if !keys.contains(&read_as_i) {
            keys.push(read_as_i);
        }
        keys
    }
}

/// What starts a look taken in the order a screen shows a name ([`shown_look`]): such a look
/// meets only looks taken so, never a key or a look in the order typed. For a right-to-left
/// name those are other words: `שרה` typed is `הרש` shown, and `הרש` is a name of its own. No
/// key holds it (names hold no controls).
const SHOWN: char = '\u{1}';

/// The look of `name` in the order a left-to-right screen shows it, when that is not the order
/// typed: digits and other neutral characters take their places around right-to-left letters
/// by the bidirectional algorithm, so `שרה7` and `7שרה`, two names as typed, are the same on
/// screen (an outside probe registered both).
fn shown_look(name: &str) -> Option<String> {
    let info = unicode_bidi::ParagraphBidiInfo::new(name, Some(unicode_bidi::Level::ltr()));
    if !info.has_rtl() {
        return None;
    }
    let shown = info.reorder_line(0..name.len());
    Some(format!("{SHOWN}{}", look_of(&shown)))
}

/// The key of what an NFC `name` looks like as written, capitals and all (see
/// [`Username::look`]).
fn look_of(name: &str) -> String {
    let written: String = skeleton(name).collect::<String>().nfc().collect();
    key_of(&written)
}

/// `name` with every character that looks like `I` read as `i`: all that the skeleton writes
/// as `l` (capital `I`, Greek `Ι`, Cyrillic `І` and `ӏ`, Lisu `ꓲ`, `ǀ`, `1`, `|`, small `l`).
/// The skeleton's `l` met neither a name's key nor its look when the name had an `i`: Greek
/// `ΜΙΝΗ` (look `mlnh`) passed beside `Minh`, and so did `MꓲNH` and `lris` beside `Iris`.
fn i_read(name: &str) -> String {
    let mut previous: Option<char> = None;
    name.chars()
        .map(|ch| {
            // A small letter after a small letter is no capital I: `Hal` is not `Hai` (an
            // outside probe found Hal, Sal, Mal and Khal refused beside Hai, Sai, Mai and
            // Khai). Where a capital could stand (first, or after a capital) it may be one:
            // `lris`, `MlNH`, Cyrillic `КӏМ`.
            let after_small = previous.is_some_and(|p| p.is_alphabetic() && !p.is_uppercase());
            let reads_as_i = skeleton(ch.encode_utf8(&mut [0; 4])).eq(std::iter::once('l'))
                && !(ch.is_lowercase() && after_small);
            if !is_mark(ch) {
                previous = Some(ch);
            }
            if reads_as_i { 'i' } else { ch }
        })
        .collect()
}

/// The key of `name` as written with what looks like `I` read as `i` ([`i_read`], then
/// [`look_of`]). Not stored: a store keeps the key and the look, and a new name is checked by
/// this too (`Ian` and `lan` still meet by their looks; `Lan` is not read as `Ian`, its `L`
/// not looking like `I`).
fn look_read_as_i(name: &str) -> String {
    look_of(&i_read(name))
}

/// The keys by which any text, not only a valid username, meets a registered name: its key and
/// that of its look, as [`Username::key`] and [`Username::look`] compute them. For display
/// names, which may be what no username can (spaces, mixed scripts), and must still not pass
/// for an account's name.
#[must_use]
pub fn keys_of_text(text: &str) -> Vec<String> {
    let name: String = text.nfc().collect();
    // Also as compatibility forms and with the dashes and low lines that the confusable data
    // leaves alone read as `-` and `_`: a display name may hold what no username can, and an
    // outside probe posed as "Lan-1" with a fullwidth hyphen and as "lbA_01" with U+02CD.
    let plain: String = text
        .chars()
        .map(|c| letter_lookalike(separator_lookalike(c)))
        .collect::<String>()
        .nfkc()
        .collect();
    // And with only what a username may hold, as staff words are read: `Minh ✔`, `Minh™`,
    // `M i n h` and `M.i.n.h` are Minh, dressed up (an outside probe sat as each beside the
    // account). Symbols are left out before NFKC, which writes `™` as the letters `TM`.
    // Words stay apart: `Lan Anh` is a name of its own, not the account LanAnh (which anyone
    // could register to keep people of that name out).
    let mapped: String = text
        .chars()
        .map(|c| letter_lookalike(separator_lookalike(c)))
        .collect();
    let letters: String = undecorated(
        &mapped,
        |c| c.is_alphanumeric() || c == '-' || c == '_',
        true,
    )
    .nfkc()
    .collect();
    let letters = letters.trim_matches(['-', '_']).to_owned();
    // And without flags, which read as letters above (`🇱🇦🇳` is LAN) but beside a name are
    // decoration: `Minh 🇻🇳` is Minh (an outside probe sat as it beside the account).
    let unflagged: String = undecorated(
        &text
            .chars()
            .filter(|&c| !is_regional_indicator(c))
            .map(|c| letter_lookalike(separator_lookalike(c)))
            .collect::<String>(),
        |c| c.is_alphanumeric() || c == '-' || c == '_',
        true,
    )
    .nfkc()
    .collect();
    let unflagged = unflagged.trim_matches(['-', '_']).to_owned();
    let mut keys = Vec::with_capacity(2);
    for name in [&name, &plain, &letters, &unflagged] {
        if name.is_empty() {
            continue;
        }
        let shown = shown_look(name);
        for key in [key_of(name), look_of(name), look_read_as_i(name)]
            .into_iter()
            .chain(shown)
        {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys
}

/// A regional indicator symbol: two of them make a flag.
fn is_regional_indicator(ch: char) -> bool {
    ('\u{1F1E6}'..='\u{1F1FF}').contains(&ch)
}

/// `-` or `_` for a character drawn as one in common fonts that neither NFKC nor UTS #39's
/// confusables map to it; any other character as it is.
fn separator_lookalike(ch: char) -> char {
    match ch {
        // Em and horizontal bars, box-drawing lines, the two- and three-em dashes, the
        // fullwidth hyphen-minus, the Canadian syllabics hyphen.
        '\u{2014}' | '\u{2015}' | '\u{23AF}' | '\u{2500}' | '\u{2501}' | '\u{2E3A}'
        | '\u{2E3B}' | '\u{FF0D}' | '\u{1400}' => '-',
        // Letters drawn as a plain stroke, which a probe put between Latin letters: Japanese's
        // long-vowel mark (full and half width), CJK one and its Kangxi radical.
        '\u{30FC}' | '\u{FF70}' | '\u{4E00}' | '\u{2F00}' => '-',
        // Modifier letter low macron, double low line.
        '\u{02CD}' | '\u{2017}' => '_',
        ch => ch,
    }
}

impl fmt::Display for Username {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl AsRef<str> for Username {
    fn as_ref(&self) -> &str {
        &self.name
    }
}

impl FromStr for Username {
    type Err = UsernameError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Username::parse(text)
    }
}

/// Why a username is refused. The [`Display`](fmt::Display) text says what and why; characters
/// are shown escaped (with [`quoted`]) and by code point, never raw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsernameError {
    /// Fewer than [`MIN_USERNAME_CHARS`] characters after NFC (0 for empty input).
    TooShort {
        /// Characters after NFC.
        chars: usize,
    },
    /// More than [`MAX_USERNAME_CHARS`] characters after NFC, or more than four times that as
    /// sent (then counted as sent).
    TooLong {
        /// Characters counted.
        chars: usize,
    },
    /// White space at the start or end: refused, not trimmed.
    SurroundingWhitespace,
    /// A control, format or other invisible character (zero-width, bidi, joiner, filler…).
    Invisible {
        /// The first one.
        ch: char,
    },
    /// A visible character that a username may not contain.
    NotAllowed {
        /// The first one, after NFC.
        ch: char,
        /// Which rule refuses it.
        reason: NotAllowedReason,
    },
    /// A combining mark that NFC did not join to the letter before it, or one with no letter
    /// before it.
    CombiningMark {
        /// The mark.
        ch: char,
    },
    /// The same combining mark twice in a row, or more than four marks in a row.
    StackedMarks {
        /// The mark that goes too far.
        ch: char,
    },
    /// `_` or `-` first or last.
    SeparatorAtEdge {
        /// The separator.
        ch: char,
    },
    /// `_` or `-` right after `_` or `-`.
    DoubledSeparator {
        /// The first of the two.
        first: char,
        /// The second.
        second: char,
    },
    /// Letters of two scripts that are not both look-alikes.
    MixedScripts {
        /// A letter before `ch` that set the name's script.
        first: char,
        /// The script(s) of the name up to `ch`.
        name_script: String,
        /// The letter of another script.
        ch: char,
        /// Its script(s).
        script: String,
    },
    /// A letter of another script that looks like a letter of the name's own script: the
    /// classic homograph ("pаypal" with a Cyrillic `а`).
    LooksLikeOtherScript {
        /// The borrowed letter.
        ch: char,
        /// Its script(s).
        script: String,
        /// What it passes for (its confusable skeleton).
        looks_like: String,
        /// The script(s) of the rest of the name.
        name_script: String,
    },
    /// One of [`reserved_usernames`], perhaps in disguise.
    Reserved {
        /// The reserved name it matches.
        word: &'static str,
    },
}

/// Which rule refuses a visible character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAllowedReason {
    /// A space inside the name.
    Space,
    /// A compatibility form (fullwidth, ligature, superscript, circled…) of plainer text.
    Compatibility {
        /// Its NFKC form: what to type instead.
        plain: String,
    },
    /// A decimal digit other than ASCII `0-9`.
    Digit,
    /// A dash or connector other than ASCII `-` and `_`.
    Dash,
    /// A letter that UTS #39 does not allow in identifiers.
    RestrictedLetter,
    /// A letter whose look-alike is punctuation.
    PunctuationLike {
        /// The punctuation it looks like.
        looks_like: String,
    },
    /// A combining mark that UTS #39 does not allow in identifiers.
    RestrictedMark,
    /// Punctuation, a symbol, an emoji or another non-letter.
    Symbol,
}

impl UsernameError {
    /// The request field these errors are about: [`USERNAME_FIELD`].
    #[must_use]
    pub fn field(&self) -> &'static str {
        USERNAME_FIELD
    }
}

impl From<UsernameError> for GameError {
    fn from(err: UsernameError) -> GameError {
        GameError::invalid(err.field(), err.to_string())
    }
}

impl std::error::Error for UsernameError {}

impl fmt::Display for UsernameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsernameError::TooShort { chars } => write!(
                f,
                "too short ({}): a username has {MIN_USERNAME_CHARS} to {MAX_USERNAME_CHARS} \
                 characters (letters, digits, _ and -)",
                characters(*chars)
            ),
            UsernameError::TooLong { chars } => write!(
                f,
                "too long ({}): a username has {MIN_USERNAME_CHARS} to {MAX_USERNAME_CHARS} \
                 characters (letters, digits, _ and -)",
                characters(*chars)
            ),
            UsernameError::SurroundingWhitespace => f.write_str(
                "starts or ends with white space; usernames are not trimmed and contain no \
                 spaces, so remove it",
            ),
            UsernameError::Invisible { ch } => write!(
                f,
                "contains the invisible or control character {}; zero-width, joiner, \
                 bidirectional, filler, variation and control characters could hide or reorder \
                 letters on other players' screens",
                shown(*ch)
            ),
            UsernameError::NotAllowed { ch, reason } => {
                write!(f, "{} is not allowed: ", shown(*ch))?;
                match reason {
                    NotAllowedReason::Space => {
                        f.write_str("a username has no spaces; join words with _ or -")
                    }
                    NotAllowedReason::Compatibility { plain } => write!(
                        f,
                        "it is a compatibility form (fullwidth, ligature, superscript, circled \
                         or similar) of {plain}, which looks the same; type {plain} instead",
                        plain = quoted(plain)
                    ),
                    NotAllowedReason::Digit => f.write_str(
                        "only the digits 0-9 are allowed; digits of other numbering systems \
                         look like other digits or letters",
                    ),
                    NotAllowedReason::Dash => f.write_str(
                        "only the ASCII hyphen-minus - and underscore _ join words; other \
                         dashes and connectors look the same but are different characters",
                    ),
                    NotAllowedReason::RestrictedLetter => f.write_str(
                        "Unicode does not recommend this letter for identifiers (UTS #39: a \
                         letter of a historic or limited-use script, or a phonetic or technical \
                         letter that imitates an ordinary one)",
                    ),
                    NotAllowedReason::PunctuationLike { looks_like } => write!(
                        f,
                        "this letter looks like the punctuation {}, which usernames do not \
                         contain",
                        quoted(looks_like)
                    ),
                    NotAllowedReason::RestrictedMark => f.write_str(
                        "Unicode does not recommend this mark for identifiers (UTS #39)",
                    ),
                    NotAllowedReason::Symbol => f.write_str(
                        "a username has only letters, digits 0-9, _ and -: no punctuation, \
                         symbols or emoji",
                    ),
                }
            }
            UsernameError::CombiningMark { ch } => write!(
                f,
                "{} is a combining mark that does not form one character with the letter \
                 before it (Unicode NFC); type the accented letter itself (Vietnamese letters \
                 such as ư, ơ and ệ are single characters). Loose marks can be stacked or fake \
                 other letters",
                shown(*ch)
            ),
            UsernameError::StackedMarks { ch } => write!(
                f,
                "{} repeats the mark before it or makes more than {MAX_MARKS_IN_A_ROW} marks in \
                 a row; stacked marks can hide or fake letters",
                shown(*ch)
            ),
            UsernameError::SeparatorAtEdge { ch } => write!(
                f,
                "starts or ends with {}; _ and - may only join letters or digits, at the edges \
                 they are easily missed",
                quoted(&ch.to_string())
            ),
            UsernameError::DoubledSeparator { first, second } => write!(
                f,
                "has {} with nothing between; _ and - may not follow each other, since names \
                 like a__b and a_b are hard to tell apart",
                quoted(&format!("{first}{second}"))
            ),
            UsernameError::MixedScripts {
                first,
                name_script,
                ch,
                script,
            } => write!(
                f,
                "mixes scripts: {} is {script} but {} before it is {name_script}; use the \
                 letters of one script (digits, _ and - go with any)",
                shown(*ch),
                quoted(&first.to_string())
            ),
            UsernameError::LooksLikeOtherScript {
                ch,
                script,
                looks_like,
                name_script,
            } => write!(
                f,
                "{} is a {script} letter that looks like the {name_script} {} in a \
                 {name_script} name, so the name would pass for another; type the \
                 {name_script} letter",
                shown(*ch),
                quoted(looks_like)
            ),
            UsernameError::Reserved { word } => write!(
                f,
                "is reserved: it is, or looks like, {}, a name of the service, its staff or its \
                 computer player",
                quoted(word)
            ),
        }
    }
}

/// "1 character", "5 characters".
fn characters(n: usize) -> String {
    if n == 1 {
        "1 character".to_owned()
    } else {
        format!("{n} characters")
    }
}

/// A character as a message shows it: quoted and by code point, or by code point alone when it
/// is invisible, since `quoted` escapes control and format characters but not every filler.
fn shown(ch: char) -> String {
    if is_invisible(ch) {
        format!("U+{:04X}", u32::from(ch))
    } else {
        format!("{} (U+{:04X})", quoted(&ch.to_string()), u32::from(ch))
    }
}

/// The NFKC form of a character when it differs: what a compatibility form stands for.
fn compatibility_form(ch: char) -> Option<String> {
    let plain: String = std::iter::once(ch).nfkc().collect();
    (plain != ch.to_string()).then_some(plain)
}

/// Whether a script set names Latin, Greek or Cyrillic, whose accented letters all have
/// precomposed forms in NFC.
fn has_precomposing_script(set: &AugmentedScriptSet) -> bool {
    !set.is_all()
        && set
            .base
            .iter()
            .any(|script| matches!(script.short_name(), "Latn" | "Grek" | "Cyrl"))
}

/// Rules 4 and 5 of the module: each character, and combining marks in their place.
fn check_characters(name: &str) -> Result<(), UsernameError> {
    let refuse = |ch, reason| Err(UsernameError::NotAllowed { ch, reason });
    let mut after_letter_or_mark = false;
    let mut marks_in_a_row = 0;
    let mut previous = None;
    for ch in name.chars() {
        let is_mark = if ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' {
            false
        } else if ch.is_whitespace() {
            return refuse(ch, NotAllowedReason::Space);
        } else if let Some(plain) = compatibility_form(ch) {
            return refuse(ch, NotAllowedReason::Compatibility { plain });
        } else {
            match ch.general_category_group() {
                GeneralCategoryGroup::Letter => {
                    if !ch.identifier_allowed() {
                        return refuse(ch, NotAllowedReason::RestrictedLetter);
                    }
                    let looks_like: String = skeleton(ch.encode_utf8(&mut [0; 4])).collect();
                    if looks_like
                        .chars()
                        .any(|c| c.is_ascii() && !c.is_ascii_alphanumeric())
                    {
                        return refuse(ch, NotAllowedReason::PunctuationLike { looks_like });
                    }
                    false
                }
                GeneralCategoryGroup::Mark => {
                    if !ch.identifier_allowed() {
                        return refuse(ch, NotAllowedReason::RestrictedMark);
                    }
                    let set = AugmentedScriptSet::for_char(ch);
                    if !after_letter_or_mark || set.is_all() || has_precomposing_script(&set) {
                        return Err(UsernameError::CombiningMark { ch });
                    }
                    if previous == Some(ch) || marks_in_a_row == MAX_MARKS_IN_A_ROW {
                        return Err(UsernameError::StackedMarks { ch });
                    }
                    true
                }
                GeneralCategoryGroup::Number
                    if ch.general_category() == GeneralCategory::DecimalNumber =>
                {
                    return refuse(ch, NotAllowedReason::Digit);
                }
                GeneralCategoryGroup::Punctuation
                    if matches!(
                        ch.general_category(),
                        GeneralCategory::DashPunctuation | GeneralCategory::ConnectorPunctuation
                    ) =>
                {
                    return refuse(ch, NotAllowedReason::Dash);
                }
                _ => return refuse(ch, NotAllowedReason::Symbol),
            }
        };
        marks_in_a_row = if is_mark { marks_in_a_row + 1 } else { 0 };
        after_letter_or_mark = is_mark || (ch != '_' && ch != '-' && !ch.is_ascii_digit());
        previous = Some(ch);
    }
    Ok(())
}

fn is_separator(ch: char) -> bool {
    ch == '_' || ch == '-'
}

/// `_` and `-`: not first, not last, not twice in a row.
fn check_separators(name: &str) -> Result<(), UsernameError> {
    let mut chars = name.chars().peekable();
    if let Some(&ch) = chars.peek().filter(|&&c| is_separator(c)) {
        return Err(UsernameError::SeparatorAtEdge { ch });
    }
    if let Some(ch) = name.chars().next_back().filter(|&c| is_separator(c)) {
        return Err(UsernameError::SeparatorAtEdge { ch });
    }
    while let Some(first) = chars.next() {
        if let Some(&second) = chars.peek() {
            if is_separator(first) && is_separator(second) {
                return Err(UsernameError::DoubledSeparator { first, second });
            }
        }
    }
    Ok(())
}

/// A script set as people name it: "Latin", "Cyrillic", "Japanese".
fn script_name(set: &AugmentedScriptSet) -> String {
    let names: Vec<&str> = set.base.iter().map(|script| script.full_name()).collect();
    if !set.is_all() && !names.is_empty() {
        names.join(" or ")
    } else if set.jpan {
        "Japanese".to_owned()
    } else if set.kore {
        "Korean".to_owned()
    } else if set.hanb {
        "Chinese".to_owned()
    } else {
        "of no script".to_owned()
    }
}

/// One script per name (UTS #39 resolved script set, augmented for Japanese and Korean).
fn check_scripts(name: &str) -> Result<(), UsernameError> {
    let mut set = AugmentedScriptSet::default();
    let mut first = None;
    for ch in name.chars() {
        let own = AugmentedScriptSet::for_char(ch);
        if own.is_all() {
            continue;
        }
        let mut next = set;
        next.intersect_with(own);
        if next.is_empty() {
            let name_script = script_name(&set);
            let script = script_name(&own);
            let looks_like: String = skeleton(ch.encode_utf8(&mut [0; 4])).collect();
            let mut in_name_script = AugmentedScriptSet::for_str(&looks_like);
            in_name_script.intersect_with(set);
            return Err(
                if looks_like != ch.to_string() && !in_name_script.is_empty() {
                    UsernameError::LooksLikeOtherScript {
                        ch,
                        script,
                        looks_like,
                        name_script,
                    }
                } else {
                    UsernameError::MixedScripts {
                        first: first.unwrap_or(ch),
                        name_script,
                        ch,
                        script,
                    }
                },
            );
        }
        first.get_or_insert(ch);
        set = next;
    }
    Ok(())
}

/// Full case folding: each character's lowercase of its uppercase, which takes `ß` to `ss` and
/// final `ς` to `σ`. Repeated by [`key_of`] until stable, which also takes `ẞ` (its own
/// uppercase) through `ß` to `ss`.
fn fold(text: &str) -> String {
    text.chars()
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .collect()
}

/// Capitals that look like Vietnamese `Đ` while their small letters do not look like `đ`: the
/// lower-case skeleton would miss them.
///
/// Also Turkish `İ`, the capital of `i`: its default small letter is `i` with a combining dot
/// above, which the skeleton keeps, so `İstan` would not meet `istan`.
fn capital_lookalike(ch: char) -> char {
    match ch {
        'Ð' | 'ð' | 'Ɖ' | 'ɖ' => 'đ',
        'İ' => 'i',
        other => other,
    }
}

/// Small Latin letters that pairs of others imitate, written as the pair, as the skeleton
/// writes `m` as `rn`. Unicode's confusables list `d`/`cl` and `w`/`vv` too, but the
/// `unicode-security` crate's data does not carry them: an outside probe registered `cl_x`
/// beside `d_x` and `vv_x` beside `w_x`.
fn pair_lookalikes(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    for ch in text.chars() {
        match ch {
            'd' => out.push_str("cl"),
            'w' => out.push_str("vv"),
            other => out.push(other),
        }
    }
    out
}

/// The uniqueness key of an NFC name: folded, then skeleton and fold until stable.
fn key_of(name: &str) -> String {
    let mut key: String = name.chars().map(capital_lookalike).collect();
    key = fold(&key);
    for _ in 0..MAX_KEY_ROUNDS {
        let next = fold(&pair_lookalikes(&skeleton(&key).collect::<String>()));
        if next == key {
            break;
        }
        key = next;
    }
    key
}

/// What a name is compared with the reserved names by, in groups (see [`reserved_word`]): its [`reserved_form`], and its key
/// with the digits around it kept (which the key reads as letters: `NUL1` as `null`); each
/// also with small `l` read as `i` (`ADMlN` in capitals reads `ADMIN`, which the key, folded
/// to small letters first, cannot see) and without a trailing `l` (`adminl` reads as
/// `admin1`, which is `admin` with a digit).
///
/// The second group, if any, is read with the digits and signs that stand for letters read as
/// those letters (`4dmin`, `5upp0rt`), which the confusable skeletons do not map (an outside
/// probe registered `4dmin`); [`reserved_word`] holds it to the staff words only, since a tag
/// like `Bo7` is not posing as anyone. A name with accents is also read without them, and that
/// reading compared with the staff words of languages written without Vietnamese's accents
/// only ([`is_unaccented_staff_word`]): in Vietnamese the accents make the word (`Quân Trí` is
/// two given names, `Bột` a nickname, not `quantri` and `bot`), but `Admín` is `admin`.
fn reserved_candidates(name: &str) -> Vec<Reading> {
    let unaccented = without_accents(name);
    // Also as written, capitals and all, with what looks like `I` read as `i`: Greek `ΑDΜΙΝ`
    // and `ΒΟΤ` look like `ADMIN` and `BOT`, which their keys, folded to small letters first
    // (`αdμιν`), do not. Read as `i`, not as the skeleton's `l`, which the trailing `l` rule
    // below would drop: `MODI` read `mod`.
    let written: String = skeleton(&i_read(name)).collect::<String>().nfc().collect();
    let mut variants = vec![
        (name.to_owned(), false, false),
        (leet_read(name), true, false),
        (written, false, false),
    ];
    if unaccented != name {
        variants.push((leet_read(&unaccented), true, true));
        variants.push((unaccented, false, true));
    }
    variants
        .into_iter()
        .map(|(variant, leet, unaccented)| {
            let joined: String = variant.chars().filter(|&c| !is_separator(c)).collect();
            let mut forms = Vec::with_capacity(8);
            for base in [reserved_form(&variant), key_of(&joined)] {
                let trimmed = base.trim_end_matches('l').to_owned();
                forms.push(base.replace('l', "i"));
                forms.push(trimmed.replace('l', "i"));
                forms.push(trimmed);
                forms.push(base);
            }
            Reading {
                forms,
                leet,
                unaccented,
            }
        })
        .collect()
}

/// `name` with its combining marks taken off (after canonical decomposition) and `đ` read as
/// `d`: `Admín` as `Admin`, `ṡtaff` as `staff`.
fn without_accents(name: &str) -> String {
    name.nfd()
        .filter(|&c| !is_mark(c))
        .map(|c| match c {
            'đ' => 'd',
            'Đ' => 'D',
            other => other,
        })
        .nfc()
        .collect()
}

/// `name` with the digits and signs that stand for letters in "leet" read as letters; `0` and
/// `1` are the skeletons' already (`o`, `l`).
fn leet_read(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '4' | '@' => 'a',
            '3' => 'e',
            '5' | '$' => 's',
            '7' => 't',
            '8' => 'b',
            other => other,
        })
        .collect()
}

/// What reserved names are compared by: the key without digits, `_` and `-` around the name
/// and without `_` and `-` inside it.
fn reserved_form(name: &str) -> String {
    let core: String = name
        .trim_matches(|c: char| c.is_ascii_digit() || is_separator(c))
        .chars()
        .filter(|&c| !is_separator(c))
        .collect();
    key_of(&core)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use proptest::prelude::*;

    use super::*;

    fn ok(text: &str) -> Username {
        Username::parse(text).unwrap_or_else(|err| panic!("{text:?} refused: {err}"))
    }

    /// A display name that an outside probe got past the check for `account`'s name.
    #[test]
    fn display_names_with_dashes_and_low_lines_the_confusables_miss_meet_the_account() {
        for (account, display) in [
            ("Lan-1", "Lan\u{FF0D}1"),
            ("Lan-1", "Lan\u{2014}1"),
            ("Lan-1", "Lan\u{2500}1"),
            ("lbA_01", "lbA\u{02CD}01"),
            ("lbA_01", "lbA\u{2017}01"),
            ("Lan-1", "ＬＡＮ-１"),
            // A second probe's: enclosed letters and small capitals.
            ("Minh", "🅼🅸🅽🅷"),
            ("Minh", "🅜🅘🅝🅗"),
            ("Minh", "🇲🇮🇳🇭"),
            ("Minh", "🅼\u{fe0f}🅸\u{fe0f}🅽\u{fe0f}🅷\u{fe0f}"),
            ("Minh", "\u{1d0d}\u{26a}\u{274}\u{29c}"),
            ("Lan", "🅻🅰🅽"),
            // A third probe's: Greek and Cyrillic capitals, read as capitals.
            ("Minh", "\u{39c}INH"),
            ("Minh", "\u{39c}\u{399}\u{39d}\u{397}"),
            ("Minh", "\u{41c}\u{406}N\u{41d}"),
            // A fourth's: other letters that look like `I`, and `l`, `1`, `|` for it.
            ("Minh", "M\u{a4f2}NH"),
            ("Minh", "M\u{1c0}NH"),
            ("Minh", "M\u{2d4f}NH"),
            ("Minh", "M\u{16c1}NH"),
            ("Minh", "M\u{4cf}NH"),
            ("Minh", "MlNH"),
            ("Iris", "lris"),
            ("Iris", "1ris"),
            ("Iris", "|ris"),
            ("Ali", "AL1"),
        ] {
            let keys = ok(account).keys();
            assert!(
                keys_of_text(display).iter().any(|k| keys.contains(k)),
                "{display:?} passes for {account}"
            );
        }
        // A name with neither still has the keys of its own.
        assert_eq!(keys_of_text("Lan"), ok("Lan").keys());
    }

    #[test]
    fn display_names_dressed_up_with_symbols_or_spaces_meet_the_account() {
        for (account, display) in [
            ("Minh", "Minh \u{2714}"),
            ("Minh", "Minh\u{2122}"),
            ("Minh", "M i n h"),
            ("Minh", "M.i.n.h"),
            ("Minh", "\u{2605}Minh\u{2605}"),
            ("Minh", "Minh!"),
            ("Minh", "_Minh_"),
            ("Lan-1", "Lan - 1"),
            ("Ngọc", "Ngọc \u{1F451}"),
            // Underlined, struck through, overlined, framed.
            ("Tuan", "T\u{332}u\u{332}a\u{332}n\u{332}"),
            ("Tuan", "T\u{336}u\u{336}a\u{336}n\u{336}"),
            ("Tuan", "T\u{305}u\u{305}a\u{305}n\u{305}"),
            ("Tuan", "T\u{20DD}uan"),
            // A second probe's: lines below and above, zalgo, ties, ligature halves, other
            // scripts' marks on Latin letters, the tatweel.
            ("Lan", "L\u{35F}a\u{35F}n"),
            ("Lan", "L\u{331}a\u{331}n\u{331}"),
            ("Lan", "L\u{320}a\u{320}n\u{320}"),
            ("Lan", "L\u{347}a\u{347}n\u{347}"),
            ("Lan", "L\u{35E}a\u{35E}n"),
            ("Lan", "L\u{346}a\u{346}n"),
            ("Lan", "L\u{324}a\u{330}n\u{325}\u{317}"),
            ("Lan", "L\u{489}a\u{489}n\u{489}"),
            ("Lan", "L\u{361}an"),
            ("Lan", "L\u{FE20}a\u{FE21}n"),
            ("Lan", "Lan\u{5BF}"),
            ("Lan", "Lan\u{E31}"),
            ("Lan", "Lan\u{93C}"),
            ("Lan", "L\u{F35}an"),
            ("Lan", "Lan\u{640}"),
            (
                "\u{645}\u{62D}\u{645}\u{62F}",
                "\u{645}\u{62D}\u{640}\u{640}\u{645}\u{62F}",
            ),
            // A third's: a space inside a word (a hair space shows none), a letter standing
            // alone, an i's dot drawn again, dashes and strokes between single letters,
            // Hebrew points and Arabic vowel signs.
            ("Lan", "L\u{200A}an"),
            ("Lan", "L\u{2009}an"),
            ("Lan", "L an"),
            ("Minh", "Min h"),
            ("Minh", "M\u{131}\u{307}nh"),
            ("Minh", "Mi\u{307}nh"),
            ("Minh", "M\u{2014}i\u{2014}n\u{2014}h"),
            ("Lan", "L-a-n"),
            ("Minh", "M_i_n_h"),
            ("Lan", "L\u{30FC}a\u{30FC}n"),
            ("Lan", "L\u{4E00}a\u{4E00}n"),
            (
                "\u{5D3}\u{5D5}\u{5D3}",
                "\u{5D3}\u{5BC}\u{5B8}\u{5D5}\u{5B4}\u{5D3}",
            ),
            (
                "\u{645}\u{62D}\u{645}\u{62F}",
                "\u{645}\u{64F}\u{62D}\u{64E}\u{645}\u{651}\u{64E}\u{62F}",
            ),
            // A fourth's: flags beside a name, accents piled more than two on a letter.
            ("Minh", "Minh \u{1F1FB}\u{1F1F3}"),
            ("Lan", "\u{1F1FB}\u{1F1F3} Lan"),
            ("Minh", "\u{1F1FA}\u{1F1F8} Minh"),
            // Flags read as letters still meet the name they spell.
            ("Lan", "\u{1F1F1}\u{1F1E6}\u{1F1F3}"),
            (
                "Minh",
                "M\u{300}\u{301}\u{302}\u{303}i\u{300}\u{301}\u{302}\u{303}n\u{300}\u{301}\u{302}\u{303}h\u{300}\u{301}\u{302}\u{303}",
            ),
        ] {
            let keys = ok(account).keys();
            assert!(
                keys_of_text(display).iter().any(|k| keys.contains(k)),
                "{display:?} passes for {account}"
            );
        }
        // What a decoration leaves must be the name itself: more letters or digits are another
        // name, and a name of symbols alone meets nobody.
        for (account, display) in [
            ("Minh", "Minh 2"),
            ("Minh", "Minh Anh"),
            ("Lan", "Lan & Minh"),
            // A letter's own marks make another name.
            ("Tuan", "Tuấn"),
            ("Tuan", "Tua\u{300}n"),
            ("Tuan", "Tuân"),
            ("Lan", "Lân"),
            // Two accents on a letter are Vietnamese's own: `ệ`, `ấ`.
            ("Tuan", "Tu\u{1EA5}n"),
            ("Lenh", "L\u{1EC7}nh"),
            // Words stay apart: anyone could register LanAnh to keep every Lan Anh out.
            ("LanAnh", "Lan Anh"),
            ("MaryAnn", "Mary Ann"),
            ("Jean-Luc", "Jean Luc"),
            // A small l after a small letter is no capital I (a probe found these refused).
            ("Hai", "Hal"),
            ("Sai", "Sal"),
            ("Mai", "Mal"),
            ("Khai", "Khal"),
            ("Kai", "Kal"),
            // A dot above other letters spells them.
            ("Zuk", "\u{17B}uk"),
        ] {
            let keys = ok(account).keys();
            assert!(
                !keys_of_text(display).iter().any(|k| keys.contains(k)),
                "{display:?} is not {account}"
            );
        }
        assert!(!keys_of_text("\u{2605}\u{2605}").is_empty());
        assert!(
            keys_of_text("\u{2605}\u{2605}")
                .iter()
                .all(|k| !k.is_empty())
        );
    }

    fn err(text: &str) -> UsernameError {
        match Username::parse(text) {
            Ok(name) => panic!("{text:?} accepted as {name:?}"),
            Err(err) => err,
        }
    }

    fn not_allowed(text: &str) -> (char, NotAllowedReason) {
        match err(text) {
            UsernameError::NotAllowed { ch, reason } => (ch, reason),
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn names_in_greek_or_cyrillic_capitals_meet_the_latin_names_they_look_like() {
        let keys = |name: &str| ok(name).keys();
        let meet = |a: &str, b: &str| keys(a).iter().any(|k| keys(b).contains(k));
        // Registered first, then the other: `register` looks up every key of the new name.
        for (latin, other) in [
            ("Minh", "\u{39c}\u{399}\u{39d}\u{397}"),
            ("Han", "\u{397}\u{391}\u{39d}"),
            ("Ben", "\u{392}\u{395}\u{39d}"),
            ("Anna", "\u{391}\u{39d}\u{39d}\u{391}"),
        ] {
            assert!(
                keys(other).contains(&ok(latin).key()),
                "{other:?} meets {latin:?}"
            );
        }
        assert!(matches!(
            err("\u{392}\u{39f}\u{3a4}"),
            UsernameError::Reserved { .. }
        ));
        // `L` does not look like `I`: `Lan` and `Ian` stay apart by this reading.
        assert_eq!(look_read_as_i("Lan"), ok("Lan").key());
        assert!(!keys("Lan").contains(&ok("Ian").key()));
        assert!(meet("Ian", "lan"), "as before, by their looks");
        // Staff words in Greek capitals, as they look.
        for staff in [
            "\u{392}\u{39f}\u{3a4}",
            "\u{391}D\u{39c}\u{399}\u{39d}",
            "AD\u{39c}IN",
        ] {
            // Refused as a username: reserved, or (Greek and Latin) of mixed scripts.
            assert!(Username::parse(staff).is_err(), "{staff:?}");
            // A display name may not pose as staff either (`bot` is reserved for accounts
            // only).
            assert!(
                staff.starts_with('\u{392}') || staff_word(staff).is_some(),
                "{staff:?}"
            );
        }
        // A capital `I` at the end is not a trailing `l`: `MODI` is not `mod`.
        for name in ["MODI", "MODII", "ROOTI", "SYSOPI", "OWNERI", "Modi"] {
            assert_eq!(staff_word(name), None, "{name:?}");
        }
        for name in ["MODI", "BOTI", "ANONI"] {
            ok(name);
        }
        // Greek that does not look like a Latin word stays free.
        ok("\u{3a3}\u{3c9}\u{3ba}\u{3c1}\u{3ac}\u{3c4}\u{3b7}\u{3c2}");
        ok("\u{39d}\u{399}\u{39a}\u{39f}\u{3a3}");
    }

    fn same_key(a: &str, b: &str) -> bool {
        ok(a).key() == ok(b).key()
    }

    /// Whether registering `second` after `first` meets it: a store holds `first`'s key and
    /// look, and looks up every key of `second`.
    fn meets_registered(first: &str, second: &str) -> bool {
        let held = [ok(first).key(), ok(first).look()];
        ok(second).keys().iter().any(|k| held.contains(k))
    }

    #[test]
    fn right_to_left_names_that_a_screen_shows_alike_meet() {
        // Typed apart, shown alike: the digits take their place by the bidirectional algorithm
        // (an outside probe registered each pair).
        for (a, b) in [
            ("\u{5e9}\u{5e8}\u{5d4}7", "7\u{5e9}\u{5e8}\u{5d4}"),
            (
                "\u{633}\u{644}\u{627}\u{645}12",
                "12\u{633}\u{644}\u{627}\u{645}",
            ),
            ("\u{5d0}\u{5d1}\u{5d2}_12", "12_\u{5d0}\u{5d1}\u{5d2}"),
        ] {
            assert!(meets_registered(a, b), "{a:?} then {b:?}");
            assert!(meets_registered(b, a), "{b:?} then {a:?}");
        }
        // A word and its letters reversed are two names, though one is the other as shown.
        let (sarah, reversed) = ("\u{5e9}\u{5e8}\u{5d4}", "\u{5d4}\u{5e8}\u{5e9}");
        assert!(!meets_registered(sarah, reversed));
        assert!(!meets_registered(reversed, sarah));
        // Digits elsewhere are another name.
        assert!(!meets_registered(
            "\u{5e9}\u{5e8}\u{5d4}7",
            "\u{5e9}\u{5e8}\u{5d4}8"
        ));
        // Left-to-right names keep the looks they had.
        assert_eq!(ok("Lan7").look(), ok("Lan7").key());
        // A display name that shows as an account's name meets it too.
        let shown_alike = keys_of_text("7\u{5e9}\u{5e8}\u{5d4}");
        assert!(shown_alike.contains(&ok("\u{5e9}\u{5e8}\u{5d4}7").look()));
    }

    #[test]
    fn accepts_ascii_vietnamese_and_other_single_script_names() {
        for name in [
            "Lan",
            "lan_2",
            "a-b-c",
            "abc",
            "123",
            "Phương_Anh",
            "Đức-2",
            "Nguyễn_Văn_Ắnh",
            "Trần-Thị-Lệ",
            "Вера",
            "Сергей_7",
            "Σωκράτης",
            "山田たろう",
            "김민준",
            "राम",
            "สมชาย",
            "Guðrún",
        ] {
            let username = ok(name);
            assert_eq!(username.as_str(), name);
            assert_eq!(username.to_string(), name);
            assert_eq!(name.parse::<Username>(), Ok(username));
        }
    }

    #[test]
    fn nfc_makes_decomposed_and_precomposed_the_same_name() {
        // "Phương" with u + horn and o + horn, "Đức" with u + horn + acute.
        let decomposed = ok("Phu\u{31b}o\u{31b}ng");
        assert_eq!(decomposed.as_str(), "Phương");
        assert_eq!(decomposed, ok("Phương"));
        assert_eq!(ok("\u{110}u\u{31b}\u{301}c").as_str(), "Đức");
        assert_eq!(ok("Lan\u{301}").as_str(), "La\u{144}", "n + acute is ń");
    }

    #[test]
    fn length_counts_characters_after_nfc_not_bytes() {
        assert_eq!(err(""), UsernameError::TooShort { chars: 0 });
        assert_eq!(err("a"), UsernameError::TooShort { chars: 1 });
        assert_eq!(err("ệ"), UsernameError::TooShort { chars: 1 });
        assert_eq!(err("e\u{323}\u{302}"), UsernameError::TooShort { chars: 1 });
        // Two-character names, as many real ones are.
        for name in ["ab", "ưệ", "\u{738b}\u{4f1f}", "H\u{e0}", "L\u{fd}", "An"] {
            ok(name);
        }
        assert_eq!(ok("ưệơ").as_str().len(), 7);
        ok(&"a".repeat(20));
        ok(&"ệ".repeat(20));
        // 20 letters typed as 60 code points are still 20 characters.
        ok(&"e\u{323}\u{302}".repeat(20));
        assert_eq!(err(&"a".repeat(21)), UsernameError::TooLong { chars: 21 });
        assert_eq!(err(&"ệ".repeat(21)), UsernameError::TooLong { chars: 21 });
        assert_eq!(
            err(&"e\u{323}\u{302}".repeat(21)),
            UsernameError::TooLong { chars: 21 }
        );
        let message = err("a").to_string();
        assert!(
            message.contains("(1 character)") && message.contains("2 to 20"),
            "{message}"
        );
    }

    #[test]
    fn huge_input_is_refused_quickly_and_not_quoted() {
        for huge in [
            "a".repeat(1 << 20),
            "ệ".repeat(1 << 18),
            "\u{200b}".repeat(1 << 18),
        ] {
            let started = Instant::now();
            let refused = err(&huge);
            assert!(started.elapsed() < Duration::from_secs(1));
            assert!(matches!(refused, UsernameError::TooLong { chars } if chars > 1000));
            let message = GameError::from(refused).to_string();
            assert!(message.len() < 200, "{message}");
        }
    }

    #[test]
    fn white_space_is_refused_at_the_edges_not_trimmed_and_inside() {
        for text in [" Lan", "Lan ", "\tLan", "Lan\n", "Lan\u{3000}", "\u{a0}Lan"] {
            assert_eq!(err(text), UsernameError::SurroundingWhitespace, "{text:?}");
        }
        assert_eq!(not_allowed("La n"), (' ', NotAllowedReason::Space));
        assert_eq!(not_allowed("La\u{3000}n").1, NotAllowedReason::Space);
    }

    #[test]
    fn invisible_characters_are_refused_and_shown_escaped() {
        for (text, ch) in [
            ("La\u{200b}n", '\u{200b}'),
            ("La\u{200c}n", '\u{200c}'),
            ("La\u{200d}n", '\u{200d}'),
            ("\u{202e}Lan", '\u{202e}'),
            ("Lan\u{2066}x", '\u{2066}'),
            ("La\u{feff}n", '\u{feff}'),
            ("La\u{ad}n", '\u{ad}'),
            ("Lan\u{fe0f}", '\u{fe0f}'),
            ("La\u{34f}n", '\u{34f}'),
            ("Lan\u{3164}", '\u{3164}'),
            ("\u{115f}Lan", '\u{115f}'),
            ("La\u{7}n", '\u{7}'),
            ("La\u{1b}n", '\u{1b}'),
            ("La\u{2028}n", '\u{2028}'),
        ] {
            let refused = err(text);
            assert_eq!(refused, UsernameError::Invisible { ch }, "{text:?}");
            let message = refused.to_string();
            assert!(!message.contains(ch), "{message}");
            assert!(
                message.contains(&format!("U+{:04X}", u32::from(ch))),
                "{message}"
            );
        }
    }

    #[test]
    fn fullwidth_and_other_compatibility_forms_are_refused_with_the_plain_form() {
        let (ch, reason) = not_allowed("Ｌａｎ");
        assert_eq!(ch, 'Ｌ');
        assert_eq!(
            reason,
            NotAllowedReason::Compatibility {
                plain: "L".to_owned()
            }
        );
        assert!(err("Ｌａｎ").to_string().contains("type \"L\" instead"));
        for (text, plain) in [
            ("ﬁne", "fi"),
            ("Lan²", "2"),
            ("Lan３", "3"),
            ("Ⓛan", "L"),
            ("ℌan", "H"),
            ("Lan＿x", "_"),
        ] {
            assert_eq!(
                not_allowed(text).1,
                NotAllowedReason::Compatibility {
                    plain: plain.to_owned()
                },
                "{text:?}"
            );
        }
    }

    #[test]
    fn other_characters_are_refused_with_their_reason() {
        for (text, ch, reason) in [
            ("Lan٣", '٣', NotAllowedReason::Digit),
            ("Lan৩", '৩', NotAllowedReason::Digit),
            ("La\u{2010}n", '\u{2010}', NotAllowedReason::Dash),
            ("La\u{2013}n", '\u{2013}', NotAllowedReason::Dash),
            ("Lan@x", '@', NotAllowedReason::Symbol),
            ("Lan.x", '.', NotAllowedReason::Symbol),
            ("Lan😀", '😀', NotAllowedReason::Symbol),
            ("La\u{2212}n", '\u{2212}', NotAllowedReason::Symbol),
            ("<b>x", '<', NotAllowedReason::Symbol),
            ("Laɑn", 'ɑ', NotAllowedReason::RestrictedLetter),
            ("ᏣᎳᎩ", 'Ꮳ', NotAllowedReason::RestrictedLetter),
            ("Laⰰn", 'ⰰ', NotAllowedReason::RestrictedLetter),
            (
                "Lanʼs",
                'ʼ',
                NotAllowedReason::PunctuationLike {
                    looks_like: "'".to_owned(),
                },
            ),
            (
                "Haʻa",
                'ʻ',
                NotAllowedReason::PunctuationLike {
                    looks_like: "'".to_owned(),
                },
            ),
            ("Lan\u{20dd}", '\u{20dd}', NotAllowedReason::RestrictedMark),
        ] {
            assert_eq!(not_allowed(text), (ch, reason), "{text:?}");
        }
    }

    #[test]
    fn loose_and_stacked_combining_marks_are_refused() {
        for (text, ch) in [
            ("Lax\u{301}", '\u{301}'),
            ("q\u{301}an", '\u{301}'),
            ("\u{301}Lan", '\u{301}'),
            ("Lan\u{300}\u{301}", '\u{301}'),
            ("ab1\u{301}", '\u{301}'),
            ("Lan_\u{301}x", '\u{301}'),
            ("i\u{307}an", '\u{307}'),
            ("La\u{306}\u{306}n", '\u{306}'),
            // A Devanagari vowel sign with no letter before it.
            ("\u{93e}राम", '\u{93e}'),
        ] {
            assert_eq!(err(text), UsernameError::CombiningMark { ch }, "{text:?}");
        }
        // A vowel sign twice, and five marks in a row.
        assert_eq!(
            err("रा\u{93e}म"),
            UsernameError::StackedMarks { ch: '\u{93e}' }
        );
        assert_eq!(
            err("र\u{941}\u{902}\u{901}\u{903}\u{94d}"),
            UsernameError::StackedMarks { ch: '\u{94d}' }
        );
        ok("र\u{941}\u{902}\u{901}\u{903}");
    }

    #[test]
    fn separators_only_join_and_never_double() {
        for (text, ch) in [("_Lan", '_'), ("-Lan", '-'), ("Lan_", '_'), ("Lan-", '-')] {
            assert_eq!(err(text), UsernameError::SeparatorAtEdge { ch }, "{text:?}");
        }
        for (text, first, second) in [
            ("La__n", '_', '_'),
            ("La--n", '-', '-'),
            ("La_-n", '_', '-'),
            ("La-_n", '-', '_'),
        ] {
            assert_eq!(
                err(text),
                UsernameError::DoubledSeparator { first, second },
                "{text:?}"
            );
        }
        ok("L_a-n");
    }

    #[test]
    fn mixed_scripts_are_refused_and_homographs_named() {
        // Latin "paypal" with the Cyrillic а (U+0430).
        let refused = err("p\u{430}ypal");
        assert_eq!(
            refused,
            UsernameError::LooksLikeOtherScript {
                ch: '\u{430}',
                script: "Cyrillic".to_owned(),
                looks_like: "a".to_owned(),
                name_script: "Latin".to_owned(),
            }
        );
        let message = refused.to_string();
        assert!(message.contains("U+0430") && message.contains("Latin \"a\""));
        // Greek omicron in a Latin name.
        assert!(matches!(
            err("b\u{3bf}b"),
            UsernameError::LooksLikeOtherScript { ch: '\u{3bf}', .. }
        ));
        assert_eq!(
            err("Lanжи"),
            UsernameError::MixedScripts {
                first: 'L',
                name_script: "Latin".to_owned(),
                ch: 'ж',
                script: "Cyrillic".to_owned(),
            }
        );
        assert!(matches!(err("Lan山"), UsernameError::MixedScripts { .. }));
        assert!(matches!(
            err("ΣοφίαLan"),
            UsernameError::MixedScripts { .. }
        ));
        // Han with kana is Japanese, one writing system; digits and separators go with any.
        ok("山田たろう");
        ok("Вера-2");
    }

    #[test]
    fn reserved_names_are_refused_also_in_disguise() {
        for (text, word) in [
            ("admin", "admin"),
            ("ADMIN", "admin"),
            ("Admin_1", "admin"),
            ("2admin", "admin"),
            ("ad-min", "admin"),
            ("r00t", "root"),
            ("Computer", "computer"),
            ("system32", "system"),
            ("oanquan", "oanquan"),
            ("O-an-Quan", "oanquan"),
            ("Ô_Ăn_Quan", "ôănquan"),
            // The service's name at the start of a longer one.
            ("OanquanAdmin", "oanquan"),
            ("Oanquan_Team", "oanquan"),
            ("Ô_Ăn_Quan_VN", "ôănquan"),
            ("Admins", "admins"),
            ("SysAdmin", "sysadmin"),
            ("CSKH", "cskh"),
            ("Verified", "verified"),
            ("quản_trị", "quảntrị"),
            ("Quan-Tri", "quantri"),
            ("MÁY_TÍNH", "máytính"),
            ("Anonymous", "anonymous"),
            ("moderator", "moderator"),
            // Found by an outside probe: small l for capital I, a digit read as a letter, a
            // trailing l for a trailing 1.
            ("ADMlN", "admin"),
            ("QUANTRl", "quantri"),
            ("NUL1", "null"),
            ("adminl", "admin"),
            ("ROOTl", "root"),
            // Staff words in other scripts, which no skeleton maps to the Latin ones.
            ("админ", "админ"),
            ("АДМИН_1", "админ"),
            ("Модератор", "модератор"),
            ("管理员", "管理员"),
            ("管理員2", "管理員"),
            ("관리자", "관리자"),
            ("サポート", "サポート"),
            ("Administrador", "administrador"),
            ("Modérateur", "modérateur"),
            ("quản_lý", "quảnlý"),
            // Found by an outside probe: accents, leet digits, more languages.
            ("4dmin", "admin"),
            ("5upp0rt", "support"),
            ("модер", "модер"),
            ("админка", "админка"),
            ("مدير", "مدير"),
            ("מנהל", "מנהל"),
            ("システム", "システム"),
            ("Owner", "owner"),
            // Accents on staff words of languages written without them (an outside probe).
            ("Admín", "admin"),
            ("Ştaff", "staff"),
            ("Ŕoot_1", "root"),
            ("Mödérâtör", "moderator"),
            ("Ṣupport", "support"),
            ("Ôăn_Quan", "ôănquan"),
            ("Oán_Quân", "oanquan"),
        ] {
            assert_eq!(err(text), UsernameError::Reserved { word }, "{text:?}");
        }
        for text in [
            "administrative",
            "Rooted",
            "Modi",
            "bot_lan",
            "Lan_admin",
            "Rooti",
            "Paul",
            "Lan",
            "Nulo",
            "管理员小王",
            "Bao_4",
            "Thảo",
            // Vietnamese words their accents make: not the reserved words without them.
            "Quân_Trí",
            "Quântrí",
            "Bột",
            "Bọt_88",
            "Ân_Danh",
            "Hệ_Thông",
            "Mây_Tính",
            "Khách_Sạn",
            "Đức_Minh",
            "Sơn_Tùng",
            "Rôm",
            // A digit for a letter in a tag that poses as no one.
            "Bo7",
            "Gu3st",
            "Soportes",
        ] {
            ok(text);
        }
        assert!(err("root").to_string().contains("\"root\""));
    }

    #[test]
    fn keys_ignore_case_fully() {
        assert!(same_key("Lan", "LAN") && same_key("Lan", "lan") && same_key("lAn", "lan"));
        assert!(same_key("straße", "STRASSE"));
        assert!(same_key("straße", "strasse"));
        assert!(same_key("STRAẞE", "straße"));
        assert!(same_key("ΣΟΦΟΣ", "σοφος"));
        assert!(same_key("σοφος", "σοφοσ"));
        assert!(same_key("Phương_Anh", "PHƯƠNG_ANH"));
        assert!(same_key("Đức", "đỨc"));
        assert!(!same_key("Lan", "Lân"));
        assert!(!same_key("Duc", "Đức"));
        assert!(!same_key("Lan_1", "Lan-1"));
    }

    /// Names alike only in capitals: the alias of the new one is the key of the old one.
    #[test]
    fn capital_look_alikes_alias_the_latin_name() {
        let key = |name: &str| Username::parse(name).unwrap().key();
        let alias = |name: &str| Username::parse(name).unwrap().capital_alias();
        for (new, existing) in [
            ("ТОМ", "TOM"), // Cyrillic capitals
            ("ΤΟΜ", "tom"), // Greek capitals
            ("НОВ", "HOB"), // Cyrillic
            ("ΑΒΕ", "abe"), // Greek
            ("Ian", "lan"), // capital i
            ("Ian1", "lan1"),
            ("II1", "lll"),
        ] {
            assert_eq!(alias(new), Some(key(existing)), "{new} / {existing}");
        }
        // Plain names alias nothing: their key is what they look like.
        for plain in ["Lan", "tom", "Nguyễn", "ivan", "Сара"] {
            assert_eq!(alias(plain), None, "{plain}");
        }
    }

    #[test]
    fn keys_merge_look_alikes() {
        assert!(same_key("b0b", "bob"));
        assert!(same_key("B0B", "bob"));
        assert!(same_key("lil1", "lill"));
        assert!(same_key("barn", "bam"));
        assert!(same_key("cl_x", "d_x"));
        assert!(same_key("vv_x", "w_x"));
        assert!(same_key("VV_X", "w_x"));
        assert!(!same_key("c_lx", "d_x"));
        assert!(!same_key("v_vx", "w_x"));
        // Whole-script look-alikes are accepted, but cannot both be registered.
        assert!(same_key("сор", "cop"));
        assert!(same_key("Сара", "Capa"));
        // Capitals that look like the Vietnamese Đ.
        assert!(same_key("Ðức", "Đức"));
        assert!(same_key("ðức", "Đức"));
        assert!(same_key("Ɖức", "Đức"));
        // Turkish dotted and dotless i meet the plain one.
        assert!(same_key("İstan", "istan"));
        assert!(same_key("İSTAN", "Istan"));
        assert!(same_key("ıstan", "istan"));
        // Decomposed and precomposed are one name, so one key.
        assert!(same_key("Phu\u{31b}o\u{31b}ng", "PHƯƠNG"));
    }

    #[test]
    fn errors_become_invalid_argument_on_username() {
        let err = GameError::from(err("a"));
        assert!(
            matches!(&err, GameError::InvalidArgument { field, description }
                if field == "username" && description.contains("too short")),
            "{err:?}"
        );
        assert_eq!(UsernameError::SurroundingWhitespace.field(), USERNAME_FIELD);
    }

    /// Characters that make interesting names: mostly Latin and Vietnamese letters with their
    /// case pairs and look-alikes (so that most names pass), now and then a separator, a loose
    /// accent or a Cyrillic look-alike (so that some do not).
    fn name_char() -> impl Strategy<Value = char> {
        prop_oneof![
            12 => prop::sample::select(vec![
                'a', 'B', 'l', 'I', '1', '0', 'o', 'O', 'm', 'r', 'n', 'ư', 'Ư', 'ơ', 'Ơ', 'ệ',
                'Ệ', 'Đ', 'đ', 'Ð', 'ß', 'ẞ', 's', 'S', 'ı', 'İ', 'ǅ',
            ]),
            1 => prop::sample::select(vec!['_', '-']),
            1 => prop::sample::select(vec![
                '\u{301}', '\u{31b}', '\u{323}', 'а', 'р', 'с', 'σ', 'ς', 'Σ',
            ]),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn parse_never_panics_and_keeps_its_promises(text in any::<String>()) {
            if let Ok(name) = Username::parse(&text) {
                let chars = name.as_str().chars().count();
                prop_assert!((MIN_USERNAME_CHARS..=MAX_USERNAME_CHARS).contains(&chars));
            }
        }

        #[test]
        fn accepted_names_parse_again_to_themselves_with_a_stable_key(
            chars in prop::collection::vec(name_char(), 0..24)
        ) {
            let text: String = chars.into_iter().collect();
            if let Ok(name) = Username::parse(&text) {
                let again = Username::parse(name.as_str());
                prop_assert_eq!(again.as_ref(), Ok(&name));
                let decomposed: String = name.as_str().nfd().collect();
                prop_assert_eq!(Username::parse(&decomposed), Ok(name.clone()));
                prop_assert_eq!(key_of(&name.key()), name.key(), "the key is a fixed point");
                for variant in [name.as_str().to_uppercase(), name.as_str().to_lowercase()] {
                    if let Ok(other) = Username::parse(&variant) {
                        prop_assert_eq!(other.key(), name.key(), "{:?}", variant);
                    }
                }
            }
        }
    }
}
