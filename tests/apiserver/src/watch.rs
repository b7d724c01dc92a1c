//! Watches (`?watch=true`): a chunked stream of one JSON watch event per line (Kubernetes API
//! concepts, "Efficient detection of changes", "Watch bookmarks", "Streaming lists").
//!
//! - `resourceVersion` absent or `"0"`: synthetic ADDED events for the current objects, then changes.
//! - `resourceVersion=N`: replays retained changes newer than N, then live changes; an N older
//!   than the retained window gives one ERROR event carrying a 410 `Expired` Status.
//! - `sendInitialEvents=true&resourceVersionMatch=NotOlderThan`: ADDED events for the current
//!   state, then a BOOKMARK annotated `k8s.io/initial-events-end: "true"`.
//! - `allowWatchBookmarks=true`: periodic BOOKMARK events; `timeoutSeconds` ends the stream.
//! - Label and field selectors apply to each event; an object that stops matching is sent as
//!   DELETED, one that starts matching as ADDED (as kube-apiserver's watch cache does).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::convert::{partial_metadata, to_external};
use crate::handlers::read::{parse_rv, too_large};
use crate::resources::ResourceType;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::server::{Output, ResourceRequest, Shared, negotiate};
use crate::status::ApiError;
use crate::store::{ChangeEvent, EventType};
use crate::table;

