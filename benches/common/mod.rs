//! Shared by the benches: kubelet-shaped keys and the two baselines.
//!
//! Both baselines implement client-go's semantics (default `2·max` expiry, no
//! jitter) with the same hasher (foldhash) and the same time representation
//! (signed ns offsets from an epoch, read from the same `Clock`) as the crate,
//! so a ratio measures the map and its locking and nothing else.

#![allow(dead_code)] // each bench binary uses a different subset

pub mod rounds;

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::time::Duration;

use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};
use parking_lot::RwLock;

/// `pod-<i>_default_<32 hex uid>_container_<8 hex>`: the kubelet's stable
/// container key shape.
pub fn kubelet_keys(n: usize) -> Vec<String> {
    let state = foldhash::fast::FixedState::with_seed(0x6b75_6265);
    (0..n)
        .map(|i| {
            let a = state.hash_one(i as u64);
            let b = state.hash_one(!(i as u64));
            format!(
                "pod-{i}_default_{a:016x}{b:016x}_container_{:08x}",
                (a >> 32) as u32
            )
        })
        .collect()
}

/// Calls `apply` for every key so that, when it returns with the clock at
/// 1,201 s, the even-indexed half was last updated at 0 (past a 600 s
/// expiry) and the odd half at 601 s (within it).
pub fn populate_half_expired(
    keys: &[String],
    clock: &MockClock,
    apply: &mut dyn FnMut(&str, MockInstant),
) {
    clock.set(MockInstant::ZERO);
    for k in keys.iter().step_by(2) {
        apply(k, clock.now());
    }
    clock.set(MockInstant::ZERO + Duration::from_secs(601));
    for k in keys.iter().skip(1).step_by(2) {
        apply(k, clock.now());
    }
    clock.set(MockInstant::ZERO + Duration::from_secs(1_201));
}

/// A pseudo-random visiting order over `n` keys, so lookups do not walk the
/// table in insertion order.
pub fn visit_order(n: usize, len: usize) -> Vec<usize> {
    let state = foldhash::fast::FixedState::with_seed(7);
    (0..len)
        .map(|i| (state.hash_one(i as u64) % n as u64) as usize)
        .collect()
}

#[derive(Clone, Copy)]
struct FloorEntry {
    backoff: u64,
    last: i64,
}

/// client-go's default expiry on signed nanosecond ticks: `event − last > 2·max`.
#[inline]
fn twice_max_expired(max: u64, event: i64, last: i64) -> bool {
    i128::from(event) - i128::from(last) > i128::from(max) * 2
}

impl FloorEntry {
    /// A new entry written at `now`.
    #[inline]
    fn fresh(initial: u64, now: i64) -> Self {
        FloorEntry {
            backoff: initial,
            last: now,
        }
    }

    /// client-go's `Next` on an existing entry: start over if stale as of
    /// `ev`, else double up to `max`; written at `now`.
    #[inline]
    fn advance(&mut self, ev: i64, now: i64, initial: u64, max: u64) -> u64 {
        self.backoff = if twice_max_expired(max, ev, self.last) {
            initial
        } else {
            self.backoff.saturating_mul(2).min(max)
        };
        self.last = now;
        self.backoff
    }

    /// client-go's `IsInBackOffSinceUpdate` at `ev`.
    #[inline]
    fn in_backoff_since_update(self, ev: i64, max: u64) -> bool {
        !twice_max_expired(max, ev, self.last)
            && i128::from(ev) - i128::from(self.last) < i128::from(self.backoff)
    }
}

/// The floor: an unlocked `HashMap` doing exactly what the crate does per call.
pub struct Floor<C: Clock> {
    map: HashMap<String, FloorEntry, foldhash::fast::RandomState>,
    clock: C,
    epoch: C::Instant,
    initial: u64,
    max: u64,
}

impl<C: Clock> Floor<C> {
    pub fn new(initial: Duration, max: Duration, clock: C) -> Self {
        let epoch = clock.now();
        Floor {
            map: HashMap::default(),
            clock,
            epoch,
            initial: initial.as_nanos() as u64,
            max: max.as_nanos() as u64,
        }
    }

    #[inline]
    fn expired(&self, event: i64, last: i64) -> bool {
        twice_max_expired(self.max, event, last)
    }

    #[inline]
    pub fn next(&mut self, key: &str, event: C::Instant) -> Duration {
        let ev = event.nanos_since(self.epoch);
        let now = self.clock.now().nanos_since(self.epoch);
        let (initial, max) = (self.initial, self.max);
        let backoff = match self.map.get_mut(key) {
            Some(e) => e.advance(ev, now, initial, max),
            None => {
                self.map
                    .insert(key.to_owned(), FloorEntry::fresh(initial, now));
                initial
            }
        };
        Duration::from_nanos(backoff)
    }

