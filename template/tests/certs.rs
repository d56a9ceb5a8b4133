//! PEM to PKCS#12, chain filtering and SANs, with a root, an intermediate and a leaf generated
//! here: every keystore written is read back by the `pkcs12*` functions (and by p12-keystore).

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use keyward_template::{Limits, render};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};

fn run(src: &str, data: &[(&str, &str)]) -> Result<String, String> {
    let data: BTreeMap<String, Vec<u8>> = data.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect();
    render(&[("t", src)], &data, &Limits::default())
        .map(|m| String::from_utf8(m["t"].clone()).expect("utf-8"))
        .map_err(|e| e.to_string())
}

struct Chain {
    root: String,
    intermediate: String,
    leaf: String,
    /// The leaf's key as PKCS#8 PEM.
    key: String,
}

fn params(cn: &str, sans: &[&str], ca: bool) -> CertificateParams {
    let mut p = CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("params");
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    if ca {
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    }
    p.use_authority_key_identifier_extension = true;
    p
}

fn chain() -> Chain {
    let root_key = KeyPair::generate().expect("key");
    let root_params = params("Example Root", &[], true);
    let root = root_params.self_signed(&root_key).expect("root");
    let root_issuer = Issuer::new(root_params, root_key);
    let int_key = KeyPair::generate().expect("key");
    let int_params = params("Example Intermediate", &[], true);
    let intermediate = int_params.signed_by(&int_key, &root_issuer).expect("intermediate");
    let int_issuer = Issuer::new(int_params, int_key);
    let leaf_key = KeyPair::generate().expect("key");
    let mut leaf_params = params("app.example.com", &["app.example.com", "10.0.0.7"], false);
    leaf_params.subject_alt_names.push(SanType::Rfc822Name("ops@example.com".try_into().expect("email")));
    leaf_params.subject_alt_names.push(SanType::URI("spiffe://example/app".try_into().expect("uri")));
    let leaf = leaf_params.signed_by(&leaf_key, &int_issuer).expect("leaf");
    Chain { root: root.pem(), intermediate: intermediate.pem(), leaf: leaf.pem(), key: leaf_key.serialize_pem() }
}

fn der_of(pem_text: &str) -> Vec<Vec<u8>> {
    pem::parse_many(pem_text).expect("pem").into_iter().map(|p| p.into_contents()).collect()
}

