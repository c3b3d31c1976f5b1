//! Durable, contained file primitives. Paths are repo-relative and resolved one component at
//! a time from the repo root with `O_NOFOLLOW` (`openat`), so no symlink is ever followed —
//! not even one swapped in after the loader looked — and `..`, `.`, empty components and
//! absolute paths are refused. Writes are atomic (temp file, fsync, rename, fsync of the
//! folder); moves never replace an existing file. A power cut leaves the old or the new bytes.
//! The folder fsyncs of writes and moves may be left to the caller ([`Flush::Later`]), who
//! syncs each folder once for many of them ([`sync_folders`]).

pub mod inject;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The suffix of coord's temporary files; the loader ignores and the recovery removes them.
pub const TEMP_SUFFIX: &str = ".coord-tmp";

/// When the folders a write or a move changed are flushed to disk.
pub enum Flush<'a> {
    /// Before the call returns.
    Now,
    /// By the caller, later ([`sync_folders`]): the folders (repo-relative) are added here.
    /// Until then a power cut may leave each rename done or not, each file whole.
    Later(&'a mut BTreeSet<String>),
}

impl Flush<'_> {
    /// Syncs the folder `dir` (repo-relative `rel`) now, or notes it for later.
    fn folder(&mut self, dir: &OwnedFd, rel: &str) -> io::Result<()> {
        match self {
            Flush::Now => rustix::fs::fsync(dir).map_err(io::Error::from),
            Flush::Later(set) => {
                let parent = rel.rsplit_once('/').map_or("", |(d, _)| d);
                set.insert(parent.to_string());
                Ok(())
            }
        }
    }
}

/// Flushes each folder (repo-relative, "" for the root) to disk; a folder gone meanwhile is
/// fine.
pub fn sync_folders(root: &Path, folders: &BTreeSet<String>) -> io::Result<()> {
    for rel in folders {
        let parts: Vec<&str> = if rel.is_empty() {
            Vec::new()
        } else {
            components(rel)?
        };
        match open_dir(root, &parts, rel, false) {
            Ok(dir) => rustix::fs::fsync(&dir)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Returns the error for a path that is not a plain repo-relative path.
fn bad_path(rel: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("refused path {rel:?}: only plain paths inside the repo are used (no '..', no absolute paths)"),
    )
}

/// The error for a symlink met where coord never follows one.
pub(crate) fn symlink_refused(rel: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{rel}: symlink refused (never followed); replace it with a regular file or folder"
        ),
    )
}

/// Splits a repo-relative path into its components, refusing anything but plain names.
fn components(rel: &str) -> io::Result<Vec<&str>> {
    if rel.is_empty() || rel.starts_with('/') || rel.contains('\0') {
        return Err(bad_path(rel));
    }
    let parts: Vec<&str> = rel.split('/').collect();
    if parts.iter().any(|p| matches!(*p, "" | "." | "..")) {
        return Err(bad_path(rel));
    }
    Ok(parts)
}

/// Maps the errno of an `O_NOFOLLOW` open of a symlink to a clear error.
fn nofollow_err(rel: &str) -> impl Fn(Errno) -> io::Error + '_ {
    move |e| {
        if e == Errno::LOOP || e == Errno::NOTDIR {
            symlink_refused(rel)
        } else {
            io::Error::from(e)
        }
    }
}

/// Opens the folder made of `parts` under `root` without following symlinks; creates
/// missing folders when `create`.
fn open_dir(root: &Path, parts: &[&str], rel: &str, create: bool) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut dir = rustix::fs::open(root, flags, Mode::empty())?;
    for part in parts {
        let next = rustix::fs::openat(&dir, *part, flags | OFlags::NOFOLLOW, Mode::empty());
        dir = match next {
            Err(Errno::NOENT) if create => {
                inject::point("mkdir")?;
                match rustix::fs::mkdirat(&dir, *part, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                rustix::fs::openat(&dir, *part, flags | OFlags::NOFOLLOW, Mode::empty())
                    .map_err(nofollow_err(rel))?
            }
            other => other.map_err(nofollow_err(rel))?,
        };
    }
    Ok(dir)
}

