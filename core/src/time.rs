//! Caller-supplied monotonic time.
//!
//! The core never reads a clock. Every input carries `now` as a [`Time`]: microseconds
//! on the caller's monotonic clock, from any fixed origin the caller picks (process
//! start, boot, the first call). The same `u64` travels through C, JavaScript, Python,
//! Java and PHP unchanged.
//!
//! Durations inside the core are whole microseconds held in `u64` and every operation
//! on them saturates: no input can overflow, wrap or panic.

use core::fmt;
use core::time::Duration;

/// An instant on the caller's monotonic clock, in microseconds from the caller's origin.
///
/// Callers MUST take every `Time` they pass to one operation from the same monotonic
/// clock. The core tolerates a clock that appears to step backwards by treating the
/// earlier value as the latest one it has seen (see [`crate::Operation`]), which can only
/// shorten a lock's validity, never lengthen it.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(u64);

impl Time {
    /// The caller's origin.
    pub const ZERO: Time = Time(0);

    /// The instant `micros` microseconds after the caller's origin.
    pub const fn from_micros(micros: u64) -> Time {
        Time(micros)
    }

    /// Microseconds since the caller's origin.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Whole milliseconds since the caller's origin, rounded down.
    pub const fn as_millis_floor(self) -> u64 {
        self.0 / 1000
    }

    /// `self + duration`, saturating at the end of time.
    pub fn saturating_add(self, duration: Duration) -> Time {
        Time(self.0.saturating_add(micros_floor(duration)))
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Time) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }

    pub(crate) const fn plus_micros(self, micros: u64) -> Time {
        Time(self.0.saturating_add(micros))
    }

    pub(crate) const fn micros_since(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    pub(crate) const fn minus_micros(self, micros: u64) -> Time {
        Time(self.0.saturating_sub(micros))
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}us", self.0)
    }
}

/// Whole microseconds in `duration`, rounded down, saturating at `u64::MAX`.
pub(crate) fn micros_floor(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// Whole microseconds in `duration`, rounded up, saturating at `u64::MAX`.
pub(crate) fn micros_ceil(duration: Duration) -> u64 {
    let floor = micros_floor(duration);
    if duration.subsec_nanos() % 1000 == 0 {
        floor
    } else {
        floor.saturating_add(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let end = Time::from_micros(u64::MAX);
        assert_eq!(end.plus_micros(5), end);
        assert_eq!(Time::ZERO.minus_micros(5), Time::ZERO);
        assert_eq!(Time::ZERO.micros_since(end), 0);
        assert_eq!(end.saturating_add(Duration::MAX), end);
        assert_eq!(Time::ZERO.saturating_duration_since(end), Duration::ZERO);
    }

    #[test]
    fn rounding_of_durations() {
        assert_eq!(micros_floor(Duration::from_nanos(1999)), 1);
        assert_eq!(micros_ceil(Duration::from_nanos(1999)), 2);
        assert_eq!(micros_ceil(Duration::from_nanos(2000)), 2);
        assert_eq!(micros_ceil(Duration::MAX), u64::MAX);
        assert_eq!(Time::from_micros(2999).as_millis_floor(), 2);
    }
}
