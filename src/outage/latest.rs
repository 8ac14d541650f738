//! The detector's table of counted keys: the number of each key's latest
//! fresh failure, by the key's 64-bit hash.
//!
//! A fresh failure of a new key inserts it and drops the oldest counted
//! one: two changes per fresh failure, on the path of every call that
//! starts a key's ladder. The keys are seeded hashes already, so the table
//! hashes them no further: a key's home slot is its low bits, and a key
//! whose home is taken goes to the next free slot (linear probing). At
//! most half of the slots are used, so a look-up or a change reads one or
//! two slots, on one cache line, where a general map would hash the key
//! again and scan a group of control bytes. A removed key's followers are
//! moved back into its slot, so no tombstones pile up.

/// One slot: a key and the number of its latest fresh failure, or empty.
#[derive(Debug, Clone, Copy)]
struct Slot {
    key: u64,
    number: u64,
}

/// The number of an empty slot: fresh failures are numbered from 0 by
/// one counter, which never reaches it.
const EMPTY: u64 = u64::MAX;

const FREE: Slot = Slot {
    key: 0,
    number: EMPTY,
};

/// The fewest slots, and a power of two like every size.
const FEWEST: usize = 16;

#[derive(Debug, Clone)]
pub(crate) struct Latest {
    /// None until the first key, then a power of two in length, at most
    /// half of them used.
    slots: Vec<Slot>,
    len: usize,
}

impl Latest {
    /// A table with no key (and no slot: nothing is allocated).
    pub(crate) fn new() -> Self {
        Latest {
            slots: Vec::new(),
            len: 0,
        }
    }

    /// How many keys it holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot that holds `key`, or the free one where it would go
    /// (there are slots).
    #[inline]
    fn slot(&self, key: u64) -> usize {
        let mask = self.mask();
        let mut i = key as usize & mask;
        while self.slots[i].number != EMPTY && self.slots[i].key != key {
            i = (i + 1) & mask;
        }
        i
    }

    /// The number of `key`'s latest fresh failure, if it is held.
    #[inline]
    pub(crate) fn get(&self, key: u64) -> Option<u64> {
        if self.slots.is_empty() {
            return None;
        }
        let slot = self.slots[self.slot(key)];
        (slot.number != EMPTY).then_some(slot.number)
    }

    /// `key`'s latest fresh failure is `number` (not [`EMPTY`]); whether
    /// the key was held already.
    #[inline]
    pub(crate) fn insert(&mut self, key: u64, number: u64) -> bool {
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
        }
        let i = self.slot(key);
        let known = self.slots[i].number != EMPTY;
        self.len += usize::from(!known);
        self.slots[i] = Slot { key, number };
        known
    }

    /// `key` is held no more.
    #[inline]
    pub(crate) fn remove(&mut self, key: u64) {
        if self.slots.is_empty() {
            return;
        }
        let mask = self.mask();
        let mut hole = self.slot(key);
        if self.slots[hole].number == EMPTY {
            return;
        }
        self.len -= 1;
        // Each key after the hole, up to a free slot, moves back into it
        // unless that would put it before its home.
        let mut next = (hole + 1) & mask;
        while self.slots[next].number != EMPTY {
            let home = self.slots[next].key as usize & mask;
            if next.wrapping_sub(home) & mask >= next.wrapping_sub(hole) & mask {
                self.slots[hole] = self.slots[next];
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.slots[hole] = FREE;
    }

    /// No key is held (the slots are kept).
    pub(crate) fn clear(&mut self) {
        self.slots.fill(FREE);
        self.len = 0;
    }

    /// Twice the slots, every key moved to its place among them.
    #[cold]
    fn grow(&mut self) {
        let size = (2 * self.slots.len()).max(FEWEST);
        let old = std::mem::replace(&mut self.slots, vec![FREE; size]);
        for slot in old.into_iter().filter(|s| s.number != EMPTY) {
            let i = self.slot(slot.key);
            self.slots[i] = slot;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The table against a map, through inserts and removes of keys that
    /// crowd a few home slots (and wrap around the end), and growth.
    #[test]
    fn holds_what_a_map_holds() {
        let mut table = Latest::new();
        assert_eq!((table.get(15), table.len()), (None, 0));
        table.remove(15);
        let mut map = HashMap::new();
        let mut draw = 0x9e37_79b9_7f4a_7c15u64;
        for number in 0..20_000u64 {
            draw ^= draw << 13;
            draw ^= draw >> 7;
            draw ^= draw << 17;
            // Keys 15..=17 of each group of 64 share few homes, and the
            // high bits tell them apart: collisions and wrapping runs.
            let key = ((draw % 40) << 32) | (15 + draw % 3) | ((draw >> 60) << 6);
            if draw.is_multiple_of(3) {
                table.remove(key);
                map.remove(&key);
            } else {
                assert_eq!(table.insert(key, number), map.insert(key, number).is_some());
            }
            assert_eq!(table.len(), map.len());
            assert!(2 * table.len() <= table.slots.len());
            let probe =
                (((draw >> 8) % 40) << 32) | (15 + (draw >> 4) % 3) | (((draw >> 56) & 15) << 6);
            assert_eq!(table.get(probe), map.get(&probe).copied(), "key {probe:#x}");
        }
        for (&key, &number) in &map {
            assert_eq!(table.get(key), Some(number));
        }
        table.clear();
        assert_eq!((table.len(), table.get(15)), (0, None));
    }

    #[test]
    fn removing_a_key_keeps_the_keys_after_it_in_reach() {
        // Three keys with one home (slot 15 of 16) wrap to slots 0 and 1;
        // a fourth is at its home, slot 2.
        let mut table = Latest::new();
        let keys = [15, 16 + 15, 32 + 15, 2];
        for (n, &k) in keys.iter().enumerate() {
            assert!(!table.insert(k, n as u64));
        }
        table.remove(keys[0]);
        assert_eq!(table.get(keys[0]), None);
        // The wrapped keys move back; the one at home stays.
        assert_eq!(
            (table.slots[15].key, table.slots[0].key),
            (keys[1], keys[2])
        );
        assert_eq!(
            (table.slots[1].number, table.slots[2].key),
            (EMPTY, keys[3])
        );
        for (n, &k) in keys.iter().enumerate().skip(1) {
            assert_eq!(table.get(k), Some(n as u64));
        }
        assert_eq!(table.len(), 3);
        assert!(table.insert(keys[2], 8));
        assert_eq!((table.get(keys[2]), table.len()), (Some(8), 3));
    }
}
