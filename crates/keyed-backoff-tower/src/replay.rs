//! [`Replay`]: how a request is copied for a retry.

/// How a request is copied for a retry: [`CloneRequest`] (by default) for
/// requests that are `Clone` (an `http::Request` whose body is, such as
/// `Full<Bytes>` or `String`), [`NoReplay`] for requests that cannot be
/// copied (a streamed body), which are gated but never retried, or any
/// `Fn(&Req) -> Option<Req>`. A request it does not copy is not retried.
///
/// ```
/// use keyed_backoff_tower::{CloneRequest, NoReplay, Replay};
/// assert_eq!(CloneRequest.replay(&"GET /"), Some("GET /"));
/// assert_eq!(NoReplay.replay(&"GET /"), None);
/// let small_only = |body: &Vec<u8>| (body.len() < 1024).then(|| body.clone());
/// assert_eq!(small_only.replay(&vec![0; 4096]), None);
/// ```
pub trait Replay<Req> {
    /// A copy of `request` to send again, or `None` if it cannot be.
    fn replay(&self, request: &Req) -> Option<Req>;
}

/// Copy requests with `Clone`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CloneRequest;

impl<Req: Clone> Replay<Req> for CloneRequest {
    fn replay(&self, request: &Req) -> Option<Req> {
        Some(request.clone())
    }
}

/// Never copy a request: each is sent at most once (still gated by its
/// key), whatever `max_retries` says.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoReplay;

impl<Req> Replay<Req> for NoReplay {
    fn replay(&self, _: &Req) -> Option<Req> {
        None
    }
}

impl<Req, F: Fn(&Req) -> Option<Req>> Replay<Req> for F {
    fn replay(&self, request: &Req) -> Option<Req> {
        self(request)
    }
}
