//! The bodies of the fuzz targets, shared by the libFuzzer targets in `fuzz_targets/` (run by
//! `cargo fuzz`, which needs a nightly toolchain) and by the `replay` example (stable Rust: seeds
//! plus seeded random mutations, without coverage guidance).
//!
//! Each target must return for every input: an error is fine, a panic, an abort, a hang or an
//! unbounded allocation is a bug.

use mailtarget_operator::api::{
    AnalyticsPeriod, AnalyticsSummary, ApiKeyDetail, ApiKeyList, ApiKeyListItem, Permission,
    SendingDomainDetail, SendingDomainList, SendingDomainListItem, SpfSuggestion, SubAccountDetail,
    SubAccountDomain, SubAccountList, SubAccountListItem, TransmissionAccepted, TransmissionEvent,
    TransmissionEvents, TransmissionSender, TransmissionStats, TransmissionStatus, UnverifiedSpf,
    UnverifiedSpfList,
};
use serde::de::DeserializeOwned;

/// Names of the targets, as `cargo fuzz run <name>` and `replay <name>` take them.
pub const TARGETS: &[&str] = &["manifest", "api_responses"];

/// Runs target `name` on `data`. Returns false for an unknown name.
pub fn run(name: &str, data: &[u8]) -> bool {
    match name {
        "manifest" => manifest(data),
        "api_responses" => api_responses(data),
        _ => return false,
    }
    true
}

/// Parses `data` as a manifest file (YAML, one or more documents) with the same reader as
/// `plan` and `apply`, and formats every error it reports.
pub fn manifest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match mailtarget_operator::manifest::load_str("fuzz.yaml", text) {
        Ok(set) => {
            for loaded in &set.resources {
                let _ = mailtarget_operator::engine::validate::problems(&loaded.resource);
            }
        }
        Err(errors) => {
            let _ = errors.to_string();
        }
    }
}

fn decode<T: DeserializeOwned + std::fmt::Debug>(body: &[u8]) {
    if let Ok(value) = serde_json::from_slice::<T>(body) {
        let _ = format!("{value:?}");
    }
}

/// Decodes `data` into every answer type of the interface (and the lists some endpoints answer
/// with), formatting each value that decodes.
pub fn api_responses(data: &[u8]) {
    decode::<ApiKeyList>(data);
    decode::<ApiKeyListItem>(data);
    decode::<ApiKeyDetail>(data);
    decode::<Permission>(data);
    decode::<Vec<Permission>>(data);
    decode::<SubAccountList>(data);
    decode::<SubAccountListItem>(data);
    decode::<SubAccountDetail>(data);
    decode::<SubAccountDomain>(data);
    decode::<SendingDomainList>(data);
    decode::<SendingDomainListItem>(data);
    decode::<SendingDomainDetail>(data);
    decode::<Vec<SendingDomainDetail>>(data);
    decode::<UnverifiedSpfList>(data);
    decode::<UnverifiedSpf>(data);
    decode::<SpfSuggestion>(data);
    decode::<TransmissionAccepted>(data);
    decode::<AnalyticsSummary>(data);
    decode::<AnalyticsPeriod>(data);
    decode::<TransmissionStatus>(data);
    decode::<TransmissionStats>(data);
    decode::<TransmissionSender>(data);
    decode::<TransmissionEvents>(data);
    decode::<TransmissionEvent>(data);
    decode::<serde_json::Value>(data);
}
