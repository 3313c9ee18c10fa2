//! The client: a configuration and a source of randomness, from which operations start.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

use crate::command::LISTENER_ID_BYTES;
use crate::config::Config;
use crate::error::UsageError;
use crate::operation::Operation;
use crate::outcome::Lease;
use crate::random::{OperationRandom, Source, Token};
use crate::time::Time;

/// The most resources one lock may cover.
pub const MAX_RESOURCES: usize = 64;

/// How many keys a client remembers its last waiting acquisition of (to know whether
/// the next one listens from its start, [`crate::Operation::listens`]). Past that the
/// oldest is forgotten, which only makes a waiter listen a little later.
const RECENT_WAITS_KEPT: usize = 64;

/// What one acquisition may set beyond the configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AcquireOptions {
    /// The lock's TTL, instead of the configured one.
    pub ttl: Option<Duration>,
    /// A wait limit: keep trying until this much time has passed (instead of a number
    /// of attempts), never starting an attempt that could not finish within it. See
    /// [`crate::Operation::handle_notice`] for trying again early when a release is
    /// announced.
    pub wait: Option<Duration>,
}

impl AcquireOptions {
    /// No options: the configured TTL and attempts.
    pub const fn new() -> AcquireOptions {
        AcquireOptions {
            ttl: None,
            wait: None,
        }
    }

    /// The lock's TTL.
    pub const fn ttl(mut self, ttl: Duration) -> AcquireOptions {
        self.ttl = Some(ttl);
        self
    }

    /// The wait limit.
    pub const fn wait(mut self, wait: Duration) -> AcquireOptions {
        self.wait = Some(wait);
        self
    }
}

/// A Redlock client: starts acquisitions, extensions and releases as [`Operation`]s.
///
/// Operations are independent of the client and of each other; a driver may run any
/// number at once (a holder extending while others acquire).
pub struct Redlock {
    config: Arc<Config>,
    source: Source,
    /// The listener id ([`crate::waiter_channel`]), once drawn: at the start, or at the
    /// first waiting acquisition if the OS source failed then.
    listener: Option<[u8; LISTENER_ID_BYTES]>,
    /// Keys of this client's waiting acquisitions, each with when the last one of it
    /// started, for [`crate::NOTICE_CHANNEL_LINGER_MS`] (at most `RECENT_WAITS_KEPT`).
    recent_waits: Vec<(Vec<u8>, Time)>,
}

impl Redlock {
    /// A client whose tokens come from the operating system's CSPRNG.
    #[cfg(feature = "os-random")]
    pub fn new(config: Config) -> Redlock {
        let source = Source::Os;
        Redlock {
            config: Arc::new(config),
            listener: source.listener_id().ok(),
            source,
            recent_waits: Vec::new(),
        }
    }

