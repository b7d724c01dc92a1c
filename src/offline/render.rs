//! Printing plans and apply results for people (text) and for programs (`--output json`).
//! Neither form ever contains a key value or a private key.

use std::fmt::Write;

use serde_json::json;

use super::apply::ApplyReport;
use super::plan::{Entry, OfflinePlan, Summary};

/// Output format of `plan` and `apply`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Lines for people, ending with a summary line.
    #[default]
    Text,
    /// One JSON document.
    Json,
}

fn head(e: &Entry) -> String {
    format!("{} {}/{}", e.kind, e.namespace, e.name)
}

fn matched(e: &Entry) -> String {
    match (e.id, e.matched_by) {
        (Some(id), Some(crate::reconcile::MatchedBy::NaturalKey)) => {
            format!(" (id {id}, adopted by name)")
        }
        (Some(id), Some(crate::reconcile::MatchedBy::ExternalId)) => {
            format!(" (id {id}, adopted by external-id)")
        }
        (Some(id), _) => format!(" (id {id})"),
        _ => String::new(),
    }
}

fn details(out: &mut String, e: &Entry) {
    for c in &e.changes {
        let _ = writeln!(out, "    ~ {}: {} -> {}", c.field, c.from, c.to);
    }
    for n in &e.notes {
        let _ = writeln!(out, "    ! {n}");
    }
    if let Some(err) = &e.error {
        let _ = writeln!(out, "    error: {err}");
    }
}

/// The summary line of a plan: `Plan: X to create, Y to update, Z unchanged.`
pub fn plan_summary_line(s: &Summary) -> String {
    let mut line = format!(
        "Plan: {} to create, {} to update, {} unchanged.",
        s.create, s.update, s.unchanged
    );
    if s.error > 0 {
        line.push_str(&format!(" {} with errors.", s.error));
    }
    line
}

/// A plan as text.
pub fn plan_text(plan: &OfflinePlan) -> String {
    let mut out = String::new();
    for e in &plan.entries {
        let _ = writeln!(
            out,
            "{}: {}{}   [{}]",
            head(e),
            e.action,
            matched(e),
            e.source
        );
        details(&mut out, e);
    }
    let _ = writeln!(out, "{}", plan_summary_line(&plan.summary()));
    out
}

/// A plan as JSON: `{"resources": [...], "summary": {...}}`.
pub fn plan_json(plan: &OfflinePlan) -> String {
    let doc = json!({ "resources": plan.entries, "summary": plan.summary() });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

/// An apply report as text: one line per resource, DNS records under each domain, a summary.
pub fn apply_text(report: &ApplyReport) -> String {
    let mut out = String::new();
    for o in &report.outcomes {
        let _ = writeln!(out, "{}: {}{}", head(&o.entry), o.result, matched(&o.entry));
        details(&mut out, &o.entry);
        if let Some(verified) = o.verified {
            let _ = writeln!(
                out,
                "    DNS records to publish (all verified: {}):",
                yes_no(verified)
            );
            for r in &o.dns_records {
                let _ = writeln!(
                    out,
                    "      {:<8} {:<5} {}  {:?}  verified: {}",
                    r.purpose,
                    r.type_,
                    r.hostname,
                    r.value,
                    yes_no(r.verified)
                );
            }
        }
        for f in &o.secret_files {
            let _ = writeln!(out, "    secret written to {}", f.display());
        }
    }
    let s = report.summary();
    let _ = write!(
        out,
        "Apply: {} created, {} updated, {} unchanged",
        s.create, s.update, s.unchanged
    );
    let _ = writeln!(
        out,
        "{}",
        if s.error > 0 {
            format!(", {} failed or skipped.", s.error)
        } else {
            ".".into()
        }
    );
    out
}

/// An apply report as JSON: `{"resources": [...], "summary": {...}}`.
pub fn apply_json(report: &ApplyReport) -> String {
    let doc = json!({ "resources": report.outcomes, "summary": report.summary() });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
