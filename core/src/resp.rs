//! RESP2/RESP3 encoding of commands and incremental decoding of replies, for drivers
//! that own a raw socket (edge runtimes, plain C). Drivers that use a Redis client
//! library do not need this module.
//!
//! Replies map to [`Reply`] as follows: `+OK` is `Ok`, other `+` lines `Status`; `-` and
//! `!` are `Error`; `:` is `Integer`; `$` is `Bulk` (`$-1` is `Nil`); `*`, `%` (keys
//! and values alternating) and `~` are `Array` (`*-1` is `Nil`); `_` is `Nil`; `#t` and
//! `#f` are `Integer(1)` and `Integer(0)`; `,` and `(` are `Bulk` with the number's
//! text; `=` is `Bulk` without its three-letter format prefix. Attributes (`|`) are
//! skipped along with nothing else: the reply they annotate is returned. Push frames
//! (`>`) are out-of-band, never a command's reply, and are skipped.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::reply::Reply;

/// Appends `args` as a RESP array of bulk strings (valid for RESP2 and RESP3 servers).
pub fn encode_command<'a, I>(args: I, out: &mut Vec<u8>)
where
    I: IntoIterator<Item = &'a [u8]>,
    I::IntoIter: ExactSizeIterator,
{
    let args = args.into_iter();
    out.push(b'*');
    push_decimal(out, args.len());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        out.push(b'$');
        push_decimal(out, arg.len());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

fn push_decimal(out: &mut Vec<u8>, n: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        // `rest % 10 < 10`, so the cast cannot truncate.
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Why a byte stream is not RESP. After one, the decoder keeps returning it: the
/// connection is out of step and must be closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A frame starts with a byte that is no RESP type.
    UnknownType(u8),
    /// A length, count or integer that is not a valid decimal number.
    BadNumber,
    /// A line or bulk string not terminated by CRLF.
    BadTerminator,
    /// A frame larger than the decoder's limits (length, element count or line).
    TooLarge,
    /// Aggregates nested deeper than the decoder's limit.
    TooDeep,
    /// A RESP3 boolean other than `#t` or `#f`, or a verbatim string without its prefix.
    BadValue,
}

impl ProtocolError {
    /// A stable snake_case name, the same in every binding and in the conformance vectors.
    pub fn code(self) -> &'static str {
        match self {
            ProtocolError::UnknownType(_) => "unknown_type",
            ProtocolError::BadNumber => "bad_number",
            ProtocolError::BadTerminator => "bad_terminator",
            ProtocolError::TooLarge => "too_large",
            ProtocolError::TooDeep => "too_deep",
            ProtocolError::BadValue => "bad_value",
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::UnknownType(byte) => write!(f, "unknown RESP type byte 0x{byte:02x}"),
            ProtocolError::BadNumber => f.write_str("invalid number in RESP frame"),
            ProtocolError::BadTerminator => f.write_str("RESP frame not terminated by CRLF"),
            ProtocolError::TooLarge => f.write_str("RESP frame exceeds the decoder's limits"),
            ProtocolError::TooDeep => f.write_str("RESP aggregates nested too deeply"),
            ProtocolError::BadValue => f.write_str("invalid RESP3 value"),
        }
    }
}

impl core::error::Error for ProtocolError {}

/// Limits that keep a hostile or broken peer from making the decoder buffer or
/// allocate without bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest bulk string (Redis's own default `proto-max-bulk-len` is 512 MiB).
    pub max_bulk: usize,
    /// Most elements in one aggregate.
    pub max_elements: usize,
    /// Deepest nesting of aggregates.
    pub max_depth: usize,
    /// Longest simple line (status, error, number).
    pub max_line: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_bulk: 512 * 1024 * 1024,
            max_elements: 1 << 20,
            max_depth: 32,
            max_line: 64 * 1024,
        }
    }
}

/// An incremental RESP decoder: feed it bytes as they arrive, take replies as they
/// complete.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    start: usize,
    limits: Limits,
    failed: Option<ProtocolError>,
}

