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
    let all = std::fs::read_dir(chart_dir().join("templates/crds")).expect("crds").count();
    assert!(all >= 6, "the chart carries Keyward's CRDs");
    assert_eq!(crd_count(&[]), (all, all), "every CRD, each kept on uninstall");
    assert_eq!(crd_count(&["--set", "crds.keep=false"]), (all, 0));
    assert_eq!(crd_count(&["--set", "crds.install=false"]), (0, 0));
    for (bad, message) in [
        ("webhook.pods.failurePolicy=Sometimes", "failurePolicy"),
        ("webhook.replicas=0", "replicas"),
        ("certs.leafValidity=soon", "leafValidity"),
        ("unknownKey=1", "unknownKey"),
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
            assert_eq!(kinds.contains(&"Issuer"), cert_manager && extra.is_empty(), "{mode}: Issuers");
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

/// The Vault and AWS providers are off by default; enabled, each gets its Deployment (running
/// its own binary), Service, ServiceAccount and a ClusterRole with only what its configs name,
/// and the API server accepts the objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_providers_deploy_with_their_own_rules_when_enabled() {
    with_temp_namespace(&[], |_client, ns| async move {
        let cp = control_plane().await;
        let f = format!("{ns}-stores");
        // The chart's own provider entries, switched on (`--set` on a list index would replace
        // the whole list).
        let dir = tempfile::tempdir().expect("tempdir");
        let defaults = std::fs::read_to_string(chart_dir().join("values.yaml")).expect("values.yaml");
        let defaults: serde_yaml::Value = serde_yaml::from_str(&defaults).expect("values yaml");
        let mut providers = defaults["providers"].as_sequence().cloned().expect("providers list");
        for p in providers.iter_mut() {
            if matches!(p["name"].as_str(), Some("vault" | "aws")) {
                p["enabled"] = true.into();
            }
        }
        let mut on = serde_yaml::Mapping::new();
        on.insert("providers".into(), serde_yaml::Value::Sequence(providers));
        let values = write_values(dir.path(), "stores.yaml", &serde_yaml::to_string(&on).expect("yaml"));
        let render = |enable: bool| {
            let mut cmd = helm(cp.kubeconfig());
            cmd.args(["template", "kw"]).arg(chart_dir()).args(["-n", &ns, "--set", &format!("fullnameOverride={f}")]);
            if enable {
                cmd.arg("-f").arg(&values);
            }
            run(cmd)
        };
        let off = render(false);
        assert!(!off.contains("keyward-provider-vault") && !off.contains("keyward-provider-aws"), "off by default");
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
            let mut got = resources("");
            got.sort();
            let mut want: Vec<String> = core.iter().map(|s| s.to_string()).collect();
            want.sort();
            assert_eq!(got, want, "{p}: core resources");
            let verbs: Vec<String> = rules
                .iter()
                .flat_map(|r| r["verbs"].as_array().cloned().unwrap_or_default())
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            assert!(verbs.iter().all(|v| v == "get" || v == "create"), "{p}: read and TokenRequest only: {verbs:?}");
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
        "webhook",
        "webhook-metrics",
        "reconciler-metrics",
        "provider-kubernetes",
        "provider-kubernetes-metrics",
        "provider-fake",
        "provider-fake-metrics",
    ] {
        services.get(&format!("{f}-{name}")).await.unwrap_or_else(|e| panic!("Service {f}-{name}: {e}"));
    }
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    for name in ["webhook", "reconciler", "provider-kubernetes", "provider-fake"] {
        sas.get(&format!("{f}-{name}")).await.unwrap_or_else(|e| panic!("ServiceAccount {name}: {e}"));
    }
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let fake_rules = roles.get(&format!("{f}-provider-fake")).await.expect("fake provider ClusterRole").rules;
    let fake_resources: Vec<String> =
        fake_rules.unwrap_or_default().into_iter().flat_map(|r| r.resources.unwrap_or_default()).collect();
    assert_eq!(fake_resources, ["fakes"], "the fake provider reads only its config kind");

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
        // ClusterExternalSecrets: their finalizer and status, and the ExternalSecrets they keep.
        for (verb, resource) in [
            ("patch", "clusterexternalsecrets.external-secrets.io"),
            ("create", "externalsecrets.external-secrets.io"),
            ("patch", "externalsecrets.external-secrets.io"),
            ("delete", "externalsecrets.external-secrets.io"),
            ("patch", "pushsecrets.external-secrets.io"),
        ] {
            assert!(can_i(kc, &ns, &sa("reconciler"), verb, resource), "reconciler may {verb} {resource}");
        }
        assert!(!can_i(kc, &ns, &sa("webhook"), "create", "externalsecrets.external-secrets.io"));
        // ClusterSecretStore namespace conditions are decided at admission from a watch.
        for verb in ["list", "watch"] {
            assert!(can_i(kc, &ns, &sa("webhook"), verb, "clustersecretstores.external-secrets.io"));
        }
        assert!(!can_i(kc, &ns, &sa("provider-fake"), "get", "secrets/anything"));
        assert!(can_i(kc, &ns, &sa("provider-kubernetes"), "list", "kubernetes.provider.external-secrets.io"));
        assert!(!can_i(kc, &ns, &sa("provider-kubernetes"), "list", "fakes.provider.external-secrets.io"));

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