struct Filter {
    rt: ResourceType,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    output: Output,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    fn render(&self, etype: &str, stored: &Value) -> Bytes {
        let ext = to_external(&self.rt, stored);
        let object = match self.output {
            Output::Json => ext,
            Output::Metadata => partial_metadata(&ext),
            Output::Table => {
                let rv = ext["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                table::table(&self.rt, std::slice::from_ref(&ext), &rv, None)
            }
        };
        line(&json!({"type": etype, "object": object}))
    }

    /// The event this watcher sees for a change, if any.
    fn translate(&self, e: &ChangeEvent) -> Option<Bytes> {
        if e.key != self.rt.storage {
            return None;
        }
        if let Some(ns) = &self.namespace
            && *ns != e.namespace
        {
            return None;
        }
        let now = self.matches(&e.object);
        let before = e.prev.as_ref().is_some_and(|p| self.matches(p));
        match e.etype {
            EventType::Added => now.then(|| self.render("ADDED", &e.object)),
            EventType::Deleted => (now || before).then(|| self.render("DELETED", &e.object)),
            EventType::Modified => match (before, now) {
                (true, true) => Some(self.render("MODIFIED", &e.object)),
                (false, true) => Some(self.render("ADDED", &e.object)),
                (true, false) => {
                    let mut old = e.prev.clone().unwrap_or_default();
                    old["metadata"]["resourceVersion"] = json!(e.rv.to_string());
                    Some(self.render("DELETED", &old))
                }
                (false, false) => None,
            },
        }
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line(&json!({"type": "BOOKMARK", "object": {
            "kind": self.rt.kind, "apiVersion": self.rt.api_version(), "metadata": meta}}))
    }
}

fn line(v: &Value) -> Bytes {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}

fn flag(rr: &ResourceRequest, k: &str) -> bool {
    matches!(rr.q(k), Some("true") | Some("1"))
}

/// Opens a watch stream.
pub(crate) fn watch(shared: &Arc<Shared>, rr: &ResourceRequest) -> Result<Response, ApiError> {
    let output = negotiate(rr.header(header::ACCEPT))?;
    let filter = Filter {
        rt: rr.rt.clone(),
        namespace: rr.namespace.clone(),
        labels: LabelSelector::parse(rr.q("labelSelector").unwrap_or_default())?,
        fields: FieldSelector::parse(rr.q("fieldSelector").unwrap_or_default(), &rr.rt)?,
        output,
    };
    let send_initial = flag(rr, "sendInitialEvents");
    let bookmarks = flag(rr, "allowWatchBookmarks");
    if send_initial {
        if rr.q("resourceVersionMatch") != Some("NotOlderThan") {
            return Err(ApiError::invalid(
                &rr.rt,
                "",
                vec![crate::status::Cause {
                    reason: "FieldValueForbidden".into(),
                    message: "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into(),
                    field: "resourceVersionMatch".into(),
                }],
            ));
        }
        if !bookmarks {
            return Err(ApiError::invalid(
                &rr.rt,
                "",
                vec![crate::status::Cause {
                    reason: "FieldValueForbidden".into(),
                    message:
                        "Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true"
                            .into(),
                    field: "allowWatchBookmarks".into(),
                }],
            ));
        }
    } else if rr.q("resourceVersionMatch").is_some_and(|m| !m.is_empty()) {
        return Err(ApiError::bad_request(
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    let timeout = match rr.q("timeoutSeconds") {
        None | Some("") => None,
        Some(t) => Some(Duration::from_secs(t.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("timeoutSeconds: invalid value \"{t}\""))
        })?)),
    };
    let rv_param = rr.q("resourceVersion").filter(|s| !s.is_empty());

    let mut first: Vec<Bytes> = Vec::new();
    let mut expired: Option<ApiError> = None;
    let (rx, start_rv) = {
        let st = shared.store();
        let current = st.current_rv();
        let initial_state = |first: &mut Vec<Bytes>| {
            if let Some(b) = st.bucket(&filter.rt.storage) {
                for ((ons, _), o) in b {
                    if filter.namespace.as_ref().is_none_or(|n| n == ons) && filter.matches(o) {
                        first.push(filter.render("ADDED", o));
                    }
                }
            }
        };
        if send_initial {
            if let Some(r) = rv_param.filter(|r| *r != "0") {
                let n = parse_rv(r)?;
                if n > current {
                    return Err(too_large(n, current));
                }
            }
            initial_state(&mut first);
            first.push(filter.bookmark(current, true));
        } else {
            match rv_param {
                None | Some("0") => initial_state(&mut first),
                Some(r) => {
                    let n = parse_rv(r)?;
                    if n > current {
                        return Err(too_large(n, current));
                    }
                    match st.events_since(n) {
                        Some(evs) => {
                            for e in evs {
                                if let Some(l) = filter.translate(&e) {
                                    first.push(l);
                                }
                            }
                        }
                        None => {
                            expired = Some(ApiError::expired(format!(
                                "too old resource version: {n} ({})",
                                st.oldest_watchable_rv()
                            )))
                        }
                    }
                }
            }
        }
        (st.subscribe(), current)
    };

    let mut drop_rx = shared.drop_tx.subscribe();
    drop_rx.mark_unchanged();
    let bookmark_every = shared.opts.bookmark_interval;
    let stream = async_stream::stream! {
        if let Some(e) = expired {
            yield Ok::<Bytes, Infallible>(line(&json!({"type": "ERROR", "object": e.to_status()})));
            return;
        }
        for l in first {
            yield Ok(l);
        }
        let mut rx = rx;
        let mut last_rv = start_rv;
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut ticker = tokio::time::interval(bookmark_every);
        ticker.tick().await;
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(e) => {
                        last_rv = e.rv;
                        if let Some(l) = filter.translate(&e) {
                            yield Ok(l);
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        let err = ApiError::expired("too old resource version: the watch fell behind the test API server's event buffer");
                        yield Ok(line(&json!({"type": "ERROR", "object": err.to_status()})));
                        break;
                    }
                    Err(RecvError::Closed) => break,
                },
                _ = ticker.tick(), if bookmarks => {
                    yield Ok(filter.bookmark(last_rv, false));
                }
                _ = async {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending::<()>().await,
                    }
                } => break,
                _ = drop_rx.changed() => break,
            }
        }
    };
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(stream))
        .map_err(|e| ApiError::internal(format!("building the watch response: {e}")))
}
