//! A value that is not ours at the fleet's outage state key
//! (`{prefix:outage}:state`): junk text, or a value of another type (a
//! list), written by another program and left there.
//!
//! - During an outage, two replicas of 30 keys each, on one mock clock,
//!   go on with no error and no panic: no replica lets more than `probes`
//!   keys try in a step of the ladder while the dependency is down, nor
//!   more than `release_rate` keys go in a second once it is back (the
//!   bounds of a replica alone), and every key's first success comes
//!   within 15 s of the dependency's return, the foreign value still
//!   there.
//! - Outside an outage, each key's own backoff answers as without the
//!   fleet: `claim` and `fail` give the key's waits and levels, also with
//!   the foreign value at the state key of a domain the keys name
//!   (`{prefix:outage}:domain:{name}:state`).
//!
//! `cargo test -p keyed-backoff-redis --test fleet_foreign_state -- --nocapture`

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use common::{prefix, runtime};
use keyed_backoff::clock::{MockClock, MockInstant};
use keyed_backoff::{Gate, InBackoff};
use keyed_backoff_outage::{OutageSettings, OutageStore};
use keyed_backoff_redis::redis::Value;
use keyed_backoff_redis::redis::aio::ConnectionManager;
use keyed_backoff_redis::{RedisBackoff, RedisOutageAware, StoreError};
use keyed_backoff_testkit::outage;
use keyed_backoff_testkit::redis_server::Server;

mod common;

type Fleet = RedisOutageAware<ConnectionManager>;

const REPLICAS: usize = 2;
const KEYS: usize = 30;
const SECOND: u64 = 1_000_000_000;
/// The simulated time's least step.
const TICK: u64 = 10_000_000;
/// The outage is under way by then (every key has failed at least once):
/// the foreign value is written.
const FOREIGN_AT: u64 = 10 * SECOND;
/// The dependency is down from the start until then.
const BACK_AT: u64 = 30 * SECOND;
/// The run ends then.
const END: u64 = 50 * SECOND;
const PROBES: usize = 3;
const RELEASE_RATE: usize = 20;
/// How long a key waits after a success before it runs again.
const RESYNC: Duration = Duration::from_secs(30);
/// How long a key waits after an error of the gate.
const AFTER_ERROR: Duration = Duration::from_secs(1);

/// A foreign value, and how to write it.
#[derive(Clone, Copy, Debug)]
enum Foreign {
    /// `SET key "not an outage state"`.
    Junk,
    /// `RPUSH key a list`: a value of another type.
    List,
}

impl Foreign {
    /// Writes it at `key`, in place of whatever was there.
    fn write(self, server: &Server, key: &str) {
        let _: Value = server.command(&["DEL", key]).expect("DEL");
        let args: &[&str] = match self {
            Foreign::Junk => &["SET", key, "not an outage state"],
            Foreign::List => &["RPUSH", key, "a", "list"],
        };
        let _: Value = server.command(args).expect("the foreign value written");
    }

    /// Whether it is still there, as written.
    fn stayed(self, server: &Server, key: &str) -> bool {
        match self {
            Foreign::Junk => {
                let found: Option<String> = server.command(&["GET", key]).unwrap_or(None);
                found.as_deref() == Some("not an outage state")
            }
            Foreign::List => {
                let found: Vec<String> = server
                    .command(&["LRANGE", key, "0", "-1"])
                    .unwrap_or_default();
                found == ["a", "list"]
            }
        }
    }
}

/// A replica on `url` under `prefix`, on `clock`.
async fn replica(url: &str, prefix: &str, clock: &MockClock) -> Fleet {
    RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
        .prefix(prefix)
        .clock(clock.clone())
        // A generous timeout: a slow answer on a loaded machine must not
        // pass for Redis being away.
        .timeout(Duration::from_secs(2))
        .open(url)
        .await
        .expect("store")
        .outage_aware(
            OutageSettings::new()
                .probes(Some(PROBES as u32))
                .release_rate(RELEASE_RATE as f64),
        )
        .expect("settings")
}

