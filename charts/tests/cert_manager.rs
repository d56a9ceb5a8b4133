//! The chart's cert-manager mode with real cert-manager: its controller and CA injector (built
//! from the pinned cert-manager Go module, see `e2e/scripts/build-tools.sh`) run as local
//! processes against the local control plane, next to `helm install --set
//! certManager.enabled=true`. The release uses webhook selectors that never match, so it cannot
//! block other tests.

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use keyward_certs::bundle::{same_authority, signed_by, subject_alt_names, verifies_against_bundle};
use keyward_chart_tests::installed::kubectl_input;
use keyward_chart_tests::{
    CertManager, CertManagerOptions, cert_manager, helm_install, helm_uninstall, test_values, write_values,
};
use keyward_e2e::{control_plane, free_port, spawn_logged, with_temp_namespace, workspace_binary};
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use time::OffsetDateTime;
use x509_parser::extensions::ParsedExtension;
use x509_parser::pem::parse_x509_pem;

const TIMEOUT: Duration = Duration::from_secs(60);

fn certificates(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&gvk))
}

/// The status of condition `kind` of a cert-manager object.
fn condition(obj: &DynamicObject, kind: &str) -> Option<String> {
    obj.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str().map(str::to_string))
}

/// Polls `check` until it returns `Some`, while cert-manager keeps running.
async fn eventually<T, Fut: Future<Output = Option<T>>>(
    cm: &mut CertManager,
    what: &str,
    mut check: impl FnMut() -> Fut,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        cm.assert_running();
        assert!(start.elapsed() < TIMEOUT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until every Certificate is Ready and every leaf of the release's CA Issuer `ca` (the
/// chart names the Issuer and the CA's Secret alike) carries that CA's authority in its `ca.crt`. cert-manager can, rarely, issue a new CA twice at install
/// (its cache behind its own write); when the second issuance could not see the first key, leaves
/// signed in between carry the first CA. `docs/certificates.md` tells operators to renew them,
/// and so does this, saying so on stderr.
async fn all_ready_under_one_authority(
    certs: &Api<DynamicObject>,
    secrets: &Api<Secret>,
    ca: &str,
    cm: &mut CertManager,
) {
    let ready = |list: &[DynamicObject]| list.iter().all(|c| condition(c, "Ready").as_deref() == Some("True"));
    let list = eventually(cm, "every Certificate Ready", || async {
        let list = certs.list(&Default::default()).await.expect("list Certificates").items;
        ready(&list).then_some(list)
    })
    .await;
    let (ca_cert, _, _) = tls_secret(secrets, ca).await.expect("the release's CA Secret");
    for cert in &list {
        let (Some(name), Some(secret)) = (cert.metadata.name.as_deref(), cert.data["spec"]["secretName"].as_str())
        else {
            continue;
        };
        if cert.data["spec"]["issuerRef"]["name"] != ca {
            continue;
        }
        let (_, _, bundle) = tls_secret(secrets, secret).await.unwrap_or_else(|| panic!("Secret {secret}"));
        if !same_authority(&bundle, &ca_cert) {
            eprintln!("{name}: signed by an earlier issuance of the CA; renewing it as docs/certificates.md says");
            renew(certs, name, cm).await;
        }
    }
}

/// Renews Certificate `name` as `cmctl renew` does (the Issuing condition set on its status) and
/// waits for the next revision, Ready. The condition is set again if it goes before a new
/// revision comes: a status write of cert-manager's still settling the Certificate can drop it.
async fn renew(certs: &Api<DynamicObject>, name: &str, cm: &mut CertManager) {
    let revision_of = |cert: &DynamicObject| cert.data["status"]["revision"].as_i64();
    let revision = revision_of(&certs.get(name).await.expect("Certificate")).expect("status.revision");
    eventually(cm, "a new revision, Ready", || async {
        let mut cert = certs.get(name).await.expect("Certificate");
        let issuing = condition(&cert, "Issuing");
        if revision_of(&cert).is_some_and(|r| r > revision) {
            return (condition(&cert, "Ready").as_deref() == Some("True") && issuing.is_none()).then_some(());
        }
        if issuing.is_none() {
            let conditions = cert.data["status"]["conditions"].as_array_mut().expect("conditions");
            conditions.push(serde_json::json!({
                "type": "Issuing",
                "status": "True",
                "reason": "ManuallyTriggered",
                "message": "Certificate re-issuance manually triggered",
                "lastTransitionTime": OffsetDateTime::now_utc()
                    .format(&time::format_description::well_known::Rfc3339)
                    .expect("time format"),
            }));
            // A conflict (cert-manager wrote first) is tried again on the next round.
            let _ = certs.replace_status(name, &PostParams::default(), &cert).await;
        }
        None
    })
    .await;
}

/// `tls.crt`, `tls.key` and `ca.crt` of a Secret, as text.
async fn tls_secret(secrets: &Api<Secret>, name: &str) -> Option<(String, String, String)> {
    let data = secrets.get_opt(name).await.expect("get Secret")?.data?;
    let text = |k: &str| data.get(k).map(|b| String::from_utf8(b.0.clone()).expect("PEM is text"));
    Some((text("tls.crt")?, text("tls.key")?, text("ca.crt")?))
}

/// The caBundle of every webhook of both configurations named `name` (`None` while unset).
async fn ca_bundles(client: &Client, name: &str) -> Vec<Option<String>> {
    let vwc = Api::<ValidatingWebhookConfiguration>::all(client.clone()).get(name).await.expect("vwc");
    let mwc = Api::<MutatingWebhookConfiguration>::all(client.clone()).get(name).await.expect("mwc");
    let validating = vwc.webhooks.unwrap_or_default().into_iter().map(|w| w.client_config.ca_bundle);
    let mutating = mwc.webhooks.unwrap_or_default().into_iter().map(|w| w.client_config.ca_bundle);
    validating.chain(mutating).map(|b| b.map(|b| String::from_utf8(b.0).expect("PEM is text"))).collect()
}

/// Whether the certificate is a CA, and its extended key usages (`serverAuth`, `clientAuth`).
fn ca_and_usages(pem: &str) -> (bool, Vec<&'static str>) {
    let (_, pem) = parse_x509_pem(pem.as_bytes()).expect("PEM");
    let cert = pem.parse_x509().expect("X.509");
    let mut is_ca = false;
    let mut usages = Vec::new();
    for ext in cert.extensions() {
        match ext.parsed_extension() {
            ParsedExtension::BasicConstraints(bc) => is_ca = bc.ca,
            ParsedExtension::ExtendedKeyUsage(eku) => {
                if eku.server_auth {
                    usages.push("serverAuth");
                }
                if eku.client_auth {
                    usages.push("clientAuth");
                }
            }
            _ => {}
        }
    }
    (is_ca, usages)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cert_manager_issues_the_charts_certificates_injects_the_ca_and_reissues() {
    with_temp_namespace(&[], |client, ns| async move {
        let cp = control_plane().await;
        // Scoped to this namespace, with its Lease here: other tests sharing the control plane
        // may run cert-manager too.
        let options = CertManagerOptions {
            namespace: Some(ns.clone()),
            leader_election_namespace: Some(ns.clone()),
            ..Default::default()
        };
        let mut cm = cert_manager(cp.kubeconfig(), &options).await;
        let dir = tempfile::tempdir().expect("tempdir");
        let f = format!("{ns}-cm");
        let values = write_values(dir.path(), "values.yaml", &test_values(&f, true));
        helm_install(cp.kubeconfig(), "keyward", &ns, &values);

        // Every Certificate of the chart becomes Ready.
        let certs = certificates(&client, &ns);
        let wanted = [
            format!("{f}-ca"),
            format!("{f}-webhook"),
            format!("{f}-provider-kubernetes"),
            format!("{f}-provider-fake"),
            format!("{f}-reconciler-client"),
        ];
        let listed = certs.list(&Default::default()).await.expect("list Certificates");
        let mut names: Vec<String> = listed.items.iter().filter_map(|c| c.metadata.name.clone()).collect();
        names.sort();
        let mut sorted = wanted.to_vec();
        sorted.sort();
        assert_eq!(names, sorted, "the chart's Certificates");
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        all_ready_under_one_authority(&certs, &secrets, &format!("{f}-ca"), &mut cm).await;

        // The chain: a self-signed CA, and leaves it signed for the Services' DNS names.
        let (ca, _, ca_bundle) = tls_secret(&secrets, &format!("{f}-ca")).await.expect("CA Secret");
        assert!(same_authority(&ca, &ca_bundle), "the CA Secret's ca.crt is the CA itself");
        assert!(signed_by(&ca, &ca) && ca_and_usages(&ca).0, "the CA is a self-signed CA certificate");
        let now = OffsetDateTime::now_utc();
        let leaves = [
            (format!("{f}-webhook-tls"), format!("{f}-webhook"), "serverAuth"),
            (format!("{f}-provider-kubernetes-tls"), format!("{f}-provider-kubernetes"), "serverAuth"),
            (format!("{f}-provider-fake-tls"), format!("{f}-provider-fake"), "serverAuth"),
        ];
        for (secret, service, usage) in &leaves {
            let (leaf, _, bundle) = tls_secret(&secrets, secret).await.unwrap_or_else(|| panic!("{secret}"));
            assert!(same_authority(&bundle, &ca), "{secret}: ca.crt is the chart's CA");
            assert!(verifies_against_bundle(&leaf, &ca, now), "{secret}: signed by the CA and valid now");
            let sans = subject_alt_names(&leaf);
            for name in [
                service.clone(),
                format!("{service}.{ns}"),
                format!("{service}.{ns}.svc"),
                format!("{service}.{ns}.svc.cluster.local"),
            ] {
                assert!(sans.contains(&name), "{secret}: SAN {name} in {sans:?}");
            }
            assert_eq!(ca_and_usages(&leaf), (false, vec![*usage]), "{secret}: a leaf for {usage}");
        }
        let (client_cert, _, bundle) = tls_secret(&secrets, "keyward-provider-tls").await.expect("client Secret");
        assert!(same_authority(&bundle, &ca) && verifies_against_bundle(&client_cert, &ca, now));
        assert_eq!(ca_and_usages(&client_cert), (false, vec!["clientAuth"]), "the reconciler's client certificate");

        // The CA injector fills every webhook's caBundle with the issuing CA.
        let injected = eventually(&mut cm, "caBundle injected into every webhook", || async {
            let bundles = ca_bundles(&client, &f).await;
            bundles.iter().all(Option::is_some).then_some(bundles)
        })
        .await;
        assert!(injected.len() >= 2, "validating and mutating webhooks: {}", injected.len());
        for bundle in injected.iter().flatten() {
            assert!(same_authority(bundle, &ca), "caBundle is the chart's CA");
        }

        // A deleted Secret is issued again: new key, same CA, still trusted by the caBundle.
        let webhook_secret = format!("{f}-webhook-tls");
        let (old_leaf, old_key, _) = tls_secret(&secrets, &webhook_secret).await.expect("webhook Secret");
        secrets.delete(&webhook_secret, &DeleteParams::default()).await.expect("delete Secret");
        let (leaf, key, _) = eventually(&mut cm, "the webhook Secret issued again", || async {
            tls_secret(&secrets, &webhook_secret).await.filter(|(leaf, _, _)| *leaf != old_leaf)
        })
        .await;
        assert_ne!(key, old_key, "rotationPolicy Always: a new private key");
        assert!(verifies_against_bundle(&leaf, &ca, OffsetDateTime::now_utc()), "the new leaf chains to the CA");
        for bundle in ca_bundles(&client, &f).await {
            assert!(same_authority(&bundle.expect("caBundle"), &ca), "caBundle unchanged: the CA did not change");
        }

        // A manual renewal (what `cmctl renew` does: the Issuing condition set on the status)
        // re-issues the Certificate as a new revision.
        let name = format!("{f}-provider-fake");
        let secret = format!("{name}-tls");
        let (old_leaf, _, _) = tls_secret(&secrets, &secret).await.expect("provider Secret");
        renew(&certs, &name, &mut cm).await;
        let (leaf, _, _) = tls_secret(&secrets, &secret).await.expect("provider Secret");
        assert_ne!(leaf, old_leaf, "renewal wrote a new certificate");
        assert!(verifies_against_bundle(&leaf, &ca, OffsetDateTime::now_utc()));

        // A renewed CA keeps its key (rotationPolicy Never): a new certificate, the same
        // authority, so leaves signed before it and the ca.crt they carry stay trusted both ways.
        renew(&certs, &format!("{f}-ca"), &mut cm).await;
        let (renewed_ca, _, _) = tls_secret(&secrets, &format!("{f}-ca")).await.expect("CA Secret");
        assert_ne!(renewed_ca, ca, "renewal wrote a new CA certificate");
        assert!(same_authority(&renewed_ca, &ca), "the renewed CA is the same authority");
        assert!(verifies_against_bundle(&leaf, &renewed_ca, OffsetDateTime::now_utc()), "older leaves still verify");
        cm.assert_running();

        // Stopping cert-manager gives both Leases up, so a successor can start at once.
        drop(cm);
        let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
        for name in ["cert-manager-controller", "cert-manager-cainjector-leader-election"] {
            let lease = leases.get(name).await.unwrap_or_else(|e| panic!("Lease {name}: {e}"));
            let holder = lease.spec.and_then(|s| s.holder_identity).unwrap_or_default();
            assert_eq!(holder, "", "Lease {name} released on shutdown");
        }

        helm_uninstall(cp.kubeconfig(), "keyward", &ns);
    })
    .await;
}

/// A user's issuer (here a CA Issuer the "user" made, standing for a ClusterIssuer shared with
/// tenants) named in `certManager.issuerRef` signs the webhook's serving certificate only. A
/// certificate it signs for `keyward-reconciler` — what any tenant of a shared issuer can ask
/// for — cannot call a provider serving the chart's TLS Secret: the provider (a real
/// `keyward-provider-fake` process here) verifies callers against the release's own CA, which
/// also signed the reconciler's client certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_issuer_signs_only_the_webhook_and_cannot_mint_a_caller_providers_accept() {
    with_temp_namespace(&[], |client, ns| async move {
        let cp = control_plane().await;
        let options = CertManagerOptions {
            namespace: Some(ns.clone()),
            leader_election_namespace: Some(ns.clone()),
            ..Default::default()
        };
        let mut cm = cert_manager(cp.kubeconfig(), &options).await;
        let user_issuer = r#"apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: corp-selfsigned}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: corp-ca}
spec:
  isCA: true
  commonName: corp-ca
  secretName: corp-ca
  privateKey: {algorithm: ECDSA, size: 256, rotationPolicy: Never}
  issuerRef: {name: corp-selfsigned, kind: Issuer, group: cert-manager.io}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: corp}
spec:
  ca: {secretName: corp-ca}
"#;
        let (ok, out) = kubectl_input(cp.kubeconfig(), &["apply", "-n", &ns, "-f", "-"], user_issuer);
        assert!(ok, "{out}");
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let corp_ca = eventually(&mut cm, "the user's CA", || async {
            tls_secret(&secrets, "corp-ca").await.map(|(cert, _, _)| cert)
        })
        .await;

        let dir = tempfile::tempdir().expect("tempdir");
        let f = format!("{ns}-ui");
        let values = test_values(&f, true).replace(
            "certManager:\n  enabled: true\n",
            "certManager:\n  enabled: true\n  issuerRef: {name: corp, kind: Issuer, group: cert-manager.io}\n",
        );
        assert!(values.contains("name: corp,"), "{values}");
        helm_install(cp.kubeconfig(), "keyward", &ns, &write_values(dir.path(), "values.yaml", &values));
        let certs = certificates(&client, &ns);
        all_ready_under_one_authority(&certs, &secrets, &format!("{f}-ca"), &mut cm).await;

        let (own_ca, _, _) = tls_secret(&secrets, &format!("{f}-ca")).await.expect("the release's CA");
        assert!(!same_authority(&own_ca, &corp_ca), "the release's CA is its own");
        let (_, _, webhook_ca) = tls_secret(&secrets, &format!("{f}-webhook-tls")).await.expect("webhook Secret");
        assert!(same_authority(&webhook_ca, &corp_ca), "the user's issuer signs the webhook's serving certificate");
        eventually(&mut cm, "the user's CA injected into every caBundle", || async {
            let bundles = ca_bundles(&client, &f).await;
            bundles.iter().all(|b| b.as_deref().is_some_and(|b| same_authority(b, &corp_ca))).then_some(())
        })
        .await;
        let (server_cert, server_key, provider_ca) =
            tls_secret(&secrets, &format!("{f}-provider-fake-tls")).await.expect("provider Secret");
        let (client_cert, client_key, client_ca) =
            tls_secret(&secrets, "keyward-provider-tls").await.expect("reconciler Secret");
        assert!(same_authority(&provider_ca, &own_ca), "providers verify callers against the release's CA");
        assert!(same_authority(&client_ca, &own_ca), "the reconciler verifies providers against the release's CA");

        // What a tenant of the user's issuer can get: a client certificate for the reconciler's name.
        let forged = r#"apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: forged}
spec:
  secretName: forged
  commonName: keyward-reconciler
  usages: ["digital signature", "key encipherment", "client auth"]
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {name: corp, kind: Issuer, group: cert-manager.io}
"#;
        let (ok, out) = kubectl_input(cp.kubeconfig(), &["apply", "-n", &ns, "-f", "-"], forged);
        assert!(ok, "{out}");
        let (forged_cert, forged_key, _) =
            eventually(&mut cm, "the forged certificate", || async { tls_secret(&secrets, "forged").await }).await;
        let now = OffsetDateTime::now_utc();
        assert!(verifies_against_bundle(&forged_cert, &corp_ca, now), "issued by the user's CA");
        assert!(!verifies_against_bundle(&forged_cert, &provider_ca, now), "not trusted by the provider");

        // A real provider process with the chart's TLS Secret as its TLS directory.
        let tls_dir = tempfile::tempdir().expect("tls dir");
        for (file, pem) in [("ca.crt", &provider_ca), ("tls.crt", &server_cert), ("tls.key", &server_key)] {
            std::fs::write(tls_dir.path().join(file), pem).expect("write TLS file");
        }
        let (grpc, health) = (free_port(), free_port());
        let mut cmd = std::process::Command::new(workspace_binary("keyward-provider-fake"));
        cmd.env("KUBECONFIG", cp.kubeconfig())
            .env("KEYWARD_LISTEN", format!("127.0.0.1:{grpc}"))
            .env("KEYWARD_HEALTH_LISTEN", format!("127.0.0.1:{health}"))
            .env("KEYWARD_TLS_DIR", tls_dir.path())
            .env("KEYWARD_LOG_FORMAT", "text");
        let mut provider = spawn_logged("keyward-provider-fake", cmd);
        let server_name = format!("{f}-provider-fake.{ns}.svc");
        let start = Instant::now();
        loop {
            match capabilities(grpc, &server_name, &client_ca, &client_cert, &client_key).await {
                Ok(()) => break,
                Err(e) => {
                    assert!(provider.is_running(), "the provider exited:\n{}", provider.log());
                    assert!(
                        start.elapsed() < TIMEOUT,
                        "the reconciler's certificate is refused: {e}\n{}",
                        provider.log()
                    );
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
        let refused = capabilities(grpc, &server_name, &client_ca, &forged_cert, &forged_key).await;
        assert!(refused.is_err(), "a reconciler-named certificate of the user's issuer must not get through");
        let start = Instant::now();
        while !provider.log().contains("TLS handshake refused") {
            assert!(start.elapsed() < TIMEOUT, "no refused handshake logged:\n{}", provider.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        provider.terminate(Duration::from_secs(5));
        helm_uninstall(cp.kubeconfig(), "keyward", &ns);
    })
    .await;
}

/// `Capabilities` over mTLS to `127.0.0.1:port`, verifying the server as `server_name`.
async fn capabilities(port: u16, server_name: &str, server_ca: &str, cert: &str, key: &str) -> Result<(), String> {
    use keyward_proto::v1::CapabilitiesRequest;
    use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(server_ca))
        .domain_name(server_name)
        .identity(Identity::from_pem(cert, key));
    let channel = Endpoint::from_shared(format!("https://127.0.0.1:{port}"))
        .map_err(|e| e.to_string())?
        .tls_config(tls)
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .connect()
        .await
        .map_err(|e| format!("connect: {e:?}"))?;
    SecretStoreProviderClient::new(channel)
        .capabilities(CapabilitiesRequest::default())
        .await
        .map(|_| ())
        .map_err(|s| format!("{s:?}"))
}
