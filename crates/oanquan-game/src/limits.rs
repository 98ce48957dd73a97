//! Abuse limits per client, so that one misbehaving client cannot hurt the others' games:
//!
//! * [`RateLimiter`]: a token bucket of requests per client address (the transport checks it
//!   before any RPC runs);
//! * [`OpenGames`]: how many waiting or active games one client address has created (the
//!   manager checks it in `create_game_from`; the store keeps each game's creator, so a restart
//!   counts them again);
//! * [`ClientPlaces`]: how many of something a client holds open at once (the server's health
//!   `Watch` streams), each place given back when its holder drops it;
//! * idle games are aborted by [`crate::reaper`], a client of the manager.
//!
//! A "client" is a peer address as the TCP connection shows it, normalised by [`client_key`]
//! (IPv4-mapped IPv6 as IPv4, other IPv6 by their /64 prefix, which one subscriber usually
//! holds whole). Behind a reverse proxy every client has the proxy's address: enforce per-client
//! limits at the proxy then. Loopback peers can be exempted (the default), so local tools,
//! tests and benchmarks are not throttled.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tracing::warn;

use crate::error::GameError;
use crate::model::GameId;

/// Clients tracked at most by one limiter; past it, idle entries are pruned, and if none is
/// idle a new client is let through untracked (failing open: an attacker with that many
/// addresses must not lock everybody out).
pub const MAX_TRACKED_CLIENTS: usize = 65_536;

/// Most plies a hosted game may last (its rule set's `max_plies`). Every move of a game is
/// kept, replayed when the game is loaded, and sent to a spectator who watches from the start;
/// a custom rule set may ask for billions of plies (and turn the repetition rule off), which
/// would let two seats of one client grow one game without end. The presets ask for 300.
pub const MAX_GAME_PLIES: u32 = 10_000;

/// Refuses a rule set a hosted game may not use (see [`MAX_GAME_PLIES`]); `field` names the
/// request's rules (`rules`).
///
/// # Errors
///
/// [`GameError::InvalidArgument`] naming `{field}.rule_set.max_plies`.
pub fn hosted_rules(rules: &oanquan_rules::Rules, field: &str) -> Result<(), GameError> {
    if rules.max_plies > MAX_GAME_PLIES {
        return Err(GameError::invalid(
            format!("{field}.rule_set.max_plies"),
            format!(
                "{} plies is longer than a game on this server may last: at most \
                 {MAX_GAME_PLIES}",
                rules.max_plies
            ),
        ));
    }
    Ok(())
}

/// The key a client's limits are counted under: IPv4 (also when IPv4-mapped in IPv6) as is,
/// IPv6 by its /64 prefix.
#[must_use]
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only plain map operations happen under these locks; a poisoned map is still consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Requests per second a client may make on average, and how many at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Tokens added per second.
    pub per_second: f64,
    /// Bucket size: requests allowed in a burst.
    pub burst: u32,
}

/// A client went over its [`RateLimit`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimited {
    /// When one request will be allowed again.
    pub retry_after: Duration,
    /// The limit.
    pub limit: RateLimit,
}

impl RateLimited {
    /// The refusal's text, saying what came too often: `"requests"` for the request limit (the
    /// [`Display`](fmt::Display) text), `"health checks"` for the health service's own.
    #[must_use]
    pub fn refusal(&self, what: &str) -> String {
        format!(
            "too many {what} from your address (limit {} per second, bursts of {}); retry in {} ms",
            self.limit.per_second,
            self.limit.burst,
            self.retry_after.as_millis().max(1)
        )
    }
}

impl fmt::Display for RateLimited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.refusal("requests"))
    }
}

