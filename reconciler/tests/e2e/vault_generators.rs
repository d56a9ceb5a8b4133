//! End to end: the VaultDynamicSecret generator. An ExternalSecret's `dataFrom` generatorRef
//! names a VaultDynamicSecret (directly and through a ClusterGenerator); the reconciler sends
//! it to the Vault provider process, which issues a certificate from the PKI engine of a real
//! `vault server -dev`, and the target Secret holds it; a PushSecret pushes one to Vault's KV
//! store. A generator naming another namespace's
//! Secret reports Ready=False; upstream's VaultDynamicSecret examples apply unchanged.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::ExternalSecret;
use keyward_e2e::stores::VaultDev;
use keyward_e2e::with_temp_namespace;
use kube::Api;
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn a_vault_dynamic_secret_puts_a_certificate_in_the_target_secret() {
    let _turn = shared().await;
    let v = VaultDev::start();
    v.enable_pki();
    v.policy(
        "issue",
        r#"path "pki/issue/web" { capabilities = ["create", "update"] }
           path "secret/*" { capabilities = ["create", "read", "update", "list"] }"#,
    );
    let token = v.json(&["token", "create"], &["-policy=issue"])["auth"]["client_token"].as_str().unwrap().to_string();
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let provider = ProviderProcess::start("keyward-provider-vault", pki.provider_dir(), None).await;
        let cluster_generator = format!("{ns}-certs");
        let _cleanup = ClusterGenerators(vec![cluster_generator.clone()]);
        kubectl_apply(
            &ns,
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "vault-token"},
                    "stringData": {"token": token}}),
        );
        let vault_provider = |secret_ns: Option<&str>| {
            let mut r = json!({"name": "vault-token", "key": "token"});
            if let Some(n) = secret_ns {
                r["namespace"] = json!(n);
            }
            json!({"server": v.address(), "auth": {"tokenSecretRef": r}})
        };
        let spec = |common_name: &str, secret_ns: Option<&str>| {
            json!({"method": "POST", "path": "pki/issue/web", "parameters": {"common_name": common_name},
                   "provider": vault_provider(secret_ns)})
        };
        let vds = |name: &str, spec: Value| {
            json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "VaultDynamicSecret",
                   "metadata": {"name": name}, "spec": spec})
        };
        kubectl_apply(&ns, &vds("cert", spec("a.example.com", None)));
        kubectl_apply(&ns, &vds("stolen", spec("b.example.com", Some("kube-system"))));
        kubectl_apply(
            &ns,
            &json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
                    "metadata": {"name": cluster_generator},
                    "spec": {"kind": "VaultDynamicSecret",
                             "generator": {"vaultDynamicSecretSpec": spec("c.example.com", None)},
                             "conditions": [{"namespaces": [ns]}]}}),
        );
        for doc in upstream_generator_example("generator-vault.yaml")
            .iter()
            .chain(&upstream_generator_example("generator-vault-example.yaml"))
        {
            let mut doc = doc.clone();
            if doc["kind"] == "ExternalSecret" {
                doc["metadata"]["labels"] = json!({CLASS_LABEL: ns});
            }
            kubectl_apply(&ns, &doc);
        }

        let _reconciler = Reconciler::start_with_stores(&ns, &[("vault", &provider)], &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        apply(&ess, generator_external_secret("cert", &ns, "VaultDynamicSecret", "cert")).await;
        apply(&ess, generator_external_secret("via-cluster", &ns, "ClusterGenerator", &cluster_generator)).await;
        apply(&ess, generator_external_secret("stolen", &ns, "VaultDynamicSecret", "stolen")).await;

        let cert = eventually("Secret cert holds a certificate", WAIT, || async {
            let s = secrets.get_opt("cert").await.ok()??;
            value(&s, "certificate")
        })
        .await;
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"), "{cert}");
        let s = secrets.get("cert").await.unwrap();
        assert!(value(&s, "private_key").unwrap().contains("PRIVATE KEY-----"));
        assert!(value(&s, "issuing_ca").unwrap().starts_with("-----BEGIN CERTIFICATE-----"));
        // A PushSecret's selector.generatorRef: the generated certificate is pushed to Vault's KV
        // store through a SecretStore served by the same provider, and kept in push-generated.
        kubectl_apply(
            &ns,
            &json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore", "metadata": {"name": "kv"},
                    "spec": {"provider": {"vault": {"server": v.address(), "path": "secret", "version": "v2",
                             "auth": {"tokenSecretRef": {"name": "vault-token", "key": "token"}}}}}}),
        );
        let pss: Api<keyward_crds::PushSecret> = Api::namespaced(client.clone(), &ns);
        apply(
            &pss,
            json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
                   "metadata": {"name": "push", "labels": {CLASS_LABEL: ns}},
                   "spec": {"refreshInterval": "1h", "secretStoreRefs": [{"name": "kv", "kind": "SecretStore"}],
                            "selector": {"generatorRef": {"apiVersion": "generators.external-secrets.io/v1alpha1",
                                                          "kind": "VaultDynamicSecret", "name": "cert"}},
                            "data": [{"match": {"secretKey": "certificate",
                                                "remoteRef": {"remoteKey": format!("{ns}/pushed"),
                                                              "property": "certificate"}}}]}}),
        )
        .await;
        let kept = eventually("push-generated holds a certificate", WAIT, || async {
            value(&secrets.get_opt("push-generated").await.ok()??, "certificate")
        })
        .await;
        let path = format!("secret/{ns}/pushed");
        let pushed = eventually("the certificate is in Vault", WAIT, || async {
            v.try_cli(&["kv", "get", "-field=certificate", &path]).ok().filter(|p| !p.is_empty())
        })
        .await;
        assert_eq!(pushed.trim(), kept.trim(), "the kept certificate is the pushed one");
        assert!(kept.starts_with("-----BEGIN CERTIFICATE-----"), "{kept}");
        // Through a ClusterGenerator: the same provider, the token read in the manifest's namespace.
        let via = eventually("Secret via-cluster holds a certificate", WAIT, || async {
            value(&secrets.get_opt("via-cluster").await.ok()??, "certificate")
        })
        .await;
        assert_ne!(via, cert, "each ExternalSecret gets its own certificate");
        // The tenant boundary: the generator's Secret in another namespace is refused.
        let message = wait_refused(&ess, "stolen", "kube-system", WAIT).await;
        assert!(message.contains("VaultDynamicSecret \"stolen\""), "{message}");
        assert!(secrets.get_opt("stolen").await.unwrap().is_none(), "nothing written");
        // Upstream's example applied unchanged: served (it is sent to the Vault provider),
        // and refused there because its in-cluster server is not this test's.
        let message = wait_refused(&ess, "pki-example-com", "VaultDynamicSecret \"pki-example\"", WAIT).await;
        assert!(!message.contains("not served"), "{message}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_that_does_not_generate_is_reported_not_a_panic() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        // The Fake provider generates nothing: the runtime's default answers UNIMPLEMENTED.
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        kubectl_apply(
            &ns,
            &json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "VaultDynamicSecret",
                    "metadata": {"name": "cert"},
                    "spec": {"path": "pki/issue/web", "provider": {"server": "http://127.0.0.1:1",
                             "auth": {"tokenSecretRef": {"name": "t", "key": "token"}}}}}),
        );
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        {
            // No Vault provider configured at all.
            let _reconciler = Reconciler::start(&ns, &[]).await;
            apply(&ess, generator_external_secret("unconfigured", &ns, "VaultDynamicSecret", "cert")).await;
            wait_refused(
                &ess,
                "unconfigured",
                "generated by the vault provider, which this reconciler is not configured",
                WAIT,
            )
            .await;
        }
        // The address given for Vault stores answers, but does not generate.
        let _reconciler = Reconciler::start_with_stores(&ns, &[("vault", &fake)], &[]).await;
        apply(&ess, generator_external_secret("unimplemented", &ns, "VaultDynamicSecret", "cert")).await;
        let message = wait_refused(&ess, "unimplemented", "does not generate VaultDynamicSecret values", WAIT).await;
        assert!(message.contains("VaultDynamicSecret \"cert\""), "{message}");
    })
    .await;
}
