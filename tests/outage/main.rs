//! Outage-aware backoff, driven through a simulated controller on a mock
//! clock: detection, holding during an outage, and recovery.

mod detection;
mod holding;
mod noted;
mod observe;
mod recovery;
mod sim;
