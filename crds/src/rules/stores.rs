//! Validation of the Vault provider configuration, and the AWS field rules it shares with the AWS
//! provider's `SecretsManager` configuration (`keyward_provider_aws::api`).

use base64::Engine;

use super::ValidationErrors;
use super::validate::check_secret_key;
use crate::aws_auth::AwsAuthSecretRef;
use crate::provider_config::CaProvider;
use crate::vault::{VaultGcpAuth, VaultIamAuth, VaultSpec};

/// A CA given inline (`caBundle`, Base64 PEM) or by reference (`caProvider`), not both.
pub fn check_ca(errs: &mut ValidationErrors, path: &str, bundle: Option<&str>, provider: Option<&CaProvider>) {
    if let Some(ca) = bundle
        && base64::engine::general_purpose::STANDARD.decode(ca.trim()).is_err()
    {
        errs.push(format!("{path}.caBundle"), "must be Base64-encoded PEM");
    }
    if bundle.is_some() && provider.is_some() {
        errs.push(path, "set caBundle or caProvider, not both");
    }
    if provider.is_some_and(|p| p.name.is_empty()) {
        errs.push(format!("{path}.caProvider.name"), "must not be empty");
    }
}

/// An AWS region name like `eu-west-1`.
pub fn check_region(errs: &mut ValidationErrors, field: &str, region: &str) {
    let ok = !region.is_empty() && region.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        errs.push(field, format!("{region:?} is not an AWS region like eu-west-1"));
    }
}

/// An IAM role to assume: not empty. Its form is STS's to judge, as upstream leaves it (its AWS
/// guide names a role `team-b`): STS refuses what is not a role ARN, and the sync reports it.
pub fn check_role(errs: &mut ValidationErrors, field: &str, role: &str) {
    if role.is_empty() {
        errs.push(field, "must not be empty: the ARN of a role to assume (arn:aws:iam::<account>:role/<name>)");
    }
}

/// Static AWS access keys (and an optional session token) in Secrets.
pub fn check_access_keys(errs: &mut ValidationErrors, field: &str, s: &AwsAuthSecretRef) {
    check_secret_key(errs, &format!("{field}.accessKeyIDSecretRef"), &s.access_key_id_secret_ref, true);
    check_secret_key(errs, &format!("{field}.secretAccessKeySecretRef"), &s.secret_access_key_secret_ref, true);
    if let Some(t) = &s.session_token_secret_ref {
        check_secret_key(errs, &format!("{field}.sessionTokenSecretRef"), t, true);
    }
}

/// The Vault AWS (IAM) login: a Vault role, where the AWS credentials come from, and the role
/// they assume first.
fn check_iam(errs: &mut ValidationErrors, iam: &VaultIamAuth) {
    const FIELD: &str = "spec.auth.iam";
    if iam.vault_role.is_empty() {
        errs.push(format!("{FIELD}.vaultRole"), "must not be empty: name the Vault role to log in as");
    }
    if let Some(p) = &iam.path {
        check_mount(errs, &format!("{FIELD}.path"), p);
    }
    if let Some(r) = &iam.region {
        check_region(errs, &format!("{FIELD}.region"), r);
    }
    match &iam.role {
        Some(role) => check_role(errs, &format!("{FIELD}.role"), role),
        None if iam.external_id.is_some() => {
            errs.push(format!("{FIELD}.externalID"), "is sent with the AssumeRole call of role: set role too")
        }
        None => {}
    }
    if let Some(id) = &iam.vault_aws_iam_server_id
        && id.chars().any(char::is_control)
    {
        errs.push(format!("{FIELD}.vaultAwsIamServerID"), "is a header value: it must not hold control characters");
    }
    match (&iam.secret_ref, &iam.jwt) {
        (Some(_), Some(_)) => errs.push(FIELD, "set secretRef or jwt, not both"),
        (Some(s), None) => check_access_keys(errs, &format!("{FIELD}.secretRef"), s),
        (None, Some(j)) if j.service_account_ref.name.is_empty() => {
            errs.push(format!("{FIELD}.jwt.serviceAccountRef.name"), "must not be empty")
        }
        _ => {}
    }
}

