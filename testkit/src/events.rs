//! A `tracing` recorder for tests: every event with its level, its message
//! and its fields as text.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use tracing::Dispatch;
use tracing::field::{Field, Visit};
use tracing::subscriber::{DefaultGuard, NoSubscriber};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its level.
    pub level: Level,
    /// Its target (`keyed_backoff`, a crate's name, …).
    pub target: String,
    /// Its message.
    pub message: String,
    /// Every other field, as text (strings without quotes).
    pub fields: BTreeMap<String, String>,
}

impl Seen {
    /// The field `name`, as text.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// Records every event of the threads it is the default subscriber of.
///
/// ```
/// use keyed_backoff_testkit::events::Events;
/// let events = Events::default();
/// events.record(|| tracing::warn!(key = "pod-a", removed = 2u64, "gc sweep"));
/// let seen = events.seen();
/// assert_eq!(seen[0].level, tracing::Level::WARN);
/// assert_eq!(seen[0].message, "gc sweep");
/// assert_eq!(seen[0].field("key"), Some("pod-a"));
/// assert_eq!(seen[0].field("removed"), Some("2"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Events(Arc<Mutex<Vec<Seen>>>);

impl Events {
    /// Runs `f` with this recorder as the thread's default subscriber.
    pub fn record<R>(&self, f: impl FnOnce() -> R) -> R {
        let _guard = self.set_default();
        f()
    }

    /// Makes this recorder the thread's default subscriber until the guard
    /// drops (for async tests, whose body cannot be one closure).
    ///
    ///
    /// A second subscriber, which records nothing, is registered for the
    /// life of the process first: with a single scoped subscriber, `tracing`
    /// asks only the registering thread's own subscriber whether a new
    /// callsite is of interest, so a callsite first reached by a thread
    /// without this recorder (another test) would be shut off for good and
    /// its events would never reach it.
    pub fn set_default(&self) -> DefaultGuard {
        static ANOTHER: OnceLock<Dispatch> = OnceLock::new();
        ANOTHER.get_or_init(|| Dispatch::new(NoSubscriber::default()));
        tracing::subscriber::set_default(tracing_subscriber::registry().with(self.clone()))
    }

    /// Every event recorded so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The events whose message contains `needle`.
    pub fn with_message(&self, needle: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.message.contains(needle))
            .collect()
    }
}

/// Collects an event's fields.
struct Fields {
    message: String,
    fields: BTreeMap<String, String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}"));
    }
}

impl Fields {
    fn put(&mut self, field: &Field, text: String) {
        if field.name() == "message" {
            self.message = text;
        } else {
            self.fields.insert(field.name().to_owned(), text);
        }
    }
}

impl<S: Subscriber> Layer<S> for Events {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields {
            message: String::new(),
            fields: BTreeMap::new(),
        };
        event.record(&mut fields);
        let seen = Seen {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            message: fields.message,
            fields: fields.fields,
        };
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(seen);
    }
}