#[test]
fn pem_to_pkcs12_round_trips_through_pkcs12_functions() {
    let c = chain();
    let full = format!("{}{}{}", c.leaf, c.intermediate, c.root);
    let data = [("cert", c.leaf.as_str()), ("key", c.key.as_str()), ("chain", full.as_str())];

    let p12 = run("{{ pemToPkcs12 .cert .key }}", &data).expect("pemToPkcs12");
    let der = STANDARD.decode(&p12).expect("base64 output");
    let store = p12_keystore::KeyStore::from_pkcs12(&der, "", p12_keystore::Pkcs12ImportPolicy::Strict)
        .expect("readable without password");
    let (_, keychain) = store.private_key_chain().expect("key entry");
    assert_eq!(keychain.certs().len(), 1, "only the leaf");
    assert_eq!(keychain.key().as_der(), der_of(&c.key)[0].as_slice(), "the same key");
    let back = run("{{ .p12 | b64dec | pkcs12cert }}", &[("p12", &p12)]).expect("pkcs12cert");
    assert_eq!(der_of(&back), der_of(&c.leaf));
    let key_back = run("{{ .p12 | b64dec | pkcs12key }}", &[("p12", &p12)]).expect("pkcs12key");
    assert_eq!(der_of(&key_back), der_of(&c.key));

    // The same from a pipeline, with a password; a wrong password is refused.
    let p12 = run("{{ .key | pemToPkcs12Pass .cert \"s3cret\" | b64dec | pkcs12keyPass \"s3cret\" }}", &data);
    assert!(p12.is_err(), "the piped value is the last argument (the password here): {p12:?}");
    let p12 = run("{{ pemToPkcs12Pass .cert .key \"s3cret\" }}", &data).expect("pass");
    assert_eq!(
        der_of(&run("{{ .p12 | b64dec | pkcs12keyPass \"s3cret\" }}", &[("p12", &p12)]).expect("key")),
        der_of(&c.key)
    );
    let err = run("{{ .p12 | b64dec | pkcs12keyPass \"wrong\" }}", &[("p12", &p12)]).expect_err("wrong password");
    assert!(err.contains("cannot read PKCS#12 data"), "{err}");

    // The full chain keeps every certificate, leaf first.
    let p12 = run("{{ fullPemToPkcs12Pass .chain .key \"pw\" }}", &data).expect("fullPemToPkcs12Pass");
    let store = p12_keystore::KeyStore::from_pkcs12(
        &STANDARD.decode(&p12).expect("b64"),
        "pw",
        p12_keystore::Pkcs12ImportPolicy::Strict,
    )
    .expect("readable");
    let (_, keychain) = store.private_key_chain().expect("key");
    assert_eq!(keychain.certs()[0].as_der(), der_of(&c.leaf)[0].as_slice(), "the key's certificate is the leaf");
    let mut certs: Vec<Vec<u8>> = store
        .entries()
        .flat_map(|(_, e)| match e {
            p12_keystore::KeyStoreEntry::PrivateKeyChain(k) => k.certs().iter().map(|c| c.as_der().to_vec()).collect(),
            p12_keystore::KeyStoreEntry::Certificate(c) => vec![c.as_der().to_vec()],
            _ => Vec::new(),
        })
        .collect();
    certs.sort();
    certs.dedup();
    let mut want = der_of(&full);
    want.sort();
    assert_eq!(certs, want, "every certificate of the chain is in the keystore");
    let p12 = run("{{ fullPemToPkcs12 .chain .key }}", &data).expect("fullPemToPkcs12");
    let back = run("{{ .p12 | b64dec | pkcs12cert }}", &[("p12", &p12)]).expect("certs");
    assert_eq!(der_of(&back).len(), 3);
}

#[test]
fn key_formats_and_errors() {
    let c = chain();
    // A PKCS#1 RSA key (what `openssl genrsa` used to write) and a SEC1 EC key are accepted too,
    // and stored as PKCS#8.
    let fixtures = format!(
        "{}/tests/fixtures",
        std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs a test")
    );
    // (pemToPkcs12 does not check that key and certificate belong together, as upstream.)
    let rsa_cert = c.leaf.clone();
    let rsa_pkcs8 = std::fs::read_to_string(format!("{fixtures}/rsa.key.pem")).expect("fixture");
    use rsa::pkcs1::EncodeRsaPrivateKey;
    use rsa::pkcs8::DecodePrivateKey;
    let pkcs1_der =
        rsa::PrivateKey::from_pkcs8_der(&der_of(&rsa_pkcs8)[0]).expect("pkcs8").to_pkcs1_der().expect("pkcs1");
    let pkcs1 = pem::encode(&pem::Pem::new("RSA PRIVATE KEY", pkcs1_der.as_bytes().to_vec()));
    assert!(pkcs1.starts_with("-----BEGIN RSA PRIVATE KEY-----"));
    let p12 = run("{{ pemToPkcs12 .cert .key }}", &[("cert", &rsa_cert), ("key", &pkcs1)]).expect("pkcs1 key");
    let key = run("{{ .p12 | b64dec | pkcs12key }}", &[("p12", &p12)]).expect("key back");
    assert_eq!(der_of(&key), der_of(&rsa_pkcs8));
    let p256_of = |pem_text: &str| p256::SecretKey::from_pkcs8_der(&der_of(pem_text)[0]).expect("p256 PKCS#8");
    let sec1_der = p256_of(&c.key).to_sec1_der().expect("sec1");
    let sec1 = pem::encode(&pem::Pem::new("EC PRIVATE KEY", sec1_der.to_vec()));
    let p12 = run("{{ pemToPkcs12 .cert .key }}", &[("cert", &c.leaf), ("key", &sec1)]).expect("sec1 key");
    let key = run("{{ .p12 | b64dec | pkcs12key }}", &[("p12", &p12)]).expect("key back");
    assert_eq!(p256_of(&key), p256_of(&c.key));
    let err = run("{{ pemToPkcs12 .cert .key }}", &[("cert", "not pem"), ("key", &c.key)]).expect_err("bad cert");
    assert!(err.contains("no PEM data found") || err.contains("invalid PEM"), "{err}");
    let err = run("{{ pemToPkcs12 .cert .key }}", &[("cert", &c.key), ("key", &c.key)]).expect_err("key as cert");
    assert!(err.contains("is not a certificate"), "{err}");
    let err = run("{{ pemToPkcs12 .cert .key }}", &[("cert", &c.leaf), ("key", &c.leaf)]).expect_err("cert as key");
    assert!(err.contains("unable to parse private key type"), "{err}");
}

