//! Kubernetes' suggested configuration: its priority levels, and its flow
//! schemas as a classifier of Kubernetes-style requests.

use crate::{Apf, ApfBuilder, LevelSpec, LimitResponse};

/// The server's seats in Kubernetes' default configuration: 400 in-flight
/// requests (`--max-requests-inflight`) plus 200 mutating ones
/// (`--max-mutating-requests-inflight`).
///
/// ```
/// assert_eq!(fair_admission::SUGGESTED_SEATS, 600);
/// ```
pub const SUGGESTED_SEATS: u32 = 400 + 200;

const fn queue(queues: usize, hand_size: usize) -> LimitResponse {
    LimitResponse::Queue {
        queues,
        queue_length_limit: 50,
        hand_size,
    }
}

/// Kubernetes' suggested priority levels, in its order: (name, nominal
/// shares, lendable percent, limit response). `exempt` is exempt.
const LEVELS: [(&str, u32, u32, LimitResponse); 7] = [
    ("system", 30, 33, queue(64, 6)),
    ("node-high", 40, 25, queue(64, 6)),
    ("leader-election", 10, 0, queue(16, 4)),
    ("workload-high", 40, 50, queue(128, 6)),
    ("workload-low", 100, 90, queue(128, 6)),
    ("global-default", 20, 50, queue(128, 6)),
    ("catch-all", 5, 0, LimitResponse::Reject),
];

impl Apf {
    /// Kubernetes' suggested priority levels on a server of `seats` seats
    /// ([`SUGGESTED_SEATS`] in Kubernetes' defaults): `exempt`, then
    /// `system`, `node-high`, `leader-election`, `workload-high`,
    /// `workload-low`, `global-default` and `catch-all`, with Kubernetes'
    /// shares, queues, hand sizes, queue lengths and lendable percentages
    /// (no borrowing limits). Add levels or change settings on the builder;
    /// [`suggested_flow_schema`] sends requests to these levels.
    ///
    /// ```
    /// use fair_admission::{Apf, SUGGESTED_SEATS};
    /// let apf = Apf::suggested(SUGGESTED_SEATS).build()?;
    /// let seats = |name| apf.level_stats(apf.level_id(name).unwrap()).unwrap().nominal_seats;
    /// // 600 · 100 / 245 shares, rounded up.
    /// assert_eq!(seats("workload-low"), 245);
    /// assert_eq!(seats("exempt"), 0);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn suggested(seats: u32) -> ApfBuilder {
        LEVELS.iter().fold(
            Apf::builder(seats).level("exempt", LevelSpec::exempt()),
            |builder, &(name, shares, lendable, limit)| {
                builder.level(
                    name,
                    LevelSpec::limited(shares, limit).lendable_percent(lendable),
                )
            },
        )
    }
}

/// A request as Kubernetes' flow schemas see it: who sends it and what it
/// does.
///
/// ```
/// use fair_admission::RequestAttributes;
/// let list_pods = RequestAttributes {
///     user: "alice",
///     groups: &["system:authenticated"],
///     verb: "list",
///     api_group: "",
///     resource: Some("pods"),
///     namespace: Some("default"),
///     path: "/api/v1/namespaces/default/pods",
/// };
/// # let _ = list_pods;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestAttributes<'a> {
    /// The user name (`system:serviceaccount:<namespace>:<name>` for a
    /// service account).
    pub user: &'a str,
    /// The user's groups.
    pub groups: &'a [&'a str],
    /// The verb: `get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, …
    pub verb: &'a str,
    /// The API group (empty for the core group).
    pub api_group: &'a str,
    /// The resource, or `None` for a non-resource request (`/healthz`).
    pub resource: Option<&'a str>,
    /// The namespace, for a namespaced resource.
    pub namespace: Option<&'a str>,
    /// The request path.
    pub path: &'a str,
}

/// Where [`suggested_flow_schema`] sends a request: the flow schema that
/// matched, its priority level, and the flow distinguisher.
///
/// ```
/// use fair_admission::{suggested_flow_schema, RequestAttributes};
/// let req = RequestAttributes {
///     user: "system:serviceaccount:shop:cart", groups: &["system:serviceaccounts"],
///     verb: "get", api_group: "", resource: Some("secrets"), namespace: Some("shop"), path: "",
/// };
/// let m = suggested_flow_schema(&req);
/// assert_eq!((m.schema, m.level, m.flow.as_str()), ("service-accounts", "workload-low", "system:serviceaccount:shop:cart"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowMatch {
    /// The flow schema's name.
    pub schema: &'static str,
    /// Its priority level, one of [`Apf::suggested`]'s.
    pub level: &'static str,
    /// The flow: the user or the namespace (by the schema's distinguisher
    /// method), or empty for schemas without one.
    pub flow: String,
}

