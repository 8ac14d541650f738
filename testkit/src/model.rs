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

use std::any::Any;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Once, OnceLock, Weak};
use std::time::{Duration, SystemTime};

use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};
use keyed_backoff::strategy::{Constant, FactorJitter, Linear, Strategy};
use keyed_backoff::{Backoff, ConfigError, InBackoff, MAX_ATTEMPTS, Snapshot, SnapshotEntry};

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
    /// client-go's rule, built with `Backoff::builder(initial, max)`.
    ClientGo,
    /// The same doubling, as a strategy (`FactorJitter` without jitter),
    /// with an optional attempt limit.
    Doubling(Option<u32>),
    /// `Constant(initial)`, with an optional attempt limit.
    Constant(Option<u32>),
    /// `Linear(initial, step).cap(max)`, with an optional attempt limit.
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
    /// Whether the expiry function panics when asked.
    armed: bool,
    /// Writes counted towards amortised GC.
    writes: u64,
    gc_runs: u64,
    gc_removed: u64,
    gc_panics: u64,
}

impl Model {
    pub fn new(cfg: Config) -> Self {
        Model {
            cfg,
            now: 0,
            entries: BTreeMap::new(),
            armed: false,
            writes: 0,
            gc_runs: 0,
            gc_removed: 0,
            gc_panics: 0,
        }
    }

    /// The strategy's attempt limit, if any.
    fn limit(&self) -> Option<u32> {
        match self.cfg.rule {
            RuleKind::ClientGo => None,
            RuleKind::Doubling(m) | RuleKind::Constant(m) | RuleKind::Linear(_, m) => m,
        }
    }

