//! Walking paths, splitting YAML streams into documents and turning each into a [`Resource`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde_json::Value;

use super::document::Document;
use super::schema_check;
use super::{Loaded, ManifestError, ManifestErrors, Resource, Source};
use crate::crd::GROUP;
use crate::text::{MAX_VALUE_CHARS, printable};

/// The result of reading manifests: the resources of this operator's kinds, and the documents
/// skipped because they are of other kinds (e.g. a Namespace in the same directory).
#[derive(Debug, Default)]
pub struct ManifestSet {
    /// Valid resources, in the order read (files sorted by path within a directory).
    pub resources: Vec<Loaded>,
    /// Documents not applied, with a description such as `v1/Namespace "team-a"` and why
    /// ([`NOT_OURS`] or [`ACCOUNT_KIND`]).
    pub skipped: Vec<(Source, String, &'static str)>,
    /// The accounts among the documents (skipped, but their addresses serve `--account`): the
    /// name resources reach them by (`NAME` for a ClusterAccount, `NAMESPACE/NAME` for an
    /// Account), their connection and where they were read. A name is there once: a second
    /// definition is an error.
    pub accounts: Vec<(String, crate::crd::AccountConnection, Source)>,
    /// Who may use what among the documents: the ClusterAccounts' namespace selectors and the
    /// SubAccounts' `spec.allowedNamespaces`.
    pub namespace_selectors: Selectors,
}

/// Who may use what, as the manifests say it (product design, "Accounts and tenancy"), for the
/// CLI's account checks ([`crate::offline::guards::account_allows`]).
#[derive(Clone, Debug, Default)]
pub struct Selectors {
    /// The `spec.namespaceSelector` of each ClusterAccount that sets one, by name: the
    /// namespaces whose resources may use it.
    pub accounts: Vec<(String, LabelSelector)>,
    /// The `spec.allowedNamespaces` of each SubAccount (`None`: unset), by `namespace/name`:
    /// the namespaces whose resources it lets in.
    sub_accounts: HashMap<String, Option<LabelSelector>>,
}

impl Selectors {
    /// Records the `spec.allowedNamespaces` of the SubAccounts among `resources`.
    fn note_sub_accounts(&mut self, resources: &[Loaded]) {
        self.sub_accounts = (resources.iter())
            .filter_map(|l| match &l.resource {
                Resource::SubAccount(s) => Some((
                    format!("{}/{}", l.resource.namespace(), l.resource.name()),
                    s.spec.allowed_namespaces.clone(),
                )),
                _ => None,
            })
            .collect();
    }

