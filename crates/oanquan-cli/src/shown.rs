//! Text from the server as the terminal may show it: escaped and capped, so that a hostile or
//! broken server cannot write control sequences into the terminal (see [`shown_at_most`]).

use std::borrow::Cow;

/// At most this many characters of a server's message or description (see [`shown`]).
pub const MESSAGE_CHARS: usize = 200;

/// At most this many characters of a display name, username or id from the server (see
/// [`shown_name`]); a sane server sends names of at most 32.
pub const NAME_CHARS: usize = 64;

/// Text the server sent (a status message, a violation's description), as the terminal may
/// show it: see [`shown_at_most`], at most [`MESSAGE_CHARS`] characters.
pub fn shown(text: &str) -> Cow<'_, str> {
    shown_at_most(text, MESSAGE_CHARS)
}

/// A display name, username or id the server sent: see [`shown_at_most`], at most
/// [`NAME_CHARS`] characters.
pub fn shown_name(text: &str) -> Cow<'_, str> {
    shown_at_most(text, NAME_CHARS)
}

/// Server-supplied text made safe to print: control characters (C0 with newline and tab, DEL,
/// C1) and bidirectional controls (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C,
/// and the line and paragraph separators U+2028, U+2029) are written as visible escapes
/// (`\u{1b}`, `\n`, `\u{202e}`), so that a hostile server cannot clear the screen, retitle
/// the window, fake a prompt, reorder a line or break the line count the board's animation
/// redraws by. Longer than `max_chars` characters (counted after escaping), it is cut and ends
/// in `…`. Other text, Vietnamese, CJK or emoji, is left as it is (borrowed, not copied).
/// Applying it twice changes nothing more.
pub fn shown_at_most(text: &str, max_chars: usize) -> Cow<'_, str> {
    if !text.chars().any(escaped) && text.chars().nth(max_chars).is_none() {
        return Cow::Borrowed(text);
    }
    let mut out = String::new();
    let mut count = 0usize;
    let mut buf = [0u8; 4];
    for c in text.chars() {
        let escape;
        let piece = if !escaped(c) {
            &*c.encode_utf8(&mut buf)
        } else if c.is_control() {
            // `\n`, `\t`, `\r`, `\0` or `\u{1b}`.
            escape = c.escape_debug().to_string();
            escape.as_str()
        } else {
            escape = c.escape_unicode().to_string();
            escape.as_str()
        };
        let width = piece.chars().count();
        if count + width > max_chars {
            out.push('…');
            break;
        }
        count += width;
        out.push_str(piece);
    }
    Cow::Owned(out)
}

/// `text` with what [`shown_at_most`] escapes escaped, except line breaks, and nothing cut: for
/// the CLI's own messages, which quote what the user gave (flags, environment variables, paths)
/// and may span lines. An `OANQUAN_SERVER` holding `\e]0;…` reached the terminal raw.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && escaped(c)) {
        return Cow::Borrowed(text);
    }
    text.split('\n')
        .map(|line| shown_at_most(line, usize::MAX).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
        .into()
}

/// What [`shown_at_most`] writes as an escape: control characters (`char::is_control`: C0,
/// DEL, C1), bidirectional controls and the Unicode line and paragraph separators.
fn escaped(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{061c}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cli_s_own_messages_keep_their_lines_and_escape_the_rest() {
        assert!(matches!(printable("ô\nplain"), Cow::Borrowed("ô\nplain")));
        let message = "--server `http://a\u{1b}]0;pwn\u{7}:1` is not valid\nhint: \u{202e}x";
        let shown = printable(message);
        assert!(!shown.chars().any(|c| c != '\n' && escaped(c)), "{shown}");
        assert_eq!(shown.lines().count(), 2);
        assert!(shown.contains("\\u{1b}]0;pwn\\u{7}"), "{shown}");
        assert!(shown.contains("\\u{202e}x"), "{shown}");
        let long = "a".repeat(10_000);
        assert_eq!(printable(&long), long);
    }

    use super::*;

    #[test]
    fn server_text_is_shown_escaped_and_capped() {
        // Ordinary text, in any script, is left as it is (and not copied).
        for plain in [
            "Lan",
            "Nguyễn Thị Lân",
            "Ô Ăn Quan",
            "王小明",
            "🙂 đi nào 👍🏽",
            "unknown preset `chess`; \"quoted\" \\ too",
        ] {
            assert!(
                matches!(shown(plain), Cow::Borrowed(t) if t == plain),
                "{plain}"
            );
            assert!(matches!(shown_name(plain), Cow::Borrowed(_)), "{plain}");
        }
        // Escape sequences: a window title, a cleared screen, a cursor moved up.
        assert_eq!(shown("\x1b]0;pwned\x07x"), r"\u{1b}]0;pwned\u{7}x");
        assert_eq!(shown("a\x1b[2Jb\x1b[1A"), r"a\u{1b}[2Jb\u{1b}[1A");
        // A C1 control (CSI) and DEL.
        assert_eq!(shown("a\u{9b}2J\u{7f}"), r"a\u{9b}2J\u{7f}");
        // Newlines and tabs cannot fake a prompt or shift the lines the board redraws.
        assert_eq!(
            shown("refused\nyour move> \r\t"),
            r"refused\nyour move> \r\t"
        );
        assert!(!shown("a\nb\u{2028}c").contains(['\n', '\u{2028}']));
        // Bidirectional overrides and isolates cannot reorder what follows them.
        assert_eq!(shown_name("Lan\u{202e}gnp.exe"), r"Lan\u{202e}gnp.exe");
        for bidi in [
            '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200e}', '\u{200f}', '\u{61c}',
        ] {
            let text = format!("x{bidi}y");
            let cleaned = shown_name(&text);
            assert!(!cleaned.contains(bidi), "{bidi:?}");
            assert_eq!(cleaned, format!("x{}y", bidi.escape_unicode()));
        }
        // Long text is cut: names at 64 characters, messages at 200, then `…`.
        let name = "ễ".repeat(100);
        assert_eq!(shown_name(&name), format!("{}…", "ễ".repeat(NAME_CHARS)));
        assert_eq!(shown_name(&name[..64 * "ễ".len()]), "ễ".repeat(64));
        let message = "x".repeat(10_000);
        assert_eq!(shown(&message).chars().count(), MESSAGE_CHARS + 1);
        assert!(shown(&message).ends_with('…'));
        // The cap counts what is shown: escapes are not split, and cannot make it longer.
        let hostile = "\x1b".repeat(1_000);
        let cleaned = shown_name(&hostile);
        assert_eq!(cleaned, format!("{}…", r"\u{1b}".repeat(NAME_CHARS / 6)));
        // Showing shown text again changes nothing.
        for text in [&hostile, &name, &message, &"a\u{202e}\n".repeat(40)] {
            let once = shown_name(text).into_owned();
            assert_eq!(shown_name(&once), once);
            let once = shown(text).into_owned();
            assert_eq!(shown(&once), once);
        }
    }
}