/// Opens the parent folder of `rel` and returns it with the file name.
fn open_parent<'r>(root: &Path, rel: &'r str, create: bool) -> io::Result<(OwnedFd, &'r str)> {
    let parts = components(rel)?;
    let (name, parents) = parts.split_last().ok_or_else(|| bad_path(rel))?;
    Ok((open_dir(root, parents, rel, create)?, name))
}

/// Returns the type of `rel`'s entry (not following a final symlink), or None if absent.
pub fn file_type(root: &Path, rel: &str) -> io::Result<Option<FileType>> {
    let (dir, name) = match open_parent(root, rel, false) {
        Ok(x) => x,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(FileType::from_raw_mode(st.st_mode))),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Fails when `rel` or one of its folders is a symlink (absent is fine).
pub fn refuse_symlink(root: &Path, rel: &str) -> io::Result<()> {
    match file_type(root, rel)? {
        Some(FileType::Symlink) => Err(symlink_refused(rel)),
        _ => Ok(()),
    }
}

/// Opens a regular file for reading without following any symlink.
pub fn open_read(root: &Path, rel: &str) -> io::Result<File> {
    let (dir, name) = open_parent(root, rel, false)?;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = rustix::fs::openat(&dir, name, flags, Mode::empty()).map_err(nofollow_err(rel))?;
    let file = File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{rel}: not a regular file"),
        ));
    }
    Ok(file)
}

/// Reads at most `max` bytes (and one more, so the caller sees it is too long).
pub fn read_limited(root: &Path, rel: &str, max: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    open_read(root, rel)?
        .take(max as u64 + 1)
        .read_to_end(&mut buf)?;
    Ok(buf)
}

/// Returns the content hash (`board::content_hash`) and the size of a whole file, read in
/// pieces, never following a symlink.
pub fn hash_file(root: &Path, rel: &str) -> io::Result<(u64, u64)> {
    let mut f = open_read(root, rel)?;
    let mut buf = vec![0u8; 64 * 1024];
    let (mut hash, mut size) = (crate::hash::FNV_OFFSET, 0u64);
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok((hash, size));
        }
        hash = crate::hash::fnv1a_from(hash, &buf[..n]);
        size += n as u64;
    }
}

/// Writes `bytes` to `rel` atomically, creating parent folders; refuses to replace a symlink.
/// The file is synced before it is renamed into place; its folder as `flush` says.
pub fn write_atomic_in(root: &Path, rel: &str, bytes: &[u8], mut flush: Flush) -> io::Result<()> {
    let (dir, name) = open_parent(root, rel, true)?;
    if let Ok(st) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
            return Err(symlink_refused(rel));
        }
    }
    let tmp = format!(".{name}.{}{TEMP_SUFFIX}", std::process::id());
    let result = (|| {
        inject::point("create temp")?;
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::EXCL
            | OFlags::TRUNC
            | OFlags::NOFOLLOW
            | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&dir, tmp.as_str(), flags, Mode::from_raw_mode(0o644)) {
            Err(Errno::EXIST) => {
                rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty())?;
                rustix::fs::openat(&dir, tmp.as_str(), flags, Mode::from_raw_mode(0o644))?
            }
            other => other?,
        };
        let mut f = File::from(fd);
        inject::point("write")?;
        f.write_all(bytes)?;
        inject::point("fsync")?;
        f.sync_all()?;
        inject::point("rename")?;
        rustix::fs::renameat(&dir, tmp.as_str(), &dir, name)?;
        inject::point("fsync folder")?;
        flush.folder(&dir, rel)
    })();
    if result.is_err() {
        let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
    }
    result
}

