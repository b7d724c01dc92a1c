//! The files of `--secrets-dir DIR`: `apply` writes each secret value the manifests ask for to
//! `DIR/<namespace>/<secretName>/<key>` (mode 0600), the mirror of the Secret the controller
//! writes, and `destroy` removes them with their resources, as garbage collection removes the
//! Secrets of deleted resources in a cluster.
//!
//! Each such directory holds a marker file, [`MARKER`], naming the resource it was written for
//! (`ApiKey default/ci`); it plays the part of the Secret's owner reference. As the controller
//! takes over no Secret it did not write for the resource (`SecretConflict`), `apply` writes
//! into no directory holding files without the resource's marker: another resource's is
//! refused, the user's own is taken over only under the annotation
//! `mailtarget.co/adoption-policy`. `destroy` removes only the marker and the key files of the
//! directories marked for the resource (under any secret name it had: the marker, not the
//! spec, says whose a directory is), and a directory once empty.
//! Both are checked when the plan is made, before any call to the service; files written by
//! 0.1.0, which wrote no marker, count as the user's.

use secrecy::{ExposeSecret, SecretString};

use super::apply::Outcome;
use super::guards::OBSERVE;
use super::plan::{Entry, OfflinePlan, Step};
use crate::crd::{ANNOTATION_ADOPTION_POLICY, ApiKey, SendingDomain, SubAccount};
use crate::engine::ManagedKind;
use crate::files::{Claim, SafeDir};
use crate::manifest::Resource;

/// The marker file's name. Kubernetes refuses Secret keys that start with `..`
/// (`IsConfigMapKey` in k8s.io/apimachinery; the kubelet keeps such names for itself in Secret
/// volumes), so it never stands for a key.
pub(crate) const MARKER: &str = "..owner";

/// Who the resource of `e` is in a marker: `Kind namespace/name`.
fn owner(e: &Entry) -> String {
    format!("{} {}/{}", e.kind, e.namespace, e.name)
}

/// The marker's content for the directory of Secret `secret` of `e`'s resource:
/// `Kind namespace/name secret`. The Secret's name ties the marker to its directory: a copy of
/// the directory under another name (a user's backup) is not the resource's.
fn marker(e: &Entry, secret: &str) -> String {
    format!("{} {secret}\n", owner(e))
}

/// A marker's content read back: whose (`Kind namespace/name`) and, when the marker names one,
/// for which Secret; markers written by builds before the Secret's name was recorded name none
/// (no release wrote such a marker: 0.1.0 wrote none).
fn parse_marker(content: &str) -> (String, Option<&str>) {
    let mut words = content.split_whitespace();
    let whose = words.by_ref().take(2).collect::<Vec<_>>().join(" ");
    (whose, words.next())
}

/// True when `apply` or `destroy` carries out `e`'s resource (`s`: its step) with its files: no
/// error, not paused, and not `ObserveOnly` (left alone with its files) unless `observed`
/// counts (`apply` exports an observed resource's values under the adoption annotation).
fn carried_out(e: &Entry, s: &Step, observed: bool) -> bool {
    let observes = e.action == OBSERVE;
    e.error.is_none() && !matches!(s, Step::Invalid | Step::Skip) && (!observes || observed)
}

/// Whose the directory of Secret `secret` of `e`'s resource is.
enum Place {
    /// Nothing there yet.
    Free,
    /// Written for this resource.
    Own,
    /// Written for another resource (its marker's content).
    Others(String),
    /// Unreadable: why, naming the path.
    Unusable(String),
    /// Files without a marker: the user's own, or written by 0.1.0.
    Users,
}

/// The directory of Secret `secret` of `e`'s resource as shown: `DIR/namespace/secret`.
fn shown(dir: &SafeDir, e: &Entry, secret: &str) -> String {
    format!("{}/{}/{secret}", dir.path().display(), e.namespace)
}

