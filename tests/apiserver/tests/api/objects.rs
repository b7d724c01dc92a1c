//! Object semantics through kube-rs and raw HTTP: metadata, generation, status subresource,
//! optimistic concurrency, validation errors, patches, server-side apply.
use crate::common;

use common::{Raw, server_with_widgets, widget, widgets};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn rv(o: &impl ResourceExt) -> u64 {
    o.resource_version().unwrap().parse().unwrap()
}

#[tokio::test]
async fn create_sets_uid_timestamp_generation_and_monotonic_rv() {
    let (_s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    let a = api
        .create(&PostParams::default(), &widget("a", "a.example.com"))
        .await
        .unwrap();
    let b = api
        .create(&PostParams::default(), &widget("b", "b.example.com"))
        .await
        .unwrap();
    assert!(a.metadata.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(a.metadata.creation_timestamp.is_some());
    assert_eq!(a.metadata.generation, Some(1));
    assert!(rv(&b) > rv(&a));
    let again = api
        .create(&PostParams::default(), &widget("a", "a.example.com"))
        .await
        .unwrap_err();
    match again {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "AlreadyExists");
            assert_eq!(s.message, "widgets.example.com \"a\" already exists");
        }
        e => panic!("unexpected {e}"),
    }
}

#[tokio::test]
async fn generation_bumps_on_spec_not_metadata_and_status_is_separate() {
    let (_s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    let mut w = widget("g", "g.example.com");
    w.data["status"] = json!({"observedGeneration": 99});
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    assert!(
        created.data.get("status").is_none(),
        "status dropped on create"
    );

    let pp = PatchParams::default();
    let labelled = api
        .patch(
            "g",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1));
    assert!(rv(&labelled) > rv(&created));

    let resized = api
        .patch("g", &pp, &Patch::Merge(json!({"spec": {"size": 3}})))
        .await
        .unwrap();
    assert_eq!(resized.metadata.generation, Some(2));

    // Status through the main endpoint is ignored.
    let ignored = api
        .patch(
            "g",
            &pp,
            &Patch::Merge(json!({"status": {"observedGeneration": 2}})),
        )
        .await
        .unwrap();
    assert!(ignored.data.get("status").is_none());
    assert_eq!(
        rv(&ignored),
        rv(&resized),
        "a no-op write keeps the resourceVersion"
    );

    // The status subresource changes only status and does not bump generation.
    let st = api
        .patch_status(
            "g",
            &pp,
            &Patch::Merge(json!({"spec": {"size": 9}, "status": {"observedGeneration": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["observedGeneration"], 2);
    assert_eq!(st.data["spec"]["size"], 3);
    assert_eq!(st.metadata.generation, Some(2));
}

#[tokio::test]
async fn stale_resource_version_is_conflict_and_missing_one_is_invalid() {
    let (_s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    let created = api
        .create(&PostParams::default(), &widget("c", "c.example.com"))
        .await
        .unwrap();
    let mut first = created.clone();
    first.data["spec"]["size"] = json!(4);
    api.replace("c", &PostParams::default(), &first)
        .await
        .unwrap();
    let mut stale = created.clone();
    stale.data["spec"]["size"] = json!(5);
    match api
        .replace("c", &PostParams::default(), &stale)
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "Conflict");
            assert!(
                s.message.contains("the object has been modified"),
                "{}",
                s.message
            );
        }
        e => panic!("unexpected {e}"),
    }
    let mut unconditional = created.clone();
    unconditional.metadata.resource_version = None;
    match api
        .replace("c", &PostParams::default(), &unconditional)
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => assert_eq!(s.code, 422),
        e => panic!("unexpected {e}"),
    }
    // A merge patch carrying a stale resourceVersion is a conflict too.
    let p =
        json!({"metadata": {"resourceVersion": created.resource_version()}, "spec": {"size": 6}});
    match api
        .patch("c", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => assert_eq!(s.code, 409),
        e => panic!("unexpected {e}"),
    }
}

/// A server-side apply carrying `metadata.resourceVersion` writes only over that version, on the
/// object and on its status subresource: a stale one is 409 Conflict and changes nothing (what
/// controllers rely on to never write from a stale cached copy).
#[tokio::test]
async fn apply_with_a_stale_resource_version_is_conflict() {
    let (_s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    let created = api
        .create(&PostParams::default(), &widget("a", "a.example.com"))
        .await
        .unwrap();
    let ssa = PatchParams::apply("test").force();
    let applied = |rv: Option<String>, part: Value| {
        let mut body = json!({
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "a", "resourceVersion": rv},
        });
        body.as_object_mut()
            .unwrap()
            .extend(part.as_object().unwrap().clone());
        Patch::Apply(body)
    };
    let status = |n: i64| json!({"status": {"observedGeneration": n}});
    let spec = |n: i64| json!({"spec": {"size": n}});
    let current = api
        .patch_status("a", &ssa, &applied(created.resource_version(), status(1)))
        .await
        .unwrap();
    assert_eq!(current.data["status"]["observedGeneration"], 1);

    let stale_status = api
        .patch_status("a", &ssa, &applied(created.resource_version(), status(7)))
        .await;
    let stale_spec = api
        .patch("a", &ssa, &applied(created.resource_version(), spec(7)))
        .await;
    for (what, answer) in [("status", stale_status), ("spec", stale_spec)] {
        match answer.unwrap_err() {
            kube::Error::Api(s) => {
                assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"), "{what}");
                assert!(s.message.contains("has been modified"), "{}", s.message);
            }
            e => panic!("unexpected {e}"),
        }
    }
    let unchanged = api.get("a").await.unwrap();
    assert_eq!(unchanged.resource_version(), current.resource_version());
    assert_eq!(unchanged.data["status"]["observedGeneration"], 1);
    assert_eq!(unchanged.data["spec"]["size"], 2);

    // The current version, or none at all, is accepted.
    let resized = api
        .patch("a", &ssa, &applied(current.resource_version(), spec(8)))
        .await
        .unwrap();
    assert_eq!(resized.data["spec"]["size"], 8);
    let unconditional = api
        .patch_status("a", &ssa, &applied(None, status(9)))
        .await
        .unwrap();
    assert_eq!(unconditional.data["status"]["observedGeneration"], 9);
}

#[tokio::test]
async fn names_generate_name_and_namespaces_are_checked() {
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    let bad: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "Bad_Name"}})).unwrap();
    match cms.create(&PostParams::default(), &bad).await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert_eq!(s.reason, "Invalid");
            assert!(
                s.message.starts_with(
                    "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\""
                ),
                "{}",
                s.message
            );
        }
        e => panic!("unexpected {e}"),
    }
    let generated: ConfigMap =
        serde_json::from_value(json!({"metadata": {"generateName": "cfg-"}})).unwrap();
    let made = cms
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let name = made.metadata.name.unwrap();
    assert!(name.starts_with("cfg-") && name.len() == 9, "{name}");

    let missing = raw
        .post(
            "/api/v1/namespaces/nowhere/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
        )
        .await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body["message"], "namespaces \"nowhere\" not found");
    assert_eq!(missing.body["details"]["kind"], "namespaces");

    let nameless = raw
        .post(
            "/api/v1/namespaces/test/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        )
        .await;
    assert_eq!(nameless.status, 422);
    assert_eq!(
        nameless.body["details"]["causes"][0]["field"],
        "metadata.name"
    );
}