/// Validates a Vault provider configuration.
pub fn validate_vault(spec: &VaultSpec) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    if !(spec.server.starts_with("https://") || spec.server.starts_with("http://")) {
        errs.push("spec.server", format!("{:?} must be an http:// or https:// URL", spec.server));
    }
    if let Some(p) = &spec.path {
        // The mount is part of every request path, so it obeys the rule remote keys obey.
        match super::key_segments(p) {
            Ok(s) if s.is_empty() => {
                errs.push("spec.path", format!("{p:?} is not a mount path like secret or team/kv"))
            }
            Ok(_) => {}
            Err(e) => errs.push("spec.path", format!("{p:?} is not a mount path like secret or team/kv: {e}")),
        }
    }
    check_ca(&mut errs, "spec", spec.ca_bundle.as_deref(), spec.ca_provider.as_ref());
    if let Some(tls) = &spec.tls {
        match (&tls.cert_secret_ref, &tls.key_secret_ref) {
            (Some(c), Some(k)) => {
                check_secret_key(&mut errs, "spec.tls.certSecretRef", c, false);
                check_secret_key(&mut errs, "spec.tls.keySecretRef", k, false);
            }
            (None, None) => {}
            _ => errs.push("spec.tls", "set both certSecretRef and keySecretRef, or neither"),
        }
    }
    if let Some(gcp) = &spec.auth.gcp {
        check_vault_gcp(&mut errs, gcp);
    }
    let auth = &spec.auth;
    let methods = auth.methods();
    const ONE_OF: &str =
        "set exactly one of tokenSecretRef, appRole, kubernetes, jwt, userPass, ldap, cert, iam or gcp";
    // None is upstream's too: the provider's own token (`reach::VAULT_NO_LOGIN`).
    if methods.len() > 1 {
        errs.push("spec.auth", format!("{} are set; {ONE_OF}", methods.join(" and ")));
    }
    for (field, login) in [("spec.auth.userPass", &auth.user_pass), ("spec.auth.ldap", &auth.ldap)] {
        if let Some(u) = login {
            if u.username.is_empty() {
                errs.push(format!("{field}.username"), "must not be empty");
            }
            if let Some(p) = &u.path {
                check_mount(&mut errs, &format!("{field}.path"), p);
            }
            check_secret_key(&mut errs, &format!("{field}.secretRef"), &u.secret_ref, true);
        }
    }
    if let Some(c) = &auth.cert {
        check_mount(&mut errs, "spec.auth.cert.path", &c.path);
        check_secret_key(&mut errs, "spec.auth.cert.clientCert", &c.client_cert, true);
        check_secret_key(&mut errs, "spec.auth.cert.secretRef", &c.secret_ref, true);
    }
    if let Some(iam) = &auth.iam {
        check_iam(&mut errs, iam);
    }
    check_headers(&mut errs, &spec.headers);
    if let Some(t) = &auth.token_secret_ref {
        check_secret_key(&mut errs, "spec.auth.tokenSecretRef", t, true);
    }
    if let Some(a) = &auth.app_role {
        match (&a.role_id, &a.role_ref) {
            (Some(id), None) if !id.is_empty() => {}
            (None, Some(r)) => check_secret_key(&mut errs, "spec.auth.appRole.roleRef", r, true),
            _ => errs.push("spec.auth.appRole", "set exactly one of roleId or roleRef"),
        }
        check_secret_key(&mut errs, "spec.auth.appRole.secretRef", &a.secret_ref, true);
        check_mount(&mut errs, "spec.auth.appRole.path", &a.path);
    }
    if let Some(k) = &auth.kubernetes {
        if k.role.is_empty() {
            errs.push("spec.auth.kubernetes.role", "must not be empty: name the Vault role");
        }
        check_mount(&mut errs, "spec.auth.kubernetes.mountPath", &k.mount_path);
        // Both set: the ServiceAccount is used, as upstream ([`vault_warnings`] says so). A
        // Secret without a key holds the token under `token`, as upstream.
        match (&k.service_account_ref, &k.secret_ref) {
            (Some(sa), _) if sa.name.is_empty() => {
                errs.push("spec.auth.kubernetes.serviceAccountRef.name", "must not be empty");
            }
            (None, Some(s)) => check_secret_key(&mut errs, "spec.auth.kubernetes.secretRef", s, false),
            _ => {}
        }
    }
    if let Some(j) = &auth.jwt {
        check_mount(&mut errs, "spec.auth.jwt.path", &j.path);
        // Both set: the Secret is used, as upstream ([`vault_warnings`] says so).
        match (&j.secret_ref, &j.kubernetes_service_account_token) {
            (Some(s), _) => check_secret_key(&mut errs, "spec.auth.jwt.secretRef", s, true),
            (None, Some(t)) => {
                if t.service_account_ref.name.is_empty() {
                    errs.push(
                        "spec.auth.jwt.kubernetesServiceAccountToken.serviceAccountRef.name",
                        "must not be empty",
                    );
                }
                if let Some(s) = t.expiration_seconds
                    && s < 600
                {
                    errs.push(
                        "spec.auth.jwt.kubernetesServiceAccountToken.expirationSeconds",
                        format!("{s} is below 600, the shortest token lifetime Kubernetes issues"),
                    );
                }
            }
            _ => errs.push("spec.auth.jwt", "set exactly one of secretRef or kubernetesServiceAccountToken"),
        }
    }
    errs.into_result()
}

