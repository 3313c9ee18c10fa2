//! # redlock-ffi
//!
//! The C ABI of [`redlock_core`], built as `libredlock.so` and `libredlock.a`, with the
//! header `include/redlock.h` (and `include/redlock_php.h` for PHP's `FFI::cdef`). C,
//! Python (ctypes), PHP (FFI) and Java (JNI) drive the core through it.
//!
//! ## Conventions
//!
//! - Objects are opaque handles created by a `_new` function (or returned by another
//!   call) and destroyed by the matching `_free`, which accepts NULL. Memory this
//!   library hands out is freed only by its own functions, never by `free()`.
//! - Fallible functions return a `redlock_result`: `REDLOCK_OK`, a reserved code
//!   (NULL parameter, panic, buffer too small, invalid input, out of range, no value),
//!   or a code per core error (usage, configuration, RESP protocol) so callers can
//!   branch. `redlock_result_name` gives the stable snake_case name (the same names as
//!   the conformance vectors), `redlock_result_message` writes a sentence.
//! - Output parameters come last and are written only on success.
//! - Byte strings are `(const uint8_t *ptr, size_t len)`; a NULL pointer is accepted
//!   when the length is 0. Static texts (version, scripts, result names) are
//!   NUL-terminated `const char *` that live as long as the library.
//! - Enumerations are passed as `uint32_t` holding one of the documented constants, so
//!   an unexpected value from C is an error, never undefined behaviour.
//! - Getters that cannot fail return their value directly (0, `false` or NULL for a
//!   NULL handle).
//! - No callbacks. No function panics across the boundary: each one catches a panic
//!   and returns `REDLOCK_PANIC` (getters return their zero value).
//!
//! ## Safety contract (for every function)
//!
//! Every pointer argument is NULL or valid for its documented use: a handle returned
//! by this library and not yet freed, an array of the stated length, a writable
//! output (outputs of one call never overlap each other or an input). A handle is used by one thread at a time; different handles may be used
//! from different threads at once. Borrowed pointers returned by a getter stay valid
//! only as long as documented (until the handle is freed, or until the next call that
//! changes it). Using a handle after its `_free` is undefined behaviour.
//!
//! ## Driving a lock
//!
//! Keep one `redlock_link` per node for as long as the client lives. Start an operation
//! with `redlock_client_acquire` (or `_extend`, `_release`). After creating it and after
//! every input, call `redlock_operation_poll_output` until it gives
//! `REDLOCK_OUTPUT_WAIT`, `REDLOCK_OUTPUT_OUTCOME` or `REDLOCK_OUTPUT_NONE`:
//!
//! - `REDLOCK_OUTPUT_SEND`: hand the command to the link of its node
//!   (`redlock_operation_command` names it) with `redlock_link_submit_current`, tagged
//!   with a number that identifies the operation;
//! - `REDLOCK_OUTPUT_WAIT`: call `redlock_operation_handle_timeout` at
//!   `redlock_operation_wait_until` if nothing arrives before: the operation's only
//!   wake-up;
//! - `REDLOCK_OUTPUT_OUTCOME`: take it with `redlock_operation_take_outcome`
//!   (`redlock_outcome_error_class` says what to raise for a failure).
//!
//! After every input to a link, call `redlock_link_poll_output` until
//! `REDLOCK_LINK_OUTPUT_NONE`: `CONNECT` (open a connection, then
//! `redlock_link_handle_connected`, or `redlock_link_handle_closed` with its cause),
//! `WRITE` (write `redlock_link_write_resp` now; hand the reply to
//! `redlock_link_handle_reply*` with its write id), `CLOSE` (close the connection),
//! `DELIVER` (hand the reply to the operation tagged `redlock_link_delivery`'s tag, with
//! `redlock_operation_handle_delivery`, then poll that operation). Call
//! `redlock_link_handle_timeout` at `redlock_link_poll_timeout`. The driver never
//! resends, queues or declares a node dead: the link does.
//!
//! To cancel, `redlock_operation_abandon` and hand its sends to the links as usual. To
//! keep a lock alive, drive a `redlock_keepalive`.

// Everything here crosses the C boundary; each unsafe operation gets its own block.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
// C names: `redlock_config`, `REDLOCK_OK`.
#![allow(non_camel_case_types)]
// The safety contract is the same for every function; it is stated once above and at
// the top of the generated header rather than repeated on some 100 functions.
#![allow(clippy::missing_safety_doc)]

#[macro_use]
mod boundary;
mod class;
mod client;
mod config;
mod constants;
mod error;
mod event;
mod guard;
mod keepalive;
mod link;
mod operation;
mod outcome;
mod reply;
mod subscriptions;

pub use class::*;
pub use client::*;
pub use config::*;
pub use constants::*;
pub use error::*;
pub use event::*;
pub use guard::*;
pub use keepalive::*;
pub use link::*;
pub use operation::*;
pub use outcome::*;
pub use reply::*;
