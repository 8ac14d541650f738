//! `RetryHttp`: what an HTTP server says to retry (feature `http`).

use std::time::Duration;

use http::{Response, StatusCode};

use crate::policy::Classify;
use crate::retry_after;

/// Retry what an HTTP server says to retry, and wait as long as it asks:
/// transport errors and the statuses 429 (Too Many Requests), 502, 503
/// and 504 are failures; the `Retry-After` of a 429 or a 503 (seconds or
/// an HTTP date) holds the key at least that long. Every other response
/// is a success for its key (feature `http`).
///
/// ```
/// use keyed_backoff_tower::{Classify, RetryHttp};
/// use std::time::Duration;
/// let busy = http::Response::builder().status(429).header("retry-after", "3").body(()).unwrap();
/// let busy: Result<_, std::io::Error> = Ok(busy);
/// assert!(RetryHttp.should_retry(&busy));
/// assert_eq!(RetryHttp.retry_after(&busy), Some(Duration::from_secs(3)));
/// let missing: Result<_, std::io::Error> = Ok(http::Response::builder().status(404).body(()).unwrap());
/// assert!(!RetryHttp.should_retry(&missing));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct RetryHttp;

impl<B, E> Classify<Response<B>, E> for RetryHttp {
    fn should_retry(&self, result: &Result<Response<B>, E>) -> bool {
        match result {
            Err(_) => true,
            Ok(response) => matches!(
                response.status(),
                StatusCode::TOO_MANY_REQUESTS
                    | StatusCode::BAD_GATEWAY
                    | StatusCode::SERVICE_UNAVAILABLE
                    | StatusCode::GATEWAY_TIMEOUT
            ),
        }
    }

    fn retry_after(&self, result: &Result<Response<B>, E>) -> Option<Duration> {
        let response = result.as_ref().ok()?;
        match response.status() {
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                retry_after::from_headers(response.headers())
            }
            _ => None,
        }
    }
}
