//! coord's private index, `.git/coord/index`: one file holding the answers coord keeps about
//! its own state that any later state invalidates by itself (the clean mark, the vouch, the
//! quiet mark with the saved status), each in a section of its own. One versioned layout, one
//! checksum over every section, written whole to a temporary file renamed over the old one,
//! so a reader sees the old file or the new one. Each section is bound to the state it was
//! made in (HEAD, git's index checksum and the stat keys of the files it covers) and checked
//! against the state found before it is used: a section that no longer matches answers
//! nothing, and what the index cannot answer is read from the files. A missing, damaged,
//! truncated or other-version file reads as empty; the files of the earlier layout (one per
//! section) are removed when the index is first written. Does file I/O under `.git/coord/`.

use crate::hash::checksum;
use std::path::Path;

/// The index file, relative to the git directory.
const PATH: &str = "coord/index";
/// The first bytes of the index file: its format and version.
const MAGIC: &[u8] = b"coord index 1\n";
/// The files of the earlier layout, one per section, relative to the git directory.
const OLD_FILES: [&str; 4] = [
    "coord/clean-mark",
    "coord/clean-vouch",
    "coord/quiet-mark",
    "coord/quiet-board",
];

/// A section of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// The clean mark (`clean`).
    Clean = 1,
    /// The vouch the last operation left (`clean::Vouch`).
    Vouch = 2,
    /// The quiet mark, with what `coord status` shows in its state (`quiet`).
    Quiet = 3,
}

impl Section {
    const ALL: [Section; 3] = [Section::Clean, Section::Vouch, Section::Quiet];

    /// Returns the section's name, as docs/design.md gives it.
    pub fn name(self) -> &'static str {
        match self {
            Section::Clean => "clean",
            Section::Vouch => "vouch",
            Section::Quiet => "quiet",
        }
    }
}

/// The sections of an index, as read: each section's tag and bytes, in tag order.
#[derive(Debug, Default, PartialEq, Eq)]
struct Sections(Vec<(u8, Vec<u8>)>);

impl Sections {
    /// Returns the bytes of `section`, if the index holds it.
    fn get(&self, section: Section) -> Option<&[u8]> {
        let tag = section as u8;
        self.0
            .iter()
            .find(|(t, _)| *t == tag)
            .map(|(_, bytes)| &bytes[..])
    }

    /// Sets `section` to `bytes`, or removes it.
    fn set(&mut self, section: Section, bytes: Option<Vec<u8>>) {
        let tag = section as u8;
        self.0.retain(|(t, _)| *t != tag);
        if let Some(bytes) = bytes {
            let at = self.0.partition_point(|(t, _)| *t < tag);
            self.0.insert(at, (tag, bytes));
        }
    }

    /// Encodes the sections: magic, the checksum of the rest, then per section its tag and
    /// length and bytes; integers little-endian.
    fn encode(&self) -> Vec<u8> {
        let mut rest = Vec::new();
        for (tag, bytes) in &self.0 {
            rest.push(*tag);
            rest.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            rest.extend_from_slice(bytes);
        }
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&checksum(&rest).to_le_bytes());
        out.extend_from_slice(&rest);
        out
    }

    /// Decodes what [`Sections::encode`] wrote, checking its checksum; None for anything else.
    fn decode(bytes: &[u8]) -> Option<Sections> {
        let (sum, mut rest) = bytes.strip_prefix(MAGIC)?.split_first_chunk::<8>()?;
        if checksum(rest) != u64::from_le_bytes(*sum) {
            return None;
        }
        let mut sections = Vec::new();
        while let Some((&tag, tail)) = rest.split_first() {
            let (len, tail) = tail.split_first_chunk::<8>()?;
            let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
            let (bytes, tail) = tail.split_at_checked(len)?;
            sections.push((tag, bytes.to_vec()));
            rest = tail;
        }
        Some(Sections(sections))
    }
}

