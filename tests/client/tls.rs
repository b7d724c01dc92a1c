//! The client over TLS: the simulator served with rustls (axum-server) and a certificate signed
//! by a test CA made with rcgen, all on loopback. The client trusts the CA only when its
//! certificate is given as a CA bundle, and says so clearly when it is not; the same holds for
//! the binary's `--ca-bundle` and for the `simulator --tls-cert/--tls-key` mode.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use mailtarget_operator::api::{ApiError, Client, ListApiKeysQuery};
use mailtarget_operator::simulator::{Simulator, SimulatorConfig, TlsIdentity};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::{COMPANY_KEY, bounded, config_for};

/// A certificate authority made for one test.
struct TestCa {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        TestCa {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A server certificate for `localhost` and `127.0.0.1`, signed by this CA.
    fn server_identity(&self) -> TlsIdentity {
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
                .expect("server params");
        params
            .distinguished_name
            .push(DnType::CommonName, "simulator");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().expect("server key");
        let cert = params.signed_by(&key, &self.issuer).expect("server cert");
        TlsIdentity {
            cert_chain_pem: cert.pem().into_bytes(),
            private_key_pem: key.serialize_pem().into_bytes(),
        }
    }
}

async fn tls_simulator(ca: &TestCa) -> Simulator {
    let mut config = SimulatorConfig::new(COMPANY_KEY);
    config.tls = Some(ca.server_identity());
    Simulator::start(config).await.expect("TLS simulator")
}

fn client(sim: &Simulator, bundle: Option<String>) -> Client {
    let mut config = config_for(sim, COMPANY_KEY);
    config.retry = mailtarget_operator::api::RetryPolicy::none();
    config.ca_bundle_pem = bundle.map(String::into_bytes);
    Client::new(config).expect("client builds")
}

/// With the test CA in its bundle the client talks to the TLS simulator; the bundle may hold
/// several certificates (an unrelated CA first).
#[tokio::test]
async fn ca_bundle_makes_the_private_ca_trusted() {
    bounded(async {
        let ca = TestCa::new("mailtarget test CA");
        let sim = tls_simulator(&ca).await;
        assert!(
            sim.base_url().starts_with("https://127.0.0.1:"),
            "{}",
            sim.base_url()
        );
        let keys = client(&sim, Some(ca.cert_pem.clone()))
            .list_api_keys(&ListApiKeysQuery::default())
            .await
            .expect("the CA bundle makes the server trusted");
        assert!(keys.api_keys.is_empty());
        let other = TestCa::new("unrelated CA");
        let bundle = format!("{}{}", other.cert_pem, ca.cert_pem);
        client(&sim, Some(bundle))
            .list_api_keys(&ListApiKeysQuery::default())
            .await
            .expect("a bundle of two certificates");
        assert_eq!(
            sim.request_log().len(),
            2,
            "both calls reached the simulator"
        );
        sim.shutdown().await;
    })
    .await;
}

/// Without the CA (no bundle, or a bundle of another CA) the call fails before anything is
/// sent, with a transport error that names the untrusted certificate and the option to fix it.
#[tokio::test]
async fn untrusted_certificate_is_a_clear_error() {
    bounded(async {
        let ca = TestCa::new("mailtarget test CA");
        let sim = tls_simulator(&ca).await;
        let other = TestCa::new("unrelated CA");
        for bundle in [None, Some(other.cert_pem.clone())] {
            let err = client(&sim, bundle.clone())
                .list_api_keys(&ListApiKeysQuery::default())
                .await
                .expect_err("an untrusted server certificate is refused");
            assert!(matches!(err, ApiError::Transport { .. }), "{err:?}");
            let text = err.to_string();
            assert!(
                text.contains("TLS certificate is not trusted")
                    && text.contains("UnknownIssuer")
                    && text.contains("--ca-bundle (MAILTARGET_CA_BUNDLE)"),
                "bundle {}: {text}",
                bundle.is_some()
            );
            assert!(!text.contains(COMPANY_KEY), "the error shows the key");
        }
        assert!(sim.request_log().is_empty(), "no request got through");
        sim.shutdown().await;
    })
    .await;
}

/// The binary end to end: `simulator --tls-cert --tls-key` announces an `https://` address, and
/// `plan` reaches it with `MAILTARGET_CA_BUNDLE` and fails without, pointing at the option.
#[tokio::test]
async fn binary_serves_and_trusts_through_files() {
    bounded(async {
        let dir = tempfile::tempdir().expect("temp dir");
        let ca = TestCa::new("mailtarget test CA");
        let identity = ca.server_identity();
        let cert = dir.path().join("server.crt");
        let key = dir.path().join("server.key");
        let bundle = dir.path().join("ca.crt");
        std::fs::write(&cert, &identity.cert_chain_pem).expect("write cert");
        std::fs::write(&key, &identity.private_key_pem).expect("write key");
        std::fs::write(&bundle, &ca.cert_pem).expect("write bundle");
        let manifest = dir.path().join("sub.yaml");
        std::fs::write(
            &manifest,
            "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: team-a}\nspec: {}\n",
        )
        .expect("write manifest");

        let binary = env!("CARGO_BIN_EXE_mailtarget-operator");
        let mut server = KillOnDrop(Command::new(binary)
            .args(["simulator", "--listen", "127.0.0.1:0", "--api-key", COMPANY_KEY])
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("simulator starts"));
        let stdout = server.0.stdout.take().expect("stdout");
        let line = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).map(|_| line)
        })
        .await
        .expect("reader")
        .expect("a line");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .expect("listening line")
            .to_string();
        assert!(url.starts_with("https://127.0.0.1:"), "{line}");

        let plan = move |with_bundle: bool| {
            let mut cmd = Command::new(binary);
            cmd.arg("plan")
                .arg("-f")
                .arg(&manifest)
                .env("MAILTARGET_API_KEY", COMPANY_KEY)
                .env("MAILTARGET_API_URL", &url)
                .env("MAILTARGET_TRANSMISSION_URL", format!("{url}/v1"))
                .env("MAILTARGET_API_TIMEOUT", "10")
                .env_remove("MAILTARGET_CA_BUNDLE")
                .env_remove("MAILTARGET_API_KEY_FILE");
            if with_bundle {
                cmd.env("MAILTARGET_CA_BUNDLE", &bundle);
            }
            cmd.output().expect("plan runs")
        };
        let trusted = tokio::task::spawn_blocking(move || (plan(true), plan(false)))
            .await
            .expect("plans");
        let (with, without) = trusted;
        let text = |o: &std::process::Output| {
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        };
        assert!(with.status.success(), "{}", text(&with));
        assert!(text(&with).contains("team-a"), "{}", text(&with));
        assert_eq!(without.status.code(), Some(1), "{}", text(&without));
        assert!(
            text(&without).contains("not trusted") && text(&without).contains("--ca-bundle"),
            "{}",
            text(&without)
        );
        drop(server);
    })
    .await;
}

/// A child process killed (and reaped) when dropped, also when the test fails half-way.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
