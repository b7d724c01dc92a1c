//! The resource registry: the built-in kinds this emulator serves and the kinds that
//! CustomResourceDefinitions add while they exist (Kubernetes API conventions, "Resources"; CRD
//! semantics from the apiextensions.k8s.io/v1 reference).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde_json::Value;

/// Where objects of a resource live in the store: one bucket per group and plural, shared by all
/// versions of that resource (and by core/v1 and events.k8s.io/v1 Events, as in Kubernetes).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoreKey {
    /// API group (`""` for core).
    pub group: String,
    /// Resource plural, e.g. `widgets`.
    pub plural: String,
}

/// The built-in kinds served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// core/v1 Namespace.
    Namespace,
    /// core/v1 Secret.
    Secret,
    /// core/v1 ConfigMap.
    ConfigMap,
    /// core/v1 Event.
    CoreEvent,
    /// events.k8s.io/v1 Event (same storage as core/v1 Event, converted on the way in and out).
    EventsEvent,
    /// coordination.k8s.io/v1 Lease.
    Lease,
    /// apiextensions.k8s.io/v1 CustomResourceDefinition.
    Crd,
    /// apps/v1 Deployment (stored only: no pods are created).
    Deployment,
    /// core/v1 ServiceAccount (stored only: no tokens are issued).
    ServiceAccount,
    /// core/v1 Service (stored only: no cluster IP is allocated, no endpoints).
    Service,
    /// rbac.authorization.k8s.io/v1 ClusterRole (stored only: nothing is authorized by it).
    ClusterRole,
    /// rbac.authorization.k8s.io/v1 ClusterRoleBinding (stored only).
    ClusterRoleBinding,
    /// rbac.authorization.k8s.io/v1 Role (stored only).
    Role,
    /// rbac.authorization.k8s.io/v1 RoleBinding (stored only).
    RoleBinding,
    /// policy/v1 PodDisruptionBudget (stored only: no disruption controller).
    PodDisruptionBudget,
    /// networking.k8s.io/v1 NetworkPolicy (stored only: no traffic is filtered).
    NetworkPolicy,
}

impl Builtin {
    /// The stored-only kinds that, as in kube-apiserver, have a `status` subresource and a
    /// `metadata.generation` bumped by spec changes (Deployment, PodDisruptionBudget), a
    /// `status` subresource only (Service), or a `generation` only (NetworkPolicy, whose
    /// strategy sets it on create and bumps it on spec changes; it has no status since 1.28).
    fn status_and_generation(self) -> (bool, bool) {
        match self {
            Builtin::Namespace | Builtin::Crd => (true, false),
            Builtin::Deployment | Builtin::PodDisruptionBudget => (true, true),
            Builtin::Service => (true, false),
            Builtin::NetworkPolicy => (false, true),
            _ => (false, false),
        }
    }
}

/// What one served version of a custom resource carries from its CRD.
#[derive(Clone, Debug)]
pub struct CustomVersion {
    /// Name of the defining CRD (`<plural>.<group>`).
    pub crd_name: String,
    /// `versions[].schema.openAPIV3Schema`, if given.
    pub schema: Option<Value>,
    /// `versions[].additionalPrinterColumns`.
    pub printer_columns: Vec<Value>,
    /// `versions[].subresources.status` is set.
    pub status_subresource: bool,
    /// `versions[].subresources.scale` is set (refused with 501 when used).
    pub scale_subresource: bool,
}

/// Built-in or custom.
#[derive(Clone, Debug)]
pub enum Flavor {
    /// One of the built-in kinds.
    Builtin(Builtin),
    /// A version served by a CRD.
    Custom(CustomVersion),
}

