//! Keyward's Helm chart against the local control plane: `helm lint`, the rendered templates of
//! both certificate modes through a server-side dry run, and `helm install` in both modes.
//!
//! The local control plane has no kubelet and no scheduler, so the chart's Pods never run: the
//! install tests check the API objects the chart creates. To show the self-managed mode working
//! end to end anyway, one test runs `keyward-certs` locally with the environment of the chart's
//! certs Deployment and as its ServiceAccount (impersonated), and watches it fill the Secrets
//! and the caBundle of the installed webhook configurations.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRole;
use keyward_chart_tests::installed::kubectl_input;
use keyward_chart_tests::{
    chart_dir, helm, helm_install, helm_uninstall, install_cert_manager_crds, run, run_fails, test_values, write_values,
};
use keyward_e2e::{control_plane, spawn_logged, with_temp_namespace, workspace_binary};
use kube::{Api, Client};

#[path = "chart/monitoring.rs"]
mod monitoring;

/// The objects of a rendered chart.
fn objects(rendered: &str) -> Vec<serde_json::Value> {
    rendered
        .split("\n---")
        .filter_map(|d| serde_yaml::from_str::<serde_json::Value>(d).ok())
        .filter(|d| d.is_object())
        .collect()
}

/// `helm template kw` of the chart in namespace `keyward` with `--set` pairs (no cluster needed).
fn render(sets: &[&str]) -> Vec<serde_json::Value> {
    let mut cmd = helm(Path::new("/nonexistent"));
    cmd.args(["template", "kw"]).arg(chart_dir()).args(["-n", "keyward"]);
    for s in sets {
        cmd.args(["--set", s]);
    }
    objects(&run(cmd))
}

fn find<'a>(objects: &'a [serde_json::Value], kind: &str, name: &str) -> &'a serde_json::Value {
    objects
        .iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name} not rendered"))
}

fn template(kubeconfig: &Path, release: &str, ns: &str, values: &Path, extra: &[&str]) -> String {
    let mut cmd = helm(kubeconfig);
    cmd.args(["template", release]).arg(chart_dir()).args(["-n", ns, "-f"]).arg(values).args(extra);
    run(cmd)
}

#[test]
fn helm_lint_passes_in_both_modes_and_the_schema_refuses_bad_values() {
    let kubeconfig = Path::new("/nonexistent");
    let mut lint = helm(kubeconfig);
    lint.args(["lint", "--strict"]).arg(chart_dir());
    run(lint);
    let mut lint = helm(kubeconfig);
    lint.args(["lint", "--strict"]).arg(chart_dir()).args([
        "--set",
        "certManager.enabled=true",
        "--set",
        "metrics.serviceMonitor.enabled=true",
    ]);
    run(lint);
    // The CRDs are templates: installed and upgraded with the release, kept on uninstall.
    let crd_count = |extra: &[&str]| {
        let mut cmd = helm(kubeconfig);
        cmd.args(["template", "kw"]).arg(chart_dir()).args(extra);
        let out = run(cmd);
        let crds = out.matches("kind: CustomResourceDefinition").count();
        (crds, out.matches("helm.sh/resource-policy: keep").count())
    };
    let all = std::fs::read_dir(chart_dir().join("templates/crds"))
        .expect("crds")
        .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "yaml")))
        .count();
    assert!(all >= 6, "the chart carries Keyward's CRDs");
    assert_eq!(crd_count(&[]), (all, all), "every CRD, each kept on uninstall");
    assert_eq!(crd_count(&["--set", "crds.keep=false"]), (all, 0));
    assert_eq!(crd_count(&["--set", "crds.install=false"]), (0, 0));
    for (bad, message) in [
        ("webhook.pods.failurePolicy=Sometimes", "failurePolicy"),
        ("webhook.replicas=0", "replicas"),
        ("certs.leafValidity=soon", "leafValidity"),
        ("unknownKey=1", "unknownKey"),
        ("networkPolicy.enabled=maybe", "networkPolicy"),
        ("networkPolicy.metrics.from[0].everyone=true", "everyone"),
        // A provider the chart does not know needs its whole entry; names are Service suffixes.
        ("providers.mystore.enabled=true", "command"),
        ("providers.Vault_2.enabled=true", "Vault_2"),
        ("providers.vault.enabeld=true", "enabeld"),
    ] {
        let mut cmd = helm(kubeconfig);
        cmd.args(["template", "kw"]).arg(chart_dir()).args(["--set", bad]);
        let out = run_fails(cmd);
        assert!(out.contains(message), "{bad}: {out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_templates_pass_server_side_dry_run_in_both_modes() {
    install_cert_manager_crds(control_plane().await.kubeconfig());
    with_temp_namespace(&[], |_client, ns| async move {
        let cp = control_plane().await;
        let dir = tempfile::tempdir().expect("tempdir");
        for (mode, cert_manager, extra) in [
            ("self-managed", false, vec![]),
            ("cert-manager", true, vec![]),
            (
                "cert-manager with a user issuer",
                true,
                vec![
                    "--set",
                    "certManager.issuerRef.name=corp-ca",
                    "--set",
                    "certManager.issuerRef.kind=ClusterIssuer",
                ],
            ),
        ] {
            let values = write_values(dir.path(), "values.yaml", &test_values(&format!("{ns}-dry"), cert_manager));
            let rendered = template(cp.kubeconfig(), "kw", &ns, &values, &extra);
            let (ok, out) =
                kubectl_input(cp.kubeconfig(), &["apply", "--dry-run=server", "-n", &ns, "-f", "-"], &rendered);
            assert!(ok, "{mode}: server-side dry run refused the chart:\n{out}");
            let kinds: Vec<&str> = rendered.lines().filter_map(|l| l.strip_prefix("kind: ")).collect();
            assert_eq!(kinds.contains(&"Certificate"), cert_manager, "{mode}: Certificates only with cert-manager");
            // The release's own CA chain is there with a user issuer too: it signs provider mTLS.
            assert_eq!(kinds.contains(&"Issuer"), cert_manager, "{mode}: Issuers");
            let certs_deployment = format!("name: {ns}-dry-certs\n");
            assert_eq!(
                rendered.contains(&certs_deployment),
                !cert_manager,
                "{mode}: keyward-certs only when self-managed"
            );
            if !extra.is_empty() {
                assert!(
                    rendered.contains("name: corp-ca") && rendered.contains("kind: ClusterIssuer"),
                    "{mode}: user issuer"
                );
            }
        }
        // The dry run is a real check: an object the API server refuses fails it.
        let values = write_values(dir.path(), "values.yaml", &test_values(&format!("{ns}-dry"), false));
        let broken =
            template(cp.kubeconfig(), "kw", &ns, &values, &[]).replace("sideEffects: None", "sideEffects: Sometimes");
        let (ok, out) = kubectl_input(cp.kubeconfig(), &["apply", "--dry-run=server", "-n", &ns, "-f", "-"], &broken);
        assert!(!ok && out.contains("sideEffects"), "a broken manifest must fail the dry run:\n{out}");
    })
    .await;
}

/// The chart installs the same CRDs as `crds/yaml`: what Helm renders from the generated
/// templates (descriptions holding template delimiters included) is the plain YAML's spec.
#[test]
fn the_charts_crds_render_to_the_plain_crd_yaml() {
    let rendered = render(&[]);
    let dir = keyward_e2e::repo_root().join("crds/yaml");
    let mut compared = 0;
    for entry in std::fs::read_dir(&dir).expect("crds/yaml") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("read");
        let plain: serde_json::Value = serde_yaml::from_str(&text).expect("yaml");
        let name = plain["metadata"]["name"].as_str().expect("name");
        let from_chart = find(&rendered, "CustomResourceDefinition", name);
        assert_eq!(from_chart["spec"], plain["spec"], "{name}: the chart's CRD differs from crds/yaml");
        compared += 1;
    }
    assert_eq!(compared, rendered.iter().filter(|o| o["kind"] == "CustomResourceDefinition").count());
}

