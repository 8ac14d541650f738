//! Outage-aware backoff, driven through a simulated controller on a mock
//! clock: detection, parking during an outage, and recovery. Every test
//! drives the outage wrapper, `OutageAware`, over the in-process backoff.

mod detection;
mod observe;
mod parking;
mod recovery;
mod reported;
mod sim;
