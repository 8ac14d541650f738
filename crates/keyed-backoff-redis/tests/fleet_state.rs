//! The fleet's outage state in Redis, within one process: a replica learns
//! of an outage another declared (at once on its first call, within 100 ms
//! of claims after that), the probes of a step are the fleet's, a
//! state that is not ours is left untouched while each key keeps its own
//! backoff, and a Redis that
//! lost the state in a restart gets it back from a replica that kept it.
//! (`fleet_outage.rs` runs the fleet as four processes.)

use std::time::{Duration, Instant};

use common::{Counted, prefix, runtime};
use keyed_backoff::Gate;
use keyed_backoff::clock::MockClock;
use keyed_backoff_outage::OutageSettings;
use keyed_backoff_redis::redis::Value;
use keyed_backoff_redis::redis::aio::ConnectionManager;
use keyed_backoff_redis::{RedisBackoff, RedisOutageAware};
use keyed_backoff_testkit::redis_server::Server;

mod common;

type Fleet = RedisOutageAware<ConnectionManager>;

/// How long a replica goes on alone once Redis fails it, in real time.
const ALONE: Duration = Duration::from_secs(1);

/// A replica on `url` under `prefix`, on `clock`: three keys newly failing
/// declare an outage.
async fn replica(url: &str, prefix: &str, clock: &MockClock) -> Fleet {
    RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
        .prefix(prefix)
        .clock(clock.clone())
        .fallback(Duration::from_millis(200))
        .open(url)
        .await
        .unwrap()
        .outage_aware(OutageSettings::new().min_failing_keys(3))
        .unwrap()
}

async fn declare(gate: &Fleet) {
    for key in ["down-1", "down-2", "down-3"] {
        assert!(gate.fail(&key.to_string()).await.unwrap().is_ok());
    }
    assert!(gate.in_outage());
}

#[test]
fn a_replica_learns_of_the_outage_and_shares_its_probes() {
    let server = common::shared();
    runtime().block_on(async {
        let (clock, prefix) = (MockClock::new(), prefix("fleet-learns"));
        let a = replica(&server.url, &prefix, &clock).await;
        let b = replica(&server.url, &prefix, &clock).await;
        declare(&a).await;
        assert!(!b.in_outage(), "b has not read the phase yet");
        // b's next claim reads it: its key waits on the fleet's ladder.
        assert!(b.claim(&"b-0".to_string()).await.unwrap().is_some());
        assert!(b.in_outage());
        assert_eq!((a.outages(), b.outages()), (1, 1));
        // At the end of the first step every slot has passed: of 40 keys
        // asking through either replica, 3 (the default probes) may go.
        clock.advance(Duration::from_millis(999));
        let mut goes = 0;
        for k in 0..40 {
            let gate = if k % 2 == 0 { &a } else { &b };
            goes += usize::from(gate.claim(&format!("key-{k}")).await.unwrap().is_none());
        }
        assert_eq!(goes, 3);
        // b made the last call: its copy counts every parked key.
        assert_eq!(b.parked(), 41);
    });
}

#[test]
fn a_replica_that_only_claims_reads_the_phase_every_100_ms() {
    let server = common::shared();
    runtime().block_on(async {
        let (clock, prefix) = (MockClock::new(), prefix("fleet-refresh"));
        let a = replica(&server.url, &prefix, &clock).await;
        let b = replica(&server.url, &prefix, &clock).await;
        // b reads the phase (normal), then a declares an outage.
        assert_eq!(b.claim(&"b-0".to_string()).await.unwrap(), None);
        declare(&a).await;
        // Within 100 ms b trusts what it read; from then on it reads again.
        clock.advance(Duration::from_millis(99));
        assert_eq!(b.claim(&"b-1".to_string()).await.unwrap(), None);
        assert!(!b.in_outage());
        clock.advance(Duration::from_millis(1));
        b.claim(&"b-2".to_string()).await.unwrap();
        assert!(b.in_outage());
    });
}