    /// The field the builder must refuse, if the config is invalid: a
    /// strategy that gives no delay, or gives up beyond the attempts an
    /// entry counts.
    pub fn invalid(&self) -> Option<&'static str> {
        match self.limit() {
            Some(0) => Some("strategy"),
            Some(m) if m > MAX_ATTEMPTS => Some("strategy"),
            _ => None,
        }
    }

    /// The largest delay the rule gives.
    fn max_delay(&self) -> i128 {
        let (initial, max) = (i128::from(self.cfg.initial), i128::from(self.cfg.max));
        match self.cfg.rule {
            RuleKind::ClientGo | RuleKind::Linear(..) => max,
            // The first delay is `initial`, uncapped.
            RuleKind::Doubling(_) => max.max(initial),
            RuleKind::Constant(_) => initial,
        }
    }

    fn window(&self) -> i128 {
        match self.cfg.expiry {
            ExpiryKind::TwiceMax => 2 * self.max_delay(),
            ExpiryKind::Fixed(w) | ExpiryKind::Closure(w) => i128::from(w),
        }
    }

    /// Whether asking for expiry panics now.
    fn panics(&self) -> bool {
        self.armed && matches!(self.cfg.expiry, ExpiryKind::Closure(_))
    }

    /// Delay number `n` (0-based) after `previous`; `None` once the rule
    /// gives up.
    fn delay(&self, n: u32, previous: i128) -> Option<i128> {
        if self.limit().is_some_and(|m| n >= m) {
            return None;
        }
        let (initial, max) = (i128::from(self.cfg.initial), i128::from(self.cfg.max));
        Some(match (self.cfg.rule, n) {
            (RuleKind::ClientGo | RuleKind::Doubling(_), 0) => initial,
            (RuleKind::ClientGo | RuleKind::Doubling(_), _) => (2 * previous).min(max),
            (RuleKind::Constant(_), _) => initial,
            (RuleKind::Linear(step, _), n) => (initial + i128::from(n) * i128::from(step)).min(max),
        })
    }

    /// Counts a write; sweeps (containing a panic) on every n-th.
    fn after_write(&mut self) {
        let Some(every) = self.cfg.amortized else {
            return;
        };
        self.writes += 1;
        if self.writes.is_multiple_of(u64::from(every)) {
            if self.panics() && !self.entries.is_empty() {
                self.gc_panics += 1;
            } else {
                self.gc();
            }
        }
    }

    pub fn stats(&self) -> keyed_backoff::Stats {
        let mut s = keyed_backoff::Stats::default();
        s.entries = self.entries.len();
        s.gc_runs = self.gc_runs;
        s.gc_removed = self.gc_removed;
        s.gc_panics = self.gc_panics;
        for (key, e) in &self.entries {
            s.expired += usize::from(self.expired(self.now, e.last));
            s.in_backoff += usize::from(self.remaining(key, self.now).is_some());
        }
        s
    }

    /// The snapshot the crate must give, with `wall` as the wall time of now.
    pub fn snapshot(&self, wall: SystemTime) -> Vec<SnapshotEntry<String>> {
        self.entries
            .iter()
            .map(|(k, e)| SnapshotEntry {
                key: (*k).to_string(),
                backoff: Duration::from_nanos(u64::try_from(e.backoff).expect("fits")),
                attempts: e.attempts.min(MAX_ATTEMPTS),
                last_update: wall - nanos(self.now - e.last),
            })
            .collect()
    }

    /// A restore of this model's snapshot into a fresh manager whose wall
    /// clock reads `skew` ns more: last updates move by `skew`, one in the
    /// future counts as now, a stale one is dropped. Returns how many are held.
    pub fn round_trip(&mut self, skew: i64) -> usize {
        let now = self.now;
        let entries = std::mem::take(&mut self.entries);
        self.entries = entries
            .into_iter()
            .filter_map(|(k, e)| {
                let last = now - (now - e.last + i128::from(skew)).max(0);
                (!self.expired(now, last)).then_some((
                    k,
                    Entry {
                        last,
                        attempts: e.attempts.min(MAX_ATTEMPTS),
                        ..e
                    },
                ))
            })
            .collect();
        (self.writes, self.gc_runs, self.gc_removed, self.gc_panics) = (0, 0, 0, 0);
        self.entries.len()
    }

    fn expired(&self, event: i128, last: i128) -> bool {
        event - last > self.window()
    }

    pub fn next(&mut self, key: &'static str, event: i128) -> i128 {
        let entry = match self.entries.get(key) {
            Some(e) if !self.expired(event, e.last) => Entry {
                backoff: self
                    .delay(e.attempts.min(MAX_ATTEMPTS), e.backoff)
                    .unwrap_or(e.backoff),
                last: self.now,
                attempts: e.attempts + 1,
            },
            _ => Entry {
                backoff: self.delay(0, 0).expect("a valid rule gives a first delay"),
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
        let removed = before - self.entries.len();
        self.gc_runs += 1;
        self.gc_removed += removed as u64;
        removed
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

/// The manager the driver runs.
pub type Real = Backoff<String, MockClock>;

/// The message of the armed expiry function's panic.
pub const ARMED_PANIC: &str = "model: the expiry function was armed to panic";

/// Part of the crate's message when an expiry function calls back into its
/// own manager.
const REENTRY: &str = "called back into the Backoff it belongs to";

/// Whether a panic message is one the driver provokes on purpose.
pub fn expected_message(message: &str) -> bool {
    message == ARMED_PANIC || message.contains(REENTRY)
}

fn payload_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("")
}

/// Installs (once) a panic hook that stays silent for the panics the driver
/// provokes and hands every other panic to the hook installed before it (the
/// fuzzer's aborts; the test harness's prints).
pub fn quiet_expected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !expected_message(payload_message(info.payload())) {
                previous(info);
            }
        }));
    });
}

fn limited<S: keyed_backoff::strategy::Step + Clone>(
    strategy: Strategy<S>,
    limit: Option<u32>,
) -> Strategy<S> {
    match limit {
        Some(m) => strategy.max_attempts(m),
        None => strategy,
    }
}

/// The custom expiry: the fixed window `w`, after panicking or calling
/// back into its manager when armed so.
fn expiry_fn(
    w: u64,
    armed: Arc<AtomicU8>,
    me: Arc<OnceLock<Weak<Real>>>,
) -> impl Fn(MockInstant, MockInstant, Duration) -> bool + Send + Sync + 'static {
    move |event, last, _| {
        match armed.load(Ordering::Relaxed) {
            mode if mode == Armed::Panic as u8 => panic!("{ARMED_PANIC}"),
            mode if mode == Armed::Reenter as u8 => {
                if let Some(manager) = me.get().and_then(Weak::upgrade) {
                    let _ = manager.len();
                }
            }
            _ => {}
        }
        event > last && event.saturating_duration_since(last) > Duration::from_nanos(w)
    }
}

