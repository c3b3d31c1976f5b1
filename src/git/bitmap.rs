//! The reachability bitmap of a merged pack (git's `.bitmap`, format 1): which of the pack's
//! objects each type is, and which HEAD's commit reaches, one bit per object in pack order,
//! as EWAH bitmaps. `git upload-pack` reads it to answer a clone without walking every
//! commit's trees and sends the pack as it is. Pure: builds bytes; merge.rs writes them.

use std::collections::HashMap;

use sha1::{Digest, Sha1};

use super::merge::Written;
use super::Oid;

/// What one object of a pack is: an object stored whole (its git type number: 1 commit, 2
/// tree, 3 blob, 4 tag) or a delta of another object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Stored whole, with this type number.
    Whole(u8),
    /// Stored as a delta of the object with this id.
    Delta(Oid),
}

/// The bitmap flag saying every object a bitmapped commit reaches is in the pack.
const FULL_DAG: u16 = 1;

/// Returns the positions of `written` in the order of their ids (a pack index's order).
pub fn sorted(written: &[Written]) -> Vec<u32> {
    let mut index: Vec<u32> = (0..written.len() as u32).collect();
    index.sort_unstable_by_key(|&i| written[i as usize].id);
    index
}

/// Returns the bitmap file of the pack whose objects are `written` (in pack order; `index`
/// in id order) and whose checksum is `sum`, with one bitmap for the commit `reach.0` that
/// reaches exactly the objects `reach.1`. `None` when one of those objects is not in the
/// pack, or an object's type cannot be told (a delta's base missing): the pack then gets
/// no bitmap, which git would refuse or, worse, trust.
pub fn build(
    written: &[Written],
    index: &[u32],
    reach: &(Oid, Vec<Oid>),
    sum: &[u8; 20],
) -> Option<Vec<u8>> {
    let (tip, reached) = reach;
    let position: HashMap<Oid, usize> =
        written.iter().enumerate().map(|(i, w)| (w.id, i)).collect();
    let types = types(written, &position)?;
    let mut head = vec![0u64; written.len().div_ceil(64)];
    for id in reached {
        let at = *position.get(id)?;
        head[at / 64] |= 1 << (at % 64);
    }
    let tip_in_index = index.iter().position(|&i| written[i as usize].id == *tip)?;
    let mut out = b"BITM".to_vec();
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&FULL_DAG.to_be_bytes());
    out.extend_from_slice(&1u32.to_be_bytes());
    out.extend_from_slice(sum);
    for kind in 1..=4u8 {
        let mut words = vec![0u64; written.len().div_ceil(64)];
        for (at, _) in types.iter().enumerate().filter(|(_, &t)| t == kind) {
            words[at / 64] |= 1 << (at % 64);
        }
        ewah(&mut out, written.len(), &words);
    }
    out.extend_from_slice(&u32::try_from(tip_in_index).ok()?.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    ewah(&mut out, written.len(), &head);
    let own = Sha1::digest(&out);
    out.extend_from_slice(&own);
    Some(out)
}

/// Returns every object's type number in pack order, following each delta to the object
/// stored whole at the end of its chain; `None` when a chain leaves the pack or loops.
fn types(written: &[Written], position: &HashMap<Oid, usize>) -> Option<Vec<u8>> {
    let mut types = vec![0u8; written.len()];
    for start in 0..written.len() {
        let mut at = start;
        let mut chain = Vec::new();
        let kind = loop {
            if types[at] != 0 {
                break types[at];
            }
            match written[at].kind {
                Kind::Whole(kind) => break kind,
                Kind::Delta(base) => {
                    chain.push(at);
                    if chain.len() > written.len() {
                        return None;
                    }
                    at = *position.get(&base)?;
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
