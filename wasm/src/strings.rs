//! JS strings used on every output and reply, created once: building them anew from
//! Rust text (a UTF-8 decode each) dominated the cost of a lock cycle.

use wasm_bindgen::prelude::*;

macro_rules! js_strings {
    ($($field:ident = $text:literal),* $(,)?) => {
        pub(crate) struct Strings {
            $(pub $field: JsValue,)*
        }

        impl Strings {
            fn new() -> Strings {
                Strings { $($field: JsValue::from_str($text),)* }
            }
        }
    };
}

js_strings! {
    type_ = "type",
    kind = "kind",
    value = "value",
    ok = "ok",
    nil = "nil",
    integer = "integer",
    timeout = "timeout",
    set = "set",
    acquire = "acquire",
    release = "release",
    extend = "extend",
    fenced_acquire = "fenced_acquire",
    write_back = "write_back",
    queued_acquire = "queued_acquire",
    released = "released",
    nodes = "nodes",
    error = "error",
    // Outcome kinds, failure reasons and node results.
    acquired = "acquired",
    not_acquired = "not_acquired",
    extended = "extended",
    not_extended = "not_extended",
    conflict = "conflict",
    nodes_failed = "nodes_failed",
    mixed = "mixed",
    validity_too_short = "validity_too_short",
    not_asked = "not_asked",
    pending = "pending",
    success = "success",
    not_released = "not_released",
    not_held = "not_held",
    // Error classes and node causes.
    held_elsewhere = "held_elsewhere",
    nodes_failing = "nodes_failing",
    lock_lost = "lock_lost",
    invalid_argument = "invalid_argument",
    used_after_close = "used_after_close",
    cancelled = "cancelled",
    refused = "refused",
    auth = "auth",
    tls = "tls",
    stalled = "stalled",
    connection = "connection",
    // Keep-alive.
    taken = "taken",
    expired = "expired",
    extension_limit = "extension_limit",
    // Reply kinds.
    status = "status",
    bulk = "bulk",
    array = "array",
    connection_failed = "connection_failed",
}

impl Strings {
    /// The cached string for one of the core's stable codes (a new one otherwise).
    pub(crate) fn code(&self, code: &str) -> JsValue {
        match code {
            "acquired" => self.acquired.clone(),
            "not_acquired" => self.not_acquired.clone(),
            "extended" => self.extended.clone(),
            "not_extended" => self.not_extended.clone(),
            "released" => self.released.clone(),
            "conflict" => self.conflict.clone(),
            "nodes_failed" => self.nodes_failed.clone(),
            "mixed" => self.mixed.clone(),
            "validity_too_short" => self.validity_too_short.clone(),
            "not_asked" => self.not_asked.clone(),
            "pending" => self.pending.clone(),
            "success" => self.success.clone(),
            "timeout" => self.timeout.clone(),
            "not_released" => self.not_released.clone(),
            "not_held" => self.not_held.clone(),
            "held_elsewhere" => self.held_elsewhere.clone(),
            "nodes_failing" => self.nodes_failing.clone(),
            "lock_lost" => self.lock_lost.clone(),
            "invalid_argument" => self.invalid_argument.clone(),
            "used_after_close" => self.used_after_close.clone(),
            "cancelled" => self.cancelled.clone(),
            "refused" => self.refused.clone(),
            "auth" => self.auth.clone(),
            "tls" => self.tls.clone(),
            "stalled" => self.stalled.clone(),
            "connection" => self.connection.clone(),
            "error" => self.error.clone(),
            "taken" => self.taken.clone(),
            "expired" => self.expired.clone(),
            "extension_limit" => self.extension_limit.clone(),
            other => JsValue::from_str(other),
        }
    }
}

#[wasm_bindgen]
extern "C" {
    /// A plain JS object, with property access that skips `Reflect`'s exception wrapper.
    #[wasm_bindgen(extends = js_sys::Object)]
    pub(crate) type Plain;

    /// `target[key] = value`, without the exception wrapper of `Reflect.set` (which made
    /// every property a slow call). Only used on fresh plain objects.
    #[wasm_bindgen(method, indexing_setter)]
    pub(crate) fn put(target: &Plain, key: &JsValue, value: &JsValue);

    /// `target[key]`; `target` MUST be an object (checked by the caller).
    #[wasm_bindgen(method, indexing_getter)]
    pub(crate) fn field(target: &Plain, key: &JsValue) -> JsValue;
}

