//! Callers that ask at once, served together: the first caller to find
//! nobody serving leads, and serves every question asked meanwhile in one
//! batch, then the next batch, until none is left; the others wait for
//! their answers. A fleet's keys all asking at once then cost the store a
//! few round trips, not one compare-and-set each.
//!
//! A leader is a caller's own future, so it can be dropped mid-batch (its
//! caller gave up): the questions of the batch it was serving lose their
//! answers and are asked again, and the first question still waiting is
//! told to lead. Nothing waits for a leader that is gone.

use std::collections::VecDeque;

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// The most questions one batch serves.
const MOST: usize = 512;

/// What a waiting caller is told.
pub(crate) enum Told<A> {
    /// Its answer.
    Answer(A),
    /// The leader is gone: ask again, and lead if nobody does.
    Lead,
}

/// A question waiting for its batch, and where its answer goes.
pub(crate) type Waiting<Q, A> = (Q, oneshot::Sender<Told<A>>);

struct Queue<Q, A> {
    waiting: VecDeque<Waiting<Q, A>>,
    leading: bool,
}

/// The questions waiting to be served, and whether someone serves them.
pub(crate) struct Batches<Q, A>(Mutex<Queue<Q, A>>);

impl<Q, A> Batches<Q, A> {
    pub(crate) fn new() -> Self {
        Batches(Mutex::new(Queue {
            waiting: VecDeque::new(),
            leading: false,
        }))
    }

    /// Queues `question`: where its answer will come, and a [`Leader`]
    /// when nobody serves the queue (the caller serves it now).
    pub(crate) fn join(
        &self,
        question: Q,
    ) -> (oneshot::Receiver<Told<A>>, Option<Leader<'_, Q, A>>) {
        let (tx, rx) = oneshot::channel();
        let mut queue = self.0.lock();
        queue.waiting.push_back((question, tx));
        let lead = !std::mem::replace(&mut queue.leading, true);
        let leader = Leader {
            batches: self,
            done: false,
        };
        (rx, lead.then_some(leader))
    }
}

/// The caller that serves the queue, until it is empty.
pub(crate) struct Leader<'a, Q, A> {
    batches: &'a Batches<Q, A>,
    /// The queue was found empty: nobody leads.
    done: bool,
}

impl<Q, A> Leader<'_, Q, A> {
    /// The next batch to serve (in the order asked), or `None` when the
    /// queue is empty: then nobody leads any more.
    pub(crate) fn next(&mut self) -> Option<Vec<Waiting<Q, A>>> {
        let mut queue = self.batches.0.lock();
        if queue.waiting.is_empty() {
            queue.leading = false;
            self.done = true;
            return None;
        }
        let n = queue.waiting.len().min(MOST);
        Some(queue.waiting.drain(..n).collect())
    }
}

/// A leader dropped before the queue was empty (its caller gave up, or a
/// panic): the first question still waiting leads instead.
impl<Q, A> Drop for Leader<'_, Q, A> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut queue = self.batches.0.lock();
        queue.leading = false;
        while let Some((_, tx)) = queue.waiting.pop_front() {
            if tx.send(Told::Lead).is_ok() {
                break;
            }
        }
    }
}
