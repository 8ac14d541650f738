//! A layer over the in-process manager, or over the outage wrapper with
//! its outage kept in process, allocates nothing for a request that goes
//! straight through: its gate answers at once, with no future boxed. (A
//! layer over a store shared by a fleet boxes one future per question to
//! the store.) Counted with a global allocator of the test's
//! own, over an upstream that allocates nothing either.
//!
//! The allocator's counts are the whole process's, so the suite has no
//! test harness of its own (`harness = false`): libtest would run the test
//! on a thread of its own while its main thread went on allocating its
//! bookkeeping, which on a loaded machine lands inside the count.

use std::alloc::System;
use std::future::{Ready, ready};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use keyed_backoff::Gate;
use keyed_backoff_outage::{OutageAware, OutageSettings};
use keyed_backoff_tower::{Backoff, KeyedBackoffLayer};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tower::{Layer, Service};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// An upstream that answers every tenant at once, allocating nothing.
#[derive(Clone)]
struct Answer;

impl Service<u32> for Answer {
    type Response = u16;
    type Error = std::convert::Infallible;
    type Future = Ready<Result<u16, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: u32) -> Self::Future {
        ready(Ok(200))
    }
}

fn main() {
    let backoff = || {
        Arc::new(Backoff::<u32>::new(Duration::from_millis(10), Duration::from_secs(1)).unwrap())
    };
    nothing_allocated_per_request(backoff(), None);
    println!("a request through a layer over the manager allocates nothing: ok");
    let outage = OutageAware::new(backoff(), OutageSettings::new()).unwrap();
    nothing_allocated_per_request(Arc::new(outage), None);
    println!("a request through a layer over the in-process outage wrapper allocates nothing: ok");
    let outage = OutageAware::new(backoff(), OutageSettings::new()).unwrap();
    nothing_allocated_per_request(Arc::new(outage), Some(region));
    println!("... nor one whose layer names the key's domain: ok");
}

/// The region of a tenant's requests.
fn region(tenant: &u32) -> Option<&str> {
    Some(["eu", "us"][*tenant as usize % 2])
}

/// 10,000 requests through a layer over `gate` (naming each key's domain
/// with `domain`, if given), each going straight through: no allocation.
fn nothing_allocated_per_request<G: Gate<u32> + Clone + 'static>(
    gate: G,
    domain: Option<fn(&u32) -> Option<&str>>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut layer = KeyedBackoffLayer::new(gate, |tenant: &u32| *tenant);
    if let Some(domain) = domain {
        layer = layer.domain(domain);
    }
    let mut service = layer.layer(Answer);
    rt.block_on(async {
        // Warm up: the keys' first use may grow the manager's maps.
        for tenant in 0..8 {
            std::future::poll_fn(|cx| service.poll_ready(cx))
                .await
                .unwrap();
            assert_eq!(service.call(tenant).await.unwrap(), 200);
        }
        let region = Region::new(GLOBAL);
        for n in 0..10_000u32 {
            std::future::poll_fn(|cx| service.poll_ready(cx))
                .await
                .unwrap();
            assert_eq!(service.call(n % 8).await.unwrap(), 200);
        }
        let allocated = region.change().allocations;
        assert_eq!(allocated, 0, "{allocated} allocations for 10,000 requests");
    });
}
