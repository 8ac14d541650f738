//! Where a request goes: its level, flow and work.

use std::hash::{Hash, Hasher};

use crate::{LevelId, Name, WorkEstimate};

/// Where a request goes: its priority level, its flow (Kubernetes' flow
/// schema and distinguisher: a user name, a namespace), and its work.
///
/// ```
/// use fair_admission::{Apf, Class, LevelSpec, LimitResponse};
/// let apf = Apf::builder(10).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
/// let class = Class::new(apf.level_id("l").unwrap(), "alice");
/// assert_eq!(class.work.max_seats(), 1);
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
    pub schema: Name,
    /// The flow within the level (Kubernetes' flow distinguisher):
    /// requests of one flow share a hand of queues.
    pub flow: Name,
    /// What the request costs: its seats while it runs, and seats held for
    /// an additional latency after its response ends. One seat by default.
    pub work: WorkEstimate,
}

impl Class {
    /// A request one seat wide of `flow` at `level`.
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, LevelSpec};
    /// # let apf = Apf::builder(10).level("l", LevelSpec::exempt()).build()?;
    /// let class = Class::new(apf.level_id("l").unwrap(), "alice");
    /// assert_eq!(class.flow, "alice");
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn new(level: LevelId, flow: impl Into<Name>) -> Self {
        Class {
            level,
            schema: Name::default(),
            flow: flow.into(),
            work: WorkEstimate::seats(1),
        }
    }

    /// The same request, classified by the flow schema `name`.
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, LevelSpec};
    /// # let apf = Apf::builder(10).level("l", LevelSpec::exempt()).build()?;
    /// let class = Class::new(apf.level_id("l").unwrap(), "alice").schema("service-accounts");
    /// assert_eq!(class.schema, "service-accounts");
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn schema(mut self, name: impl Into<Name>) -> Self {
        self.schema = name.into();
        self
    }

    /// The same request, costing `estimate`: the layer holds its seats for
    /// the estimate's additional latency after its response ends.
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, LevelSpec, WorkEstimate};
    /// # let apf = Apf::builder(10).level("l", LevelSpec::exempt()).build()?;
    /// let write = Class::new(apf.level_id("l").unwrap(), "alice").work(WorkEstimate::mutating(250));
    /// assert_eq!(write.work.max_seats(), 10);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn work(mut self, estimate: WorkEstimate) -> Self {
        self.work = estimate;
        self
    }

    /// The same request, `seats` seats wide while it runs and nothing
    /// after.
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, LevelSpec};
    /// # let apf = Apf::builder(10).level("l", LevelSpec::exempt()).build()?;
    /// let wide = Class::new(apf.level_id("l").unwrap(), "list-pods").width(4);
    /// assert_eq!(wide.work.max_seats(), 4);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn width(self, seats: u32) -> Self {
        self.work(WorkEstimate::seats(seats))
    }

    /// What the flow is hashed as: (schema, distinguisher).
    pub(crate) fn flow_key(&self) -> FlowKey<'_> {
        FlowKey(&self.schema, &self.flow)
    }
}

/// A flow's (schema, distinguisher), hashed as the pair of `str`s is.
pub(crate) struct FlowKey<'a>(&'a Name, &'a Name);

impl Hash for FlowKey<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.0.as_str(), self.1.as_str()).hash(state);
    }
}
