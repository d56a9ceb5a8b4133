//! End to end: upstream's `openBao` and `crd` SecretStores. An `openBao` store is served by the
//! Vault provider process against `vault server -dev` (OpenBao speaks Vault's API; no OpenBao
//! server can be built from the Go module proxy, see docs/providers/vault.md). A `crd` store is
//! served by the Kubernetes provider process against the API server: a ConfigMap field and a
//! custom resource's field are synced with the store's own ServiceAccount, a read the whitelist
//! does not allow is refused, and a SecretStore naming an object of another namespace is refused
//! although its ServiceAccount may read it there (the tenant boundary, not RBAC, refuses it).

use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use keyward_crds::{ExternalSecret, SecretStore};
use keyward_e2e::stores::VaultDev;
use keyward_e2e::{control_plane, with_temp_namespace};
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);

fn store(ns: &str, name: &str, provider: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
           "metadata": {"name": name, "labels": {CLASS_LABEL: ns}}, "spec": {"provider": provider}})
}

fn external_secret(ns: &str, name: &str, store: &str, key: &str, property: &str) -> serde_json::Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
           "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
           "spec": {"refreshInterval": "1h", "secretStoreRef": {"kind": "SecretStore", "name": store},
                    "target": {"name": name},
                    "data": [{"secretKey": "value", "remoteRef": {"key": key, "property": property}}]}})
}

/// Waits for the Ready condition of ExternalSecret `name` with `status`; returns its message.
async fn wait_ready(api: &Api<ExternalSecret>, name: &str, status: &str) -> String {
    eventually(&format!("ExternalSecret {name} Ready={status}"), WAIT, || async {
        let es = api.get(name).await.ok()?;
        let (s, _, message) = ready_of(&es.status.as_ref()?.conditions)?;
        (s == status).then_some(message)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_open_bao_store_syncs_through_the_vault_provider() {
    let _turn = shared().await;
    let vault = VaultDev::start();
    vault.cli(&["kv", "put", "secret/db", "user=bao-user"]);
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let provider = ProviderProcess::start("keyward-provider-vault", pki.provider_dir(), None).await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        apply(
            &secrets,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bao-token"},
                   "stringData": {"token": vault.root_token()}}),
        )
        .await;
        // The block as upstream documents it.
        let bao = json!({"openBao": {"server": vault.address(), "path": "secret", "version": "v2",
                                     "auth": {"tokenSecretRef": {"name": "bao-token", "key": "token"}}}});
        apply(&Api::<SecretStore>::namespaced(client.clone(), &ns), store(&ns, "bao", bao)).await;
        let _reconciler = Reconciler::start_with_stores(&ns, &[("vault", &provider)], &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        apply(&ess, external_secret(&ns, "from-bao", "bao", "db", "user")).await;
        wait_for_value(&secrets, "from-bao", "value", "bao-user", WAIT).await;
        wait_ready(&ess, "from-bao", "True").await;
    })
    .await;
}

/// The `Widget` kind of group `crdstore.keyward.dev`, installed once for the binary.
async fn install_widget_crd(client: &Client) -> ApiResource {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.crdstore.keyward.dev"},
        "spec": {"group": "crdstore.keyward.dev", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}});
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("keyward-e2e-crd-store").force();
    crds.patch("widgets.crdstore.keyward.dev", &params, &Patch::Apply(&crd)).await.unwrap();
    eventually("the Widget CRD is established", WAIT, || async {
        let c = crds.get("widgets.crdstore.keyward.dev").await.ok()?;
        let conditions = c.status?.conditions?;
        conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
    })
    .await;
    ApiResource::from_gvk(&GroupVersionKind::gvk("crdstore.keyward.dev", "v1alpha1", "Widget"))
}

