//! Property test: random configs and op sequences give the same result on
//! the crate and on the reference model (the test kit's `model`) at every step.
//!
//! CI runs 2,000 cases (`PROPTEST_CASES` overrides it); to run millions:
//! `PROPTEST_CASES=1000000 cargo test --release --test model_proptest`.
//! Failures are shrunk and their seeds saved in
//! `tests/model_proptest.proptest-regressions`, which is committed so they are
//! replayed first on every run.

use keyed_backoff_testkit::model;
use keyed_backoff_testkit::model::{Armed, Config, Event, ExpiryKind, Op, RuleKind, Step};
use proptest::prelude::*;

/// Durations around the scales that matter: zero, a few ns, odd values,
/// seconds, the kubelet's 10 s / 300 s.
fn duration_ns() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        1u64..8,
        8u64..64,
        prop::sample::select(vec![
            1_000_000_000u64,
            10_000_000_000,
            60_000_000_000,
            300_000_000_000
        ]),
        0u64..2_000_000_000_000,
    ]
}

/// An attempt limit: none, valid ones, and the invalid edges (0, and one
/// past what an entry counts).
fn limit() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![
        3 => Just(None),
        2 => (1u32..10).prop_map(Some),
        1 => prop::sample::select(vec![0, 4_095, 4_096]).prop_map(Some),
    ]
}

fn rule() -> impl Strategy<Value = RuleKind> {
    prop_oneof![
        3 => Just(RuleKind::ClientGo),
        1 => limit().prop_map(RuleKind::Doubling),
        1 => limit().prop_map(RuleKind::Constant),
        1 => (duration_ns(), limit()).prop_map(|(step, m)| RuleKind::Linear(step, m)),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    (
        duration_ns(),
        duration_ns(),
        0u8..3,
        duration_ns(),
        rule(),
        prop::option::weighted(0.25, 1u32..5),
    )
        .prop_map(|(initial, max, kind, window, rule, amortized)| Config {
            initial,
            max,
            expiry: match kind {
                0 => ExpiryKind::TwiceMax,
                1 => ExpiryKind::Fixed(window),
                _ => ExpiryKind::Closure(window),
            },
            rule,
            amortized,
        })
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        Just(Event::Now),
        duration_ns().prop_map(Event::Ago),
        duration_ns().prop_map(Event::Ahead),
        (-2i8..=2).prop_map(Event::BackoffEdge),
        (-2i8..=2).prop_map(Event::ExpiryEdge),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..3;
    prop_oneof![
        3 => prop_oneof![
            duration_ns().prop_map(Step::Nanos),
            Just(Step::Initial),
            Just(Step::Max),
            (-2i8..=2).prop_map(Step::Window),
        ]
        .prop_map(Op::Advance),
        4 => (key.clone(), event()).prop_map(|(k, e)| Op::Next(k, e)),
        2 => key.clone().prop_map(Op::TryNext),
        1 => key.clone().prop_map(Op::Get),
        2 => (key.clone(), event()).prop_map(|(k, e)| Op::InSince(k, e)),
        2 => (key.clone(), event()).prop_map(|(k, e)| Op::InSinceUpdate(k, e)),
        1 => (key.clone(), event()).prop_map(|(k, e)| Op::Remaining(k, e)),
        1 => key.clone().prop_map(Op::Attempts),
        1 => key.prop_map(Op::Reset),
        1 => Just(Op::Gc),
        1 => Just(Op::Len),
        1 => Just(Op::Stats),
        1 => prop::sample::select(vec![Armed::Off, Armed::Panic, Armed::Reenter]).prop_map(Op::Arm),
        1 => (-60_000_000_000i64..60_000_000_000).prop_map(Op::RoundTrip),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(2_000),
        ..ProptestConfig::default()
    })]

    #[test]
    fn crate_agrees_with_the_model(cfg in config(), ops in prop::collection::vec(op(), 1..120)) {
        model::quiet_expected_panics();
        if let Err(disagreement) = model::run(cfg, &ops) {
            return Err(TestCaseError::fail(disagreement));
        }
    }
}

/// The byte decoder the fuzz target uses must produce valid programs too.
#[test]
fn decoded_byte_programs_agree() {
    model::quiet_expected_panics();
    let mut state = 0x1234_5678_9abc_def0u64;
    for _ in 0..300 {
        let bytes: Vec<u8> = (0..200)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let (cfg, ops) = model::decode(&bytes);
        model::run(cfg, &ops).unwrap();
    }
}
