//! The reachability bitmap of a merged pack (git's `.bitmap`, format 1): which of the pack's
//! objects each type is, and which HEAD's commit reaches, one bit per object in pack order,
//! as EWAH bitmaps. `git upload-pack` reads it to answer a clone without walking every
//! commit's trees and sends the pack as it is. Builds the bytes (merge.rs writes them), and
//! reads back a bitmap of the form it writes (the next merge starts from what it says).

use std::path::Path;

use sha1::{Digest, Sha1};

use super::Oid;

use super::merge::{Objects, Reach};

/// What one object of a pack is: stored whole (its git type number: 1 commit, 2 tree, 3
/// blob, 4 tag) or a delta of another object (its number in [`Objects`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Stored whole, with this type number.
    Whole(u8),
    /// Stored as a delta of the object with this number.
    Delta(u32),
}

/// The bitmap flag saying every object a bitmapped commit reaches is in the pack.
const FULL_DAG: u16 = 1;

/// Returns the bitmap file of the pack whose `objects` were copied and whose checksum is
/// `sum`, with one bitmap, for HEAD's commit, of what `reach` says it reaches (every one of
/// those objects is in the pack: the walk that made `reach` checked it). `None` when an
/// object's type cannot be told (its delta chain loops), so no bitmap is written.
pub fn build(objects: &Objects, reach: &Reach, sum: &[u8; 20]) -> Option<Vec<u8>> {
    let types = types(objects)?;
    let n = objects.order.len();
    let mut out = b"BITM".to_vec();
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&FULL_DAG.to_be_bytes());
    out.extend_from_slice(&1u32.to_be_bytes());
    out.extend_from_slice(sum);
    for kind in 1..=4u8 {
        let words = in_pack_order(objects, |number| types[number] == kind);
        ewah(&mut out, n, &words);
    }
    out.extend_from_slice(&u32::try_from(reach.tip).ok()?.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    let reached = |number: usize| reach.bits[number / 64] & (1 << (number % 64)) != 0;
    ewah(&mut out, n, &in_pack_order(objects, reached));
    let own = Sha1::digest(&out);
    out.extend_from_slice(&own);
    Some(out)
}

/// Returns the plain words of a bitmap whose bit `i` is whether `set` holds for the object
/// at position `i` of the pack.
fn in_pack_order(objects: &Objects, set: impl Fn(usize) -> bool) -> Vec<u64> {
    let mut words = vec![0u64; objects.order.len().div_ceil(64)];
    for (at, &number) in objects.order.iter().enumerate() {
        if set(number as usize) {
            words[at / 64] |= 1 << (at % 64);
        }
    }
    words
}

/// Returns every object's type number (by object number), following each delta to the
/// object stored whole at the end of its chain; `None` when a chain loops.
fn types(objects: &Objects) -> Option<Vec<u8>> {
    let mut types = vec![0u8; objects.kind.len()];
    for start in 0..objects.kind.len() {
        let mut at = start;
        let mut chain = Vec::new();
        let kind = loop {
            if types[at] != 0 {
                break types[at];
            }
            match objects.kind[at] {
                Kind::Whole(kind) => break kind,
                Kind::Delta(base) => {
                    chain.push(at);
                    if chain.len() > objects.kind.len() {
                        return None;
                    }
                    at = base as usize;
                }
            }
        };
        types[at] = kind;
        for i in chain {
            types[i] = kind;
        }
    }
    Some(types)
}

/// Appends an EWAH bitmap of `bits` bits whose plain words are `words`: one marker word
/// saying that all of them follow as they are (no run is compressed), then the words.
fn ewah(out: &mut Vec<u8>, bits: usize, words: &[u64]) {
    let bits = u32::try_from(bits).unwrap_or(u32::MAX);
    out.extend_from_slice(&bits.to_be_bytes());
    out.extend_from_slice(&(words.len() as u32 + 1).to_be_bytes());
    let marker = (words.len() as u64) << 33;
    out.extend_from_slice(&marker.to_be_bytes());
    for w in words {
        out.extend_from_slice(&w.to_be_bytes());
    }
    out.extend_from_slice(&0u32.to_be_bytes());
}

