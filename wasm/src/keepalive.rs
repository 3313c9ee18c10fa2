//! `KeepAlive`: when to extend a held lock, when to retry, when it is lost (the core's
//! policy; the driver only runs the extensions it asks for).

use redlock_core::KeepAliveAction;
use wasm_bindgen::prelude::*;

use crate::client::Lease;
use crate::config::Config;
use crate::convert::{time, to_js, NodeResults};
use crate::engine::Engine;
use crate::error::invalid_argument;
use crate::operation::Operation;
use crate::strings;
use crate::types::{EventJs, KeepAliveActionJs, LostReasonJs, NodeResultsJs};

/// Keeps one lock alive. After creating it, after every outcome or failure handed in,
/// and at every instant it names, call `poll(now)` and act on the action:
/// - `extend`: start an extension of `lease` now and hand the finished operation to
///   `handleOutcome` (or call `handleFailure` if it could not run at all);
/// - `wait`: nothing until `until` (or until an outcome arrives), then poll again;
/// - `lost`: the lock is lost (`reason`: `taken`, `not_held`, `expired`,
///   `extension_limit`); final;
/// - `stopped`: `stop()` was called; final.
#[wasm_bindgen]
pub struct KeepAlive {
    inner: redlock_core::KeepAlive,
}

#[wasm_bindgen]
impl KeepAlive {
    /// Keep-alive for `lease` under `config` (the configuration it was acquired with).
    #[wasm_bindgen(constructor)]
    pub fn new(config: &Config, lease: &Lease) -> KeepAlive {
        KeepAlive {
            inner: redlock_core::KeepAlive::new(&config.inner, lease.inner.clone()),
        }
    }

    /// What to do at `nowUs`.
    pub fn poll(
        &mut self,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<KeepAliveActionJs, JsValue> {
        let now = time(now_us, "nowUs")?;
        let value = match self.inner.poll(now) {
            KeepAliveAction::Extend => strings::extend_action(),
            KeepAliveAction::WaitUntil(at) => strings::wait_action(at.as_micros() as f64),
            KeepAliveAction::Lost(reason) => {
                strings::lost_action(&strings::with(|s| s.code(reason.code())))
            }
            KeepAliveAction::Stopped => strings::stopped_action(),
            _ => return Err(invalid_argument("unknown keep-alive action")),
        };
        Ok(value.unchecked_into())
    }

    /// Hands in the outcome `operation` (an extension of this lock) output last, at
    /// `nowUs`. An operation of another kind, or one with no outcome yet, changes
    /// nothing.
    #[wasm_bindgen(js_name = handleOutcome)]
    pub fn handle_outcome(
        &mut self,
        operation: &Operation,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        if let Some(outcome) = operation.outcome() {
            self.inner.handle_outcome(outcome, now);
        }
        Ok(())
    }

    /// `handleOutcome` for an extension run by `engine` under `tag`, after its `done`
    /// action and before `engine.forget(tag)`.
    #[wasm_bindgen(js_name = handleOutcomeOf)]
    pub fn handle_outcome_of(
        &mut self,
        engine: &Engine,
        tag: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        if let Some(outcome) = engine.outcome_of(tag) {
            self.inner.handle_outcome(outcome, now);
        }
        Ok(())
    }

    /// The extension could not run at all at `nowUs` (a closed client, an exception).
    #[wasm_bindgen(js_name = handleFailure)]
    pub fn handle_failure(
        &mut self,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        self.inner.handle_failure(now);
        Ok(())
    }

    /// Stops keeping the lock alive. Final.
    pub fn stop(&mut self) {
        self.inner.stop();
    }

    /// The lease as it stands (the latest extension's, or the failed extension's).
    #[wasm_bindgen(getter)]
    pub fn lease(&self) -> Lease {
        Lease {
            inner: self.inner.lease().clone(),
        }
    }

    /// Why the lock was lost, once it is; `undefined` before.
    #[wasm_bindgen(getter)]
    pub fn lost(&self) -> Option<LostReasonJs> {
        self.inner
            .lost()
            .map(|reason| JsValue::from_str(reason.code()).unchecked_into())
    }

    /// The core's `lost` event for this lock (docs/observability.md) once the keep-alive
    /// found it lost, at `nowUs`, with `elapsedUs` counted from `heldSinceUs` (when it
    /// was acquired); `undefined` while it is not lost.
    #[wasm_bindgen(js_name = lostEvent)]
    pub fn lost_event(
        &self,
        #[wasm_bindgen(js_name = heldSinceUs)] held_since_us: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<Option<EventJs>, JsValue> {
        let held_since = time(held_since_us, "heldSinceUs")?;
        let now = time(now_us, "nowUs")?;
        Ok(self.inner.lost().map(|reason| {
            crate::operation::event_to_js(&redlock_core::Event::lost(reason, held_since, now))
                .unchecked_into()
        }))
    }

    /// True while an extension this keep-alive asked for is under way.
    #[wasm_bindgen(getter, js_name = isExtending)]
    pub fn is_extending(&self) -> bool {
        self.inner.is_extending()
    }

    /// How the nodes answered the last failed extension (empty if none failed).
    #[wasm_bindgen(js_name = lastFailure)]
    pub fn last_failure(&self) -> Result<NodeResultsJs, JsValue> {
        to_js(&NodeResults(self.inner.last_failure())).map(JsValue::unchecked_into)
    }
}
