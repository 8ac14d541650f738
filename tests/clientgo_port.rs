//! client-go's own unit tests of `util/flowcontrol` `Backoff`, restated:
//! the same names in snake case, the same behaviour asserted.

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};
use keyed_backoff_testkit as testkit;
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

/// `initial·2^i` capped at `max`, the curve without jitter.
fn doubling(initial: Duration, max: Duration, i: u32) -> Duration {
    initial.saturating_mul(1 << i.min(30)).min(max)
}

#[test]
fn test_slow_backoff() {
    // Steps slower than the backoff itself still double it, because every
    // `next` lands well inside the 2·max expiry window.
    let (initial, max) = (SEC, 50 * SEC);
    for step in [SEC, 2 * SEC, 5 * SEC] {
        let clock = MockClock::new();
        let b = testkit::manager(initial, max, &clock);
        assert_eq!(b.get("_idSlow"), Duration::ZERO);
        for i in 0..10 {
            b.next("_idSlow", clock.now());
            clock.advance(step);
            assert_eq!(
                b.get("_idSlow"),
                doubling(initial, max, i),
                "step {step:?}, call {i}"
            );
        }
        b.reset("_idSlow");
        assert_eq!(b.get("_idSlow"), Duration::ZERO);
    }
}

#[test]
fn test_backoff_reset() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 5 * SEC, &clock);
    let mut last_event = clock.now();
    for _ in 0..6 {
        clock.advance(SEC);
        last_event = clock.now();
        b.next("_idReset", last_event);
    }
    assert_eq!(b.get("_idReset"), 5 * SEC);
    assert!(b.is_in_backoff_since("_idReset", last_event));
    // Longer than the backoff: no longer in backoff. The stale value stays
    // visible through `get` until something touches the entry.
    clock.advance(11 * SEC);
    assert!(!b.is_in_backoff_since("_idReset", last_event));
    assert_eq!(b.get("_idReset"), 5 * SEC);
}

#[test]
fn test_backoff_high_water_mark() {
    // A gap shorter than 2·max keeps the backoff at its high-water mark.
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 5 * SEC, &clock);
    for _ in 0..6 {
        clock.advance(SEC);
        b.next("_idHiWaterMark", clock.now());
    }
    clock.advance(6 * SEC);
    b.next("_idHiWaterMark", clock.now());
    assert_eq!(b.get("_idHiWaterMark"), 5 * SEC);
}

#[test]
fn test_backoff_gc() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 5 * SEC, &clock);
    for _ in 0..6 {
        clock.advance(SEC);
        b.next("_idGC", clock.now());
    }
    // 6 s after the last update is within 2·max = 10 s: kept.
    clock.advance(6 * SEC);
    assert_eq!(b.gc(), 0);
    assert_eq!(b.len(), 1);
    // 12 s is past it: collected.
    clock.advance(6 * SEC);
    assert_eq!(b.gc(), 1);
    assert_eq!(b.len(), 0);
}

#[test]
fn test_is_in_back_off_since_update() {
    // Each second, a caller asks whether it is still in backoff since the
    // last update and, if not, fails again (`next`). The table gives, per
    // second, the expected answer and the backoff afterwards.
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 10 * SEC, &clock);
    let id = "_idIsInBackOffSinceUpdate";
    let mut expected: Vec<(u64, bool, u64)> =
        vec![(0, false, 1), (1, false, 2), (2, true, 2), (3, false, 4)];
    expected.extend((4..=6).map(|t| (t, true, 4)));
    expected.push((7, false, 8));
    expected.extend((8..=14).map(|t| (t, true, 8)));
    expected.push((15, false, 10));
    expected.extend((16..=24).map(|t| (t, true, 10)));
    expected.push((25, false, 10));
    expected.extend((26..=34).map(|t| (t, true, 10)));
    expected.push((35, false, 10));
    // 21 s idle is more than 2·max: the entry expired, so it starts over.
    expected.push((56, false, 1));
    expected.push((57, false, 2));

    let start = clock.now();
    for (t, in_backoff, backoff_after) in expected {
        clock.set(start + Duration::from_secs(t));
        let now = clock.now();
        assert_eq!(
            b.is_in_backoff_since_update(id, now),
            in_backoff,
            "at {t} s"
        );
        if !in_backoff {
            b.next(id, now);
        }
        assert_eq!(b.get(id), Duration::from_secs(backoff_after), "at {t} s");
    }
}

