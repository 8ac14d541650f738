//! Concurrency under contention: more threads than cores, shared keys, the
//! mock clock moving underneath. Run repeatedly with
//! `for i in $(seq 20); do cargo test --release --test stress || break; done`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, ClockInstant, MockClock};

const INITIAL: Duration = Duration::from_millis(10);
const MAX: Duration = Duration::from_millis(320);

fn manager(clock: &MockClock) -> Arc<Backoff<String, MockClock>> {
    let few_shards = keyed_backoff_testkit::builder(INITIAL, MAX, clock).shards(4);
    Arc::new(few_shards.build().expect("valid"))
}

/// Every value client-go's strategy can produce for this config.
fn legal(d: Duration) -> bool {
    (0..=5).any(|k| d == INITIAL * (1 << k)) || d == MAX
}

/// While one thread runs `gc` with every entry stale, another refreshes the
/// same entries with `next`. Each key is judged and removed under its
/// shard's lock, so for every key either the removal or the refresh comes
/// second: a refreshed entry must never be removed afterwards.
///
/// Both ways of sweeping are raced: 2,000 keys on 4 shards are swept in
/// place under each shard's write lock; 6,000 (1,500 a shard, above the
/// in-place limit) are judged under read locks and removed key by key.
#[test]
fn gc_never_removes_an_entry_that_next_just_refreshed() {
    for round in 0..50 {
        let clock = MockClock::new();
        let b = manager(&clock);
        let count = if round % 2 == 0 { 2_000 } else { 6_000 };
        let keys: Vec<String> = (0..count).map(|i| format!("obj-{i}")).collect();
        for k in &keys {
            b.next(k.as_str(), clock.now());
        }
        clock.advance(MAX * 3); // all stale
        let start = Arc::new(Barrier::new(2));
        let refresher = {
            let (b, clock, keys, start) = (
                Arc::clone(&b),
                clock.clone(),
                keys.clone(),
                Arc::clone(&start),
            );
            thread::spawn(move || {
                start.wait();
                for k in &keys {
                    assert_eq!(b.next(k.as_str(), clock.now()), INITIAL);
                }
            })
        };
        start.wait();
        let removed = b.gc();
        refresher.join().expect("refresher");
        // Whatever gc removed, every key was refreshed: present and fresh.
        for k in &keys {
            assert_eq!(
                b.get(k.as_str()),
                INITIAL,
                "round {round}, {k} lost (gc removed {removed})"
            );
        }
        assert_eq!(b.len(), keys.len());
    }
}

/// Six threads on two cores mix every operation over 16 shared keys while a
/// seventh moves the clock and collects garbage.
#[test]
fn mixed_operations_under_contention_keep_every_invariant() {
    const WORKERS: usize = 6;
    let clock = MockClock::new();
    let b = manager(&clock);
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (b, clock, stop) = (Arc::clone(&b), clock.clone(), Arc::clone(&stop));
        thread::spawn(move || {
            let mut collected = 0;
            while !stop.load(Ordering::Relaxed) {
                clock.advance(Duration::from_millis(7));
                collected += b.gc();
                thread::yield_now();
            }
            collected
        })
    };
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (b, clock) = (Arc::clone(&b), clock.clone());
            thread::spawn(move || {
                let mut x = 0x9e37_79b9u32.wrapping_mul(w as u32 + 1);
                for i in 0..40_000u32 {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    let key = format!("k{}", x % 16);
                    let now = clock.now();
                    match i % 8 {
                        0 | 1 => assert!(legal(b.next(key.as_str(), now))),
                        2 => {
                            let d = b.get(key.as_str());
                            assert!(d.is_zero() || legal(d), "{d:?}");
                        }
                        3 => {
                            b.is_in_backoff_since(key.as_str(), now);
                        }
                        4 => {
                            b.is_in_backoff_since_update(key.as_str(), now);
                        }
                        5 => {
                            if let Err(e) = b.try_next(key.as_str(), now) {
                                // Measured at `now`; another thread may have
                                // updated the key at a later clock reading.
                                let drift = clock.now().saturating_duration_since(now);
                                assert!(
                                    e.remaining <= MAX + drift,
                                    "{:?} > {MAX:?} + {drift:?}",
                                    e.remaining
                                );
                            }
                        }
                        6 => {
                            b.reset(key.as_str());
                        }
                        _ => assert!(
                            b.attempts(key.as_str()) <= keyed_backoff::Settings::MAX_ATTEMPTS
                        ),
                    }
                    assert!(b.len() <= 16);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    stop.store(true, Ordering::Relaxed);
    ticker.join().expect("ticker");
    // Quiescent: everything left is consistent and collectable.
    clock.advance(MAX * 3);
    b.gc();
    assert!(b.is_empty());
}
