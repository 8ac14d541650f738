//! The hands a level dealt last, by flow hash: dealing costs a division
//! per card, and the same flows come back again and again.

use crate::Dealer;
use crate::dealer::MAX_HAND;

/// Hands of up to this many cards are kept.
const CARDS: usize = 8;

/// Slots, by the top bits of the hash.
const SLOTS: usize = 256;

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
}

impl Hands {
    /// A cache for the hands of `dealer`, if it deals any.
    pub(crate) fn new(dealer: Option<&Dealer>) -> Self {
        let small = dealer.is_some_and(|d| d.hand_size() <= CARDS && d.deck_size() <= 1 << 16);
        Hands {
            kept: if small {
                vec![Kept::default(); SLOTS]
            } else {
                Vec::new()
            },
        }
    }

    /// The hand `dealer` deals for `hash`, as [`Dealer::deal`] gives it.
    pub(crate) fn deal<'a>(
        &mut self,
        dealer: &Dealer,
        hash: u64,
        cards: &'a mut [u32; MAX_HAND],
    ) -> &'a [u32] {
        if self.kept.is_empty() {
            return dealer.deal_into(hash, cards);
        }
        let n = dealer.hand_size();
        let kept = &mut self.kept[(hash >> 56) as usize % SLOTS];
        if kept.filled && kept.hash == hash {
            for (card, &k) in cards.iter_mut().zip(&kept.cards[..n]) {
                *card = u32::from(k);
            }
            return &cards[..n];
        }
        let dealt = dealer.deal_into(hash, cards);
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
    fn a_kept_hand_is_the_hand_dealt() {
        for (deck, hand) in [(64, 8), (128, 6), (16, 9), (1 << 16, 2), ((1 << 16) + 1, 2)] {
            let dealer = Dealer::new(deck, hand).unwrap();
            let mut hands = Hands::new(Some(&dealer));
            // Hashes that share slots, each dealt twice.
            for round in 0..2 {
                for i in 0..500u64 {
                    let hash = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 60);
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