/// One served resource at one group/version.
#[derive(Clone, Debug)]
pub struct ResourceType {
    /// API group, `""` for core.
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Plural resource name used in paths.
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// List kind (`<Kind>List` unless the CRD says otherwise).
    pub list_kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names for discovery (`kubectl get cm`).
    pub short_names: Vec<String>,
    /// Categories for discovery (`kubectl get all`).
    pub categories: Vec<String>,
    /// Store bucket.
    pub storage: StoreKey,
    /// Built-in or custom.
    pub flavor: Flavor,
}

impl ResourceType {
    /// `group/version`, or `v1` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The built-in kind, if this is one.
    pub fn builtin(&self) -> Option<Builtin> {
        match &self.flavor {
            Flavor::Builtin(b) => Some(*b),
            Flavor::Custom(_) => None,
        }
    }

    /// The CRD version data, if this is a custom resource.
    pub fn custom(&self) -> Option<&CustomVersion> {
        match &self.flavor {
            Flavor::Builtin(_) => None,
            Flavor::Custom(c) => Some(c),
        }
    }

    /// Whether the `status` subresource exists (the main endpoint then ignores status changes).
    pub fn status_subresource(&self) -> bool {
        match &self.flavor {
            Flavor::Builtin(b) => b.status_and_generation().0,
            Flavor::Custom(c) => c.status_subresource,
        }
    }

    /// Whether objects carry `metadata.generation` (custom resources, CRDs, Deployments,
    /// PodDisruptionBudgets and NetworkPolicies).
    pub fn has_generation(&self) -> bool {
        match &self.flavor {
            Flavor::Custom(_) | Flavor::Builtin(Builtin::Crd) => true,
            Flavor::Builtin(b) => b.status_and_generation().1,
        }
    }

    /// Whether PUT must carry `metadata.resourceVersion` (kube-apiserver refuses unconditional
    /// updates of custom resources and CRDs).
    pub fn requires_rv_on_update(&self) -> bool {
        matches!(
            self.flavor,
            Flavor::Custom(_) | Flavor::Builtin(Builtin::Crd)
        )
    }

    /// Whether DELETE answers with the deleted object (custom resources) rather than a
    /// success Status (built-ins).
    pub fn returns_deleted_object(&self) -> bool {
        matches!(self.flavor, Flavor::Custom(_))
    }

    /// Whether strategic merge patch is accepted (built-ins only, like kube-apiserver).
    pub fn accepts_strategic_merge(&self) -> bool {
        matches!(self.flavor, Flavor::Builtin(_))
    }
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The verbs every served resource supports.
pub fn verbs() -> Vec<&'static str> {
    VERBS.to_vec()
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    plural: &str,
    kind: &str,
    namespaced: bool,
    short: &[&str],
    storage_plural: (&str, &str),
    b: Builtin,
) -> ResourceType {
    ResourceType {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        storage: StoreKey {
            group: storage_plural.0.into(),
            plural: storage_plural.1.into(),
        },
        flavor: Flavor::Builtin(b),
    }
}

/// `rt` listed in the categories `cats` (e.g. `all`, for `kubectl get all`).
fn in_categories(mut rt: ResourceType, cats: &[&str]) -> ResourceType {
    rt.categories = cats.iter().map(|c| c.to_string()).collect();
    rt
}

