//! Arbitrary bytes in arbitrary chunks: the decoder must never panic, and how the
//! bytes are split must not change what it decodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redlock_core::resp::{Decoder, Limits};
use redlock_core::Reply;

fn decode(chunks: &[&[u8]]) -> (Vec<Reply>, Option<redlock_core::resp::ProtocolError>) {
    let limits = Limits { max_bulk: 1 << 16, max_elements: 1 << 10, max_depth: 8, max_line: 1 << 12 };
    let mut decoder = Decoder::with_limits(limits);
    let mut replies = Vec::new();
    for chunk in chunks {
        decoder.feed(chunk);
        loop {
            match decoder.next_reply() {
                Ok(Some(reply)) => replies.push(reply),
                Ok(None) => break,
                Err(error) => return (replies, Some(error)),
            }
        }
    }
    (replies, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, bytes)) = data.split_first() else { return };
    let cut = usize::from(cut).min(bytes.len());
    let whole = decode(&[bytes]);
    let split = decode(&[&bytes[..cut], &bytes[cut..]]);
    assert_eq!(whole, split, "the split point changed the result");
});
