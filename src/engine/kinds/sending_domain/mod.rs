//! SendingDomain on the engine (interface document, section "Sending domains"): created with
//! `domain`, `assignment` and `note` (the last two accepted at create only), shared once with
//! `PUT .../share`, and checked with `PUT .../verify-txt` until its three DNS records are
//! verified. The DKIM private key is exported to `spec.dkimPrivateKeySecretName`.

use crate::api::{
    ApiError, Client, CreateSendingDomain, SendingDomainDetail, SendingDomainListItem,
};
use crate::crd::{DeletionPolicy, SendingDomain, SendingDomainStatus};
use crate::engine::inventory::Inventory;
use crate::engine::{
    Export, FieldChange, Found, Lookup, ManagedKind, Planned, PlannedStep, Problem, SecretRef,
    Seen, Step, StepAction, Summary, lookup, natural_key, target, validate,
};

pub mod records;

/// `assignment` value that marks a shared domain (what `PUT /domain/sending/{id}/share` sets).
pub const SHARED_ASSIGNMENT: &str = "shared";

/// The key of the DKIM private key in its Secret.
pub const DKIM_SECRET_KEY: &str = "dkimPrivateKey";

const WHEN_NOT_SHARED: &str = "the domain is not shared yet";
const WHEN_UNVERIFIED: &str = "its SPF, DKIM and tracking records are not all verified yet";

/// A validated SendingDomain spec.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The domain (natural key).
    pub domain: String,
    /// `assignment` on create.
    pub assignment: Option<String>,
    /// `note` on create.
    pub note: Option<String>,
    /// Whether the domain must be shared.
    pub shared: bool,
    /// Secret receiving the DKIM private key, if any.
    pub dkim_private_key_secret_name: Option<String>,
    /// Id of the sub account `spec.subAccountRef` names, once the front end resolved it (`None`
    /// for a domain of the account itself, or not resolved yet).
    pub sub_account_id: Option<i64>,
}

/// What the service holds for a sending domain.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// Id.
    pub id: i64,
    /// `domain`.
    pub domain: String,
    /// `assignment`.
    pub assignment: String,
    /// True when all three records are verified (from the flags of a detail, or the list
    /// item's `status` of `verified`).
    pub verified: bool,
}

impl From<&SendingDomainListItem> for Observed {
    fn from(i: &SendingDomainListItem) -> Self {
        Observed {
            id: i.id,
            domain: i.domain.clone(),
            assignment: i.assignment.clone(),
            verified: i.status == "verified",
        }
    }
}

impl From<&SendingDomainDetail> for Observed {
    fn from(d: &SendingDomainDetail) -> Self {
        let verified = d.is_verified();
        Observed {
            verified,
            ..Observed::from(&SendingDomainListItem::from(d))
        }
    }
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
        Call::Create(req) => Step::new(StepAction::Create, "POST /domain/sending")
            .sends("spec.domain", &req.domain, false)
            .sends_some("spec.assignment", req.assignment.as_deref(), true)
            .sends_some("spec.note", req.note.as_deref(), true),
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
    const KIND: &'static str = "SendingDomain";
    const NOUN: &'static str = "sending domain";
    const SECRET_KEY: &'static str = DKIM_SECRET_KEY;