/// Where a Vault login names two credential sources, the one upstream's precedence takes (and
/// the provider uses): `kubernetes` takes `serviceAccountRef` over `secretRef`, `jwt` takes
/// `secretRef` over `kubernetesServiceAccountToken`. Fields are named as in a configuration
/// (`spec.auth…`).
pub fn vault_warnings(spec: &VaultSpec) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(k) = &spec.auth.kubernetes
        && k.service_account_ref.is_some()
        && k.secret_ref.is_some()
    {
        out.push(
            "spec.auth.kubernetes: serviceAccountRef and secretRef are both set; the ServiceAccount's token is used \
             and secretRef is ignored, as upstream: remove one"
                .to_string(),
        );
    }
    if let Some(j) = &spec.auth.jwt
        && j.secret_ref.is_some()
        && j.kubernetes_service_account_token.is_some()
    {
        out.push(
            "spec.auth.jwt: secretRef and kubernetesServiceAccountToken are both set; the token in secretRef is used \
             and kubernetesServiceAccountToken is ignored, as upstream: remove one"
                .to_string(),
        );
    }
    out
}

/// Headers the provider itself sets per request: a configured one must not replace them.
const RESERVED_HEADERS: [&str; 6] =
    ["x-vault-token", "x-vault-namespace", "x-vault-index", "host", "content-length", "transfer-encoding"];

fn check_headers(errs: &mut ValidationErrors, headers: &std::collections::BTreeMap<String, String>) {
    for (name, value) in headers {
        let field = format!("spec.headers[{name:?}]");
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if name.is_empty() || !name.chars().all(token) {
            errs.push(field, "is not an HTTP header name");
        } else if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            errs.push(field, "is set by the provider itself (token, namespace, index and framing headers)");
        } else if value.chars().any(|c| c.is_control() && c != '\t') {
            errs.push(field, "the value must not hold control characters such as line breaks");
        }
    }
}

/// Vault's GCP login: a role, a mount, and the credentials as a GCPSecretManager
/// configuration's `auth` is checked (its fields named under `spec.auth.gcp`).
fn check_vault_gcp(errs: &mut ValidationErrors, gcp: &VaultGcpAuth) {
    if gcp.role.trim().is_empty() {
        errs.push("spec.auth.gcp.role", "must not be empty: name the Vault role to log in as");
    }
    // Empty is the default mount (`gcp`), as upstream.
    if !gcp.path.is_empty() {
        check_mount(errs, "spec.auth.gcp.path", &gcp.path);
    }
    for e in super::validate_gcp_auth("spec", &gcp.credentials()) {
        let field = e.field.strip_prefix("spec.auth").map_or(e.field.clone(), |f| format!("spec.auth.gcp{f}"));
        errs.push(field, e.message);
    }
}