    /// The `spec.allowedNamespaces` of SubAccount `(namespace, name)` among the manifests:
    /// `None` when no such SubAccount is there, `Some(None)` when it sets none.
    pub fn allowed_namespaces(
        &self,
        (namespace, name): (&str, &str),
    ) -> Option<Option<&LabelSelector>> {
        let at = format!("{namespace}/{name}");
        self.sub_accounts.get(&at).map(Option::as_ref)
    }
}

/// Why a document of another API group is skipped.
pub const NOT_OURS: &str = "not a mailtarget.co kind";

/// Why a ClusterAccount or Account is skipped (after validation): `plan` and `apply` call the
/// service with the keys they are given, never with an account's Secret; its addresses serve
/// `--account`.
pub const ACCOUNT_KIND: &str = "plan and apply never read an account's Secret: they use the key --account NAME=@FILE gives, at this manifest's addresses";

/// Why ClusterAccount `default` is skipped: its key is `--api-key`, and its addresses are the
/// flags' too (the chart's ClusterAccount `default` among the files names the public service;
/// it does not move `--api-key`, nor a `--simulate` run, elsewhere).
pub const DEFAULT_ACCOUNT_KIND: &str = "plan and apply never read an account's Secret: ClusterAccount default uses the key --api-key gives, at the addresses of --api-url and --transmission-url, whatever its manifest says";

/// Reads every file and directory in `paths` (directories recursively, their `.yaml`, `.yml`
/// and `.json` files in path order) and validates every document.
///
/// Errors: every problem in every document, each naming the file, document, object and field.
/// Nothing is returned unless all documents are valid, so callers write nothing on bad input.
pub fn load(paths: &[PathBuf]) -> Result<ManifestSet, ManifestErrors> {
    load_with(paths, &[])
}

/// Like [`load`], for a run that holds the keys of the accounts `accounts` besides `default`
/// (names as `--account` gives them, see [`crate::offline::accounts`]): a resource naming any
/// other account is an error.
///
/// Errors: as [`load`].
pub fn load_with(paths: &[PathBuf], accounts: &[String]) -> Result<ManifestSet, ManifestErrors> {
    // `-` ([`STDIN`]) reads standard input.
    let mut files = Vec::new();
    let mut errors = Vec::new();
    let mut set = ManifestSet::default();
    // Each directory and each file is read once, however many paths lead to it.
    let mut seen = std::collections::HashSet::new();
    for path in paths {
        if path.as_os_str() == STDIN {
            read_stdin(&mut set, &mut errors);
        } else {
            walk(path, true, &mut seen, &mut files, &mut errors);
        }
    }
    for file in files {
        match read_file(&file) {
            Ok(text) => read_stream(&file, &text, &mut set, &mut errors),
            Err(message) => errors.push(ManifestError::at_path(&file, message)),
        }
    }
    if errors.is_empty() && set.resources.is_empty() && set.skipped.is_empty() {
        // As kubectl's "no objects passed to apply": an empty run is a wrong path, not a success.
        errors.push(ManifestError {
            source: None,
            object: None,
            field: None,
            message: format!(
                "no manifest documents found in {}{}",
                (paths.iter())
                    .map(|p| match p.as_os_str() == STDIN {
                        true => "standard input".to_string(),
                        false => super::shown_file(p),
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                match paths.iter().any(|p| p.is_dir()) {
                    true => " (a directory is read for *.yaml, *.yml and *.json files)",
                    false => "",
                }
            ),
        });
    }
    set.namespace_selectors.note_sub_accounts(&set.resources);
    check_cross_document(&set.resources, &set.namespace_selectors, &mut errors);
    check_accounts(&set.resources, accounts, &mut errors);
    if errors.is_empty() {
        Ok(set)
    } else {
        Err(ManifestErrors(errors))
    }
}

/// Refuses each resource whose account the run holds no key for: `default` and `accounts`.
fn check_accounts(resources: &[Loaded], accounts: &[String], errors: &mut Vec<ManifestError>) {
    for loaded in resources {
        if let Some(message) = loaded.resource.offline_account_problem(accounts) {
            errors.push(ManifestError {
                source: Some(loaded.source.clone()),
                object: Some(format!(
                    "{} {}",
                    loaded.resource.kind(),
                    quoted(loaded.resource.name())
                )),
                field: Some("spec.accountRef".into()),
                message,
            });
        }
    }
}

/// The path that stands for standard input (`-f -`, as kubectl reads it).
pub const STDIN: &str = "-";

fn read_stdin(set: &mut ManifestSet, errors: &mut Vec<ManifestError>) {
    use std::io::Read;
    let name = Path::new("<stdin>");
    let mut text = String::new();
    match std::io::stdin()
        .lock()
        .take(FILE_LIMIT + 1)
        .read_to_string(&mut text)
    {
        Ok(n) if n as u64 > FILE_LIMIT => errors.push(ManifestError::at_path(
            name,
            format!("standard input is larger than {} MiB", FILE_LIMIT >> 20),
        )),
        Ok(_) => read_stream(name, &text, set, errors),
        Err(e) => errors.push(ManifestError::at_path(
            name,
            format!("cannot read standard input: {e}"),
        )),
    }
}

/// Like [`load`] for a YAML stream held in memory; `name` stands for the file in messages. A
/// stream without documents is an empty set here (for [`load`] it is an error).
pub fn load_str(name: &str, text: &str) -> Result<ManifestSet, ManifestErrors> {
    let mut set = ManifestSet::default();
    let mut errors = Vec::new();
    read_stream(Path::new(name), text, &mut set, &mut errors);
    set.namespace_selectors.note_sub_accounts(&set.resources);
    check_cross_document(&set.resources, &set.namespace_selectors, &mut errors);
    check_accounts(&set.resources, &[], &mut errors);
    if errors.is_empty() {
        Ok(set)
    } else {
        Err(ManifestErrors(errors))
    }
}

/// Most bytes read from one manifest file or from standard input.
const FILE_LIMIT: u64 = 16 << 20;

/// Deepest nesting of flow collections (`[` and `{`) accepted; the YAML parser's own limit
/// (128) is reached only after time that grows with the square of the depth, so deeper
/// documents are refused by a scan made before parsing.
const MAX_FLOW_DEPTH: usize = 64;

/// Collects the manifest files under `path` (read whatever its name when `named`, by extension
/// below a directory): regular files only (a FIFO, socket or device named `*.yaml` is reported,
/// never opened), each file and directory once (by device and inode in `seen`, so a symbolic
/// link loop ends and a file named twice is read once), in name order.
fn walk(
    path: &Path,
    named: bool,
    seen: &mut std::collections::HashSet<(u64, u64)>,
    files: &mut Vec<PathBuf>,
    errors: &mut Vec<ManifestError>,
) {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            errors.push(ManifestError::at_path(path, format!("cannot read: {e}")));
            return;
        }
    };
    let is_manifest = |p: &Path| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
    };
    if meta.is_file() {
        if (named || is_manifest(path)) && seen.insert((meta.dev(), meta.ino())) {
            files.push(path.to_path_buf());
        }
        return;
    }
    if !meta.is_dir() {
        if named || is_manifest(path) {
            errors.push(ManifestError::at_path(
                path,
                "not a regular file (a FIFO, socket or device); it is not opened",
            ));
        }
        return;
    }
    if !seen.insert((meta.dev(), meta.ino())) {
        // Already read: a symbolic link loop, or two links to one directory.
        return;
    }
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) => {
            errors.push(ManifestError::at_path(
                path,
                format!("cannot list directory: {e}"),
            ));
            return;
        }
    };
    let mut children: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    children.sort();
    for child in children {
        walk(&child, false, seen, files, errors);
    }
}

