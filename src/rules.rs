//! The rules of the keyed manager, as pure functions over one entry and
//! times: when an entry is stale, what `next` makes of it, whether it is in
//! backoff and for how long, and what `try_next` decides.
//!
//! No map, no lock and no clock lives here: callers read the clock and hold
//! whatever lock they need, then ask these rules. The in-process map decides
//! by these functions, so each rule is written once in Rust. Times are
//! [`Tick`]s: signed nanoseconds from the manager's epoch.
//!
//! One store cannot call them: Redis runs Lua, so the `keyed-backoff-redis`
//! crate's script (`entry.lua`) restates these rules. The restatement is
//! checked against client-go itself: that crate's trace suite replays every
//! trace of `tests/data/clientgo` on a real redis-server, as this crate's
//! `tests/conformance.rs` replays them here. Change a rule here and the
//! script with it, or those traces fail.

use std::time::Duration;

use crate::duration::positive_nanos;
use crate::duration::saturating_nanos;
use crate::entry::{Entry, Level, MAX_BACKOFF, Tick};
use crate::growth::Growth;

/// When an entry counts as stale: client-go's `HasExpiredFunc`, asked with
/// an event time and the entry's last update.
pub(crate) trait Staleness {
    /// Whether an entry last updated at `last_update` is stale as of `event`.
    fn is_stale(&self, event: Tick, last_update: Tick) -> bool;
}

/// client-go's default and the kubelet's rule: stale when
/// `event − last_update > window` (strictly; an event before the last update
/// is never stale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window(pub(crate) u64);

impl Staleness for Window {
    #[inline]
    fn is_stale(&self, event: Tick, last_update: Tick) -> bool {
        event.since(last_update) > i128::from(self.0)
    }
}

/// Whether `entry` is stale as of `event`.
#[inline]
pub(crate) fn expired(stale: &(impl Staleness + ?Sized), entry: Entry, event: Tick) -> bool {
    stale.is_stale(event, entry.last_update())
}

/// client-go's `Next`: the entry after a failure at `event`, written at
/// `now`. A missing or stale entry starts over at the rule's first backoff;
/// otherwise the rule's following one, one more attempt.
#[inline]
pub(crate) fn next_entry(
    growth: &Growth,
    stale: &(impl Staleness + ?Sized),
    old: Option<Entry>,
    event: Tick,
    now: Tick,
) -> Entry {
    match old {
        Some(e) if !expired(stale, e, event) => Entry::new(
            now,
            growth.following(e.backoff_ns(), e.attempts()),
            e.attempts().saturating_add(1),
        ),
        _ => Entry::new(now, growth.first(), 1),
    }
}

/// The wait left at `at` before `entry`'s window (from its last update)
/// ends; `None` if it is stale as of `at` or the window has passed.
///
/// This is client-go's `IsInBackOffSinceUpdate(at)` with the amount:
/// `at − last_update < backoff`.
#[inline]
pub(crate) fn remaining(
    stale: &(impl Staleness + ?Sized),
    entry: Entry,
    at: Tick,
) -> Option<Duration> {
    if expired(stale, entry, at) {
        return None;
    }
    positive_nanos(i128::from(entry.backoff_ns()) - at.since(entry.last_update()))
}

/// The wait left at `now` of a backoff counted from `event`:
/// `backoff − (now − event)` while positive, unless stale as of `event`.
///
/// This is client-go's `IsInBackOffSince(event)` with the amount:
/// `now − event < backoff`.
#[inline]
pub(crate) fn remaining_since(
    stale: &(impl Staleness + ?Sized),
    entry: Entry,
    event: Tick,
    now: Tick,
) -> Option<Duration> {
    if expired(stale, entry, event) {
        return None;
    }
    positive_nanos(i128::from(entry.backoff_ns()) - now.since(event))
}

/// The wait left at `at` before a floor `until` (a key held until then)
/// ends; `None` without a floor or once it has passed.
#[inline]
pub(crate) fn held(until: Option<Tick>, at: Tick) -> Option<Duration> {
    positive_nanos(until?.since(at))
}

/// Whether a key whose entry holds it to `own` is in backoff at `at`: by
/// its entry, or else by its floor, looked up only then (the common
/// answer, in backoff by its entry, never looks for one).
#[inline]
pub(crate) fn in_backoff(
    own: Option<Duration>,
    floor: impl FnOnce() -> Option<Tick>,
    at: Tick,
) -> bool {
    own.is_some() || held(floor(), at).is_some()
}

