//! The fleet's outage state and its parked keys as text: a line of
//! numbers each, readable in `redis-cli`, written and read word by word.

use std::time::Duration;

use keyed_backoff::Advanced;

use crate::nanos::saturating_nanos;
use crate::parked::Parked;
use crate::state::{Phase, State};

/// The version of the text written; a state of another version is an
/// error, never guessed at.
pub(crate) const FORMAT: &str = "1";

/// The state as text: the format, the generation, the counters, the
/// detector's run of successes, the phase and the latest attempts.
pub(crate) fn encode(shared: &State, generation: u64, count: u64) -> String {
    let mut out = Text(String::from(FORMAT));
    out.numbers(&[generation, shared.outages, shared.released, count]);
    out.maybe(shared.detector.streak().map(u64::from));
    match &shared.phase {
        Phase::Normal => out.word("N"),
        Phase::Outage(outage) => {
            out.word("O");
            out.numbers(&outage.parts());
        }
        Phase::Release(release) => {
            out.word("R");
            out.list(&release.parts());
        }
    }
    let reached: Vec<u64> = shared
        .reached
        .iter()
        .map(|t| saturating_nanos(*t))
        .collect();
    out.list(&reached);
    out.0
}

/// A parked key as text: its generation, its level, and its turns.
pub(crate) fn encode_entry(parked: &Parked<Option<Advanced>>, generation: u64) -> String {
    let mut out = Text(generation.to_string());
    out.maybe(parked.level.map(|l| saturating_nanos(l.backoff)));
    out.numbers(&[parked.level.map_or(0, |l| u64::from(l.attempts))]);
    out.maybe(parked.counted_in);
    out.maybe(parked.probe_in);
    out.maybe(parked.release_at.map(saturating_nanos));
    out.0
}

pub(crate) fn decode_entry(text: &str) -> Option<(u64, Parked<Option<Advanced>>)> {
    let mut words = Words(text.split(' '));
    let [generation] = words.numbers()?;
    let backoff = words.maybe()?;
    let [attempts] = words.numbers()?;
    let parked = Parked {
        level: backoff.map(|b| Advanced {
            backoff: Duration::from_nanos(b),
            attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        }),
        counted_in: words.maybe()?,
        probe_in: words.maybe()?,
        release_at: words.maybe()?.map(Duration::from_nanos),
    };
    words.0.next().is_none().then_some((generation, parked))
}

/// Text being written: words separated by spaces.
pub(crate) struct Text(String);

impl Text {
    pub(crate) fn word(&mut self, word: &str) {
        self.0.push(' ');
        self.0.push_str(word);
    }

    pub(crate) fn numbers(&mut self, numbers: &[u64]) {
        for n in numbers {
            self.word(&n.to_string());
        }
    }

    /// A number or `-` for none.
    pub(crate) fn maybe(&mut self, n: Option<u64>) {
        match n {
            Some(n) => self.numbers(&[n]),
            None => self.word("-"),
        }
    }

    /// How many, then each.
    pub(crate) fn list(&mut self, numbers: &[u64]) {
        self.numbers(&[numbers.len() as u64]);
        self.numbers(numbers);
    }
}

/// Text being read, word by word.
pub(crate) struct Words<'a>(pub(crate) std::str::Split<'a, char>);

impl Words<'_> {
    pub(crate) fn numbers<const N: usize>(&mut self) -> Option<[u64; N]> {
        let mut out = [0; N];
        for n in &mut out {
            *n = self.0.next()?.parse().ok()?;
        }
        Some(out)
    }

    pub(crate) fn maybe(&mut self) -> Option<Option<u64>> {
        match self.0.next()? {
            "-" => Some(None),
            word => word.parse().ok().map(Some),
        }
    }

    pub(crate) fn list(&mut self) -> Option<Vec<u64>> {
        let [len] = self.numbers()?;
        // Collected one by one (an `Option`'s collect reserves nothing
        // ahead), so a damaged length allocates no more than the words.
        (0..len).map(|_| self.numbers().map(|[n]| n)).collect()
    }
}
