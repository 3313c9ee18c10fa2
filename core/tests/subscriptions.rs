//! Notice subscriptions: when a client's subscriber connections open, subscribe,
//! unsubscribe, close and open again, as scenarios on a virtual clock.

use std::time::Duration;

use proptest::prelude::*;
use redlock_core::{
    ConfigError, SubscriberOutput, Subscriptions, Time, UsageError, NOTICE_CHANNEL_LINGER_MS,
    SUBSCRIBER_REOPEN_FIRST_MS, SUBSCRIBER_REOPEN_MAX_MS,
};

use SubscriberOutput::{Close, Open, Subscribe, Unsubscribe};

fn at_ms(ms: u64) -> Time {
    Time::from_micros(ms * 1000)
}

const TIMEOUT: Duration = Duration::from_millis(150);
const CH: &[u8] = b"redlock:notice:a";
const CH2: &[u8] = b"redlock:notice:b";

fn outputs(s: &mut Subscriptions) -> Vec<SubscriberOutput> {
    std::iter::from_fn(|| s.poll_output()).collect()
}

fn sub(node: usize, channel: &[u8]) -> SubscriberOutput {
    Subscribe {
        node,
        channel: channel.to_vec(),
    }
}

fn unsub(node: usize, channel: &[u8]) -> SubscriberOutput {
    Unsubscribe {
        node,
        channel: channel.to_vec(),
    }
}

/// Three nodes, `CH` wanted at 0 and confirmed everywhere at 1 ms.
fn subscribed() -> Subscriptions {
    let mut s = Subscriptions::new(3, TIMEOUT).unwrap();
    s.want(CH, at_ms(0));
    outputs(&mut s);
    for node in 0..3 {
        s.handle_opened(node, at_ms(1)).unwrap();
        assert!(s.handle_confirmed(node, CH, at_ms(1)).unwrap());
    }
    outputs(&mut s);
    s
}

#[test]
fn a_first_listener_opens_every_node_and_subscribes_once_open() {
    let mut s = Subscriptions::new(3, TIMEOUT).unwrap();
    assert_eq!(s.poll_timeout(), None);
    s.want(CH, at_ms(0));
    assert_eq!(
        outputs(&mut s),
        [Open { node: 0 }, Open { node: 1 }, Open { node: 2 }]
    );
    // A second listener, and a second channel, while opening: nothing more to open.
    s.want(CH, at_ms(1));
    s.want(CH2, at_ms(1));
    assert_eq!(outputs(&mut s), []);
    s.handle_opened(1, at_ms(2)).unwrap();
    assert_eq!(outputs(&mut s), [sub(1, CH), sub(1, CH2)]);
    assert!(s.handle_confirmed(1, CH, at_ms(3)).unwrap());
    assert!(s.is_subscribed(1, CH));
    // A confirmation counts once; one for a node still opening or a channel never
    // asked for changes nothing.
    assert!(!s.handle_confirmed(1, CH, at_ms(3)).unwrap());
    assert!(!s.handle_confirmed(0, CH, at_ms(3)).unwrap());
    assert!(!s.handle_confirmed(1, b"other", at_ms(3)).unwrap());
    assert!(!s.is_subscribed(0, CH));
}

#[test]
fn a_channel_lingers_after_its_last_listener_then_the_idle_connection_closes() {
    let mut s = subscribed();
    s.want(CH, at_ms(10));
    assert!(s.unwant(CH, at_ms(20)));
    assert!(s.unwant(CH, at_ms(30)));
    // Nobody listens from 30 ms: still subscribed until the linger ends.
    let end = 30 + NOTICE_CHANNEL_LINGER_MS;
    assert_eq!(s.poll_timeout(), Some(at_ms(end)));
    s.handle_timeout(at_ms(end - 1));
    assert_eq!(outputs(&mut s), []);
    assert!(s.is_subscribed(0, CH));
    s.handle_timeout(at_ms(end));
    let mut expected: Vec<SubscriberOutput> = (0..3).map(|n| unsub(n, CH)).collect();
    expected.extend((0..3).map(|node| Close { node }));
    assert_eq!(outputs(&mut s), expected);
    assert_eq!(s.channels(), 0);
    assert!(!s.is_open(0));
    assert_eq!(s.poll_timeout(), None);
    // The next listener opens at once: a closed idle connection has no pause.
    s.want(CH, at_ms(end + 1));
    assert_eq!(outputs(&mut s).len(), 3);
}

#[test]
fn a_listener_back_during_the_linger_finds_the_channel_still_subscribed() {
    let mut s = subscribed();
    assert!(s.unwant(CH, at_ms(10)));
    s.want(CH, at_ms(20));
    assert_eq!(outputs(&mut s), [], "no second SUBSCRIBE");
    s.handle_timeout(at_ms(20 + NOTICE_CHANNEL_LINGER_MS));
    assert_eq!(outputs(&mut s), [], "it no longer lingers");
    assert!(s.is_subscribed(2, CH));
    assert!(!s.unwant(b"never wanted", at_ms(30)));
}

