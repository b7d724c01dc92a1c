//! How server-side apply and strategic merge treat a value at a given place: maps merge key by key
//! unless `x-kubernetes-map-type: atomic`; lists are atomic unless `x-kubernetes-list-type` says
//! `set` or `map` (with `x-kubernetes-list-map-keys`). Without a schema (built-in kinds), the
//! `metav1.ObjectMeta` list types apply: `metadata.finalizers` is a set and
//! `metadata.ownerReferences` a map keyed by `uid`.

use serde_json::Value;

use crate::schema::node::Node;

/// How a list merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// Replaced as a whole (the default).
    Atomic,
    /// `x-kubernetes-list-type: set`: items are scalars identified by value.
    Set,
    /// `x-kubernetes-list-type: map`: items are objects identified by these key fields.
    Map(Vec<String>),
}

/// Where a walk is: the schema node (if any) and the field names from the root.
#[derive(Debug, Clone)]
pub(crate) struct Place<'a> {
    /// The schema of the value here, if known.
    pub(crate) schema: Option<Node<'a>>,
    /// Field names from the object's root (list items add nothing).
    pub(crate) names: Vec<String>,
}

impl<'a> Place<'a> {
    /// The object's root, with the CRD schema if there is one (the `openAPIV3Schema`, or the
    /// version's `schema` wrapping it).
    pub(crate) fn root(schema: Option<&'a Value>) -> Place<'a> {
        Place {
            schema: schema.map(Node::root),
            names: Vec::new(),
        }
    }

    /// The place of field `name` of the object here.
    pub(crate) fn field(&self, name: &str) -> Place<'a> {
        let mut names = self.names.clone();
        names.push(name.to_string());
        Place {
            schema: self.schema.and_then(|s| s.child(name)),
            names,
        }
    }

    /// The place of an item of the list here.
    pub(crate) fn item(&self) -> Place<'a> {
        Place {
            schema: self.schema.and_then(|s| s.items()),
            names: self.names.clone(),
        }
    }

    /// How the list here merges.
    pub(crate) fn list_kind(&self) -> ListKind {
        if self.names.len() == 2 && self.names[0] == "metadata" {
            match self.names[1].as_str() {
                "finalizers" => return ListKind::Set,
                "ownerReferences" => return ListKind::Map(vec!["uid".to_string()]),
                _ => {}
            }
        }
        match self.schema.and_then(|s| s.list_type()) {
            Some("set") => ListKind::Set,
            Some("map") => {
                let keys: Vec<String> = self
                    .schema
                    .map(|s| s.list_map_keys())
                    .unwrap_or_default()
                    .into_iter()
                    .map(String::from)
                    .collect();
                if keys.is_empty() {
                    ListKind::Atomic
                } else {
                    ListKind::Map(keys)
                }
            }
            _ => ListKind::Atomic,
        }
    }

    /// Whether the map here is `x-kubernetes-map-type: atomic` (replaced as a whole).
    pub(crate) fn atomic_map(&self) -> bool {
        self.schema.and_then(|s| s.map_type()) == Some("atomic")
    }
}
