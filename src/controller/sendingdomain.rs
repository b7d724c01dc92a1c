//! The SendingDomain reconciler: converges a sending domain, reports the DNS records to publish,
//! calls `verify-txt` with backoff until SPF, DKIM and the tracking CNAME are verified, and
//! writes the DKIM private key to a Secret when asked.

use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::common::{delete_per_policy, spec_changed};
use super::context::Context;
use super::error::Result;
use super::find::{Query, find_managed, gone_is_none};
use super::identity;
use super::managed::{ConvergeResult, Converged, Failure, Managed};
use super::secrets::{self, Integrity, SecretError};
use super::status::Outcome;
use crate::api::SendingDomainDetail;
use crate::crd::conditions::now_rfc3339;
use crate::crd::{SendingDomain, SendingDomainStatus};
use crate::reconcile::execute::create_or_recover;
use crate::reconcile::{Action as Plan, MatchedBy, sendingdomain};

/// Key of the Secret's data that holds the DKIM private key (PEM).
pub use crate::engine::kinds::sending_domain::DKIM_SECRET_KEY;

/// Time left until the next `verify-txt` call is due: `verify_backoff(attempts)` after the last
/// call (or the creation); zero when due now or never called.
fn until_next_verify(status: &SendingDomainStatus, first: Duration, max: Duration) -> Duration {
    let attempts = status.verify_attempts.unwrap_or(0);
    let Some(last) = status
        .last_verify_time
        .as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    else {
        return Duration::ZERO;
    };
    let due = last.with_timezone(&chrono::Utc)
        + chrono::Duration::from_std(sendingdomain::verify_backoff(attempts, first, max))
            .unwrap_or_default();
    (due - chrono::Utc::now())
        .to_std()
        .unwrap_or(Duration::ZERO)
}

impl Managed for SendingDomain {
    type Status = SendingDomainStatus;
    const KIND: &'static str = "SendingDomain";

    fn current_status(&self) -> SendingDomainStatus {
        self.status.clone().unwrap_or_default()
    }

    async fn converge(
        &self,
        ctx: &Context,
        old: &SendingDomainStatus,
    ) -> ConvergeResult<SendingDomainStatus> {
        converge(self, ctx, old).await
    }

    async fn cleanup(&self, ctx: &Context) -> Result<Action> {
        cleanup(self, ctx).await
    }

    fn is_routine(outcome: &Outcome) -> bool {
        matches!(
            outcome,
            Outcome::Progressing {
                reason: "VerifyingDns",
                ..
            }
        )
    }
}

