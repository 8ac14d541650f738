//! [`DynGate`]: a gate behind a pointer answers as the gate itself, at
//! once when the gate promises to, and otherwise as a future to come that
//! owns what it needs; a gate's error reaches the caller, boxed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use keyed_backoff::clock::MockClock;
use keyed_backoff::{Answer, Backoff, DynGate, Gate, InBackoff, Level};
use keyed_backoff_testkit::{manager, ready};

const SEC: Duration = Duration::from_secs(1);

/// A future that is pending at its first poll (waking itself), then
/// gives `value`: a round trip, without a network.
struct Trip<T>(Option<T>, bool);

impl<T: Unpin> Future for Trip<T> {
    type Output = T;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if std::mem::replace(&mut self.1, true) {
            Poll::Ready(self.0.take().expect("polled after it was ready"))
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// The error of a store that cannot be reached.
#[derive(Debug)]
struct Unreachable(&'static str);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "store at {} unreachable", self.0)
    }
}

impl std::error::Error for Unreachable {}

/// A stand-in for a store across the network: the manager's answers, one
/// round trip later; the key "down" cannot be asked about. `Remote<true>`
/// promises to answer at once (`LIAR`), and does not.
#[derive(Clone)]
struct Remote<const LIAR: bool = false>(Arc<Backoff<String, MockClock>>);

impl<const LIAR: bool> Remote<LIAR> {
    fn answer<T: Unpin + Send>(
        &self,
        key: &str,
        answer: T,
    ) -> impl Future<Output = Result<T, Unreachable>> + Send {
        let down = key == "down";
        let trip = Trip(Some(answer), false);
        async move {
            let answer = trip.await;
            if down {
                Err(Unreachable("127.0.0.1:6379"))
            } else {
                Ok(answer)
            }
        }
    }
}

impl<const LIAR: bool> Gate<String> for Remote<LIAR> {
    type Error = Unreachable;
    const ANSWERS_AT_ONCE: bool = LIAR;

    fn wait(
        &self,
        key: &String,
    ) -> impl Future<Output = Result<Option<Duration>, Unreachable>> + Send {
        self.answer(
            key,
            ready(Gate::wait(&*self.0, key)).unwrap_or_else(|e| match e {}),
        )
    }
    fn fail(
        &self,
        key: &String,
    ) -> impl Future<Output = Result<Result<Level, InBackoff>, Unreachable>> + Send {
        self.answer(
            key,
            ready(Gate::fail(&*self.0, key)).unwrap_or_else(|e| match e {}),
        )
    }
    fn succeed(&self, key: &String) -> impl Future<Output = Result<(), Unreachable>> + Send {
        let Ok(()) = ready(Gate::succeed(&*self.0, key));
        self.answer(key, ())
    }
    fn hold(
        &self,
        key: &String,
        wait: Duration,
    ) -> impl Future<Output = Result<(), Unreachable>> + Send {
        let Ok(()) = ready(Gate::hold(&*self.0, key, wait));
        self.answer(key, ())
    }
    fn level(
        &self,
        key: &String,
    ) -> impl Future<Output = Result<Option<Level>, Unreachable>> + Send {
        self.answer(
            key,
            ready(Gate::level(&*self.0, key)).unwrap_or_else(|e| match e {}),
        )
    }
    fn resume(
        &self,
        key: &String,
        level: Level,
    ) -> impl Future<Output = Result<(), Unreachable>> + Send {
        let Ok(()) = ready(Gate::resume(&*self.0, key, level));
        self.answer(key, ())
    }
}

#[tokio::test]
async fn a_remote_gate_answers_later_with_futures_that_own_what_they_need() {
    let clock = MockClock::new();
    let backoff = Arc::new(manager(SEC, 8 * SEC, &clock));
    let gate: Arc<dyn DynGate<String>> = Arc::new(Remote::<false>(Arc::clone(&backoff)));
    assert!(!gate.answers_at_once());
    let answer = {
        // The key and the caller's handle go before the answer is awaited.
        let key = "db".to_string();
        gate.fail(&key)
    };
    let Answer::Later(_) = &answer else {
        panic!("a remote gate answered at once")
    };
    // One poll is not enough for a round trip: the answer comes back.
    let answer = answer
        .try_now()
        .expect_err("a round trip is not over in one poll");
    let level = answer.get().await.expect("reachable").expect("counted");
    assert_eq!((level.backoff, level.attempts), (SEC, 1));
    assert_eq!(backoff.attempts("db"), 1);
    // In backoff: the failure is not counted again, through the gate too.
    let again = gate.fail(&"db".to_string()).get().await.expect("reachable");
    assert_eq!(again, Err(InBackoff { remaining: SEC }));
    gate.hold(&"db".to_string(), 5 * SEC).get().await.unwrap();
    assert_eq!(
        gate.claim(&"db".to_string()).get().await.unwrap(),
        Some(5 * SEC)
    );
    let standing = gate.standing(&"db".to_string()).get().await.unwrap();
    assert_eq!(standing, (Some(level), Some(5 * SEC)));
    gate.succeed(&"db".to_string()).get().await.unwrap();
    assert_eq!(gate.level(&"db".to_string()).get().await.unwrap(), None);
    gate.resume(&"db".to_string(), level).get().await.unwrap();
    assert_eq!(backoff.attempts("db"), 1);
}

#[tokio::test]
async fn a_remote_gates_error_reaches_the_caller_naming_the_store() {
    let clock = MockClock::new();
    let gate: Arc<dyn DynGate<String>> =
        Arc::new(Remote::<false>(Arc::new(manager(SEC, 8 * SEC, &clock))));
    let error = gate.fail(&"down".to_string()).get().await.unwrap_err();
    assert_eq!(error.to_string(), "store at 127.0.0.1:6379 unreachable");
    assert!(error.downcast_ref::<Unreachable>().is_some());
}

#[test]
fn a_gate_that_breaks_its_promise_to_answer_at_once_gets_an_error_not_a_hang() {
    let clock = MockClock::new();
    let gate: Arc<dyn DynGate<String>> =
        Arc::new(Remote::<true>(Arc::new(manager(SEC, 8 * SEC, &clock))));
    assert!(gate.answers_at_once());
    let error = match gate.wait(&"db".to_string()).try_now() {
        Ok(Err(error)) => error,
        Ok(Ok(_)) => panic!("a future pending at its first poll gave an answer"),
        Err(_) => panic!("the broken promise was left pending"),
    };
    assert!(error.to_string().contains("ANSWERS_AT_ONCE"), "{error}");
}

#[test]
fn an_in_process_gate_answers_at_once_and_so_does_an_arc_of_it() {
    let clock = MockClock::new();
    let backoff = Arc::new(manager(SEC, 8 * SEC, &clock));
    const { assert!(<Arc<Backoff<String, MockClock>> as Gate<String>>::ANSWERS_AT_ONCE) };
    const { assert!(!<Remote<false> as Gate<String>>::ANSWERS_AT_ONCE) };
    let gate: Arc<dyn DynGate<String>> = Arc::new(Arc::clone(&backoff));
    let Answer::Now(Ok(level)) = gate.fail(&"k".to_string()) else {
        panic!("the manager answered later")
    };
    assert_eq!(level.backoff, SEC);
    let Answer::Now(wait) = gate.wait(&"k".to_string()) else {
        panic!("later")
    };
    assert_eq!(wait, Some(SEC));
}
