//! A tower layer that admits requests through an [`Apf`](crate::Apf): the
//! layer, the service it makes, the refusal, the request's class, and the
//! seats a running request holds.

mod class;
mod error;
mod future;
#[allow(clippy::module_inception)]
mod layer;
mod service;
mod shared;
#[cfg(test)]
mod tests;

pub use class::Class;
pub use error::{BoxError, Overloaded};
pub use future::ResponseFuture;
#[cfg(feature = "http")]
pub(crate) use future::{Call, Failure};
pub use layer::FairnessLayer;
pub use service::Fairness;
#[cfg(feature = "http")]
pub(crate) use shared::Seat;
