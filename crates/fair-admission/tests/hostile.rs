//! Inputs and runtimes that once made the crate panic: each is now a clear
//! error at build or admit time.

use std::time::Duration;

mod apf;

use fair_admission::{Admit, Apf, ApfBuilder, LevelSpec, LimitResponse, MAX_DECK_SIZE, Rejected};

#[cfg(feature = "tower")]
fn queuing(seats: u32) -> Apf {
    Apf::builder(seats)
        .level(
            "l",
            LevelSpec::limited(
                1,
                LimitResponse::Queue {
                    queues: 8,
                    queue_length_limit: 10,
                    hand_size: 2,
                },
            ),
        )
        .build()
        .unwrap()
}

#[test]
fn a_level_of_another_apf_is_refused_not_indexed() {
    let small = Apf::builder(1)
        .level("only", LevelSpec::exempt())
        .build()
        .unwrap();
    let mut big = Apf::builder(10)
        .level("a", LevelSpec::exempt())
        .level("b", LevelSpec::exempt())
        .level("c", LevelSpec::limited(1, LimitResponse::Reject))
        .build()
        .unwrap();
    let foreign = big.level_id("c").unwrap(); // index 2: out of `small`'s range
    let mut small = small;
    assert_eq!(
        small.admit(foreign, &"f", 1).admit,
        Admit::Rejected(Rejected::UnknownLevel)
    );
    assert!(small.level_stats(foreign).is_none());
    assert!(small.hand(foreign, &"f").is_none());
    // Same index, other Apf: refused too, not silently admitted elsewhere.
    let other = Apf::builder(10)
        .level("x", LevelSpec::exempt())
        .build()
        .unwrap();
    let in_range = other.level_id("x").unwrap();
    assert_eq!(
        big.admit(in_range, &"f", 1).admit,
        Admit::Rejected(Rejected::UnknownLevel)
    );
    // Nothing was counted on either.
    let c = big.level_stats(foreign).unwrap();
    assert_eq!((c.dispatched, c.rejected), (0, 0));
    // A clone keeps its levels' identity.
    let mut clone = big.clone();
    assert!(matches!(
        clone.admit(foreign, &"f", 1).admit,
        Admit::Dispatched(_)
    ));
}

#[test]
fn durations_and_counts_out_of_range_are_refused_with_their_field() {
    let err = Apf::builder(10)
        .level("e", LevelSpec::exempt())
        .estimated_service(Duration::MAX)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "estimated_service");
    assert!(err.to_string().contains("60s"), "{err}");
    let err = Apf::builder(10)
        .level("e", LevelSpec::exempt())
        .estimated_service(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "estimated_service");
    assert!(
        Apf::builder(10)
            .level("e", LevelSpec::exempt())
            .estimated_service(ApfBuilder::MAX_ESTIMATED_SERVICE)
            .build()
            .is_ok()
    );

    for queues in [LevelSpec::MAX_QUEUES + 1, MAX_DECK_SIZE, usize::MAX] {
        let err = Apf::builder(10)
            .level(
                "l",
                LevelSpec::limited(
                    1,
                    LimitResponse::Queue {
                        queues,
                        queue_length_limit: 1,
                        hand_size: 1,
                    },
                ),
            )
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "queues", "{queues}");
        assert!(err.to_string().contains("10000000"), "{err}");
    }
}

/// The charge of a long request: a request of flow a that ran for an hour
/// is charged the hour (its seat time as the clock measured it, not the
/// estimate), so flow b's waiting requests go first; a's next request is
/// still served once b's queue is empty.
#[test]
fn a_request_that_ran_an_hour_is_charged_the_hour() {
    let (mut apf, level) = apf::queuing(1, 8, 1, 100);
    let flows = apf::distinct_flows(&apf, level, 2);
    let (a, b) = (&flows[0], &flows[1]);
    let Admit::Dispatched(first) = apf.admit(level, a, 1).admit else {
        panic!()
    };
    let Admit::Queued(a2) = apf.admit(level, a, 1).admit else {
        panic!()
    };
    let Admit::Queued(b1) = apf.admit(level, b, 1).admit else {
        panic!()
    };
    let Admit::Queued(b2) = apf.admit(level, b, 1).admit else {
        panic!()
    };
    let mut now = Duration::from_secs(3_600);
    let mut complete = |apf: &mut fair_admission::Apf, t| {
        apf.advance_to(now);
        now += Duration::from_millis(10);
        apf.complete(t).unwrap()
    };
    assert_eq!(complete(&mut apf, first), vec![b1]);
    assert_eq!(complete(&mut apf, b1), vec![b2]);
    assert_eq!(complete(&mut apf, b2), vec![a2]);
    assert_eq!(complete(&mut apf, a2), vec![]);
}

