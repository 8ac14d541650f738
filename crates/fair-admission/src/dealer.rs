//! Shuffle sharding: each flow's hand of queues, dealt from its hash.

use crate::ConfigError;

/// The largest number of hash bits a deal may consume (Kubernetes' limit).
pub const MAX_HASH_BITS: u32 = 60;

/// The largest deck a [`Dealer`] accepts: 2^26 queues.
pub const MAX_DECK_SIZE: usize = 1 << 26;

/// Deals each flow a hand of distinct queues out of a deck, from the flow's
/// hash, exactly as Kubernetes' API Priority and Fairness does.
///
/// The hash is read as mixed-radix digits: its remainder by `deck`, then the
/// quotient's remainder by `deck − 1`, and so on for `hand` digits. Each
/// digit picks among the queues not yet dealt, so every ordered hand comes
/// from exactly one hash below `deck · (deck − 1) ⋯ (deck − hand + 1)`.
///
/// ```
/// use fair_admission::Dealer;
/// let dealer = Dealer::new(64, 8)?;
/// let hand: Vec<usize> = dealer.deal(0x9e37_79b9_7f4a_7c15).collect();
/// assert_eq!(hand.len(), 8);
/// assert!(hand.iter().all(|&q| q < 64));
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dealer {
    deck: usize,
    hand: usize,
}

impl Dealer {
    /// A dealer of `hand` queues out of `deck`. Refused, as Kubernetes
    /// refuses them: a deck or hand of zero, a hand larger than the deck, a
    /// deck above [`MAX_DECK_SIZE`], and a pair needing more than
    /// [`MAX_HASH_BITS`] bits of hash (`ceil(log2(deck) · hand)`).
    ///
    /// ```
    /// use fair_admission::Dealer;
    /// assert_eq!(Dealer::new(0, 1).unwrap_err().field(), "deck_size");
    /// assert_eq!(Dealer::new(8, 9).unwrap_err().field(), "hand_size");
    /// assert_eq!(Dealer::new(1 << 27, 1).unwrap_err().field(), "deck_size");
    /// // 128 queues need 7 bits per card: 9 cards need 63 bits.
    /// assert_eq!(Dealer::new(128, 9).unwrap_err().field(), "hand_size");
    /// assert!(Dealer::new(128, 8).is_ok());
    /// ```
    pub fn new(deck_size: usize, hand_size: usize) -> Result<Self, ConfigError> {
        if deck_size == 0 || deck_size > MAX_DECK_SIZE {
            return Err(ConfigError::new(
                "deck_size",
                format!("between 1 and {MAX_DECK_SIZE}"),
                deck_size,
            ));
        }
        if hand_size == 0 || hand_size > deck_size {
            return Err(ConfigError::new(
                "hand_size",
                format!("between 1 and the deck size, {deck_size}"),
                hand_size,
            ));
        }
        let bits = required_entropy_bits(deck_size, hand_size);
        if bits > f64::from(MAX_HASH_BITS) {
            return Err(ConfigError::new(
                "hand_size",
                format!(
                    "small enough that ceil(log2({deck_size}) * hand_size) <= {MAX_HASH_BITS} bits"
                ),
                format!("{hand_size} (needs {bits} bits)"),
            ));
        }
        Ok(Dealer {
            deck: deck_size,
            hand: hand_size,
        })
    }

    /// The number of queues.
    ///
    /// ```
    /// # use fair_admission::Dealer;
    /// assert_eq!(Dealer::new(64, 8)?.deck_size(), 64);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn deck_size(&self) -> usize {
        self.deck
    }

    /// The number of queues dealt to each flow.
    ///
    /// ```
    /// # use fair_admission::Dealer;
    /// assert_eq!(Dealer::new(64, 8)?.hand_size(), 8);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn hand_size(&self) -> usize {
        self.hand
    }

    /// The hand for `hash`: `hand_size` distinct queue indices below
    /// `deck_size`, in Kubernetes' order. Only the low
    /// `ceil(log2(deck) · hand)` bits of uniformly random hashes matter for
    /// uniformity; higher bits are ignored when the quotient runs out.
    ///
    /// ```
    /// use fair_admission::Dealer;
    /// let dealer = Dealer::new(4, 2)?;
    /// // 7 = 3 + 4·1: the first card is 3, the second is the 2nd-lowest
    /// // (index 1) of the queues left, {0, 1, 2}.
    /// assert_eq!(dealer.deal(7).collect::<Vec<_>>(), [3, 1]);
    /// // 5 = 1 + 4·1: index 1 of {0, 2, 3} is queue 2.
    /// assert_eq!(dealer.deal(5).collect::<Vec<_>>(), [1, 2]);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn deal(&self, hash: u64) -> Hand {
        let mut digits = [0u32; MAX_HAND];
        self.digits(hash, &mut digits);
        Hand {
            digits,
            len: self.hand,
            next: 0,
        }
    }

    /// The hand's digits of `hash` into `digits`.
    fn digits(&self, hash: u64, digits: &mut [u32; MAX_HAND]) {
        let mut rest = hash;
        for (i, digit) in digits.iter_mut().enumerate().take(self.hand) {
            let radix = (self.deck - i) as u64;
            // Below the deck size, at most 2^26.
            *digit = (rest % radix) as u32;
            rest /= radix;
        }
    }
}

