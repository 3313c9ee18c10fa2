//! Caller misuse. Configuration problems are [`crate::ConfigError`]; what nodes do is
//! reported in outcomes and per-node results, never as an error.

use core::fmt;

/// A call the core refused. The operation it was made on is left unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UsageError {
    /// A reply for a request id this operation never issued.
    UnknownRequest,
    /// A second reply for the same request.
    DuplicateReply,
    /// An acquisition of no resources.
    NoResources,
    /// A resource whose key (prefix included) would be empty.
    EmptyResource,
    /// A resource whose key (prefix included) is an auxiliary key of another resource's
    /// lock ([`crate::reserved_key_owner`]): its fence counter, or its queue of waiters
    /// and their turn. Taking it as a lock would let one resource's scripts overwrite
    /// the other's keys.
    ReservedResource,
    /// More than [`crate::MAX_RESOURCES`] resources in one lock.
    TooManyResources,
    /// The same resource named twice in one lock.
    DuplicateResource,
    /// A token that is empty, too long, or not printable ASCII without spaces.
    InvalidToken,
    /// Caller-supplied random bytes too few for every attempt of the acquisition.
    NotEnoughRandomBytes,
    /// The operating system's random source failed.
    RandomSourceFailed,
    /// A TTL given for one operation that the configuration does not allow with it.
    InvalidTtl(crate::ConfigError),
    /// A node index outside `0..N` (a release notice from a node the client does not
    /// have).
    UnknownNode,
    /// A fencing token of 0 or above [`crate::MAX_FENCING_TOKEN`] given to a fenced write.
    InvalidFencingToken,
    /// An outcome given back ([`crate::Operation::decline`]) to an operation that did
    /// not hand it out: another operation's, one not polled yet, or one given back
    /// already.
    ForeignOutcome,
}

impl UsageError {
    /// A stable snake_case name, the same in every binding and in the conformance vectors.
    pub fn code(self) -> &'static str {
        match self {
            UsageError::UnknownRequest => "unknown_request",
            UsageError::DuplicateReply => "duplicate_reply",
            UsageError::NoResources => "no_resources",
            UsageError::EmptyResource => "empty_resource",
            UsageError::ReservedResource => "reserved_resource",
            UsageError::TooManyResources => "too_many_resources",
            UsageError::DuplicateResource => "duplicate_resource",
            UsageError::InvalidToken => "invalid_token",
            UsageError::NotEnoughRandomBytes => "not_enough_random_bytes",
            UsageError::RandomSourceFailed => "random_source_failed",
            UsageError::InvalidTtl(_) => "invalid_ttl",
            UsageError::UnknownNode => "unknown_node",
            UsageError::InvalidFencingToken => "invalid_fencing_token",
            UsageError::ForeignOutcome => "foreign_outcome",
        }
    }
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let UsageError::InvalidTtl(error) = self {
            return write!(f, "invalid TTL for this operation: {error}");
        }
        let text = match self {
            UsageError::InvalidTtl(_) => "invalid TTL for this operation",
            UsageError::UnknownRequest => "no request with this id was issued by this operation",
            UsageError::DuplicateReply => "this request already had its reply",
            UsageError::NoResources => "a lock needs at least one resource",
            UsageError::EmptyResource => "a resource name (with the key prefix) must not be empty",
            UsageError::ReservedResource => {
                "a resource's key (with the key prefix) must not be another resource's fence or waiters key: a key ending in :fence, :waiters, :waiters:expiry or :waiters:turn right after a hash tag ({...}) is reserved"
            }
            UsageError::TooManyResources => "too many resources in one lock (the most is 64)",
            UsageError::DuplicateResource => "the same resource appears twice in one lock",
            UsageError::InvalidToken => {
                "a token must be 1 to 256 printable ASCII characters without spaces"
            }
            UsageError::NotEnoughRandomBytes => {
                "not enough random bytes for every attempt of this acquisition"
            }
            UsageError::RandomSourceFailed => "the operating system's random source failed",
            UsageError::UnknownNode => "no node with this index in the configuration",
            UsageError::InvalidFencingToken => {
                "a fencing token must be an integer from 1 to 2^53-1"
            }
            UsageError::ForeignOutcome => {
                "this outcome was not handed out by this operation, or was given back already"
            }
        };
        f.write_str(text)
    }
}

impl core::error::Error for UsageError {}
