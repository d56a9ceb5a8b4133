//! Every request and response survives encoding, and field numbers match the published
//! contract (checked on raw bytes, so a renumbering cannot slip through).

use std::collections::HashMap;

use prost::Message;

use crate::v1::*;

fn roundtrip<M: Message + Default + PartialEq + std::fmt::Debug>(m: M) -> Vec<u8> {
    let bytes = m.encode_to_vec();
    assert!(!bytes.is_empty(), "{m:?} encoded to nothing: set a field in the test");
    assert_eq!(M::decode(bytes.as_slice()).expect("decodes"), m);
    bytes
}

fn provider_ref() -> ProviderReference {
    ProviderReference {
        api_version: "provider.external-secrets.io/v2alpha1".into(),
        kind: "Kubernetes".into(),
        name: "remote".into(),
        namespace: "creds".into(),
        store_ref_kind: "ClusterProvider".into(),
        authentication_scope: "ProviderNamespace".into(),
    }
}

fn remote_ref() -> ExternalSecretDataRemoteRef {
    ExternalSecretDataRemoteRef {
        key: "db".into(),
        version: "v1".into(),
        property: "password".into(),
        decoding_strategy: "Base64".into(),
        metadata_policy: "Fetch".into(),
    }
}

fn push_ref() -> PushSecretRemoteRef {
    PushSecretRemoteRef {
        remote_key: "db".into(),
        property: "password".into(),
        metadata: br#"{"spec":{"remoteNamespace":"other"}}"#.to_vec(),
    }
}

fn bytes_map() -> HashMap<String, Vec<u8>> {
    HashMap::from([("a".to_string(), b"1".to_vec()), ("b".to_string(), vec![0, 255])])
}

#[test]
fn requests_roundtrip() {
    let ns = || "team-a".to_string();
    roundtrip(GetSecretRequest {
        remote_ref: Some(remote_ref()),
        provider_ref: Some(provider_ref()),
        source_namespace: ns(),
        max_age_millis: 30_000,
    });
    roundtrip(GetSecretMapRequest {
        remote_ref: Some(remote_ref()),
        provider_ref: Some(provider_ref()),
        source_namespace: ns(),
        max_age_millis: 0,
    });
    roundtrip(GetAllSecretsRequest {
        provider_ref: Some(provider_ref()),
        find: Some(ExternalSecretFind {
            path: "app/".into(),
            name: Some(FindName { regexp: "^db-".into() }),
            tags: HashMap::from([("team".to_string(), "a".to_string())]),
            conversion_strategy: "Unicode".into(),
            decoding_strategy: "Auto".into(),
        }),
        source_namespace: ns(),
    });
    roundtrip(PushSecretRequest {
        provider_ref: Some(provider_ref()),
        secret_data: bytes_map(),
        push_secret_data: Some(PushSecretData {
            metadata: br#"{"labels":{"a":"b"}}"#.to_vec(),
            secret_key: "password".into(),
            remote_key: "db".into(),
            property: "pw".into(),
        }),
        source_namespace: ns(),
    });
    roundtrip(DeleteSecretRequest {
        provider_ref: Some(provider_ref()),
        remote_ref: Some(push_ref()),
        source_namespace: ns(),
    });
    roundtrip(SecretExistsRequest {
        provider_ref: Some(provider_ref()),
        remote_ref: Some(push_ref()),
        source_namespace: ns(),
    });
    roundtrip(ValidateRequest { provider_ref: Some(provider_ref()), source_namespace: ns(), max_age_millis: 60_000 });
    roundtrip(CapabilitiesRequest { provider_ref: Some(provider_ref()), source_namespace: ns() });
}

#[test]
fn responses_roundtrip() {
    roundtrip(GetSecretResponse { value: b"s3cr3t".to_vec() });
    roundtrip(GetSecretMapResponse { secrets: bytes_map() });
    roundtrip(GetAllSecretsResponse { secrets: bytes_map() });
    roundtrip(SecretExistsResponse { exists: true });
    roundtrip(ValidateResponse { valid: true, error: "e".into(), warnings: vec!["w".into()] });
    roundtrip(CapabilitiesResponse { capabilities: SecretStoreCapabilities::ReadWrite as i32 });
    roundtrip(Error {
        code: "NotFound".into(),
        message: "m".into(),
        retryable: true,
        details: HashMap::from([("k".to_string(), "v".to_string())]),
    });
    // Empty responses encode to zero bytes; they must still decode.
    assert_eq!(PushSecretResponse::decode(&[][..]).expect("decodes"), PushSecretResponse {});
    assert_eq!(DeleteSecretResponse::decode(&[][..]).expect("decodes"), DeleteSecretResponse {});
}

