//! Writing secret material (API key values, DKIM private keys) to files for `apply
//! --secrets-dir`: `DIR/<namespace>/<secretName>/<key>`, mirroring the Secret the controller
//! would write, with mode 0600 (directories 0700).

use std::path::PathBuf;

use secrecy::{ExposeSecret, SecretString};

use crate::files::{FileError, SafeDir};

/// Writes `value` to `DIR/<namespace>/<secret_name>/<key>` with mode 0600, replacing an older
/// file (whatever its mode) without following any symbolic link below `DIR` (see
/// [`crate::files`]).
///
/// Errors: the path (never the value) and what failed; the older file stays intact.
pub fn write(
    dir: &SafeDir,
    namespace: &str,
    secret_name: &str,
    key: &str,
    value: &SecretString,
) -> Result<PathBuf, FileError> {
    dir.write(
        &[namespace, secret_name, key],
        value.expose_secret().as_bytes(),
        0o600,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Files are written with mode 0600 at the documented path.
    #[test]
    fn files_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            &SafeDir::open(dir.path()).unwrap(),
            "default",
            "ci-key",
            "apiKey",
            &SecretString::from("v"),
        )
        .unwrap();
        assert_eq!(path, dir.path().join("default/ci-key/apiKey"));
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "v");
    }
}
