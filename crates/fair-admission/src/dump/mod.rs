//! A snapshot of an [`Apf`]'s levels, queues and requests, and the three
//! tables Kubernetes' API server serves at
//! `/debug/api_priority_and_fairness/dump_{priority_levels,queues,requests}`.

mod table;

use std::time::Duration;

use crate::Apf;
use crate::apf::{Level, Phase, Request};
use table::{go_duration, table};

/// Every level, queue and request of an [`Apf`] at one time, from
/// [`Apf::dump`]. Its three methods print it as Kubernetes' debug
/// endpoints do, with Kubernetes' columns.
///
/// ```
/// use fair_admission::{Apf, LevelSpec, LimitResponse};
/// let queuing = LimitResponse::Queue { queues: 2, queue_length_limit: 10, hand_size: 1 };
/// let mut apf = Apf::builder(1).level("workload", LevelSpec::limited(1, queuing)).build()?;
/// let level = apf.level_id("workload").unwrap();
/// let _ = apf.admit(level, &"alice", 1);
/// let dump = apf.dump();
/// assert_eq!(dump.levels[0].executing, 1);
/// assert!(dump.priority_levels().starts_with("PriorityLevelName, ActiveQueues, IsIdle,"));
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Dump {
    /// The levels, in the builder's order.
    pub levels: Vec<LevelDump>,
}

/// One level in a [`Dump`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LevelDump {
    /// Its name.
    pub name: String,
    /// Queues with a request waiting.
    pub active_queues: usize,
    /// Nothing waits and nothing executes.
    pub is_idle: bool,
    /// Requests waiting.
    pub waiting: usize,
    /// Requests executing.
    pub executing: usize,
    /// Requests dispatched so far.
    pub dispatched: u64,
    /// Requests refused so far (waits cancelled included).
    pub rejected: u64,
    /// Waits cancelled so far.
    pub cancelled: u64,
    /// Its queues, by index (none for an exempt or rejecting level).
    pub queues: Vec<QueueDump>,
    /// Its requests: each queue's waiting requests in order, then each
    /// queue's executing ones, then those in no queue.
    pub requests: Vec<RequestDump>,
}

/// One queue in a [`Dump`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct QueueDump {
    /// Requests waiting.
    pub pending: usize,
    /// Requests executing.
    pub executing: usize,
    /// Seats its requests hold.
    pub seats_in_use: u64,
    /// The virtual time (seat-seconds) of its next dispatch, as Kubernetes
    /// prints it (`12.34567890ss`).
    pub next_dispatch_r: String,
    /// Initial seats of the requests waiting.
    pub initial_seats_sum: u64,
    /// Most seats of the requests waiting.
    pub max_seats_sum: u64,
    /// Estimated work of the requests waiting, as Kubernetes prints it.
    pub total_work_sum: String,
}

/// One request in a [`Dump`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestDump {
    /// The flow schema that classified it (see [`Apf::name_flow`]).
    pub flow_schema: String,
    /// Its queue, if its level queues.
    pub queue: Option<usize>,
    /// Its place in its queue while it waits.
    pub index_in_queue: Option<usize>,
    /// Its flow distinguisher (see [`Apf::name_flow`]).
    pub flow_distinguisher: String,
    /// When it arrived, on the clock given to [`Apf::advance_to`].
    pub arrived: Duration,
    /// Seats while it executes.
    pub initial_seats: u32,
    /// Seats held after it completes.
    pub final_seats: u32,
    /// How long those are held.
    pub additional_latency: Duration,
    /// When it was dispatched, if it has been.
    pub started: Option<Duration>,
}

impl Apf {
    /// Every level, queue and request as they are now.
    pub fn dump(&self) -> Dump {
        Dump {
            levels: self.levels.iter().map(Level::dump).collect(),
        }
    }
}

impl Level {
    /// The level, its queues and its requests as they are now.
    pub(crate) fn dump(&self) -> LevelDump {
        let qs = &self.queues;
        let queues = qs
            .queues
            .iter()
            .map(|q| QueueDump {
                pending: q.waiting.len(),
                executing: q.executing,
                seats_in_use: q.seats_in_use,
                next_dispatch_r: q.next_dispatch_r.to_string(),
                initial_seats_sum: q.sum.initial_seats,
                max_seats_sum: q.sum.max_seats,
                total_work_sum: q.sum.total_work.to_string(),
            })
            .collect();
        let mut requests = Vec::new();
        for (i, q) in qs.queues.iter().enumerate() {
            for (at, w) in q.waiting.iter().enumerate() {
                if let Some(r) = self.requests.get(&w.ticket) {
                    requests.push(dump_request(r, Some(i), Some(at)));
                }
            }
        }
        let mut running: Vec<_> = self
            .requests
            .iter()
            .filter(|(_, r)| r.phase != Phase::Waiting)
            .collect();
        running.sort_by_key(|&(t, r)| (r.queue.is_none(), r.queue, *t));
        requests.extend(running.iter().map(|(_, r)| dump_request(r, r.queue, None)));
        LevelDump {
            name: self.name.clone(),
            active_queues: qs.queues.iter().filter(|q| !q.waiting.is_empty()).count(),
            is_idle: qs.waiting == 0 && qs.executing == 0,
            waiting: qs.waiting,
            executing: qs.executing,
            dispatched: qs.dispatched,
            rejected: qs.rejected,
            cancelled: qs.cancelled,
            queues,
            requests,
        }
    }
}

