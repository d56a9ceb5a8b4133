//! Logging: the flags every binary accepts and the tracing subscriber they describe.
//!
//! What a binary's lines look like beyond the format flag (which stream, where event fields go)
//! is its [`LogStyle`], fixed per binary: log pipelines parse that output, so it keeps its shape.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (the default, for containers).
    Json,
    /// Human-readable lines.
    Text,
}

/// The logging flags, to `#[command(flatten)]` into a binary's command line; each also reads an
/// environment variable.
#[derive(Clone, Debug, clap::Args)]
pub struct LogArgs {
    /// Log format.
    #[arg(long, env = "KEYWARD_LOG_FORMAT", value_enum, default_value = "json")]
    pub log_format: LogFormat,
    /// Log filter (tracing-subscriber EnvFilter syntax, e.g. `info,kube=warn`); when unset,
    /// `RUST_LOG`, else the binary's default.
    #[arg(long, env = "KEYWARD_LOG_LEVEL")]
    pub log_level: Option<String>,
}

/// Where log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Where a JSON line puts an event's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonLayout {
    /// At the top level, next to `message`; the current span under `span` and the enclosing
    /// spans under `spans`.
    Flat,
    /// Under `fields`; the current span under `span` and, with `span_list`, the enclosing spans
    /// under `spans`.
    Nested {
        /// Whether the list of enclosing spans is written.
        span_list: bool,
    },
}

/// The fixed part of a binary's log output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogStyle {
    /// The filter when neither `--log-level` nor `RUST_LOG` is set.
    pub default_filter: &'static str,
    /// Where lines go.
    pub stream: LogStream,
    /// The shape of JSON lines.
    pub json: JsonLayout,
}

impl LogStyle {
    /// The one layout of every Keyward server ([`crate::Runtime`] sets it up): lines on stderr
    /// (stdout stays free for a command's own output); a JSON line has `timestamp`, `level`,
    /// `target`, the event's fields under `fields` (`message` among them), the current span
    /// under `span` and the enclosing spans under `spans`.
    pub const fn standard(default_filter: &'static str) -> Self {
        LogStyle { default_filter, stream: LogStream::Stderr, json: JsonLayout::Nested { span_list: true } }
    }
}

/// Installs the global tracing subscriber described by the flags and the binary's style. A
/// filter that does not parse is reported and replaced by the style's default rather than
/// stopping the process; a second call reports that logging is already set up and changes
/// nothing.
pub fn init_logging(args: &LogArgs, style: LogStyle) {
    let rust_log = std::env::var("RUST_LOG").ok();
    let (filter, rejected) = choose_filter(args.log_level.as_deref(), rust_log.as_deref(), style.default_filter);
    let (writer, ansi) = match style.stream {
        LogStream::Stdout => (BoxMakeWriter::new(std::io::stdout), std::io::stdout().is_terminal()),
        LogStream::Stderr => (BoxMakeWriter::new(std::io::stderr), std::io::stderr().is_terminal()),
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(ansi);
    let result = match (args.log_format, style.json) {
        (LogFormat::Text, _) => builder.try_init(),
        (LogFormat::Json, JsonLayout::Flat) => builder.json().flatten_event(true).try_init(),
        (LogFormat::Json, JsonLayout::Nested { span_list }) => builder.json().with_span_list(span_list).try_init(),
    };
    if let Err(e) = result {
        eprintln!("logging already initialised: {e}");
        return;
    }
    if let Some(rejected) = rejected {
        tracing::warn!(filter = %rejected.filter, error = %rejected.error, default = style.default_filter,
            "log filter does not parse; using the default");
    }
}

/// A log filter that was given but does not parse.
#[derive(Debug)]
struct Rejected {
    filter: String,
    error: String,
}

/// The filter in force: the flag, else `RUST_LOG`, else the default; blank values count as
/// unset. An unparsable choice falls back to the default and is returned to be reported.
fn choose_filter(flag: Option<&str>, rust_log: Option<&str>, default: &str) -> (EnvFilter, Option<Rejected>) {
    let given = [flag, rust_log].into_iter().flatten().find(|s| !s.trim().is_empty());
    let Some(given) = given else {
        return (default_filter(default), None);
    };
    match EnvFilter::try_new(given) {
        Ok(filter) => (filter, None),
        Err(e) => (default_filter(default), Some(Rejected { filter: given.to_string(), error: e.to_string() })),
    }
}

fn default_filter(default: &str) -> EnvFilter {
    // The defaults are constants of the binaries, checked by their tests; "info" is the last resort.
    EnvFilter::try_new(default).unwrap_or_else(|_| EnvFilter::new("info"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        log: LogArgs,
    }

    #[test]
    fn format_flag_parses_and_defaults_to_json() {
        let cli = Cli::try_parse_from(["p"]).expect("parse");
        assert_eq!(cli.log.log_format, LogFormat::Json);
        assert_eq!(cli.log.log_level, None);
        let cli = Cli::try_parse_from(["p", "--log-format", "text", "--log-level", "debug"]).expect("parse");
        assert_eq!(cli.log.log_format, LogFormat::Text);
        assert_eq!(cli.log.log_level.as_deref(), Some("debug"));
        assert!(Cli::try_parse_from(["p", "--log-format", "yaml"]).is_err(), "only json and text");
    }

    #[test]
    fn filter_precedence_flag_then_rust_log_then_default() {
        let chosen = |flag, env| {
            let (filter, rejected) = choose_filter(flag, env, "info,kube=warn");
            assert!(rejected.is_none());
            filter.to_string()
        };
        assert_eq!(chosen(Some("debug"), Some("trace")), "debug");
        assert_eq!(chosen(None, Some("trace")), "trace");
        assert_eq!(chosen(Some("  "), Some("trace")), "trace", "a blank flag counts as unset");
        assert_eq!(chosen(None, None), EnvFilter::new("info,kube=warn").to_string());
    }

    #[test]
    fn an_unparsable_filter_falls_back_to_the_default_and_is_reported() {
        let (filter, rejected) = choose_filter(Some("info,kube=loud"), None, "warn");
        assert_eq!(filter.to_string(), "warn");
        let rejected = rejected.expect("the bad filter is reported");
        assert_eq!(rejected.filter, "info,kube=loud");
        assert!(!rejected.error.is_empty());
    }
}
