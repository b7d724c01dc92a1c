//! SendingDomain pipeline: spec -> desired -> plan against the sending domain in the service
//! (interface document, section "Sending domains"), plus the DNS records and verification
//! backoff reported in status.

use std::time::Duration;

use crate::api::{CreateSendingDomain, SendingDomainDetail, SendingDomainListItem};
use crate::crd::{DnsRecord, SendingDomain, SendingDomainStatus};

use super::plan::{Action, Plan};
use crate::engine::FieldChange;
use crate::engine::lookup::{self, Found, Lookup};
use crate::engine::natural_key;
use crate::engine::validate::{self, Problem};

/// `assignment` value that marks a shared domain (what `PUT /domain/sending/{id}/share` sets).
pub const SHARED_ASSIGNMENT: &str = "shared";

/// The "update" of a sending domain: the interface offers no PUT of its fields, only sharing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share;

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
    /// Id from the external-id annotation.
    pub external_id: Option<i64>,
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
        Observed {
            id: d.id,
            domain: d.domain.clone(),
            assignment: d.assignment.clone(),
            verified: d.spf_verified && d.dkim_verified && d.cname_verified,
        }
    }
}

/// Validates the spec. Errors: every problem, each naming its field.
pub fn desired(r: &SendingDomain) -> Result<Desired, Vec<Problem>> {
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
        external_id: validate::external_id(r.metadata.annotations.as_ref())
            .ok()
            .flatten(),
    })
}

/// Finds the domain among `items`: external id, status id, then the domain name
/// (compared without case).
pub fn lookup<'a>(
    d: &Desired,
    external_id: Option<i64>,
    status_id: Option<i64>,
    items: &'a [SendingDomainListItem],
) -> Lookup<'a, SendingDomainListItem> {
    lookup::find(
        items,
        |i| i.id,
        external_id,
        status_id,
        |i| natural_key::same_ignoring_case(&i.domain, &d.domain),
    )
}

/// The plan for `d` given the matched domain, if any. The only possible update is sharing;
/// other differences are returned as notes, since the interface cannot change them.
pub fn plan(d: &Desired, found: Option<(Found, &Observed)>) -> Plan<CreateSendingDomain, Share> {
    let Some((found, observed)) = found else {
        let create = CreateSendingDomain {
            domain: d.domain.clone(),
            assignment: d.assignment.clone(),
            note: d.note.clone(),
        };
        return Plan {
            found: None,
            action: Action::Create(create),
            notes: Vec::new(),
        };
    };
    let mut notes = Vec::new();
    if !observed.domain.eq_ignore_ascii_case(&d.domain) {
        notes.push(format!(
            "the API object {} is for domain \"{}\", not \"{}\"; remove the external-id annotation or point it at the right id",
            observed.id, observed.domain, d.domain
        ));
    }
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
            "spec.shared is false but the domain is shared; the interface has no way to unshare it"
                .into(),
        );
    }
    let action = if d.shared && !is_shared {
        Action::Update {
            id: observed.id,
            changes: vec![FieldChange::new("spec.shared", "false", "true")],
            request: Share,
        }
    } else {
        Action::Unchanged { id: observed.id }
    };
    Plan {
        found: Some(found),
        action,
        notes,
    }
}

/// The three DNS records of a domain detail, in the order SPF, DKIM, tracking CNAME.
pub fn dns_records(d: &SendingDomainDetail) -> Vec<DnsRecord> {
    vec![
        DnsRecord {
            purpose: "spf".into(),
            type_: "TXT".into(),
            hostname: d.spf_hostname.clone(),
            value: d.spf_value.clone(),
            verified: d.spf_verified,
        },
        DnsRecord {
            purpose: "dkim".into(),
            type_: "TXT".into(),
            hostname: d.dkim_hostname.clone(),
            value: d.dkim_value.clone(),
            verified: d.dkim_verified,
        },
        DnsRecord {
            purpose: "tracking".into(),
            type_: "CNAME".into(),
            hostname: d.cname_hostname.clone(),
            value: d.cname_value.clone(),
            verified: d.cname_verified,
        },
    ]
}

