//! Conversion between the stored form of an object and the form served at one group/version.
//! Custom resources are stored once and served at every version with only `apiVersion` changed
//! (CRD conversion strategy `None`); Events are stored in core/v1 shape and converted field by field
//! for events.k8s.io/v1 (as Kubernetes converts between the two Event APIs).

use serde_json::{Map, Value, json};

use crate::resources::{Builtin, ResourceType};

/// events.k8s.io/v1 field name ↔ core/v1 field name.
const EVENT_FIELDS: [(&str, &str); 6] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(obj: &mut Value, pairs: &[(&str, &str)], reverse: bool) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let mut moved: Map<String, Value> = Map::new();
    for (ext, int) in pairs {
        let (from, to) = if reverse { (*int, *ext) } else { (*ext, *int) };
        if let Some(v) = map.remove(from) {
            moved.insert(to.to_string(), v);
        }
    }
    map.extend(moved);
}

/// The stored object as served by `rt`: `apiVersion`/`kind` set, Events reshaped.
pub fn to_external(rt: &ResourceType, obj: &Value) -> Value {
    let mut out = obj.clone();
    if rt.builtin() == Some(Builtin::EventsEvent) {
        rename(&mut out, &EVENT_FIELDS, true);
        if let Some(m) = out.as_object_mut()
            && let Some(rc) = m.remove("reportingComponent")
        {
            m.insert("reportingController".into(), rc);
        }
    }
    if let Some(m) = out.as_object_mut() {
        m.insert("apiVersion".into(), json!(rt.api_version()));
        m.insert("kind".into(), json!(rt.kind));
    }
    out
}

/// A request object of `rt` in stored form.
pub fn to_internal(rt: &ResourceType, obj: &Value) -> Value {
    let mut out = obj.clone();
    if rt.builtin() == Some(Builtin::EventsEvent) {
        rename(&mut out, &EVENT_FIELDS, false);
        if let Some(m) = out.as_object_mut() {
            if let Some(rc) = m.remove("reportingController") {
                m.insert("reportingComponent".into(), rc);
            }
            m.insert("apiVersion".into(), json!("v1"));
        }
    }
    out
}

/// A `meta.k8s.io/v1` PartialObjectMetadata for an object (what `as=PartialObjectMetadata` and
/// Table rows carry).
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    #[test]
    fn events_round_trip_between_apis() {
        let r = Registry::new();
        let ev = r.lookup("events.k8s.io", "v1", "events").unwrap();
        let core = r.lookup("", "v1", "events").unwrap();
        let external = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e"}, "regarding": {"kind": "Widget", "name": "w"},
            "note": "hello", "reason": "Created", "reportingController": "ctl",
            "deprecatedCount": 2});
        let stored = to_internal(ev, &external);
        assert_eq!(stored["involvedObject"]["name"], "w");
        assert_eq!(stored["message"], "hello");
        assert_eq!(stored["reportingComponent"], "ctl");
        assert_eq!(stored["count"], 2);
        let as_core = to_external(core, &stored);
        assert_eq!(as_core["apiVersion"], "v1");
        assert_eq!(as_core["message"], "hello");
        let back = to_external(ev, &stored);
        assert_eq!(back["note"], "hello");
        assert_eq!(back["regarding"]["kind"], "Widget");
        assert_eq!(back["reportingController"], "ctl");
        assert_eq!(back["apiVersion"], "events.k8s.io/v1");
    }
}