/// Resource types plus the custom ones added by CRDs.
#[derive(Clone, Debug)]
pub struct Registry {
    builtins: Vec<ResourceType>,
    custom: BTreeMap<String, Vec<ResourceType>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// The built-in kinds only.
    pub fn new() -> Registry {
        let builtins = vec![
            builtin(
                "",
                "v1",
                "namespaces",
                "Namespace",
                false,
                &["ns"],
                ("", "namespaces"),
                Builtin::Namespace,
            ),
            builtin(
                "",
                "v1",
                "secrets",
                "Secret",
                true,
                &[],
                ("", "secrets"),
                Builtin::Secret,
            ),
            builtin(
                "",
                "v1",
                "configmaps",
                "ConfigMap",
                true,
                &["cm"],
                ("", "configmaps"),
                Builtin::ConfigMap,
            ),
            builtin(
                "",
                "v1",
                "events",
                "Event",
                true,
                &["ev"],
                ("", "events"),
                Builtin::CoreEvent,
            ),
            builtin(
                "events.k8s.io",
                "v1",
                "events",
                "Event",
                true,
                &["ev"],
                ("", "events"),
                Builtin::EventsEvent,
            ),
            builtin(
                "coordination.k8s.io",
                "v1",
                "leases",
                "Lease",
                true,
                &[],
                ("coordination.k8s.io", "leases"),
                Builtin::Lease,
            ),
            builtin(
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "CustomResourceDefinition",
                false,
                &["crd", "crds"],
                ("apiextensions.k8s.io", "customresourcedefinitions"),
                Builtin::Crd,
            ),
            in_categories(
                builtin(
                    "apps",
                    "v1",
                    "deployments",
                    "Deployment",
                    true,
                    &["deploy"],
                    ("apps", "deployments"),
                    Builtin::Deployment,
                ),
                &["all"],
            ),
            builtin(
                "",
                "v1",
                "serviceaccounts",
                "ServiceAccount",
                true,
                &["sa"],
                ("", "serviceaccounts"),
                Builtin::ServiceAccount,
            ),
            in_categories(
                builtin(
                    "",
                    "v1",
                    "services",
                    "Service",
                    true,
                    &["svc"],
                    ("", "services"),
                    Builtin::Service,
                ),
                &["all"],
            ),
            builtin(
                "rbac.authorization.k8s.io",
                "v1",
                "clusterroles",
                "ClusterRole",
                false,
                &[],
                ("rbac.authorization.k8s.io", "clusterroles"),
                Builtin::ClusterRole,
            ),
            builtin(
                "rbac.authorization.k8s.io",
                "v1",
                "clusterrolebindings",
                "ClusterRoleBinding",
                false,
                &[],
                ("rbac.authorization.k8s.io", "clusterrolebindings"),
                Builtin::ClusterRoleBinding,
            ),
            builtin(
                "rbac.authorization.k8s.io",
                "v1",
                "roles",
                "Role",
                true,
                &[],
                ("rbac.authorization.k8s.io", "roles"),
                Builtin::Role,
            ),
            builtin(
                "rbac.authorization.k8s.io",
                "v1",
                "rolebindings",
                "RoleBinding",
                true,
                &[],
                ("rbac.authorization.k8s.io", "rolebindings"),
                Builtin::RoleBinding,
            ),
            builtin(
                "policy",
                "v1",
                "poddisruptionbudgets",
                "PodDisruptionBudget",
                true,
                &["pdb"],
                ("policy", "poddisruptionbudgets"),
                Builtin::PodDisruptionBudget,
            ),
            builtin(
                "networking.k8s.io",
                "v1",
                "networkpolicies",
                "NetworkPolicy",
                true,
                &["netpol"],
                ("networking.k8s.io", "networkpolicies"),
                Builtin::NetworkPolicy,
            ),
        ];
        Registry {
            builtins,
            custom: BTreeMap::new(),
        }
    }

    /// Every served resource type, built-ins first.
    pub fn all(&self) -> impl Iterator<Item = &ResourceType> {
        self.builtins.iter().chain(self.custom.values().flatten())
    }

