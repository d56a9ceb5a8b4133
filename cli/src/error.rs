//! What can stop a command.

use std::path::PathBuf;

/// Why a command could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line names something that does not parse.
    #[error("{0}")]
    Usage(String),
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file (`-` is stdin).
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A manifest or data file is not what the command needs.
    #[error("{path}: {message}")]
    Manifest {
        /// The file, with the document number when it has several.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// No cluster configuration was found, or it is unusable.
    #[error("cannot reach a cluster: {0} (set KUBECONFIG or use a kubeconfig context as kubectl does)")]
    Config(String),
    /// The API server refused or failed a request.
    #[error("{what}: {source}")]
    Api {
        /// What was asked.
        what: String,
        /// The API server's answer.
        source: Box<kube::Error>,
    },
    /// The object does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// A template failed to render.
    #[error("template error: {0}")]
    Template(String),
    /// The result could not be printed.
    #[error("cannot write the output: {0}")]
    Output(String),
}

impl Error {
    /// An API error for `what`, keeping "not found" apart.
    pub fn api(what: impl Into<String>, source: kube::Error) -> Self {
        let what = what.into();
        match &source {
            kube::Error::Api(s) if s.code == 404 => Error::NotFound(what),
            _ => Error::Api { what, source: Box::new(source) },
        }
    }
}
