//! Durable file primitives: atomic replace (temp file, fsync, rename, fsync of the folder) and
//! rename that never replaces an existing file. A power cut leaves the old or the new bytes.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// The suffix of coord's temporary files; the loader ignores and the recovery removes them.
pub const TEMP_SUFFIX: &str = ".coord-tmp";

/// How much durability a write needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    /// fsync the file and its folder: survives a power cut.
    Durable,
    /// fsync the file; the caller fsyncs the folder (once for several files).
    FileOnly,
    /// No fsync: survives a killed process, not a power cut (caches, journals).
    Never,
}

/// Writes `bytes` to `path` atomically, creating parent folders.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, bytes, Sync::Durable)
}

/// Writes `bytes` to `path` atomically (temp file + rename) with the given durability.
pub fn write_atomic_with(path: &Path, bytes: &[u8], sync: Sync) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}{TEMP_SUFFIX}", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        if sync != Sync::Never {
            f.sync_all()?;
        }
        fs::rename(&tmp, path)?;
        if sync == Sync::Durable {
            sync_dir(dir)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Renames `from` to `to`, failing with `AlreadyExists` instead of replacing; creates `to`'s
/// folder; fsyncs both folders.
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    rename_noreplace_unsynced(from, to)?;
    let to_dir = to.parent().unwrap_or(Path::new("."));
    sync_dir(to_dir)?;
    if let Some(from_dir) = from.parent().filter(|d| *d != to_dir) {
        sync_dir(from_dir)?;
    }
    Ok(())
}

/// Renames like `rename_noreplace` but leaves fsyncing the folders to the caller.
pub fn rename_noreplace_unsynced(from: &Path, to: &Path) -> io::Result<()> {
    let to_dir = to.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(to_dir)?;
    match rustix::fs::renameat_with(
        rustix::fs::CWD,
        from,
        rustix::fs::CWD,
        to,
        rustix::fs::RenameFlags::NOREPLACE,
    ) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
            fs::hard_link(from, to)?;
            fs::remove_file(from)?;
        }
        Err(e) => return Err(io::Error::from(e)),
    }
    Ok(())
}

/// Flushes a folder's entries to disk.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noreplace_refuses_to_clobber() {
        let d = tempfile::tempdir().expect("tempdir");
        let (a, b) = (d.path().join("a"), d.path().join("sub/b"));
        fs::write(&a, "a").expect("write");
        rename_noreplace(&a, &b).expect("first rename");
        fs::write(&a, "again").expect("write");
        let err = rename_noreplace(&a, &b).expect_err("exists");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read_to_string(&b).expect("read"), "a");
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("x/y.yaml");
        write_atomic(&p, b"one").expect("write");
        write_atomic(&p, b"two").expect("write");
        assert_eq!(fs::read_to_string(&p).expect("read"), "two");
        let names: Vec<_> = fs::read_dir(d.path().join("x")).expect("dir").collect();
        assert_eq!(names.len(), 1);
    }
}