    /// The resource served at `group/version` under `plural`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.all()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
    }

    /// Served resources at `group/version`.
    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<&ResourceType> {
        self.all()
            .filter(|r| r.group == group && r.version == version)
            .collect()
    }

    /// Groups (excluding core) with their served versions, preferred version first (Kubernetes
    /// version priority: GA before beta before alpha, higher numbers first).
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for r in self.all() {
            if r.group.is_empty() {
                continue;
            }
            match out.iter_mut().find(|(g, _)| g == &r.group) {
                Some((_, vs)) => {
                    if !vs.contains(&r.version) {
                        vs.push(r.version.clone());
                    }
                }
                None => out.push((r.group.clone(), vec![r.version.clone()])),
            }
        }
        for (_, vs) in out.iter_mut() {
            vs.sort_by(|a, b| compare_versions(b, a));
        }
        out
    }

    /// Registers (or re-registers) the served versions of a CRD object; versions with
    /// `served: false` are not registered.
    pub fn set_crd(&mut self, crd: &Value) {
        let name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let spec = &crd["spec"];
        let group = spec["group"].as_str().unwrap_or_default().to_string();
        let names = &spec["names"];
        let plural = names["plural"].as_str().unwrap_or_default().to_string();
        let kind = names["kind"].as_str().unwrap_or_default().to_string();
        let singular = names["singular"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_lowercase());
        let list_kind = names["listKind"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("{kind}List"));
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let namespaced = spec["scope"].as_str() != Some("Cluster");
        let mut types = Vec::new();
        for v in spec["versions"].as_array().into_iter().flatten() {
            if v["served"].as_bool() == Some(false) {
                continue;
            }
            let version = v["name"].as_str().unwrap_or_default().to_string();
            types.push(ResourceType {
                group: group.clone(),
                version,
                plural: plural.clone(),
                singular: singular.clone(),
                kind: kind.clone(),
                list_kind: list_kind.clone(),
                namespaced,
                short_names: strings(&names["shortNames"]),
                categories: strings(&names["categories"]),
                storage: StoreKey {
                    group: group.clone(),
                    plural: plural.clone(),
                },
                flavor: Flavor::Custom(CustomVersion {
                    crd_name: name.clone(),
                    schema: v["schema"].get("openAPIV3Schema").cloned(),
                    printer_columns: v["additionalPrinterColumns"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default(),
                    status_subresource: v["subresources"].get("status").is_some(),
                    scale_subresource: v["subresources"].get("scale").is_some(),
                }),
            });
        }
        self.custom.insert(name, types);
    }

    /// Stops serving the kinds of CRD `name`.
    pub fn remove_crd(&mut self, name: &str) {
        self.custom.remove(name);
    }
}

fn parse_version(v: &str) -> Option<(u64, u8, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let major: u64 = digits.parse().ok()?;
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return Some((major, 2, 0));
    }
    let (level, num) = if let Some(n) = tail.strip_prefix("beta") {
        (1, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (0, n)
    } else {
        return None;
    };
    let minor: u64 = num.parse().ok()?;
    Some((major, level, minor))
}

/// Kubernetes version priority (`v1 > v1beta2 > v1beta1 > v1alpha1 > foo`), as used to pick a
/// group's preferred version.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (parse_version(a), parse_version(b)) {
        (Some((ma, la, na)), Some((mb, lb, nb))) => la.cmp(&lb).then(ma.cmp(&mb)).then(na.cmp(&nb)),
        (Some(_), None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        (None, None) => b.cmp(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn version_priority_prefers_ga_then_beta_then_alpha() {
        let mut v = vec!["v1alpha1", "v2", "v1beta1", "v1", "foo", "v1beta2"];
        v.sort_by(|a, b| compare_versions(b, a));
        assert_eq!(v, vec!["v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]);
    }

    #[test]
    fn crd_registers_only_served_versions() {
        let mut r = Registry::new();
        r.set_crd(&json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
                    {"name": "v0", "served": false, "storage": false}
                ]}
        }));
        let w = r.lookup("example.com", "v1", "widgets").expect("served");
        assert!(w.status_subresource());
        assert_eq!(w.short_names, vec!["wd"]);
        assert_eq!(w.list_kind, "WidgetList");
        assert!(r.lookup("example.com", "v0", "widgets").is_none());
        r.remove_crd("widgets.example.com");
        assert!(r.lookup("example.com", "v1", "widgets").is_none());
    }
}
