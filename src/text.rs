//! A task file's text as a board holds it: in memory, or left where the stat cache keeps it
//! (a range of one of its files, `.git/coord/stat-cache.bin` or a history folder's file under
//! `.git/coord/stat-cache.d/`, opened by the load), read when the task is parsed
//! or the cache is written again. A load of 10,000 cached tasks so copies none of their texts,
//! and a board holds ~40 bytes per cached task instead of its text. A stored text is checked
//! against the content hash its entry holds when it is read; one that does not read or check
//! (a cache file damaged since it was written) removes that cache file, so the next load reads
//! the files it covered from `work/` again. The only I/O here is that: a positioned read of a file the
//! load opened (the cache is replaced by a rename, never written in place, so the open file
//! keeps the bytes the load saw), and the removal.

use std::borrow::Cow;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// A task file's exact text.
#[derive(Debug, Clone)]
pub enum Text {
    /// Held in memory (read from the file, or written by the plan).
    Held(String),
    /// Left in the stat cache file.
    Stored(Stored),
}

/// The stat cache file a load opened, and where it was.
#[derive(Debug)]
pub struct CacheFile {
    file: std::fs::File,
    path: std::path::PathBuf,
}

impl CacheFile {
    /// Returns the file opened from `path`.
    pub fn new(file: std::fs::File, path: std::path::PathBuf) -> CacheFile {
        CacheFile { file, path }
    }

    /// Removes the file from its path when it is still this one (a failure only leaves it).
    fn forget(&self) {
        use std::os::unix::fs::MetadataExt;
        let (Ok(open), Ok(there)) = (self.file.metadata(), std::fs::symlink_metadata(&self.path))
        else {
            return;
        };
        if (open.dev(), open.ino()) == (there.dev(), there.ino()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A text left in an open file: where it starts, its length and its content hash.
#[derive(Debug, Clone)]
pub struct Stored {
    source: Arc<CacheFile>,
    at: u64,
    len: u32,
    hash: u64,
}

impl Stored {
    /// Returns the text of `len` bytes at `at` in `source`, whose content hash
    /// ([`crate::board::content_hash`]) is `hash`.
    pub fn new(source: Arc<CacheFile>, at: u64, len: u32, hash: u64) -> Stored {
        Stored {
            source,
            at,
            len,
            hash,
        }
    }

    /// Reads the bytes, unchecked, into `buf` (replacing what it held).
    fn read_into(&self, buf: &mut Vec<u8>) -> std::io::Result<()> {
        buf.clear();
        buf.resize(self.len as usize, 0);
        self.source.file.read_exact_at(buf, self.at)
    }

    /// Reads the text and checks it; a text that does not read or check forgets the file.
    fn read(&self) -> Option<String> {
        let mut buf = Vec::new();
        let text = self
            .read_into(&mut buf)
            .ok()
            .filter(|()| crate::hash::fnv1a(&buf) == self.hash)
            .and_then(|()| String::from_utf8(buf).ok());
        if text.is_none() {
            self.source.forget();
        }
        text
    }
}

impl Text {
    /// Returns the length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Text::Held(s) => s.len(),
            Text::Stored(s) => s.len as usize,
        }
    }

    /// Returns the text; for a stored one, read now and checked against its hash. None when
    /// it cannot be read or is not what the cache entry says (a cache file damaged since:
    /// then the cache file is removed, see the module's documentation).
    pub fn read(&self) -> Option<Cow<'_, str>> {
        match self {
            Text::Held(s) => Some(Cow::Borrowed(s)),
            Text::Stored(s) => s.read().map(Cow::Owned),
        }
    }

    /// Writes the bytes to `out`, reading a stored text through `buf` (unchecked: the next
    /// read of the copy checks it).
    pub fn write_to(
        &self,
        out: &mut impl std::io::Write,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        match self {
            Text::Held(s) => out.write_all(s.as_bytes()),
            Text::Stored(s) => {
                s.read_into(buf)?;
                out.write_all(buf)
            }
        }
    }
}

/// Texts stored one after another in one file, written out with one read: the rewrite of
/// the stat cache copies every hit's text, and a read per text was most of rewriting it at
/// 100,000 tasks. Unchecked, as [`Text::write_to`].
#[derive(Default)]
pub struct StoredRun<'t> {
    /// The file of the run's texts; None when the run is empty.
    source: Option<&'t Arc<CacheFile>>,
    /// Where the run starts in it.
    at: u64,
    /// How many bytes the run holds.
    len: u64,
}

/// The most bytes a run reads at once (its buffer is held while the cache is written).
const RUN_MAX: u64 = 1 << 18;

