//! What a configuration may write as a server's URL, and a Secret key reference it must complete:
//! rules the store kinds of provider crates share (Barbican's `authURL`, Azure's `vaultUrl` and
//! authority host).

use super::FieldError;
use crate::SecretKeySelector;

/// Whether `url` is an `https://` URL (also `http://` unless `https_only`) with a host, a
/// numeric port if any, and no credentials, query or fragment.
pub fn check_server_url(url: &str, https_only: bool) -> Result<(), String> {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &url[8..]
    } else if lower.starts_with("http://") && !https_only {
        &url[7..]
    } else if https_only {
        return Err("must be an https:// URL".into());
    } else {
        return Err("must start with http:// or https://".into());
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain spaces or control characters".into());
    }
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if authority.contains('@') {
        return Err("must not carry credentials (user@host)".into());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or("has an IPv6 host without its closing ]")?;
        (h, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("has no host".into());
    }
    if let Some(p) = port
        && p.parse::<u16>().is_err()
    {
        return Err(format!("has a port {p:?} that is not a number up to 65535"));
    }
    if rest[authority.len()..].contains(['?', '#']) {
        return Err("must not have a query or fragment".into());
    }
    Ok(())
}

/// The errors of a Secret key reference that must name both its Secret and its key.
pub fn check_key_selector(errs: &mut Vec<FieldError>, field: &str, sel: &SecretKeySelector) {
    if sel.name.is_empty() {
        errs.push(FieldError::new(format!("{field}.name"), "is required"));
    }
    if sel.key.as_deref().is_none_or(str::is_empty) {
        errs.push(FieldError::new(format!("{field}.key"), "is required"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls() {
        for ok in ["https://keystone.example.com:5000/v3", "http://127.0.0.1:5000", "https://[::1]:5000/identity/v3"] {
            assert_eq!(check_server_url(ok, false), Ok(()), "{ok}");
        }
        for bad in [
            "keystone:5000",
            "https://",
            "https://user:pw@keystone/v3",
            "https://keystone:port/v3",
            "https://keystone/v3?x=1",
            "https://key stone/v3",
        ] {
            assert!(check_server_url(bad, false).is_err(), "{bad}");
        }
        assert_eq!(check_server_url("https://v.vault.azure.net:8443/", true), Ok(()));
        assert_eq!(check_server_url("http://v.vault.azure.net", true), Err("must be an https:// URL".into()));
    }

    #[test]
    fn key_selectors_name_their_secret_and_key() {
        let mut errs = Vec::new();
        check_key_selector(&mut errs, "spec.x", &SecretKeySelector { name: "s".into(), ..Default::default() });
        check_key_selector(&mut errs, "spec.y", &SecretKeySelector::default());
        let fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.x.key", "spec.y.name", "spec.y.key"]);
    }
}
