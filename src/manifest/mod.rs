//! Reading manifest files for `plan` and `apply`: YAML files and directories, several documents
//! per file, validated against the same schema the cluster uses before anything is sent.

mod document;
mod metadata;
pub(crate) mod read;
mod schema_check;

use std::fmt;
use std::path::{Path, PathBuf};

use crate::crd::{ApiKey, SendingDomain, SubAccount};
use crate::text::{MAX_LINE_CHARS, printable};

pub use read::{
    ACCOUNT_KIND, DEFAULT_ACCOUNT_KIND, ManifestSet, NOT_OURS, STDIN, Selectors, load, load_str,
    load_with,
};

/// Where a document came from: its file and its 1-based position among the file's documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// File the document was read from.
    pub file: PathBuf,
    /// 1-based index of the document within the file.
    pub document: usize,
    /// 1-based index of the item within the document, when the document is a `List`.
    pub item: Option<usize>,
}

/// The file name made [`printable`] (a name may hold any character but `/` and NUL).
pub(crate) fn shown_file(file: &Path) -> String {
    printable(&file.to_string_lossy(), MAX_LINE_CHARS)
}

impl fmt::Display for Source {
    /// `FILE (document N)`, or `FILE (document N, item M)` for an item of a `List`, the file
    /// name escaped ([`printable`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (document {}", shown_file(&self.file), self.document)?;
        match self.item {
            Some(item) => write!(f, ", item {item})"),
            None => write!(f, ")"),
        }
    }
}

/// One custom resource read from a manifest, of one of the three kinds.
#[derive(Clone, Debug)]
pub enum Resource {
    /// A `SubAccount`.
    SubAccount(SubAccount),
    /// An `ApiKey`.
    ApiKey(ApiKey),
    /// A `SendingDomain`.
    SendingDomain(SendingDomain),
}

impl Resource {
    /// The kind, e.g. `SubAccount`.
    pub fn kind(&self) -> &'static str {
        match self {
            Resource::SubAccount(_) => "SubAccount",
            Resource::ApiKey(_) => "ApiKey",
            Resource::SendingDomain(_) => "SendingDomain",
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or_default()
    }

    /// The object's name at the service: a SubAccount's or ApiKey's `spec.name` (else
    /// `metadata.name`), a SendingDomain's `spec.domain`, as written (the service compares
    /// them as [`crate::engine::natural_key`] does).
    pub fn service_name(&self) -> &str {
        match self {
            Resource::SubAccount(r) => r.service_name(),
            Resource::ApiKey(r) => r.service_name(),
            Resource::SendingDomain(r) => &r.spec.domain,
        }
    }

    /// `metadata.namespace`, `default` when unset (as kubectl does).
    pub fn namespace(&self) -> &str {
        self.meta().namespace.as_deref().unwrap_or("default")
    }

    /// `metadata`.
    pub fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Resource::SubAccount(r) => &r.metadata,
            Resource::ApiKey(r) => &r.metadata,
            Resource::SendingDomain(r) => &r.metadata,
        }
    }

    /// True when the resource carries `mailtarget.co/paused: "true"`: left alone.
    pub fn is_paused(&self) -> bool {
        self.meta()
            .annotations
            .as_ref()
            .is_some_and(crate::crd::is_paused)
    }

    /// The Secrets the resource writes, with the field naming each: an ApiKey's
    /// `spec.secretName`, a SubAccount's `spec.apiKey.secretName`, a SendingDomain's
    /// `spec.dkimPrivateKeySecretName`.
    pub fn secret_names(&self) -> Vec<(&'static str, &str)> {
        match self {
            Resource::ApiKey(r) => vec![("spec.secretName", r.spec.secret_name.as_str())],
            Resource::SubAccount(r) => r
                .spec
                .api_key
                .iter()
                .map(|k| ("spec.apiKey.secretName", k.secret_name.as_str()))
                .collect(),
            Resource::SendingDomain(r) => r
                .spec
                .dkim_private_key_secret_name
                .iter()
                .map(|s| ("spec.dkimPrivateKeySecretName", s.as_str()))
                .collect(),
        }
    }

    /// `spec.managementPolicy`.
    pub fn management_policy(&self) -> crate::crd::ManagementPolicy {
        match self {
            Resource::SubAccount(r) => r.spec.management_policy,
            Resource::ApiKey(r) => r.spec.management_policy,
            Resource::SendingDomain(r) => r.spec.management_policy,
        }
    }

    /// `spec.accountRef` (`None`: ClusterAccount `default`).
    pub fn account_ref(&self) -> Option<&crate::crd::AccountReference> {
        match self {
            Resource::SubAccount(r) => r.spec.account_ref.as_ref(),
            Resource::ApiKey(r) => r.spec.account_ref.as_ref(),
            Resource::SendingDomain(r) => r.spec.account_ref.as_ref(),
        }
    }

    /// `spec.subAccountRef` of an ApiKey or SendingDomain ([`ManagedResource::sub_account_ref`]);
    /// `None` for a SubAccount.
    ///
    /// [`ManagedResource::sub_account_ref`]: crate::engine::ManagedResource::sub_account_ref
    pub fn sub_account_ref(&self) -> Option<&crate::crd::SubAccountReference> {
        use crate::engine::ManagedResource;
        match self {
            Resource::SubAccount(r) => r.sub_account_ref(),
            Resource::ApiKey(r) => r.sub_account_ref(),
            Resource::SendingDomain(r) => r.sub_account_ref(),
        }
    }

    /// Why `plan`/`apply` cannot serve the resource's account, for people (`None`: they can).
    /// They hold the key of ClusterAccount `default` (`--api-key`) and of the accounts
    /// `accounts` (`--account NAME=@FILE`, names as [`crate::offline::accounts::account_name`]
    /// gives them); never an account's Secret.
    pub fn offline_account_problem(&self, accounts: &[String]) -> Option<String> {
        let name = crate::offline::accounts::of(self);
        if name == crate::offline::accounts::DEFAULT || accounts.contains(&name) {
            return None;
        }
        let r = self.account_ref()?;
        let kind = match r.kind {
            crate::crd::AccountRefKind::ClusterAccount => "ClusterAccount",
            crate::crd::AccountRefKind::Account => "Account",
        };
        Some(format!(
            "names {kind} \"{}\": plan and apply need its key on the command line: pass --account {}=@FILE (FILE holding the key), or apply this resource in a cluster",
            crate::text::printable(&r.name, 253),
            crate::text::printable(&name, 320)
        ))
    }
}

