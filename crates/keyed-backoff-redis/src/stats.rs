//! The counters an operator reads from one store.

/// What one [`RedisBackoff`](crate::RedisBackoff) (and its clones) counted
/// in this process, from [`stats`](crate::RedisBackoff::stats). Each counter
/// stays 0 while its feature is off.
///
/// ```
/// let stats = keyed_backoff_redis::Stats::default();
/// assert_eq!((stats.near_cache_hits, stats.fallback_answers), (0, 0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Gates the near cache answered without a round trip (see
    /// [`near_cache`](crate::RedisBackoffBuilder::near_cache)).
    pub near_cache_hits: u64,
    /// Operations the in-process fallback answered while Redis was down
    /// (see [`fallback`](crate::RedisBackoffBuilder::fallback)): backoffs
    /// that were this process's alone, not the fleet's.
    pub fallback_answers: u64,
}
