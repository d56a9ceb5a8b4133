use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::free_json::FreeJson;
use crate::generators::{UuidSpec, VaultDynamicSecretSpec, WebhookGeneratorSpec};

fn fields(r: Result<(), ValidationErrors>) -> Vec<String> {
    r.err().map(|e| e.0.iter().map(|e| e.field.clone()).collect()).unwrap_or_default()
}

fn bloat() -> FreeJson {
    serde_json::from_str(&crate::free_json::tests::padded(200_000)).unwrap()
}

#[test]
fn every_kind_is_checked_at_the_path_given() {
    let wrapping = PasswordSpec { digits: Some(i64::MAX), allow_repeat: true, ..Default::default() };
    assert_eq!(fields(validate_generator_spec("spec", AnyGeneratorSpec::Password(&wrapping))), ["spec.digits"]);
    let in_cluster = format!("spec.generator.{}", generator_spec_field(GeneratorKind::Password));
    assert_eq!(
        fields(validate_generator_spec(&in_cluster, AnyGeneratorSpec::Password(&wrapping))),
        ["spec.generator.passwordSpec.digits"]
    );
    assert!(validate_generator_spec("spec", AnyGeneratorSpec::Password(&PasswordSpec::default())).is_ok());

    let rsa = |bits| SshKeySpec { key_size: Some(bits), ..Default::default() };
    assert!(validate_generator_spec("spec", AnyGeneratorSpec::SshKey(&rsa(4096))).is_ok());
    let e = validate_generator_spec("spec", AnyGeneratorSpec::SshKey(&rsa(8192))).unwrap_err();
    assert_eq!(e.0[0].field, "spec.keySize");
    assert!(e.0[0].message.contains("8192 is not generated for rsa: use 2048, 3072 or 4096"), "{e}");
    let ecdsa = SshKeySpec { key_type: SshKeyType::Ecdsa, key_size: Some(2048), ..Default::default() };
    assert_eq!(fields(validate_generator_spec("spec", AnyGeneratorSpec::SshKey(&ecdsa))), ["spec.keySize"]);
    let ed = SshKeySpec { key_type: SshKeyType::Ed25519, key_size: Some(4096), comment: Some("a\nb".into()) };
    assert_eq!(fields(validate_generator_spec("spec", AnyGeneratorSpec::SshKey(&ed))), ["spec.comment"]);

    let fake = FakeSpec { data: BTreeMap::from([("k".into(), "v".repeat(MAX_GENERATED_BYTES))]), ..Default::default() };
    assert_eq!(fields(validate_generator_spec("spec", AnyGeneratorSpec::Fake(&fake))), ["spec.data"]);
    assert!(validate_generator_spec("spec", AnyGeneratorSpec::Uuid(&UuidSpec {})).is_ok());

    let vault = VaultDynamicSecretSpec { parameters: Some(bloat()), ..Default::default() };
    assert_eq!(
        fields(validate_generator_spec("spec", AnyGeneratorSpec::VaultDynamicSecret(&vault))),
        ["spec.parameters"]
    );
    let webhook: WebhookGeneratorSpec =
        serde_json::from_value(json!({"url": "u", "body": {"pad": vec![0; 5000]}})).unwrap();
    let e = validate_generator_spec("spec.generator.webhookSpec", AnyGeneratorSpec::Webhook(&webhook)).unwrap_err();
    assert_eq!(e.0[0].field, "spec.generator.webhookSpec");
    assert!(e.0[0].message.contains("more than Keyward keeps"), "{e}");

    let mfa: crate::generators::MfaSpec =
        serde_json::from_value(json!({"secret": {"name": "s", "key": "k"}, "algorithm": "md5"})).unwrap();
    assert_eq!(
        fields(validate_generator_spec("spec.generator.mfaSpec", AnyGeneratorSpec::Mfa(&mfa))),
        ["spec.generator.mfaSpec.algorithm"]
    );
    let beyondtrust: crate::generators::BeyondtrustWorkloadCredentialsDynamicSecretSpec =
        serde_json::from_value(json!({"provider": {"pad": vec![0; 5000]}})).unwrap();
    assert_eq!(
        fields(validate_generator_spec(
            "spec",
            AnyGeneratorSpec::BeyondtrustWorkloadCredentialsDynamicSecret(&beyondtrust)
        )),
        ["spec.provider"]
    );
    let acr: crate::generators::AcrAccessTokenSpec =
        serde_json::from_value(json!({"registry": "https://r.example", "auth": {}})).unwrap();
    assert!(!fields(validate_generator_spec("spec", AnyGeneratorSpec::AcrAccessToken(&acr))).is_empty());
    // A ClusterGenerator's GCRAccessToken: the GCP rule, at the ClusterGenerator's path.
    let gcr: crate::generators::GcrAccessTokenSpec = serde_json::from_value(
        json!({"projectID": "", "auth": {"secretRef": {"secretAccessKeySecretRef": {"name": "k"}}}}),
    )
    .unwrap();
    let path = "spec.generator.gcrAccessTokenSpec";
    assert_eq!(
        fields(validate_generator_spec(path, AnyGeneratorSpec::GcrAccessToken(&gcr))),
        [format!("{path}.projectID"), format!("{path}.auth.secretRef.secretAccessKeySecretRef.key")]
    );
}

#[test]
fn every_password_accepted_fits_one_generation() {
    // The largest spec the limits allow: every key, every character a four-byte symbol, hex.
    let largest = PasswordSpec {
        length: crate::rules::MAX_PASSWORD_LENGTH,
        digits: Some(0),
        symbols: Some(crate::rules::MAX_PASSWORD_LENGTH),
        symbol_characters: Some("\u{1F600}".into()),
        allow_repeat: true,
        secret_keys: (0..crate::rules::MAX_PASSWORD_SECRET_KEYS).map(|i| format!("k{i}")).collect(),
        encoding: PasswordEncoding::Hex,
        ..Default::default()
    };
    assert!(validate_generator_spec("spec", AnyGeneratorSpec::Password(&largest)).is_ok());
    let plan = crate::rules::password_plan("spec", &largest).unwrap();
    let total = encoded_len(plan.max_bytes(), largest.encoding).unwrap() * largest.secret_keys.len();
    assert_eq!(total, 512 * 1024, "64 keys of 1024 four-byte characters, hex");
    assert!(total <= MAX_GENERATED_BYTES);
    assert_eq!(encoded_len(10, PasswordEncoding::Base32), Some(16));
    assert_eq!(encoded_len(4, PasswordEncoding::Base64), Some(8));
    assert_eq!(encoded_len(usize::MAX, PasswordEncoding::Hex), None);
}

#[test]
fn generator_states_keep_their_free_form_fields_within_the_limits() {
    let ok = GeneratorStateSpec { resource: Some(json!({"kind": "Password"}).into()), ..Default::default() };
    assert!(validate_generator_state(&ok).is_ok());
    let bloated = GeneratorStateSpec { state: Some(bloat()), resource: Some(bloat()), ..Default::default() };
    assert_eq!(fields(validate_generator_state(&bloated)), ["spec.resource", "spec.state"]);
}