/// The card of the last of `digits`: it indexes the queues not yet dealt.
/// Walking back over the earlier digits, each one at or below the running
/// card is a queue already taken beneath it, so the card moves up one.
pub(crate) fn card(digits: &[u32]) -> u32 {
    let (&last, earlier) = digits.split_last().expect("a digit");
    let mut card = last;
    for &e in earlier.iter().rev() {
        if card >= e {
            card += 1;
        }
    }
    card
}

/// The most cards a valid [`Dealer`] deals: 60 bits at 1 bit per card
/// (a deck of 2 needs 1 bit a card).
pub(crate) const MAX_HAND: usize = MAX_HASH_BITS as usize;

/// Bits of hash a deal of `hand` out of `deck` consumes, as Kubernetes
/// counts them: `ceil(log2(deck) · hand)`.
fn required_entropy_bits(deck: usize, hand: usize) -> f64 {
    ((deck as f64).log2() * hand as f64).ceil()
}

/// The queue indices of one flow's hand, from [`Dealer::deal`].
///
/// ```
/// use fair_admission::Dealer;
/// let hand = Dealer::new(16, 3)?.deal(42);
/// assert_eq!(hand.len(), 3);
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Hand {
    digits: [u32; MAX_HAND],
    len: usize,
    next: usize,
}

