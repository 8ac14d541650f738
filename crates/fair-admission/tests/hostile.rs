//! Inputs and runtimes that once made the crate panic: each is now a clear
//! error at build or admit time.

use std::time::Duration;

mod apf;

use fair_admission::{
    Admit, Apf, LimitResponse, MAX_DECK_SIZE, MAX_ESTIMATED_SERVICE, MAX_QUEUES, Rejected,
};

#[cfg(feature = "tower")]
fn queuing(seats: u32) -> Apf {
    Apf::builder(seats)
        .level(
            "l",
            1,
            LimitResponse::Queue {
                queues: 8,
                queue_length_limit: 10,
                hand_size: 2,
            },
        )
        .build()
        .unwrap()
}

#[test]
fn a_level_of_another_apf_is_refused_not_indexed() {
    let small = Apf::builder(1).exempt("only").build().unwrap();
    let mut big = Apf::builder(10)
        .exempt("a")
        .exempt("b")
        .level("c", 1, LimitResponse::Reject)
        .build()
        .unwrap();
    let foreign = big.level_id("c").unwrap(); // index 2: out of `small`'s range
    let mut small = small;
    assert_eq!(
        small.admit(foreign, &"f", 1),
        Admit::Rejected(Rejected::UnknownLevel)
    );
    assert!(small.level_stats(foreign).is_none());
    assert!(small.hand(foreign, &"f").is_none());
    // Same index, other Apf: refused too, not silently admitted elsewhere.
    let other = Apf::builder(10).exempt("x").build().unwrap();
    let in_range = other.level_id("x").unwrap();
    assert_eq!(
        big.admit(in_range, &"f", 1),
        Admit::Rejected(Rejected::UnknownLevel)
    );
    // Nothing was counted on either.
    let c = big.level_stats(foreign).unwrap();
    assert_eq!((c.dispatched, c.rejected), (0, 0));
    // A clone keeps its levels' identity.
    let mut clone = big.clone();
    assert!(matches!(
        clone.admit(foreign, &"f", 1),
        Admit::Dispatched(_)
    ));
}

#[test]
fn durations_and_counts_out_of_range_are_refused_with_their_field() {
    let err = Apf::builder(10)
        .exempt("e")
        .estimated_service(Duration::MAX)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "estimated_service");
    assert!(err.to_string().contains("60s"), "{err}");
    let err = Apf::builder(10)
        .exempt("e")
        .estimated_service(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "estimated_service");
    assert!(
        Apf::builder(10)
            .exempt("e")
            .estimated_service(MAX_ESTIMATED_SERVICE)
            .build()
            .is_ok()
    );

    for queues in [MAX_QUEUES + 1, MAX_DECK_SIZE, usize::MAX] {
        let err = Apf::builder(10)
            .level(
                "l",
                1,
                LimitResponse::Queue {
                    queues,
                    queue_length_limit: 1,
                    hand_size: 1,
                },
            )
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "queues", "{queues}");
        assert!(err.to_string().contains("10000000"), "{err}");
    }
}

#[test]
fn a_completion_reported_as_lasting_forever_is_charged_an_hour_at_most() {
    // Two flows, each with a queue of its own, share one seat. Flow a's
    // first request reports `Duration::MAX`: a is charged an hour, so b's
    // requests go first, and a's next one is still served once b's queue
    // is empty (its finish time stays a finite number).
    let (mut apf, level) = apf::queuing(1, 8, 1, 100);
    let flows = apf::distinct_flows(&apf, level, 2);
    let (a, b) = (&flows[0], &flows[1]);
    let Admit::Dispatched(first) = apf.admit(level, a, 1) else {
        panic!()
    };
    let Admit::Queued(a2) = apf.admit(level, a, 1) else {
        panic!()
    };
    let Admit::Queued(b1) = apf.admit(level, b, 1) else {
        panic!()
    };
    let Admit::Queued(b2) = apf.admit(level, b, 1) else {
        panic!()
    };
    assert_eq!(apf.complete(first, Duration::MAX).unwrap(), vec![b1]);
    assert_eq!(
        apf.complete(b1, Duration::from_millis(10)).unwrap(),
        vec![b2]
    );
    assert_eq!(
        apf.complete(b2, Duration::from_millis(10)).unwrap(),
        vec![a2]
    );
    assert_eq!(apf.complete(a2, Duration::from_millis(10)).unwrap(), vec![]);
}

/// The charge cap seen from a flow's side: after one completion reported
/// as `Duration::MAX`, flow a's next request waits while flow b is served
/// one hour of 100 ms requests (36,000 of them), then runs. Without the cap
/// it would wait for ever.
#[test]
fn after_a_forever_completion_the_flow_is_served_again_after_an_hour_of_others() {
    let (mut apf, level) = apf::queuing(1, 8, 1, 100);
    let flows = apf::distinct_flows(&apf, level, 2);
    let (a, b) = (&flows[0], &flows[1]);
    let Admit::Dispatched(first) = apf.admit(level, a, 1) else {
        panic!()
    };
    let Admit::Queued(a_next) = apf.admit(level, a, 1) else {
        panic!()
    };
    let Admit::Queued(mut b_running) = apf.admit(level, b, 1) else {
        panic!()
    };
    assert_eq!(apf.complete(first, Duration::MAX).unwrap(), vec![b_running]);
    let mut served_b = 0u32;
    loop {
        let Admit::Queued(b_next) = apf.admit(level, b, 1) else {
            panic!()
        };
        let dispatched = apf.complete(b_running, Duration::from_millis(100)).unwrap();
        served_b += 1;
        if dispatched == vec![a_next] {
            break;
        }
        assert_eq!(dispatched, vec![b_next]);
        b_running = b_next;
        assert!(served_b < 60_000, "flow a was never served again");
    }
    // An hour of b's 100 ms requests, give or take the estimate's drift.
    assert!((30_000..=40_000).contains(&served_b), "{served_b}");
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
    let reject = LimitResponse::Reject;
    let field = |b: fair_admission::ApfBuilder| b.build().unwrap_err().field();
    assert_eq!(
        field(Apf::builder(10).level("l", 1, reject).lending(101, None)),
        "lendable_percent"
    );
    assert_eq!(
        field(Apf::builder(10).lending(50, None).level("l", 1, reject)),
        "lending"
    );
    assert_eq!(
        field(Apf::builder(10).exempt("e").lending(10, None)),
        "lending"
    );
    assert_eq!(
        field(
            Apf::builder(10)
                .level("l", 1, reject)
                .borrowing_period(Duration::ZERO)
        ),
        "borrowing_period"
    );
    assert_eq!(
        field(
            Apf::builder(10)
                .level("l", 1, reject)
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
        .level("a", u32::MAX, queue)
        .lending(100, Some(u32::MAX))
        .level("b", 1, LimitResponse::Reject)
        .lending(100, None)
        .build()
        .unwrap();
    let a = apf.level_id("a").unwrap();
    for i in 0..5 {
        assert!(matches!(apf.admit(a, &i, 10), Admit::Dispatched(_)));
    }
    // Clocks at the end of time, and back again (ignored).
    apf.advance(Duration::MAX);
    apf.advance(Duration::from_secs(1));
    apf.advance(Duration::MAX);
    let stats = apf.level_stats(a).unwrap();
    assert_eq!(stats.seats_in_use, 50);
    assert!(stats.seats >= 1);
    assert!(apf.retry_after(a).unwrap() >= Duration::from_secs(1));
}