fn kind(e: &StoreError) -> &'static str {
    match e {
        StoreError::Corrupt { .. } => "Corrupt",
        StoreError::TimedOut { .. } => "TimedOut",
        StoreError::Unavailable { .. } => "Unavailable",
        StoreError::Redis { .. } => "Redis",
        _ => "other",
    }
}

/// One attempt that reached the dependency.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    replica: usize,
    key: usize,
    at: u64,
    ok: bool,
    /// Whether the replica saw an outage when it let the key go.
    informed: bool,
}

/// What the keys saw.
#[derive(Default)]
struct Seen {
    attempts: Vec<Attempt>,
    /// Errors after the foreign value was written, by operation and kind,
    /// with the first one's text.
    errors: BTreeMap<(&'static str, &'static str), (u64, String)>,
    /// Calls of the gate after the foreign value was written.
    calls: u64,
    /// When each replica first saw the outage.
    learned: [Option<u64>; REPLICAS],
}

impl Seen {
    fn error(&mut self, op: &'static str, e: &StoreError) {
        let slot = self
            .errors
            .entry((op, kind(e)))
            .or_insert_with(|| (0, e.to_string()));
        slot.0 += 1;
    }
}

/// One run of `key` (the `k`th of replica `r`) at `now`: how long until
/// it runs again.
async fn turn(gate: &Fleet, r: usize, k: usize, now: u64, seen: &mut Seen) -> Duration {
    let key = format!("replica{r}-key{k}");
    seen.calls += 1;
    let wait = match gate.claim(&key).await {
        Err(e) => {
            seen.error("claim", &e);
            return AFTER_ERROR;
        }
        Ok(wait) => wait,
    };
    if let Some(wait) = wait {
        return wait;
    }
    let ok = now >= BACK_AT;
    let informed = gate.in_outage();
    seen.attempts.push(Attempt {
        replica: r,
        key: k,
        at: now,
        ok,
        informed,
    });
    seen.calls += 1;
    if ok {
        return match gate.succeed(&key).await {
            Ok(()) => RESYNC,
            Err(e) => {
                seen.error("succeed", &e);
                AFTER_ERROR
            }
        };
    }
    match gate.fail(&key).await {
        Ok(Ok(level)) => level.backoff,
        Ok(Err(InBackoff { remaining })) => remaining,
        Err(e) => {
            seen.error("fail", &e);
            AFTER_ERROR
        }
    }
}

/// The ladder's step (1 s doubling to 4 s) of `elapsed` nanoseconds.
fn ladder_step(elapsed: u64) -> u64 {
    outage::ladder_step(Duration::from_nanos(elapsed))
}

/// The most of `times` (nanoseconds) within any one second.
fn most_per_second(times: Vec<u64>) -> usize {
    outage::most_within(times, SECOND)
}

