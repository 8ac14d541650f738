//! A real kube-runtime `Controller` against a mocked API server, under
//! tokio's paused time: the exact reconcile timeline of each object.

mod support;

use std::time::Duration;

use keyed_backoff_kube::Stats;
use kube::runtime::controller::Action;
use support::{ApiServer, Ctx, configmap, gaps, one_to_sixteen, run_controller, with_uid};

const SECOND: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn an_object_that_always_fails_backs_off_doubling_to_the_cap() {
    let backoff = one_to_sixteen(false);
    let server = ApiServer::new(vec![configmap("broken", 1)]);
    let ctx = run_controller(server, &backoff, Ctx::new(&[], &[]), 60 * SECOND).await;
    let timeline = ctx.timeline("broken");
    assert_eq!(timeline, [0.0, 1.0, 3.0, 7.0, 15.0, 31.0, 47.0]);
    assert_eq!(gaps(&timeline), [1.0, 2.0, 4.0, 8.0, 16.0, 16.0]);
    let broken = configmap("broken", 1);
    assert_eq!(backoff.attempts(&broken), 7);
    let mut only_failures = Stats::default();
    only_failures.failures = 7;
    assert_eq!(backoff.stats(), only_failures);
}

#[tokio::test(start_paused = true)]
async fn an_object_that_recovers_is_reset_and_starts_over_at_the_initial_delay() {
    let backoff = one_to_sixteen(false);
    // Fails three times, succeeds, then (after a watch event at 20 s) fails
    // again: the new failures start at 1 s, not where the old ones stopped.
    let server = ApiServer::new(vec![configmap("flaky", 1), configmap("broken", 1)])
        .modified(20 * SECOND, "flaky");
    let script: &[(&str, &[bool])] = &[("flaky", &[false, false, false, true])];
    let ctx = run_controller(server, &backoff, Ctx::new(script, &[]), 40 * SECOND).await;
    let flaky = ctx.timeline("flaky");
    assert_eq!(flaky, [0.0, 1.0, 3.0, 7.0, 20.0, 21.0, 23.0, 27.0, 35.0]);
    assert_eq!(gaps(&flaky[..4]), [1.0, 2.0, 4.0]);
    assert_eq!(gaps(&flaky[4..]), [1.0, 2.0, 4.0, 8.0]);
    // The other object is not affected by the first one's reset.
    assert_eq!(ctx.timeline("broken"), [0.0, 1.0, 3.0, 7.0, 15.0, 31.0]);
    let c = backoff.stats();
    assert_eq!((c.successes, c.refusals), (1, 0));
    assert_eq!(backoff.attempts(&configmap("flaky", 1)), 5);
}

#[tokio::test(start_paused = true)]
async fn an_object_recreated_under_the_same_name_starts_at_the_initial_delay() {
    let backoff = one_to_sixteen(false);
    // `app` fails from the start and has reached a 16 s backoff by 15 s; at
    // 20 s it is deleted and created again (a new uid), and the new object
    // fails too.
    let old = with_uid("app", 1, "uid-old");
    let new = with_uid("app", 50, "uid-new");
    let server = ApiServer::new(vec![old.clone()])
        .event(20 * SECOND, "DELETED", with_uid("app", 49, "uid-old"))
        .event(20 * SECOND, "ADDED", new.clone());
    let ctx = run_controller(server, &backoff, Ctx::new(&[], &[]), 40 * SECOND).await;
    let timeline = ctx.timeline("app");
    // The old object's ladder, then the new one's from the initial delay
    // (not a refusal until 31 s, where the old backoff would have ended).
    assert_eq!(
        timeline,
        [0.0, 1.0, 3.0, 7.0, 15.0, 20.0, 21.0, 23.0, 27.0, 35.0]
    );
    assert_eq!(gaps(&timeline[5..]), [1.0, 2.0, 4.0, 8.0]);
    let first_requeue_of_new = ctx.requeues.lock().unwrap()[5].clone();
    assert_eq!(first_requeue_of_new.2, Action::requeue(SECOND));
    assert_eq!(backoff.stats().refusals, 0);
    // Two entries: the old uid's expires after its window and is
    // collected by GC; `reset` removes it at once.
    assert_eq!((backoff.attempts(&old), backoff.attempts(&new)), (5, 5));
    assert_eq!(backoff.manager().len(), 2);
    assert!(backoff.reset(&old));
    assert_eq!(backoff.manager().len(), 1);
    assert_eq!(backoff.attempts(&new), 5);
}

/// An object that always fails gets a watch event at 2 s: it failed at 1 s
/// and is due again at 3 s. Returns its reconcile timeline and the counters.
async fn touched_during_backoff(skip: bool) -> (Vec<f64>, Stats, u32) {
    let backoff = one_to_sixteen(skip);
    let server = ApiServer::new(vec![configmap("touched", 1)]).modified(2 * SECOND, "touched");
    let ctx = run_controller(server, &backoff, Ctx::new(&[], &[]), 60 * SECOND).await;
    let attempts = backoff.attempts(&configmap("touched", 1));
    (ctx.timeline("touched"), backoff.stats(), attempts)
}