/// Every provider process of `keyward_provider_registry` has its chart entry, running its own
/// binary, and that binary is in the image; the chart deploys no provider the registry lacks.
#[test]
fn every_registered_provider_has_a_chart_entry_and_an_image_binary() {
    let values = std::fs::read_to_string(chart_dir().join("values.yaml")).expect("values.yaml");
    let values: serde_yaml::Value = serde_yaml::from_str(&values).expect("values yaml");
    let out = std::process::Command::new("bash")
        .arg(keyward_e2e::repo_root().join("image/provider-binaries.sh"))
        .output()
        .expect("run image/provider-binaries.sh");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let in_image = String::from_utf8(out.stdout).expect("utf-8");
    let registered = keyward_provider_registry::provider_names();
    for name in &registered {
        let binary = format!("keyward-provider-{name}");
        assert_eq!(values["providers"][name]["command"].as_str(), Some(binary.as_str()), "chart entry {name}");
        assert!(in_image.lines().any(|b| b == binary), "{binary} not built into the image: {in_image}");
    }
    let in_chart: Vec<&str> =
        values["providers"].as_mapping().expect("providers map").keys().filter_map(|k| k.as_str()).collect();
    assert!(in_chart.iter().all(|n| registered.contains(n)), "chart providers {in_chart:?}, registry {registered:?}");
}

/// The store providers (Vault, AWS, Webhook, Barbican) are off by default; enabled, each gets its
/// Deployment (running its own binary), Service, ServiceAccount and a ClusterRole with only what
/// its configs and the stores it serves name, and the API server accepts the objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_providers_deploy_with_their_own_rules_when_enabled() {
    with_temp_namespace(&[], |_client, ns| async move {
        let cp = control_plane().await;
        let f = format!("{ns}-stores");
        // A values file names only what it changes: the entries are keyed by provider name.
        let dir = tempfile::tempdir().expect("tempdir");
        let values = write_values(
            dir.path(),
            "stores.yaml",
            "providers:\n  vault: {enabled: true}\n  aws: {enabled: true}\n  webhook: {enabled: true}\n  barbican: {enabled: true}\n",
        );
        let render = |enable: bool| {
            let mut cmd = helm(cp.kubeconfig());
            cmd.args(["template", "kw"]).arg(chart_dir()).args(["-n", &ns, "--set", &format!("fullnameOverride={f}")]);
            if enable {
                cmd.arg("-f").arg(&values);
            }
            run(cmd)
        };
        let off = render(false);
        for p in ["vault", "aws", "webhook", "barbican"] {
            assert!(!off.contains(&format!("keyward-provider-{p}")), "{p} off by default");
        }
        let rendered = render(true);
        let (ok, out) = kubectl_input(cp.kubeconfig(), &["apply", "--dry-run=server", "-n", &ns, "-f", "-"], &rendered);
        assert!(ok, "server-side dry run refused the chart with the store providers:\n{out}");
        let docs: Vec<serde_json::Value> = rendered
            .split("\n---")
            .filter_map(|d| serde_yaml::from_str::<serde_json::Value>(d).ok())
            .filter(|d| d.is_object())
            .collect();
        let find = |kind: &str, name: &str| {
            docs.iter()
                .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("{kind} {name} not rendered"))
                .clone()
        };
        for (p, binary, own_kind, core) in [
            ("vault", "keyward-provider-vault", "vaults", vec!["secrets", "configmaps", "serviceaccounts/token"]),
            (
                "aws",
                "keyward-provider-aws",
                "secretsmanagers",
                vec!["secrets", "serviceaccounts", "serviceaccounts/token"],
            ),
            ("webhook", "keyward-provider-webhook", "webhooks", vec!["secrets", "configmaps"]),
            ("barbican", "keyward-provider-barbican", "barbicans", vec!["secrets"]),
        ] {
            let name = format!("{f}-provider-{p}");
            let d = find("Deployment", &name);
            let pod = &d["spec"]["template"]["spec"];
            assert_eq!(pod["containers"][0]["command"], serde_json::json!([binary]), "{p}");
            assert_eq!(pod["serviceAccountName"], name.as_str(), "{p}: own ServiceAccount");
            find("Service", &name);
            find("ServiceAccount", &name);
            let rules = find("ClusterRole", &name)["rules"].as_array().cloned().unwrap_or_default();
            let resources = |group: &str| -> Vec<String> {
                rules
                    .iter()
                    .filter(|r| r["apiGroups"].as_array().is_some_and(|g| g.iter().any(|g| g == group)))
                    .flat_map(|r| r["resources"].as_array().cloned().unwrap_or_default())
                    .filter_map(|r| r.as_str().map(str::to_string))
                    .collect()
            };
            assert_eq!(resources("provider.external-secrets.io"), [own_kind], "{p}: only its own config kind");
            assert_eq!(
                resources("external-secrets.io"),
                ["secretstores", "clustersecretstores"],
                "{p}: the SecretStores and ClusterSecretStores it serves, read as configs"
            );
            let mut got = resources("");
            got.sort();
            let mut want: Vec<String> = core.iter().map(|s| s.to_string()).collect();
            want.sort();
            assert_eq!(got, want, "{p}: core resources");
            // Configuration kinds and stores are watched; what they name is read by name only.
            for r in &rules {
                let verbs: Vec<&str> = r["verbs"].as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
                let watched = r["apiGroups"].as_array().is_some_and(|g| g.iter().any(|g| g != ""));
                let allowed: &[&str] = if watched { &["get", "list", "watch"] } else { &["get", "create"] };
                assert!(verbs.iter().all(|v| allowed.contains(v)), "{p}: {r}");
            }
        }
    })
    .await;
}

