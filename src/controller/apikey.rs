//! The ApiKey reconciler: converges an API key and writes its value to the Secret named in
//! `spec.secretName`.

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;

use super::common::{delete_per_policy, spec_changed};
use super::context::{Context, object_key};
use super::error::Result;
use super::find::{Query, find_managed, gone_is_none};
use super::identity;
use super::managed::{ConvergeResult, Converged, Failure, Managed};
use super::secrets::{self, SecretError, SecretWrite};
use super::status::Outcome;
use crate::api::ApiKeyDetail;
use crate::crd::{ApiKey, ApiKeyStatus, SubAccount};
use crate::reconcile::execute::create_or_recover;
use crate::reconcile::{Action as Plan, MatchedBy, apikey, natural_key};

/// Key of the Secret's data that holds the key value.
pub use crate::engine::kinds::api_key::SECRET_KEY;

impl Managed for ApiKey {
    type Status = ApiKeyStatus;
    const KIND: &'static str = "ApiKey";

    fn current_status(&self) -> ApiKeyStatus {
        self.status.clone().unwrap_or_default()
    }

    async fn converge(&self, ctx: &Context, old: &ApiKeyStatus) -> ConvergeResult<ApiKeyStatus> {
        converge(self, ctx, old).await
    }

    async fn cleanup(&self, ctx: &Context) -> Result<Action> {
        cleanup(self, ctx).await
    }
}

