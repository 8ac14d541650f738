//! `.seed(n)` is reproducible on every platform and every `rand` version:
//! the draws are SplitMix64's published reference stream, so the values
//! below were computed outside this crate (with the reference algorithm)
//! and must never change.

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::strategy::{FullJitter, Strategy};
use std::time::Duration;

/// The first ten draws of seed 7: SplitMix64 outputs from state 7, top 53
/// bits as a fraction of 2^53.
const SEED_7: [f64; 10] = [
    0.3898297483912715,
    0.01678829452815611,
    0.9007606806068834,
    0.5829302930280781,
    0.45244189501146836,
    0.24943152228274335,
    0.46795300422287345,
    0.3280767391525029,
    0.13425829880844864,
    0.41314139741777933,
];

#[test]
fn keyed_manager_seed_7_gives_the_pinned_jitter() {
    // client-go's strategy with jitter 1: first = initial + ⌊u·initial⌋, then
    // 2·prev + ⌊u·prev⌋ (capped far above these values).
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(1_000_000))
        .jitter(1.0)
        .seed(7)
        .clock(clock.clone())
        .build()
        .expect("valid");
    let got: Vec<u128> = (0..10)
        .map(|_| b.next("k", clock.now()).as_nanos())
        .collect();
    assert_eq!(
        got,
        [
            1_389_829_748,
            2_802_992_367,
            8_130_810_046,
            21_001_315_574,
            51_504_506_164,
            115_855_859_704,
            285_926_817_013,
            665_659_571_787,
            1_420_689_465_267,
            3_428_324_561_511,
        ]
    );
}

#[test]
fn strategy_seed_7_gives_the_pinned_draws() {
    // Full jitter with a cap of 1 s and base 1 s: every delay is u · 1 s.
    let s = Strategy::new(FullJitter::new(
        Duration::from_secs(1),
        Duration::from_secs(1),
    ))
    .expect("valid")
    .seed(7);
    let got: Vec<f64> = s.iter().take(10).map(|d| d.as_secs_f64()).collect();
    for (n, (g, u)) in got.iter().zip(SEED_7).enumerate() {
        assert!((g - u).abs() < 1e-9, "draw {n}: {g} vs {u}");
    }
}