async fn assert_common_objects(client: &Client, ns: &str, f: &str) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let webhook = deployments.get(&format!("{f}-webhook")).await.expect("webhook Deployment");
    let spec = webhook.spec.clone().expect("spec");
    assert_eq!(spec.replicas, Some(2), "two webhook replicas");
    let pod = spec.template.spec.expect("pod spec");
    assert!(pod.affinity.and_then(|a| a.pod_anti_affinity).is_some(), "webhook replicas spread");
    // No kubelet here: the Deployment exists, its Pods never run.
    assert_eq!(webhook.status.and_then(|s| s.ready_replicas).unwrap_or(0), 0);
    for name in ["webhook", "reconciler", "provider-kubernetes", "provider-fake"] {
        let d = deployments.get(&format!("{f}-{name}")).await.unwrap_or_else(|e| panic!("{name} Deployment: {e}"));
        let pod = d.spec.expect("spec").template.spec.expect("pod spec");
        let psc = pod.security_context.expect("pod security context");
        assert_eq!(psc.run_as_non_root, Some(true), "{name} runs as non-root");
        let c = &pod.containers[0];
        let sc = c.security_context.clone().expect("container security context");
        assert_eq!(sc.read_only_root_filesystem, Some(true), "{name}: read-only root");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{name}: no privilege escalation");
        assert_eq!(sc.capabilities.and_then(|c| c.drop), Some(vec!["ALL".to_string()]), "{name}: drops ALL");
        assert_eq!(pod.service_account_name.as_deref(), Some(format!("{f}-{name}").as_str()), "{name}: own SA");
    }
    let pdb: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    pdb.get(&format!("{f}-webhook")).await.expect("webhook PodDisruptionBudget");
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    for name in [
        format!("{f}-webhook"),
        format!("external-secrets-{f}-webhook-metrics"),
        format!("external-secrets-{f}-reconciler-metrics"),
        format!("{f}-provider-kubernetes"),
        format!("external-secrets-{f}-provider-kubernetes-metrics"),
        format!("{f}-provider-fake"),
        format!("external-secrets-{f}-provider-fake-metrics"),
    ] {
        services.get(&name).await.unwrap_or_else(|e| panic!("Service {name}: {e}"));
    }
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    for name in ["webhook", "reconciler", "provider-kubernetes", "provider-fake"] {
        sas.get(&format!("{f}-{name}")).await.unwrap_or_else(|e| panic!("ServiceAccount {name}: {e}"));
    }
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let fake_rules = roles.get(&format!("{f}-provider-fake")).await.expect("fake provider ClusterRole").rules;
    let fake_resources: Vec<String> =
        fake_rules.unwrap_or_default().into_iter().flat_map(|r| r.resources.unwrap_or_default()).collect();
    assert_eq!(
        fake_resources,
        ["fakes", "secretstores", "clustersecretstores"],
        "the fake provider reads only its config kinds (no Secrets: its data is in its config)"
    );

    let vwc = Api::<ValidatingWebhookConfiguration>::all(client.clone()).get(f).await.expect("validating");
    let webhooks = vwc.webhooks.expect("webhooks");
    assert!(webhooks.iter().all(|w| w.failure_policy.as_deref() == Some("Fail") && w.side_effects == "None"));
    let selector = serde_json::to_string(&webhooks[0].namespace_selector).expect("json");
    assert!(selector.contains("kube-system") && selector.contains(ns), "kube-system and {ns} are left out: {selector}");
    let mwc = Api::<MutatingWebhookConfiguration>::all(client.clone()).get(f).await.expect("mutating");
    let pods = mwc.webhooks.expect("webhooks").into_iter().find(|w| w.name == "pods.mutate.keyward.dev").expect("pods");
    assert_eq!(pods.failure_policy.as_deref(), Some("Ignore"), "the Pod webhook's failure policy is configurable");
}

/// A copy of the admin kubeconfig that acts as `user` (impersonation), so RBAC applies.
fn impersonating_kubeconfig(admin: &Path, user: &str, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(admin).expect("read kubeconfig");
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("kubeconfig yaml");
    for u in doc.get_mut("users").and_then(|u| u.as_sequence_mut()).expect("users") {
        if let Some(map) = u.get_mut("user").and_then(|u| u.as_mapping_mut()) {
            map.insert("as".into(), user.into());
        }
    }
    let path = dir.join("impersonating.kubeconfig");
    std::fs::write(&path, serde_yaml::to_string(&doc).expect("yaml")).expect("write kubeconfig");
    path
}