/// A parsed frame: a reply, or an out-of-band frame that was skipped.
enum Frame {
    Reply(Reply),
    Skipped,
}

type Parsed<T> = Result<Option<(T, usize)>, ProtocolError>;

impl Decoder {
    /// A decoder with the default [`Limits`].
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// A decoder with the given limits.
    pub fn with_limits(limits: Limits) -> Decoder {
        Decoder {
            limits,
            ..Decoder::default()
        }
    }

    /// Adds bytes read from the connection.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes fed but not yet consumed by a complete reply.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next complete reply, `Ok(None)` if more bytes are needed, or the protocol
    /// error that ended the stream.
    pub fn next_reply(&mut self) -> Result<Option<Reply>, ProtocolError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        loop {
            let input = self.buf.get(self.start..).unwrap_or(&[]);
            match self.parse(input, 0, true) {
                Ok(Some((frame, used))) => {
                    self.start += used;
                    if let Frame::Reply(reply) = frame {
                        return Ok(Some(reply));
                    }
                }
                Ok(None) => return Ok(None),
                Err(error) => {
                    self.failed = Some(error);
                    return Err(error);
                }
            }
        }
    }

    fn parse(&self, input: &[u8], depth: usize, top: bool) -> Parsed<Frame> {
        let Some(&kind) = input.first() else {
            return Ok(None);
        };
        let Some((line, after_line)) = self.line(&input[1..])? else {
            return Ok(None);
        };
        let header = 1 + after_line;
        let reply = match kind {
            b'+' => Reply::status(&String::from_utf8_lossy(line)),
            b'-' => Reply::Error(String::from_utf8_lossy(line).into_owned()),
            b':' => Reply::Integer(parse_i64(line)?),
            b'_' if line.is_empty() => Reply::Nil,
            b'_' => return Err(ProtocolError::BadValue),
            b'#' => match line {
                b"t" => Reply::Integer(1),
                b"f" => Reply::Integer(0),
                _ => return Err(ProtocolError::BadValue),
            },
            b',' | b'(' => Reply::Bulk(line.to_vec()),
            b'$' | b'!' | b'=' => {
                let len = parse_i64(line)?;
                if len == -1 && kind == b'$' {
                    return Ok(Some((Frame::Reply(Reply::Nil), header)));
                }
                let len = usize::try_from(len).map_err(|_| ProtocolError::BadNumber)?;
                if len > self.limits.max_bulk {
                    return Err(ProtocolError::TooLarge);
                }
                let rest = &input[header..];
                let Some(total) = len.checked_add(2) else {
                    return Err(ProtocolError::TooLarge);
                };
                if rest.len() < total {
                    return Ok(None);
                }
                if &rest[len..total] != b"\r\n" {
                    return Err(ProtocolError::BadTerminator);
                }
                let body = &rest[..len];
                let reply = match kind {
                    b'$' => Reply::Bulk(body.to_vec()),
                    b'!' => Reply::Error(String::from_utf8_lossy(body).into_owned()),
                    _ => match body.get(3) {
                        Some(b':') => Reply::Bulk(body[4..].to_vec()),
                        _ => return Err(ProtocolError::BadValue),
                    },
                };
                return Ok(Some((Frame::Reply(reply), header + total)));
            }
            b'*' | b'%' | b'~' | b'>' | b'|' => {
                let count = parse_i64(line)?;
                if count == -1 && kind == b'*' {
                    return Ok(Some((Frame::Reply(Reply::Nil), header)));
                }
                let count = usize::try_from(count).map_err(|_| ProtocolError::BadNumber)?;
                let elements = if matches!(kind, b'%' | b'|') {
                    count.checked_mul(2)
                } else {
                    Some(count)
                };
                let elements = elements.ok_or(ProtocolError::TooLarge)?;
                if elements > self.limits.max_elements {
                    return Err(ProtocolError::TooLarge);
                }
                if depth >= self.limits.max_depth {
                    return Err(ProtocolError::TooDeep);
                }
                let mut items = Vec::new();
                let mut used = header;
                for _ in 0..elements {
                    let Some((frame, n)) = self.parse(&input[used..], depth + 1, false)? else {
                        return Ok(None);
                    };
                    used += n;
                    if let Frame::Reply(item) = frame {
                        items.push(item);
                    }
                }
                if kind == b'|' {
                    // An attribute annotates the frame after it: return that frame.
                    let Some((frame, n)) = self.parse(&input[used..], depth, top)? else {
                        return Ok(None);
                    };
                    return Ok(Some((frame, used + n)));
                }
                if kind == b'>' && top {
                    return Ok(Some((Frame::Skipped, used)));
                }
                return Ok(Some((Frame::Reply(Reply::Array(items)), used)));
            }
            other => return Err(ProtocolError::UnknownType(other)),
        };
        Ok(Some((Frame::Reply(reply), header)))
    }

    /// The line at the start of `input` (without CRLF) and the bytes it takes with CRLF.
    fn line<'a>(&self, input: &'a [u8]) -> Parsed<&'a [u8]> {
        match input.iter().position(|&b| b == b'\r' || b == b'\n') {
            Some(end) if end > self.limits.max_line => Err(ProtocolError::TooLarge),
            Some(end) => match input.get(end..end + 2) {
                Some(b"\r\n") => Ok(Some((&input[..end], end + 2))),
                Some(_) => Err(ProtocolError::BadTerminator),
                None if input[end] == b'\r' => Ok(None),
                None => Err(ProtocolError::BadTerminator),
            },
            None if input.len() > self.limits.max_line => Err(ProtocolError::TooLarge),
            None => Ok(None),
        }
    }
}

