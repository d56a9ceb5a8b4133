//! Kubeconfigs from `authRef` are data, never code.
//!
//! A kubeconfig can ask its reader to run a command (`exec`), call an auth plugin
//! (`auth-provider`) or read files (`tokenFile`, `client-certificate`, `client-key`,
//! `certificate-authority`). Whoever writes a tenant namespace writes the kubeconfig Secrets in
//! it, so loading one with every feature of the client library would run a tenant's command
//! inside the provider, or hand out the files (and so the identity) of the provider's own pod.
//!
//! So a kubeconfig is read as data: every entry is checked, anything but inline material is
//! refused with the field that carries it, and the client is then built from the allowed
//! fields of the current context only — never by the client library's own loader.

use base64::Engine;
use kube::config::{AuthInfo, Cluster, Kubeconfig};

/// What a kubeconfig may hold for the cluster.
const CLUSTER_FIELDS: &str = "server, certificate-authority-data, tls-server-name, insecure-skip-tls-verify";
/// What a kubeconfig may hold for the user.
const USER_FIELDS: &str = "token, client-certificate-data with client-key-data";

/// The parts of a kubeconfig the provider uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineKubeconfig {
    /// URL of the API server.
    pub server: String,
    /// PEM CA bundle, decoded from `certificate-authority-data`.
    pub ca_pem: Option<Vec<u8>>,
    /// `insecure-skip-tls-verify`.
    pub insecure_skip_tls_verify: bool,
    /// `tls-server-name`.
    pub tls_server_name: Option<String>,
    /// The credentials, in the kubeconfig user format (`token`, or `client-certificate-data`
    /// and `client-key-data`).
    pub user: serde_json::Value,
}

/// Reads a kubeconfig as data. The error lists every refused field, and what is allowed.
pub fn parse_inline(yaml: &str) -> Result<InlineKubeconfig, String> {
    let config = Kubeconfig::from_yaml(yaml).map_err(|e| format!("not a kubeconfig: {e}"))?;
    let mut refused = Vec::new();
    for named in &config.auth_infos {
        if let Some(user) = &named.auth_info {
            refused.extend(refused_user_fields(user).into_iter().map(|f| format!("users[{:?}].{f}", named.name)));
        }
    }
    for named in &config.clusters {
        if let Some(cluster) = &named.cluster {
            refused
                .extend(refused_cluster_fields(cluster).into_iter().map(|f| format!("clusters[{:?}].{f}", named.name)));
        }
    }
    if !refused.is_empty() {
        return Err(format!(
            "the kubeconfig sets {}: a kubeconfig from authRef is data, never code, so commands, auth plugins \
             and file paths are refused; use inline credentials only ({USER_FIELDS}; for the cluster {CLUSTER_FIELDS})",
            refused.join(", ")
        ));
    }
    select(&config)
}

fn refused_user_fields(user: &AuthInfo) -> Vec<&'static str> {
    [
        ("exec", user.exec.is_some()),
        ("auth-provider", user.auth_provider.is_some()),
        ("tokenFile", user.token_file.is_some()),
        ("client-certificate", user.client_certificate.is_some()),
        ("client-key", user.client_key.is_some()),
        ("username", user.username.is_some()),
        ("password", user.password.is_some()),
        ("as", user.impersonate.is_some()),
        ("as-uid", user.impersonate_uid.is_some()),
        ("as-groups", user.impersonate_groups.is_some()),
        ("as-user-extra", user.impersonate_user_extra.is_some()),
    ]
    .into_iter()
    .filter_map(|(field, set)| set.then_some(field))
    .collect()
}

fn refused_cluster_fields(cluster: &Cluster) -> Vec<&'static str> {
    [("certificate-authority", cluster.certificate_authority.is_some()), ("proxy-url", cluster.proxy_url.is_some())]
        .into_iter()
        .filter_map(|(field, set)| set.then_some(field))
        .collect()
}