/// A key put back at `level` at `now`, its backoff just over (its last
/// update one backoff ago): `None`, changing nothing, when `old` is still
/// live. Its next failure climbs from `level`.
#[inline]
pub(crate) fn resumed(
    stale: &(impl Staleness + ?Sized),
    old: Option<Entry>,
    level: Level,
    now: Tick,
) -> Option<Entry> {
    if old.is_some_and(|e| !expired(stale, e, now)) {
        return None;
    }
    let backoff = saturating_nanos(level.backoff.min(MAX_BACKOFF));
    Some(Entry::new(
        now.plus(-i128::from(backoff)),
        backoff,
        level.attempts.max(1),
    ))
}

/// `try_next`: refuse with the remaining wait if `old` is in backoff at
/// `event` or the key is held past it (the longer wait), otherwise the
/// entry after a failure at `event`, written at `now`. A floor never
/// changes the entry: without one this is client-go's check and `Next`.
#[inline]
pub(crate) fn try_next(
    growth: &Growth,
    stale: &(impl Staleness + ?Sized),
    old: Option<Entry>,
    event: Tick,
    now: Tick,
    hold: Option<Tick>,
) -> Result<Entry, Duration> {
    let wait = old.and_then(|e| remaining(stale, e, event));
    if let Some(wait) = wait.max(held(hold, event)) {
        return Err(wait);
    }
    Ok(next_entry(growth, stale, old, event, now))
}