/// How a schema tells flows apart.
#[derive(Clone, Copy)]
enum By {
    User,
    Namespace,
    Nothing,
}

/// Kubernetes' suggested flow schemas, tried in their precedence order:
/// the first that matches classifies the request.
///
/// | precedence | schema | matches | level | flow |
/// |---:|---|---|---|---|
/// | 1 | `exempt` | group `system:masters` | `exempt` | — |
/// | 2 | `probes` | `GET /healthz`, `/readyz`, `/livez` | `exempt` | — |
/// | 100 | `system-leader-election` | the controller manager and scheduler (or kube-system service accounts) on leader-election objects in `kube-system` | `leader-election` | user |
/// | 150 | `endpoint-controller` | the controller manager (or its endpoint controller) on endpoints | `workload-high` | user |
/// | 200 | `workload-leader-election` | kube-system service accounts on leader-election objects elsewhere | `leader-election` | user |
/// | 400 | `system-node-high` | group `system:nodes` on nodes and node leases | `node-high` | user |
/// | 500 | `system-nodes` | group `system:nodes` | `system` | user |
/// | 800 | `kube-controller-manager`, `kube-scheduler` | those users | `workload-high` | namespace |
/// | 900 | `kube-system-service-accounts` | service accounts of `kube-system` | `workload-high` | namespace |
/// | 9000 | `service-accounts` | group `system:serviceaccounts` | `workload-low` | user |
/// | 9900 | `global-default` | groups `system:authenticated`, `system:unauthenticated` | `global-default` | user |
/// | 10000 | `catch-all` | everything else | `catch-all` | user |
///
/// Leader-election objects are `leases` (`coordination.k8s.io`), and
/// `endpoints` and `configmaps` (core), read or written with `get`,
/// `create` or `update`.
///
/// ```
/// use fair_admission::{suggested_flow_schema, RequestAttributes};
/// let probe = RequestAttributes {
///     user: "", groups: &["system:unauthenticated"], verb: "get",
///     api_group: "", resource: None, namespace: None, path: "/readyz",
/// };
/// assert_eq!(suggested_flow_schema(&probe).level, "exempt");
/// let kubelet = RequestAttributes {
///     user: "system:node:n1", groups: &["system:nodes", "system:authenticated"], verb: "update",
///     api_group: "coordination.k8s.io", resource: Some("leases"), namespace: Some("kube-node-lease"), path: "",
/// };
/// assert_eq!(suggested_flow_schema(&kubelet).schema, "system-node-high");
/// ```
pub fn suggested_flow_schema(req: &RequestAttributes<'_>) -> FlowMatch {
    const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
    const SCHEDULER: &str = "system:kube-scheduler";
    let in_group = |g: &str| req.groups.contains(&g);
    let kube_system_sa = req.user.starts_with("system:serviceaccount:kube-system:");
    let resource = |group: &str, names: &[&str]| {
        req.api_group == group && req.resource.is_some_and(|r| names.contains(&r))
    };
    let leader_election = matches!(req.verb, "get" | "create" | "update")
        && (resource("", &["endpoints", "configmaps"])
            || resource("coordination.k8s.io", &["leases"]));
    let probe = req.resource.is_none()
        && req.verb == "get"
        && matches!(req.path, "/healthz" | "/readyz" | "/livez");
    let (schema, level, by) = if in_group("system:masters") {
        ("exempt", "exempt", By::Nothing)
    } else if probe && (in_group("system:authenticated") || in_group("system:unauthenticated")) {
        ("probes", "exempt", By::Nothing)
    } else if leader_election
        && req.namespace == Some("kube-system")
        && (req.user == CONTROLLER_MANAGER || req.user == SCHEDULER || kube_system_sa)
    {
        ("system-leader-election", "leader-election", By::User)
    } else if matches!(req.verb, "get" | "create" | "update")
        && resource("", &["endpoints"])
        && (req.user == CONTROLLER_MANAGER
            || req.user == "system:serviceaccount:kube-system:endpoint-controller")
    {
        ("endpoint-controller", "workload-high", By::User)
    } else if leader_election && kube_system_sa {
        ("workload-leader-election", "leader-election", By::User)
    } else if in_group("system:nodes")
        && (resource("", &["nodes", "nodes/status"])
            || (resource("coordination.k8s.io", &["leases"])
                && req.namespace == Some("kube-node-lease")))
    {
        ("system-node-high", "node-high", By::User)
    } else if in_group("system:nodes") {
        ("system-nodes", "system", By::User)
    } else if req.user == CONTROLLER_MANAGER {
        ("kube-controller-manager", "workload-high", By::Namespace)
    } else if req.user == SCHEDULER {
        ("kube-scheduler", "workload-high", By::Namespace)
    } else if kube_system_sa {
        (
            "kube-system-service-accounts",
            "workload-high",
            By::Namespace,
        )
    } else if in_group("system:serviceaccounts") {
        ("service-accounts", "workload-low", By::User)
    } else if in_group("system:authenticated") || in_group("system:unauthenticated") {
        ("global-default", "global-default", By::User)
    } else {
        ("catch-all", "catch-all", By::User)
    };
    let flow = match by {
        By::User => req.user.to_owned(),
        By::Namespace => req.namespace.unwrap_or_default().to_owned(),
        By::Nothing => String::new(),
    };
    FlowMatch {
        schema,
        level,
        flow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(
        user: &'a str,
        groups: &'a [&'a str],
        verb: &'a str,
        (api_group, resource): (&'a str, &'a str),
        namespace: &'a str,
    ) -> RequestAttributes<'a> {
        RequestAttributes {
            user,
            groups,
            verb,
            api_group,
            resource: Some(resource),
            namespace: Some(namespace),
            path: "",
        }
    }

    #[test]
    fn each_suggested_schema_takes_what_kubernetes_sends_it() {
        let authn: &[&str] = &["system:authenticated"];
        let node: &[&str] = &["system:nodes", "system:authenticated"];
        let sa: &[&str] = &["system:serviceaccounts", "system:authenticated"];
        let lease = ("coordination.k8s.io", "leases");
        let cases = [
            (
                req("admin", &["system:masters"], "delete", ("", "pods"), "a"),
                "exempt",
                "",
            ),
            (
                req(
                    "system:kube-scheduler",
                    authn,
                    "update",
                    lease,
                    "kube-system",
                ),
                "system-leader-election",
                "system:kube-scheduler",
            ),
            (
                req(
                    "system:kube-controller-manager",
                    authn,
                    "get",
                    ("", "endpoints"),
                    "shop",
                ),
                "endpoint-controller",
                "system:kube-controller-manager",
            ),
            (
                req(
                    "system:serviceaccount:kube-system:x",
                    sa,
                    "get",
                    lease,
                    "shop",
                ),
                "workload-leader-election",
                "system:serviceaccount:kube-system:x",
            ),
            (
                req("system:node:n1", node, "update", lease, "kube-node-lease"),
                "system-node-high",
                "system:node:n1",
            ),
            (
                req("system:node:n1", node, "update", ("", "nodes/status"), ""),
                "system-node-high",
                "system:node:n1",
            ),
            (
                req("system:node:n1", node, "list", ("", "pods"), "shop"),
                "system-nodes",
                "system:node:n1",
            ),
            (
                req(
                    "system:kube-controller-manager",
                    authn,
                    "list",
                    ("apps", "deployments"),
                    "shop",
                ),
                "kube-controller-manager",
                "shop",
            ),
            (
                req(
                    "system:kube-scheduler",
                    authn,
                    "create",
                    ("", "bindings"),
                    "shop",
                ),
                "kube-scheduler",
                "shop",
            ),
            (
                req(
                    "system:serviceaccount:kube-system:x",
                    sa,
                    "list",
                    ("", "pods"),
                    "shop",
                ),
                "kube-system-service-accounts",
                "shop",
            ),
            (
                req(
                    "system:serviceaccount:shop:cart",
                    sa,
                    "list",
                    ("", "pods"),
                    "shop",
                ),
                "service-accounts",
                "system:serviceaccount:shop:cart",
            ),
            (
                req("alice", authn, "list", ("", "pods"), "shop"),
                "global-default",
                "alice",
            ),
            (
                req("bob", &[], "list", ("", "pods"), "shop"),
                "catch-all",
                "bob",
            ),
        ];
        for (attrs, schema, flow) in cases {
            let m = suggested_flow_schema(&attrs);
            assert_eq!((m.schema, m.flow.as_str()), (schema, flow), "{attrs:?}");
        }
        // Every level a schema names is one of the suggested levels.
        let apf = Apf::suggested(SUGGESTED_SEATS).build().unwrap();
        for (attrs, ..) in cases {
            let level = suggested_flow_schema(&attrs).level;
            assert!(apf.level_id(level).is_some(), "{level}");
        }
    }

    #[test]
    fn the_suggested_levels_share_600_seats_as_kubernetes_does() {
        let apf = Apf::suggested(SUGGESTED_SEATS).build().unwrap();
        // ceil(600 · shares / 245).
        let expected = [
            ("system", 74),
            ("node-high", 98),
            ("leader-election", 25),
            ("workload-high", 98),
            ("workload-low", 245),
            ("global-default", 49),
            ("catch-all", 13),
        ];
        for (name, seats) in expected {
            let stats = apf.level_stats(apf.level_id(name).unwrap()).unwrap();
            assert_eq!(stats.nominal_seats, seats, "{name}");
        }
    }
}
