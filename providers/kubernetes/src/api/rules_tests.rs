use keyward_crds::provider_config::{CaProvider, CaProviderType, ServiceAccountSelector};
use keyward_crds::rules::{ConfigOwner, check_boundary};

use super::*;
use crate::api::spec::{CertAuth, KubernetesAuth, KubernetesServer, TokenAuth};

fn sel(name: &str, ns: Option<&str>) -> keyward_crds::SecretKeySelector {
    keyward_crds::SecretKeySelector { name: name.into(), key: Some("k".into()), namespace: ns.map(str::to_string) }
}

/// The field and message fragment a case expects, or `None` for a valid spec.
type Expected<'a> = Option<(&'a str, &'a str)>;

#[test]
fn kubernetes_config_table() {
    let token = "auth: {token: {bearerToken: {name: t, key: token}}}\n";
    let cases: Vec<(&str, String, Expected<'_>)> = vec![
        ("token", token.into(), None),
        ("service account", "auth: {serviceAccount: {name: reader}}\n".into(), None),
        (
            "cert",
            "auth: {cert: {clientCert: {name: c, key: tls.crt}, clientKey: {name: c, key: tls.key}}}\n".into(),
            None,
        ),
        ("kubeconfig", "authRef: {name: kc, key: config}\n".into(), None),
        ("nothing", "{}\n".into(), Some(("spec", "set exactly one of auth or authRef"))),
        (
            "both",
            format!("{token}authRef: {{name: kc}}\n"),
            Some(("spec", "set exactly one of auth or authRef, not both")),
        ),
        ("zero methods", "auth: {}\n".into(), Some(("spec.auth", "set exactly one of cert, token or serviceAccount"))),
        (
            "two methods",
            "auth: {token: {bearerToken: {name: t, key: k}}, serviceAccount: {name: s}}\n".into(),
            Some(("spec.auth", "token and serviceAccount are set")),
        ),
        (
            "token without key",
            "auth: {token: {bearerToken: {name: t}}}\n".into(),
            Some(("spec.auth.token.bearerToken.key", "must not be empty")),
        ),
        (
            "http url",
            format!("{token}server: {{url: 'http://k8s'}}\n"),
            Some(("spec.server.url", "must be an https:// URL")),
        ),
        (
            "bad ca bundle",
            format!("{token}server: {{caBundle: 'not base64!'}}\n"),
            Some(("spec.server.caBundle", "Base64")),
        ),
        (
            "bad remote namespace",
            format!("{token}remoteNamespace: Not_Valid\n"),
            Some(("spec.remoteNamespace", "not a valid namespace name")),
        ),
    ];
    for (case, text, want) in cases {
        let spec: KubernetesSpec = serde_yaml::from_str(&text).expect("test manifest parses");
        match (validate_kubernetes(&spec), want) {
            (Ok(()), None) => {}
            (Ok(()), Some((field, message))) => panic!("{case}: expected {field}: {message}, got no error"),
            (Err(e), None) => panic!("{case}: expected no error, got {e}"),
            (Err(e), Some((field, message))) => assert!(
                e.0.iter().any(|fe| fe.field == field && fe.message.contains(message)),
                "{case}: expected {field}: {message}, got {e}"
            ),
        }
    }
}

#[test]
fn every_reference_of_a_kubernetes_config_is_checked() {
    let spec = KubernetesSpec {
        server: KubernetesServer {
            ca_provider: Some(CaProvider {
                type_: CaProviderType::ConfigMap,
                name: "ca".into(),
                key: "ca.crt".into(),
                namespace: Some("kube-system".into()),
            }),
            ..Default::default()
        },
        auth: Some(KubernetesAuth {
            cert: Some(CertAuth { client_cert: sel("c", Some("x")), client_key: sel("k", Some("team-a")) }),
            token: Some(TokenAuth { bearer_token: sel("t", Some("y")) }),
            service_account: Some(ServiceAccountSelector {
                name: "sa".into(),
                namespace: Some("z".into()),
                audiences: vec![],
            }),
        }),
        auth_ref: Some(sel("kubeconfig", Some("w"))),
        remote_namespace: "team-a".into(),
        allow_remote_namespace_override: true,
    };
    let reach = kubernetes_reach(&spec);
    assert_eq!(reach.named.len(), 6);
    let errs = check_boundary(ConfigOwner::Tenant, "team-a", &reach).unwrap_err();
    let got: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        got,
        [
            "spec.server.caProvider.namespace",
            "spec.auth.cert.clientCert.namespace",
            "spec.auth.token.bearerToken.namespace",
            "spec.auth.serviceAccount.namespace",
            "spec.authRef.namespace",
            "spec.allowRemoteNamespaceOverride",
        ]
    );
    assert!(errs.0[0].message.starts_with("\"kube-system\" names ConfigMap \"ca\""), "{}", errs.0[0].message);
    assert!(errs.0[3].message.contains("ServiceAccount \"sa\""), "{}", errs.0[3].message);
    assert_eq!(check_boundary(ConfigOwner::Operator, "keyward", &reach), Ok(()));
}
