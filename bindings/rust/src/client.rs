//! The async client: node connections, the driver loop, and the lock operations.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use redlock_core::{
    AcquireOptions, Config, ConfigBuilder, ConfigError, Event, Lease, Operation, Outcome, Output,
    Redlock, Reply, Time,
};

use crate::error::{Error, NodeReport, NotAcquired, NotExtended, NotInspected, NotReleased};
use crate::lock::{Lock, LockShared};
use crate::node::{redact, Clock, LinkStats, Node, Routes, Source, UNROUTED};
use crate::notice::{Listening, Notice, Notices};
use crate::trace::{Hooks, OpSpan};

/// The TTL of a client built without one: 30 seconds.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);

/// How long one connection attempt (a node's link or its notice subscriber) may take by
/// default: the core's `CONNECT_TIMEOUT_DEFAULT_MS`, 2 s, as in every binding. The core
/// gives an attempt up at it (the link's and the subscriptions' `Close`); commands wait
/// for an attempt only until their own deadline.
pub const DEFAULT_CONNECT_TIMEOUT: Duration =
    Duration::from_millis(redlock_core::CONNECT_TIMEOUT_DEFAULT_MS);

/// How long one Redis Sentinel may take to connect and name the master by default
/// ([`ClientBuilder::sentinel_query_timeout`]): the core's
/// `SENTINEL_QUERY_TIMEOUT_DEFAULT_MS`, 500 ms, as in every binding.
#[cfg(feature = "sentinel")]
pub const DEFAULT_SENTINEL_QUERY_TIMEOUT: Duration =
    Duration::from_millis(redlock_core::SENTINEL_QUERY_TIMEOUT_DEFAULT_MS);