/// The current context (or the only one), its cluster and user.
fn select(config: &Kubeconfig) -> Result<InlineKubeconfig, String> {
    let context = match (&config.current_context, config.contexts.as_slice()) {
        (Some(name), contexts) => contexts
            .iter()
            .find(|c| &c.name == name)
            .ok_or_else(|| format!("current-context {name:?} is not among the contexts"))?,
        (None, [only]) => only,
        (None, _) => return Err("set current-context: the kubeconfig has no single context to use".into()),
    };
    let context = context.context.as_ref().ok_or_else(|| format!("context {:?} is empty", context.name))?;
    let cluster = config
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| format!("cluster {:?} of the context is not in the kubeconfig", context.cluster))?;
    let user_name = context.user.as_deref().unwrap_or_default();
    let user = config
        .auth_infos
        .iter()
        .find(|u| u.name == user_name)
        .and_then(|u| u.auth_info.as_ref())
        .ok_or_else(|| format!("user {user_name:?} of the context is not in the kubeconfig"))?;

    let server = cluster.server.clone().filter(|s| !s.is_empty()).ok_or("the cluster has no server")?;
    let ca_pem = match &cluster.certificate_authority_data {
        None => None,
        Some(b64) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| format!("certificate-authority-data is not Base64: {e}"))?,
        ),
    };
    // The kubeconfig serialization is how kube exposes its secret strings.
    let fields = serde_json::to_value(user).map_err(|e| format!("reading the user: {e}"))?;
    let field = |name: &str| fields.get(name).and_then(serde_json::Value::as_str).map(str::to_string);
    let user = match (field("token"), field("client-certificate-data"), field("client-key-data")) {
        (Some(token), None, None) => serde_json::json!({ "token": token.trim() }),
        (None, Some(cert), Some(key)) => serde_json::json!({ "client-certificate-data": cert, "client-key-data": key }),
        (None, None, None) => return Err(format!("the user sets no credentials: use {USER_FIELDS}")),
        _ => return Err(format!("the user must set exactly one of: {USER_FIELDS}")),
    };
    Ok(InlineKubeconfig {
        server,
        ca_pem,
        insecure_skip_tls_verify: cluster.insecure_skip_tls_verify.unwrap_or(false),
        tls_server_name: cluster.tls_server_name.clone(),
        user,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(cluster: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\n\
             clusters:\n- name: k\n  cluster:\n    server: https://10.0.0.1:6443\n{cluster}\
             users:\n- name: u\n  user:\n{user}"
        )
    }

    #[test]
    fn inline_credentials_are_used() {
        let ca = base64::engine::general_purpose::STANDARD.encode("PEM");
        let k = parse_inline(&kubeconfig(
            &format!("    certificate-authority-data: {ca}\n    tls-server-name: api\n"),
            "    token: abc\n",
        ))
        .expect("token");
        assert_eq!(k.server, "https://10.0.0.1:6443");
        assert_eq!(k.ca_pem.as_deref(), Some(&b"PEM"[..]));
        assert_eq!(k.tls_server_name.as_deref(), Some("api"));
        assert_eq!(k.user, serde_json::json!({"token": "abc"}));
        let k = parse_inline(&kubeconfig("", "    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ\n"))
            .expect("cert");
        assert_eq!(k.user, serde_json::json!({"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}));
    }

    #[test]
    fn code_plugins_and_files_are_refused_by_name() {
        let cases = [
            (
                "",
                "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: touch\n      args: [/tmp/pwned]\n",
                "users[\"u\"].exec",
            ),
            (
                "",
                "    auth-provider:\n      name: gcp\n      config: {cmd-path: /bin/sh}\n",
                "users[\"u\"].auth-provider",
            ),
            ("", "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n", "users[\"u\"].tokenFile"),
            (
                "",
                "    client-certificate: /etc/kubernetes/pki/admin.crt\n    client-key: /etc/kubernetes/pki/admin.key\n",
                "users[\"u\"].client-certificate, users[\"u\"].client-key",
            ),
            ("", "    token: abc\n    as: system:admin\n", "users[\"u\"].as"),
            (
                "    certificate-authority: /etc/ssl/ca.crt\n",
                "    token: abc\n",
                "clusters[\"k\"].certificate-authority",
            ),
            ("    proxy-url: http://10.0.0.9:3128\n", "    token: abc\n", "clusters[\"k\"].proxy-url"),
        ];
        for (cluster, user, field) in cases {
            let err = parse_inline(&kubeconfig(cluster, user)).expect_err(field);
            assert!(err.contains(&format!("the kubeconfig sets {field}")), "{field}: {err}");
            assert!(err.contains("data, never code"), "{err}");
        }
    }

    #[test]
    fn an_unused_entry_with_a_command_is_refused_too() {
        let yaml = format!(
            "{}- name: other\n  user:\n    exec: {{command: sh, apiVersion: client.authentication.k8s.io/v1}}\n",
            kubeconfig("", "    token: abc\n")
        );
        let err = parse_inline(&yaml).expect_err("exec anywhere");
        assert!(err.contains("users[\"other\"].exec"), "{err}");
    }

    #[test]
    fn incomplete_kubeconfigs_say_what_is_missing() {
        assert!(parse_inline("not: [a kubeconfig").unwrap_err().contains("not a kubeconfig"));
        assert!(parse_inline(&kubeconfig("", "    username: u2\n")).unwrap_err().contains("users[\"u\"].username"));
        let err = parse_inline(&kubeconfig("", "    client-certificate-data: Q0VSVA==\n")).unwrap_err();
        assert!(err.contains("exactly one of"), "{err}");
        let err = parse_inline(&kubeconfig("", "    {}\n")).unwrap_err();
        assert!(err.contains("no credentials"), "{err}");
        let no_context = "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n";
        assert!(parse_inline(no_context).unwrap_err().contains("current-context"));
    }
}
