//! Registering accounts as clients ask for them: the per-address limit on accounts made, retries
//! of a registration whose answer was lost, and identical calls that arrive at once.
//!
//! [`GameManager::register_with_key`] makes an account; [`Registrar`] decides whether a call
//! may, and what it costs the caller's address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::GameError;
use crate::limits::RateLimiter;
use crate::manager::{GameManager, Registered};

/// Longer than any API key (53 characters): no lock is made for it, and the manager refuses it.
const MAX_KEY_LEN: usize = 64;

/// Registrations from clients, within the accounts each address may make.
#[derive(Debug)]
pub struct Registrar {
    manager: Arc<GameManager>,
    limiter: Arc<RateLimiter>,
    one_at_a_time: OneAtATime,
}

impl Registrar {
    /// Registrations through `manager`, at most what `limiter` lets each address make.
    #[must_use]
    pub fn new(manager: Arc<GameManager>, limiter: Arc<RateLimiter>) -> Registrar {
        Registrar {
            manager,
            limiter,
            one_at_a_time: OneAtATime::default(),
        }
    }

    /// Registers `username` for the client at `client` (`None`: not counted), with its first
    /// API key `chosen` by the client or made here.
    ///
    /// A call with a chosen key that already made this account (a retry whose first answer was
    /// lost) is answered as that call was, before the limit is counted, and counts nothing.
    /// Calls with the same key wait for each other on this node, so that a retry racing its
    /// first call finds the account that call made.
    ///
    /// # Errors
    ///
    /// [`GameError::RegistrationsExhausted`] when the address made its accounts for now;
    /// otherwise what [`GameManager::register_with_key`] refuses.
    pub async fn register(
        &self,
        client: Option<IpAddr>,
        username: &str,
        chosen: Option<&str>,
    ) -> Result<Registered, GameError> {
        // An outside probe's four identical calls at once were three refused by the limit.
        let _one = match chosen {
            Some(key) if key.len() <= MAX_KEY_LEN => Some(self.one_at_a_time.lock(key).await),
            _ => None,
        };
        // One whose first call took the address's last registration must still get its key
        // (an outside probe's retry was refused for an hour).
        if let Some(key) = chosen
            && let Some(registered) = self.manager.registered_before_with(username, key).await?
        {
            return Ok(registered);
        }
        self.register_new(client, username, chosen).await
    }

    /// A registration that is not a retry, within the address's registrations.
    async fn register_new(
        &self,
        client: Option<IpAddr>,
        username: &str,
        chosen: Option<&str>,
    ) -> Result<Registered, GameError> {
        if let Some(ip) = client {
            self.limiter.check(ip).map_err(|limited| {
                // Whole accounts an hour, as operators set the limit (a u32: the cast
                // saturates and the rounding undoes the division by 3600).
                let per_hour = (limited.limit.per_second * 3600.0).round() as u32;
                GameError::RegistrationsExhausted {
                    per_hour,
                    retry_after: limited.retry_after,
                }
            })?;
        }
        let result = self.manager.register_with_key(username, chosen).await;
        // The limit counts accounts made: a name refused or taken made none, and a newcomer
        // trying names (or a household behind one address) must not be locked out by them; nor
        // does a retry that raced its first call. A key refused for its id is not given back:
        // each such answer says a key id exists, and an outside probe asked without limit.
        let refund = match &result {
            Ok(registered) => !registered.made,
            Err(GameError::InvalidArgument { .. } | GameError::UsernameTaken(_)) => true,
            Err(_) => false,
        };
        if let (Some(ip), true) = (client, refund) {
            self.limiter.refund(ip);
        }
        result
    }
}

