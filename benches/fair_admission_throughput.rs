//! Fair admission's cost against tower's `ConcurrencyLimit`: requests per
//! second through a no-op service on a tokio runtime of 2 workers, with
//! `clients` tasks each sending one request after another. Three variants
//! run interleaved in each round (no layer, `ConcurrencyLimit` with the
//! level's seats, `FairnessLayer` with one queuing level of those seats),
//! and each row reports the median over rounds and the median of the
//! rounds' own ratios.
//!
//! `cargo bench -p keyed-backoff-benches --features fair-admission --bench fair_admission_throughput`
//! (defaults: 5 rounds of 200 ms per variant; `ROUNDS=n`, `MILLIS=n`
//! override; `ROWS=clients/seats/flows,...` picks rows; `ONLY=bare`,
//! `ONLY=limit` or `ONLY=fair` runs one variant alone, for a profiler).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use fair_admission::{Apf, Class, FairnessLayer, LevelSpec, LimitResponse};
use tower::limit::ConcurrencyLimit;
use tower::{Layer, Service, ServiceExt};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// A request: the index of its flow.
type Req = usize;

/// The no-op service: its response is ready at its second poll, so that
/// a request holds its seat across one turn of the scheduler (as any
/// handler that awaits anything does) and the clients take turns.
#[derive(Clone, Copy)]
struct Noop;

impl Service<Req> for Noop {
    type Response = ();
    type Error = Infallible;
    type Future = YieldOnce;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Req) -> YieldOnce {
        YieldOnce(false)
    }
}

/// Pending once (waking itself at once), then ready.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = Result<(), Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.0 {
            return Poll::Ready(Ok(()));
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// What a client calls: one of the three variants.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    Bare,
    Limit,
    Fair,
}

/// One row of the table.
#[derive(Clone, Copy)]
struct Row {
    clients: usize,
    seats: u32,
    flows: usize,
}

/// Kubernetes' defaults for a queuing level: 64 queues of 50, hands of 8.
const QUEUING: LimitResponse = LimitResponse::Queue {
    queues: 64,
    queue_length_limit: 50,
    hand_size: 8,
};

/// Requests served per second by `clients` tasks calling `service` for
/// `run`; request `n` of client `c` is of flow `(c + n · clients) % flows`.
fn served<S>(rt: &tokio::runtime::Runtime, service: S, row: Row, run: Duration) -> f64
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: std::fmt::Debug,
{
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let (started, elapsed) = rt.block_on(async {
        let start_line = Arc::new(tokio::sync::Barrier::new(row.clients + 1));
        let tasks: Vec<_> = (0..row.clients)
            .map(|c| {
                let (mut service, stop, total) = (service.clone(), stop.clone(), total.clone());
                let start_line = start_line.clone();
                tokio::spawn(async move {
                    start_line.wait().await;
                    let (mut n, mut ok) = (0usize, 0u64);
                    while !stop.load(Ordering::Relaxed) {
                        let flow = (c + n * row.clients) % row.flows;
                        n += 1;
                        let ready = service.ready().await.expect("ready");
                        if ready.call(flow).await.is_ok() {
                            ok += 1;
                        }
                    }
                    total.fetch_add(ok, Ordering::Relaxed);
                })
            })
            .collect();
        start_line.wait().await;
        let started = Instant::now();
        tokio::time::sleep(run).await;
        stop.store(true, Ordering::Relaxed);
        let elapsed = started.elapsed();
        for t in tasks {
            t.await.expect("client");
        }
        (started, elapsed)
    });
    let _ = started;
    total.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64()
}

fn run_variant(rt: &tokio::runtime::Runtime, variant: Variant, row: Row, run: Duration) -> f64 {
    match variant {
        Variant::Bare => served(rt, Noop, row, run),
        Variant::Limit => served(
            rt,
            ConcurrencyLimit::new(Noop, row.seats as usize),
            row,
            run,
        ),
        Variant::Fair => {
            let apf = Apf::builder(row.seats)
                .level("workload", LevelSpec::limited(1, QUEUING))
                .build()
                .expect("valid");
            let level = apf.level_id("workload").expect("built");
            let names: Arc<Vec<String>> =
                Arc::new((0..row.flows).map(|f| format!("flow-{f}")).collect());
            // The request's flow is its user name, as a server reads it
            // from a header.
            let layer = rt.block_on(async {
                FairnessLayer::new(apf, move |req: &Req| {
                    Class::new(level, names[*req].as_str())
                })
            });
            served(rt, layer.layer(Noop), row, run)
        }
    }
}

fn rows() -> Vec<Row> {
    if let Ok(spec) = std::env::var("ROWS") {
        return spec
            .split(',')
            .map(|r| {
                let v: Vec<usize> = r
                    .split('/')
                    .map(|x| x.parse().expect("clients/seats/flows"))
                    .collect();
                Row {
                    clients: v[0],
                    seats: v[1] as u32,
                    flows: v[2],
                }
            })
            .collect();
    }
    let mut rows = Vec::new();
    for clients in [16, 64, 256] {
        for seats in [1_024, 8] {
            for flows in [16, 64, 1_024] {
                rows.push(Row {
                    clients,
                    seats,
                    flows,
                });
            }
        }
    }
    rows
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let rounds = env("ROUNDS", 5);
    let run = Duration::from_millis(env("MILLIS", 200) as u64);
    let only = std::env::var("ONLY").ok().map(|v| match v.as_str() {
        "bare" => Variant::Bare,
        "limit" => Variant::Limit,
        "fair" => Variant::Fair,
        other => panic!("ONLY={other}: bare, limit or fair"),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(env("WORKERS", 2))
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "| clients | seats | flows | no layer | `ConcurrencyLimit` | fair-admission | ConcurrencyLimit / fair-admission |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows() {
        let variants = [Variant::Bare, Variant::Limit, Variant::Fair];
        let mut rps = [Vec::new(), Vec::new(), Vec::new()];
        let mut ratios = Vec::new();
        for round in 0..rounds {
            let mut this = [0.0; 3];
            // Each round starts with a different variant.
            for k in 0..3 {
                let i = (round + k) % 3;
                if only.is_some_and(|v| v != variants[i]) {
                    this[i] = f64::NAN;
                    continue;
                }
                this[i] = run_variant(&rt, variants[i], row, run);
            }
            for i in 0..3 {
                rps[i].push(this[i]);
            }
            ratios.push(this[1] / this[2]);
        }
        let [bare, limit, fair] = rps.map(median);
        println!(
            "| {} | {} | {} | {:.2} M | {:.2} M | {:.2} M | {:.1}x |",
            row.clients,
            row.seats,
            row.flows,
            bare / 1e6,
            limit / 1e6,
            fair / 1e6,
            median(ratios)
        );
    }
}
