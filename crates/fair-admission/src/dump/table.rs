//! Text as Kubernetes' debug endpoints print it: rows of cells joined by
//! `",\t"` and aligned as Go's `tabwriter` aligns them (minimum cell width
//! 8, padding 1, spaces), and durations as Go prints them.

use std::fmt::Write;
use std::time::Duration;

/// `rows` as aligned text, one line each.
pub(crate) fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    // Every cell but a line's last is terminated by its tab, and is
    // aligned; the last is printed as it is.
    let mut widths = vec![0; columns.saturating_sub(1)];
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(row.len() - 1) {
            let width = cell.chars().count() + 2; // its comma, and padding
            widths[i] = widths[i].max(width).max(8);
        }
    }
    let mut out = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i + 1 < row.len() {
                let text = format!("{cell},");
                let pad = widths[i] - text.chars().count();
                let _ = write!(out, "{text}{:pad$}", "");
            } else {
                out.push_str(cell);
            }
        }
        out.push('\n');
    }
    out
}

/// `d` as Go's `time.Duration.String` writes it: `0s`, `1.5ms`, `2m3.5s`,
/// `1h0m0s`.
pub(crate) fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000_000_000 {
        let (unit, scale) = match nanos {
            n if n < 1_000 => ("ns", 1),
            n if n < 1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(nanos, scale));
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let s = decimal(
        u128::from(s) * 1_000_000_000 + u128::from(d.subsec_nanos()),
        1_000_000_000,
    );
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m{s}s"),
        (h, m) => format!("{h}h{m}m{s}s"),
    }
}

/// `n / scale` in decimal, without trailing zeros.
fn decimal(n: u128, scale: u128) -> String {
    let (whole, frac) = (n / scale, n % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let digits = scale.ilog10() as usize;
    let frac = format!("{frac:0digits$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_writes_them() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1), "1ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_micros(12_500), "12.5ms"),
            (Duration::from_millis(1_500), "1.5s"),
            (Duration::from_secs(61), "1m1s"),
            (Duration::from_secs(3_600), "1h0m0s"),
            (Duration::new(3_723, 5), "1h2m3.000000005s"),
        ];
        for (d, text) in cases {
            assert_eq!(go_duration(d), text);
        }
    }

    #[test]
    fn columns_align_as_tabwriter_aligns_them() {
        let rows = [
            vec!["A".to_owned(), "Long column".to_owned(), "end".to_owned()],
            vec!["x".to_owned(), "y".to_owned(), "z".to_owned()],
        ];
        assert_eq!(
            table(&rows),
            "A,      Long column, end\nx,      y,           z\n"
        );
    }
}