/// A duration in whole milliseconds, a part of one counting as one (saturating).
#[cfg(feature = "sentinel")]
fn millis_rounded_up(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// Builds a [`Client`]. Every setting but the node URLs is optional; the lock's
/// arithmetic defaults are the core's ([`redlock_core::Config`]).
#[must_use]
pub struct ClientBuilder {
    urls: Vec<String>,
    /// A Sentinel's master instead of URLs: the Sentinels' URLs and the service name.
    #[cfg(feature = "sentinel")]
    sentinel: Option<(Vec<String>, String)>,
    /// How long one Sentinel may take to connect and name the master.
    #[cfg(feature = "sentinel")]
    sentinel_query_timeout: Duration,
    /// How to log in to the master the Sentinels name: `AUTH` and `SELECT`.
    #[cfg(feature = "sentinel")]
    sentinel_master: redis::RedisConnectionInfo,
    /// The user's own connections instead of URLs.
    connections: Option<Vec<redis::aio::MultiplexedConnection>>,
    config: ConfigBuilder,
    root_certificate: Option<Vec<u8>>,
    connect_timeout: Duration,
    notices: bool,
    hooks: Hooks,
}

impl ClientBuilder {
    /// Default TTL of the client's locks (each `lock` call may give its own).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.config = self.config.ttl(ttl);
        self
    }

    /// Attempts of one acquisition, the first included.
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.config = self.config.attempts(attempts);
        self
    }

    /// Base delay between attempts, and the jitter around it.
    pub fn retry_delay(mut self, delay: Duration, jitter: Duration) -> Self {
        self.config = self.config.retry_delay(delay).retry_jitter(jitter);
        self
    }

    /// How long one node may take to answer one round.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.config = self.config.node_timeout(timeout);
        self
    }

    /// The most automatic extensions of one lock ([`Config::max_extensions`]).
    pub fn max_extensions(mut self, max: Option<u32>) -> Self {
        self.config = self.config.max_extensions(max);
        self
    }

    /// Fencing tokens for every lock of this client ([`ConfigBuilder::fencing`], off by
    /// default; [`LockOptions::fencing`] decides per lock). A fenced acquisition costs one
    /// more round trip (the write-back) and keeps one counter key per resource and node,
    /// without TTL; see `docs/fencing.md`. The token is [`Lock::fencing_token`].
    pub fn fencing(mut self, on: bool) -> Self {
        self.config = self.config.fencing(on);
        self
    }

    /// Bytes put in front of every resource name to form its key.
    pub fn key_prefix(mut self, prefix: impl Into<Vec<u8>>) -> Self {
        self.config = self.config.key_prefix(prefix);
        self
    }

    /// Any other core setting (drift, minimum validity, token length, ...).
    pub fn configure(mut self, change: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Self {
        self.config = change(self.config);
        self
    }

    /// Whether acquisitions that wait listen for release notices (on by default). Each
    /// node then gets a second connection, a subscriber, opened when the first
    /// acquisition with a wait limit starts or another finds a lock held. Off, a waiter learns of a release only at its next
    /// retry (and the releaser does not step back for it): for servers whose ACL refuses
    /// `SUBSCRIBE`, or to keep one connection per node.
    pub fn release_notices(mut self, on: bool) -> Self {
        self.notices = on;
        self
    }

    /// Calls `hook` with every event of the client's operations, as the core reports
    /// them (`docs/observability.md`): `acquired`, `not_acquired`, `retry`, `extended`,
    /// `not_extended`, `released`, `not_released`, `inspected`, `not_inspected`,
    /// `node_failed` (with the node and its cause), and `lost` from a lock's keep-alive.
    /// Hooks run in the task that drives the operation, in registration order, so they
    /// must be quick (hand the event to a channel or a metric). A hook that panics is
    /// caught: the panic is printed by the panic hook as usual, and the lock carries on
    /// as if the hook had returned. Nothing about the lock depends on the hooks.
    pub fn on_event(mut self, hook: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.hooks.push(Arc::new(hook));
        self
    }

    /// How long one connection attempt may take (default [`DEFAULT_CONNECT_TIMEOUT`]).
    /// Attempts run in the node's task, so a slow handshake does not fail the command
    /// that started it twice over: later commands find the connection ready.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one Sentinel of a [`Client::sentinel`] client may take to connect (TCP,
    /// TLS, `AUTH`) and name the master, at each connection attempt (default
    /// [`DEFAULT_SENTINEL_QUERY_TIMEOUT`], the core's `SENTINEL_QUERY_TIMEOUT_DEFAULT_MS`,
    /// 500 ms, as in every binding). A Sentinel past it is skipped as one that refused the
    /// connection is, and the next one is asked. The node's connect timeout becomes the
    /// core's `sentinel_connect_timeout_ms`: this bound once per Sentinel, plus the
    /// [`ClientBuilder::connect_timeout`] for the master. Zero is refused by
    /// [`ClientBuilder::build`]; clients of node URLs or connections ignore it.
    #[cfg(feature = "sentinel")]
    pub fn sentinel_query_timeout(mut self, timeout: Duration) -> Self {
        self.sentinel_query_timeout = timeout;
        self
    }

    /// The password (and the ACL `username`, or `None` for the default user) that a
    /// [`Client::sentinel`] client sends (`AUTH`) to the master the Sentinels name, on
    /// every connection, as it would to a node of a `redis://user:password@...` URL. The
    /// Sentinels' own passwords go in their URLs. Without it the master is asked nothing
    /// but `ROLE` and the lock's commands: a master with `requirepass` fails with `auth`.
    /// Clients of node URLs or connections ignore it.
    #[cfg(feature = "sentinel")]
    pub fn sentinel_master_auth(mut self, username: Option<&str>, password: &str) -> Self {
        let mut master = std::mem::take(&mut self.sentinel_master).set_password(password);
        if let Some(username) = username {
            master = master.set_username(username);
        }
        self.sentinel_master = master;
        self
    }

    /// The database a [`Client::sentinel`] client selects on the master (default 0), as
    /// `redis://host/db` does for a node. A negative number is refused by
    /// [`ClientBuilder::build`]; clients of node URLs or connections ignore it.
    #[cfg(feature = "sentinel")]
    pub fn sentinel_master_database(mut self, database: i64) -> Self {
        self.sentinel_master = std::mem::take(&mut self.sentinel_master).set_db(database);
        self
    }

    /// A CA certificate (PEM) that `rediss://` nodes' certificates must chain to, instead
    /// of the system's trust store. (`rediss://host/#insecure` skips verification.)
    pub fn tls_root_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_certificate = Some(pem.into());
        self
    }

    /// Checks the configuration and the URLs (the same server twice is refused: it would
    /// count twice towards the quorum). Connections are made on first use.
    pub fn build(self) -> Result<Client, Error> {
        let config = self.config.build()?;
        if self.connect_timeout < Duration::from_millis(1)
            || self.connect_timeout > Duration::from_millis(redlock_core::MAX_TTL_MS)
        {
            return Err(Error::InvalidSetting {
                setting: "connect_timeout",
                message: format!(
                    "{:?}: a connection attempt needs at least 1 ms, and at most 10^12 ms",
                    self.connect_timeout
                ),
            });
        }
        #[cfg(feature = "sentinel")]
        if let Some((sentinels, service)) = self.sentinel {
            if self.sentinel_query_timeout.is_zero() {
                return Err(Error::InvalidSetting {
                    setting: "sentinel_query_timeout",
                    message: String::from(
                        "zero: each Sentinel needs time to connect and name the master",
                    ),
                });
            }
            if self.sentinel_master.db() < 0 {
                return Err(Error::InvalidSetting {
                    setting: "sentinel_master_database",
                    message: format!(
                        "{}: a database number is zero or more",
                        self.sentinel_master.db()
                    ),
                });
            }
            if sentinels.is_empty() {
                return Err(Error::InvalidUrl {
                    index: 0,
                    url: String::new(),
                    message: String::from("At least one sentinel is required"),
                });
            }
            let mut clients = Vec::with_capacity(sentinels.len());
            for (index, url) in sentinels.iter().enumerate() {
                let label = redact(url);
                let client = redis::Client::open(url.as_str()).map_err(|e| Error::InvalidUrl {
                    index,
                    url: label.clone(),
                    message: e.to_string(),
                })?;
                clients.push((client, label));
            }
            // Every Sentinel's bound in turn, then the master's connection: the core's
            // composition, the same in every binding.
            let connect_timeout = Duration::from_millis(redlock_core::sentinel_connect_timeout_ms(
                clients.len(),
                millis_rounded_up(self.sentinel_query_timeout),
                millis_rounded_up(self.connect_timeout),
            ));
            let sentinel = crate::sentinel::Sentinels::new(
                clients,
                service.clone(),
                self.sentinel_query_timeout,
                self.sentinel_master,
            );
            let clock = Clock {
                origin: Instant::now(),
            };
            let routes = Arc::new(Routes::default());
            let node = Arc::new(Node::new(
                format!("sentinel master {service}"),
                Source::Sentinel(Arc::new(sentinel)),
                connect_timeout,
                clock,
                Arc::clone(&routes),
            ));
            return Ok(Client::assemble(
                config,
                vec![node],
                routes,
                clock,
                Notices::new(Vec::new(), self.connect_timeout),
                false,
                self.hooks,
            ));
        }
        if let Some(connections) = self.connections {
            let clock = Clock {
                origin: Instant::now(),
            };
            let routes = Arc::new(Routes::default());
            let nodes = connections
                .into_iter()
                .enumerate()
                .map(|(index, connection)| {
                    Arc::new(Node::new(
                        format!("connection #{index}"),
                        Source::Given(connection),
                        self.connect_timeout,
                        clock,
                        Arc::clone(&routes),
                    ))
                })
                .collect();
            return Ok(Client::assemble(
                config,
                nodes,
                routes,
                clock,
                Notices::new(Vec::new(), self.connect_timeout),
                false,
                self.hooks,
            ));
        }
        if let Some((first, second)) = redlock_core::duplicate_node(&self.urls) {
            return Err(Error::DuplicateNode {
                first,
                second,
                url: redact(&self.urls[second]),
            });
        }
        let clock = Clock {
            origin: Instant::now(),
        };
        let routes = Arc::new(Routes::default());
        let mut nodes = Vec::with_capacity(self.urls.len());
        let mut clients = Vec::with_capacity(self.urls.len());
        for (index, url) in self.urls.iter().enumerate() {
            let label = redact(url);
            let invalid = |message: String| Error::InvalidUrl {
                index,
                url: label.clone(),
                message,
            };
            check_url(url).map_err(invalid)?;
            let client = match &self.root_certificate {
                Some(pem) if url.starts_with("rediss://") => redis::Client::build_with_tls(
                    url.as_str(),
                    redis::TlsCertificates {
                        client_tls: None,
                        root_cert: Some(pem.clone()),
                    },
                )
                .map_err(|e| invalid(e.to_string()))?,
                _ => redis::Client::open(url.as_str()).map_err(|e| invalid(e.to_string()))?,
            };
            clients.push(client.clone());
            nodes.push(Arc::new(Node::new(
                label,
                Source::Url(client),
                self.connect_timeout,
                clock,
                Arc::clone(&routes),
            )));
        }
        Ok(Client::assemble(
            config,
            nodes,
            routes,
            clock,
            Notices::new(clients, self.connect_timeout),
            self.notices,
            self.hooks,
        ))
    }
}

