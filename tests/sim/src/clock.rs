//! Clocks that drift and jump, as functions of the simulation's global time.
//!
//! All times are microseconds. Global time is the simulation's own, shared by nobody in
//! it: each node and each client reads only its own clock.

/// A clock that runs at `1 + ppm / 1e6` times the global rate from a base point, and
/// can jump forward. Readings never decrease.
#[derive(Clone, Debug)]
pub struct Clock {
    base_global: u64,
    base_local: u64,
    ppm: i64,
}

const MILLION: i128 = 1_000_000;

impl Clock {
    /// A clock that reads `origin` at global time 0 and drifts by `ppm` parts per million
    /// (positive runs fast). `ppm` must be above -1,000,000.
    pub fn new(origin: u64, ppm: i64) -> Clock {
        Clock {
            base_global: 0,
            base_local: origin,
            ppm: ppm.max(-999_999),
        }
    }

    /// The drift rate in parts per million.
    pub fn ppm(&self) -> i64 {
        self.ppm
    }

    fn rate(&self) -> i128 {
        MILLION + i128::from(self.ppm)
    }

    /// The reading at global time `global` (rounded down).
    pub fn local(&self, global: u64) -> u64 {
        let elapsed = i128::from(global.saturating_sub(self.base_global));
        let advanced = elapsed * self.rate() / MILLION;
        self.base_local
            .saturating_add(u64::try_from(advanced).unwrap_or(u64::MAX))
    }

    /// The earliest global instant (not before the clock's base point) at which the
    /// clock reads at least `local`.
    pub fn global_at(&self, local: u64) -> u64 {
        if local <= self.base_local {
            return self.base_global;
        }
        let ahead = i128::from(local - self.base_local) * MILLION;
        let rate = self.rate();
        let elapsed = (ahead + rate - 1) / rate;
        self.base_global
            .saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX))
    }

    /// Jumps forward by `by` at global time `at` (an NTP step, an operator's mistake).
    pub fn jump(&mut self, at: u64, by: u64) {
        let reading = self.local(at);
        self.base_global = at;
        self.base_local = reading.saturating_add(by);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_at_is_the_first_instant_reaching_the_reading() {
        for ppm in [-5000, -1, 0, 1, 3333, 5000] {
            let clock = Clock::new(12_345, ppm);
            for local in [12_346, 20_000, 1_000_000, 987_654_321] {
                let global = clock.global_at(local);
                assert!(clock.local(global) >= local, "ppm {ppm} local {local}");
                assert!(global == 0 || clock.local(global - 1) < local);
            }
        }
    }

    #[test]
    fn jumps_move_readings_forward_only() {
        let mut clock = Clock::new(0, 1000);
        assert_eq!(clock.local(1_000_000), 1_001_000);
        clock.jump(1_000_000, 500_000);
        assert_eq!(clock.local(1_000_000), 1_501_000);
        assert_eq!(clock.local(2_000_000), 2_502_000);
        assert_eq!(clock.global_at(1_501_000), 1_000_000);
    }
}
