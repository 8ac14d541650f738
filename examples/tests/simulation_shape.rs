//! The closed AWS model, run with the crate's strategies, must show the
//! shape published in "Exponential Backoff And Jitter" (AWS, 2015); and the
//! simulation must be deterministic for a seed.

#[test]
fn closed_model_reproduces_the_published_shape_at_100_clients() {
    let runs = 30;
    let cell = |a: &str| {
        let c = sim::closed_cell(100, a, runs, 7);
        (c.time_mean, c.calls_mean)
    };
    let (none_t, none_c) = cell("None");
    let (exp_t, exp_c) = cell("Exponential");
    let (full_t, full_c) = cell("FullJitter");
    let (equal_t, equal_c) = cell("EqualJitter");
    let (decorr_t, decorr_c) = cell("Decorr");
    // Jitter cuts calls by more than half against plain exponential backoff.
    assert!(
        full_c < exp_c / 2.0,
        "full jitter {full_c} vs exponential {exp_c}"
    );
    // Full and equal jitter need about the same calls (within 10 %) ...
    assert!(
        (full_c / equal_c - 1.0).abs() < 0.10,
        "full {full_c} vs equal {equal_c}"
    );
    // ... but equal jitter takes clearly longer.
    assert!(equal_t > full_t * 1.2, "equal {equal_t} vs full {full_t}");
    // No backoff finishes fastest and makes the most calls.
    for (t, c, name) in [
        (exp_t, exp_c, "exp"),
        (full_t, full_c, "full"),
        (equal_t, equal_c, "equal"),
        (decorr_t, decorr_c, "decorr"),
    ] {
        assert!(none_t < t, "None time {none_t} vs {name} {t}");
        assert!(none_c > c, "None calls {none_c} vs {name} {c}");
    }
}

#[test]
fn no_backoff_calls_grow_roughly_quadratically() {
    let c50 = sim::closed_cell(50, "None", 20, 3).calls_mean;
    let c100 = sim::closed_cell(100, "None", 20, 3).calls_mean;
    let growth = c100 / c50;
    // Doubling the clients multiplies the work by about 3.5 (quadratic: 4).
    assert!((3.0..4.5).contains(&growth), "{growth}");
}

#[test]
fn same_seed_same_results() {
    for a in sim::ALGORITHMS {
        assert_eq!(
            sim::closed_cell(20, a, 5, 42),
            sim::closed_cell(20, a, 5, 42),
            "{a}"
        );
    }
    assert_ne!(
        sim::closed_cell(20, "FullJitter", 5, 42),
        sim::closed_cell(20, "FullJitter", 5, 43)
    );
}

#[test]
fn open_model_budget_bounds_amplification_and_backoff_does_not() {
    let backoff_only = sim::open_run(2.0, "FullJitter", false, 5);
    let budgeted = sim::open_run(2.0, "FullJitter", true, 5);
    assert!(backoff_only.amplification > 2.0, "{backoff_only:?}");
    assert!(budgeted.amplification < 1.15, "{budgeted:?}");
    assert!(budgeted.goodput > 0.95, "{budgeted:?}");
}
