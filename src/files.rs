//! Writing files without following symbolic links: the one writer of every command that writes
//! files (`apply --secrets-dir`, `crds --out-dir`), and the one remover (`destroy
//! --secrets-dir`).
//!
//! The directory the user chose is opened once; every level below it is opened relative to its
//! parent with `O_NOFOLLOW` (`openat`, through `rustix`), so a symbolic link planted anywhere
//! below it, as a directory or as the file, is refused or replaced, never followed. Missing
//! levels below it are created (mode 0700); its own parents never are. A file is written to a
//! new temporary file in its final directory, synced, given its mode (whatever the old file had)
//! and renamed over the old one: a failed write leaves the previous content intact. A file that
//! holds the content already, with the mode, is left as it is (a second `apply` changes
//! nothing, and a watcher of the directory sees nothing).

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, Mode, OFlags};

/// Why a file could not be written, read or removed. Messages name the path, never the content.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// An I/O failure at `path`.
    #[error("cannot {doing} {path}: {message}")]
    Io {
        /// `write`, `read` or `remove`.
        doing: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// What failed.
        message: String,
    },
}

impl FileError {
    /// The same failure, met while doing `what` (`read`, `remove`).
    fn doing(self, what: &'static str) -> Self {
        let FileError::Io { path, message, .. } = self;
        FileError::Io {
            doing: what,
            path,
            message,
        }
    }
}

fn io(path: &Path, message: impl std::fmt::Display) -> FileError {
    FileError::Io {
        doing: "write",
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

    /// The directory's path, as the user named it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `content` to `levels` below this directory (the last level is the file name),
    /// with permission bits `mode` (0600 for secrets), unless a regular file there holds
    /// `content` with `mode` already. Returns the file's path and whether it was written.
    ///
    /// Errors: a level that is a symbolic link or not a directory, a level that is `.`, `..`,
    /// empty or holds `/`, the file being a directory, or any I/O failure (the old file stays).
    pub fn write(&self, levels: &[&str], content: &[u8], mode: u32) -> Result<Written, FileError> {
        let (file, dirs) = levels
            .split_last()
            .ok_or_else(|| io(&self.path, "no file name"))?;
        let Some((parent, mut path)) = self.descend(dirs, true)? else {
            unreachable!("descend creates every missing level");
        };
        check_level(&path, file)?;
        path.push(file);
        let changed = !holds(&parent, file, content, mode);
        if changed {
            write_replacing(&parent, file, &path, content, mode)?;
        }
        Ok(Written { path, changed })
    }
}

impl SafeDir {
    /// Checks, without writing, that [`SafeDir::write`] could write `levels` (the last level is
    /// the file name) as far as this process can tell beforehand: the deepest level that exists
    /// is a directory it may write into (`faccessat(W_OK | X_OK)`), and the file, when it
    /// exists, is not a directory.
    ///
    /// Errors: as [`SafeDir::write`]'s for the levels, and `not writable` naming the directory.
    pub fn check_writable(&self, levels: &[&str]) -> Result<(), FileError> {
        let (file, dirs) = levels
            .split_last()
            .ok_or_else(|| io(&self.path, "no file name"))?;
        for depth in (0..=dirs.len()).rev() {
            let Some((fd, path)) = self.descend(&dirs[..depth], false)? else {
                continue;
            };
            let access = rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK;
            rustix::fs::accessat(&fd, ".", access, AtFlags::empty())
                .map_err(|e| io(&path, format!("not writable: {e}")))?;
            check_level(&path, file)?;
            if depth == dirs.len() && is_directory(&fd, file) {
                return Err(io(&path.join(file), "it is a directory"));
            }
            return Ok(());
        }
        unreachable!("this directory itself exists")
    }
}

/// What [`SafeDir::write`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The file's path.
    pub path: PathBuf,
    /// False when the file held the content with the mode already, and was left as it was.
    pub changed: bool,
}

/// True when `name` in `at` is a regular file (not followed) with permission bits `mode` that
/// holds `content`. Any doubt (an error, another kind of file) answers false: the file is written.
fn holds(at: &OwnedFd, name: &str, content: &[u8], mode: u32) -> bool {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::openat(at, name, flags, Mode::empty()) else {
        return false;
    };
    let Ok(stat) = rustix::fs::fstat(&fd) else {
        return false;
    };
    let regular =
        rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::RegularFile;
    if !regular || stat.st_mode & 0o7777 != mode || stat.st_size as u64 != content.len() as u64 {
        return false;
    }
    let mut held = Vec::with_capacity(content.len());
    let mut file = std::io::Read::take(std::fs::File::from(fd), content.len() as u64 + 1);
    std::io::Read::read_to_end(&mut file, &mut held).is_ok() && held == content
}

