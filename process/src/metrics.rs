//! What every Keyward process exposes besides its own metrics — the process itself
//! (`process_*`, as Prometheus' Go client names them) and what it was built as
//! (`keyward_build_info`) — and counters that keep a name without `_total` ([`Unsuffixed`]).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

/// A counter written under its exact name. External Secrets names some counters without
/// `_total` (`externalsecret_sync_calls_error`, `externalsecret_provider_api_calls_count`; Go's
/// client keeps a counter's name as given) and dashboards query them by that name, while this
/// library appends `_total` to every counter. Registered as an untyped family, which
/// [`crate::health::encode`] writes as `counter`: in Keyward's expositions an untyped family is
/// always one of these.
#[derive(Debug, Clone)]
pub struct Unsuffixed<M>(pub M);

impl<M: EncodeMetric> EncodeMetric for Unsuffixed<M> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Unknown
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Labels of `keyward_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    component: &'static str,
    version: &'static str,
}

/// Registers `keyward_build_info{component, version} 1` and the `process_*` metrics of this
/// process: every binary calls it once on its registry.
pub fn register_process(registry: &mut Registry, component: &'static str, version: &'static str) {
    let info = Family::<BuildLabels, Gauge>::default();
    info.get_or_create(&BuildLabels { component, version }).set(1);
    registry.register("keyward_build_info", "The Keyward component and version this process runs", info);
    registry.register_collector(Box::new(ProcessCollector));
}

/// Labels of `leader_election_master_status`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    name: String,
}

/// Registers `leader_election_master_status{name}` (controller-runtime's name): 1 while this
/// process holds the Lease `lease`, 0 while it stands by. Returns the gauge the Lease loop sets.
pub fn register_leader_status(registry: &mut Registry, lease: &str) -> Gauge {
    let family = Family::<LeaseLabels, Gauge>::default();
    let gauge = family.get_or_create(&LeaseLabels { name: lease.to_string() }).clone();
    registry.register(
        "leader_election_master_status",
        "Whether this process holds the Lease `name` (1) or stands by (0)",
        family,
    );
    gauge
}

/// `/proc`'s clock ticks per second: the kernel's user-visible `USER_HZ`, 100 on every Linux
/// architecture whatever the kernel's internal tick rate.
const USER_HZ: f64 = 100.0;

/// What `/proc` says about this process, read at each scrape.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct ProcessStats {
    cpu_seconds: Option<f64>,
    start_time_seconds: Option<f64>,
    virtual_memory_bytes: Option<f64>,
    resident_memory_bytes: Option<f64>,
    open_fds: Option<f64>,
    max_fds: Option<f64>,
    threads: Option<f64>,
}

/// The fields after the command name of `/proc/self/stat` (whose name may hold spaces and
/// parentheses: the last `)` ends it), numbered as `proc(5)` numbers them from 3.
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default()
}

fn parse(stat: &str, status: &str, boot_stat: &str, limits: &str, open_fds: Option<usize>) -> ProcessStats {
    let fields = stat_fields(stat);
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
    let btime = boot_stat.lines().find_map(|l| l.strip_prefix("btime ")).and_then(|v| v.trim().parse::<f64>().ok());
    let kib = |key: &str| {
        status.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
    };
    let max_fds = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l["Max open files".len()..].split_whitespace().next()?.parse::<f64>().ok());
    ProcessStats {
        cpu_seconds: field(14).zip(field(15)).map(|(user, system)| (user + system) / USER_HZ),
        start_time_seconds: btime.zip(field(22)).map(|(boot, ticks)| boot + ticks / USER_HZ),
        virtual_memory_bytes: field(23),
        resident_memory_bytes: kib("VmRSS:").map(|k| k * 1024.0),
        open_fds: open_fds.map(|n| n as f64),
        max_fds,
        threads: field(20),
    }
}

fn read_stats() -> ProcessStats {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let open_fds = std::fs::read_dir("/proc/self/fd").ok().map(Iterator::count);
    parse(
        &read("/proc/self/stat"),
        &read("/proc/self/status"),
        &read("/proc/stat"),
        &read("/proc/self/limits"),
        open_fds,
    )
}

/// The `process_*` metrics, read from `/proc` at each scrape (none where `/proc` is missing).
#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = read_stats();
        if let Some(v) = s.cpu_seconds {
            let metric = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(v).encode(metric)?;
        }
        let gauges = [
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                s.start_time_seconds,
            ),
            ("process_virtual_memory_bytes", "Virtual memory size in bytes", s.virtual_memory_bytes),
            ("process_resident_memory_bytes", "Resident memory size in bytes", s.resident_memory_bytes),
            ("process_open_fds", "Number of open file descriptors", s.open_fds),
            ("process_max_fds", "Maximum number of open file descriptors", s.max_fds),
            ("process_threads", "Number of OS threads of the process", s.threads),
        ];
        for (name, help, value) in gauges {
            if let Some(v) = value {
                ConstGauge::new(v).encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[test]
    fn proc_files_are_read_as_the_go_client_reads_them() {
        // A command name with a space and a parenthesis, as `proc(5)` allows.
        let stat = "4242 (keyward (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 150 0 0 20 0 9 0 12345 \
                    104857600 2048 18446744073709551615";
        let status = "Name:\tkeyward\nVmRSS:\t    8192 kB\nThreads:\t9\n";
        let boot = "cpu  1 2 3\nbtime 1700000000\nprocesses 10\n";
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max cpu time              unlimited            unlimited            seconds\n\
                      Max open files            1048576              1048576              files\n";
        let s = parse(stat, status, boot, limits, Some(12));
        assert_eq!(s.cpu_seconds, Some(4.0), "250 + 150 ticks at 100 Hz");
        assert_eq!(s.start_time_seconds, Some(1_700_000_123.45));
        assert_eq!(s.virtual_memory_bytes, Some(104_857_600.0));
        assert_eq!(s.resident_memory_bytes, Some(8_388_608.0));
        assert_eq!(s.open_fds, Some(12.0));
        assert_eq!(s.max_fds, Some(1_048_576.0));
        assert_eq!(s.threads, Some(9.0));
        assert_eq!(parse("", "", "", "", None), ProcessStats::default(), "nothing readable, nothing made up");
    }

    #[test]
    fn this_process_reports_itself_and_its_build() {
        let mut registry = Registry::default();
        register_process(&mut registry, "test", "1.2.3");
        let text = crate::health::encode(&registry).expect("encodes");
        assert!(text.contains("keyward_build_info{component=\"test\",version=\"1.2.3\"} 1"), "{text}");
        assert!(text.contains("# TYPE process_cpu_seconds_total counter"), "{text}");
        for name in ["process_start_time_seconds ", "process_resident_memory_bytes ", "process_open_fds "] {
            let value: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} missing in\n{text}"));
            assert!(value > 0.0, "{name}{value}");
        }
    }

    #[test]
    fn unsuffixed_counters_keep_their_name_and_are_typed_counters() {
        let mut registry = Registry::default();
        let errors = Family::<LeaseLabels, Counter>::default();
        registry.register("thing_sync_calls_error", "Failed syncs", Unsuffixed(errors.clone()));
        let plain = Counter::<u64>::default();
        registry.register("thing_syncs", "Syncs", plain.clone());
        errors.get_or_create(&LeaseLabels { name: "a".into() }).inc_by(3);
        plain.inc();
        let text = crate::health::encode(&registry).expect("encodes");
        assert!(text.contains("# TYPE thing_sync_calls_error counter\n"), "{text}");
        assert!(text.contains("thing_sync_calls_error{name=\"a\"} 3\n"), "{text}");
        assert!(text.contains("# TYPE thing_syncs_total counter\nthing_syncs_total 1\n"), "{text}");
        assert!(!text.contains("untyped"), "{text}");
    }

    #[test]
    fn leader_status_is_a_gauge_per_lease() {
        let mut registry = Registry::default();
        let gauge = register_leader_status(&mut registry, "keyward-reconciler");
        let text = crate::health::encode(&registry).expect("encodes");
        assert!(text.contains("leader_election_master_status{name=\"keyward-reconciler\"} 0"), "{text}");
        gauge.set(1);
        let text = crate::health::encode(&registry).expect("encodes");
        assert!(text.contains("leader_election_master_status{name=\"keyward-reconciler\"} 1"), "{text}");
    }
}