#[test]
fn field_numbers_match_the_published_contract() {
    // Tag byte = field_number << 3 | wire_type (2 = length-delimited, 0 = varint).
    let tag = |field: u8, wire: u8| (field << 3) | wire;
    let only = |bytes: Vec<u8>| bytes[0];
    assert_eq!(only(roundtrip(ProviderReference { api_version: "a".into(), ..Default::default() })), tag(1, 2));
    assert_eq!(only(roundtrip(ProviderReference { namespace: "a".into(), ..Default::default() })), tag(4, 2));
    assert_eq!(only(roundtrip(ProviderReference { store_ref_kind: "a".into(), ..Default::default() })), tag(5, 2));
    // Keyward additions live at 100 and up: a two-byte varint tag.
    let tag100 = |wire: u16| {
        let key = (100u16 << 3) | wire;
        [(key & 0x7f) as u8 | 0x80, (key >> 7) as u8]
    };
    let first_two = |bytes: Vec<u8>| [bytes[0], bytes[1]];
    assert_eq!(
        first_two(roundtrip(ProviderReference { authentication_scope: "a".into(), ..Default::default() })),
        tag100(2)
    );
    assert_eq!(first_two(roundtrip(PushSecretRemoteRef { metadata: b"{}".to_vec(), ..Default::default() })), tag100(2));
    assert_eq!(first_two(roundtrip(GetSecretRequest { max_age_millis: 1, ..Default::default() })), tag100(0));
    assert_eq!(first_two(roundtrip(ValidateRequest { max_age_millis: 1, ..Default::default() })), tag100(0));
    assert_eq!(only(roundtrip(GetSecretRequest { source_namespace: "a".into(), ..Default::default() })), tag(3, 2));
    assert_eq!(
        only(roundtrip(GetSecretRequest { provider_ref: Some(provider_ref()), ..Default::default() })),
        tag(2, 2)
    );
    assert_eq!(only(roundtrip(PushSecretRequest { source_namespace: "a".into(), ..Default::default() })), tag(4, 2));
    assert_eq!(only(roundtrip(PushSecretData { metadata: b"{}".to_vec(), ..Default::default() })), tag(1, 2));
    assert_eq!(
        only(roundtrip(ExternalSecretDataRemoteRef { metadata_policy: "x".into(), ..Default::default() })),
        tag(5, 2)
    );
    assert_eq!(only(roundtrip(ValidateRequest { source_namespace: "a".into(), ..Default::default() })), tag(2, 2));
    assert_eq!(only(roundtrip(CapabilitiesResponse { capabilities: 2 })), tag(1, 0));
    assert_eq!(SecretStoreCapabilities::ReadOnly as i32, 0);
    assert_eq!(SecretStoreCapabilities::WriteOnly as i32, 1);
}

#[test]
fn descriptor_set_names_the_service() {
    // The encoded descriptor holds the service name verbatim; reflection serves it.
    let text = String::from_utf8_lossy(crate::FILE_DESCRIPTOR_SET);
    assert!(text.contains("SecretStoreProvider"));
    assert!(text.contains("provider/v1/secretstore.proto"));
}

/// ValidateRequest as a peer without Keyward's additions has it (upstream's v2 contract).
#[derive(Clone, PartialEq, prost::Message)]
struct PlainValidateRequest {
    #[prost(message, optional, tag = "1")]
    provider_ref: Option<ProviderReference>,
    #[prost(string, tag = "2")]
    source_namespace: String,
}

#[test]
fn validate_max_age_is_skipped_by_peers_that_do_not_know_it() {
    let ns = "team-a".to_string();
    let ours = ValidateRequest { provider_ref: Some(provider_ref()), source_namespace: ns, max_age_millis: 60_000 };
    let plain = PlainValidateRequest::decode(ours.encode_to_vec().as_slice()).expect("a plain peer decodes it");
    assert_eq!((plain.provider_ref.as_ref(), plain.source_namespace.as_str()), (Some(&provider_ref()), "team-a"));
    // A plain peer's request reads as "read the configuration anew".
    let back = ValidateRequest::decode(plain.encode_to_vec().as_slice()).expect("decodes");
    assert_eq!(back, ValidateRequest { max_age_millis: 0, ..ours });
}
