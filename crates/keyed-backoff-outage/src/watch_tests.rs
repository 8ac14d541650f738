//! Tests of the watch: what it parks, lets go and counts.

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// 3 keys declare an outage; 1 s → 4 s ladder, 2 probes, 10 keys/s.
fn watch() -> Watch<Option<u32>> {
    let settings = OutageSettings::new()
        .min_failing_keys(3)
        .ladder(ms(1_000), ms(4_000))
        .probes(Some(2))
        .release_rate(10.0)
        .recovery_successes(1);
    Watch::new(settings, 7)
}

/// Declares an outage at 1 s; returns the events seen.
fn declare(w: &Watch<Option<u32>>) -> Vec<Event> {
    let mut seen = Vec::new();
    for k in 100..103u32 {
        w.failed(&k, true, ms(1_000), |e| seen.push(e));
    }
    seen
}

fn until(v: Ruling<Option<u32>>) -> Duration {
    match v {
        Ruling::Parked { until, .. } => until,
        other => panic!("not parked: {other:?}"),
    }
}

#[test]
fn nothing_is_parked_until_an_outage_is_declared() {
    let w = watch();
    assert_eq!(
        w.ruling(&1, ms(0), Asked::Claim, None, |_| {}),
        Ruling::Free
    );
    w.failed(&200, true, ms(0), |_| {});
    // The same key again is not a second key.
    w.failed(&200, true, ms(0), |_| {});
    assert!(!w.active());
    let seen = declare(&w);
    assert!(matches!(seen[..], [Event::Began(c)] if c.fresh_failures == 3));
    assert!(w.active());
    let t = w.tally();
    assert_eq!((t.in_outage, t.parked, t.outages), (true, 0, 1));
}

#[test]
fn during_an_outage_few_keys_go_and_the_rest_wait_on_the_ladder() {
    let w = watch();
    declare(&w);
    // At the end of step 0 ([1 s, 2 s)) every key's slot has passed.
    let at = ms(1_999);
    let verdicts: Vec<_> = (0..100u32)
        .map(|k| w.ruling(&k, at, Asked::Claim, Some(k), |_| {}))
        .collect();
    assert_eq!(verdicts.iter().filter(|v| **v == Ruling::Free).count(), 2);
    let waits: Vec<Duration> = verdicts
        .into_iter()
        .filter(|v| *v != Ruling::Free)
        .map(until)
        .collect();
    // The others wait for their slot in step 1, [2 s, 4 s), spread out.
    assert!(waits.iter().all(|u| (ms(2_000)..ms(4_000)).contains(u)));
    let early = waits.iter().filter(|u| **u < ms(3_000)).count();
    assert!((30..70).contains(&early), "{early} of 98 in the first half");
    assert_eq!(w.tally().parked, 100);
    // A failure on the key's turn counts; out of turn it does not.
    let probe = (0..100u32)
        .find(|k| w.ruling(k, at, Asked::Claim, None, |_| {}) == Ruling::Free)
        .unwrap();
    let v = w.ruling(&probe, at, Asked::Failure, None, |_| {});
    assert!(matches!(v, Ruling::Parked { counted: true, until } if until >= ms(2_000)));
    let v = w.ruling(&probe, at, Asked::Failure, None, |_| {});
    assert!(matches!(v, Ruling::Parked { counted: false, .. }));
}

#[test]
fn after_the_outage_keys_go_one_gap_apart_at_their_own_level() {
    let w = watch();
    declare(&w);
    for k in 0..20u32 {
        w.ruling(&k, ms(1_500), Asked::Claim, Some(k * 10), |_| {});
    }
    let mut seen = Vec::new();
    w.succeeded(&999, ms(5_000), |e| seen.push(e));
    assert_eq!(
        seen,
        [Event::Ended {
            lasted: ms(4_000),
            parked: 20
        }]
    );
    // All ask at 5 s: one goes now, the others 100 ms apart, except that
    // the success that ended the outage counts against the first second:
    // nine keys go in it, and the tenth a second after that success.
    let mut times = Vec::new();
    for k in 0..20u32 {
        // The level given now is not the one kept: the level from before.
        match w.ruling(&k, ms(5_000), Asked::Claim, Some(u32::MAX), |_| {}) {
            Ruling::Released { level } => {
                assert_eq!(level, Some(k * 10));
                times.push(ms(5_000));
            }
            v => times.push(until(v)),
        }
    }
    times.sort();
    let gaps: Vec<Duration> = times.windows(2).map(|p| p[1] - p[0]).collect();
    let mut expected = vec![ms(100); 19];
    expected[8] = ms(200);
    assert_eq!(gaps, expected);
    assert_eq!(times[9], ms(6_000));
    // Each key goes at its time, with the level it had.
    let last = *times.last().unwrap();
    let gone = (0..20u32)
        .filter(|k| {
            matches!(
                w.ruling(k, last, Asked::Claim, None, |_| {}),
                Ruling::Released { .. }
            )
        })
        .count();
    assert_eq!(gone, 20);
    // A key that was never parked is free.
    assert_eq!(
        w.ruling(&500, ms(5_000), Asked::Claim, None, |_| {}),
        Ruling::Free
    );
    // The release is over two steps and the queue (the keys and the
    // success) after the end.
    let over = ms(5_000 + 8_000 + 21 * 100 + 1);
    let mut seen = Vec::new();
    assert_eq!(
        w.ruling(&1, over, Asked::Claim, None, |e| seen.push(e)),
        Ruling::Free
    );
    assert_eq!(seen, [Event::Released { released: 20 }]);
    assert!(!w.active());
    assert_eq!(
        w.tally(),
        Tally {
            in_outage: false,
            parked: 0,
            outages: 1
        }
    );
}

