//! Times as nanoseconds, and the draws that place a key's slots.

use std::time::Duration;

use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{Rng, SeedableRng};

/// `d` in nanoseconds, saturating at `u64::MAX` (about 584 years).
pub(crate) fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// SplitMix64's state increment (the golden ratio in 64-bit fixed point).
const PHI: u64 = 0x9E37_79B9_7F4A_7C15;

/// Draw `n` (0-based) of the stream seeded with `seed`, uniform in
/// `[0, 1)`: the same on every platform and in every process, so replicas
/// that share a seed place a key's slots alike.
pub(crate) fn unit_at(seed: u64, n: u64) -> f64 {
    let mut g = SplitMix64::seed_from_u64(seed.wrapping_add(n.wrapping_mul(PHI)));
    (g.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A time as its nanoseconds, for `serde(with)`.
#[cfg(feature = "serde")]
pub(crate) mod serde_one {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(super::saturating_nanos(*d))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_nanos)
    }
}

/// A time or none, as nanoseconds or null, for `serde(with)`.
#[cfg(feature = "serde")]
pub(crate) mod serde_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::time::Duration;

    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        d.map(super::saturating_nanos).serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_nanos))
    }
}

/// Times as a list of nanoseconds, for `serde(with)`.
#[cfg(feature = "serde")]
pub(crate) mod serde_list {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(crate) fn serialize<S: Serializer>(d: &[Duration], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(d.iter().map(|d| super::saturating_nanos(*d)))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Duration>, D::Error> {
        let nanos = Vec::<u64>::deserialize(d)?;
        Ok(nanos.into_iter().map(Duration::from_nanos).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanos_saturate() {
        assert_eq!(saturating_nanos(Duration::from_secs(1)), 1_000_000_000);
        assert_eq!(saturating_nanos(Duration::MAX), u64::MAX);
    }

    #[test]
    fn draws_are_fixed_by_seed_and_number_and_in_range() {
        assert_eq!(unit_at(7, 3), unit_at(7, 3));
        assert_ne!(unit_at(7, 3), unit_at(7, 4));
        assert!((0..1_000).all(|n| (0.0..1.0).contains(&unit_at(n, n))));
    }
}
