//! The Fake provider as a process, over real mTLS, reading Fake objects from the local
//! control plane.

use std::time::{Duration, Instant};

use keyward_certs::{CertificateAuthority, Usage};
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::{ExternalSecretDataRemoteRef, GetSecretRequest, ValidateRequest};
use keyward_provider_fake::api::Fake;
use keyward_provider_runtime::testkit::{RunningProvider, connect, http_get, launch_with, provider_ref};
use kube::Api;
use kube::api::PostParams;

async fn start_fake(log_format: &str) -> RunningProvider {
    launch_with("keyward-provider-fake", &[], &["--log-format", log_format]).await.expect("start the Fake provider")
}

async fn create_fake(client: kube::Client, ns: &str) {
    let fake: Fake = serde_json::from_value(serde_json::json!({
        "apiVersion": "provider.external-secrets.io/v2alpha1",
        "kind": "Fake",
        "metadata": {"name": "static", "namespace": ns},
        "spec": {"data": [
            {"key": "db", "value": "{\"user\":\"app\",\"password\":\"s3cret\",\"port\":5432}"},
            {"key": "db", "version": "v1", "value": "old"},
            {"key": "db-replica", "value": "{\"user\":\"ro\"}"},
            {"key": "api-token", "value": "t0ken"}
        ]}
    }))
    .expect("Fake object");
    Api::<Fake>::namespaced(client, ns).create(&PostParams::default(), &fake).await.expect("create Fake");
}

fn remote(key: &str, property: &str, version: &str) -> Option<ExternalSecretDataRemoteRef> {
    Some(ExternalSecretDataRemoteRef {
        key: key.into(),
        property: property.into(),
        version: version.into(),
        ..Default::default()
    })
}

