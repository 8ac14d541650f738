//! A small real controller: it watches the ConfigMaps labelled
//! `keyed-backoff.example/demo` in a namespace and "applies" each one. A
//! ConfigMap whose `data.valid` is `"false"` fails to apply and is retried
//! with the kubelet's backoff (10 s doubling to 300 s); fix it and the next
//! run succeeds and resets its backoff.
//!
//! Needs a cluster (the current kubeconfig context or the in-cluster
//! service account); with TLS, which kube leaves to the application:
//!
//! With `--features prometheus-client` it prints the metrics text after each
//! run (a real operator serves it on `/metrics`); with `--features tracing`
//! the crate's events go to any `tracing` subscriber the application sets.
//!
//! ```text
//! cargo run -p keyed-backoff-kube --example configmap --features kube/rustls-tls,kube/ring,prometheus-client -- default
//! kubectl create configmap broken --from-literal=valid=false
//! kubectl label configmap broken keyed-backoff.example/demo=1
//! ```

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use keyed_backoff_kube::ObjectBackoff;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

#[derive(Debug)]
struct Invalid(String);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConfigMap {} has valid=false", self.0)
    }
}

impl std::error::Error for Invalid {}

/// What the reconciler shares: the backoff, to report each object's count.
struct Ctx {
    backoff: ObjectBackoff<ConfigMap>,
}

async fn apply(cm: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, Invalid> {
    let valid = cm
        .data
        .as_ref()
        .and_then(|d| d.get("valid"))
        .map(String::as_str);
    if valid == Some("false") {
        let failures = ctx.backoff.attempts(&cm) + 1;
        println!("{}: invalid (failure {failures})", cm.name_any());
        return Err(Invalid(cm.name_any()));
    }
    println!("{}: applied", cm.name_any());
    Ok(Action::requeue(Duration::from_secs(3600)))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let namespace = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "default".to_owned());
    let client = match Client::try_default().await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("no cluster reachable ({e}); this example needs one");
            std::process::exit(2);
        }
    };
    let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    #[cfg(feature = "prometheus-client")]
    let registry = {
        let mut registry = prometheus_client::registry::Registry::default();
        backoff.register(&mut registry, "configmap-demo");
        registry
    };
    let _gc = backoff.spawn_gc_task(Duration::from_secs(60))?;
    let ctx = Arc::new(Ctx {
        backoff: backoff.clone(),
    });
    let api = Api::<ConfigMap>::namespaced(client, &namespace);
    let config = watcher::Config::default().labels("keyed-backoff.example/demo");
    Controller::new(api, config)
        .shutdown_on_signal()
        .run(backoff.reconciler(apply), backoff.error_policy(), ctx)
        .for_each(|outcome| {
            if let Err(e) = outcome {
                eprintln!("controller: {e}");
            }
            let c = backoff.stats();
            println!(
                "  totals: {} failures, {} early runs not counted, {} successes",
                c.failures, c.refusals, c.successes
            );
            #[cfg(feature = "prometheus-client")]
            {
                let mut text = String::new();
                prometheus_client::encoding::text::encode(&mut text, &registry)
                    .expect("writing to a String cannot fail");
                print!("{text}");
            }
            async {}
        })
        .await;
    Ok(())
}