/// Renames `from` to `to` (both repo-relative), failing with `AlreadyExists` instead of
/// replacing; creates `to`'s folder; refuses to move a symlink; syncs both folders as `flush`
/// says.
pub fn rename_noreplace_in(root: &Path, from: &str, to: &str, mut flush: Flush) -> io::Result<()> {
    let (from_dir, from_name) = open_parent(root, from, false)?;
    let st = rustix::fs::statat(&from_dir, from_name, AtFlags::SYMLINK_NOFOLLOW)?;
    if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
        return Err(symlink_refused(from));
    }
    let (to_dir, to_name) = open_parent(root, to, true)?;
    inject::point("rename")?;
    match rustix::fs::renameat_with(
        &from_dir,
        from_name,
        &to_dir,
        to_name,
        RenameFlags::NOREPLACE,
    ) {
        Ok(()) => {}
        Err(e) if e == Errno::INVAL || e == Errno::NOSYS => {
            rustix::fs::linkat(&from_dir, from_name, &to_dir, to_name, AtFlags::empty())?;
            rustix::fs::unlinkat(&from_dir, from_name, AtFlags::empty())?;
        }
        Err(e) => return Err(io::Error::from(e)),
    }
    inject::point("fsync folder")?;
    flush.folder(&to_dir, to)?;
    flush.folder(&from_dir, from)
}

/// Removes the file `rel` (a symlink itself, never its target); absent is fine.
pub fn remove_in(root: &Path, rel: &str) -> io::Result<()> {
    let (dir, name) = match open_parent(root, rel, false) {
        Ok(x) => x,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    inject::point("remove")?;
    match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Writes a file of coord's own under `.git/coord/` atomically; `durable` adds the fsyncs.
/// Journals and caches need none: a killed process loses nothing the kernel accepted, and
/// after a power cut recovery adopts the folders as they are.
pub fn write_private(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    write_with_mode(path, bytes, durable, 0o666)
}

/// [`write_private`] with the file created as `mode` (less the umask) from the start, so a
/// file that holds secrets is never readable by others, not even for a moment.
pub fn write_with_mode(path: &Path, bytes: &[u8], durable: bool, mode: u32) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}{TEMP_SUFFIX}", std::process::id()));
    let result = (|| {
        inject::point("write private")?;
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        if durable {
            f.sync_all()?;
        }
        fs::rename(&tmp, path)?;
        if durable {
            sync_dir(dir)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Reads a file of coord's own under `.git/coord/` (or git's): only a regular file is read
/// (a FIFO, device or link put there would block a command or read without end), opened
/// without blocking and read up to the size its stat gave. Anything else reads as an error,
/// which each caller takes as a missing file.
pub fn read_private(path: &Path) -> io::Result<Vec<u8>> {
    let (file, size) = open_private(path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(size).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Opens a file of coord's own for reading, as [`read_private`] reads it: a regular file
/// alone, opened without blocking; returns it with the size its stat gave.
pub fn open_private(path: &Path) -> io::Result<(File, u64)> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty())?;
    let stat = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(io::Error::other("not a regular file"));
    }
    Ok((File::from(fd), u64::try_from(stat.st_size).unwrap_or(0)))
}

/// Reads a file of coord's own as text ([`read_private`]).
pub fn read_private_text(path: &Path) -> io::Result<String> {
    String::from_utf8(read_private(path)?).map_err(io::Error::other)
}

/// Removes the temporary files [`write_private`] left in `dir` for processes that are gone
/// (a run killed between writing and renaming); returns how many. A live writer's stays.
pub fn remove_dead_temps(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let dead = |name: &str| {
        name.strip_prefix('.')
            .and_then(|n| n.strip_suffix(TEMP_SUFFIX))
            .and_then(|n| n.rsplit_once('.'))
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
            .is_some_and(process_gone)
    };
    entries
        .flatten()
        .filter(|e| dead(&e.file_name().to_string_lossy()))
        .filter(|e| fs::remove_file(e.path()).is_ok())
        .count()
}

/// Returns whether process `pid` is gone: `/proc` does not list it, or lists it as a zombie
/// (killed, not yet reaped by its parent: it runs no more and has closed its files).
pub fn process_gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'))
    })
}

