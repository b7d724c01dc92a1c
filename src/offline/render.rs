//! Printing plans and apply results for people (text) and for programs (`--output json`).
//! Neither form ever contains a key value or a private key.
//!
//! Every text line goes through [`printable`]: names, values, file names and messages that came
//! from manifests or the service cannot end a line, move the cursor or forge a summary line.
//! JSON output keeps values exact, with every such character written as a JSON escape
//! ([`printable_json`]).

use crate::text::{MAX_LINE_CHARS, printable, printable_json, quoted};

use serde_json::json;

use super::apply::ApplyReport;
use super::plan::{Entry, OfflinePlan};
use crate::engine::{shown, shown_held};

/// Output format of `plan` and `apply`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Lines for people, ending with a summary line.
    #[default]
    Text,
    /// One JSON document.
    Json,
}

/// Appends one line of text, made [`printable`] (capped at [`MAX_LINE_CHARS`]).
macro_rules! line {
    ($out:expr, $($arg:tt)*) => {{
        $out.push_str(&printable(&format!($($arg)*), MAX_LINE_CHARS));
        $out.push('\n');
    }};
}

fn head(e: &Entry) -> String {
    let account = (e.account.as_ref())
        .map(|a| format!(" (account {a})"))
        .unwrap_or_default();
    format!("{} {}/{}{account}", e.kind, e.namespace, e.name)
}

/// How the object was found: `adopted by ...`, or `matched by ...` for an `ObserveOnly`
/// resource (observing is not owning).
fn matched(e: &Entry) -> String {
    use crate::engine::MatchedBy;
    let how = if e.action == super::guards::OBSERVE {
        "matched"
    } else {
        "adopted"
    };
    match (e.id, e.matched_by) {
        (Some(id), Some(MatchedBy::NaturalKey)) => format!(" (id {id}, {how} by name)"),
        (Some(id), Some(MatchedBy::ExternalId)) => format!(" (id {id}, {how} by external-id)"),
        (Some(id), _) => format!(" (id {id})"),
        _ => String::new(),
    }
}

/// The changes, steps, notes and error of `e`; after an apply, `reports` holds each step's
/// outcome (and replaces the planned steps).
fn details(out: &mut String, e: &Entry, reports: Option<&[crate::engine::StepReport]>) {
    for c in &e.changes {
        line!(
            out,
            "    ~ {}: {} -> {}",
            c.field,
            shown_held(&c.from),
            shown(&c.to)
        );
    }
    match reports {
        Some(reports) if !reports.is_empty() => {
            for r in reports {
                steps(out, &r.step, Some(&r.outcome));
            }
        }
        _ => {
            for s in &e.steps {
                steps(out, s, None);
            }
        }
    }
    for n in &e.notes {
        line!(out, "    ! {n}");
    }
    if let Some(err) = &e.error {
        line!(out, "    error: {err}");
    }
}

/// One planned API call (`+ PUT /domain/sending/{id}/share (when the domain is not shared
/// yet)`), the attributes it sends, and, after an apply, what became of it.
fn steps(out: &mut String, s: &crate::engine::Step, outcome: Option<&crate::engine::StepOutcome>) {
    use crate::engine::StepOutcome;
    let when = s.when.map(|w| format!(" (when {w})")).unwrap_or_default();
    let result = match outcome {
        None => String::new(),
        Some(StepOutcome::Done) => ": done".into(),
        Some(StepOutcome::Skipped) => ": skipped, the condition did not hold".into(),
        Some(StepOutcome::NotReached) => ": not reached".into(),
        Some(StepOutcome::Failed { error }) => format!(": failed: {error}"),
    };
    line!(out, "    + {}{when}{result}", s.endpoint);
    for sent in &s.sends {
        let create_only = if sent.create_only {
            "   (set at create only: the interface cannot change it later)"
        } else {
            ""
        };
        line!(
            out,
            "        {} = {}{create_only}",
            sent.field,
            shown(&sent.value)
        );
    }
}

/// A plan as text, ending with its summary line: `Plan: X to create, Y to update, Z
/// unchanged.` (`, N paused, M observed` before the dot when not 0), or for a deletion plan
/// (`destroy`, when `deletion`) `Destroy plan: X to delete or deactivate, Y to keep or
/// absent.`; either followed by ` N with errors.` when some are.
pub fn plan_text(plan: &OfflinePlan, deletion: bool) -> String {
    let mut out = entries_text(plan);
    let s = plan.summary();
    let summary = if deletion {
        let (delete, keep) = (s.delete, s.kept());
        format!("Destroy plan: {delete} to delete or deactivate, {keep} to keep or absent.")
    } else {
        let (create, update, unchanged, rest) = (s.create, s.update, s.unchanged, s.left_alone());
        format!("Plan: {create} to create, {update} to update, {unchanged} unchanged{rest}.")
    };
    let errors = match s.error {
        0 => String::new(),
        n => format!(" {n} with errors."),
    };
    line!(out, "{summary}{errors}");
    out
}