impl Client {
    fn assemble(
        config: Config,
        nodes: Vec<Arc<Node>>,
        routes: Arc<Routes>,
        clock: Clock,
        notices: Notices,
        listen: bool,
        hooks: Hooks,
    ) -> Client {
        // The same settings with fencing the other way, for locks that ask for it.
        let flipped = config
            .to_builder()
            .fencing(!config.fencing())
            .build()
            .map(|flipped| Mutex::new(Redlock::new(flipped)));
        Client {
            inner: Arc::new(Inner {
                nodes,
                routes,
                next_tag: AtomicU64::new(UNROUTED + 1),
                redlock: Mutex::new(Redlock::new(config.clone())),
                flipped,
                notices,
                listen,
                hooks,
                config,
                clock,
                closed: AtomicBool::new(false),
                locks: Mutex::new(Vec::new()),
            }),
        }
    }
}

/// An async Redlock client over N independent Redis nodes (N = 1 is a single-instance
/// lock). Cheap to clone; clones share connections.
///
/// Every decision (quorum, validity, retries, what to release, when to extend, what a
/// node gets and when) is made by [`redlock_core`]; the client hands each command to its
/// node's [`redlock_core::Link`], does the I/O the link asks for, and hands replies and
/// timeouts back.
///
/// Needs a Tokio runtime with the time driver enabled.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) nodes: Vec<Arc<Node>>,
    /// Where the links deliver replies, per operation tag.
    routes: Arc<Routes>,
    next_tag: AtomicU64,
    redlock: Mutex<Redlock>,
    /// The configuration with fencing the other way (or why it is not valid).
    flipped: Result<Mutex<Redlock>, ConfigError>,
    /// Release notices for waiting acquisitions.
    pub(crate) notices: Notices,
    /// Acquisitions that may retry listen for notices.
    listen: bool,
    /// The user's event hooks.
    pub(crate) hooks: Hooks,
    pub(crate) config: Config,
    /// The client's monotonic clock.
    clock: Clock,
    /// [`Client::close`] was called: every later call is [`Error::Closed`].
    closed: AtomicBool,
    /// The locks acquired through this client, for [`Client::close`] to release those
    /// still held (entries of ended locks are dropped as new ones come).
    locks: Mutex<Vec<Weak<LockShared>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Each node's task finishes what its link still has to write, then ends.
        for node in &self.nodes {
            node.shut_down();
        }
        self.notices.close();
    }
}

/// Options of one acquisition.
#[derive(Clone, Default)]
#[must_use]
pub struct LockOptions {
    ttl: Option<Duration>,
    wait: Option<Duration>,
    fencing: Option<bool>,
    auto_extend: bool,
    on_retry: Option<Arc<dyn Fn(RetryProgress) + Send + Sync>>,
}

impl LockOptions {
    /// The client's defaults: its TTL, no automatic extension.
    pub fn new() -> LockOptions {
        LockOptions::default()
    }

    /// This lock's TTL instead of the client's.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Wait up to `limit` for the lock (a deadline, not a number of attempts: the
    /// client's `attempts` do not apply). The core keeps trying until then, never
    /// starting an attempt that could not finish by the limit, and gives up with
    /// [`Error::NotAcquired`] (held elsewhere) within about a node timeout of it (the
    /// last attempt starts at the latest one node timeout before the limit). While
    /// waiting, the client listens for release notices on every node and tries again as
    /// soon as they make a quorum possible, instead of sleeping out the retry delay. A
    /// limit of zero tries once. Dropping the future cancels the wait and leaves nothing
    /// behind (no key, no subscription).
    pub fn wait(mut self, limit: Duration) -> Self {
        self.wait = Some(limit);
        self
    }

    /// Fencing for this lock, whatever the client's setting ([`ClientBuilder::fencing`]).
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = Some(on);
        self
    }

    /// Keep the lock alive in the background: the core's [`redlock_core::KeepAlive`]
    /// says when to extend, when to retry a failed extension and when the lock is lost;
    /// the lock's [`Lock::lost`] future resolves as soon as it is.
    pub fn auto_extend(mut self, on: bool) -> Self {
        self.auto_extend = on;
        self
    }

    /// Called each time another attempt starts after a failed one.
    pub fn on_retry(mut self, callback: impl Fn(RetryProgress) + Send + Sync + 'static) -> Self {
        self.on_retry = Some(Arc::new(callback));
        self
    }
}

/// Progress of an acquisition that is retrying, given to [`LockOptions::on_retry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryProgress {
    /// The attempt starting now, from 2.
    pub attempt: u32,
    /// The most attempts this acquisition makes (without a wait limit).
    pub attempts: u32,
    /// The wait limit ([`LockOptions::wait`]), if one was given: attempts go on until
    /// it, whatever [`RetryProgress::attempts`] says.
    pub wait: Option<Duration>,
    /// Time since the acquisition started.
    pub elapsed: Duration,
}

/// A release a quorum of nodes confirmed (a release fewer confirmed is
/// [`Error::NotReleased`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleaseReport {
    /// Nodes that deleted a key holding the token (0 when none held it any more).
    pub released: usize,
    /// How each node answered: `success` (deleted), `conflict` (nothing of ours there),
    /// an error, or a timeout.
    pub nodes: Vec<NodeReport>,
}

/// A successful extension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtendReport {
    /// Validity left when the quorum agreed.
    pub validity: Duration,
    /// The new end of validity, on the client's monotonic clock.
    pub valid_until: Instant,
    /// How each node answered.
    pub nodes: Vec<NodeReport>,
}

/// What one node holds under a key, from `GET` and `PTTL` (diagnostics only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyStatus {
    /// Node position and URL.
    pub index: usize,
    /// The node's URL, password redacted.
    pub url: String,
    /// The value (token) stored, if any.
    pub value: Option<String>,
    /// Milliseconds before the key expires, if it exists and has a TTL.
    pub ttl_ms: Option<i64>,
    /// Why the node could not be asked, if it could not.
    pub error: Option<String>,
}

