//! Cryptographic and PEM functions against fixtures made with OpenSSL and Python `cryptography`.

use std::collections::BTreeMap;

use keyward_template::{Limits, render};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/{name}",
        std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs a test")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn run(src: &str, data: &[(&str, Vec<u8>)]) -> Result<String, String> {
    let data: BTreeMap<String, Vec<u8>> = data.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    render(&[("t", src)], &data, &Limits::default())
        .map(|m| String::from_utf8(m["t"].clone()).expect("utf-8"))
        .map_err(|e| e.to_string())
}

fn text(name: &str) -> String {
    String::from_utf8(fixture(name)).expect("utf-8 fixture")
}

#[test]
fn pkcs12_key_and_cert() {
    let p12 = fixture("leaf.p12");
    let data = [("ks", p12.clone()), ("pw", b"changeit".to_vec())];
    assert_eq!(run("{{ pkcs12keyPass .pw .ks }}", &data).expect("key"), text("leaf.pkcs8.pem"));
    assert_eq!(run("{{ pkcs12certPass .pw .ks }}", &data).expect("cert"), text("leaf.crt.pem"));
    let err = run("{{ pkcs12keyPass \"wrong\" .ks }}", &data).expect_err("wrong password");
    assert!(err.contains("cannot read PKCS#12 data"), "{err}");

    let nopass = [("ks", fixture("leaf-nopass.p12"))];
    assert_eq!(run("{{ pkcs12key .ks }}", &nopass).expect("key"), text("leaf.pkcs8.pem"));
    assert_eq!(run("{{ pkcs12cert .ks }}", &nopass).expect("cert"), text("leaf.crt.pem"));
}

#[test]
fn pkcs12_legacy_encryption_and_base64_input() {
    let legacy = [("ks", fixture("leaf-legacy.p12"))];
    assert_eq!(run("{{ pkcs12certPass \"changeit\" .ks }}", &legacy).expect("cert"), text("leaf.crt.pem"));
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(fixture("leaf.p12"));
    let data = [("ks", b64.into_bytes())];
    assert_eq!(run("{{ .ks | b64dec | pkcs12keyPass \"changeit\" }}", &data).expect("key"), text("leaf.pkcs8.pem"));
}

#[test]
fn jwk_to_pem() {
    let data = [("rsa", fixture("rsa.jwk.json")), ("ec", fixture("ec.jwk.json"))];
    assert_eq!(run("{{ jwkPublicKeyPem .rsa }}", &data).expect("rsa pub"), text("rsa.pub.pem"));
    assert_eq!(run("{{ jwkPublicKeyPem .ec }}", &data).expect("ec pub"), text("ec.pub.pem"));
    assert_eq!(run("{{ jwkPrivateKeyPem .rsa }}", &data).expect("rsa key"), text("rsa.key.pem"));
    let ec_key = run("{{ jwkPrivateKeyPem .ec }}", &data).expect("ec key");
    assert!(ec_key.starts_with("-----BEGIN PRIVATE KEY-----\n"), "{ec_key}");
    let err = run("{{ jwkPublicKeyPem \"{\\\"kty\\\":\\\"EC\\\",\\\"crv\\\":\\\"P-256\\\",\\\"x\\\":\\\"AA\\\",\\\"y\\\":\\\"AA\\\"}\" }}", &[])
        .expect_err("bad point");
    assert!(err.contains("invalid EC JWK"), "{err}");
}

#[test]
fn filter_pem_keeps_one_type() {
    let bundle = format!("junk before\n{}{}", text("leaf.key.pem"), text("leaf.crt.pem"));
    let data = [("bundle", bundle.into_bytes())];
    assert_eq!(run("{{ filterPEM \"CERTIFICATE\" .bundle }}", &data).expect("certs"), text("leaf.crt.pem"));
    assert_eq!(run("{{ .bundle | filterPEM \"private key\" }}", &data).expect("key"), text("leaf.key.pem"));
    assert_eq!(run("{{ filterPEM \"RSA PRIVATE KEY\" .bundle }}", &data).expect("none"), "");
}

#[test]
fn htpasswd_and_bcrypt_verify() {
    let line = run("{{ htpasswd \"alice\" \"s3cret\" }}", &[]).expect("htpasswd");
    let (user, hash) = line.split_once(':').expect("user:hash");
    assert_eq!(user, "alice");
    assert!(hash.starts_with("$2a$10$"), "{hash}");
    assert!(bcrypt::verify("s3cret", hash).expect("valid hash"));
    assert!(!bcrypt::verify("other", hash).expect("valid hash"));
    let h = run("{{ bcrypt \"pw\" }}", &[]).expect("bcrypt");
    assert!(bcrypt::verify("pw", &h).expect("valid hash"));
}

#[test]
fn binary_values_pass_through_unchanged() {
    let bin = vec![0u8, 159, 146, 150, 255];
    let data = [("bin", bin.clone())];
    let out = render(
        &[("t", "{{ .bin }}")],
        &data.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        &Limits::default(),
    )
    .expect("renders");
    assert_eq!(out["t"], bin);
    assert_eq!(run("{{ .bin | b64enc }}", &data).expect("b64"), "AJ+Slv8=");
}

#[test]
fn rsa_decrypt_reads_openssl_oaep_ciphertexts() {
    for (hash, file) in [("SHA1", "sha1"), ("SHA256", "sha256"), ("SHA512", "sha512")] {
        let want = format!("oaep secret {file}");
        for key in ["rsa.key.pem", "rsa.pkcs1.pem"] {
            let data = [("ct", fixture(&format!("rsa-oaep-{file}.bin"))), ("key", fixture(key))];
            let src = format!("{{{{ rsaDecrypt \"RSA-OAEP\" \"{hash}\" .ct .key }}}}");
            assert_eq!(run(&src, &data).expect("decrypts"), want, "{hash} with {key}");
        }
    }
    let data = [("ct", fixture("rsa-oaep-sha256.bin")), ("key", fixture("rsa.key.pem"))];
    // The hash must match the one the ciphertext was made with; an unknown name means SHA-256.
    let err = run("{{ rsaDecrypt \"RSA-OAEP\" \"SHA512\" .ct .key }}", &data).expect_err("wrong hash");
    assert!(err.contains("error decrypting data with RSA"), "{err}");
    assert_eq!(run("{{ rsaDecrypt \"RSA-OAEP\" \"MD5\" .ct .key }}", &data).expect("default"), "oaep secret sha256");
    assert_eq!(run("{{ rsaDecrypt \"None\" \"SHA256\" \"as is\" .key }}", &data).expect("none"), "as is");
    let err = run("{{ rsaDecrypt \"RSA-PKCS1\" \"SHA256\" .ct .key }}", &data).expect_err("scheme");
    assert!(err.contains("decryption scheme RSA-PKCS1 is not supported"), "{err}");
    let err = run("{{ rsaDecrypt \"RSA-OAEP\" \"SHA256\" .ct \"not a pem\" }}", &data).expect_err("pem");
    assert!(err.contains("failed to decode PEM block"), "{err}");
    let cert = [("ct", fixture("rsa-oaep-sha256.bin")), ("key", fixture("leaf.crt.pem"))];
    let err = run("{{ rsaDecrypt \"RSA-OAEP\" \"SHA256\" .ct .key }}", &cert).expect_err("not a key");
    assert!(err.contains("could not parse RSA private key"), "{err}");
}
