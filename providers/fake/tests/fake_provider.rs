//! The Fake provider as a process, over real mTLS, reading Fake objects from the local
//! control plane.

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use keyward_certs::{CertificateAuthority, Usage};
use keyward_crds::Fake;
use keyward_e2e::{ChildProcess, control_plane, free_port, spawn_logged, with_temp_namespace, workspace_binary};
use keyward_proto::v1::{
    CapabilitiesRequest, DeleteSecretRequest, ExternalSecretDataRemoteRef, ExternalSecretFind, FindName,
    GetAllSecretsRequest, GetSecretMapRequest, GetSecretRequest, PushSecretData, PushSecretRemoteRef,
    PushSecretRequest, SecretExistsRequest, SecretStoreCapabilities, ValidateRequest,
};
use keyward_provider_runtime::testkit::{TestPki, connect, http_get, provider_ref, wait_ready};
use kube::Api;
use kube::api::PostParams;

struct Running {
    child: ChildProcess,
    grpc: SocketAddr,
    health: SocketAddr,
}

async fn start_fake(pki: &TestPki, log_format: &str) -> Running {
    let cp = control_plane().await;
    let grpc: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let health: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let mut cmd = Command::new(workspace_binary("keyward-provider-fake"));
    cmd.arg("--listen")
        .arg(grpc.to_string())
        .arg("--health-listen")
        .arg(health.to_string())
        .arg("--tls-dir")
        .arg(pki.tls_dir())
        .arg("--log-format")
        .arg(log_format)
        .env("KUBECONFIG", cp.kubeconfig());
    let mut child = spawn_logged("keyward-provider-fake", cmd);
    child.wait_for_log("provider serving", Duration::from_secs(60)).await;
    if let Err(e) = wait_ready(health, Duration::from_secs(30)).await {
        panic!("{e}\n{}", child.log());
    }
    Running { child, grpc, health }
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

#[tokio::test]
async fn serves_entries_pushes_health_reflection_and_metrics() {
    with_temp_namespace(&[], |client, ns| async move {
        create_fake(client, &ns).await;
        let pki = TestPki::new().expect("pki");
        let running = start_fake(&pki, "text").await;
        let id = pki.client().expect("client cert");
        let mut c = connect(running.grpc, pki.ca.cert_pem(), Some(&id)).await.expect("connect");
        let pref = Some(provider_ref("Fake", "static", "", "Provider"));
        let get = |key: &str, property: &str, version: &str| GetSecretRequest {
            remote_ref: remote(key, property, version),
            provider_ref: pref.clone(),
            source_namespace: ns.clone(),
        };

        // Whole value, one property (string and number), a version.
        let whole = c.get_secret(get("db", "", "")).await.expect("whole").into_inner().value;
        let json: serde_json::Value = serde_json::from_slice(&whole).expect("JSON");
        assert_eq!(json["user"], "app");
        assert_eq!(c.get_secret(get("db", "user", "")).await.expect("user").into_inner().value, b"app");
        assert_eq!(c.get_secret(get("db", "port", "")).await.expect("port").into_inner().value, b"5432");
        assert_eq!(c.get_secret(get("db", "", "v1")).await.expect("v1").into_inner().value, b"old");

        // Not found travels as NOT_FOUND: a missing key and a missing property.
        let e = c.get_secret(get("nope", "", "")).await.expect_err("missing key");
        assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
        let e = c.get_secret(get("db", "nope", "")).await.expect_err("missing property");
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

        // A config that does not exist is a configuration problem.
        let e = c
            .get_secret(GetSecretRequest {
                provider_ref: Some(provider_ref("Fake", "missing", "", "Provider")),
                ..get("db", "", "")
            })
            .await
            .expect_err("missing config");
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");

        // Map and find.
        let map = c
            .get_secret_map(GetSecretMapRequest {
                remote_ref: remote("db", "", ""),
                provider_ref: pref.clone(),
                source_namespace: ns.clone(),
            })
            .await
            .expect("map")
            .into_inner()
            .secrets;
        assert_eq!(map.get("password").map(Vec::as_slice), Some(&b"s3cret"[..]));
        assert_eq!(map.len(), 3);
        let found = c
            .get_all_secrets(GetAllSecretsRequest {
                provider_ref: pref.clone(),
                find: Some(ExternalSecretFind { name: Some(FindName { regexp: "^db".into() }), ..Default::default() }),
                source_namespace: ns.clone(),
            })
            .await
            .expect("find")
            .into_inner()
            .secrets;
        let mut keys: Vec<_> = found.keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["db", "db-replica"]);

        // Push, read back, exists, delete.
        let push = PushSecretRequest {
            provider_ref: pref.clone(),
            secret_data: [("password".to_string(), b"pushed".to_vec())].into(),
            push_secret_data: Some(PushSecretData {
                secret_key: "password".into(),
                remote_key: "pushed".into(),
                property: "pw".into(),
                ..Default::default()
            }),
            source_namespace: ns.clone(),
        };
        c.push_secret(push).await.expect("push");
        assert_eq!(c.get_secret(get("pushed", "pw", "")).await.expect("read back").into_inner().value, b"pushed");
        let exists = |key: &str| SecretExistsRequest {
            provider_ref: pref.clone(),
            remote_ref: Some(PushSecretRemoteRef { remote_key: key.into(), ..Default::default() }),
            source_namespace: ns.clone(),
        };
        assert!(c.secret_exists(exists("pushed")).await.expect("exists").into_inner().exists);
        c.delete_secret(DeleteSecretRequest {
            provider_ref: pref.clone(),
            remote_ref: Some(PushSecretRemoteRef { remote_key: "pushed".into(), ..Default::default() }),
            source_namespace: ns.clone(),
        })
        .await
        .expect("delete");
        assert!(!c.secret_exists(exists("pushed")).await.expect("exists").into_inner().exists);

        // Validate and capabilities.
        let v = c
            .validate(ValidateRequest { provider_ref: pref.clone(), source_namespace: ns.clone() })
            .await
            .expect("validate")
            .into_inner();
        assert!(v.valid, "{v:?}");
        let v = c
            .validate(ValidateRequest {
                provider_ref: Some(provider_ref("Fake", "missing", &ns, "ClusterProvider")),
                source_namespace: String::new(),
            })
            .await
            .expect("validate")
            .into_inner();
        assert!(!v.valid && v.error.contains("not found"), "{v:?}");
        let caps = c
            .capabilities(CapabilitiesRequest { provider_ref: pref.clone(), source_namespace: ns.clone() })
            .await
            .expect("capabilities")
            .into_inner();
        assert_eq!(caps.capabilities, SecretStoreCapabilities::ReadWrite as i32);

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
        assert!(metrics.contains(r#"grpc_server_requests_total{method="GetSecret",status="OK"} 5"#), "{metrics}");
        assert!(
            metrics.contains(r#"grpc_server_requests_total{method="GetSecret",status="NOT_FOUND"} 2"#),
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
        let pki = TestPki::new().expect("pki");
        let mut running = start_fake(&pki, "json").await;
        let pid = running.child.pid();
        let req = GetSecretRequest {
            remote_ref: remote("api-token", "", ""),
            provider_ref: Some(provider_ref("Fake", "static", "", "Provider")),
            source_namespace: ns.clone(),
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

        // SIGTERM: a clean, prompt exit once the idle client connection is gone. (`terminate`
        // blocks this test's runtime, so a live client here could not answer the server's
        // GOAWAY ping.)
        drop(good);
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
