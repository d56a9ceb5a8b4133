//! Functions whose result a render cannot repeat (the clock, the random generator, new keys):
//! their results have the shape and properties upstream's have, and two renders differ.

use std::collections::BTreeMap;

use keyward_template::{Limits, render, unrepeatable_functions};
use x509_parser::prelude::{FromDer, GeneralName, ParsedExtension, X509Certificate};

fn run(src: &str) -> String {
    try_run(src).unwrap_or_else(|e| panic!("{src}: {e}"))
}

fn try_run(src: &str) -> Result<String, String> {
    render(&[("t", src)], &BTreeMap::new(), &Limits::default())
        .map(|m| String::from_utf8_lossy(&m["t"]).into_owned())
        .map_err(|e| e.to_string())
}

fn matches(re: &str, text: &str) {
    assert!(regex::Regex::new(re).expect("regex").is_match(text), "{text:?} does not match {re}");
}

#[test]
fn the_clock() {
    // Go prints a time read from the clock with its monotonic reading.
    matches(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,9})? \+0000 UTC m=\+\d+\.\d{9}$", &run("{{ now }}"));
    let year = run("{{ now | date \"2006\" }}").parse::<i32>().expect("a year");
    assert!((2024..3000).contains(&year), "{year}");
    // A string is not a time: `date` formats now, as Sprig does.
    assert_eq!(run("{{ date \"2006\" \"1700000000\" }}"), year.to_string());
    assert_eq!(run("{{ now | ago }}"), "0s");
    let epoch: i64 = run("{{ now | unixEpoch }}").parse().expect("seconds");
    assert!(epoch > 1_700_000_000, "{epoch}");
    assert_eq!(run("{{ (now).Unix | toString | len }}"), "10");
    // Go chains a field on a function call: `now.Unix`.
    assert_eq!(run("{{ now.Unix | toString | len }} {{ now.UTC.Year | lt 2000 }}"), "10 true");
    assert_eq!(run("{{ now | dateModify \"-48h\" | ago }}"), "48h0m0s");
    assert_ne!(run("{{ now }}"), run("{{ now }}"));
}

#[test]
fn random_strings_and_numbers() {
    matches("^[A-Za-z]{12}$", &run("{{ randAlpha 12 }}"));
    matches("^[A-Za-z0-9]{12}$", &run("{{ randAlphaNum 12 }}"));
    matches("^[0-9]{12}$", &run("{{ randNumeric 12 }}"));
    matches("^[ -~]{12}$", &run("{{ randAscii 12 }}"));
    assert_eq!(run("{{ randAlpha 0 }}|{{ randAlpha -3 }}"), "|");
    for _ in 0..20 {
        let n: i64 = run("{{ randInt 1 3 }}").parse().expect("int");
        assert!((1..3).contains(&n), "{n}");
    }
    assert!(try_run("{{ randInt 3 3 }}").expect_err("empty range").contains("invalid argument to Intn"));
    use base64::Engine as _;
    let b = base64::engine::general_purpose::STANDARD.decode(run("{{ randBytes 24 }}")).expect("base64");
    assert_eq!(b.len(), 24);
    let mut shuffled: Vec<char> = run("{{ shuffle \"hello world\" }}").chars().collect();
    shuffled.sort_unstable();
    let mut original: Vec<char> = "hello world".chars().collect();
    original.sort_unstable();
    assert_eq!(shuffled, original);
    let id = run("{{ uuidv4 }}");
    matches("^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", &id);
    assert_ne!(id, run("{{ uuidv4 }}"));
    assert_ne!(run("{{ randAlphaNum 32 }}"), run("{{ randAlphaNum 32 }}"));
    assert_ne!(run("{{ encryptAES \"k\" \"same\" }}"), run("{{ encryptAES \"k\" \"same\" }}"));
}

