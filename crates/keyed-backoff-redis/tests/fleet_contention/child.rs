//! One replica of the fleet, in a process of its own, in real time: a
//! [`RedisOutageAware`] on Redis (through the parent's delaying proxy)
//! and a task per key, all started at once, each a reconcile loop against
//! a dependency that is down until the parent says when it returns.
//!
//! The parent talks to it through its stdin (`UP <ns>`: the dependency
//! is back from that time on, in nanoseconds since the Unix epoch, the
//! clock Redis `TIME` reads; `Q`: stop) and reads its stdout: a status
//! line every 50 ms, then, when told to stop, what it saw. Its lines start
//! with `@` (the test harness prints lines of its own).

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keyed_backoff::{Gate, InBackoff, Level};
use keyed_backoff_outage::OutageSettings;
use keyed_backoff_redis::redis;
use keyed_backoff_redis::redis::aio::ConnectionManager;

use crate::common::Counted;
use keyed_backoff_redis::{RedisBackoff, RedisOutageAware, StoreError, fail_fast};

/// What the parent tells a child, through its environment.
pub struct Setup {
    pub index: usize,
    pub url: String,
    pub prefix: String,
    pub keys: usize,
}

const ENV: &str = "KEYED_BACKOFF_CONTENTION_CHILD";

impl Setup {
    pub fn env(&self) -> (String, String) {
        let value = format!("{} {} {} {}", self.index, self.url, self.prefix, self.keys);
        (ENV.to_string(), value)
    }

    pub fn from_env() -> Option<Setup> {
        let value = std::env::var(ENV).ok()?;
        let w: Vec<&str> = value.split(' ').collect();
        Some(Setup {
            index: w[0].parse().expect("an index"),
            url: w[1].to_string(),
            prefix: w[2].to_string(),
            keys: w[3].parse().expect("a number of keys"),
        })
    }
}

/// Keys that may try the dependency per step of the ladder.
pub const PROBES: u32 = 3;
/// Keys let go per second after the outage, across the fleet.
pub const RELEASE_RATE: usize = 250;
/// How long one store operation may take: generous, so that a slow answer
/// on a loaded test machine does not pass for the contention under test.
pub const TIMEOUT: Duration = Duration::from_secs(1);
/// How long a key waits after an error of the gate before it asks again
/// (a controller's requeue after an error).
const AFTER_ERROR: Duration = Duration::from_millis(100);

/// The settings every replica uses: a short ladder (250 ms doubling to
/// 1 s) so that parked keys ask often and learn of the end soon, 3 probes
/// a step, 250 keys a second let go.
pub fn settings() -> OutageSettings {
    OutageSettings::new()
        .ladder(Duration::from_millis(250), Duration::from_secs(1))
        .probes(Some(PROBES))
        .release_rate(RELEASE_RATE as f64)
}

/// Now, in nanoseconds since the Unix epoch.
pub fn epoch_ns() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH);
    u64::try_from(since.expect("after 1970").as_nanos()).expect("before 2554")
}

/// The name of a store error's kind; a timeout the client itself reported
/// is told apart from one the operation's own deadline gave.
pub fn kind(e: &StoreError) -> &'static str {
    match e {
        StoreError::TimedOut { source: None, .. } => "TimedOut",
        StoreError::TimedOut { .. } => "TimedOut(response)",
        StoreError::Corrupt { .. } => "Corrupt",
        StoreError::Unavailable { .. } => "Unavailable",
        StoreError::Redis { .. } => "Redis",
        StoreError::NotReplicated { .. } => "NotReplicated",
        _ => "other",
    }
}

/// One attempt that reached the dependency.
struct Attempt {
    key: usize,
    /// The earliest time the gate can have let it go (see [`reconcile`]).
    earliest: u64,
    /// When the claim that let it go answered.
    received: u64,
    /// Whether the dependency was back.
    ok: bool,
    /// Whether the gate saw an outage when it let the key go.
    informed: bool,
}

/// What the keys saw, told to the parent at the end.
#[derive(Default)]
struct Log {
    /// Each attempt that reached the dependency.
    attempts: Vec<Attempt>,
    /// Errors by operation and kind, with the first one's text.
    errors: BTreeMap<(&'static str, &'static str), (u64, String)>,
    /// Calls of the gate made.
    calls: u64,
}

impl Log {
    fn error(&mut self, op: &'static str, e: &StoreError) {
        let slot = self.errors.entry((op, kind(e))).or_insert_with(|| {
            match std::error::Error::source(e) {
                Some(source) => (0, format!("{e} ({source})")),
                None => (0, e.to_string()),
            }
        });
        slot.0 += 1;
    }
}

/// What the child's tasks share.
struct Shared {
    /// When the dependency is back (`u64::MAX`: not yet said).
    up_at: AtomicU64,
    quit: AtomicBool,
    succeeded: AtomicUsize,
    log: Mutex<Log>,
}

type Fleet = RedisOutageAware<Counted>;

