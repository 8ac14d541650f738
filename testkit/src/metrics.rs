//! A `metrics` recorder for tests: what a scrape would show, by name and
//! labels.

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// Records the metrics of the closures it runs.
///
/// ```
/// use keyed_backoff_testkit::metrics::Metrics;
/// let m = Metrics::new();
/// m.record(|| {
///     metrics::counter!("workqueue_retries_total", "name" => "pods").increment(3);
///     metrics::gauge!("workqueue_depth", "name" => "pods").set(2.0);
/// });
/// let now = m.samples();
/// assert_eq!(now.counter("workqueue_retries_total", &[("name", "pods")]), 3);
/// assert_eq!(now.gauge("workqueue_depth", &[]), Some(2.0));
/// assert_eq!(now.counter("workqueue_adds_total", &[]), 0);
/// ```
pub struct Metrics {
    recorder: DebuggingRecorder,
    snapshotter: Snapshotter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A recorder with nothing recorded.
    pub fn new() -> Self {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        Metrics {
            recorder,
            snapshotter,
        }
    }

    /// Runs `f` with this recorder as the thread's recorder.
    pub fn record<R>(&self, f: impl FnOnce() -> R) -> R {
        metrics::with_local_recorder(&self.recorder, f)
    }

    /// Every metric recorded so far, as a scrape now would show it.
    pub fn samples(&self) -> Samples {
        let samples = self
            .snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| Sample {
                name: key.key().name().to_owned(),
                labels: key
                    .key()
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect(),
                value,
            })
            .collect();
        Samples(samples)
    }
}

/// One metric: its name, its labels and its value.
#[derive(Debug, PartialEq)]
pub struct Sample {
    /// The metric's name.
    pub name: String,
    /// Its labels, `(key, value)`.
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: DebugValue,
}

impl Sample {
    /// Whether this is `name` and carries every one of `labels`.
    pub fn is(&self, name: &str, labels: &[(&str, &str)]) -> bool {
        self.name == name
            && labels
                .iter()
                .all(|(k, v)| self.labels.iter().any(|(lk, lv)| lk == k && lv == v))
    }
}

/// The metrics of one scrape.
#[derive(Debug, PartialEq)]
pub struct Samples(pub Vec<Sample>);

impl Samples {
    /// The sum of the counters `name` carrying `labels` (0 if none).
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.matching(name, labels)
            .map(|s| match s.value {
                DebugValue::Counter(c) => c,
                _ => 0,
            })
            .sum()
    }

    /// The value of the first gauge `name` carrying `labels`.
    pub fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.matching(name, labels).find_map(|s| match s.value {
            DebugValue::Gauge(g) => Some(g.into_inner()),
            _ => None,
        })
    }

    /// Every observation of the histograms `name` carrying `labels`.
    pub fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.matching(name, labels)
            .flat_map(|s| match &s.value {
                DebugValue::Histogram(h) => h.iter().map(|v| v.into_inner()).collect(),
                _ => Vec::new(),
            })
            .collect()
    }

    /// The samples `name` carrying `labels`.
    pub fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&str, &str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.0.iter().filter(move |s| s.is(name, labels))
    }
}
