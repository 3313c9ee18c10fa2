//! The held lock: its guard, extension (manual and automatic), the lost-lock signal,
//! and release (explicit, or best effort on drop).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redlock_core::{Acquired, FailureReason, Lease, Outcome, Time};
use tokio::sync::watch;

use crate::client::{Client, ExtendReport, ReleaseReport};
use crate::error::{Error, NodeReport};

/// Why a lock was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// An extension found the keys deleted or holding another token on so many nodes
    /// that no quorum holds ours: someone else may hold the lock now.
    Taken,
    /// The validity ran out before an extension succeeded (no automatic extension, or
    /// extensions kept failing because nodes were unreachable).
    Expired,
    /// The validity ran out after the bound on automatic extensions was reached.
    ExtensionLimit,
}

impl LostReason {
    /// A stable snake_case name: `taken`, `expired`, `extension_limit`.
    pub fn code(self) -> &'static str {
        match self {
            LostReason::Taken => "taken",
            LostReason::Expired => "expired",
            LostReason::ExtensionLimit => "extension_limit",
        }
    }
}

/// How a lock was lost, with the nodes' answers to the last failed extension (empty if
/// none failed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lost {
    /// Why.
    pub reason: LostReason,
    /// Per node, the last failed extension.
    pub nodes: Vec<NodeReport>,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.reason {
            LostReason::Taken => "the lock was taken: its keys are gone or hold another token",
            LostReason::Expired => "the lock expired before it could be extended",
            LostReason::ExtensionLimit => "the lock expired after its last allowed extension",
        })?;
        for (i, node) in self.nodes.iter().enumerate() {
            f.write_str(if i == 0 { " [" } else { "; " })?;
            write!(f, "{node}")?;
        }
        if !self.nodes.is_empty() {
            f.write_str("]")?;
        }
        Ok(())
    }
}

/// Where a lock stands.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockState {
    /// Held until `valid_until` (the client's monotonic clock), after `extensions`
    /// successful extensions.
    Held {
        /// End of validity.
        valid_until: Instant,
        /// Successful extensions so far.
        extensions: u32,
    },
    /// Lost: the holder must stop relying on it.
    Lost(Lost),
    /// Released by its holder (explicitly or by dropping the guard).
    Released,
}

pub(crate) struct LockShared {
    client: Client,
    resources: Vec<String>,
    token: String,
    attempts: u32,
    nodes: Vec<NodeReport>,
    validity: Duration,
    lease: Mutex<Lease>,
    state: watch::Sender<LockState>,
    stop: watch::Sender<bool>,
    limit_reached: AtomicBool,
    last_failure: Mutex<Vec<NodeReport>>,
    runtime: Option<tokio::runtime::Handle>,
}