impl From<RateLimited> for GameError {
    fn from(limited: RateLimited) -> GameError {
        GameError::LimitExceeded(limited.to_string())
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// A token bucket per client. See the module docs.
#[derive(Debug)]
pub struct RateLimiter {
    limit: Option<RateLimit>,
    exempt_loopback: bool,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

impl RateLimiter {
    /// A limiter; `None`, a zero rate or a zero burst means no limit.
    #[must_use]
    pub fn new(limit: Option<RateLimit>, exempt_loopback: bool) -> RateLimiter {
        let limit = limit.filter(|l| l.per_second > 0.0 && l.burst > 0);
        RateLimiter {
            limit,
            exempt_loopback,
            buckets: Mutex::default(),
        }
    }

    /// Takes one token for `ip` now.
    ///
    /// # Errors
    ///
    /// [`RateLimited`] when its bucket is empty.
    pub fn check(&self, ip: IpAddr) -> Result<(), RateLimited> {
        self.check_at(ip, Instant::now())
    }

    /// [`RateLimiter::check`] at a given time (for tests).
    ///
    /// # Errors
    ///
    /// [`RateLimited`] when its bucket is empty.
    pub fn check_at(&self, ip: IpAddr, now: Instant) -> Result<(), RateLimited> {
        let Some(limit) = self.limit else {
            return Ok(());
        };
        if self.exempt_loopback && ip.is_loopback() {
            return Ok(());
        }
        let key = client_key(ip);
        let burst = f64::from(limit.burst);
        let mut buckets = lock(&self.buckets);
        if buckets.len() >= MAX_TRACKED_CLIENTS && !buckets.contains_key(&key) {
            // Full buckets carry no information: drop them.
            buckets.retain(|_, b| {
                b.tokens + now.saturating_duration_since(b.updated).as_secs_f64() * limit.per_second
                    < burst
            });
            if buckets.len() >= MAX_TRACKED_CLIENTS {
                warn!("rate limiter tracks too many clients; letting a new one through");
                return Ok(());
            }
        }
        let bucket = buckets.entry(key).or_insert(Bucket {
            tokens: burst,
            updated: now,
        });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * limit.per_second).min(burst);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - bucket.tokens) / limit.per_second;
            Err(RateLimited {
                retry_after: Duration::from_secs_f64(wait.clamp(0.001, 3600.0)),
                limit,
            })
        }
    }

    /// Gives back the token [`RateLimiter::check`] took for `ip`, for an attempt that turned
    /// out to cost nothing (a registration refused for its name).
    pub fn refund(&self, ip: IpAddr) {
        let Some(limit) = self.limit else {
            return;
        };
        if let Some(bucket) = lock(&self.buckets).get_mut(&client_key(ip)) {
            bucket.tokens = (bucket.tokens + 1.0).min(f64::from(limit.burst));
        }
    }
}

#[derive(Debug, Default)]
struct OpenInner {
    per_client: HashMap<IpAddr, usize>,
    games: HashMap<GameId, IpAddr>,
}

/// Waiting or active games per client, since the server started. See the module docs.
#[derive(Debug)]
pub struct OpenGames {
    max: usize,
    exempt_loopback: bool,
    inner: Mutex<OpenInner>,
}

/// A reserved place for one more open game of a client; given back on drop unless
/// [`OpenGameSlot::bind`] ties it to the game created.
#[derive(Debug)]
#[must_use]
pub struct OpenGameSlot {
    owner: Option<(Arc<OpenGames>, IpAddr)>,
}

impl OpenGames {
    /// At most `max` open games per client; 0 means no limit.
    #[must_use]
    pub fn new(max: usize, exempt_loopback: bool) -> Arc<OpenGames> {
        Arc::new(OpenGames {
            max,
            exempt_loopback,
            inner: Mutex::default(),
        })
    }

    /// Reserves a place for a game `client` is about to create. Unknown clients (`None`) and,
    /// if exempted, loopback ones are not counted.
    ///
    /// # Errors
    ///
    /// [`GameError::LimitExceeded`] if the client already has the maximum of open games.
    pub fn reserve(self: &Arc<Self>, client: Option<IpAddr>) -> Result<OpenGameSlot, GameError> {
        let client = match client {
            Some(ip) if self.max > 0 && !(self.exempt_loopback && ip.is_loopback()) => {
                client_key(ip)
            }
            _ => return Ok(OpenGameSlot { owner: None }),
        };
        let mut inner = lock(&self.inner);
        let open = inner.per_client.entry(client).or_insert(0);
        if *open >= self.max {
            return Err(GameError::LimitExceeded(format!(
                "your address already has {} open games (the limit); finish, resign or abort one first",
                *open
            )));
        }
        *open += 1;
        Ok(OpenGameSlot {
            owner: Some((Arc::clone(self), client)),
        })
    }

    /// Counts a game that `creator` created before a restart (from the store), even beyond the
    /// limit: the client then cannot create more until it has fewer. Skipped, like in
    /// [`OpenGames::reserve`], when there is no limit or the address is an exempt loopback one.
    pub fn restore(&self, id: &GameId, creator: IpAddr) {
        if self.max == 0 || (self.exempt_loopback && creator.is_loopback()) {
            return;
        }
        let client = client_key(creator);
        let mut inner = lock(&self.inner);
        if inner.games.insert(id.clone(), client).is_none() {
            *inner.per_client.entry(client).or_insert(0) += 1;
        }
    }