/// Reads the index of the git directory `git_dir`; None when there is none that reads.
fn read(git_dir: &Path) -> Option<Sections> {
    let bytes = crate::fsx::read_private(&git_dir.join(PATH)).ok()?;
    Sections::decode(&bytes)
}

/// Returns the bytes of `section` in the index of `git_dir`, if it holds it.
pub(super) fn section(git_dir: &Path, section: Section) -> Option<Vec<u8>> {
    read(git_dir)?.get(section).map(<[u8]>::to_vec)
}

/// Returns the sections the index of `git_dir` holds (none when it does not read): for
/// looking at the index from outside (tests, benchmarks).
pub fn held(git_dir: &Path) -> Vec<Section> {
    let sections = read(git_dir).unwrap_or_default();
    Section::ALL
        .into_iter()
        .filter(|s| sections.get(*s).is_some())
        .collect()
}

/// Removes `section` from the index of `git_dir` (what it answered is then read from the
/// files): for a benchmark or a test that measures the way without it.
pub fn forget(git_dir: &Path, section: Section) {
    set(git_dir, section, None);
}

/// Sets `section` of the index of `git_dir` to `bytes`, or removes it, keeping the other
/// sections; the files of the earlier layout go when an index is first written. A failure only means the
/// next operation does without the section.
pub(super) fn set(git_dir: &Path, section: Section, bytes: Option<Vec<u8>>) {
    let old = read(git_dir);
    if bytes.is_none() && old.as_ref().is_none_or(|s| s.get(section).is_none()) {
        return;
    }
    if old.is_none() {
        for file in OLD_FILES {
            let _ = std::fs::remove_file(git_dir.join(file));
        }
    }
    let mut sections = old.unwrap_or_default();
    sections.set(section, bytes);
    let _ = crate::fsx::write_private(&git_dir.join(PATH), &sections.encode(), false);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Sections {
        let mut s = Sections::default();
        s.set(Section::Quiet, Some(b"quiet".to_vec()));
        s.set(Section::Clean, Some(vec![7; 8]));
        s.set(Section::Vouch, Some(Vec::new()));
        s
    }

    #[test]
    fn sections_read_back_in_tag_order_and_nothing_damaged_does() {
        let whole = sample().encode();
        let read = Sections::decode(&whole).expect("reads back");
        assert_eq!(read, sample());
        assert_eq!(
            read.0.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        for cut in 0..whole.len() {
            assert_eq!(Sections::decode(&whole[..cut]), None, "cut at {cut}");
        }
        for at in 0..whole.len() {
            let mut flipped = whole.clone();
            flipped[at] ^= 0x20;
            assert_eq!(Sections::decode(&flipped), None, "byte {at} changed");
        }
        let mut longer = whole.clone();
        longer.push(0);
        assert_eq!(Sections::decode(&longer), None);
    }

    #[test]
    fn setting_a_section_keeps_the_others_and_removes_the_old_files() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(dir.path().join("coord")).expect("mkdir");
        for file in OLD_FILES {
            std::fs::write(dir.path().join(file), "old").expect("write");
        }
        forget(dir.path(), Section::Clean);
        assert!(
            dir.path().join(OLD_FILES[0]).exists(),
            "nothing written, nothing removed"
        );
        set(dir.path(), Section::Clean, Some(b"c".to_vec()));
        set(dir.path(), Section::Quiet, Some(b"q".to_vec()));
        assert!(OLD_FILES.iter().all(|f| !dir.path().join(f).exists()));
        assert_eq!(section(dir.path(), Section::Clean), Some(b"c".to_vec()));
        set(dir.path(), Section::Clean, None);
        assert_eq!(section(dir.path(), Section::Clean), None);
        assert_eq!(section(dir.path(), Section::Quiet), Some(b"q".to_vec()));
        std::fs::write(dir.path().join(PATH), b"coord index 1\ncut").expect("write");
        assert_eq!(
            section(dir.path(), Section::Quiet),
            None,
            "a cut index is empty"
        );
    }
}
