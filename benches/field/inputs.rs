//! The field bench's inputs, as the Go program in `benches/clientgo`
//! makes them: the same keys, the same picks, and a fingerprint of both.

use std::hash::Hasher;

const KEY_SEED: u64 = 0x6b65_7973;
const PICK_SEED: u64 = 0x7069_636b;
/// How many picks the order holds (it wraps around).
pub const PICKS: usize = 1 << 20;

/// splitmix64, as the Go program has it.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// `<pod UID>_<image ref>`, 69 bytes each, the Go program's keys.
pub fn kubelet_keys(n: usize) -> Vec<String> {
    let mut s = SplitMix(KEY_SEED);
    (0..n)
        .map(|_| {
            let (a, b, c) = (s.next(), s.next(), s.next());
            format!(
                "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}_registry.k8s.io/app-{:05}:v1.{:03}",
                a >> 32,
                (a >> 16) & 0xffff,
                a & 0xffff,
                b >> 48,
                b & 0xffff_ffff_ffff,
                c % 100_000,
                (c >> 32) % 1000
            )
        })
        .collect()
}

/// The Go program's pick order: `PICKS` key indices.
pub fn pick_order(n: usize) -> Vec<u32> {
    let mut s = SplitMix(PICK_SEED);
    (0..PICKS).map(|_| (s.next() % n as u64) as u32).collect()
}

/// FNV-1a over the keys and the picks, printed by both programs so the
/// script can check they ran on the same data.
pub fn fingerprint(keys: &[String], order: &[u32]) -> u64 {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    for k in keys {
        h.write(k.as_bytes());
    }
    for p in order {
        h.write(&p.to_le_bytes());
    }
    h.finish()
}

struct Fnv(u64);

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}
