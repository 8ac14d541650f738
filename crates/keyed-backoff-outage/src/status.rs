//! [`OutageStatus`]: what an outage-aware gate reports, for code that holds
//! it behind another type (a controller's backoff, a middleware).

use crate::domains::DomainStatus;
use std::sync::Arc;

/// What an outage-aware gate reports: whether an outage is under way, the
/// keys it parks, and the outages so far. [`OutageAware`](crate::OutageAware)
/// implements it, whether its outage is in process or shared by a fleet
/// (then its figures are the fleet's, as this replica last saw them), so
/// that an integration given such a gate (the kube crate's
/// `shared_outage_aware`) reports the outage it follows.
///
/// ```
/// use keyed_backoff::Backoff;
/// use keyed_backoff_outage::{OutageAware, OutageSettings, OutageStatus};
/// use std::time::Duration;
///
/// fn report(gate: &impl OutageStatus) -> String {
///     format!("in outage: {}, parked: {}, outages: {}", gate.in_outage(), gate.parked(), gate.outages())
/// }
/// let backoff = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
/// let gate = OutageAware::new(backoff, OutageSettings::default())?;
/// assert_eq!(report(&gate), "in outage: false, parked: 0, outages: 0");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait OutageStatus: Send + Sync {
    /// Whether an outage is under way now.
    fn in_outage(&self) -> bool;

    /// Keys parked now: during an outage, or after it until they are let
    /// go.
    fn parked(&self) -> usize;

    /// Outages declared so far.
    fn outages(&self) -> u64;

    /// Every domain tracked, with its own outage
    /// ([`OutageAware::domains`](crate::OutageAware::domains)); none for a
    /// gate that keeps no domains.
    fn domains(&self) -> Vec<DomainStatus> {
        Vec::new()
    }
}

/// A shared gate reports what the gate reports.
impl<T: OutageStatus + ?Sized> OutageStatus for Arc<T> {
    fn in_outage(&self) -> bool {
        (**self).in_outage()
    }

    fn parked(&self) -> usize {
        (**self).parked()
    }

    fn outages(&self) -> u64 {
        (**self).outages()
    }

    fn domains(&self) -> Vec<DomainStatus> {
        (**self).domains()
    }
}