/// The directory of Secret `secret` of `e`'s resource, as shown, and whose it is: its own when
/// its marker names the resource and this Secret (or no Secret: a marker of an earlier build,
/// which `apply` marks anew).
/// A marker naming the resource and another Secret is a copy of another of its directories,
/// which is not taken for this one.
fn place(dir: &SafeDir, e: &Entry, secret: &str) -> (String, Place) {
    let place = match dir.claim(&[&e.namespace, secret], MARKER) {
        Ok(Claim::Free) => Place::Free,
        Ok(Claim::Marked(o)) => match parse_marker(&o) {
            (whose, None) if whose == owner(e) => Place::Own,
            (whose, Some(s)) if whose == owner(e) && s == secret => Place::Own,
            (whose, Some(s)) if whose == owner(e) => Place::Others(format!("{whose} as {s}")),
            (whose, _) => Place::Others(whose),
        },
        Ok(Claim::Unmarked) => Place::Users,
        Err(e) => Place::Unusable(e.to_string()),
    };
    (shown(dir, e, secret), place)
}

/// Checks, before `apply` calls the service, that every Secret directory a resource of `plan`
/// would write is free or its own: a directory of another resource, or holding files the user
/// put there while no adoption policy is annotated, makes the resource an error
/// (`SecretConflict`: nothing is written at all); the user's files taken over under the
/// annotation get a note. A key file this process could not write (a directory on its path
/// it may not write into, a directory in its place) is an error too, naming the path: no
/// object is created whose value could not be stored.
pub(crate) fn check_apply(plan: &mut OfflinePlan, dir: &SafeDir) {
    let rows = (plan.entries.iter_mut())
        .zip(plan.steps.iter_mut())
        .zip(&plan.resources);
    for ((e, step), r) in rows.filter(|((e, s), _)| carried_out(e, s, e.takes_over_files)) {
        let adopts = e.takes_over_files;
        let users = "holds files not written for this resource by apply --secrets-dir";
        for (_, secret) in r.secret_names() {
            let conflict = match place(dir, e, secret) {
                (_, Place::Free | Place::Own) => None,
                (shown, Place::Users) if adopts => {
                    e.notes.push(format!(
                        "{shown} {users}: {ANNOTATION_ADOPTION_POLICY} takes them over"
                    ));
                    None
                }
                (shown, Place::Users) => Some(format!(
                    "{shown} {users}; choose another secret name, remove them, or set the annotation {ANNOTATION_ADOPTION_POLICY} (Adopt or AdoptOrCreate) to take them over"
                )),
                (shown, Place::Others(o)) => Some(format!(
                    "{shown} holds the secret files written for {o}; choose another secret name"
                )),
                (_, Place::Unusable(why)) => Some(why),
            };
            let error = match conflict {
                Some(problem) => format!("SecretConflict: {problem}"),
                None => match dir.check_writable(&[&e.namespace, secret, secret_key(r)]) {
                    Ok(()) => continue,
                    Err(why) => why.to_string(),
                },
            };
            fail(e, step, error);
            break;
        }
    }
}

/// Makes `e`'s resource (`step`: its step) an error, `error`, that nothing is carried out for.
fn fail(e: &mut Entry, step: &mut Step, error: String) {
    e.error = Some(error);
    e.action = "error";
    e.steps.clear();
    *step = Step::Invalid;
}

/// The key of every Secret of `r`'s kind: [`ManagedKind::SECRET_KEY`].
fn secret_key(r: &Resource) -> &'static str {
    match r {
        Resource::ApiKey(_) => ApiKey::SECRET_KEY,
        Resource::SubAccount(_) => SubAccount::SECRET_KEY,
        Resource::SendingDomain(_) => SendingDomain::SECRET_KEY,
    }
}

/// Notes, without `--secrets-dir`, on each resource `apply` creates whose spec names a Secret,
/// that its value is not written anywhere; the object holds it, and a later `apply
/// --secrets-dir` exports it (keys and DKIM private keys can be read again). An object that
/// exists already gets no note: nothing new is missed.
pub(crate) fn note_unwritten(plan: &mut OfflinePlan) {
    let rows = (plan.entries.iter_mut())
        .zip(&plan.steps)
        .zip(&plan.resources);
    for ((e, _), r) in rows.filter(|((e, s), _)| carried_out(e, s, false)) {
        if e.action != "create" {
            continue;
        }
        for (field, secret) in r.secret_names() {
            e.notes.push(format!(
                "{field} {}: not written, no --secrets-dir (apply --secrets-dir DIR writes it to DIR/{}/{secret}/{}, also later)",
                crate::text::quoted(secret),
                e.namespace,
                secret_key(r)
            ));
        }
    }
}

