//! Copying the objects of several packs into one (merge.rs decides when): each object's
//! stored bytes once, a delta with its base named by distance when the base is already
//! written; and the version 2 pack index read from the old packs and written for the new
//! one. What the copy learns is kept per object in id order ([`Objects`]), a few dozen bytes
//! each, so a merge's memory is bounded by the number of objects, not their size. Does I/O
//! (the pack files).

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use sha1::{Digest, Sha1};

use super::super::bitmap::Kind;
use super::super::{GitError, Oid};

/// Where the new pack holds no copy of an object yet.
const NOT_WRITTEN: u64 = u64::MAX;

/// The objects of the packs merged, in id order (the new index's order; an object's place
/// in it is its number here), and what the copy wrote for each.
pub struct Objects {
    /// Every object id, sorted, once.
    pub ids: Vec<Oid>,
    /// Where each object's entry starts in the new pack.
    offset: Vec<u64>,
    /// The CRC-32 of each object's entry.
    crc: Vec<u32>,
    /// Each object's type, or the number of its delta base.
    pub kind: Vec<Kind>,
    /// The objects' numbers in pack order.
    pub order: Vec<u32>,
}

impl Objects {
    /// Lists the objects of the pack indexes at `idxs`.
    pub fn list(idxs: &[PathBuf]) -> Result<Objects, GitError> {
        let mut ids = Vec::new();
        for idx in idxs {
            ids.extend(read_idx(idx)?.into_iter().map(|l| l.id));
        }
        ids.sort_unstable();
        ids.dedup();
        let n = ids.len();
        Ok(Objects {
            ids,
            offset: vec![NOT_WRITTEN; n],
            crc: vec![0; n],
            kind: vec![Kind::Whole(0); n],
            order: Vec::with_capacity(n),
        })
    }

    /// Returns the number of the object `id`, if one of the packs holds it.
    pub fn find(&self, id: &Oid) -> Option<usize> {
        self.ids.binary_search(id).ok()
    }
}

/// One object of an old pack: its id, where its entry starts, and its entry's CRC-32.
#[derive(Clone, Copy)]
struct Listed {
    id: Oid,
    offset: u64,
    crc: u32,
}

/// Copies every object of the packs (`.pack` and `.idx` beside each base path, oldest first)
/// into a new pack at `to`, synced; the first copy of an object wins. Returns the pack's
/// checksum.
pub fn copy_packs(
    bases: &[PathBuf],
    objects: &mut Objects,
    to: &Path,
) -> Result<[u8; 20], GitError> {
    let file = super::create(to)?;
    let mut out = PackOut::new(BufWriter::new(file), objects.ids.len()).map_err(|e| e.at(to))?;
    for base in bases {
        let list = read_idx(&base.with_extension("idx"))?;
        let pack = base.with_extension("pack");
        copy_pack(&pack, list, &mut out, objects).map_err(|e| e.at(&pack))?;
    }
    if objects.order.len() != objects.ids.len() {
        return Err(PackError::Bad("an object listed by an index is in no pack").at(to));
    }
    out.finish().map_err(|source| GitError::Write {
        path: to.to_path_buf(),
        source,
    })
}

/// Copies the objects of one pack, in their order there, skipping those already written.
fn copy_pack(
    path: &Path,
    mut list: Vec<Listed>,
    out: &mut PackOut,
    objects: &mut Objects,
) -> Result<(), PackError> {
    list.sort_by_key(|l| l.offset);
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut input = BufReader::with_capacity(1 << 16, file);
    let mut head = [0u8; 12];
    input.read_exact(&mut head)?;
    let count = u32::from_be_bytes([head[8], head[9], head[10], head[11]]);
    if &head[..4] != b"PACK" || count as usize != list.len() {
        return Err(PackError::Bad("pack header does not match its index"));
    }
    let mut pos = 12u64;
    let mut entry = Vec::new();
    for (i, l) in list.iter().enumerate() {
        let end = list.get(i + 1).map_or(len.saturating_sub(20), |n| n.offset);
        if l.offset != pos || end <= pos {
            return Err(PackError::Bad("object offsets do not tile the pack"));
        }
        entry.resize(
            usize::try_from(end - pos).map_err(|_| PackError::Bad("huge object"))?,
            0,
        );
        input.read_exact(&mut entry)?;
        pos = end;
        if crc32(&entry) != l.crc {
            return Err(PackError::Bad("an object's CRC does not match the index"));
        }
        let number = objects
            .find(&l.id)
            .ok_or(PackError::Bad("an object is in no index"))?;
        if objects.offset[number] != NOT_WRITTEN {
            continue;
        }
        let parsed = entry_kind(&entry, l.offset, &list, objects)?;
        let offset = out.offset;
        objects.crc[number] = out.entry(&entry, &parsed, objects)?;
        objects.offset[number] = offset;
        objects.kind[number] = parsed.kind;
        objects.order.push(number as u32);
    }
    Ok(())
}

