//! Configuration, validated once.
//!
//! A [`Config`] can only be obtained from [`ConfigBuilder::build`], which checks every
//! field and every relation between fields, so the rest of the core never re-checks.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::time::{micros_ceil, micros_floor};

/// The largest number of nodes a configuration accepts.
pub const MAX_NODES: usize = 255;

/// The longest TTL a configuration accepts, in milliseconds (about 31.7 years).
///
/// Redis accepts larger `PX` values, but this bound keeps every computation on
/// microseconds exact in both `u64` and `f64`.
pub const MAX_TTL_MS: u64 = 1_000_000_000_000;

/// The fewest random bytes in a token (128 bits).
pub const MIN_TOKEN_BYTES: usize = 16;

/// The most random bytes in a token.
pub const MAX_TOKEN_BYTES: usize = 64;

/// The largest number of attempts one acquisition may make.
pub const MAX_ATTEMPTS: u32 = 1_000_000;

/// Default drift factor: 1 % of the TTL, as in the published algorithm.
pub const DEFAULT_DRIFT_FACTOR: f64 = 0.01;

/// Default fixed drift: 2 ms, for Redis's expiry granularity.
pub const DEFAULT_DRIFT_FIXED: Duration = Duration::from_millis(2);

/// Upper bound of the default node timeout (the default is the smaller of this and a
/// tenth of the TTL).
pub const DEFAULT_NODE_TIMEOUT_CAP: Duration = Duration::from_millis(50);

/// Default number of attempts of one acquisition, the first included.
pub const DEFAULT_ATTEMPTS: u32 = 3;

/// Default base delay between attempts.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(200);

/// Default jitter around the base delay (the delay is drawn from `base ± jitter`).
pub const DEFAULT_RETRY_JITTER: Duration = Duration::from_millis(100);

/// Default token length in random bytes (160 bits).
pub const DEFAULT_TOKEN_BYTES: usize = 20;

/// The node timeout may be at most this fraction of the TTL (`node_timeout * 3 <= ttl`):
/// one slow round then still leaves two thirds of the lease, and an automatic extension
/// (scheduled `max(ttl / 3, 2 * node_timeout)` before the end) always has a full round
/// left before the lease ends.
pub const MAX_NODE_TIMEOUT_FRACTION: u64 = 3;

/// The shortest delay between two attempts of one acquisition (`retry_delay -
/// retry_jitter`, the smallest delay the jitter can draw): attempts never follow each
/// other back to back, whatever the configuration.
pub const MIN_RETRY_DELAY: Duration = Duration::from_millis(1);

/// A checked configuration. Build one with [`Config::builder`].
///
/// Invariants (established by [`ConfigBuilder::build`]):
/// - `1 <= nodes <= MAX_NODES`, `quorum = nodes / 2 + 1`;
/// - `1 <= ttl_ms <= MAX_TTL_MS`;
/// - `drift = ceil(ttl * drift_factor) + drift_fixed < ttl`;
/// - `min_validity < ttl - drift` and `0 < node_timeout`, `node_timeout + min_validity < ttl - drift`,
///   so an acquisition whose quorum arrives before the node deadline can still be valid;
/// - `node_timeout * MAX_NODE_TIMEOUT_FRACTION <= ttl`;
/// - `1 <= attempts <= MAX_ATTEMPTS`; with more than one attempt,
///   `retry_delay - retry_jitter >= MIN_RETRY_DELAY`;
/// - `MIN_TOKEN_BYTES <= token_bytes <= MAX_TOKEN_BYTES`.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    nodes: usize,
    quorum: usize,
    ttl_ms: u64,
    drift_factor: f64,
    drift_fixed_us: u64,
    drift_us: u64,
    node_timeout_us: u64,
    min_validity_us: u64,
    attempts: u32,
    retry_delay_us: u64,
    retry_jitter_us: u64,
    key_prefix: Vec<u8>,
    token_bytes: usize,
    max_extensions: Option<u32>,
    fencing: bool,
    /// Whether the node timeout was set, rather than derived from the TTL.
    node_timeout_set: bool,
}

