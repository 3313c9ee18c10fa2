//! Tokens and the randomness behind them and behind retry jitter.
//!
//! The core never touches OS randomness unless the `os-random` feature is on and the
//! caller asked for it. An operation draws its randomness in a fixed order, which the
//! conformance vectors rely on:
//!
//! 1. `token_bytes` bytes for the token of attempt 1;
//! 2. after attempt k fails (k < attempts): 8 bytes for the jitter of the delay, then
//!    `token_bytes` bytes for the token of attempt k + 1.
//!
//! Every attempt has its own token, so a release of attempt k that a network delays
//! can never delete the key attempt k + 1 set on the same node.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

use crate::error::UsageError;

/// The longest token text accepted from outside ([`Token::from_text`]).
pub const MAX_TOKEN_TEXT: usize = 256;

/// The value stored under a lock's key: unique per acquisition attempt, printable.
///
/// Tokens the core generates are lowercase hex of `token_bytes` random bytes (40
/// characters for the default 160 bits).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Token(String);

impl Token {
    /// Lowercase hex of `bytes`.
    pub fn from_random_bytes(bytes: &[u8]) -> Token {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = String::with_capacity(bytes.len() * 2);
        for byte in bytes {
            text.push(char::from(HEX[usize::from(byte >> 4)]));
            text.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        Token(text)
    }

    /// A token known from elsewhere (printed by an earlier process, passed on a command
    /// line). It MUST be 1 to [`MAX_TOKEN_TEXT`] printable ASCII characters without spaces.
    pub fn from_text(text: &str) -> Result<Token, UsageError> {
        let printable = text.bytes().all(|b| b.is_ascii_graphic());
        if text.is_empty() || text.len() > MAX_TOKEN_TEXT || !printable {
            return Err(UsageError::InvalidToken);
        }
        Ok(Token(String::from(text)))
    }

    /// No token: for operations that carry none (inspections).
    pub(crate) fn empty() -> Token {
        Token(String::new())
    }

    /// The token's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The token's text as bytes, as sent to Redis.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({})", self.0)
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a client draws the randomness of its operations.
pub(crate) enum Source {
    /// The operating system's CSPRNG: one call per operation.
    #[cfg(feature = "os-random")]
    Os,
    /// A ChaCha20 stream seeded once by the caller.
    Seeded(alloc::boxed::Box<ChaCha20Rng>),
}

impl Source {
    /// A client's listener id ([`crate::LISTENER_ID_BYTES`] random bytes), drawn apart
    /// from its operations' randomness: from the OS, or from stream 1 of the seed (the
    /// operations draw from stream 0, so a seeded client's tokens do not move).
    pub(crate) fn listener_id(&self) -> Result<[u8; crate::LISTENER_ID_BYTES], UsageError> {
        let mut id = [0u8; crate::LISTENER_ID_BYTES];
        match self {
            #[cfg(feature = "os-random")]
            Source::Os => getrandom::fill(&mut id).map_err(|_| UsageError::RandomSourceFailed)?,
            Source::Seeded(rng) => {
                let mut stream = ChaCha20Rng::from_seed(rng.get_seed());
                stream.set_stream(1);
                stream.fill_bytes(&mut id);
            }
        }
        Ok(id)
    }

    /// Randomness for one operation: the first token's bytes drawn now, and a seed for
    /// the stream later attempts draw from, expanded only if a retry needs it.
    pub(crate) fn operation_random(
        &mut self,
        token_bytes: usize,
    ) -> Result<OperationRandom, UsageError> {
        let mut first = [0u8; crate::config::MAX_TOKEN_BYTES + 32];
        let len = token_bytes.min(crate::config::MAX_TOKEN_BYTES) + 32;
        let drawn = &mut first[..len];
        match self {
            #[cfg(feature = "os-random")]
            Source::Os => getrandom::fill(drawn).map_err(|_| UsageError::RandomSourceFailed)?,
            Source::Seeded(rng) => rng.fill_bytes(drawn),
        }
        let mut seed = [0u8; 32];
        seed.copy_from_slice(&drawn[len - 32..]);
        Ok(OperationRandom::Stream {
            first,
            first_len: len - 32,
            used: 0,
            seed,
            rng: None,
        })
    }
}

/// The randomness one operation draws from.
pub(crate) enum OperationRandom {
    /// Bytes drawn from the client's source when the operation started, then a ChaCha20
    /// stream seeded from it.
    Stream {
        first: [u8; crate::config::MAX_TOKEN_BYTES + 32],
        first_len: usize,
        used: usize,
        seed: [u8; 32],
        rng: Option<alloc::boxed::Box<ChaCha20Rng>>,
    },
    /// Caller-supplied bytes, checked at the start to be enough for every attempt.
    Bytes { bytes: Vec<u8>, used: usize },
    /// Extensions and releases draw nothing.
    None,
}

impl OperationRandom {
    /// Bytes an acquisition with `attempts` attempts draws at most.
    pub(crate) fn needed(attempts: u32, token_bytes: usize) -> usize {
        let attempts = attempts as usize;
        attempts
            .saturating_mul(token_bytes)
            .saturating_add(attempts.saturating_sub(1).saturating_mul(8))
    }

    /// Whether `len` more bytes can be drawn: always from a stream; from caller bytes,
    /// while they last (an acquisition with a wait limit stops retrying when they run
    /// out).
    pub(crate) fn can_draw(&self, len: usize) -> bool {
        match self {
            OperationRandom::Bytes { bytes, used } => bytes.len().saturating_sub(*used) >= len,
            _ => true,
        }
    }

    /// Makes the first token begin with `prefix` (a client's listener id, for its
    /// waiting acquisitions; see [`crate::waiter_channel`]): the first `prefix.len()` of
    /// its bytes, drawn from the client's source, are replaced. Caller-supplied bytes
    /// are left as given.
    pub(crate) fn prefix_first_token(&mut self, prefix: &[u8]) {
        if let OperationRandom::Stream {
            first, first_len, ..
        } = self
        {
            let len = prefix.len().min(*first_len);
            first[..len].copy_from_slice(&prefix[..len]);
        }
    }

    pub(crate) fn token(&mut self, len: usize) -> Token {
        let mut buf = [0u8; crate::config::MAX_TOKEN_BYTES];
        let out = &mut buf[..len.min(crate::config::MAX_TOKEN_BYTES)];
        self.fill(out);
        Token::from_random_bytes(out)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut buf = [0u8; 8];
        self.fill(&mut buf);
        u64::from_le_bytes(buf)
    }

    fn fill(&mut self, out: &mut [u8]) {
        match self {
            OperationRandom::Stream {
                first,
                first_len,
                used,
                seed,
                rng,
            } => {
                let available = first.get(*used..*first_len).unwrap_or(&[]);
                let n = out.len().min(available.len());
                out[..n].copy_from_slice(&available[..n]);
                *used += n;
                if n < out.len() {
                    rng.get_or_insert_with(|| {
                        alloc::boxed::Box::new(ChaCha20Rng::from_seed(*seed))
                    })
                    .fill_bytes(&mut out[n..]);
                }
            }
            OperationRandom::Bytes { bytes, used } => {
                // The length was checked against `needed` when the operation started;
                // should it ever fall short, the missing bytes stay zero rather than panic.
                let available = bytes.get(*used..).unwrap_or(&[]);
                let n = out.len().min(available.len());
                out[..n].copy_from_slice(&available[..n]);
                *used = used.saturating_add(out.len());
            }
            OperationRandom::None => out.fill(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_tokens() {
        assert_eq!(
            Token::from_random_bytes(&[0x00, 0x0f, 0xa5, 0xff]).as_str(),
            "000fa5ff"
        );
    }

    #[test]
    fn token_text_is_checked() {
        assert!(Token::from_text("abc-123_XYZ").is_ok());
        assert_eq!(Token::from_text(""), Err(UsageError::InvalidToken));
        assert_eq!(Token::from_text("has space"), Err(UsageError::InvalidToken));
        assert_eq!(Token::from_text("tab\t"), Err(UsageError::InvalidToken));
        assert_eq!(Token::from_text("é"), Err(UsageError::InvalidToken));
        let long = "a".repeat(MAX_TOKEN_TEXT + 1);
        assert_eq!(Token::from_text(&long), Err(UsageError::InvalidToken));
    }

    #[test]
    fn bytes_are_drawn_in_order() {
        let mut random = OperationRandom::Bytes {
            bytes: (1..=28).collect(),
            used: 0,
        };
        assert_eq!(
            random.token(20).as_str(),
            "0102030405060708090a0b0c0d0e0f1011121314"
        );
        assert_eq!(
            random.next_u64(),
            u64::from_le_bytes([21, 22, 23, 24, 25, 26, 27, 28])
        );
        // Exhausted: zeros, no panic.
        assert_eq!(random.next_u64(), 0);
    }

    #[test]
    fn stream_continues_past_the_first_token() {
        let mut source = Source::Seeded(alloc::boxed::Box::new(ChaCha20Rng::from_seed([3; 32])));
        let mut random = source.operation_random(20).unwrap();
        let first = random.token(20);
        let jitter = random.next_u64();
        let second = random.token(20);
        assert_ne!(first, second);
        assert_ne!(jitter, 0);
        let mut again = Source::Seeded(alloc::boxed::Box::new(ChaCha20Rng::from_seed([3; 32])));
        let mut random = again.operation_random(20).unwrap();
        assert_eq!(random.token(20), first);
        assert_eq!(random.next_u64(), jitter);
        assert_eq!(random.token(20), second);
    }

    #[test]
    fn needed_bytes() {
        assert_eq!(OperationRandom::needed(1, 20), 20);
        assert_eq!(OperationRandom::needed(3, 20), 3 * 20 + 2 * 8);
    }
}
