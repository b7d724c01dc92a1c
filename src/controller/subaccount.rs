//! The SubAccount reconciler: converges a sub account, writes its first key to a Secret, and on
//! deletion deactivates or orphans it (the interface has no DELETE for sub accounts).

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::common::spec_changed;
use super::context::{Context, object_key};
use super::error::{Error, Result};
use super::find::{Query, find_managed, gone_is_none};
use super::identity;
use super::managed::{ConvergeResult, Converged, Failure, Managed};
use super::secrets::{self, SecretError};
use super::status::Outcome;
use crate::api::SubAccountDetail;
use crate::crd::{SubAccount, SubAccountDeletionPolicy, SubAccountStatus};
use crate::reconcile::execute::create_or_recover;
use crate::reconcile::{Action as Plan, MatchedBy, natural_key, subaccount};

impl Managed for SubAccount {
    type Status = SubAccountStatus;
    const KIND: &'static str = "SubAccount";

    fn current_status(&self) -> SubAccountStatus {
        self.status.clone().unwrap_or_default()
    }

    async fn converge(
        &self,
        ctx: &Context,
        old: &SubAccountStatus,
    ) -> ConvergeResult<SubAccountStatus> {
        converge(self, ctx, old).await
    }

    async fn cleanup(&self, ctx: &Context) -> Result<Action> {
        cleanup(self, ctx).await
    }
}