#[tokio::test]
async fn get_and_delete_unknown_object_is_not_found() {
    let (_s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    match api.get("ghost").await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 404);
            assert_eq!(s.message, "widgets.example.com \"ghost\" not found");
        }
        e => panic!("unexpected {e}"),
    }
    assert!(api.get_opt("ghost").await.unwrap().is_none());
    match api
        .delete("ghost", &DeleteParams::default())
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => assert_eq!(s.code, 404),
        e => panic!("unexpected {e}"),
    }
}

#[tokio::test]
async fn patch_formats() {
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let api = widgets(&client, "test");
    api.create(&PostParams::default(), &widget("p", "p.example.com"))
        .await
        .unwrap();
    // Strategic merge patch is refused for custom resources, as by kube-apiserver.
    let smp = raw
        .send(
            "PATCH",
            "/apis/example.com/v1/namespaces/test/widgets/p",
            Some("application/strategic-merge-patch+json"),
            Some(json!({"spec": {"size": 3}})),
        )
        .await;
    assert_eq!(smp.status, 415);
    assert_eq!(smp.body["reason"], "UnsupportedMediaType");

    // Strategic merge patch of a built-in.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "cm"}, "data": {"a": "1"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let patched = cms
        .patch(
            "cm",
            &PatchParams::default(),
            &Patch::Strategic(json!({"data": {"b": "2"}})),
        )
        .await
        .unwrap();
    let data = patched.data.unwrap();
    assert_eq!(data.get("a").map(String::as_str), Some("1"));
    assert_eq!(data.get("b").map(String::as_str), Some("2"));

    // Merge patch with null removes a key.
    let merged = cms
        .patch(
            "cm",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": null}})),
        )
        .await
        .unwrap();
    assert!(!merged.data.unwrap().contains_key("a"));
}

