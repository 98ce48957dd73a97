//! Text that comes from clients: how it is quoted back in errors, and what a display name may be.

use unicode_normalization::UnicodeNormalization as _;
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory as _};
use unicode_security::skeleton;

use crate::error::GameError;

/// The most characters of a client's text that an error message or detail quotes.
pub const MAX_QUOTED_CHARS: usize = 64;

/// The most characters in a display name, after normalisation and trimming.
pub const MAX_DISPLAY_NAME_CHARS: usize = 32;

/// The most characters the quoted part of [`quoted`] takes once escaped: a name of escaped
/// characters (combining marks are written `\u{301}`) stays short enough for the reason after
/// it to be read (an outside probe's 31 marks took 250 characters, and the CLI's cut of a long
/// message left no reason).
pub const MAX_QUOTED_WIDTH: usize = 80;

/// Client text as an error message or detail may show it: at most [`MAX_QUOTED_CHARS`]
/// characters and [`MAX_QUOTED_WIDTH`] once escaped, cut on a character boundary, in double
/// quotes with control, format and other invisible characters escaped (`\u{202e}`), then `…`
/// and the full length if it was cut.
///
/// Status messages travel in HTTP/2 headers, which clients cap (grpc-core at 16 KiB in all), and
/// they end up in logs: a long or hostile name echoed whole would cost the client its error
/// details, or write raw control characters into someone's terminal.
#[must_use]
pub fn quoted(input: &str) -> String {
    let mut head = String::new();
    let (mut taken, mut width) = (0, 0);
    let mut chars = input.chars().peekable();
    while let Some(&c) = chars.peek() {
        // As `Debug` escapes a string, give or take a quote.
        let escaped = c.escape_debug().count();
        if taken == MAX_QUOTED_CHARS || width + escaped > MAX_QUOTED_WIDTH {
            break;
        }
        head.push(c);
        taken += 1;
        width += escaped;
        chars.next();
    }
    let rest = chars.count();
    if rest == 0 {
        format!("{head:?}")
    } else {
        format!("{head:?}… ({} characters)", taken + rest)
    }
}

/// Why a display name is refused.
fn bad_name(description: impl Into<String>) -> GameError {
    GameError::invalid("display_name", description)
}

/// The display name to store for what a client sent: Unicode NFC (so the same name typed on two
/// systems is the same text), trimmed of whitespace, 1 to [`MAX_DISPLAY_NAME_CHARS`] characters,
/// and free of control characters (Cc), format characters (Cf: zero-width spaces and joiners,
/// bidirectional overrides and isolates, soft hyphens…) and line or paragraph separators, which
/// would make a name invisible, reorder the text around it on other players' screens, or break
/// lines in logs.
///
/// # Errors
///
/// [`GameError::InvalidArgument`] on `display_name` saying what is wrong; the name itself is
/// quoted with [`quoted`].
pub fn display_name(name: &str) -> Result<String, GameError> {
    let normal: String = name.nfc().collect();
    let trimmed = normal.trim();
    let chars: Vec<char> = trimmed.chars().collect();
    if let Some(&bad) = chars.iter().enumerate().find_map(|(i, c)| {
        let hidden = matches!(
            c.general_category(),
            GeneralCategory::Control
                | GeneralCategory::Format
                | GeneralCategory::LineSeparator
                | GeneralCategory::ParagraphSeparator
        );
        (hidden && !is_joiner_in_context(&chars, i)).then_some(c)
    }) {
        return Err(bad_name(format!(
            "{} contains the invisible or control character U+{:04X}; use letters, digits, \
             punctuation, symbols and spaces",
            quoted(trimmed),
            u32::from(bad)
        )));
    }
    check_visible(trimmed, &chars)?;
    let chars = chars.len();
    if chars == 0 || chars > MAX_DISPLAY_NAME_CHARS {
        return Err(bad_name(format!(
            "a name must be 1 to {MAX_DISPLAY_NAME_CHARS} characters long after trimming, got {chars}"
        )));
    }
    Ok(trimmed.to_owned())
}

