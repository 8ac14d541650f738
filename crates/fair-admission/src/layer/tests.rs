//! The layer's locking: each priority level has a lock of its own.

use std::sync::mpsc;
use std::time::Duration;

use tower_layer::Layer;
use tower_service::Service;

use crate::{Apf, Class, FairnessLayer, LevelSpec, LimitResponse};

/// While one thread holds level "a"'s lock (as a request of "a" being
/// admitted does), a request of level "b" is admitted, runs and finishes
/// on another thread: the levels share no lock.
#[test]
fn a_level_held_locked_does_not_stop_another_level() {
    let queuing = LimitResponse::Queue {
        queues: 8,
        queue_length_limit: 10,
        hand_size: 2,
    };
    let apf = Apf::builder(10)
        .level("a", LevelSpec::limited(1, queuing))
        .level("b", LevelSpec::limited(1, queuing))
        .build()
        .unwrap();
    let (a, b) = (apf.level_id("a").unwrap(), apf.level_id("b").unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let layer = rt.block_on(async { FairnessLayer::new(apf, move |_: &()| Class::new(b, "bob")) });
    let shared = std::sync::Arc::clone(&layer.shared);
    let held = shared.levels[a.index()].lock();
    let (done, served) = mpsc::channel();
    let other = std::thread::spawn(move || {
        let mut service = layer.layer(tower::service_fn(|()| async {
            Ok::<_, crate::BoxError>(())
        }));
        let served_b = rt.block_on(service.call(()));
        let stats = layer.level_stats(b).unwrap();
        done.send((served_b.is_ok(), stats.dispatched)).unwrap();
    });
    // Bounded only so that a regression fails instead of hanging.
    let outcome = served.recv_timeout(Duration::from_secs(30));
    drop(held);
    other.join().unwrap();
    assert_eq!(outcome, Ok((true, 1)), "level b waited on level a's lock");
}

/// The layer deals a request the hand `Apf::hand` gives its (schema, flow)
/// pair: its flow key hashes as the pair of `str`s.
#[test]
fn a_class_hashes_as_its_schema_and_flow() {
    use std::hash::BuildHasher;
    let apf = Apf::builder(10)
        .level("l", LevelSpec::exempt())
        .build()
        .unwrap();
    let l = apf.level_id("l").unwrap();
    let hasher = foldhash::fast::FixedState::with_seed(11);
    for (schema, flow) in [
        ("", ""),
        ("s", "alice"),
        ("service-accounts", "x".repeat(40).as_str()),
    ] {
        let class = Class::new(l, flow).schema(schema);
        assert_eq!(
            hasher.hash_one(class.flow_key()),
            hasher.hash_one((schema, flow))
        );
        assert_eq!(
            apf.flow_hash(&class.flow_key()),
            apf.flow_hash(&(schema, flow))
        );
    }
}
