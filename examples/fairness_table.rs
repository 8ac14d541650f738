//! Prints the probability that a mouse flow is crushed (every queue of its
//! hand shared with an elephant) for the queue and hand sizes of
//! Kubernetes' API Priority and Fairness documentation, computed exactly by
//! `fair_admission::crush_probability`. `docs/fairness.md` holds its
//! output.
//!
//! ```text
//! cargo run --example fairness_table
//! ```

use fair_admission::crush_probability;

/// (hand size, queues), as the published table lists them.
const ROWS: [(usize, usize); 11] = [
    (12, 32),
    (10, 32),
    (10, 64),
    (9, 64),
    (8, 64),
    (8, 128),
    (7, 128),
    (7, 256),
    (6, 256),
    (6, 512),
    (6, 1024),
];

fn main() {
    println!("| hand size | queues | 1 elephant | 4 elephants | 16 elephants |");
    println!("|---:|---:|---:|---:|---:|");
    for (hand, deck) in ROWS {
        let [one, four, sixteen] = [1, 4, 16].map(|e| shortest(crush_probability(deck, hand, e)));
        println!("| {hand} | {deck} | {one} | {four} | {sixteen} |");
    }
}

/// The shortest text that reads back as `p`, in plain notation from 1e-4
/// up and in scientific notation with a two-digit exponent below, as the
/// published table writes its values.
fn shortest(p: f64) -> String {
    if p >= 1e-4 {
        return format!("{p}");
    }
    let text = format!("{p:e}");
    let (mantissa, exponent) = text.split_once('e').expect("scientific notation");
    let exponent: i32 = exponent.parse().expect("an integer exponent");
    format!("{mantissa}e-{:02}", -exponent)
}
