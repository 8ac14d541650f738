//! What fair admission takes from Kubernetes beyond the queueing model:
//! its suggested configuration (priority levels and flow schemas) and its
//! work estimators, which size a request in seats from what it is.

mod estimator;
mod list;
mod mutating;
mod query;
mod suggested;
mod work;

pub use estimator::{RequestInfo, WorkEstimator};
pub use list::ObjectStats;
pub use suggested::{FlowMatch, RequestAttributes, SUGGESTED_SEATS, suggested_flow_schema};
pub use work::WorkEstimate;
