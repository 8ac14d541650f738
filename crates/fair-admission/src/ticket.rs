//! What [`Apf::admit`](crate::Apf::admit) hands back: a ticket, what became
//! of the request, and any other request the call dispatched.

/// One admitted request, from [`Apf::admit`](crate::Apf::admit): hand it
/// back to [`Apf::complete`](crate::Apf::complete) when it finishes or to
/// [`Apf::cancel`](crate::Apf::cancel) if it stops waiting.
///
/// ```
/// use fair_admission::{Admit, Apf, LevelSpec, LimitResponse};
/// let mut apf = Apf::builder(1).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
/// let level = apf.level_id("l").unwrap();
/// let Admit::Dispatched(ticket) = apf.admit(level, &"flow", 1).admit else { unreachable!() };
/// assert!(apf.complete(ticket).is_some());
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket {
    /// Its number, in the order requests arrived (first, so that tickets
    /// sort by arrival).
    pub(crate) seq: u64,
    /// The index of its level.
    pub(crate) level: usize,
    /// Its slot among its level's requests.
    pub(crate) slot: u32,
}

/// What became of a request handed to [`Apf::admit`](crate::Apf::admit).
///
/// ```
/// use fair_admission::{Admit, Apf, LevelSpec, LimitResponse, Rejected};
/// let mut apf = Apf::builder(1).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
/// let level = apf.level_id("l").unwrap();
/// assert!(matches!(apf.admit(level, &"a", 1).admit, Admit::Dispatched(_)));
/// assert_eq!(apf.admit(level, &"b", 1).admit, Admit::Rejected(Rejected::NoSeat));
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Admit {
    /// It holds its seats now and may run.
    Dispatched(Ticket),
    /// It waits in a queue; the call that dispatches it lists it.
    Queued(Ticket),
    /// Refused: answer 429 and let the client back off.
    Rejected(Rejected),
}

/// The outcome of one [`Apf::admit`](crate::Apf::admit): what became of the
/// request, and the *other* waiting requests the call dispatched (fair
/// queuing may serve another queue first once the new request has joined
/// its own). Every request dispatched by any call is listed by that call,
/// and by no other.
///
/// ```
/// use fair_admission::{Admit, Apf, LevelSpec, LimitResponse};
/// let queuing = LimitResponse::Queue { queues: 8, queue_length_limit: 10, hand_size: 1 };
/// let mut apf = Apf::builder(1).level("l", LevelSpec::limited(1, queuing)).build()?;
/// let level = apf.level_id("l").unwrap();
/// let admission = apf.admit(level, &1u64, 1);
/// assert!(matches!(admission.admit, Admit::Dispatched(_)));
/// assert!(admission.dispatched.is_empty());
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "requests it dispatched must be told to run"]
#[non_exhaustive]
pub struct Admission {
    /// What became of the request admitted.
    pub admit: Admit,
    /// Other requests dispatched by this call, in dispatch order.
    pub dispatched: Vec<Ticket>,
}

impl Admission {
    pub(crate) fn rejected(why: Rejected) -> Self {
        Admission {
            admit: Admit::Rejected(why),
            dispatched: Vec::new(),
        }
    }
}

/// Why a request was refused.
///
/// ```
/// use fair_admission::Rejected;
/// assert_eq!(Rejected::QueueFull.to_string(), "the queue chosen for the flow is full");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejected {
    /// The queue chosen for the flow was full and every seat taken.
    QueueFull,
    /// A [`LimitResponse::Reject`](crate::LimitResponse::Reject) level had
    /// no free seat.
    NoSeat,
    /// The request waited longer than its caller allowed and was cancelled.
    TimedOut,
    /// The [`LevelId`](crate::LevelId) does not belong to this
    /// [`Apf`](crate::Apf) (it came from another one): nothing was admitted
    /// or counted.
    UnknownLevel,
    /// The request would have to wait, but the tokio runtime has no time
    /// driver to bound the wait (build it with `enable_time`).
    NoTimer,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Rejected::QueueFull => "the queue chosen for the flow is full",
            Rejected::NoSeat => "the priority level has no free seat",
            Rejected::TimedOut => "the request waited in its queue too long",
            Rejected::UnknownLevel => "the priority level belongs to another Apf",
            Rejected::NoTimer => "the runtime has no timer to bound the wait (enable_time)",
        })
    }
}

impl std::error::Error for Rejected {}
