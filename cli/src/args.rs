//! The command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

/// Explains, syncs, renders and checks External Secrets objects as Keyward sees them.
///
/// Reaches the cluster as kubectl does (KUBECONFIG, ~/.kube/config, or in-cluster). Also runs as
/// `kubectl keyward …` when `kubectl-keyward` is on PATH. Exit codes: 0 fine, 1 something is
/// refused or not served (check, migrate), 2 the command could not run.
#[derive(Parser, Debug)]
#[command(name = "keyward", version)]
pub struct Cli {
    /// Output format of explain, check and migrate.
    #[arg(short, long, global = true, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// For people.
    Text,
    /// For programs: one JSON document.
    Json,
}

/// The commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Which store an object resolves to, whether admission accepts it now, its conditions, its
    /// last error and when it refreshes next.
    Explain {
        /// `externalsecret/NAME`, `pushsecret/NAME` or `clusterexternalsecret/NAME` (also
        /// `es/`, `ps/`, `ces/`).
        target: String,
        /// Namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
    },
    /// Forces a refresh now by setting the `force-sync` annotation to the current time.
    Sync {
        /// `externalsecret/NAME`, `pushsecret/NAME` or `clusterexternalsecret/NAME`.
        target: String,
        /// Namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
    },
    /// Renders an ExternalSecret's target template locally and prints the Secret it writes.
    Render {
        /// The manifest holding one ExternalSecret (ConfigMaps and Secrets in it serve
        /// `templateFrom`).
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
        /// The fetched values, a YAML or JSON map of key to value.
        #[arg(long)]
        data: PathBuf,
        /// Namespace of the Secret when the manifest names none.
        #[arg(short, long)]
        namespace: Option<String>,
        /// Wall-clock limit of the render (default: the reconciler's `--template-time-limit`).
        #[arg(long, value_parser = duration)]
        time_limit: Option<Duration>,
    },
    /// Checks manifests against Keyward's admission rules, offline. References are resolved
    /// among the given files only.
    Check {
        /// Multi-document YAML files; `-` reads stdin.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Namespace of namespaced objects that name none.
        #[arg(short, long, default_value = "default")]
        namespace: String,
    },
    /// Lists what an External Secrets install needs before Keyward serves it; with `--values`,
    /// translates External Secrets' chart values file into Keyward's instead (offline).
    Migrate {
        /// An External Secrets chart values file: prints Keyward's chart values, with what does
        /// not carry over (keys without an equivalent, `extraArgs` flags Keyward lacks) as
        /// comments; exit code 1 when something does not.
        #[arg(long)]
        values: Option<PathBuf>,
    },
}

fn duration(s: &str) -> Result<Duration, String> {
    keyward_crds::rules::parse_go_duration(s).map_err(|e| e.to_string())
}