/// Whether `name` ends in a part in brackets, written in any look-alike form (`)`, fullwidth
/// `）`, `]`, `❫`, `】`, `⁾`, `»`, `⧙`, `⊃`…), also behind what draws little or nothing after it
/// (an accent, a full stop, a symbol, `™`): clients show a seat's rating or a computer's level
/// in brackets after its name. Outside probes sat down as `Computer (level 7)` with a combining
/// dot after it, as `Computer ❪level 7❫`, `Bob【1500】`, `Computer ⧘master⧙` and
/// `Computer (master)™`. A closing bracket with no opening one before it is an emoticon, not a
/// part in brackets: `Bob :)` stays free.
#[must_use]
pub fn ends_in_brackets(name: &str) -> bool {
    let written: String = name.nfc().collect();
    let compat: String = name.nfkc().collect();
    let look: String = skeleton(&compat).collect();
    [written, compat, look]
        .iter()
        .any(|form| bracketed_at_end(form))
}

/// Whether `form`, its trailing decoration left out, ends in a closing bracket with an opening
/// one somewhere before it.
fn bracketed_at_end(form: &str) -> bool {
    let core = form.trim_end_matches(|c: char| {
        c.is_whitespace() || (is_trailing_decoration(c) && !is_bracket(c, Side::Closing))
    });
    let mut back = core.chars().rev();
    back.next().is_some_and(|c| is_bracket(c, Side::Closing))
        && back.any(|c| is_bracket(c, Side::Opening))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Opening,
    Closing,
}

/// Symbols and letters drawn as a pair of brackets that Unicode does not class as one.
const BRACKET_SHAPES: &[(char, char)] = &[
    ('<', '>'),
    ('\u{2282}', '\u{2283}'),
    ('\u{231C}', '\u{231D}'),
    ('\u{231E}', '\u{231F}'),
    ('\u{239B}', '\u{239E}'),
    ('\u{239D}', '\u{23A0}'),
    ('\u{23DC}', '\u{23DD}'),
    ('\u{2AA1}', '\u{2AA2}'),
    ('\u{0295}', '\u{0294}'),
    ('\u{1455}', '\u{1450}'),
    ('\u{275B}', '\u{275C}'),
    ('\u{275D}', '\u{275E}'),
];

/// Whether `c` opens or closes (`side`) a bracketed part: Unicode's open and close
/// punctuation, its initial and final punctuation other than quotation marks (guillemets,
/// paraphrase brackets), and [`BRACKET_SHAPES`].
fn is_bracket(c: char, side: Side) -> bool {
    let quote = matches!(c, '"' | '\'' | '\u{2018}'..='\u{201F}');
    let category = c.general_category();
    let by_class = match side {
        Side::Opening => {
            category == GeneralCategory::OpenPunctuation
                || (category == GeneralCategory::InitialPunctuation && !quote)
        }
        Side::Closing => {
            category == GeneralCategory::ClosePunctuation
                || (category == GeneralCategory::FinalPunctuation && !quote)
        }
    };
    by_class
        || BRACKET_SHAPES.iter().any(|&(open, close)| match side {
            Side::Opening => c == open,
            Side::Closing => c == close,
        })
}

/// What may follow a closing bracket without hiding it: marks, punctuation that is no
/// bracket, modifier letters and symbols, other symbols (emoji, `™`), numbers that are not
/// digits (`¹`, `½`, `Ⅱ`).
fn is_trailing_decoration(c: char) -> bool {
    matches!(
        c.general_category(),
        GeneralCategory::NonspacingMark
            | GeneralCategory::SpacingMark
            | GeneralCategory::EnclosingMark
            | GeneralCategory::OtherPunctuation
            | GeneralCategory::DashPunctuation
            | GeneralCategory::ConnectorPunctuation
            | GeneralCategory::ModifierLetter
            | GeneralCategory::ModifierSymbol
            | GeneralCategory::OtherSymbol
            | GeneralCategory::OtherNumber
            | GeneralCategory::LetterNumber
            | GeneralCategory::Format
    )
}

/// Control and format characters, line and paragraph separators, and the other default
/// ignorable code points (variation selectors, fillers, the combining grapheme joiner), which
/// UTS #39's skeleton drops: that is how we ask `unicode-security` for its table.
#[must_use]
pub fn is_invisible(ch: char) -> bool {
    matches!(
        ch.general_category(),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    ) || skeleton(ch.encode_utf8(&mut [0; 4])).next().is_none()
}