    #[inline]
    pub fn get(&self, key: &str) -> Duration {
        Duration::from_nanos(self.map.get(key).map_or(0, |e| e.backoff))
    }

    #[inline]
    pub fn is_in_backoff_since_update(&self, key: &str, event: C::Instant) -> bool {
        let Some(e) = self.map.get(key).copied() else {
            return false;
        };
        e.in_backoff_since_update(event.nanos_since(self.epoch), self.max)
    }

    #[inline]
    pub fn is_in_backoff_since(&self, key: &str, event: C::Instant) -> bool {
        let Some(e) = self.map.get(key).copied() else {
            return false;
        };
        let ev = event.nanos_since(self.epoch);
        if self.expired(ev, e.last) {
            return false;
        }
        let now = self.clock.now().nanos_since(self.epoch);
        i128::from(now) - i128::from(ev) < i128::from(e.backoff)
    }

    pub fn gc(&mut self) -> usize {
        let now = self.clock.now().nanos_since(self.epoch);
        let before = self.map.len();
        let max = self.max;
        self.map
            .retain(|_, e| i128::from(now) - i128::from(e.last) <= i128::from(max) * 2);
        before - self.map.len()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }
}

/// client-go's design: one reader-writer lock over the floor's map.
pub struct RwLockPort<C: Clock>(RwLock<Floor<C>>);

impl<C: Clock> RwLockPort<C> {
    pub fn new(initial: Duration, max: Duration, clock: C) -> Self {
        RwLockPort(RwLock::new(Floor::new(initial, max, clock)))
    }
    #[inline]
    pub fn next(&self, key: &str, event: C::Instant) -> Duration {
        self.0.write().next(key, event)
    }
    #[inline]
    pub fn get(&self, key: &str) -> Duration {
        self.0.read().get(key)
    }
    #[inline]
    pub fn is_in_backoff_since_update(&self, key: &str, event: C::Instant) -> bool {
        self.0.read().is_in_backoff_since_update(key, event)
    }
    #[inline]
    pub fn is_in_backoff_since(&self, key: &str, event: C::Instant) -> bool {
        self.0.read().is_in_backoff_since(key, event)
    }
    pub fn gc(&self) -> usize {
        self.0.write().gc()
    }
    pub fn len(&self) -> usize {
        self.0.read().len()
    }
}

/// The floor's map as a `DashMap` (sharded, a lock per shard), doing only
/// what the floor does: how much of the crate's cost is the sharded map's.
pub struct DashFloor<C: Clock> {
    map: dashmap::DashMap<String, FloorEntry, foldhash::fast::RandomState>,
    clock: C,
    epoch: C::Instant,
    initial: u64,
    max: u64,
}

impl<C: Clock> DashFloor<C> {
    pub fn new(initial: Duration, max: Duration, clock: C, shards: usize) -> Self {
        let epoch = clock.now();
        DashFloor {
            map: dashmap::DashMap::with_capacity_and_hasher_and_shard_amount(
                0,
                Default::default(),
                shards,
            ),
            clock,
            epoch,
            initial: initial.as_nanos() as u64,
            max: max.as_nanos() as u64,
        }
    }

    #[inline]
    pub fn next(&self, key: &str, event: C::Instant) -> Duration {
        let ev = event.nanos_since(self.epoch);
        let (initial, max) = (self.initial, self.max);
        let backoff = match self.map.get_mut(key) {
            Some(mut e) => {
                let now = self.clock.now().nanos_since(self.epoch);
                e.backoff = if twice_max_expired(max, ev, e.last) {
                    initial
                } else {
                    e.backoff.saturating_mul(2).min(max)
                };
                e.last = now;
                e.backoff
            }
            None => {
                let now = self.clock.now().nanos_since(self.epoch);
                self.map.insert(
                    key.to_owned(),
                    FloorEntry {
                        backoff: initial,
                        last: now,
                    },
                );
                initial
            }
        };
        Duration::from_nanos(backoff)
    }

    #[inline]
    pub fn is_in_backoff_since_update(&self, key: &str, event: C::Instant) -> bool {
        let Some(e) = self.map.view(key, |_, e| *e) else {
            return false;
        };
        let ev = event.nanos_since(self.epoch);
        !twice_max_expired(self.max, ev, e.last)
            && i128::from(ev) - i128::from(e.last) < i128::from(e.backoff)
    }
}
