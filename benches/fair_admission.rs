//! Fair admission per request, with criterion: the `Apf` state machine
//! alone (a request admitted and completed), and one request through
//! `FairnessLayer` against tower's `ConcurrencyLimit` with the same seats
//! and against no layer, on a current-thread runtime. For throughput with
//! many clients on 2 workers, see `fair_admission_throughput`.
//!
//! `cargo bench -p keyed-backoff-benches --features fair-admission --bench fair_admission`

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::hint::black_box;
use std::task::{Context, Poll};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use fair_admission::{Admit, Apf, Class, FairnessLayer, LevelSpec, LimitResponse};
use tower::limit::ConcurrencyLimit;
use tower::{Layer, Service, ServiceExt};

/// Kubernetes' defaults for a queuing level: 64 queues of 50, hands of 8.
const QUEUING: LimitResponse = LimitResponse::Queue {
    queues: 64,
    queue_length_limit: 50,
    hand_size: 8,
};

const SEATS: u32 = 1_024;
const FLOWS: usize = 64;

#[derive(Clone, Copy)]
struct Noop;

impl Service<usize> for Noop {
    type Response = ();
    type Error = Infallible;
    type Future = Ready<Result<(), Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: usize) -> Self::Future {
        ready(Ok(()))
    }
}

fn apf() -> Apf {
    Apf::builder(SEATS)
        .level("workload", LevelSpec::limited(1, QUEUING))
        .build()
        .expect("valid")
}

fn state_machine(c: &mut Criterion) {
    let mut apf = apf();
    let level = apf.level_id("workload").expect("built");
    let hashes: Vec<u64> = (0..FLOWS).map(|f| apf.flow_hash(&f)).collect();
    let mut i = 0usize;
    let mut now = Duration::ZERO;
    c.bench_function("apf/admit+complete", |b| {
        b.iter(|| {
            i += 1;
            now += Duration::from_micros(1);
            apf.advance_to(now);
            let admission = apf.admit_hashed(level, hashes[i % FLOWS], 1);
            let Admit::Dispatched(ticket) = admission.admit else {
                unreachable!("{SEATS} seats for one request")
            };
            black_box(apf.complete(ticket))
        })
    });
}

fn one_request(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let apf = apf();
    let level = apf.level_id("workload").expect("built");
    let names: Vec<String> = (0..FLOWS).map(|f| format!("flow-{f}")).collect();
    let layer = rt.block_on(async {
        FairnessLayer::new(apf, move |req: &usize| {
            Class::new(level, names[*req].as_str())
        })
    });
    let mut group = c.benchmark_group("one request");
    let mut i = 0usize;
    let mut bare = Noop;
    group.bench_function("no layer", |b| {
        b.iter(|| {
            i += 1;
            rt.block_on(one(&mut bare, i % FLOWS))
        })
    });
    let mut limited = ConcurrencyLimit::new(Noop, SEATS as usize);
    group.bench_function("ConcurrencyLimit", |b| {
        b.iter(|| {
            i += 1;
            rt.block_on(one(&mut limited, i % FLOWS))
        })
    });
    let mut fair = layer.layer(Noop);
    group.bench_function("FairnessLayer", |b| {
        b.iter(|| {
            i += 1;
            rt.block_on(one(&mut fair, i % FLOWS))
        })
    });
    group.finish();
}

/// One request through `service`, once it is ready.
async fn one<S>(service: &mut S, req: usize)
where
    S: Service<usize>,
    S::Error: std::fmt::Debug,
{
    let service = service.ready().await.expect("ready");
    service.call(req).await.expect("served");
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = state_machine, one_request
}
criterion_main!(benches);