#[tokio::test(start_paused = true)]
async fn a_watch_event_during_backoff_runs_early_but_is_not_counted_as_a_failure() {
    let (timeline, c, attempts) = touched_during_backoff(false).await;
    assert_eq!(timeline, [0.0, 1.0, 2.0, 3.0, 7.0, 15.0, 31.0, 47.0]);
    assert_eq!((c.failures, c.refusals, c.skips), (7, 1, 0));
    assert_eq!(attempts, 7);
}

#[tokio::test(start_paused = true)]
async fn with_skipping_a_watch_event_during_backoff_does_not_run_the_body() {
    let (timeline, c, attempts) = touched_during_backoff(true).await;
    assert_eq!(timeline, [0.0, 1.0, 3.0, 7.0, 15.0, 31.0, 47.0]);
    assert_eq!((c.failures, c.refusals, c.skips), (7, 0, 1));
    assert_eq!(attempts, 7);
}

/// kubernetes#132805: in Kubernetes' own controllers every trigger of a
/// failing object goes through the rate limiter, so watch events that
/// arrive during backoff each count as a failure and the backoff grows
/// faster than exponentially. Here an object that always fails is touched
/// every 700 ms for 40 s: it runs on every event, yet each counted failure
/// doubles the last backoff exactly once.
#[tokio::test(start_paused = true)]
async fn watch_events_during_backoff_leave_the_ladder_at_one_doubling_per_failure() {
    let backoff = one_to_sixteen(false);
    let mut server = ApiServer::new(vec![configmap("busy", 1)]);
    for i in 1..=57 {
        server = server.modified(Duration::from_millis(700 * i), "busy");
    }
    let ctx = run_controller(server, &backoff, Ctx::new(&[], &[]), 45 * SECOND).await;
    let requeues = ctx.requeues.lock().unwrap().clone();
    // The counted failures: those after which attempts grew.
    let mut counted = Vec::new();
    let mut last = 0;
    for (_, at, action, attempts) in &requeues {
        if *attempts > last {
            counted.push((at.as_secs_f64(), action.clone()));
            last = *attempts;
        }
    }
    let times: Vec<f64> = counted.iter().map(|(t, _)| *t).collect();
    assert_eq!(times, [0.0, 1.0, 3.0, 7.0, 15.0, 31.0]);
    let delays: Vec<Action> = counted.into_iter().map(|(_, a)| a).collect();
    let ladder: Vec<Action> = [1, 2, 4, 8, 16, 16]
        .map(|s| Action::requeue(Duration::from_secs(s)))
        .to_vec();
    assert_eq!(delays, ladder);
    // Every event ran the object and was refused, not counted.
    let c = backoff.stats();
    assert_eq!(c.failures, 6);
    assert!(c.refusals >= 50, "{c:?}");
    assert_eq!(c.failures + c.refusals, requeues.len() as u64);
    assert_eq!(backoff.attempts(&configmap("busy", 1)), 6);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_reconcile_fails_only_its_object_and_is_backed_off() {
    let backoff = one_to_sixteen(false);
    let server = ApiServer::new(vec![
        configmap("panicky", 1),
        configmap("broken", 1),
        configmap("flaky", 1),
    ]);
    let script: &[(&str, &[bool])] = &[("flaky", &[false, false, true])];
    let ctx = run_controller(
        server,
        &backoff,
        Ctx::new(script, &["panicky"]),
        40 * SECOND,
    )
    .await;
    // The others run on their own schedule, as if nothing panicked.
    assert_eq!(ctx.timeline("broken"), [0.0, 1.0, 3.0, 7.0, 15.0, 31.0]);
    assert_eq!(ctx.timeline("flaky"), [0.0, 1.0, 3.0]);
    // The panicking object is retried with growing delays.
    let panicky = ctx.timeline("panicky");
    assert_eq!(panicky, [0.0, 1.0, 3.0, 7.0, 15.0, 31.0]);
    assert_eq!(gaps(&panicky), [1.0, 2.0, 4.0, 8.0, 16.0]);
    let c = backoff.stats();
    assert_eq!((c.panics, c.failures, c.successes), (6, 6 + 6 + 2, 1));
    assert_eq!(backoff.attempts(&configmap("panicky", 1)), 6);
}

#[tokio::test(start_paused = true)]
async fn expired_objects_are_collected_on_tokio_time() {
    let backoff = one_to_sixteen(false);
    let _gc = backoff.spawn_gc_task(Duration::from_secs(10)).unwrap();
    let cm = configmap("gone", 1);
    backoff.on_error(&cm);
    assert_eq!(backoff.manager().len(), 1);
    // Expired once 32 s (twice the cap) pass without a failure.
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(backoff.manager().len(), 1);
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(backoff.manager().len(), 0);
}
