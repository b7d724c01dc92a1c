//! The company key read from a file (`ClientConfig::from_key_file`, the operator's
//! `--api-key-file`, the chart's mounted Secret): a key written to the file is used by the next
//! call, without building a new client.

use mailtarget_operator::api::{ApiError, Client, ClientConfig, ListApiKeysQuery};
use mailtarget_operator::simulator::{Simulator, SimulatorConfig};
use url::Url;

use super::{COMPANY_KEY, bounded};

/// Replaces `path`'s content the way the kubelet updates a mounted Secret: a new file renamed
/// over the old one.
fn rotate(path: &std::path::Path, key: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, format!("{key}\n")).expect("write the new key");
    std::fs::rename(&next, path).expect("swap the key file");
}

/// The key file is read again when it changes: a wrong key gives 401 on the very next call, the
/// right key written back works on the call after, and the 401 never shows the key.
#[tokio::test]
async fn rotated_key_file_is_used_by_the_next_call() {
    bounded(async {
        let sim = Simulator::start(SimulatorConfig::new(COMPANY_KEY))
            .await
            .expect("simulator");
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("api-key");
        rotate(&path, COMPANY_KEY);
        let config = ClientConfig::from_key_file(
            Url::parse(&sim.base_url()).unwrap(),
            Url::parse(&sim.transmission_url()).unwrap(),
            path.clone(),
        )
        .expect("the key file is read");
        // Checked before every request here; by default at most once per second.
        let config = ClientConfig {
            key_file_check_interval: std::time::Duration::ZERO,
            ..config
        };
        let client = Client::new(config).expect("client builds");
        let list = || async { client.list_api_keys(&ListApiKeysQuery::default()).await };
        list().await.expect("the first key works");

        rotate(&path, "revoked-key-SECRET");
        let err = list().await.expect_err("the rotated (wrong) key is sent");
        assert!(matches!(err, ApiError::Unauthorized { .. }), "{err:?}");
        assert!(!format!("{err} {err:?}").contains("revoked-key-SECRET"));

        rotate(&path, COMPANY_KEY);
        list().await.expect("the key written back works at once");
        let statuses: Vec<u16> = sim.request_log().iter().map(|r| r.status).collect();
        assert_eq!(statuses, [200, 401, 200]);
        sim.shutdown().await;
    })
    .await;
}

/// A key file that is missing or empty at start is refused, naming the file.
#[test]
fn unusable_key_file_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("api-key");
    let url = Url::parse("http://127.0.0.1:1").unwrap();
    let missing = ClientConfig::from_key_file(url.clone(), url.clone(), path.clone())
        .expect_err("missing file");
    assert!(missing.to_string().contains("api-key"), "{missing}");
    std::fs::write(&path, "\n").expect("write");
    let empty = ClientConfig::from_key_file(url.clone(), url, path).expect_err("empty file");
    assert!(empty.to_string().contains("is empty"), "{empty}");
}
