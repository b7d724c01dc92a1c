//! SendingDomain on the engine (interface document, section "Sending domains"): created with
//! `domain`, `assignment` and `note` (the last two accepted at create only), shared once with
//! `PUT .../share`, and checked with `PUT .../verify-txt` until its three DNS records are
//! verified. The DKIM private key is exported to `spec.dkimPrivateKeySecretName`.

use crate::api::{
    ApiError, Client, ListSendingDomainsQuery, SendingDomainDetail, SendingDomainListItem,
};
use crate::crd::SendingDomain;
use crate::engine::{Export, ManagedKind, Planned, Step, StepAction};
use crate::reconcile::inventory::Inventory;
use crate::reconcile::sendingdomain::{self, Desired, SHARED_ASSIGNMENT};
use crate::reconcile::{Action, Found, Lookup, Problem, natural_key};

/// The key of the DKIM private key in its Secret.
pub const DKIM_SECRET_KEY: &str = "dkimPrivateKey";

const WHEN_NOT_SHARED: &str = "the domain is not shared yet";
const WHEN_UNVERIFIED: &str = "its SPF, DKIM and tracking records are not all verified yet";

fn verified(d: &SendingDomainDetail) -> bool {
    d.spf_verified && d.dkim_verified && d.cname_verified
}

impl ManagedKind for SendingDomain {
    type Resource = SendingDomain;
    type Desired = Desired;
    type Item = SendingDomainListItem;
    type Detail = SendingDomainDetail;
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

    fn plan(d: &Desired, found: Option<(Found, &SendingDomainListItem)>) -> Planned {
        let observed = found.map(|(f, item)| (f, sendingdomain::Observed::from(item)));
        let p = sendingdomain::plan(d, observed.as_ref().map(|(f, o)| (*f, o)));
        let mut steps = Vec::new();
        let already_verified = observed.as_ref().is_some_and(|(_, o)| o.verified);
        match &p.action {
            Action::Create(req) => {
                let mut create = Step::new(StepAction::Create, "POST /domain/sending").sends(
                    "spec.domain",
                    &req.domain,
                    false,
                );
                if let Some(a) = &req.assignment {
                    create = create.sends("spec.assignment", a, true);
                }
                if let Some(n) = &req.note {
                    create = create.sends("spec.note", n, true);
                }
                steps.push(create);
                if d.shared {
                    steps.push(
                        Step::new(StepAction::Share, "PUT /domain/sending/{id}/share")
                            .when(WHEN_NOT_SHARED),
                    );
                }
            }
            Action::Update { .. } => steps.push(
                Step::new(StepAction::Share, "PUT /domain/sending/{id}/share")
                    .when(WHEN_NOT_SHARED)
                    .sends("spec.shared", "true", false),
            ),
            Action::Unchanged { .. } => {}
        }
        if !already_verified {
            steps.push(
                Step::new(StepAction::VerifyTxt, "PUT /domain/sending/{id}/verify-txt")
                    .when(WHEN_UNVERIFIED),
            );
        }
        Planned {
            found: p.found,
            steps,
            changes: p.changes().to_vec(),
            notes: p.notes,
        }
    }

    async fn read(client: &Client, id: i64) -> Result<SendingDomainDetail, ApiError> {
        client.get_sending_domain(id).await
    }

    fn due(d: &Desired, step: &Step, current: Option<&SendingDomainDetail>) -> Option<bool> {
        match step.action {
            StepAction::Share => current.map(|c| d.shared && c.assignment != SHARED_ASSIGNMENT),
            StepAction::VerifyTxt => current.map(|c| !verified(c)),
            _ => Some(true),
        }
    }

    async fn run(
        client: &Client,
        d: &Desired,
        step: &Step,
        id: Option<i64>,
    ) -> Result<SendingDomainDetail, ApiError> {
        let id = id.unwrap_or_default();
        match step.action {
            StepAction::Create => {
                client
                    .create_sending_domain(&crate::api::CreateSendingDomain {
                        domain: d.domain.clone(),
                        assignment: d.assignment.clone(),
                        note: d.note.clone(),
                    })
                    .await
            }
            StepAction::Share => client.share_sending_domain(id).await,
            StepAction::VerifyTxt => {
                // The answer lists every domain checked; ours is read from it, else afresh.
                let checked = client.verify_txt(id).await?;
                match checked.into_iter().find(|c| c.id == id) {
                    Some(detail) => Ok(detail),
                    None => client.get_sending_domain(id).await,
                }
            }
            // Not planned for sending domains (no field can be updated; deletion is not a step
            // of an apply): the object as it is.
            StepAction::Update | StepAction::Delete => client.get_sending_domain(id).await,
        }
    }

    async fn recover(
        client: &Client,
        d: &Desired,
    ) -> Result<Option<SendingDomainDetail>, ApiError> {
        let query = ListSendingDomainsQuery {
            search: Some(d.domain.clone()),
            ..Default::default()
        };
        let found = client.list_all_sending_domains(&query).await?;
        match found
            .iter()
            .find(|i| natural_key::same_ignoring_case(&i.domain, &d.domain))
        {
            Some(i) => client.get_sending_domain(i.id).await.map(Some),
            None => Ok(None),
        }
    }

    fn detail_id(detail: &SendingDomainDetail) -> i64 {
        detail.id
    }

    fn exports(d: &Desired, detail: &SendingDomainDetail) -> Vec<Export> {
        d.dkim_private_key_secret_name
            .iter()
            .map(|name| Export {
                secret_name: name.clone(),
                key: DKIM_SECRET_KEY,
                value: detail.dkim_private_key.clone(),
            })
            .collect()
    }
}
