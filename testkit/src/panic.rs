//! The text of a panic, for tests that catch one.

use std::any::Any;

/// The message a panic carried: its `&str` or `String` payload, or a
/// placeholder for any other payload.
///
/// ```
/// use keyed_backoff_testkit::panic_message;
/// let payload = std::panic::catch_unwind(|| panic!("boom {}", 7)).unwrap_err();
/// assert_eq!(panic_message(payload.as_ref()), "boom 7");
/// let payload = std::panic::catch_unwind(|| std::panic::panic_any(7u8)).unwrap_err();
/// assert_eq!(panic_message(payload.as_ref()), "a non-string payload");
/// ```
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string payload".to_owned()
    }
}
