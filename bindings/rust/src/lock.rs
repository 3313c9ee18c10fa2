//! The held lock: its guard, extension (manual and automatic), the lost-lock signal,
//! and release (explicit, or best effort on drop).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redlock_core::{Acquired, KeepAlive, KeepAliveAction, Lease, Outcome, Time};
use tokio::sync::{watch, Notify};

use crate::client::{Client, ExtendReport, ReleaseReport};
use crate::error::{Error, NodeReport};

/// Why a lock was lost: the core's reason, the same in every binding.
pub use redlock_core::LostReason;

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
            LostReason::Taken => "the lock was taken: its keys hold another token",
            LostReason::NotHeld => {
                "the lock is not held: its keys are gone (expired or deleted) and nobody \
                 else holds them"
            }
            LostReason::Expired => "the lock expired before it could be extended",
            LostReason::ExtensionLimit => "the lock expired after its last allowed extension",
            _ => "the lock is lost",
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
    /// When the lock was acquired (for the `lost` event's `elapsed`).
    held_since: Time,
    /// The `lost` event went to the hooks.
    lost_reported: AtomicBool,
    /// The resources as given, for inspections.
    raw_resources: Vec<Vec<u8>>,
    token: String,
    fencing_token: Option<u64>,
    attempts: u32,
    nodes: Vec<NodeReport>,
    validity: Duration,
    auto_extend: bool,
    /// The core's keep-alive: the lease, and when to extend, retry, or count it lost.
    keep: Mutex<KeepAlive>,
    state: watch::Sender<LockState>,
    /// Wakes the keeper: a manual extension changed the lease, or the guard ended.
    kick: Notify,
    stop: watch::Sender<bool>,
    /// Set once the lock's end was started (a release, a drop, a leak, or the client's
    /// close): whoever sets it first does the release, nobody twice.
    ended: AtomicBool,
}