/// Builds the crate's manager for `cfg` on `clock`; `armed` drives a custom
/// expiry function.
pub fn build(
    cfg: Config,
    clock: &MockClock,
    armed: &Arc<AtomicU8>,
) -> Result<Arc<Real>, ConfigError> {
    let me: Arc<OnceLock<Weak<Real>>> = Arc::new(OnceLock::new());
    let (initial, max) = (
        Duration::from_nanos(cfg.initial),
        Duration::from_nanos(cfg.max),
    );
    macro_rules! finish {
        ($builder:expr) => {{
            let b = $builder.clock(clock.clone()).seed(1).shards(4);
            let b = match cfg.amortized {
                Some(every) => b.amortized_gc(every),
                None => b,
            };
            match cfg.expiry {
                ExpiryKind::TwiceMax => b.build(),
                ExpiryKind::Fixed(w) => b.expire_after(Duration::from_nanos(w)).build(),
                ExpiryKind::Closure(w) => b.expiry(expiry_fn(w, armed.clone(), me.clone())).build(),
            }
        }};
    }
    let real = match cfg.rule {
        RuleKind::ClientGo => finish!(Backoff::<String>::builder(initial, max)),
        RuleKind::Doubling(m) => {
            let doubling = Strategy::new(FactorJitter::new(initial, max).jitter(0.0))?;
            finish!(Backoff::<String>::with_strategy(limited(doubling, m)))
        }
        RuleKind::Constant(m) => {
            let constant = Strategy::new(Constant::new(initial))?;
            finish!(Backoff::<String>::with_strategy(limited(constant, m)))
        }
        RuleKind::Linear(step, m) => {
            let linear = Strategy::new(Linear::new(initial, Duration::from_nanos(step)).cap(max))?;
            finish!(Backoff::<String>::with_strategy(limited(linear, m)))
        }
    }?;
    let real = Arc::new(real);
    me.set(Arc::downgrade(&real)).expect("set once");
    Ok(real)
}

fn instant(t: i128) -> MockInstant {
    MockInstant::from_nanos(i64::try_from(t).expect("model times stay in i64"))
}

fn ns(d: Duration) -> i128 {
    i128::try_from(d.as_nanos()).expect("fits")
}

fn nanos(t: i128) -> Duration {
    Duration::from_nanos(u64::try_from(t).expect("a non-negative time in u64"))
}

/// Calls the crate. When `panics`, the call must panic as provoked (`None`);
/// otherwise it must return.
fn guarded<T>(panics: bool, call: impl FnOnce() -> T) -> Result<Option<T>, String> {
    match (catch_unwind(AssertUnwindSafe(call)), panics) {
        (Ok(v), false) => Ok(Some(v)),
        (Ok(_), true) => Err("returned, though its expiry function panics".to_string()),
        (Err(p), true) if expected_message(payload_message(&*p)) => Ok(None),
        (Err(p), false) if expected_message(payload_message(&*p)) => {
            Err("panicked, though its expiry function was not asked".to_string())
        }
        (Err(p), _) => std::panic::resume_unwind(p),
    }
}

/// A read-only call: the model's `want`, or the provoked panic with every
/// entry left as it was.
fn read<T: PartialEq + std::fmt::Debug>(
    model: &Model,
    real: &Real,
    what: &str,
    want: T,
    panics: bool,
    call: impl FnOnce(&Real) -> T,
) -> Result<(), String> {
    match guarded(panics, || call(real))? {
        None => unchanged(model, real),
        Some(got) => agree(what, want, got),
    }
}

/// After a call that panicked: every key still holds what the model holds.
fn unchanged(model: &Model, real: &Real) -> Result<(), String> {
    for key in KEYS {
        agree(
            &format!("{key} after a panic"),
            (model.get(key), model.attempts(key)),
            (ns(real.get(key)), real.attempts(key)),
        )?;
    }
    agree("len after a panic", model.entries.len(), real.len())
}