/// A sentence naming the records still unverified, e.g.
/// `waiting for DNS: DKIM TXT at mt1._domainkey.example.com`; `None` when all are verified.
pub fn unverified_message(records: &[DnsRecord]) -> Option<String> {
    let missing: Vec<String> = records
        .iter()
        .filter(|r| !r.verified)
        .map(|r| {
            format!(
                "{} {} at {}",
                r.purpose.to_uppercase().replace("TRACKING", "tracking"),
                r.type_,
                r.hostname
            )
        })
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "waiting for DNS: {} (publish the records in status.dnsRecords)",
            missing.join(", ")
        )
    })
}

/// Status fields mirrored from the detail (never the DKIM private key).
pub fn status_from_detail(d: &SendingDomainDetail) -> SendingDomainStatus {
    let records = dns_records(d);
    SendingDomainStatus {
        id: Some(d.id),
        status: d.status.clone(),
        types: d.types.clone(),
        assignment: Some(d.assignment.clone()),
        sub_account_id: Some(d.sub_account_id),
        verified: records.iter().all(|r| r.verified),
        dns_records: records,
        dkim_selector: Some(d.dkim_selector.clone()),
        dkim_public_key: Some(d.dkim_public_key.clone()),
        tracking_domain: (!d.tracking_domain_name.is_empty())
            .then(|| d.tracking_domain_name.clone()),
        ..Default::default()
    }
}

/// Delay before the next `verify-txt` call after `attempts` calls: `first` doubled per attempt,
/// capped at `max`. A domain is checked within seconds of creation, then less and less often.
pub fn verify_backoff(attempts: u32, first: Duration, max: Duration) -> Duration {
    first
        .checked_mul(1u32 << attempts.min(20))
        .unwrap_or(max)
        .min(max)
}

/// The list item the service would now list for `d` (to update a cached list after a write):
/// `status` is `verified` when all three flags are true, else the detail's first status.
pub fn list_item_from_detail(d: &SendingDomainDetail) -> SendingDomainListItem {
    let verified = d.spf_verified && d.dkim_verified && d.cname_verified;
    SendingDomainListItem {
        id: d.id,
        domain: d.domain.clone(),
        assignment: d.assignment.clone(),
        created_at: d.created_at,
        status: if verified {
            "verified".into()
        } else {
            d.status
                .first()
                .cloned()
                .unwrap_or_else(|| "pending".into())
        },
        sub_account_id: d.sub_account_id,
        sub_account_name: d.sub_account_name.clone(),
        types: d.types.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MatchedBy;

    fn desired(shared: bool) -> Desired {
        Desired {
            domain: "example.com".into(),
            assignment: None,
            note: None,
            shared,
            dkim_private_key_secret_name: None,
            external_id: None,
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
        assert!(matches!(
            plan(&desired(true), Some((FOUND, &o))).action,
            Action::Update { request: Share, .. }
        ));
        o.assignment = SHARED_ASSIGNMENT.into();
        assert_eq!(
            plan(&desired(true), Some((FOUND, &o))).action,
            Action::Unchanged { id: 4 }
        );
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
        assert!(!p.writes());
        assert_eq!(p.notes.len(), 1);
    }

    /// Backoff starts within seconds, doubles, and stops at the cap.
    #[test]
    fn backoff_doubles_to_cap() {
        let (first, max) = (Duration::from_secs(5), Duration::from_secs(600));
        assert_eq!(verify_backoff(0, first, max), Duration::from_secs(5));
        assert_eq!(verify_backoff(1, first, max), Duration::from_secs(10));
        assert_eq!(verify_backoff(10, first, max), max);
        assert_eq!(verify_backoff(u32::MAX, first, max), max);
    }
}