impl Client {
    /// A builder for nodes at `urls` (`redis://[:password@]host:port[/db]`, or
    /// `rediss://` for TLS).
    pub fn builder<I, S>(urls: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let urls: Vec<String> = urls.into_iter().map(Into::into).collect();
        ClientBuilder {
            config: Config::builder(urls.len(), DEFAULT_TTL),
            urls,
            #[cfg(feature = "sentinel")]
            sentinel: None,
            #[cfg(feature = "sentinel")]
            sentinel_query_timeout: DEFAULT_SENTINEL_QUERY_TIMEOUT,
            #[cfg(feature = "sentinel")]
            sentinel_master: redis::RedisConnectionInfo::default(),
            connections: None,
            root_certificate: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            notices: true,
            hooks: Hooks::default(),
        }
    }

    /// A builder for nodes reached through connections you opened yourself, one per node
    /// (each to an independent Redis server; the client cannot tell when two reach the
    /// same one, so the quorum is yours to keep honest). Your connection setup (TLS,
    /// `AUTH`, `SELECT`, a proxy, timeouts of the `redis` crate) applies; every decision
    /// stays the core's: each node's [`redlock_core::Link`] still orders its writes and
    /// keeps its deadlines, writing through a clone of the connection.
    ///
    /// What changes: a multiplexed connection never reconnects, so once yours breaks its
    /// node counts as failing for the rest of the client's life (build a new client with
    /// a new connection; URLs reconnect by themselves). Release notices are off (they
    /// need a subscriber connection per node, which the client cannot open for you):
    /// waiting acquisitions retry on their retry delay. A connection with a response
    /// timeout of its own may end a write before the node's deadline; that is only a
    /// failure of that node, as any other.
    pub fn from_connections(connections: Vec<redis::aio::MultiplexedConnection>) -> ClientBuilder {
        let mut builder = Client::builder(std::iter::empty::<String>());
        builder.config = Config::builder(connections.len(), DEFAULT_TTL);
        builder.connections = Some(connections);
        builder.notices = false;
        builder
    }