/// The entries of a plan and the objects no manifest names, as text.
fn entries_text(plan: &OfflinePlan) -> String {
    let mut out = String::new();
    for e in &plan.entries {
        line!(
            out,
            "{}: {}{}   [{}]",
            head(e),
            e.action,
            matched(e),
            e.source
        );
        details(&mut out, e, None);
    }
    unmanaged(&mut out, &plan.unmanaged);
    out
}

/// Most objects no manifest names that the text plan lists one by one.
const UNMANAGED_SHOWN: usize = 20;

fn unmanaged(out: &mut String, objects: &[super::plan::Unmanaged]) {
    if objects.is_empty() {
        return;
    }
    line!(
        out,
        "Not named by these manifests (left alone): {} object(s)",
        objects.len()
    );
    for o in objects.iter().take(UNMANAGED_SHOWN) {
        let account = (o.account.as_ref())
            .map(|a| format!(" (account {a})"))
            .unwrap_or_default();
        let inside = (o.sub_account.as_ref())
            .map(|s| format!(" (in sub account {})", quoted(s)))
            .unwrap_or_default();
        line!(
            out,
            "    {} {} {}{inside}{account}",
            o.kind,
            o.id,
            quoted(&o.name)
        );
    }
    if objects.len() > UNMANAGED_SHOWN {
        line!(
            out,
            "    ... and {} more (see -o json)",
            objects.len() - UNMANAGED_SHOWN
        );
    }
}

/// A plan as JSON: `{"resources": [...], "unmanaged": [...], "summary": {...}}`, the summary
/// of a deletion plan (`destroy`) when `deletion` ([`super::plan::Summary::to_json`]). A plan
/// that ends in exit code 1 (`failed`: why, for people: it has errors, or `apply` or `destroy`
/// will not carry it out) also has `"error": {"exitCode": 1, "message": ...}`, the shape of
/// every other failure under `-o json`.
pub fn plan_json(plan: &OfflinePlan, deletion: bool, failed: Option<&str>) -> String {
    let mut doc = json!({
        "resources": plan.entries,
        "unmanaged": plan.unmanaged,
        "summary": plan.summary().to_json(deletion),
    });
    if let Some(message) = failed {
        doc["error"] = json!({"exitCode": 1, "message": message});
    }
    printable_json(&serde_json::to_string_pretty(&doc).unwrap_or_default()) + "\n"
}

/// An apply report as text: one line per resource, DNS records under each domain, and the
/// summary `Apply: X created, Y updated, Z unchanged.` (`, N paused, M observed` before the dot
/// when not 0), or for `destroy` (when `deletion`)
/// `Destroy: X deleted or deactivated, Y kept or absent.`; `, N failed or skipped.` ends it
/// when some did.
pub fn apply_text(report: &ApplyReport, deletion: bool) -> String {
    let mut out = outcomes_text(report);
    let s = report.summary();
    let summary = if deletion {
        let (delete, keep) = (s.delete, s.kept());
        format!("Destroy: {delete} deleted or deactivated, {keep} kept or absent")
    } else {
        let (create, update, unchanged, rest) = (s.create, s.update, s.unchanged, s.left_alone());
        format!("Apply: {create} created, {update} updated, {unchanged} unchanged{rest}")
    };
    let end = match s.error {
        0 => ".".to_string(),
        n => format!(", {n} failed or skipped."),
    };
    line!(out, "{summary}{end}");
    out
}

fn outcomes_text(report: &ApplyReport) -> String {
    let mut out = String::new();
    for o in &report.outcomes {
        line!(out, "{}: {}{}", head(&o.entry), o.result, matched(&o.entry));
        details(&mut out, &o.entry, Some(&o.steps));
        if let Some(verified) = o.verified {
            line!(
                out,
                "    DNS records to publish (all verified: {}):",
                yes_no(verified)
            );
            for r in &o.dns_records {
                line!(
                    out,
                    "      {:<8} {:<5} {}  {}  verified: {}",
                    r.purpose,
                    r.type_,
                    r.hostname,
                    quoted(&r.value),
                    yes_no(r.verified)
                );
            }
        }
        for f in &o.secret_files {
            line!(out, "    secret written to {}", f.display());
        }
        for f in &o.removed_files {
            line!(out, "    file removed: {}", f.display());
        }
    }
    out
}

/// An apply or destroy (`deletion`) report as JSON: `{"resources": [...], "summary": {...}}`
/// ([`super::plan::Summary::to_json`]).
pub fn apply_json(report: &ApplyReport, deletion: bool) -> String {
    let summary = report.summary().to_json(deletion);
    let doc = json!({ "resources": report.outcomes, "summary": summary });
    printable_json(&serde_json::to_string_pretty(&doc).unwrap_or_default()) + "\n"
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