fn can_i(kubeconfig: &Path, ns: &str, user: &str, verb: &str, resource: &str) -> bool {
    let out = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .args(["auth", "can-i", verb, resource, "-n", ns, "--as", user])
        .output()
        .expect("kubectl auth can-i");
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_self_managed_and_the_certs_loop_fills_secrets_and_ca_bundle() {
    with_temp_namespace(&[], |client, ns| async move {
        let cp = control_plane().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let f = format!("{ns}-sm");
        let values = write_values(dir.path(), "values.yaml", &test_values(&f, false));
        helm_install(cp.kubeconfig(), "keyward", &ns, &values);
        assert_common_objects(&client, &ns, &f).await;

        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let certs = deployments.get(&format!("{f}-certs")).await.expect("certs Deployment");
        let container = certs.spec.expect("spec").template.spec.expect("pod").containers.remove(0);
        assert_eq!(container.command, Some(vec!["keyward-certs".to_string(), "run".to_string()]));

        // Least privilege, as the API server sees it.
        let sa = |c: &str| format!("system:serviceaccount:{ns}:{f}-{c}");
        let kc = cp.kubeconfig();
        assert!(can_i(kc, &ns, &sa("certs"), "update", &format!("secrets/{f}-webhook-tls")));
        assert!(!can_i(kc, &ns, &sa("certs"), "get", "secrets/someone-elses"), "certs reads only its Secrets");
        assert!(can_i(kc, &ns, &sa("certs"), "patch", &format!("validatingwebhookconfigurations/{f}")));
        assert!(!can_i(kc, &ns, &sa("certs"), "patch", "validatingwebhookconfigurations/other"));
        assert!(!can_i(kc, &ns, &sa("webhook"), "get", "secrets/anything"), "the webhook reads no Secrets");
        assert!(!can_i(kc, &ns, &sa("webhook"), "list", "secrets"), "the webhook lists no Secrets");
        assert!(!can_i(kc, &ns, &sa("webhook"), "watch", "secrets"), "the webhook watches no Secrets");
        assert!(!can_i(kc, &ns, &sa("reconciler"), "patch", &format!("mutatingwebhookconfigurations/{f}")));
        assert!(can_i(kc, &ns, &sa("reconciler"), "create", "secrets"));
        // ClusterExternalSecrets: their finalizer and status, and the ExternalSecrets they keep;
        // ClusterPushSecrets and the PushSecrets they keep.
        for (verb, resource) in [
            ("patch", "clusterexternalsecrets.external-secrets.io"),
            ("create", "externalsecrets.external-secrets.io"),
            ("patch", "externalsecrets.external-secrets.io"),
            ("delete", "externalsecrets.external-secrets.io"),
            ("watch", "clusterpushsecrets.external-secrets.io"),
            ("create", "pushsecrets.external-secrets.io"),
            ("patch", "pushsecrets.external-secrets.io"),
            ("delete", "pushsecrets.external-secrets.io"),
        ] {
            assert!(can_i(kc, &ns, &sa("reconciler"), verb, resource), "reconciler may {verb} {resource}");
        }
        assert!(!can_i(kc, &ns, &sa("webhook"), "create", "externalsecrets.external-secrets.io"));
        // ClusterSecretStore namespace conditions, and which SecretStores exist (an omitted store
        // kind means one), are decided at admission from watches.
        for verb in ["list", "watch"] {
            assert!(can_i(kc, &ns, &sa("webhook"), verb, "clustersecretstores.external-secrets.io"));
            assert!(can_i(kc, &ns, &sa("webhook"), verb, "secretstores.external-secrets.io"));
        }
        assert!(!can_i(kc, &ns, &sa("provider-fake"), "get", "secrets/anything"));
        // A provider watches its own configuration kind, not another's, and reads Secrets by name.
        assert!(can_i(kc, &ns, &sa("provider-kubernetes"), "get", "kubernetes.provider.external-secrets.io"));
        assert!(can_i(kc, &ns, &sa("provider-kubernetes"), "list", "kubernetes.provider.external-secrets.io"));
        assert!(!can_i(kc, &ns, &sa("provider-kubernetes"), "list", "fakes.provider.external-secrets.io"));
        assert!(!can_i(kc, &ns, &sa("provider-kubernetes"), "list", "secrets"));

        // Run the certs Deployment's container locally: its environment, its ServiceAccount.
        let kubeconfig = impersonating_kubeconfig(cp.kubeconfig(), &sa("certs"), dir.path());
        let mut cmd = Command::new(workspace_binary("keyward-certs"));
        cmd.env("KUBECONFIG", &kubeconfig).args(container.command.expect("command").iter().skip(1));
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        for e in container.env.unwrap_or_default() {
            match e.value {
                Some(v) => env.insert(e.name, v),
                None if e.name == "KEYWARD_POD_NAMESPACE" => env.insert(e.name, ns.clone()),
                None => env.insert(e.name, "local-test".to_string()),
            };
        }
        env.insert("KEYWARD_LOG_FORMAT".into(), "text".into());
        cmd.envs(&env);
        let mut certs = spawn_logged("keyward-certs", cmd);

        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let wanted = [
            format!("{f}-ca"),
            format!("{f}-webhook-tls"),
            format!("{f}-provider-kubernetes-tls"),
            format!("{f}-provider-fake-tls"),
            "keyward-provider-tls".to_string(),
        ];
        let start = Instant::now();
        let bundle = loop {
            let mut found = Vec::new();
            for name in &wanted {
                if let Some(s) = secrets.get_opt(name).await.expect("get") {
                    found.push(s);
                }
            }
            let vwc = Api::<ValidatingWebhookConfiguration>::all(client.clone()).get(&f).await.expect("vwc");
            let mwc = Api::<MutatingWebhookConfiguration>::all(client.clone()).get(&f).await.expect("mwc");
            let injected: Vec<Option<Vec<u8>>> = vwc
                .webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|w| w.client_config.ca_bundle.map(|b| b.0))
                .chain(mwc.webhooks.unwrap_or_default().into_iter().map(|w| w.client_config.ca_bundle.map(|b| b.0)))
                .collect();
            if found.len() == wanted.len() && injected.iter().all(Option::is_some) {
                let ca = &found[0];
                let bundle = ca.data.as_ref().and_then(|d| d.get("ca.crt")).map(|b| b.0.clone()).expect("ca.crt");
                assert!(injected.iter().all(|b| b.as_deref() == Some(bundle.as_slice())), "every caBundle is the CA");
                break String::from_utf8(bundle).expect("utf-8");
            }
            assert!(certs.is_running(), "keyward-certs exited:\n{}", certs.log());
            assert!(start.elapsed() < Duration::from_secs(30), "Secrets/caBundle incomplete:\n{}", certs.log());
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let webhook = secrets.get(&format!("{f}-webhook-tls")).await.expect("webhook tls");
        let leaf = String::from_utf8(webhook.data.expect("data")["tls.crt"].0.clone()).expect("utf-8");
        let names = keyward_certs::bundle::subject_alt_names(&leaf);
        assert!(names.contains(&format!("{f}-webhook.{ns}.svc")), "webhook SANs: {names:?}");
        assert!(keyward_certs::bundle::verifies_against_bundle(&leaf, &bundle, time::OffsetDateTime::now_utc()));
        certs.terminate(Duration::from_secs(5));

        helm_uninstall(cp.kubeconfig(), "keyward", &ns);
        let gone = Api::<ValidatingWebhookConfiguration>::all(client.clone()).get_opt(&f).await.expect("get");
        assert!(gone.is_none(), "helm uninstall removes the webhook configuration");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_cert_manager_mode_creates_issuers_certificates_and_injection_annotations() {
    install_cert_manager_crds(control_plane().await.kubeconfig());
    with_temp_namespace(&[], |client, ns| async move {
        let cp = control_plane().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let f = format!("{ns}-cm");
        let values = write_values(dir.path(), "values.yaml", &test_values(&f, true));
        helm_install(cp.kubeconfig(), "keyward", &ns, &values);
        assert_common_objects(&client, &ns, &f).await;

        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        assert!(deployments.get_opt(&format!("{f}-certs")).await.expect("get").is_none(), "no keyward-certs");

        let get = |kind: &str| {
            let mut cmd = cp.kubectl();
            cmd.args(["get", kind, "-n", &ns, "-o", "json"]);
            serde_json::from_str::<serde_json::Value>(&run(cmd)).expect("json")
        };
        let issuers = get("issuers.cert-manager.io");
        let issuer_names: Vec<&str> =
            issuers["items"].as_array().expect("items").iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
        assert_eq!(issuer_names.len(), 2, "self-signed and CA Issuers: {issuer_names:?}");
        let certificates = get("certificates.cert-manager.io");
        let by_secret: BTreeMap<&str, &serde_json::Value> = certificates["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|c| Some((c["spec"]["secretName"].as_str()?, &c["spec"])))
            .collect();
        let ca = by_secret.get(format!("{f}-ca").as_str()).expect("CA Certificate");
        assert_eq!(ca["isCA"], true);
        let webhook = by_secret.get(format!("{f}-webhook-tls").as_str()).expect("webhook Certificate");
        assert!(webhook["dnsNames"].to_string().contains(&format!("{f}-webhook.{ns}.svc")));
        assert_eq!(webhook["issuerRef"]["name"], format!("{f}-ca"));
        for p in ["kubernetes", "fake"] {
            assert!(by_secret.contains_key(format!("{f}-provider-{p}-tls").as_str()), "{p} provider Certificate");
        }
        let client_cert = by_secret.get("keyward-provider-tls").expect("reconciler client Certificate");
        assert!(client_cert["usages"].to_string().contains("client auth"));

        let annotation =
            |a: Option<&BTreeMap<String, String>>| a.and_then(|a| a.get("cert-manager.io/inject-ca-from")).cloned();
        let vwc = Api::<ValidatingWebhookConfiguration>::all(client.clone()).get(&f).await.expect("vwc");
        let mwc = Api::<MutatingWebhookConfiguration>::all(client.clone()).get(&f).await.expect("mwc");
        let want = Some(format!("{ns}/{f}-webhook"));
        assert_eq!(annotation(vwc.metadata.annotations.as_ref()), want);
        assert_eq!(annotation(mwc.metadata.annotations.as_ref()), want);
        helm_uninstall(cp.kubeconfig(), "keyward", &ns);
    })
    .await;
}

/// Provider mTLS is the release's own: with `certManager.issuerRef` naming a ClusterIssuer (one a
/// tenant can use too), the reconciler's client certificate and the providers' server
/// certificates — whose `ca.crt` is what providers verify callers against — are signed by the
/// release's own CA chain; only the webhook's serving certificate comes from the user's issuer.
#[test]
fn provider_mtls_is_signed_by_the_releases_own_ca_even_with_a_user_cluster_issuer() {
    let own = serde_json::json!({"name": "keyward-ca", "kind": "Issuer", "group": "cert-manager.io"});
    let corp = serde_json::json!({"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"});
    let user = [
        "certManager.enabled=true",
        "certManager.issuerRef.name=corp-ca",
        "certManager.issuerRef.kind=ClusterIssuer",
        "certManager.issuerRef.group=cert-manager.io",
    ];
    for (mode, sets, webhook_issuer) in
        [("chart CA", &user[..1], own.clone()), ("user ClusterIssuer", &user[..], corp.clone())]
    {
        let objects = render(sets);
        // The release's own chain: self-signed Issuer → CA Certificate → CA Issuer, namespaced.
        assert!(find(&objects, "Issuer", "keyward-selfsigned")["spec"]["selfSigned"].is_object(), "{mode}");
        let ca = &find(&objects, "Certificate", "keyward-ca")["spec"];
        assert_eq!(ca["isCA"], true, "{mode}");
        assert_eq!(ca["issuerRef"]["name"], "keyward-selfsigned", "{mode}");
        assert_eq!(ca["issuerRef"]["kind"], "Issuer", "{mode}");
        assert_eq!(find(&objects, "Issuer", "keyward-ca")["spec"]["ca"]["secretName"], ca["secretName"], "{mode}");
        let client = &find(&objects, "Certificate", "keyward-reconciler-client")["spec"];
        assert_eq!(client["secretName"], "keyward-provider-tls", "{mode}");
        assert_eq!(client["issuerRef"], own, "{mode}: the reconciler's client certificate");
        let provider = &find(&objects, "Certificate", "keyward-provider-kubernetes")["spec"];
        assert_eq!(provider["issuerRef"], own, "{mode}: the provider's server certificate and its ca.crt");
        let webhook = &find(&objects, "Certificate", "keyward-webhook")["spec"];
        assert_eq!(webhook["issuerRef"], webhook_issuer, "{mode}: the webhook's serving certificate");
        // Nothing but the webhook's certificate ever names the user's issuer.
        for c in objects.iter().filter(|o| o["kind"] == "Certificate") {
            if c["metadata"]["name"] != "keyward-webhook" {
                assert_ne!(c["spec"]["issuerRef"], corp, "{mode}: {}", c["metadata"]["name"]);
            }
        }
        assert!(!objects.iter().any(|o| o["kind"] == "ClusterIssuer"), "{mode}: the chart makes no ClusterIssuer");
    }
}

/// Who may open `port` on Pods labelled `labels` under `policies`: `None` when anyone may (no
/// policy selects the Pods, or a rule for the port has no `from`), else the peers of the rules
/// covering the port (empty: nobody).
fn ingress_peers(
    policies: &[&serde_json::Value],
    labels: &serde_json::Value,
    port: u16,
) -> Option<Vec<serde_json::Value>> {
    let selects = |selector: &serde_json::Value, labels: &serde_json::Value| {
        assert!(selector.get("matchExpressions").is_none(), "the evaluator knows matchLabels only");
        selector["matchLabels"].as_object().into_iter().flatten().all(|(k, v)| &labels[k] == v)
    };
    let selecting: Vec<_> = policies.iter().filter(|p| selects(&p["spec"]["podSelector"], labels)).collect();
    if selecting.is_empty() {
        return None;
    }
    let mut peers = Vec::new();
    for rule in selecting.iter().flat_map(|p| p["spec"]["ingress"].as_array().cloned().unwrap_or_default()) {
        let covers = match rule["ports"].as_array() {
            None => true,
            Some(ports) => ports.iter().any(|p| p["port"] == port),
        };
        if !covers {
            continue;
        }
        match rule["from"].as_array() {
            None => return None,
            Some(from) if from.is_empty() => return None,
            Some(from) => peers.extend(from.iter().cloned()),
        }
    }
    Some(peers)
}

/// The NetworkPolicies: every Keyward Pod is selected; provider gRPC ports admit only this
/// release's reconciler Pods (a podSelector of the release namespace, never another namespace);
/// the webhook and metrics ports admit the configured peers (anywhere when none are given); no
/// other port is open; egress is not restricted; `networkPolicy.enabled=false` renders none. The
/// API server accepts them (server-side dry run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_policies_admit_only_the_reconciler_to_provider_ports_and_can_be_turned_off() {
    with_temp_namespace(&[], |_client, ns| async move {
        let cp = control_plane().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let f = format!("{ns}-np");
        for cert_manager in [false, true] {
            let values = write_values(dir.path(), "values.yaml", &test_values(&f, cert_manager));
            let objects = objects(&template(cp.kubeconfig(), "kw", &ns, &values, &[]));
            let policies: Vec<&serde_json::Value> = objects.iter().filter(|o| o["kind"] == "NetworkPolicy").collect();
            assert!(!policies.is_empty(), "NetworkPolicies are on by default");
            for p in &policies {
                assert_eq!(p["spec"]["policyTypes"], serde_json::json!(["Ingress"]), "egress stays open");
                assert_eq!(p["metadata"]["namespace"], ns.as_str());
            }
            let pod_labels = |component: &str| {
                find(&objects, "Deployment", &format!("{f}-{component}"))["spec"]["template"]["metadata"]["labels"]
                    .clone()
            };
            // No Keyward Pod is left out.
            for d in objects.iter().filter(|o| o["kind"] == "Deployment") {
                let labels = &d["spec"]["template"]["metadata"]["labels"];
                assert!(
                    ingress_peers(&policies, labels, 1).is_some(),
                    "{} is selected by a NetworkPolicy",
                    d["metadata"]["name"]
                );
            }
            let reconciler = pod_labels("reconciler");
            let others: Vec<serde_json::Value> = ["webhook", "provider-kubernetes", "provider-fake"]
                .iter()
                .map(|c| pod_labels(c))
                .chain((!cert_manager).then(|| pod_labels("certs")))
                .collect();
            for provider in ["provider-kubernetes", "provider-fake"] {
                let labels = pod_labels(provider);
                let peers = ingress_peers(&policies, &labels, 8443).expect("the gRPC port is restricted");
                assert_eq!(peers.len(), 1, "{provider}: {peers:?}");
                let peer = peers[0].as_object().expect("peer");
                assert_eq!(peer.keys().collect::<Vec<_>>(), ["podSelector"], "{provider}: this namespace only");
                let admits = |labels: &serde_json::Value| {
                    peer["podSelector"]["matchLabels"].as_object().expect("matchLabels").iter().all(|(k, v)| &labels[k] == v)
                };
                assert!(admits(&reconciler), "{provider}: the reconciler Pods");
                for other in &others {
                    assert!(!admits(other), "{provider}: not {other}");
                }
                assert_eq!(ingress_peers(&policies, &labels, 8080), None, "{provider}: metrics from anywhere by default");
                assert_eq!(ingress_peers(&policies, &labels, 9443), Some(vec![]), "{provider}: no other port");
            }
            let webhook = pod_labels("webhook");
            assert_eq!(ingress_peers(&policies, &webhook, 10250), None, "the API server may be anywhere");
            assert_eq!(ingress_peers(&policies, &webhook, 8081), None);
            assert_eq!(ingress_peers(&policies, &webhook, 8443), Some(vec![]));
            assert_eq!(ingress_peers(&policies, &reconciler, 8080), None);
            assert_eq!(ingress_peers(&policies, &reconciler, 8443), Some(vec![]), "the reconciler serves nothing else");
            if !cert_manager {
                let certs = pod_labels("certs");
                assert_eq!(ingress_peers(&policies, &certs, 8080), None, "keyward-certs: metrics from anywhere");
                assert_eq!(ingress_peers(&policies, &certs, 8443), Some(vec![]), "keyward-certs: nothing else");
            }
        }

        // Narrowed sources, and the API server accepts the result.
        let narrowed = format!(
            "{}networkPolicy:\n  webhook:\n    from: [{{ipBlock: {{cidr: 10.0.0.0/8}}}}]\n  metrics:\n    from:\n      - namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: monitoring}}}}\n",
            test_values(&f, false)
        );
        let values = write_values(dir.path(), "narrowed.yaml", &narrowed);
        let rendered = template(cp.kubeconfig(), "kw", &ns, &values, &[]);
        let (ok, out) = kubectl_input(cp.kubeconfig(), &["apply", "--dry-run=server", "-n", &ns, "-f", "-"], &rendered);
        assert!(ok, "server-side dry run refused the NetworkPolicies:\n{out}");
        let objects = objects(&rendered);
        let policies: Vec<&serde_json::Value> = objects.iter().filter(|o| o["kind"] == "NetworkPolicy").collect();
        let labels = |component: &str| {
            find(&objects, "Deployment", &format!("{f}-{component}"))["spec"]["template"]["metadata"]["labels"].clone()
        };
        let ip_block = serde_json::json!([{"ipBlock": {"cidr": "10.0.0.0/8"}}]);
        let monitoring =
            serde_json::json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]);
        assert_eq!(ingress_peers(&policies, &labels("webhook"), 10250).map(serde_json::Value::from), Some(ip_block));
        for c in ["webhook", "reconciler", "provider-kubernetes"] {
            let port = if c == "webhook" { 8081 } else { 8080 };
            assert_eq!(
                ingress_peers(&policies, &labels(c), port).map(serde_json::Value::from),
                Some(monitoring.clone()),
                "{c}"
            );
        }
        assert_eq!(ingress_peers(&policies, &labels("provider-kubernetes"), 8443).map(|p| p.len()), Some(1));

        let values = write_values(dir.path(), "values.yaml", &test_values(&f, false));
        let off = template(cp.kubeconfig(), "kw", &ns, &values, &["--set", "networkPolicy.enabled=false"]);
        assert!(!off.contains("kind: NetworkPolicy"), "networkPolicy.enabled=false renders none");
    })
    .await;
}

/// The providers' ClusterRoles as shipped: their configuration kinds and the stores watched,
/// and only what configurations can name, by name (no list or watch of Secrets).
#[test]
fn default_provider_rules_grant_only_what_the_shipped_configurations_name() {
    let objects = render(&[]);
    let rules =
        find(&objects, "ClusterRole", "keyward-provider-kubernetes")["rules"].as_array().cloned().expect("rules");
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(String::from)).collect()
    };
    let mut grants = Vec::new();
    for r in &rules {
        for group in strings(&r["apiGroups"]) {
            for resource in strings(&r["resources"]) {
                for verb in strings(&r["verbs"]) {
                    grants.push(format!("{verb} {group}/{resource}"));
                }
            }
        }
    }
    grants.sort();
    assert_eq!(
        grants,
        [
            "create /serviceaccounts/token",
            "get /configmaps",
            "get /secrets",
            "get external-secrets.io/clustersecretstores",
            "get external-secrets.io/secretstores",
            "get provider.external-secrets.io/kubernetes",
            "list external-secrets.io/clustersecretstores",
            "list external-secrets.io/secretstores",
            "list provider.external-secrets.io/kubernetes",
            "watch external-secrets.io/clustersecretstores",
            "watch external-secrets.io/secretstores",
            "watch provider.external-secrets.io/kubernetes",
        ],
        "the Kubernetes provider watches its config kind and the store kinds, and reads what they name by name"
    );
}

