//! Observability: the user's event hooks, and (with the `tracing` feature) one span per
//! operation. Both only report what the core's events and outcomes say; nothing about
//! the lock depends on them.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use redlock_core::{Event, OperationKind, Outcome};

/// A hook registered with [`crate::ClientBuilder::on_event`].
pub(crate) type Hook = Arc<dyn Fn(&Event) + Send + Sync>;

/// The client's hooks.
#[derive(Clone, Default)]
pub(crate) struct Hooks(Vec<Hook>);

impl Hooks {
    pub(crate) fn push(&mut self, hook: Hook) {
        self.0.push(hook);
    }

    /// Calls every hook with `event`. A hook that panics is caught: the panic is
    /// reported by the panic hook as usual, and the operation (or the keep-alive) goes on
    /// as if the hook had returned.
    pub(crate) fn emit(&self, event: &Event) {
        for hook in &self.0 {
            let _ = catch_unwind(AssertUnwindSafe(|| hook(event)));
        }
    }
}

#[cfg(feature = "tracing")]
fn operation_name(kind: OperationKind) -> &'static str {
    match kind {
        OperationKind::Acquire => "acquire",
        OperationKind::Extend => "extend",
        OperationKind::Release => "release",
        OperationKind::Inspect => "inspect",
        _ => "operation",
    }
}

/// One operation's span (`redlock.acquire`, `redlock.extend`, `redlock.release`,
/// `redlock.inspect`), with the fields `resources`, `attempts`, `outcome` and
/// `error_class`; `retry` and `node_failed` events inside it. Without the `tracing`
/// feature it is empty and costs nothing.
pub(crate) struct OpSpan {
    #[cfg(feature = "tracing")]
    span: tracing::Span,
}

#[cfg(feature = "tracing")]
impl OpSpan {
    pub(crate) fn new(kind: OperationKind, keys: &[Vec<u8>]) -> OpSpan {
        macro_rules! span {
            ($name:literal) => {
                tracing::info_span!(
                    target: "redlock",
                    $name,
                    resources = tracing::field::Empty,
                    attempts = tracing::field::Empty,
                    outcome = tracing::field::Empty,
                    error_class = tracing::field::Empty,
                )
            };
        }
        let span = match kind {
            OperationKind::Acquire => span!("redlock.acquire"),
            OperationKind::Extend => span!("redlock.extend"),
            OperationKind::Release => span!("redlock.release"),
            OperationKind::Inspect => span!("redlock.inspect"),
            _ => span!("redlock.operation"),
        };
        if !span.is_disabled() {
            let resources = keys
                .iter()
                .map(|key| String::from_utf8_lossy(key).into_owned())
                .collect::<Vec<_>>()
                .join(",");
            span.record("resources", resources.as_str());
        }
        OpSpan { span }
    }

    /// A core event of this operation: `retry` and `node_failed` become span events.
    pub(crate) fn event(&self, event: &Event) {
        use redlock_core::EventKind;
        let operation = event.operation.map_or("", operation_name);
        match event.kind {
            EventKind::Retry => tracing::info!(
                target: "redlock",
                parent: &self.span,
                event = "retry",
                operation,
                attempt = event.attempt,
                reason = event.reason.map_or("", |r| r.code()),
                elapsed_us = event.elapsed.as_micros() as u64,
            ),
            EventKind::NodeFailed => tracing::warn!(
                target: "redlock",
                parent: &self.span,
                event = "node_failed",
                operation,
                attempt = event.attempt,
                node = event.node.unwrap_or(usize::MAX),
                cause = event.cause.map_or("", |c| c.code()),
            ),
            _ => {}
        }
    }

    /// The operation's outcome: `outcome`, `attempts`, and `error_class` for failures.
    pub(crate) fn finish(&self, attempts: u32, outcome: &Outcome) {
        self.span.record("attempts", attempts);
        self.span.record("outcome", outcome.code());
        if let Some(class) = outcome.error_class() {
            self.span.record("error_class", class.code());
        }
    }

    /// The caller dropped the operation before its outcome.
    pub(crate) fn abandoned(&self, attempts: u32) {
        self.span.record("attempts", attempts);
        self.span.record("outcome", "abandoned");
    }
}

#[cfg(not(feature = "tracing"))]
impl OpSpan {
    pub(crate) fn new(_kind: OperationKind, _keys: &[Vec<u8>]) -> OpSpan {
        OpSpan {}
    }
    pub(crate) fn event(&self, _event: &Event) {}
    pub(crate) fn finish(&self, _attempts: u32, _outcome: &Outcome) {}
    pub(crate) fn abandoned(&self, _attempts: u32) {}
}

/// A held lock was lost (from the keep-alive): a `lost` event outside any span.
pub(crate) fn lost(event: &Event) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "redlock",
        event = "lost",
        reason = event.lost_reason.map_or("", |r| r.code()),
        held_us = event.elapsed.as_micros() as u64,
    );
    #[cfg(not(feature = "tracing"))]
    let _ = event;
}
