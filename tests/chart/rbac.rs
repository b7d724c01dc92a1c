//! The Kubernetes API calls the operator makes, as a table, and the check that the chart's RBAC
//! allows each of them, where it should, and nothing more.
//!
//! The table is cross-checked against the code: the custom resource plurals and group come from
//! `mailtarget_operator::crd::generate::all_crds()`, and `calls.rs` runs the operator against the
//! test API server and checks every request it makes is in the table.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::helm::{RenderOptions, Rendered, all_options, defaults, render_ok, require_helm};

/// Where a call is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// In the namespaces the operator watches (all of them, or those of `watchNamespaces`).
    Watched,
    /// In the operator's own namespace, on the leader election Lease only (`named`: the call
    /// addresses the Lease by name, so RBAC can restrict it with resourceNames).
    Lease { named: bool },
    /// Cluster-wide, on cluster-scoped resources (ClusterAccounts, Namespaces): always a
    /// ClusterRole, in every layout.
    Cluster,
    /// In the operator's own namespace, where ClusterAccount credentials Secrets live (covered
    /// by the ClusterRole when every namespace is watched).
    OperatorNamespace,
}

/// One kind of request the operator sends.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    /// API group (`""` for core).
    pub group: &'static str,
    /// Resource, with `/subresource` when one is addressed.
    pub resource: &'static str,
    /// RBAC verb the request is authorized as.
    pub verb: &'static str,
    /// Where.
    pub scope: Scope,
    /// Why the operator makes it (and where in the code).
    pub why: &'static str,
}

const fn call(
    group: &'static str,
    resource: &'static str,
    verb: &'static str,
    scope: Scope,
    why: &'static str,
) -> Call {
    Call {
        group,
        resource,
        verb,
        scope,
        why,
    }
}

const W: Scope = Scope::Watched;
const C: Scope = Scope::Cluster;
const O: Scope = Scope::OperatorNamespace;
const MT: &str = "mailtarget.co";

