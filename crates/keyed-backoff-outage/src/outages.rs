//! The outages a state keeps, and the one rule that composes them: the
//! outage of everything, and one outage per domain a failure names
//! ([`Domains`]), each a [`One`] (a watch in this process, or a fleet's
//! state in a store). Written once for both: the in-process state and a
//! fleet's differ only in where each outage lives.
//!
//! The rule: the outage of everything comes first (while it parks a key,
//! no domain is asked); otherwise the domain the caller names, or the one
//! the key was last named with, rules it. A failure is told to the outage of
//! everything and, when it starts the key's ladder, to its domain's; a
//! success to both.

use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::{Either, ready};
use keyed_backoff::{InBackoff, Level};

use crate::domains::{DomainStatus, Domains, Named};
use crate::one::One;
use crate::state::{Asked, Ruling};
use crate::watch::Tally;

/// The outage of everything and the domains', composed by one rule.
pub struct Outages<S> {
    everything: S,
    domains: Domains<S>,
}

impl<S> Outages<S> {
    /// The outage of everything.
    pub(crate) fn everything(&self) -> &S {
        &self.everything
    }
}

impl<S: One> Outages<S> {
    /// Over `everything`, tracking at most `max_domains` domains, their
    /// seeds drawn from `seed`.
    pub(crate) fn new(everything: S, max_domains: u32, seed: u64) -> Self {
        Outages {
            everything,
            domains: Domains::new(max_domains, seed),
        }
    }

    /// Whether an outage that may rule `key` is under way: the outage of
    /// everything, or of the domain named (`domain`) or the key's. In
    /// process with no outage of everything or of any domain under way,
    /// answered at once without asking about the key.
    #[inline]
    pub(crate) fn active<'a, Q: Hash + Sync + ?Sized>(
        &'a self,
        key: &'a Q,
        domain: Option<&'a str>,
    ) -> impl Future<Output = bool> + Send + 'a {
        let at_rest = S::AT_ONCE && !self.everything.seen_active() && !self.domains.any_active();
        match at_rest {
            true => Either::Left(ready(false)),
            false => Either::Right(self.asked_active(key, domain)),
        }
    }

    async fn asked_active<Q: Hash + Sync + ?Sized>(&self, key: &Q, domain: Option<&str>) -> bool {
        if self.everything.active().await {
            return true;
        }
        match self.domains.of(key, domain) {
            Some(domain) => domain.one.active().await,
            None => false,
        }
    }

    /// The wait the key would be told if it asked to run: the longer of
    /// the outage of everything's and its domain's.
    pub(crate) async fn peek<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        level: Option<Level>,
    ) -> Option<Duration> {
        let mut everything = None;
        if self.everything.active().await {
            everything = self.everything.peek(key, level).await;
        }
        let mut own = None;
        if let Some(domain) = self.domains.of(key, None)
            && domain.one.active().await
        {
            own = domain.one.peek(key, level).await;
        }
        everything.max(own)
    }

    /// What the key may do: parked by the outage of everything, else
    /// ruled by its domain's (the one named, in which a failing key is
    /// remembered, parked or not; else the one it is remembered in). A
    /// release of everything lets the key go unless its domain parks it.
    pub(crate) async fn ruling<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        asked: Asked,
        level: Option<Level>,
        domain: Option<&str>,
    ) -> Ruling<Option<Level>> {
        let mut everything = Ruling::Free;
        if self.everything.active().await {
            everything = self.everything.ruling(key, asked, level).await;
            if let Ruling::Parked { .. } = everything {
                return everything;
            }
        }
        let domain = match domain {
            Some(name) => self.named_for(self.domains.hash(key), name),
            None => self.domains.of(key, None),
        };
        let mut own = Ruling::Free;
        if let Some(domain) = domain
            && domain.one.active().await
        {
            own = domain.one.ruling(key, asked, level).await;
        }
        match (everything, own) {
            (Ruling::Free, own) | (_, own @ Ruling::Parked { .. }) => own,
            (everything, _) => everything,
        }
    }

    /// A failure the key's own backoff was told: a counted one to the
    /// outage of everything and, when it starts the key's ladder, to the
    /// domain named, which remembers the key. Comes back as it went in.
    /// Made without a future of its own but where a domain hears of it:
    /// a failure that goes on with a key's ladder is only counted.
    #[inline]
    pub(crate) fn failed<'a, Q: Hash + Sync + ?Sized>(
        &'a self,
        key: &'a Q,
        outcome: Result<Level, InBackoff>,
        domain: Option<&'a str>,
    ) -> impl Future<Output = Result<Level, InBackoff>> + Send + 'a {
        match (outcome, domain) {
            // A domain hears of the failures that start its keys' ladders
            // (and of their successes): a failure that goes on with a
            // key's ladder counts in the outage of everything alone.
            (Ok(level), Some(name)) if level.attempts == 1 => {
                Either::Right(self.failed_in(key, level, name).map(move |()| outcome))
            }
            (Ok(level), _) => Either::Left(Either::Left(
                self.everything.failed(key, level).map(move |()| outcome),
            )),
            (Err(_), _) => Either::Left(Either::Right(ready(outcome))),
        }
    }

    async fn failed_in<Q: Hash + Sync + ?Sized>(&self, key: &Q, level: Level, name: &str) {
        self.everything.failed(key, level).await;
        let Some(domain) = self.named_for(self.domains.hash(key), name) else {
            return;
        };
        domain.one.failed(key, level).await;
        self.domains.used(&domain);
    }

    /// The domain `name`, the key with `hash` remembered in it: found from
    /// the key when it is remembered there already (mostly: a key is
    /// mostly named with the same domain), else by name. A key named with
    /// a domain that is not tracked is remembered in none.
    fn named_for(&self, hash: u64, name: &str) -> Option<Arc<Named<S>>> {
        if let Some(known) = self.domains.remembered(hash)
            && *known.name == *name
        {
            return Some(known);
        }
        let named = self.domains.named(name, &self.everything);
        match &named {
            Some(domain) => self.domains.remember(hash, domain),
            None => _ = self.domains.forget(hash),
        }
        named
    }

    /// A success of the key: told to the outage of everything, and to the
    /// domain named (which remembers the key) or, when none is, the one
    /// the key is remembered in (which forgets it).
    #[inline]
    pub(crate) fn succeeded<'a, Q: Hash + Sync + ?Sized>(
        &'a self,
        key: &'a Q,
        domain: Option<&'a str>,
    ) -> impl Future<Output = ()> + Send + 'a {
        if domain.is_some() || self.domains.any_remembered() {
            Either::Right(self.succeeded_in(key, domain))
        } else {
            Either::Left(self.everything.succeeded(key))
        }
    }

    async fn succeeded_in<Q: Hash + Sync + ?Sized>(&self, key: &Q, name: Option<&str>) {
        self.everything.succeeded(key).await;
        let hash = self.domains.hash(key);
        let domain = match name {
            Some(name) => self.named_for(hash, name),
            None => self.domains.forget(hash),
        };
        if let Some(domain) = domain {
            domain.one.succeeded(key).await;
        }
    }

    /// Every tracked domain's state, by name.
    pub(crate) fn domains(&self) -> Vec<DomainStatus> {
        self.domains.statuses()
    }

    /// The outage of everything's figures.
    pub(crate) fn tally(&self) -> Tally {
        self.everything.tally()
    }
}
