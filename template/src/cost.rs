//! What a function call costs, in evaluation steps.
//!
//! A template is tenant input: its CPU is bounded by [`crate::Limits::max_steps`], and a step
//! must mean roughly the same CPU whatever the template calls. Walking a node or calling a
//! cheap function is one step; a function whose work grows with its input or output, or that
//! runs a key-derivation or public-key operation, is charged what it really costs. The charge is
//! taken **before** the call (from the arguments), so a budget that cannot pay for a `bcrypt`
//! stops the render before the hash is computed, and after it (from the result's size).
//!
//! ## Calibration
//!
//! A step is worth about 250 ns of CPU in the unoptimised test build, where the figures below
//! were measured on the development machine (2 shared cores) with
//! `cargo test -p keyward-template --test budget -- --ignored --nocapture`. The release build
//! runs the evaluator about ten times faster and the cryptography two to five times faster, so
//! costs set from test-build ratios overcharge cryptography in release, never undercharge it.
//!
//! | work | measured (test build) | steps it is worth at 250 ns | charged |
//! |---|---|---|---|
//! | one cheap node (`{{ range }}{{ if true }}`) | 240 ns | 1 | 1 |
//! | a piped call (`$i \| add1 \| toString \| upper`) | 860 ns per step | 3 | 1 per call |
//! | `bcrypt` / `htpasswd` (cost 10, as Go) | 142 ms | 570 000 | 1 000 000 |
//! | `rsaDecrypt`, RSA-2048 | 11 ms | 44 000 | 40 000 (cubic in the key's PEM length) |
//! | `jwkPrivateKeyPem`, RSA-2048 / EC | 2 ms | 8 000 | 33 000 / 10 000 |
//! | `pemToPkcs12` (3 derivations of 10 000 PBKDF2 iterations) | 187 ms | 750 000 | 600 000 |
//! | `pkcs12keyPass` of a 1 KiB keystore | 39 ms | 156 000 | 20 per declared iteration + 200 000 |
//! | `sha256sum` / `regexReplaceAll` of 512 KiB | 16 / 14 ms | 64 000 / 57 000 | 1 per 8 bytes in and out |
//! | `fromYaml` of 512 KiB | 25 ms | 100 000 | 1 per 8 bytes in and out |
//! | `derivePassword` (scrypt N=32768 r=8 p=2) | 6 s (117 ms in release) | 24 000 000 | 2 000 000 |
//! | `genCA` (a new RSA-2048 key, signed) | 440 ms (80 ms in release) | 1 800 000 | 1 540 000 |
//! | `genPrivateKey "rsa"` (a new RSA-4096 key) | 9.4 s (1.1 s in release) | 37 000 000 | 8 000 000 |
//! | reading (copying) a 512 KiB value | 83 µs | 330 | 1 per KiB |
//!
//! The default budget of 10 000 000 steps is therefore 2.5 s of cheap nodes in the test build
//! and about a quarter of that to one second in release (function-heavy loops are the slowest
//! per step); a template that does nothing but hash passwords gets ten `bcrypt`s (0.6-1.4 s).
//! An honest template (a few hashes, one keystore, a decryption) uses well under half of it.
//! Public-key work grows with the cube of the key size, and the key size with the PEM's length.
//!
//! scrypt and RSA key generation are pure Rust big-number and memory work, fifty times slower
//! unoptimised than in release (the figures above; the workspace now optimises those crates in
//! test builds too): their charges follow the release figures, in bcrypt's proportion (`derivePassword` is two bcrypts, a new
//! RSA-2048 key one and a half). A new RSA-4096 key costs a second in release, about the whole
//! budget: it is charged 8 000 000 so that a render can make one and nothing much else.
//! The evaluator also charges lists and maps handed to a function one step per byte.

use crate::value::Value;

/// Bytes copied, scanned or parsed per step.
pub const BYTES_PER_STEP: usize = 8;
/// Bytes copied per step when a value is read (a `memcpy`, far cheaper than scanning).
pub const BYTES_PER_COPY_STEP: usize = 1024;
/// One bcrypt hash at cost 10.
pub const BCRYPT: usize = 1_000_000;
/// One PBKDF2 (or PKCS#12 KDF) iteration.
pub const KDF_ITERATION: usize = 20;
/// Iterations the PKCS#12 writer uses per derived key (`p12-keystore`'s default).
pub const WRITE_ITERATIONS: usize = 10_000;
/// One RSA-2048 private-key operation (decryption, or checking and encoding a private key).
pub const RSA_2048: usize = 40_000;
/// PEM (or JWK JSON) length of a 2048-bit RSA private key.
const RSA_2048_PEM_BYTES: usize = 1_750;
/// One EC scalar multiplication (P-256/P-384 public key from a private one).
pub const EC_SCALAR: usize = 10_000;
/// `derivePassword`: one scrypt derivation with N=32768, r=8, p=2 (32 MiB of memory work).
pub const SCRYPT: usize = 2_000_000;
/// A new RSA-2048 key (a random prime search: the charge covers a slow draw, not the mean).
pub const RSA_2048_KEYGEN: usize = 1_500_000;
/// A new RSA-4096 key, `genPrivateKey "rsa"`: one fits in the default budget, two do not.
pub const RSA_4096_KEYGEN: usize = 8_000_000;