/// The wall time of the model's now in snapshots.
fn wall(model: &Model) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000) + nanos(model.now)
}

/// Runs `ops` on the model and on the crate; `Err` describes the first
/// disagreement.
pub fn run(cfg: Config, ops: &[Op]) -> Result<(), String> {
    let clock = MockClock::new();
    let armed = Arc::new(AtomicU8::new(Armed::Off as u8));
    let mut model = Model::new(cfg);
    let mut real = match (model.invalid(), build(cfg, &clock, &armed)) {
        (None, Ok(real)) => real,
        (Some(field), Err(e)) if e.field() == field => return Ok(()),
        (want, got) => {
            return Err(format!(
                "build with {cfg:?}: model refuses {want:?}, crate {:?}",
                got.err()
            ));
        }
    };
    for (i, &op) in ops.iter().enumerate() {
        apply(&mut model, &mut real, &clock, &armed, op)
            .map_err(|what| format!("op #{i} {op:?} with {cfg:?}: {what}"))?;
    }
    Ok(())
}

/// One op on both sides.
fn apply(
    model: &mut Model,
    real: &mut Arc<Real>,
    clock: &MockClock,
    armed: &Arc<AtomicU8>,
    op: Op,
) -> Result<(), String> {
    let key = |k: u8| KEYS[k as usize];
    // Whether the op asks the expiry function about key `k` (any key: None).
    let asks = |model: &Model, k: Option<u8>| {
        model.panics()
            && match k {
                Some(k) => model.entries.contains_key(key(k)),
                None => !model.entries.is_empty(),
            }
    };
    match op {
        Op::Advance(step) => {
            let d = model.step(step);
            model.now += d;
            clock.advance(nanos(d));
            agree("clock", model.now, i128::from(clock.now().as_nanos()))
        }
        Op::Next(k, ev) => {
            let t = model.resolve(key(k), ev);
            let panics = asks(model, Some(k));
            let Some(got) = guarded(panics, || real.next(key(k), instant(t)))? else {
                return unchanged(model, real);
            };
            let want = model.next(key(k), t);
            model.after_write();
            agree("next", want, ns(got))
        }
        Op::TryNext(k) => {
            let t = model.now;
            let panics = asks(model, Some(k));
            let Some(got) = guarded(panics, || real.try_next(key(k), instant(t)))? else {
                return unchanged(model, real);
            };
            let got = got.map(ns).map_err(|InBackoff { remaining }| ns(remaining));
            let want = model.try_next(key(k), t);
            model.after_write();
            agree("try_next", want, got)
        }
        Op::Get(k) => agree("get", model.get(key(k)), ns(real.get(key(k)))),
        Op::InSince(k, ev) => {
            let t = model.resolve(key(k), ev);
            let want = model.in_since(key(k), t);
            let panics = asks(model, Some(k));
            let what = format!("is_in_backoff_since(t={t})");
            read(model, real, &what, want, panics, |r| {
                r.is_in_backoff_since(key(k), instant(t))
            })
        }
        Op::InSinceUpdate(k, ev) => {
            let t = model.resolve(key(k), ev);
            let want = model.in_since_update(key(k), t);
            let panics = asks(model, Some(k));
            let what = format!("is_in_backoff_since_update(t={t})");
            read(model, real, &what, want, panics, |r| {
                r.is_in_backoff_since_update(key(k), instant(t))
            })
        }
        Op::Remaining(k, ev) => {
            let t = model.resolve(key(k), ev);
            let want = model.remaining(key(k), t);
            let panics = asks(model, Some(k));
            let what = format!("remaining(t={t})");
            read(model, real, &what, want, panics, |r| {
                r.remaining(key(k), instant(t)).map(ns)
            })
        }
        Op::Attempts(k) => agree("attempts", model.attempts(key(k)), real.attempts(key(k))),
        Op::Reset(k) => agree("reset", model.reset(key(k)), real.reset(key(k))),
        Op::Gc => match guarded(asks(model, None), || real.gc())? {
            None => unchanged(model, real),
            Some(got) => agree("gc removed", model.gc(), got),
        },
        Op::Len => agree("len", model.entries.len(), real.len()),
        Op::Stats => {
            let panics = asks(model, None);
            read(model, real, "stats", model.stats(), panics, Real::stats)
        }
        Op::Arm(mode) => {
            armed.store(mode as u8, Ordering::Relaxed);
            model.armed = mode != Armed::Off;
            Ok(())
        }
        Op::RoundTrip(skew) => {
            let at = wall(model);
            let mut snapshot: Snapshot<String> = real.snapshot_at(at);
            snapshot.entries.sort_by(|a, b| a.key.cmp(&b.key));
            agree("snapshot", &model.snapshot(at), &snapshot.entries)?;
            let fresh = build(model.cfg, clock, armed).map_err(|e| e.to_string())?;
            let read_at = if skew >= 0 {
                at + Duration::from_nanos(skew.unsigned_abs())
            } else {
                at - Duration::from_nanos(skew.unsigned_abs())
            };
            let panics = asks(model, None);
            match guarded(panics, || fresh.restore_at(&snapshot, read_at))? {
                // The new manager is dropped; carry on with the old one.
                None => unchanged(model, real),
                Some(got) => {
                    *real = fresh;
                    agree("restored", model.round_trip(skew), got)
                }
            }
        }
    }
}

