//! A reference model of the keyed manager: the simplest single-threaded
//! restatement of client-go's semantics (a `BTreeMap`, exact `i128`
//! arithmetic, no concurrency, no packing), plus a driver that runs the same
//! operations on the model and on the crate and reports the first
//! disagreement.
//!
//! Beyond client-go's doubling rule the model covers deterministic
//! strategies driving the manager (with and without an attempt limit),
//! amortised GC, the statistics, snapshot/restore round trips (with the
//! reader's wall clock ahead of or behind the writer's), and an expiry
//! function that panics or calls back into its own manager: such a call
//! must panic and leave every entry as it was, and an amortised sweep must
//! contain the panic and count it.
//!
//! Shared by the core's `tests/model_proptest.rs` and the fuzz target in
//! `fuzz/`.
use std::time::Duration;

use keyed_backoff::clock::MockInstant;

mod decode;
mod driver;
mod reference;

pub use decode::decode;
pub use driver::{ARMED_PANIC, Real, build, expected_message, quiet_expected_panics, run};
pub use reference::Model;

/// How an entry expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpiryKind {
    /// client-go's default: `event − last > 2·max`.
    TwiceMax,
    /// `expire_after(window)`.
    Fixed(u64),
    /// The same fixed window, given as a user closure.
    Closure(u64),
}

/// The update rule `next` applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// client-go's strategy, built with `Backoff::builder(initial, max)`.
    ClientGo,
    /// The same doubling, as a strategy (`FactorJitter` without jitter),
    /// with an optional attempt limit.
    Doubling(Option<u32>),
    /// `Constant(initial)`, with an optional attempt limit.
    Constant(Option<u32>),
    /// `Linear(initial, step).max(max)`, with an optional attempt limit.
    Linear(u64, Option<u32>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub initial: u64,
    pub max: u64,
    pub expiry: ExpiryKind,
    pub rule: RuleKind,
    /// `amortized_gc(every)`.
    pub amortized: Option<u32>,
}

/// What the custom expiry function does besides judging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Armed {
    /// Nothing: it judges.
    Off = 0,
    /// It panics.
    Panic = 1,
    /// It calls back into its own manager (which must refuse with a panic).
    Reenter = 2,
}

/// An event time, resolved against the model's state when the op runs, so
/// generated times land on the interesting boundaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Now,
    Ago(u64),
    Ahead(u64),
    /// `last_update + backoff + delta` of the op's key.
    BackoffEdge(i8),
    /// `last_update + expiry window + delta` of the op's key.
    ExpiryEdge(i8),
}

/// How far the clock moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Nanos(u64),
    Initial,
    Max,
    /// The expiry window plus a small delta.
    Window(i8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Advance(Step),
    Next(u8, Event),
    TryNext(u8),
    Get(u8),
    InSince(u8, Event),
    InSinceUpdate(u8, Event),
    Remaining(u8, Event),
    Attempts(u8),
    Reset(u8),
    Gc,
    Len,
    /// Compares `stats()`.
    Stats,
    /// Arms the custom expiry function (no effect on other expiries).
    Arm(Armed),
    /// Snapshots the manager, restores into a new one on the same clock
    /// with the reader's wall clock this many nanoseconds ahead (negative:
    /// behind), and carries on with the new one.
    RoundTrip(i64),
}

pub const KEYS: [&str; 3] = ["a", "b", "c"];

pub(crate) fn instant(t: i128) -> MockInstant {
    MockInstant::from_nanos(i64::try_from(t).expect("model times stay in i64"))
}

pub(crate) fn ns(d: Duration) -> i128 {
    i128::try_from(d.as_nanos()).expect("fits")
}

pub(crate) fn nanos(t: i128) -> Duration {
    Duration::from_nanos(u64::try_from(t).expect("a non-negative time in u64"))
}
