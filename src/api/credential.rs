//! The company API key the client sends, either fixed for the client's life or read from a file
//! and read again whenever the file changes.
//!
//! The file form is for a Kubernetes Secret mounted as a volume: the kubelet replaces the files
//! of a mounted Secret when the Secret changes (an atomic swap of the volume's `..data` link),
//! so a rotated key reaches the operator without a restart. Before each request the file's
//! metadata (device, inode, size, modification and change times) is compared with the last
//! read; only a change reads it again. A file that cannot be read, or holds no usable key, is
//! reported at `warn` level (its path, never its content) and the last good key stays in use.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use reqwest::header::HeaderValue;
use secrecy::{ExposeSecret, SecretString};

use super::error::{ApiError, Result};

/// A key ready to send: the secret itself (to scrub it from error bodies) and its
/// `Authorization` header value (marked sensitive, so it is never logged).
#[derive(Clone)]
pub(crate) struct Bearer {
    /// The key.
    pub key: SecretString,
    /// `Bearer <key>`.
    pub header: HeaderValue,
}

impl Bearer {
    /// The bearer of `key`.
    ///
    /// # Errors
    /// [`ApiError::Config`] when the key holds characters not allowed in an HTTP header (the
    /// message never shows the key).
    pub fn new(key: SecretString) -> Result<Bearer> {
        let mut header = HeaderValue::from_str(&format!("Bearer {}", key.expose_secret()))
            .map_err(|_| ApiError::Config {
                message: "the API key contains characters not allowed in an HTTP header".to_owned(),
            })?;
        header.set_sensitive(true);
        Ok(Bearer { key, header })
    }
}

/// What identifies one version of a file without reading it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    device: u64,
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
    changed: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> std::io::Result<Stamp> {
        // Follows symbolic links: a mounted Secret's file is a link into `..data`, which the
        // kubelet points at a new directory on each update.
        let meta = std::fs::metadata(path)?;
        #[cfg(unix)]
        let (device, inode, changed) = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino(), (meta.ctime(), meta.ctime_nsec()))
        };
        #[cfg(not(unix))]
        let (device, inode, changed) = (0, 0, (0, 0));
        Ok(Stamp {
            device,
            inode,
            len: meta.len(),
            modified: meta.modified().ok(),
            changed,
        })
    }
}

/// The key read last from the file, the file version it came from, and when the file was last
/// checked.
struct Loaded {
    stamp: Option<Stamp>,
    bearer: Bearer,
    checked: std::time::Instant,
}

impl Loaded {
    /// Reads the key in `path` again if the file's version is not the one last read; true when
    /// a key was read. The version is stamped before the file is read, so a change after the
    /// stamp, even during the read, gives another stamp at the next look and another read
    /// (stamped after the read, a change between the two would be taken for the version read
    /// and missed until the file changed again). A file that yields no usable key leaves the
    /// key in use (a warning once per file version).
    fn refresh(&mut self, path: &Path) -> bool {
        self.refresh_with(path, || {})
    }

    /// [`Self::refresh`], running `between` after the stamp and before the read (a test
    /// changes the file there).
    fn refresh_with(&mut self, path: &Path, between: impl FnOnce()) -> bool {
        let stamp = Stamp::of(path).ok();
        let mut read = false;
        if stamp.is_some() && stamp != self.stamp {
            between();
            match read_key_file(path).and_then(Bearer::new) {
                Ok(bearer) => {
                    self.bearer = bearer;
                    read = true;
                }
                Err(err) => {
                    tracing::warn!(error = %err, "the changed API key file holds no usable key; the previous key stays in use");
                }
            }
            self.stamp = stamp;
        } else if stamp.is_none() && self.stamp.is_some() {
            tracing::warn!(path = %path.display(), "the API key file cannot be read; the previous key stays in use");
            self.stamp = None;
        }
        read
    }
}

/// Where the client's key comes from.
pub(crate) struct Credential(Source);

enum Source {
    /// Given once.
    Fixed(Bearer),
    /// Read from `path`, again when the file changes.
    File {
        /// The key file.
        path: PathBuf,
        /// Least time between two checks of the file.
        check_interval: std::time::Duration,
        /// The last good read.
        loaded: Mutex<Loaded>,
    },
}

/// Most bytes a key file may hold: far more than any key, far less than a request header
/// may carry.
const KEY_FILE_LIMIT: u64 = 16 * 1024;

