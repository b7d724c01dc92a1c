//! SendingDomain on the engine (interface document, section "Sending domains"): created with
//! `domain`, `assignment` and `note` (the last two accepted at create only), shared once with
//! `PUT .../share`, and checked with `PUT .../verify-txt` until its three DNS records are
//! verified. The DKIM private key is exported to `spec.dkimPrivateKeySecretName`.

use crate::api::{
    ApiError, Client, CreateSendingDomain, ListSendingDomainsQuery, SendingDomainDetail,
    SendingDomainListItem,
};
use crate::crd::{DeletionPolicy, SendingDomain, SendingDomainStatus};
use crate::engine::inventory::Inventory;
use crate::engine::{
    Export, ManagedKind, Planned, PlannedStep, SecretRef, Seen, Step, StepAction, Summary, target,
};
use crate::engine::{Found, Lookup, Problem};
use crate::reconcile::Action;
use crate::reconcile::sendingdomain::{self, Desired, Observed, SHARED_ASSIGNMENT};

/// The key of the DKIM private key in its Secret.
pub const DKIM_SECRET_KEY: &str = "dkimPrivateKey";

const WHEN_NOT_SHARED: &str = "the domain is not shared yet";
const WHEN_UNVERIFIED: &str = "its SPF, DKIM and tracking records are not all verified yet";

fn verified(d: &SendingDomainDetail) -> bool {
    d.spf_verified && d.dkim_verified && d.cname_verified
}

/// The calls of a sending domain.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `POST /domain/sending`.
    Create(CreateSendingDomain),
    /// `PUT /domain/sending/{id}/share`, when the domain is not shared yet.
    Share,
    /// `PUT /domain/sending/{id}/verify-txt`, while a record is unverified.
    VerifyTxt,
    /// `DELETE /domain/sending/{id}` (`deletionPolicy: Delete`).
    Delete,
}

fn step(call: Call) -> PlannedStep<Call> {
    let step = match &call {
        Call::Create(req) => {
            let mut s = Step::new(StepAction::Create, "POST /domain/sending").sends(
                "spec.domain",
                &req.domain,
                false,
            );
            if let Some(a) = &req.assignment {
                s = s.sends("spec.assignment", a, true);
            }
            if let Some(n) = &req.note {
                s = s.sends("spec.note", n, true);
            }
            s
        }
        Call::Share => {
            Step::new(StepAction::Share, "PUT /domain/sending/{id}/share").when(WHEN_NOT_SHARED)
        }
        Call::VerifyTxt => Step::new(StepAction::VerifyTxt, "PUT /domain/sending/{id}/verify-txt")
            .when(WHEN_UNVERIFIED),
        Call::Delete => Step::new(StepAction::Delete, "DELETE /domain/sending/{id}"),
    };
    PlannedStep {
        step,
        request: call,
    }
}

impl ManagedKind for SendingDomain {
    type Resource = SendingDomain;
    type Desired = Desired;
    type Item = SendingDomainListItem;
    type Detail = SendingDomainDetail;
    type Observed = Observed;
    type Request = Call;
    type Status = SendingDomainStatus;
    const KIND: &'static str = "SendingDomain";
    const NOUN: &'static str = "sending domain";

    fn desired(r: &SendingDomain) -> Result<Desired, Vec<Problem>> {
        sendingdomain::desired(r)
    }

    fn natural_key(d: &Desired) -> &str {
        &d.domain
    }

    fn external_id(d: &Desired) -> Option<i64> {
        d.external_id
    }

    fn items(inventory: &Inventory) -> &[SendingDomainListItem] {
        &inventory.sending_domains
    }

