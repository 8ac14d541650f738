//! [tower] middleware that backs off **per key**, on
//! [keyed-backoff](keyed_backoff)'s manager: a function picks each
//! request's key (its host, tenant or shard), and a key that fails backs
//! off on its own, with client-go's doubling, while other keys go straight
//! through.
//!
//! [`KeyedBackoffLayer`] gates every attempt, the first one too: a request
//! whose key is in backoff waits until the key may run, or fails at once
//! with [`InBackoff`] and the wait left, as you choose. Failures advance
//! the key once per window however many requests fail together; a success
//! resets it. A server's `Retry-After` (seconds or an HTTP date, on 429
//! and 503, read by `RetryHttp`) holds the key at least that long, up
//! to a cap you set. Failed requests are retried after their key's window,
//! bounded per request and, across requests, by a shared retry budget
//! (keyed-backoff's token bucket, TPS budget or adaptive throttle).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), keyed_backoff_tower::BoxError> {
//! use keyed_backoff_tower::{Backoff, InBackoff, KeyedBackoffLayer, RetryHttp};
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tower::{Layer, ServiceExt};
//!
//! // Requests name their host; each host backs off on its own.
//! let backoff = Arc::new(Backoff::<String>::new(Duration::from_millis(100), Duration::from_secs(10))?);
//! let host = |req: &http::Request<()>| req.uri().host().unwrap_or_default().to_owned();
//! let layer = KeyedBackoffLayer::new(backoff, host)
//!     .retry_if(RetryHttp) // 429, 502, 503, 504 and errors; Retry-After honoured
//!     .max_retry_after(Duration::from_secs(60))
//!     .fail_fast(); // a request for a host in backoff fails at once
//! // A server that is busy for `busy.example` and asks to come back in 30 s.
//! let service = layer.layer(tower::service_fn(|req: http::Request<()>| async move {
//!     let status = if req.uri().host() == Some("busy.example") { 429 } else { 200 };
//!     let response = http::Response::builder().status(status).header("retry-after", "30");
//!     Ok::<_, http::Error>(response.body(())?)
//! }));
//!
//! let get = |url: &str| http::Request::get(url).body(()).unwrap();
//! let busy = service.clone().oneshot(get("http://busy.example/")).await?;
//! assert_eq!(busy.status(), 429);
//! // For the next 30 s, requests for that host are not sent.
//! let refused = service.clone().oneshot(get("http://busy.example/")).await.unwrap_err();
//! assert!(refused.downcast_ref::<InBackoff>().unwrap().remaining > Duration::from_secs(29));
//! // Other hosts are not held.
//! assert_eq!(service.oneshot(get("http://calm.example/")).await?.status(), 200);
//! # Ok(())
//! # }
//! ```
//!
//! # Features
//!
//! | feature | adds |
//! |---|---|
//! | `http` (default) | `RetryHttp`, `retry_after::from_headers` |
//! | `tracing` | DEBUG events (target `keyed_backoff_tower`, the key as a field) when a request waits for its key, is refused, is held by a `Retry-After`, and when a retry is denied, with the reason (`budget`, `max_retries`, `max_wait`) |
//! | `metrics` | `keyed_backoff_tower_waits_total` and `keyed_backoff_tower_wait_duration_seconds` (label `attempt`: `first` or `retry`), `keyed_backoff_tower_refusals_total`, `keyed_backoff_tower_retry_after_total` (label `capped`), `keyed_backoff_tower_retries_total`, `keyed_backoff_tower_retries_denied_total` (label `reason`), through the `metrics` facade |
//!
//! Without `tracing` and `metrics` nothing of them is compiled in.
//!
//! [`KeyedBackoffLayer::new`] takes any gate of keyed-backoff's
//! [`Gate`](keyed_backoff::Gate) contract, not only the manager: the
//! outage wrapper (in an `Arc`), or a store shared by a fleet
//! (keyed-backoff-redis's `RedisBackoff`), where one replica's
//! `Retry-After` holds the key for every replica.
//!
//! The crate re-exports [`keyed_backoff`] and the items of it that its
//! signatures name ([`Backoff`], [`InBackoff`], [`ConfigError`],
//! [`RetryBudget`]), so it is the only dependency its users need to
//! name them.
//!
//! [tower]: https://docs.rs/tower

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod ask;
mod budget;
mod error;
mod future;
mod layer;
mod observe;
mod policy;
mod replay;
pub mod retry_after;
#[cfg(feature = "http")]
mod retry_http;
mod service;

pub use keyed_backoff;
pub use keyed_backoff::budget::RetryBudget;
pub use keyed_backoff::{Backoff, ConfigError, InBackoff};

pub use budget::TowerBudget;
pub use error::BoxError;
pub use future::ResponseFuture;
pub use layer::KeyedBackoffLayer;
pub use policy::{Classify, RetryErrors};
pub use replay::{CloneRequest, NoReplay, Replay};
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use retry_http::RetryHttp;
pub use service::KeyedBackoff;

/// The README's example, compiled and run as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