#[test]
fn a_lost_connection_opens_again_after_the_core_pause_doubling_until_confirmed() {
    let mut s = subscribed();
    let first = SUBSCRIBER_REOPEN_FIRST_MS;
    s.handle_lost(0, at_ms(10)).unwrap();
    assert_eq!(outputs(&mut s), []);
    assert_eq!(s.poll_timeout(), Some(at_ms(10 + first)));
    // A report of the same loss again changes nothing.
    s.handle_lost(0, at_ms(11)).unwrap();
    assert_eq!(s.poll_timeout(), Some(at_ms(10 + first)));
    // A listener arriving during the pause does not cut it short.
    s.want(CH2, at_ms(20));
    assert_eq!(outputs(&mut s), [sub(1, CH2), sub(2, CH2)]);
    for node in 1..3 {
        assert!(s.handle_confirmed(node, CH2, at_ms(21)).unwrap());
    }
    s.handle_timeout(at_ms(10 + first - 1));
    assert_eq!(outputs(&mut s), []);
    s.handle_timeout(at_ms(10 + first));
    assert_eq!(outputs(&mut s), [Open { node: 0 }]);
    // It fails to open: the pause doubles, and doubles again, up to the most.
    let mut now = 10 + first;
    let mut pause = first;
    for _ in 0..12 {
        s.handle_lost(0, at_ms(now)).unwrap();
        pause = (pause * 2).min(SUBSCRIBER_REOPEN_MAX_MS);
        assert_eq!(s.poll_timeout(), Some(at_ms(now + pause)));
        now += pause;
        s.handle_timeout(at_ms(now));
        assert_eq!(outputs(&mut s), [Open { node: 0 }]);
    }
    assert_eq!(pause, SUBSCRIBER_REOPEN_MAX_MS);
    // Open: every wanted channel is subscribed again. Opening alone does not reset the
    // pause; a confirmation does.
    s.handle_opened(0, at_ms(now)).unwrap();
    assert_eq!(outputs(&mut s), [sub(0, CH), sub(0, CH2)]);
    s.handle_lost(0, at_ms(now)).unwrap();
    assert_eq!(
        s.poll_timeout(),
        Some(at_ms(now + SUBSCRIBER_REOPEN_MAX_MS)),
        "no confirmation yet"
    );
    now += SUBSCRIBER_REOPEN_MAX_MS;
    s.handle_timeout(at_ms(now));
    outputs(&mut s);
    s.handle_opened(0, at_ms(now)).unwrap();
    outputs(&mut s);
    assert!(s.handle_confirmed(0, CH, at_ms(now)).unwrap());
    s.handle_lost(0, at_ms(now)).unwrap();
    assert_eq!(s.poll_timeout(), Some(at_ms(now + first)));
}

