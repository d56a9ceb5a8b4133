//! The rules of upstream's `openBao` store block: what it translates to (the Vault provider's
//! configuration) and its field rules. The webhook, the reconciler and the Vault provider all call
//! these.

use super::ValidationErrors;
use super::stores::validate_vault;
use crate::store_blocks::OpenBaoStoreProvider;
use crate::vault::{VaultAuth, VaultSpec};

/// Store blocks served by the process that serves another key, as (block, that key): a process
/// keeps both when it keeps only what it serves.
pub const SHARED_STORE_KEYS: [(&str, &str); 1] = [("openBao", "vault")];

/// The Vault configuration an `openBao` block means: the same fields, the rest at Vault's
/// defaults (OpenBao speaks Vault's API).
pub fn open_bao_vault(o: &OpenBaoStoreProvider) -> VaultSpec {
    let auth = o.auth.clone().unwrap_or_default();
    VaultSpec {
        server: o.server.clone(),
        path: o.path.clone(),
        version: o.version,
        namespace: o.namespace.clone(),
        ca_bundle: o.ca_bundle.clone(),
        ca_provider: o.ca_provider.clone(),
        auth: VaultAuth {
            namespace: auth.namespace,
            token_secret_ref: auth.token_secret_ref,
            app_role: auth.app_role,
            user_pass: auth.user_pass,
            ..VaultAuth::default()
        },
        ..VaultSpec::default()
    }
}

/// An `openBao` block's field errors: Vault's rules for the fields it shares, and upstream's
/// rule that an `auth` names exactly one login (without `auth`, as for Vault, the provider's own
/// identity).
pub fn validate_open_bao(o: &OpenBaoStoreProvider) -> Result<(), ValidationErrors> {
    let mut errs = validate_vault(&open_bao_vault(o)).err().unwrap_or_default();
    if o.auth.as_ref().is_some_and(|a| a.token_secret_ref.is_none() && a.app_role.is_none() && a.user_pass.is_none()) {
        errs.push("spec.auth", "set exactly one of appRole, tokenSecretRef or userPass");
    }
    errs.into_result()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret_store::SecretStoreSpec;

    fn spec(yaml: &str) -> SecretStoreSpec {
        serde_yaml::from_str(yaml).expect("test manifest parses")
    }

    #[test]
    fn open_bao_is_the_vault_block_it_is_a_subset_of() {
        let s = spec(
            "provider: {openBao: {server: 'https://bao:8200', path: kv, version: v1, namespace: ns1, \
             caProvider: {type: ConfigMap, name: ca}, auth: {namespace: root, userPass: {path: up, username: app, \
             secretRef: {name: pw, key: password}}}}}",
        );
        let v = open_bao_vault(s.provider.open_bao.as_ref().expect("typed"));
        assert_eq!(v.server, "https://bao:8200");
        assert_eq!((v.path.as_deref(), v.version), (Some("kv"), crate::vault::VaultKvVersion::V1));
        assert_eq!(v.namespace.as_deref(), Some("ns1"));
        assert_eq!(v.ca_provider.as_ref().map(|c| c.name.as_str()), Some("ca"));
        assert_eq!(v.auth.namespace.as_deref(), Some("root"));
        assert_eq!(v.auth.methods(), ["userPass"]);
        assert_eq!(v.auth.user_pass.as_ref().map(|u| u.username.as_str()), Some("app"));
        let default = open_bao_vault(&OpenBaoStoreProvider { server: "http://b".into(), ..Default::default() });
        assert_eq!(default.version, crate::vault::VaultKvVersion::V2, "v2 by default, as upstream");
        assert!(default.auth.methods().is_empty());
    }

    #[test]
    fn open_bao_rules() {
        let errors = |yaml: &str| {
            let s = spec(&format!("provider: {{openBao: {yaml}}}"));
            validate_open_bao(s.provider.open_bao.as_ref().expect("typed"))
                .err()
                .map(|e| e.0.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        assert!(errors("{server: 'http://b', auth: {tokenSecretRef: {name: t, key: token}}}").is_empty());
        assert!(errors("{server: 'http://b'}").is_empty(), "no auth: the provider's own identity");
        let none = errors("{server: 'http://b', auth: {namespace: ns}}");
        assert_eq!(none, ["spec.auth: set exactly one of appRole, tokenSecretRef or userPass"]);
        let two = errors(
            "{server: 'http://b', auth: {tokenSecretRef: {name: t, key: k}, appRole: {roleId: r, secretRef: {name: s, key: k}}}}",
        );
        assert!(two.len() == 1 && two[0].starts_with("spec.auth: tokenSecretRef and appRole are set"), "{two:?}");
        let server = errors("{server: 'ftp://b', auth: {tokenSecretRef: {name: t, key: k}}}");
        assert!(server.len() == 1 && server[0].starts_with("spec.server: "), "{server:?}");
    }

    #[test]
    fn stores_name_them_and_the_vault_process_serves_them() {
        use crate::rules::{
            ProviderIdentityNamespaces, StoreBackend, secret_store_boundary, store_backend, validate_secret_store,
        };
        let bao = spec(
            "provider: {openBao: {server: 'http://bao:8200', path: secret, auth: {tokenSecretRef: {name: t, key: token}}}}",
        );
        let b = store_backend(&bao.provider, &[]).expect("served");
        assert_eq!((b.provider_name(), b.store_key()), ("vault", "openBao"));
        let StoreBackend::OpenBao(v) = &b else { panic!("{b:?}") };
        assert_eq!(v.auth.methods(), ["tokenSecretRef"]);
        assert_eq!(validate_secret_store(Some("a"), &bao, &[]), Ok(()));

        // Field errors carry the store's own key.
        let bad = spec("provider: {openBao: {server: 'http://b', auth: {}}}");
        let e = validate_secret_store(Some("a"), &bad, &[]).unwrap_err().to_string();
        assert!(
            e.contains("spec.provider.openBao.auth: set exactly one of appRole, tokenSecretRef or userPass"),
            "{e}"
        );

        // A SecretStore's references stay in its namespace, as for vault.
        let none = &ProviderIdentityNamespaces::NONE;
        let across = spec(
            "provider: {openBao: {server: 'http://b', auth: {tokenSecretRef: {name: t, key: k, namespace: other}}}}",
        );
        let e = secret_store_boundary("a", &across, &[], none).unwrap_err().to_string();
        assert!(e.contains("spec.provider.openBao.auth.tokenSecretRef"), "{e}");
        let own = spec("provider: {openBao: {server: 'http://b'}}");
        let e = secret_store_boundary("a", &own, &[], none).unwrap_err().to_string();
        assert!(e.contains("spec.provider.openBao.auth"), "the provider's own token is refused to a tenant: {e}");

        // The process that serves vault keeps openBao; another process does not.
        let mut kept = bao.clone();
        kept.provider.keep_only(&["vault"]);
        assert_eq!(kept.provider, bao.provider);
        kept.provider.keep_only(&["kubernetes"]);
        assert_eq!(kept.provider.open_bao, Some(Default::default()));
    }
}