fn guard<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain data, consistent after a panic elsewhere.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl LockShared {
    pub(crate) fn new(
        client: Client,
        resources: Vec<String>,
        acquired: Acquired,
        nodes: Vec<NodeReport>,
    ) -> Arc<LockShared> {
        let lease = acquired.lease;
        let state = LockState::Held {
            valid_until: client.instant(lease.valid_until()),
            extensions: 0,
        };
        Arc::new(LockShared {
            resources,
            token: lease.token().as_str().to_string(),
            attempts: acquired.attempts,
            nodes,
            validity: acquired.validity,
            lease: Mutex::new(lease),
            state: watch::Sender::new(state),
            stop: watch::Sender::new(false),
            limit_reached: AtomicBool::new(false),
            last_failure: Mutex::new(Vec::new()),
            runtime: tokio::runtime::Handle::try_current().ok(),
            client,
        })
    }

    fn lease(&self) -> Lease {
        guard(&self.lease).clone()
    }

    fn now(&self) -> Time {
        self.client.now()
    }

    fn sleep_until(&self, time: Time) -> tokio::time::Sleep {
        tokio::time::sleep_until(tokio::time::Instant::from_std(self.client.instant(time)))
    }

    /// A successful extension: the new lease, unless the lock already counts as lost or
    /// released (a lock the holder was told it lost stays lost).
    fn extended(&self, lease: Lease) {
        let valid_until = self.client.instant(lease.valid_until());
        let extensions = lease.extensions();
        let mut current = guard(&self.lease);
        if lease.valid_until() < current.valid_until() {
            // An older extension finishing late: keep the later end.
            return;
        }
        *current = lease;
        drop(current);
        self.state.send_if_modified(|state| match state {
            LockState::Held { .. } => {
                *state = LockState::Held {
                    valid_until,
                    extensions,
                };
                true
            }
            _ => false,
        });
    }

    fn lose(&self, reason: LostReason, nodes: Vec<NodeReport>) {
        self.state.send_if_modified(|state| match state {
            LockState::Held { .. } => {
                *state = LockState::Lost(Lost { reason, nodes });
                true
            }
            _ => false,
        });
    }

    /// Marks the lock lost if its lease has run out (by the core's rule).
    fn expire_if_due(&self) -> bool {
        let lease = self.lease();
        if lease.is_valid(self.now()) {
            return false;
        }
        let reason = if self.limit_reached.load(Ordering::Relaxed) {
            LostReason::ExtensionLimit
        } else {
            LostReason::Expired
        };
        self.lose(reason, guard(&self.last_failure).clone());
        true
    }

    /// Resolves once the lock is lost; never, once it is released.
    async fn wait_lost(&self) -> Lost {
        let mut states = self.state.subscribe();
        loop {
            let state = states.borrow_and_update().clone();
            match state {
                LockState::Lost(lost) => return lost,
                LockState::Released => std::future::pending::<()>().await,
                LockState::Held { .. } => {
                    let valid_until = self.lease().valid_until();
                    tokio::select! {
                        () = self.sleep_until(valid_until) => {
                            self.expire_if_due();
                        }
                        changed = states.changed() => {
                            if changed.is_err() {
                                std::future::pending::<()>().await;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Waits until `time`, or returns false early if stopped.
    async fn sleep_or_stop(&self, time: Time, stop: &mut watch::Receiver<bool>) -> bool {
        tokio::select! {
            () = self.sleep_until(time) => true,
            _ = stop.wait_for(|stopped| *stopped) => false,
        }
    }

    /// The automatic extender: extends when the core says, retries when the core says,
    /// and marks the lock lost the moment it is.
    async fn auto_extend(self: Arc<Self>) {
        let mut stop = self.stop.subscribe();
        let mut retry_at: Option<Time> = None;
        loop {
            let lease = self.lease();
            let now = self.now();
            let next = match retry_at.take() {
                Some(at) => Some(at),
                None => {
                    let next = self.client.config().next_extension(&lease, now);
                    if next.is_none() && lease.is_valid(now) {
                        // Still valid but no extension scheduled: the bound was reached.
                        self.limit_reached.store(true, Ordering::Relaxed);
                    }
                    next
                }
            };
            let Some(at) = next else {
                // No more extensions: the lock ends with its lease.
                self.expire_at_end(&mut stop).await;
                return;
            };
            if !self.sleep_or_stop(at, &mut stop).await {
                return;
            }
            let lease = self.lease();
            let outcome = tokio::select! {
                outcome = self.client.inner.extend_outcome(&lease) => outcome,
                _ = stop.wait_for(|stopped| *stopped) => return,
            };
            match outcome {
                Ok(Outcome::Extended(extended)) => self.extended(extended.lease),
                Ok(Outcome::NotExtended(failed)) => {
                    let nodes = self.client.inner.reports(&failed.nodes);
                    if failed.reason == FailureReason::Conflict {
                        self.lose(LostReason::Taken, nodes);
                        return;
                    }
                    *guard(&self.last_failure) = nodes;
                    match failed.retry_at {
                        Some(at) => retry_at = Some(at),
                        None => {
                            self.expire_at_end(&mut stop).await;
                            return;
                        }
                    }
                }
                Ok(_) | Err(_) => {
                    self.expire_at_end(&mut stop).await;
                    return;
                }
            }
        }
    }

    /// Waits for the lease to run out (it may still be extended by hand), then marks the
    /// lock lost.
    async fn expire_at_end(&self, stop: &mut watch::Receiver<bool>) {
        loop {
            let valid_until = self.lease().valid_until();
            if !self.sleep_or_stop(valid_until, stop).await {
                return;
            }
            if self.expire_if_due() || !matches!(*self.state.borrow(), LockState::Held { .. }) {
                return;
            }
        }
    }

    /// Ends the guard's life: stops the extender and marks the lock released.
    fn finish(&self) {
        self.stop.send_replace(true);
        self.state.send_replace(LockState::Released);
    }
}

/// A held lock. Dropping it releases it, best effort (see below).
///
/// # Release on drop
///
/// Dropping a `Lock` that was not [released](Lock::release) stops its automatic
/// extension and spawns a release round on the Tokio runtime the lock was acquired on.
/// The round is not awaited and its outcome is not reported. If that runtime is shutting
/// down (or gone), the release never runs, and the keys expire after their TTL. Call
/// [`Lock::release`] to release for certain and to learn how it went.
#[must_use = "dropping the guard releases the lock at once"]
pub struct Lock {
    pub(crate) shared: Arc<LockShared>,
    finished: bool,
}

impl Lock {
    pub(crate) fn new(shared: Arc<LockShared>, auto_extend: bool) -> Lock {
        if auto_extend {
            if let Some(runtime) = &shared.runtime {
                runtime.spawn(Arc::clone(&shared).auto_extend());
            }
        }
        Lock {
            shared,
            finished: false,
        }
    }

    /// The locked resources, as given.
    pub fn resources(&self) -> &[String] {
        &self.shared.resources
    }

    /// The token stored under every key of this lock.
    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// Attempts the acquisition took.
    pub fn attempts(&self) -> u32 {
        self.shared.attempts
    }

    /// Validity left when the acquisition's quorum agreed.
    pub fn acquired_validity(&self) -> Duration {
        self.shared.validity
    }

    /// How each node answered the successful acquisition, when the quorum decided
    /// (nodes that had not answered yet show `pending`).
    pub fn nodes(&self) -> &[NodeReport] {
        &self.shared.nodes
    }

    /// The end of validity, on the client's monotonic clock (`Instant`). The holder
    /// must not rely on the lock at or after it.
    pub fn valid_until(&self) -> Instant {
        self.shared
            .client
            .instant(self.shared.lease().valid_until())
    }

    /// Validity left now: zero once the lease ran out, the lock is lost, or released.
    pub fn validity(&self) -> Duration {
        if !matches!(*self.shared.state.borrow(), LockState::Held { .. }) {
            return Duration::ZERO;
        }
        self.shared.lease().validity(self.shared.now())
    }

    /// True while the lock is held: not lost, not released, and its lease still valid.
    pub fn is_held(&self) -> bool {
        !self.validity().is_zero()
    }

    /// Successful extensions so far.
    pub fn extensions(&self) -> u32 {
        self.shared.lease().extensions()
    }

    /// The core's lease (keys, token, `valid_until` as [`Time`]).
    pub fn lease(&self) -> Lease {
        self.shared.lease()
    }

    /// Where the lock stands now.
    pub fn state(&self) -> LockState {
        self.shared.expire_if_due_when_held();
        self.shared.state.borrow().clone()
    }

    /// A receiver that sees every change of [`LockState`].
    pub fn subscribe(&self) -> watch::Receiver<LockState> {
        self.shared.state.subscribe()
    }

    /// A future that resolves as soon as the lock is lost: an extension found it taken,
    /// or its validity ran out (with or without automatic extension). It never resolves
    /// once the lock is released. Select on it next to the protected work.
    pub fn lost(&self) -> impl Future<Output = Lost> + Send + 'static {
        let shared = Arc::clone(&self.shared);
        async move { shared.wait_lost().await }
    }

    /// Extends the lock by its TTL from now (the key is never re-created).
    pub async fn extend(&self) -> Result<ExtendReport, Error> {
        self.extend_inner(None).await
    }

    /// Extends the lock by `ttl` from now; later extensions keep `ttl`.
    pub async fn extend_for(&self, ttl: Duration) -> Result<ExtendReport, Error> {
        self.extend_inner(Some(ttl)).await
    }

    async fn extend_inner(&self, ttl: Option<Duration>) -> Result<ExtendReport, Error> {
        if !self.is_held() {
            return Err(Error::NotHeld);
        }
        let lease = self.shared.lease();
        match self.shared.client.inner.extend(&lease, ttl).await {
            Ok((report, lease)) => {
                self.shared.extended(lease);
                Ok(report)
            }
            Err(Error::NotExtended(failed)) => {
                if failed.reason == FailureReason::Conflict {
                    self.shared.lose(LostReason::Taken, failed.nodes.clone());
                } else {
                    *guard(&self.shared.last_failure) = failed.nodes.clone();
                    self.shared.expire_if_due();
                }
                Err(Error::NotExtended(failed))
            }
            Err(other) => Err(other),
        }
    }

    /// Releases the lock on every node and reports how each answered. Keys holding
    /// another token are never deleted.
    pub async fn release(mut self) -> Result<ReleaseReport, Error> {
        self.finished = true;
        self.shared.finish();
        let lease = self.shared.lease();
        self.shared.client.inner.release(&lease).await
    }

    /// Forgets the lock without releasing it: automatic extension stops, the keys stay
    /// until their TTL. For handing the lock to another process (its token and
    /// resources are enough to extend or release it).
    pub fn leak(mut self) {
        self.finished = true;
        self.shared.stop.send_replace(true);
    }
}

impl LockShared {
    fn expire_if_due_when_held(&self) {
        if matches!(*self.state.borrow(), LockState::Held { .. }) {
            self.expire_if_due();
        }
    }

    /// Release on drop: spawned on the lock's runtime, not awaited.
    fn release_in_background(self: &Arc<Self>) {
        let Some(runtime) = &self.runtime else {
            return;
        };
        let shared = Arc::clone(self);
        let task = self.client.inner.background_task();
        runtime.spawn(async move {
            let lease = shared.lease();
            let _ = shared.client.inner.release(&lease).await;
            drop(task);
        });
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.shared.finish();
        self.shared.release_in_background();
    }
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("resources", &self.shared.resources)
            .field("token", &self.shared.token)
            .field("state", &*self.shared.state.borrow())
            .finish()
    }
}

/// Lets the blocking wrapper release synchronously.
impl Lock {
    pub(crate) fn take_for_release(mut self) -> Arc<LockShared> {
        self.finished = true;
        self.shared.finish();
        Arc::clone(&self.shared)
    }
}

impl LockShared {
    pub(crate) async fn release_now(&self) -> Result<ReleaseReport, Error> {
        let lease = self.lease();
        self.client.inner.release(&lease).await
    }
}
