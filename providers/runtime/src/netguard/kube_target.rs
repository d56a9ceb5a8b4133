//! A kube client for a cluster a configuration names: its names resolved and checked by the
//! guard before any connection, and every answer under the runtime's size and time caps.
//!
//! kube's own builder resolves names with the system resolver inside its connector, where no
//! check can reach, so this builds the same stack (base URI, credentials, headers) over a
//! connector whose resolver is [`DeniedNetworks::resolve`].

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use tower::ServiceBuilder;

use super::DeniedNetworks;
use crate::ProviderError;
use crate::body::{BoxError, LimitLayer, REQUEST_TIMEOUT};

/// The connector's resolver: every address of a name is checked, and only checked addresses
/// are connected to.
#[derive(Clone)]
struct GuardedNames(DeniedNetworks);

impl tower::Service<Name> for GuardedNames {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let denied = self.0.clone();
        Box::pin(async move { Ok(denied.resolve(name.as_str(), 0).await?.into_iter()) })
    }
}

/// How a cluster's requests count as store calls: the provider's name and the call name of a
/// request (method and path).
#[derive(Clone, Copy)]
pub struct CallNames {
    /// The provider's name on [`crate::store_calls`].
    pub provider: &'static str,
    /// The call a request is.
    pub call: fn(&http::Method, &str) -> &'static str,
}

/// Counts every request of the service below as a store call: an answer below 400, or 404, is
/// a successful call.
#[derive(Clone)]
struct Counted<S> {
    inner: S,
    names: CallNames,
}

impl<S, B, R> tower::Service<http::Request<B>> for Counted<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let CallNames { provider, call } = self.names;
        let call = call(req.method(), req.uri().path());
        let answer = self.inner.call(req);
        Box::pin(async move {
            let result = answer.await;
            let ok = matches!(&result, Ok(r) if r.status().as_u16() < 400 || r.status().as_u16() == 404);
            crate::store_calls::record(provider, call, ok);
            result
        })
    }
}

/// A client for `config`'s cluster that reaches only what `denied` allows (an IP literal is
/// refused here, a name when it is resolved), with `config`'s TLS and credentials, every
/// answer capped by [`LimitLayer`] and every request counted as `names` says. Refusals are
/// `PERMISSION_DENIED`; a configuration kube cannot use is `FAILED_PRECONDITION` naming `field`.
pub fn kube_client(
    config: kube::Config,
    denied: &DeniedNetworks,
    field: &str,
    names: CallNames,
) -> Result<kube::Client, ProviderError> {
    let bad = |e: kube::Error| ProviderError::BadConfig(format!("{field}: {e}"));
    if let Some(host) = config.cluster_url.host() {
        denied.check_host(host).map_err(|d| ProviderError::PermissionDenied(format!("{field}: {d}")))?;
    }
    let mut http = HttpConnector::new_with_resolver(GuardedNames(denied.clone()));
    http.enforce_http(false);
    http.set_connect_timeout(Some(REQUEST_TIMEOUT));
    let https = config.rustls_https_connector_with_connector(http).map_err(bad)?;
    let hyper = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer().map_err(bad)?)
        .layer(config.extra_headers_layer().map_err(bad)?)
        .layer(LimitLayer::default())
        .service(Counted { inner: hyper, names });
    Ok(kube::Client::new(service, config.default_namespace))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netguard::DEFAULT_TENANT_DENIED_NETWORKS;

    fn config(url: &str) -> kube::Config {
        kube::Config::new(url.parse().expect("uri"))
    }

    const NAMES: CallNames = CallNames { provider: "Test/Cluster", call: |_, _| "Version" };

    #[tokio::test]
    async fn literals_are_refused_when_built_and_names_when_resolved() {
        crate::install_crypto_provider();
        let denied = DeniedNetworks::parse(DEFAULT_TENANT_DENIED_NETWORKS).expect("default");
        let Err(e) = kube_client(config("https://169.254.169.254"), &denied, "spec.server.url", NAMES) else {
            panic!("a metadata literal must be refused");
        };
        assert!(
            matches!(&e, ProviderError::PermissionDenied(m) if m.contains("spec.server.url: 169.254.169.254")),
            "{e}"
        );
        assert!(kube_client(config("https://[::1]:6443"), &denied, "f", NAMES).is_err());

        // A name is checked when the client connects: localhost resolves to loopback.
        let client = kube_client(config("https://localhost:1"), &denied, "f", NAMES).expect("built");
        let err = client.apiserver_version().await.expect_err("refused");
        assert!(super::super::denied_in(&err).is_some(), "the guard refused it: {err}");

        // Nothing denied: the same name is connected to (and nothing listens there).
        let client = kube_client(config("https://localhost:1"), &DeniedNetworks::none(), "f", NAMES).expect("built");
        let err = client.apiserver_version().await.expect_err("nothing listens");
        assert!(super::super::denied_in(&err).is_none(), "{err}");
        assert_eq!(crate::store_calls::count("Test/Cluster", "Version", false), 2, "both attempts are counted");
    }
}
