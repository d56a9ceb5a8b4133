//! The in-place switch of `docs/migrating.md`, followed as a user follows it: upstream's CRDs
//! (release 2.9.0, API and generator groups) hold what upstream's controller left (`keyward_e2e::switch`: a Vault
//! ClusterSecretStore, a Parameter Store SecretStore, ExternalSecrets with their target Secrets,
//! a PushSecret, a ClusterExternalSecret), owned by upstream's Helm release; then the guide's
//! own commands hand the CRDs over and its values file installs Keyward with `helm install`.
//! Vault's dev server and moto listen on the node's bridge address, where the provider Pods
//! reach them. Upstream's controller itself never ran here, so the guide's first step (stopping
//! it) has nothing to stop.

use std::path::Path;
use std::time::Duration;

use keyward_chart_tests::installed::{eventually, image, kubectl};
use keyward_chart_tests::{chart_dir, helm, run};
use keyward_e2e::stores::{Moto, VaultDev};
use keyward_e2e::switch::{UpstreamInstall, apply_crds, upstream_crds, upstream_generator_crds};
use keyward_e2e::{node_cluster, node_ip, repo_root};
use serde_json::json;

use super::switch_kinds::{Kinds, named_unserved_kinds, unserved_kinds};
use super::{NS, RELEASE, describe, output, turn};

const TENANT: &str = "kw-switch";

/// Upstream's release values, as `helm get values external-secrets` prints them: keys of
/// upstream's chart, generic targets on and every controller running.
const UPSTREAM_VALUES: &str = "installCRDs: true
replicaCount: 1
concurrent: 2
log:
  level: info
processClusterExternalSecret: true
processClusterPushSecret: true
processClusterStore: true
processSecretStore: true
processPushSecret: true
processClusterGenerator: true
genericTargets:
  enabled: true
webhook:
  replicaCount: 1
serviceMonitor:
  enabled: false
";

/// The code block of `docs/migrating.md` in `lang` that contains `marker`, unindented.
fn guide_block(lang: &str, marker: &str) -> String {
    let guide = std::fs::read_to_string(repo_root().join("docs/migrating.md")).expect("docs/migrating.md");
    let fence = format!("```{lang}\n");
    guide
        .split(&fence)
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .map(|block| {
            // The guide's blocks sit in a numbered list: drop the list's indentation only.
            let indent = block.lines().filter(|l| !l.trim().is_empty()).map(|l| l.len() - l.trim_start().len()).min();
            block.lines().map(|l| l.get(indent.unwrap_or(0)..).unwrap_or("")).collect::<Vec<_>>().join("\n")
        })
        .find(|block| block.contains(marker))
        .unwrap_or_else(|| panic!("docs/migrating.md has no {lang} block with {marker:?}"))
}

/// The CRDs of both External Secrets groups on the cluster.
fn external_secrets_crds(kc: &Path) -> Vec<String> {
    output(kc, &["get", "crd", "-o", "name"])
        .lines()
        .filter(|l| l.ends_with(".external-secrets.io"))
        .map(String::from)
        .collect()
}

