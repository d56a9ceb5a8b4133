//! The CPU budget and the deadline: expensive functions are charged what they cost, so a loop of
//! them ends with a budget error long before it would have finished, and a deadline stops any
//! render wherever it is. Each case runs on its own thread with a timeout, so an engine without
//! these bounds fails the test instead of hanging it.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use keyward_template::{ErrorKind, Limits, TemplateError, render};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/{name}",
        std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs a test")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Renders `src` on another thread; panics when it has not finished within `within`.
fn render_within(
    src: &str,
    data: &[(&str, Vec<u8>)],
    limits: Limits,
    within: Duration,
) -> Result<String, TemplateError> {
    let src = src.to_string();
    let data: BTreeMap<String, Vec<u8>> = data.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let out = render(&[("t", src.as_str())], &data, &limits).map(|m| String::from_utf8_lossy(&m["t"]).into_owned());
        let _ = tx.send(out);
    });
    rx.recv_timeout(within).unwrap_or_else(|_| panic!("still rendering after {within:?}"))
}

fn over_budget(r: Result<String, TemplateError>, want: &str) {
    let e = r.expect_err("the render must fail");
    assert!(e.is_limit() && e.is_over_budget(), "not a budget error: {e}");
    assert!(matches!(e.kind, ErrorKind::Budget(_)), "{e}");
    assert!(e.to_string().contains(want), "{e} does not contain {want:?}");
}

#[test]
fn a_loop_of_bcrypt_runs_out_of_budget_before_hashing_much() {
    // Before costs, this looped 100 000 bcrypts (hours). The budget now pays for ten hashes; a
    // budget of two and a half pays for two, and the third is refused before it runs.
    let limits = Limits { max_steps: 2_500_000, ..Limits::default() };
    let started = Instant::now();
    let r = render_within(
        "{{ range until 100000 }}{{ if bcrypt \"x\" }}{{ end }}{{ end }}",
        &[],
        limits,
        Duration::from_secs(60),
    );
    over_budget(r, "template exceeded its CPU budget");
    eprintln!("bcrypt loop stopped after {:?}", started.elapsed());
}

#[test]
fn a_loop_of_htpasswd_runs_out_of_budget() {
    let limits = Limits { max_steps: 1_500_000, ..Limits::default() };
    let r = render_within(
        "{{ range $i := until 100000 }}{{ htpasswd \"user\" \"pw\" }}{{ end }}",
        &[],
        limits,
        Duration::from_secs(60),
    );
    over_budget(r, "more than 1500000 evaluation steps");
}

#[test]
fn a_deadline_stops_a_long_render_wherever_it_is() {
    // No step budget to speak of: only the deadline can end this loop.
    let limits = Limits { max_steps: usize::MAX, max_range_iterations: usize::MAX, ..Limits::default() }
        .within(Duration::from_millis(300));
    let started = Instant::now();
    let r =
        render_within("{{ range 1000000000000 }}{{ if true }}{{ end }}{{ end }}", &[], limits, Duration::from_secs(30));
    over_budget(r, "template exceeded its time limit");
    assert!(started.elapsed() < Duration::from_secs(3), "stopped after {:?}", started.elapsed());
}

#[test]
fn a_deadline_stops_a_loop_of_expensive_calls() {
    // The budget would allow it all; the deadline is checked before every expensive call.
    let limits = Limits { max_steps: usize::MAX, ..Limits::default() }.within(Duration::from_millis(500));
    let started = Instant::now();
    let r = render_within(
        "{{ range until 100000 }}{{ if bcrypt \"x\" }}{{ end }}{{ end }}",
        &[],
        limits,
        Duration::from_secs(60),
    );
    over_budget(r, "time limit");
    eprintln!("bcrypt loop under a 500 ms deadline stopped after {:?}", started.elapsed());
}

#[test]
fn large_string_builders_are_charged_by_size() {
    // Each `repeat` builds 512 KiB: 32 768 steps. A budget of a million pays for about 30.
    let limits = Limits { max_steps: 1_000_000, ..Limits::default() };
    let r = render_within(
        "{{ range until 100000 }}{{ if repeat 524288 \"x\" }}{{ end }}{{ end }}",
        &[],
        limits,
        Duration::from_secs(60),
    );
    over_budget(r, "evaluation steps");
    // Reading a large value copies it: charged too.
    let big = vec![b'a'; 1 << 20];
    let limits = Limits { max_steps: 1_000_000, ..Limits::default() };
    let r = render_within(
        "{{ range until 100000 }}{{ if $.big }}{{ end }}{{ end }}",
        &[("big", big)],
        limits,
        Duration::from_secs(60),
    );
    over_budget(r, "evaluation steps");
}

#[test]
fn honest_templates_fit_well_within_the_budget() {
    // A few hashes, a keystore, an RSA decryption and the usual encoders use less than half
    // of the default budget.
    let limits = Limits { max_steps: Limits::default().max_steps / 2, ..Limits::default() };
    let data = [
        ("ks", fixture("leaf.p12")),
        ("pw", b"changeit".to_vec()),
        ("ct", fixture("rsa-oaep-sha256.bin")),
        ("key", fixture("rsa.key.pem")),
        ("jwk", fixture("rsa.jwk.json")),
        ("crt", fixture("leaf.crt.pem")),
        ("leafkey", fixture("leaf.key.pem")),
    ];
    let src = "{{ htpasswd \"alice\" .pw | len }} {{ bcrypt .pw | len }} {{ pkcs12keyPass .pw .ks | len }} \
               {{ rsaDecrypt \"RSA-OAEP\" \"SHA256\" .ct .key }} {{ jwkPrivateKeyPem .jwk | len }} \
               {{ pemToPkcs12 .crt .leafkey | len }} {{ range until 1000 }}{{ $.pw | b64enc | upper | len }}{{ end }}";
    let out = render_within(src, &data, limits, Duration::from_secs(300)).expect("renders");
    assert!(out.contains("oaep secret sha256"), "{out}");
}