/// Two replicas through an outage, with `foreign` written at the state
/// key once the outage is under way and left there.
fn during_an_outage(foreign: Foreign) {
    let server = common::shared();
    let seen = runtime().block_on(async {
        let (clock, prefix) = (MockClock::new(), prefix("fleet-foreign"));
        let mut gates = Vec::new();
        for _ in 0..REPLICAS {
            gates.push(replica(&server.url, &prefix, &clock).await);
        }
        let state = gates[0].state().store().redis_keys()[0].to_string();
        let mut seen = Seen::default();
        // The first runs spread over the first second.
        let mut due: Vec<Vec<u64>> = (0..REPLICAS)
            .map(|_| (0..KEYS as u64).map(|k| k * SECOND / KEYS as u64).collect())
            .collect();
        let mut now = 0;
        let mut written = false;
        while now < END {
            clock.set(MockInstant::from_nanos(now as i64));
            if !written && now >= FOREIGN_AT {
                let learned = seen.learned;
                assert!(
                    learned.iter().all(Option::is_some),
                    "the outage was not under way at every replica: {learned:?}"
                );
                foreign.write(server, &state);
                written = true;
                // What came before it is not the foreign value's doing.
                seen.errors.clear();
                seen.calls = 0;
            }
            for (r, gate) in gates.iter().enumerate() {
                let mut order: Vec<usize> = (0..KEYS).filter(|&k| due[r][k] <= now).collect();
                order.sort_by_key(|&k| due[r][k]);
                for k in order {
                    let next = turn(gate, r, k, now, &mut seen).await;
                    due[r][k] = now + (next.as_nanos() as u64).max(1);
                }
                if gate.in_outage() && seen.learned[r].is_none() {
                    seen.learned[r] = Some(now);
                }
            }
            let next = due.iter().flatten().copied().min().unwrap_or(END);
            now = (now + TICK).max(next).min(END);
        }
        assert!(foreign.stayed(server, &state), "the foreign value changed");
        seen
    });
    let began = seen.learned.iter().flatten().copied().min().unwrap();
    // While the dependency is down, after the foreign value: the most
    // attempts a replica made in one step of the ladder.
    let mut per_step: HashMap<(usize, u64), usize> = HashMap::new();
    for a in seen
        .attempts
        .iter()
        .filter(|a| (FOREIGN_AT..BACK_AT).contains(&a.at))
    {
        *per_step
            .entry((a.replica, ladder_step(a.at - began)))
            .or_default() += 1;
    }
    let most_per_step = per_step.values().copied().max().unwrap_or(0);
    // After it: keys let go by a replica that no longer saw the outage
    // (the probes that ended it counted apart), per replica.
    let after: Vec<&Attempt> = seen.attempts.iter().filter(|a| a.at >= BACK_AT).collect();
    let probes = after.iter().filter(|a| a.informed).count();
    let per_second = (0..REPLICAS)
        .map(|r| {
            let times = after
                .iter()
                .filter(|a| a.replica == r && !a.informed)
                .map(|a| a.at)
                .collect();
            most_per_second(times)
        })
        .max()
        .unwrap_or(0);
    let mut first: HashMap<(usize, usize), u64> = HashMap::new();
    for a in after.iter().filter(|a| a.ok) {
        first.entry((a.replica, a.key)).or_insert(a.at - BACK_AT);
    }
    let never = REPLICAS * KEYS - first.len();
    let latest = first.values().copied().max().unwrap_or(0);
    let failed: u64 = seen.errors.values().map(|(n, _)| n).sum();
    println!(
        "{foreign:?} at the state key {:.1} s into the outage: {failed} of {} calls failed after it \
         {:?}; while the dependency was down, at most {most_per_step} attempts in a ladder step of one \
         replica (probes {PROBES}); after its return {probes} probes and at most {per_second} keys let \
         go in a second of one replica (release rate {RELEASE_RATE}); the latest first success \
         {:.3} s after the return, {never} of {} keys without one",
        (FOREIGN_AT - began) as f64 / 1e9,
        seen.calls,
        seen.errors,
        latest as f64 / 1e9,
        REPLICAS * KEYS,
    );
    assert_eq!(failed, 0, "calls failed: {:?}", seen.errors);
    assert!(
        most_per_step <= PROBES,
        "{most_per_step} keys tried in one step of one replica"
    );
    assert!(
        per_second <= RELEASE_RATE,
        "{per_second} keys let go in a second of one replica"
    );
    assert_eq!(never, 0, "{never} keys never succeeded after the return");
    assert!(
        latest <= 15 * SECOND,
        "a first success {latest} ns after the return"
    );
}

#[test]
fn junk_at_the_state_key_during_an_outage() {
    during_an_outage(Foreign::Junk);
}

#[test]
fn a_list_at_the_state_key_during_an_outage() {
    during_an_outage(Foreign::List);
}

/// A claim's answer, its error told by kind.
fn claimed(answer: Result<Option<Duration>, StoreError>) -> String {
    format!("claim {:?}", answer.map_err(|e| kind(&e)))
}

