//! Accounts: players who come back. An account has a unique [`Username`], Glicko-2 ratings per
//! [`Speed`], a count of its results, and API keys that authenticate it.
//!
//! Anonymous play is unchanged: a seat without an account is a display name and a seat token,
//! as before. A seat taken with an account's API key records the account
//! ([`SeatInfo::account`](crate::SeatInfo)); the seat still gets its own token, and the account's
//! API key also works for that seat's calls.
//!
//! An API key is `oqk_<id>_<secret>`: the id (16 characters of lower-case base32) finds the key
//! in the store, the secret (192 random bits, base64url) proves it. Like seat tokens, the store
//! keeps only the SHA-256 of the whole key, compared in constant time, and the key is shown once.

use std::collections::BTreeMap;
use std::fmt;
use std::time::SystemTime;

use crate::rating::{Rating, Speed};
use crate::token::{PlayerToken, TokenHash, random_game_id};
use crate::username::Username;

/// An account's opaque id (never shown as a name: usernames are).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccountId(String);

impl AccountId {
    /// A fresh random id.
    #[must_use]
    pub fn generate() -> AccountId {
        AccountId(random_game_id())
    }

    /// An id read back from a store (not checked: stores only hold ids they made).
    #[must_use]
    pub fn from_stored(id: String) -> AccountId {
        AccountId(id)
    }

    /// The id's text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

const KEY_PREFIX: &str = "oqk_";
const KEY_ID_LEN: usize = 16;
/// Fewest distinct characters in a chosen key's secret ([`ApiKey::chosen`]). 32 characters
/// drawn from 64 show about 25 distinct, and fewer than 12 once in 7 × 10^12.
const MIN_DISTINCT_IN_SECRET: usize = 12;

/// A secret API key, as handed to its owner once. `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

/// What a store keeps of an API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyRecord {
    /// The public part, to list and revoke the key by.
    pub id: String,
    /// SHA-256 of the whole key.
    pub hash: TokenHash,
    /// When it was made.
    pub created: SystemTime,
    /// When it was revoked; a revoked key authenticates nothing.
    pub revoked: Option<SystemTime>,
}

impl ApiKey {
    /// A fresh key and the record to store.
    #[must_use]
    pub fn generate(now: SystemTime) -> (ApiKey, ApiKeyRecord) {
        let id = random_game_id();
        let secret = PlayerToken::generate();
        let key = ApiKey(format!("{KEY_PREFIX}{id}_{}", secret.expose()));
        let record = key.record(now);
        (key, record)
    }