/// The directories of `DIR/<namespace>` written for `e`'s resource (`r`): those of the Secrets
/// its spec names now that are its own ([`place`]), and those whose marker names the resource
/// and the directory's own name, written under a secret name the spec no longer gives. A
/// directory that cannot be read is not proven the resource's, and left out.
///
/// Errors: `DIR/<namespace>` cannot be listed (a symbolic link, I/O).
fn own_directories(
    dir: &SafeDir,
    e: &Entry,
    r: &Resource,
) -> Result<Vec<String>, crate::files::FileError> {
    let now: Vec<&str> = r.secret_names().into_iter().map(|(_, s)| s).collect();
    let mut own = Vec::new();
    for name in dir.directories(&[&e.namespace])? {
        let ours = if now.contains(&name.as_str()) {
            matches!(place(dir, e, &name).1, Place::Own)
        } else {
            let claim = dir.claim(&[&e.namespace, &name], MARKER);
            matches!(claim, Ok(Claim::Marked(o)) if parse_marker(&o) == (owner(e), Some(name.as_str())))
        };
        if ours {
            own.push(name);
        }
    }
    Ok(own)
}

/// Notes, on each resource `destroy` acts on (one with a step: not paused, not `ObserveOnly`,
/// no error), what becomes of its Secret directories: each written for it is removed, under
/// any secret name it had; one its spec names that was not written for it is left.
/// Returns how many it removes, which `destroy` must have approved as it must a deletion.
pub(crate) fn note_removals(plan: &mut OfflinePlan, dir: &SafeDir) -> usize {
    let mut removals = 0;
    let rows = (plan.entries.iter_mut())
        .zip(&plan.steps)
        .zip(&plan.resources);
    for ((e, _), r) in rows.filter(|((e, s), _)| carried_out(e, s, false)) {
        for (_, secret) in r.secret_names() {
            let note = match place(dir, e, secret) {
                (_, Place::Free | Place::Own) => continue,
                (shown, Place::Users) => {
                    format!("leaves {shown}: not written for it by apply --secrets-dir")
                }
                (shown, Place::Others(o)) => format!("leaves {shown}: written for {o}"),
                (shown, Place::Unusable(why)) => format!("leaves {shown}: {why}"),
            };
            e.notes.push(note);
        }
        match own_directories(dir, e, r) {
            Ok(own) => {
                removals += own.len();
                let removes = own.iter().map(|name| {
                    let shown = shown(dir, e, name);
                    format!("removes the files apply --secrets-dir wrote for it in {shown}")
                });
                e.notes.extend(removes.collect::<Vec<_>>());
            }
            Err(why) => e
                .notes
                .push(format!("leaves the files written for it: {why}")),
        }
    }
    removals
}

/// After `destroy` carried out `o`'s resource (`r`), removes from each directory written for
/// it ([`own_directories`]: under any secret name it had) the marker and the file of its
/// kind's key ([`ManagedKind::SECRET_KEY`]), and the directory once empty; any other file
/// stays. A failure fails `o`, naming each path, after the other directories are done.
pub(crate) fn remove(dir: &SafeDir, o: &mut Outcome, r: &Resource) {
    if matches!(o.result, "failed" | "skipped" | OBSERVE) {
        return;
    }
    // Listed as the plan listed them; one that cannot be listed was noted as left.
    let Ok(own) = own_directories(dir, &o.entry, r) else {
        return;
    };
    let mut failures = Vec::new();
    for secret in own {
        match dir.remove(&[&o.entry.namespace, &secret], &[secret_key(r), MARKER]) {
            // The marker is ours alone: the value files are what the user sees go.
            Ok(paths) => o
                .removed_files
                .extend(paths.into_iter().filter(|p| !p.ends_with(MARKER))),
            Err(e) => failures.push(e.to_string()),
        }
    }
    if !failures.is_empty() {
        o.result = "failed";
        o.entry.error = Some(failures.join("; "));
    }
}