#[test]
fn the_list_of_unrepeatable_functions() {
    let names = unrepeatable_functions();
    for f in ["now", "date", "ago", "randAlpha", "uuidv4", "genPrivateKey", "genCA", "genSignedCert", "encryptAES"] {
        assert!(names.contains(&f), "{f} missing from {names:?}");
    }
    assert!(!names.contains(&"toDate") && !names.contains(&"sha256sum"), "{names:?}");
}

fn pem_der(pem_text: &str, tag: &str) -> Vec<u8> {
    let p = pem::parse(pem_text).unwrap_or_else(|e| panic!("{pem_text}: {e}"));
    assert_eq!(p.tag(), tag);
    p.into_contents()
}

#[test]
fn private_keys() {
    let ec = run("{{ genPrivateKey \"ecdsa\" }}");
    p256::SecretKey::from_sec1_der(&pem_der(&ec, "EC PRIVATE KEY")).expect("a P-256 SEC1 key");
    let ed = pem_der(&run("{{ genPrivateKey \"ed25519\" }}"), "PRIVATE KEY");
    assert_eq!((ed.len(), &ed[..16]), (48, &hex::decode("302e020100300506032b657004220420").expect("hex")[..]));
    assert_eq!(run("{{ genPrivateKey \"rsa2\" }}"), "Unknown type rsa2");
    assert!(try_run("{{ genPrivateKey \"dsa\" }}").expect_err("dsa").contains("dsa keys are not supported"));
    assert_ne!(run("{{ genPrivateKey \"ecdsa\" }}"), ec);
}

#[test]
fn rsa_private_key_has_4096_bits() {
    use rsa::pkcs1::DecodeRsaPrivateKey;
    use rsa::traits::PublicKeyParts;
    let key = rsa::PrivateKey::from_pkcs1_der(&pem_der(&run("{{ genPrivateKey \"rsa\" }}"), "RSA PRIVATE KEY"))
        .expect("PKCS#1");
    assert_eq!(key.n().bit_width(), 4096);
}

fn cert(pem_text: &str) -> X509Certificate<'static> {
    let der: &'static [u8] = Box::leak(pem_der(pem_text, "CERTIFICATE").into_boxed_slice());
    X509Certificate::from_der(der).expect("x509").1
}

fn field(src: &str, f: &str) -> String {
    run(&format!("{src}{{{{ $c.{f} }}}}"))
}

#[test]
fn certificates_as_sprig_makes_them() {
    // A CA, a certificate it signs with names and addresses, and the pair read back.
    let src = "{{ $ca := genCAWithKey \"my-ca\" 365 (genPrivateKey \"ecdsa\") }}\
               {{ $c := genSignedCertWithKey \"svc\" (list \"10.0.0.1\") (list \"svc.local\" \"svc\") 30 $ca (genPrivateKey \"ed25519\") }}\
               {{ $c.Cert }}@@{{ $c.Key }}@@{{ $ca.Cert }}";
    let out = run(src);
    let parts: Vec<&str> = out.split("@@").collect();
    let (leaf, key, ca) = (cert(parts[0]), parts[1], cert(parts[2]));
    assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"), "{key}");
    assert_eq!(leaf.issuer().to_string(), "CN=my-ca");
    assert_eq!(ca.subject().to_string(), "CN=my-ca");
    assert_eq!(leaf.subject().to_string(), "CN=svc");
    assert!(ca.is_ca() && !leaf.is_ca());
    let days = (leaf.validity().not_after.timestamp() - leaf.validity().not_before.timestamp()) / 86_400;
    assert_eq!(days, 30);
    let mut names = Vec::new();
    for ext in leaf.extensions() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext.parsed_extension() {
            for n in &san.general_names {
                names.push(match n {
                    GeneralName::DNSName(d) => d.to_string(),
                    GeneralName::IPAddress(ip) => format!("{ip:?}"),
                    other => format!("{other:?}"),
                });
            }
        }
    }
    assert_eq!(names, ["svc.local", "svc", "[10, 0, 0, 1]"]);
    let usage = leaf.key_usage().expect("ok").expect("key usage");
    assert!(usage.value.digital_signature() && usage.value.key_encipherment() && !usage.value.key_cert_sign());
    let ext = leaf.extended_key_usage().expect("ok").expect("ext key usage");
    assert!(ext.value.server_auth && ext.value.client_auth);
    assert!(ca.key_usage().expect("ok").expect("ca usage").value.key_cert_sign());
    assert!(leaf.serial.bits() > 64, "a random 128-bit serial");
    // The CA signed it.
    leaf.verify_signature(Some(ca.public_key())).expect("signed by the CA");
}

