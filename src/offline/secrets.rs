//! Writing secret material (API key values, DKIM private keys) to files for `apply
//! --secrets-dir`: `DIR/<namespace>/<secretName>/<key>`, mirroring the Secret the controller
//! would write, with mode 0600 (directories 0700).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};

/// Writes `value` to `DIR/<namespace>/<secret_name>/<key>`, replacing an older file.
///
/// Errors: I/O errors, with the path (never the value) in the message.
pub fn write(
    dir: &Path,
    namespace: &str,
    secret_name: &str,
    key: &str,
    value: &SecretString,
) -> Result<PathBuf, String> {
    let folder = dir.join(namespace).join(secret_name);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&folder)
        .map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
    let path = folder.join(key);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    file.write_all(value.expose_secret().as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
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
            dir.path(),
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
