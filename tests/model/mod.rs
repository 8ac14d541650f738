//! A reference model of the keyed manager: the simplest single-threaded
//! restatement of client-go's semantics (a `BTreeMap`, exact `i128`
//! arithmetic, no concurrency, no packing), plus a driver that runs the same
//! operations on the model and on the crate and reports the first
//! disagreement.
//!
//! Shared by `tests/model_proptest.rs` and the fuzz target in `fuzz/`.

#![allow(dead_code)] // each user needs a different subset

use std::collections::BTreeMap;
use std::time::Duration;

use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};
use keyed_backoff::{Backoff, InBackoff};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub initial: u64,
    pub max: u64,
    pub expiry: ExpiryKind,
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
}

pub const KEYS: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone, Copy)]
struct Entry {
    backoff: i128,
    last: i128,
    attempts: u32,
}

/// The model.
pub struct Model {
    cfg: Config,
    now: i128,
    entries: BTreeMap<&'static str, Entry>,
}

impl Model {
    pub fn new(cfg: Config) -> Self {
        Model {
            cfg,
            now: 0,
            entries: BTreeMap::new(),
        }
    }

    fn window(&self) -> i128 {
        match self.cfg.expiry {
            ExpiryKind::TwiceMax => 2 * i128::from(self.cfg.max),
            ExpiryKind::Fixed(w) | ExpiryKind::Closure(w) => i128::from(w),
        }
    }

    fn expired(&self, event: i128, last: i128) -> bool {
        event - last > self.window()
    }

    pub fn next(&mut self, key: &'static str, event: i128) -> i128 {
        let (initial, max) = (i128::from(self.cfg.initial), i128::from(self.cfg.max));
        let entry = match self.entries.get(key) {
            Some(e) if !self.expired(event, e.last) => Entry {
                backoff: (2 * e.backoff).min(max),
                last: self.now,
                attempts: e.attempts + 1,
            },
            _ => Entry {
                backoff: initial,
                last: self.now,
                attempts: 1,
            },
        };
        self.entries.insert(key, entry);
        entry.backoff
    }

    pub fn get(&self, key: &str) -> i128 {
        self.entries.get(key).map_or(0, |e| e.backoff)
    }

    pub fn in_since(&self, key: &str, event: i128) -> bool {
        self.entries
            .get(key)
            .is_some_and(|e| !self.expired(event, e.last) && self.now - event < e.backoff)
    }

    pub fn in_since_update(&self, key: &str, event: i128) -> bool {
        self.entries
            .get(key)
            .is_some_and(|e| !self.expired(event, e.last) && event - e.last < e.backoff)
    }

    pub fn remaining(&self, key: &str, at: i128) -> Option<i128> {
        let e = self.entries.get(key)?;
        let left = e.last + e.backoff - at;
        (!self.expired(at, e.last) && left > 0).then_some(left)
    }

    pub fn try_next(&mut self, key: &'static str, at: i128) -> Result<i128, i128> {
        match self.remaining(key, at) {
            Some(left) => Err(left),
            None => Ok(self.next(key, at)),
        }
    }

    pub fn attempts(&self, key: &str) -> u32 {
        self.entries
            .get(key)
            .map_or(0, |e| e.attempts.min(keyed_backoff::MAX_ATTEMPTS))
    }

    pub fn reset(&mut self, key: &str) -> bool {
        self.entries.remove(key).is_some()
    }

    pub fn gc(&mut self) -> usize {
        let before = self.entries.len();
        let (now, window) = (self.now, self.window());
        self.entries.retain(|_, e| now - e.last <= window);
        before - self.entries.len()
    }

    fn resolve(&self, key: &str, event: Event) -> i128 {
        let (last, backoff) = self
            .entries
            .get(key)
            .map_or((self.now, 0), |e| (e.last, e.backoff));
        match event {
            Event::Now => self.now,
            Event::Ago(d) => self.now - i128::from(d),
            Event::Ahead(d) => self.now + i128::from(d),
            Event::BackoffEdge(d) => last + backoff + i128::from(d),
            Event::ExpiryEdge(d) => last + self.window() + i128::from(d),
        }
    }

    fn step(&self, step: Step) -> i128 {
        match step {
            Step::Nanos(n) => i128::from(n),
            Step::Initial => i128::from(self.cfg.initial),
            Step::Max => i128::from(self.cfg.max),
            Step::Window(d) => (self.window() + i128::from(d)).max(0),
        }
    }
}

/// Builds the crate's manager for `cfg` on `clock`.
pub fn build(cfg: Config, clock: &MockClock) -> Backoff<String, MockClock> {
    let b = Backoff::<String>::builder(
        Duration::from_nanos(cfg.initial),
        Duration::from_nanos(cfg.max),
    )
    .clock(clock.clone())
    .seed(1);
    match cfg.expiry {
        ExpiryKind::TwiceMax => b.build(),
        ExpiryKind::Fixed(w) => b.expire_after(Duration::from_nanos(w)).build(),
        ExpiryKind::Closure(w) => b
            .expiry(move |event: MockInstant, last: MockInstant, _| {
                event > last && event.saturating_duration_since(last) > Duration::from_nanos(w)
            })
            .build(),
    }
    .expect("model configs are valid")
}

fn instant(t: i128) -> MockInstant {
    MockInstant::from_nanos(i64::try_from(t).expect("model times stay in i64"))
}

