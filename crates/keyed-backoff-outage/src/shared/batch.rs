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
        drop(queue);
        // Made only by the caller that leads: a leader dropped unused would
        // hand the lead away.
        let leader = lead.then(|| Leader {
            batches: self,
            done: false,
        });
        (rx, leader)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(rx: &mut oneshot::Receiver<Told<u32>>) -> Option<u32> {
        match rx.try_recv() {
            Ok(Told::Answer(a)) => Some(a),
            _ => None,
        }
    }

    #[test]
    fn the_first_caller_leads_and_serves_every_question_asked_meanwhile() {
        let batches = Batches::<u32, u32>::new();
        let (mut first, leader) = batches.join(1);
        let mut leader = leader.expect("nobody led: the first caller leads");
        // Asked while the first leads: no second leader.
        let (mut second, none) = batches.join(2);
        assert!(none.is_none());
        let (mut third, none) = batches.join(3);
        assert!(none.is_none());
        let batch = leader.next().expect("three questions");
        assert_eq!(batch.iter().map(|(q, _)| *q).collect::<Vec<_>>(), [1, 2, 3]);
        for (q, tx) in batch {
            let _ = tx.send(Told::Answer(q * 10));
        }
        assert!(leader.next().is_none(), "the queue is empty");
        assert_eq!(
            [answer(&mut first), answer(&mut second), answer(&mut third)],
            [Some(10), Some(20), Some(30)]
        );
        // Nobody leads any more: the next caller does.
        assert!(batches.join(4).1.is_some());
    }

    #[test]
    fn a_leader_dropped_mid_batch_hands_the_lead_to_the_first_question_waiting() {
        let batches = Batches::<u32, u32>::new();
        let (mut first, leader) = batches.join(1);
        let mut leader = leader.unwrap();
        let batch = leader.next().unwrap();
        let (mut second, _) = batches.join(2);
        let (mut third, _) = batches.join(3);
        drop(batch);
        drop(leader);
        // The batch's question lost its answer; the first waiting leads.
        assert!(matches!(
            first.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
        assert!(matches!(second.try_recv(), Ok(Told::Lead)));
        assert!(third.try_recv().is_err());
        // Asked again, it leads.
        assert!(batches.join(2).1.is_some());
    }
}