fn guard<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The keep-alive keeps itself consistent; a panic elsewhere cannot break it.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl LockShared {
    pub(crate) fn new(
        client: Client,
        resources: Vec<String>,
        raw_resources: Vec<Vec<u8>>,
        acquired: Acquired,
        nodes: Vec<NodeReport>,
        auto_extend: bool,
    ) -> Arc<LockShared> {
        let lease = acquired.lease;
        let state = LockState::Held {
            valid_until: client.instant(lease.valid_until()),
            extensions: 0,
        };
        Arc::new(LockShared {
            held_since: client.now(),
            lost_reported: AtomicBool::new(false),
            resources,
            raw_resources,
            token: lease.token().as_str().to_string(),
            fencing_token: lease.fencing_token(),
            attempts: acquired.attempts,
            nodes,
            validity: acquired.validity,
            auto_extend,
            keep: Mutex::new(KeepAlive::new(client.config(), lease)),
            state: watch::Sender::new(state),
            kick: Notify::new(),
            stop: watch::Sender::new(false),
            ended: AtomicBool::new(false),
            client,
        })
    }

    fn keep(&self) -> MutexGuard<'_, KeepAlive> {
        guard(&self.keep)
    }

    pub(crate) fn lease(&self) -> Lease {
        self.keep().lease().clone()
    }

    fn now(&self) -> Time {
        self.client.now()
    }

    /// Publishes where the keep-alive stands, unless the lock was released.
    fn publish(&self) {
        let next = {
            let keep = self.keep();
            match keep.lost() {
                Some(reason) => LockState::Lost(Lost {
                    reason: (reason),
                    nodes: self.client.inner.reports(keep.last_failure()),
                }),
                None => LockState::Held {
                    valid_until: self.client.instant(keep.lease().valid_until()),
                    extensions: keep.lease().extensions(),
                },
            }
        };
        // Held to lost happens once: the hooks hear of it once, before anyone waiting
        // on the state does.
        if let LockState::Lost(lost) = &next {
            let held = matches!(*self.state.borrow(), LockState::Held { .. });
            if held && !self.lost_reported.swap(true, Ordering::SeqCst) {
                let event = redlock_core::Event::lost(lost.reason, self.held_since, self.now());
                self.client.inner.emit_lost(&event);
            }
        }
        self.state.send_if_modified(|state| match state {
            LockState::Held { .. } if *state != next => {
                *state = next;
                true
            }
            _ => false,
        });
    }

    /// If the lease has run out, lets the keep-alive say so (its poll at an instant past
    /// the lease is always `Lost`) and publishes it.
    fn expire_if_due(&self) {
        if !matches!(*self.state.borrow(), LockState::Held { .. }) {
            return;
        }
        let now = self.now();
        let lapsed = {
            let mut keep = self.keep();
            let lapsed = !keep.lease().is_valid(now);
            if lapsed {
                let _ = keep.poll(now);
            }
            lapsed
        };
        if lapsed {
            self.publish();
        }
    }

    /// Resolves once the lock is lost; never, once it is released.
    async fn wait_lost(&self) -> Lost {
        let mut states = self.state.subscribe();
        loop {
            let state = states.borrow_and_update().clone();
            if let LockState::Lost(lost) = state {
                return lost;
            }
            if states.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// The keeper, one per lock: drives the core's keep-alive. It extends when the
    /// keep-alive says (with automatic extension; without, the lock ends with its lease
    /// unless extended by hand), hands in every outcome, a driver error as
    /// `handle_failure`, and publishes the lock's state.
    async fn keeper(self: Arc<Self>) {
        let mut stop = self.stop.subscribe();
        loop {
            let action = self.keep().poll(self.now());
            match action {
                KeepAliveAction::Extend if self.auto_extend => {
                    let lease = self.lease();
                    let result = tokio::select! {
                        result = self.client.inner.extend_outcome(&lease, None) => result,
                        _ = stop.wait_for(|stopped| *stopped) => return,
                    };
                    let now = self.now();
                    match &result {
                        Ok(outcome) => self.keep().handle_outcome(outcome, now),
                        Err(_) => self.keep().handle_failure(now),
                    }
                    self.publish();
                }
                // No automatic extension: the next poll waits for the end of the lease.
                KeepAliveAction::Extend => {}
                KeepAliveAction::WaitUntil(at) => {
                    let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(
                        self.client.instant(at),
                    ));
                    tokio::select! {
                        () = sleep => {}
                        () = self.kick.notified() => {}
                        _ = stop.wait_for(|stopped| *stopped) => return,
                    }
                }
                KeepAliveAction::Lost(_) => {
                    self.publish();
                    return;
                }
                _ => return,
            }
        }
    }

    /// An extension made by hand: its outcome goes to the keep-alive too.
    fn extended_by_hand(&self, outcome: &Outcome) {
        self.keep().handle_outcome(outcome, self.now());
        self.publish();
        self.kick.notify_one();
    }

    /// Claims the lock's end: true for the first caller only (the one that releases).
    pub(crate) fn claim_end(&self) -> bool {
        !self.ended.swap(true, Ordering::SeqCst)
    }

    /// Stops the keep-alive (no more extensions); the state stays what it is.
    pub(crate) fn stop_keeping(&self) {
        self.keep().stop();
        self.stop.send_replace(true);
    }

    /// A release a quorum confirmed: the lock is released. Only then: a failed release
    /// leaves the state as it was (held until its lease runs out, or lost).
    pub(crate) fn mark_released(&self) {
        self.state.send_replace(LockState::Released);
    }

    /// Ends the guard's life: stops the keep-alive and marks the lock released (a
    /// dropped guard, whose release is not awaited).
    fn finish(&self) {
        self.stop_keeping();
        self.mark_released();
    }

    /// Releases (with `settle`, every node's final answer) unless the client was closed
    /// (its close released the lock, or tried to) or the release was started already.
    async fn release_once(&self, settle: bool) -> Result<ReleaseReport, Error> {
        self.client.inner.check_open()?;
        if !self.claim_end() {
            return Err(Error::Released);
        }
        self.stop_keeping();
        let result = self.client.inner.release(&self.lease(), settle).await;
        if result.is_ok() {
            self.mark_released();
        }
        result
    }
}

/// A held lock. Dropping it releases it, best effort (see below).
///
/// # Release on drop
///
/// Dropping a `Lock` that was not [released](Lock::release) stops its automatic
/// extension and hands a release round to the nodes' links at once; their tasks write
/// it (also after the client is dropped, for a few seconds). Its outcome is not
/// reported. If the runtime driving the nodes is gone, the release runs with the next
/// call on another runtime, or never, and the keys expire after their TTL. Call
/// [`Lock::release`] to release for certain and to learn how it went
/// ([`crate::Client::wait_idle`] waits for dropped guards' releases).
#[must_use = "dropping the guard releases the lock at once"]
pub struct Lock {
    pub(crate) shared: Arc<LockShared>,
    finished: bool,
}

