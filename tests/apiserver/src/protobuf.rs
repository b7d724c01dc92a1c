//! Kubernetes protobuf request bodies (`Content-Type: application/vnd.kubernetes.protobuf`), as
//! kubectl sends them for `kubectl create secret|configmap|namespace` (Kubernetes docs,
//! "Kubernetes API Concepts", section "Protobuf encoding"): the four bytes `k8s\0`, then a
//! `runtime.Unknown` message whose `typeMeta` names the kind, whose `raw` holds the object's own
//! protobuf encoding and whose `contentEncoding`/`contentType` are empty (or name protobuf).
//!
//! Decoded with kube-rs's protobuf bindings (`k8s-pb`) and converted to the JSON the API serves.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_pb::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_pb::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::{Map, Value, json};

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// Decodes a Kubernetes protobuf request body into the object's JSON form.
///
/// Supported kinds (`v1`): `Secret` (`data` and `binaryData`-like byte maps become base64
/// strings, `stringData`, `type`, `immutable`), `ConfigMap` (`data`, `binaryData` as base64,
/// `immutable`), `Namespace` (`spec.finalizers`, `status.phase`). The result carries `apiVersion`
/// and `kind` from the envelope and `metadata` with `name`, `generateName`, `namespace`, `uid`,
/// `resourceVersion`, `generation`, `creationTimestamp`, `deletionTimestamp`,
/// `deletionGracePeriodSeconds`, `labels`, `annotations`, `ownerReferences` and `finalizers`; empty
/// strings, zero times and empty maps/lists are left out, as the JSON encoding omits them. An
/// envelope whose `contentType` is `application/json` is read as JSON.
///
/// Errors (never a panic): a body without the `k8s\0` magic, bytes that are not a valid message,
/// a `contentEncoding` (e.g. gzip), or a kind not listed above:
/// `protobuf decoding of <apiVersion>/<kind> is not supported by the test API server`.
pub fn decode_protobuf_object(body: &[u8]) -> Result<Value, String> {
    let Some(envelope) = body.strip_prefix(MAGIC) else {
        return Err(
            "the body does not start with the Kubernetes protobuf magic bytes \"k8s\\0\""
                .to_string(),
        );
    };
    let unknown = Unknown::decode(envelope)
        .map_err(|e| format!("invalid protobuf envelope (runtime.Unknown): {e}"))?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    if let Some(encoding) = unknown.content_encoding.filter(|e| !e.is_empty()) {
        return Err(format!(
            "content encoding {encoding:?} of the protobuf envelope is not supported"
        ));
    }
    let raw = unknown.raw.unwrap_or_default();
    let content_type = unknown.content_type.unwrap_or_default();
    if content_type == "application/json" {
        return serde_json::from_slice(&raw)
            .map_err(|e| format!("invalid JSON in the protobuf envelope: {e}"));
    }
    if !content_type.is_empty() && content_type != "application/vnd.kubernetes.protobuf" {
        return Err(format!(
            "content type {content_type:?} of the protobuf envelope is not supported"
        ));
    }
    let invalid = |e: prost::DecodeError| format!("invalid protobuf {kind}: {e}");
    let mut object = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Secret") => secret_json(Secret::decode(raw.as_slice()).map_err(invalid)?),
        ("v1", "ConfigMap") => config_map_json(ConfigMap::decode(raw.as_slice()).map_err(invalid)?),
        ("v1", "Namespace") => namespace_json(Namespace::decode(raw.as_slice()).map_err(invalid)?),
        _ => {
            return Err(format!(
                "protobuf decoding of {api_version}/{kind} is not supported by the test API server"
            ));
        }
    };
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".to_string(), Value::String(api_version));
        map.insert("kind".to_string(), Value::String(kind));
    }
    Ok(object)
}

fn secret_json(secret: Secret) -> Value {
    let mut out = Map::new();
    out.insert(
        "metadata".to_string(),
        metadata_json(secret.metadata.unwrap_or_default()),
    );
    insert_nonempty(&mut out, "data", bytes_map(&secret.data));
    insert_nonempty(&mut out, "stringData", string_map(&secret.string_data));
    if let Some(kind) = secret.r#type.filter(|t| !t.is_empty()) {
        out.insert("type".to_string(), Value::String(kind));
    }
    if let Some(immutable) = secret.immutable {
        out.insert("immutable".to_string(), Value::Bool(immutable));
    }
    Value::Object(out)
}

