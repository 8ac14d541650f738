//! Port of `TestWorkEstimator` (`pkg/util/flowcontrol/request/width_test.go:32`),
//! with Kubernetes' defaults at HEAD: size-based LIST costs (at most 100
//! seats), mutating requests at most 10 seats, `WatchList` on, and
//! consistent reads served from storage (the test's store cannot report
//! watch progress). Each case names the line of its Go case.
//!
//! Differences, on purpose: the case without a `RequestInfo`
//! (`width_test.go:49`) cannot be expressed, since an estimate here always
//! starts from a request; a count tracker's unexpected error is
//! [`ObjectStats::Stale`], which Kubernetes treats the same way.

use std::time::Duration;

use fair_admission::ObjectStats::{self, Known, Stale, Unknown};
use fair_admission::{RequestInfo, WorkEstimator};

/// (Go case line, verb, API group, resource, subresource, name, query,
/// object stats, watchers, the level's max seats, (initial seats, final
/// seats, additional latency in ms)).
type Case = (
    u32,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    ObjectStats,
    u64,
    u32,
    (u32, u32, u64),
);

#[rustfmt::skip]
const CASES: &[Case] = &[
        (56, "get", "", "", "", "", "", Known { count: 0, average_size: 0 }, 0, 10, (1, 0, 0)),
        (65, "list", "foo.bar", "events", "", "", "limit=invalid", Known { count: 799, average_size: 10000 }, 0, 100, (100, 0, 0)),
        (77, "list", "foo.bar", "events", "", "", "limit=399&resourceVersion=1", Known { count: 699, average_size: 10000 }, 0, 100, (40, 0, 0)),
        (89, "list", "foo.bar", "events", "", "", "resourceVersion=1", Known { count: 699, average_size: 10000 }, 0, 100, (10, 0, 0)),
        (101, "list", "foo.bar", "events", "", "", "resourceVersion=1", Known { count: 69, average_size: 10000 }, 0, 100, (7, 0, 0)),
        (113, "list", "foo.bar", "events", "", "", "limit=399", Known { count: 699, average_size: 10000 }, 0, 100, (40, 0, 0)),
        (125, "list", "foo.bar", "events", "", "", "", Known { count: 399, average_size: 10000 }, 0, 100, (40, 0, 0)),
        (137, "list", "foo.bar", "events", "", "", "", Unknown, 0, 100, (1, 0, 0)),
        (149, "list", "foo.bar", "events", "", "", "continue=token&limit=399", Known { count: 699, average_size: 10000 }, 0, 100, (40, 0, 0)),
        (161, "list", "foo.bar", "events", "", "", "limit=299&resourceVersion=0", Known { count: 399, average_size: 10000 }, 0, 100, (10, 0, 0)),
        (173, "list", "foo.bar", "events", "", "", "limit=20&resourceVersion=0", Known { count: 399, average_size: 10000 }, 0, 100, (2, 0, 0)),
        (185, "list", "foo.bar", "events", "", "", "resourceVersion=0", Known { count: 799, average_size: 10000 }, 0, 100, (10, 0, 0)),
        (197, "list", "foo.bar", "events", "", "", "resourceVersion=0", Known { count: 79, average_size: 10000 }, 0, 100, (8, 0, 0)),
        (209, "list", "foo.bar", "events", "", "", "resourceVersion=1&resourceVersionMatch=Exact&limit=399", Known { count: 699, average_size: 10000 }, 0, 100, (40, 0, 0)),
        (221, "list", "foo.bar", "events", "", "", "resourceVersion=1&resourceVersionMatch=NotOlderThan", Known { count: 799, average_size: 10000 }, 0, 100, (10, 0, 0)),
        (233, "list", "foo.bar", "events", "", "", "resourceVersion=1&resourceVersionMatch=NotOlderThan", Known { count: 79, average_size: 10000 }, 0, 100, (8, 0, 0)),
        (245, "list", "foo.bar", "events", "", "", "resourceVersion=1&resourceVersionMatch=Exact", Known { count: 5000, average_size: 10000 }, 0, 20, (20, 0, 0)),
        (257, "list", "foo.bar", "events", "", "", "resourceVersionMatch=foo", Known { count: 200, average_size: 10000 }, 0, 100, (20, 0, 0)),
        (269, "list", "foo.bar", "events", "", "", "resourceVersion=foo&resourceVersionMatch=Exact&limit=399", Known { count: 699, average_size: 10000 }, 0, 100, (40, 0, 0)),
        (281, "list", "foo.bar", "events", "", "", "resourceVersion=1&resourceVersionMatch=Exact", Known { count: 5000, average_size: 10000 }, 0, 20, (20, 0, 0)),
        (293, "list", "foo.bar", "events", "", "", "resourceVersion=0", Unknown, 0, 100, (1, 0, 0)),
        (305, "list", "foo.bar", "events", "", "", "", Stale, 0, 100, (100, 0, 0)),
        (318, "list", "foo.bar", "events", "", "", "", Known { count: 1, average_size: 0 }, 0, 100, (15, 0, 0)),
        (330, "list", "foo.bar", "events", "", "", "", Unknown, 0, 100, (1, 0, 0)),
        (342, "list", "foo.bar", "events", "", "", "", Stale, 0, 100, (100, 0, 0)),
        (354, "list", "foo.bar", "events", "", "", "resourceVersion=0&limit=1", Unknown, 0, 100, (1, 0, 0)),
        (366, "list", "foo.bar", "events", "", "", "limit=1", Stale, 0, 100, (15, 0, 0)),
        (379, "list", "foo.bar", "events", "", "", "", Known { count: 1, average_size: 0 }, 0, 100, (15, 0, 0)),
        (391, "list", "foo.bar", "events", "", "", "limit=1", Unknown, 0, 100, (1, 0, 0)),
        (403, "list", "foo.bar", "events", "", "", "limit=1", Stale, 0, 100, (15, 0, 0)),
        (415, "list", "foo.bar", "events", "", "", "resourceVersion=0&limit=499", Unknown, 0, 100, (1, 0, 0)),
        (427, "list", "foo.bar", "events", "", "", "limit=499", Stale, 0, 100, (100, 0, 0)),
        (440, "list", "foo.bar", "events", "", "", "limit=499", Known { count: 1, average_size: 0 }, 0, 100, (15, 0, 0)),
        (452, "list", "foo.bar", "events", "", "", "resourceVersion=0&limit=499", Known { count: 1, average_size: 0 }, 0, 100, (10, 0, 0)),
        (464, "list", "foo.bar", "events", "", "", "limit=499", Unknown, 0, 100, (1, 0, 0)),
        (476, "list", "foo.bar", "events", "", "", "limit=499", Stale, 0, 100, (100, 0, 0)),
        (488, "list", "foo.bar", "events", "", "test", "fieldSelector=metadata.name%3Dtest", Known { count: 799, average_size: 200000 }, 0, 100, (2, 0, 0)),
        (501, "list", "foo.bar", "events", "", "test", "fieldSelector=metadata.name%3Dtest", Known { count: 799, average_size: 1500000 }, 0, 100, (15, 0, 0)),
        (514, "list", "foo.bar", "events", "", "test", "fieldSelector=metadata.name%3Dtest&limit=500&resourceVersion=0", Known { count: 799, average_size: 200000 }, 0, 100, (2, 0, 0)),
        (527, "list", "foo.bar", "events", "", "test", "fieldSelector=metadata.name%3Dtest&limit=500&resourceVersion=0", Known { count: 799, average_size: 1500000 }, 0, 100, (10, 0, 0)),
        (540, "list", "foo.bar", "events", "", "", "labelSelector=app%3Dtest", Known { count: 799, average_size: 10000 }, 0, 100, (80, 0, 0)),
        (552, "list", "foo.bar", "events", "", "", "labelSelector=app%3Dtest&limit=49", Known { count: 799, average_size: 10000 }, 0, 100, (40, 0, 0)),
        (564, "list", "foo.bar", "events", "", "", "labelSelector=app%3Dtest&limit=699", Known { count: 799, average_size: 10000 }, 0, 100, (70, 0, 0)),
        (576, "list", "foo.bar", "events", "", "", "resourceVersion=0&labelSelector=app%3Dtest", Known { count: 799, average_size: 10000 }, 0, 100, (10, 0, 0)),
        (588, "list", "foo.bar", "events", "", "", "resourceVersion=0&labelSelector=app%3Dtest&limit=29", Known { count: 799, average_size: 10000 }, 0, 100, (3, 0, 0)),
        (600, "watch", "foo.bar", "events", "", "", "watch=true", Known { count: 799, average_size: 1000 }, 0, 100, (8, 0, 0)),
        (612, "watch", "foo.bar", "events", "", "", "watch=true&resourceVersion=0", Known { count: 799, average_size: 1000 }, 0, 100, (8, 0, 0)),
        (624, "watch", "foo.bar", "events", "", "", "watch=true&resourceVersion=1", Known { count: 799, average_size: 1000 }, 0, 100, (1, 0, 0)),
        (636, "watch", "foo.bar", "events", "", "", "watch=true&sendInitialEvents=false", Known { count: 799, average_size: 1000 }, 0, 100, (8, 0, 0)),
        (648, "watch", "foo.bar", "events", "", "", "watch=true&sendInitialEvents=false&resourceVersion=0", Known { count: 799, average_size: 1000 }, 0, 100, (8, 0, 0)),
        (660, "watch", "foo.bar", "events", "", "", "watch=true&sendInitialEvents=false&resourceVersion=1", Known { count: 799, average_size: 1000 }, 0, 100, (1, 0, 0)),
        (672, "watch", "foo.bar", "events", "", "", "watch=true&sendInitialEvents=true", Known { count: 799, average_size: 1000 }, 0, 100, (8, 0, 0)),
        (684, "watch", "foo.bar", "events", "", "", "watch=true&sendInitialEvents=true&resourceVersion=0", Known { count: 799, average_size: 1000 }, 0, 100, (8, 0, 0)),
        (696, "watch", "foo.bar", "events", "", "", "watch=true&sendInitialEvents=true&resourceVersion=0", Known { count: 799, average_size: 1000 }, 0, 100, (8, 0, 0)),
        (708, "create", "foo.bar", "foos", "", "", "", Known { count: 0, average_size: 0 }, 0, 10, (1, 0, 0)),
        (721, "create", "foo.bar", "foos", "", "", "", Known { count: 0, average_size: 0 }, 29, 10, (1, 3, 5)),
        (735, "create", "foo.bar", "foos", "", "", "", Known { count: 0, average_size: 0 }, 5, 10, (1, 0, 0)),
        (749, "create", "foo.bar", "foos", "", "", "", Known { count: 0, average_size: 0 }, 199, 10, (1, 10, 10)),
        (763, "update", "foo.bar", "foos", "", "", "", Known { count: 0, average_size: 0 }, 0, 10, (1, 0, 0)),
        (776, "update", "foo.bar", "foos", "", "", "", Known { count: 0, average_size: 0 }, 29, 10, (1, 3, 5)),
        (790, "patch", "foo.bar", "foos", "", "", "", Known { count: 0, average_size: 0 }, 0, 10, (1, 0, 0)),
        (803, "patch", "foo.bar", "foos", "", "", "", Known { count: 0, average_size: 0 }, 29, 10, (1, 3, 5)),
        (817, "patch", "foo.bar", "foos", "", "", "", Known { count: 0, average_size: 0 }, 100, 5, (1, 5, 10)),
        (831, "delete", "foo.bar", "foos", "", "", "", Known { count: 0, average_size: 0 }, 0, 10, (1, 0, 0)),
        (844, "delete", "foo.bar", "foos", "", "", "", Known { count: 0, average_size: 0 }, 29, 10, (1, 3, 5)),
        (858, "create", "v1", "serviceaccounts", "token", "", "", Known { count: 0, average_size: 0 }, 5777, 10, (1, 0, 0)),
        (873, "create", "v1", "serviceaccounts", "", "", "", Known { count: 0, average_size: 0 }, 1000, 20, (1, 10, 50)),
];