    fn desired(r: &SendingDomain) -> Result<Desired, Vec<Problem>> {
        let problems = validate::sending_domain(r);
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Desired {
            domain: r.spec.domain.clone(),
            assignment: r.spec.assignment.clone(),
            note: r.spec.note.clone(),
            shared: r.spec.shared,
            dkim_private_key_secret_name: r.spec.dkim_private_key_secret_name.clone(),
            sub_account_id: None,
        })
    }

    fn natural_key(d: &Desired) -> &str {
        &d.domain
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
        // Within the scope, by id or domain: a domain inside a sub account among that sub
        // account's domains only (a shared domain of another sub account is readable there,
        // never its own), a company domain among the company's own (a domain inside a sub
        // account is reached through its SubAccount, whose rules decide who may).
        let scope = d
            .sub_account_id
            .unwrap_or(crate::api::COMPANY_SUB_ACCOUNT_ID);
        let named =
            |i: &SendingDomainListItem| natural_key::same_ignoring_case(&i.domain, &d.domain);
        lookup::find(
            items,
            |i| i.id,
            |i| i.sub_account_id == scope,
            external_id,
            status_id,
            named,
        )
        .with_fixed_key(named)
    }

    /// The only update is sharing; other differences are notes (the interface cannot change
    /// them after create); `verify-txt` while the domain is not verified.
    fn plan(d: &Desired, found: Option<(Found, &Observed)>) -> Result<Planned<Call>, String> {
        let mut steps = Vec::new();
        let mut changes = Vec::new();
        let mut notes = Vec::new();
        match found {
            None => {
                steps.push(step(Call::Create(CreateSendingDomain {
                    domain: d.domain.clone(),
                    assignment: d.assignment.clone(),
                    note: d.note.clone(),
                })));
                if d.shared {
                    steps.push(step(Call::Share));
                }
            }
            Some((_, observed)) => {
                notes = immutable_differences(d, observed);
                if d.shared && observed.assignment != SHARED_ASSIGNMENT {
                    changes.push(FieldChange::new("spec.shared", false, true));
                    steps.push(step(Call::Share));
                }
            }
        }
        if !found.is_some_and(|(_, o)| o.verified) {
            steps.push(step(Call::VerifyTxt));
        }
        Ok(Planned {
            found: found.map(|(f, _)| f),
            steps,
            changes,
            notes,
        })
    }

    fn due(call: &Call, current: Option<&SendingDomainDetail>) -> Option<bool> {
        match call {
            Call::Create(_) | Call::Delete => Some(true),
            Call::Share => current.map(|c| c.assignment != SHARED_ASSIGNMENT),
            Call::VerifyTxt => current.map(|c| !c.is_verified()),
        }
    }

    async fn run(
        client: &Client,
        call: &Call,
        id: Option<i64>,
    ) -> Result<Option<SendingDomainDetail>, ApiError> {
        match call {
            Call::Create(req) => client.create_sending_domain(req).await.map(Some),
            Call::Share => {
                let id = target("PUT /domain/sending/{id}/share", id)?;
                client.share_sending_domain(id).await.map(Some)
            }
            Call::VerifyTxt => {
                // The answer lists every domain checked; ours is read from it, else afresh.
                let id = target("PUT /domain/sending/{id}/verify-txt", id)?;
                let checked = client.verify_txt(id).await?;
                match checked.into_iter().find(|c| c.id == id) {
                    Some(detail) => Ok(Some(detail)),
                    None => client.get_sending_domain(id).await.map(Some),
                }
            }
            Call::Delete => {
                let id = target("DELETE /domain/sending/{id}", id)?;
                client.delete_sending_domain(id).await.map(|_| None)
            }
        }
    }

    fn deletion(r: &SendingDomain) -> Option<PlannedStep<Call>> {
        (r.spec.deletion_policy == DeletionPolicy::Delete).then(|| step(Call::Delete))
    }

    fn secret_refs(d: &Desired) -> Vec<SecretRef> {
        d.dkim_private_key_secret_name
            .iter()
            .map(|name| SecretRef {
                secret_name: name.clone(),
                key: Self::SECRET_KEY,
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

    fn in_sub_account(d: &mut Desired, id: i64) {
        d.sub_account_id = Some(id);
    }

    /// A detail replaces the records and flags (never showing the DKIM private key); the
    /// verify-txt pacing and the SPF suggestion are kept until the domain is verified.
    fn project(
        old: &SendingDomainStatus,
        seen: Seen<'_, SendingDomainListItem, SendingDomainDetail>,
    ) -> SendingDomainStatus {
        let mut status = match seen {
            Seen::Detail(d) => SendingDomainStatus {
                status: d.status.clone(),
                types: d.types.clone(),
                verified: d.is_verified(),
                dns_records: records::dns_records(d),
                dkim_selector: Some(d.dkim_selector.clone()),
                dkim_public_key: Some(d.dkim_public_key.clone()),
                tracking_domain: (!d.tracking_domain_name.is_empty())
                    .then(|| d.tracking_domain_name.clone()),
                // Kept as they were (the projection of the item may have cleared them).
                verify_attempts: old.verify_attempts,
                last_verify_time: old.last_verify_time.clone(),
                spf_suggestion: old.spf_suggestion.clone(),
                ..Self::project(old, Seen::Item(&SendingDomainListItem::from(d)))
            },
            // The fields a list item lacks are kept.
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
        match records::unverified_message(&status.dns_records) {
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

    const HAS_RECORDS: bool = true;

    fn records(d: &SendingDomainDetail) -> Option<(Vec<crate::crd::DnsRecord>, bool)> {
        Some((records::dns_records(d), d.is_verified()))
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
}

/// The differences between `d` and `observed` that the interface cannot correct, for people.
fn immutable_differences(d: &Desired, observed: &Observed) -> Vec<String> {
    let mut notes = Vec::new();
    let is_shared = observed.assignment == SHARED_ASSIGNMENT;
    if let Some(want) = &d.assignment
        && !d.shared
        && !is_shared
        && want != &observed.assignment
    {
        notes.push(format!(
            "spec.assignment is \"{want}\" but the service has \"{}\"; the interface cannot change it after creation (recreate the domain to change it)",
            observed.assignment
        ));
    }
    if !d.shared && is_shared {
        notes.push(
            "the domain is shared, and spec.shared is false or unset; the interface has no way to unshare it: set spec.shared: true to say so"
                .into(),
        );
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MatchedBy;

    fn plan(d: &Desired, found: Option<(Found, &Observed)>) -> Planned<Call> {
        <SendingDomain as ManagedKind>::plan(d, found).unwrap()
    }

    fn calls(p: &Planned<Call>) -> Vec<Call> {
        p.steps.iter().map(|s| s.request.clone()).collect()
    }

    fn desired(shared: bool) -> Desired {
        Desired {
            domain: "example.com".into(),
            assignment: None,
            note: None,
            shared,
            dkim_private_key_secret_name: None,
            sub_account_id: None,
        }
    }

    const FOUND: Found = Found {
        id: 4,
        matched_by: MatchedBy::NaturalKey,
    };

    /// Sharing is the one update; an already shared domain is left alone.
    #[test]
    fn share_once() {
        let mut o = Observed {
            id: 4,
            domain: "example.com".into(),
            assignment: "company".into(),
            verified: false,
        };
        o.verified = true;
        assert_eq!(
            calls(&plan(&desired(true), Some((FOUND, &o)))),
            [Call::Share]
        );
        o.assignment = SHARED_ASSIGNMENT.into();
        assert!(calls(&plan(&desired(true), Some((FOUND, &o)))).is_empty());
    }

    /// A difference the interface cannot fix is reported, not written.
    #[test]
    fn immutable_difference_is_a_note() {
        let mut d = desired(false);
        d.assignment = Some("dedicated".into());
        let o = Observed {
            id: 4,
            domain: "example.com".into(),
            assignment: "company".into(),
            verified: true,
        };
        let p = plan(&d, Some((FOUND, &o)));
        assert!(p.steps.is_empty(), "{:?}", p.steps);
        assert_eq!(p.notes.len(), 1);
    }

    /// A domain is found within its scope only, by id or by name: the company's own domains for
    /// a resource without a sub account, that sub account's for one placed inside; a domain
    /// name taken in the other scope is `OutsideScope` (neither adopted nor created).
    #[test]
    fn lookups_keep_to_their_scope() {
        let item = |id, domain: &str, sub| SendingDomainListItem {
            id,
            domain: domain.into(),
            sub_account_id: sub,
            ..Default::default()
        };
        let items = [
            item(1, "company.example.com", 0),
            item(2, "tenant.example.com", 7),
        ];
        let lookup = |domain: &str, sub: Option<i64>, external_id| {
            let d = Desired {
                domain: domain.into(),
                sub_account_id: sub,
                ..desired(false)
            };
            match <SendingDomain as ManagedKind>::lookup(&d, external_id, None, &items) {
                Lookup::Found(_, found) => format!("found {}", found.id),
                Lookup::OutsideScope => "outside".into(),
                Lookup::ExternalIdNotFound(id) => format!("no {id}"),
                other => format!("{other:?}"),
            }
        };
        assert_eq!(lookup("company.example.com", None, None), "found 1");
        assert_eq!(lookup("tenant.example.com", None, None), "outside");
        assert_eq!(lookup("company.example.com", None, Some(2)), "no 2");
        assert_eq!(lookup("tenant.example.com", Some(7), None), "found 2");
        assert_eq!(lookup("company.example.com", Some(7), None), "outside");
        assert_eq!(lookup("tenant.example.com", Some(7), Some(1)), "no 1");
        // An id of another domain in scope is another object: a domain cannot be renamed.
        assert_eq!(lookup("other.example.com", None, Some(1)), "OtherObject(1)");
    }
}
