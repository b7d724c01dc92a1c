//! The DNS records of a sending domain as the service reports them (interface document,
//! "Sending domains": SPF and DKIM TXT records and the tracking CNAME), and how status words
//! them for people.

use crate::api::SendingDomainDetail;
use crate::crd::DnsRecord;

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
