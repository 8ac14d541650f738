//! Outages per domain: the dependency a failure names (a region, a
//! webhook, a host), each with an outage of its own beside the outage of
//! everything.
//!
//! A domain is named by the caller when it reports a failure
//! ([`OutageAware::domains`](crate::OutageAware::domains)). Its outage is
//! a [`One`] of the same kind as the outage of everything (in this
//! process, or a fleet's in its store): the same detector, ladder, probes
//! and release, fed the failures named with the domain that start a key's
//! ladder (a failure that goes on with one counts in the outage of
//! everything alone, and costs nothing more than there), the successes
//! named with it, and the successes of the keys remembered in it. A key is
//! remembered, by a hash, in the domain it was last named with (its
//! fresh failure's, or its success's) until a success names no domain, so
//! that a caller asking to run it (a claim, which names no domain) is
//! answered by its domain's outage, even before it fails in that outage.
//! In a fleet each replica remembers the keys named on it.
//!
//! Bounded: at most [`max_domains`](crate::OutageSettings::max_domains)
//! domains are tracked; when a new one is named at the cap, the domain idle
//! longest with no outage under way is forgotten (with the keys remembered
//! in it), and if every tracked domain has an outage under way, the new
//! one is not tracked (its failures count in the outage of everything
//! alone). At most [`MAX_KEYS`] keys are remembered: at the cap every key
//! is forgotten, and keys are learned again as they are named (until then
//! a key's claims are answered by the outage of everything alone).

use std::hash::{BuildHasher, Hash};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use dashmap::DashMap;
use parking_lot::Mutex;

use crate::one::One;

/// The most keys remembered in a domain at once, across all domains.
pub(crate) const MAX_KEYS: usize = 1 << 20;

/// One tracked domain.
pub(crate) struct Named<S> {
    pub(crate) name: Box<str>,
    pub(crate) one: S,
    /// When a key last newly failed in it: a number from `Domains::uses`.
    used: AtomicU64,
}

/// The domains tracked, and the keys remembered in them.
pub(crate) struct Domains<S> {
    max_domains: usize,
    seed: u64,
    hasher: foldhash::quality::FixedState,
    /// Read without a lock shared by all (its shards'); changed under
    /// `tracking`, one change at a time.
    named: DashMap<Box<str>, Arc<Named<S>>, foldhash::fast::FixedState>,
    tracking: Mutex<()>,
    keys: DashMap<u64, Arc<Named<S>>, foldhash::fast::FixedState>,
    remembered: AtomicUsize,
    /// Domains with an outage or a release under way (counted by states
    /// that can say so at once).
    actives: Arc<AtomicUsize>,
    /// Uses so far: the order in which domains were last used.
    uses: AtomicU64,
}

/// A domain's state, as [`OutageAware::domains`](crate::OutageAware::domains)
/// reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DomainStatus {
    /// The domain's name, as the caller gave it.
    pub name: String,
    /// Whether its outage is under way.
    pub in_outage: bool,
    /// Keys parked in its outage now.
    pub parked: usize,
    /// Its outages declared so far (since it was last tracked).
    pub outages: u64,
}

impl<S: One> Domains<S> {
    pub(crate) fn new(max_domains: u32, seed: u64) -> Self {
        Domains {
            max_domains: max_domains as usize,
            seed,
            hasher: foldhash::quality::FixedState::with_seed(seed ^ 0x6b65_7965_642d_646f),
            named: DashMap::default(),
            tracking: Mutex::new(()),
            keys: DashMap::default(),
            remembered: AtomicUsize::new(0),
            actives: Arc::default(),
            uses: AtomicU64::new(0),
        }
    }

    /// Whether any domain has an outage or a release under way: while
    /// none has, no key is asked about its domain.
    #[inline]
    pub(crate) fn any_active(&self) -> bool {
        self.actives.load(Ordering::Relaxed) > 0
    }

    /// Whether any key is remembered in a domain: while none is, no claim
    /// has a domain to be asked of.
    #[inline]
    pub(crate) fn any_remembered(&self) -> bool {
        self.remembered.load(Ordering::Relaxed) > 0
    }