#[test]
fn test_work_estimator() {
    let estimator = WorkEstimator::default();
    let mut failures = Vec::new();
    for &(
        line,
        verb,
        api_group,
        resource,
        subresource,
        name,
        query,
        stats,
        watchers,
        max,
        expected,
    ) in CASES
    {
        let request = RequestInfo {
            verb,
            api_group,
            resource,
            subresource,
            name,
            query,
        };
        let w = estimator.estimate(&request, Some(max), |_| stats, |_| watchers);
        let got = (w.initial_seats, w.final_seats, w.additional_latency);
        let want = (expected.0, expected.1, Duration::from_millis(expected.2));
        if got != want {
            failures.push(format!(
                "width_test.go:{line}: got {got:?}, expected {want:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(CASES.len(), 67);
}

/// Kubernetes' count-based LIST estimate (the `SizeBasedListCostEstimate`
/// gate off, at most 10 seats): one seat per 100 objects gone through.
#[test]
fn count_based_lists_charge_by_objects_gone_through() {
    let mut estimator = WorkEstimator::default();
    estimator.size_based_lists = false;
    estimator.maximum_list_seats = 10;
    let stats = Known {
        count: 300,
        average_size: 1_000_000,
    };
    let seats = |query, name| {
        let list = RequestInfo {
            verb: "list",
            resource: "pods",
            name,
            query,
            ..RequestInfo::default()
        };
        estimator.list(&list, None, stats).initial_seats
    };
    assert_eq!(seats("", ""), 6); // twice the 300 objects, from storage
    assert_eq!(seats("limit=100", ""), 2); // twice the page
    assert_eq!(seats("resourceVersion=0", ""), 3); // every object, from the cache
    assert_eq!(seats("labelSelector=a%3Db", ""), 6); // 300 + the 300 page
    assert_eq!(seats("", "one"), 1); // one named object
    let many = Known {
        count: 100_000,
        average_size: 0,
    };
    let list = RequestInfo {
        verb: "list",
        resource: "pods",
        ..RequestInfo::default()
    };
    assert_eq!(estimator.list(&list, None, many).initial_seats, 10);
    assert_eq!(estimator.list(&list, Some(4), many).initial_seats, 4);
}

/// Without `WatchList`, every WATCH takes one seat; verbs that read one
/// object take one seat.
#[test]
fn other_requests_take_one_seat() {
    let mut estimator = WorkEstimator::default();
    estimator.watch_list = false;
    let stats = Known {
        count: 799,
        average_size: 10_000,
    };
    for verb in ["watch", "get", "deletecollection", ""] {
        let r = RequestInfo {
            verb,
            resource: "events",
            ..RequestInfo::default()
        };
        let w = estimator.estimate(&r, Some(100), |_| stats, |_| 1_000);
        assert_eq!(w.max_seats(), 1, "{verb}");
    }
}