#[tokio::test]
async fn json_patch_applies_operations() {
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let api = widgets(&client, "test");
    api.create(&PostParams::default(), &widget("j", "j.example.com"))
        .await
        .unwrap();
    let ops = json!([
        {"op": "replace", "path": "/spec/size", "value": 7},
        {"op": "add", "path": "/metadata/labels", "value": {"k": "v"}}
    ]);
    let a = raw
        .send(
            "PATCH",
            "/apis/example.com/v1/namespaces/test/widgets/j",
            Some("application/json-patch+json"),
            Some(ops),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.body["spec"]["size"], 7);
    assert_eq!(a.body["metadata"]["labels"]["k"], "v");
    let failing = json!([{"op": "test", "path": "/spec/size", "value": 1}]);
    let b = raw
        .send(
            "PATCH",
            "/apis/example.com/v1/namespaces/test/widgets/j",
            Some("application/json-patch+json"),
            Some(failing),
        )
        .await;
    assert_eq!(b.status, 422, "{}", b.text);
}

#[tokio::test]
async fn server_side_apply_creates_then_updates_and_reports_conflicts() {
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let api = widgets(&client, "test");
    let body = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "ssa"}, "spec": {"domain": "ssa.example.com", "size": 2}});
    let created = raw
        .send(
            "PATCH",
            "/apis/example.com/v1/namespaces/test/widgets/ssa?fieldManager=alice&fieldValidation=Strict&force=false",
            Some("application/apply-patch+yaml"),
            Some(body.clone()),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let again = raw
        .send(
            "PATCH",
            "/apis/example.com/v1/namespaces/test/widgets/ssa?fieldManager=alice",
            Some("application/apply-patch+yaml"),
            Some(body.clone()),
        )
        .await;
    assert_eq!(again.status, 200);

    let mut bob = body.clone();
    bob["spec"]["size"] = json!(4);
    let conflict = api
        .patch(
            "ssa",
            &PatchParams::apply("bob"),
            &Patch::Apply(bob.clone()),
        )
        .await
        .unwrap_err();
    match conflict {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "Conflict");
            assert!(s.message.contains("alice"), "{}", s.message);
        }
        e => panic!("unexpected {e}"),
    }
    let forced = api
        .patch(
            "ssa",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(bob),
        )
        .await
        .unwrap();
    assert_eq!(forced.data["spec"]["size"], 4);

    let no_manager = raw
        .send(
            "PATCH",
            "/apis/example.com/v1/namespaces/test/widgets/ssa",
            Some("application/apply-patch+yaml"),
            Some(body),
        )
        .await;
    assert_eq!(no_manager.status, 422);
}

#[tokio::test]
async fn field_validation_strict_warn_and_dry_run() {
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let body = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "fv"},
        "spec": {"domain": "fv.example.com", "x": 1}});
    let strict = raw
        .post(
            "/apis/example.com/v1/namespaces/test/widgets?fieldValidation=Strict",
            body.clone(),
        )
        .await;
    assert_eq!(strict.status, 400, "{}", strict.text);
    assert_eq!(strict.body["reason"], "BadRequest");
    assert_eq!(
        strict.body["message"],
        "strict decoding error: unknown field \"spec.x\""
    );

    let dry = raw
        .post(
            "/apis/example.com/v1/namespaces/test/widgets?dryRun=All&fieldValidation=Ignore",
            body.clone(),
        )
        .await;
    assert_eq!(dry.status, 201);
    assert!(dry.body["spec"].get("x").is_none(), "unknown field pruned");
    assert!(
        widgets(&client, "test")
            .get_opt("fv")
            .await
            .unwrap()
            .is_none(),
        "dry run stored nothing"
    );

    let warned = raw
        .post("/apis/example.com/v1/namespaces/test/widgets", body)
        .await;
    assert_eq!(warned.status, 201);
    let warning = warned.headers.get("warning").unwrap().to_str().unwrap();
    assert!(warning.contains("unknown field"), "{warning}");
}