/// `clusterNetworks` reach every provider as its denied list: the default, then the cluster's
/// Pod and Service networks and the API server; unset, the providers keep their default.
#[test]
fn cluster_networks_are_denied_to_tenants_beside_the_default_list() {
    let denied = |objects: &[serde_json::Value]| -> Option<String> {
        let env = &find(objects, "Deployment", "keyward-provider-kubernetes")["spec"]["template"]["spec"]["containers"]
            [0]["env"];
        env.as_array()?.iter().find(|e| e["name"] == "KEYWARD_TENANT_DENIED_NETWORKS")?["value"]
            .as_str()
            .map(Into::into)
    };
    assert_eq!(denied(&render(&[])), None, "the provider's own default applies");
    let objects = render(&[
        "clusterNetworks.podCIDRs={10.244.0.0/16}",
        "clusterNetworks.serviceCIDRs={10.96.0.0/12,fd00:10:96::/112}",
        "clusterNetworks.apiServerAddresses={172.18.0.2}",
    ]);
    assert_eq!(denied(&objects).as_deref(), Some("default,10.244.0.0/16,10.96.0.0/12,fd00:10:96::/112,172.18.0.2"));
}

/// `providerIdentityNamespaces` reach the webhook and every provider as the same list (the
/// webhook admits what the providers then serve); unset, neither gets one.
#[test]
fn provider_identity_namespaces_reach_the_webhook_and_every_provider_alike() {
    let listed = |objects: &[serde_json::Value], deployment: &str| -> Option<String> {
        let env = &find(objects, "Deployment", deployment)["spec"]["template"]["spec"]["containers"][0]["env"];
        env.as_array()?.iter().find(|e| e["name"] == "KEYWARD_PROVIDER_IDENTITY_NAMESPACES")?["value"]
            .as_str()
            .map(Into::into)
    };
    let all = ["keyward-webhook", "keyward-provider-kubernetes", "keyward-provider-vault"];
    let defaults = render(&["providers.vault.enabled=true"]);
    for d in all {
        assert_eq!(listed(&defaults, d), None, "{d}: only the operator's configurations by default");
    }
    let objects = render(&["providers.vault.enabled=true", "providerIdentityNamespaces={apps,platform}"]);
    for d in all {
        assert_eq!(listed(&objects, d).as_deref(), Some("apps,platform"), "{d}");
    }
}