impl<'t> StoredRun<'t> {
    /// Writes `text` to `out` after the texts before it, reading through `buf`: a stored
    /// text that follows the run's in the same file joins the run; anything else first
    /// writes the run out. [`StoredRun::flush`] writes what is left.
    pub fn write(
        &mut self,
        text: &'t Text,
        out: &mut impl std::io::Write,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        let Text::Stored(s) = text else {
            self.flush(out, buf)?;
            return text.write_to(out, buf);
        };
        let len = u64::from(s.len);
        let follows = self.source.is_some_and(|src| Arc::ptr_eq(src, &s.source))
            && self.at + self.len == s.at
            && self.len + len <= RUN_MAX;
        if follows {
            self.len += len;
            return Ok(());
        }
        self.flush(out, buf)?;
        (self.source, self.at, self.len) = (Some(&s.source), s.at, len);
        Ok(())
    }

    /// Writes the run's texts to `out` (through `buf`) and empties it.
    pub fn flush(
        &mut self,
        out: &mut impl std::io::Write,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        let Some(source) = self.source.take() else {
            return Ok(());
        };
        buf.clear();
        buf.resize(self.len as usize, 0);
        source.file.read_exact_at(buf, self.at)?;
        out.write_all(buf)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::Held(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    /// Returns the text at `at` of a file holding `bytes` in `dir`, and the file's path.
    fn stored(dir: &Path, bytes: &[u8], at: u64, len: u32) -> (Text, PathBuf) {
        let path = dir.join("stat-cache.bin");
        std::fs::write(&path, bytes).expect("write");
        let file = std::fs::File::open(&path).expect("open");
        let source = Arc::new(CacheFile::new(file, path.clone()));
        let hash = crate::hash::fnv1a(b"title: a\n");
        (Text::Stored(Stored::new(source, at, len, hash)), path)
    }

    #[test]
    fn a_stored_text_is_read_from_its_range_and_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (text, path) = stored(dir.path(), b"xxtitle: a\nyy", 2, 9);
        assert_eq!(text.len(), 9);
        assert_eq!(text.read().as_deref(), Some("title: a\n"));
        let mut out = Vec::new();
        text.write_to(&mut out, &mut Vec::new()).expect("write");
        assert_eq!(out, b"title: a\n");
        assert!(path.exists(), "a text that reads keeps the file");
    }

    /// Texts that lie one after another in one file are read together; a gap, another file
    /// or a held text ends a run, and each text is written once, in order.
    #[test]
    fn stored_texts_are_written_in_runs_of_what_follows_in_one_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let open = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).expect("write");
            Arc::new(CacheFile::new(
                std::fs::File::open(&path).expect("open"),
                path,
            ))
        };
        let (a, b) = (open("a", b"aaabbbXXccc"), open("b", b"dddeee"));
        let at = |source: &Arc<CacheFile>, at, len| {
            Text::Stored(Stored::new(Arc::clone(source), at, len, 0))
        };
        let texts = [
            at(&a, 0, 3),
            at(&a, 3, 3),
            at(&a, 8, 3),
            at(&b, 3, 3),
            at(&b, 0, 3),
            Text::Held("fff".to_string()),
            at(&a, 0, 3),
        ];
        let (mut out, mut buf, mut run) = (Vec::new(), Vec::new(), StoredRun::default());
        for text in &texts {
            run.write(text, &mut out, &mut buf).expect("write");
        }
        run.flush(&mut out, &mut buf).expect("flush");
        assert_eq!(String::from_utf8_lossy(&out), "aaabbbccceeedddfffaaa");
    }

    /// The cache is replaced by a rename, never written in place: a text keeps reading from
    /// the file it was stored in, whatever replaced that file at its path.
    #[test]
    fn a_stored_text_reads_after_its_file_is_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (text, path) = stored(dir.path(), b"xxtitle: a\nyy", 2, 9);
        std::fs::write(dir.path().join("new"), b"a new cache").expect("write");
        std::fs::rename(dir.path().join("new"), &path).expect("rename");
        assert_eq!(text.read().as_deref(), Some("title: a\n"));
        assert!(path.exists(), "the new file stays");
    }

    #[test]
    fn a_stored_text_that_does_not_check_forgets_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (bytes, why) in [
            (
                &b"xxtitle: b\nyy"[..],
                "bytes that are not what the entry says",
            ),
            (&b"xxtitle"[..], "a range past the end"),
        ] {
            let (text, path) = stored(dir.path(), bytes, 2, 9);
            assert!(text.read().is_none(), "{why}");
            assert!(
                !path.exists(),
                "{why}: the next load reads every file again"
            );
        }
        let (text, path) = stored(dir.path(), b"xxtitle: b\nyy", 2, 9);
        std::fs::write(dir.path().join("new"), b"a new cache").expect("write");
        std::fs::rename(dir.path().join("new"), &path).expect("rename");
        assert!(text.read().is_none());
        assert!(
            path.exists(),
            "a newer cache file at the path is left alone"
        );
    }
}
