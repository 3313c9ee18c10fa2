// Checks of the numbers a caller gives (settings, per-call TTLs, wait limits), made in
// JavaScript before anything crosses into the core, so that every refusal names the
// rule and the range allowed ("ttlMs must be a whole number of milliseconds between 1
// and 1000000000000, got -1000") instead of a deserializer's "invalid type: floating
// point `-1000.0`, expected u64". The ranges are the core's (its `limits()`); the core
// still checks the rules between settings (a drift that eats the TTL, and the like).

import { limits } from '../wasm/redlock_wasm.js';
import { InvalidArgumentError } from './errors.js';

/** How much of a caller's value a message quotes. */
export const QUOTE_LIMIT = 64;

/** `text` cut to about `limit` characters, with "…" and the whole length when longer. */
export function clip(text, limit = QUOTE_LIMIT) {
  const value = String(text);
  return value.length > limit ? `${value.slice(0, limit)}… (${value.length} characters)` : value;
}

/** Resource names for a message: each cut to about 64 characters, at most 8 of them. */
export function namesText(names, limit = 8) {
  const shown = names.slice(0, limit).map((name) => clip(typeof name === 'string' ? name : `<${name?.length ?? 0} bytes>`));
  const more = names.length - limit;
  return more > 0 ? `${shown.join(', ')} and ${more} more` : shown.join(', ');
}

/** A value as a message quotes it: numbers as JavaScript prints them, anything else with its type. */
export function described(value) {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return `${clip(JSON.stringify(value))} (a string)`;
  if (typeof value === 'bigint') return `${clip(value)}n (a bigint)`;
  if (value === null) return 'null';
  if (typeof value === 'object') return Array.isArray(value) ? 'an array' : 'an object';
  return `${clip(String(value))} (${typeof value})`;
}

let bounds;
/** The core's bounds (read once). */
function coreLimits() {
  bounds ??= limits();
  return bounds;
}

/** The largest number of milliseconds a duration in microseconds may hold, exactly. */
const MAX_DURATION_MS = Math.floor(Number.MAX_SAFE_INTEGER / 1000);
const U32_MAX = 2 ** 32 - 1;

function refuse(name, rule, value, reason = 'invalid_argument') {
  return new InvalidArgumentError(`${name} must be ${rule}, got ${described(value)}`, { reason });
}

/**
 * A whole number from `min` to `max` (`what` names the unit, e.g. "of milliseconds").
 * `reason` is "invalid_argument" for a value that is not a whole number at all; a whole
 * number out of range gets `below` or `above`, the core's own code for that rule, so
 * that the reason is the same whether the package or the core refused it.
 */
export function wholeNumber(name, value, min, max, what = '', below = 'out_of_range', above = below) {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const reason = !Number.isInteger(value) || value < 0 ? 'invalid_argument' : value < min ? below : above;
    throw refuse(name, `a whole number${what ? ` ${what}` : ''} between ${min} and ${max}`, value, reason);
  }
  return value;
}

/**
 * A TTL in whole milliseconds, within the core's bound. `zero` and `large` are the
 * reasons of 0 and of a TTL over the bound: the configuration's `ttl_zero` and
 * `ttl_too_large`, a call's `invalid_ttl`.
 */
export function ttlMs(name, value, zero = 'invalid_ttl', large = zero) {
  return wholeNumber(name, value, 1, coreLimits().maxTtlMs, 'of milliseconds', zero, large);
}

/** A duration in milliseconds from 0, fractions allowed (microsecond resolution). */
export function durationMs(name, value) {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > MAX_DURATION_MS) {
    throw refuse(name, `a finite number of milliseconds between 0 and ${MAX_DURATION_MS}`, value);
  }
  return value;
}

/** A positive duration in milliseconds (a connect or query timeout). */
export function positiveDurationMs(name, value) {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_DURATION_MS) {
    throw refuse(name, `a positive number of milliseconds, at most ${MAX_DURATION_MS}`, value);
  }
  return value;
}

/** The configuration's numeric settings, each against its rule. */
export function checkSetting(key, value) {
  const limitsNow = coreLimits();
  switch (key) {
    case 'ttlMs':
      return ttlMs('ttlMs', value, 'ttl_zero', 'ttl_too_large');
    case 'attempts':
      return wholeNumber('attempts', value, 1, limitsNow.maxAttempts, '', 'attempts_zero', 'too_many_attempts');
    case 'tokenBytes':
      return wholeNumber('tokenBytes', value, limitsNow.minTokenBytes, limitsNow.maxTokenBytes, 'of bytes', 'token_too_short', 'token_too_long');
    case 'maxExtensions':
      return wholeNumber('maxExtensions', value, 0, U32_MAX);
    case 'driftFactor':
      if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value >= 1) {
        const reason = typeof value === 'number' ? 'drift_factor_invalid' : 'invalid_argument';
        throw refuse('driftFactor', 'a number from 0 up to (not including) 1', value, reason);
      }
      return value;
    case 'driftFixedMs':
    case 'nodeTimeoutMs':
    case 'minValidityMs':
    case 'retryDelayMs':
    case 'retryJitterMs':
      return durationMs(key, value);
    default:
      return value;
  }
}
