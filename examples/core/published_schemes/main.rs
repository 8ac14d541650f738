//! Published backoff schemes as user-written strategies: Ethernet's
//! (IEEE 802.3), Hadoop's `RetryPolicies.exponentialBackoffRetry`, Google
//! Cloud's retry guidance and cenkalti/backoff's `ExponentialBackOff`.
//!
//! None of them is in the library: each is a [`Step`] written over the
//! public trait in `schemes.rs`, validated and seeded by [`Strategy`] like
//! the library's own formulas, and usable by the keyed manager through
//! [`Backoff::with_strategy`](keyed_backoff::Backoff::with_strategy). Copy
//! the one you need. Their tests (`tests.rs`) run with `cargo test`.
//!
//! Run: `cargo run --example published_schemes`

use std::time::Duration;

use keyed_backoff::strategy::{Step, Strategy};

// Every setter is there to copy with its scheme; the demo calls a few.
#[allow(dead_code)]
mod schemes;
#[cfg(test)]
mod tests;

use schemes::{Cenkalti, Ethernet, GoogleCloud, Hadoop};

/// The first delays of `step`, seeded, as one line.
fn show(name: &str, step: impl Step + Clone) -> Result<(), keyed_backoff::ConfigError> {
    let delays: Vec<String> = Strategy::new(step)?
        .seed(7)
        .iter()
        .take(8)
        .map(|d| format!("{d:.2?}"))
        .collect();
    println!("{name:<28} {}", delays.join(", "));
    Ok(())
}

fn main() -> Result<(), keyed_backoff::ConfigError> {
    let ms = Duration::from_millis(1);
    show(
        "Ethernet, slot 51.2 µs",
        Ethernet::new(Duration::from_nanos(51_200)),
    )?;
    show(
        "Hadoop 100 ms, cap 10 s",
        Hadoop::new(100 * ms, 20).max(10_000 * ms),
    )?;
    show("Google Cloud, max 32 s", GoogleCloud::new())?;
    show("cenkalti defaults", Cenkalti::new())?;
    // The manager takes any of them: a key's delays follow the scheme.
    let scheme = Strategy::new(GoogleCloud::new())?.seed(7);
    let keyed = keyed_backoff::Backoff::<String>::with_strategy(scheme).build()?;
    if let Ok(wait) = keyed.try_next_now("object") {
        println!("a key failing for the first time under Google Cloud's scheme waits {wait:.2?}");
    }
    Ok(())
}