#[test]
fn a_loss_with_nobody_listening_leaves_it_closed_and_drops_lingering_channels() {
    let mut s = subscribed();
    assert!(s.unwant(CH, at_ms(10)));
    s.handle_lost(0, at_ms(20)).unwrap();
    // Node 0 needs nothing; nodes 1 and 2 still linger on CH.
    assert_eq!(outputs(&mut s), []);
    assert_eq!(s.poll_timeout(), Some(at_ms(10 + NOTICE_CHANNEL_LINGER_MS)));
    s.handle_timeout(at_ms(10 + NOTICE_CHANNEL_LINGER_MS));
    assert_eq!(
        outputs(&mut s),
        [
            unsub(1, CH),
            unsub(2, CH),
            Close { node: 1 },
            Close { node: 2 }
        ]
    );
    // All three lost: the lingering channel goes with them.
    let mut s = subscribed();
    assert!(s.unwant(CH, at_ms(10)));
    for node in 0..3 {
        s.handle_lost(node, at_ms(20)).unwrap();
    }
    assert_eq!(s.channels(), 0);
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn a_refused_subscribe_closes_the_connection_and_counts_as_lost() {
    let mut s = subscribed();
    s.want(CH2, at_ms(10));
    outputs(&mut s);
    s.handle_refused(1, at_ms(11)).unwrap();
    assert_eq!(outputs(&mut s), [Close { node: 1 }]);
    assert!(!s.is_open(1));
    assert_eq!(
        s.poll_timeout(),
        Some(at_ms(11 + SUBSCRIBER_REOPEN_FIRST_MS))
    );
    // Refused again on a closed connection: nothing more.
    s.handle_refused(1, at_ms(12)).unwrap();
    assert_eq!(outputs(&mut s), []);
}

#[test]
fn a_connection_that_does_not_open_or_confirm_in_time_counts_as_lost() {
    let mut s = Subscriptions::new(2, TIMEOUT).unwrap();
    s.want(CH, at_ms(0));
    outputs(&mut s);
    s.handle_opened(1, at_ms(5)).unwrap();
    assert_eq!(outputs(&mut s), [sub(1, CH)]);
    assert_eq!(s.poll_timeout(), Some(at_ms(150)));
    s.handle_timeout(at_ms(149));
    assert_eq!(outputs(&mut s), []);
    s.handle_timeout(at_ms(150));
    assert_eq!(outputs(&mut s), [Close { node: 0 }]);
    s.handle_timeout(at_ms(155));
    assert_eq!(outputs(&mut s), [Close { node: 1 }]);
    // The node opening late, after it was given up: that connection is closed.
    s.handle_opened(0, at_ms(160)).unwrap();
    assert_eq!(outputs(&mut s), [Close { node: 0 }]);
    // A confirmation on the given-up connection does not count.
    assert!(!s.handle_confirmed(1, CH, at_ms(160)).unwrap());
    s.handle_timeout(at_ms(150 + SUBSCRIBER_REOPEN_FIRST_MS));
    assert_eq!(outputs(&mut s), [Open { node: 0 }]);
    s.handle_timeout(at_ms(155 + SUBSCRIBER_REOPEN_FIRST_MS));
    assert_eq!(outputs(&mut s), [Open { node: 1 }]);
}

#[test]
fn bad_inputs_are_refused_without_changing_anything() {
    assert_eq!(
        Subscriptions::new(0, TIMEOUT).unwrap_err(),
        ConfigError::NoNodes
    );
    assert_eq!(
        Subscriptions::new(redlock_core::MAX_NODES + 1, TIMEOUT).unwrap_err(),
        ConfigError::TooManyNodes
    );
    let mut s = subscribed();
    assert_eq!(s.handle_opened(3, at_ms(5)), Err(UsageError::UnknownNode));
    assert_eq!(s.handle_lost(3, at_ms(5)), Err(UsageError::UnknownNode));
    assert_eq!(s.handle_refused(9, at_ms(5)), Err(UsageError::UnknownNode));
    assert_eq!(
        s.handle_confirmed(usize::MAX, CH, at_ms(5)),
        Err(UsageError::UnknownNode)
    );
    assert_eq!(outputs(&mut s), []);
    assert!(!s.is_open(3));
    // An opened report for a connection already open changes nothing.
    s.handle_opened(0, at_ms(5)).unwrap();
    assert_eq!(outputs(&mut s), []);
    // A zero timeout is taken as 1 ms, and time at the end of the clock saturates.
    let mut s = Subscriptions::new(1, Duration::ZERO).unwrap();
    s.want(CH, Time::from_micros(u64::MAX - 10));
    outputs(&mut s);
    assert_eq!(s.poll_timeout(), Some(Time::from_micros(u64::MAX)));
}

#[derive(Clone, Debug)]
enum Input {
    Want(u8),
    Unwant(u8),
    Opened(u8),
    Lost(u8),
    Refused(u8),
    Confirmed(u8, u8),
    Timeout,
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        (0u8..3).prop_map(Input::Want),
        (0u8..3).prop_map(Input::Unwant),
        (0u8..4).prop_map(Input::Opened),
        (0u8..4).prop_map(Input::Lost),
        (0u8..4).prop_map(Input::Refused),
        ((0u8..4), (0u8..3)).prop_map(|(n, c)| Input::Confirmed(n, c)),
        Just(Input::Timeout),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// Whatever a driver reports, in any order: nothing panics, outputs name real
    /// nodes, a subscription is only asked for on a connection the core holds open, and
    /// a pause never exceeds the most.
    #[test]
    fn any_sequence_of_inputs_keeps_the_outputs_consistent(
        steps in proptest::collection::vec((input(), 0u64..400), 1..80)
    ) {
        let channels: [&[u8]; 3] = [b"c0", b"c1", b"c2"];
        let mut s = Subscriptions::new(3, TIMEOUT).unwrap();
        let mut now = 0u64;
        for (step, advance_ms) in steps {
            now += advance_ms;
            let t = at_ms(now);
            match step {
                Input::Want(c) => s.want(channels[usize::from(c)], t),
                Input::Unwant(c) => { s.unwant(channels[usize::from(c)], t); }
                Input::Opened(n) => { let _ = s.handle_opened(usize::from(n), t); }
                Input::Lost(n) => { let _ = s.handle_lost(usize::from(n), t); }
                Input::Refused(n) => { let _ = s.handle_refused(usize::from(n), t); }
                Input::Confirmed(n, c) => {
                    let counted = s.handle_confirmed(usize::from(n), channels[usize::from(c)], t);
                    if let Ok(true) = counted {
                        prop_assert!(s.is_subscribed(usize::from(n), channels[usize::from(c)]));
                    }
                }
                Input::Timeout => s.handle_timeout(t),
            }
            while let Some(output) = s.poll_output() {
                match output {
                    Open { node } | Close { node } => prop_assert!(node < 3),
                    Subscribe { node, .. } => prop_assert!(s.is_open(node)),
                    Unsubscribe { node, .. } => prop_assert!(node < 3),
                }
            }
            if let Some(due) = s.poll_timeout() {
                let pause_bound = SUBSCRIBER_REOPEN_MAX_MS
                    .max(NOTICE_CHANNEL_LINGER_MS)
                    .max(150);
                prop_assert!(due.as_micros() <= (now + pause_bound) * 1000);
            }
        }
    }
}