/// A failure's answer (the backoff and attempts of its level, or the wait
/// left), its error told by kind.
fn failed(answer: Result<Result<keyed_backoff::Level, InBackoff>, StoreError>) -> String {
    let answer = answer
        .map(|o| o.map(|l| (l.backoff, l.attempts)).map_err(|b| b.remaining))
        .map_err(|e| kind(&e));
    format!("fail {answer:?}")
}

/// Five keys on one replica outside an outage, a foreign value at the
/// state key of the outage their failures and successes are told to (of
/// everything, or of the domain `domain` they name): each claim and
/// failure, the key's own backoff's; and whether the value stayed.
fn answers(server: &Server, foreign: Foreign, domain: Option<&str>) -> (Vec<String>, bool) {
    let s = Duration::from_secs;
    runtime().block_on(async {
        let clock = MockClock::new();
        let gate = replica(&server.url, &prefix("fleet-foreign-normal"), &clock).await;
        let store = gate.state().store();
        let state = match domain {
            Some(name) => store.domain(name).expect("a domain").redis_keys()[0].to_string(),
            None => store.redis_keys()[0].to_string(),
        };
        foreign.write(server, &state);
        let mut got = Vec::new();
        for k in 0..5 {
            let key = format!("key{k}");
            let fail = || async {
                match domain {
                    Some(name) => failed(gate.fail_in(&key, name).await),
                    None => failed(gate.fail(&key).await),
                }
            };
            got.push(claimed(gate.claim(&key).await));
            got.push(fail().await);
            got.push(claimed(gate.claim(&key).await));
            clock.advance(s(1));
            got.push(claimed(gate.claim(&key).await));
            got.push(fail().await);
            clock.advance(s(2));
            got.push(claimed(gate.claim(&key).await));
            let told = match domain {
                Some(name) => gate.succeed_in(&key, name).await,
                None => gate.succeed(&key).await,
            };
            got.push(format!("succeed {:?}", told.map_err(|e| kind(&e))));
            got.push(claimed(gate.claim(&key).await));
        }
        (got, foreign.stayed(server, &state))
    })
}

/// Outside an outage, with a foreign value at the state key of the outage
/// of everything or of a domain the keys name, five keys on one replica:
/// each claim and failure answers as the key's own backoff does (1 s, then
/// 2 s), also once the replica's copy of the phase is older than its
/// refresh.
#[test]
fn a_foreign_value_outside_an_outage_leaves_each_keys_own_backoff() {
    let server = common::shared();
    let s = Duration::from_secs;
    let one_key = [
        claimed(Ok(None)),
        failed(Ok(Ok(keyed_backoff::Level {
            backoff: s(1),
            attempts: 1,
        }))),
        claimed(Ok(Some(s(1)))),
        claimed(Ok(None)),
        failed(Ok(Ok(keyed_backoff::Level {
            backoff: s(2),
            attempts: 2,
        }))),
        claimed(Ok(None)),
        "succeed Ok(())".to_string(),
        claimed(Ok(None)),
    ];
    let want: Vec<String> = (0..5).flat_map(|_| one_key.clone()).collect();
    let mut checks = Vec::new();
    for domain in [None, Some("db")] {
        for foreign in [Foreign::Junk, Foreign::List] {
            let (got, stayed) = answers(server, foreign, domain);
            let wrong = got.iter().zip(&want).filter(|(g, w)| g != w).count();
            let errors = got.iter().filter(|g| g.contains("Err(\"")).count();
            println!(
                "{foreign:?} at the state key of the outage of {} outside an outage: {wrong} of {} \
                 answers not the key's own backoff's, {errors} of them errors; the first key's: {:?}",
                domain.unwrap_or("everything"),
                got.len(),
                &got[..one_key.len()],
            );
            checks.push((foreign, domain, stayed, got));
        }
    }
    for (foreign, domain, stayed, got) in checks {
        assert!(
            stayed,
            "{foreign:?} at {domain:?}: the foreign value changed"
        );
        assert_eq!(got, want, "{foreign:?} at {domain:?}");
    }
}
