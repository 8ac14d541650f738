//! The widget operator's parts: a custom resource, its reconcile, and an
//! error policy written by hand beside the reconcile wrapper.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff_kube::{ObjectBackoff, ReconcileError};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Client, CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A widget asks for some replicas; the operator reports them ready in its
/// status.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "keyed-backoff.example",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
pub struct WidgetSpec {
    pub replicas: i32,
}

/// What the operator last made of a widget.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    pub ready_replicas: i32,
}

/// Why a widget's reconcile failed.
#[derive(Debug)]
pub enum Error {
    /// The spec cannot be applied: only a change to it helps.
    InvalidSpec(String),
    /// Writing the status failed (the API server, a webhook, the network):
    /// worth retrying.
    Kube(kube::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidSpec(why) => write!(f, "invalid spec: {why}"),
            Error::Kube(e) => write!(f, "status update failed: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::InvalidSpec(_) => None,
            Error::Kube(e) => Some(e),
        }
    }
}

/// What every reconcile shares: the client, and the backoff the error
/// policy consults.
pub struct Ctx {
    pub client: Client,
    pub backoff: ObjectBackoff<Widget>,
}

/// Makes the widget's status match its spec.
pub async fn reconcile(widget: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let replicas = widget.spec.replicas;
    if replicas < 0 {
        return Err(Error::InvalidSpec(format!(
            "replicas is {replicas}, it must be at least 0"
        )));
    }
    let namespace = widget.namespace().unwrap_or_default();
    let api = Api::<Widget>::namespaced(ctx.client.clone(), &namespace);
    let status = serde_json::json!({ "status": { "readyReplicas": replicas } });
    api.patch_status(
        &widget.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await
    .map_err(Error::Kube)?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// The error policy: an invalid spec waits for the next change to the
/// widget; any other failure, a panic included, backs that widget off.
pub fn error_policy(widget: Arc<Widget>, error: &ReconcileError<Error>, ctx: Arc<Ctx>) -> Action {
    eprintln!("widget {}: {error}", widget.name_any());
    match error.as_inner() {
        // Only a fix helps: forget the backoff this failure started, so
        // the run the fix triggers is not skipped.
        Some(Error::InvalidSpec(_)) => {
            ctx.backoff.reset(&widget);
            Action::await_change()
        }
        // API errors and panics back off, as the wrapper recorded them.
        _ => error
            .requeue()
            .unwrap_or_else(|| ctx.backoff.on_error(&widget)),
    }
}