#[test]
fn a_new_outage_during_the_release_keeps_the_levels_of_keys_still_waiting() {
    let w = watch();
    declare(&w);
    for k in 0..3u32 {
        w.ruling(&k, ms(1_500), Asked::Claim, Some(k), |_| {});
    }
    w.succeeded(&999, ms(5_000), |_| {});
    // Key 0 goes at 5 s, key 1 is told 5.1 s, key 2 has not asked.
    assert!(matches!(
        w.ruling(&0, ms(5_000), Asked::Claim, None, |_| {}),
        Ruling::Released { .. }
    ));
    assert_eq!(
        until(w.ruling(&1, ms(5_000), Asked::Claim, None, |_| {})),
        ms(5_100)
    );
    for k in 300..303u32 {
        w.failed(&k, true, ms(5_050), |_| {});
    }
    assert!(w.tally().in_outage);
    // Key 0 was let go: parked anew at its level now. Keys 1 and 2 were
    // still waiting: they keep their first level.
    w.ruling(&0, ms(5_060), Asked::Claim, Some(100), |_| {});
    w.ruling(&1, ms(5_060), Asked::Claim, Some(101), |_| {});
    w.ruling(&2, ms(5_060), Asked::Claim, Some(102), |_| {});
    w.succeeded(&999, ms(9_000), |_| {});
    for k in 0..3u32 {
        w.ruling(&k, ms(9_000), Asked::Claim, None, |_| {});
    }
    let levels: Vec<_> = (0..3u32)
        .map(
            |k| match w.ruling(&k, ms(9_200), Asked::Claim, None, |_| {}) {
                Ruling::Released { level } => level,
                v => panic!("{v:?}"),
            },
        )
        .collect();
    assert_eq!(levels, [Some(100), Some(1), Some(2)]);
}

#[test]
fn a_success_lets_its_key_go_and_failures_break_a_run_of_successes() {
    let settings = OutageSettings::new()
        .min_failing_keys(3)
        .recovery_successes(2);
    let w: Watch<()> = Watch::new(settings, 1);
    for k in 0..3u32 {
        w.failed(&k, true, ms(0), |_| {});
    }
    w.ruling(&1, ms(10), Asked::Claim, (), |_| {});
    assert_eq!(w.tally().parked, 1);
    w.succeeded(&1, ms(20), |_| {});
    assert_eq!(w.tally().parked, 0);
    // A failure between two successes: the outage goes on.
    w.ruling(&2, ms(30), Asked::Failure, (), |_| {});
    w.succeeded(&3, ms(40), |_| {});
    assert!(w.tally().in_outage);
    w.succeeded(&4, ms(50), |_| {});
    assert!(!w.tally().in_outage);
}

/// `rule` for each of `keys` at `at`, with the events it told.
fn rulings(
    w: &Watch<Option<u32>>,
    keys: std::ops::Range<u32>,
    at: Duration,
    asked: Asked,
) -> (Vec<Ruling<Option<u32>>>, Vec<Event>) {
    let mut seen = Vec::new();
    let rulings = keys
        .map(|k| w.ruling(&k, at, asked, Some(k), |e| seen.push(e)))
        .collect();
    (rulings, seen)
}

