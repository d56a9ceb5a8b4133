//! End to end: ExternalSecrets render their target Secret with templates (inline, from a
//! ConfigMap, with a Secret type), through the reconciler and the Fake provider over mTLS.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use keyward_crds::{ExternalSecret, Provider};
use keyward_e2e::with_temp_namespace;
use keyward_provider_fake::api::Fake;
use kube::Api;
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

fn external_secret(name: &str, ns: &str, template: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "external-secrets.io/v1",
        "kind": "ExternalSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {
            "refreshInterval": "1s",
            "secretStoreRef": {"name": "fake", "kind": "Provider"},
            "target": {"name": name, "template": template},
            "data": [
                {"secretKey": "user", "remoteRef": {"key": "db", "property": "user"}},
                {"secretKey": "password", "remoteRef": {"key": "db", "property": "password"}},
                {"secretKey": "host", "remoteRef": {"key": "registry"}},
            ],
        },
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn templates_render_connection_strings_docker_configs_and_config_files() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        let fakes: Api<Fake> = Api::namespaced(client.clone(), &ns);
        apply(&fakes, fake_config("data", &[("db", r#"{"user":"app","password":"pw"}"#), ("registry", "reg.example")]))
            .await;
        let providers: Api<Provider> = Api::namespaced(client.clone(), &ns);
        apply(&providers, provider("fake", &ns, &fake.address(), "data")).await;
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        apply(
            &config_maps,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-templates"},
                   "data": {"app.yaml": "database:\n  user: {{ .user }}\n  password: {{ .password | quote }}\n"}}),
        )
        .await;
        let _reconciler = Reconciler::start(&ns, &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        apply(
            &ess,
            external_secret(
                "connection",
                &ns,
                json!({"metadata": {"labels": {"app": "{{ .user }}"}},
                       "data": {"url": "postgres://{{ .user }}:{{ .password }}@db:5432/app"}}),
            ),
        )
        .await;
        apply(
            &ess,
            external_secret(
                "registry",
                &ns,
                json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson":
                    "{\"auths\":{\"{{ .host }}\":{\"auth\":\"{{ printf \"%s:%s\" .user .password | b64enc }}\"}}}"}}),
            ),
        )
        .await;
        apply(
            &ess,
            external_secret(
                "config-file",
                &ns,
                json!({"mergePolicy": "Merge", "templateFrom": [{"configMap": {"name": "app-templates", "items": [{"key": "app.yaml"}]}}]}),
            ),
        )
        .await;
        apply(&ess, external_secret("broken", &ns, json!({"data": {"x": "{{ .nope }}"}}))).await;

        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let get = |name: &'static str| {
            let secrets = secrets.clone();
            async move {
                eventually(&format!("Secret {name}"), WAIT, || async { secrets.get_opt(name).await.ok()? }).await
            }
        };
        let connection = get("connection").await;
        assert_eq!(value(&connection, "url").as_deref(), Some("postgres://app:pw@db:5432/app"));
        assert_eq!(connection.data.as_ref().unwrap().len(), 1, "Replace keeps only rendered keys");
        assert_eq!(connection.metadata.labels.as_ref().unwrap()["app"], "app");

        let registry = get("registry").await;
        assert_eq!(registry.type_.as_deref(), Some("kubernetes.io/dockerconfigjson"));
        let docker: serde_json::Value = serde_json::from_str(&value(&registry, ".dockerconfigjson").unwrap()).unwrap();
        assert_eq!(docker["auths"]["reg.example"]["auth"], "YXBwOnB3", "base64 of app:pw");

        // valuesDecodingStrategy decodes what one templateFrom entry rendered.
        apply(
            &ess,
            external_secret(
                "decoded",
                &ns,
                json!({"templateFrom": [{"literal": "user: {{ .user | b64enc }}", "valuesDecodingStrategy": "Base64"},
                                        {"literal": "encoded: {{ .user | b64enc }}"}]}),
            ),
        )
        .await;
        let decoded = get("decoded").await;
        assert_eq!(value(&decoded, "user").as_deref(), Some("app"));
        assert_eq!(value(&decoded, "encoded").as_deref(), Some("YXBw"), "an entry without the strategy stays");

        let config = get("config-file").await;
        assert_eq!(value(&config, "app.yaml").as_deref(), Some("database:\n  user: app\n  password: \"pw\"\n"));
        assert_eq!(value(&config, "user").as_deref(), Some("app"), "Merge keeps fetched keys");

        // A missing key is an error that names the template, not an empty value.
        let es = eventually("broken reports the template error", WAIT, || async {
            let es = ess.get("broken").await.ok()?;
            let (status, _, message) = ready_of(&es.status?.conditions)?;
            (status == "False").then_some(message)
        })
        .await;
        assert!(es.contains("template") && es.contains("nope"), "{es}");
        assert!(secrets.get_opt("broken").await.unwrap().is_none(), "no partial Secret");

        // metadata.finalizers reach the Secret, and leave it again when the template drops them
        // (they are applied with the Secret, so the field is the reconciler's).
        let finalized = |finalizers: serde_json::Value| {
            external_secret("finalized", &ns, json!({"metadata": {"finalizers": finalizers}, "data": {"u": "{{ .user }}"}}))
        };
        apply(&ess, finalized(json!(["example.com/backup"]))).await;
        eventually("the finalizer is on the Secret", WAIT, || async {
            let s = secrets.get_opt("finalized").await.ok()??;
            (s.metadata.finalizers? == ["example.com/backup"]).then_some(())
        })
        .await;
        apply(&ess, finalized(json!([]))).await;
        eventually("the finalizer is gone from the Secret", WAIT, || async {
            let s = secrets.get_opt("finalized").await.ok()??;
            s.metadata.finalizers.unwrap_or_default().is_empty().then_some(())
        })
        .await;
    })
    .await;
}