fn config_map_json(config_map: ConfigMap) -> Value {
    let mut out = Map::new();
    out.insert(
        "metadata".to_string(),
        metadata_json(config_map.metadata.unwrap_or_default()),
    );
    insert_nonempty(&mut out, "data", string_map(&config_map.data));
    insert_nonempty(&mut out, "binaryData", bytes_map(&config_map.binary_data));
    if let Some(immutable) = config_map.immutable {
        out.insert("immutable".to_string(), Value::Bool(immutable));
    }
    Value::Object(out)
}

fn namespace_json(namespace: Namespace) -> Value {
    let mut out = Map::new();
    out.insert(
        "metadata".to_string(),
        metadata_json(namespace.metadata.unwrap_or_default()),
    );
    let finalizers = namespace.spec.map(|s| s.finalizers).unwrap_or_default();
    let mut spec = Map::new();
    if !finalizers.is_empty() {
        spec.insert("finalizers".to_string(), json!(finalizers));
    }
    out.insert("spec".to_string(), Value::Object(spec));
    if let Some(phase) = namespace
        .status
        .and_then(|s| s.phase)
        .filter(|p| !p.is_empty())
    {
        out.insert("status".to_string(), json!({"phase": phase}));
    }
    Value::Object(out)
}

/// `metav1.ObjectMeta` as JSON, leaving out what the JSON encoding omits.
fn metadata_json(meta: ObjectMeta) -> Value {
    let mut out = Map::new();
    let strings = [
        ("name", meta.name),
        ("generateName", meta.generate_name),
        ("namespace", meta.namespace),
        ("selfLink", meta.self_link),
        ("uid", meta.uid),
        ("resourceVersion", meta.resource_version),
    ];
    for (key, value) in strings {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            out.insert(key.to_string(), Value::String(value));
        }
    }
    if let Some(generation) = meta.generation.filter(|g| *g != 0) {
        out.insert("generation".to_string(), json!(generation));
    }
    if let Some(time) = meta.creation_timestamp.as_ref().and_then(time_json) {
        out.insert("creationTimestamp".to_string(), time);
    }
    if let Some(time) = meta.deletion_timestamp.as_ref().and_then(time_json) {
        out.insert("deletionTimestamp".to_string(), time);
    }
    if let Some(grace) = meta.deletion_grace_period_seconds {
        out.insert("deletionGracePeriodSeconds".to_string(), json!(grace));
    }
    insert_nonempty(&mut out, "labels", string_map(&meta.labels));
    insert_nonempty(&mut out, "annotations", string_map(&meta.annotations));
    if !meta.owner_references.is_empty() {
        let refs: Vec<Value> = meta
            .owner_references
            .into_iter()
            .map(|r| {
                let mut o = Map::new();
                for (key, value) in [
                    ("apiVersion", r.api_version),
                    ("kind", r.kind),
                    ("name", r.name),
                    ("uid", r.uid),
                ] {
                    o.insert(key.to_string(), Value::String(value.unwrap_or_default()));
                }
                if let Some(controller) = r.controller {
                    o.insert("controller".to_string(), Value::Bool(controller));
                }
                if let Some(block) = r.block_owner_deletion {
                    o.insert("blockOwnerDeletion".to_string(), Value::Bool(block));
                }
                Value::Object(o)
            })
            .collect();
        out.insert("ownerReferences".to_string(), Value::Array(refs));
    }
    if !meta.finalizers.is_empty() {
        out.insert("finalizers".to_string(), json!(meta.finalizers));
    }
    Value::Object(out)
}

/// A `metav1.Time` as RFC 3339 with seconds, `None` for the zero time.
fn time_json(time: &Time) -> Option<Value> {
    let seconds = time.seconds.unwrap_or(0);
    let nanos = time.nanos.unwrap_or(0);
    if seconds == 0 && nanos == 0 {
        return None;
    }
    let at = chrono::DateTime::from_timestamp(seconds, u32::try_from(nanos).unwrap_or(0))?;
    Some(Value::String(
        at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    ))
}

fn string_map(map: &BTreeMap<String, String>) -> Map<String, Value> {
    map.iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect()
}

fn bytes_map(map: &BTreeMap<String, Vec<u8>>) -> Map<String, Value> {
    map.iter()
        .map(|(k, v)| {
            (
                k.clone(),
                Value::String(base64::engine::general_purpose::STANDARD.encode(v)),
            )
        })
        .collect()
}