async fn converge(
    obj: &SendingDomain,
    ctx: &Context,
    old: &SendingDomainStatus,
) -> ConvergeResult<SendingDomainStatus> {
    let desired = match sendingdomain::desired(obj) {
        Ok(d) => d,
        Err(problems) => return Err(Failure::invalid_spec(&problems, old)),
    };
    let lookup = find_managed(
        ctx,
        obj,
        old,
        Query {
            key: &desired.domain,
            by_name_is_own: false,
        },
        || ctx.cache.fresh_sending_domains(),
        |items, external_id| sendingdomain::lookup(&desired, external_id, old.id, items),
        |id| async move {
            gone_is_none(ctx.api.get_sending_domain(id).await)
                .map(|d| d.map(|d| sendingdomain::list_item_from_detail(&d)))
        },
    )
    .await?;
    let observed = lookup
        .as_ref()
        .map(|(item, found)| (*found, sendingdomain::Observed::from(item)));
    let plan = sendingdomain::plan(&desired, observed.as_ref().map(|(f, o)| (*f, o)));
    let may_write = obj.spec.management_policy.may_write();
    let mut detail: Option<SendingDomainDetail> = None;
    let mut status = old.clone();

    match (&plan.action, may_write) {
        (Plan::Create(_), false) => {
            return Ok(Converged { outcome: Outcome::Progressing { reason: "ExternalObjectMissing", message: "managementPolicy is ObserveOnly and no sending domain matches; nothing is created".into() }, status: old.clone(), requeue: None });
        }
        (Plan::Create(req), true) => {
            identity::mark_pending(ctx, obj)
                .await
                .map_err(|e| Failure::kube("IdentityWriteFailed", e, old))?;
            let client = &ctx.api;
            let domain = desired.domain.clone();
            let created = create_or_recover(client.create_sending_domain(req), || async {
                ctx.cache.sending_domains.invalidate();
                let list = ctx.cache.fresh_sending_domains().await?;
                match list.read(|items| {
                    items
                        .iter()
                        .find(|d| {
                            crate::reconcile::natural_key::same_ignoring_case(&d.domain, &domain)
                        })
                        .map(|d| d.id)
                }) {
                    Some(id) => client.get_sending_domain(id).await.map(Some),
                    None => Ok(None),
                }
            })
            .await
            .map_err(|e| Failure::api(e, "creating the sending domain", old))?;
            ctx.cache
                .sending_domains
                .upsert(sendingdomain::list_item_from_detail(&created));
            ctx.event(
                obj,
                EventType::Normal,
                "Created",
                "Create",
                format!(
                    "created sending domain {} \"{}\"",
                    created.id, created.domain
                ),
            )
            .await;
            // The first verify-txt call comes a few seconds after creation (see until_next_verify).
            status.verify_attempts = Some(0);
            status.last_verify_time = Some(now_rfc3339());
            detail = Some(created);
        }
        _ => {}
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
            format!("adopted existing sending domain {}", found.id),
        )
        .await;
    }
    let id = detail
        .as_ref()
        .map(|d| d.id)
        .or(plan.found.map(|f| f.id))
        .unwrap_or_default();
    let is_shared = detail
        .as_ref()
        .map(|d| d.assignment.as_str())
        .or(observed.as_ref().map(|(_, o)| o.assignment.as_str()))
        == Some(sendingdomain::SHARED_ASSIGNMENT);
    if desired.shared && !is_shared && may_write {
        let d = ctx
            .api
            .share_sending_domain(id)
            .await
            .map_err(|e| Failure::api(e, "sharing the sending domain", &status))?;
        ctx.cache
            .sending_domains
            .upsert(sendingdomain::list_item_from_detail(&d));
        ctx.event(
            obj,
            EventType::Normal,
            "Shared",
            "Update",
            format!("shared sending domain {id}"),
        )
        .await;
        detail = Some(d);
    }
    let mut verified = detail
        .as_ref()
        .map(|d| d.is_verified())
        .or(observed.as_ref().map(|(_, o)| o.verified))
        .unwrap_or(false);

    // Verification: while unverified, call verify-txt with backoff (never in ObserveOnly).
    let mut requeue = None;
    if !verified && may_write {
        let (first, max) = (
            ctx.settings.verify_first_interval,
            ctx.settings.verify_max_interval,
        );
        let wait = until_next_verify(&status, first, max);
        if !wait.is_zero() {
            requeue = Some(Action::requeue(wait));
        } else {
            let checked = ctx
                .api
                .verify_txt(id)
                .await
                .map_err(|e| Failure::api(e, "verify-txt", &status))?;
            let attempts = status.verify_attempts.unwrap_or(0).saturating_add(1);
            status.verify_attempts = Some(attempts);
            status.last_verify_time = Some(now_rfc3339());
            if let Some(d) = checked.into_iter().find(|d| d.id == id) {
                ctx.cache
                    .sending_domains
                    .upsert(sendingdomain::list_item_from_detail(&d));
                verified = d.is_verified();
                detail = Some(d);
            }
            if verified {
                ctx.event(
                    obj,
                    EventType::Normal,
                    "Verified",
                    "Verify",
                    format!("SPF, DKIM and tracking CNAME of sending domain {id} are verified"),
                )
                .await;
            } else {
                requeue = Some(Action::requeue(sendingdomain::verify_backoff(
                    attempts, first, max,
                )));
            }
        }
    }
    // DNS records and flags come from a detail: read one when none is in hand and status lacks them,
    // the spec changed, or (ObserveOnly) the domain is unverified.
    if detail.is_none()
        && (old.dns_records.is_empty()
            || spec_changed(obj, old.observed_generation)
            || (!verified && !may_write))
    {
        let d = ctx
            .api
            .get_sending_domain(id)
            .await
            .map_err(|e| Failure::api(e, "reading the sending domain", &status))?;
        verified = d.is_verified();
        detail = Some(d);
    }
    let (attempts, last) = (status.verify_attempts, status.last_verify_time.clone());
    if let Some(d) = &detail {
        status = sendingdomain::status_from_detail(d);
        status.verify_attempts = attempts;
        status.last_verify_time = last;
        status.spf_suggestion = old.spf_suggestion.clone();
    } else if let Some((item, _)) = &lookup {
        status.id = Some(item.id);
        status.assignment = Some(item.assignment.clone());
        status.sub_account_id = Some(item.sub_account_id);
    }
    if verified {
        status.verify_attempts = None;
        status.last_verify_time = None;
        status.spf_suggestion = None;
    } else if may_write
        && status.spf_suggestion.is_none()
        && let Ok(s) = ctx.api.spf_suggestion(id).await
    {
        status.spf_suggestion = Some(s.suggestion);
    }

    // The DKIM private key, when asked for, into its Secret.
    // Under ObserveOnly the private key is exported only with an adoption policy (observing is
    // not owning).
    if let Some(secret_name) = &desired.dkim_private_key_secret_name
        && (may_write || identity::adoption_policy(ctx, obj).is_some())
    {
        let integrity = secrets::check(ctx, obj, secret_name, DKIM_SECRET_KEY)
            .await
            .map_err(|e| Failure::kube("SecretWriteFailed", e, &status))?;
        let intact = matches!(integrity, Integrity::Intact);
        if !intact || detail.is_some() {
            let d = match detail.take() {
                Some(d) => d,
                None => ctx
                    .api
                    .get_sending_domain(id)
                    .await
                    .map_err(|e| Failure::api(e, "reading the sending domain", &status))?,
            };
            let key = &d.dkim_private_key;
            let written = match &integrity {
                Integrity::Broken { current } => {
                    secrets::ensure_over(
                        ctx,
                        obj,
                        secret_name,
                        DKIM_SECRET_KEY,
                        key,
                        current.as_deref(),
                    )
                    .await
                }
                Integrity::Intact => {
                    secrets::ensure(ctx, obj, secret_name, DKIM_SECRET_KEY, key).await
                }
            };
            match written {
                Ok(secrets::SecretWrite::Written) if old.id.is_some() && !intact => {
                    ctx.event(
                        obj,
                        EventType::Normal,
                        "SecretRestored",
                        "WriteSecret",
                        format!("wrote the DKIM private key to Secret \"{secret_name}\" again"),
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
    }

    let notes = if plan.notes.is_empty() {
        String::new()
    } else {
        format!(" Note: {}", plan.notes.join("; "))
    };
    let outcome = if verified {
        Outcome::Ready {
            reason: "Verified",
            message: format!(
                "sending domain {id} is verified: SPF, DKIM and tracking CNAME are published.{notes}"
            ),
        }
    } else {
        let waiting = sendingdomain::unverified_message(&status.dns_records)
            .unwrap_or_else(|| "waiting for DNS verification".into());
        let mode = if may_write {
            ""
        } else {
            " (ObserveOnly: verify-txt is not called)"
        };
        Outcome::Progressing {
            reason: "VerifyingDns",
            message: format!("{waiting}{mode}.{notes}"),
        }
    };
    Ok(Converged {
        outcome,
        status,
        requeue,
    })
}

async fn cleanup(obj: &SendingDomain, ctx: &Context) -> Result<Action> {
    let id = obj.status.as_ref().and_then(|s| s.id);
    let may_write = obj.spec.management_policy.may_write();
    let deleted = delete_per_policy(
        obj,
        ctx,
        obj.spec.deletion_policy,
        may_write,
        id,
        "sending domain",
        |id| ctx.api.delete_sending_domain(id),
    )
    .await?;
    if let Some(id) = deleted {
        ctx.cache.sending_domains.remove(id);
    }
    Ok(Action::await_change())
}