/// Who a directory below a [`SafeDir`] belongs to, from the marker file it holds
/// ([`SafeDir::claim`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The directory does not exist or is empty.
    Free,
    /// It holds the marker file, whose content (trimmed) is given.
    Marked(String),
    /// It holds other entries and no marker file (or a marker that is a symbolic link).
    Unmarked,
}

/// The longest marker content read, in bytes; a longer one is cut there.
const MARKER_MAX: usize = 4096;

impl SafeDir {
    /// Who the directory `levels` below this one belongs to: the content of its file `marker`.
    /// Nothing is created or followed: a level that is a symbolic link or a file is an error.
    ///
    /// Errors: such a level, a `marker` that is a directory or another special file, an invalid
    /// level name, or an I/O failure (messages say "cannot read").
    pub fn claim(&self, levels: &[&str], marker: &str) -> Result<Claim, FileError> {
        self.read_claim(levels, marker).map_err(|e| e.doing("read"))
    }

    fn read_claim(&self, levels: &[&str], marker: &str) -> Result<Claim, FileError> {
        let Some((fd, path)) = self.descend(levels, false)? else {
            return Ok(Claim::Free);
        };
        let mut entries = rustix::fs::Dir::read_from(&fd).map_err(|e| io(&path, e))?;
        let empty =
            entries.all(|e| e.is_ok_and(|e| matches!(e.file_name().to_bytes(), b"." | b"..")));
        if empty {
            return Ok(Claim::Free);
        }
        let path = path.join(marker);
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let file = match rustix::fs::openat(&fd, marker, flags, Mode::empty()) {
            Ok(file) => file,
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::LOOP) => return Ok(Claim::Unmarked),
            Err(e) => return Err(io(&path, e)),
        };
        let stat = rustix::fs::fstat(&file).map_err(|e| io(&path, e))?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(io(&path, "not a regular file"));
        }
        let mut content = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(std::fs::File::from(file), MARKER_MAX as u64),
            &mut content,
        )
        .map_err(|e| io(&path, e))?;
        Ok(Claim::Marked(
            String::from_utf8_lossy(&content).trim().to_string(),
        ))
    }

    /// The names of the directories (not symbolic links, nor names that are not UTF-8) in the
    /// directory `levels` below this one, sorted; none when it does not exist.
    ///
    /// Errors: a level that is a symbolic link or a file, an invalid level name, or an I/O
    /// failure (messages say "cannot read").
    pub fn directories(&self, levels: &[&str]) -> Result<Vec<String>, FileError> {
        let read = || {
            let Some((fd, path)) = self.descend(levels, false)? else {
                return Ok(Vec::new());
            };
            let entries = rustix::fs::Dir::read_from(&fd).map_err(|e| io(&path, e))?;
            let mut names = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|e| io(&path, e))?;
                let Ok(name) = entry.file_name().to_str() else {
                    continue;
                };
                if matches!(name, "." | "..") {
                    continue;
                }
                if is_directory(&fd, name) {
                    names.push(name.to_string());
                }
            }
            names.sort();
            Ok(names)
        };
        read().map_err(|e: FileError| e.doing("read"))
    }

    /// Removes the entries `names` (files or symbolic links, never followed; a directory of
    /// that name stays) of the directory `levels` below this one, then that directory and each
    /// of its parents below this one left empty. A missing directory or entry is no error.
    /// Returns the paths removed.
    ///
    /// Errors: a level that is a symbolic link or a file, an invalid name, or an I/O failure
    /// (entries removed before it stay removed; messages say "cannot remove").
    pub fn remove(&self, levels: &[&str], names: &[&str]) -> Result<Vec<PathBuf>, FileError> {
        self.remove_named(levels, names)
            .map_err(|e| e.doing("remove"))
    }

    fn remove_named(&self, levels: &[&str], names: &[&str]) -> Result<Vec<PathBuf>, FileError> {
        let Some((fd, path)) = self.descend(levels, false)? else {
            return Ok(Vec::new());
        };
        let mut removed = Vec::new();
        for name in names {
            check_level(&path, name)?;
            if is_directory(&fd, name) {
                continue;
            }
            match rustix::fs::unlinkat(&fd, *name, AtFlags::empty()) {
                Ok(()) => removed.push(path.join(name)),
                Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(io(&path.join(name), e)),
            }
        }
        drop(fd);
        // Each emptied level, deepest first; the first one still holding entries ends it.
        for depth in (1..=levels.len()).rev() {
            let Some((at, _)) = self.descend(&levels[..depth - 1], false)? else {
                break;
            };
            if rustix::fs::unlinkat(&at, levels[depth - 1], AtFlags::REMOVEDIR).is_err() {
                break;
            }
        }
        Ok(removed)
    }

    /// The directory `levels` below this one, opened level by level without following links,
    /// with its path: each missing level created (mode 0700) when `create`, else `None` at the
    /// first missing one.
    ///
    /// Errors: an invalid level name, a level that is a symbolic link or a file, I/O failures.
    fn descend(
        &self,
        levels: &[&str],
        create: bool,
    ) -> Result<Option<(OwnedFd, PathBuf)>, FileError> {
        let mut path = self.path.clone();
        let mut fd: Option<OwnedFd> = None;
        for level in levels {
            check_level(&path, level)?;
            path.push(level);
            let at = fd.as_ref().unwrap_or(&self.fd);
            match open_dir_below(at, level, &path, create)? {
                Some(next) => fd = Some(next),
                None => return Ok(None),
            }
        }
        let fd = match fd {
            Some(fd) => fd,
            None => rustix::fs::openat(&self.fd, ".", DIR_FLAGS, Mode::empty())
                .map_err(|e| io(&path, e))?,
        };
        Ok(Some((fd, path)))
    }
}