impl Iterator for Hand {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let i = self.next;
        if i >= self.len {
            return None;
        }
        self.next += 1;
        Some(card(&self.digits[..=i]) as usize)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.len - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Hand {}

/// The probability that a mouse is crushed: that every queue of a random
/// hand of `hand_size` out of `deck_size` also lies in the hand of at least
/// one of `elephants` other random hands, so that the mouse has no queue
/// free of elephants. Exact: the distribution of the number of queues the
/// elephants cover is built one elephant at a time (each new hand adds `k`
/// new queues with hypergeometric probability), then a mouse's hand falls
/// entirely inside `u` covered queues with probability `C(u, h) / C(d, h)`.
///
/// Arguments out of range (a zero deck or hand, a hand above the deck)
/// give `NaN`; no elephants give 0.
///
/// ```
/// use fair_admission::crush_probability;
/// // One elephant crushes a mouse only by holding exactly the same hand.
/// let p = crush_probability(32, 12, 1);
/// assert!((p - 4.428838398950118e-09).abs() / p < 1e-12);
/// assert_eq!(crush_probability(32, 12, 0), 0.0);
/// ```
pub fn crush_probability(deck_size: usize, hand_size: usize, elephants: usize) -> f64 {
    let (d, h) = (deck_size, hand_size);
    if d == 0 || h == 0 || h > d {
        return f64::NAN;
    }
    if elephants == 0 {
        return 0.0;
    }
    let hands = binomial(d, h);
    // covered[u]: probability that the elephants so far cover u queues.
    let mut covered = vec![0.0; d + 1];
    covered[h] = 1.0;
    for _ in 1..elephants {
        let mut next = vec![0.0; d + 1];
        for (u, &p) in covered.iter().enumerate() {
            if p == 0.0 {
                continue;
            }
            // The new hand takes k queues outside the u covered ones.
            for k in 0..=h.min(d - u) {
                if h - k > u {
                    continue;
                }
                next[u + k] += p * binomial(u, h - k) * binomial(d - u, k) / hands;
            }
        }
        covered = next;
    }
    covered
        .iter()
        .enumerate()
        .filter(|&(u, _)| u >= h)
        .map(|(u, &p)| p * binomial(u, h) / hands)
        .sum()
}

/// `C(n, k)` as a float, by the multiplicative formula (exact while the
/// result is below 2^53, within an ulp or two above).
fn binomial(n: usize, k: usize) -> f64 {
    if k > n {
        return 0.0;
    }
    let k = k.min(n - k);
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every hash below the number of ordered hands gives a different
    /// ordered hand of distinct cards, so uniformly random hashes give
    /// uniformly random hands.
    #[test]
    fn hashes_below_the_number_of_ordered_hands_deal_every_ordered_hand_once() {
        for (deck, hand) in [(1, 1), (5, 1), (5, 5), (7, 3), (8, 4), (9, 2)] {
            let dealer = Dealer::new(deck, hand).unwrap();
            let ordered: u64 = (0..hand).map(|i| (deck - i) as u64).product();
            let mut seen = std::collections::HashSet::new();
            let mut per_queue = vec![0u64; deck];
            for hash in 0..ordered {
                let cards: Vec<usize> = dealer.deal(hash).collect();
                assert_eq!(cards.len(), hand);
                let mut sorted = cards.clone();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(sorted.len(), hand, "duplicate card in {cards:?} for {hash}");
                assert!(cards.iter().all(|&c| c < deck));
                for &c in &cards {
                    per_queue[c] += 1;
                }
                assert!(seen.insert(cards), "hand dealt twice, hash {hash}");
            }
            // Each queue appears in hand/deck of all the hands.
            let expected = ordered * hand as u64 / deck as u64;
            assert!(per_queue.iter().all(|&n| n == expected), "{per_queue:?}");
        }
    }

    #[test]
    fn the_hash_is_read_as_mixed_radix_digits_in_order() {
        let dealer = Dealer::new(10, 3).unwrap();
        // digits 4, 3 (of 9 left), 7 (of 8 left): 4 + 10·(3 + 9·7).
        let hash = 4 + 10 * (3 + 9 * 7);
        // Card 0: 4. Card 1: index 3 of {0..9}\{4} = 3. Card 2: index 7 of
        // {0..9}\{3,4} = 9.
        assert_eq!(dealer.deal(hash).collect::<Vec<_>>(), [4, 3, 9]);
        assert_eq!(dealer.deal(hash).len(), 3);
    }

    #[test]
    fn configurations_kubernetes_refuses_are_refused_by_name() {
        assert_eq!(Dealer::new(0, 0).unwrap_err().field(), "deck_size");
        assert_eq!(Dealer::new(4, 0).unwrap_err().field(), "hand_size");
        assert_eq!(Dealer::new(4, 5).unwrap_err().field(), "hand_size");
        assert!(Dealer::new(MAX_DECK_SIZE, 1).is_ok());
        assert_eq!(
            Dealer::new(MAX_DECK_SIZE + 1, 1).unwrap_err().field(),
            "deck_size"
        );
        // 2^26 needs 26 bits a card: 2 cards fit in 60, 3 do not.
        assert!(Dealer::new(MAX_DECK_SIZE, 2).is_ok());
        assert!(Dealer::new(MAX_DECK_SIZE, 3).is_err());
        // A deck of 2 needs 1 bit a card: the hand is limited by the deck.
        assert!(Dealer::new(2, 2).is_ok());
        // 64 queues need 6 bits a card: 10 cards fit, 11 need 66 bits.
        let err = Dealer::new(64, 11).unwrap_err();
        assert!(err.to_string().contains("66 bits"), "{err}");
        assert!(Dealer::new(64, 10).is_ok());
    }

    #[test]
    fn crush_probability_agrees_with_counting_for_a_small_deck() {
        // Deck 5, hand 2, two elephants: count all 10^3 equally likely
        // (mouse, elephant, elephant) triples of 2-sets.
        let sets: Vec<[usize; 2]> = (0..5)
            .flat_map(|a| ((a + 1)..5).map(move |b| [a, b]))
            .collect();
        let mut crushed = 0;
        for m in &sets {
            for e1 in &sets {
                for e2 in &sets {
                    if m.iter().all(|q| e1.contains(q) || e2.contains(q)) {
                        crushed += 1;
                    }
                }
            }
        }
        let exact = f64::from(crushed) / 1000.0;
        assert!((crush_probability(5, 2, 2) - exact).abs() < 1e-15);
        assert!(crush_probability(0, 1, 1).is_nan());
        assert!(crush_probability(3, 4, 1).is_nan());
        assert_eq!(crush_probability(4, 4, 1), 1.0);
    }
}
