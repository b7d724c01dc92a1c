//! Finding the API object that a resource stands for, without ever creating a duplicate:
//! by the `mailtarget.co/external-id` annotation, then by the id recorded in `status.id`, then
//! by the natural key (sub account name, key name, domain).

/// How a resource was matched to its API object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum MatchedBy {
    /// The `mailtarget.co/external-id` annotation.
    ExternalId,
    /// The id recorded in `status.id` by an earlier reconcile.
    StatusId,
    /// The natural key (name or domain): the object is adopted.
    NaturalKey,
}

/// A matched API object: its id and how it was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Found {
    /// Id in the service.
    pub id: i64,
    /// How it was found.
    pub matched_by: MatchedBy,
}

/// The outcome of a lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup<'a, T> {
    /// Exactly one API object matches.
    Found(&'a T, Found),
    /// No API object matches: it may be created.
    Missing,
    /// Several API objects carry the natural key: nothing is adopted or created until the user
    /// picks one with the external-id annotation. Holds their ids.
    Ambiguous(Vec<i64>),
    /// The external-id annotation names an id that does not exist.
    ExternalIdNotFound(i64),
    /// The external-id annotation names an object of another natural key, which its kind
    /// cannot change (a sending domain): another object than the resource's (see
    /// [`Lookup::with_fixed_key`]). Holds its id.
    OtherObject(i64),
    /// No object of the resource's scope (its sub account, or the account's own objects) matches,
    /// but the natural key, unique at the service, is taken outside it: the object can be
    /// neither adopted nor created there.
    OutsideScope,
}

impl<'a, T> Lookup<'a, T> {
    /// For a kind whose natural key the interface cannot change (a sending domain: interface
    /// document, "Sending domains", no field to rename it): an object found by the external-id
    /// annotation for which `natural` is false is [`Lookup::OtherObject`], never this
    /// resource's object to update, export or delete. Other outcomes are kept.
    pub fn with_fixed_key(self, natural: impl Fn(&T) -> bool) -> Self {
        match self {
            Lookup::Found(item, found)
                if found.matched_by == MatchedBy::ExternalId && !natural(item) =>
            {
                Lookup::OtherObject(found.id)
            }
            other => other,
        }
    }

