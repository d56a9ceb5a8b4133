//! Sprig's `encryptAES` / `decryptAES` (AES-256-CBC, PKCS#7 padding, a random IV before the
//! ciphertext, base64; the key is the password's bytes, zero-padded or cut to 32), its
//! `derivePassword` (the Master Password algorithm), and `adler32sum`.

use aes::cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::Mac as _;

use super::{FnCtx, FnError, FnResult, Func, bytes, check_size, int, s, want};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("encryptAES", encrypt_aes),
    ("decryptAES", decrypt_aes),
    ("derivePassword", derive_password),
    ("adler32sum", adler32sum),
];

fn cipher(password: &[u8]) -> aes::Aes256 {
    let mut key = [0u8; 32];
    let n = password.len().min(32);
    key[..n].copy_from_slice(&password[..n]);
    aes::Aes256::new(&key.into())
}

/// `encryptAES password plaintext`.
fn encrypt_aes(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let plain = bytes(&a[1]);
    if plain.is_empty() {
        return Ok(Value::str(""));
    }
    check_size(ctx, (plain.len() + 32).saturating_mul(4) / 3 + 4)?;
    let c = cipher(&bytes(&a[0]));
    let pad = 16 - plain.len() % 16;
    let mut out = vec![0u8; 16];
    super::random::fill(&mut out)?;
    let mut prev: [u8; 16] = out[..16].try_into().unwrap_or([0; 16]);
    let mut padded = plain;
    padded.extend(std::iter::repeat_n(pad as u8, pad));
    for chunk in padded.chunks(16) {
        let mut block = [0u8; 16];
        for (i, b) in chunk.iter().enumerate() {
            block[i] = b ^ prev[i];
        }
        let mut blk = block.into();
        c.encrypt_block(&mut blk);
        prev = blk.into();
        out.extend_from_slice(&prev);
    }
    Ok(Value::Str(STANDARD.encode(out)))
}

/// `decryptAES password ciphertext`. Like Sprig, the padding is only cut, not checked: a wrong
/// password gives garbage, or an error when the last byte cannot be a padding length.
fn decrypt_aes(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let text = bytes(&a[1]);
    if text.is_empty() {
        return Ok(Value::str(""));
    }
    let crypt = STANDARD.decode(&text).map_err(|e| format!("illegal base64 data: {e}"))?;
    if crypt.len() < 16 {
        return Err(FnError::Msg(format!("ciphertext of {} bytes is shorter than the 16-byte IV", crypt.len())));
    }
    if crypt.len() % 16 != 0 {
        return Err("crypto/cipher: input not full blocks".into());
    }
    let c = cipher(&bytes(&a[0]));
    let mut out = Vec::with_capacity(crypt.len() - 16);
    for pair in crypt.windows(32).step_by(16) {
        let mut blk: aes::Block = <[u8; 16]>::try_from(&pair[16..]).unwrap_or([0; 16]).into();
        c.decrypt_block(&mut blk);
        out.extend(blk.iter().zip(&pair[..16]).map(|(x, iv)| x ^ iv));
    }
    let pad = usize::from(out.last().copied().unwrap_or(0));
    if pad > out.len() {
        return Err(FnError::Msg(format!("padding length {pad} is longer than the {} decrypted bytes", out.len())));
    }
    out.truncate(out.len() - pad);
    Ok(Value::from_bytes(out))
}

const SEED: &[u8] = b"com.lyndir.masterpassword";

fn templates(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "maximum" => &["anoxxxxxxxxxxxxxxxxx", "axxxxxxxxxxxxxxxxxno"],
        "long" => &[
            "CvcvnoCvcvCvcv",
            "CvcvCvcvnoCvcv",
            "CvcvCvcvCvcvno",
            "CvccnoCvcvCvcv",
            "CvccCvcvnoCvcv",
            "CvccCvcvCvcvno",
            "CvcvnoCvccCvcv",
            "CvcvCvccnoCvcv",
            "CvcvCvccCvcvno",
            "CvcvnoCvcvCvcc",
            "CvcvCvcvnoCvcc",
            "CvcvCvcvCvccno",
            "CvccnoCvccCvcv",
            "CvccCvccnoCvcv",
            "CvccCvccCvcvno",
            "CvcvnoCvccCvcc",
            "CvcvCvccnoCvcc",
            "CvcvCvccCvccno",
            "CvccnoCvcvCvcc",
            "CvccCvcvnoCvcc",
            "CvccCvcvCvccno",
        ],
        "medium" => &["CvcnoCvc", "CvcCvcno"],
        "short" => &["Cvcn"],
        "basic" => &["aaanaaan", "aannaaan", "aaannaaa"],
        "pin" => &["nnnn"],
        _ => return None,
    })
}

fn characters(class: u8) -> &'static [u8] {
    match class {
        b'V' => b"AEIOU",
        b'C' => b"BCDFGHJKLMNPQRSTVWXYZ",
        b'v' => b"aeiou",
        b'c' => b"bcdfghjklmnpqrstvwxyz",
        b'A' => b"AEIOUBCDFGHJKLMNPQRSTVWXYZ",
        b'a' => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz",
        b'n' => b"0123456789",
        b'o' => b"@&%?,=[]_:-+*$#!'^~;()/.",
        _ => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789!@#$%^&*()",
    }
}

/// `derivePassword counter type password user site`: the site's password of the Master
/// Password algorithm (scrypt N=32768 r=8 p=2, then HMAC-SHA256).
fn derive_password(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 5)?;
    let counter =
        u32::try_from(int(&a[0])).map_err(|_| FnError::Msg(format!("counter {} overflows uint32", int(&a[0]))))?;
    let kind = s(&a[1]);
    let (password, user, site) = (bytes(&a[2]), bytes(&a[3]), bytes(&a[4]));
    let Some(templates) = templates(&kind) else {
        return Ok(Value::Str(format!("cannot find password template {kind}")));
    };
    let mut salt = SEED.to_vec();
    salt.extend((user.len() as u32).to_be_bytes());
    salt.extend(&user);
    let params = scrypt::Params::new(15, 8, 2).map_err(|e| FnError::Msg(format!("failed to derive password: {e}")))?;
    let mut key = [0u8; 64];
    scrypt::scrypt(&password, &salt, &params, &mut key)
        .map_err(|e| FnError::Msg(format!("failed to derive password: {e}")))?;
    let mut msg = SEED.to_vec();
    msg.extend((site.len() as u32).to_be_bytes());
    msg.extend(&site);
    msg.extend(counter.to_be_bytes());
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).map_err(|e| FnError::Msg(e.to_string()))?;
    mac.update(&msg);
    let seed = mac.finalize().into_bytes();
    let template = templates[usize::from(seed[0]) % templates.len()].as_bytes();
    let out: String = template
        .iter()
        .enumerate()
        .map(|(i, class)| {
            let chars = characters(*class);
            char::from(chars[usize::from(seed[i + 1]) % chars.len()])
        })
        .collect();
    Ok(Value::Str(out))
}

/// `adler32sum s`: the Adler-32 checksum, in decimal.
fn adler32sum(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let (mut x, mut y) = (1u32, 0u32);
    for b in bytes(&a[0]) {
        x = (x + u32::from(b)) % 65_521;
        y = (y + x) % 65_521;
    }
    Ok(Value::Str(((y << 16) | x).to_string()))
}