impl Config {
    /// Starts a configuration for `nodes` independent Redis nodes and a lock TTL of
    /// `ttl` (a whole number of milliseconds, as Redis's `PX` takes).
    pub fn builder(nodes: usize, ttl: Duration) -> ConfigBuilder {
        ConfigBuilder {
            nodes,
            ttl,
            drift_factor: DEFAULT_DRIFT_FACTOR,
            drift_fixed: DEFAULT_DRIFT_FIXED,
            node_timeout: None,
            min_validity: Duration::ZERO,
            attempts: DEFAULT_ATTEMPTS,
            retry_delay: DEFAULT_RETRY_DELAY,
            retry_jitter: DEFAULT_RETRY_JITTER,
            key_prefix: Vec::new(),
            token_bytes: DEFAULT_TOKEN_BYTES,
            max_extensions: None,
            fencing: false,
        }
    }

    /// A builder holding this configuration's settings, to change some and build again.
    pub fn to_builder(&self) -> ConfigBuilder {
        ConfigBuilder {
            nodes: self.nodes,
            ttl: self.ttl(),
            drift_factor: self.drift_factor,
            drift_fixed: self.drift_fixed(),
            node_timeout: self.node_timeout_set.then(|| self.node_timeout()),
            min_validity: self.min_validity(),
            attempts: self.attempts,
            retry_delay: self.retry_delay(),
            retry_jitter: self.retry_jitter(),
            key_prefix: self.key_prefix.clone(),
            token_bytes: self.token_bytes,
            max_extensions: self.max_extensions,
            fencing: self.fencing,
        }
    }

    /// The same configuration with another TTL, checked again (a default node timeout
    /// follows the new TTL; one that was set stays).
    pub fn with_ttl(&self, ttl: Duration) -> Result<Config, ConfigError> {
        if ttl == self.ttl() {
            return Ok(self.clone());
        }
        self.to_builder().ttl(ttl).build()
    }

    /// Number of nodes, N.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Successes needed to hold the lock: `N / 2 + 1`.
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// Failures that make the quorum impossible: `N - quorum + 1`.
    pub fn failures_to_lose(&self) -> usize {
        self.nodes - self.quorum + 1
    }

    /// The lock's time to live on every node, in milliseconds.
    pub fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// The lock's time to live on every node.
    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// The configured drift factor.
    pub fn drift_factor(&self) -> f64 {
        self.drift_factor
    }

    /// The configured fixed drift.
    pub fn drift_fixed(&self) -> Duration {
        Duration::from_micros(self.drift_fixed_us)
    }

    /// The total clock drift allowance: `ceil(ttl * drift_factor) + drift_fixed`,
    /// rounded up to whole microseconds. The factor is applied in whole parts per
    /// billion (the smallest not below it, so `0.01` is exact) with integer arithmetic.
    pub fn drift(&self) -> Duration {
        Duration::from_micros(self.drift_us)
    }

    /// How long one node may take to answer one round.
    pub fn node_timeout(&self) -> Duration {
        Duration::from_micros(self.node_timeout_us)
    }

    /// The least validity an acquisition or extension must leave to count as a success.
    pub fn min_validity(&self) -> Duration {
        Duration::from_micros(self.min_validity_us)
    }

    /// Attempts of one acquisition, the first included.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Base delay between attempts.
    pub fn retry_delay(&self) -> Duration {
        Duration::from_micros(self.retry_delay_us)
    }

    /// Jitter around the base delay.
    pub fn retry_jitter(&self) -> Duration {
        Duration::from_micros(self.retry_jitter_us)
    }

    /// Bytes put in front of every resource name to form its key.
    pub fn key_prefix(&self) -> &[u8] {
        &self.key_prefix
    }

    /// Random bytes per token (the token's text is twice as long, in hex).
    pub fn token_bytes(&self) -> usize {
        self.token_bytes
    }

    /// The most extensions [`Config::next_extension`] schedules for one lease, if bounded.
    pub fn max_extensions(&self) -> Option<u32> {
        self.max_extensions
    }

