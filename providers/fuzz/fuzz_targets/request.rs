//! Arbitrary bytes as each provider request message (the first byte picks which), through the
//! runtime's request checks and the Kubernetes provider's push metadata parsing: decoding and
//! checking return Ok or Err, never panic, and a tenant-owned configuration never names an
//! object outside its own namespace.
#![no_main]

use keyward_crds::AuthenticationScope;
use keyward_crds::rules::{ConfigOwner, NamedKind, NamedObject};
use keyward_proto::v1::{
    CapabilitiesRequest, DeleteSecretRequest, GetAllSecretsRequest, GetSecretMapRequest, GetSecretRequest,
    ProviderReference, PushSecretRequest, SecretExistsRequest, ValidateRequest,
};
use keyward_provider_kubernetes::mapping::parse_push_metadata;
use keyward_provider_runtime::{StoreRefKind, check_provider_ref};
use libfuzzer_sys::fuzz_target;
use prost::Message;

/// The runtime's checks, then the boundary for an object named in `named_ns`.
fn check(method: &str, provider_ref: Option<&ProviderReference>, source_ns: &str, named_ns: &str) {
    let Ok(ctx) = check_provider_ref(method, provider_ref, source_ns, true) else { return };
    let object = NamedObject { field: "spec.fuzz", kind: NamedKind::Secret, name: "x", namespace: Some(named_ns) };
    if let Ok(ns) = ctx.named_namespace(&object)
        && ctx.owner() == ConfigOwner::Tenant
    {
        assert_eq!(ns, ctx.config_namespace(), "a tenant configuration reached namespace {ns}");
    }
    // A Provider or a ManifestNamespace ClusterProvider is served only the configuration of
    // the manifest's own namespace. (An unscoped ClusterProvider request, from older callers,
    // keeps the narrow rule for what the configuration names, checked above.)
    let tenant_path = ctx.store_ref_kind == StoreRefKind::Provider
        || ctx.authentication_scope == Some(AuthenticationScope::ManifestNamespace);
    if tenant_path {
        assert!(
            ctx.namespace.is_empty() || ctx.namespace == ctx.source_namespace,
            "a tenant path was served configuration {} for source namespace {}",
            ctx.namespace,
            ctx.source_namespace
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else { return };
    match which % 8 {
        0 => {
            if let Ok(r) = GetSecretRequest::decode(body) {
                let key = r.remote_ref.as_ref().map(|k| k.key.as_str()).unwrap_or_default();
                check("GetSecret", r.provider_ref.as_ref(), &r.source_namespace, key);
            }
        }
        1 => {
            if let Ok(r) = GetSecretMapRequest::decode(body) {
                let key = r.remote_ref.as_ref().map(|k| k.property.as_str()).unwrap_or_default();
                check("GetSecretMap", r.provider_ref.as_ref(), &r.source_namespace, key);
            }
        }
        2 => {
            if let Ok(r) = PushSecretRequest::decode(body) {
                if let Some(d) = &r.push_secret_data {
                    let _ = parse_push_metadata(&d.metadata);
                }
                let key = r.push_secret_data.as_ref().map(|d| d.remote_key.as_str()).unwrap_or_default();
                check("PushSecret", r.provider_ref.as_ref(), &r.source_namespace, key);
            }
        }
        3 => {
            if let Ok(r) = DeleteSecretRequest::decode(body) {
                if let Some(rr) = &r.remote_ref {
                    let _ = parse_push_metadata(&rr.metadata);
                }
                check("DeleteSecret", r.provider_ref.as_ref(), &r.source_namespace, "");
            }
        }
        4 => {
            if let Ok(r) = SecretExistsRequest::decode(body) {
                if let Some(rr) = &r.remote_ref {
                    let _ = parse_push_metadata(&rr.metadata);
                }
                check("SecretExists", r.provider_ref.as_ref(), &r.source_namespace, "");
            }
        }
        5 => {
            if let Ok(r) = GetAllSecretsRequest::decode(body) {
                let path = r.find.as_ref().map(|f| f.path.as_str()).unwrap_or_default();
                check("GetAllSecrets", r.provider_ref.as_ref(), &r.source_namespace, path);
            }
        }
        6 => {
            if let Ok(r) = ValidateRequest::decode(body) {
                let _ = check_provider_ref("Validate", r.provider_ref.as_ref(), &r.source_namespace, false);
            }
        }
        _ => {
            if let Ok(r) = CapabilitiesRequest::decode(body) {
                let _ = check_provider_ref("Capabilities", r.provider_ref.as_ref(), &r.source_namespace, false);
            }
        }
    }
});