fn ns(d: Duration) -> i128 {
    i128::try_from(d.as_nanos()).expect("fits")
}

/// Runs `ops` on the model and on the crate; `Err` describes the first
/// disagreement.
pub fn run(cfg: Config, ops: &[Op]) -> Result<(), String> {
    let clock = MockClock::new();
    let real = build(cfg, &clock);
    let mut model = Model::new(cfg);
    for (i, &op) in ops.iter().enumerate() {
        let key = |k: u8| KEYS[k as usize];
        let outcome = match op {
            Op::Advance(step) => {
                let d = model.step(step);
                model.now += d;
                clock.advance(Duration::from_nanos(
                    u64::try_from(d).expect("non-negative"),
                ));
                agree("clock", model.now, i128::from(clock.now().as_nanos()))
            }
            Op::Next(k, ev) => {
                let t = model.resolve(key(k), ev);
                agree(
                    "next",
                    model.next(key(k), t),
                    ns(real.next(key(k), instant(t))),
                )
            }
            Op::TryNext(k) => {
                let t = model.now;
                let got = real
                    .try_next(key(k), instant(t))
                    .map(ns)
                    .map_err(|InBackoff { remaining }| ns(remaining));
                agree("try_next", model.try_next(key(k), t), got)
            }
            Op::Get(k) => agree("get", model.get(key(k)), ns(real.get(key(k)))),
            Op::InSince(k, ev) => {
                let t = model.resolve(key(k), ev);
                agree(
                    &format!("is_in_backoff_since(t={t})"),
                    model.in_since(key(k), t),
                    real.is_in_backoff_since(key(k), instant(t)),
                )
            }
            Op::InSinceUpdate(k, ev) => {
                let t = model.resolve(key(k), ev);
                let got = real.is_in_backoff_since_update(key(k), instant(t));
                agree(
                    &format!("is_in_backoff_since_update(t={t})"),
                    model.in_since_update(key(k), t),
                    got,
                )
            }
            Op::Remaining(k, ev) => {
                let t = model.resolve(key(k), ev);
                agree(
                    &format!("remaining(t={t})"),
                    model.remaining(key(k), t),
                    real.remaining(key(k), instant(t)).map(ns),
                )
            }
            Op::Attempts(k) => agree("attempts", model.attempts(key(k)), real.attempts(key(k))),
            Op::Reset(k) => agree("reset", model.reset(key(k)), real.reset(key(k))),
            Op::Gc => agree("gc removed", model.gc(), real.gc()),
            Op::Len => agree("len", model.entries.len(), real.len()),
        };
        outcome.map_err(|what| format!("op #{i} {op:?} with {cfg:?}: {what}"))?;
    }
    Ok(())
}

/// `Ok` when the model and the crate gave the same result for `what`.
fn agree<T: PartialEq + std::fmt::Debug>(what: &str, model: T, krate: T) -> Result<(), String> {
    if model == krate {
        Ok(())
    } else {
        Err(format!("{what}: model {model:?}, crate {krate:?}"))
    }
}

/// Decodes arbitrary bytes into a config and ops (for the fuzzer): every
/// input is valid, and small changes to the bytes make small changes to the
/// program.
pub fn decode(data: &[u8]) -> (Config, Vec<Op>) {
    let mut bytes = data.iter().copied();
    let mut next = || bytes.next().unwrap_or(0);
    let scale = |b: u8| -> u64 {
        match b % 4 {
            0 => u64::from(b / 4 % 8),
            1 => u64::from(b / 4) * 7,
            2 => u64::from(b / 4) * 1_000_000_007,
            _ => 1_000_000_000 * u64::from(b / 4 % 16),
        }
    };
    let initial = scale(next());
    let max = scale(next());
    let e = next();
    let expiry = match e % 3 {
        0 => ExpiryKind::TwiceMax,
        1 => ExpiryKind::Fixed(scale(next())),
        _ => ExpiryKind::Closure(scale(next())),
    };
    let cfg = Config {
        initial,
        max,
        expiry,
    };
    let event = |a: u8, b: u8| match a % 5 {
        0 => Event::Now,
        1 => Event::Ago(scale(b)),
        2 => Event::Ahead(scale(b)),
        3 => Event::BackoffEdge((b % 5) as i8 - 2),
        _ => Event::ExpiryEdge((b % 5) as i8 - 2),
    };
    let mut ops = Vec::new();
    while ops.len() < 512 {
        let Some(&op) = data.get(5 + ops.len() * 3) else {
            break;
        };
        let a = data.get(6 + ops.len() * 3).copied().unwrap_or(0);
        let b = data.get(7 + ops.len() * 3).copied().unwrap_or(0);
        let k = a % 3;
        ops.push(match op % 11 {
            0 => Op::Advance(match a % 4 {
                0 => Step::Nanos(scale(b)),
                1 => Step::Initial,
                2 => Step::Max,
                _ => Step::Window((b % 5) as i8 - 2),
            }),
            1 => Op::Next(k, event(a / 3, b)),
            2 => Op::TryNext(k),
            3 => Op::Get(k),
            4 => Op::InSince(k, event(a / 3, b)),
            5 => Op::InSinceUpdate(k, event(a / 3, b)),
            6 => Op::Remaining(k, event(a / 3, b)),
            7 => Op::Attempts(k),
            8 => Op::Reset(k),
            9 => Op::Gc,
            _ => Op::Len,
        });
    }
    (cfg, ops)
}
