//! Seeded randomness: every random choice of a run comes from here, so one seed gives
//! one run.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// Independent streams per purpose, so that (say) one more message on the network does
/// not change how the scenario was laid out.
#[derive(Clone, Copy, Debug)]
pub enum Stream {
    /// Scenario layout: clocks, workloads, fault times.
    Setup = 1,
    /// Message delays and losses.
    Network = 2,
    /// Application-level choices of clients (retry pauses, legacy tokens).
    Clients = 3,
}

/// A seeded pseudo-random generator (ChaCha8).
pub struct Rng(ChaCha8Rng);

impl Rng {
    /// The generator for `stream` of run `seed`.
    pub fn new(seed: u64, stream: Stream) -> Rng {
        let mut inner = ChaCha8Rng::seed_from_u64(seed);
        inner.set_stream(stream as u64);
        Rng(inner)
    }

    /// A uniform value in `lo..=hi` (`lo` if `hi < lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo;
        if span == u64::MAX {
            return self.0.next_u64();
        }
        // Multiply-shift: the bias is below 2^-64 per draw, far under anything observable.
        let wide = u128::from(self.0.next_u64()) * u128::from(span + 1);
        lo + (wide >> 64) as u64
    }

    /// A uniform value in `-bound..=bound`.
    pub fn signed(&mut self, bound: i64) -> i64 {
        let bound = bound.unsigned_abs();
        let value = self.range(0, bound * 2) as i64;
        value - bound as i64
    }

    /// True with probability `per_million / 1_000_000`.
    pub fn chance(&mut self, per_million: u64) -> bool {
        self.range(0, 999_999) < per_million
    }

    /// 32 random bytes, to seed a core client.
    pub fn seed32(&mut self) -> [u8; 32] {
        let mut seed = [0u8; 32];
        self.0.fill_bytes(&mut seed);
        seed
    }

    /// Lowercase hex of `bytes` random bytes.
    pub fn hex(&mut self, bytes: usize) -> String {
        let mut raw = vec![0u8; bytes];
        self.0.fill_bytes(&mut raw);
        raw.iter().map(|b| format!("{b:02x}")).collect()
    }
}