/// Runs the child until the parent says `Q` (or closes its stdin).
pub fn run(setup: Setup) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let shared = Arc::new(Shared {
        up_at: AtomicU64::new(u64::MAX),
        quit: AtomicBool::new(false),
        succeeded: AtomicUsize::new(0),
        log: Mutex::new(Log::default()),
    });
    let commands = Arc::clone(&shared);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if let Some(at) = line.strip_prefix("UP ") {
                let at = at.parse().expect("a time");
                commands.up_at.store(at, Ordering::SeqCst);
            } else if line == "Q" {
                break;
            }
        }
        commands.quit.store(true, Ordering::SeqCst);
    });
    rt.block_on(replica(setup, shared));
}

async fn replica(setup: Setup, shared: Arc<Shared>) {
    let client = redis::Client::open(setup.url.as_str()).expect("url");
    let inner = ConnectionManager::new_with_config(client, fail_fast(TIMEOUT))
        .await
        .expect("a connection through the proxy");
    let conn = Counted::new(inner);
    let trips = conn.clone();
    let gate: Arc<Fleet> = Arc::new(
        RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(30))
            .prefix(setup.prefix.clone())
            .timeout(TIMEOUT)
            .build(conn)
            .expect("store")
            .outage_aware(settings())
            .expect("settings"),
    );
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..setup.keys {
        let key = format!("replica{}-key{k}", setup.index);
        tasks.spawn(reconcile(k, key, Arc::clone(&gate), Arc::clone(&shared)));
    }
    let mut out = std::io::stdout();
    let mut alone = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    while !shared.quit.load(Ordering::SeqCst) {
        tick.tick().await;
        alone += u64::from(gate.alone());
        let line = format!(
            "@S {} {} {} {} {}\n",
            u8::from(gate.in_outage()),
            u8::from(gate.alone()),
            gate.parked(),
            gate.outages(),
            shared.succeeded.load(Ordering::SeqCst),
        );
        out.write_all(line.as_bytes()).expect("stdout");
        out.flush().expect("stdout");
    }
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    let log = shared.log.lock().unwrap();
    let mut text = String::new();
    for a in &log.attempts {
        let (ok, informed) = (u8::from(a.ok), u8::from(a.informed));
        let (k, earliest, received) = (a.key, a.earliest, a.received);
        text += &format!("@A {k} {earliest} {received} {ok} {informed}\n");
    }
    for ((op, kind), (count, first)) in &log.errors {
        text += &format!("@E {op} {kind} {count} {first}\n");
    }
    let trips = trips.trips();
    text += &format!("@T {trips} {} {alone}\n@END\n", log.calls);
    out.write_all(text.as_bytes()).expect("stdout");
    out.flush().expect("stdout");
}

/// One key's reconcile loop: claim; while the gate says wait, wait; when
/// let go, try the dependency and tell the gate; stop after the first
/// success (the next run would be a resync, long after the test).
///
/// Each attempt is recorded with the earliest time the gate can have let
/// it go: the gate decides on Redis `TIME` between a call's sending and
/// its answer, and a wait it answers runs from that decision, so the time
/// it names (a step's slot, a time in the release) is at least the
/// call's sending plus the wait, and the key asks again only after it.
/// When the call before the attempt answered with a wait, that bound is
/// at most both the time the release gave the key and the time the gate
/// let it go. After an error (a call whose outcome is unknown may have
/// given the key a time it never heard of) it is the sending of the claim
/// that let the key go: the time it was let go, at least.
async fn reconcile(k: usize, key: String, gate: Arc<Fleet>, shared: Arc<Shared>) {
    let mut earliest = 0;
    while !shared.quit.load(Ordering::SeqCst) {
        let sent = epoch_ns();
        let claimed = gate.claim(&key).await;
        let received = epoch_ns();
        shared.log.lock().unwrap().calls += 1;
        let wait = match claimed {
            Err(e) => {
                shared.log.lock().unwrap().error("claim", &e);
                earliest = 0;
                AFTER_ERROR
            }
            Ok(Some(wait)) => {
                earliest = sent + wait.as_nanos() as u64;
                wait
            }
            Ok(None) => {
                let informed = gate.in_outage();
                let up = received >= shared.up_at.load(Ordering::SeqCst);
                let attempt = Attempt {
                    key: k,
                    earliest: if earliest == 0 { sent } else { earliest },
                    received,
                    ok: up,
                    informed,
                };
                shared.log.lock().unwrap().attempts.push(attempt);
                if up {
                    let told = gate.succeed(&key).await;
                    let mut log = shared.log.lock().unwrap();
                    log.calls += 1;
                    if let Err(e) = told {
                        log.error("succeed", &e);
                    }
                    shared.succeeded.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                let sent = epoch_ns();
                let failed = gate.fail(&key).await;
                let mut log = shared.log.lock().unwrap();
                log.calls += 1;
                match failed {
                    Ok(Ok(Level { backoff: wait, .. }))
                    | Ok(Err(InBackoff { remaining: wait })) => {
                        earliest = sent + wait.as_nanos() as u64;
                        wait
                    }
                    Err(e) => {
                        log.error("fail", &e);
                        earliest = 0;
                        AFTER_ERROR
                    }
                }
            }
        };
        tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
    }
}