thread_local! {
    static STRINGS: Strings = Strings::new();
}

/// Runs `f` with the cached strings.
pub(crate) fn with<R>(f: impl FnOnce(&Strings) -> R) -> R {
    STRINGS.with(f)
}

impl Plain {
    /// A new empty object.
    pub(crate) fn new() -> Plain {
        js_sys::Object::new().unchecked_into()
    }
}

// Output objects built in one call each, as object literals: setting their properties
// one import call at a time cost more than the core's whole decision.
#[wasm_bindgen(inline_js = "
export function sendOutput(node, requestId, deadline, kind, isEval, args) {
  return { type: 'send', node, requestId, deadline, kind, isEval, args };
}
export function waitOutput(until) {
  return { type: 'wait', until };
}
export function outcomeOutput(outcome) {
  return { type: 'outcome', outcome };
}
// The outcomes of every lock cycle: their node results cross as one number (see
// packedCodes) and become an array only when read.
class LazyNodes {
  #count;
  #packed;
  #nodes;
  constructor(count, packed, nodes) {
    this.#count = count;
    this.#packed = packed;
    this.#nodes = nodes;
  }
  get nodes() {
    return (this.#nodes ??= nodeCodes(this.#count, this.#packed));
  }
  toJSON() {
    return { ...this, nodes: this.nodes };
  }
}
class Acquired extends LazyNodes {
  constructor(validityUs, attempts, count, packed, nodes, lease, fencingToken) {
    super(count, packed, nodes);
    this.kind = 'acquired';
    this.lease = lease;
    this.validityUs = validityUs;
    this.attempts = attempts;
    this.fencingToken = fencingToken ?? null;
    this.errorClass = null;
  }
}
class Released extends LazyNodes {
  constructor(released, count, packed, nodes) {
    super(count, packed, nodes);
    this.kind = 'released';
    this.released = released;
    this.errorClass = null;
  }
}
export function acquired(validityUs, attempts, count, packed, nodes, lease, fencingToken) {
  return new Acquired(validityUs, attempts, count, packed, nodes, lease, fencingToken);
}
export function notAcquired(reason, attempts, token, nodes, errorClass) {
  return { kind: 'not_acquired', reason, attempts, token, nodes, errorClass };
}
export function extended(validityUs, nodes, lease) {
  return { kind: 'extended', lease, validityUs, nodes, errorClass: null };
}
export function notExtended(reason, validityUs, retryAt, lost, nodes, lease, errorClass) {
  return { kind: 'not_extended', reason, lease, validityUs, retryAt: retryAt ?? null, lost, nodes, errorClass };
}
export function released(released, count, packed, nodes) {
  return new Released(released, count, packed, nodes);
}
export function notReleased(released, nodes, errorClass) {
  return { kind: 'not_released', released, nodes, errorClass };
}
export function nodeError(error, cause) {
  return { error, cause };
}
export function connectOutput() {
  return { type: 'connect' };
}
export function closeOutput() {
  return { type: 'close' };
}
export function writeArgs(id, args) {
  return { type: 'write', id, args };
}
export function arrayOf(n, a0, a1, a2, a3, a4, a5, a6, a7) {
  switch (n) {
    case 1: return [a0];
    case 2: return [a0, a1];
    case 3: return [a0, a1, a2];
    case 4: return [a0, a1, a2, a3];
    case 5: return [a0, a1, a2, a3, a4];
    case 6: return [a0, a1, a2, a3, a4, a5];
    case 7: return [a0, a1, a2, a3, a4, a5, a6];
    default: return [a0, a1, a2, a3, a4, a5, a6, a7];
  }
}
const NODE_CODES = ['not_asked', 'pending', 'success', 'conflict', 'timeout', 'missing'];
export function nodeCodes(n, packed) {
  const codes = [];
  for (let i = 0; i < n; i++) {
    codes.push(NODE_CODES[packed % 8]);
    packed = Math.floor(packed / 8);
  }
  return codes;
}
export function asciiText(bytes) {
  return String.fromCharCode.apply(null, bytes);
}
export function writeBytes(id, bytes) {
  return { type: 'write', id, bytes };
}
export function deliverOutput(tag, request, reply) {
  return { type: 'deliver', tag, request, reply };
}
export function okReply() {
  return { type: 'ok' };
}
export function nilReply() {
  return { type: 'nil' };
}
export function timeoutReply() {
  return { type: 'timeout' };
}
export function valueReply(type, value) {
  return { type, value };
}
export function extendAction() {
  return { type: 'extend' };
}
export function waitAction(until) {
  return { type: 'wait', until };
}
export function lostAction(reason) {
  return { type: 'lost', reason };
}
export function stoppedAction() {
  return { type: 'stopped' };
}
")]
extern "C" {
    #[wasm_bindgen(js_name = sendOutput)]
    pub(crate) fn send_output(
        node: f64,
        request_id: f64,
        deadline: f64,
        kind: &JsValue,
        is_eval: bool,
        args: &JsValue,
    ) -> JsValue;

    #[wasm_bindgen(js_name = waitOutput)]
    pub(crate) fn wait_output(until: f64) -> JsValue;

    #[wasm_bindgen(js_name = outcomeOutput)]
    pub(crate) fn outcome_output(outcome: &JsValue) -> JsValue;

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn acquired(
        validity_us: f64,
        attempts: u32,
        count: u32,
        packed: f64,
        nodes: &JsValue,
        lease: JsValue,
        fencing_token: Option<f64>,
    ) -> JsValue;

    #[wasm_bindgen(js_name = notAcquired)]
    pub(crate) fn not_acquired(
        reason: &JsValue,
        attempts: u32,
        token: &str,
        nodes: &JsValue,
        error_class: &JsValue,
    ) -> JsValue;

    pub(crate) fn extended(validity_us: f64, nodes: &JsValue, lease: JsValue) -> JsValue;

    #[wasm_bindgen(js_name = notExtended)]
    pub(crate) fn not_extended(
        reason: &JsValue,
        validity_us: f64,
        retry_at: Option<f64>,
        lost: bool,
        nodes: &JsValue,
        lease: JsValue,
        error_class: &JsValue,
    ) -> JsValue;

    pub(crate) fn released(released: f64, count: u32, packed: f64, nodes: &JsValue) -> JsValue;

    #[wasm_bindgen(js_name = notReleased)]
    pub(crate) fn not_released(released: f64, nodes: &JsValue, error_class: &JsValue) -> JsValue;

    #[wasm_bindgen(js_name = nodeError)]
    pub(crate) fn node_error(error: &str, cause: &JsValue) -> JsValue;

    #[wasm_bindgen(js_name = connectOutput)]
    pub(crate) fn connect_output() -> JsValue;

    #[wasm_bindgen(js_name = closeOutput)]
    pub(crate) fn close_output() -> JsValue;

    #[wasm_bindgen(js_name = writeArgs)]
    pub(crate) fn write_args(id: f64, args: &JsValue) -> JsValue;

    #[wasm_bindgen(js_name = arrayOf)]
    #[allow(clippy::too_many_arguments)]
    fn array_of(
        n: u32,
        a0: &JsValue,
        a1: &JsValue,
        a2: &JsValue,
        a3: &JsValue,
        a4: &JsValue,
        a5: &JsValue,
        a6: &JsValue,
        a7: &JsValue,
    ) -> JsValue;

    #[wasm_bindgen(js_name = writeBytes)]
    pub(crate) fn write_bytes(id: f64, bytes: &[u8]) -> JsValue;

    /// The node results' codes from `packed` (3 bits per node, see `node_codes`).
    #[wasm_bindgen(js_name = nodeCodes)]
    fn node_codes_js(n: u32, packed: f64) -> JsValue;

    /// ASCII bytes as a JS string (read from the module's memory, no decoder).
    #[wasm_bindgen(js_name = asciiText)]
    fn ascii_text(bytes: &[u8]) -> JsValue;

    #[wasm_bindgen(js_name = deliverOutput)]
    pub(crate) fn deliver_output(tag: f64, request: f64, reply: &JsValue) -> JsValue;

    #[wasm_bindgen(js_name = okReply)]
    pub(crate) fn ok_reply() -> JsValue;

    #[wasm_bindgen(js_name = nilReply)]
    pub(crate) fn nil_reply() -> JsValue;

    #[wasm_bindgen(js_name = timeoutReply)]
    pub(crate) fn timeout_reply() -> JsValue;

    #[wasm_bindgen(js_name = valueReply)]
    pub(crate) fn value_reply(kind: &JsValue, value: &JsValue) -> JsValue;

    #[wasm_bindgen(js_name = extendAction)]
    pub(crate) fn extend_action() -> JsValue;

    #[wasm_bindgen(js_name = waitAction)]
    pub(crate) fn wait_action(until: f64) -> JsValue;

    #[wasm_bindgen(js_name = lostAction)]
    pub(crate) fn lost_action(reason: &JsValue) -> JsValue;

    #[wasm_bindgen(js_name = stoppedAction)]
    pub(crate) fn stopped_action() -> JsValue;
}

/// How many argument strings the cache keeps before it starts over.
const ARG_CACHE_SIZE: usize = 256;
/// How many recent tokens are remembered, so they are never put in the cache.
const RECENT_TOKENS: usize = 16;
/// How many recent argument arrays are kept (one round's command is written by N links).
const ARRAY_CACHE_SIZE: usize = 4;

struct ArgCache {
    strings: std::collections::BTreeMap<Vec<u8>, JsValue>,
    tokens: std::collections::VecDeque<Vec<u8>>,
    /// Each array under its key: every argument's length (4 bytes) then its bytes.
    arrays: std::collections::VecDeque<(Vec<u8>, JsValue)>,
    /// The key being looked up, kept to reuse its allocation.
    key: Vec<u8>,
}

thread_local! {
    /// JS strings of recent command arguments: every lock of a resource sends the same
    /// command names, key, TTL and script SHA-1s, and making each string anew (a UTF-8
    /// decode in JS) was the largest part of an output's cost. Tokens are not cached:
    /// they never repeat. The last few argument arrays are kept whole: the N commands of
    /// a round share their arguments, so they share one frozen array.
    static ARGS: core::cell::RefCell<ArgCache> = const {
        core::cell::RefCell::new(ArgCache {
            strings: std::collections::BTreeMap::new(),
            tokens: std::collections::VecDeque::new(),
            arrays: std::collections::VecDeque::new(),
            key: Vec::new(),
        })
    };
}

/// Remembers `token` as a token (never cached as a string).
pub(crate) fn note_token(token: &[u8]) {
    if token.is_empty() {
        return;
    }
    ARGS.with(|cache| {
        let Ok(mut cache) = cache.try_borrow_mut() else {
            return;
        };
        if cache.tokens.iter().any(|t| t == token) {
            return;
        }
        if cache.tokens.len() >= RECENT_TOKENS {
            cache.tokens.pop_front();
        }
        cache.tokens.push_back(token.to_vec());
    });
}

/// The longest text made by `ascii_text` rather than by a `TextDecoder`.
const ASCII_TEXT_MAX: usize = 256;

/// Bytes as a JS string when valid UTF-8, as a `Uint8Array` otherwise.
pub(crate) fn bytes_to_js(bytes: &[u8]) -> JsValue {
    // Short ASCII (tokens, keys, numbers: every argument of a lock's commands) is made
    // from the module's memory directly: a TextDecoder call cost more than the rest of
    // the argument array.
    if bytes.len() <= ASCII_TEXT_MAX && bytes.is_ascii() {
        return ascii_text(bytes);
    }
    match core::str::from_utf8(bytes) {
        Ok(text) => JsValue::from_str(text),
        Err(_) => js_sys::Uint8Array::from(bytes).into(),
    }
}

fn arg_to_js(cache: &mut ArgCache, arg: &[u8]) -> JsValue {
    let Ok(text) = core::str::from_utf8(arg) else {
        return js_sys::Uint8Array::from(arg).into();
    };
    if cache.tokens.iter().any(|t| t == arg) {
        return JsValue::from_str(text);
    }
    if let Some(value) = cache.strings.get(arg) {
        return value.clone();
    }
    if cache.strings.len() >= ARG_CACHE_SIZE {
        cache.strings.clear();
    }
    let value = JsValue::from_str(text);
    cache.strings.insert(arg.to_vec(), value.clone());
    value
}

/// A frozen JS array of `args` (strings where valid UTF-8, `Uint8Array`s otherwise),
/// the same array as last time for the same arguments.
///
/// `args()` gives the arguments (called twice: for the key, then to build a new array).
pub(crate) fn args_array<'a, I>(args: impl Fn() -> I) -> JsValue
where
    I: ExactSizeIterator<Item = &'a [u8]>,
{
    ARGS.with(|cache| {
        let Ok(mut cache) = cache.try_borrow_mut() else {
            let array = js_sys::Array::new();
            for arg in args() {
                array.push(&bytes_to_js(arg));
            }
            return array.into();
        };
        // One flat key, in a buffer reused from call to call: a lookup allocates nothing.
        let mut key = core::mem::take(&mut cache.key);
        key.clear();
        for arg in args() {
            // An argument is far below 4 GiB (the core bounds keys and tokens).
            key.extend_from_slice(&u32::try_from(arg.len()).unwrap_or(u32::MAX).to_le_bytes());
            key.extend_from_slice(arg);
        }
        let found = cache
            .arrays
            .iter()
            .find(|(cached, _)| *cached == key)
            .map(|(_, array)| array.clone());
        let array = match found {
            Some(array) => array,
            None => {
                let args = args();
                let array = js_sys::Array::new_with_length(args.len() as u32);
                for (index, arg) in args.enumerate() {
                    array.set(index as u32, arg_to_js(&mut cache, arg));
                }
                let array: JsValue = js_sys::Object::freeze(&array).into();
                if cache.arrays.len() >= ARRAY_CACHE_SIZE {
                    cache.arrays.pop_front();
                }
                cache.arrays.push_back((key.clone(), array.clone()));
                array
            }
        };
        cache.key = key;
        array
    })
}

/// Node results without an error text as one number: each node's code (0 `not_asked`,
/// 1 `pending`, 2 `success`, 3 `conflict`, 4 `timeout`, 5 `missing`) in 3 bits, node 0 lowest. `None`
/// for an error or more than 17 nodes (8^17 = 2^51 stays exact in a JS number).
fn packed_codes(nodes: &[redlock_core::NodeResult]) -> Option<f64> {
    use redlock_core::NodeResult;
    if nodes.len() > 17 {
        return None;
    }
    let mut packed: u64 = 0;
    for result in nodes.iter().rev() {
        let code = match result {
            NodeResult::NotAsked => 0,
            NodeResult::Pending => 1,
            NodeResult::Success => 2,
            NodeResult::Conflict => 3,
            NodeResult::Timeout => 4,
            NodeResult::Missing => 5,
            _ => return None,
        };
        packed = packed * 8 + code;
    }
    // Below 2^51: exact.
    Some(packed as f64)
}

/// The node results as codes in one crossing, or `None` (see `packed_codes`).
pub(crate) fn node_codes(nodes: &[redlock_core::NodeResult]) -> Option<JsValue> {
    packed_codes(nodes).map(|packed| node_codes_js(nodes.len() as u32, packed))
}

/// An outcome's node results as `(count, packed, array)`: the packed codes, made into an
/// array only when read (`array` undefined), or the array itself (`packed` NaN).
pub(crate) fn lazy_nodes(s: &Strings, nodes: &[redlock_core::NodeResult]) -> (u32, f64, JsValue) {
    let count = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
    match packed_codes(nodes) {
        Some(packed) => (count, packed, JsValue::UNDEFINED),
        None => (
            count,
            f64::NAN,
            crate::operation::node_results_to_js(s, nodes),
        ),
    }
}

/// A JS array of `values`, made in one crossing when there are at most `ARRAY_OF_MAX`.
pub(crate) fn array(values: impl ExactSizeIterator<Item = JsValue>) -> JsValue {
    let count = values.len();
    if count > ARRAY_OF_MAX {
        let array = js_sys::Array::new_with_length(count as u32);
        for (index, value) in values.enumerate() {
            array.set(index as u32, value);
        }
        return array.into();
    }
    let mut slots: [JsValue; ARRAY_OF_MAX] = Default::default();
    for (slot, value) in slots.iter_mut().zip(values) {
        *slot = value;
    }
    let [a0, a1, a2, a3, a4, a5, a6, a7] = &slots;
    array_of(count as u32, a0, a1, a2, a3, a4, a5, a6, a7)
}

/// The most arguments a write's array is made from in one crossing (`arrayOf`).
const ARRAY_OF_MAX: usize = 8;
/// How many command shapes (name and argument count) keep their last arguments.
const SHAPES: usize = 8;

/// The last arguments of one command shape, each with its JS value.
struct Shape {
    args: Vec<(Vec<u8>, JsValue)>,
}

/// How many argument strings made for one shape are kept for the others (a token is
/// written by the acquisition's `SET`, then by its release's `EVALSHA`).
const RECENT: usize = 4;

struct WriteCache {
    /// The argument strings made last, for any shape.
    recent: std::collections::VecDeque<(Vec<u8>, JsValue)>,
    /// The last write and its array: the N writes of a round share their arguments
    /// (`Write::shares_args_with`), so they share one array. The write is kept (and
    /// with it its arguments), so a later write cannot be mistaken for it.
    last: Option<(redlock_core::Write, JsValue)>,
    /// Per shape, the arguments last written: from one lock of a resource to the next,
    /// only the token changes, so only its string is made anew.
    shapes: Vec<Shape>,
}

thread_local! {
    static WRITES: core::cell::RefCell<WriteCache> = const {
        core::cell::RefCell::new(WriteCache {
            recent: std::collections::VecDeque::new(),
            last: None,
            shapes: Vec::new(),
        })
    };
}

/// A link's `write` output with `args`: the array of the round's first write for the
/// others; otherwise made in one crossing from the arguments' JS values, reusing the
/// strings of the same command's last write where the bytes are the same. The array is
/// not frozen (a frozen array made each client's copy of it measurably slower): the
/// link's documentation says not to change it.
pub(crate) fn write_output(write: &redlock_core::Write) -> JsValue {
    write_args(write.id().0 as f64, &write_array(write))
}

/// The arguments array of `write`, as `write_output` gives it.
pub(crate) fn write_array(write: &redlock_core::Write) -> JsValue {
    WRITES.with(|cache| {
        let Ok(mut cache) = cache.try_borrow_mut() else {
            return args_array(|| write.args());
        };
        if let Some((previous, array)) = &cache.last {
            if previous.shares_args_with(write) {
                return array.clone();
            }
        }
        let WriteCache { recent, shapes, .. } = &mut *cache;
        let array = match shaped_array(shapes, recent, write) {
            Some(array) => array,
            None => args_array(|| write.args()),
        };
        cache.last = Some((write.clone(), array.clone()));
        array
    })
}

/// The array of `write`'s arguments through its shape's last values, or None for a
/// command of more than `ARRAY_OF_MAX` arguments.
fn shaped_array(
    shapes: &mut Vec<Shape>,
    recent: &mut std::collections::VecDeque<(Vec<u8>, JsValue)>,
    write: &redlock_core::Write,
) -> Option<JsValue> {
    let count = write.arg_count();
    if count == 0 || count > ARRAY_OF_MAX {
        return None;
    }
    let name = write.arg(0)?;
    let index = match shapes
        .iter()
        .position(|shape| shape.args.len() == count && shape.args[0].0 == name)
    {
        Some(index) => index,
        None => {
            if shapes.len() >= SHAPES {
                shapes.remove(0);
            }
            shapes.push(Shape { args: Vec::new() });
            shapes.len() - 1
        }
    };
    let shape = &mut shapes[index];
    let mut values: [JsValue; ARRAY_OF_MAX] = Default::default();
    for (position, arg) in write.args().enumerate() {
        match shape.args.get(position) {
            Some((bytes, value)) if bytes.as_slice() == arg => values[position] = value.clone(),
            _ => {
                let value = match recent.iter().find(|(bytes, _)| bytes.as_slice() == arg) {
                    Some((_, value)) => value.clone(),
                    None => {
                        let value = bytes_to_js(arg);
                        // The oldest entry's buffer is reused: no allocation per token.
                        let mut bytes = if recent.len() >= RECENT {
                            recent
                                .pop_front()
                                .map(|(bytes, _)| bytes)
                                .unwrap_or_default()
                        } else {
                            Vec::new()
                        };
                        bytes.clear();
                        bytes.extend_from_slice(arg);
                        recent.push_back((bytes, value.clone()));
                        value
                    }
                };
                match shape.args.get_mut(position) {
                    Some(slot) => {
                        slot.0.clear();
                        slot.0.extend_from_slice(arg);
                        slot.1 = value.clone();
                    }
                    None => shape.args.push((arg.to_vec(), value.clone())),
                }
                values[position] = value;
            }
        }
    }
    let [a0, a1, a2, a3, a4, a5, a6, a7] = &values;
    Some(array_of(count as u32, a0, a1, a2, a3, a4, a5, a6, a7))
}