async fn converge(obj: &ApiKey, ctx: &Context, old: &ApiKeyStatus) -> ConvergeResult<ApiKeyStatus> {
    let desired = match apikey::desired(obj) {
        Ok(d) => d,
        Err(problems) => return Err(Failure::invalid_spec(&problems, old)),
    };
    // Dereference spec.subAccountRef: the sub account's id, and whether the SubAccount manages it
    // (not only observes it).
    let mut sub_managed = false;
    let scope = match &desired.sub_account_ref {
        None => None,
        Some(sub) => {
            let namespace = obj.namespace().unwrap_or_default();
            // The SubAccount controller's cache answers without a request: a sub account in it
            // without an id yet triggers this key again once it has one (see
            // `triggers::ReferencingKeys`). One outside it (not created yet, another shard, the
            // cache still filling) is read from the API.
            let cached = ctx
                .claims
                .sub_accounts
                .get()
                .and_then(|store| store.get(&ObjectRef::new(sub).within(&namespace)));
            let id_and_managed = |s: &SubAccount| {
                (
                    s.status.as_ref().and_then(|st| st.id),
                    s.spec.management_policy.may_write(),
                )
            };
            let (found, managed) = match cached {
                Some(s) => id_and_managed(&s),
                None => {
                    let subs: Api<SubAccount> = Api::namespaced(ctx.kube.clone(), &namespace);
                    subs.get_opt(sub)
                        .await
                        .map_err(|e| Failure::kube("ReferenceNotReady", e, old))?
                        .map_or((None, false), |s| id_and_managed(&s))
                }
            };
            sub_managed = managed;
            match found {
                Some(id) => Some(id),
                None => {
                    return Ok(Converged {
                        outcome: Outcome::Progressing {
                            reason: "ReferenceNotReady",
                            message: format!(
                                "SubAccount \"{sub}\" does not exist yet or has no sub account id; waiting for it"
                            ),
                        },
                        status: old.clone(),
                        requeue: Some(Action::requeue(ctx.resync_delay())),
                    });
                }
            }
        }
    };
    let lookup = find_managed(
        ctx,
        obj,
        old,
        Query {
            key: &desired.name,
            // A key inside a sub account that a SubAccount of this namespace manages (the
            // interface creates such keys only with their sub account); not one it only
            // observes.
            by_name_is_own: sub_managed,
        },
        || ctx.cache.fresh_api_keys(),
        |items, external_id| apikey::lookup(&desired, external_id, old.id, scope, items),
        |id| async move {
            gone_is_none(ctx.api.get_api_key(id).await)
                .map(|d| d.map(|d| apikey::list_item_from_detail(&d)))
        },
    )
    .await?;
    let observe_only = !obj.spec.management_policy.may_write();

    // The comparison needs fields the list item lacks (permissions, allowed IPs). Status
    // mirrors them from the last detail read or write: a spec change is planned against it
    // (no GET before the PUT); the detail is read when status does not hold it (adoption)
    // and once per detail resync interval, to correct changes made at the service.
    let needs_detail = apikey::needs_detail(&desired);
    let mut detail: Option<ApiKeyDetail> = None;
    if let Some((item, _)) = &lookup
        && needs_detail
        && ({
            let known = apikey::status_has_detail(old, item.id);
            (!known && spec_changed(obj, old.observed_generation))
                || ctx.details.due(&object_key(obj), known)
        })
    {
        detail = Some(
            ctx.api
                .get_api_key(item.id)
                .await
                .map_err(|e| Failure::api(e, "reading the API key", old))?,
        );
        ctx.details.read(&object_key(obj));
    }
    let observed = match (&lookup, &detail) {
        (Some((_, found)), Some(d)) => Some((*found, apikey::Observed::from(d))),
        (Some((item, found)), None) if needs_detail => {
            Some((*found, apikey::Observed::last_known(item, old)))
        }
        (Some((item, found)), None) => Some((*found, apikey::Observed::from(item))),
        _ => None,
    };
    let plan = match apikey::plan(&desired, observed.as_ref().map(|(f, o)| (*f, o))) {
        Ok(p) => p,
        Err(message) => return Err(Failure::stalled("CannotCreate", message, old)),
    };

    if observe_only {
        return Ok(observe(
            obj,
            ctx,
            &plan,
            lookup.as_ref().map(|(i, _)| i),
            detail.as_ref(),
            old,
        )
        .await);
    }

    let mut status_source: Option<ApiKeyDetail> = detail;
    match &plan.action {
        Plan::Create(req) => {
            identity::mark_pending(ctx, obj)
                .await
                .map_err(|e| Failure::kube("IdentityWriteFailed", e, old))?;
            let client = &ctx.api;
            let name = desired.name.clone();
            let created = create_or_recover(client.create_api_key(req), || async {
                ctx.cache.api_keys.invalidate();
                let list = ctx.cache.fresh_api_keys().await?;
                match list.read(|items| {
                    items
                        .iter()
                        .find(|k| {
                            natural_key::same_key_name(&k.name, &name) && k.sub_account_id == 0
                        })
                        .map(|k| k.id)
                }) {
                    Some(id) => client.get_api_key(id).await.map(Some),
                    None => Ok(None),
                }
            })
            .await
            .map_err(|e| Failure::api(e, "creating the API key", old))?;
            ctx.cache
                .api_keys
                .upsert(apikey::list_item_from_detail(&created));
            ctx.event(
                obj,
                EventType::Normal,
                "Created",
                "Create",
                format!("created API key {} \"{}\"", created.id, created.name),
            )
            .await;
            // POST /api-key takes no permissionType: set it with one PUT when the spec has one.
            let observed = apikey::Observed::from(&created);
            let found = crate::reconcile::Found {
                id: created.id,
                matched_by: MatchedBy::StatusId,
            };
            status_source = Some(match apikey::plan(&desired, Some((found, &observed))) {
                Ok(crate::reconcile::Plan {
                    action: Plan::Update { id, request, .. },
                    ..
                }) => {
                    let d = ctx
                        .api
                        .update_api_key(id, &request)
                        .await
                        .map_err(|e| Failure::api(e, "updating the new API key", old))?;
                    ctx.cache.api_keys.upsert(apikey::list_item_from_detail(&d));
                    d
                }
                _ => created,
            });
        }
        Plan::Update {
            id,
            request,
            changes,
        } => {
            let d = ctx
                .api
                .update_api_key(*id, request)
                .await
                .map_err(|e| Failure::api(e, "updating the API key", old))?;
            ctx.cache.api_keys.upsert(apikey::list_item_from_detail(&d));
            let fields: Vec<&str> = changes.iter().map(|c| c.field).collect();
            ctx.event(
                obj,
                EventType::Normal,
                "Updated",
                "Update",
                format!("updated API key {} ({})", d.id, fields.join(", ")),
            )
            .await;
            status_source = Some(d);
        }
        Plan::Unchanged { .. } => {}
    }
    if let Some(found) = plan.found
        && old.id.is_none()
        && matches!(
            found.matched_by,
            MatchedBy::NaturalKey | MatchedBy::ExternalId
        )
    {
        ctx.event(
            obj,
            EventType::Normal,
            "Adopted",
            "Adopt",
            format!("adopted existing API key {}", found.id),
        )
        .await;
    }

    if status_source.is_some() {
        // A create's or update's answer is a detail: the next detail read is due an interval on.
        ctx.details.read(&object_key(obj));
    }
    let mut status = match (&status_source, &lookup) {
        (Some(d), _) => apikey::status_from_detail(d),
        (None, Some((item, _))) => apikey::status_from_list_item(item, old),
        (None, None) => old.clone(),
    };
    // The key value: from the detail in hand, else from the cached list item (lists carry `key`).
    let value = match (&status_source, &lookup) {
        (Some(d), _) => Some(d.key.clone()),
        (None, Some((item, _))) => Some(item.key.clone()),
        _ => None,
    };
    if let Some(value) = value {
        match secrets::ensure(ctx, obj, &desired.secret_name, SECRET_KEY, &value).await {
            Ok(SecretWrite::Written) if old.id.is_some() => {
                ctx.event(
                    obj,
                    EventType::Normal,
                    "SecretRestored",
                    "WriteSecret",
                    format!(
                        "wrote the key value to Secret \"{}\" again",
                        desired.secret_name
                    ),
                )
                .await;
            }
            Ok(_) => {}
            Err(SecretError::Kube(e)) => {
                return Err(Failure::kube("SecretWriteFailed", e, &status));
            }
            Err(e) => {
                return Err(Failure::blocked("SecretConflict", e.to_string(), &status));
            }
        }
    }
    status.observed_generation = obj.metadata.generation;
    Ok(Converged {
        outcome: Outcome::Ready {
            reason: "Available",
            message: format!(
                "API key {} is in sync; its value is in Secret \"{}\"",
                status.id.unwrap_or_default(),
                desired.secret_name
            ),
        },
        status,
        requeue: None,
    })
}