/// An entry rebuilt from a snapshot: last updated `age_ns` before `now`
/// (negative: after), holding `backoff_ns` after `attempts`. A last update
/// in the future is moved to `now`, and a backoff above `max_ns` is cut to
/// it, so a snapshot can never hold a key longer than this manager would.
/// `None` if the entry is already stale at `now`.
#[inline]
pub(crate) fn restored(
    stale: &(impl Staleness + ?Sized),
    now: Tick,
    age_ns: i128,
    backoff_ns: u64,
    max_ns: u64,
    attempts: u32,
) -> Option<Entry> {
    let entry = Entry::new(now.plus(-age_ns.max(0)), backoff_ns.min(max_ns), attempts);
    (!expired(stale, entry, now)).then_some(entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::growth::{Formula, Growth};
    use crate::strategy::FactorJitter;

    const W: Window = Window(100);

    fn rule(initial: u64, max: u64) -> Growth {
        let f = FactorJitter::new(Duration::from_nanos(initial), Duration::from_nanos(max));
        Growth::new(Formula::ClientGo(f), 1)
    }

    fn e(last: i64, backoff: u64, attempts: u32) -> Entry {
        Entry::new(Tick(last), backoff, attempts)
    }

    #[test]
    fn window_is_strict_and_never_stale_backwards() {
        assert!(!W.is_stale(Tick(100), Tick(0)));
        assert!(W.is_stale(Tick(101), Tick(0)));
        assert!(!W.is_stale(Tick(i64::MIN), Tick(i64::MAX)));
        assert!(Window(0).is_stale(Tick(1), Tick(0)));
    }

    #[test]
    fn next_starts_doubles_caps_and_restarts_when_stale() {
        let r = rule(10, 35);
        let first = next_entry(&r, &W, None, Tick(0), Tick(5));
        assert_eq!(first, e(5, 10, 1));
        let second = next_entry(&r, &W, Some(first), Tick(5), Tick(6));
        assert_eq!(second, e(6, 20, 2));
        assert_eq!(
            next_entry(&r, &W, Some(second), Tick(6), Tick(7)),
            e(7, 35, 3)
        );
        // 106 − 6 = 100: not stale; 107: stale, starts over.
        assert_eq!(
            next_entry(&r, &W, Some(second), Tick(106), Tick(8)),
            e(8, 35, 3)
        );
        assert_eq!(
            next_entry(&r, &W, Some(second), Tick(107), Tick(9)),
            e(9, 10, 1)
        );
    }

    #[test]
    fn remaining_counts_from_the_last_update() {
        let x = e(10, 30, 1);
        assert_eq!(remaining(&W, x, Tick(10)), Some(Duration::from_nanos(30)));
        assert_eq!(remaining(&W, x, Tick(39)), Some(Duration::from_nanos(1)));
        assert_eq!(remaining(&W, x, Tick(40)), None);
        // Before the last update: in backoff by more than the backoff.
        assert_eq!(remaining(&W, x, Tick(0)), Some(Duration::from_nanos(40)));
        // Even a zero backoff is in backoff for an earlier event.
        assert!(remaining(&W, e(10, 0, 1), Tick(9)).is_some());
        assert!(remaining(&W, e(10, 0, 1), Tick(10)).is_none());
        // Stale: not in backoff, whatever the window says.
        assert_eq!(remaining(&Window(5), e(0, 1_000, 1), Tick(6)), None);
    }

    #[test]
    fn in_backoff_since_counts_from_the_event() {
        let x = e(0, 30, 1);
        assert!(remaining_since(&W, x, Tick(50), Tick(79)).is_some());
        assert!(remaining_since(&W, x, Tick(50), Tick(80)).is_none());
        // An event in the future is in backoff; its staleness is judged on it.
        assert!(remaining_since(&W, x, Tick(90), Tick(0)).is_some());
        assert!(remaining_since(&W, x, Tick(101), Tick(0)).is_none());
    }

    #[test]
    fn remaining_since_counts_down_from_the_event() {
        let x = e(0, 30, 1);
        assert_eq!(
            remaining_since(&W, x, Tick(50), Tick(50)),
            Some(Duration::from_nanos(30))
        );
        assert_eq!(
            remaining_since(&W, x, Tick(50), Tick(79)),
            Some(Duration::from_nanos(1))
        );
        assert_eq!(remaining_since(&W, x, Tick(50), Tick(80)), None);
        // An event ahead of now: more than the backoff is left.
        assert_eq!(
            remaining_since(&W, x, Tick(90), Tick(80)),
            Some(Duration::from_nanos(40))
        );
        // Stale as of the event: nothing left.
        assert_eq!(
            remaining_since(&Window(5), e(0, 1_000, 1), Tick(6), Tick(6)),
            None
        );
    }

    #[test]
    fn try_next_refuses_inside_the_window_and_advances_after() {
        let r = rule(10, 1_000);
        let x = e(0, 10, 1);
        assert_eq!(
            try_next(&r, &W, Some(x), Tick(4), Tick(4), None),
            Err(Duration::from_nanos(6))
        );
        assert_eq!(
            try_next(&r, &W, Some(x), Tick(10), Tick(10), None),
            Ok(e(10, 20, 2))
        );
        assert_eq!(
            try_next(&r, &W, None, Tick(3), Tick(3), None),
            Ok(e(3, 10, 1))
        );
    }

    #[test]
    fn a_floor_refuses_with_the_longer_wait_and_leaves_the_entry_alone() {
        let r = rule(10, 1_000);
        let x = e(0, 10, 1);
        // Held past the backoff: the floor's wait.
        assert_eq!(
            try_next(&r, &W, Some(x), Tick(4), Tick(4), Some(Tick(30))),
            Err(Duration::from_nanos(26))
        );
        // Held less long than the backoff: the backoff's wait.
        assert_eq!(
            try_next(&r, &W, Some(x), Tick(4), Tick(4), Some(Tick(5))),
            Err(Duration::from_nanos(6))
        );
        // A key with no entry is held too; at the floor it runs, and the
        // entry is client-go's, as if there had been no floor.
        assert_eq!(
            try_next(&r, &W, None, Tick(3), Tick(3), Some(Tick(7))),
            Err(Duration::from_nanos(4))
        );
        assert_eq!(
            try_next(&r, &W, None, Tick(7), Tick(7), Some(Tick(7))),
            Ok(e(7, 10, 1))
        );
        assert_eq!(
            try_next(&r, &W, Some(x), Tick(30), Tick(30), Some(Tick(30))),
            Ok(e(30, 20, 2))
        );
        assert_eq!(held(None, Tick(0)), None);
        assert_eq!(held(Some(Tick(5)), Tick(5)), None);
        assert_eq!(
            held(Some(Tick(5)), Tick(-5)),
            Some(Duration::from_nanos(10))
        );
    }

    #[test]
    fn restore_clamps_future_times_and_backoffs_above_max() {
        // A last update a year ahead is taken as now.
        let year = 365 * 86_400 * 1_000_000_000i128;
        assert_eq!(
            restored(&W, Tick(50), -year, 30, 1_000, 2),
            Some(e(50, 30, 2))
        );
        // A backoff above max is cut to max.
        assert_eq!(restored(&W, Tick(50), 0, 300, 10, 2), Some(e(50, 10, 2)));
        // Stale at now: dropped; at exactly the window: kept.
        assert_eq!(restored(&W, Tick(50), 101, 30, 1_000, 2), None);
        assert_eq!(
            restored(&W, Tick(50), 100, 30, 1_000, 2),
            Some(e(-50, 30, 2))
        );
        // Ages beyond i64 saturate instead of wrapping.
        assert_eq!(restored(&W, Tick(0), i128::MAX, 30, 1_000, 2), None);
    }
}
