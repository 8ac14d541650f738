//! A partial outage on a real `Controller`: 1,000 objects resync every
//! 30 s; those of dependencies that go down fail while the others go on
//! succeeding. With the domain taken from the reconcile error, outage
//! awareness sees each dependency's outage alone.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use keyed_backoff_kube::{ObjectBackoffBuilder, OutageSettings};
use kube::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use tokio::time::Instant;

use crate::support::{ApiServer, configmap};

const OBJECTS: usize = 1_000;
const RESYNC: Duration = Duration::from_secs(30);
const SECOND: Duration = Duration::from_secs(1);

/// A dependency some objects use, down over a span of time.
#[derive(Clone, Copy)]
struct Down {
    name: &'static str,
    /// The objects that use it: those whose number, modulo 10, is in here.
    uses: (usize, usize),
    from: Duration,
    until: Duration,
}

impl Down {
    fn used_by(&self, object: usize) -> bool {
        (self.uses.0..self.uses.1).contains(&(object % 10))
    }
}

/// A reconcile's error: a dependency down (named), or an object invalid
/// in itself (no dependency to blame).
#[derive(Debug)]
enum Error {
    Down(&'static str),
    Invalid,
}

impl Error {
    /// The dependency the error names, for the builder's `domain`.
    fn dependency(&self) -> Option<&str> {
        match self {
            Error::Down(name) => Some(name),
            Error::Invalid => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Down(name) => write!(f, "{name} is down"),
            Error::Invalid => f.write_str("the object is invalid"),
        }
    }
}

impl std::error::Error for Error {}

/// Whether object `object` is one of the 30 invalid ones (when there are),
/// numbers ending in 97, 98 or 99: none uses a dependency that goes down.
fn invalid(object: usize) -> bool {
    object % 100 >= 97
}

struct World {
    t0: Instant,
    down: Vec<Down>,
    /// Whether the 30 invalid objects are there.
    invalid: bool,
    /// (object, time since t0, whether the dependency it called was down)
    /// of every reconcile.
    runs: Mutex<Vec<(usize, Duration, Option<&'static str>)>>,
}

async fn reconcile(cm: Arc<ConfigMap>, world: Arc<World>) -> Result<Action, Error> {
    let name = cm.metadata.name.as_deref().unwrap();
    let object: usize = name.strip_prefix("cm-").unwrap().parse().unwrap();
    let at = world.t0.elapsed();
    let failing = world
        .down
        .iter()
        .find(|d| d.used_by(object) && (d.from..d.until).contains(&at));
    world
        .runs
        .lock()
        .unwrap()
        .push((object, at, failing.map(|d| d.name)));
    match failing {
        Some(down) => Err(Error::Down(down.name)),
        None if world.invalid && invalid(object) => Err(Error::Invalid),
        None => Ok(Action::requeue(RESYNC)),
    }
}

/// What a run showed, for one dependency that went down.
#[derive(Debug, Clone, PartialEq)]
pub struct Partial {
    /// Reconciles of its objects that reached it while it was down.
    pub during: usize,
    /// When the last of its objects first succeeded after it returned.
    pub last_first_success: Duration,
    /// The most reconciles of its objects in one second after it returned.
    pub after_busiest_second: usize,
}

impl fmt::Display for Partial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} | {:.1} s | {}",
            self.during,
            self.last_first_success.as_secs_f64(),
            self.after_busiest_second
        )
    }
}

/// What the whole run showed.
pub struct Run {
    pub per_down: Vec<Partial>,
    /// The longest gap between two runs of an object no dependency of
    /// which went down (its resync is 30 s).
    pub others_longest_gap: Duration,
    pub outages_of_everything: u64,
    /// (domain, outages) of every domain tracked at the end.
    pub domains: Vec<(String, u64)>,
}

