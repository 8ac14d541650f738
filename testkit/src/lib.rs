//! Harnesses shared by the workspace's test suites (not published).
//!
//! - [`clientgo`]: the operation traces recorded from client-go, and the
//!   fields of their lines;
//! - [`model`]: a reference model of the keyed manager and a driver that
//!   runs one program on both (the property test and the fuzz target);
//! - [`manager`] and [`builder`]: the one way the suites make a manager on
//!   a mock clock;
//! - `redis_server` (feature `redis-server`): a redis-server of a test's
//!   own, which it may stop, pause and restart, and its replicas;
//! - `redis_cluster` (the same feature): a Redis Cluster of a test's own,
//!   whose slots it may move and whose masters it may fail over;
//! - `events` (feature `tracing`) and `metrics` (feature `metrics`): what an
//!   operator would see, recorded: every `tracing` event with its fields,
//!   every metric by name and labels;
//! - `proxy` (feature `proxy`): a TCP proxy on loopback that delays the
//!   bytes each way, so that a test sees real round trips longer than
//!   loopback's;
//! - [`panic_message`]: the text of a caught panic;
//! - [`ready`]: the output of a future that is ready at once (the
//!   in-process manager's `Gate` calls), for tests that are not async.
//!
//! ```
//! use keyed_backoff::clock::{Clock, MockClock};
//! use std::time::Duration;
//! let clock = MockClock::new();
//! let b = keyed_backoff_testkit::manager(Duration::from_secs(1), Duration::from_secs(8), &clock);
//! assert_eq!(b.next("k", clock.now()), Duration::from_secs(1));
//! ```

pub mod clientgo;
#[cfg(feature = "tracing")]
pub mod events;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod model;
#[cfg(feature = "outage")]
pub mod outage;
mod panic;
#[cfg(feature = "proxy")]
pub mod proxy;
#[cfg(feature = "redis-server")]
pub mod redis_cluster;
#[cfg(feature = "redis-server")]
pub mod redis_server;

pub use panic::panic_message;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::clock::MockClock;
use keyed_backoff::{Backoff, BackoffBuilder};

/// client-go's strategy from `initial` to `max` on `clock`, every other setting
/// at its default: the builder every suite starts from.
///
/// ```
/// use keyed_backoff::clock::MockClock;
/// use std::time::Duration;
/// let b = keyed_backoff_testkit::builder(Duration::from_secs(1), Duration::from_secs(8), &MockClock::new())
///     .shards(4)
///     .build()
///     .unwrap();
/// assert!(b.is_empty());
/// ```
pub fn builder(
    initial: Duration,
    max: Duration,
    clock: &MockClock,
) -> BackoffBuilder<String, MockClock> {
    Backoff::<String>::builder(initial, max).clock(clock.clone())
}

/// [`builder`], built.
///
/// ```
/// use keyed_backoff::clock::MockClock;
/// use std::time::Duration;
/// let b = keyed_backoff_testkit::manager(Duration::from_secs(1), Duration::from_secs(8), &MockClock::new());
/// assert!(b.is_empty());
/// ```
pub fn manager(initial: Duration, max: Duration, clock: &MockClock) -> Backoff<String, MockClock> {
    builder(initial, max, clock)
        .build()
        .expect("a valid configuration")
}

/// A shared manager of 1 s doubling to 5 s with 8 shards (small sweeps): the
/// subject of the GC and snapshot suites.
///
/// ```
/// use keyed_backoff::clock::{Clock, MockClock};
/// use std::time::Duration;
/// let clock = MockClock::new();
/// let b = keyed_backoff_testkit::shared_manager(&clock);
/// assert_eq!(b.next("k", clock.now()), Duration::from_secs(1));
/// ```
pub fn shared_manager(clock: &MockClock) -> Arc<Backoff<String, MockClock>> {
    let second = Duration::from_secs(1);
    let few_shards = builder(second, 5 * second, clock).shards(8);
    Arc::new(few_shards.build().expect("a valid configuration"))
}

/// The output of `future`, polled once: for the futures of the in-process
/// manager's [`Gate`](keyed_backoff::Gate) calls and of a wrapper over it,
/// which are ready at once. Panics if `future` is not ready.
///
/// ```
/// use keyed_backoff::Gate;
/// use keyed_backoff::clock::MockClock;
/// use keyed_backoff_testkit::ready;
/// use std::time::Duration;
/// let b = keyed_backoff_testkit::manager(Duration::from_secs(1), Duration::from_secs(8), &MockClock::new());
/// let Ok(failed) = ready(b.fail(&"k".to_string()));
/// assert_eq!(failed.map(|level| level.backoff), Ok(Duration::from_secs(1)));
/// ```
pub fn ready<F: Future>(future: F) -> F::Output {
    keyed_backoff::__private::now(future).expect("the future was not ready at its first poll")
}