/// Reads the key in `path`: its content with surrounding whitespace (a trailing newline)
/// removed.
///
/// # Errors
/// [`ApiError::Config`] naming the path when the file cannot be read, is larger than 16 KiB,
/// or holds no usable key.
pub fn read_key_file(path: &Path) -> Result<SecretString> {
    use std::io::Read;
    let cannot = |err: std::io::Error| ApiError::Config {
        message: format!("cannot read the API key file {}: {err}", path.display()),
    };
    let mut bytes = Vec::new();
    let file = std::fs::File::open(path).map_err(cannot)?;
    file.take(KEY_FILE_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > KEY_FILE_LIMIT {
        return Err(ApiError::Config {
            message: format!(
                "the API key file {} is larger than {} KiB: not a key",
                path.display(),
                KEY_FILE_LIMIT / 1024
            ),
        });
    }
    let text = String::from_utf8(bytes).map_err(|_| ApiError::Config {
        message: format!("the API key file {} is not UTF-8 text", path.display()),
    })?;
    let key = text.trim();
    if key.is_empty() {
        return Err(ApiError::Config {
            message: format!("the API key file {} is empty", path.display()),
        });
    }
    Ok(SecretString::from(key.to_owned()))
}

impl Credential {
    /// A key fixed for the client's life.
    pub fn fixed(key: SecretString) -> Result<Credential> {
        Ok(Credential(Source::Fixed(Bearer::new(key)?)))
    }

    /// A key read from `path`, read again when the file changes; the file is checked for a
    /// change (one `stat`) at most once per `check_interval`. `initial` is the key read from it
    /// before (by [`crate::api::ClientConfig::from_key_file`], maybe a while ago): the file's
    /// version is not known for it, so the file is stamped and read again now, and `initial`
    /// stays in use only if that read yields no usable key.
    ///
    /// Only a regular file (links followed: a mounted Secret's file) is watched. Any other file
    /// (a pipe such as `--api-key-file <(pass show key)`, a FIFO, a device) gives its content
    /// once: read again, a pipe is empty and a FIFO waits for another writer, so `initial` is
    /// kept for the client's life.
    ///
    /// # Errors
    /// [`ApiError::Config`] when `initial` holds characters not allowed in an HTTP header.
    pub fn file(
        path: PathBuf,
        initial: SecretString,
        check_interval: std::time::Duration,
    ) -> Result<Credential> {
        if std::fs::metadata(&path).is_ok_and(|meta| !meta.is_file()) {
            return Credential::fixed(initial);
        }
        let mut loaded = Loaded {
            stamp: None,
            bearer: Bearer::new(initial)?,
            checked: std::time::Instant::now(),
        };
        let _ = loaded.refresh(&path);
        Ok(Credential(Source::File {
            path,
            check_interval,
            loaded: Mutex::new(loaded),
        }))
    }

    /// The key to send now: for a key file, read again first when the file changed since the
    /// last read, looked at no more often than the check interval (a busy client does not
    /// `stat` the file on every request). A changed file that yields no usable key leaves the
    /// previous key in use (and logs a warning once per file version).
    pub fn current(&self) -> Bearer {
        match &self.0 {
            Source::Fixed(bearer) => bearer.clone(),
            Source::File {
                path,
                check_interval,
                loaded,
            } => {
                let mut loaded = loaded.lock().unwrap_or_else(|p| p.into_inner());
                if loaded.checked.elapsed() < *check_interval {
                    return loaded.bearer.clone();
                }
                loaded.checked = std::time::Instant::now();
                if loaded.refresh(path) {
                    tracing::info!(path = %path.display(), "read the API key file again after it changed");
                }
                loaded.bearer.clone()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(c: &Credential) -> String {
        c.current().header.to_str().unwrap().to_owned()
    }

    /// A fixed key is sent as a sensitive bearer header; unusable keys are refused without
    /// echoing them.
    #[test]
    fn fixed_key_is_a_sensitive_bearer() {
        let c = Credential::fixed(SecretString::from("sk-test-SECRET")).unwrap();
        let bearer = c.current();
        assert!(bearer.header.is_sensitive());
        assert_eq!(header(&c), "Bearer sk-test-SECRET");
        let Err(err) = Credential::fixed(SecretString::from("sk-SECRET\nInjected: yes")) else {
            panic!("a key with a line break accepted");
        };
        assert_eq!(err.category(), "config");
        assert!(!err.to_string().contains("SECRET"), "{err}");
    }

    /// A changed file is read again before the next use; an emptied or removed file leaves
    /// the last good key in use, and a good key written afterwards is picked up.
    #[test]
    fn key_file_is_read_again_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api-key");
        std::fs::write(&path, "first-key\n").unwrap();
        let initial = read_key_file(&path).unwrap();
        assert_eq!(initial.expose_secret(), "first-key", "whitespace trimmed");
        let c = Credential::file(path.clone(), initial, std::time::Duration::ZERO).unwrap();
        assert_eq!(header(&c), "Bearer first-key");
        // Replaced as the kubelet does: a new file renamed over the old one.
        let next = dir.path().join(".next");
        std::fs::write(&next, "second-key").unwrap();
        std::fs::rename(&next, &path).unwrap();
        assert_eq!(header(&c), "Bearer second-key");
        std::fs::write(&next, "  \n").unwrap();
        std::fs::rename(&next, &path).unwrap();
        assert_eq!(
            header(&c),
            "Bearer second-key",
            "an empty file is not a key"
        );
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            header(&c),
            "Bearer second-key",
            "a missing file is not a key"
        );
        std::fs::write(&path, "third-key").unwrap();
        assert_eq!(header(&c), "Bearer third-key");
    }

    /// A change made after the key was read and before the client was built (a rotation while
    /// the operator starts) is picked up at the first check: the version read first is not
    /// taken for the version found when the client is built.
    #[test]
    fn a_change_between_the_first_read_and_the_client_is_picked_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api-key");
        std::fs::write(&path, "first-key").unwrap();
        let initial = read_key_file(&path).unwrap();
        let next = dir.path().join(".next");
        std::fs::write(&next, "other-key").unwrap();
        std::fs::rename(&next, &path).unwrap();
        let c = Credential::file(path.clone(), initial, std::time::Duration::ZERO).unwrap();
        assert_eq!(header(&c), "Bearer other-key");
    }

    /// A change between a check's stamp and its read is read again at the next check (read
    /// first and stamped after, the change would be taken for the version read and missed).
    #[test]
    fn a_change_during_a_check_is_read_at_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api-key");
        std::fs::write(&path, "first-key").unwrap();
        let mut loaded = Loaded {
            stamp: None,
            bearer: Bearer::new(SecretString::from("initial")).unwrap(),
            checked: std::time::Instant::now(),
        };
        let next = dir.path().join(".next");
        assert!(loaded.refresh_with(&path, || {
            std::fs::write(&next, "second-key").unwrap();
            std::fs::rename(&next, &path).unwrap();
        }));
        assert!(
            loaded.refresh(&path),
            "the change is seen at the next check"
        );
        assert_eq!(loaded.bearer.header.to_str().unwrap(), "Bearer second-key");
    }

    /// Within the check interval the file is not looked at (with a zero interval, as in
    /// `key_file_is_read_again_when_it_changes`, every request looks).
    #[test]
    fn key_file_is_checked_at_most_once_per_interval() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api-key");
        std::fs::write(&path, "first-key").unwrap();
        let initial = read_key_file(&path).unwrap();
        let c =
            Credential::file(path.clone(), initial, std::time::Duration::from_secs(3600)).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "second-key").unwrap();
        assert_eq!(
            header(&c),
            "Bearer first-key",
            "not checked within the hour"
        );
        assert_eq!(header(&c), "Bearer first-key", "nor at the next request");
    }

    /// A key file that is a pipe (`--api-key-file <(pass show key)`, a FIFO fed once) is read
    /// once and its key kept: read again, it would be found empty (a warning, for nothing) or,
    /// a FIFO without another writer, wait forever. Fails (times out) if the client reads it a
    /// second time.
    #[test]
    fn a_pipe_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("mkfifo runs");
        assert!(made.success());
        let writer_path = path.clone();
        let writer = std::thread::spawn(move || std::fs::write(writer_path, "fifo-key\n"));
        let initial = read_key_file(&path).unwrap();
        writer.join().unwrap().unwrap();
        let (done, built) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let c = Credential::file(path, initial, std::time::Duration::ZERO).unwrap();
            let _ = done.send(header(&c));
        });
        let sent = built
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the client is built and sends without reading the pipe again");
        assert_eq!(sent, "Bearer fifo-key");
    }

    /// Reading a key file that is missing or empty fails naming the file.
    #[test]
    fn unreadable_key_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing");
        let err = read_key_file(&path).unwrap_err().to_string();
        assert!(err.contains("cannot read the API key file") && err.contains("missing"));
        std::fs::write(&path, "\n").unwrap();
        let err = read_key_file(&path).unwrap_err().to_string();
        assert!(err.contains("is empty"), "{err}");
    }
}