    /// A builder for a single-instance lock (N = 1) on the master that the Sentinels at
    /// `sentinels` (`redis://host:26379`) name for `service`. Each connection attempt
    /// asks the Sentinels again, in turn, so after a failover the next reconnection
    /// reaches the new master. Release notices are off.
    ///
    /// Each Sentinel has the core's `SENTINEL_QUERY_TIMEOUT_DEFAULT_MS` (500 ms, or
    /// [`ClientBuilder::sentinel_query_timeout`]) to connect and name the master; one past
    /// it (a stopped process, a black-holed host) is skipped as one that refused the
    /// connection is, and the next one is asked. The node's connect timeout is the core's
    /// `sentinel_connect_timeout_ms(sentinels, query, connect)`: every Sentinel's bound in
    /// turn, then [`ClientBuilder::connect_timeout`] for the master (the same in every
    /// binding). A Sentinel must say it is one (`ROLE`) and flag the master it names
    /// `master` and not down; the master must say it is one (`ROLE`). The master is
    /// reached over TCP, logged in to with [`ClientBuilder::sentinel_master_auth`] and
    /// in the database of [`ClientBuilder::sentinel_master_database`]; the Sentinels'
    /// own passwords go in their URLs.
    ///
    /// **Failover caveat** (`docs/safety.md`, "single N=1 + replica"): replication is
    /// asynchronous, so a failover before the lock's key reached the replica loses the
    /// lock, and a second client can acquire it while the first still believes it holds
    /// it. Use fencing tokens ([`ClientBuilder::fencing`]) where that matters, or N
    /// independent nodes.
    #[cfg(feature = "sentinel")]
    pub fn sentinel<I, S>(sentinels: I, service: impl Into<String>) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut builder = Client::builder(["sentinel"]);
        builder.urls = Vec::new();
        builder.sentinel = Some((
            sentinels.into_iter().map(Into::into).collect(),
            service.into(),
        ));
        builder.notices = false;
        builder
    }

    /// A client with every default for nodes at `urls`.
    pub fn new<I, S>(urls: I) -> Result<Client, Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Client::builder(urls).build()
    }

    /// The checked configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The nodes' URLs, passwords redacted.
    pub fn node_urls(&self) -> Vec<String> {
        self.inner
            .nodes
            .iter()
            .map(|n| n.label().to_string())
            .collect()
    }

    /// Now, on the client's monotonic clock.
    pub fn now(&self) -> Time {
        self.inner.now()
    }

    /// The instant a [`Time`] of this client stands for.
    pub fn instant(&self, time: Time) -> Instant {
        self.inner.instant(time)
    }

    /// Connects to every node at once, waiting at most `timeout` (TLS and `AUTH`
    /// included), and reports, per node, `Ok` or why not (the text starts with the
    /// cause: `refused`, `auth`, `tls`, `timeout`, `closed`). Each connection made is
    /// the one the node's link uses when it next connects. Optional: lock operations
    /// connect on first use.
    pub async fn connect(&self, timeout: Duration) -> Vec<Result<(), String>> {
        let deadline = tokio::time::Instant::now() + timeout;
        futures_util::future::join_all(self.inner.nodes.iter().map(|n| n.probe(deadline))).await
    }

    /// Waits at most `timeout` until no node's link has anything queued or awaiting a
    /// reply: commands still out when an operation decided early (each ends by its
    /// deadline), releases of dropped guards and cancelled acquisitions, releases a
    /// link owes a node. True if every link is idle. Call it before a short-lived
    /// process exits, so that every node gets its command.
    pub async fn wait_idle(&self, timeout: Duration) -> bool {
        let all = futures_util::future::join_all(self.inner.nodes.iter().map(|n| n.wait_idle()));
        tokio::time::timeout(timeout, all).await.is_ok()
    }

    /// Per node, where its link stands (connection open, writes in flight, commands
    /// queued, releases owed). Diagnostics: it decides nothing.
    pub fn link_stats(&self) -> Vec<LinkStats> {
        self.inner.nodes.iter().map(|n| n.stats()).collect()
    }

    /// Acquires a lock on `resource` for `ttl`.
    pub async fn lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock, Error> {
        self.lock_with(&[resource], LockOptions::new().ttl(ttl))
            .await
    }

    /// Acquires one lock covering every resource in `resources` (all or none), for `ttl`.
    pub async fn lock_many<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        ttl: Duration,
    ) -> Result<Lock, Error> {
        self.lock_with(resources, LockOptions::new().ttl(ttl)).await
    }

    /// Acquires one lock on `resources` with `options`.
    pub async fn lock_with<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        options: LockOptions,
    ) -> Result<Lock, Error> {
        self.inner.check_open()?;
        let started = self.now();
        let mut acquire = AcquireOptions::new();
        if let Some(ttl) = options.ttl {
            acquire = acquire.ttl(ttl);
        }
        if let Some(wait) = options.wait {
            acquire = acquire.wait(wait);
        }
        let fencing = options.fencing.unwrap_or(self.inner.config.fencing());
        let op = {
            let mut redlock = self.inner.redlock_for(fencing)?;
            redlock.acquire_with(resources, &acquire, started)?
        };
        let origin = self.instant(started);
        let attempts = self.inner.config.attempts();
        // When it listens for releases is the core's decision (`Operation::listens`).
        let listen = self.inner.listen;
        let keys = keys(&self.inner.config, resources);
        let outcome = self
            .inner
            .drive_listening(
                op,
                &keys,
                |attempt| {
                    if let Some(callback) = &options.on_retry {
                        callback(RetryProgress {
                            attempt,
                            attempts,
                            wait: options.wait,
                            elapsed: origin.elapsed(),
                        });
                    }
                },
                listen,
            )
            .await?;
        match outcome {
            Outcome::Acquired(acquired) => {
                let raw = resources.iter().map(|r| r.as_ref().to_vec()).collect();
                let resources = resources
                    .iter()
                    .map(|r| String::from_utf8_lossy(r.as_ref()).into_owned())
                    .collect();
                let nodes = self.inner.reports(&acquired.nodes);
                let shared = LockShared::new(
                    self.clone(),
                    resources,
                    raw,
                    acquired,
                    nodes,
                    options.auto_extend,
                );
                self.inner.register(&shared);
                if self.inner.check_open().is_err() && shared.claim_end() {
                    // Closed while acquiring, after close collected the locks: this one
                    // is released here, as close would have.
                    let _ = self.inner.release(&shared.lease(), true).await;
                    return Err(Error::Closed);
                }
                Ok(Lock::new(shared))
            }
            Outcome::NotAcquired(failed) => Err(Error::NotAcquired(NotAcquired {
                reason: failed.reason,
                attempts: failed.attempts,
                nodes: self.inner.reports(&failed.nodes),
            })),
            other => Err(Error::Internal(unexpected(&other))),
        }
    }

    /// Extends a lock known only by its resources and token (another process's, a
    /// shell script's) by `ttl`. The key is never re-created: an expired lock stays
    /// expired.
    pub async fn extend_token<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        token: &str,
        ttl: Duration,
    ) -> Result<ExtendReport, Error> {
        self.inner.check_open()?;
        let lease = self.inner.redlock().lease(resources, token, Time::ZERO)?;
        self.inner.extend(&lease, Some(ttl)).await
    }

    /// Releases a lock known only by its resources and token: deletes each key on each
    /// node where it still holds `token`, never a key holding another. Fewer than a
    /// quorum of nodes confirming is [`Error::NotReleased`].
    pub async fn release_token<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        token: &str,
    ) -> Result<ReleaseReport, Error> {
        self.inner.check_open()?;
        let lease = self.inner.redlock().lease(resources, token, Time::ZERO)?;
        self.inner.release(&lease, false).await
    }

    /// [`Client::release_token`], and then the replies of the nodes that had not
    /// answered when the quorum decided, each until the round's deadline (at most the
    /// node timeout after the release started): the report is every node's final answer
    /// (`released` counts every node that deleted a key; a node silent at its deadline
    /// is `timeout`). Costs up to one node timeout more when a node does not answer
    /// (frozen, unreachable); the lock's fate is the same either way.
    pub async fn release_token_settled<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        token: &str,
    ) -> Result<ReleaseReport, Error> {
        self.inner.check_open()?;
        let lease = self.inner.redlock().lease(resources, token, Time::ZERO)?;
        self.inner.release(&lease, true).await
    }

    /// Closes the client: releases every lock acquired through it that is still held
    /// (neither released, dropped nor [leaked](Lock::leak)), waiting for each node's
    /// answer up to the release's deadline (one node timeout: the releases run at
    /// once), waits at most one more node timeout for commands still out (releases of
    /// dropped guards, cleanups of cancelled acquisitions), then closes the node
    /// connections and the notice subscribers. Bounded: about two node timeouts
    /// whatever the nodes do; a node that does not answer keeps its key until its TTL.
    ///
    /// From then on every call on the client, its clones and its locks (`lock`,
    /// `extend_token`, `release_token`, `is_locked`, a lock's `extend`, `release`,
    /// `is_owned`) fails with [`Error::Closed`] (class `used_after_close`) and changes
    /// nothing. A lock whose release at close failed is not marked released
    /// ([`Lock::state`] stays as it was until its lease runs out). Calling `close` again
    /// does nothing. Without `close`, the client lives as long as any clone of it or
    /// any of its locks (a lock keeps its client's connections).
    pub async fn close(&self) {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let locks: Vec<Arc<LockShared>> = {
            let mut registry = self
                .inner
                .locks
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            registry
                .drain(..)
                .filter_map(|weak| weak.upgrade())
                .collect()
        };
        let releases = locks
            .iter()
            .filter(|shared| shared.claim_end())
            .map(|shared| async move {
                shared.stop_keeping();
                let result = self.inner.release(&shared.lease(), true).await;
                if result.is_ok() {
                    shared.mark_released();
                }
            });
        futures_util::future::join_all(releases).await;
        let idle = futures_util::future::join_all(self.inner.nodes.iter().map(|n| n.wait_idle()));
        let _ = tokio::time::timeout(self.inner.config.node_timeout(), idle).await;
        for node in &self.inner.nodes {
            node.shut_down();
        }
        self.inner.notices.close();
    }

    /// True once [`Client::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Whether anyone holds the lock on `resources` now: a quorum of nodes hold one
    /// token on every key (the core's inspection, `docs/inspection.md`). Keys left on
    /// fewer than a quorum of nodes (a failed attempt, a holder that lost the lock) do
    /// not make it held. Sends `GET` (one resource) or `MGET` to every node and changes
    /// nothing. Too few nodes answering to say is [`Error::NotInspected`]
    /// (`nodes_failing`).
    ///
    /// The answer describes the moment the nodes answered: use it for monitoring, never
    /// instead of acquiring.
    pub async fn is_locked<R: AsRef<[u8]>>(&self, resources: &[R]) -> Result<bool, Error> {
        self.inner.check_open()?;
        Ok(self.inner.inspect(resources).await?.is_locked())
    }

    /// How many nodes have a subscriber connection for release notices open (or being
    /// opened) now. Diagnostics: it decides nothing.
    pub fn notice_subscribers(&self) -> usize {
        self.inner.notices.subscribers()
    }

    /// What each node holds under `resource`'s key, and for how long (`GET` and `PTTL`,
    /// each bounded by the node timeout). Diagnostics: it decides nothing.
    pub async fn inspect(&self, resource: impl AsRef<[u8]>) -> Vec<KeyStatus> {
        if self.inner.check_open().is_err() {
            return (self.inner.nodes.iter().enumerate())
                .map(|(index, node)| KeyStatus {
                    index,
                    url: node.label().to_string(),
                    value: None,
                    ttl_ms: None,
                    error: Some(Error::Closed.to_string()),
                })
                .collect();
        }
        let mut key = self.inner.config.key_prefix().to_vec();
        key.extend_from_slice(resource.as_ref());
        let deadline = tokio::time::Instant::now() + self.inner.config.node_timeout();
        let asks = self.inner.nodes.iter().enumerate().map(|(index, node)| {
            let key = key.clone();
            async move {
                let mut get = redis::cmd("GET");
                get.arg(&key);
                let mut pttl = redis::cmd("PTTL");
                pttl.arg(&key);
                let mut replies = node.query_once(vec![get, pttl], deadline).await.into_iter();
                let value = replies.next().unwrap_or(Reply::Timeout);
                let ttl = replies.next().unwrap_or(Reply::Timeout);
                let mut status = KeyStatus {
                    index,
                    url: node.label().to_string(),
                    value: None,
                    ttl_ms: None,
                    error: None,
                };
                match value {
                    Reply::Bulk(bytes) => {
                        status.value = Some(String::from_utf8_lossy(&bytes).into_owned());
                    }
                    Reply::Nil => {}
                    other => status.error = Some(describe_reply(&other)),
                }
                match ttl {
                    Reply::Integer(ms) if ms >= 0 => status.ttl_ms = Some(ms),
                    Reply::Integer(_) => {}
                    other => {
                        status.error.get_or_insert_with(|| describe_reply(&other));
                    }
                }
                status
            }
        });
        futures_util::future::join_all(asks).await
    }
}

