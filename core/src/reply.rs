//! A node's answer to one command, as the driver hands it to the core.

use alloc::string::String;
use alloc::vec::Vec;

/// A reply from a node, already parsed by the driver's Redis client (or by
/// [`crate::resp::Decoder`] for raw-socket drivers), or the driver's report that none came.
///
/// Drivers map their client's values as follows: the status `OK` is [`Reply::Ok`]; any
/// other status line is [`Reply::Status`]; a null bulk string, null array or RESP3 null
/// is [`Reply::Nil`]; a Redis error (`-ERR ...`, `-NOSCRIPT ...`) is [`Reply::Error`]
/// with its full text; a failure of the driver's own (connection refused or reset, a
/// protocol error) is [`Reply::ConnectionFailed`]; and when the driver gives up waiting
/// it reports [`Reply::Timeout`] or, equivalently, lets the deadline pass and calls
/// `handle_timeout`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reply {
    /// The status reply `OK`.
    Ok,
    /// Any status reply other than `OK`.
    Status(String),
    /// A null reply.
    Nil,
    /// An integer reply.
    Integer(i64),
    /// A bulk string reply.
    Bulk(Vec<u8>),
    /// An array reply.
    Array(Vec<Reply>),
    /// An error reply, with the node's full text (e.g. `NOSCRIPT No matching script.`).
    Error(String),
    /// The driver gave up waiting for this reply.
    Timeout,
    /// The driver could not reach the node or lost the connection; the text says why.
    ConnectionFailed(String),
}

impl Reply {
    /// A status reply: [`Reply::Ok`] for `OK`, [`Reply::Status`] otherwise.
    pub fn status(text: &str) -> Reply {
        if text == "OK" {
            Reply::Ok
        } else {
            Reply::Status(String::from(text))
        }
    }

    /// True for an error reply whose text starts with the `NOSCRIPT` error code.
    pub(crate) fn is_noscript(&self) -> bool {
        match self {
            Reply::Error(text) => {
                text.split(|c: char| c.is_ascii_whitespace()).next() == Some("NOSCRIPT")
            }
            _ => false,
        }
    }

    /// A short description for per-node error texts.
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Reply::Ok => "status OK",
            Reply::Status(_) => "a status reply",
            Reply::Nil => "a null reply",
            Reply::Integer(_) => "an integer reply",
            Reply::Bulk(_) => "a bulk string reply",
            Reply::Array(_) => "an array reply",
            Reply::Error(_) => "an error reply",
            Reply::Timeout => "a timeout",
            Reply::ConnectionFailed(_) => "a connection failure",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_ok_is_normalised() {
        assert_eq!(Reply::status("OK"), Reply::Ok);
        assert_eq!(Reply::status("QUEUED"), Reply::Status("QUEUED".into()));
    }

    #[test]
    fn noscript_is_the_error_code_only() {
        assert!(Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into()).is_noscript());
        assert!(Reply::Error("NOSCRIPT".into()).is_noscript());
        assert!(!Reply::Error("ERR NOSCRIPT".into()).is_noscript());
        assert!(!Reply::Error("NOSCRIPTS".into()).is_noscript());
        assert!(!Reply::Bulk(b"NOSCRIPT".to_vec()).is_noscript());
    }
}