#[test]
fn test_backoff_with_jitter() {
    // With a jitter factor f, each value is the doubled previous value plus
    // up to f·previous, capped at max; the first is initial plus up to
    // f·initial.
    let clock = MockClock::new();
    let (initial, max, factor) = (SEC, 5 * Duration::from_secs(60), 0.1);
    let b = Backoff::<String>::builder(initial, max)
        .clock(clock.clone())
        .jitter(factor)
        .seed(2015)
        .build()
        .expect("valid");
    let mut previous = b.next("_idJitter", clock.now());
    assert!(
        previous >= initial && previous < initial.mul_f64(1.0 + factor),
        "{previous:?}"
    );
    let mut saw_jitter = previous != initial;
    for _ in 0..20 {
        clock.advance(SEC);
        let got = b.next("_idJitter", clock.now());
        let low = (previous * 2).min(max);
        let high = (previous * 2 + previous.mul_f64(factor)).min(max);
        assert!(
            got >= low && got <= high,
            "{got:?} outside [{low:?}, {high:?}]"
        );
        saw_jitter |= got != low;
        previous = got;
    }
    assert_eq!(previous, max);
    assert!(saw_jitter, "a non-zero jitter factor must move some values");
}

#[test]
fn test_alternate_backoff_gc() {
    // Default expiry: 2·max = 100 s.
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 50 * SEC, &clock);
    b.next("default GC", clock.now());
    clock.advance(5 * SEC);
    assert_eq!(b.gc(), 0);
    clock.advance(101 * SEC);
    assert_eq!(b.gc(), 1);

    // A custom expiry keeps entries for 200 s, longer than 2·max.
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(SEC, 50 * SEC)
        .clock(clock.clone())
        .expiry(|event: MockInstant, last: MockInstant, _| {
            event.saturating_duration_since(last) >= 200 * SEC
        })
        .build()
        .expect("valid");
    b.next("GC later than 2*maxDuration", clock.now());
    clock.advance(101 * SEC);
    assert_eq!(b.gc(), 0);
    assert_eq!(b.len(), 1);
    clock.advance(501 * SEC);
    assert_eq!(b.gc(), 1);
    assert!(b.is_empty());
}

#[test]
fn test_alternate_has_expired_func() {
    // Default expiry: a 101 s gap exceeds 2·max = 100 s and starts over.
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 50 * SEC, &clock);
    b.next("default expiration", clock.now());
    clock.advance(5 * SEC);
    b.next("default expiration", clock.now());
    assert_eq!(b.get("default expiration"), 2 * SEC);
    clock.advance(101 * SEC);
    b.next("default expiration", clock.now());
    assert_eq!(b.get("default expiration"), SEC);

    // A custom expiry of 8 s, shorter than max: a 9 s gap starts over.
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(SEC, 50 * SEC)
        .clock(clock.clone())
        .expiry(|event: MockInstant, last: MockInstant, _| {
            event.saturating_duration_since(last) >= 8 * SEC
        })
        .build()
        .expect("valid");
    b.next("expires faster than maxDuration", clock.now());
    clock.advance(5 * SEC);
    b.next("expires faster than maxDuration", clock.now());
    assert_eq!(b.get("expires faster than maxDuration"), 2 * SEC);
    clock.advance(9 * SEC);
    b.next("expires faster than maxDuration", clock.now());
    assert_eq!(b.get("expires faster than maxDuration"), SEC);
}
