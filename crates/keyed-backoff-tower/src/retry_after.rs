//! Reading a server's `Retry-After`: a number of seconds or an HTTP date.

use std::time::{Duration, SystemTime};

/// The wait a `Retry-After` value asks for at `now`: `delay-seconds` (a
/// run of digits; more seconds than a `u64` holds is read as that many)
/// or an HTTP date (any of the three forms HTTP accepts; one already past
/// asks for no wait). `None` for anything else.
///
/// ```
/// use keyed_backoff_tower::retry_after;
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
/// assert_eq!(retry_after::parse("120", now), Some(Duration::from_secs(120)));
/// assert_eq!(retry_after::parse("Sun, 06 Nov 1994 08:49:39 GMT", now), Some(Duration::from_secs(2)));
/// assert_eq!(retry_after::parse("soon", now), None);
/// ```
pub fn parse(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim_matches([' ', '\t']);
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The wait the `Retry-After` header of `headers` asks for now, if it has
/// one that [`parse`] reads (feature `http`).
///
/// ```
/// use keyed_backoff_tower::retry_after;
/// use std::time::Duration;
/// let mut headers = http::HeaderMap::new();
/// assert_eq!(retry_after::from_headers(&headers), None);
/// headers.insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("2"));
/// assert_eq!(retry_after::from_headers(&headers), Some(Duration::from_secs(2)));
/// ```
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub fn from_headers(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    parse(value, SystemTime::now())
}
