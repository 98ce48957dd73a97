//! Secret player tokens and random game ids.
//!
//! A token is 192 bits from the thread-local CSPRNG (`rand::rng()`, ChaCha12 reseeded from the
//! OS), base64url-encoded so it fits in metadata and URLs unchanged. The server keeps only the
//! SHA-256 of a token: a leaked store does not let anyone play, and tokens never need to be
//! shown again.

use std::fmt;

use rand::Rng as _;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

const TOKEN_BYTES: usize = 24;

/// A secret player token, as handed to the player once. `Debug` does not print it, so it cannot
/// leak into logs by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct PlayerToken(String);

impl PlayerToken {
    /// A fresh random token.
    #[must_use]
    pub fn generate() -> PlayerToken {
        PlayerToken(random_base64url::<TOKEN_BYTES>())
    }

    /// Wraps a token received from a client. Any string is accepted: a malformed token simply
    /// matches no seat.
    #[must_use]
    pub fn from_client(token: &str) -> PlayerToken {
        PlayerToken(token.to_owned())
    }

    /// Whether `text` has the shape of a token this server makes: 32 characters of base64url.
    #[must_use]
    pub fn has_shape(text: &str) -> bool {
        text.len() == TOKEN_BYTES / 3 * 4
            && text
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
    }

    /// The token text, to return to its owner (and nowhere else).
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The hash the server stores instead of the token.
    #[must_use]
    pub fn hash(&self) -> TokenHash {
        TokenHash(Sha256::digest(self.0.as_bytes()).into())
    }
}

impl fmt::Debug for PlayerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PlayerToken(<redacted>)")
    }
}

/// SHA-256 of a [`PlayerToken`]: what a store persists.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    /// Rebuilds a hash read back from storage.
    #[must_use]
    pub const fn from_bytes(bytes: [u8; 32]) -> TokenHash {
        TokenHash(bytes)
    }

    /// The raw hash, to persist.
    #[must_use]
    pub const fn to_bytes(self) -> [u8; 32] {
        self.0
    }

    /// Constant-time comparison, so response timing says nothing about how much of a guessed
    /// token was right. Compared as four words: byte by byte, `subtle` spent ~700 instructions
    /// a move here, every byte behind its own optimisation barrier.
    #[must_use]
    pub fn matches(&self, other: &TokenHash) -> bool {
        words(&self.0).ct_eq(&words(&other.0)).into()
    }
}

fn words(bytes: &[u8; 32]) -> [u64; 4] {
    let mut words = [0; 4];
    for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut le = [0; 8];
        le.copy_from_slice(chunk);
        *word = u64::from_le_bytes(le);
    }
    words
}

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenHash(<redacted>)")
    }
}

/// A new random game id: 16 characters of Crockford's base32 in lower case (80 bits).
/// Unguessable ids are not a security boundary (games are public), they just keep ids from
/// leaking how many games exist. Not base64url: an id starting with `-` reads as a flag on
/// every command line, and people type these ids.
#[must_use]
pub(crate) fn random_game_id() -> String {
    const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
    let mut rng = rand::rng();
    (0..16)
        .map(|_| char::from(ALPHABET[rng.random_range(0..32)]))
        .collect()
}

fn random_base64url<const N: usize>() -> String {
    let mut bytes = [0u8; N];
    rand::rng().fill(&mut bytes[..]);
    base64url(&bytes)
}

/// Unpadded base64url (RFC 4648 §5). Hand-written: eight lines do not justify a dependency.
pub(crate) fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_url_safe() {
        let a = PlayerToken::generate();
        let b = PlayerToken::generate();
        assert_ne!(a, b);
        // 192 bits in 6-bit characters.
        assert_eq!(a.expose().len(), 32);
        assert!(
            a.expose()
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
    }

    #[test]
    fn hash_matches_only_its_token() {
        let token = PlayerToken::generate();
        let hash = token.hash();
        assert!(hash.matches(&PlayerToken::from_client(token.expose()).hash()));
        assert!(!hash.matches(&PlayerToken::generate().hash()));
        assert!(!hash.matches(&PlayerToken::from_client("").hash()));
        assert_eq!(TokenHash::from_bytes(hash.to_bytes()), hash);
    }

    #[test]
    fn a_hash_differing_in_any_one_bit_does_not_match() {
        let bytes = PlayerToken::generate().hash().to_bytes();
        let hash = TokenHash::from_bytes(bytes);
        for byte in 0..32 {
            for bit in 0..8 {
                let mut other = bytes;
                other[byte] ^= 1 << bit;
                assert!(
                    !hash.matches(&TokenHash::from_bytes(other)),
                    "byte {byte} bit {bit}"
                );
            }
        }
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let token = PlayerToken::generate();
        assert!(!format!("{token:?}").contains(token.expose()));
        assert!(!format!("{:?}", token.hash()).contains(token.expose()));
    }

    #[test]
    fn base64url_matches_rfc_4648_vectors() {
        assert_eq!(base64url(b""), "");
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(b"foob"), "Zm9vYg");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn game_ids_are_safe_on_a_command_line() {
        for _ in 0..1000 {
            let id = random_game_id();
            assert_eq!(id.len(), 16);
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
                "{id}"
            );
        }
    }
}