/// Runs the controller over `OBJECTS` objects with `down` (and the 30
/// invalid objects if `invalid`), the backoff `workqueue()` with outage
/// awareness, naming domains if `by_domain`, for `horizon`.
async fn run(down: Vec<Down>, invalid: bool, by_domain: bool, horizon: Duration) -> Run {
    let mut builder =
        ObjectBackoffBuilder::<ConfigMap>::workqueue().outage(OutageSettings::default());
    if by_domain {
        builder = builder.domain(Error::dependency);
    }
    let backoff = builder.build().unwrap();
    let client = ApiServer::new(
        (0..OBJECTS)
            .map(|i| configmap(&format!("cm-{i}"), 1))
            .collect(),
    )
    .client();
    let world = Arc::new(World {
        t0: Instant::now(),
        down: down.clone(),
        invalid,
        runs: Mutex::new(Vec::new()),
    });
    let controller = Controller::new(
        Api::<ConfigMap>::namespaced(client, "default"),
        watcher::Config::default(),
    );
    let run = controller.run(
        backoff.reconciler(reconcile),
        backoff.error_policy(),
        Arc::clone(&world),
    );
    let task = tokio::spawn(run.for_each(|_| async {}));
    tokio::time::sleep(horizon).await;
    assert!(!task.is_finished(), "the controller stopped");
    task.abort();
    let runs = world.runs.lock().unwrap().clone();
    let per_down = down.iter().map(|d| summarise(&runs, d)).collect();
    let mut by_object: HashMap<usize, Vec<Duration>> = HashMap::new();
    for &(object, at, _) in &runs {
        let affected = down.iter().any(|d| d.used_by(object)) || invalid && self::invalid(object);
        if !affected {
            by_object.entry(object).or_default().push(at);
        }
    }
    let others_longest_gap = by_object
        .values()
        .flat_map(|at| at.windows(2).map(|w| w[1] - w[0]))
        .max()
        .unwrap_or_default();
    Run {
        per_down,
        others_longest_gap,
        outages_of_everything: backoff.stats().outages,
        domains: backoff
            .domains()
            .into_iter()
            .map(|d| (d.name, d.outages))
            .collect(),
    }
}

fn summarise(runs: &[(usize, Duration, Option<&'static str>)], down: &Down) -> Partial {
    let mut during = 0;
    let mut first_success: HashMap<usize, Duration> = HashMap::new();
    let mut after: HashMap<u64, usize> = HashMap::new();
    for &(object, at, failed) in runs {
        if !down.used_by(object) {
            continue;
        }
        if (down.from..down.until).contains(&at) {
            during += usize::from(failed.is_some());
        } else if at >= down.until {
            if failed.is_none() {
                first_success.entry(object).or_insert(at);
            }
            *after.entry((at - down.until).as_secs()).or_default() += 1;
        }
    }
    let last = first_success.values().max().copied().unwrap_or(down.until);
    Partial {
        during,
        last_first_success: last - down.until,
        after_busiest_second: after.values().max().copied().unwrap_or(0),
    }
}

fn db() -> Down {
    Down {
        name: "db",
        uses: (0, 3),
        from: 10 * SECOND,
        until: 130 * SECOND,
    }
}

#[tokio::test(start_paused = true)]
async fn a_dependency_thirty_percent_of_the_objects_use_is_seen_down_alone() {
    let today = run(vec![db()], false, false, 200 * SECOND).await;
    let named = run(vec![db()], false, true, 200 * SECOND).await;
    println!("without domains | {}", today.per_down[0]);
    println!("with domains    | {}", named.per_down[0]);
    // Without domains the successes of the others hide the outage.
    assert_eq!(today.outages_of_everything, 0);
    // With them, an outage of the database and no other.
    assert_eq!(named.outages_of_everything, 0);
    assert_eq!(named.domains, [("db".to_string(), 1)]);
    let m = &named.per_down[0];
    assert!(m.last_first_success <= 15 * SECOND, "{m}");
    assert!(m.after_busiest_second <= 250, "{m}");
    assert!(
        m.during < today.per_down[0].during,
        "{m} against {}",
        today.per_down[0]
    );
    // The other 70 % are never parked or delayed: a run every 30 s.
    assert!(
        named.others_longest_gap <= RESYNC + SECOND,
        "{:?}",
        named.others_longest_gap
    );
}

#[tokio::test(start_paused = true)]
async fn two_dependencies_down_at_overlapping_times_are_two_outages() {
    let eu = Down {
        name: "eu",
        uses: (0, 3),
        from: 10 * SECOND,
        until: 100 * SECOND,
    };
    let us = Down {
        name: "us",
        uses: (3, 6),
        from: 40 * SECOND,
        until: 160 * SECOND,
    };
    let run = run(vec![eu, us], false, true, 220 * SECOND).await;
    for (down, m) in [eu, us].iter().zip(&run.per_down) {
        println!("{} | {m}", down.name);
        assert!(m.last_first_success <= 15 * SECOND, "{}: {m}", down.name);
    }
    assert_eq!(run.outages_of_everything, 0);
    assert_eq!(run.domains, [("eu".to_string(), 1), ("us".to_string(), 1)]);
}

#[test]
fn a_domain_without_outage_awareness_is_refused_naming_the_field() {
    let err = ObjectBackoffBuilder::<ConfigMap>::workqueue()
        .domain(Error::dependency)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "domain");
    assert!(err.to_string().contains("outage"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn thirty_invalid_objects_in_a_healthy_domain_declare_no_outage() {
    // Their errors name no dependency: they back off on their own ladders.
    let run = run(Vec::new(), true, true, 200 * SECOND).await;
    assert_eq!(run.outages_of_everything, 0);
    assert_eq!(run.domains, []);
    assert!(
        run.others_longest_gap <= RESYNC + SECOND,
        "{:?}",
        run.others_longest_gap
    );
}