/// The most combining marks one character of a display name carries: enough for any script
/// (Vietnamese needs two in NFD, Thai a vowel and a tone), not for a name that spills over the
/// lines above and below it.
pub const MAX_MARKS_PER_CHARACTER: usize = 4;

/// Symbols that fonts draw as nothing: the blank Braille pattern, and the musical null notehead
/// (an outside probe sat down as U+1D159 alone).
const BLANK_SYMBOLS: &[char] = &['\u{2800}', '\u{1D159}'];

/// Single characters drawn as a whole line of text (Arabic ligatures of a phrase, long dashes,
/// outsized cuneiform signs): 32 of one (an outside probe's `﷽` × 32) took the lobby's width.
const OVERSIZED: &[char] = &[
    '\u{FDFA}',
    '\u{FDFB}',
    '\u{FDFD}',
    '\u{2E3A}',
    '\u{2E3B}',
    '\u{12219}',
    '\u{1242B}',
    '\u{A9C5}',
];

/// Whether the character at `i` is a joiner where writing needs one, which a display name
/// keeps although joiners are invisible: a zero-width non-joiner between two letters (Persian
/// writes `می‌خواهم` with one, and Indic scripts use it), and a zero-width joiner between two
/// emoji (`🏳️‍🌈`, a family). An outside probe found both refused. Anywhere else a joiner only
/// hides, and is refused; look-alike checks drop joiners, so one cannot tell a name apart
/// from an account's.
fn is_joiner_in_context(chars: &[char], i: usize) -> bool {
    let (Some(&before), Some(&after)) = (
        i.checked_sub(1).and_then(|b| chars.get(b)),
        chars.get(i + 1),
    ) else {
        return false;
    };
    let letter = |c: char| c.is_alphabetic();
    let mark = |c: char| {
        matches!(
            c.general_category(),
            GeneralCategory::NonspacingMark | GeneralCategory::SpacingMark
        )
    };
    let emoji = |c: char| {
        matches!(
            c.general_category(),
            GeneralCategory::OtherSymbol | GeneralCategory::ModifierSymbol
        ) || c == '\u{FE0F}'
    };
    match chars[i] {
        '\u{200C}' => (letter(before) || mark(before)) && letter(after),
        '\u{200D}' => emoji(before) && emoji(after),
        _ => false,
    }
}