/// The workloads webhook is called for labelled workloads only, with a short timeout, and the
/// reconciler's rights on workloads follow the same switch.
#[test]
fn the_workloads_webhook_sees_labelled_workloads_only_and_its_switch_takes_the_rights_away() {
    let webhook = |objects: &[serde_json::Value]| -> Option<serde_json::Value> {
        let config = find(objects, "MutatingWebhookConfiguration", "keyward");
        config["webhooks"].as_array()?.iter().find(|w| w["name"] == "workloads.mutate.keyward.dev").cloned()
    };
    let workload_rules = |objects: &[serde_json::Value]| -> usize {
        let role = find(objects, "ClusterRole", "keyward-reconciler");
        let rules = role["rules"].as_array().cloned().unwrap_or_default();
        rules
            .iter()
            .filter(|r| r["resources"].as_array().is_some_and(|rs| rs.iter().any(|x| x == "deployments")))
            .count()
    };
    let reload_env = |objects: &[serde_json::Value]| -> Option<String> {
        let env =
            &find(objects, "Deployment", "keyward-reconciler")["spec"]["template"]["spec"]["containers"][0]["env"];
        env.as_array()?.iter().find(|e| e["name"] == "KEYWARD_RELOAD_WORKLOADS")?["value"].as_str().map(Into::into)
    };
    let on = render(&[]);
    let w = webhook(&on).expect("registered by default");
    assert_eq!(w["objectSelector"], serde_json::json!({"matchLabels": {"keyward.dev/reload": "true"}}));
    assert_eq!(w["timeoutSeconds"], 2);
    assert_eq!((workload_rules(&on), reload_env(&on).as_deref()), (1, Some("true")));
    let off = render(&["webhook.workloads.enabled=false"]);
    assert!(webhook(&off).is_none());
    assert_eq!((workload_rules(&off), reload_env(&off).as_deref()), (0, Some("false")), "no rights on workloads");
}