fn insert_nonempty(out: &mut Map<String, Value>, key: &str, map: Map<String, Value>) {
    if !map.is_empty() {
        out.insert(key.to_string(), Value::Object(map));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use k8s_pb::apimachinery::pkg::runtime::TypeMeta;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut body = MAGIC.to_vec();
        body.extend(unknown.encode_to_vec());
        body
    }

    #[test]
    fn decodes_a_secret_with_data_and_labels() {
        let secret = Secret {
            metadata: Some(ObjectMeta {
                name: Some("api-key".into()),
                namespace: Some("mail".into()),
                generate_name: Some(String::new()),
                labels: BTreeMap::from([("app".to_string(), "mailtarget".to_string())]),
                annotations: BTreeMap::from([("note".to_string(), "x".to_string())]),
                owner_references: vec![OwnerReference {
                    api_version: Some("mailtarget.co/v1alpha1".into()),
                    kind: Some("ApiKey".into()),
                    name: Some("key".into()),
                    uid: Some("u-1".into()),
                    controller: Some(true),
                    block_owner_deletion: None,
                }],
                creation_timestamp: Some(Time {
                    seconds: Some(0),
                    nanos: Some(0),
                }),
                ..Default::default()
            }),
            data: BTreeMap::from([("apiKey".to_string(), b"s3cr3t".to_vec())]),
            string_data: BTreeMap::from([("plain".to_string(), "text".to_string())]),
            r#type: Some("Opaque".into()),
            immutable: None,
        };
        let decoded = decode_protobuf_object(&envelope("v1", "Secret", secret.encode_to_vec()))
            .expect("decodes");
        assert_eq!(
            decoded,
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": "api-key", "namespace": "mail",
                    "labels": {"app": "mailtarget"}, "annotations": {"note": "x"},
                    "ownerReferences": [{"apiVersion": "mailtarget.co/v1alpha1", "kind": "ApiKey", "name": "key", "uid": "u-1", "controller": true}]
                },
                "data": {"apiKey": "czNjcjN0"},
                "stringData": {"plain": "text"},
                "type": "Opaque"
            })
        );
    }

    #[test]
    fn decodes_config_maps_and_namespaces() {
        let cm = ConfigMap {
            metadata: Some(ObjectMeta {
                name: Some("c".into()),
                ..Default::default()
            }),
            data: BTreeMap::from([("k".to_string(), "v".to_string())]),
            binary_data: BTreeMap::from([("b".to_string(), vec![0u8, 1])]),
            immutable: Some(true),
        };
        assert_eq!(
            decode_protobuf_object(&envelope("v1", "ConfigMap", cm.encode_to_vec()))
                .expect("decodes"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}, "binaryData": {"b": "AAE="}, "immutable": true})
        );
        let ns = Namespace {
            metadata: Some(ObjectMeta {
                name: Some("n".into()),
                creation_timestamp: Some(Time {
                    seconds: Some(1_700_000_000),
                    nanos: Some(0),
                }),
                ..Default::default()
            }),
            spec: None,
            status: None,
        };
        assert_eq!(
            decode_protobuf_object(&envelope("v1", "Namespace", ns.encode_to_vec()))
                .expect("decodes"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "creationTimestamp": "2023-11-14T22:13:20Z"}, "spec": {}})
        );
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(decode_protobuf_object(b"").is_err());
        assert!(decode_protobuf_object(b"k8s").is_err());
        assert!(decode_protobuf_object(b"{\"kind\":\"Secret\"}").is_err());
        let good = envelope("v1", "Secret", Secret::default().encode_to_vec());
        for cut in 0..good.len() {
            let _ = decode_protobuf_object(&good[..cut]);
        }
        let mut garbage = MAGIC.to_vec();
        garbage.extend([0xff, 0xff, 0xff, 0xff, 0x0f, 0x12]);
        assert!(decode_protobuf_object(&garbage).is_err());
        let truncated_inner = envelope("v1", "Secret", vec![0x0a, 0x10, 0x01]);
        assert!(decode_protobuf_object(&truncated_inner).is_err());
        let err = decode_protobuf_object(&envelope("apps/v1", "Deployment", Vec::new()))
            .expect_err("unsupported");
        assert_eq!(
            err,
            "protobuf decoding of apps/v1/Deployment is not supported by the test API server"
        );
    }
}
