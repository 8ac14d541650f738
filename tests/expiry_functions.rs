//! User expiry functions (client-go's `HasExpiredFunc`) that panic, call
//! back into their own manager, or use another one.

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

#[test]
fn a_panicking_expiry_reaches_the_caller_and_the_map_stays_usable() {
    let clock = MockClock::new();
    let b = Arc::new(
        Backoff::<String>::builder(SEC, 60 * SEC)
            .clock(clock.clone())
            .expiry(|event: MockInstant, _last, _max| {
                assert!(event.as_nanos() >= 0, "refusing an event before the start");
                false
            })
            .build()
            .expect("valid"),
    );
    b.next("k", clock.now());
    let before = clock.now() - SEC;
    for op in 0..4 {
        let result = catch_unwind(AssertUnwindSafe(|| match op {
            0 => {
                b.next("k", before);
            }
            1 => {
                b.is_in_backoff_since("k", before);
            }
            2 => {
                b.is_in_backoff_since_update("k", before);
            }
            _ => {
                clock.set(before);
                b.gc();
            }
        }));
        assert!(result.is_err(), "op {op} should have panicked");
    }
    clock.set(MockInstant::ZERO + SEC);
    // No lock is left held: another thread can still write and read.
    let b2 = Arc::clone(&b);
    let t = clock.now();
    thread::spawn(move || b2.next("k", t))
        .join()
        .expect("no deadlock");
    assert_eq!(b.get("k"), 2 * SEC);
    assert_eq!(b.gc(), 0);
}

mod closures {
    use super::SEC;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, OnceLock, mpsc};
    use std::time::{Duration, Instant};

    use keyed_backoff::Backoff;
    use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};

    type Shared = Arc<OnceLock<Arc<Backoff<String, MockClock>>>>;

    /// Runs `f` on a thread and waits for it with a real-time deadline, so a
    /// deadlock fails the test instead of hanging the suite.
    fn within_deadline<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("finished: no deadlock")
    }

    fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
        keyed_backoff_testkit::panic_message(p.as_ref())
    }

    #[test]
    fn an_expiry_that_calls_its_own_manager_panics_instead_of_deadlocking() {
        let outcome = within_deadline(|| {
            let clock = MockClock::new();
            let me: Shared = Arc::default();
            let inner = Arc::clone(&me);
            let b = Arc::new(
                Backoff::<String>::builder(SEC, 60 * SEC)
                    .clock(clock.clone())
                    .expiry(move |_: MockInstant, _: MockInstant, _| {
                        if let Some(b) = inner.get() {
                            let _ = b.get("k"); // same key, same shard
                        }
                        false
                    })
                    .build()
                    .expect("valid"),
            );
            let _ = me.set(Arc::clone(&b));
            b.next("k", clock.now());
            let second =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.next("k", clock.now())));
            let gc = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.gc()));
            // The manager is still usable from outside the function.
            (second.map_err(panic_text), gc.map_err(panic_text), b.len())
        });
        let (second, gc, len) = outcome;
        let message = second.expect_err("re-entry refused");
        assert!(message.contains("expiry function called back"), "{message}");
        assert!(gc.is_err());
        assert_eq!(len, 1);
    }

    #[test]
    fn a_panicking_expiry_in_amortised_gc_does_not_fail_an_unrelated_next() {
        let clock = MockClock::new();
        let panicked = AtomicBool::new(false);
        let b = Backoff::<String>::builder(SEC, 60 * SEC)
            .clock(clock.clone())
            .amortized_gc(2)
            .expiry(move |event: MockInstant, _: MockInstant, _| {
                // Panics once, on the first judgement after the jump.
                let late = event.as_nanos() >= 1_000_000_000_000;
                assert!(!late || panicked.swap(true, Ordering::SeqCst), "boom");
                false
            })
            .build()
            .expect("valid");
        b.next("old", clock.now());
        clock.advance(2_000 * SEC);
        // The 2nd write sweeps; the sweep judges "old" and the function
        // panics. "fresh" has no entry, so its own update never calls it.
        let fresh = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            b.next("fresh", clock.now())
        }));
        assert_eq!(
            fresh.ok(),
            Some(SEC),
            "the caller's update took effect and it sees Ok"
        );
        let stats = b.stats();
        assert_eq!((stats.gc_panics, stats.entries), (1, 2));
    }

    #[test]
    fn a_panicking_expiry_does_not_end_the_gc_thread() {
        let clock = MockClock::new();
        let panicking = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&panicking);
        let b = Arc::new(
            Backoff::<String>::builder(SEC, 5 * SEC)
                .clock(clock.clone())
                .expiry(move |event: MockInstant, last: MockInstant, _| {
                    // Only the GC thread's sweeps panic, while the flag is up.
                    let on_gc_thread = std::thread::current().name() == Some("keyed-backoff-gc");
                    assert!(!(on_gc_thread && flag.load(Ordering::SeqCst)), "boom");
                    event.saturating_duration_since(last) > 10 * SEC
                })
                .build()
                .expect("valid"),
        );
        b.next("k", clock.now());
        clock.advance(11 * SEC);
        let _gc = b.spawn_gc(Duration::from_millis(1)).expect("spawn");
        // Real time passes for the thread: poll with a deadline.
        let deadline = Instant::now() + Duration::from_secs(30);
        while b.stats().gc_panics < 2 {
            assert!(Instant::now() < deadline, "the thread never ran");
            std::thread::yield_now();
        }
        panicking.store(false, Ordering::SeqCst);
        while !b.is_empty() {
            assert!(Instant::now() < deadline, "the thread died with the panic");
            std::thread::yield_now();
        }
    }
}

/// client-go's default rule as a user expiry function.
fn twice_max(event: MockInstant, last: MockInstant, max: Duration) -> bool {
    event > last && event.saturating_duration_since(last) > 2 * max
}

#[test]
fn an_expiry_function_may_use_another_manager() {
    let clock = MockClock::new();
    // Both managers have expiry functions: each refuses calls from its own.
    let other = Arc::new(
        Backoff::<String>::builder(SEC, 60 * SEC)
            .clock(clock.clone())
            .expiry(twice_max)
            .build()
            .unwrap(),
    );
    other.next("elsewhere", clock.now());
    let seen = Arc::clone(&other);
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .clock(clock.clone())
        .expiry(move |event, last, max| {
            // Only calls into this manager itself are refused.
            assert_eq!(seen.len(), 1);
            twice_max(event, last, max)
        })
        .build()
        .unwrap();
    b.next("k", clock.now());
    assert_eq!(b.next("k", clock.now()), 2 * SEC);
    assert_eq!(b.gc(), 0);
}