    /// A game is over: its place is free again.
    pub fn release(&self, id: &GameId) {
        let mut inner = lock(&self.inner);
        if let Some(client) = inner.games.remove(id) {
            inner.unreserve(client);
        }
    }

    /// Open games counted for `ip`.
    #[must_use]
    pub fn count(&self, ip: IpAddr) -> usize {
        lock(&self.inner)
            .per_client
            .get(&client_key(ip))
            .copied()
            .unwrap_or(0)
    }
}

impl OpenInner {
    fn unreserve(&mut self, client: IpAddr) {
        if let Some(open) = self.per_client.get_mut(&client) {
            *open -= 1;
            if *open == 0 {
                self.per_client.remove(&client);
            }
        }
    }
}

impl OpenGameSlot {
    /// Ties the place to the game created: it is freed when that game is over.
    pub fn bind(mut self, id: &GameId) {
        if let Some((games, client)) = self.owner.take() {
            lock(&games.inner).games.insert(id.clone(), client);
        }
    }
}

impl Drop for OpenGameSlot {
    fn drop(&mut self) {
        if let Some((games, client)) = self.owner.take() {
            lock(&games.inner).unreserve(client);
        }
    }
}

/// Places per client for something a client holds open (a stream): at most `max` each, 0 for
/// no limit; unknown clients and, if exempted, loopback ones are not counted. A place is given
/// back when its [`ClientPlace`] drops. At most one entry per client holding a place, so the
/// map is bounded by what the places themselves are (streams, each bounded elsewhere).
#[derive(Debug)]
pub struct ClientPlaces {
    max: usize,
    exempt_loopback: bool,
    held: Mutex<HashMap<IpAddr, usize>>,
}

/// One client's place in [`ClientPlaces`], held for as long as this lives.
#[derive(Debug)]
#[must_use]
pub struct ClientPlace {
    owner: Option<(Arc<ClientPlaces>, IpAddr)>,
}

impl ClientPlaces {
    /// At most `max` places per client; 0 means no limit.
    #[must_use]
    pub fn new(max: usize, exempt_loopback: bool) -> Arc<ClientPlaces> {
        Arc::new(ClientPlaces {
            max,
            exempt_loopback,
            held: Mutex::default(),
        })
    }

    /// The most places one client may hold (0: no limit).
    #[must_use]
    pub fn max(&self) -> usize {
        self.max
    }

    /// A place for `client`, or `None` when it already holds the maximum.
    pub fn take(self: &Arc<Self>, client: Option<IpAddr>) -> Option<ClientPlace> {
        let client = match client {
            Some(ip) if self.max > 0 && !(self.exempt_loopback && ip.is_loopback()) => {
                client_key(ip)
            }
            _ => return Some(ClientPlace::uncounted()),
        };
        let mut held = lock(&self.held);
        let count = held.entry(client).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(ClientPlace {
            owner: Some((Arc::clone(self), client)),
        })
    }

    /// Places `ip` holds.
    #[must_use]
    pub fn count(&self, ip: IpAddr) -> usize {
        lock(&self.held).get(&client_key(ip)).copied().unwrap_or(0)
    }

    /// Whether no client holds a place.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        lock(&self.held).is_empty()
    }
}

impl ClientPlace {
    /// A place counted for no client (a caller without an address to count).
    pub fn uncounted() -> ClientPlace {
        ClientPlace { owner: None }
    }

    /// The client key this place is counted under; `None` when it is not counted (no limit,
    /// an exempt loopback client, or no address).
    #[must_use]
    pub fn client(&self) -> Option<IpAddr> {
        self.owner.as_ref().map(|(_, client)| *client)
    }
}