#[test]
fn certificates_with_new_rsa_keys() {
    let out = run("{{ $ca := genCA \"root\" 10 }}{{ $c := genSelfSignedCert \"self\" nil (list \"a.example\") 5 }}\
         {{ $s := genSignedCert \"leaf\" nil nil 1 $ca }}{{ $ca.Cert }}@@{{ $c.Cert }}@@{{ $s.Cert }}@@{{ $s.Key }}");
    let parts: Vec<&str> = out.split("@@").collect();
    let (ca, own, leaf) = (cert(parts[0]), cert(parts[1]), cert(parts[2]));
    assert!(parts[3].starts_with("-----BEGIN RSA PRIVATE KEY-----"));
    assert_eq!(own.issuer().to_string(), "CN=self");
    leaf.verify_signature(Some(ca.public_key())).expect("signed by the CA");
    own.verify_signature(None).expect("self-signed");
    let rebuilt = run(&format!(
        "{{{{ $c := buildCustomCert \"{}\" \"{}\" }}}}{{{{ $c.Cert }}}}",
        base64_of(parts[2]),
        base64_of(parts[3])
    ));
    assert_eq!(rebuilt, parts[2]);
    let e = try_run("{{ buildCustomCert \"bm90IHBlbQ==\" \"eA==\" }}").expect_err("not a certificate");
    assert!(e.contains("unable to decode certificate"), "{e}");
    let e = try_run("{{ genSignedCert \"x\" nil nil 1 \"not a ca\" }}").expect_err("not a certificate dict");
    assert!(e.contains("expected sprig.certificate"), "{e}");
    assert!(field("{{ $c := genCA \"x\" 1 }}", "Key").starts_with("-----BEGIN RSA PRIVATE KEY-----"));
}

fn base64_of(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Upstream's `template-v2-from-secret.yaml` snippet: its `templated` and `annotations` items
/// (`KeysAndValues`), the second stamping the sync time with `now`.
#[test]
fn upstreams_snippet_with_now() {
    let data: BTreeMap<String, Vec<u8>> = [("user", "grafana"), ("password", "p4ss"), ("uri", "oci://registry")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
    let templated = "# key and value templated\nmy-application-{{ .user}}: {{ .password | b64enc }}\n# conditional keys\n\
                     {{- if hasPrefix \"oci://\" .uri }}\nenableOCI: true\n{{- else }}\nenableOCI: false\n{{- end }}\n\
                     # Fixed values\napplication-type: grafana\n";
    let out =
        keyward_template::render_keys_and_values("templated", templated, &data, &Limits::default()).expect("renders");
    assert_eq!(out["my-application-grafana"], b"cDRzcw==");
    assert_eq!(out["enableOCI"], b"true");
    let annotations = "#dynamic timestamp generation\nlast-synced-for-user/{{ .user }}: {{ now }}\n";
    let out = keyward_template::render_keys_and_values("annotations", annotations, &data, &Limits::default())
        .expect("renders");
    let stamp = String::from_utf8(out["last-synced-for-user/grafana"].clone()).expect("text");
    matches(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? \+0000 UTC m=\+\d+\.\d{9}$", &stamp);
}