    /// A key its owner made, to register with ([`GameManager::register_with_key`]), so that
    /// the registration can be retried: the shape of a key the server makes, its secret from
    /// a cryptographic random source. A secret of few distinct characters (`AAAA…`) is
    /// refused ([`MIN_DISTINCT_IN_SECRET`]).
    ///
    /// # Errors
    ///
    /// What is wrong with it, as a sentence for the `api_key` field.
    ///
    /// [`GameManager::register_with_key`]: crate::GameManager::register_with_key
    pub fn chosen(text: &str) -> Result<ApiKey, &'static str> {
        let (_, secret) = Self::split(text).ok_or(
            "is not an API key: oqk_, 16 characters of 0-9 and a-z, _, and 32 random \
             characters of A-Z, a-z, 0-9, - and _",
        )?;
        let mut seen = [false; 128];
        for byte in secret.bytes() {
            seen[usize::from(byte & 0x7f)] = true;
        }
        if seen.iter().filter(|&&s| s).count() < MIN_DISTINCT_IN_SECRET {
            return Err(
                "has a secret that is not random: make its 32 characters with a \
                        cryptographic random generator",
            );
        }
        Ok(ApiKey(text.to_owned()))
    }

    /// The record to store for this key, made at `now`.
    #[must_use]
    pub fn record(&self, now: SystemTime) -> ApiKeyRecord {
        ApiKeyRecord {
            id: self.id().to_owned(),
            hash: self.hash(),
            created: now,
            revoked: None,
        }
    }

    /// Whether a bearer credential is meant as an API key: it begins with `oqk_` and is not a
    /// seat token (32 characters of base64url, which begin with `oqk_` once in 17 million).
    /// Such a credential that is not a well-formed key is a bad key, never taken for anything
    /// else (on `CreateGame`, that would seat its sender anonymously).
    #[must_use]
    pub fn is_meant(text: &str) -> bool {
        text.starts_with(KEY_PREFIX) && !PlayerToken::has_shape(text)
    }

    /// Wraps a key received from a client, if it has the shape of one.
    #[must_use]
    pub fn from_client(text: &str) -> Option<ApiKey> {
        Self::split(text).map(|_| ApiKey(text.to_owned()))
    }

    fn split(text: &str) -> Option<(&str, &str)> {
        let rest = text.strip_prefix(KEY_PREFIX)?;
        let id = rest.get(..KEY_ID_LEN)?;
        let secret = rest.get(KEY_ID_LEN..)?.strip_prefix('_')?;
        let id_ok = id
            .bytes()
            .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase());
        let secret_ok = secret.len() == 32
            && secret
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_');
        (id_ok && secret_ok).then_some((id, secret))
    }

    /// The public id part, to find the key's record.
    #[must_use]
    pub fn id(&self) -> &str {
        Self::split(&self.0).map_or("", |(id, _)| id)
    }

    /// The key text, to return to its owner (and nowhere else).
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The hash a store keeps.
    #[must_use]
    pub fn hash(&self) -> TokenHash {
        PlayerToken::from_client(&self.0).hash()
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Results of finished games (aborted games do not count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Record {
    /// Games won.
    pub wins: u32,
    /// Games drawn.
    pub draws: u32,
    /// Games lost.
    pub losses: u32,
}

/// An account.
#[derive(Debug, Clone, PartialEq)]
pub struct Account {
    /// Its id.
    pub id: AccountId,
    /// Its name, unique by [`Username::key`].
    pub username: Username,
    /// When it was registered.
    pub created: SystemTime,
    /// Ratings per speed; a speed never played is absent (and rates as [`Rating::default`]).
    pub ratings: BTreeMap<Speed, Rating>,
    /// Results of all its finished games, rated or not.
    pub record: Record,
    /// Bumped by every change: two games ending at once for the same account cannot both
    /// write ratings computed from the same old one (optimistic concurrency, like games).
    pub version: u64,
}

impl Account {
    /// A new account.
    #[must_use]
    pub fn new(username: Username, now: SystemTime) -> Account {
        Account {
            id: AccountId::generate(),
            username,
            created: now,
            ratings: BTreeMap::new(),
            record: Record::default(),
            version: 1,
        }
    }

    /// The rating at `speed` (the default for a speed never played).
    #[must_use]
    pub fn rating(&self, speed: Speed) -> Rating {
        self.ratings.get(&speed).copied().unwrap_or_default()
    }
}

/// A change to an account committed with a game: the account as it is to be stored, if the
/// stored one is still at `expected_version`.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountUpdate {
    /// The new account (its `version` is `expected_version + 1`).
    pub account: Account,
    /// The version it was read at.
    pub expected_version: u64,
}

/// A seat's account, as a game shows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SeatAccount {
    /// The account.
    pub id: AccountId,
    /// Its username when the seat was taken.
    pub username: String,
    /// Its rating at the game's speed when the seat was taken (rounded), if the game has one.
    pub rating: Option<i32>,
    /// Whether that rating was provisional.
    pub provisional: bool,
}

/// One side's rating before and after a rated game (rounded, for display; the account holds the
/// exact values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RatingChange {
    /// Before the game.
    pub before: i32,
    /// After it.
    pub after: i32,
    /// Whether the rating after the game is still provisional.
    pub provisional: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_keys_are_recognised_by_shape_and_hash_whole() {
        let (key, record) = ApiKey::generate(SystemTime::UNIX_EPOCH);
        assert!(ApiKey::is_meant(key.expose()));
        assert!(ApiKey::from_client(key.expose()).is_some());
        assert_eq!(key.id(), record.id);
        assert!(key.hash().matches(&record.hash));
        let back = ApiKey::from_client(key.expose()).unwrap();
        assert_eq!(back.hash(), record.hash);
        // A seat token is never meant as a key, even one that begins with `oqk_` by chance.
        for _ in 0..100 {
            assert!(!ApiKey::is_meant(PlayerToken::generate().expose()));
        }
        assert!(!ApiKey::is_meant("oqk_AAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
        assert!(PlayerToken::has_shape("oqk_AAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
        for bad in [
            "",
            "oqk_",
            "oqk_0123456789abcdef",
            "oqk_0123456789abcdef_short",
            "oqk_0123456789ABCDEF_0123456789abcdef0123456789abcdef",
            "xqk_0123456789abcdef_0123456789abcdef0123456789abcdef",
            "oqk_0123456789abcdef_0123456789abcdef0123456789abcde!",
            "oqk_0123456789abcdéf_0123456789abcdef0123456789abcdef",
        ] {
            assert!(ApiKey::from_client(bad).is_none(), "{bad}");
            // Meant as a key (so refused as a bad one), except what does not begin with oqk_.
            assert_eq!(ApiKey::is_meant(bad), bad.starts_with("oqk_"), "{bad}");
        }
        assert!(format!("{key:?}").contains("redacted"));
    }
}