fn dump_request(r: &Request, queue: Option<usize>, index: Option<usize>) -> RequestDump {
    RequestDump {
        flow_schema: r.schema.to_string(),
        queue,
        index_in_queue: index,
        flow_distinguisher: r.flow.to_string(),
        arrived: r.arrived,
        initial_seats: r.work.initial_seats,
        final_seats: r.work.final_seats,
        additional_latency: r.work.additional_latency,
        started: (r.phase != Phase::Waiting).then_some(r.started),
    }
}

/// A number, or Kubernetes' -1 for none.
fn index(i: Option<usize>) -> String {
    i.map_or_else(|| "-1".to_owned(), |i| i.to_string())
}

fn cells<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.map(str::to_owned).to_vec()
}

impl Dump {
    /// One row per level, sorted by name, as Kubernetes'
    /// `dump_priority_levels` (no level is ever quiescing here).
    pub fn priority_levels(&self) -> String {
        let mut rows = vec![cells([
            "PriorityLevelName",
            "ActiveQueues",
            "IsIdle",
            "IsQuiescing",
            "WaitingRequests",
            "ExecutingRequests",
            "DispatchedRequests",
            "RejectedRequests",
            "TimedoutRequests",
            "CancelledRequests",
        ])];
        let mut levels: Vec<&LevelDump> = self.levels.iter().collect();
        levels.sort_by(|a, b| a.name.cmp(&b.name));
        for l in levels {
            rows.push(vec![
                l.name.clone(),
                l.active_queues.to_string(),
                l.is_idle.to_string(),
                "false".to_owned(),
                l.waiting.to_string(),
                l.executing.to_string(),
                l.dispatched.to_string(),
                l.rejected.to_string(),
                // Kubernetes counts a wait that ran out as cancelled.
                "0".to_owned(),
                l.cancelled.to_string(),
            ]);
        }
        table(&rows)
    }

    /// One row per queue, as Kubernetes' `dump_queues`.
    pub fn queues(&self) -> String {
        let mut rows = vec![cells([
            "PriorityLevelName",
            "Index",
            "PendingRequests",
            "ExecutingRequests",
            "SeatsInUse",
            "NextDispatchR",
            "InitialSeatsSum",
            "MaxSeatsSum",
            "TotalWorkSum",
        ])];
        for l in &self.levels {
            for (i, q) in l.queues.iter().enumerate() {
                rows.push(vec![
                    l.name.clone(),
                    i.to_string(),
                    q.pending.to_string(),
                    q.executing.to_string(),
                    q.seats_in_use.to_string(),
                    q.next_dispatch_r.clone(),
                    q.initial_seats_sum.to_string(),
                    q.max_seats_sum.to_string(),
                    q.total_work_sum.clone(),
                ]);
            }
        }
        table(&rows)
    }

    /// One row per request, as Kubernetes' `dump_requests`: times are on
    /// the clock given to [`Apf::advance_to`], and a request not yet started
    /// has no start time.
    pub fn requests(&self) -> String {
        let mut rows = vec![cells([
            "PriorityLevelName",
            "FlowSchemaName",
            "QueueIndex",
            "RequestIndexInQueue",
            "FlowDistingsher",
            "ArriveTime",
            "InitialSeats",
            "FinalSeats",
            "AdditionalLatency",
            "StartTime",
        ])];
        for l in &self.levels {
            for r in &l.requests {
                rows.push(vec![
                    l.name.clone(),
                    r.flow_schema.clone(),
                    index(r.queue),
                    index(r.index_in_queue),
                    r.flow_distinguisher.clone(),
                    go_duration(r.arrived),
                    r.initial_seats.to_string(),
                    r.final_seats.to_string(),
                    go_duration(r.additional_latency),
                    r.started.map(go_duration).unwrap_or_default(),
                ]);
            }
        }
        table(&rows)
    }
}
