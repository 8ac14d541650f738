//! A GC task asked for where it cannot run: outside a tokio runtime, or on
//! one without timers. Never a panic, never a panic message, and (built
//! with `panic = "abort"`, where this suite is also run) never an abort.

use std::cell::Cell;
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::{Backoff, SpawnError};

thread_local! {
    /// Panics the hook saw on this thread.
    static PANICS_HERE: Cell<u32> = const { Cell::new(0) };
}

/// Counts, per thread, every panic the process's hook is shown (and shows
/// it as before), so a test can tell whether anything would have printed.
fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS_HERE.with(|c| c.set(c.get() + 1));
            previous(info);
        }));
    });
}

/// A manager whose one entry has passed its window.
fn holding_a_stale_key() -> Arc<Backoff<String, MockClock>> {
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(5))
        .clock(clock.clone())
        .build()
        .unwrap();
    b.next("stale", clock.now());
    clock.advance(Duration::from_secs(11));
    Arc::new(b)
}

#[test]
fn outside_a_runtime_is_an_error_and_nothing_prints() {
    count_panics();
    let b = holding_a_stale_key();
    let outside = b.spawn_gc_task(Duration::from_secs(30)).unwrap_err();
    assert!(matches!(outside, SpawnError::NoRuntime), "{outside}");
    assert_eq!(PANICS_HERE.with(Cell::get), 0, "a panic reached the hook");
    assert_eq!(Arc::weak_count(&b), 0, "nothing was started");
}

/// Unwinding builds ask the runtime (quietly) and refuse; `panic = "abort"`
/// builds cannot ask, and pace the sweeps from a thread on real time.
#[test]
fn a_runtime_without_timers_is_refused_or_paced_by_a_thread_and_nothing_prints() {
    count_panics();
    let b = holding_a_stale_key();
    let no_timers = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let spawned = no_timers.block_on(async { b.spawn_gc_task(Duration::from_millis(1)) });
    assert_eq!(PANICS_HERE.with(Cell::get), 0, "a panic reached the hook");
    if cfg!(panic = "unwind") {
        let err = spawned.unwrap_err();
        assert!(matches!(err, SpawnError::NoTimers), "{err}");
        assert!(err.to_string().contains("enable_time"), "{err}");
        assert_eq!(Arc::weak_count(&b), 0, "nothing was started");
    } else {
        let guard = spawned.expect("paced by a thread");
        // A real thread on real time: wait for it with a deadline (it
        // takes milliseconds, on a busy machine too).
        let deadline = Instant::now() + Duration::from_secs(10);
        while !b.is_empty() {
            assert!(Instant::now() < deadline, "the thread never swept");
            std::thread::yield_now();
        }
        drop(guard);
        assert_eq!(Arc::weak_count(&b), 0, "the guard stopped the thread");
    }
}

#[test]
fn a_runtime_with_timers_still_gets_its_task() {
    count_panics();
    let b = holding_a_stale_key();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let guard = rt
        .block_on(async { b.spawn_gc_task(Duration::from_secs(30)) })
        .expect("a runtime with timers");
    assert_eq!(PANICS_HERE.with(Cell::get), 0);
    drop(guard);
}
