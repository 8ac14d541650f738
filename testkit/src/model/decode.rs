//! Arbitrary bytes as a program, for the fuzzer.

use super::*;
use keyed_backoff::Settings;

const MAX_ATTEMPTS: u32 = Settings::MAX_ATTEMPTS;

/// Bytes in the config header before the ops.
const HEADER: usize = 7;

/// Decodes arbitrary bytes into a config and ops (for the fuzzer): every
/// input is a program (some configs are invalid, and the builder must
/// refuse exactly those), and small changes to the bytes make small changes
/// to the program.
pub fn decode(data: &[u8]) -> (Config, Vec<Op>) {
    let byte = |i: usize| data.get(i).copied().unwrap_or(0);
    let scale = |b: u8| -> u64 {
        match b % 4 {
            0 => u64::from(b / 4 % 8),
            1 => u64::from(b / 4) * 7,
            2 => u64::from(b / 4) * 1_000_000_007,
            _ => 1_000_000_000 * u64::from(b / 4 % 16),
        }
    };
    let window = scale(byte(3));
    let expiry = match byte(2) % 3 {
        0 => ExpiryKind::TwiceMax,
        1 => ExpiryKind::Fixed(window),
        _ => ExpiryKind::Closure(window),
    };
    let (r, p) = (byte(4), byte(5));
    let limit = match r / 4 % 8 {
        0..=3 => None,
        4 => Some(0),
        5 => Some(MAX_ATTEMPTS + u32::from(p % 2)),
        _ => Some(1 + u32::from(p % 8)),
    };
    let rule = match r % 4 {
        0 => RuleKind::ClientGo,
        1 => RuleKind::Doubling(limit),
        2 => RuleKind::Constant(limit),
        _ => RuleKind::Linear(scale(p / 2), limit),
    };
    let a = byte(6);
    let cfg = Config {
        initial: scale(byte(0)),
        max: scale(byte(1)),
        expiry,
        rule,
        amortized: (a % 4 == 0).then_some(1 + u32::from(a / 4 % 4)),
    };
    let event = |a: u8, b: u8| match a % 5 {
        0 => Event::Now,
        1 => Event::Ago(scale(b)),
        2 => Event::Ahead(scale(b)),
        3 => Event::BackoffEdge((b % 5) as i8 - 2),
        _ => Event::ExpiryEdge((b % 5) as i8 - 2),
    };
    let mut ops = Vec::new();
    while ops.len() < 512 {
        let at = HEADER + ops.len() * 3;
        if at >= data.len() {
            break;
        }
        let (op, a, b) = (byte(at), byte(at + 1), byte(at + 2));
        let k = a % 3;
        ops.push(match op % 14 {
            0 => Op::Advance(match a % 4 {
                0 => Step::Nanos(scale(b)),
                1 => Step::Initial,
                2 => Step::Max,
                _ => Step::Window((b % 5) as i8 - 2),
            }),
            1 => Op::Next(k, event(a / 3, b)),
            2 => Op::TryNext(k),
            3 => Op::Get(k),
            4 => Op::InSince(k, event(a / 3, b)),
            5 => Op::InSinceUpdate(k, event(a / 3, b)),
            6 => Op::Remaining(k, event(a / 3, b)),
            7 => Op::Attempts(k),
            8 => Op::Reset(k),
            9 => Op::Gc,
            10 => Op::Len,
            11 => Op::Stats,
            12 => Op::Arm(match a % 3 {
                0 => Armed::Off,
                1 => Armed::Panic,
                _ => Armed::Reenter,
            }),
            _ => {
                let skew = i64::try_from(scale(b)).expect("small");
                Op::RoundTrip(if a % 2 == 0 { skew } else { -skew })
            }
        });
    }
    (cfg, ops)
}