/// Prints what one step and the expensive functions cost on this machine (the figures the
/// costs in `src/cost.rs` are calibrated on):
/// `cargo test -p keyward-template --test budget -- --ignored --nocapture`.
#[test]
#[ignore = "calibration figures, not a check"]
fn calibrate() {
    let time = |src: &str, data: &[(&str, Vec<u8>)], n: u32| {
        let data: BTreeMap<String, Vec<u8>> = data.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        let limits = Limits { max_steps: usize::MAX, max_range_iterations: usize::MAX, ..Limits::default() };
        let started = Instant::now();
        for _ in 0..n {
            render(&[("t", src)], &data, &limits).expect("renders");
        }
        started.elapsed() / n
    };
    // `range N` with an `if`: one step per iteration (the `if` node), checked below.
    let cheap = "{{ range 100000 }}{{ if true }}{{ end }}{{ end }}";
    let exact = Limits { max_steps: 100_001, ..Limits::default() };
    render(&[("t", cheap)], &BTreeMap::new(), &exact).expect("100 001 steps suffice");
    let fewer = Limits { max_steps: 99_999, ..Limits::default() };
    render(&[("t", cheap)], &BTreeMap::new(), &fewer).expect_err("99 999 steps do not");
    eprintln!("cheap step: {:?}", time(cheap, &[], 3) / 100_000);
    let piped = "{{ range $i := until 100000 }}{{ $x := $i | add1 | toString | upper }}{{ end }}";
    eprintln!("piped loop iteration (5 steps): {:?}", time(piped, &[], 3) / 100_000);
    eprintln!("bcrypt: {:?}", time("{{ bcrypt \"x\" }}", &[], 1));
    let rsa = [("ct", fixture("rsa-oaep-sha256.bin")), ("key", fixture("rsa.key.pem"))];
    eprintln!("rsaDecrypt 2048: {:?}", time("{{ rsaDecrypt \"RSA-OAEP\" \"SHA256\" .ct .key }}", &rsa, 3));
    eprintln!(
        "jwkPrivateKeyPem RSA 2048: {:?}",
        time("{{ jwkPrivateKeyPem .k }}", &[("k", fixture("rsa.jwk.json"))], 3)
    );
    eprintln!("jwkPrivateKeyPem EC: {:?}", time("{{ jwkPrivateKeyPem .k }}", &[("k", fixture("ec.jwk.json"))], 3));
    let p12 = [("ks", fixture("leaf.p12")), ("pw", b"changeit".to_vec())];
    eprintln!("pkcs12keyPass: {:?}", time("{{ pkcs12keyPass .pw .ks }}", &p12, 3));
    let pem = [("c", fixture("leaf.crt.pem")), ("k", fixture("leaf.key.pem"))];
    eprintln!("pemToPkcs12: {:?}", time("{{ pemToPkcs12 .c .k }}", &pem, 3));
    let big = [("big", vec![b'a'; 1 << 19])];
    eprintln!("512 KiB b64enc: {:?}", time("{{ if b64enc .big }}{{ end }}", &big, 3));
    eprintln!("512 KiB sha256sum: {:?}", time("{{ sha256sum .big }}", &big, 3));
    eprintln!("512 KiB regexReplaceAll: {:?}", time("{{ if regexReplaceAll \"a+b\" .big \"x\" }}{{ end }}", &big, 3));
    eprintln!("512 KiB read (copy): {:?}", time("{{ if .big }}{{ end }}", &big, 10));
    eprintln!("repeat 512 KiB: {:?}", time("{{ if repeat 524288 \"x\" }}{{ end }}", &[], 3));
    eprintln!("512 KiB fromYaml: {:?}", time("{{ if fromYaml (printf \"k: %s\" .big) }}{{ end }}", &big, 3));
    eprintln!("derivePassword: {:?}", time("{{ derivePassword 1 \"long\" \"p\" \"u\" \"s\" }}", &[], 2));
    eprintln!("genPrivateKey rsa (4096): {:?}", time("{{ genPrivateKey \"rsa\" }}", &[], 3));
    eprintln!("genPrivateKey ecdsa: {:?}", time("{{ genPrivateKey \"ecdsa\" }}", &[], 3));
    eprintln!("genCA (RSA 2048): {:?}", time("{{ genCA \"x\" 1 }}", &[], 5));
    let with_key = "{{ $k := genPrivateKey \"ecdsa\" }}{{ genCAWithKey \"x\" 1 $k }}";
    eprintln!("genCAWithKey ecdsa (and the key): {:?}", time(with_key, &[], 3));
    eprintln!("512 KiB encryptAES: {:?}", time("{{ if encryptAES \"k\" .big }}{{ end }}", &big, 3));
    eprintln!("seq of 100 000: {:?}", time("{{ if seq 100000 }}{{ end }}", &[], 3));
    let pathological = "{{ if regexMatch \"(a|aa|aaa|aaaa|b)*c(x|y){1,200}\" .big }}{{ end }}";
    eprintln!("512 KiB regexMatch, large NFA: {:?}", time(pathological, &big, 1));
}