    /// Whether acquisitions issue fencing tokens (see `docs/fencing.md`).
    pub fn fencing(&self) -> bool {
        self.fencing
    }

    pub(crate) fn ttl_us(&self) -> u64 {
        // MAX_TTL_MS * 1000 fits in u64 with room to spare.
        self.ttl_ms * 1000
    }

    /// `ttl - drift`: how long after the start of a round its keys are guaranteed to live.
    pub(crate) fn lease_us(&self) -> u64 {
        self.ttl_us() - self.drift_us
    }

    pub(crate) fn node_timeout_us(&self) -> u64 {
        self.node_timeout_us
    }

    pub(crate) fn min_validity_us(&self) -> u64 {
        self.min_validity_us
    }

    pub(crate) fn retry_delay_us(&self) -> u64 {
        self.retry_delay_us
    }

    pub(crate) fn retry_jitter_us(&self) -> u64 {
        self.retry_jitter_us
    }
}

/// Builds a [`Config`]; every setter is optional and has the documented default.
#[derive(Clone, Debug)]
#[must_use]
pub struct ConfigBuilder {
    nodes: usize,
    ttl: Duration,
    drift_factor: f64,
    drift_fixed: Duration,
    node_timeout: Option<Duration>,
    min_validity: Duration,
    attempts: u32,
    retry_delay: Duration,
    retry_jitter: Duration,
    key_prefix: Vec<u8>,
    token_bytes: usize,
    max_extensions: Option<u32>,
    fencing: bool,
}

impl ConfigBuilder {
    /// The lock's time to live (a whole number of milliseconds).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Fraction of the TTL allowed for clock-rate differences between nodes
    /// (default [`DEFAULT_DRIFT_FACTOR`]); `0 <= factor < 1`.
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// Fixed drift added to the proportional one (default [`DEFAULT_DRIFT_FIXED`]).
    /// Rounded up to whole microseconds.
    pub fn drift_fixed(mut self, drift: Duration) -> Self {
        self.drift_fixed = drift;
        self
    }