/// The reconciler hashes secret data under the release's key: a Secret the chart makes (or one
/// of the user's), mounted and named by KEYWARD_HASH_KEY_FILE.
#[test]
fn the_reconciler_hashes_under_the_releases_key() {
    use base64::Engine;
    let mounted = |objects: &[serde_json::Value]| -> (String, String) {
        let pod = &find(objects, "Deployment", "keyward-reconciler")["spec"]["template"]["spec"];
        let volume = pod["volumes"].as_array().and_then(|v| v.iter().find(|v| v["name"] == "hash-key")).cloned();
        let env = pod["containers"][0]["env"].as_array().cloned().unwrap_or_default();
        let file = env.iter().find(|e| e["name"] == "KEYWARD_HASH_KEY_FILE").map(|e| e["value"].to_string());
        (volume.map(|v| v["secret"]["secretName"].to_string()).unwrap_or_default(), file.unwrap_or_default())
    };
    let objects = render(&[]);
    let key = find(&objects, "Secret", "keyward-hash-key")["data"]["key"].as_str().expect("a key").to_string();
    let key = base64::engine::general_purpose::STANDARD.decode(key).expect("base64");
    assert!(key.len() >= 32, "{} bytes", key.len());
    assert_eq!(mounted(&objects), ("\"keyward-hash-key\"".into(), "\"/etc/keyward/hash-key/key\"".into()));
    let own = render(&["hashKey.existingSecret=my-key"]);
    assert!(!own.iter().any(|o| o["kind"] == "Secret" && o["metadata"]["name"] == "keyward-hash-key"));
    assert_eq!(mounted(&own).0, "\"my-key\"");
}

