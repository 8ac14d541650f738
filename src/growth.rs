//! How a backoff grows: how `next` moves an entry's backoff.
//!
//! The default is client-go's ([`FactorJitter`]), called without dynamic
//! dispatch; any other [`Step`] can replace it. Random draws come from a
//! lock-free, reproducible source.

use std::time::Duration;

use crate::draws::UnitDraws;
use crate::duration::saturating_nanos;
use crate::strategy::{FactorJitter, Step};

#[derive(Debug)]
pub(crate) enum Formula {
    ClientGo(FactorJitter),
    Strategy(Box<dyn Step>),
}

#[derive(Debug)]
pub(crate) struct Growth {
    formula: Formula,
    draws: UnitDraws,
}

impl Growth {
    pub(crate) fn new(formula: Formula, seed: u64) -> Self {
        Growth {
            formula,
            draws: UnitDraws::new(seed),
        }
    }

    /// The formula, as a strategy.
    pub(crate) fn step(&self) -> &dyn Step {
        match &self.formula {
            Formula::ClientGo(f) => f,
            Formula::Strategy(s) => s.as_ref(),
        }
    }

    /// The backoff of a new or re-initialised entry, in nanoseconds.
    #[inline]
    pub(crate) fn first(&self) -> u64 {
        let unit = &mut || self.draws.next_unit();
        match &self.formula {
            Formula::ClientGo(f) => f.first_ns(unit),
            Formula::Strategy(s) => s.delay(0, None, unit).map_or(0, saturating_nanos),
        }
    }

    /// The backoff after `previous_ns`, once `attempts` delays were given.
    /// A strategy that gives up keeps the previous backoff.
    #[inline]
    pub(crate) fn following(&self, previous_ns: u64, attempts: u32) -> u64 {
        let unit = &mut || self.draws.next_unit();
        match &self.formula {
            Formula::ClientGo(f) => f.following_ns(previous_ns, unit),
            Formula::Strategy(s) => s
                .delay(attempts, Some(Duration::from_nanos(previous_ns)), unit)
                .map_or(previous_ns, saturating_nanos),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_go(initial: u64, max: u64, jitter: f64) -> Growth {
        let f = FactorJitter::new(Duration::from_nanos(initial), Duration::from_nanos(max))
            .jitter(jitter);
        Growth::new(Formula::ClientGo(f), 7)
    }

    #[test]
    fn doubles_and_caps_without_jitter() {
        let r = client_go(10, 35, 0.0);
        assert_eq!(r.first(), 10);
        assert_eq!(r.following(10, 1), 20);
        assert_eq!(r.following(20, 2), 35);
        assert_eq!(r.following(u64::MAX, 3), 35);
    }

    #[test]
    fn jitter_is_drawn_from_previous_and_added_before_cap() {
        let r = client_go(1_000, u64::MAX, 0.5);
        for _ in 0..1_000 {
            let v = r.following(1_000, 1);
            assert!((2_000..2_500).contains(&v), "{v}");
            let f = r.first();
            assert!((1_000..1_500).contains(&f), "{f}");
        }
        let capped = client_go(1_000, 2_100, 0.5);
        assert!((0..1_000).all(|_| capped.following(1_000, 1) <= 2_100));
    }
}
