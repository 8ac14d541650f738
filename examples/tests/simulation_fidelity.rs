//! The closed model must be the same experiment as the original AWS
//! simulator (awslabs/aws-arch-backoff-simulator): its mean calls and mean
//! time per run agree with the original's within 4 standard errors plus 3 %.
//!
//! `tests/data/aws_simulator/original.csv` holds the original's figures (see
//! the README beside it). This test checks every algorithm of the original
//! at 100 clients; `simulate --check` (run by CI in release) checks the whole
//! grid from 10 to 190 clients.

fn reference() -> Vec<(usize, String, sim::Cell)> {
    let text = include_str!("../../tests/data/aws_simulator/original.csv");
    sim::parse_cells(text).expect("reference parses")
}

#[test]
fn reference_covers_every_original_algorithm_from_10_to_190_clients() {
    let rows = reference();
    for clients in (10..=190).step_by(10) {
        for a in sim::ORIGINAL {
            assert!(
                rows.iter().any(|(c, x, _)| *c == clients && x == a),
                "missing {clients} {a}"
            );
        }
    }
}

#[test]
fn matches_the_original_at_100_clients_for_every_algorithm() {
    let rows = reference();
    let mut failures = Vec::new();
    for a in sim::ORIGINAL {
        let (_, _, theirs) = rows
            .iter()
            .find(|(c, x, _)| *c == 100 && x == a)
            .expect("reference row");
        let ours = sim::closed_cell(100, a, 100, 1);
        if let Err(e) = sim::agrees(&ours, theirs) {
            failures.push(format!("{a}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_two_hop_model_would_fail_the_check() {
    // Guard against a check too loose to notice the model it replaced: the
    // two-hop model's time at 100 clients was about half the original's.
    let rows = reference();
    let (_, _, theirs) = rows
        .iter()
        .find(|(c, x, _)| *c == 100 && x == "FullJitter")
        .expect("reference row");
    let mut halved = sim::closed_cell(100, "FullJitter", 100, 1);
    halved.time_mean *= 0.66;
    assert!(sim::agrees(&halved, theirs).is_err());
    let mut fewer = sim::closed_cell(100, "FullJitter", 100, 1);
    fewer.calls_mean *= 0.90;
    assert!(sim::agrees(&fewer, theirs).is_err());
}

#[test]
fn agreement_is_judged_in_standard_errors_plus_three_percent() {
    let cell = |mean: f64, sd: f64| sim::Cell {
        runs: 100,
        time_mean: mean,
        calls_mean: mean,
        time_sd: sd,
        calls_sd: sd,
    };
    // se = sqrt(2·10²/100) = 1.414; allowed = 5.657 + 3.
    assert!(sim::agrees(&cell(108.6, 10.0), &cell(100.0, 10.0)).is_ok());
    assert!(sim::agrees(&cell(108.7, 10.0), &cell(100.0, 10.0)).is_err());
    assert!(sim::agrees(&cell(91.4, 10.0), &cell(100.0, 10.0)).is_ok());
    assert!(sim::agrees(&cell(91.3, 10.0), &cell(100.0, 10.0)).is_err());
}