/// A value at the fleet's state key that is not ours (junk text, a state
/// of ours damaged, a value of another type) is left as it was, and never
/// stops a key's own backoff: the replica goes on alone, as when Redis is
/// unreachable.
#[test]
fn a_state_that_is_not_ours_is_left_as_it_was_and_keys_keep_their_own_backoff() {
    let server = common::shared();
    runtime().block_on(async {
        let clock = MockClock::new();
        let foreign: [(&str, &[&str]); 3] = [
            ("foreign", &["SET", "not ours"]),
            ("damaged", &["SET", "7 1 0 0 0 0 - X 0"]),
            ("wrong-type", &["RPUSH", "a", "list"]),
        ];
        for (name, write) in foreign {
            let gate = replica(&server.url, &prefix(name), &clock).await;
            let state = gate.state().store().redis_keys()[0].to_string();
            let [command, values @ ..] = write else {
                unreachable!()
            };
            let mut args = vec![*command, state.as_str()];
            args.extend_from_slice(values);
            let _: Value = server.command(&args).unwrap();
            let key = "k".to_string();
            let asked = Instant::now();
            assert_eq!(gate.claim(&key).await.unwrap(), None, "{name}");
            let level = gate.fail(&key).await.unwrap().expect(name);
            assert_eq!((level.backoff, level.attempts), (Duration::from_secs(1), 1));
            assert_eq!(
                gate.claim(&key).await.unwrap(),
                Some(Duration::from_secs(1))
            );
            // The first claim found the state foreign: the replica goes on
            // alone for a second of real time from then, unless the machine
            // took longer than that to get here (it may then have asked
            // Redis again, found the state foreign again, and gone on alone
            // anew; or be about to).
            assert!(
                gate.alone() || asked.elapsed() >= ALONE,
                "{name}: the replica goes on alone"
            );
            let kept: Vec<String> = match *command {
                "SET" => vec![server.command(&["GET", &state]).unwrap()],
                _ => server.command(&["LRANGE", &state, "0", "-1"]).unwrap(),
            };
            assert_eq!(kept, values, "{name}");
        }
    });
}

#[test]
fn a_restarted_redis_gets_the_outage_back_and_no_key_is_let_go() {
    let mut server = Server::start();
    if !server.owned() {
        return; // REDIS_URL: not ours to restart
    }
    runtime().block_on(async {
        let clock = MockClock::new();
        let gate = replica(&server.url, &prefix("fleet-restart"), &clock).await;
        declare(&gate).await;
        let key = "parked".to_string();
        assert!(gate.claim(&key).await.unwrap().is_some());
        let state = gate.state().store().redis_keys()[0].to_string();
        server.restart();
        // Alone while Redis is away, then back on it: the key stays parked
        // throughout, and the restarted Redis holds the outage again.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let wait = gate.claim(&key).await.unwrap();
            assert!(wait.is_some(), "the key was let go");
            let back: Option<String> = server.command(&["GET", &state]).ok().flatten();
            if back.is_some() && !gate.alone() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the outage never came back to Redis"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(gate.in_outage());
        assert_eq!(gate.outages(), 1);
    });
}

/// During an outage a parked key's claim and wait read its own wait and
/// level in one round trip and the fleet's state in another; its failure
/// does the same, then writes what its step changed.
#[test]
fn a_parked_keys_calls_cost_one_round_trip_for_the_key_and_one_for_the_state() {
    let server = common::shared();
    runtime().block_on(async {
        let (clock, prefix) = (MockClock::new(), prefix("fleet-trips"));
        let conn = Counted::new(common::connect(&server.url).await);
        let trips = conn.clone();
        let gate = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
            .prefix(&prefix)
            .clock(clock.clone())
            .build(conn)
            .unwrap()
            .outage_aware(OutageSettings::new().min_failing_keys(3))
            .unwrap();
        for key in ["down-1", "down-2", "down-3"] {
            assert!(gate.fail(&key.to_string()).await.unwrap().is_ok());
        }
        assert!(gate.in_outage());
        let key = "parked".to_string();
        assert!(gate.claim(&key).await.unwrap().is_some(), "parked");
        let counted = |from: u64| trips.trips() - from;
        let from = trips.trips();
        assert!(gate.claim(&key).await.unwrap().is_some());
        let claim = counted(from);
        let from = trips.trips();
        assert!(gate.wait(&key).await.unwrap().is_some());
        let wait = counted(from);
        let from = trips.trips();
        assert!(gate.fail(&key).await.unwrap().is_err());
        let fail = counted(from);
        assert_eq!((claim, wait, fail), (2, 2, 3));
    });
}
