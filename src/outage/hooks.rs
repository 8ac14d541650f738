//! The manager's hooks: what [`Backoff`](crate::Backoff) calls at each
//! operation when outage detection is on. Each asks the watch about the
//! key, then lets the manager's own rules and store do the rest. Those
//! given the watch as an `Option` do nothing more than a branch when it is
//! `None`; [`failure`] is only called with one, out of line, so that the
//! write path without detection stays as small as it was.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use super::watch::{Asked, Verdict, Watch};
use crate::clock::ClockInstant;
use crate::entry::{Entry, Tick};
use crate::expiry::Expiry;
use crate::inspect::Stats;
use crate::observe;
use crate::rules;
use crate::store::Store;

/// The watch of a manager: held keys remember their own entry.
pub(crate) type KeyWatch = Watch<Option<Entry>>;

/// `t` on the outage's time line: time since the manager's epoch, never
/// negative.
fn line(t: Tick) -> Duration {
    Duration::from_nanos(u64::try_from(t.0).unwrap_or(0))
}

/// A failure of `key` at `now`, written by `write` (the manager's own rule:
/// `Err` with the wait left when the gate refuses; `hold` is the key's
/// `hold_until` floor). During an outage a held key is answered by the
/// outage instead, and its entry is not touched: `Ok` with its wait when
/// the failure counts (its turn, and neither its own backoff nor a floor
/// holds it), `Err` otherwise. A key let go after an outage gets its own
/// level back first. Every written failure is told to the watch.
#[inline(never)]
pub(crate) fn failure<K, S, I, Q>(
    watch: &KeyWatch,
    (store, expiry, hold): (&Store<K, S>, &Expiry<I>, Option<Tick>),
    key: &Q,
    now: Tick,
    write: impl FnOnce() -> Result<Entry, Duration>,
) -> Result<Duration, Duration>
where
    K: Hash + Eq + Clone + Borrow<Q>,
    S: BuildHasher + Clone,
    I: ClockInstant,
    Q: Hash + Eq + ToOwned + ?Sized,
    Q::Owned: Into<K>,
{
    match watch.verdict(
        key,
        line(now),
        Asked::Failure,
        || store.get(key),
        observe::outage,
    ) {
        Verdict::Held { until, counted } => {
            // The key's own wait or floor still refuses it, on its turn too.
            let own = expiry.judged(|stale| rules::remaining(stale, store.get(key)?, now));
            let own = own.max(rules::held(hold, now));
            let wait = own.unwrap_or_default().max(until.saturating_sub(line(now)));
            return if counted && own.is_none() {
                Ok(wait)
            } else {
                Err(wait)
            };
        }
        Verdict::Released { level } => give_back(store, expiry, key, level, now),
        Verdict::Free => {}
    }
    let entry = write()?;
    watch.failed(key, entry.attempts() == 1, line(now), observe::outage);
    Ok(entry.backoff())
}

/// Puts a let-go key's own level back if its entry expired or was
/// collected during the outage, with its window just ended at `now`: its
/// next failure climbs from there.
fn give_back<K, S, I, Q>(
    store: &Store<K, S>,
    expiry: &Expiry<I>,
    key: &Q,
    level: Option<Entry>,
    now: Tick,
) where
    K: Hash + Eq + Clone + Borrow<Q>,
    S: BuildHasher + Clone,
    I: ClockInstant,
    Q: Hash + Eq + ToOwned + ?Sized,
    Q::Owned: Into<K>,
{
    let Some(level) = level else { return };
    let _ = store.write(
        key,
        expiry,
        || now,
        |old, now, stale| match old {
            Some(e) if !rules::expired(stale, e, now) => Err(()),
            _ => Ok(Entry::new(
                now.plus(-i128::from(level.backoff_ns())),
                level.backoff_ns(),
                level.attempts(),
            )),
        },
    );
}

/// A key's own wait `own` at `at`, or when it has none, the outage's wait
/// for it if an outage holds it (asking may hold it, or give it its time
/// to go after the outage). A key in its own backoff is not asked about:
/// it cannot go anyway, and asking could take a probe's turn.
#[inline]
pub(crate) fn wait<K, S, Q>(
    watch: &Option<Box<KeyWatch>>,
    store: &Store<K, S>,
    key: &Q,
    at: Tick,
    own: Option<Duration>,
) -> Option<Duration>
where
    K: Hash + Eq + Clone + Borrow<Q>,
    S: BuildHasher + Clone,
    Q: Hash + Eq + ?Sized,
{
    match watch {
        Some(watch) if own.is_none() && watch.active() => held(watch, store, key, at),
        _ => own,
    }
}

/// The outage's wait for `key` at `at`, if it holds the key.
#[inline(never)]
fn held<K, S, Q>(watch: &KeyWatch, store: &Store<K, S>, key: &Q, at: Tick) -> Option<Duration>
where
    K: Hash + Eq + Clone + Borrow<Q>,
    S: BuildHasher + Clone,
    Q: Hash + Eq + ?Sized,
{
    match watch.verdict(
        key,
        line(at),
        Asked::Query,
        || store.get(key),
        observe::outage,
    ) {
        Verdict::Held { until, .. } => Some(until.saturating_sub(line(at))),
        Verdict::Free | Verdict::Released { .. } => None,
    }
}

/// A success of `key` (a `reset`) at `now`, told to the watch.
#[inline]
pub(crate) fn success<Q: Hash + ?Sized>(
    watch: Option<&KeyWatch>,
    key: &Q,
    now: impl FnOnce() -> Tick,
) {
    if let Some(watch) = watch {
        watch.succeeded(key, line(now()), observe::outage);
    }
}

/// A failure of `key` at `now` told ahead of its write (`note_failure`):
/// counted as the write would count it, fresh when the key has no entry or
/// an expired one, unless the key is in its own backoff (the gate would
/// refuse it). The watch then skips the key's next written failure.
#[inline]
pub(crate) fn noted<K, S, I, Q>(
    watch: Option<&KeyWatch>,
    (store, expiry): (&Store<K, S>, &Expiry<I>),
    key: &Q,
    now: impl FnOnce() -> Tick,
) where
    K: Hash + Eq + Clone + Borrow<Q>,
    S: BuildHasher + Clone,
    I: ClockInstant,
    Q: Hash + Eq + ?Sized,
{
    let Some(watch) = watch else { return };
    let now = now();
    let entry = store.get(key);
    let (fresh, own) = expiry.judged(|stale| match entry {
        Some(e) => (
            rules::expired(stale, e, now),
            rules::remaining(stale, e, now),
        ),
        None => (true, None),
    });
    if own.is_none() {
        watch.noted(key, fresh, line(now), observe::outage);
    }
}

/// `stats` with the watch's counters.
pub(crate) fn stats(watch: Option<&KeyWatch>, mut stats: Stats) -> Stats {
    if let Some(watch) = watch {
        let tally = watch.tally();
        stats.in_outage = tally.in_outage;
        stats.held = tally.held;
        stats.outages = tally.outages;
    }
    stats
}
