//! The blocking client: the async client run on a small Tokio runtime of its own.
//!
//! The runtime has one worker thread, which carries the background work (automatic
//! extension, finishing commands still out after an early decision) while the caller's
//! thread waits in a call. Do not call these methods from inside an async context: use
//! the async [`crate::Client`] there.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_core::Lease;

use crate::client::{ClientBuilder, ExtendReport, KeyStatus, LockOptions, ReleaseReport};
use crate::error::{Error, NodeReport};
use crate::lock::{LockState, Lost};

/// [`crate::fenced_set`] on a blocking connection (`redis::Connection`).
pub use crate::fence::fenced_set_blocking as fenced_set;

struct OwnedRuntime(Option<tokio::runtime::Runtime>);

impl OwnedRuntime {
    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        match &self.0 {
            Some(runtime) => runtime.block_on(future),
            // Only `Drop` empties it, and nothing runs after that.
            None => unreachable!("the runtime is only taken when dropped"),
        }
    }
}

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        // Unlike a plain drop, this never panics inside an async context.
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// A blocking Redlock client. Cheap to clone; clones share the connections and the
/// runtime.
#[derive(Clone)]
pub struct Client {
    client: crate::Client,
    runtime: Arc<OwnedRuntime>,
}

impl Client {
    /// A client with every default for nodes at `urls`.
    pub fn new<I, S>(urls: I) -> Result<Client, Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Client::from_builder(crate::Client::builder(urls))
    }

    /// A client from the async client's builder (for every other setting).
    pub fn from_builder(builder: ClientBuilder) -> Result<Client, Error> {
        let client = builder.build()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redlock-blocking")
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        Ok(Client {
            client,
            runtime: Arc::new(OwnedRuntime(Some(runtime))),
        })
    }

    /// The async client underneath.
    pub fn as_async(&self) -> &crate::Client {
        &self.client
    }

    /// Connects to every node, waiting at most `timeout`; per node, `Ok` or why not.
    pub fn connect(&self, timeout: Duration) -> Vec<Result<(), String>> {
        self.runtime.block_on(self.client.connect(timeout))
    }

    /// Acquires a lock on `resource` for `ttl`.
    pub fn lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock, Error> {
        self.lock_with(&[resource], LockOptions::new().ttl(ttl))
    }

    /// Acquires one lock covering every resource in `resources`, for `ttl`.
    pub fn lock_many<R: AsRef<[u8]>>(&self, resources: &[R], ttl: Duration) -> Result<Lock, Error> {
        self.lock_with(resources, LockOptions::new().ttl(ttl))
    }

    /// Acquires one lock on `resources` with `options` (automatic extension runs on the
    /// client's worker thread).
    pub fn lock_with<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        options: LockOptions,
    ) -> Result<Lock, Error> {
        let lock = self
            .runtime
            .block_on(self.client.lock_with(resources, options))?;
        Ok(Lock {
            lock: Some(lock),
            runtime: Arc::clone(&self.runtime),
        })
    }

    /// See [`crate::Client::extend_token`].
    pub fn extend_token<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        token: &str,
        ttl: Duration,
    ) -> Result<ExtendReport, Error> {
        self.runtime
            .block_on(self.client.extend_token(resources, token, ttl))
    }

    /// See [`crate::Client::release_token`].
    pub fn release_token<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        token: &str,
    ) -> Result<ReleaseReport, Error> {
        self.runtime
            .block_on(self.client.release_token(resources, token))
    }

    /// See [`crate::Client::is_locked`].
    pub fn is_locked<R: AsRef<[u8]>>(&self, resources: &[R]) -> Result<bool, Error> {
        self.runtime.block_on(self.client.is_locked(resources))
    }

    /// See [`crate::Client::inspect`].
    pub fn inspect(&self, resource: impl AsRef<[u8]>) -> Vec<KeyStatus> {
        self.runtime.block_on(self.client.inspect(resource))
    }

    /// See [`crate::Client::release_token_settled`].
    pub fn release_token_settled<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        token: &str,
    ) -> Result<ReleaseReport, Error> {
        self.runtime
            .block_on(self.client.release_token_settled(resources, token))
    }

    /// Closes the client ([`crate::Client::close`]): releases every lock of it still
    /// held, waiting at most about two node timeouts, then closes the connections. Every
    /// later call on the client or its locks fails with [`Error::Closed`]
    /// (`used_after_close`). A second call does nothing.
    pub fn close(&self) {
        self.runtime.block_on(self.client.close());
    }

    /// True once the client was closed.
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }
}