/// `Ok` when the model and the crate gave the same result for `what`.
fn agree<T: PartialEq + std::fmt::Debug>(what: &str, model: T, krate: T) -> Result<(), String> {
    if model == krate {
        Ok(())
    } else {
        Err(format!("{what}: model {model:?}, crate {krate:?}"))
    }
}

/// Bytes in the config header before the ops.
const HEADER: usize = 7;

/// Decodes arbitrary bytes into a config and ops (for the fuzzer): every
/// input is a program (some configs are invalid, and the builder must
/// refuse exactly those), and small changes to the bytes make small changes
/// to the program.
pub fn decode(data: &[u8]) -> (Config, Vec<Op>) {
    let byte = |i: usize| data.get(i).copied().unwrap_or(0);
    let scale = |b: u8| -> u64 {
        match b % 4 {
            0 => u64::from(b / 4 % 8),
            1 => u64::from(b / 4) * 7,
            2 => u64::from(b / 4) * 1_000_000_007,
            _ => 1_000_000_000 * u64::from(b / 4 % 16),
        }
    };
    let window = scale(byte(3));
    let expiry = match byte(2) % 3 {
        0 => ExpiryKind::TwiceMax,
        1 => ExpiryKind::Fixed(window),
        _ => ExpiryKind::Closure(window),
    };
    let (r, p) = (byte(4), byte(5));
    let limit = match r / 4 % 8 {
        0..=3 => None,
        4 => Some(0),
        5 => Some(MAX_ATTEMPTS + u32::from(p % 2)),
        _ => Some(1 + u32::from(p % 8)),
    };
    let rule = match r % 4 {
        0 => RuleKind::ClientGo,
        1 => RuleKind::Doubling(limit),
        2 => RuleKind::Constant(limit),
        _ => RuleKind::Linear(scale(p / 2), limit),
    };
    let a = byte(6);
    let cfg = Config {
        initial: scale(byte(0)),
        max: scale(byte(1)),
        expiry,
        rule,
        amortized: (a % 4 == 0).then_some(1 + u32::from(a / 4 % 4)),
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
        let at = HEADER + ops.len() * 3;
        if at >= data.len() {
            break;
        }
        let (op, a, b) = (byte(at), byte(at + 1), byte(at + 2));
        let k = a % 3;
        ops.push(match op % 14 {
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
            10 => Op::Len,
            11 => Op::Stats,
            12 => Op::Arm(match a % 3 {
                0 => Armed::Off,
                1 => Armed::Panic,
                _ => Armed::Reenter,
            }),
            _ => {
                let skew = i64::try_from(scale(b)).expect("small");
                Op::RoundTrip(if a % 2 == 0 { skew } else { -skew })
            }
        });
    }
    (cfg, ops)
}