#[tokio::test]
async fn invalid_custom_resource_is_422_naming_the_field() {
    let (_s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    let mut w = widget("big", "big.example.com");
    w.data["spec"]["size"] = json!(42);
    match api.create(&PostParams::default(), &w).await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert_eq!(s.reason, "Invalid");
            assert!(
                s.message.starts_with(
                    "Widget.example.com \"big\" is invalid: spec.size: Invalid value: 42"
                ),
                "{}",
                s.message
            );
        }
        e => panic!("unexpected {e}"),
    }
    // The CEL rule keeps spec.domain immutable.
    let created = api
        .create(&PostParams::default(), &widget("imm", "imm.example.com"))
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["size"], 2);
    let err = api
        .patch(
            "imm",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"domain": "other.example.com"}})),
        )
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(s.message.contains("spec.domain"), "{}", s.message);
            assert!(s.message.contains("domain is immutable"), "{}", s.message);
        }
        e => panic!("unexpected {e}"),
    }
}

#[tokio::test]
async fn defaults_are_applied() {
    let (_s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    let mut w = widget("d", "d.example.com");
    w.data["spec"].as_object_mut().unwrap().remove("size");
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.data["spec"]["size"], 1);
}

#[tokio::test]
async fn secrets_merge_string_data_and_events_convert_between_apis() {
    let (s, client) = server_with_widgets().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "test");
    let sec: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}}))
            .unwrap();
    let made = secrets.create(&PostParams::default(), &sec).await.unwrap();
    assert_eq!(made.data.unwrap()["k"].0, b"v".to_vec());
    assert!(made.string_data.is_none());
    assert_eq!(made.type_.as_deref(), Some("Opaque"));

    let raw = Raw::new(&s);
    let ev = raw
        .post(
            "/apis/events.k8s.io/v1/namespaces/test/events",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
                "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "ctl", "reportingInstance": "ctl-1",
                "action": "Reconcile", "reason": "Created", "type": "Normal", "note": "made it",
                "regarding": {"kind": "Widget", "name": "w", "namespace": "test"}}),
        )
        .await;
    assert_eq!(ev.status, 201, "{}", ev.text);
    let core = raw.get("/api/v1/namespaces/test/events/e1").await;
    assert_eq!(core.body["message"], "made it");
    assert_eq!(core.body["involvedObject"]["name"], "w");
    let listed = raw
        .get("/api/v1/namespaces/test/events?fieldSelector=involvedObject.name%3Dw")
        .await;
    assert_eq!(listed.body["items"].as_array().unwrap().len(), 1);
}

/// An Event's note is at most 1024 bytes, as kube-apiserver's `NoteLengthLimit`: 1024 bytes
/// (of two-byte characters) are stored, 1025 are refused with 422 naming the field.
#[tokio::test]
async fn event_notes_longer_than_1024_bytes_are_invalid() {
    let (s, _client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let event = |name: &str, note: String| {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
            "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "ctl", "reportingInstance": "ctl-1",
            "action": "Reconcile", "reason": "Failed", "type": "Warning", "note": note,
            "regarding": {"kind": "Widget", "name": "w", "namespace": "test"}})
    };
    let path = "/apis/events.k8s.io/v1/namespaces/test/events";
    let fits = raw.post(path, event("fits", "é".repeat(512))).await;
    assert_eq!(fits.status, 201, "{}", fits.text);
    let long = raw
        .post(path, event("long", format!("{}x", "é".repeat(512))))
        .await;
    assert_eq!(long.status, 422, "{}", long.text);
    assert_eq!(
        long.body["message"],
        "Event.events.k8s.io \"long\" is invalid: message: Invalid value: \"\": can have at most 1024 characters"
    );
    assert_eq!(long.body["details"]["causes"][0]["field"], "message");
}

#[tokio::test]
async fn namespaces_start_and_deleting_one_deletes_its_objects() {
    let (_s, client) = server_with_widgets().await;
    let nss: Api<Namespace> = Api::all(client.clone());
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"default".to_string()) && names.contains(&"kube-system".to_string()));
    let api = widgets(&client, "test");
    api.create(&PostParams::default(), &widget("n1", "n1.example.com"))
        .await
        .unwrap();
    nss.delete("test", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("n1").await.unwrap().is_none());
    assert!(nss.get_opt("test").await.unwrap().is_none());
}

#[tokio::test]
async fn leases_round_trip() {
    use k8s_openapi::api::coordination::v1::Lease;
    let (_s, client) = server_with_widgets().await;
    let leases: Api<Lease> = Api::namespaced(client, "test");
    let l: Lease = serde_json::from_value(json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}})).unwrap();
    leases.create(&PostParams::default(), &l).await.unwrap();
    let got = leases.get("leader").await.unwrap();
    assert_eq!(got.spec.unwrap().holder_identity.as_deref(), Some("me"));
}