/// Every request the operator makes to the Kubernetes API.
pub const CALLS: &[Call] = &[
    call(
        MT,
        "subaccounts",
        "list",
        W,
        "controller::Operator::run: the SubAccount reflector (feeds its controller and triggers referencing ApiKeys)",
    ),
    call(
        MT,
        "subaccounts",
        "watch",
        W,
        "controller::Operator::run: the SubAccount reflector",
    ),
    call(
        MT,
        "apikeys",
        "list",
        W,
        "controller::Operator::run: Controller/watcher of ApiKey",
    ),
    call(
        MT,
        "apikeys",
        "watch",
        W,
        "controller::Operator::run: Controller/watcher of ApiKey",
    ),
    call(
        MT,
        "sendingdomains",
        "list",
        W,
        "controller::Operator::run: Controller/watcher of SendingDomain",
    ),
    call(
        MT,
        "sendingdomains",
        "watch",
        W,
        "controller::Operator::run: Controller/watcher of SendingDomain",
    ),
    call(
        MT,
        "subaccounts",
        "get",
        W,
        "controller::converge reads the SubAccount of spec.subAccountRef when the SubAccount cache lacks it",
    ),
    call(
        MT,
        "subaccounts",
        "patch",
        W,
        "kube::runtime::finalizer: adds/removes mailtarget.co/finalizer (JSON patch); controller::identity and controller::revision: identity annotations and the version check (merge patches)",
    ),
    call(
        MT,
        "apikeys",
        "patch",
        W,
        "kube::runtime::finalizer: adds/removes mailtarget.co/finalizer (JSON patch); controller::identity and controller::revision: identity annotations and the version check (merge patches)",
    ),
    call(
        MT,
        "sendingdomains",
        "patch",
        W,
        "kube::runtime::finalizer: adds/removes mailtarget.co/finalizer (JSON patch); controller::identity and controller::revision: identity annotations and the version check (merge patches)",
    ),
    call(
        MT,
        "subaccounts/status",
        "patch",
        W,
        "controller::status::write_status: server-side apply of status",
    ),
    call(
        MT,
        "apikeys/status",
        "patch",
        W,
        "controller::status::write_status: server-side apply of status",
    ),
    call(
        MT,
        "sendingdomains/status",
        "patch",
        W,
        "controller::status::write_status: server-side apply of status",
    ),
    call(
        "",
        "secrets",
        "list",
        W,
        "the Secret reflector (Operator::run) with label app.kubernetes.io/managed-by=mailtarget-operator",
    ),
    call(
        "",
        "secrets",
        "watch",
        W,
        "the Secret reflector (Operator::run) with label app.kubernetes.io/managed-by=mailtarget-operator",
    ),
    call(
        "",
        "secrets",
        "get",
        W,
        "controller::secrets::{check, ensure}: reads the Secret before writing",
    ),
    call(
        "",
        "secrets",
        "create",
        W,
        "controller::secrets::ensure: server-side apply of a missing Secret is authorized as create",
    ),
    call(
        "",
        "secrets",
        "patch",
        W,
        "controller::secrets::ensure: server-side apply of the key value / DKIM private key",
    ),
    call(
        MT,
        "accounts",
        "list",
        W,
        "controller::accounts::run: the Account reflector (feeds its controller)",
    ),
    call(
        MT,
        "accounts",
        "watch",
        W,
        "controller::accounts::run: the Account reflector",
    ),
    call(
        MT,
        "accounts",
        "patch",
        W,
        "controller::accounts::in_use::protect: adds/removes mailtarget.co/in-use while managed resources use the Account (merge patch)",
    ),
    call(
        MT,
        "accounts/status",
        "patch",
        W,
        "controller::accounts::write_status: server-side apply of status",
    ),
    call(
        MT,
        "accounts",
        "get",
        W,
        "controller::accounts::writer: reads the Account again after a 409 Conflict on its status write (another instance wrote it; the documented sharding layout)",
    ),
    call(
        MT,
        "clusteraccounts",
        "get",
        C,
        "controller::accounts::writer: reads the ClusterAccount again after a 409 Conflict on its status write (every instance checks every ClusterAccount)",
    ),
    call(
        MT,
        "clusteraccounts",
        "list",
        C,
        "controller::accounts::run: the ClusterAccount reflector (feeds its controller)",
    ),
    call(
        MT,
        "clusteraccounts",
        "watch",
        C,
        "controller::accounts::run: the ClusterAccount reflector",
    ),
    call(
        MT,
        "clusteraccounts/status",
        "patch",
        C,
        "controller::accounts::write_status: server-side apply of status",
    ),
    call(
        "",
        "namespaces",
        "list",
        C,
        "controller::accounts::run: the Namespace metadata reflector (ClusterAccount namespace selectors)",
    ),
    call(
        "",
        "namespaces",
        "watch",
        C,
        "controller::accounts::run: the Namespace metadata reflector",
    ),
    call(
        "",
        "secrets",
        "get",
        O,
        "controller::accounts::check::read_key: a ClusterAccount's credentials Secret",
    ),
    call(
        "",
        "secrets",
        "list",
        O,
        "controller::accounts::run: the metadata-only watch of credentials Secrets",
    ),
    call(
        "",
        "secrets",
        "watch",
        O,
        "controller::accounts::run: the metadata-only watch of credentials Secrets",
    ),
    call(
        "events.k8s.io",
        "events",
        "create",
        W,
        "kube::runtime::events::Recorder::publish: a new Event",
    ),
    call(
        "events.k8s.io",
        "events",
        "patch",
        W,
        "kube::runtime::events::Recorder::publish: a repeated Event becomes a series (merge patch)",
    ),
    call(
        "coordination.k8s.io",
        "leases",
        "get",
        Scope::Lease { named: true },
        "controller::leader: reads the Lease",
    ),
    call(
        "coordination.k8s.io",
        "leases",
        "create",
        Scope::Lease { named: false },
        "controller::leader: creates the Lease when missing",
    ),
    call(
        "coordination.k8s.io",
        "leases",
        "patch",
        Scope::Lease { named: true },
        "controller::leader: takes, renews and releases the Lease (merge patch carrying its resourceVersion)",
    ),
];

/// Granted only with `rbac.ownerReferencesPermissionEnforcement` (not a call the operator
/// makes: an admission plugin demands it to set ownerReferences).
pub const OWNER_REFERENCES_DELETE: Call = call(
    "",
    "secrets",
    "delete",
    W,
    "OwnerReferencesPermissionEnforcement admission plugin: ownerReferences need delete",
);

/// One permission a rendered binding gives the operator's ServiceAccount.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// `None`: every namespace (ClusterRoleBinding); else the RoleBinding's namespace.
    pub namespace: Option<String>,
    /// API group.
    pub group: String,
    /// Resource (with subresource).
    pub resource: String,
    /// Verb.
    pub verb: String,
    /// resourceNames of the rule (empty: any name).
    pub names: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// Every rule of every Role and ClusterRole in the render is free of wildcards and
