//! One parked key: what the outage remembers of it, and what it may do now.

use std::time::Duration;

use keyed_backoff::InBackoff;
use keyed_backoff::Level;

/// A key parked by an outage. `L` is the key's own level when it was first
/// parked (its entry, if it had one), kept to be given back when it is let
/// go: however long the outage, the key's own ladder continues from there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parked<L> {
    pub(crate) level: L,
    /// The step of the ladder in which its failure was counted (its try).
    pub(crate) counted_in: Option<u64>,
    /// The step in which it claimed a turn to probe.
    pub(crate) probe_in: Option<u64>,
    /// When it is let go after the outage, once it has asked.
    pub(crate) release_at: Option<Duration>,
}

impl<L> Parked<L> {
    /// A key first parked now, at its own `level`.
    pub(crate) fn new(level: L) -> Self {
        Parked {
            level,
            counted_in: None,
            probe_in: None,
            release_at: None,
        }
    }
}

/// What a parked key may do at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Try the dependency now.
    Go,
    /// Wait until this time (on the same line as the instant asked about).
    Wait(Duration),
}

/// The answer to a failure of a key the outage keeps parked, `wait`
/// longer (counted when it was the key's turn), whose own wait (its
/// backoff or its floor, asked of the gate under the wrapper) is `own`
/// and whose level is `level`: the wrapper's one rule for it, in process
/// and for a fleet. The key waits the longer of the two; the failure
/// advances it only when it was its turn and its own wait is over.
pub fn parked_failure(
    own: Option<Duration>,
    wait: Duration,
    counted: bool,
    level: Option<Level>,
) -> Result<Level, InBackoff> {
    let remaining = own.unwrap_or_default().max(wait);
    match counted && own.is_none() {
        true => Ok(Level {
            backoff: remaining,
            attempts: level.map_or(0, |l| l.attempts),
        }),
        false => Err(InBackoff { remaining }),
    }
}