    /// Why this lookup stops the resource, for people: `Some((reason, message))` for an
    /// ambiguous natural key (`AmbiguousMatch`), an unknown external id
    /// (`ExternalObjectNotFound`), an external id naming an object of another fixed natural key
    /// (`InvalidSpec`; the message does not give that object's key, which may be another
    /// resource's); `None` when the object was found or may be created.
    /// `noun` names the API object (`API key`), `key` the natural key searched for.
    pub fn blocked(&self, noun: &str, key: &str) -> Option<(&'static str, String)> {
        let annotation = crate::crd::ANNOTATION_EXTERNAL_ID;
        match self {
            Lookup::Ambiguous(ids) => Some((
                "AmbiguousMatch",
                format!(
                    "{} {noun}s match \"{key}\" (ids {}); set the {annotation} annotation to the id to adopt, or delete the extra ones",
                    ids.len(),
                    ids.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
            Lookup::ExternalIdNotFound(id) => Some((
                "ExternalObjectNotFound",
                format!(
                    "the {annotation} annotation names {noun} {id}, which does not exist where this resource may look"
                ),
            )),
            Lookup::OtherObject(id) => Some((
                "InvalidSpec",
                format!(
                    "the {annotation} annotation names {noun} {id}, which is not \"{key}\" and cannot be renamed to it; remove the annotation, or set it to the id of \"{key}\""
                ),
            )),
            Lookup::OutsideScope => Some((
                "AlreadyExists",
                format!(
                    "a {noun} \"{key}\" exists outside this resource's scope (another sub account, or the company's own objects when the resource is placed inside a sub account); it can be neither adopted nor created here"
                ),
            )),
            Lookup::Found(..) | Lookup::Missing => None,
        }
    }
}

/// Finds the item of `items` that a resource stands for.
///
/// Only items for which `in_scope` is true exist for the lookup (the objects of the resource's
/// scope: the sub account it is placed in, else its account's own objects; an id or name
/// outside it reaches nothing). Among them `external_id` wins when set (and is an error when
/// absent); then `status_id`; then every item for which `natural` is true. An id in `status_id`
/// that no longer exists (the object was deleted out of band) falls through to the natural key,
/// then to [`Lookup::Missing`]. When nothing in scope matches and `natural` is true of an item
/// outside it, the answer is [`Lookup::OutsideScope`]: a kind whose natural key repeats across
/// scopes (API key names) keeps the scope in `natural` too.
pub fn find<'a, T>(
    items: &'a [T],
    id_of: impl Fn(&T) -> i64,
    in_scope: impl Fn(&T) -> bool,
    external_id: Option<i64>,
    status_id: Option<i64>,
    natural: impl Fn(&T) -> bool,
) -> Lookup<'a, T> {
    let scoped = || items.iter().filter(|i| in_scope(i));
    let found = |item: &'a T, matched_by| {
        let id = id_of(item);
        Lookup::Found(item, Found { id, matched_by })
    };
    if let Some(want) = external_id {
        return match scoped().find(|i| id_of(i) == want) {
            Some(item) => found(item, MatchedBy::ExternalId),
            None => Lookup::ExternalIdNotFound(want),
        };
    }
    if let Some(want) = status_id
        && let Some(item) = scoped().find(|i| id_of(i) == want)
    {
        return found(item, MatchedBy::StatusId);
    }
    let matches: Vec<&T> = scoped().filter(|i| natural(i)).collect();
    match matches.as_slice() {
        [] if items.iter().any(|i| !in_scope(i) && natural(i)) => Lookup::OutsideScope,
        [] => Lookup::Missing,
        [one] => found(one, MatchedBy::NaturalKey),
        many => Lookup::Ambiguous(many.iter().map(|i| id_of(i)).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Item = (i64, &'static str);
    const ITEMS: &[Item] = &[(1, "a"), (2, "b"), (3, "b")];

    fn run(ext: Option<i64>, status: Option<i64>, name: &str) -> Lookup<'static, Item> {
        find(ITEMS, |i| i.0, |_| true, ext, status, |i| i.1 == name)
    }

    /// Items out of scope do not exist for any of the three matches.
    #[test]
    fn out_of_scope_items_are_not_found() {
        let scoped = |ext, status, name: &str| {
            find(ITEMS, |i| i.0, |i| i.0 != 2, ext, status, |i| i.1 == name)
        };
        assert_eq!(scoped(Some(2), None, "a"), Lookup::ExternalIdNotFound(2));
        assert_eq!(scoped(None, Some(2), "z"), Lookup::Missing);
        assert!(matches!(
            scoped(None, None, "b"),
            Lookup::Found(
                _,
                Found {
                    id: 3,
                    matched_by: MatchedBy::NaturalKey
                }
            )
        ));
        let only_one = |name: &str| find(ITEMS, |i| i.0, |i| i.0 == 1, None, None, |i| i.1 == name);
        assert_eq!(only_one("b"), Lookup::OutsideScope);
    }

    /// The lookup order is external id, status id, natural key; ambiguity adopts nothing.
    #[test]
    fn lookup_table() {
        assert!(matches!(
            run(Some(2), Some(1), "a"),
            Lookup::Found(
                _,
                Found {
                    id: 2,
                    matched_by: MatchedBy::ExternalId
                }
            )
        ));
        assert_eq!(run(Some(9), None, "a"), Lookup::ExternalIdNotFound(9));
        assert!(matches!(
            run(None, Some(1), "b"),
            Lookup::Found(
                _,
                Found {
                    id: 1,
                    matched_by: MatchedBy::StatusId
                }
            )
        ));
        assert!(matches!(
            run(None, Some(9), "a"),
            Lookup::Found(
                _,
                Found {
                    id: 1,
                    matched_by: MatchedBy::NaturalKey
                }
            )
        ));
        assert_eq!(run(None, None, "b"), Lookup::Ambiguous(vec![2, 3]));
        assert_eq!(run(None, Some(9), "z"), Lookup::Missing);
    }
}
