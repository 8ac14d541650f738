//! A controller's reconcile loop over a work queue, with per-object
//! increasing backoff on failure, reset on success, and requeue at the
//! remaining wait: the error policy kube-rs users ask for. No cluster needed:
//! objects, failures and watch events are simulated on a mock clock.
//!
//! The atomic gate (`try_next`) is what makes it safe: watch events requeue
//! objects immediately (as informers do), and with client-go's separate
//! check-then-`Next` those early requeues inflate the failure count straight
//! to the cap (the effect kubernetes issue 132805 reports for client-go's
//! workqueue rate limiter). Here an early requeue is refused
//! with the remaining wait, and the count grows once per window.
//!
//! Run: `cargo run --example controller`

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};
use keyed_backoff::{Backoff, InBackoff};

/// How an object behaves when reconciled.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Always reconciles.
    Fine,
    /// Fails this many times, then reconciles.
    FailsFirst(u32),
    /// Never reconciles (a broken spec).
    Broken,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clock = MockClock::new();
    // controller-runtime's defaults: 5 ms doubling to 1000 s.
    let backoff = Backoff::<String>::builder(Duration::from_millis(5), Duration::from_secs(1000))
        .clock(clock.clone())
        .build()?;
    // No object is deleted in this part, so nothing needs collecting (the
    // dump below says "gc: 0 runs"); the key churn at the end runs a GC
    // thread.
    let start = clock.now();
    let t = |at: MockInstant| {
        format!(
            "{:>9.3}s",
            at.saturating_duration_since(start).as_secs_f64()
        )
    };

    let objects = [
        ("default/web", Behaviour::Fine),
        ("default/api", Behaviour::FailsFirst(4)),
        ("default/broken-cron", Behaviour::Broken),
        ("payments/ledger", Behaviour::FailsFirst(7)),
        ("monitoring/prometheus", Behaviour::FailsFirst(13)),
        ("default/ingress", Behaviour::Broken),
        ("batch/report", Behaviour::FailsFirst(11)),
    ];
    let mut failures = vec![0u32; objects.len()];
    // (ready at, sequence, object index) in a min-heap: the work queue.
    let mut queue: BinaryHeap<Reverse<(MockInstant, u64, usize)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |queue: &mut BinaryHeap<_>, at: MockInstant, i: usize| {
        seq += 1;
        queue.push(Reverse((at, seq, i)));
    };
    for i in 0..objects.len() {
        push(&mut queue, start, i);
    }
    // Watch events: every 700 ms something changes and every object is
    // enqueued at once, as an informer resync would.
    let mut next_event = start + Duration::from_millis(700);
    let until = start + Duration::from_secs(60);
    let (mut refused_early, mut advanced) = (0u32, 0u32);

    println!("reconcile log (failures back off 5 ms, 10 ms, 20 ms …; success resets):\n");
    while let Some(Reverse((at, _, i))) = queue.pop() {
        if at > until {
            break;
        }
        while next_event <= at {
            for j in 0..objects.len() {
                push(&mut queue, next_event, j);
            }
            next_event = next_event + Duration::from_millis(700);
        }
        if at > clock.now() {
            clock.set(at);
        }
        let now = clock.now();
        let (key, behaviour) = objects[i];
        let ok = match behaviour {
            Behaviour::Fine => true,
            Behaviour::FailsFirst(n) => failures[i] >= n,
            Behaviour::Broken => false,
        };
        if ok {
            // Success: forget the object's failures.
            if backoff.reset(key) {
                println!(
                    "[{}] {key}: reconciled after {} failures; backoff reset",
                    t(now),
                    failures[i]
                );
            }
            continue;
        }
        // The error policy: one atomic call decides and advances.
        match backoff.try_next(key, now) {
            Ok(delay) => {
                failures[i] += 1;
                advanced += 1;
                if failures[i] <= 3 || failures[i].is_multiple_of(4) {
                    println!(
                        "[{}] {key}: failed (attempt {}), requeue in {delay:?}",
                        t(now),
                        backoff.attempts(key)
                    );
                }
                push(&mut queue, now + delay, i);
            }
            Err(InBackoff { remaining }) => {
                // An early requeue (a watch event): do not count a failure,
                // just come back when the window ends.
                refused_early += 1;
                push(&mut queue, now + remaining, i);
            }
        }
    }

    println!("\n{advanced} failures counted, {refused_early} early requeues refused by the gate");
    println!(
        "\nbackoff state at {} (what a debug endpoint would print):\n",
        t(clock.now())
    );
    println!("{}\n", backoff.dump());

    // Churn: short-lived objects (jobs) that fail once and are deleted.
    // Their entries expire after 2·max of mock time; the GC thread removes
    // them, so the map stays bounded while keys keep changing.
    let churn = Backoff::<String>::builder(Duration::from_millis(5), Duration::from_secs(10))
        .clock(clock.clone())
        .build()?;
    let churn = Arc::new(churn);
    let _churn_gc = churn.spawn_gc(Duration::from_millis(1))?;
    let mut peak = 0;
    for second in 0..600u32 {
        for j in 0..200u32 {
            let _ = churn.try_next(format!("jobs/run-{second}-{j}").as_str(), clock.now());
        }
        clock.advance(Duration::from_secs(1));
        if second % 20 == 19 {
            // Give the real-time GC thread a moment to catch up with the
            // simulated clock, as it would in a real controller.
            std::thread::sleep(Duration::from_millis(3));
        }
        peak = peak.max(churn.len());
    }
    let stats = churn.stats();
    println!(
        "key churn: 120,000 job keys over 10 simulated minutes; peak {peak} entries held, {} now; gc removed {}",
        stats.entries, stats.gc_removed
    );
    Ok(())
}