    /// A client whose tokens come from a ChaCha20 stream seeded with `seed`. Use this
    /// where no OS randomness exists; the seed MUST itself be secret and random, or
    /// tokens become predictable. The same seed gives the same tokens (for simulations).
    pub fn with_seed(config: Config, seed: [u8; 32]) -> Redlock {
        let source = Source::Seeded(alloc::boxed::Box::new(ChaCha20Rng::from_seed(seed)));
        Redlock {
            config: Arc::new(config),
            listener: source.listener_id().ok(),
            source,
            recent_waits: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Starts acquiring a lock on `resources` (one or more resource names) at `now`,
    /// with the configured TTL. The first round's commands are ready to poll.
    pub fn acquire<R: AsRef<[u8]>>(
        &mut self,
        resources: &[R],
        now: Time,
    ) -> Result<Operation, UsageError> {
        let keys = self.keys(resources)?;
        let random = self.source.operation_random(self.config.token_bytes())?;
        Ok(Operation::acquire(
            Arc::clone(&self.config),
            keys,
            random,
            now,
            None,
            false,
        ))
    }

    /// Like [`Redlock::acquire`], with the options of this acquisition: its own TTL
    /// (checked against the configuration as [`Config::with_ttl`] does) and a wait limit.
    pub fn acquire_with<R: AsRef<[u8]>>(
        &mut self,
        resources: &[R],
        options: &AcquireOptions,
        now: Time,
    ) -> Result<Operation, UsageError> {
        let config = match options.ttl {
            Some(ttl) => self.config_for(ttl)?,
            None => Arc::clone(&self.config),
        };
        let keys = self.keys(resources)?;
        let mut random = self.source.operation_random(self.config.token_bytes())?;
        let wait_until = options.wait.map(|wait| now.saturating_add(wait));
        let listen_from_start = wait_until.is_some() && self.waited_for_lately(&keys, now);
        if wait_until.is_some() && !config.fencing() {
            // A waiter: its id (the first token) begins with the listener id, so that
            // the releases naming it reach this client's waiter channel only.
            let listener = match self.listener {
                Some(listener) => listener,
                None => {
                    let listener = self.source.listener_id()?;
                    self.listener = Some(listener);
                    listener
                }
            };
            random.prefix_first_token(&listener);
        }
        Ok(Operation::acquire(
            config,
            keys,
            random,
            now,
            wait_until,
            listen_from_start,
        ))
    }

    /// Whether this client started a waiting acquisition of one of `keys` less than
    /// [`crate::NOTICE_CHANNEL_LINGER_MS`] before `now` (its notice channels then most
    /// likely still linger), remembering this one's start for the next.
    fn waited_for_lately(&mut self, keys: &[Vec<u8>], now: Time) -> bool {
        let linger = Duration::from_millis(crate::NOTICE_CHANNEL_LINGER_MS);
        let lately = |at: Time| now.saturating_duration_since(at) < linger;
        // A time after `now` (a caller's clock that went back) counts as lately.
        self.recent_waits.retain(|(_, at)| lately(*at));
        let mut found = false;
        for key in keys {
            match self.recent_waits.iter_mut().find(|(k, _)| k == key) {
                Some(entry) => {
                    found = true;
                    entry.1 = now;
                }
                None => {
                    if self.recent_waits.len() >= RECENT_WAITS_KEPT {
                        let oldest = self
                            .recent_waits
                            .iter()
                            .enumerate()
                            .min_by_key(|(_, (_, at))| *at)
                            .map(|(i, _)| i);
                        if let Some(oldest) = oldest {
                            self.recent_waits.swap_remove(oldest);
                        }
                    }
                    self.recent_waits.push((key.clone(), now));
                }
            }
        }
        found
    }

    /// The channels to subscribe to, on every node, for the release notices of an
    /// acquisition of `resources` by this client: per key, its [`crate::notice_channel`]
    /// (releases that name no waiter) and this client's [`crate::waiter_channel`]
    /// (releases that name one of its waiters), the same as
    /// [`crate::Operation::notice_channels`] of its waiting acquisitions. For drivers that
    /// subscribe before the acquisition starts. The same resource rules as
    /// [`Redlock::acquire`] apply. Without a listener id (the OS source failed so far),
    /// only the notice channels.
    pub fn notice_channels<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
    ) -> Result<Vec<Vec<u8>>, UsageError> {
        let keys = self.keys(resources)?;
        let listener = self.listener.map(|id| Token::from_random_bytes(&id));
        Ok(crate::command::listening_channels(
            &keys,
            listener.as_ref().map(Token::as_bytes),
        ))
    }

    /// Like [`Redlock::acquire_with`], with tokens and jitter drawn from `random` as
    /// [`Redlock::acquire_with_random`] does. With a wait limit `random` MUST hold at
    /// least one token's bytes; when it runs out, no further attempt starts (for tests:
    /// real locks use a client's own source). It remembers no earlier wait, so a waiter
    /// listens from its first conflict ([`crate::Operation::listens`]).
    pub fn acquire_with_random_options<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        options: &AcquireOptions,
        random: Vec<u8>,
        now: Time,
    ) -> Result<Operation, UsageError> {
        let config = match options.ttl {
            Some(ttl) => self.config_for(ttl)?,
            None => Arc::clone(&self.config),
        };
        let keys = self.keys(resources)?;
        let needed = match options.wait {
            Some(_) => config.token_bytes(),
            None => OperationRandom::needed(config.attempts(), config.token_bytes()),
        };
        if random.len() < needed {
            return Err(UsageError::NotEnoughRandomBytes);
        }
        let random = OperationRandom::Bytes {
            bytes: random,
            used: 0,
        };
        let wait_until = options.wait.map(|wait| now.saturating_add(wait));
        Ok(Operation::acquire(
            config, keys, random, now, wait_until, false,
        ))
    }

