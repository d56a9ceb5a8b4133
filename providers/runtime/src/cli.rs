//! Flags shared by every provider binary.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use keyward_process::LogArgs;

use crate::server::ServerOptions;

/// The providers' log filter when neither `--log-level` nor `RUST_LOG` is set; the layout is
/// every Keyward process's (`keyward_process::Runtime`), the call's span under `span`.
pub(crate) const DEFAULT_LOG_FILTER: &str = "info";

/// Flags of a provider process; each also reads an environment variable.
#[derive(Clone, Debug, clap::Args)]
pub struct RuntimeArgs {
    /// Address of the gRPC server (mutual TLS only).
    #[arg(long, env = "KEYWARD_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Address of the plain HTTP server with /healthz, /readyz and /metrics.
    #[arg(long, env = "KEYWARD_HEALTH_LISTEN", default_value = "0.0.0.0:8080")]
    pub health_listen: SocketAddr,
    /// Directory with ca.crt (CA of client certificates), tls.crt and tls.key; reloaded when it changes.
    #[arg(long, env = "KEYWARD_TLS_DIR")]
    pub tls_dir: PathBuf,
    #[command(flatten)]
    pub log: LogArgs,
    /// How long in-flight calls may run after SIGTERM before the process exits anyway.
    #[arg(long, env = "KEYWARD_SHUTDOWN_TIMEOUT", default_value = "25s", value_parser = keyward_process::parse_duration)]
    pub shutdown_timeout: Duration,
    /// Client certificate names (DNS/URI SAN or common name) allowed to call, comma-separated:
    /// another certificate of the same CA is refused at the handshake.
    #[arg(
        long,
        env = "KEYWARD_ALLOWED_CLIENT_NAMES",
        value_delimiter = ',',
        default_value = crate::tls::DEFAULT_CLIENT_NAME
    )]
    pub allowed_client_names: Vec<String>,
    /// Networks a tenant's configuration may not reach, comma-separated (CIDRs or addresses;
    /// `own-addresses`: the process's own interface addresses; `default`: the default list, to
    /// add the cluster's Pod and Service networks to it): every address a server name a
    /// configuration writes resolves to is checked before connecting (Vault's server, a target
    /// cluster's URL, Keystone and its catalog, a webhook's URL), an IPv6 form of an IPv4
    /// address (mapped, compatible, NAT64) as that address too. The operator's configurations
    /// (a ClusterProvider with authenticationScope ProviderNamespace, a ClusterSecretStore) may
    /// reach any. Empty: no check.
    #[arg(
        long,
        env = "KEYWARD_TENANT_DENIED_NETWORKS",
        default_value = crate::netguard::DEFAULT_TENANT_DENIED_NETWORKS,
        value_parser = crate::netguard::DeniedNetworks::parse
    )]
    pub tenant_denied_networks: crate::netguard::DeniedNetworks,
    /// Namespaces whose own configurations (SecretStores, Providers and their configuration
    /// objects) may use this provider's identity (its ServiceAccount token, its cloud credentials
    /// chain), comma-separated, or `*` for every namespace, as upstream lets every SecretStore.
    /// Empty (the default): only the operator's configurations may. Give the webhook the same list.
    #[arg(
        long,
        env = "KEYWARD_PROVIDER_IDENTITY_NAMESPACES",
        default_value = "",
        value_parser = keyward_crds::rules::ProviderIdentityNamespaces::parse
    )]
    pub provider_identity_namespaces: keyward_crds::rules::ProviderIdentityNamespaces,
    /// Watch Secrets and ConfigMaps (metadata only), so a cached store client sees at once that
    /// one it was built from changed; needs `list` and `watch` on them. Off: such a change is
    /// seen by a GET of the object within two minutes.
    #[arg(long, env = "KEYWARD_WATCH_REFERENCED_OBJECTS")]
    pub watch_referenced_objects: bool,
}

impl RuntimeArgs {
    /// The server options these flags describe; fails when no client name is allowed.
    pub fn server_options(&self) -> Result<ServerOptions, crate::tls::TlsError> {
        Ok(ServerOptions {
            listen: self.listen,
            health_listen: self.health_listen,
            tls_dir: self.tls_dir.clone(),
            shutdown_timeout: self.shutdown_timeout,
            allowed_clients: crate::tls::AllowedClients::new(self.allowed_client_names.clone())?,
            provider_identity: self.provider_identity_namespaces.clone(),
            ..ServerOptions::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use keyward_process::LogFormat;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        rt: RuntimeArgs,
    }

    #[test]
    fn defaults_and_flags() {
        let cli = Cli::try_parse_from(["p", "--tls-dir", "/tls"]).expect("parse");
        assert_eq!(cli.rt.listen.to_string(), "0.0.0.0:8443");
        assert_eq!(cli.rt.health_listen.to_string(), "0.0.0.0:8080");
        assert_eq!(cli.rt.log.log_format, LogFormat::Json);
        assert_eq!(cli.rt.shutdown_timeout, Duration::from_secs(25));
        assert_eq!(cli.rt.allowed_client_names, ["keyward-reconciler"]);
        let cli = Cli::try_parse_from([
            "p",
            "--tls-dir",
            "/tls",
            "--listen",
            "127.0.0.1:9443",
            "--log-format",
            "text",
            "--shutdown-timeout",
            "500ms",
            "--allowed-client-names",
            "keyward-reconciler,spiffe://cluster.local/ns/keyward/sa/keyward-reconciler",
        ])
        .expect("parse");
        assert_eq!(cli.rt.allowed_client_names.len(), 2);
        assert!(cli.rt.server_options().is_ok());
        assert_eq!(cli.rt.listen.to_string(), "127.0.0.1:9443");
        assert_eq!(cli.rt.log.log_format, LogFormat::Text);
        assert_eq!(cli.rt.shutdown_timeout, Duration::from_millis(500));
        let cli = Cli::try_parse_from(["p", "--tls-dir", "/t", "--allowed-client-names", " , "]).expect("parse");
        assert!(cli.rt.server_options().is_err(), "no allowed client is a startup error");
        assert!(Cli::try_parse_from(["p"]).is_err(), "--tls-dir is required");
        assert!(Cli::try_parse_from(["p", "--tls-dir", "/t", "--shutdown-timeout", "soon"]).is_err());
    }
}
