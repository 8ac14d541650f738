//! Building a manager: every setting checked by `build`, refused with an
//! error naming the field, and the settings that do not apply to the
//! chosen rule or order.

use keyed_backoff::clock::{Clock, MockClock, QuantaClock};
use keyed_backoff::strategy::{Constant, Strategy};
use keyed_backoff::{Backoff, ConfigError, Settings};

use std::collections::hash_map::RandomState;
use std::time::Duration;

const MAX_BACKOFF: Duration = Settings::MAX_BACKOFF;

const SEC: Duration = Duration::from_secs(1);

fn build_err(f: impl FnOnce() -> Result<Backoff<String>, ConfigError>) -> ConfigError {
    f().expect_err("configuration must be refused")
}

#[test]
fn bad_jitter_is_refused_naming_field_and_range() {
    for bad in [
        f64::NAN,
        -0.1,
        -f64::MIN_POSITIVE,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        let err = build_err(|| {
            Backoff::<String>::builder(SEC, 60 * SEC)
                .jitter(bad)
                .build()
        });
        assert_eq!(err.field(), "jitter");
        let msg = err.to_string();
        assert!(
            msg.contains("jitter") && msg.contains("finite number >= 0"),
            "{msg}"
        );
    }
    // Zero and large finite factors are allowed, as in client-go.
    assert!(
        Backoff::<String>::builder(SEC, 60 * SEC)
            .jitter(0.0)
            .build()
            .is_ok()
    );
    assert!(
        Backoff::<String>::builder(SEC, 60 * SEC)
            .jitter(1e300)
            .build()
            .is_ok()
    );
}

#[test]
fn absurd_durations_are_refused() {
    let err = build_err(|| Backoff::<String>::new(Duration::MAX, SEC));
    assert_eq!(err.field(), "initial");
    let err = build_err(|| Backoff::<String>::new(SEC, Duration::MAX));
    assert_eq!(err.field(), "max");
    assert!(err.to_string().contains("about 52 days"), "{err}");
    let just_over = MAX_BACKOFF + Duration::from_nanos(1);
    assert_eq!(
        build_err(|| Backoff::<String>::new(SEC, just_over)).field(),
        "max"
    );
    assert!(Backoff::<String>::new(MAX_BACKOFF, MAX_BACKOFF).is_ok());
}

#[test]
fn bad_shard_counts_are_refused() {
    for bad in [0, 1, 3, 100, 1 << 17] {
        let err = build_err(|| {
            Backoff::<String>::builder(SEC, 60 * SEC)
                .shards(bad)
                .build()
        });
        assert_eq!(err.field(), "shards", "{bad}");
    }
}

#[test]
fn an_expiry_set_after_the_clock_builds_and_the_last_expiry_wins() {
    // A custom expiry set after the clock is accepted (`build` refuses the
    // opposite order), and a later setting replaces an earlier one.
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .clock(clock.clone())
        .expiry(|_, _, _| true)
        .expiry(|_, _, _| false)
        .build()
        .expect("expiry after clock builds");
    b.next("k", clock.now());
    clock.advance(1_000 * SEC);
    assert_eq!(b.gc(), 0, "the second expiry (never stale) decides");
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .clock(clock.clone())
        .expiry(|_, _, _| false)
        .expire_after(5 * SEC)
        .build()
        .expect("a fixed window after a custom expiry builds");
    b.next("k", clock.now());
    clock.advance(6 * SEC);
    assert_eq!(b.gc(), 1, "the fixed window replaced the closure");
    // A fixed window is clock-independent and survives a clock change.
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .expire_after(5 * SEC)
        .clock(clock.clone())
        .build()
        .expect("valid");
    b.next("k", clock.now());
    clock.advance(5 * SEC + Duration::from_nanos(1));
    assert_eq!(b.gc(), 1);
}

#[test]
fn the_builder_accepts_every_setting_in_range() {
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .jitter(0.2)
        .build();
    assert!(b.is_ok());
    let ok = Backoff::<String>::builder(SEC, 60 * SEC)
        .shards(256)
        .build();
    assert!(ok.is_ok());
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .hasher(RandomState::new())
        .capacity(10_000)
        .expire_after(600 * SEC)
        .build()
        .expect("valid");
    assert!(b.is_empty());
    let quanta = Backoff::<String>::builder(SEC, 60 * SEC)
        .clock(QuantaClock)
        .build()
        .expect("valid");
    assert_eq!(quanta.next("k", quanta.clock().now()), SEC);
}

#[test]
fn one_seed_gives_one_jitter_sequence() {
    let make = || {
        Backoff::<String>::builder(SEC, 60 * SEC)
            .jitter(0.5)
            .seed(42)
            .clock(MockClock::new())
            .build()
            .unwrap()
    };
    let (a, b) = (make(), make());
    let t = a.clock().now();
    assert_eq!(a.next("k", t), b.next("k", t));
    assert_eq!(a.next("k", t), b.next("k", t));
}

#[test]
fn a_setting_that_does_not_apply_is_refused_by_build() {
    // A strategy carries its own jitter.
    let constant = Strategy::new(Constant::new(SEC)).unwrap();
    let err = Backoff::<String>::with_strategy(constant)
        .jitter(0.1)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "jitter");
    // A custom expiry is written for the clock's instant: a clock set after
    // it is refused, naming the clock.
    let err = Backoff::<String>::builder(SEC, 2 * SEC)
        .expiry(|_, _, _| false)
        .clock(MockClock::new())
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "clock");
    assert!(err.to_string().contains(".expiry"), "{err}");
}

#[test]
fn a_window_that_forgets_at_once_is_refused_and_configurations_that_never_wait_are_kept() {
    let err = Backoff::<String>::builder(SEC, 60 * SEC)
        .expire_after(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "expire_after");
    let constant = Strategy::new(Constant::new(SEC)).unwrap();
    let err = Backoff::<String>::with_strategy(constant)
        .expire_after(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "expire_after");
    // `initial` 0 (with `max` 0 or not) never waits, as in client-go, whose
    // recorded traces use it.
    let clock = MockClock::new();
    let never = Backoff::<String>::new(Duration::ZERO, Duration::ZERO).expect("client-go's");
    assert_eq!(never.next("k", std::time::Instant::now()), Duration::ZERO);
    let never = Backoff::<String>::builder(Duration::ZERO, 8 * SEC)
        .clock(clock.clone())
        .build()
        .expect("client-go's");
    assert_eq!(never.next("k", clock.now()), Duration::ZERO);
    assert_eq!(never.next("k", clock.now()), Duration::ZERO);
}
