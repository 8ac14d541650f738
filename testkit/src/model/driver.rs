//! The driver: one program run on the model and on the crate, the first
//! disagreement reported.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Once, OnceLock, Weak};
use std::time::{Duration, SystemTime};

use super::*;
use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};
use keyed_backoff::strategy::{Constant, FactorJitter, Linear, Strategy};
use keyed_backoff::{Backoff, ConfigError, InBackoff, Snapshot};

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

/// Installs (once) a panic hook that stays silent for the panics the driver
/// provokes and hands every other panic to the hook installed before it (the
/// fuzzer's aborts; the test harness's prints).
pub fn quiet_expected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !expected_message(&crate::panic_message(info.payload())) {
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
            let linear = Strategy::new(Linear::new(initial, Duration::from_nanos(step)).max(max))?;
            finish!(Backoff::<String>::with_strategy(limited(linear, m)))
        }
    }?;
    let real = Arc::new(real);
    me.set(Arc::downgrade(&real)).expect("set once");
    Ok(real)
}

/// Calls the crate. When `panics`, the call must panic as provoked (`None`);
/// otherwise it must return.
fn guarded<T>(panics: bool, call: impl FnOnce() -> T) -> Result<Option<T>, String> {
    match (catch_unwind(AssertUnwindSafe(call)), panics) {
        (Ok(v), false) => Ok(Some(v)),
        (Ok(_), true) => Err("returned, though its expiry function panics".to_string()),
        (Err(p), true) if expected_message(&crate::panic_message(&*p)) => Ok(None),
        (Err(p), false) if expected_message(&crate::panic_message(&*p)) => {
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