    /// How long one node may take to answer one round (default: the smaller of
    /// [`DEFAULT_NODE_TIMEOUT_CAP`] and a tenth of the TTL). Rounded down to whole
    /// microseconds.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = Some(timeout);
        self
    }

    /// The least validity an acquisition must leave (default zero: any positive
    /// validity counts). Rounded up to whole microseconds.
    pub fn min_validity(mut self, floor: Duration) -> Self {
        self.min_validity = floor;
        self
    }

    /// Attempts of one acquisition, the first included (default [`DEFAULT_ATTEMPTS`]).
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }

    /// Base delay between attempts (default [`DEFAULT_RETRY_DELAY`]).
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// Jitter around the base delay (default [`DEFAULT_RETRY_JITTER`]); at most the delay.
    pub fn retry_jitter(mut self, jitter: Duration) -> Self {
        self.retry_jitter = jitter;
        self
    }

    /// Bytes put in front of every resource name to form its key (default none, so the
    /// key is the resource name and other Redlock clients using the same name exclude
    /// us and we them).
    pub fn key_prefix(mut self, prefix: impl Into<Vec<u8>>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Random bytes per token (default [`DEFAULT_TOKEN_BYTES`]).
    pub fn token_bytes(mut self, bytes: usize) -> Self {
        self.token_bytes = bytes;
        self
    }

    /// Bound on the extensions [`Config::next_extension`] schedules for one lease
    /// (default unbounded).
    pub fn max_extensions(mut self, max: Option<u32>) -> Self {
        self.max_extensions = max;
        self
    }

    /// Issue a fencing token with every acquisition (default off): a per-resource
    /// counter on every node, raised in the acquisition's own script, and a write-back
    /// round that a quorum must acknowledge before the lock is handed out. One more
    /// round trip per acquisition; see `docs/fencing.md` for what it guarantees.
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
        self
    }

    /// Checks every field and returns the configuration, or the first problem found.
    pub fn build(self) -> Result<Config, ConfigError> {
        if self.nodes == 0 {
            return Err(ConfigError::NoNodes);
        }
        if self.nodes > MAX_NODES {
            return Err(ConfigError::TooManyNodes);
        }
        if self.ttl.is_zero() {
            return Err(ConfigError::TtlZero);
        }
        if self.ttl.subsec_nanos() % 1_000_000 != 0 {
            return Err(ConfigError::TtlNotWholeMilliseconds);
        }
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        if ttl_ms > MAX_TTL_MS {
            return Err(ConfigError::TtlTooLarge);
        }
        let ttl_us = ttl_ms * 1000;
        if !(self.drift_factor >= 0.0 && self.drift_factor < 1.0) {
            return Err(ConfigError::DriftFactorInvalid);
        }
        let drift_fixed_us = micros_ceil(self.drift_fixed);
        let drift_us =
            ceil_ppb(ttl_us, drift_ppb(self.drift_factor)).saturating_add(drift_fixed_us);
        if drift_us >= ttl_us {
            return Err(ConfigError::DriftTooLarge);
        }
        let lease_us = ttl_us - drift_us;
        let min_validity_us = micros_ceil(self.min_validity);
        if min_validity_us >= lease_us {
            return Err(ConfigError::MinValidityTooLarge);
        }
        let node_timeout_us = match self.node_timeout {
            Some(timeout) => micros_floor(timeout),
            None => micros_floor(DEFAULT_NODE_TIMEOUT_CAP).min(ttl_us / 10),
        };
        if node_timeout_us == 0 {
            return Err(ConfigError::NodeTimeoutZero);
        }
        if node_timeout_us.saturating_add(min_validity_us) >= lease_us
            || node_timeout_us.saturating_mul(MAX_NODE_TIMEOUT_FRACTION) > ttl_us
        {
            return Err(ConfigError::NodeTimeoutTooLarge);
        }
        if self.attempts == 0 {
            return Err(ConfigError::AttemptsZero);
        }
        if self.attempts > MAX_ATTEMPTS {
            return Err(ConfigError::TooManyAttempts);
        }
        let retry_delay_us = micros_floor(self.retry_delay);
        let retry_jitter_us = micros_floor(self.retry_jitter);
        if self.attempts > 1 {
            if retry_delay_us < micros_floor(MIN_RETRY_DELAY) {
                return Err(ConfigError::RetryDelayTooShort);
            }
            if retry_jitter_us > retry_delay_us - micros_floor(MIN_RETRY_DELAY) {
                return Err(ConfigError::JitterTooLarge);
            }
        } else if retry_jitter_us > retry_delay_us {
            return Err(ConfigError::JitterTooLarge);
        }
        if self.token_bytes < MIN_TOKEN_BYTES {
            return Err(ConfigError::TokenTooShort);
        }
        if self.token_bytes > MAX_TOKEN_BYTES {
            return Err(ConfigError::TokenTooLong);
        }
        Ok(Config {
            nodes: self.nodes,
            quorum: self.nodes / 2 + 1,
            ttl_ms,
            drift_factor: self.drift_factor,
            drift_fixed_us,
            drift_us,
            node_timeout_us,
            min_validity_us,
            attempts: self.attempts,
            retry_delay_us,
            retry_jitter_us,
            key_prefix: self.key_prefix,
            token_bytes: self.token_bytes,
            max_extensions: self.max_extensions,
            fencing: self.fencing,
            node_timeout_set: self.node_timeout.is_some(),
        })
    }
}

/// The first two positions in `addresses` that name the same Redis server, if any.
///
/// Redlock's safety rests on independent nodes: the same server given twice would make
/// one process count twice towards the quorum. Addresses are compared as host and port:
/// a scheme (`redis://`, `rediss://`), user and password, database number and options
/// are ignored; hosts are compared without case, `localhost` is `127.0.0.1`, IPv6
/// brackets are dropped, and a missing port is 6379. Different names for one machine
/// (a DNS name and its address) are not detected.
pub fn duplicate_node<S: AsRef<str>>(addresses: &[S]) -> Option<(usize, usize)> {
    let normalised: Vec<(String, u16)> = addresses
        .iter()
        .map(|address| normalise_address(address.as_ref()))
        .collect();
    for (i, a) in normalised.iter().enumerate() {
        for (j, b) in normalised.iter().enumerate().skip(i + 1) {
            if a == b {
                return Some((i, j));
            }
        }
    }
    None
}

