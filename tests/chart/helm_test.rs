//! The `helm test` hook: a Pod that runs the operator's own image with `mailtarget-operator
//! probe` against `/readyz` through the metrics Service (the image has no curl). The rendered
//! Pod is checked field by field, and its very arguments are run with the real binary against
//! a live health server of the operator.

use std::net::SocketAddr;
use std::process::Output;
use std::sync::Arc;

use clap::{Args, FromArgMatches};
use k8s_openapi::api::core::v1::Pod;
use mailtarget_operator::cli::probe::ProbeArgs;
use mailtarget_operator::controller::metrics::Metrics;
use mailtarget_operator::controller::readiness::{Crds, Readiness, Role};
use mailtarget_operator::controller::server::{Health, serve};
use serde_json::Value;

use super::helm::{Rendered, all_options, defaults, require_helm};

/// The rendered test Pod and its container's arguments.
fn test_pod(r: &Rendered) -> (Value, Vec<String>) {
    assert_eq!(r.hooks.len(), 1, "one hook");
    let raw = r.hooks[0].clone();
    let pod: Pod = serde_json::from_value(raw.clone()).expect("a Pod");
    let spec = pod.spec.expect("a pod spec");
    assert_eq!(spec.containers.len(), 1);
    (raw, spec.containers[0].args.clone().unwrap_or_default())
}

/// The arguments after `probe`, as the binary's `probe` subcommand parses them.
fn parse_probe(args: &[String]) -> ProbeArgs {
    assert_eq!(args.first().map(String::as_str), Some("probe"), "{args:?}");
    let cmd = ProbeArgs::augment_args(clap::Command::new("probe"));
    let matches = cmd
        .try_get_matches_from(args)
        .unwrap_or_else(|e| panic!("the binary refuses {args:?}: {e}"));
    ProbeArgs::from_arg_matches(&matches).expect("probe arguments")
}

/// The test Pod is a `test` hook that probes `/readyz` of the metrics Service at its port,
/// runs the operator's image hardened like the operator, and is selected by nothing of the
/// release (the Deployment would adopt it, the Service would route to it).
#[test]
fn test_pod_probes_the_service() {
    if !require_helm("test_pod_probes_the_service") {
        return;
    }
    for r in [defaults(), all_options()] {
        let (raw, args) = test_pod(r);
        assert_eq!(raw["metadata"]["annotations"]["helm.sh/hook"], "test");
        let probe = parse_probe(&args);
        let service = r.one("Service");
        let host = format!(
            "{}.{}.svc",
            service["metadata"]["name"].as_str().unwrap_or_default(),
            service["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
        );
        assert_eq!(probe.url.host_str(), Some(host.as_str()));
        assert_eq!(
            probe.url.port().map(i64::from),
            service["spec"]["ports"][0]["port"].as_i64()
        );
        assert_eq!(probe.url.path(), "/readyz");

        let spec = &raw["spec"];
        let deployment = r.one("Deployment");
        let operator = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(spec["containers"][0]["image"], operator["image"]);
        assert_eq!(
            spec["containers"][0]["securityContext"],
            operator["securityContext"]
        );
        assert_eq!(spec["restartPolicy"], "Never");
        assert_eq!(spec["automountServiceAccountToken"], false);
        let labels = &raw["metadata"]["labels"];
        for selector in [
            &deployment["spec"]["selector"]["matchLabels"],
            &service["spec"]["selector"],
        ] {
            let all_match = selector
                .as_object()
                .is_some_and(|m| m.iter().all(|(k, v)| &labels[k] == v));
            assert!(!all_match, "{selector} selects the test Pod {labels}");
        }
    }
    let (_, args) = test_pod(all_options());
    assert_eq!(
        parse_probe(&args).timeout,
        std::time::Duration::from_secs(15)
    );
}

/// Runs the binary with `args`, the URL's address replaced by `addr`.
async fn run_probe(args: &[String], addr: SocketAddr) -> Output {
    let mut args = args.to_vec();
    let url = args
        .iter_mut()
        .skip_while(|a| a.as_str() != "--url")
        .nth(1)
        .expect("a --url argument");
    let mut parsed = url::Url::parse(url).expect("a URL");
    parsed.set_host(Some(&addr.ip().to_string())).expect("host");
    parsed.set_port(Some(addr.port())).expect("port");
    *url = parsed.to_string();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_mailtarget-operator"))
            .args(&args)
            .output()
            .expect("the binary runs")
    })
    .await
    .expect("probe finished")
}

/// The rendered arguments, run with the real binary against the operator's own health server:
/// exit 1 naming the 503 while it is not ready, exit 0 once ready; exit 1 too when nothing
/// listens or the server never answers (within the probe's timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_follows_the_operators_readiness() {
    if !require_helm("probe_follows_the_operators_readiness") {
        return;
    }
    let (_, args) = test_pod(defaults());
    let readiness = Arc::new(Readiness::new(Role::Standby));
    let health = Health {
        metrics: Arc::new(Metrics::default()),
        readiness: readiness.clone(),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let addr = serve("127.0.0.1:0".parse().unwrap(), health, async {
        let _ = stopped.await;
    })
    .await
    .expect("the health server starts");
    let text = |o: &Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let bounded = |f| tokio::time::timeout(std::time::Duration::from_secs(60), f);

    let starting = bounded(run_probe(&args, addr)).await.expect("ends");
    assert_eq!(starting.status.code(), Some(1), "{}", text(&starting));
    assert!(text(&starting).contains("503"), "{}", text(&starting));
    readiness.set_crds(Crds::Established);
    let up = bounded(run_probe(&args, addr)).await.expect("ends");
    assert_eq!(up.status.code(), Some(0), "{}", text(&up));
    assert!(text(&up).contains("200"), "{}", text(&up));
    let _ = stop.send(());

    // Nothing listening: a free port, bound and released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let refused = bounded(run_probe(&args, closed)).await.expect("ends");
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));

    // A server that accepts and never answers: the probe gives up after its timeout.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let silent_addr = silent.local_addr().expect("addr");
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let mut quick = args.clone();
    let timeout = quick
        .iter()
        .position(|a| a == "--timeout")
        .expect("a --timeout argument");
    quick[timeout + 1] = "1s".into();
    let hung = bounded(run_probe(&quick, silent_addr)).await.expect("ends");
    assert_eq!(hung.status.code(), Some(1), "{}", text(&hung));
    assert!(text(&hung).contains("no answer within"), "{}", text(&hung));
    hold.abort();
}
