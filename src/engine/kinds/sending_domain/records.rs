//! The DNS records of a sending domain as the service reports them (interface document,
//! "Sending domains": SPF and DKIM TXT records and the tracking CNAME), and how status words
//! them for people.

use crate::api::SendingDomainDetail;
use crate::crd::DnsRecord;

/// The three DNS records of a domain detail, in the order SPF, DKIM, tracking CNAME.
pub fn dns_records(d: &SendingDomainDetail) -> Vec<DnsRecord> {
    let record =
        |purpose: &str, type_: &str, hostname: &String, value: &String, verified| DnsRecord {
            purpose: purpose.into(),
            type_: type_.into(),
            hostname: hostname.clone(),
            value: value.clone(),
            verified,
        };
    vec![
        record("spf", "TXT", &d.spf_hostname, &d.spf_value, d.spf_verified),
        record(
            "dkim",
            "TXT",
            &d.dkim_hostname,
            &d.dkim_value,
            d.dkim_verified,
        ),
        record(
            "tracking",
            "CNAME",
            &d.cname_hostname,
            &d.cname_value,
            d.cname_verified,
        ),
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
