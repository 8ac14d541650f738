//! One replica of the fleet, in a process of its own: 250 keys, each a
//! reconcile loop on a [`RedisOutageAware`] over a store on the caller's
//! mock clock, against a dependency that is down for a span of the
//! simulated time. The parent moves the time forward: each line on stdin
//! is a time; the child runs every key due by then and answers with one
//! line per attempt that reached the dependency, then a line of status.
//! With domains, half of the keys name a dependency that goes down and
//! half one that stays up.

use std::io::{BufRead, Write};
use std::time::Duration;

use keyed_backoff::clock::{MockClock, MockInstant};
use keyed_backoff::{Gate, InBackoff};
use keyed_backoff_outage::OutageSettings;
use keyed_backoff_redis::redis::aio::ConnectionManager;
use keyed_backoff_redis::{RedisBackoff, RedisOutageAware};

/// What the parent tells a child, through its environment.
pub struct Setup {
    pub index: usize,
    pub url: String,
    pub prefix: String,
    pub keys: usize,
    /// The dependency is down from `down.0` until `down.1` (ns).
    pub down: (u64, u64),
    /// How long a key waits after a success before it runs again.
    pub resync: Duration,
    /// Whether the store answers in process while Redis is unreachable
    /// (without, an error of the store ends the child, and the test).
    pub fallback: bool,
    /// Whether the keys name their dependency: the even keys the domain
    /// [`DOWN_DOMAIN`], which is down for `down`, the odd ones
    /// [`UP_DOMAIN`], never down (without, every key's dependency is down).
    pub domains: bool,
}

/// The domain that goes down, when keys name theirs.
pub const DOWN_DOMAIN: &str = "db";
/// The domain that stays up.
pub const UP_DOMAIN: &str = "queue";

/// The domain of key `k`.
pub fn domain_of(k: usize) -> &'static str {
    if k.is_multiple_of(2) {
        DOWN_DOMAIN
    } else {
        UP_DOMAIN
    }
}

pub const ENV: &str = "KEYED_BACKOFF_FLEET_CHILD";

impl Setup {
    pub fn env(&self) -> Vec<(String, String)> {
        let value = format!(
            "{} {} {} {} {} {} {} {} {}",
            self.index,
            self.url,
            self.prefix,
            self.keys,
            self.down.0,
            self.down.1,
            self.resync.as_nanos(),
            u8::from(self.fallback),
            u8::from(self.domains)
        );
        vec![(ENV.to_string(), value)]
    }

    pub fn from_env() -> Option<Setup> {
        let value = std::env::var(ENV).ok()?;
        let w: Vec<&str> = value.split(' ').collect();
        let n = |i: usize| w[i].parse::<u64>().expect("a number");
        Some(Setup {
            index: n(0) as usize,
            url: w[1].to_string(),
            prefix: w[2].to_string(),
            keys: n(3) as usize,
            down: (n(4), n(5)),
            resync: Duration::from_nanos(n(6)),
            fallback: n(7) == 1,
            domains: n(8) == 1,
        })
    }
}

/// Keys that may try the dependency per step of the ladder.
pub const PROBES: usize = 3;
/// Keys let go per second after the outage.
pub const RELEASE_RATE: usize = 200;

/// The settings every replica uses: the defaults (a 1 s → 4 s ladder),
/// their probes and release rate spelled out.
pub fn settings() -> OutageSettings {
    OutageSettings::new()
        .probes(Some(PROBES as u32))
        .release_rate(RELEASE_RATE as f64)
}

/// Runs the child until stdin closes or says `Q`.
pub fn run(setup: Setup) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let clock = MockClock::new();
    let gate: RedisOutageAware<ConnectionManager> = rt.block_on(async {
        // A generous timeout: on a loaded machine a slow answer must not
        // pass for Redis being away.
        let mut builder = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(30))
            .prefix(setup.prefix.clone())
            .clock(clock.clone())
            .timeout(Duration::from_secs(2));
        if setup.fallback {
            builder = builder.fallback(Duration::from_secs(1));
        }
        let store = builder.open(&setup.url).await.expect("store");
        store.outage_aware(settings()).expect("settings")
    });
    let keys: Vec<String> = (0..setup.keys)
        .map(|k| format!("replica{}-key{k}", setup.index))
        .collect();
    // The first runs spread over one resync period.
    let spread = setup.resync.as_nanos() as u64 / setup.keys as u64;
    let mut due: Vec<u64> = (0..setup.keys as u64).map(|k| k * spread).collect();
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.expect("stdin");
        if line == "Q" {
            break;
        }
        let now: u64 = line.parse().expect("a time");
        clock.set(MockInstant::from_nanos(now as i64));
        let mut order: Vec<usize> = (0..keys.len()).filter(|&k| due[k] <= now).collect();
        order.sort_by_key(|&k| due[k]);
        let mut lines = String::new();
        rt.block_on(async {
            for k in order {
                let domain = setup.domains.then(|| domain_of(k));
                let (next, attempt) = turn(&gate, &keys[k], domain, now, &setup).await;
                due[k] = now + next.as_nanos().max(1) as u64;
                if let Some((ok, informed)) = attempt {
                    let (ok, informed) = (u8::from(ok), u8::from(informed));
                    lines += &format!("A {k} {now} {ok} {informed}\n");
                }
            }
        });
        let next = due.iter().min().copied().unwrap_or(u64::MAX);
        // The outage watched: of everything, or of the domain down; then
        // the outages of everything and of the domain that stays up.
        let (mut in_outage, mut outages, mut parked) =
            (gate.in_outage(), gate.outages(), gate.parked());
        let (mut up_outages, domains) = (0, gate.domains());
        if setup.domains {
            let of = |name: &str| domains.iter().find(|d| d.name == name);
            if let Some(down) = of(DOWN_DOMAIN) {
                (in_outage, outages, parked) = (down.in_outage, down.outages, down.parked);
            } else {
                (in_outage, outages, parked) = (false, 0, 0);
            }
            up_outages = of(UP_DOMAIN).map_or(0, |up| up.outages);
        }
        lines += &format!(
            "D {} {} {outages} {parked} {next} {} {up_outages}\n",
            u8::from(in_outage),
            u8::from(gate.alone()),
            gate.outages(),
        );
        out.write_all(lines.as_bytes()).expect("stdout");
        out.flush().expect("stdout");
    }
}

/// One run of `key` at `now`: how long until it runs again, and whether
/// it reached the dependency (with the answer, and whether the gate knew
/// of an outage when it let the key go).
async fn turn(
    gate: &RedisOutageAware<ConnectionManager>,
    key: &String,
    domain: Option<&str>,
    now: u64,
    setup: &Setup,
) -> (Duration, Option<(bool, bool)>) {
    if let Some(wait) = gate.claim(key).await.expect("claim") {
        return (wait, None);
    }
    let informed = match domain {
        Some(name) => gate.domains().iter().any(|d| d.name == name && d.in_outage),
        None => gate.in_outage(),
    };
    let down = domain.is_none_or(|name| name == DOWN_DOMAIN);
    let up = !down || !(setup.down.0..setup.down.1).contains(&now);
    if up {
        match domain {
            Some(name) => gate.succeed_in(key, name).await.expect("succeed"),
            None => gate.succeed(key).await.expect("succeed"),
        }
        return (setup.resync, Some((true, informed)));
    }
    let failed = match domain {
        Some(name) => gate.fail_in(key, name).await,
        None => gate.fail(key).await,
    };
    let wait = match failed.expect("fail") {
        Ok(level) => level.backoff,
        Err(InBackoff { remaining }) => remaining,
    };
    (wait, Some((false, informed)))
}
