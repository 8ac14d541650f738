//! Ports of the shuffle-sharding tests (`pkg/util/shufflesharding/
//! shufflesharding_test.go`): `TestRequiredEntropyBits` (:28),
//! `TestNewDealer` (:58), `TestCardDuplication` (:113),
//! `TestUniformDistribution` (:201) and `TestDealer_DealIntoHand` (:259),
//! plus a check of every card against Kubernetes' dealing rule.
//!
//! Differences, on purpose: sizes are unsigned here, so Kubernetes' case of
//! a negative deck is a type error rather than a refusal; random hashes
//! come from a seeded generator.

use fair_admission::{Dealer, MAX_HASH_BITS};

use crate::Rng;

#[test]
fn test_required_entropy_bits() {
    // 1024 queues, hands of 6: exactly 60 bits, accepted.
    assert!(Dealer::new(1024, 6).is_ok());
    // 512 queues, hands of 8: 72 bits, refused as needing 72.
    let err = Dealer::new(512, 8).unwrap_err();
    assert!(err.to_string().contains("72 bits"), "{err}");
    assert_eq!(MAX_HASH_BITS, 60);
}

#[test]
fn test_new_dealer() {
    let cases: [(usize, usize, Option<&str>); 5] = [
        (100, 0, Some("hand_size")),
        (100, 101, Some("hand_size")),
        (1 << 27, 2, Some("deck_size")),
        (512, 8, Some("hand_size")),
        (1024, 6, None),
    ];
    for (deck, hand, refused) in cases {
        let got = Dealer::new(deck, hand).err().map(|e| e.field());
        assert_eq!(got, refused, "deck {deck}, hand {hand}");
    }
}

#[test]
fn test_card_duplication() {
    let mut rng = Rng::new(113);
    for (deck, hand) in [
        (4, 4),
        (8, 8),
        (10, 10),
        (12, 12),
        (128, 8),
        (256, 7),
        (512, 6),
    ] {
        let dealer = Dealer::new(deck, hand).unwrap();
        for _ in 0..1_000 {
            let hash = rng.next_u64();
            let mut cards: Vec<usize> = dealer.deal(hash).collect();
            assert_eq!(cards.len(), hand);
            assert!(cards.iter().all(|&c| c < deck));
            cards.sort_unstable();
            cards.dedup();
            assert_eq!(cards.len(), hand, "a card dealt twice for {hash:#x}");
        }
    }
}

/// `ff`: the falling factorial n! / (n − m)!.
fn falling(n: usize, m: usize) -> usize {
    (n - m + 1..=n).product()
}

fn binomial(n: usize, k: usize) -> usize {
    if k > n {
        0
    } else {
        falling(n, k) / falling(k, k)
    }
}

#[test]
fn test_uniform_distribution() {
    let spare = 64 - MAX_HASH_BITS as usize;
    let bits_64_3 = (falling(64, 3) as f64).log2().ceil() as usize;
    let cases = [
        (64, 3, 1usize << (bits_64_3 + spare)),
        (128, 3, falling(128, 3)),
        (50, 4, falling(50, 4)),
    ];
    for (deck, hand, deals) in cases {
        let dealer = Dealer::new(deck, hand).unwrap();
        // Count each unordered hand by its rank among all of them.
        let choose: Vec<Vec<usize>> = (0..deck)
            .map(|c| (0..=hand).map(|k| binomial(c, k)).collect())
            .collect();
        let mut seen = vec![0usize; binomial(deck, hand)];
        let mut cards = Vec::with_capacity(hand);
        for hash in 0..deals {
            cards.clear();
            cards.extend(dealer.deal(hash as u64));
            cards.sort_unstable();
            let rank: usize = cards
                .iter()
                .enumerate()
                .map(|(i, &c)| choose[c][i + 1])
                .sum();
            seen[rank] += 1;
        }
        let orders = falling(hand, hand);
        let per_ordered = deals as f64 / falling(deck, hand) as f64;
        let low = orders * per_ordered.floor() as usize;
        let high = orders * per_ordered.ceil() as usize;
        let central = seen.iter().filter(|&&n| (low..=high).contains(&n)).count();
        assert_eq!(
            central,
            seen.len(),
            "deck {deck}, hand {hand}: [{low}, {high}]"
        );
    }
}

#[test]
fn test_dealer_deal_into_hand() {
    let dealer = Dealer::new(6, 6).unwrap();
    for capacity in [0, 4, 6, 10, 12] {
        let mut hand = vec![9; capacity.min(10)];
        hand.reserve(capacity);
        hand.clear();
        hand.extend(dealer.deal(0));
        assert_eq!(hand.len(), 6, "buffer of {capacity}");
    }
}

/// Kubernetes' `Deal`, restated: the hash's mixed-radix digits, then each
/// digit moved up past every earlier digit at or below it (walking back).
fn kubernetes_deal(deck: usize, hand: usize, mut hash: u64) -> Vec<usize> {
    let mut digits = Vec::with_capacity(hand);
    for i in 0..hand {
        let radix = (deck - i) as u64;
        digits.push((hash % radix) as usize);
        hash /= radix;
    }
    (0..hand)
        .map(|i| {
            let mut card = digits[i];
            for j in (1..=i).rev() {
                if card >= digits[j - 1] {
                    card += 1;
                }
            }
            card
        })
        .collect()
}

#[test]
fn every_card_is_the_one_kubernetes_deals() {
    let mut rng = Rng::new(259);
    for (deck, hand) in [(2, 2), (16, 15), (64, 8), (128, 6), (1024, 6), (1 << 26, 2)] {
        let dealer = Dealer::new(deck, hand).unwrap();
        for _ in 0..2_000 {
            let hash = rng.next_u64();
            let ours: Vec<usize> = dealer.deal(hash).collect();
            assert_eq!(
                ours,
                kubernetes_deal(deck, hand, hash),
                "deck {deck}, hand {hand}, {hash:#x}"
            );
        }
    }
}
