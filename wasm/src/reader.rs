//! `Reader`: the replies of one RESP connection of a driver's own socket, for `Link` and
//! `Engine`: its decoder and the writes it awaits, in order (Redis answers in order on
//! one connection).

use std::collections::VecDeque;

use redlock_core::{resp, LinkCause, Time, WriteId};

#[derive(Default)]
pub(crate) struct Reader {
    /// The decoder of the current connection; none while there is none.
    decoder: Option<resp::Decoder>,
    written: VecDeque<WriteId>,
}

impl Reader {
    /// A connection opened: a fresh decoder, nothing awaited.
    pub(crate) fn open(&mut self) {
        self.decoder = Some(resp::Decoder::new());
        self.written.clear();
    }

    /// The connection is gone (its bytes are no longer read).
    pub(crate) fn close(&mut self) {
        self.decoder = None;
        self.written.clear();
    }

    /// Write `id` went out on the current connection.
    pub(crate) fn wrote(&mut self, id: WriteId) {
        self.written.push_back(id);
    }

    /// Bytes received on the current connection: each complete reply answers the oldest
    /// write awaiting one, through `link`. A protocol error, or a reply nobody asked
    /// for, closes the connection: the link is told (`Closed`), this reader stops
    /// reading, and true is returned (the driver closes the socket).
    pub(crate) fn feed(&mut self, link: &mut redlock_core::Link, bytes: &[u8], now: Time) -> bool {
        let Some(decoder) = self.decoder.as_mut() else {
            // Bytes of a connection already counted closed.
            return false;
        };
        decoder.feed(bytes);
        let failure = loop {
            match decoder.next_reply() {
                Ok(None) => return false,
                Ok(Some(reply)) => match self.written.pop_front() {
                    Some(id) => link.handle_reply(id, reply, now),
                    None => break String::from("a reply without a command"),
                },
                Err(e) => break format!("protocol error: {e}"),
            }
        };
        self.close();
        link.handle_closed(LinkCause::Closed, &failure, now);
        true
    }
}
