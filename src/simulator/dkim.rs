//! DKIM key pairs for sending domains: real Ed25519 key pairs (RFC 8463) made with `ring`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair};

/// A fresh key pair in the forms the sending domain detail shows.
pub(crate) struct DkimKeyPair {
    /// Base64 (standard alphabet, padded) of the raw 32-byte public key: the `p=` value.
    pub public_key: String,
    /// The PKCS#8 document as PEM (`-----BEGIN PRIVATE KEY-----`, LF line ends).
    pub private_key_pem: String,
}

/// Generates a key pair.
///
/// # Errors
/// When the system random number generator fails.
pub(crate) fn generate() -> Result<DkimKeyPair, ring::error::Unspecified> {
    let rng = SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng)?;
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).map_err(|_| ring::error::Unspecified)?;
    let public_key = STANDARD.encode(pair.public_key().as_ref());
    let pem = pem::Pem::new("PRIVATE KEY", pkcs8.as_ref());
    let private_key_pem = pem::encode_config(
        &pem,
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    );
    Ok(DkimKeyPair {
        public_key,
        private_key_pem,
    })
}

/// The DKIM TXT record value: `v=DKIM1; k=ed25519; p=<public key>`.
pub(crate) fn txt_value(public_key: &str) -> String {
    format!("v=DKIM1; k=ed25519; p={public_key}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{ED25519, UnparsedPublicKey};

    /// A signature made with the PEM private key verifies with the base64 public key.
    #[test]
    fn pem_private_key_matches_public_key() {
        let keys = generate().unwrap();
        let der = pem::parse(&keys.private_key_pem).unwrap();
        assert_eq!(der.tag(), "PRIVATE KEY");
        let pair = Ed25519KeyPair::from_pkcs8(der.contents()).unwrap();
        let signature = pair.sign(b"message");
        let public = STANDARD.decode(&keys.public_key).unwrap();
        assert_eq!(public.len(), 32);
        UnparsedPublicKey::new(&ED25519, public)
            .verify(b"message", signature.as_ref())
            .unwrap();
        assert!(txt_value(&keys.public_key).starts_with("v=DKIM1; k=ed25519; p="));
    }
}