fn parse_i64(text: &[u8]) -> Result<i64, ProtocolError> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    if digits.is_empty() {
        return Err(ProtocolError::BadNumber);
    }
    let mut value: i64 = 0;
    for &digit in digits {
        if !digit.is_ascii_digit() {
            return Err(ProtocolError::BadNumber);
        }
        let d = i64::from(digit - b'0');
        value = value
            .checked_mul(10)
            .and_then(|v| {
                if negative {
                    v.checked_sub(d)
                } else {
                    v.checked_add(d)
                }
            })
            .ok_or(ProtocolError::BadNumber)?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn decode_all(bytes: &[u8]) -> Vec<Reply> {
        let mut decoder = Decoder::new();
        decoder.feed(bytes);
        let mut replies = Vec::new();
        while let Some(reply) = decoder.next_reply().unwrap() {
            replies.push(reply);
        }
        assert_eq!(decoder.buffered(), 0);
        replies
    }

    #[test]
    fn encodes_commands() {
        let mut out = Vec::new();
        encode_command([&b"SET"[..], b"k", b""], &mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }

    #[test]
    fn resp2_types() {
        let replies = decode_all(
            b"+OK\r\n+PONG\r\n-ERR no\r\n:-42\r\n$3\r\nabc\r\n$-1\r\n*-1\r\n*2\r\n:1\r\n$0\r\n\r\n",
        );
        assert_eq!(
            replies,
            vec![
                Reply::Ok,
                Reply::Status("PONG".into()),
                Reply::Error("ERR no".into()),
                Reply::Integer(-42),
                Reply::Bulk(b"abc".to_vec()),
                Reply::Nil,
                Reply::Nil,
                Reply::Array(vec![Reply::Integer(1), Reply::Bulk(Vec::new())]),
            ]
        );
    }

    #[test]
    fn resp3_types() {
        let replies = decode_all(
            b"_\r\n#t\r\n#f\r\n,1.5\r\n(123456789012345678901234567890\r\n!5\r\nERR x\r\n=8\r\ntxt:hiya\r\n%1\r\n+a\r\n:1\r\n~1\r\n:2\r\n>2\r\n+message\r\n+x\r\n|1\r\n+ttl\r\n:3\r\n:7\r\n",
        );
        assert_eq!(
            replies,
            vec![
                Reply::Nil,
                Reply::Integer(1),
                Reply::Integer(0),
                Reply::Bulk(b"1.5".to_vec()),
                Reply::Bulk(b"123456789012345678901234567890".to_vec()),
                Reply::Error("ERR x".into()),
                Reply::Bulk(b"hiya".to_vec()),
                Reply::Array(vec![Reply::Status("a".into()), Reply::Integer(1)]),
                Reply::Array(vec![Reply::Integer(2)]),
                Reply::Integer(7),
            ]
        );
    }

    #[test]
    fn incremental_byte_by_byte() {
        let stream = b"*2\r\n$5\r\nhello\r\n:12\r\n+OK\r\n";
        let mut decoder = Decoder::new();
        let mut replies = Vec::new();
        for &byte in stream.iter() {
            decoder.feed(&[byte]);
            while let Some(reply) = decoder.next_reply().unwrap() {
                replies.push(reply);
            }
        }
        assert_eq!(
            replies,
            vec![
                Reply::Array(vec![Reply::Bulk(b"hello".to_vec()), Reply::Integer(12)]),
                Reply::Ok
            ]
        );
    }

    #[test]
    fn errors_are_sticky() {
        let mut decoder = Decoder::new();
        decoder.feed(b"?what\r\n+OK\r\n");
        assert_eq!(decoder.next_reply(), Err(ProtocolError::UnknownType(b'?')));
        assert_eq!(decoder.next_reply(), Err(ProtocolError::UnknownType(b'?')));
    }

    #[test]
    fn malformed_frames() {
        let cases: [(&[u8], ProtocolError); 9] = [
            (b":12a\r\n", ProtocolError::BadNumber),
            (b":\r\n", ProtocolError::BadNumber),
            (b":99999999999999999999\r\n", ProtocolError::BadNumber),
            (b"$-2\r\n", ProtocolError::BadNumber),
            (b"$3\r\nabcd\r\n", ProtocolError::BadTerminator),
            (b"+OK\rX", ProtocolError::BadTerminator),
            (b"+OK\n", ProtocolError::BadTerminator),
            (b"#x\r\n", ProtocolError::BadValue),
            (b"=2\r\nab\r\n", ProtocolError::BadValue),
        ];
        for (bytes, expected) in cases {
            let mut decoder = Decoder::new();
            decoder.feed(bytes);
            assert_eq!(decoder.next_reply(), Err(expected), "{:?}", bytes);
        }
    }

    #[test]
    fn limits() {
        let limits = Limits {
            max_bulk: 4,
            max_elements: 2,
            max_depth: 2,
            max_line: 8,
        };
        let cases: [(&[u8], ProtocolError); 4] = [
            (b"$5\r\n", ProtocolError::TooLarge),
            (b"*3\r\n", ProtocolError::TooLarge),
            (b"*1\r\n*1\r\n*1\r\n", ProtocolError::TooDeep),
            (b"+123456789", ProtocolError::TooLarge),
        ];
        for (bytes, expected) in cases {
            let mut decoder = Decoder::with_limits(limits);
            decoder.feed(bytes);
            assert_eq!(decoder.next_reply(), Err(expected), "{:?}", bytes);
        }
        // Exactly at the limits is fine.
        let mut decoder = Decoder::with_limits(limits);
        decoder.feed(b"*2\r\n*1\r\n$4\r\nabcd\r\n+1234567\r\n");
        assert!(decoder.next_reply().unwrap().is_some());
    }

    #[test]
    fn incomplete_waits() {
        for partial in [
            &b""[..],
            b"$",
            b"$3",
            b"$3\r",
            b"$3\r\nab",
            b"$3\r\nabc\r",
            b"*2\r\n:1\r\n",
            b"|1\r\n+a\r\n:1\r\n",
        ] {
            let mut decoder = Decoder::new();
            decoder.feed(partial);
            assert_eq!(decoder.next_reply(), Ok(None), "{:?}", partial);
        }
    }
}