/// What the category check of [`display_name`] lets through but shows nothing or garbage:
/// fillers and other default ignorable code points (Hangul fillers, Khmer inherent vowels, the
/// combining grapheme joiner), the blank Braille pattern, unassigned and private-use code
/// points, a mark with no character to sit on, and marks stacked past
/// [`MAX_MARKS_PER_CHARACTER`]. Variation selectors stay: they pick an emoji's presentation.
fn check_visible(name: &str, chars: &[char]) -> Result<(), GameError> {
    let mut marks = 0;
    for (i, &ch) in chars.iter().enumerate() {
        let category = ch.general_category();
        let is_mark = matches!(
            category,
            GeneralCategory::NonspacingMark
                | GeneralCategory::SpacingMark
                | GeneralCategory::EnclosingMark
        );
        let variation_selector = matches!(ch, '\u{fe00}'..='\u{fe0f}' | '\u{e0100}'..='\u{e01ef}');
        let code = u32::from(ch);
        let why = if matches!(
            category,
            GeneralCategory::Unassigned | GeneralCategory::PrivateUse | GeneralCategory::Surrogate
        ) {
            Some(format!(
                "the code point U+{code:04X}, which has no agreed glyph"
            ))
        } else if BLANK_SYMBOLS.contains(&ch)
            || (is_invisible(ch) && !variation_selector && !is_joiner_in_context(chars, i))
        {
            Some(format!("the invisible character U+{code:04X}"))
        } else if OVERSIZED.contains(&ch) {
            Some(format!(
                "U+{code:04X}, one character drawn many letters wide"
            ))
        } else if is_mark && i == 0 {
            Some(format!(
                "the combining mark U+{code:04X} with no character before it"
            ))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(bad_name(format!(
                "{} contains {why}; use letters, digits, punctuation, symbols and spaces",
                quoted(name)
            )));
        }
        marks = if is_mark { marks + 1 } else { 0 };
        if marks > MAX_MARKS_PER_CHARACTER {
            return Err(bad_name(format!(
                "{} stacks more than {MAX_MARKS_PER_CHARACTER} combining marks on one character",
                quoted(name)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_cuts_on_a_character_and_escapes() {
        assert_eq!(quoted("Lan"), "\"Lan\"");
        let long = "ô".repeat(5000);
        let q = quoted(&long);
        assert!(
            q.starts_with(&format!("\"{}\"…", "ô".repeat(MAX_QUOTED_CHARS))),
            "{q}"
        );
        assert!(q.ends_with("(5000 characters)"), "{q}");
        assert_eq!(quoted(&"x".repeat(MAX_QUOTED_CHARS)).chars().count(), 66);
        // Escaped characters count at their escaped width.
        let marks = format!("e{}", "\u{301}".repeat(31));
        let q = quoted(&marks);
        assert!(q.chars().count() <= MAX_QUOTED_WIDTH + 20, "{q}");
        assert!(q.ends_with("… (32 characters)"), "{q}");
        let refused = display_name(&marks).unwrap_err().to_string();
        assert!(refused.contains("stacks more than"), "{refused}");
        assert!(refused.chars().count() < 180, "{refused}");
        let hostile = quoted("a\u{202e}b\n\u{1b}[31m\u{200b}");
        assert!(
            !hostile
                .chars()
                .any(|c| c.is_control() || c == '\u{202e}' || c == '\u{200b}')
        );
        assert!(
            hostile.contains("\\u{202e}") && hostile.contains("\\n"),
            "{hostile}"
        );
    }

    #[test]
    fn names_ending_in_brackets_are_told_apart() {
        for annotated in [
            "Lan (1500?)",
            "Computer (master)",
            "Lan (1500) ",
            "Lan [1500]",
            "Lan \u{FF08}1500\u{FF09}",
            "(x)",
            // An outside probe's disguises.
            "Computer (level 7)\u{307}",
            "Computer (level 7)\u{323}",
            "Computer (level 7)\u{332}",
            "Computer (level 7).",
            "Computer (level 7)\u{2D1}",
            "Computer \u{276A}level 7\u{276B}",
            "Computer \u{2985}level 7\u{2986}",
            "Computer \u{208D}level 7\u{208E}",
            "Computer \u{207D}level 7\u{207E}",
            "Bob\u{3010}1500\u{3011}",
            "Bob \u{27E8}1500\u{27E9}",
            "Bob \u{AB}1500\u{BB}",
            "Bob <1500>",
            "Magnus \u{207D}\u{B2}\u{2078}\u{2070}\u{2070}\u{207E}",
            "Bob (1500)\u{358}",
            "Bob (1500) \u{2605}",
            // A second probe's: real bracket pairs the skeleton turns into symbols, shapes
            // drawn as brackets, and what NFKC turns into letters after a bracket.
            "Computer \u{29D8}master\u{29D9}",
            "Computer \u{2E26}master\u{2E27}",
            "Computer \u{2E1C}master\u{2E1D}",
            "Computer \u{2E0C}master\u{2E0D}",
            "Computer \u{239B}master\u{239E}",
            "Computer \u{23DC}master\u{23DD}",
            "Computer \u{231C}master\u{231D}",
            "Computer \u{2282}master\u{2283}",
            "Computer \u{2AA1}master\u{2AA2}",
            "Computer \u{295}master\u{294}",
            "Computer \u{1455}master\u{1450}",
            "Computer \u{275B}master\u{275C}",
            "Computer \u{275D}master\u{275E}",
            "Computer (master)\u{2122}",
            "Bob (1500)\u{2120}",
            "Bob (1500)\u{B9}",
            "Bob (1500)\u{2116}",
            "Bob (1500)\u{2160}",
            "Bob (1500)\u{BD}",
            "Bob (1500)\u{24C2}",
            "(^_^)",
        ] {
            assert!(ends_in_brackets(annotated), "{annotated:?}");
        }
        for plain in [
            "Lan",
            "(Lan)x",
            "Lan :)x",
            "Ô Quan",
            "",
            "Lan.",
            "Lan!",
            "Lan \u{1F600}",
            "Trần Thị Lan",
            "Đức-2",
            "Bob \u{201C}the rock\u{201D}",
            // Emoticons: a closing bracket with no opening one.
            "Bob :)",
            "Bob ;)",
            "Bob :-)",
            "Bob =)",
            "Bob 8)",
            "Bob :o)",
            "Bob :]",
            "Bob :>",
            "Bob ^)",
            "Bob 1500)",
            "Bob :(",
            "Bob <3",
            "Lan \u{B2}",
        ] {
            assert!(!ends_in_brackets(plain), "{plain:?}");
        }
    }

    #[test]
    fn display_names_are_normalised_trimmed_and_visible() {
        assert_eq!(display_name("  Lan ").unwrap(), "Lan");
        // "Ô" as O + combining circumflex becomes the one precomposed character.
        assert_eq!(display_name("O\u{302} Quan").unwrap(), "\u{d4} Quan");
        assert_eq!(display_name(&"ô".repeat(32)).unwrap(), "ô".repeat(32));
        // 32 precomposed characters written as 64 decomposed ones still fit.
        assert!(display_name(&"o\u{302}".repeat(32)).is_ok());
        for bad in [
            "",
            "   ",
            "\u{200b}",
            "Lan\u{202e}nim",
            "a\u{7}b",
            "a\u{2028}b",
            "\u{2066}x\u{2069}",
            "x\u{feff}",
            "soft\u{ad}hyphen",
            // Joiners where no writing needs them.
            "\u{200c}Lan",
            "Lan\u{200c}",
            "Lan \u{200c} Lan",
            "La\u{200d}n",
            "\u{1F3F3}\u{200d}",
            "\u{200d}\u{1F308}",
            "Lan\u{200c}\u{200c}Lan",
        ] {
            let err = display_name(bad).unwrap_err();
            assert!(
                matches!(&err, GameError::InvalidArgument { field, .. } if field == "display_name"),
                "{bad:?}: {err:?}"
            );
        }
        assert!(display_name(&"x".repeat(33)).is_err());
        // Joiners where writing needs them (an outside probe): a non-joiner between letters
        // (Persian), a joiner between emoji (the rainbow flag, a family).
        for good in [
            "\u{645}\u{6cc}\u{200c}\u{62e}\u{648}\u{627}\u{647}\u{645}",
            "\u{1F3F3}\u{FE0F}\u{200d}\u{1F308} Lan",
            "\u{1F468}\u{200d}\u{1F469}\u{200d}\u{1F467}",
            "\u{1F9D1}\u{1F3FD}\u{200d}\u{1F680}",
        ] {
            assert_eq!(display_name(good).unwrap(), good, "{good:?}");
        }
    }

    #[test]
    fn display_names_that_show_nothing_or_garbage_are_refused() {
        for (bad, says) in [
            ("\u{3164}", "U+3164"),
            ("\u{115f}\u{1160}", "U+115F"),
            ("\u{ffa0}", "U+FFA0"),
            ("\u{2800}\u{2800}", "U+2800"),
            ("\u{1D159}", "U+1D159"),
            ("\u{FDFD}\u{FDFD}", "U+FDFD"),
            ("Lan \u{FDFA}", "U+FDFA"),
            ("\u{1242B}", "U+1242B"),
            ("\u{A9C5}", "U+A9C5"),
            ("\u{17b4}", "U+17B4"),
            ("Lan\u{3164}Lan", "U+3164"),
            ("a\u{34f}b", "U+034F"),
            ("\u{301}", "combining mark U+0301"),
            ("\u{378}", "U+0378"),
            ("\u{e000}boss", "U+E000"),
            ("\u{10ffff}", "U+10FFFF"),
        ] {
            let err = display_name(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
        let zalgo = format!("a{}", "\u{301}".repeat(31));
        let err = display_name(&zalgo).unwrap_err().to_string();
        assert!(err.contains("combining marks"), "{err}");
        // What real names use stays: emoji with their variation selector and joiners are Cf
        // (refused above), Thai vowel and tone marks, Vietnamese in NFD, Hangul, Devanagari.
        for good in [
            "\u{2764}\u{fe0f} Lan",
            "ก\u{e34}\u{e48}",
            "Nguye\u{302}\u{303}n",
            "한국",
            "नमस्ते",
            "a\u{301}\u{302}\u{303}\u{304}",
            "Lan 🐉",
        ] {
            assert!(display_name(good).is_ok(), "{good:?}");
        }
    }
}
