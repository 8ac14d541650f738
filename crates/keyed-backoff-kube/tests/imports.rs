//! The core's types that this crate's signatures use are named from this
//! crate alone, without a dependency on `keyed-backoff`.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use keyed_backoff_kube::{ConfigError, GcGuard, InBackoff, ObjectBackoff, ObjectKey, SpawnError};

#[tokio::test(start_paused = true)]
async fn the_core_types_in_this_crates_signatures_are_named_from_it() {
    let err: ConfigError =
        ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(60))
            .jitter(-1.0)
            .build()
            .unwrap_err();
    assert_eq!(err.field(), "jitter");

    let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("app".into());
    let key = ObjectKey::new(&cm, ());
    let now = tokio::time::Instant::now();
    assert_eq!(
        backoff.manager().try_next(&key, now),
        Ok(Duration::from_secs(10))
    );
    let refused: InBackoff = backoff.manager().try_next(&key, now).unwrap_err();
    assert_eq!(refused.remaining, Duration::from_secs(10));

    let gc: GcGuard = backoff.spawn_gc_task(Duration::from_secs(60)).unwrap();
    drop(gc);
    let refused: SpawnError = backoff.spawn_gc_task(Duration::ZERO).unwrap_err();
    assert!(matches!(refused, SpawnError::ZeroInterval), "{refused}");
}
