//! Runs the gRPC server (mTLS), the health/metrics HTTP server and the certificate reloader
//! until shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use keyward_process::{Health, Readiness};
use keyward_proto::v1::generator_provider_server::GeneratorProviderServer;
use keyward_proto::v1::secret_store_provider_server::SecretStoreProviderServer;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;

use crate::metrics::Metrics;
use crate::provider::Provider;
use crate::service::ProviderService;
use crate::tls::{AllowedClients, ReloadingConfig, TlsError};

/// Where and how to serve.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// gRPC (mTLS) address.
    pub listen: SocketAddr,
    /// Plain HTTP address for `/healthz`, `/readyz`, `/metrics`.
    pub health_listen: SocketAddr,
    /// Directory with `ca.crt`, `tls.crt`, `tls.key`.
    pub tls_dir: PathBuf,
    /// How often the TLS directory is checked for changes.
    pub reload_interval: Duration,
    /// How long a TLS handshake may take.
    pub handshake_timeout: Duration,
    /// How long in-flight calls may run after shutdown starts.
    pub shutdown_timeout: Duration,
    /// Client certificate names allowed to call (the reconciler's by default).
    pub allowed_clients: AllowedClients,
    /// Namespaces whose own configurations may use the provider's identity (none by default).
    pub provider_identity: keyward_crds::rules::ProviderIdentityNamespaces,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            health_listen: SocketAddr::from(([0, 0, 0, 0], 8080)),
            tls_dir: PathBuf::new(),
            reload_interval: Duration::from_secs(1),
            handshake_timeout: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(25),
            allowed_clients: AllowedClients::default(),
            provider_identity: Default::default(),
        }
    }
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The TLS material is unusable.
    #[error("TLS material in the TLS directory: {0}")]
    Tls(#[from] TlsError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
    /// gRPC reflection could not be built.
    #[error("gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The gRPC server failed.
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The HTTP server failed.
    #[error("health server: {0}")]
    Health(std::io::Error),
}

/// `/healthz`, `/readyz` (serving, and the provider says it is ready) and `/metrics`.
fn health<P: Provider>(provider: Arc<P>, metrics: Metrics, serving: Arc<AtomicBool>) -> Health {
    Health::new(
        move || {
            let (provider, serving) = (provider.clone(), serving.clone());
            async move {
                if !serving.load(Ordering::SeqCst) {
                    return Readiness::NotReady("not serving".into());
                }
                Readiness::when(provider.ready().await, "provider not ready")
            }
        },
        move || Ok(metrics.encode()),
    )
}

/// Accepts TCP connections and completes TLS handshakes with the configuration current at
/// that moment; finished handshakes go to the gRPC server.
fn spawn_acceptor(
    listener: TcpListener,
    tls: ReloadingConfig,
    handshake_timeout: Duration,
) -> (ReceiverStream<Result<TlsStream<TcpStream>, std::io::Error>>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let task = tokio::spawn(async move {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
            let tx = tx.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => {
                        let _ = tx.send(Ok(stream)).await;
                    }
                    Ok(Err(e)) => tracing::info!(peer = %peer, error = %e, "TLS handshake refused"),
                    Err(_) => tracing::info!(peer = %peer, "TLS handshake timed out"),
                }
            });
        }
    });
    (ReceiverStream::new(rx), task)
}

/// Where `/healthz`, `/readyz` and `/metrics` are answered.
pub(crate) enum Ops<'a> {
    /// A server of its own on `ServerOptions::health_listen` (tests and benchmarks).
    Own,
    /// The process runtime's admin server (a provider binary).
    Admin(&'a keyward_process::Admin),
}