async fn converge(
    obj: &SubAccount,
    ctx: &Context,
    old: &SubAccountStatus,
) -> ConvergeResult<SubAccountStatus> {
    let desired = match subaccount::desired(obj) {
        Ok(d) => d,
        Err(problems) => return Err(Failure::invalid_spec(&problems, old)),
    };
    let lookup = find_managed(
        ctx,
        obj,
        old,
        Query {
            key: &desired.name,
            by_name_is_own: false,
        },
        || ctx.cache.fresh_sub_accounts(),
        |items, external_id| subaccount::lookup(&desired, external_id, old.id, items),
        |id| async move {
            gone_is_none(ctx.api.get_sub_account(id).await)
                .map(|d| d.map(|d| subaccount::list_item_from_detail(&d)))
        },
    )
    .await?;
    let needs_detail = subaccount::needs_detail(&desired);
    let mut detail: Option<SubAccountDetail> = None;
    if let Some((item, _)) = &lookup
        // The list item lacks `ipPoolId` (compared only when the spec sets it) and the fields
        // status mirrors from the detail. Status keeps the last `ipPoolId` read or written, so
        // a spec change is planned against it; the detail is read when status does not hold
        // it yet (adoption, also by a ConflictingOwner loser taking over) and once per detail
        // resync interval. An update's answer is a detail too.
        && ({
            let known = subaccount::status_has_detail(old, item.id);
            (!known
                && (spec_changed(obj, old.observed_generation) || old.id != Some(item.id))
                && (needs_detail || old.id.is_none()))
                || (needs_detail && ctx.details.due(&object_key(obj), known))
        })
    {
        detail = Some(
            ctx.api
                .get_sub_account(item.id)
                .await
                .map_err(|e| Failure::api(e, "reading the sub account", old))?,
        );
        ctx.details.read(&object_key(obj));
    }
    let observed = match (&lookup, &detail) {
        (Some((_, found)), Some(d)) => Some((*found, subaccount::Observed::from(d))),
        (Some((item, found)), None) if needs_detail => {
            Some((*found, subaccount::Observed::last_known(item, old)))
        }
        (Some((item, found)), None) => Some((*found, subaccount::Observed::from(item))),
        _ => None,
    };
    let plan = subaccount::plan(&desired, observed.as_ref().map(|(f, o)| (*f, o)));

    if !obj.spec.management_policy.may_write() {
        let Some((item, _)) = &lookup else {
            return Ok(Converged { outcome: Outcome::Progressing { reason: "ExternalObjectMissing", message: "managementPolicy is ObserveOnly and no sub account matches; nothing is created".into() }, status: old.clone(), requeue: None });
        };
        let status = detail.as_ref().map_or_else(
            || subaccount::status_from_list_item(item, old),
            subaccount::status_from_detail,
        );
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
                message: "the sub account matches the spec (ObserveOnly)".into(),
            }
        };
        return Ok(Converged {
            outcome,
            status,
            requeue: None,
        });
    }

    match &plan.action {
        Plan::Create(req) => {
            identity::mark_pending(ctx, obj)
                .await
                .map_err(|e| Failure::kube("IdentityWriteFailed", e, old))?;
            let client = &ctx.api;
            let name = desired.name.clone();
            let created = create_or_recover(client.create_sub_account(req), || async {
                ctx.cache.sub_accounts.invalidate();
                let list = ctx.cache.fresh_sub_accounts().await?;
                match list.read(|items| {
                    items
                        .iter()
                        .find(|s| natural_key::same_ignoring_case(&s.name, &name))
                        .map(|s| s.id)
                }) {
                    Some(id) => client.get_sub_account(id).await.map(Some),
                    None => Ok(None),
                }
            })
            .await
            .map_err(|e| Failure::api(e, "creating the sub account", old))?;
            ctx.cache
                .sub_accounts
                .upsert(subaccount::list_item_from_detail(&created));
            for key in &created.api_keys {
                ctx.cache.api_keys.upsert(key.clone());
            }
            ctx.event(
                obj,
                EventType::Normal,
                "Created",
                "Create",
                format!(
                    "created sub account {} \"{}\"",
                    created.id, created.sub_account_name
                ),
            )
            .await;
            detail = Some(created);
        }
        Plan::Update {
            id,
            request,
            changes,
        } => {
            let d = ctx
                .api
                .update_sub_account(*id, request)
                .await
                .map_err(|e| Failure::api(e, "updating the sub account", old))?;
            ctx.cache
                .sub_accounts
                .upsert(subaccount::list_item_from_detail(&d));
            let fields: Vec<&str> = changes.iter().map(|c| c.field).collect();
            ctx.event(
                obj,
                EventType::Normal,
                "Updated",
                "Update",
                format!("updated sub account {} ({})", d.id, fields.join(", ")),
            )
            .await;
            detail = Some(d);
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
            format!("adopted existing sub account {}", found.id),
        )
        .await;
    }
    if detail.is_some() {
        // A create's or update's answer is a detail: the next detail read is due an interval on.
        ctx.details.read(&object_key(obj));
    }
    let status = match (&detail, &lookup) {
        (Some(d), _) => subaccount::status_from_detail(d),
        (None, Some((item, _))) => subaccount::status_from_list_item(item, old),
        (None, None) => old.clone(),
    };

    // The first key's value: the sub account's keys are in the cached key list.
    if let (Some(key_spec), Some(id)) = (&desired.initial_key, status.id) {
        let key_name = subaccount::initial_key_name(&desired).unwrap_or_default();
        let keys = ctx
            .cache
            .fresh_api_keys()
            .await
            .map_err(|e| Failure::api(e, "listing API keys", &status))?;
        let value = keys.read(|items| {
            items
                .iter()
                .find(|k| k.sub_account_id == id && natural_key::same_key_name(&k.name, &key_name))
                .map(|k| k.key.clone())
        });
        match value {
            Some(value) => match secrets::ensure(
                ctx,
                obj,
                &key_spec.secret_name,
                super::apikey::SECRET_KEY,
                &value,
            )
            .await
            {
                Ok(_) => {}
                Err(SecretError::Kube(e)) => {
                    return Err(Failure::kube("SecretWriteFailed", e, &status));
                }
                Err(e) => {
                    return Err(Failure::blocked("SecretConflict", e.to_string(), &status));
                }
            },
            None => {
                return Ok(Converged {
                    outcome: Outcome::Ready {
                        reason: "Available",
                        message: format!(
                            "sub account {id} is in sync; it has no key named \"{key_name}\" to write to Secret \"{}\" (spec.apiKey applies at creation only)",
                            key_spec.secret_name
                        ),
                    },
                    status,
                    requeue: None,
                });
            }
        }
    }
    let message = format!("sub account {} is in sync", status.id.unwrap_or_default());
    Ok(Converged {
        outcome: Outcome::Ready {
            reason: "Available",
            message,
        },
        status,
        requeue: None,
    })
}

async fn cleanup(obj: &SubAccount, ctx: &Context) -> Result<Action> {
    let id = obj.status.as_ref().and_then(|s| s.id);
    if obj.spec.deletion_policy != SubAccountDeletionPolicy::Deactivate
        || !obj.spec.management_policy.may_write()
    {
        return Ok(Action::await_change());
    }
    let Some(id) = id else {
        return Ok(Action::await_change());
    };
    let request = subaccount::deactivate_request(obj);
    match ctx.api.update_sub_account(id, &request).await {
        Ok(d) => ctx
            .cache
            .sub_accounts
            .upsert(subaccount::list_item_from_detail(&d)),
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(Error::Api(e)),
    }
    let status = request.status.unwrap_or_default();
    ctx.event(
        obj,
        EventType::Normal,
        "Deactivated",
        "Delete",
        format!("set sub account {id} to status \"{status}\""),
    )
    .await;
    Ok(Action::await_change())
}