/// What the conformance suite does not cover: versions and non-string properties of Fake
/// entries, the runtime's request checks, health, reflection, metrics and what the log holds.
#[tokio::test]
async fn serves_versions_health_reflection_and_metrics() {
    with_temp_namespace(&[], |client, ns| async move {
        create_fake(client, &ns).await;
        let running = start_fake("text").await;
        let pki = &running.pki;
        let id = pki.client().expect("client cert");
        let mut c = running.client.clone();
        let pref = Some(provider_ref("Fake", "static", "", "Provider"));
        let get = |key: &str, property: &str, version: &str| GetSecretRequest {
            remote_ref: remote(key, property, version),
            provider_ref: pref.clone(),
            source_namespace: ns.clone(),
            max_age_millis: 0,
        };

        // A number property, a version, a version that does not exist.
        assert_eq!(c.get_secret(get("db", "port", "")).await.expect("port").into_inner().value, b"5432");
        assert_eq!(c.get_secret(get("db", "", "v1")).await.expect("v1").into_inner().value, b"old");
        let e = c.get_secret(get("db", "", "v9")).await.expect_err("missing version");
        assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");

        // Request checks run before the provider.
        let e = c
            .get_secret(GetSecretRequest { provider_ref: None, ..get("db", "", "") })
            .await
            .expect_err("no provider_ref");
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("provider_ref is required"), "{}", e.message());
        let e = c
            .get_secret(GetSecretRequest { source_namespace: String::new(), ..get("db", "", "") })
            .await
            .expect_err("no source namespace");
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("source_namespace is required"), "{}", e.message());

        // A config that does not exist is a configuration problem, for reads and for Validate.
        let e = c
            .get_secret(GetSecretRequest {
                provider_ref: Some(provider_ref("Fake", "missing", "", "Provider")),
                ..get("db", "", "")
            })
            .await
            .expect_err("missing config");
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
        let v = c
            .validate(ValidateRequest {
                provider_ref: Some(provider_ref("Fake", "missing", &ns, "ClusterProvider")),
                source_namespace: String::new(),
                max_age_millis: 0,
            })
            .await
            .expect("validate")
            .into_inner();
        assert!(!v.valid && v.error.contains("not found"), "{v:?}");

        // gRPC health and reflection on the same mTLS port.
        let channel = tonic::transport::Endpoint::from_shared(format!("https://{}", running.grpc))
            .expect("endpoint")
            .tls_config(
                tonic::transport::ClientTlsConfig::new()
                    .ca_certificate(tonic::transport::Certificate::from_pem(pki.ca.cert_pem()))
                    .identity(tonic::transport::Identity::from_pem(&id.cert_pem, &id.key_pem))
                    .domain_name("localhost"),
            )
            .expect("tls")
            .connect()
            .await
            .expect("connect");
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
        let status = health
            .check(tonic_health::pb::HealthCheckRequest { service: keyward_proto::SERVICE_NAME.into() })
            .await
            .expect("health")
            .into_inner()
            .status;
        assert_eq!(status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);
        use tonic_reflection::pb::v1::{
            ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
            server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        };
        let mut reflection = ServerReflectionClient::new(channel);
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut responses =
            reflection.server_reflection_info(tokio_stream::iter([request])).await.expect("reflection").into_inner();
        let first = responses.message().await.expect("reflection answer").expect("one answer");
        let Some(MessageResponse::ListServicesResponse(list)) = first.message_response else {
            panic!("unexpected reflection answer {first:?}");
        };
        let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
        assert!(names.contains(&keyward_proto::SERVICE_NAME), "{names:?}");

        // Health port and metrics.
        assert_eq!(http_get(running.health, "/healthz").await.expect("healthz").0, 200);
        let (code, metrics) = http_get(running.health, "/metrics").await.expect("metrics");
        assert_eq!(code, 200);
        assert!(metrics.contains(r#"grpc_server_requests_total{method="GetSecret",status="OK"} 2"#), "{metrics}");
        assert!(
            metrics.contains(r#"grpc_server_requests_total{method="GetSecret",status="NOT_FOUND"} 1"#),
            "{metrics}"
        );
        assert!(metrics.contains("grpc_server_request_duration_seconds_bucket"), "{metrics}");

        // Log lines inside a call carry the reference and source namespace, never values.
        let log = running.child.log();
        assert!(log.contains(&format!("source_namespace={ns}")), "{log}");
        assert!(log.contains("provider_name=static"), "{log}");
        assert!(!log.contains("s3cret") && !log.contains("t0ken"), "a value leaked into the log:\n{log}");
    })
    .await;
}

#[tokio::test]
async fn mtls_refuses_bad_clients_and_reloads_a_rotated_server_certificate() {
    with_temp_namespace(&[], |client, ns| async move {
        create_fake(client, &ns).await;
        let mut running = start_fake("json").await;
        let pki = &running.pki;
        let pid = running.child.pid();
        let req = GetSecretRequest {
            remote_ref: remote("api-token", "", ""),
            provider_ref: Some(provider_ref("Fake", "static", "", "Provider")),
            source_namespace: ns.clone(),
            max_age_millis: 0,
        };

        // A good client works.
        let id = pki.client().expect("client cert");
        let mut good = connect(running.grpc, pki.ca.cert_pem(), Some(&id)).await.expect("connect");
        assert_eq!(good.get_secret(req.clone()).await.expect("get").into_inner().value, b"t0ken");
        let missing = GetSecretRequest { remote_ref: remote("missing", "", ""), ..req.clone() };
        assert_eq!(good.get_secret(missing).await.expect_err("missing").code(), tonic::Code::NotFound);
        // JSON logs: the line about the call carries the reference and source namespace.
        let log = running.child.log();
        let line = log
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["fields"]["status"] == "NOT_FOUND")
            .unwrap_or_else(|| panic!("no JSON line for the NOT_FOUND call:\n{log}"));
        assert_eq!(line["span"]["source_namespace"], ns.as_str(), "{line}");
        assert_eq!(line["span"]["provider_name"], "static", "{line}");
        assert_eq!(line["span"]["store_kind"], "Provider", "{line}");

        // No client certificate: the handshake or the first call fails.
        let refused = async {
            let mut c = connect(running.grpc, pki.ca.cert_pem(), None).await?;
            c.get_secret(req.clone()).await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        };
        assert!(refused.await.is_err(), "a client without a certificate was served");

        // A client certificate from another CA.
        let other = CertificateAuthority::generate("other-ca", Duration::from_secs(3600)).expect("other ca");
        let foreign = other.issue(&["intruder"], Usage::Client, Duration::from_secs(3600)).expect("foreign");
        let refused = async {
            let mut c = connect(running.grpc, pki.ca.cert_pem(), Some(&foreign)).await?;
            c.get_secret(req.clone()).await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        };
        assert!(refused.await.is_err(), "a client certificate from another CA was accepted");
        assert!(running.child.log().contains("TLS handshake refused"), "{}", running.child.log());

        // A certificate of the same CA issued to another name (a shared issuer): it chains,
        // but only the reconciler's identity may call, so a forged reference goes nowhere.
        let sibling =
            pki.ca.issue(&["keyward-webhook.keyward.svc"], Usage::Client, Duration::from_secs(3600)).expect("sibling");
        let refused = async {
            let mut c = connect(running.grpc, pki.ca.cert_pem(), Some(&sibling)).await?;
            c.get_secret(req.clone()).await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        };
        assert!(refused.await.is_err(), "another certificate of the same CA was accepted");
        assert!(running.child.log().contains("not issued to an allowed client name"), "{}", running.child.log());

        // Rotate the server certificate on disk to one issued by a new CA; the next connection
        // presents it, without a restart.
        let new_ca = CertificateAuthority::generate("rotated-ca", Duration::from_secs(3600)).expect("new ca");
        pki.rotate_server(&new_ca).expect("rotate");
        let start = Instant::now();
        loop {
            let attempt = async {
                let mut c = connect(running.grpc, new_ca.cert_pem(), Some(&id)).await?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(c.get_secret(req.clone()).await?.into_inner().value)
            };
            match attempt.await {
                Ok(v) => {
                    assert_eq!(v, b"t0ken");
                    break;
                }
                Err(e) if start.elapsed() < Duration::from_secs(10) => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("rotated certificate not served after 10s: {e}\n{}", running.child.log()),
            }
        }
        // New connections no longer see the old certificate.
        let old = async {
            let mut c = connect(running.grpc, pki.ca.cert_pem(), Some(&id)).await?;
            c.get_secret(req.clone()).await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        };
        assert!(old.await.is_err(), "a new connection still got the old server certificate");
        assert!(running.child.is_running());
        assert_eq!(running.child.pid(), pid);
        assert!(running.child.log().contains("reloaded TLS certificates"));

        // SIGTERM: a clean, prompt exit once the idle client connections (this test's and the
        // launcher's) are gone. (`terminate` blocks this test's runtime, so a live client here
        // could not answer the server's GOAWAY ping.)
        drop(good);
        drop(running.client);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let stopping = Instant::now();
        let status = running.child.terminate(Duration::from_secs(30)).expect("exited on SIGTERM");
        assert!(status.success(), "exit status {status:?}\n{}", running.child.log());
        assert!(stopping.elapsed() < Duration::from_secs(10), "shutdown took {:?}", stopping.elapsed());
        let log = running.child.log();
        assert!(log.contains("SIGTERM received") && log.contains("stopped"), "{log}");
        assert!(!log.contains("did not finish in time"), "{log}");
        let _ = running.health;
    })
    .await;
}