/// Lets ServiceAccount `sa_ns/sa` get and list ConfigMaps and Widgets in `target`.
async fn grant_reads(client: &Client, target: &str, sa_ns: &str, sa: &str) {
    let name = format!("crd-reader-{sa_ns}");
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
                  {"apiGroups": ["crdstore.keyward.dev"], "resources": ["widgets"], "verbs": ["get", "list"]}]});
    apply(&Api::<Role>::namespaced(client.clone(), target), role).await;
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": sa_ns}]});
    apply(&Api::<RoleBinding>::namespaced(client.clone(), target), binding).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crd_store_reads_config_map_and_custom_resource_fields_of_its_own_namespace() {
    let _turn = shared().await;
    with_temp_namespace(&[], |_client, other| async move {
        with_temp_namespace(&[], |client, ns| async move {
            let widgets = install_widget_crd(&client).await;
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let provider = ProviderProcess::start("keyward-provider-kubernetes", pki.provider_dir(), None).await;

            let sa = ServiceAccount { metadata: kube::api::ObjectMeta { name: Some("crd-reader".into()), ..Default::default() }, ..Default::default() };
            apply(&Api::<ServiceAccount>::namespaced(client.clone(), &ns), serde_json::to_value(sa).unwrap()).await;
            // The store's ServiceAccount may read both namespaces: only Keyward's boundary keeps
            // a SecretStore in its own.
            for target in [&ns, &other] {
                grant_reads(&client, target, &ns, "crd-reader").await;
                apply(
                    &Api::<ConfigMap>::namespaced(client.clone(), target),
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-config"},
                           "data": {"url": format!("https://db.{target}")}}),
                )
                .await;
            }
            apply(
                &Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &widgets),
                json!({"apiVersion": "crdstore.keyward.dev/v1alpha1", "kind": "Widget", "metadata": {"name": "app-backend"},
                       "spec": {"password": "hunter2", "replicas": 3}}),
            )
            .await;

            let ca = std::fs::read(control_plane().await.ca_files().0).unwrap();
            let server = json!({"url": control_plane().await.server_url(),
                                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca)});
            let auth = json!({"serviceAccount": {"name": "crd-reader"}});
            let stores: Api<SecretStore> = Api::namespaced(client.clone(), &ns);
            apply(&stores, store(&ns, "config-maps", json!({"crd": {"server": server, "auth": auth,
                "resource": {"group": "", "version": "v1", "kind": "ConfigMap"}}}))).await;
            apply(&stores, store(&ns, "widgets", json!({"crd": {"server": server, "auth": auth,
                "resource": {"group": "crdstore.keyward.dev", "version": "v1alpha1", "kind": "Widget"},
                "whitelist": {"rules": [{"name": "^app-", "properties": ["^spec\\.password$", "^spec\\.replicas$"]}]}}}))).await;
            let _reconciler = Reconciler::start_with_stores(&ns, &[("kubernetes", &provider)], &[]).await;

            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            apply(&ess, external_secret(&ns, "from-config-map", "config-maps", "app-config", "data.url")).await;
            apply(&ess, external_secret(&ns, "from-widget", "widgets", "app-backend", "spec.password")).await;
            apply(&ess, external_secret(&ns, "replicas", "widgets", "app-backend", "spec.replicas")).await;
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            wait_for_value(&secrets, "from-config-map", "value", &format!("https://db.{ns}"), WAIT).await;
            wait_for_value(&secrets, "from-widget", "value", "hunter2", WAIT).await;
            wait_for_value(&secrets, "replicas", "value", "3", WAIT).await;

            // Another namespace's ConfigMap, which the ServiceAccount could read, is refused.
            apply(&ess, external_secret(&ns, "across", "config-maps", &format!("{other}/app-config"), "data.url")).await;
            let message = wait_ready(&ess, "across", "False").await;
            assert!(message.contains("names a namespace") && message.contains("own namespace"), "{message}");
            assert!(secrets.get_opt("across").await.unwrap().is_none(), "nothing of {other} is written");
            // A property no whitelist rule allows is refused.
            apply(&ess, external_secret(&ns, "not-allowed", "widgets", "app-backend", "metadata.uid")).await;
            let message = wait_ready(&ess, "not-allowed", "False").await;
            assert!(message.contains("no rule of the store's whitelist allows this read"), "{message}");
        })
        .await;
    })
    .await;
}
