//! Dealing a level's hands: each card's digit of the hash is a division by
//! the cards left, done here as a multiplication by its reciprocal; and
//! the hands dealt last, kept by flow hash, as the same flows come back
//! again and again.

use crate::Dealer;
use crate::dealer::{MAX_HAND, card};

/// Hands of up to this many cards are kept.
const CARDS: usize = 8;

/// Slots, by the top bits of the hash: a level's hands of a thousand
/// flows or so are mostly kept (32 KiB a queuing level).
const SLOTS: usize = 1 << 10;

/// One flow's hand.
#[derive(Debug, Clone, Copy, Default)]
struct Kept {
    hash: u64,
    filled: bool,
    cards: [u16; CARDS],
}

/// A direct-mapped cache of hands; it keeps nothing for hands of more than
/// [`CARDS`] cards, or decks of more than 2^16 queues.
#[derive(Debug, Clone)]
pub(crate) struct Hands {
    kept: Vec<Kept>,
    /// For each card, `ceil(2^128 / radix)` of its radix (the cards left),
    /// or 0 for a radix of 1.
    reciprocals: Vec<u128>,
}

/// `n / d` and `n % d` for the divisor whose reciprocal is `c` (see
/// [`Hands::reciprocals`]): `floor(c · n / 2^128)` is `floor(n / d)` for
/// every 64-bit `n`, as `c` is within `1/d` of `2^128 / d` and the error
/// it makes, below `n / 2^128 < 2^-64`, is less than `1 / d`.
fn div_rem(n: u64, d: u64, c: u128) -> (u64, u64) {
    if d == 1 {
        return (n, 0);
    }
    let (hi, lo) = ((c >> 64) as u64, c as u64);
    let low = (u128::from(lo) * u128::from(n)) >> 64;
    let q = ((u128::from(hi) * u128::from(n) + low) >> 64) as u64;
    (q, n - q * d)
}

/// The slot of `hash`: its top bits.
fn slot(hash: u64) -> usize {
    (hash >> (64 - SLOTS.trailing_zeros())) as usize
}

impl Hands {
    /// A cache for the hands of `dealer`, if it deals any.
    pub(crate) fn new(dealer: Option<&Dealer>) -> Self {
        let small = dealer.is_some_and(|d| d.hand_size() <= CARDS && d.deck_size() <= 1 << 16);
        let reciprocals = dealer.map_or_else(Vec::new, |d| {
            (0..d.hand_size())
                .map(|i| match (d.deck_size() - i) as u128 {
                    1 => 0,
                    radix => u128::MAX / radix + 1,
                })
                .collect()
        });
        Hands {
            kept: if small {
                vec![Kept::default(); SLOTS]
            } else {
                Vec::new()
            },
            reciprocals,
        }
    }

    /// The hand for `hash` into `cards`, as [`Dealer::deal`] gives it.
    fn deal_into<'a>(
        &self,
        dealer: &Dealer,
        hash: u64,
        cards: &'a mut [u32; MAX_HAND],
    ) -> &'a [u32] {
        let (deck, n) = (dealer.deck_size(), dealer.hand_size());
        let mut rest = hash;
        for (i, (digit, &c)) in cards.iter_mut().zip(&self.reciprocals).enumerate() {
            let (q, r) = div_rem(rest, (deck - i) as u64, c);
            // Below the deck size, at most 2^26.
            *digit = r as u32;
            rest = q;
        }
        // Each card needs the digits before it: last card first.
        for i in (0..n).rev() {
            cards[i] = card(&cards[..=i]);
        }
        &cards[..n]
    }

    /// Card `at` of the hand `dealer` deals for `hash` (read from the hand
    /// kept, if it is).
    pub(crate) fn card(&mut self, dealer: &Dealer, hash: u64, at: usize) -> usize {
        if let Some(kept) = self.kept.get(slot(hash))
            && kept.filled
            && kept.hash == hash
        {
            return usize::from(kept.cards[at]);
        }
        let mut cards = [0u32; MAX_HAND];
        self.deal(dealer, hash, &mut cards)[at] as usize
    }

    /// The hand `dealer` deals for `hash`, as [`Dealer::deal`] gives it.
    pub(crate) fn deal<'a>(
        &mut self,
        dealer: &Dealer,
        hash: u64,
        cards: &'a mut [u32; MAX_HAND],
    ) -> &'a [u32] {
        if self.kept.is_empty() {
            return self.deal_into(dealer, hash, cards);
        }
        let n = dealer.hand_size();
        let kept = &mut self.kept[slot(hash)];
        if kept.filled && kept.hash == hash {
            for (card, &k) in cards.iter_mut().zip(&kept.cards[..n]) {
                *card = u32::from(k);
            }
            return &cards[..n];
        }
        let dealt = self.deal_into(dealer, hash, cards);
        let kept = &mut self.kept[slot(hash)];
        for (k, &card) in kept.cards.iter_mut().zip(dealt) {
            // Below the deck size, at most 2^16.
            *k = card as u16;
        }
        (kept.hash, kept.filled) = (hash, true);
        dealt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn division_by_reciprocal_is_exact() {
        let mut n = 0x9e37_79b9_7f4a_7c15u64;
        for d in (1..=70u64).chain([(1 << 26) - 1, 1 << 26, 1 << 25, 999_983]) {
            let c = if d == 1 {
                0
            } else {
                u128::MAX / u128::from(d) + 1
            };
            for k in 0..2_000u64 {
                n = n
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                for v in [n, k, u64::MAX - k, n >> (k % 64)] {
                    assert_eq!(div_rem(v, d, c), (v / d, v % d), "{v} / {d}");
                }
            }
        }
    }

    #[test]
    fn a_card_is_the_card_of_the_hand_dealt() {
        for (deck, hand) in [(64, 8), (16, 9), (1 << 17, 2)] {
            let dealer = Dealer::new(deck, hand).unwrap();
            let mut hands = Hands::new(Some(&dealer));
            for i in 0..600u64 {
                let hash = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 58);
                let want: Vec<usize> = dealer.deal(hash).collect();
                // Before and after the hand is kept.
                for _ in 0..2 {
                    let at = (i as usize) % hand;
                    assert_eq!(hands.card(&dealer, hash, at), want[at], "hash {hash}");
                }
            }
        }
    }

    #[test]
    fn a_kept_hand_is_the_hand_dealt() {
        let decks = [(64, 8), (128, 6), (16, 9), (2, 2), (3, 3), (1 << 16, 2)];
        for (deck, hand) in decks.into_iter().chain([((1 << 16) + 1, 2), (1 << 26, 2)]) {
            let dealer = Dealer::new(deck, hand).unwrap();
            let mut hands = Hands::new(Some(&dealer));
            // Hashes that share slots, each dealt twice.
            for round in 0..2 {
                let edges = [0, 1, u64::MAX, u64::MAX - 1, 1 << 63, (1 << 26) - 1];
                for (i, edge) in (0..500u64).zip(edges.into_iter().chain(std::iter::repeat(0))) {
                    let hash = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 60) ^ edge;
                    let mut cards = [0; MAX_HAND];
                    let got: Vec<usize> = hands
                        .deal(&dealer, hash, &mut cards)
                        .iter()
                        .map(|&c| c as usize)
                        .collect();
                    let want: Vec<usize> = dealer.deal(hash).collect();
                    assert_eq!(got, want, "hash {hash}, round {round}");
                }
            }
        }
    }
}