/// An old entry taken apart: what it is, its size, and where its compressed data starts.
struct Entry {
    kind: Kind,
    size: u64,
    data: usize,
}

/// Reads an entry's header: its type and size, and for a delta, its base's number.
fn entry_kind(
    entry: &[u8],
    offset: u64,
    list: &[Listed],
    objects: &Objects,
) -> Result<Entry, PackError> {
    let bad = || PackError::Bad("truncated object header");
    let first = *entry.first().ok_or_else(bad)?;
    let kind = (first >> 4) & 7;
    let mut size = u64::from(first & 15);
    let mut shift = 4;
    let mut i = 1;
    let mut byte = first;
    while byte & 0x80 != 0 {
        byte = *entry.get(i).ok_or_else(bad)?;
        size |= u64::from(byte & 0x7f).checked_shl(shift).ok_or_else(bad)?;
        shift += 7;
        i += 1;
    }
    let base = match kind {
        1..=4 => None,
        6 => {
            let (back, used) = ofs_decode(entry.get(i..).ok_or_else(bad)?).ok_or_else(bad)?;
            i += used;
            let at = offset
                .checked_sub(back)
                .and_then(|b| list.binary_search_by_key(&b, |l| l.offset).ok())
                .ok_or(PackError::Bad("a delta's base is not in its pack"))?;
            Some(list[at].id)
        }
        7 => {
            let id = entry.get(i..i + 20).ok_or_else(bad)?;
            i += 20;
            Some(Oid::from_bytes(id).map_err(|_| bad())?)
        }
        _ => return Err(PackError::Bad("unknown object type")),
    };
    let kind = match base {
        None => Kind::Whole(kind),
        Some(id) => Kind::Delta(objects.find(&id).ok_or(PackError::Bad(
            "a delta's base is in none of the packs merged",
        ))? as u32),
    };
    Ok(Entry {
        kind,
        size,
        data: i,
    })
}

/// Decodes a delta's base distance (git's offset encoding); returns it and the bytes used.
pub(in crate::git) fn ofs_decode(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut i = 0;
    let mut c = *bytes.first()?;
    let mut ofs = u64::from(c & 0x7f);
    while c & 0x80 != 0 {
        i += 1;
        c = *bytes.get(i)?;
        ofs = ofs.checked_add(1)?.checked_mul(128)? | u64::from(c & 0x7f);
    }
    Some((ofs, i + 1))
}

/// Encodes a delta's base distance as git does.
pub(in crate::git) fn ofs_encode(mut ofs: u64) -> Vec<u8> {
    let mut out = vec![(ofs & 0x7f) as u8];
    ofs >>= 7;
    while ofs != 0 {
        ofs -= 1;
        out.push(0x80 | (ofs & 0x7f) as u8);
        ofs >>= 7;
    }
    out.reverse();
    out
}

/// Encodes an entry's type and size header.
fn header(kind: u8, mut size: u64) -> Vec<u8> {
    let mut byte = (kind << 4) | (size & 15) as u8;
    size >>= 4;
    let mut out = Vec::new();
    while size != 0 {
        out.push(byte | 0x80);
        byte = (size & 0x7f) as u8;
        size >>= 7;
    }
    out.push(byte);
    out
}

/// The new pack being written: its bytes go through SHA-1 as they are written.
struct PackOut {
    out: BufWriter<File>,
    sha: Sha1,
    offset: u64,
}

impl PackOut {
    /// Starts a pack of `count` objects.
    fn new(out: BufWriter<File>, count: usize) -> Result<PackOut, PackError> {
        let count =
            u32::try_from(count).map_err(|_| PackError::Bad("too many objects for one pack"))?;
        let mut pack = PackOut {
            out,
            sha: Sha1::new(),
            offset: 0,
        };
        let mut head = b"PACK\0\0\0\x02".to_vec();
        head.extend_from_slice(&count.to_be_bytes());
        pack.put(&head)?;
        Ok(pack)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.sha.update(bytes);
        self.offset += bytes.len() as u64;
        self.out.write_all(bytes)
    }

