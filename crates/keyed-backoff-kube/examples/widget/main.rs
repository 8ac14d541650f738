//! An operator for a custom resource, `Widget`, with a hand-written error
//! policy: an invalid spec waits for a change, every other failure backs
//! its widget off with client-go's controller defaults (5 ms doubling to
//! 1000 s per widget, 10 per second over all widgets).
//!
//! Needs a cluster (the current kubeconfig context or the in-cluster
//! service account), with TLS, which kube leaves to the application:
//!
//! ```text
//! cargo run -p keyed-backoff-kube --example widget --features kube/rustls-tls,kube/ring -- crd | kubectl apply -f -
//! cargo run -p keyed-backoff-kube --example widget --features kube/rustls-tls,kube/ring
//! kubectl apply -f - <<< '{"apiVersion": "keyed-backoff.example/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"replicas": -1}}'
//! ```

mod operator;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use keyed_backoff_kube::ObjectBackoff;
use kube::runtime::controller::Controller;
use kube::runtime::watcher;
use kube::{Api, Client, CustomResourceExt};
use operator::{Ctx, Widget, error_policy, reconcile};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("crd") {
        println!("{}", serde_json::to_string_pretty(&Widget::crd())?);
        return Ok(());
    }
    let client = match Client::try_default().await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("no cluster reachable ({e}); this example needs one");
            std::process::exit(2);
        }
    };
    let backoff = ObjectBackoff::<Widget>::workqueue();
    let _gc = backoff.spawn_gc_task(Duration::from_secs(60))?;
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        backoff: backoff.clone(),
    });
    Controller::new(Api::<Widget>::all(client), watcher::Config::default())
        .shutdown_on_signal()
        .run(backoff.reconciler(reconcile), error_policy, ctx)
        .for_each(|outcome| async move {
            match outcome {
                Ok((widget, _)) => println!("widget {}: reconciled", widget.name),
                Err(e) => eprintln!("controller: {e}"),
            }
        })
        .await;
    Ok(())
}