/// Serves `provider` until `shutdown` resolves, then stops accepting, reports NOT_SERVING and
/// lets in-flight calls finish (up to `shutdown_timeout`); `/healthz`, `/readyz` and `/metrics`
/// on a server of its own at `health_listen`. A provider binary starts through
/// [`crate::main`] instead, which answers them on the process runtime's admin server.
pub async fn serve<P: Provider>(
    provider: P,
    options: ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RuntimeError> {
    serve_with(provider, options, shutdown, Ops::Own).await
}

pub(crate) async fn serve_with<P: Provider>(
    provider: P,
    options: ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ops: Ops<'_>,
) -> Result<(), RuntimeError> {
    let provider = Arc::new(provider);
    let metrics = Metrics::new();
    let tls = ReloadingConfig::load(&options.tls_dir, options.allowed_clients.clone())?;
    let watch = tls.spawn_watch(options.reload_interval);

    let grpc_listener = TcpListener::bind(options.listen)
        .await
        .map_err(|source| RuntimeError::Bind { addr: options.listen, source })?;
    let grpc_addr = grpc_listener.local_addr().unwrap_or(options.listen);

    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter.set_serving::<SecretStoreProviderServer<ProviderService<P>>>().await;
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(keyward_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(keyward_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;

    let serving = Arc::new(AtomicBool::new(true));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);

    let ops_health = health(provider.clone(), metrics.clone(), serving.clone());
    let (http, http_addr) = match ops {
        Ops::Own => {
            let http_listener = TcpListener::bind(options.health_listen)
                .await
                .map_err(|source| RuntimeError::Bind { addr: options.health_listen, source })?;
            let http_addr = http_listener.local_addr().unwrap_or(options.health_listen);
            let mut http_stop = stop_rx.clone();
            let http = tokio::spawn(keyward_process::health::serve(http_listener, ops_health.router(), async move {
                let _ = http_stop.wait_for(|s| *s).await;
            }));
            (Some(http), Some(http_addr))
        }
        Ops::Admin(admin) => {
            admin.serve(ops_health);
            (None, admin.local_addr())
        }
    };

    let (incoming, acceptor) = spawn_acceptor(grpc_listener, tls, options.handshake_timeout);
    let mut grpc_stop = stop_rx.clone();
    let service = ProviderService::new(provider, metrics).with_provider_identity(options.provider_identity.clone());
    // Every provider serves GeneratorProvider: one that generates nothing answers UNIMPLEMENTED
    // from the trait's default, with the same logs and metrics as its other calls.
    let generators = GeneratorProviderServer::new(service.clone());
    let service = SecretStoreProviderServer::new(service);
    let grpc = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(service)
            .add_service(generators)
            .serve_with_incoming_shutdown(incoming, async move {
                let _ = grpc_stop.wait_for(|s| *s).await;
            }),
    );
    tracing::info!(
        grpc = %grpc_addr,
        http = ?http_addr,
        tls_dir = %options.tls_dir.display(),
        allowed_clients = ?options.allowed_clients.names(),
        "provider serving"
    );

    let mut grpc = grpc;
    let early = tokio::select! {
        _ = shutdown => None,
        r = &mut grpc => Some(r),
    };
    if let Some(r) = early {
        acceptor.abort();
        watch.abort();
        let _ = stop_tx.send(true);
        return match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.into()),
            Err(e) => Err(RuntimeError::Health(std::io::Error::other(e))),
        };
    }

    tracing::info!(timeout = ?options.shutdown_timeout, "shutting down: letting in-flight calls finish");
    serving.store(false, Ordering::SeqCst);
    health_reporter.set_not_serving::<SecretStoreProviderServer<ProviderService<P>>>().await;
    acceptor.abort();
    let _ = stop_tx.send(true);
    let grpc_result = match tokio::time::timeout(options.shutdown_timeout, grpc).await {
        Ok(Ok(r)) => r.map_err(RuntimeError::from),
        Ok(Err(e)) => Err(RuntimeError::Health(std::io::Error::other(e))),
        Err(_) => {
            tracing::warn!("in-flight calls did not finish in time; exiting anyway");
            Ok(())
        }
    };
    watch.abort();
    if let Some(http) = http
        && let Ok(Ok(Err(e))) = tokio::time::timeout(Duration::from_secs(2), http).await
    {
        tracing::warn!(error = %e, "health server stopped with an error");
    }
    tracing::info!("stopped");
    grpc_result
}