    /// Starts reading who holds the lock on `resources` at `now`: one `GET` (or `MGET`)
    /// per node, decided at the quorum. [`crate::Inspected::is_locked`] says whether
    /// anyone holds it, [`crate::Inspected::is_held_by`] whether a lease of ours does.
    /// It reads only: it never changes a key. The same resource rules as
    /// [`Redlock::acquire`] apply.
    pub fn inspect<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        now: Time,
    ) -> Result<Operation, UsageError> {
        let keys = self.keys(resources)?;
        Ok(Operation::inspect(Arc::clone(&self.config), keys, now))
    }

    /// Like [`Redlock::acquire`], with a TTL for this lock only, checked against the
    /// rest of the configuration as [`Config::with_ttl`] does.
    pub fn acquire_for<R: AsRef<[u8]>>(
        &mut self,
        resources: &[R],
        ttl: Duration,
        now: Time,
    ) -> Result<Operation, UsageError> {
        let config = self.config_for(ttl)?;
        let keys = self.keys(resources)?;
        let random = self.source.operation_random(self.config.token_bytes())?;
        Ok(Operation::acquire(config, keys, random, now, None, false))
    }

    /// Like [`Redlock::acquire`], with tokens and retry jitter drawn from `random` in the
    /// documented order (see the crate's documentation). `random` MUST hold at least
    /// `attempts * token_bytes + (attempts - 1) * 8` bytes, and for real locks MUST come
    /// from a CSPRNG.
    pub fn acquire_with_random<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        random: Vec<u8>,
        now: Time,
    ) -> Result<Operation, UsageError> {
        let keys = self.keys(resources)?;
        let needed = OperationRandom::needed(self.config.attempts(), self.config.token_bytes());
        if random.len() < needed {
            return Err(UsageError::NotEnoughRandomBytes);
        }
        let random = OperationRandom::Bytes {
            bytes: random,
            used: 0,
        };
        Ok(Operation::acquire(
            Arc::clone(&self.config),
            keys,
            random,
            now,
            None,
            false,
        ))
    }

    /// Starts extending `lease` by its own TTL ([`Lease::ttl_ms`]) from `now`.
    pub fn extend(&self, lease: &Lease, now: Time) -> Result<Operation, UsageError> {
        self.extend_for(lease, Duration::from_millis(lease.ttl_ms), now)
    }

    /// Starts extending `lease` by `ttl` from `now`; later extensions keep `ttl`.
    pub fn extend_for(
        &self,
        lease: &Lease,
        ttl: Duration,
        now: Time,
    ) -> Result<Operation, UsageError> {
        Ok(Operation::extend(self.config_for(ttl)?, lease, now))
    }

    /// Starts releasing `lease` on every node. Always possible: with the lease's own
    /// TTL's node timeout where that TTL fits this configuration, the configured one
    /// otherwise.
    pub fn release(&self, lease: &Lease, now: Time) -> Operation {
        let config = self
            .config_for(Duration::from_millis(lease.ttl_ms))
            .unwrap_or_else(|_| Arc::clone(&self.config));
        Operation::release(config, lease, now)
    }

    fn config_for(&self, ttl: Duration) -> Result<Arc<Config>, UsageError> {
        if ttl == self.config.ttl() {
            return Ok(Arc::clone(&self.config));
        }
        self.config
            .with_ttl(ttl)
            .map(Arc::new)
            .map_err(UsageError::InvalidTtl)
    }

    /// A lease rebuilt from its parts, for a holder that kept only the token (a shell
    /// script, another process). `valid_until` is whatever the holder knows; use
    /// [`Time::ZERO`] if nothing. Its [`Lease::ttl_ms`] is the configured TTL (what
    /// extensions use); its [`Lease::key_ttl_ms`] is unknown.
    pub fn lease<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        token: &str,
        valid_until: Time,
    ) -> Result<Lease, UsageError> {
        Ok(Lease {
            keys: self.keys(resources)?,
            token: Token::from_text(token)?,
            valid_until,
            extensions: 0,
            ttl_ms: self.config.ttl_ms(),
            // This process never saw the keys' TTL: another holder may have set any.
            key_ttl_ms: None,
            fencing_token: None,
            waiter: None,
        })
    }

    /// A fresh token of `token_bytes` random bytes from this client's source.
    pub fn generate_token(&mut self) -> Result<Token, UsageError> {
        let len = self.config.token_bytes();
        Ok(self.source.operation_random(len)?.token(len))
    }

    fn keys<R: AsRef<[u8]>>(&self, resources: &[R]) -> Result<Vec<Vec<u8>>, UsageError> {
        if resources.is_empty() {
            return Err(UsageError::NoResources);
        }
        if resources.len() > MAX_RESOURCES {
            return Err(UsageError::TooManyResources);
        }
        let prefix = self.config.key_prefix();
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(resources.len());
        for resource in resources {
            let resource = resource.as_ref();
            if prefix.is_empty() && resource.is_empty() {
                return Err(UsageError::EmptyResource);
            }
            let mut key = Vec::with_capacity(prefix.len() + resource.len());
            key.extend_from_slice(prefix);
            key.extend_from_slice(resource);
            if crate::command::reserved_key_owner(&key).is_some() {
                return Err(UsageError::ReservedResource);
            }
            if keys.contains(&key) {
                return Err(UsageError::DuplicateResource);
            }
            keys.push(key);
        }
        Ok(keys)
    }
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redlock")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
