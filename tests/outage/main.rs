//! Outage-aware backoff, driven through a simulated controller on a mock
//! clock: detection, holding during an outage, and recovery.

mod detection;
mod holding;
mod recovery;
mod sim;
