//! Just enough DER to price a PKCS#12 keystore before it is opened: the sum of the iteration
//! counts its unencrypted structure declares. Opening a keystore runs a key derivation per count
//! (up to a million iterations each), in one call that nothing can interrupt, so the cost has to
//! be known first. Every small positive INTEGER counts (a version or a short serial number costs
//! a little extra, never less); OCTET STRINGs that hold DER are looked into, as PKCS#12 wraps its
//! contents in them. Content that is encrypted cannot be read and is not counted here.

/// The largest iteration count `p12-keystore` accepts; larger INTEGERs are not iteration counts.
const MAX_ITERATIONS: u64 = 1_000_000;
/// Deepest nesting looked into (PKCS#12 nests about ten levels).
const MAX_DEPTH: usize = 24;

/// The sum of the INTEGERs between 2 and a million found in `der`, looking into nested
/// structures and OCTET STRINGs that parse as DER.
pub fn iteration_counts(der: &[u8]) -> usize {
    let mut sum = 0usize;
    walk(der, 0, &mut sum);
    sum
}

/// One TLV: (tag, contents, rest), or None when `b` does not start with a definite-length TLV.
fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = b.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |acc, &x| (acc << 8) | usize::from(x));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// Whether `b` is a complete sequence of TLVs (so an OCTET STRING holding it holds DER).
fn is_der(b: &[u8]) -> bool {
    let mut rest = b;
    while !rest.is_empty() {
        match tlv(rest) {
            Some((_, _, r)) => rest = r,
            None => return false,
        }
    }
    !b.is_empty()
}

fn walk(mut b: &[u8], depth: usize, sum: &mut usize) {
    if depth > MAX_DEPTH {
        return;
    }
    while let Some((tag, contents, rest)) = tlv(b) {
        match tag {
            0x02 if contents.len() <= 4 && contents.first().is_some_and(|x| x & 0x80 == 0) => {
                let v = contents.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
                if (2..=MAX_ITERATIONS).contains(&v) {
                    *sum = sum.saturating_add(usize::try_from(v).unwrap_or(usize::MAX));
                }
            }
            0x04 if is_der(contents) => walk(contents, depth + 1, sum),
            t if t & 0x20 != 0 => walk(contents, depth + 1, sum),
            _ => {}
        }
        b = rest;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_nested_integers_and_ignores_large_ones() {
        // SEQUENCE { INTEGER 3, OCTET STRING { SEQUENCE { INTEGER 2048 } }, INTEGER 2^31-1 }
        let inner = [0x30, 0x04, 0x02, 0x02, 0x08, 0x00];
        let mut der = vec![0x30, 0x11, 0x02, 0x01, 0x03, 0x04, inner.len() as u8];
        der.extend(inner);
        der.extend([0x02, 0x04, 0x7f, 0xff, 0xff, 0xff]);
        assert_eq!(iteration_counts(&der), 3 + 2048);
        assert_eq!(iteration_counts(b"not der at all"), 0);
        assert_eq!(iteration_counts(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), 0, "lengths past the end stop the walk");
    }
}