/// True when `name` in `at` is a directory itself, not a symbolic link to one.
fn is_directory(at: &OwnedFd, name: &str) -> bool {
    rustix::fs::statat(at, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|s| {
        rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Directory
    })
}

/// Why a level below a [`SafeDir`] is refused.
const NOT_A_DIRECTORY: &str =
    "a symbolic link or a file stands where a directory belongs; it is not followed";

fn check_level(parent: &Path, level: &str) -> Result<(), FileError> {
    if level.is_empty()
        || level == "."
        || level == ".."
        || level.contains('/')
        || level.contains('\0')
    {
        return Err(io(
            parent,
            format!("{} is not a valid file name", crate::text::quoted(level)),
        ));
    }
    Ok(())
}

/// How a directory below a [`SafeDir`] is opened: never through a symbolic link.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Opens the directory `name` in `at`, refusing a symbolic link; when it is missing, creates it
/// (`create`) or answers `None`.
fn open_dir_below(
    at: &OwnedFd,
    name: &str,
    path: &Path,
    create: bool,
) -> Result<Option<OwnedFd>, FileError> {
    match rustix::fs::openat(at, name, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(rustix::io::Errno::NOENT) if !create => Ok(None),
        Err(rustix::io::Errno::NOENT) => {
            match rustix::fs::mkdirat(at, name, Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(io(path, e)),
            }
            let fd = rustix::fs::openat(at, name, DIR_FLAGS, Mode::empty());
            fd.map(Some).map_err(|e| io(path, e))
        }
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => Err(io(path, NOT_A_DIRECTORY)),
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
    if is_directory(at, name) {
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
        let written = safe.write(&["a", "b", "f"], b"v", 0o600).unwrap();
        let path = written.path;
        assert!(written.changed);
        assert_eq!(path, dir.path().join("a/b/f"));
        assert_eq!(std::fs::read(&path).unwrap(), b"v");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    /// A file that holds the content with the mode is left as it is (the same inode); another
    /// content, another mode, or a symbolic link in its place is written (the link replaced,
    /// not followed).
    #[test]
    fn a_file_holding_the_content_is_left_as_it_is() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let safe = SafeDir::open(dir.path()).unwrap();
        let inode = |p: &Path| std::fs::symlink_metadata(p).unwrap().ino();
        let path = safe.write(&["a", "f"], b"v", 0o600).unwrap().path;
        let first = inode(&path);
        assert!(!safe.write(&["a", "f"], b"v", 0o600).unwrap().changed);
        assert_eq!(inode(&path), first);
        for (content, mode) in [(&b"w"[..], 0o600), (b"w", 0o644)] {
            let before = inode(&path);
            assert!(safe.write(&["a", "f"], content, mode).unwrap().changed);
            assert_ne!(inode(&path), before, "{content:?} {mode:o}");
        }
        let target = dir.path().join("target");
        std::fs::write(&target, b"w").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(safe.write(&["a", "f"], b"w", 0o600).unwrap().changed);
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
    }

    /// A directory's claim: free when missing or empty, else its marker's content, or unmarked
    /// (no marker, or a marker that is a link); a link standing for a level is refused.
    #[test]
    fn claims() {
        let dir = tempfile::tempdir().unwrap();
        let safe = SafeDir::open(dir.path()).unwrap();
        assert_eq!(safe.claim(&["a", "b"], "m"), Ok(Claim::Free));
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        assert_eq!(safe.claim(&["a", "b"], "m"), Ok(Claim::Free));
        std::fs::write(dir.path().join("a/b/f"), "x").unwrap();
        assert_eq!(safe.claim(&["a", "b"], "m"), Ok(Claim::Unmarked));
        std::os::unix::fs::symlink(dir.path().join("a/b/f"), dir.path().join("a/b/m")).unwrap();
        assert_eq!(safe.claim(&["a", "b"], "m"), Ok(Claim::Unmarked));
        std::fs::remove_file(dir.path().join("a/b/m")).unwrap();
        std::fs::write(dir.path().join("a/b/m"), "owner\n").unwrap();
        assert_eq!(
            safe.claim(&["a", "b"], "m"),
            Ok(Claim::Marked("owner".into()))
        );
        std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join("l")).unwrap();
        assert!(safe.claim(&["l", "b"], "m").is_err());
        std::fs::create_dir(dir.path().join("a/c")).unwrap();
        std::fs::create_dir(dir.path().join("a/c/m")).unwrap();
        assert!(
            safe.claim(&["a", "c"], "m").is_err(),
            "a directory as marker"
        );
    }

    /// Removal takes the entries named (a link, never its target; a directory of that name
    /// stays) and no other, and removes each level it leaves empty, up to the first that is not.
    #[test]
    fn removes() {
        let dir = tempfile::tempdir().unwrap();
        let safe = SafeDir::open(dir.path()).unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "kept").unwrap();
        std::fs::create_dir_all(dir.path().join("a/b/sub")).unwrap();
        std::fs::create_dir_all(dir.path().join("a/c")).unwrap();
        std::fs::write(dir.path().join("a/b/f"), "x").unwrap();
        std::fs::write(dir.path().join("a/b/other"), "x").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("a/b/l")).unwrap();
        let removed = safe
            .remove(&["a", "b"], &["f", "l", "sub", "gone"])
            .unwrap();
        assert_eq!(
            removed,
            [dir.path().join("a/b/f"), dir.path().join("a/b/l")]
        );
        assert!(dir.path().join("a/b/sub").is_dir(), "a directory stays");
        assert!(
            dir.path().join("a/b/other").is_file(),
            "an entry not named stays"
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
        std::fs::remove_dir(dir.path().join("a/b/sub")).unwrap();
        safe.remove(&["a", "b"], &["other"]).unwrap();
        assert!(!dir.path().join("a/b").exists(), "emptied: removed");
        assert!(
            dir.path().join("a/c").is_dir(),
            "its parent holds more: kept"
        );
        assert_eq!(
            safe.remove(&["a", "gone"], &["f"]).unwrap(),
            Vec::<PathBuf>::new()
        );
        let err = safe.remove(&["a", "c"], &["../target"]).unwrap_err();
        assert!(err.to_string().starts_with("cannot remove"), "{err}");
    }

    /// The directories listed are those below the level, sorted: no file, no symbolic link to
    /// a directory; a missing level lists none, a link standing for a level is refused.
    #[test]
    fn lists_directories() {
        let dir = tempfile::tempdir().unwrap();
        let safe = SafeDir::open(dir.path()).unwrap();
        assert_eq!(safe.directories(&["a"]), Ok(Vec::new()));
        for d in ["a/z", "a/b", "elsewhere"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("a/f"), "x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), dir.path().join("a/l")).unwrap();
        assert_eq!(safe.directories(&["a"]).unwrap(), ["b", "z"]);
        std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join("la")).unwrap();
        let err = safe.directories(&["la"]).unwrap_err();
        assert!(err.to_string().starts_with("cannot read"), "{err}");
    }

    /// A file that could be written checks out, missing levels included; a directory in the
    /// file's place, or a link standing for a level, does not; nothing is created.
    #[test]
    fn checks_writability_without_writing() {
        let dir = tempfile::tempdir().unwrap();
        let safe = SafeDir::open(dir.path()).unwrap();
        assert_eq!(safe.check_writable(&["a", "b", "f"]), Ok(()));
        assert!(!dir.path().join("a").exists(), "nothing created");
        std::fs::create_dir_all(dir.path().join("a/b/f")).unwrap();
        let err = safe.check_writable(&["a", "b", "f"]).unwrap_err();
        assert!(
            err.to_string().ends_with("a/b/f: it is a directory"),
            "{err}"
        );
        assert_eq!(safe.check_writable(&["a", "b", "g"]), Ok(()));
        std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join("l")).unwrap();
        assert!(safe.check_writable(&["l", "b", "g"]).is_err());
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