    /// Writes one entry: as it was, or for a delta whose base is already written, with the
    /// base named by its distance (a delta by offset); returns the entry's CRC-32.
    fn entry(&mut self, old: &[u8], parsed: &Entry, objects: &Objects) -> Result<u32, PackError> {
        let mut new = match parsed.kind {
            Kind::Delta(base) => match objects.offset[base as usize] {
                NOT_WRITTEN => {
                    let mut h = header(7, parsed.size);
                    h.extend_from_slice(objects.ids[base as usize].as_bytes());
                    h
                }
                base_at => {
                    let mut h = header(6, parsed.size);
                    h.extend(ofs_encode(self.offset - base_at));
                    h
                }
            },
            Kind::Whole(_) => old[..parsed.data].to_vec(),
        };
        new.extend_from_slice(&old[parsed.data..]);
        self.put(&new)?;
        Ok(crc32(&new))
    }

    /// Writes the trailing checksum and syncs the file; returns the checksum.
    fn finish(mut self) -> io::Result<[u8; 20]> {
        let sum: [u8; 20] = self.sha.clone().finalize().into();
        self.out.write_all(&sum)?;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(sum)
    }
}

/// Why an old pack could not be copied.
#[derive(Debug)]
enum PackError {
    Io(io::Error),
    Bad(&'static str),
}

impl From<io::Error> for PackError {
    fn from(e: io::Error) -> Self {
        PackError::Io(e)
    }
}

impl PackError {
    /// Names the pack the error is about.
    fn at(self, path: &Path) -> GitError {
        match self {
            PackError::Io(source) => GitError::Io {
                path: path.to_path_buf(),
                source,
            },
            PackError::Bad(reason) => GitError::BadPack {
                path: path.to_path_buf(),
                reason,
            },
        }
    }
}

/// Reads a version 2 pack index: every object's id, offset and CRC-32.
fn read_idx(path: &Path) -> Result<Vec<Listed>, GitError> {
    let bytes = std::fs::read(path).map_err(|source| GitError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_idx(&bytes).ok_or_else(|| GitError::BadPack {
        path: path.to_path_buf(),
        reason: "not a version 2 pack index",
    })
}

/// Parses a version 2 pack index; `None` when it is not one.
fn parse_idx(bytes: &[u8]) -> Option<Vec<Listed>> {
    if bytes.get(..8)? != b"\xfftOc\0\0\0\x02" {
        return None;
    }
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    let n = u32_at(8 + 255 * 4)? as usize;
    let ids = 8 + 256 * 4;
    let crcs = ids + n * 20;
    let offsets = crcs + n * 4;
    let large = offsets + n * 4;
    (0..n)
        .map(|i| {
            let id = Oid::from_bytes(bytes.get(ids + i * 20..ids + i * 20 + 20)?).ok()?;
            let small = u32_at(offsets + i * 4)?;
            let offset = if small & 0x8000_0000 == 0 {
                u64::from(small)
            } else {
                let at = large + (small & 0x7fff_ffff) as usize * 8;
                u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?)
            };
            Some(Listed {
                id,
                offset,
                crc: u32_at(crcs + i * 4)?,
            })
        })
        .collect()
}

/// Returns the version 2 pack index of the copied `objects`, for the pack whose checksum is
/// `sum`.
pub fn idx_bytes(objects: &Objects, sum: &[u8; 20]) -> Vec<u8> {
    let mut out = b"\xfftOc\0\0\0\x02".to_vec();
    let mut fan = [0u32; 256];
    for id in &objects.ids {
        fan[usize::from(id.as_bytes()[0])] += 1;
    }
    let mut total = 0;
    for count in fan {
        total += count;
        out.extend_from_slice(&total.to_be_bytes());
    }
    for id in &objects.ids {
        out.extend_from_slice(id.as_bytes());
    }
    for crc in &objects.crc {
        out.extend_from_slice(&crc.to_be_bytes());
    }
    let mut large = Vec::new();
    for &offset in &objects.offset {
        let small = match u32::try_from(offset) {
            Ok(o) if o < 0x8000_0000 => o,
            _ => {
                large.extend_from_slice(&offset.to_be_bytes());
                0x8000_0000 | (large.len() / 8 - 1) as u32
            }
        };
        out.extend_from_slice(&small.to_be_bytes());
    }
    out.extend_from_slice(&large);
    out.extend_from_slice(sum);
    let own = Sha1::digest(&out);
    out.extend_from_slice(&own);
    out
}

/// The CRC-32 (IEEE) git stores per object in a pack index.
pub(in crate::git) fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    !bytes
        .iter()
        .fold(!0u32, |c, &b| TABLE[usize::from((c as u8) ^ b)] ^ (c >> 8))
}