fn normalise_address(address: &str) -> (String, u16) {
    let rest = match address.find("://") {
        Some(at) => &address[at + 3..],
        None => address,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = match authority.rfind('@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    let (host, port) = if let Some(inner) = host_port.strip_prefix('[') {
        match inner.split_once(']') {
            Some((host, tail)) => (host, tail.strip_prefix(':')),
            None => (inner, None),
        }
    } else if host_port.matches(':').count() == 1 {
        match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    } else {
        // No port, or a bare IPv6 address.
        (host_port, None)
    };
    let port = port.and_then(|p| p.parse::<u16>().ok()).unwrap_or(6379);
    let host = host.to_ascii_lowercase();
    let host = match host.as_str() {
        "localhost" | "" => String::from("127.0.0.1"),
        _ => host,
    };
    (host, port)
}

/// Parts per billion of the TTL that a drift factor stands for: the smallest whole number
/// `n` with `n / 10^9 >= factor`, so a decimal factor such as `0.01` is taken exactly
/// (10 000 000) and any other is rounded up, against the holder. `factor` is in `[0, 1)`.
fn drift_ppb(factor: f64) -> u64 {
    // `factor * 1e9` is in [0, 1e9): the cast neither truncates a large value nor wraps.
    // Adding one half and truncating (the cast) rounds to nearest for these values.
    let mut ppb = (factor * 1e9 + 0.5) as u64;
    while (ppb as f64) / 1e9 < factor {
        ppb += 1;
    }
    while ppb > 0 && ((ppb - 1) as f64) / 1e9 >= factor {
        ppb -= 1;
    }
    ppb
}

/// `ceil(ttl_us * ppb / 10^9)` in integers: exact, where multiplying in floating point
/// first rounds the product to the nearest double, which can fall below the true value
/// and make the drift 1 us short. `ttl_us < 2^50` and `ppb < 2^30`, so it fits in `u128`.
fn ceil_ppb(ttl_us: u64, ppb: u64) -> u64 {
    let product = u128::from(ttl_us) * u128::from(ppb);
    let drift = product.div_ceil(1_000_000_000);
    u64::try_from(drift).unwrap_or(u64::MAX)
}

/// What is wrong with a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigError {
    /// No nodes: N must be at least 1.
    NoNodes,
    /// More than [`MAX_NODES`] nodes.
    TooManyNodes,
    /// A TTL of zero.
    TtlZero,
    /// A TTL with a fraction of a millisecond; Redis's `PX` takes whole milliseconds.
    TtlNotWholeMilliseconds,
    /// A TTL above [`MAX_TTL_MS`].
    TtlTooLarge,
    /// A drift factor that is not a number in `[0, 1)`.
    DriftFactorInvalid,
    /// A drift (`ttl * drift_factor + drift_fixed`) that eats the whole TTL.
    DriftTooLarge,
    /// A minimum validity that no acquisition could ever reach: not below `ttl - drift`.
    MinValidityTooLarge,
    /// A node timeout of zero.
    NodeTimeoutZero,
    /// A node timeout that leaves no room for a valid lock:
    /// `node_timeout + min_validity` not below `ttl - drift`.
    NodeTimeoutTooLarge,
    /// Zero attempts.
    AttemptsZero,
    /// More than [`MAX_ATTEMPTS`] attempts.
    TooManyAttempts,
    /// A retry jitter that lets the drawn delay fall below [`MIN_RETRY_DELAY`] (with more
    /// than one attempt), or larger than the retry delay.
    JitterTooLarge,
    /// A retry delay below [`MIN_RETRY_DELAY`] with more than one attempt.
    RetryDelayTooShort,
    /// Fewer than [`MIN_TOKEN_BYTES`] random bytes per token.
    TokenTooShort,
    /// More than [`MAX_TOKEN_BYTES`] random bytes per token.
    TokenTooLong,
}

impl ConfigError {
    /// A stable snake_case name, the same in every binding and in the conformance vectors.
    pub fn code(self) -> &'static str {
        match self {
            ConfigError::NoNodes => "no_nodes",
            ConfigError::TooManyNodes => "too_many_nodes",
            ConfigError::TtlZero => "ttl_zero",
            ConfigError::TtlNotWholeMilliseconds => "ttl_not_whole_milliseconds",
            ConfigError::TtlTooLarge => "ttl_too_large",
            ConfigError::DriftFactorInvalid => "drift_factor_invalid",
            ConfigError::DriftTooLarge => "drift_too_large",
            ConfigError::MinValidityTooLarge => "min_validity_too_large",
            ConfigError::NodeTimeoutZero => "node_timeout_zero",
            ConfigError::NodeTimeoutTooLarge => "node_timeout_too_large",
            ConfigError::AttemptsZero => "attempts_zero",
            ConfigError::TooManyAttempts => "too_many_attempts",
            ConfigError::JitterTooLarge => "jitter_too_large",
            ConfigError::RetryDelayTooShort => "retry_delay_too_short",
            ConfigError::TokenTooShort => "token_too_short",
            ConfigError::TokenTooLong => "token_too_long",
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            ConfigError::NoNodes => "at least one node is required",
            ConfigError::TooManyNodes => "too many nodes (the most is 255)",
            ConfigError::TtlZero => "the TTL must be at least 1 ms (and at most 10^12 ms)",
            ConfigError::TtlNotWholeMilliseconds => {
                "the TTL must be a whole number of milliseconds (Redis's PX unit), from 1 to 10^12"
            }
            ConfigError::TtlTooLarge => "the TTL must be at most 10^12 ms (and at least 1 ms)",
            ConfigError::DriftFactorInvalid => "the drift factor must be a number in [0, 1)",
            ConfigError::DriftTooLarge => {
                "the drift (ttl * drift_factor + drift_fixed) is not smaller than the TTL"
            }
            ConfigError::MinValidityTooLarge => {
                "the minimum validity is not smaller than ttl - drift, so no lock could reach it"
            }
            ConfigError::NodeTimeoutZero => "the node timeout must be at least 1 microsecond",
            ConfigError::NodeTimeoutTooLarge => {
                "the node timeout must be at most a third of the TTL, and node_timeout + min_validity smaller than ttl - drift"
            }
            ConfigError::AttemptsZero => "at least one attempt is required",
            ConfigError::TooManyAttempts => "too many attempts (the most is 1000000)",
            ConfigError::JitterTooLarge => {
                "the retry jitter must leave a delay of at least 1 ms (retry_delay - retry_jitter >= 1 ms)"
            }
            ConfigError::RetryDelayTooShort => {
                "the retry delay must be at least 1 ms when more than one attempt is allowed"
            }
            ConfigError::TokenTooShort => "tokens need at least 16 random bytes (128 bits)",
            ConfigError::TokenTooLong => "tokens take at most 64 random bytes",
        };
        f.write_str(text)
    }
}

