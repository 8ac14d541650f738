//! What an [`ObjectBackoff`](crate::ObjectBackoff) has counted since it was
//! built.

use std::sync::atomic::{AtomicU64, Ordering};

/// Totals since the [`ObjectBackoff`](crate::ObjectBackoff) was built, for metrics.
///
/// ```
/// use keyed_backoff_kube::Stats;
/// let c = Stats::default();
/// assert_eq!(c.failures + c.refusals + c.successes + c.skips + c.panics, 0);
/// assert_eq!(c.fallback_answers + c.local_answers, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Failures that advanced an object's backoff (each is a retry with
    /// backoff: `workqueue_retries_total`).
    pub failures: u64,
    /// Failures that came while the object was still in backoff (an early
    /// run, such as one a watch event triggered): requeued at the wait left,
    /// not counted as a new failure.
    pub refusals: u64,
    /// Successful reconciles (each resets the object's backoff).
    pub successes: u64,
    /// Runs whose body was skipped because the object was still in backoff
    /// (only with [`skip_while_in_backoff`](crate::ObjectBackoffBuilder::skip_while_in_backoff)).
    pub skips: u64,
    /// Reconciles that panicked (each is also a failure or a refusal when
    /// the error policy sees it).
    pub panics: u64,
    /// Whether an outage is under way (only with
    /// [`outage`](crate::ObjectBackoffBuilder::outage) awareness on).
    pub in_outage: bool,
    /// Objects an outage parks now, or parks until they are let go after it.
    pub parked: usize,
    /// Outages declared so far.
    pub outages: u64,
    /// Answers the local fallback gave because a
    /// [`shared`](crate::ObjectBackoffBuilder::shared) store could not
    /// answer (unreachable, timed out, or another error): decisions this
    /// process made alone. Zero while the store is healthy.
    pub fallback_answers: u64,
    /// Answers the local fallback gave to a synchronous call (such as
    /// [`on_error`](crate::ObjectBackoff::on_error)) that could not wait
    /// for a healthy [`shared`](crate::ObjectBackoffBuilder::shared)
    /// store: the store hears of the outcome in the background. Normal
    /// with a hand-written error policy; not a sign of trouble.
    pub local_answers: u64,
}

/// One total, bumped from any thread.
#[derive(Debug, Default)]
pub(crate) struct Count(AtomicU64);

impl Count {
    pub(crate) fn add_one(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The live totals behind [`Stats`].
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) failures: Count,
    pub(crate) refusals: Count,
    pub(crate) successes: Count,
    pub(crate) skips: Count,
    pub(crate) panics: Count,
}

impl Tally {
    /// The totals now, with the outage wrapper's state when there is one.
    pub(crate) fn read(&self, outage: Option<OutageState>, answers: LocalAnswers) -> Stats {
        let manager = outage.unwrap_or_default();
        Stats {
            failures: self.failures.get(),
            refusals: self.refusals.get(),
            successes: self.successes.get(),
            skips: self.skips.get(),
            panics: self.panics.get(),
            in_outage: manager.in_outage,
            parked: manager.parked,
            outages: manager.outages,
            fallback_answers: answers.fallback,
            local_answers: answers.not_at_once,
        }
    }
}

/// What a shared store's local fallback answered, by why.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LocalAnswers {
    /// The store could not answer.
    pub(crate) fallback: u64,
    /// A synchronous call could not wait for the store.
    pub(crate) not_at_once: u64,
}

/// What the outage wrapper reports, for [`Stats`](crate::Stats).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OutageState {
    pub(crate) in_outage: bool,
    pub(crate) parked: usize,
    pub(crate) outages: u64,
}
