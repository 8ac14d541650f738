//! What an [`Apf`] tells about its levels: hands, counts and the
//! `Retry-After` each advises.

use std::hash::Hash;
use std::time::Duration;

use super::{Apf, LevelId, LevelStats};
use crate::queue_set::Mode;
use crate::{Hand, WorkEstimator};

impl Apf {
    /// The queues `flow` is dealt at `level`, or `None` if the level does
    /// not queue (or belongs to another `Apf`).
    ///
    /// ```
    /// use fair_admission::{Apf, LevelSpec, LimitResponse};
    /// let queuing = LimitResponse::Queue { queues: 64, queue_length_limit: 50, hand_size: 8 };
    /// let apf = Apf::builder(10).level("l", LevelSpec::limited(1, queuing)).build()?;
    /// let hand: Vec<usize> = apf.hand(apf.level_id("l").unwrap(), &"alice").unwrap().collect();
    /// assert_eq!(hand.len(), 8);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn hand<F: Hash + ?Sized>(&self, level: LevelId, flow: &F) -> Option<Hand> {
        let l = &self.levels[self.index_of(level)?];
        match &l.queues.mode {
            Mode::Queue { dealer, .. } => Some(dealer.deal(self.flow_hash(flow))),
            _ => None,
        }
    }

    /// The most seats a work estimate should give one request at `level`,
    /// as Kubernetes' controller sets it for a queuing level:
    /// `max(1, min(ceil(0.15 × nominal seats), nominal seats / hand size))`
    /// (see [`WorkEstimator::level_max_seats`]; the estimators cap it again
    /// at their own maximum). `None` for a level that does not queue, or of
    /// another `Apf`: the estimators' own maximum applies.
    ///
    /// ```
    /// use fair_admission::{Apf, LevelSpec, LimitResponse, RequestInfo, WorkEstimator};
    /// let queuing = LimitResponse::Queue { queues: 64, queue_length_limit: 50, hand_size: 6 };
    /// let apf = Apf::builder(20).level("l", LevelSpec::limited(1, queuing)).build()?;
    /// let level = apf.level_id("l").unwrap();
    /// assert_eq!(apf.max_seats(level), Some(3)); // min(ceil(3), 20 / 6)
    /// let write = RequestInfo { verb: "update", resource: "configmaps", ..RequestInfo::default() };
    /// let work = WorkEstimator::default().mutating(&write, apf.max_seats(level), 1_000);
    /// assert_eq!(work.max_seats(), 3);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn max_seats(&self, level: LevelId) -> Option<u32> {
        let l = &self.levels[self.index_of(level)?];
        match &l.queues.mode {
            Mode::Queue { dealer, .. } => {
                let hand = u32::try_from(dealer.hand_size()).unwrap_or(u32::MAX);
                WorkEstimator::level_max_seats(l.nominal, hand).ok()
            }
            _ => None,
        }
    }

    /// The counts of `level`, or `None` if it belongs to another `Apf`.
    ///
    /// ```
    /// use fair_admission::{Apf, LevelSpec, LimitResponse};
    /// let mut apf = Apf::builder(2).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
    /// let level = apf.level_id("l").unwrap();
    /// let _ = apf.admit(level, &"f", 2);
    /// let _ = apf.admit(level, &"f", 1);
    /// let s = apf.level_stats(level).unwrap();
    /// assert_eq!((s.seats_in_use, s.dispatched, s.rejected), (2, 1, 1));
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn level_stats(&self, level: LevelId) -> Option<LevelStats> {
        Some(self.levels[self.index_of(level)?].stats())
    }

    /// The `Retry-After` `level` advises now, or `None` if the level
    /// belongs to another `Apf`: Kubernetes' adaptive rule over the level's
    /// refusals (1 s, doubling up to 32 s while it keeps refusing), on the
    /// clock [`advance_to`](Self::advance_to) is given.
    ///
    /// ```
    /// use fair_admission::{Apf, LevelSpec, LimitResponse};
    /// use std::time::Duration;
    /// let mut apf = Apf::builder(1).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
    /// let l = apf.level_id("l").unwrap();
    /// let _ = apf.admit(l, &"runs", 1);
    /// for _ in 0..3 {
    ///     let _ = apf.admit(l, &"refused", 1); // three refusals in second 0
    /// }
    /// apf.advance_to(Duration::from_secs(1));
    /// let _ = apf.admit(l, &"refused", 1); // the first refusal of second 1
    /// assert_eq!(apf.retry_after(l), Some(Duration::from_secs(2)));
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn retry_after(&self, level: LevelId) -> Option<Duration> {
        Some(self.levels[self.index_of(level)?].drops.retry_after())
    }
}