/// A held lock of the blocking client. Dropping it releases it.
///
/// # Release on drop
///
/// Dropping a `Lock` that was not [released](Lock::release) stops its automatic
/// extension and releases it synchronously: the dropping thread waits for the release
/// round (each node at most the node timeout). Its outcome is not reported. Dropped
/// inside an async context, where waiting is not allowed, the release is spawned on the
/// client's runtime instead and not awaited.
#[must_use = "dropping the guard releases the lock at once"]
pub struct Lock {
    lock: Option<crate::Lock>,
    runtime: Arc<OwnedRuntime>,
}

impl Lock {
    fn inner(&self) -> &crate::Lock {
        match &self.lock {
            Some(lock) => lock,
            // Only `release` and `Drop` take it, and both consume the guard.
            None => unreachable!("the lock is only taken when the guard is consumed"),
        }
    }

    /// The locked resources.
    pub fn resources(&self) -> &[String] {
        self.inner().resources()
    }

    /// The token stored under every key.
    pub fn token(&self) -> &str {
        self.inner().token()
    }

    /// Attempts the acquisition took.
    pub fn attempts(&self) -> u32 {
        self.inner().attempts()
    }

    /// How each node answered the acquisition.
    pub fn nodes(&self) -> &[NodeReport] {
        self.inner().nodes()
    }

    /// See [`crate::Lock::fencing_token`].
    pub fn fencing_token(&self) -> Option<u64> {
        self.inner().fencing_token()
    }

    /// End of validity on the client's monotonic clock.
    pub fn valid_until(&self) -> Instant {
        self.inner().valid_until()
    }

    /// Validity left now (zero once lost or released).
    pub fn validity(&self) -> Duration {
        self.inner().validity()
    }

    /// True while held.
    pub fn is_held(&self) -> bool {
        self.inner().is_held()
    }

    /// Successful extensions so far.
    pub fn extensions(&self) -> u32 {
        self.inner().extensions()
    }

    /// The core's lease.
    pub fn lease(&self) -> Lease {
        self.inner().lease()
    }

    /// Where the lock stands now.
    pub fn state(&self) -> LockState {
        self.inner().state()
    }

    /// How the lock was lost, if it is lost now (does not wait).
    pub fn lost(&self) -> Option<Lost> {
        match self.state() {
            LockState::Lost(lost) => Some(lost),
            _ => None,
        }
    }

    /// Waits at most `timeout` for the lock to be lost; how, if it was.
    pub fn wait_lost(&self, timeout: Duration) -> Option<Lost> {
        let lost = self.inner().lost();
        self.runtime
            .block_on(async { tokio::time::timeout(timeout, lost).await.ok() })
    }

    /// See [`crate::Lock::is_owned`].
    pub fn is_owned(&self) -> Result<bool, Error> {
        self.runtime.block_on(self.inner().is_owned())
    }

    /// Extends the lock by its TTL from now.
    pub fn extend(&self) -> Result<ExtendReport, Error> {
        self.runtime.block_on(self.inner().extend())
    }

    /// Extends the lock by `ttl` from now.
    pub fn extend_for(&self, ttl: Duration) -> Result<ExtendReport, Error> {
        self.runtime.block_on(self.inner().extend_for(ttl))
    }

    /// Releases the lock on every node and reports how each answered.
    pub fn release(mut self) -> Result<ReleaseReport, Error> {
        match self.lock.take() {
            Some(lock) => self.runtime.block_on(lock.release()),
            None => Err(Error::Released),
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let Some(lock) = self.lock.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            // Blocking here would panic: the async guard's drop spawns the release.
            drop(lock);
            return;
        }
        let shared = lock.take_for_release();
        let _ = self.runtime.block_on(shared.release_now());
    }
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.lock {
            Some(lock) => lock.fmt(f),
            None => f.write_str("Lock(released)"),
        }
    }
}