/// The same seen from a flow's side, over time: after flow a's request
/// held the only seat for an hour while flow b waited, b is served 100 ms
/// requests back to back until it has been served as much virtual time as
/// a, then a's next request runs. The virtual clock counted both queues as
/// busy during the hour, so b catches up for half an hour (18,000
/// requests), not the whole hour: Kubernetes' progress meter gives a queue
/// that only waits its share of the seats, and its anti-windup bound
/// forgets the rest when b's next request arrives.
#[test]
fn after_an_hour_long_request_the_other_flow_catches_up_then_both_are_served() {
    let (mut apf, level) = apf::queuing(1, 8, 1, 100);
    let flows = apf::distinct_flows(&apf, level, 2);
    let (a, b) = (&flows[0], &flows[1]);
    let Admit::Dispatched(first) = apf.admit(level, a, 1).admit else {
        panic!()
    };
    let Admit::Queued(a_next) = apf.admit(level, a, 1).admit else {
        panic!()
    };
    let Admit::Queued(mut b_running) = apf.admit(level, b, 1).admit else {
        panic!()
    };
    let mut now = Duration::from_secs(3_600);
    apf.advance_to(now);
    assert_eq!(apf.complete(first).unwrap(), vec![b_running]);
    let mut served_b = 0u32;
    loop {
        let Admit::Queued(b_next) = apf.admit(level, b, 1).admit else {
            panic!()
        };
        now += Duration::from_millis(100);
        apf.advance_to(now);
        let dispatched = apf.complete(b_running).unwrap();
        served_b += 1;
        if dispatched == vec![a_next] {
            break;
        }
        assert_eq!(dispatched, vec![b_next]);
        b_running = b_next;
        assert!(served_b < 60_000, "flow a was never served again");
    }
    assert!((17_000..=19_000).contains(&served_b), "{served_b}");
}

#[cfg(feature = "tower")]
#[test]
fn a_runtime_without_timers_refuses_a_request_that_would_wait() {
    use fair_admission::{BoxError, Class, FairnessLayer, Overloaded};
    use tower::{Layer, ServiceExt, service_fn};

    let apf = queuing(1);
    let level = apf.level_id("l").unwrap();
    let layer = FairnessLayer::new(apf, move |u: &String| Class::new(level, u.clone()));
    let (release, hold) = tokio::sync::oneshot::channel::<()>();
    let hold = std::sync::Arc::new(parking_lot::Mutex::new(Some(hold)));
    let service = layer.layer(service_fn(move |_: String| {
        let hold = hold.lock().take();
        async move {
            if let Some(hold) = hold {
                let _ = hold.await;
            }
            Ok::<(), BoxError>(())
        }
    }));
    // No `enable_time`: a timer would panic.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let first = tokio::spawn(service.clone().oneshot("a".to_owned()));
        tokio::task::yield_now().await;
        // The one seat is taken: this request would queue, with a timer.
        let second = service.clone().oneshot("b".to_owned()).await.unwrap_err();
        let overloaded = second.downcast::<Overloaded>().expect("an Overloaded");
        assert_eq!(overloaded.reason(), Rejected::NoTimer);
        release.send(()).unwrap();
        first.await.unwrap().unwrap();
        // Its place was given up: the next request runs at once.
        service.oneshot("c".to_owned()).await.unwrap();
        assert_eq!(layer.level_stats(level).unwrap().waiting, 0);
    });
}

#[test]
fn lending_settings_out_of_range_are_refused_with_their_field() {
    let reject = LevelSpec::limited(1, LimitResponse::Reject);
    let field = |b: ApfBuilder| b.build().unwrap_err().field();
    assert_eq!(
        field(Apf::builder(10).level("l", reject.lendable_percent(101))),
        "lendable_percent"
    );
    assert_eq!(
        field(Apf::builder(10).level("e", LevelSpec::exempt().borrowing_limit_percent(10))),
        "borrowing_limit_percent"
    );
    assert_eq!(
        field(
            Apf::builder(10)
                .level("l", reject)
                .borrowing_period(Duration::ZERO)
        ),
        "borrowing_period"
    );
    assert_eq!(
        field(
            Apf::builder(10)
                .level("l", reject)
                .borrowing_period(Duration::MAX)
        ),
        "borrowing_period"
    );
}

#[test]
fn extreme_lending_and_clocks_neither_panic_nor_lose_seats() {
    let queue = LimitResponse::Queue {
        queues: 4,
        queue_length_limit: 10,
        hand_size: 2,
    };
    let mut apf = Apf::builder(u32::MAX)
        .level(
            "a",
            LevelSpec::limited(u32::MAX, queue)
                .lendable_percent(100)
                .borrowing_limit_percent(u32::MAX),
        )
        .level(
            "b",
            LevelSpec::limited(1, LimitResponse::Reject).lendable_percent(100),
        )
        .build()
        .unwrap();
    let a = apf.level_id("a").unwrap();
    for i in 0..5 {
        assert!(matches!(apf.admit(a, &i, 10).admit, Admit::Dispatched(_)));
    }
    // Clocks at the end of time, and back again (ignored).
    apf.advance_to(Duration::MAX);
    apf.advance_to(Duration::from_secs(1));
    apf.advance_to(Duration::MAX);
    let stats = apf.level_stats(a).unwrap();
    assert_eq!(stats.seats_in_use, 50);
    assert!(stats.seats >= 1);
    assert!(apf.retry_after(a).unwrap() >= Duration::from_secs(1));
}
