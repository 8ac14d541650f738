//! Where a request goes: its level, flow and work.

use std::time::Duration;

use crate::{LevelId, WorkEstimate};

/// Where a request goes: its priority level, its flow (Kubernetes'
/// distinguisher: a user name, a namespace), and its width in seats.
///
/// ```
/// use fair_admission::{Apf, Class, LimitResponse};
/// let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
/// let class = Class::new(apf.level_id("l").unwrap(), "alice");
/// assert_eq!(class.width, 1);
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Class {
    /// The priority level.
    pub level: LevelId,
    /// The flow schema that classified the request (empty if none): with
    /// the flow it identifies the flow, as in Kubernetes, so that two
    /// schemas sending the same user to one level keep separate flows.
    pub schema: String,
    /// The flow within the level (Kubernetes' flow distinguisher):
    /// requests of one flow share a hand of queues.
    pub flow: String,
    /// Seats the request occupies while it runs (at least 1).
    pub width: u32,
    /// How long its seats stay held after its response ends (work it
    /// leaves behind, such as events to watchers); zero by default.
    pub additional_latency: Duration,
}

impl Class {
    /// A request one seat wide of `flow` at `level`.
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, LimitResponse};
    /// # let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
    /// let class = Class::new(apf.level_id("l").unwrap(), "alice");
    /// assert_eq!((class.flow.as_str(), class.width), ("alice", 1));
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn new(level: LevelId, flow: impl Into<String>) -> Self {
        Class {
            level,
            schema: String::new(),
            flow: flow.into(),
            width: 1,
            additional_latency: Duration::ZERO,
        }
    }

    /// The same request, classified by the flow schema `name`.
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, LimitResponse};
    /// # let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
    /// let class = Class::new(apf.level_id("l").unwrap(), "alice").schema("service-accounts");
    /// assert_eq!(class.schema, "service-accounts");
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn schema(mut self, name: impl Into<String>) -> Self {
        self.schema = name.into();
        self
    }

    /// The same request, costing `estimate`: its width is the estimate's
    /// [`max_seats`](WorkEstimate::max_seats), and its seats stay held for
    /// the estimate's additional latency after its response ends.
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, LimitResponse, WorkEstimate};
    /// # let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
    /// let write = Class::new(apf.level_id("l").unwrap(), "alice").work(WorkEstimate::mutating(250));
    /// assert_eq!(write.width, 10);
    /// assert_eq!(write.additional_latency.as_micros(), 12_500);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn work(mut self, estimate: WorkEstimate) -> Self {
        self.width = estimate.max_seats();
        self.additional_latency = estimate.additional_latency;
        self
    }

    /// What the flow is hashed as: (schema, distinguisher).
    pub(crate) fn flow_key(&self) -> (&str, &str) {
        (&self.schema, &self.flow)
    }

    /// The same request, `seats` seats wide (at least 1: a width of 0 is
    /// taken as 1, as the queue set does).
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, LimitResponse};
    /// # let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
    /// let wide = Class::new(apf.level_id("l").unwrap(), "list-pods").width(4);
    /// assert_eq!(wide.width, 4);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn width(mut self, seats: u32) -> Self {
        self.width = seats.max(1);
        self
    }
}