/// Writes `value` to `DIR/<namespace>/<secret>/<key>` with mode 0600, after the directory's
/// marker unless it is there (see [`crate::files`]: no symbolic link below `DIR` followed, an
/// older file replaced only once the new one is complete). A failure fails `o`, naming the
/// path (never the value), and leaves the older file intact; so does a directory taken since
/// the plan: marked for another resource, or holding the user's files while `o`'s resource
/// does not take them over (`Entry::takes_over_files`).
pub(crate) fn write(dir: &SafeDir, o: &mut Outcome, secret: &str, key: &str, value: &SecretString) {
    let namespace = o.entry.namespace.as_str();
    let (shown, place) = place(dir, &o.entry, secret);
    let written = (|| {
        // Taken since the plan checked it.
        let taken = match &place {
            Place::Others(owner) => Some(format!("now written for {owner}")),
            Place::Users if !o.entry.takes_over_files => Some(format!(
                "now holds files not written for this resource by apply --secrets-dir; remove them or set the annotation {ANNOTATION_ADOPTION_POLICY}, then apply again"
            )),
            _ => None,
        };
        if let Some(message) = taken {
            return Err(crate::files::FileError::Io {
                doing: "write",
                path: shown.into(),
                message,
            });
        }
        // Also over a marker of its own that does not name the Secret (an earlier build's),
        // which then counts under this name only; one that says it already is not rewritten.
        let marker = marker(&o.entry, secret);
        dir.write(&[namespace, secret, MARKER], marker.as_bytes(), 0o600)?;
        let bytes = value.expose_secret().as_bytes();
        dir.write(&[namespace, secret, key], bytes, 0o600)
    })();
    match written {
        // A file that held the value already is not written again, nor reported.
        Ok(written) if written.changed => o.secret_files.push(written.path),
        Ok(_) => {}
        // The value was obtained but not stored: the run fails, naming the file.
        Err(e) => {
            o.result = "failed";
            o.entry.error = Some(e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `--secrets-dir` whose directory `default/ci-key` holds a file of the user's, `notes`
    /// (no marker); the temporary root, the directory opened, and `default/ci-key`'s path.
    fn users_dir() -> (tempfile::TempDir, SafeDir, std::path::PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let dir = SafeDir::open(root.path()).unwrap();
        let secret = root.path().join("default/ci-key");
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::write(secret.join("notes"), "the user's").unwrap();
        (root, dir, secret)
    }

    fn outcome() -> Outcome {
        Outcome {
            entry: Entry {
                kind: "ApiKey",
                namespace: "default".into(),
                name: "ci".into(),
                ..Entry::default()
            },
            result: "created",
            ..Outcome::default()
        }
    }

    /// Files the user puts into a Secret directory after the plan found it free (within one
    /// run of `apply`) are not taken over: the resource fails naming the directory, and the
    /// directory stays as the user left it, with no marker and no value written.
    #[test]
    fn user_files_put_there_after_the_plan_are_not_taken_over() {
        let (_root, dir, secret) = users_dir();

        let mut o = outcome();
        write(&dir, &mut o, "ci-key", "apiKey", &"k-1".to_string().into());
        assert_eq!(o.result, "failed");
        let error = o.entry.error.as_deref().unwrap_or_default();
        assert!(error.contains("default/ci-key"), "{error}");
        assert!(!error.contains("k-1"), "{error}");
        let names: Vec<_> = std::fs::read_dir(&secret)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["notes"]);
        assert!(o.secret_files.is_empty());
    }

    /// Under `mailtarget.co/adoption-policy` the user's files are taken over (the marker is
    /// written beside them), as the plan said.
    #[test]
    fn user_files_are_taken_over_under_the_adoption_policy() {
        let (_root, dir, secret) = users_dir();

        let mut o = outcome();
        o.entry.takes_over_files = true;
        write(&dir, &mut o, "ci-key", "apiKey", &"k-1".to_string().into());
        assert_eq!(o.result, "created", "{:?}", o.entry.error);
        assert_eq!(
            std::fs::read_to_string(secret.join("apiKey")).unwrap(),
            "k-1"
        );
        assert!(secret.join(MARKER).exists());
        assert_eq!(
            std::fs::read_to_string(secret.join("notes")).unwrap(),
            "the user's"
        );
    }
}