/// Steps charged before `name` runs on `args`: what the work it is about to do costs.
pub fn before(name: &str, args: &[Value]) -> usize {
    let input: usize = args.iter().map(text_len).fold(0, usize::saturating_add);
    let scan = input / BYTES_PER_STEP;
    let fixed = match name {
        "bcrypt" | "htpasswd" => BCRYPT,
        "rsaDecrypt" => args.get(3).map_or(0, |k| rsa(text_len(k))),
        "jwkPrivateKeyPem" => args.first().map_or(0, |k| rsa(text_len(k))).max(EC_SCALAR),
        "jwkPublicKeyPem" => EC_SCALAR,
        "pkcs12key" | "pkcs12keyPass" | "pkcs12cert" | "pkcs12certPass" => {
            args.last().map_or(0, |d| pkcs12_read(&d.to_bytes()))
        }
        "pemToPkcs12" | "pemToPkcs12Pass" | "fullPemToPkcs12" | "fullPemToPkcs12Pass" => {
            let key = args.get(1).map_or(0, |k| rsa(text_len(k)));
            key.saturating_add(pkcs12_write(args.first()))
        }
        "pemTruststoreToPKCS12" | "pemTruststoreToPKCS12Pass" => pkcs12_write(args.first()),
        name if name.starts_with("regex") || name.starts_with("mustRegex") => regex(args),
        "derivePassword" => SCRYPT,
        "genPrivateKey" => match args.first().map(|a| a.to_display()).as_deref() {
            Some("" | "rsa") => RSA_4096_KEYGEN,
            _ => EC_SCALAR,
        },
        // A new RSA-2048 key, signed by itself or by the CA's key.
        "genCA" | "genSelfSignedCert" => RSA_2048_KEYGEN.saturating_add(RSA_2048),
        "genSignedCert" => RSA_2048_KEYGEN.saturating_add(args.get(4).map_or(RSA_2048, ca_key)),
        // Signing with the given key (and checking it).
        "genCAWithKey" => args.get(2).map_or(0, |k| rsa(text_len(k))).max(EC_SCALAR),
        "genSelfSignedCertWithKey" => args.get(4).map_or(0, |k| rsa(text_len(k))).max(EC_SCALAR),
        "genSignedCertWithKey" => {
            let own = args.get(5).map_or(0, |k| rsa(text_len(k))).max(EC_SCALAR);
            own.saturating_add(args.get(4).map_or(RSA_2048, ca_key))
        }
        "buildCustomCert" => args.get(1).map_or(0, |k| rsa(text_len(k) * 3 / 4)).max(EC_SCALAR),
        _ => 0,
    };
    fixed.saturating_add(scan)
}

/// Steps charged for a function's result: building it cost about its size.
pub fn after(out: &Value) -> usize {
    match out {
        Value::List(l) => l.len(),
        Value::Map(m) => m.borrow().len(),
        other => text_len(other) / BYTES_PER_STEP,
    }
}

/// Length of a string-like value (lists and maps are charged by the evaluator's size check).
pub fn text_len(v: &Value) -> usize {
    match v {
        Value::Str(s) => s.len(),
        Value::Bytes(b) => b.len(),
        _ => 0,
    }
}

/// An RSA private-key operation on a key whose PEM (or JWK) is `len` bytes long: cubic in the
/// key size, the length standing for the size (a 2048-bit key is about 1.7 KiB of PEM).
fn rsa(len: usize) -> usize {
    let l = len as u128;
    let steps = (RSA_2048 as u128) * l * l * l / (RSA_2048_PEM_BYTES as u128).pow(3);
    usize::try_from(steps).unwrap_or(usize::MAX).max(RSA_2048 / 8)
}

/// Signing with the key of a certificate dict (`genSignedCert`'s CA).
fn ca_key(ca: &Value) -> usize {
    let key = match ca {
        Value::Map(m) => m.borrow().get("Key").map_or(0, text_len),
        _ => 0,
    };
    rsa(key).max(EC_SCALAR)
}

/// Writing a keystore: a MAC key and one encryption key per PEM block (each certificate is a
/// bag, the key another), each derived with [`WRITE_ITERATIONS`].
fn pkcs12_write(pem: Option<&Value>) -> usize {
    let blocks = pem.map_or(1, |p| count(&p.to_bytes(), b"-----BEGIN").max(1));
    (blocks + 2).saturating_mul(WRITE_ITERATIONS).saturating_mul(KDF_ITERATION)
}

/// Reading a keystore: the iteration counts its unencrypted structure declares (MAC and
/// encryption parameters), plus one default-sized derivation for content they hide.
fn pkcs12_read(der: &[u8]) -> usize {
    let declared = crate::der::iteration_counts(der);
    declared.saturating_add(WRITE_ITERATIONS).saturating_mul(KDF_ITERATION)
}

/// Regular expressions: compiling is proportional to the pattern; matching is linear in the
/// input for the lazy DFA, but its fallback (the PikeVM) costs pattern × input.
fn regex(args: &[Value]) -> usize {
    let pattern = args.first().map_or(0, text_len);
    let input: usize = args.iter().skip(1).map(text_len).max().unwrap_or(0);
    let pike = pattern.saturating_mul(input) / 256;
    pattern.saturating_mul(4).saturating_add(pike)
}

fn count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack.windows(needle.len()).filter(|w| *w == needle).count()
}