/// A resource with the place it was read from.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// Where it was read.
    pub source: Source,
    /// The resource, schema-checked.
    pub resource: Resource,
}

/// One problem found in a manifest: where, which field, and what to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestError {
    /// File and document; `None` for problems with a path itself (unreadable file).
    pub source: Option<Source>,
    /// `Kind "name"` of the document when known.
    pub object: Option<String>,
    /// Field path such as `spec.allowedIps[0]`, when the problem is one field.
    pub field: Option<String>,
    /// What is wrong and what to do.
    pub message: String,
}

impl ManifestError {
    /// The problem as JSON, for `-o json`: `{"file", "document", "item", "object", "field",
    /// "message"}`, each present when known (`document` is 1-based; `item` the 1-based item of
    /// a `List`). Values are as read, not escaped for a terminal.
    pub fn to_json(&self) -> serde_json::Value {
        let mut json = serde_json::Map::new();
        if let Some(source) = &self.source {
            json.insert("file".into(), source.file.to_string_lossy().into());
            if source.document > 0 {
                json.insert("document".into(), source.document.into());
            }
            if let Some(item) = source.item {
                json.insert("item".into(), item.into());
            }
        }
        if let Some(object) = &self.object {
            json.insert("object".into(), object.as_str().into());
        }
        if let Some(field) = &self.field {
            json.insert("field".into(), field.as_str().into());
        }
        json.insert("message".into(), self.message.as_str().into());
        json.into()
    }

    pub(crate) fn at_path(path: &Path, message: impl Into<String>) -> Self {
        ManifestError {
            source: Some(Source {
                file: path.to_path_buf(),
                document: 0,
                item: None,
            }),
            object: None,
            field: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for ManifestError {
    /// One line: `FILE (document N), Kind "name": field: message`, each part made
    /// [`printable`] (a manifest or a file name cannot forge lines).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(s) if s.document == 0 => write!(f, "{}", shown_file(&s.file))?,
            Some(s) => write!(f, "{s}")?,
            None => write!(f, "<input>")?,
        }
        if let Some(object) = &self.object {
            write!(f, ", {}", printable(object, MAX_LINE_CHARS))?;
        }
        write!(f, ": ")?;
        if let Some(field) = &self.field {
            write!(f, "{}: ", printable(field, MAX_LINE_CHARS))?;
        }
        write!(f, "{}", printable(&self.message, MAX_LINE_CHARS))
    }
}

/// Every problem found in a set of manifests (reading stops at nothing: all are reported). As
/// text, the first [`PROBLEMS_SHOWN`] and how many more there are; `-o json` lists them all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManifestErrors(pub Vec<ManifestError>);

/// Most problems [`ManifestErrors`] shows as text, so that a flood of invalid documents cannot
/// flood the terminal or a CI log.
pub const PROBLEMS_SHOWN: usize = 100;

impl fmt::Display for ManifestErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        writeln!(
            f,
            "{n} problem{} in the manifests:",
            if n == 1 { "" } else { "s" }
        )?;
        for e in self.0.iter().take(PROBLEMS_SHOWN) {
            writeln!(f, "  - {e}")?;
        }
        if let Some(more) = n.checked_sub(PROBLEMS_SHOWN).filter(|m| *m > 0) {
            writeln!(f, "  ... and {more} more (-o json lists them all)")?;
        }
        Ok(())
    }
}

impl std::error::Error for ManifestErrors {}
