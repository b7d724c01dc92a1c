//! A real protobuf body from kubectl decodes: `kubectl create secret generic` runs against a tiny
//! recording HTTP listener, and the body it POSTs must decode to the Secret it describes. A body
//! captured the same way is kept under `tests/fixtures` so the decoding is checked even where
//! kubectl is not installed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use mailtarget_test_apiserver::protobuf::decode_protobuf_object;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// The Secret `kubectl create secret generic s --from-literal=a=b -n default` describes.
fn expected_secret() -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}, "data": {"a": "Yg=="}})
}

/// One recorded request: method, path, content type and body.
#[derive(Debug)]
struct Recorded {
    method: String,
    path: String,
    content_type: String,
    body: Vec<u8>,
}

/// Reads one HTTP/1.1 request (headers and a `Content-Length` body); `None` at end of stream.
async fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Recorded> {
    let mut line = String::new();
    if reader.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut length = 0usize;
    let mut content_type = String::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).await.ok()? == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().ok()?,
                "content-type" => content_type = value.trim().to_string(),
                _ => {}
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).await.ok()?;
    Some(Recorded {
        method,
        path,
        content_type,
        body,
    })
}

/// Serves one connection: `/version` answers 1.32, a POST of secrets is recorded and answered
/// 201 with the expected Secret as JSON, anything else 404.
async fn serve(stream: TcpStream, seen: mpsc::UnboundedSender<Recorded>) {
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader).await {
        let (status, body) = if request.path.starts_with("/version") {
            (
                "200 OK",
                json!({"major": "1", "minor": "32", "gitVersion": "v1.32.0", "platform": "linux/amd64"}),
            )
        } else if request.method == "POST" && request.path.contains("/secrets") {
            ("201 Created", expected_secret())
        } else {
            (
                "404 Not Found",
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}),
            )
        };
        let _ = seen.send(request);
        let text = body.to_string();
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if reader
            .get_mut()
            .write_all(response.as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

fn kubectl_available() -> bool {
    std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// kubectl's own protobuf POST body decodes to the Secret it describes.
#[tokio::test]
async fn kubectl_create_secret_body_decodes() {
    if !kubectl_available() {
        eprintln!("kubectl is not installed; the captured fixture test still covers decoding");
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let server = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, tx.clone()));
        }
    });
    let home = tempfile::tempdir().expect("temp home");
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("kubectl")
            .args([
                "create",
                "secret",
                "generic",
                "s",
                "--from-literal=a=b",
                "-n",
                "default",
            ])
            .arg(format!("--server=http://127.0.0.1:{port}"))
            .env("HOME", home.path())
            .env("KUBECONFIG", home.path().join("none"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("kubectl finishes within a minute")
    .expect("kubectl runs");
    server.abort();
    assert!(
        output.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );

    let mut post = None;
    while let Ok(request) = rx.try_recv() {
        if request.method == "POST" {
            post = Some(request);
        }
    }
    let post = post.expect("kubectl POSTed the secret");
    assert_eq!(
        post.path,
        "/api/v1/namespaces/default/secrets?fieldManager=kubectl-create&fieldValidation=Strict"
    );
    assert!(
        post.content_type
            .starts_with("application/vnd.kubernetes.protobuf"),
        "{}",
        post.content_type
    );
    assert!(post.body.starts_with(b"k8s\0"));
    if std::env::var_os("CAPTURE_KUBECTL_FIXTURE").is_some() {
        std::fs::write(fixture_path(), &post.body).expect("fixture written");
    }
    let mut decoded = decode_protobuf_object(&post.body).expect("decodes");
    // kubectl sends a zero creationTimestamp, which the decoder leaves out.
    assert_eq!(decoded.pointer_mut("/metadata/creationTimestamp"), None);
    assert_eq!(decoded, expected_secret());
}

/// Where the captured body lives; `CAPTURE_KUBECTL_FIXTURE=1 cargo test -p mailtarget-test-apiserver --test api kubectl_protobuf::`
/// rewrites it from the live run.
fn fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kubectl-create-secret.pb")
}

/// The body kubectl 1.32 sent for `kubectl create secret generic s --from-literal=a=b -n default`,
/// captured with the listener above, decodes to that Secret.
#[test]
fn captured_kubectl_body_decodes() {
    let body = std::fs::read(fixture_path()).expect("fixture present");
    assert_eq!(
        decode_protobuf_object(&body).expect("decodes"),
        expected_secret()
    );
}
