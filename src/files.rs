//! Writing files without following symbolic links: the one writer of every command that writes
//! files (`apply --secrets-dir`, `crds --out-dir`).
//!
//! The directory the user chose is opened once; every level below it is opened relative to its
//! parent with `O_NOFOLLOW` (`openat`, through `rustix`), so a symbolic link planted anywhere
//! below it, as a directory or as the file, is refused or replaced, never followed. Missing
//! levels below it are created (mode 0700); its own parents never are. A file is written to a
//! new temporary file in its final directory, synced, given its mode (whatever the old file had)
//! and renamed over the old one: a failed write leaves the previous content intact.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, Mode, OFlags};

/// Why a file could not be written. Messages name the path, never the content.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// An I/O failure at `path`.
    #[error("cannot write {path}: {message}")]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// What failed.
        message: String,
    },
}

fn io(path: &Path, message: impl std::fmt::Display) -> FileError {
    FileError::Io {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

/// A directory chosen by the user, opened once; files are written below it only.
#[derive(Debug)]
pub struct SafeDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl SafeDir {
    /// Opens `path` (following a link the user named, as any tool does), creating it when
    /// missing and its parent exists; its parents are never created. It must be writable by
    /// this process (`faccessat(W_OK | X_OK)`), so that a caller can refuse it before doing
    /// anything whose result would then be lost.
    ///
    /// Errors: `path` is not a directory, its parent does not exist, it is not writable (its
    /// mode, a read-only file system), or I/O fails.
    pub fn open(path: &Path) -> Result<SafeDir, FileError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(CWD, path, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => {
                rustix::fs::mkdirat(CWD, path, Mode::from_raw_mode(0o700))
                    .map_err(|e| io(path, format!("{e} (its parent directory must exist)")))?;
                rustix::fs::openat(CWD, path, flags, Mode::empty()).map_err(|e| io(path, e))?
            }
            Err(e) => return Err(io(path, e)),
        };
        let write = rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK;
        rustix::fs::accessat(&fd, ".", write, AtFlags::empty())
            .map_err(|e| io(path, format!("not writable: {e}")))?;
        Ok(SafeDir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Writes `content` to `levels` below this directory (the last level is the file name),
    /// with permission bits `mode` (0600 for secrets). Returns the file's path.
    ///
    /// Errors: a level that is a symbolic link or not a directory, a level that is `.`, `..`,
    /// empty or holds `/`, the file being a directory, or any I/O failure (the old file stays).
    pub fn write(&self, levels: &[&str], content: &[u8], mode: u32) -> Result<PathBuf, FileError> {
        let (file, dirs) = levels
            .split_last()
            .ok_or_else(|| io(&self.path, "no file name"))?;
        let mut path = self.path.clone();
        let mut parent: Option<OwnedFd> = None;
        for level in dirs {
            check_level(&path, level)?;
            path.push(level);
            let at = parent.as_ref().unwrap_or(&self.fd);
            parent = Some(open_dir_below(at, level, &path)?);
        }
        check_level(&path, file)?;
        path.push(file);
        let at = parent.as_ref().unwrap_or(&self.fd);
        write_replacing(at, file, &path, content, mode)?;
        Ok(path)
    }
}

fn check_level(parent: &Path, level: &str) -> Result<(), FileError> {
    if level.is_empty()
        || level == "."
        || level == ".."
        || level.contains('/')
        || level.contains('\0')
    {
        return Err(io(parent, format!("{level:?} is not a valid file name")));
    }
    Ok(())
}

/// Opens (creating it when missing) the directory `name` in `at`, refusing a symbolic link.
fn open_dir_below(at: &OwnedFd, name: &str, path: &Path) -> Result<OwnedFd, FileError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(at, name, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(rustix::io::Errno::NOENT) => {
            match rustix::fs::mkdirat(at, name, Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(io(path, e)),
            }
            rustix::fs::openat(at, name, flags, Mode::empty()).map_err(|e| io(path, e))
        }
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => Err(io(
            path,
            "a symbolic link or a file stands where a directory belongs; it is not followed",
        )),
        Err(e) => Err(io(path, e)),
    }
}

/// Writes `content` to a new temporary file in `at` and renames it to `name`.
fn write_replacing(
    at: &OwnedFd,
    name: &str,
    path: &Path,
    content: &[u8],
    mode: u32,
) -> Result<(), FileError> {
    if let Ok(stat) = rustix::fs::statat(at, name, AtFlags::SYMLINK_NOFOLLOW)
        && rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory
    {
        return Err(io(path, "it is a directory"));
    }
    let temp = format!(".{name}.tmp-{:016x}", rand::random::<u64>());
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(at, temp.as_str(), flags, Mode::from_raw_mode(mode & 0o600))
        .map_err(|e| io(path, e))?;
    let result = (|| {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(|e| e.to_string())?;
        let mut file = std::fs::File::from(fd);
        file.write_all(content).map_err(|e| e.to_string())?;
        file.sync_all().map_err(|e| e.to_string())?;
        rustix::fs::renameat(at, temp.as_str(), at, name).map_err(|e| e.to_string())
    })();
    if let Err(message) = result {
        let _ = rustix::fs::unlinkat(at, temp.as_str(), AtFlags::empty());
        return Err(io(path, message));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Files are written at the path named, with the mode asked for.
    #[test]
    fn writes_with_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let safe = SafeDir::open(dir.path()).unwrap();
        let path = safe.write(&["a", "b", "f"], b"v", 0o600).unwrap();
        assert_eq!(path, dir.path().join("a/b/f"));
        assert_eq!(std::fs::read(&path).unwrap(), b"v");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    /// `..` and separators never leave the directory.
    #[test]
    fn refuses_escaping_names() {
        let dir = tempfile::tempdir().unwrap();
        let safe = SafeDir::open(dir.path()).unwrap();
        for bad in ["..", ".", "", "a/b"] {
            assert!(safe.write(&[bad, "f"], b"v", 0o600).is_err(), "{bad:?}");
        }
    }
}