/// One lock per key, made while someone holds or waits for it and dropped after.
#[derive(Debug, Default)]
struct OneAtATime(Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl OneAtATime {
    async fn lock(&self, key: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            // Locks nobody holds or waits for any more go (their only owner is the map).
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            Arc::clone(locks.entry(key.to_owned()).or_default())
        };
        lock.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::SystemTime;

    use super::*;
    use crate::account::ApiKey;
    use crate::faulty_store::FaultyStore;
    use crate::hub::Hub;
    use crate::limits::RateLimit;
    use crate::manager::ManagerLimits;
    use crate::memory::{MemoryLimits, MemoryStore};
    use crate::store::GameStore;

    const HOME: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1)));

    /// A registrar letting each address make `burst` accounts an hour.
    fn registrar(burst: u32) -> Registrar {
        let store = Arc::new(MemoryStore::new(MemoryLimits::default()));
        let manager = GameManager::new(
            store as Arc<dyn GameStore>,
            Hub::new(64),
            ManagerLimits::default(),
        );
        registrar_over(Arc::new(manager), burst)
    }

    fn registrar_over(manager: Arc<GameManager>, burst: u32) -> Registrar {
        let limit = RateLimit {
            per_second: f64::from(burst) / 3600.0,
            burst,
        };
        Registrar::new(manager, Arc::new(RateLimiter::new(Some(limit), false)))
    }

    fn key() -> String {
        ApiKey::generate(SystemTime::now()).0.expose().to_owned()
    }

    #[tokio::test]
    async fn the_limit_counts_accounts_made_and_says_when_to_come_back() {
        let r = registrar(2);
        r.register(HOME, "Lan", None).await.unwrap();
        // Refused names made nothing and cost nothing.
        for name in ["lan", "", "a b\u{0}"] {
            assert!(r.register(HOME, name, None).await.is_err(), "{name:?}");
        }
        r.register(HOME, "Minh", None).await.unwrap();
        match r.register(HOME, "Hoa", None).await {
            Err(error @ GameError::RegistrationsExhausted { retry_after, .. }) => {
                assert!(
                    retry_after > std::time::Duration::from_secs(60),
                    "{retry_after:?}"
                );
                assert!(error.to_string().contains("at most 2 an hour"), "{error}");
            }
            answer => panic!("{answer:?}"),
        }
        // Another address has its own; one without an address is not counted.
        let elsewhere = Some(IpAddr::V4(std::net::Ipv4Addr::new(198, 51, 100, 7)));
        r.register(elsewhere, "Hoa", None).await.unwrap();
        r.register(None, "Tuan", None).await.unwrap();
    }

    #[tokio::test]
    async fn a_retry_is_answered_after_the_limit_is_reached() {
        let r = registrar(1);
        let key = key();
        let first = r.register(HOME, "Lan", Some(&key)).await.unwrap();
        assert!(first.made);
        let again = r.register(HOME, "LAN", Some(&key)).await.unwrap();
        assert!(!again.made);
        assert_eq!(again.account.id, first.account.id);
        // The limit is reached all the same.
        assert!(matches!(
            r.register(HOME, "Minh", None).await,
            Err(GameError::RegistrationsExhausted { .. })
        ));
    }

    #[tokio::test]
    async fn a_key_refused_for_its_id_counts_and_a_malformed_one_does_not() {
        let r = registrar(2);
        let key = key();
        r.register(HOME, "Lan", Some(&key)).await.unwrap();
        for _ in 0..3 {
            assert!(matches!(
                r.register(HOME, "Minh", Some("oqk_short")).await,
                Err(GameError::InvalidArgument { .. })
            ));
        }
        // Each such answer says the id exists: it costs a registration.
        assert_eq!(
            r.register(HOME, "Minh", Some(&key)).await.unwrap_err(),
            GameError::KeyIdTaken
        );
        assert!(matches!(
            r.register(HOME, "Minh", None).await,
            Err(GameError::RegistrationsExhausted { .. })
        ));
    }

    #[tokio::test]
    async fn identical_calls_at_once_make_one_account_within_one_registration() {
        // A store that lets other calls run while it reads and writes, as a database does.
        let (store, manager) = FaultyStore::with_manager();
        store.batched.store(true, Ordering::SeqCst);
        let r = registrar_over(manager, 1);
        let key = key();
        let calls = (0..4).map(|_| r.register(HOME, "Hoa", Some(&key)));
        let answers = futures::future::join_all(calls).await;
        let made: Vec<_> = answers.into_iter().map(|answer| answer.unwrap()).collect();
        assert_eq!(made.iter().filter(|r| r.made).count(), 1);
        assert!(made.iter().all(|r| r.account.id == made[0].account.id));
    }
}