fn check_mount(errs: &mut ValidationErrors, field: &str, path: &str) {
    match super::key_segments(path) {
        Ok(s) if s.is_empty() => errs.push(field, "must not be empty: name the auth method's mount path"),
        Ok(_) => {}
        // The login URL is auth/<mount>/login: a dot segment would post the login elsewhere.
        Err(e) => errs.push(field, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vault::VaultKvVersion;

    fn vault(yaml: &str) -> Result<(), ValidationErrors> {
        validate_vault(&serde_yaml::from_str(yaml).expect("test manifest parses"))
    }

    fn fields(r: Result<(), ValidationErrors>) -> Vec<String> {
        r.err().map(|e| e.0.into_iter().map(|f| format!("{}: {}", f.field, f.message)).collect()).unwrap_or_default()
    }

    #[test]
    fn vault_table() {
        let ok = "server: http://127.0.0.1:8200\npath: secret\nauth: {tokenSecretRef: {name: t, key: token}}\n";
        assert_eq!(fields(vault(ok)), Vec::<String>::new());
        let spec: VaultSpec = serde_yaml::from_str(ok).expect("parses");
        assert_eq!(spec.version, VaultKvVersion::V2, "v2 is the default");
        let cases = [
            ("server: vault:8200\nauth: {tokenSecretRef: {name: t, key: k}}", "spec.server: \"vault:8200\" must be"),
            (
                "server: http://v\nauth: {tokenSecretRef: {name: t, key: k}, appRole: {secretRef: {name: s, key: k}, roleId: r}}",
                "spec.auth: tokenSecretRef and appRole are set",
            ),
            ("server: http://v\nauth: {tokenSecretRef: {name: t}}", "spec.auth.tokenSecretRef.key: must not be empty"),
            (
                "server: http://v\nauth: {appRole: {secretRef: {name: s, key: k}}}",
                "spec.auth.appRole: set exactly one of roleId or roleRef",
            ),
            ("server: http://v\nauth: {kubernetes: {role: ''}}", "spec.auth.kubernetes.role: must not be empty"),
            (
                "server: http://v\nauth: {jwt: {role: r}}",
                "spec.auth.jwt: set exactly one of secretRef or kubernetesServiceAccountToken",
            ),
            (
                "server: http://v\nauth: {jwt: {kubernetesServiceAccountToken: {serviceAccountRef: {name: a}, expirationSeconds: 60}}}",
                "expirationSeconds: 60 is below 600",
            ),
            ("server: http://v\ncaBundle: '!!'\nauth: {kubernetes: {role: r}}", "spec.caBundle: must be Base64"),
            (
                "server: http://v\ncaBundle: 'YQ=='\ncaProvider: {type: Secret, name: ca, key: ca.crt}\nauth: {kubernetes: {role: r}}",
                "spec: set caBundle or caProvider, not both",
            ),
            (
                "server: http://v\ntls: {certSecretRef: {name: c}}\nauth: {kubernetes: {role: r}}",
                "spec.tls: set both certSecretRef and keySecretRef",
            ),
            ("server: http://v\npath: /\nauth: {kubernetes: {role: r}}", "spec.path: \"/\" is not a mount path"),
            ("server: http://v\npath: a//b\nauth: {kubernetes: {role: r}}", "spec.path: \"a//b\" is not a mount path"),
            ("server: http://v\npath: kv/..\nauth: {kubernetes: {role: r}}", "segment \"..\" is not allowed"),
            (
                "server: http://v\nauth: {kubernetes: {role: r, mountPath: '../token'}}",
                "spec.auth.kubernetes.mountPath: segment \"..\" is not allowed",
            ),
            ("server: http://v\nauth: {iam: {vaultRole: ''}}", "spec.auth.iam.vaultRole: must not be empty"),
            ("server: http://v\nauth: {iam: {vaultRole: r, path: '../token'}}", "spec.auth.iam.path: segment"),
            ("server: http://v\nauth: {iam: {vaultRole: r, region: EU}}", "spec.auth.iam.region: \"EU\" is not"),
            ("server: http://v\nauth: {iam: {vaultRole: r, role: ''}}", "spec.auth.iam.role: must not be empty"),
            ("server: http://v\nauth: {iam: {vaultRole: r, externalID: x}}", "spec.auth.iam.externalID: is sent with"),
            (
                "server: http://v\nauth: {iam: {vaultRole: r, vaultAwsIamServerID: \"a\\nb\"}}",
                "spec.auth.iam.vaultAwsIamServerID: is a header value",
            ),
            (
                "server: http://v\nauth: {iam: {vaultRole: r, secretRef: {accessKeyIDSecretRef: {name: a}, \
                 secretAccessKeySecretRef: {name: a, key: s}}}}",
                "spec.auth.iam.secretRef.accessKeyIDSecretRef.key: must not be empty",
            ),
            (
                "server: http://v\nauth: {iam: {vaultRole: r, jwt: {serviceAccountRef: {name: a}}, secretRef: \
                 {accessKeyIDSecretRef: {name: a, key: i}, secretAccessKeySecretRef: {name: a, key: s}}}}",
                "spec.auth.iam: set secretRef or jwt, not both",
            ),
            (
                "server: http://v\nauth: {iam: {vaultRole: r, jwt: {serviceAccountRef: {name: ''}}}}",
                "spec.auth.iam.jwt.serviceAccountRef.name: must not be empty",
            ),
            (
                "server: http://v\nauth: {iam: {vaultRole: r}, userPass: {username: u, secretRef: {name: p, key: k}}}",
                "spec.auth: userPass and iam are set",
            ),
        ];
        for (yaml, want) in cases {
            let got = fields(vault(yaml));
            assert!(got.iter().any(|f| f.contains(want)), "{yaml}: want {want:?}, got {got:?}");
        }
        let full = "server: https://v\npath: kv\nversion: v1\nnamespace: team\n\
                    auth: {namespace: admin, jwt: {path: oidc, role: r, kubernetesServiceAccountToken: \
                    {serviceAccountRef: {name: app, audiences: [vault]}, expirationSeconds: 600}}}";
        assert_eq!(fields(vault(full)), Vec::<String>::new());
        // Two credential sources: upstream's precedence, with a warning.
        for (two, used) in [
            (
                "server: http://v\nauth: {kubernetes: {role: r, serviceAccountRef: {name: a}, secretRef: {name: s}}}",
                "the ServiceAccount's token is used",
            ),
            (
                "server: http://v\nauth: {jwt: {role: r, secretRef: {name: s, key: k}, kubernetesServiceAccountToken: \
                 {serviceAccountRef: {name: a}}}}",
                "the token in secretRef is used",
            ),
        ] {
            assert_eq!(fields(vault(two)), Vec::<String>::new(), "{two}");
            let w = vault_warnings(&serde_yaml::from_str(two).expect("parses"));
            assert!(w.len() == 1 && w[0].contains(used), "{w:?}");
        }
        assert!(vault_warnings(&serde_yaml::from_str(full).expect("parses")).is_empty());
        // No login, as upstream (a fragment of its docs, or Vault Agent): valid, and the boundary
        // counts it as the provider's identity.
        for none in ["server: http://v", "server: http://v\nauth: {namespace: team}"] {
            assert_eq!(fields(vault(none)), Vec::<String>::new(), "{none}");
            let spec: VaultSpec = serde_yaml::from_str(none).expect("parses");
            let reach = crate::rules::vault_reach(&spec);
            assert_eq!(reach.ambient.iter().map(|a| a.what).collect::<Vec<_>>(), [crate::rules::VAULT_NO_LOGIN]);
        }
        // caProvider needs a type and a name, as upstream; the key defaults to ca.crt.
        let ca = "server: https://v\ncaProvider: {type: ConfigMap, name: kube-root-ca.crt}\nauth: {tokenSecretRef: {name: t, key: k}}";
        assert_eq!(fields(vault(ca)), Vec::<String>::new());
        let spec: VaultSpec = serde_yaml::from_str(ca).expect("parses");
        let p = spec.ca_provider.expect("caProvider");
        assert_eq!(p.key_or_default(), "ca.crt");
        assert!(serde_json::to_value(&p).expect("json").get("key").is_none(), "kept as written");
        let iam = "server: https://v\nauth: {iam: {path: aws-prod, region: eu-west-1, role: 'arn:aws:iam::1:role/r', \
                   externalID: x, vaultAwsIamServerID: vault.example.com, vaultRole: app, secretRef: \
                   {accessKeyIDSecretRef: {name: a, key: id}, secretAccessKeySecretRef: {name: a, key: secret}, \
                   sessionTokenSecretRef: {name: a, key: token}}}}";
        assert_eq!(fields(vault(iam)), Vec::<String>::new());
        let spec: VaultSpec = serde_yaml::from_str(iam).expect("parses");
        let back = serde_json::to_value(&spec).expect("json");
        assert_eq!(back["auth"]["iam"]["externalID"], "x", "upstream's spelling");
        assert_eq!(back["auth"]["iam"]["vaultAwsIamServerID"], "vault.example.com", "upstream's spelling");
        assert_eq!(back["auth"]["iam"]["secretRef"]["accessKeyIDSecretRef"]["key"], "id");
        assert_eq!(spec.auth.methods(), ["iam"]);
        // The provider's own AWS identity and web identity are valid logins too.
        assert_eq!(fields(vault("server: http://v\nauth: {iam: {vaultRole: r}}")), Vec::<String>::new());
        assert_eq!(
            fields(vault("server: http://v\nauth: {iam: {vaultRole: r, jwt: {serviceAccountRef: {name: app}}}}")),
            Vec::<String>::new()
        );
    }

    #[test]
    fn upstream_field_names_round_trip() {
        let v: VaultSpec = serde_yaml::from_str(
            "server: http://v\nversion: v1\nauth: {appRole: {roleId: r, secretRef: {name: s, key: k}}}",
        )
        .expect("parses");
        assert_eq!(v.auth.app_role.as_ref().map(|a| a.path.as_str()), Some("approle"), "upstream default mount");
        assert_eq!(serde_json::to_value(&v).expect("json")["version"], "v1");
    }
}
