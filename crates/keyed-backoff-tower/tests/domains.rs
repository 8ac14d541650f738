//! A layer that names each key's dependency over the outage wrapper: a
//! region that goes down is seen down alone, its keys parked, while the
//! keys of the other region, which keep succeeding, go straight through.
//! Under tokio's paused time.

use std::sync::Arc;
use std::time::Duration;

mod common;

use common::Tokio;
use keyed_backoff_outage::{InProcess, OutageAware, OutageSettings};
use keyed_backoff_tower::{Backoff, BoxError, InBackoff, KeyedBackoffLayer};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt};

/// A request: its region and its tenant.
type Req = (&'static str, u32);

/// An upstream where region `eu` is down and `us` answers.
fn upstream() -> BoxCloneService<Req, u16, &'static str> {
    BoxCloneService::new(tower::service_fn(|(region, _): Req| async move {
        if region == "eu" {
            Err("eu is down")
        } else {
            Ok(200)
        }
    }))
}

/// The outage wrapper over a backoff of 1 s to 60 s, on tokio's clock.
fn gate() -> Arc<OutageAware<Backoff<Req, Tokio>, InProcess<Tokio>>> {
    let clock = Tokio::now();
    let backoff = Backoff::<Req>::builder(Duration::from_secs(1), Duration::from_secs(60))
        .clock(clock)
        .build()
        .unwrap();
    Arc::new(OutageAware::with_clock(backoff, OutageSettings::default(), clock).unwrap())
}

fn refused(error: &BoxError) -> bool {
    error.downcast_ref::<InBackoff>().is_some()
}

#[tokio::test(start_paused = true)]
async fn a_region_that_goes_down_is_parked_alone_while_the_other_succeeds() {
    let gate = gate();
    let service = KeyedBackoffLayer::new(Arc::clone(&gate), |req: &Req| *req)
        .domain(|(region, _): &Req| Some(region))
        .max_retries(0)
        .fail_fast()
        .layer(upstream());
    // 40 tenants in each region, every 10 ms one of each: the `us` ones
    // succeed, the `eu` ones fail.
    for tenant in 0..40 {
        let eu = service.clone().oneshot(("eu", tenant)).await;
        assert!(eu.is_err());
        assert_eq!(service.clone().oneshot(("us", tenant)).await.unwrap(), 200);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let domains = gate.domains();
    let eu = domains.iter().find(|d| d.name == "eu").expect("eu tracked");
    assert!(eu.in_outage, "{domains:?}");
    assert!(
        !domains.iter().any(|d| d.name == "us" && d.outages > 0),
        "{domains:?}"
    );
    assert!(!gate.in_outage(), "no outage of everything");
    // Two seconds on: the tenants of `eu` are parked (refused, as the
    // layer may not wait) but for a few probes; those of `us` all go.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut parked = 0;
    for tenant in 0..40 {
        let eu = service.clone().oneshot(("eu", tenant)).await;
        parked += usize::from(eu.as_ref().is_err_and(refused));
        assert_eq!(service.clone().oneshot(("us", tenant)).await.unwrap(), 200);
    }
    assert!(parked >= 35, "{parked} of 40 eu tenants parked");
}

#[tokio::test(start_paused = true)]
async fn a_tenant_that_succeeded_in_a_region_waits_on_its_outage_without_reaching_it() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let gate = gate();
    // `eu` is up, then down; the calls that reach it for tenants 100 and
    // up are counted.
    let (up, reached) = (
        Arc::new(AtomicBool::new(true)),
        Arc::new(AtomicUsize::new(0)),
    );
    let upstream = {
        let (up, reached) = (Arc::clone(&up), Arc::clone(&reached));
        BoxCloneService::new(tower::service_fn(move |(region, tenant): Req| {
            let (up, reached) = (Arc::clone(&up), Arc::clone(&reached));
            async move {
                if tenant >= 100 {
                    reached.fetch_add(1, Ordering::Relaxed);
                }
                match region == "eu" && !up.load(Ordering::Relaxed) {
                    true => Err("eu is down"),
                    false => Ok::<u16, &'static str>(200),
                }
            }
        }))
    };
    let service = KeyedBackoffLayer::new(Arc::clone(&gate), |req: &Req| *req)
        .domain(|(region, _): &Req| Some(region))
        .max_retries(0)
        .fail_fast()
        .layer(upstream);
    // Tenants 100 to 139 of `eu` succeed while it is up.
    for tenant in 100..140 {
        assert_eq!(service.clone().oneshot(("eu", tenant)).await.unwrap(), 200);
    }
    // It goes down: 40 other tenants fail in it, while `us` succeeds.
    up.store(false, Ordering::Relaxed);
    for tenant in 0..40 {
        assert!(service.clone().oneshot(("eu", tenant)).await.is_err());
        assert_eq!(service.clone().oneshot(("us", tenant)).await.unwrap(), 200);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(gate.domains().iter().any(|d| d.name == "eu" && d.in_outage));
    // The tenants that succeeded in `eu` are refused by its outage, but
    // for a few probes, without a call to learn that it is down.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = reached.load(Ordering::Relaxed);
    let mut parked = 0;
    for tenant in 100..140 {
        let eu = service.clone().oneshot(("eu", tenant)).await;
        parked += usize::from(eu.as_ref().is_err_and(refused));
    }
    let calls = reached.load(Ordering::Relaxed) - before;
    assert!(parked >= 35, "{parked} of 40 parked");
    assert_eq!(calls, 40 - parked, "only the probes reached eu");
}