impl Lock {
    pub(crate) fn new(shared: Arc<LockShared>) -> Lock {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(Arc::clone(&shared).keeper());
        }
        Lock {
            shared,
            finished: false,
        }
    }

    /// The fencing token of this acquisition (with fencing on: [`crate::ClientBuilder::fencing`]
    /// or [`crate::LockOptions::fencing`]), `None` without fencing. It is strictly greater
    /// than every token handed out before for these resources (`docs/fencing.md`): send
    /// it with every write to the protected resource, which refuses a token lower than
    /// one it has accepted ([`crate::fenced_set`] does that for a Redis key).
    pub fn fencing_token(&self) -> Option<u64> {
        self.shared.fencing_token
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
        self.shared.expire_if_due();
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
        self.shared.expire_if_due();
        self.shared.state.borrow().clone()
    }

    /// A receiver that sees every change of [`LockState`].
    pub fn subscribe(&self) -> watch::Receiver<LockState> {
        self.shared.state.subscribe()
    }

    /// A future that resolves as soon as the lock is lost: an extension found it taken
    /// or its keys gone, or its validity ran out (with or without automatic extension). It never resolves
    /// once the lock is released. Select on it next to the protected work.
    pub fn lost(&self) -> impl Future<Output = Lost> + Send + 'static {
        let shared = Arc::clone(&self.shared);
        async move { shared.wait_lost().await }
    }

    /// Whether this lock still holds its resources, asked of the nodes now: a quorum of
    /// them hold its token on every key, and its lease is still valid on the client's
    /// clock (the core's inspection, `docs/inspection.md`). `false` once the lock is
    /// released or lost, without asking. Too few nodes answering to say is
    /// [`Error::NotInspected`] (`nodes_failing`). Changes nothing on the nodes, and
    /// does not feed the keep-alive: [`Lock::lost`] stays the signal to stop.
    pub async fn is_owned(&self) -> Result<bool, Error> {
        self.shared.client.inner.check_open()?;
        if !matches!(self.state(), LockState::Held { .. }) {
            return Ok(false);
        }
        let inspected = self
            .shared
            .client
            .inner
            .inspect(&self.shared.raw_resources)
            .await?;
        Ok(inspected.is_held_by(&self.shared.lease(), self.shared.now()))
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
        self.shared.client.inner.check_open()?;
        if let LockState::Lost(lost) = self.state() {
            return Err(Error::LockLost(lost));
        }
        let lease = self.shared.lease();
        let outcome = self.shared.client.inner.extend_outcome(&lease, ttl).await?;
        self.shared.extended_by_hand(&outcome);
        self.shared.client.inner.extend_result(outcome)
    }

    /// Releases the lock on every node and reports how each answered. Keys holding
    /// another token are never deleted. Fewer than a quorum of nodes confirming is
    /// [`Error::NotReleased`].
    ///
    /// A release that failed (not confirmed, or after [`crate::Client::close`]:
    /// [`Error::Closed`]) does not mark the lock released: [`Lock::state`] and
    /// [`Lock::subscribe`] go on saying held until the lease runs out. Automatic
    /// extension stops either way.
    pub async fn release(mut self) -> Result<ReleaseReport, Error> {
        self.finished = true;
        self.shared.release_once(false).await
    }

    /// [`Lock::release`], and then the replies of the nodes that had not answered when
    /// the quorum decided, each until the round's deadline, so that the report is every
    /// node's final answer ([`crate::Client::release_token_settled`]).
    pub async fn release_settled(mut self) -> Result<ReleaseReport, Error> {
        self.finished = true;
        self.shared.release_once(true).await
    }

    /// Forgets the lock without releasing it: automatic extension stops, the keys stay
    /// until their TTL. For handing the lock to another process (its token and
    /// resources are enough to extend or release it).
    pub fn leak(mut self) {
        self.finished = true;
        self.shared.ended.store(true, Ordering::SeqCst);
        self.shared.stop.send_replace(true);
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.finished || !self.shared.claim_end() {
            return;
        }
        self.shared.finish();
        self.shared
            .client
            .inner
            .release_detached(&self.shared.lease());
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
        Arc::clone(&self.shared)
    }
}

impl LockShared {
    /// The blocking guard's drop: a release awaited, once, unless the client was closed.
    pub(crate) async fn release_now(&self) -> Result<ReleaseReport, Error> {
        self.release_once(false).await
    }
}
