//! `docs/templates.md` documents every function that exists.

#[test]
fn every_function_is_documented() {
    let path = format!(
        "{}/../docs/templates.md",
        std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs a test")
    );
    let doc = std::fs::read_to_string(path).expect("docs/templates.md");
    let documented = |f: &str| doc.contains(&format!("`{f} ")) || doc.contains(&format!("`{f}`"));
    let missing: Vec<&str> = keyward_template::function_names().into_iter().filter(|f| !documented(f)).collect();
    assert!(missing.is_empty(), "functions missing from docs/templates.md: {missing:?}");
}

/// Every function name of upstream's engine v2 (release 2.9.0: Go's builtins, its Sprig copy
/// and its own) is in the table, and the table has only those and `required`.
#[test]
fn every_upstream_function_exists() {
    const UPSTREAM: &str = "abbrev abbrevboth add add1 add1f addf adler32sum ago all and any append atoi b32dec b32enc \
        b64dec b64enc base bcrypt biggest buildCustomCert call camelcase cat ceil certSANs chunk clean coalesce compact \
        concat contains date dateInZone dateModify date_in_zone date_modify decryptAES deepCopy deepEqual default \
        derivePassword dict dig dir div divf duration durationRound empty encryptAES eq ext fail filterCertChain \
        filterPEM first float64 floor fromJson fromYaml fullPemToPkcs12 fullPemToPkcs12Pass ge genCA genCAWithKey \
        genPrivateKey genSelfSignedCert genSelfSignedCertWithKey genSignedCert genSignedCertWithKey get gt has hasKey \
        hasPrefix hasSuffix hello hexdec html htmlDate htmlDateInZone htpasswd indent index initial initials int \
        int64 isAbs js join jwkPrivateKeyPem jwkPublicKeyPem kebabcase keys kindIs kindOf last le len list lower lt \
        max maxf merge mergeOverwrite min minf mod mul mulf mustAppend mustChunk mustCompact mustDateModify \
        mustDeepCopy mustFirst mustFromJson mustHas mustInitial mustLast mustMerge mustMergeOverwrite mustPrepend \
        mustPush mustRegexFind mustRegexFindAll mustRegexMatch mustRegexReplaceAll mustRegexReplaceAllLiteral \
        mustRegexSplit mustRest mustReverse mustSlice mustToDate mustToJson mustToPrettyJson mustToRawJson mustUniq \
        mustWithout must_date_modify ne nindent nospace not now omit or osBase osClean osDir osExt osIsAbs \
        pemToPkcs12 pemToPkcs12Pass pemTruststoreToPKCS12 pemTruststoreToPKCS12Pass pick pkcs12cert pkcs12certPass \
        pkcs12key pkcs12keyPass plural pluck prepend print printf println push quote randAlpha randAlphaNum \
        randAscii randBytes randInt randNumeric regexFind regexFindAll regexMatch regexQuoteMeta regexReplaceAll \
        regexReplaceAllLiteral regexSplit repeat replace rest reverse round rsaDecrypt semver semverCompare seq set \
        sha1sum sha256sum sha512sum shuffle slice snakecase sortAlpha split splitList splitn squote sub subf substr \
        swapcase ternary title toDate toDecimal toJson toPrettyJson toRawJson toString toStrings toYaml trim \
        trimAll trimPrefix trimSuffix trimall trunc tuple typeIs typeIsLike typeOf uniq unixEpoch unset until \
        untilStep untitle upper urlJoin urlParse urlquery uuidv4 values without wrap wrapWith";
    let upstream: Vec<&str> = UPSTREAM.split_whitespace().collect();
    assert_eq!(upstream.len(), 245);
    let missing: Vec<&&str> = upstream.iter().filter(|f| !keyward_template::is_function(f)).collect();
    assert!(missing.is_empty(), "upstream functions Keyward lacks: {missing:?}");
    let extra: Vec<&str> = keyward_template::function_names().into_iter().filter(|f| !upstream.contains(f)).collect();
    assert_eq!(extra, ["required"], "functions upstream does not have");
}