    fn lookup<'a>(
        d: &Desired,
        external_id: Option<i64>,
        status_id: Option<i64>,
        items: &'a [SendingDomainListItem],
    ) -> Lookup<'a, SendingDomainListItem> {
        sendingdomain::lookup(d, external_id, status_id, items)
    }

    fn observe_item(item: &SendingDomainListItem) -> Observed {
        Observed::from(item)
    }

    fn observe_detail(detail: &SendingDomainDetail) -> Observed {
        Observed::from(detail)
    }

    fn plan(d: &Desired, found: Option<(Found, &Observed)>) -> Result<Planned<Call>, String> {
        let p = sendingdomain::plan(d, found);
        let mut steps = Vec::new();
        match &p.action {
            Action::Create(req) => {
                steps.push(step(Call::Create(req.clone())));
                if d.shared {
                    steps.push(step(Call::Share));
                }
            }
            Action::Update { .. } => steps.push(step(Call::Share)),
            Action::Unchanged { .. } => {}
        }
        if !found.is_some_and(|(_, o)| o.verified) {
            steps.push(step(Call::VerifyTxt));
        }
        Ok(Planned {
            found: p.found,
            steps,
            changes: p.changes().to_vec(),
            notes: p.notes,
        })
    }

    async fn read(client: &Client, id: i64) -> Result<SendingDomainDetail, ApiError> {
        client.get_sending_domain(id).await
    }

    fn due(call: &Call, current: Option<&SendingDomainDetail>) -> Option<bool> {
        match call {
            Call::Create(_) | Call::Delete => Some(true),
            Call::Share => current.map(|c| c.assignment != SHARED_ASSIGNMENT),
            Call::VerifyTxt => current.map(|c| !verified(c)),
        }
    }

    async fn run(
        client: &Client,
        call: &Call,
        id: Option<i64>,
    ) -> Result<Option<SendingDomainDetail>, ApiError> {
        if let Call::Create(req) = call {
            return client.create_sending_domain(req).await.map(Some);
        }
        let id = target("PUT /domain/sending/{id}", id)?;
        match call {
            Call::Create(_) => unreachable!("handled above"),
            Call::Share => client.share_sending_domain(id).await.map(Some),
            Call::VerifyTxt => {
                // The answer lists every domain checked; ours is read from it, else afresh.
                let checked = client.verify_txt(id).await?;
                match checked.into_iter().find(|c| c.id == id) {
                    Some(detail) => Ok(Some(detail)),
                    None => client.get_sending_domain(id).await.map(Some),
                }
            }
            Call::Delete => client.delete_sending_domain(id).await.map(|_| None),
        }
    }

    fn deletion(r: &SendingDomain) -> Option<PlannedStep<Call>> {
        (r.spec.deletion_policy == DeletionPolicy::Delete).then(|| step(Call::Delete))
    }

    async fn search(client: &Client, search: &str) -> Result<Vec<SendingDomainListItem>, ApiError> {
        let query = ListSendingDomainsQuery {
            search: Some(search.to_string()),
            ..Default::default()
        };
        client.list_all_sending_domains(&query).await
    }

    fn detail_id(detail: &SendingDomainDetail) -> i64 {
        detail.id
    }

    fn secret_refs(d: &Desired) -> Vec<SecretRef> {
        d.dkim_private_key_secret_name
            .iter()
            .map(|name| SecretRef {
                secret_name: name.clone(),
                key: DKIM_SECRET_KEY,
            })
            .collect()
    }

    fn exports(d: &Desired, detail: &SendingDomainDetail) -> Result<Vec<Export>, String> {
        Ok(Self::secret_refs(d)
            .into_iter()
            .map(|r| Export {
                secret_name: r.secret_name,
                key: r.key,
                value: detail.dkim_private_key.clone(),
            })
            .collect())
    }

    fn status(r: &SendingDomain) -> SendingDomainStatus {
        r.status.clone().unwrap_or_default()
    }

    /// A detail replaces the records and flags; the verify-txt pacing and the SPF suggestion
    /// are kept until the domain is verified.
    fn project(
        old: &SendingDomainStatus,
        seen: Seen<'_, SendingDomainListItem, SendingDomainDetail>,
    ) -> SendingDomainStatus {
        let mut status = match seen {
            Seen::Detail(d) => SendingDomainStatus {
                verify_attempts: old.verify_attempts,
                last_verify_time: old.last_verify_time.clone(),
                spf_suggestion: old.spf_suggestion.clone(),
                ..sendingdomain::status_from_detail(d)
            },
            Seen::Item(i) => SendingDomainStatus {
                id: Some(i.id),
                assignment: Some(i.assignment.clone()),
                sub_account_id: Some(i.sub_account_id),
                ..old.clone()
            },
        };
        if status.verified {
            status.verify_attempts = None;
            status.last_verify_time = None;
            status.spf_suggestion = None;
        }
        status.conditions = old.conditions.clone();
        status.observed_generation = old.observed_generation;
        status
    }

    /// The records are read once; again when the list shows the verification changed.
    fn status_has_detail(
        _d: &Desired,
        status: &SendingDomainStatus,
        item: &SendingDomainListItem,
    ) -> bool {
        status.id == Some(item.id)
            && !status.dns_records.is_empty()
            && status.verified == Observed::from(item).verified
    }

    fn summary(_d: &Desired, status: &SendingDomainStatus) -> Summary {
        let id = status.id.unwrap_or_default();
        match sendingdomain::unverified_message(&status.dns_records) {
            None if status.verified => Summary {
                ready: true,
                reason: "Verified",
                message: format!(
                    "sending domain {id} is verified: SPF, DKIM and tracking CNAME are published."
                ),
            },
            waiting => Summary {
                ready: false,
                reason: "VerifyingDns",
                message: waiting.unwrap_or_else(|| "waiting for DNS verification".into()),
            },
        }
    }

    /// The SPF record to publish when one exists already (interface document, "SPF
    /// suggestion"), once a `verify-txt` call found the domain still unverified.
    async fn complete_status(client: &Client, status: &mut SendingDomainStatus) {
        let tried = status.verify_attempts.is_some_and(|a| a > 0);
        if let (false, true, None, Some(id)) =
            (status.verified, tried, &status.spf_suggestion, status.id)
            && let Ok(s) = client.spf_suggestion(id).await
        {
            status.spf_suggestion = Some(s.suggestion);
        }
    }

    fn item_of(detail: &SendingDomainDetail) -> SendingDomainListItem {
        sendingdomain::list_item_from_detail(detail)
    }
}
