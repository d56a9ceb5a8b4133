//! The Kubernetes provider against the conformance suite: its store is a namespace of the local
//! control plane's API server, reached with a ServiceAccount token over `server.url`.

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use keyward_e2e::{control_plane, with_temp_namespace};
use keyward_proto::v1::{ProviderReference, SecretStoreCapabilities};
use keyward_provider_kubernetes::api::Kubernetes;
use keyward_provider_runtime::testkit::conformance::{self, Case, ConformanceTarget, Hostile, Pointed, Properties};
use keyward_provider_runtime::testkit::{RunningProvider, TestkitError, launch, provider_ref};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::common;

const CONFIG: &str = "conformance";

struct KubernetesTarget {
    client: Client,
    /// Where the configurations and the token live, and where requests come from.
    ns: String,
    /// The store: where the remote Secrets live.
    remote: String,
}

/// Creates or updates `obj` (server-side apply).
async fn apply<K>(api: &Api<K>, obj: serde_json::Value) -> Result<(), String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    api.patch(&name, &PatchParams::apply("keyward-conformance").force(), &Patch::Apply(&obj))
        .await
        .map(drop)
        .map_err(|e| format!("apply {name}: {e}"))
}

impl KubernetesTarget {
    /// ServiceAccounts `reader` (may read and write Secrets in `remote`, its token in the Secret
    /// `reader-token`) and `nobody` (may do nothing), and the working configuration.
    async fn setup(&self) -> Result<(), String> {
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &self.ns);
        for name in ["reader", "nobody"] {
            apply(&sas, json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})).await?;
        }
        let role = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "secrets-rw"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"],
                       "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}],
        });
        apply(&Api::<Role>::namespaced(self.client.clone(), &self.remote), role).await?;
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "secrets-rw"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "secrets-rw"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": self.ns}],
        });
        apply(&Api::<RoleBinding>::namespaced(self.client.clone(), &self.remote), binding).await?;
        let request = TokenRequest {
            spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() }),
            ..Default::default()
        };
        let issued = sas
            .create_token_request("reader", &PostParams::default(), &request)
            .await
            .map_err(|e| format!("token request: {e}"))?;
        let token = issued.status.and_then(|s| s.token).ok_or("no token issued")?;
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "reader-token"},
                            "stringData": {"token": token}});
        apply(&Api::<Secret>::namespaced(self.client.clone(), &self.ns), secret).await?;
        let cp = control_plane().await;
        let ca = std::fs::read_to_string(cp.ca_files().0).map_err(|e| format!("read the control plane CA: {e}"))?;
        let token_auth = json!({"token": {"bearerToken": {"name": "reader-token", "key": "token"}}});
        self.config(CONFIG, &cp.server_url(), &ca, token_auth).await
    }

    /// A Kubernetes configuration reaching `url` (trusting `ca_pem`) with `auth`.
    async fn config(&self, name: &str, url: &str, ca_pem: &str, auth: serde_json::Value) -> Result<(), String> {
        let obj = json!({
            "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes",
            "metadata": {"name": name},
            "spec": {
                "remoteNamespace": self.remote,
                "auth": auth,
                "server": {"url": url, "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem)},
            },
        });
        apply(&Api::<Kubernetes>::namespaced(self.client.clone(), &self.ns), obj).await
    }

    fn remote_secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.remote)
    }
}

#[tonic::async_trait]
impl ConformanceTarget for KubernetesTarget {
    fn name(&self) -> String {
        "Kubernetes".into()
    }

    async fn start(&self) -> Result<RunningProvider, TestkitError> {
        launch("keyward-provider-kubernetes", &[]).await
    }

    fn provider_ref(&self) -> ProviderReference {
        provider_ref("Kubernetes", CONFIG, "", "Provider")
    }

    fn source_namespace(&self) -> String {
        self.ns.clone()
    }

    fn key(&self, name: &str) -> String {
        // Secret names have no folders.
        name.replace('/', "-")
    }

    fn find_path(&self) -> Option<String> {
        Some("find-".into())
    }

    async fn seed(&self, key: &str, properties: &Properties) -> Result<(), String> {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": key}, "stringData": properties});
        apply(&self.remote_secrets(), secret).await
    }

    async fn read(&self, key: &str) -> Result<Option<Properties>, String> {
        let secret = self.remote_secrets().get_opt(key).await.map_err(|e| e.to_string())?;
        Ok(secret.map(|s| {
            let data = s.data.unwrap_or_default();
            data.into_iter().map(|(k, ByteString(v))| (k, String::from_utf8_lossy(&v).into_owned())).collect()
        }))
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }

    async fn invalid_config(&self) -> Result<(ProviderReference, String), String> {
        // Authenticates, but may not read Secrets in remoteNamespace.
        let cp = control_plane().await;
        let ca = std::fs::read_to_string(cp.ca_files().0).map_err(|e| format!("read the control plane CA: {e}"))?;
        self.config("nobody", &cp.server_url(), &ca, json!({"serviceAccount": {"name": "nobody"}})).await?;
        Ok((provider_ref("Kubernetes", "nobody", "", "Provider"), "cannot get or list Secrets".into()))
    }

    fn not_applicable(&self) -> Vec<(Case, &'static str)> {
        vec![(
            Case::FindPathTraversal,
            "find.path filters Secret names after a list and never reaches the API server (it is not checked with \
             keys::check_key)",
        )]
    }

    async fn point_at(&self, server: &Hostile) -> Result<Pointed, String> {
        let name = format!("flood-{}", server.https_url.rsplit(':').next().unwrap_or_default());
        let token_auth = json!({"token": {"bearerToken": {"name": "reader-token", "key": "token"}}});
        self.config(&name, &server.https_url, &server.ca_pem, token_auth).await?;
        Ok(Pointed::Config(provider_ref("Kubernetes", &name, "", "Provider")))
    }
}

#[tokio::test]
async fn the_kubernetes_provider_conforms() {
    let _guard = common::exclusive().await;
    with_temp_namespace(&[], |client, ns| async move {
        with_temp_namespace(&[], |_, remote| async move {
            let target = KubernetesTarget { client, ns, remote };
            if let Err(e) = target.setup().await {
                panic!("setting up the Kubernetes store: {e}");
            }
            match conformance::run_all(&target).await {
                Ok(report) => println!("{report}"),
                Err(report) => panic!("{report}"),
            }
        })
        .await
    })
    .await;
}