#[test]
fn truststore_holds_every_certificate() {
    let c = chain();
    let bundle = format!("{}{}", c.intermediate, c.root);
    let p12 = run("{{ pemTruststoreToPKCS12Pass .ca \"changeit\" }}", &[("ca", &bundle)]).expect("truststore");
    let back = run("{{ .p12 | b64dec | pkcs12certPass \"changeit\" }}", &[("p12", &p12)]).expect("certs");
    let mut got = der_of(&back);
    let mut want = der_of(&bundle);
    got.sort();
    want.sort();
    assert_eq!(got, want);
    let p12 = run("{{ pemTruststoreToPKCS12 .ca }}", &[("ca", &c.root)]).expect("no password");
    assert_eq!(der_of(&run("{{ .p12 | b64dec | pkcs12cert }}", &[("p12", &p12)]).expect("cert")), der_of(&c.root));
}

#[test]
fn filter_cert_chain_orders_and_picks() {
    let c = chain();
    // Shuffled on purpose: the chain is ordered by key identifiers.
    let mixed = format!("{}{}{}", c.root, c.leaf, c.intermediate);
    let data = [("chain", mixed.as_str())];
    let pick = |kind: &str| run(&format!("{{{{ filterCertChain \"{kind}\" .chain }}}}"), &data).expect(kind);
    assert_eq!(der_of(&pick("leaf")), der_of(&c.leaf));
    assert_eq!(der_of(&pick("intermediate")), der_of(&c.intermediate));
    assert_eq!(der_of(&pick("root")), der_of(&c.root));
    // As upstream's guide combines them.
    let tls = run("{{ .chain | filterPEM \"CERTIFICATE\" | filterCertChain \"leaf\" }}", &data).expect("combined");
    assert_eq!(der_of(&tls), der_of(&c.leaf));
    // A root alone is no leaf; a chain without intermediates has none.
    assert_eq!(run("{{ filterCertChain \"leaf\" .c }}", &[("c", &c.root)]).expect("root only"), "");
    let short = format!("{}{}", c.intermediate, c.root);
    assert_eq!(run("{{ filterCertChain \"intermediate\" .c }}", &[("c", &short)]).expect("none"), "");
    let err = run("{{ filterCertChain \"branch\" .chain }}", &data).expect_err("unknown type");
    assert!(err.contains("use leaf, intermediate or root"), "{err}");
    let other = chain();
    let two_leaves = format!("{}{}", c.leaf, other.leaf);
    let err = run("{{ filterCertChain \"leaf\" .c }}", &[("c", &two_leaves)]).expect_err("disjunct");
    assert!(err.contains("multiple leaf or disjunct"), "{err}");
}

#[test]
fn cert_sans_lists_every_kind() {
    let c = chain();
    let out = run("{{ range certSANs .cert }}{{ . }};{{ end }}", &[("cert", &c.leaf)]).expect("sans");
    assert_eq!(out, "app.example.com;10.0.0.7;ops@example.com;spiffe://example/app;");
    assert_eq!(run("{{ certSANs .cert | len }}", &[("cert", &c.root)]).expect("none"), "0");
    let err = run("{{ certSANs .cert }}", &[("cert", "nope")]).expect_err("not PEM");
    assert!(err.contains("failed to decode PEM block"), "{err}");
}