    /// The key's hash, as domains remember it.
    #[inline]
    pub(crate) fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The domain named `name`, tracked from now if it was not (its
    /// state made beside `everything`), or `None` when the cap is reached
    /// and every tracked domain has an outage under way, or no domain can
    /// be kept beside `everything`.
    #[inline]
    pub(crate) fn named(&self, name: &str, everything: &S) -> Option<Arc<Named<S>>> {
        if let Some(domain) = self.named.get(name) {
            return Some(Arc::clone(&domain));
        }
        self.track(name, everything)
    }

    /// Marks `domain` used (a fresh failure in it): the domain idle
    /// longest is the one whose keys last newly failed longest ago.
    pub(crate) fn used(&self, domain: &Named<S>) {
        domain.used.store(self.next_use(), Ordering::Relaxed);
    }

    /// The next number in the order of uses: a load and a store, not a
    /// read-modify-write (two domains used at once may take the same
    /// number, which only ties them for eviction).
    fn next_use(&self) -> u64 {
        let next = self.uses.load(Ordering::Relaxed).wrapping_add(1);
        self.uses.store(next, Ordering::Relaxed);
        next
    }

    #[inline(never)]
    fn track(&self, name: &str, everything: &S) -> Option<Arc<Named<S>>> {
        let _tracking = self.tracking.lock();
        if let Some(domain) = self.named.get(name) {
            return Some(Arc::clone(&domain));
        }
        if self.named.len() >= self.max_domains {
            let idle = self
                .named
                .iter()
                .filter(|domain| !domain.one.seen_active())
                .min_by_key(|domain| domain.used.load(Ordering::Relaxed))
                .map(|domain| domain.name.clone())?;
            // Found above, under the same lock as every insert and removal.
            if let Some((_, gone)) = self.named.remove(&idle) {
                self.keys.retain(|_, domain| !Arc::ptr_eq(domain, &gone));
                self.remembered.store(self.keys.len(), Ordering::Relaxed);
            }
        }
        let seed = self.seed ^ self.hash(name);
        let one = everything.domain(name, seed, &self.actives)?;
        let domain = Arc::new(Named {
            name: name.into(),
            one,
            used: AtomicU64::new(self.next_use()),
        });
        self.named.insert(name.into(), Arc::clone(&domain));
        Some(domain)
    }

    /// The domain `name` if tracked, else the domain `key` was last named
    /// with if it is remembered: in this process only while any domain has an
    /// outage under way (else no domain is asked about a key); a fleet's
    /// domains are asked, as another replica may have begun their outage.
    #[inline]
    pub(crate) fn of<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        name: Option<&str>,
    ) -> Option<Arc<Named<S>>> {
        if S::AT_ONCE && !self.any_active() {
            return None;
        }
        match name {
            Some(name) => self.named.get(name).map(|domain| Arc::clone(&domain)),
            // Hashed only when a key is remembered at all.
            None if self.any_remembered() => self.remembered(self.hash(key)),
            None => None,
        }
    }

    /// The domain the key with `hash` was last named with, if it is
    /// remembered.
    #[inline]
    pub(crate) fn remembered(&self, hash: u64) -> Option<Arc<Named<S>>> {
        if !self.any_remembered() {
            return None;
        }
        self.keys.get(&hash).map(|domain| Arc::clone(&domain))
    }

    /// Remembers the key with `hash` in `domain`. At the cap every key is
    /// forgotten first, to be learned again as keys are named.
    pub(crate) fn remember(&self, hash: u64, domain: &Arc<Named<S>>) {
        if self.remembered.load(Ordering::Relaxed) >= MAX_KEYS {
            self.forget_all();
        }
        if self.keys.insert(hash, Arc::clone(domain)).is_none() {
            self.remembered.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[inline(never)]
    fn forget_all(&self) {
        let _tracking = self.tracking.lock();
        if self.remembered.load(Ordering::Relaxed) >= MAX_KEYS {
            self.keys.clear();
            self.remembered.store(0, Ordering::Relaxed);
        }
    }

    /// Forgets the key with `hash` (it succeeded, naming no domain): the
    /// domain it was remembered in, if any.
    #[inline]
    pub(crate) fn forget(&self, hash: u64) -> Option<Arc<Named<S>>> {
        if !self.any_remembered() {
            return None;
        }
        let (_, domain) = self.keys.remove(&hash)?;
        // Never below zero, should a removal race the cap's clearing.
        let _ = self
            .remembered
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        Some(domain)
    }

    /// Every tracked domain's state, by name.
    pub(crate) fn statuses(&self) -> Vec<DomainStatus> {
        let mut all: Vec<DomainStatus> = self
            .named
            .iter()
            .map(|domain| {
                let tally = domain.one.tally();
                DomainStatus {
                    name: domain.name.to_string(),
                    in_outage: tally.in_outage,
                    parked: tally.parked,
                    outages: tally.outages,
                }
            })
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }
}