/// Reads one manifest file, refusing one larger than [`FILE_LIMIT`].
fn read_file(file: &Path) -> Result<String, String> {
    use std::io::Read;
    let mut text = String::new();
    let n = std::fs::File::open(file)
        .and_then(|f| f.take(FILE_LIMIT + 1).read_to_string(&mut text))
        .map_err(|e| format!("cannot read file: {e}"))?;
    if n as u64 > FILE_LIMIT {
        return Err(format!("larger than {} MiB", FILE_LIMIT >> 20));
    }
    Ok(text)
}

/// The line and column (1-based) where flow collections nest deeper than `limit`, if they do,
/// in one pass over `text`: brackets inside quoted scalars and comments do not count.
fn too_deep(text: &str, limit: usize) -> Option<(usize, usize)> {
    let (mut depth, mut line, mut column) = (0usize, 1usize, 0usize);
    let (mut single, mut double, mut escaped, mut comment) = (false, false, false, false);
    let mut previous = '\n';
    for c in text.chars() {
        column += 1;
        if c == '\n' {
            line += 1;
            column = 0;
            comment = false;
        } else if comment {
        } else if double {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => double = false,
                _ => {}
            }
        } else if single {
            single = c != '\'';
        } else {
            let starts_scalar =
                previous.is_whitespace() || matches!(previous, '[' | '{' | ',' | ':');
            match c {
                '#' if previous.is_whitespace() => comment = true,
                '"' if starts_scalar => double = true,
                '\'' if starts_scalar => single = true,
                '[' | '{' => {
                    depth += 1;
                    if depth > limit {
                        return Some((line, column));
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        previous = c;
    }
    None
}

fn read_stream(file: &Path, text: &str, set: &mut ManifestSet, errors: &mut Vec<ManifestError>) {
    if let Some((line, column)) = too_deep(text, MAX_FLOW_DEPTH) {
        errors.push(ManifestError::at_path(
            file,
            format!(
                "collections nested deeper than {MAX_FLOW_DEPTH} levels at line {line} column {column}; not parsed"
            ),
        ));
        return;
    }
    for (index, document) in documents(text).into_iter().enumerate() {
        let source = Source {
            file: file.to_path_buf(),
            document: index + 1,
            item: None,
        };
        let value = match document {
            Ok(Value::Null) => continue,
            Ok(v) => v,
            Err(message) => {
                errors.push(ManifestError {
                    source: Some(source),
                    object: None,
                    field: None,
                    message,
                });
                continue;
            }
        };
        read_document(source, value, set, errors);
    }
}

/// The documents of a file's text, each a value or why it cannot be read. A document whose YAML
/// has no JSON form (a NaN, a key that is a list) is reported and the next one read; a syntax
/// error ends the list (later documents cannot be located reliably after one).
///
/// As kubectl's YAML-or-JSON decoder reads a file, whatever its name: a text that starts with
/// `{` is read as a stream of JSON objects, one after the other (`jq -c` output, `cat *.json`);
/// where that stream stops being JSON (a `---`, a flow mapping with bare keys) the rest is read
/// as YAML documents separated by `---`. A text that is neither reports the JSON error.
///
/// A UTF-8 byte-order mark at the start (some Windows editors write one) is no content: YAML
/// 1.2 allows it there.
fn documents(text: &str) -> Vec<Result<Value, String>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Vec::new();
    let (mut consumed, mut json_error) = (0, None);
    if text.trim_start().starts_with('{') {
        let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Document>();
        for document in stream.by_ref() {
            match document {
                Ok(Document(value)) => out.push(Ok(value)),
                Err(e) => {
                    json_error = Some(format!("not valid JSON: {e}"));
                    break;
                }
            }
        }
        if json_error.is_none() {
            return out;
        }
        consumed = stream.byte_offset();
    }
    // The JSON read is blanked out, so that YAML's lines and columns stay the file's.
    let blanked = text[..consumed].replace(|c| c != '\n', " ") + &text[consumed..];
    let json = text[consumed..].trim_start().starts_with('{');
    let mut yaml = serde_yaml::Deserializer::from_str(&blanked)
        .map(|document| Document::deserialize(document).map_err(|e| e.to_string()));
    // A document's error, until the next one tells a syntax error (serde_yaml yields it again
    // for every later document) from a value with no JSON form (the next document is read).
    let mut failed: Option<String> = None;
    loop {
        let next = yaml.next();
        if let Some(error) = failed.take() {
            let syntax = matches!(&next, Some(Err(again)) if *again == error);
            if syntax || json {
                // A JSON stream that stopped being JSON is reported as such.
                let json_error = json_error.filter(|_| json);
                out.push(Err(json_error.unwrap_or(format!("not valid YAML: {error}"))));
                break;
            }
            out.push(Err(error));
        }
        match next {
            None => break,
            Some(Ok(Document(value))) => out.push(Ok(value)),
            Some(Err(error)) => failed = Some(error),
        }
    }
    out
}

fn read_document(
    source: Source,
    doc: Value,
    set: &mut ManifestSet,
    errors: &mut Vec<ManifestError>,
) {
    let error = |object: Option<String>, field: Option<&str>, message: String| ManifestError {
        source: Some(source.clone()),
        object,
        field: field.map(str::to_string),
        message,
    };
    let Some(map) = doc.as_object() else {
        errors.push(error(
            None,
            None,
            "a manifest document must be a mapping with apiVersion, kind and metadata".into(),
        ));
        return;
    };
    let api_version = map
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or_default();
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if api_version.is_empty() || kind.is_empty() {
        errors.push(error(
            None,
            Some(if api_version.is_empty() {
                "apiVersion"
            } else {
                "kind"
            }),
            "required: every document needs apiVersion and kind".into(),
        ));
        return;
    }
    // A list of objects (`kind: List`, as `kubectl get -o yaml` writes, or any `...List` with
    // `items`) is read item by item, as kubectl reads it; a list inside an item is not.
    if let (true, Some(items)) = (
        kind.ends_with("List"),
        map.get("items").and_then(Value::as_array),
    ) {
        if source.item.is_some() {
            errors.push(error(
                None,
                Some("items"),
                "a List inside a List's item is not read: give its items directly".into(),
            ));
            return;
        }
        for (i, item) in items.iter().enumerate() {
            let source = Source {
                item: Some(i + 1),
                ..source.clone()
            };
            read_document(source, item.clone(), set, errors);
        }
        return;
    }
    // A group that differs in case only is a typo (groups are case-sensitive), reported below.
    let group = api_version.split('/').next().unwrap_or_default();
    if !group.eq_ignore_ascii_case(GROUP) {
        if !is_api_version(api_version) {
            errors.push(error(
                None,
                Some("apiVersion"),
                format!(
                    "{} is not a valid apiVersion: write GROUP/VERSION ({GROUP}/{}), or VERSION alone for the core group (v1)",
                    quoted(api_version),
                    crate::crd::VERSION
                ),
            ));
            return;
        }
        let described = format!("{}/{} {}", shown(api_version), shown(kind), quoted(name));
        set.skipped.push((source, described, NOT_OURS));
        return;
    }
    let object = Some(format!("{} {}", shown(kind), quoted(name)));
    let expected = format!("{GROUP}/{}", crate::crd::VERSION);
    if api_version != expected {
        errors.push(error(
            object,
            Some("apiVersion"),
            format!("{} is not served; use \"{expected}\"", quoted(api_version)),
        ));
        return;
    }
    let account = matches!(kind, "ClusterAccount" | "Account");
    if !account && !matches!(kind, "SubAccount" | "ApiKey" | "SendingDomain") {
        errors.push(error(
            object,
            Some("kind"),
            format!(
                "{} is not a kind of {GROUP}; use SubAccount, ApiKey, SendingDomain, ClusterAccount or Account",
                quoted(kind)
            ),
        ));
        return;
    }
    // Every field error of the document at once, as the API server lists them all.
    let mut violations = super::metadata::problems(&doc);
    violations.extend(schema_check::check(kind, &doc));
    if !violations.is_empty() {
        for v in violations {
            let field = (!v.field.is_empty()).then_some(v.field.as_str());
            errors.push(error(object.clone(), field, v.message));
        }
        return;
    }
    // An account defined twice: which definition serves (its addresses, its selectors) would
    // depend on the order the files are read in.
    let account_name = match kind {
        "Account" => {
            let namespace = doc.pointer("/metadata/namespace").and_then(Value::as_str);
            format!("{}/{name}", namespace.unwrap_or("default"))
        }
        _ => name.to_string(),
    };
    if account
        && let Some((_, _, first)) = (set.accounts.iter()).find(|(n, _, _)| *n == account_name)
    {
        let message = format!("the same account is also defined at {first}; keep one definition");
        errors.push(error(object, Some("metadata.name"), message));
        return;
    }
    if kind == "ClusterAccount" {
        let problems = match typed::<crate::crd::ClusterAccount>(&doc) {
            Ok(account) => {
                let connection = account.spec.connection.clone();
                set.accounts
                    .push((name.to_string(), connection, source.clone()));
                if let Some(selector) = &account.spec.namespace_selector {
                    (set.namespace_selectors.accounts).push((name.to_string(), selector.clone()));
                }
                crate::engine::validate::cluster_account(&account.spec)
            }
            Err((field, message)) => vec![crate::engine::validate::Problem { field, message }],
        };
        if !problems.is_empty() {
            for p in problems {
                errors.push(error(object.clone(), Some(&p.field), p.message));
            }
            return;
        }
    }
    if kind == "Account" {
        match typed::<crate::crd::Account>(&doc) {
            Ok(account) => {
                let connection = account.spec.connection.clone();
                set.accounts
                    .push((account_name, connection, source.clone()));
            }
            Err((field, message)) => {
                errors.push(error(object.clone(), Some(&field), message));
                return;
            }
        }
    }
    if account {
        let described = format!("{}/{} {}", shown(api_version), shown(kind), quoted(name));
        let why = match (kind, name) {
            ("ClusterAccount", crate::crd::account::DEFAULT_ACCOUNT) => DEFAULT_ACCOUNT_KIND,
            _ => ACCOUNT_KIND,
        };
        set.skipped.push((source, described, why));
        return;
    }
    let resource = match kind {
        "SubAccount" => typed(&doc).map(Resource::SubAccount),
        "ApiKey" => typed(&doc).map(Resource::ApiKey),
        _ => typed(&doc).map(Resource::SendingDomain),
    };
    match resource {
        Ok(resource) => {
            let problems = crate::engine::validate::problems(&resource);
            if problems.is_empty() {
                set.resources.push(Loaded {
                    source: source.clone(),
                    resource,
                });
            }
            for p in problems {
                errors.push(error(object.clone(), Some(&p.field), p.message));
            }
        }
        Err((field, message)) => errors.push(error(object, Some(&field), message)),
    }
}

/// True when `r`'s `spec.subAccountRef` names a SubAccount among the manifests (`selectors`:
/// their `spec.allowedNamespaces`, [`Selectors::allowed_namespaces`]) that does not let `r`'s namespace place
/// objects inside (`ReferenceNotAllowed`, [`crate::offline::guards::reference_allowed`]).
fn reference_refused(r: &Resource, selectors: &Selectors) -> bool {
    r.sub_account_ref().is_some_and(|s| {
        let at = (s.namespace_or(r.namespace()), s.name.as_str());
        selectors.allowed_namespaces(at).is_some_and(|selector| {
            crate::offline::guards::reference_allowed(at, selector, r.namespace()).is_err()
        })
    })
}

/// True when `value` is an apiVersion as kube-apiserver reads one: `group/version`, the group a
/// DNS-1123 subdomain, or `version` alone (the core group), the version a DNS-1123 label.
fn is_api_version(value: &str) -> bool {
    use crate::engine::validate::{is_dns1123_label, is_dns1123_subdomain};
    match value.split_once('/') {
        Some((group, version)) => is_dns1123_subdomain(group) && is_dns1123_label(version),
        None => is_dns1123_label(value),
    }
}

/// A value from the manifest as it may be embedded in a message: [`printable`], capped.
pub(super) fn shown(value: &str) -> String {
    printable(value, MAX_VALUE_CHARS)
}

/// [`shown`] in double quotes.
pub(super) fn quoted(value: &str) -> String {
    format!("\"{}\"", shown(value))
}

fn typed<T: serde::de::DeserializeOwned>(doc: &Value) -> Result<T, (String, String)> {
    serde_path_to_error::deserialize(doc).map_err(|e| (e.path().to_string(), e.inner().to_string()))
}

/// Problems that involve more than one document: the same object twice, two objects claiming
/// the same API object (natural key), and references to SubAccounts that are not in the set.
/// A resource its ClusterAccount refuses (`selectors`, see
/// [`crate::offline::guards::account_allows`]), or placed inside a SubAccount of the manifests
/// that does not allow its namespace ([`reference_refused`]), claims nothing: the plan reports
/// its refusal.
fn check_cross_document(
    resources: &[Loaded],
    selectors: &Selectors,
    errors: &mut Vec<ManifestError>,
) {
    let mut objects: HashMap<(String, String, String), &Source> = HashMap::new();
    // A natural key names one object within an account (and an API key's within its sub
    // account: key names repeat across sub accounts).
    let mut natural: HashMap<(&'static str, String, String, String), (&Source, String)> =
        HashMap::new();
    let mut sub_accounts: HashMap<(String, String), String> = HashMap::new();
    let mut secrets: HashMap<(String, String), (&Source, String)> = HashMap::new();
    for loaded in resources {
        let r = &loaded.resource;
        let id = format!("{} \"{}\"", r.kind(), r.name());
        let key = (
            r.kind().to_string(),
            r.namespace().to_string(),
            r.name().to_string(),
        );
        // Later definitions and claims point to the first one, the one to keep.
        if let Some(first) = objects.get(&key) {
            errors.push(ManifestError {
                source: Some(loaded.source.clone()),
                object: Some(id.clone()),
                field: Some("metadata.name".into()),
                message: format!("the same object is also defined at {first}; keep one definition"),
            });
            continue;
        }
        objects.insert(key, &loaded.source);
        let account = crate::offline::accounts::of(r);
        let placed = match r {
            Resource::ApiKey(k) => (k.spec.sub_account_ref.as_ref())
                .map(|s| format!("{}/{}", s.namespace_or(r.namespace()), s.name))
                .unwrap_or_default(),
            Resource::SubAccount(_) => {
                let at = (r.namespace().to_string(), r.name().to_string());
                sub_accounts.insert(at, account.clone());
                String::new()
            }
            Resource::SendingDomain(_) => String::new(),
        };
        // Refused by its account or its SubAccount, it writes nothing and claims nothing (no
        // Secret, no object); the plan reports the refusal. A paused one is left alone before
        // its account is used.
        let refused = crate::offline::guards::refused(loaded, selectors).is_some()
            || (reference_refused(r, selectors) && !r.is_paused());
        if refused {
            continue;
        }
        for (field, secret) in r.secret_names() {
            let at = (r.namespace().to_string(), secret.to_string());
            if let Some((first, first_id)) = secrets.get(&at) {
                errors.push(ManifestError {
                    source: Some(loaded.source.clone()),
                    object: Some(id.clone()),
                    field: Some(field.into()),
                    message: format!("Secret \"{secret}\" is also written by {first_id} at {first}; each resource needs a Secret of its own (SecretConflict)"),
                });
            } else {
                secrets.insert(at, (&loaded.source, id.clone()));
            }
        }
        let (field, natural_key) = crate::engine::validate::natural_key(r);
        let claim = (r.kind(), account, placed, natural_key.clone());
        if let Some((first, first_id)) = natural.get(&claim) {
            errors.push(ManifestError {
                source: Some(loaded.source.clone()),
                object: Some(id.clone()),
                field: Some(field.into()),
                message: format!("\"{natural_key}\" is also claimed by {first_id} at {first}; two resources cannot manage the same API object (ConflictingOwner)"),
            });
        } else {
            natural.insert(claim, (&loaded.source, id.clone()));
        }
    }
    for loaded in resources {
        if let Some(reference) = loaded.resource.sub_account_ref() {
            let ns = reference
                .namespace_or(loaded.resource.namespace())
                .to_string();
            let object = Some(format!(
                "{} \"{}\"",
                loaded.resource.kind(),
                loaded.resource.name()
            ));
            let theirs = sub_accounts.get(&(ns.clone(), reference.name.clone()));
            let ours = crate::offline::accounts::of(&loaded.resource);
            if let Some(theirs) = theirs.filter(|theirs| **theirs != ours) {
                errors.push(ManifestError {
                    source: Some(loaded.source.clone()),
                    object,
                    field: Some("spec.accountRef".into()),
                    message: format!("the account is {ours:?} but SubAccount \"{}\" in namespace \"{ns}\" is managed through {theirs:?}: name the same account", reference.name),
                });
            } else if theirs.is_none() {
                errors.push(ManifestError {
                    source: Some(loaded.source.clone()),
                    object: Some(format!(
                        "{} \"{}\"",
                        loaded.resource.kind(),
                        loaded.resource.name()
                    )),
                    field: Some("spec.subAccountRef.name".into()),
                    message: format!("no valid SubAccount \"{}\" in namespace \"{ns}\" among the manifests; add it, fix the name, or fix its errors", reference.name),
                });
            }
        }
    }
}

#[cfg(test)]
mod depth_tests {
    use super::too_deep;

    /// Brackets count in flow collections only: not in quoted scalars, nor in comments.
    #[test]
    fn counts_flow_nesting_only() {
        assert_eq!(too_deep("a: [[[x]]]\n", 2), Some((1, 6)));
        assert_eq!(too_deep("a: [[x]]\n", 2), None);
        assert_eq!(too_deep("a: \"[[[[\"\nb: '{{{{'\n# [[[[\n", 2), None);
        assert_eq!(too_deep("note: it's [[[x]]]\n", 2), Some((1, 14)));
    }
}
