//! Hashing helpers shared by every layer: FNV-1a (content keys, jitter) and the 64-bit
//! checksum coord's own files under `.git/coord/` carry. None resists anyone choosing the bytes.
//! Also the random ids (idempotency keys, run ids) that only need to differ, and the digest a
//! task file records of a claim's idempotency key.

/// Returns 128 random bits in hex: an id no other process makes. Without the OS's randomness,
/// the time and the pid still tell two apart.
pub fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = (nanos ^ (u128::from(std::process::id()) << 96)).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Returns the first 128 bits of the SHA-256 of `text`, in hex: what a file records in place
/// of a key a client chose (an idempotency key), the same on every machine.
pub fn digest_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Returns the 64-bit FNV-1a hash of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_from(FNV_OFFSET, bytes)
}

/// The FNV-1a hash of no bytes, where [`fnv1a_from`] starts.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Returns the FNV-1a hash `h` of earlier bytes continued over `bytes`.
pub fn fnv1a_from(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// Returns a 64-bit checksum of `bytes` (see [`Sum`]).
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut sum = Sum::new();
    sum.add(bytes);
    sum.finish()
}

/// A 64-bit checksum taken over bytes given in any number of parts, eight bytes at a time (a
/// rotate, xor and multiply by an odd constant per word, each step invertible, so changing
/// any one word always changes the result), the length last. Fast over megabytes; not meant
/// to resist anyone choosing the bytes, and coord's own files under `.git/coord/` are all it
/// checks.
pub struct Sum {
    h: u64,
    len: u64,
    /// The bytes of a word not complete yet.
    part: [u8; 8],
    filled: usize,
}

impl Sum {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;

    /// Returns the sum of no bytes.
    pub fn new() -> Sum {
        Sum {
            h: Self::K,
            len: 0,
            part: [0; 8],
            filled: 0,
        }
    }

    fn mix(&mut self, word: u64) {
        self.h = (self.h.rotate_left(23) ^ word).wrapping_mul(Self::K);
    }

    /// Adds the next bytes.
    pub fn add(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        while !bytes.is_empty() {
            if self.filled == 0 {
                // Whole words straight from the bytes (no copy through `part`).
                let words = bytes.chunks_exact(8);
                let rest = words.remainder();
                for word in words {
                    self.mix(u64::from_le_bytes(word.try_into().expect("8 bytes")));
                }
                bytes = rest;
                if bytes.is_empty() {
                    break;
                }
            }
            let n = (8 - self.filled).min(bytes.len());
            self.part[self.filled..self.filled + n].copy_from_slice(&bytes[..n]);
            (self.filled, bytes) = (self.filled + n, &bytes[n..]);
            if self.filled == 8 {
                self.mix(u64::from_le_bytes(self.part));
                self.filled = 0;
            }
        }
    }

    /// Returns the sum of the bytes added.
    pub fn finish(mut self) -> u64 {
        self.part[self.filled..].fill(0);
        self.mix(u64::from_le_bytes(self.part));
        self.mix(self.len);
        self.h ^ (self.h >> 29)
    }
}

/// Returns a file entry's checksum spread over all 64 bits, as the vouch's sum adds it.
pub fn mixed(entry: u64) -> u64 {
    (entry ^ (entry >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_differ() {
        assert_ne!(random_hex(), random_hex());
        assert_eq!(random_hex().len(), 32);
    }

    #[test]
    fn checksum_changes_with_any_byte_and_the_length() {
        let base: Vec<u8> = (0..37u8).collect();
        let sum = checksum(&base);
        for i in 0..base.len() {
            let mut changed = base.clone();
            changed[i] ^= 0x40;
            assert_ne!(checksum(&changed), sum, "byte {i}");
        }
        assert_ne!(checksum(&base[..36]), sum);
        assert_ne!(checksum(&[0; 8]), checksum(&[0; 16]));
    }

    proptest::proptest! {
        #[test]
        fn a_sum_taken_in_parts_is_the_sum_of_the_whole(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            cuts in proptest::collection::vec(0usize..64, 0..5),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut sum = Sum::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                sum.add(&bytes[from..cut]);
                from = cut;
            }
            proptest::prop_assert_eq!(sum.finish(), checksum(&bytes));
        }
    }
}