/// Flushes a folder's entries to disk.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_private_file_is_read_only_when_it_is_a_regular_file() {
        let d = tempfile::tempdir().expect("tempdir");
        let file = d.path().join("record");
        fs::write(&file, "bytes").expect("write");
        assert_eq!(read_private(&file).expect("read"), b"bytes");
        let fifo = d.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        assert!(read_private(&fifo).is_err(), "a FIFO is never waited on");
        symlink("/dev/zero", d.path().join("zero")).expect("symlink");
        assert!(read_private(&d.path().join("zero")).is_err());
        assert!(read_private(Path::new("/dev/zero")).is_err());
        assert!(read_private(&d.path().join("missing")).is_err());
    }

    #[test]
    fn noreplace_refuses_to_clobber() {
        let d = tempfile::tempdir().expect("tempdir");
        fs::write(d.path().join("a"), "a").expect("write");
        rename_noreplace_in(d.path(), "a", "sub/b", Flush::Now).expect("first rename");
        fs::write(d.path().join("a"), "again").expect("write");
        let err = rename_noreplace_in(d.path(), "a", "sub/b", Flush::Now).expect_err("exists");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            fs::read_to_string(d.path().join("sub/b")).expect("read"),
            "a"
        );
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let d = tempfile::tempdir().expect("tempdir");
        write_atomic_in(d.path(), "x/y.yaml", b"one", Flush::Now).expect("write");
        write_atomic_in(d.path(), "x/y.yaml", b"two", Flush::Now).expect("write");
        assert_eq!(
            fs::read_to_string(d.path().join("x/y.yaml")).expect("read"),
            "two"
        );
        let names: Vec<_> = fs::read_dir(d.path().join("x")).expect("dir").collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn later_flushes_collect_each_folder_once_for_one_sync() {
        let d = tempfile::tempdir().expect("tempdir");
        let mut folders = BTreeSet::new();
        write_atomic_in(d.path(), "a/x", b"1", Flush::Later(&mut folders)).expect("write");
        write_atomic_in(d.path(), "a/y", b"2", Flush::Later(&mut folders)).expect("write");
        rename_noreplace_in(d.path(), "a/x", "b/c/x", Flush::Later(&mut folders)).expect("move");
        write_atomic_in(d.path(), "top", b"3", Flush::Later(&mut folders)).expect("write");
        let expected: BTreeSet<String> = ["", "a", "b/c"].map(String::from).into();
        assert_eq!(folders, expected);
        assert_eq!(fs::read(d.path().join("b/c/x")).expect("read"), b"1");
        folders.insert("gone/meanwhile".to_string());
        sync_folders(d.path(), &folders).expect("sync");
        folders.insert("../out".to_string());
        assert!(sync_folders(d.path(), &folders).is_err());
    }

    #[test]
    fn dotdot_absolute_and_empty_parts_are_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        for rel in ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", ""] {
            let err = write_atomic_in(d.path(), rel, b"x", Flush::Now).expect_err(rel);
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{rel}");
            assert!(read_limited(d.path(), rel, 10).is_err(), "{rel}");
        }
    }

    #[test]
    fn symlinked_folders_and_files_are_never_followed() {
        let d = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("outside");
        fs::write(outside.path().join("secret"), "s").expect("write");
        symlink(outside.path(), d.path().join("dir")).expect("symlink");
        symlink(outside.path().join("secret"), d.path().join("file")).expect("symlink");
        for rel in ["dir/secret", "file"] {
            let err = read_limited(d.path(), rel, 10).expect_err(rel);
            assert!(err.to_string().contains("symlink refused"), "{rel}: {err}");
        }
        assert!(write_atomic_in(d.path(), "dir/new", b"x", Flush::Now).is_err());
        assert!(write_atomic_in(d.path(), "file", b"x", Flush::Now).is_err());
        assert!(rename_noreplace_in(d.path(), "file", "moved", Flush::Now).is_err());
        fs::write(d.path().join("real"), "r").expect("write");
        assert!(rename_noreplace_in(d.path(), "real", "dir/real", Flush::Now).is_err());
        assert!(!outside.path().join("new").exists());
        assert!(!outside.path().join("real").exists());
        assert_eq!(
            fs::read_to_string(outside.path().join("secret")).expect("read"),
            "s"
        );
        remove_in(d.path(), "file").expect("removes the link itself");
        assert!(outside.path().join("secret").exists());
    }
}
