/// The median of a sample (the mean of the middle two for an even count).
pub(crate) fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One row of a side-by-side table.
pub(crate) fn row(label: &str, ours: f64, peer: Option<f64>, unit: &str) {
    match peer {
        Some(p) if p > 0.0 => println!(
            "{label:<44} {ours:>12.1} {unit:<8} bullmq {p:>12.1} {unit:<8} ratio {:>6.2}x",
            ours / p
        ),
        _ => println!("{label:<44} {ours:>12.1} {unit:<8} bullmq {:>12} ", "n/a"),
    }
}

/// The `p`-th percentile (0..=100) of sorted samples, by nearest rank.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