#[test]
fn peek_changes_nothing() {
    // Two watches told the same; only the first is peeked at, before every
    // step of the second's story. Both must rule alike afterwards.
    let (peeked, plain) = (watch(), watch());
    let peek_all = |at: Duration| -> Vec<Option<Duration>> {
        (0..40u32).map(|k| peeked.peek(&k, at, Some(k))).collect()
    };
    // No outage: every key may go, and peeking declares nothing.
    assert!(peek_all(ms(0)).iter().all(Option::is_none));
    assert!(!peeked.active());
    for w in [&peeked, &plain] {
        declare(w);
    }
    // Step 0 is [1 s, 2 s): early in it a key is told its slot; the answer
    // is the wait the first ruling gives it.
    let early = peek_all(ms(1_000));
    assert!(early.iter().all(Option::is_some));
    assert_eq!(peeked.tally().parked, 0, "a peek parked a key");
    let (first, _) = rulings(&plain, 0..1, ms(1_000), Asked::Claim);
    assert_eq!(until(first[0]), ms(1_000) + early[0].unwrap());
    // At the end of step 0 every slot has passed: each key alone could go,
    // and peeking at all of them takes none of the two probe turns.
    assert!(peek_all(ms(1_999)).iter().all(Option::is_none));
    assert_eq!(peeked.tally().parked, 0);
    rulings(&peeked, 0..1, ms(1_000), Asked::Claim);
    let (a, b) = (
        rulings(&peeked, 0..40, ms(1_999), Asked::Claim),
        rulings(&plain, 0..40, ms(1_999), Asked::Claim),
    );
    assert_eq!(a, b);
    assert_eq!(a.0.iter().filter(|r| **r == Ruling::Free).count(), 2);
    // A parked key is told the wait it is parked for.
    let parked = peek_all(ms(1_999));
    for (k, r) in a.0.iter().enumerate() {
        if let Ruling::Parked { until, .. } = *r {
            assert_eq!(parked[k], Some(until - ms(1_999)), "key {k}");
        }
    }
    assert_eq!(peeked.tally(), plain.tally());
    // After the outage, peeking takes no release slot: every key would go
    // first, and the keys then go in the same order, one gap apart.
    for w in [&peeked, &plain] {
        w.succeeded(&999, ms(5_000), |_| {});
    }
    assert!(peek_all(ms(5_000)).iter().all(Option::is_none));
    let (a, b) = (
        rulings(&peeked, 0..40, ms(5_000), Asked::Claim),
        rulings(&plain, 0..40, ms(5_000), Asked::Claim),
    );
    assert_eq!(a, b);
    assert!(matches!(a.0[0], Ruling::Released { level: Some(0) }));
    assert_eq!(until(a.0[1]), ms(5_100));
    assert_eq!(peeked.tally(), plain.tally());
}

#[test]
fn failures_and_successes_told_without_the_lock_weigh_on_detection() {
    // Three keys declare an outage when successes are at most half of the
    // outcomes since the first of their fresh failures.
    let settings = OutageSettings::new()
        .min_failing_keys(3)
        .max_success_ratio(0.5);
    let outage = |again: u32| {
        let w: Watch<()> = Watch::new(settings, 7);
        w.failed(&1, true, ms(0), |_| {});
        for _ in 0..4 {
            w.succeeded(&0, ms(1), |_| {});
        }
        for _ in 0..again {
            w.failed(&1, false, ms(2), |_| {});
        }
        w.failed(&2, true, ms(3), |_| {});
        w.failed(&3, true, ms(4), |_| {});
        w.tally().in_outage
    };
    // 3 failures and 4 successes: too many successes. With one failure
    // that continued a ladder more (4 and 4), an outage.
    assert_eq!([outage(0), outage(1), outage(2)], [false, true, true]);
}

#[test]
fn every_thread_counts_many_at_once_and_one_after_another() {
    let w = watch();
    let tell = |w: &Watch<Option<u32>>| {
        for k in 0..1_000u32 {
            w.failed(&k, false, ms(0), |_| {});
            if k % 2 == 0 {
                w.succeeded(&k, ms(0), |_| {});
            }
        }
    };
    // More threads at once than own a counter: the rest share one.
    std::thread::scope(|s| {
        for _ in 0..OWNED + 8 {
            s.spawn(|| tell(&w));
        }
    });
    // Then threads one after another, each taking a number given back.
    for _ in 0..40 {
        std::thread::scope(|s| {
            s.spawn(|| tell(&w));
        });
    }
    let threads = (OWNED + 8 + 40) as u64;
    let totals = w.totals(&mut w.inner.lock());
    assert_eq!(totals, (threads * 1_000, threads * 500));
}
