//! The `tracing` events: one per failure, refusal, skip, reset and panic,
//! each carrying the object.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use keyed_backoff_kube::ObjectBackoff;
use kube::runtime::controller::Action;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One recorded event: level, message, and the `object` field.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    level: Level,
    message: String,
    object: String,
}

#[derive(Default)]
struct Fields {
    message: String,
    object: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "object" => self.object = format!("{value:?}"),
            _ => {}
        }
    }
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Seen>>>);

impl<S: Subscriber> Layer<S> for Recorder {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.0.lock().unwrap().push(Seen {
            level: *event.metadata().level(),
            message: fields.message,
            object: fields.object,
        });
    }
}

fn app() -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("app".into());
    cm.metadata.namespace = Some("default".into());
    cm.metadata.uid = Some("u-1".into());
    cm
}

#[tokio::test(start_paused = true)]
async fn each_outcome_is_an_event_carrying_the_object() {
    let recorder = Recorder::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(recorder.clone()));
    let backoff =
        ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(16))
            .skip_while_in_backoff(true)
            .build()
            .unwrap();
    let cm = app();
    assert_eq!(
        backoff.on_error(&cm),
        Action::requeue(Duration::from_secs(1))
    );
    backoff.on_error(&cm); // refused: still in backoff
    let mut wrapped = backoff.reconciler(|cm: Arc<ConfigMap>, _: Arc<()>| async move {
        if cm.data.is_some() {
            panic!("boom");
        }
        Ok::<_, std::io::Error>(Action::await_change())
    });
    wrapped(Arc::new(cm.clone()), Arc::new(())).await.unwrap(); // skipped
    tokio::time::advance(Duration::from_secs(1)).await;
    wrapped(Arc::new(cm.clone()), Arc::new(())).await.unwrap(); // succeeds: reset
    let mut bad = cm.clone();
    bad.data = Some(Default::default());
    assert!(
        wrapped(Arc::new(bad), Arc::new(()))
            .await
            .unwrap_err()
            .is_panic()
    );

    let seen = recorder.0.lock().unwrap().clone();
    let levels: Vec<Level> = seen.iter().map(|s| s.level).collect();
    assert_eq!(
        levels,
        [
            Level::WARN,
            Level::DEBUG,
            Level::DEBUG,
            Level::DEBUG,
            Level::ERROR,
            Level::WARN
        ]
    );
    let messages: Vec<&str> = seen.iter().map(|s| s.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "reconcile failed; requeued after its backoff",
            "reconcile failed during its backoff; not counted, requeued at the wait left",
            "run skipped: the object is in backoff",
            "reconcile succeeded; backoff reset",
            "reconcile panicked",
            // The wrapper records the panic as the object's failure at once.
            "reconcile failed; requeued after its backoff",
        ]
    );
    for s in &seen {
        assert!(
            s.object.contains("app") && s.object.contains("u-1"),
            "{s:?}"
        );
    }
}