/// Every generator kind, GeneratorStates and ClusterGenerators reach the validating webhook:
/// their specs' limits and their free-form fields are checked at admission.
#[test]
fn every_generator_kind_is_validated_by_the_webhook() {
    let objects = render(&[]);
    let config = find(&objects, "ValidatingWebhookConfiguration", "keyward");
    let generator_rules = |hook: &str| -> Vec<String> {
        let hooks = config["webhooks"].as_array().expect("webhooks");
        let hook = hooks.iter().find(|w| w["name"] == hook).expect("the webhook");
        let rules = hook["rules"].as_array().expect("rules");
        rules
            .iter()
            .filter(|r| r["apiGroups"][0] == keyward_crds::generators::GENERATOR_GROUP)
            .flat_map(|r| r["resources"].as_array().cloned().unwrap_or_default())
            .filter_map(|r| r.as_str().map(String::from))
            .collect()
    };
    // Every namespaced kind of the generators group Keyward installs, none left out.
    let mut expected: Vec<String> = keyward_crds::generate::all_crds(&[])
        .into_iter()
        .filter(|crd| crd.spec.group == keyward_crds::generators::GENERATOR_GROUP && crd.spec.scope == "Namespaced")
        .map(|crd| crd.spec.names.plural)
        .collect();
    expected.sort();
    assert!(expected.len() >= 18, "every upstream generator kind and GeneratorState: {expected:?}");
    let mut namespaced = generator_rules("namespaced.validate.keyward.dev");
    namespaced.sort();
    assert_eq!(namespaced, expected);
    assert_eq!(generator_rules("cluster.validate.keyward.dev"), ["clustergenerators"]);
}

/// Sharding is off by default (one Lease, the others stand by); switched on, every replica
/// gets KEYWARD_SHARD and the right to hold and watch shard Leases, which are named after Pods.
#[test]
fn the_sharding_switch_reaches_the_reconciler_with_its_lease_rights() {
    let env = |objects: &[serde_json::Value], name: &str| -> Option<String> {
        let env =
            &find(objects, "Deployment", "keyward-reconciler")["spec"]["template"]["spec"]["containers"][0]["env"];
        env.as_array()?.iter().find(|e| e["name"] == name)?["value"].as_str().map(Into::into)
    };
    let unnamed_lease_verbs = |objects: &[serde_json::Value]| -> Vec<String> {
        let role = find(objects, "Role", "keyward-reconciler-leader-election");
        let rules = role["rules"].as_array().cloned().unwrap_or_default();
        rules
            .iter()
            .filter(|r| r["resources"] == serde_json::json!(["leases"]) && r["resourceNames"].is_null())
            .flat_map(|r| r["verbs"].as_array().cloned().unwrap_or_default())
            .filter_map(|v| v.as_str().map(String::from))
            .collect()
    };
    let off = render(&[]);
    assert_eq!(env(&off, "KEYWARD_SHARD"), None);
    assert_eq!(unnamed_lease_verbs(&off), ["create"], "one Lease, by name");
    let on = render(&["replicaCount=3", "reconciler.sharding.enabled=true", "reconciler.sharding.leaseDuration=4s"]);
    assert_eq!(find(&on, "Deployment", "keyward-reconciler")["spec"]["replicas"], 3);
    assert_eq!(env(&on, "KEYWARD_SHARD").as_deref(), Some("true"));
    assert_eq!(env(&on, "KEYWARD_SHARD_LEASE_DURATION").as_deref(), Some("4s"));
    assert!(env(&on, "KEYWARD_LEADER_ELECT").as_deref() == Some("true"), "cluster-scoped work keeps its leader");
    for verb in ["create", "get", "list", "watch", "update"] {
        assert!(unnamed_lease_verbs(&on).iter().any(|v| v == verb), "{verb} on shard Leases");
    }
    // Without leader election the Role is still there for the shard Leases.
    let no_leader = render(&["reconciler.sharding.enabled=true", "reconciler.leaderElection=false"]);
    assert!(unnamed_lease_verbs(&no_leader).iter().any(|v| v == "watch"));
}