impl Drop for ClientPlace {
    fn drop(&mut self) {
        if let Some((places, client)) = self.owner.take() {
            let mut held = lock(&places.held);
            if let Some(count) = held.get_mut(&client) {
                *count -= 1;
                if *count == 0 {
                    held.remove(&client);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn clients_are_keyed_by_ipv4_or_ipv6_prefix() {
        assert_eq!(client_key(ip("192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(client_key(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(client_key(ip("2001:db8:1:2:3:4:5:6")), ip("2001:db8:1:2::"));
        assert_eq!(
            client_key(ip("2001:db8:1:2:ffff::1")),
            client_key(ip("2001:db8:1:2::9"))
        );
    }

    #[test]
    fn token_bucket_allows_bursts_then_refills() {
        let limit = RateLimit {
            per_second: 10.0,
            burst: 3,
        };
        let limiter = RateLimiter::new(Some(limit), true);
        let t0 = Instant::now();
        let a = ip("192.0.2.1");
        for _ in 0..3 {
            limiter.check_at(a, t0).unwrap();
        }
        let limited = limiter.check_at(a, t0).unwrap_err();
        assert!(limited.retry_after > Duration::ZERO);
        assert!(limited.retry_after <= Duration::from_millis(100));
        // Another client is not affected.
        limiter.check_at(ip("192.0.2.2"), t0).unwrap();
        // 100 ms later one token is back.
        limiter
            .check_at(a, t0 + Duration::from_millis(100))
            .unwrap();
        assert!(
            limiter
                .check_at(a, t0 + Duration::from_millis(100))
                .is_err()
        );
        // Loopback is exempt; no limit means no limit.
        for _ in 0..10 {
            limiter.check_at(ip("127.0.0.1"), t0).unwrap();
            RateLimiter::new(None, false).check_at(a, t0).unwrap();
        }
        let message = GameError::from(limited).to_string();
        assert!(message.contains("too many requests"), "{message}");
    }

    #[test]
    fn open_games_are_counted_per_client_and_freed() {
        let games = OpenGames::new(2, false);
        let a = Some(ip("192.0.2.1"));
        let one = GameId::parse("one").unwrap();
        games.reserve(a).unwrap().bind(&one);
        let pending = games.reserve(a).unwrap();
        assert!(matches!(
            games.reserve(a).unwrap_err(),
            GameError::LimitExceeded(_)
        ));
        games
            .reserve(Some(ip("192.0.2.2")))
            .unwrap()
            .bind(&GameId::parse("three").unwrap());
        drop(pending); // creation failed: the place is free again
        games
            .reserve(a)
            .unwrap()
            .bind(&GameId::parse("two").unwrap());
        assert_eq!(games.count(ip("192.0.2.1")), 2);
        games.release(&GameId::parse("two").unwrap());
        assert_eq!(games.count(ip("192.0.2.1")), 1);
        // Unknown clients are not counted.
        for _ in 0..5 {
            games.reserve(None).unwrap().bind(&one);
        }
    }

    #[test]
    fn client_places_are_counted_per_client_and_given_back_on_drop() {
        let places = ClientPlaces::new(2, true);
        let a: IpAddr = "203.0.113.7".parse().unwrap();
        let a_mapped: IpAddr = "::ffff:203.0.113.7".parse().unwrap();
        let b: IpAddr = "2001:db8::1".parse().unwrap();
        let b_same_64: IpAddr = "2001:db8::2".parse().unwrap();
        let first = places.take(Some(a)).unwrap();
        let second = places.take(Some(a_mapped)).unwrap();
        assert!(
            places.take(Some(a)).is_none(),
            "the same client, mapped or not"
        );
        let _b1 = places.take(Some(b)).unwrap();
        let _b2 = places.take(Some(b_same_64)).unwrap();
        assert!(places.take(Some(b)).is_none(), "one /64 is one client");
        drop(first);
        assert_eq!(places.count(a), 1);
        let _again = places.take(Some(a)).unwrap();
        drop(second);
        assert_eq!(places.count(a), 1);
        // Loopback (exempt here) and unknown peers are never counted.
        let local: Vec<_> = (0..10)
            .map(|_| places.take(Some(IpAddr::from([127, 0, 0, 1]))).unwrap())
            .collect();
        assert_eq!(places.count(IpAddr::from([127, 0, 0, 1])), 0);
        assert!(places.take(None).is_some());
        drop(local);
        // 0 is no limit; an entry goes when its last place does.
        let unlimited = ClientPlaces::new(0, false);
        let many: Vec<_> = (0..100).map(|_| unlimited.take(Some(a)).unwrap()).collect();
        assert_eq!(unlimited.count(a), 0);
        drop(many);
        let counted = ClientPlaces::new(1, false);
        let held = counted.take(Some(IpAddr::from([127, 0, 0, 1]))).unwrap();
        assert!(counted.take(Some(IpAddr::from([127, 0, 0, 1]))).is_none());
        drop(held);
        assert!(lock(&counted.held).is_empty());
    }
}