async fn observe(
    obj: &ApiKey,
    ctx: &Context,
    plan: &crate::reconcile::Plan<crate::api::CreateApiKey, crate::api::UpdateApiKey>,
    item: Option<&crate::api::ApiKeyListItem>,
    detail: Option<&ApiKeyDetail>,
    old: &ApiKeyStatus,
) -> Converged<ApiKeyStatus> {
    let Some(item) = item else {
        return Converged {
            outcome: Outcome::Progressing {
                reason: "ExternalObjectMissing",
                message:
                    "managementPolicy is ObserveOnly and no API key matches; nothing is created"
                        .into(),
            },
            status: old.clone(),
            requeue: Some(Action::requeue(ctx.resync_delay())),
        };
    };
    let status = match detail {
        Some(d) => apikey::status_from_detail(d),
        None => apikey::status_from_list_item(item, old),
    };
    // Observing is not owning: the value of a key the resource did not create is exported only
    // under an adoption policy (else any namespace could copy any key by naming it).
    if identity::adoption_policy(ctx, obj).is_some()
        && let Err(e) =
            secrets::ensure(ctx, obj, &obj.spec.secret_name, SECRET_KEY, &item.key).await
    {
        tracing::warn!(object = %object_key(obj), error = %e, "cannot write the key Secret");
    }
    let outcome = if plan.writes() {
        let diff: Vec<String> = plan
            .changes()
            .iter()
            .map(|c| format!("{}: {} (service) vs {} (spec)", c.field, c.from, c.to))
            .collect();
        Outcome::Progressing {
            reason: "DriftDetected",
            message: format!(
                "the service differs from the spec, not corrected (ObserveOnly): {}",
                diff.join("; ")
            ),
        }
    } else {
        Outcome::Ready {
            reason: "Observed",
            message: "the API key matches the spec (ObserveOnly)".into(),
        }
    };
    Converged::new(outcome, status)
}

async fn cleanup(obj: &ApiKey, ctx: &Context) -> Result<Action> {
    let id = obj.status.as_ref().and_then(|s| s.id);
    let may_write = obj.spec.management_policy.may_write();
    let deleted = delete_per_policy(
        obj,
        ctx,
        obj.spec.deletion_policy,
        may_write,
        id,
        "API key",
        |id| ctx.api.delete_api_key(id),
    )
    .await?;
    if let Some(id) = deleted {
        ctx.cache.api_keys.remove(id);
    }
    Ok(Action::await_change())
}
