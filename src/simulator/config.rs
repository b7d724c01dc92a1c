//! Configuration of a simulator instance.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use super::faults::FaultConfig;

/// Configuration of one [`Simulator`](super::Simulator).
///
/// Build it with [`SimulatorConfig::new`] and adjust the public fields.
#[derive(Clone)]
pub struct SimulatorConfig {
    /// Address to listen on; default `127.0.0.1:0` (a free port, see
    /// [`Simulator::addr`](super::Simulator::addr)).
    pub listen: SocketAddr,
    /// The company-level API key. It always authenticates (as the company) and is not listed
    /// by `GET /api-key`. A secret: never shown by `Debug`.
    pub api_key: String,
    /// The suppression list: email addresses, compared case-insensitively. Applied to a
    /// transmission exactly when its `optionsAttributes.transactional` is `false` (the interface
    /// document, section "What the service does").
    pub suppress: Vec<String>,
    /// Number of `PUT /domain/sending/{id}/verify-txt` calls on a domain after which it counts
    /// as verified; default 1. `0` means a domain is verified as soon as it is created.
    pub verify_after_calls: u32,
    /// Fixed delay added to every interface response (before the handler runs); default 0.
    pub latency: Duration,
    /// Initial fault injection settings; default: no faults. Change them at runtime with
    /// [`Simulator::faults`](super::Simulator::faults) or `PUT /_simulator/faults`.
    pub faults: FaultConfig,
    /// Bearer key protecting the `/_simulator/*` control endpoints; `None` means the same as
    /// [`api_key`](Self::api_key). A secret: never shown by `Debug`.
    pub admin_key: Option<String>,
    /// Serve HTTPS with this certificate and key instead of plain HTTP; default `None`.
    pub tls: Option<TlsIdentity>,
}

/// The certificate and private key of a simulator serving HTTPS (rustls).
#[derive(Clone)]
pub struct TlsIdentity {
    /// PEM: the server certificate, then any intermediate certificates.
    pub cert_chain_pem: Vec<u8>,
    /// PEM: the private key (PKCS#8, PKCS#1 or SEC1). A secret: never shown by `Debug`.
    pub private_key_pem: Vec<u8>,
}

impl fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsIdentity")
            .field(
                "cert_chain_pem",
                &format!("{} bytes", self.cert_chain_pem.len()),
            )
            .field("private_key_pem", &"<redacted>")
            .finish()
    }
}

impl SimulatorConfig {
    /// A configuration with the given company key and every other field at its default:
    /// listen `127.0.0.1:0`, empty suppression list, `verify_after_calls` 1, no latency, no
    /// faults, admin key = company key.
    pub fn new(api_key: impl Into<String>) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            api_key: api_key.into(),
            suppress: Vec::new(),
            verify_after_calls: 1,
            latency: Duration::ZERO,
            faults: FaultConfig::default(),
            admin_key: None,
            tls: None,
        }
    }

    /// The key that protects `/_simulator/*`: `admin_key`, or `api_key` when unset.
    pub fn effective_admin_key(&self) -> &str {
        self.admin_key.as_deref().unwrap_or(&self.api_key)
    }
}

impl fmt::Debug for SimulatorConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimulatorConfig")
            .field("listen", &self.listen)
            .field("api_key", &"<redacted>")
            .field("suppress", &self.suppress)
            .field("verify_after_calls", &self.verify_after_calls)
            .field("latency", &self.latency)
            .field("faults", &self.faults)
            .field("admin_key", &self.admin_key.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debug output never shows the company or admin key.
    #[test]
    fn debug_redacts_keys() {
        let mut config = SimulatorConfig::new("company-secret");
        config.admin_key = Some("admin-secret".into());
        let shown = format!("{config:?}");
        assert!(!shown.contains("company-secret"));
        assert!(!shown.contains("admin-secret"));
    }

    /// Without an admin key the company key protects the control endpoints.
    #[test]
    fn admin_key_defaults_to_company_key() {
        let mut config = SimulatorConfig::new("k");
        assert_eq!(config.effective_admin_key(), "k");
        config.admin_key = Some("a".into());
        assert_eq!(config.effective_admin_key(), "a");
    }
}
