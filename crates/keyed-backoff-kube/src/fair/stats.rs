//! What the fair queues tell about its seats and its waiting reconciles.

use std::time::Duration;

/// The priority a reconcile waits at. A seat that frees goes to a waiting
/// [`Changed`](Priority::Changed) reconcile before any
/// [`Resync`](Priority::Resync) one.
///
/// ```
/// use keyed_backoff_kube::Priority;
/// assert_eq!(Priority::Changed.as_str(), "changed");
/// assert_eq!(Priority::ALL, [Priority::Changed, Priority::Resync]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// The object's first reconcile here, or its first since its
    /// generation changed (its resource version, for kinds without a
    /// generation).
    Changed = 0,
    /// Anything else: a requeue after an error or an `Action::requeue`, a
    /// resync, an event that changed nothing the generation counts.
    Resync = 1,
}

impl Priority {
    /// Both priorities, the first served first.
    pub const ALL: [Priority; 2] = [Priority::Changed, Priority::Resync];

    /// Its name in metrics: `changed` or `resync`.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Changed => "changed",
            Priority::Resync => "resync",
        }
    }
}

/// A snapshot of the fair queues, from [`FairReconciles::stats`](crate::FairReconciles::stats).
///
/// ```
/// use keyed_backoff_kube::{FairStats, Priority};
/// let s = FairStats::default();
/// assert_eq!(s.waiting(Priority::Resync), 0);
/// assert_eq!(s.seats_in_use, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FairStats {
    /// Reconciles that may run at once.
    pub seats: u32,
    /// Reconciles running now.
    pub seats_in_use: u32,
    /// Reconciles waiting for a seat now, by [`Priority`] (index with
    /// `priority as usize`, or read [`waiting`](Self::waiting)).
    pub waiting: [usize; 2],
    /// Seats given so far, by [`Priority`].
    pub granted: [u64; 2],
    /// Reconciles that found no room to wait (their flow's backlog or
    /// their priority's queues full) and were requeued after a short wait
    /// instead, without running.
    pub requeued_full: u64,
    /// Waiting reconciles whose object was deleted (or replaced under the
    /// same name): they left without running.
    pub dropped_deleted: u64,
    /// Calls of the flow function that panicked (those objects went to
    /// the flow named `""`).
    pub flow_panics: u64,
    /// Waiting objects whose turn came but whose reconcile did not come
    /// for it within a few seconds (a controller that stopped, or one not
    /// wired): each lost its turn, and waits anew when it asks again.
    pub unclaimed: u64,
}

impl FairStats {
    /// Reconciles waiting for a seat now at `priority`.
    pub fn waiting(&self, priority: Priority) -> usize {
        self.waiting[priority as usize]
    }

    /// Seats given so far at `priority`.
    pub fn granted(&self, priority: Priority) -> u64 {
        self.granted[priority as usize]
    }
}

/// How long the oldest reconcile of one flow at one priority has waited,
/// from [`FairReconciles::longest_waits`](crate::FairReconciles::longest_waits).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowWait {
    /// The flow, as the flow function named it.
    pub flow: String,
    /// The priority its reconciles wait at.
    pub priority: Priority,
    /// How long its oldest waiting reconcile has waited.
    pub waited: Duration,
}
