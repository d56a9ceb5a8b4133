//! Benchmark figures in the one line format `scripts/bench-compare.py` reads, which prints each
//! beside its recorded reference (`benches/reference.json`) and flags regressions.

/// Which way a figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Times, memory, request and call counts.
    Lower,
    /// Rates.
    Higher,
}

/// Prints one figure: `figure <name> <value> <unit> <lower|higher>`. Names are dotted paths
/// without spaces (`reconciler.n10000.rss_peak`); so are units (`MiB`, `s`, `µs`).
pub fn figure(name: &str, value: f64, unit: &str, better: Better) {
    let better = match better {
        Better::Lower => "lower",
        Better::Higher => "higher",
    };
    println!("figure {name} {value:.3} {unit} {better}");
}

/// The sizes a benchmark runs: `KEYWARD_BENCH_N`, a comma-separated list (`1000,10000`), else
/// `default`.
pub fn sizes(default: usize) -> Vec<usize> {
    match std::env::var("KEYWARD_BENCH_N") {
        Ok(list) => list.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => vec![default],
    }
}