/// nonResourceURLs.
fn assert_no_wildcards(r: &Rendered, what: &str) {
    for role in r
        .of_kind("Role")
        .into_iter()
        .chain(r.of_kind("ClusterRole"))
    {
        for rule in role["rules"].as_array().into_iter().flatten() {
            for field in ["apiGroups", "resources", "verbs", "resourceNames"] {
                for s in strings(&rule[field]) {
                    assert!(
                        !s.contains('*'),
                        "{what}: {} {} has a wildcard in {field}: {rule}",
                        role["kind"],
                        role["metadata"]["name"]
                    );
                }
            }
            assert!(rule.get("nonResourceURLs").is_none(), "{what}: {rule}");
            assert!(!strings(&rule["verbs"]).is_empty(), "{what}: {rule}");
        }
    }
}

/// What the bindings of the render give ServiceAccount `sa` in `sa_namespace`.
pub fn grants(r: &Rendered, sa: &str, sa_namespace: &str) -> Vec<Grant> {
    let mut out = Vec::new();
    let bindings = r
        .of_kind("ClusterRoleBinding")
        .into_iter()
        .chain(r.of_kind("RoleBinding"));
    for b in bindings {
        let binds_sa = b["subjects"].as_array().into_iter().flatten().any(|s| {
            s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == sa_namespace
        });
        if !binds_sa {
            continue;
        }
        let namespace = match b["kind"].as_str() {
            Some("RoleBinding") => Some(
                b["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            ),
            _ => None,
        };
        let role_kind = b["roleRef"]["kind"].as_str().unwrap_or_default();
        let role_name = &b["roleRef"]["name"];
        let role = r.objects.iter().find(|o| {
            o["kind"] == role_kind
                && &o["metadata"]["name"] == role_name
                && (role_kind == "ClusterRole"
                    || o["metadata"]["namespace"].as_str() == namespace.as_deref())
        });
        let Some(role) = role else {
            panic!(
                "binding {} refers to a missing {role_kind} {role_name}",
                b["metadata"]["name"]
            );
        };
        for rule in role["rules"].as_array().into_iter().flatten() {
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        out.push(Grant {
                            namespace: namespace.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            verb,
                            names: strings(&rule["resourceNames"]),
                        });
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The layout a render is expected to have.
struct Layout<'a> {
    sa: &'a str,
    release_namespace: &'a str,
    /// Empty: cluster-wide; else the watched namespaces.
    watched: &'a [&'a str],
    /// The leader election Lease, when leader election is on.
    lease: Option<&'a str>,
    owner_references_delete: bool,
}

fn expected_calls(l: &Layout) -> Vec<Call> {
    let mut calls: Vec<Call> = CALLS
        .iter()
        .copied()
        .filter(|c| l.lease.is_some() || !matches!(c.scope, Scope::Lease { .. }))
        .collect();
    if l.owner_references_delete {
        calls.push(OWNER_REFERENCES_DELETE);
    }
    calls
}

fn allows(g: &Grant, c: &Call, namespace: Option<&str>, name: Option<&str>) -> bool {
    g.group == c.group
        && g.resource == c.resource
        && g.verb == c.verb
        && (g.namespace.is_none() || g.namespace.as_deref() == namespace)
        && (g.names.is_empty() || name.is_some_and(|n| g.names.iter().any(|x| x == n)))
}

fn check_layout(r: &Rendered, l: &Layout, what: &str) {
    assert_no_wildcards(r, what);
    let grants = grants(r, l.sa, l.release_namespace);
    assert!(!grants.is_empty(), "{what}: nothing is granted to {}", l.sa);
    let calls = expected_calls(l);
    // Every call is allowed where it is made: in each watched namespace (or cluster-wide).
    let watched: Vec<Option<&str>> = if l.watched.is_empty() {
        vec![None]
    } else {
        l.watched.iter().map(|n| Some(*n)).collect()
    };
    for c in &calls {
        let places: Vec<(Option<&str>, Option<&str>)> = match c.scope {
            Scope::Watched => watched.iter().map(|n| (*n, None)).collect(),
            Scope::Lease { named } => vec![(
                Some(l.release_namespace),
                if named { l.lease } else { None },
            )],
            Scope::Cluster => vec![(None, None)],
            Scope::OperatorNamespace => vec![(Some(l.release_namespace), None)],
        };
        for (namespace, name) in places {
            // A cluster-scoped call needs a ClusterRoleBinding: a grant without a namespace.
            let cluster = c.scope == Scope::Cluster;
            assert!(
                grants
                    .iter()
                    .any(|g| allows(g, c, namespace, name) && (!cluster || g.namespace.is_none())),
                "{what}: the operator's {} {}/{} in {namespace:?} ({}) is not allowed; grants: {grants:#?}",
                c.verb,
                c.group,
                c.resource,
                c.why
            );
        }
    }
    // Nothing broader: each grant is a call of the table, in the scope of one of the calls it
    // serves (a Secret read serves reconciles in the watched namespaces and ClusterAccounts in
    // the release namespace).
    for g in &grants {
        let matching: Vec<&Call> = calls
            .iter()
            .filter(|c| c.group == g.group && c.resource == g.resource && c.verb == g.verb)
            .collect();
        assert!(
            !matching.is_empty(),
            "{what}: {g:?} grants something the operator never does"
        );
        let within = |c: &Call| match c.scope {
            Scope::Watched => watched.contains(&g.namespace.as_deref()) && g.names.is_empty(),
            Scope::Lease { named } => {
                g.namespace.as_deref() == Some(l.release_namespace)
                    && (!named || g.names == vec![l.lease.unwrap_or_default().to_string()])
            }
            Scope::Cluster => g.namespace.is_none() && g.names.is_empty(),
            Scope::OperatorNamespace => {
                g.namespace.as_deref() == Some(l.release_namespace) && g.names.is_empty()
            }
        };
        assert!(
            matching.iter().any(|c| within(c)),
            "{what}: {g:?} is granted beyond where the operator makes that call ({})",
            matching
                .iter()
                .map(|c| c.why)
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
}

/// The table names the CRDs' real plurals and group, with their status subresources.
#[test]
fn table_matches_the_crds() {
    use mailtarget_operator::crd::generate::all_crds;
    let crds = all_crds();
    assert_eq!(crds.len(), 5);
    let table: BTreeSet<(&str, &str)> = CALLS
        .iter()
        .filter(|c| c.group == MT)
        .map(|c| (c.resource, c.verb))
        .collect();
    let mut resources = BTreeSet::new();
    for crd in &crds {
        assert_eq!(crd.spec.group, MT);
        let plural = crd.spec.names.plural.as_str();
        resources.insert(plural.to_string());
        // The managed kinds carry a finalizer and identity annotations, and a SubAccount is read
        // when its cache lacks one a reference names; the account kinds are only watched (their
        // status aside), but an Account in use carries the in-use finalizer.
        let verbs: &[&str] = match plural {
            "clusteraccounts" => &["get", "list", "watch"],
            "accounts" => &["get", "list", "watch", "patch"],
            "subaccounts" => &["get", "list", "watch", "patch"],
            _ => &["list", "watch", "patch"],
        };
        for verb in verbs {
            assert!(
                table.contains(&(plural, *verb)),
                "the table lacks {verb} {plural}"
            );
        }
        let has_status = crd
            .spec
            .versions
            .iter()
            .any(|v| v.subresources.as_ref().is_some_and(|s| s.status.is_some()));
        assert!(has_status, "{plural} has a status subresource");
        let status = format!("{plural}/status");
        resources.insert(status.clone());
        assert!(
            table.contains(&(status.as_str(), "patch")),
            "the table lacks patch {status}"
        );
    }
    for (resource, _) in &table {
        assert!(
            resources.contains(*resource),
            "the table names {resource}, which no CRD serves"
        );
    }
    for c in CALLS {
        assert!(!c.why.is_empty());
        assert!(
            [
                "get", "list", "watch", "create", "patch", "update", "delete"
            ]
            .contains(&c.verb),
            "{c:?}"
        );
    }
}

/// Every Role and ClusterRole rule carries a comment saying why, in the templates.
#[test]
fn every_rule_has_a_comment() {
    let dir = super::helm::chart_dir().join("templates");
    for file in ["_helpers.tpl", "rbac.yaml"] {
        let text =
            std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim_start().starts_with("- apiGroups:") {
                let previous = lines[..i]
                    .iter()
                    .rev()
                    .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with("{{"));
                assert!(
                    previous.is_some_and(|p| p.trim_start().starts_with('#')),
                    "{file}:{}: rule without a comment saying why",
                    i + 1
                );
            }
        }
    }
}

/// Default values: a ClusterRole for the reconcile calls, a Role for the Lease, and nothing
/// more than the table.
#[test]
fn default_rbac_allows_exactly_the_operator_calls() {
    if !require_helm("default_rbac_allows_exactly_the_operator_calls") {
        return;
    }
    check_layout(
        defaults(),
        &Layout {
            sa: "mailtarget-operator",
            release_namespace: "mailtarget-system",
            watched: &[],
            lease: Some("mailtarget-operator"),
            owner_references_delete: false,
        },
        "defaults",
    );
}

/// watchNamespaces: a Role and RoleBinding in each watched namespace and nowhere else (no
/// cluster-wide grant at all, so no Secret can be read outside them), plus the
/// OwnerReferencesPermissionEnforcement extra when asked for.
#[test]
fn namespaced_rbac_allows_exactly_the_operator_calls() {
    if !require_helm("namespaced_rbac_allows_exactly_the_operator_calls") {
        return;
    }
    let all = all_options();
    assert_only_cluster_scoped_cluster_roles(all);
    check_layout(
        all,
        &Layout {
            sa: "mailtarget-operator-shard-a",
            release_namespace: "mailtarget-system",
            watched: &["team-a", "team-b"],
            lease: Some("mailtarget-shard-a"),
            owner_references_delete: true,
        },
        "all options",
    );
    let three = render_ok(
        &RenderOptions::default().set("watchNamespaces", json!(["team-a", "team-b", "team-c"])),
    );
    assert_only_cluster_scoped_cluster_roles(&three);
    let mut role_namespaces: Vec<&str> = three
        .of_kind("RoleBinding")
        .iter()
        .filter_map(|b| b["metadata"]["namespace"].as_str())
        .collect();
    role_namespaces.sort_unstable();
    assert_eq!(
        role_namespaces,
        [
            "mailtarget-system",
            "mailtarget-system",
            "team-a",
            "team-b",
            "team-c"
        ],
        "one binding per watched namespace, the ClusterAccount Secrets' and the Lease's"
    );
    check_layout(
        &three,
        &Layout {
            sa: "mailtarget-operator",
            release_namespace: "mailtarget-system",
            watched: &["team-a", "team-b", "team-c"],
            lease: Some("mailtarget-operator"),
            owner_references_delete: false,
        },
        "three namespaces",
    );
    // The operator is told the same namespaces, in the form `run` parses.
    let d = three.one("Deployment");
    let env = d["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let value = env
        .iter()
        .find(|e| e["name"] == "WATCH_NAMESPACE")
        .and_then(|e| e["value"].as_str())
        .expect("WATCH_NAMESPACE");
    assert_eq!(watched_namespaces(value), ["team-a", "team-b", "team-c"]);
}

/// With watchNamespaces, the one ClusterRole grants only the cluster-scoped calls (ClusterAccounts,
/// Namespace labels): nothing namespaced, so no Secret outside the listed namespaces and the
/// release namespace can be read.
fn assert_only_cluster_scoped_cluster_roles(r: &Rendered) {
    let roles = r.of_kind("ClusterRole");
    assert_eq!(
        roles.len(),
        1,
        "one ClusterRole, for the cluster-scoped kinds"
    );
    for rule in roles[0]["rules"].as_array().into_iter().flatten() {
        for resource in strings(&rule["resources"]) {
            let cluster = CALLS
                .iter()
                .any(|c| c.scope == Scope::Cluster && c.resource == resource);
            assert!(cluster, "the ClusterRole grants namespaced {resource}");
        }
    }
}

/// Without leader election there is no Lease permission at all.
#[test]
fn no_lease_permission_without_leader_election() {
    if !require_helm("no_lease_permission_without_leader_election") {
        return;
    }
    let r = render_ok(&RenderOptions::default().set("leaderElection", json!({"enabled": false})));
    check_layout(
        &r,
        &Layout {
            sa: "mailtarget-operator",
            release_namespace: "mailtarget-system",
            watched: &[],
            lease: None,
            owner_references_delete: false,
        },
        "no leader election",
    );
}

/// The namespaces `mailtarget-operator run` watches for a WATCH_NAMESPACE value: parsed by its
/// clap definition through the flag, which splits values as the variable does.
fn watched_namespaces(value: &str) -> Vec<String> {
    use clap::{Args, FromArgMatches};
    let cmd = mailtarget_operator::controller::RunArgs::augment_args(clap::Command::new("run"));
    let matches = cmd
        .try_get_matches_from(["run", "--namespace", value])
        .unwrap_or_else(|e| panic!("`run` refuses {value:?}: {e}"));
    mailtarget_operator::controller::RunArgs::from_arg_matches(&matches)
        .expect("run arguments")
        .namespace
}