/// Reads the bitmap of the pack at `base` (its path without extension) when coord wrote it:
/// returns its commit and every object that commit reaches. `None` for any other file (none,
/// another form, git's compressed or multi-commit bitmaps, a checksum that does not match
/// the file or the pack): the caller then walks the whole history.
pub fn read(base: &Path) -> Option<(Oid, Vec<Oid>)> {
    let bytes = std::fs::read(base.with_extension("bitmap")).ok()?;
    let idx = std::fs::read(base.with_extension("idx")).ok()?;
    let (body, own) = bytes.split_at(bytes.len().checked_sub(20)?);
    if Sha1::digest(body)[..] != *own || idx.len() < 40 {
        return None;
    }
    let pack_sum = &idx[idx.len() - 40..idx.len() - 20];
    let head_ok = body.get(..8)? == b"BITM\0\x01\0\x01"
        && body.get(8..12)? == 1u32.to_be_bytes()
        && body.get(12..32)? == pack_sum;
    if !head_ok {
        return None;
    }
    let ids = idx_ids(&idx)?;
    let mut at = 32;
    for _ in 0..4 {
        plain_words(body, &mut at, ids.len())?;
    }
    let tip = *ids.get(u32_at(body, at)? as usize)?;
    if body.get(at + 4..at + 6)? != [0, 0] {
        return None;
    }
    at += 6;
    let words = plain_words(body, &mut at, ids.len())?;
    (at == body.len()).then_some(())?;
    let order = pack_order(&idx, &ids)?;
    let reached = order
        .iter()
        .enumerate()
        .filter(|(i, _)| words[i / 64] & (1 << (i % 64)) != 0)
        .map(|(_, id)| *id)
        .collect();
    Some((tip, reached))
}

/// Reads an EWAH bitmap of `bits` bits at `at` written as [`ewah`] writes one (one marker
/// word, then every word plain); returns the words and moves `at` past it.
fn plain_words(bytes: &[u8], at: &mut usize, bits: usize) -> Option<Vec<u64>> {
    let n = bits.div_ceil(64);
    if u32_at(bytes, *at)? as usize != bits || u32_at(bytes, *at + 4)? as usize != n + 1 {
        return None;
    }
    let word = |i: usize| -> Option<u64> {
        let from = *at + 8 + i * 8;
        Some(u64::from_be_bytes(
            bytes.get(from..from + 8)?.try_into().ok()?,
        ))
    };
    if word(0)? != (n as u64) << 33 {
        return None;
    }
    let words = (1..=n).map(word).collect::<Option<Vec<u64>>>()?;
    *at += 8 + (n + 1) * 8;
    (u32_at(bytes, *at)? == 0).then_some(())?;
    *at += 4;
    Some(words)
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// Returns the object ids of a version 2 pack index, in its (id) order.
fn idx_ids(idx: &[u8]) -> Option<Vec<Oid>> {
    if idx.get(..8)? != b"\xfftOc\0\0\0\x02" {
        return None;
    }
    let n = u32_at(idx, 8 + 255 * 4)? as usize;
    let start = 8 + 256 * 4;
    (0..n)
        .map(|i| Oid::from_bytes(idx.get(start + i * 20..start + i * 20 + 20)?).ok())
        .collect()
}

/// Returns the ids of a version 2 pack index in pack order (by offset); `None` for an index
/// with offsets past 2 GiB (coord then walks the history instead).
fn pack_order(idx: &[u8], ids: &[Oid]) -> Option<Vec<Oid>> {
    let offsets = 8 + 256 * 4 + ids.len() * 24;
    let mut by_offset = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let offset = u32_at(idx, offsets + i * 4)?;
            (offset & 0x8000_0000 == 0).then_some((offset, *id))
        })
        .collect::<Option<Vec<_>>>()?;
    by_offset.sort_unstable();
    Some(by_offset.into_iter().map(|(_, id)| id).collect())
}