impl core::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn defaults() {
        let config = Config::builder(5, ms(10_000)).build().unwrap();
        assert_eq!(config.quorum(), 3);
        assert_eq!(config.failures_to_lose(), 3);
        // 10 000 ms * 0.01 = 100 ms, + 2 ms.
        assert_eq!(config.drift(), ms(102));
        assert_eq!(config.node_timeout(), ms(50));
        assert_eq!(config.attempts(), 3);
        assert_eq!(config.token_bytes(), 20);
        // A short TTL caps the default node timeout at a tenth of it.
        let short = Config::builder(3, ms(100)).build().unwrap();
        assert_eq!(short.node_timeout(), ms(10));
    }

    #[test]
    fn with_ttl_rechecks_and_keeps_settings() {
        let config = Config::builder(5, ms(10_000))
            .attempts(7)
            .key_prefix("p:")
            .build()
            .unwrap();
        let short = config.with_ttl(ms(200)).unwrap();
        assert_eq!(short.ttl_ms(), 200);
        assert_eq!(short.attempts(), 7);
        assert_eq!(short.key_prefix(), b"p:");
        assert_eq!(
            short.node_timeout(),
            ms(20),
            "a derived node timeout follows the TTL"
        );
        assert_eq!(short.to_builder().build().unwrap(), short);
        let fixed = Config::builder(5, ms(10_000))
            .node_timeout(ms(300))
            .build()
            .unwrap();
        assert_eq!(
            fixed.with_ttl(ms(200)),
            Err(ConfigError::NodeTimeoutTooLarge)
        );
        assert_eq!(fixed.with_ttl(Duration::ZERO), Err(ConfigError::TtlZero));
        assert_eq!(fixed.with_ttl(ms(10_000)).unwrap(), fixed);
    }

    #[test]
    fn quorum_for_each_size() {
        for (n, q) in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)] {
            let config = Config::builder(n, ms(1000)).build().unwrap();
            assert_eq!(config.quorum(), q, "N = {n}");
            assert_eq!(config.failures_to_lose(), n - q + 1, "N = {n}");
        }
    }

    #[test]
    fn drift_rounds_up() {
        // 1 ms * 0.0015 = 1.5 us, rounded up to 2 us.
        let config = Config::builder(1, ms(1))
            .drift_factor(0.0015)
            .drift_fixed(Duration::ZERO)
            .node_timeout(Duration::from_micros(100))
            .build()
            .unwrap();
        assert_eq!(config.drift(), Duration::from_micros(2));
    }

    #[test]
    fn every_error() {
        let base = || Config::builder(5, ms(1000));
        let cases: [(ConfigBuilder, ConfigError); 15] = [
            (Config::builder(0, ms(1000)), ConfigError::NoNodes),
            (Config::builder(256, ms(1000)), ConfigError::TooManyNodes),
            (Config::builder(5, Duration::ZERO), ConfigError::TtlZero),
            (
                Config::builder(5, Duration::from_micros(1500)),
                ConfigError::TtlNotWholeMilliseconds,
            ),
            (
                Config::builder(5, ms(MAX_TTL_MS + 1)),
                ConfigError::TtlTooLarge,
            ),
            (
                base().drift_factor(f64::NAN),
                ConfigError::DriftFactorInvalid,
            ),
            (base().drift_factor(1.0), ConfigError::DriftFactorInvalid),
            (base().drift_factor(0.999), ConfigError::DriftTooLarge),
            (
                base().min_validity(ms(988)),
                ConfigError::MinValidityTooLarge,
            ),
            (
                base().node_timeout(Duration::from_nanos(999)),
                ConfigError::NodeTimeoutZero,
            ),
            (
                base().node_timeout(ms(988)),
                ConfigError::NodeTimeoutTooLarge,
            ),
            (base().attempts(0), ConfigError::AttemptsZero),
            (
                base().retry_delay(ms(1)).retry_jitter(ms(2)),
                ConfigError::JitterTooLarge,
            ),
            (base().token_bytes(15), ConfigError::TokenTooShort),
            (base().token_bytes(65), ConfigError::TokenTooLong),
        ];
        for (builder, expected) in cases {
            assert_eq!(builder.build(), Err(expected));
        }
        // The edges that are still fine: lease = 1000 - 12 = 988 ms.
        assert!(base()
            .min_validity(ms(987))
            .node_timeout(Duration::from_micros(999))
            .build()
            .is_ok());
        // The node timeout is at most a third of the TTL.
        assert!(base()
            .node_timeout(Duration::from_micros(333_333))
            .build()
            .is_ok());
        assert_eq!(
            base().node_timeout(Duration::from_micros(333_334)).build(),
            Err(ConfigError::NodeTimeoutTooLarge)
        );
        // Retries are at least 1 ms apart; a single attempt needs no delay.
        assert_eq!(
            base()
                .retry_delay(Duration::ZERO)
                .retry_jitter(Duration::ZERO)
                .build(),
            Err(ConfigError::RetryDelayTooShort)
        );
        assert_eq!(
            base()
                .retry_delay(ms(2))
                .retry_jitter(Duration::from_micros(1001))
                .build(),
            Err(ConfigError::JitterTooLarge)
        );
        assert!(base()
            .retry_delay(ms(2))
            .retry_jitter(ms(1))
            .build()
            .is_ok());
        assert!(base()
            .attempts(1)
            .retry_delay(Duration::ZERO)
            .retry_jitter(Duration::ZERO)
            .build()
            .is_ok());
        assert!(base().attempts(MAX_ATTEMPTS).build().is_ok());
        assert_eq!(
            base().attempts(MAX_ATTEMPTS + 1).build(),
            Err(ConfigError::TooManyAttempts)
        );
    }

    #[test]
    fn drift_is_exact() {
        // ceil(419 410 398 236 000 us * 0.846885254) = ceil(355 192 481 640 336.03...):
        // the product in floating point rounds to ...336.0 and would lose the 1 us.
        let config = Config::builder(1, ms(419_410_398_236))
            .drift_factor(0.846885254)
            .drift_fixed(Duration::ZERO)
            .build()
            .unwrap();
        assert_eq!(config.drift(), Duration::from_micros(355_192_481_640_337));
        // A decimal factor is taken exactly: 333 000 * 0.01 = 3330.
        let decimal = Config::builder(1, ms(333)).build().unwrap();
        assert_eq!(decimal.drift(), Duration::from_micros(3330 + 2000));
        // A factor between two parts per billion rounds up, against the holder.
        assert_eq!(drift_ppb(0.010_000_000_4), 10_000_001);
        assert_eq!(drift_ppb(0.01), 10_000_000);
        assert_eq!(drift_ppb(0.0), 0);
        assert_eq!(drift_ppb(f64::MIN_POSITIVE), 1);
        assert_eq!(ceil_ppb(1, 1), 1);
        assert_eq!(
            ceil_ppb(MAX_TTL_MS * 1000, 999_999_999),
            999_999_999_000_000
        );
        assert_eq!(ceil_ppb(1_000_000_001, 1), 2);
    }

    #[test]
    fn duplicate_nodes() {
        assert_eq!(duplicate_node(&["127.0.0.1:7000", "127.0.0.1:7001"]), None);
        assert_eq!(
            duplicate_node(&["redis://127.0.0.1:7000", "redis://:pw@LOCALHOST:7000/2"]),
            Some((0, 1))
        );
        assert_eq!(
            duplicate_node(&["a:1", "rediss://h:6379", "b:2", "h"]),
            Some((1, 3))
        );
        assert_eq!(
            duplicate_node(&["[::1]:7000", "redis://[::1]:7000"]),
            Some((0, 1))
        );
        assert_eq!(duplicate_node(&["[::1]:7000", "[::1]:7001"]), None);
        assert_eq!(duplicate_node::<&str>(&[]), None);
    }

    #[test]
    fn error_codes_are_distinct() {
        let all = [
            ConfigError::NoNodes,
            ConfigError::TooManyNodes,
            ConfigError::TtlZero,
            ConfigError::TtlNotWholeMilliseconds,
            ConfigError::TtlTooLarge,
            ConfigError::DriftFactorInvalid,
            ConfigError::DriftTooLarge,
            ConfigError::MinValidityTooLarge,
            ConfigError::NodeTimeoutZero,
            ConfigError::NodeTimeoutTooLarge,
            ConfigError::AttemptsZero,
            ConfigError::TooManyAttempts,
            ConfigError::JitterTooLarge,
            ConfigError::RetryDelayTooShort,
            ConfigError::TokenTooShort,
            ConfigError::TokenTooLong,
        ];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a.code(), b.code());
            }
        }
    }
}