/// The rules of a node URL that the `redis` crate would refuse without naming them: a
/// known scheme, and a port from 1 to 65535 (port 0 would only fail when connecting).
fn check_url(url: &str) -> Result<(), String> {
    const SCHEMES: [&str; 7] = [
        "redis",
        "rediss",
        "redis+unix",
        "unix",
        "valkey",
        "valkeys",
        "valkey+unix",
    ];
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(String::from(
            "not a URL: a node URL is redis://host:port or rediss://host:port",
        ));
    };
    if !SCHEMES.contains(&scheme) {
        return Err(format!(
            "unknown scheme {:?}: a node URL starts with redis:// or rediss:// (or unix://)",
            crate::error::clip(scheme)
        ));
    }
    if !matches!(scheme, "redis" | "rediss" | "valkey" | "valkeys") {
        return Ok(());
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let port = match host_port.strip_prefix('[') {
        Some(v6) => v6
            .split_once(']')
            .and_then(|(_, tail)| tail.strip_prefix(':')),
        None => host_port.rsplit_once(':').map(|(_, port)| port),
    };
    match port {
        None => Ok(()),
        Some(text) => match text.parse::<u16>() {
            Ok(port) if port >= 1 => Ok(()),
            _ => Err(format!(
                "port {:?} is not valid: a node's port is a number from 1 to 65535",
                crate::error::clip(text)
            )),
        },
    }
}

/// The keys of `resources` (the prefix, then the name), as the core forms them.
fn keys<R: AsRef<[u8]>>(config: &Config, resources: &[R]) -> Vec<Vec<u8>> {
    resources
        .iter()
        .map(|resource| {
            let mut key = config.key_prefix().to_vec();
            key.extend_from_slice(resource.as_ref());
            key
        })
        .collect()
}

fn describe_reply(reply: &Reply) -> String {
    match reply {
        Reply::Error(text) => text.clone(),
        Reply::ConnectionFailed(text) => format!("connection failed: {text}"),
        Reply::Timeout => String::from("timed out"),
        other => format!("unexpected reply {other:?}"),
    }
}

fn unexpected(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Acquired(_) => "unexpected outcome: acquired",
        Outcome::NotAcquired(_) => "unexpected outcome: not acquired",
        Outcome::Extended(_) => "unexpected outcome: extended",
        Outcome::NotExtended(_) => "unexpected outcome: not extended",
        Outcome::Released(_) => "unexpected outcome: released",
        Outcome::NotReleased(_) => "unexpected outcome: not released",
        _ => "unexpected outcome",
    }
}

impl Inner {
    pub(crate) fn now(&self) -> Time {
        self.clock.now()
    }

    pub(crate) fn instant(&self, time: Time) -> Instant {
        self.clock.instant(time)
    }

    /// Records a new lock for [`Client::close`], forgetting the entries of ended ones.
    fn register(&self, shared: &Arc<LockShared>) {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        locks.retain(|weak| weak.strong_count() > 0);
        locks.push(Arc::downgrade(shared));
    }

