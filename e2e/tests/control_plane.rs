//! The local control plane is a real Kubernetes API server with Keyward's CRDs: schema
//! validation, defaulting, printer columns and `kubectl explain` behave as in a cluster.

use std::path::PathBuf;

use keyward_e2e::{accepts_in, control_plane, kubectl, rejects_in, repo_root, with_temp_namespace};

fn fixtures(kind: &str) -> Vec<(PathBuf, String)> {
    let dir = repo_root().join("e2e/fixtures").join(kind);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read fixture");
            (p, text)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

fn run(args: &[&str]) -> String {
    let out = kubectl().args(args).output().expect("run kubectl");
    assert!(out.status.success(), "kubectl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[tokio::test]
async fn the_api_server_is_ready_and_runs_the_pinned_version() {
    control_plane().await;
    assert_eq!(run(&["get", "--raw", "/readyz"]).trim(), "ok");
    let go_mod = std::fs::read_to_string(repo_root().join("e2e/controlplane/go.mod")).expect("go.mod");
    let pinned = go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("k8s.io/kubernetes v"))
        .expect("k8s.io/kubernetes is pinned")
        .trim()
        .to_string();
    let version: serde_json::Value = serde_json::from_str(&run(&["get", "--raw", "/version"])).expect("json");
    assert_eq!(version["gitVersion"], format!("v{pinned}"));
}

#[tokio::test]
async fn crds_are_established_and_explained() {
    control_plane().await;
    for crd in keyward_crds::generate::all_crds(keyward_provider_registry::PROVIDER_KINDS) {
        let name = crd.metadata.name.expect("crd name");
        let jsonpath = "{.status.conditions[?(@.type==\"Established\")].status}";
        assert_eq!(run(&["get", "crd", &name, "-o", &format!("jsonpath={jsonpath}")]), "True", "{name}");
    }
    let explained = run(&["explain", "externalsecret.spec"]);
    assert!(explained.contains("secretStoreRef"), "{explained}");
    assert!(explained.contains("The store used for every entry"), "{explained}");
    let explained = run(&["explain", "clusterprovider.spec.conditions"]);
    assert!(explained.contains("any one condition admits"), "{explained}");
}

#[tokio::test]
async fn valid_manifests_are_accepted() {
    with_temp_namespace(&[], |_client, ns| async move {
        for (path, manifest) in fixtures("valid") {
            // Cluster-scoped fixtures may already exist from another test: `unchanged` is fine.
            let out = accepts_in(&ns, &manifest);
            assert!(out.contains(".external-secrets.io/"), "{}: {out}", path.display());
        }
    })
    .await;
}

#[tokio::test]
async fn schema_violations_are_rejected_with_the_field_named() {
    with_temp_namespace(&[], |_client, ns| async move {
        for (path, manifest) in fixtures("invalid") {
            let expected = manifest
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("# expect: "))
                .unwrap_or_else(|| panic!("{} has no '# expect:' first line", path.display()));
            rejects_in(&ns, &manifest, expected);
        }
    })
    .await;
}

#[tokio::test]
async fn authentication_scope_defaults_to_provider_namespace() {
    with_temp_namespace(&[], |_client, ns| async move {
        let name = format!("{ns}-defaulted");
        let manifest = format!(
            "apiVersion: external-secrets.io/v1\nkind: ClusterProvider\nmetadata: {{name: {name}}}\nspec:\n  config:\n    \
             address: p.keyward.svc:8443\n    providerRef: {{apiVersion: provider.external-secrets.io/v2alpha1, \
             kind: Kubernetes, name: remote, namespace: creds}}\n"
        );
        accepts_in(&ns, &manifest);
        let scope = run(&["get", "clusterprovider", &name, "-o", "jsonpath={.spec.authenticationScope}"]);
        let _ = kubectl().args(["delete", "clusterprovider", &name]).output();
        assert_eq!(scope, "ProviderNamespace");
    })
    .await;
}

#[tokio::test]
async fn printer_columns_show_in_kubectl_get() {
    with_temp_namespace(&[], |_client, ns| async move {
        for (_, manifest) in fixtures("valid").into_iter().filter(|(p, _)| {
            let name = p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            ["externalsecret-data.yaml", "externalsecret-datafrom.yaml", "provider.yaml", "pushsecret.yaml"]
                .contains(&name.as_str())
        }) {
            accepts_in(&ns, &manifest);
        }
        let es = run(&["get", "externalsecrets", "-n", &ns]);
        let header = es.lines().next().unwrap_or_default();
        // Upstream's columns, in its order.
        let columns: Vec<&str> = header.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        assert_eq!(
            columns,
            ["NAME", "STORETYPE", "STORE", "REFRESH INTERVAL", "STATUS", "READY", "LAST SYNC"],
            "ExternalSecret columns"
        );
        assert!(es.contains("team-store") && es.contains("15m") && es.contains("Provider"), "{es}");
        let pushes = run(&["get", "ps", "-n", &ns]);
        assert!(pushes.lines().next().unwrap_or_default().contains("LAST SYNC"), "PushSecret columns: {pushes}");
        // Upstream's selectable fields.
        for (selector, want) in [
            ("spec.secretStoreRef.name=team-store", "externalsecret.external-secrets.io/db-credentials\n"),
            ("spec.secretStoreRef.kind=ClusterProvider", "externalsecret.external-secrets.io/app-config\n"),
            ("spec.target.name=db-credentials", "externalsecret.external-secrets.io/db-credentials\n"),
            ("spec.refreshInterval=15m", "externalsecret.external-secrets.io/db-credentials\n"),
        ] {
            let got = run(&["get", "es", "-n", &ns, "--field-selector", selector, "-o", "name"]);
            assert_eq!(got, want, "--field-selector {selector}");
        }
        let providers = run(&["get", "prov", "-n", &ns]);
        let header = providers.lines().next().unwrap_or_default();
        for column in ["READY", "ADDRESS", "AGE"] {
            assert!(header.contains(column), "Provider columns: {header}");
        }
        assert!(providers.contains("keyward-provider-kubernetes.keyward.svc:8443"), "{providers}");
        let cluster_fixture = fixtures("valid").into_iter().find(|(p, _)| p.ends_with("clusterprovider-1.yaml"));
        accepts_in(&ns, &cluster_fixture.expect("clusterprovider fixture").1);
        let cluster = run(&["get", "cprov", "fixture-shared-1"]);
        let header = cluster.lines().next().unwrap_or_default();
        for column in ["READY", "ADDRESS", "AUTHSCOPE", "AGE"] {
            assert!(header.contains(column), "ClusterProvider columns: {header}");
        }
        assert!(cluster.contains("ManifestNamespace"), "{cluster}");
        // SecretStore / ClusterSecretStore: upstream's columns; a provider Keyward does not serve
        // is kept as written.
        for file in ["clustersecretstore-fake.yaml", "secretstore-vault.yaml"] {
            let fixture = fixtures("valid").into_iter().find(|(p, _)| p.ends_with(file));
            accepts_in(&ns, &fixture.expect("store fixture").1);
        }
        let stores = run(&["get", "css", "fixture-fake-store"]);
        let header = stores.lines().next().unwrap_or_default();
        for column in ["AGE", "STATUS", "CAPABILITIES", "READY"] {
            assert!(header.contains(column), "ClusterSecretStore columns: {header}");
        }
        let vault =
            run(&["get", "ss", "-n", &ns, "fixture-vault-backend", "-o", "jsonpath={.spec.provider.vault.server}"]);
        assert_eq!(vault, "http://my.vault.server:8200");
        // Every Keyward kind is in the `external-secrets` category.
        let listed = run(&["api-resources", "--categories", "external-secrets", "-o", "name"]);
        for kind in [
            "externalsecrets",
            "pushsecrets",
            "providers",
            "clusterproviders",
            "secretstores",
            "clustersecretstores",
            "kubernetes",
            "fakes",
            "vaults",
            "secretsmanagers",
        ] {
            assert!(
                listed.lines().any(|l| l.starts_with(&format!("{kind}."))),
                "{kind} missing from category: {listed}"
            );
        }
    })
    .await;
}

/// A cluster that once stored ExternalSecrets and stores as upstream's `v1beta1` lists it in
/// each CRD's `status.storedVersions`; the API server refuses any CRD that drops such a
/// version. Keyward's CRDs keep it (neither served nor stored), so they apply over that cluster.
#[tokio::test]
async fn crds_apply_over_a_cluster_that_stored_upstreams_v1beta1() {
    control_plane().await;
    let crds = ["externalsecrets", "clusterexternalsecrets", "secretstores", "clustersecretstores"]
        .map(|plural| format!("{plural}.external-secrets.io"));
    let stored_versions = |crd: &str, versions: &str| {
        let patch = format!(r#"{{"status":{{"storedVersions":{versions}}}}}"#);
        run(&["patch", "crd", crd, "--subresource=status", "--type=merge", "-p", &patch]);
    };
    for crd in &crds {
        // What an upstream install that started on v1beta1 leaves in the CRD's status.
        stored_versions(crd, r#"["v1beta1","v1"]"#);
    }
    let dir = repo_root().join("crds/yaml");
    let applied = run(&["apply", "--server-side", "--force-conflicts", "-f", &dir.to_string_lossy()]);
    assert!(applied.contains("externalsecrets.external-secrets.io serverside-applied"), "{applied}");
    for crd in &crds {
        let served = run(&["get", "crd", crd, "-o", "jsonpath={.spec.versions[?(@.name==\"v1beta1\")].served}"]);
        assert_eq!(served, "false", "{crd}: v1beta1 is kept but not served");
        let stored = run(&["get", "crd", crd, "-o", "jsonpath={.status.storedVersions}"]);
        assert!(stored.contains("v1beta1"), "{crd}: {stored}");
        // Once the objects are rewritten as v1 (docs/migrating.md), the status says so.
        stored_versions(crd, r#"["v1"]"#);
    }
}

/// A served store block is typed from its registry row (`make generate`): the API server refuses
/// a misspelt field in it under strict field validation (kubectl's default) and prunes it when
/// validation is off, and `kubectl explain` shows the block's fields. A block Keyward does not
/// serve stays open: its fields are kept as written.
#[tokio::test]
async fn a_misspelt_field_of_a_served_store_block_is_refused_or_pruned() {
    with_temp_namespace(&[], |_client, ns| async move {
        let store = |name: &str, block: &str| {
            format!(
                "apiVersion: external-secrets.io/v1\nkind: SecretStore\nmetadata: {{name: {name}, namespace: {ns}}}\n\
                 spec:\n  provider:\n    {block}\n"
            )
        };
        let misspelt =
            store("typo", "webhook: {url: 'https://values.example/{{ .remoteRef.key }}', reslt: {jsonPath: $.v}}");
        rejects_in(&ns, &misspelt, r#"unknown field "spec.provider.webhook.reslt""#);
        let file = std::env::temp_dir().join(format!("{ns}-typo.yaml"));
        std::fs::write(&file, &misspelt).expect("write manifest");
        run(&["apply", "--validate=false", "-f", &file.to_string_lossy()]);
        let _ = std::fs::remove_file(&file);
        let kept = run(&["get", "secretstore", "typo", "-n", &ns, "-o", "jsonpath={.spec.provider.webhook}"]);
        assert!(kept.contains("values.example") && !kept.contains("reslt"), "the misspelt field is pruned: {kept}");
        // An upstream provider Keyward does not serve keeps what it was given.
        accepts_in(
            &ns,
            &store("unserved", "doppler: {auth: {secretRef: {dopplerToken: {name: t, key: k}}}, projct: p}"),
        );
        let kept =
            run(&["get", "secretstore", "unserved", "-n", &ns, "-o", "jsonpath={.spec.provider.doppler.projct}"]);
        assert_eq!(kept, "p");
        let explained = run(&["explain", "clustersecretstore.spec.provider.barbican"]);
        assert!(explained.contains("authURL"), "{explained}");
    })
    .await;
}