/// Deletes every External Secrets CRD (what an earlier install in this run left), releasing the
/// finalizers of objects no controller will process any more.
fn remove_external_secrets_crds(kc: &Path) {
    for crd in external_secrets_crds(kc) {
        let plural = crd.trim_start_matches("customresourcedefinition.apiextensions.k8s.io/");
        let jsonpath =
            r#"jsonpath={range .items[?(@.metadata.finalizers)]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}"#;
        for object in output(kc, &["get", plural, "-A", "-o", jsonpath]).lines() {
            let (ns, name) = object.split_once('/').unwrap_or(("", object));
            let mut patch = kubectl(kc);
            patch.args(["patch", plural, name, "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
            if !ns.is_empty() {
                patch.args(["-n", ns]);
            }
            let _ = patch.output();
        }
        run({
            let mut c = kubectl(kc);
            c.args(["delete", &crd, "--wait=true", "--timeout=120s"]);
            c
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_install_switches_to_keyward_in_place_with_helm() {
    let _serial = turn().await;
    let cluster = node_cluster().await;
    let kc = cluster.kubeconfig();
    image(cluster);

    // Upstream's CRDs of both groups, owned by upstream's Helm release as its chart installs them.
    remove_external_secrets_crds(kc);
    apply_crds(cluster, &upstream_crds());
    apply_crds(cluster, &upstream_generator_crds());
    for crd in external_secrets_crds(kc) {
        run({
            let mut c = kubectl(kc);
            c.args(["annotate", &crd, "--overwrite"]).args([
                "meta.helm.sh/release-name=external-secrets",
                "meta.helm.sh/release-namespace=external-secrets",
            ]);
            c
        });
        run({
            let mut c = kubectl(kc);
            c.args(["label", &crd, "--overwrite", "app.kubernetes.io/managed-by=Helm"]);
            c
        });
    }
    let host = node_ip();
    let vault = VaultDev::start_on(&host);
    let moto = Moto::start_on(&host);
    run({
        let mut c = kubectl(kc);
        c.args(["create", "namespace", TENANT]);
        c
    });
    let client = cluster.client().await;
    let hash = keyward_reconciler::externalsecret::target::upstream_data_hash;
    let upstream = UpstreamInstall::leave(&client, TENANT, &vault, &moto, json!({}), hash).await;
    let kinds = Kinds::leave(&client, kc, TENANT, &vault, &format!("{TENANT}-vault")).await;

    // The guide's survey, before anything changes: `keyward migrate` names exactly the generator
    // kinds Keyward does not serve, and `--values` translates upstream's values file (written
    // here as `helm get values` would print it).
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("eso-values.yaml"), UPSTREAM_VALUES).expect("eso-values.yaml");
    let survey = guide_block("sh", "keyward migrate --values");
    let out = std::process::Command::new("bash")
        .args(["-uo", "pipefail", "-c", &survey])
        .current_dir(dir.path())
        .env("KUBECONFIG", kc)
        .env("PATH", format!("{}:{}", repo_root().join("dist").display(), std::env::var("PATH").unwrap_or_default()))
        .output()
        .expect("run the guide's survey");
    let report = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        named_unserved_kinds(&report),
        unserved_kinds(),
        "the survey names the unserved kinds:\n{report}{stderr}"
    );
    assert!(!report.contains("NOT SERVED"), "every store is served:\n{report}");
    for store in [
        "SecretStore kw-switch/bao: openBao: served by Keyward's vault provider",
        "SecretStore kw-switch/config-maps: crd: served by Keyward's kubernetes provider",
    ] {
        assert!(report.contains(store), "{store}:\n{report}");
    }
    assert!(report.contains(&format!("  ClusterPushSecret {TENANT}-cps\n")), "{report}");
    let translated: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(dir.path().join("values-upstream.yaml")).expect("the translated values"),
    )
    .expect("the translated values are YAML");
    assert_eq!(translated["genericTargets"]["enabled"], serde_yaml::Value::Bool(true), "{translated:?}\n{stderr}");

    // The guide's step 3: its loop hands the CRDs over, its values file names the providers.
    let handover = guide_block("sh", "meta.helm.sh/release-name=keyward");
    run({
        let mut c = std::process::Command::new("bash");
        c.args(["-euo", "pipefail", "-c", &handover]).env("KUBECONFIG", kc);
        c
    });
    let mut values: serde_yaml::Value =
        serde_yaml::from_str(&guide_block("yaml", "values-switch.yaml")).expect("the guide's values file");
    let env: Vec<serde_yaml::Value> = moto
        .provider_env()
        .into_iter()
        .map(|(name, value)| serde_yaml::to_value(json!({"name": name, "value": value})).expect("env entry"))
        .collect();
    values["providers"]["aws"]["env"] = serde_yaml::Value::Sequence(env);
    // The providers of the generators this install holds, as the user adds them.
    for provider in ["webhook", "azure", "gcp"] {
        values["providers"][provider] = serde_yaml::from_str("{enabled: true}").expect("YAML");
    }
    let values_file = dir.path().join("values-switch.yaml");
    std::fs::write(&values_file, serde_yaml::to_string(&values).expect("values YAML")).expect("values");
    // The guide's own `helm install` line, run where its relative paths resolve: the values
    // file and `charts/keyward` in one directory, this run's helm first on PATH.
    std::fs::create_dir(dir.path().join("charts")).expect("charts dir");
    std::os::unix::fs::symlink(chart_dir(), dir.path().join("charts/keyward")).expect("link the chart");
    let install = guide_block("sh", "helm install keyward");
    assert!(install.contains("--force-conflicts"), "{install}");
    let helm_env = helm(kc);
    let helm_dir = Path::new(helm_env.get_program()).parent().expect("helm's directory").to_path_buf();
    run({
        let mut c = std::process::Command::new("bash");
        c.args(["-euo", "pipefail", "-c", &format!("{} --timeout 5m", install.trim())]).current_dir(dir.path());
        for (k, v) in helm_env.get_envs() {
            if let Some(v) = v {
                c.env(k, v);
            }
        }
        let path = std::env::var("PATH").unwrap_or_default();
        c.env("PATH", format!("{}:{path}", helm_dir.display()));
        c
    });
    let crds =
        output(kc, &["get", "crd", "externalsecrets.external-secrets.io", "-o", "jsonpath={.spec.versions[*].name}"]);
    assert!(crds.split_whitespace().any(|v| v == "v1"), "Keyward's CRD serves v1: {crds}");
    // The Pods of both store providers run.
    for provider in ["vault", "aws", "webhook", "azure", "gcp"] {
        eventually(
            &format!("the {provider} provider Pod is Ready"),
            Duration::from_secs(60),
            || {
                let ready = output(
                    kc,
                    &[
                        "get",
                        "pods",
                        "-n",
                        NS,
                        "-l",
                        &format!("app.kubernetes.io/component=provider-{provider}"),
                        "-o",
                        r#"jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}"#,
                    ],
                );
                (ready == "True").then_some(())
            },
            || describe(kc, NS),
        )
        .await;
    }

    upstream.assert_taken_over(&vault, &moto, Duration::from_secs(120)).await;
    kinds.assert_served(&vault, Duration::from_secs(120)).await;

    // Clean slate: the tenant namespace goes while Keyward still runs (the PushSecret's
    // finalizer deletes what it pushed), then the cluster-scoped objects and the release.
    let _ = kubectl(kc).args(["delete", "namespace", TENANT, "--wait=true", "--timeout=120s"]).output();
    for kind in ["clustersecretstore", "clusterexternalsecret"] {
        let _ = kubectl(kc).args(["delete", kind, "--all", "--wait=true", "--timeout=60s"]).output();
    }
    for (kind, name) in kinds.cluster_scoped() {
        let _ = kubectl(kc).args(["delete", kind, &name, "--wait=true", "--timeout=60s"]).output();
    }
    let mut uninstall = helm(kc);
    uninstall.args(["uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "3m"]);
    run(uninstall);
    let _ = kubectl(kc).args(["delete", "namespace", NS, "--wait=true", "--timeout=120s"]).output();
}