    fn redlock(&self) -> MutexGuard<'_, Redlock> {
        // The core keeps its own state consistent; a panic elsewhere cannot break it.
        self.redlock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The core client for acquisitions with `fencing` on or off.
    fn redlock_for(&self, fencing: bool) -> Result<MutexGuard<'_, Redlock>, Error> {
        if fencing == self.config.fencing() {
            return Ok(self.redlock());
        }
        match &self.flipped {
            Ok(redlock) => Ok(redlock
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())),
            Err(error) => Err(Error::Config(*error)),
        }
    }

    pub(crate) fn reports(&self, results: &[redlock_core::NodeResult]) -> Vec<NodeReport> {
        results
            .iter()
            .enumerate()
            .map(|(index, result)| NodeReport {
                index,
                url: self
                    .nodes
                    .get(index)
                    .map_or_else(String::new, |n| n.label().to_string()),
                result: result.clone(),
            })
            .collect()
    }

    /// Inspects who holds the lock on `resources` (the core's inspection); too few
    /// answers to say is [`Error::NotInspected`].
    pub(crate) async fn inspect<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
    ) -> Result<redlock_core::Inspected, Error> {
        self.check_open()?;
        let op = self.redlock().inspect(resources, self.now())?;
        let keys = keys(&self.config, resources);
        match self.drive(op, &keys, |_| {}).await? {
            Outcome::Inspected(inspected) => Ok(inspected),
            Outcome::NotInspected(failed) => Err(Error::NotInspected(NotInspected {
                nodes: self.reports(&failed.nodes),
            })),
            other => Err(Error::Internal(unexpected(&other))),
        }
    }

    /// Hands a command to its node's link; `tag` routes the reply back.
    fn submit(
        &self,
        tag: u64,
        command: redlock_core::Command,
    ) -> Result<(), redlock_core::Command> {
        match self.nodes.get(command.node()) {
            Some(node) => {
                node.submit(tag, command);
                Ok(())
            }
            None => Err(command),
        }
    }

    /// The driver loop, one rule: poll the operation until `Wait` or the outcome; every
    /// command goes to its node's link; wake up for a reply the links deliver or at the
    /// `Wait` instant. `on_attempt` hears of every attempt after the first.
    ///
    /// Dropped before the outcome (the caller cancelled), the operation is abandoned:
    /// what [`Operation::abandon`] emits (the release of an acquisition's current token)
    /// goes to the links at once, which write it whatever happens to this future.
    pub(crate) async fn drive(
        &self,
        op: Operation,
        keys: &[Vec<u8>],
        on_attempt: impl FnMut(u32),
    ) -> Result<Outcome, Error> {
        self.drive_listening(op, keys, on_attempt, false).await
    }

    /// Hands every event the operation has to the hooks and its span.
    fn drain_events(&self, op: &mut Operation, span: &OpSpan) {
        while let Some(event) = op.poll_event() {
            span.event(&event);
            self.hooks.emit(&event);
        }
    }

    /// Reports a lock lost (from its keep-alive) to the hooks and to tracing.
    pub(crate) fn emit_lost(&self, event: &Event) {
        crate::trace::lost(event);
        self.hooks.emit(event);
    }

    /// [`Inner::drive`] for an acquisition that may listen for release notices of `keys`
    /// (`listen`: notices are on): it listens while the core says so
    /// ([`Operation::listens`]), each notice goes to the operation, and the core decides
    /// whether it changes anything.
    pub(crate) async fn drive_listening(
        &self,
        op: Operation,
        keys: &[Vec<u8>],
        on_attempt: impl FnMut(u32),
        listen: bool,
    ) -> Result<Outcome, Error> {
        let (outcome, _) = self
            .drive_inner(op, keys, on_attempt, listen, false)
            .await?;
        Ok(outcome)
    }

    /// [`Inner::drive`], and then, past the outcome, the replies of the nodes that had
    /// not answered when the operation decided, each until the round's deadline: the
    /// per-node results returned are final (a node silent at its deadline is `Timeout`).
    pub(crate) async fn drive_settled(
        &self,
        op: Operation,
        keys: &[Vec<u8>],
    ) -> Result<(Outcome, Vec<redlock_core::NodeResult>), Error> {
        self.drive_inner(op, keys, |_| {}, false, true).await
    }

    async fn drive_inner(
        &self,
        op: Operation,
        keys: &[Vec<u8>],
        mut on_attempt: impl FnMut(u32),
        listen: bool,
        settle: bool,
    ) -> Result<(Outcome, Vec<redlock_core::NodeResult>), Error> {
        // The latest deadline of the commands sent in the current round.
        let mut round_deadline: Option<Time> = None;
        let mut listening: Option<Listening> = None;
        let tag = self.next_tag.fetch_add(1, Ordering::Relaxed);
        let mut replies = self.routes.open(tag);
        let mut driving = Driving {
            inner: self,
            span: OpSpan::new(op.kind(), keys),
            op,
            tag,
        };
        let span = &driving.span;
        let op = &mut driving.op;
        let mut attempt = op.attempt();
        loop {
            // Checked after every input, before its outputs go out: a waiter with a limit
            // listens from the first refusal by a held key (before its first attempt is
            // sent after a recent wait for the resource), a retrying one as its failed
            // attempt's cleanup goes out.
            if listen && listening.is_none() && op.listens() {
                listening = Some(self.notices.listen(op.notice_channels()));
            }
            let mut wake = None;
            let mut done = None;
            while let Some(output) = op.poll_output() {
                match output {
                    Output::Send(command) => {
                        if settle {
                            let deadline = command.deadline();
                            round_deadline =
                                Some(round_deadline.map_or(deadline, |at| at.max(deadline)));
                        }
                        if let Err(command) = self.submit(tag, command) {
                            // The core only names nodes 0..N of this configuration.
                            let _ = op.handle_reply(
                                command.request_id(),
                                Reply::ConnectionFailed(String::from("no such node")),
                                self.now(),
                            );
                        }
                    }
                    Output::Wait(at) => wake = Some(at),
                    Output::Outcome(outcome) => {
                        done = Some(outcome);
                        break;
                    }
                    _ => {}
                }
            }
            self.drain_events(op, span);
            if let Some(outcome) = done {
                span.finish(op.attempt(), &outcome);
                if !settle {
                    return Ok((outcome, Vec::new()));
                }
                let results = self
                    .settle(op, &mut replies, round_deadline.unwrap_or(Time::ZERO))
                    .await;
                self.drain_events(op, span);
                return Ok((outcome, results));
            }
            if op.attempt() != attempt {
                attempt = op.attempt();
                on_attempt(attempt);
            }
            let Some(at) = wake else {
                return Err(Error::Internal("the operation stopped without an outcome"));
            };
            tokio::select! {
                biased;
                Some((request, reply)) = replies.recv() => {
                    // A reply the operation refuses (a second one for a request) changes
                    // nothing, as the core documents.
                    let _ = op.handle_reply(request, reply, self.now());
                }
                Some(notice) = async {
                    match listening.as_mut() {
                        Some(listening) => listening.recv().await,
                        None => std::future::pending().await,
                    }
                } => {
                    // Only nodes 0..N subscribe, so the index is always known.
                    let _ = match notice {
                        Notice::Message(node, message) => {
                            op.handle_notice_message(node, &message, self.now())
                        }
                        // A release before the subscription took effect went unheard
                        // (`docs/bindings.md`, rule 13): the core decides if one may have.
                        Notice::Subscribed(node) => op.handle_subscribed(node, self.now()),
                    };
                }
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(self.instant(at))) => {
                    op.handle_timeout(self.now());
                }
            }
        }
    }

    /// Past a decided operation's outcome: hands it the replies still coming until none
    /// is pending or `deadline` (the round's) has passed, then gives its per-node results,
    /// a node still silent counting as `Timeout` (no reply came before its deadline).
    async fn settle(
        &self,
        op: &mut Operation,
        replies: &mut tokio::sync::mpsc::UnboundedReceiver<(redlock_core::RequestId, Reply)>,
        deadline: Time,
    ) -> Vec<redlock_core::NodeResult> {
        let until = tokio::time::Instant::from_std(self.instant(deadline));
        while op
            .node_results()
            .iter()
            .any(|result| matches!(result, redlock_core::NodeResult::Pending))
        {
            tokio::select! {
                biased;
                Some((request, reply)) = replies.recv() => {
                    // Late replies only change the per-node results (the core's rule).
                    let _ = op.handle_reply(request, reply, self.now());
                }
                () = tokio::time::sleep_until(until) => break,
            }
        }
        op.node_results()
            .into_iter()
            .map(|result| match result {
                redlock_core::NodeResult::Pending => redlock_core::NodeResult::Timeout,
                other => other,
            })
            .collect()
    }

    /// Extends `lease` (by `ttl`, or its own TTL): the raw outcome.
    pub(crate) async fn extend_outcome(
        &self,
        lease: &Lease,
        ttl: Option<Duration>,
    ) -> Result<Outcome, Error> {
        self.check_open()?;
        let now = self.now();
        let op = {
            let redlock = self.redlock();
            match ttl {
                Some(ttl) => redlock.extend_for(lease, ttl, now)?,
                None => redlock.extend(lease, now)?,
            }
        };
        self.drive(op, lease.keys(), |_| {}).await
    }

    /// An extension's outcome as this crate reports it.
    pub(crate) fn extend_result(&self, outcome: Outcome) -> Result<ExtendReport, Error> {
        match outcome {
            Outcome::Extended(extended) => Ok(ExtendReport {
                validity: extended.validity,
                valid_until: self.instant(extended.lease.valid_until()),
                nodes: self.reports(&extended.nodes),
            }),
            Outcome::NotExtended(failed) => Err(Error::NotExtended(NotExtended {
                class: Outcome::NotExtended(failed.clone())
                    .error_class()
                    .unwrap_or(redlock_core::ErrorClass::NodesFailing),
                reason: failed.reason,
                lost: failed.is_lost(),
                validity: failed.validity,
                nodes: self.reports(&failed.nodes),
            })),
            other => Err(Error::Internal(unexpected(&other))),
        }
    }

    /// Extends `lease` (by `ttl`, or its own TTL); the report on success.
    pub(crate) async fn extend(
        &self,
        lease: &Lease,
        ttl: Option<Duration>,
    ) -> Result<ExtendReport, Error> {
        let outcome = self.extend_outcome(lease, ttl).await?;
        self.extend_result(outcome)
    }

    /// Releases `lease`. With `settle`, the report waits for every node's reply up to
    /// the round's deadline ([`Inner::drive_settled`]): `released` then counts every
    /// node that deleted a key, not only those that answered before the quorum decided.
    pub(crate) async fn release(
        &self,
        lease: &Lease,
        settle: bool,
    ) -> Result<ReleaseReport, Error> {
        let op = self.redlock().release(lease, self.now());
        let (outcome, settled) = if settle {
            self.drive_settled(op, lease.keys()).await?
        } else {
            (self.drive(op, lease.keys(), |_| {}).await?, Vec::new())
        };
        let count = |nodes: &[redlock_core::NodeResult], decided: usize| {
            if settled.is_empty() {
                decided
            } else {
                nodes
                    .iter()
                    .filter(|result| matches!(result, redlock_core::NodeResult::Success))
                    .count()
            }
        };
        match outcome {
            Outcome::Released(released) => {
                let nodes = if settled.is_empty() {
                    &released.nodes
                } else {
                    &settled
                };
                Ok(ReleaseReport {
                    released: count(nodes, released.released),
                    nodes: self.reports(nodes),
                })
            }
            Outcome::NotReleased(failed) => {
                let nodes = if settled.is_empty() {
                    &failed.nodes
                } else {
                    &settled
                };
                Err(Error::NotReleased(NotReleased {
                    released: count(nodes, failed.released),
                    nodes: self.reports(nodes),
                }))
            }
            other => Err(Error::Internal(unexpected(&other))),
        }
    }

    /// [`Error::Closed`] once the client was closed.
    pub(crate) fn check_open(&self) -> Result<(), Error> {
        if self.closed.load(Ordering::SeqCst) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Releases `lease` without waiting (a dropped guard): the release's commands go to
    /// the links at once, and the links write them.
    pub(crate) fn release_detached(&self, lease: &Lease) {
        if self.check_open().is_err() {
            // Close released what it could; nothing is sent after it.
            return;
        }
        let mut op = self.redlock().release(lease, self.now());
        while let Some(output) = op.poll_output() {
            if let Output::Send(command) = output {
                let _ = self.submit(UNROUTED, command);
            }
        }
    }
}

/// An operation being driven. Dropped unfinished (the caller cancelled), it is
/// abandoned: the commands [`Operation::abandon`] emits go to the links untagged.
struct Driving<'a> {
    inner: &'a Inner,
    span: OpSpan,
    op: Operation,
    tag: u64,
}

impl Drop for Driving<'_> {
    fn drop(&mut self) {
        if !self.op.is_finished() {
            self.op.abandon(self.inner.now());
            while let Some(output) = self.op.poll_output() {
                if let Output::Send(command) = output {
                    let _ = self.inner.submit(UNROUTED, command);
                }
            }
            self.inner.drain_events(&mut self.op, &self.span);
            self.span.abandoned(self.op.attempt());
        }
        self.inner.routes.close(self.tag);
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("nodes", &self.node_urls())
            .field("config", &self.inner.config)
            .finish()
    }
}
