//! The Sprig functions of upstream's engine, each against the results Sprig's documentation
//! (and the libraries it is built on: xstrings, goutils, Masterminds/semver, Go's `net/url`,
//! `path` and `time`) gives for it. Functions that read the clock or the random generator are
//! in `tests/unrepeatable.rs`.

use std::collections::BTreeMap;

use keyward_template::{Limits, render};

fn run(src: &str) -> Result<String, String> {
    let data = BTreeMap::from([("secret".to_string(), b"s3cr3t".to_vec())]);
    render(&[("t", src)], &data, &Limits::default())
        .map(|m| String::from_utf8_lossy(&m["t"]).into_owned())
        .map_err(|e| e.to_string())
}

fn table(cases: &[(&str, &str)]) {
    let mut failed = Vec::new();
    for (src, want) in cases {
        match run(src) {
            Ok(got) if got == *want => {}
            other => failed.push(format!("{src}\n    want {want:?}\n    got  {other:?}")),
        }
    }
    assert!(failed.is_empty(), "{} of {} cases differ:\n{}", failed.len(), cases.len(), failed.join("\n"));
}

#[test]
fn strings_and_case() {
    table(&[
        (r#"{{ camelcase "http_server" }}"#, "HttpServer"),
        (r#"{{ camelcase "some_words" }}"#, "SomeWords"),
        (r#"{{ camelcase "no_https" }}"#, "NoHttps"),
        (r#"{{ camelcase "_complex__case_" }}"#, "_Complex_Case_"),
        (r#"{{ camelcase "some words" }}"#, "SomeWords"),
        (r#"{{ camelcase "GOLANG_IS_GREAT" }}"#, "GolangIsGreat"),
        (r#"{{ snakecase "FirstName" }}"#, "first_name"),
        (r#"{{ snakecase "HTTPServer" }}"#, "http_server"),
        (r#"{{ snakecase "NoHTTPS" }}"#, "no_https"),
        (r#"{{ snakecase "GO_PATH" }}"#, "go_path"),
        (r#"{{ snakecase "GO PATH" }}"#, "go_path"),
        (r#"{{ snakecase "GO-PATH" }}"#, "go_path"),
        (r#"{{ snakecase "http2xx" }}"#, "http_2xx"),
        (r#"{{ snakecase "HTTP20xOK" }}"#, "http_20x_ok"),
        (r#"{{ snakecase "Duration2m3s" }}"#, "duration_2m3s"),
        (r#"{{ snakecase "Bld4Floor3rd" }}"#, "bld4_floor_3rd"),
        (r#"{{ kebabcase "FirstName" }}"#, "first-name"),
        (r#"{{ kebabcase "HTTPServer" }}"#, "http-server"),
        (r#"{{ kebabcase "GO_PATH" }}"#, "go-path"),
        (r#"{{ kebabcase "HTTP20xOK" }}"#, "http-20x-ok"),
        (r#"{{ swapcase "This Is A.Test" }}"#, "tHIS iS a.tEST"),
        (r#"{{ initials "First Try" }}"#, "FT"),
        (r#"{{ wrap 5 "Hello World" }}"#, "Hello\nWorld"),
        ("{{ wrapWith 5 \"\\t\" \"Hello World\" }}", "Hello\tWorld"),
        (r#"{{ wrapWith 3 "|" "abcdefgh" }}"#, "abc|def|gh"),
        (r#"{{ abbrevboth 5 10 "1234 5678 9123" }}"#, "...5678..."),
        (r#"{{ abbrev 5 "hello world" }}"#, "he..."),
        (r#"{{ abbrevboth -9223372036854775808 10 "1234 5678 9123" }}"#, "...78 9123"),
        (r#"{{ untitle "First Try" }}"#, "first try"),
        (r#"{{ untitle "Hello-World" }}"#, "hello-World"),
        (r#"{{ trimall "$" "$5.00" }}"#, "5.00"),
        (r#"{{ $n := len "two" }}{{ $n }} {{ $n | plural "1 char" "chars" }}"#, "3 chars"),
        (r#"{{ len "t" | plural "cheese" "%d chars" }}"#, "cheese"),
        ("{{ hello }}", "Hello!"),
        (r#"{{ list 1 2 3 | toStrings | join "," }} {{ index (list 1 2 | toStrings) 1 | kindOf }}"#, "1,2,3 string"),
    ]);
}

#[test]
fn encodings() {
    table(&[
        (r#"{{ b32enc "coffee" }}"#, "MNXWMZTFMU======"),
        (r#"{{ b32dec "MNXWMZTFMU======" }}"#, "coffee"),
        (r#"{{ b32enc "hello" | b32dec }}"#, "hello"),
        (r#"{{ hexdec "68656c6c6f" }}"#, "hello"),
        ("{{ b64dec \"aGVs\\nbG8=\" }}", "hello"),
        (
            r#"{{ dict "a" 1 | mustToJson }} {{ list 1 | mustToPrettyJson }} {{ dict "h" "<a>" | mustToRawJson }}"#,
            "{\"a\":1} [\n  1\n] {\"h\":\"<a>\"}",
        ),
        (r#"{{ (mustFromJson "{\"a\":[1,2]}").a }}"#, "[1 2]"),
    ]);
    for (src, want) in [
        (r#"{{ b32dec "!!" }}"#, "error calling b32dec: illegal base32 data"),
        (r#"{{ hexdec "6g" }}"#, "encoding/hex: invalid byte: U+0067 'g'"),
        (r#"{{ hexdec "686" }}"#, "encoding/hex: odd length hex string"),
        (r#"{{ mustFromJson "{" }}"#, "error calling mustFromJson: invalid JSON"),
    ] {
        let e = run(src).expect_err(src);
        assert!(e.contains(want), "{src}: {e}");
    }
}

#[test]
fn float_math_in_decimal() {
    table(&[
        ("{{ addf 1.5 2 2 }}", "5.5"),
        ("{{ addf 1.1 2.2 }}", "3.3"),
        ("{{ add1f 1.1 }}", "2.1"),
        ("{{ subf 7.5 2 3 }}", "2.5"),
        ("{{ subf 0.3 0.1 }}", "0.2"),
        ("{{ mulf 1.5 2 2 }}", "6"),
        ("{{ mulf 1.1 3 }}", "3.3"),
        ("{{ divf 10 2 4 }}", "1.25"),
        ("{{ divf 1 3 }}", "0.3333333333333333"),
        ("{{ divf 2 3 }}", "0.6666666666666667"),
        ("{{ maxf 1 2.5 3 }}", "3"),
        ("{{ minf 1.5 2 3 }}", "1.5"),
        ("{{ floor 123.9999 }}", "123"),
        ("{{ ceil 123.001 }}", "124"),
        ("{{ round 123.555555 3 }}", "123.556"),
        ("{{ round 123.5555 3 }}", "123.556"),
        ("{{ round 123.5554 3 }}", "123.555"),
        ("{{ round 12.5 0 0.6 }}", "12"),
        ("{{ addf 1e20 1 }}", "1e+20"),
        ("{{ addf \"1.5\" 1 }}", "2.5"),
        ("{{ biggest 1 5 3 }} {{ max 1 5 3 }}", "5 5"),
        ("{{ toDecimal \"0777\" }} {{ toDecimal 777 }} {{ toDecimal \"8\" }}", "511 511 0"),
        (
            "{{ int \"0x1F\" }} {{ int \"1_000\" }} {{ int \"08\" }} {{ int \"12.9\" }} {{ int64 \"017\" }}",
            "31 1000 0 12 15",
        ),
    ]);
    let e = run("{{ divf 1 0 }}").expect_err("division by zero");
    assert!(e.contains("decimal division by 0"), "{e}");
}

#[test]
fn sequences() {
    table(&[
        ("{{ seq 0 1 3 }}", "0 1 2 3"),
        ("{{ seq 0 3 10 }}", "0 3 6 9"),
        ("{{ seq 3 3 2 }}", ""),
        ("{{ seq 3 -3 2 }}", "3"),
        ("{{ seq }}", ""),
        ("{{ seq 0 4 }}", "0 1 2 3 4"),
        ("{{ seq 5 }}", "1 2 3 4 5"),
        ("{{ seq -5 }}", "1 0 -1 -2 -3 -4 -5"),
        ("{{ seq 0 }}", "1 0"),
        ("{{ seq 0 1 2 3 }}", ""),
        ("{{ seq 0 -4 }}", "0 -1 -2 -3 -4"),
        ("{{ range $i, $e := untilStep 0 5 1 }}{{ $i }}{{ $e }}{{ end }}", "0011223344"),
        ("{{ range $i, $e := untilStep 3 6 1 }}{{ $i }}{{ $e }}{{ end }}", "031425"),
        ("{{ range $i, $e := untilStep 0 -10 -2 }}{{ $i }}{{ $e }} {{ end }}", "00 1-2 2-4 3-6 4-8 "),
        ("{{ range $i, $e := untilStep 3 0 1 }}{{ $i }}{{ $e }}{{ end }}", ""),
        ("{{ range $i, $e := untilStep 3 99 0 }}{{ $i }}{{ $e }}{{ end }}", ""),
        ("{{ range $i, $e := untilStep 3 99 -1 }}{{ $i }}{{ $e }}{{ end }}", ""),
    ]);
}

#[test]
fn lists_and_dicts() {
    table(&[
        ("{{ $t := tuple 1 2 3 4 }}{{ append $t 5 | join \"-\" }}", "1-2-3-4-5"),
        ("{{ $t := tuple 1 2 3 }}{{ mustAppend $t 4 | len }}", "4"),
        ("{{ $t := regexSplit \"/\" \"foo/bar/baz\" -1 }}{{ mustPush $t \"qux\" | join \"-\" }}", "foo-bar-baz-qux"),
        ("{{ $t := tuple 1 2 3 4 }}{{ mustPrepend $t 0 | join \"-\" }}", "0-1-2-3-4"),
        ("{{ tuple 1 2 3 4 5 6 7 | chunk 3 | len }}", "3"),
        ("{{ tuple | chunk 3 | len }}", "0"),
        ("{{ range (tuple 1 2 3 4 5 6 7 8 | chunk 3) }}{{ . | join \"-\" }}|{{ end }}", "1-2-3|4-5-6|7-8|"),
        ("{{ range (tuple 1 2 | mustChunk 3) }}{{ . | join \"-\" }}|{{ end }}", "1-2|"),
        ("{{ list 1 2 3 | mustFirst }} {{ list | mustFirst }}", "1 <no value>"),
        ("{{ list 1 2 3 | mustLast }} {{ list 1 2 3 | mustInitial }} {{ list 1 2 3 | mustRest }}", "3 [1 2] [2 3]"),
        ("{{ list 1 2 3 4 | mustReverse }}", "[4 3 2 1]"),
        ("{{ regexSplit \"/\" \"foo//bar\" -1 | mustCompact }}", "[foo bar]"),
        ("{{ regexSplit \"/\" \"foo/foo/bar\" -1 | mustUniq }}", "[foo bar]"),
        ("{{ mustWithout (regexSplit \"/\" \"foo/bar/baz\" -1) \"foo\" }}", "[bar baz]"),
        ("{{ mustHas 4 (list 1 2 3) }} {{ mustHas 2 (list 1 2 3) }}", "false true"),
        ("{{ mustSlice (list 1 2 3) 1 }}", "[2 3]"),
        ("{{ $d := dict \"a\" 1 }}{{ $_ := mustMerge $d (dict \"a\" 2 \"b\" 3) }}{{ $d }}", "map[a:1 b:3]"),
        ("{{ $d := dict \"a\" 1 }}{{ $_ := mustMergeOverwrite $d (dict \"a\" 2) }}{{ $d }}", "map[a:2]"),
        (
            "{{ $d := dict \"a\" (dict \"b\" 1) }}{{ $c := mustDeepCopy $d }}{{ $_ := set $c.a \"b\" 2 }}{{ $d.a.b }}",
            "1",
        ),
        (
            "{{ $d := dict \"user\" (dict \"role\" (dict \"humanName\" \"admin\")) }}{{ dig \"user\" \"role\" \"humanName\" \"guest\" $d }} {{ dig \"user\" \"name\" \"guest\" $d }}",
            "admin guest",
        ),
        ("{{ dig \"a\" \"b\" \"none\" (dict) }}", "none"),
        ("{{ all 1 }} {{ all \"\" 0 nil 2 }} {{ all }}", "true false true"),
        ("{{ any 1 }} {{ any \"\" 0 nil 2 }} {{ $z := 0 }}{{ any \"\" $z 0 }} {{ any }}", "true true false false"),
    ]);
    let e = run("{{ dig \"a\" \"b\" }}").expect_err("too few");
    assert!(e.contains("dig needs at least three arguments"), "{e}");
}

#[test]
fn reflection() {
    table(&[
        (
            "{{ typeOf 1 }} {{ typeOf (add 1 2) }} {{ typeOf 1.5 }} {{ typeOf \"a\" }} {{ typeOf true }}",
            "int int64 float64 string bool",
        ),
        (
            "{{ typeOf (list 1) }} {{ typeOf (dict) }} {{ typeOf nil }} {{ typeOf (now) }}",
            "[]interface {} map[string]interface {} <nil> time.Time",
        ),
        (
            "{{ typeOf (semver \"1.2.3\") }} {{ kindOf (semver \"1.2.3\") }} {{ kindOf (now) }}",
            "*semver.Version ptr struct",
        ),
        (
            "{{ kindOf \"hello\" }} {{ kindOf 1 }} {{ kindOf (list) }} {{ kindOf (dict) }} {{ kindOf nil }}",
            "string int slice map invalid",
        ),
        (
            "{{ typeIs \"string\" \"a\" }} {{ typeIs \"int\" \"a\" }} {{ typeIsLike \"semver.Version\" (semver \"1.0.0\") }}",
            "true false true",
        ),
        ("{{ kindIs \"int\" 123 }} {{ kindIs \"map\" (list) }}", "true false"),
        ("{{ toString 1 | kindOf }}", "string"),
        (
            "{{ deepEqual (list 1 2) (list 1 2) }} {{ deepEqual 1 (add 1 0) }} {{ deepEqual (dict \"a\" 1) (dict \"a\" 1) }}",
            "true false true",
        ),
        ("{{ printf \"%T %T\" 1 (int64 1) }}", "int int64"),
    ]);
}

#[test]
fn paths() {
    table(&[
        ("{{ base \"foo/bar/baz\" }} {{ base \"/\" }} {{ base \"\" }} {{ base \"a/b/\" }}", "baz / . b"),
        ("{{ dir \"foo/bar/baz\" }} {{ dir \"baz\" }} {{ dir \"/a\" }}", "foo/bar . /"),
        (
            "{{ clean \"foo/bar/../baz\" }} {{ clean \"/../a//b/./c/\" }} {{ clean \"\" }} {{ clean \"../../x\" }}",
            "foo/baz /a/b/c . ../../x",
        ),
        ("{{ ext \"foo.bar\" }} {{ ext \"a/b.tar.gz\" }} {{ ext \"a.b/c\" }}", ".bar .gz "),
        ("{{ isAbs \"/a\" }} {{ isAbs \"a\" }} {{ osIsAbs \"/a\" }}", "true false true"),
        ("{{ osBase \"a/b\" }} {{ osDir \"a/b\" }} {{ osClean \"a//b\" }} {{ osExt \"x.y\" }}", "b a a/b .y"),
    ]);
}

#[test]
fn urls() {
    table(&[
        ("{{ index (urlParse \"proto://auth@host:80/path?query#fragment\") \"host\" }}", "host:80"),
        (
            "{{ $u := urlParse \"http://admin:secret@server.com:8080/api?list=false#anchor\" }}{{ $u.scheme }}|{{ $u.host }}|{{ $u.hostname }}|{{ $u.path }}|{{ $u.query }}|{{ $u.fragment }}|{{ $u.userinfo }}|{{ $u.opaque }}",
            "http|server.com:8080|server.com|/api|list=false|anchor|admin:secret|",
        ),
        ("{{ (urlParse \"mailto:user@example.com\").opaque }}", "user@example.com"),
        ("{{ (urlParse \"http://h/a%20b\").path }}", "/a b"),
        (
            "{{ urlJoin (dict \"fragment\" \"fragment\" \"host\" \"host:80\" \"path\" \"/path\" \"query\" \"query\" \"scheme\" \"proto\") }}",
            "proto://host:80/path?query#fragment",
        ),
        (
            "{{ urlJoin (dict \"fragment\" \"fragment\" \"host\" \"host:80\" \"path\" \"/path\" \"scheme\" \"proto\" \"userinfo\" \"ASDJKJSD\") }}",
            "proto://ASDJKJSD@host:80/path#fragment",
        ),
        ("{{ urlJoin (dict \"scheme\" \"https\" \"host\" \"h\" \"path\" \"a b?\") }}", "https://h/a%20b%3F"),
        ("{{ urlParse \"https://u:p@h/x\" | urlJoin }}", "https://u:p@h/x"),
    ]);
    let e = run("{{ urlParse \":x\" }}").expect_err("bad url");
    assert!(e.contains("unable to parse url: missing protocol scheme"), "{e}");
    let e = run("{{ urlJoin (dict \"host\" 1) }}").expect_err("not a string");
    assert!(e.contains("unable to parse host key, must be of type string, but int found"), "{e}");
}

#[test]
fn semantic_versions() {
    table(&[
        (
            "{{ $s := semver \"1.2.3-beta.1+c0ff33\" }}{{ $s.Prerelease }} {{ $s.Major }} {{ $s.Minor }} {{ $s.Patch }} {{ $s.Metadata }}",
            "beta.1 1 2 3 c0ff33",
        ),
        ("{{ semver \"v1.2\" }} {{ (semver \"v1.2\").Original }}", "1.2.0 v1.2"),
        ("{{ semverCompare \"1.2.3\" \"1.2.3\" }}", "true"),
        ("{{ semverCompare \"^1.2.0\" \"1.2.3\" }}", "true"),
        ("{{ semverCompare \"^1.2.0\" \"2.2.3\" }}", "false"),
        ("{{ semverCompare \">=1.2.3\" \"1.2.4\" }} {{ semverCompare \"<1.2.3\" \"1.2.4\" }}", "true false"),
        ("{{ semverCompare \"~1.2.3\" \"1.2.9\" }} {{ semverCompare \"~1.2.3\" \"1.3.0\" }}", "true false"),
        (
            "{{ semverCompare \"1.2.x\" \"1.2.7\" }} {{ semverCompare \"1.x\" \"2.0.0\" }} {{ semverCompare \"*\" \"9.9.9\" }}",
            "true false true",
        ),
        ("{{ semverCompare \"1.2 - 1.4.5\" \"1.4.5\" }} {{ semverCompare \"1.2 - 1.4.5\" \"1.4.6\" }}", "true false"),
        ("{{ semverCompare \">1.0, <2.0\" \"1.5.0\" }} {{ semverCompare \"<1.0 || >=3\" \"2.0.0\" }}", "true false"),
        ("{{ semverCompare \">1.0\" \"1.5.0-beta\" }} {{ semverCompare \">1.0-0\" \"1.5.0-beta\" }}", "false true"),
        (
            "{{ semverCompare \"^0.2.3\" \"0.2.9\" }} {{ semverCompare \"^0.2.3\" \"0.3.0\" }} {{ semverCompare \"!=1.2.3\" \"1.2.4\" }}",
            "true false true",
        ),
    ]);
    let e = run("{{ semver \"x.y\" }}").expect_err("not a version");
    assert!(e.contains("invalid semantic version"), "{e}");
    let e = run("{{ semverCompare \"~>>1\" \"1.0.0\" }}").expect_err("bad constraint");
    assert!(e.contains("improper constraint: ~>>1"), "{e}");
}

#[test]
fn dates_of_fixed_times() {
    table(&[
        ("{{ date \"2006-01-02 15:04:05 MST\" 0 }}", "1970-01-01 00:00:00 UTC"),
        ("{{ date \"Mon Jan _2 3:04PM 2006\" 1700000000 }}", "Tue Nov 14 10:13PM 2023"),
        ("{{ dateInZone \"2006-01-02 15:04 MST -07:00\" 1700000000 \"Europe/Paris\" }}", "2023-11-14 23:13 CET +01:00"),
        ("{{ date_in_zone \"15:04 Z07:00\" 1700000000 \"UTC\" }}", "22:13 Z"),
        ("{{ dateInZone \"15:04 MST\" 1700000000 \"Nowhere/Nothing\" }}", "22:13 UTC"),
        ("{{ htmlDate 1700000000 }} {{ htmlDateInZone 1700000000 \"Asia/Tokyo\" }}", "2023-11-14 2023-11-15"),
        ("{{ toDate \"2006-01-02\" \"2017-12-31\" | date \"02/01/2006\" }}", "31/12/2017"),
        ("{{ toDate \"2006-01-02\" \"2017-12-31\" }}", "2017-12-31 00:00:00 +0000 UTC"),
        ("{{ toDate \"2006-01-02\" \"not a date\" }}", "0001-01-01 00:00:00 +0000 UTC"),
        ("{{ toDate \"2006-01-02T15:04:05Z07:00\" \"2024-02-29T12:30:00+02:00\" | unixEpoch }}", "1709202600"),
        (
            "{{ toDate \"2006-01-02T15:04:05.000Z\" \"2024-01-02T03:04:05.678Z\" | date \"15:04:05.999 Jan\" }}",
            "03:04:05.678 Jan",
        ),
        ("{{ toDate \"02 Jan 06 15:04 MST\" \"03 Feb 24 10:00 UTC\" | unixEpoch }}", "1706954400"),
        (
            "{{ toDate \"2006-01-02\" \"2024-01-02\" | dateModify \"-1.5h\" | date \"2006-01-02 15:04\" }}",
            "2024-01-01 22:30",
        ),
        ("{{ toDate \"2006-01-02\" \"2024-01-02\" | date_modify \"bogus\" | date \"2006-01-02\" }}", "2024-01-02"),
        ("{{ toDate \"2006-01-02\" \"2024-01-02\" | mustDateModify \"24h\" | date \"Jan 2\" }}", "Jan 3"),
        (
            "{{ (toDate \"2006-01-02\" \"2024-03-05\").Year }} {{ (toDate \"2006-01-02\" \"2024-03-05\").Month }} {{ (toDate \"2006-01-02\" \"2024-03-05\").YearDay }}",
            "2024 March 65",
        ),
        ("{{ (toDate \"2006-01-02\" \"2024-03-05\") | toJson }}", "\"2024-03-05T00:00:00Z\""),
        (
            "{{ duration \"95\" }} {{ duration 95 }} {{ duration (int64 95) }} {{ duration \"3700\" }}",
            "1m35s 0s 1m35s 1h1m40s",
        ),
        (
            "{{ durationRound \"2h10m5s\" }} {{ durationRound \"2400h10m5s\" }} {{ durationRound \"9000h\" }}",
            "2h 3mo 1y",
        ),
        ("{{ durationRound \"-90s\" }} {{ durationRound \"1s\" }} {{ durationRound \"0.5s\" }}", "1m 0s 0s"),
        ("{{ ago 0 | len | lt 5 }}", "true"),
    ]);
    let e = run("{{ mustToDate \"2006-01-02\" \"2024-13-01\" }}").expect_err("month");
    assert!(e.contains("parsing time \"2024-13-01\": month out of range"), "{e}");
    let e = run("{{ mustToDate \"2006-01-02\" \"2024-02-30\" }}").expect_err("day");
    assert!(e.contains("day out of range"), "{e}");
    let e = run("{{ mustDateModify \"5x\" (now) }}").expect_err("unit");
    assert!(e.contains("time: unknown unit \"x\" in duration \"5x\""), "{e}");
    let e = run("{{ dateModify \"1h\" \"2024-01-01\" }}").expect_err("not a time");
    assert!(e.contains("expected time.Time; got string"), "{e}");
}

#[test]
fn hashes_and_passwords() {
    table(&[
        ("{{ adler32sum \"Hello world!\" }}", "487130206"),
        ("{{ \"abc\" | adler32sum }}", "38600999"),
        ("{{ derivePassword 1 \"long\" \"password\" \"user\" \"example.com\" }}", "ZedaFaxcZaso9*"),
        ("{{ derivePassword 2 \"long\" \"password\" \"user\" \"example.com\" }}", "Fovi2@JifpTupx"),
        ("{{ derivePassword 1 \"maximum\" \"password\" \"user\" \"example.com\" }}", "pf4zS1LjCg&LjhsZ7T2~"),
        ("{{ derivePassword 1 \"pin\" \"password\" \"user\" \"example.com\" }}", "6685"),
        ("{{ derivePassword 1 \"nope\" \"password\" \"user\" \"example.com\" }}", "cannot find password template nope"),
        ("{{ htpasswd \"myUser\" \"myPassword\" \"sha\" }}", "myUser:{SHA}VBPuJHI7uixaa6LQGWx4s+5GKNE="),
        ("{{ decryptAES \"secretkey\" \"30tEfhuJSVRhpG97XCuWgz2okj7L8vQ1s6V9zVUPeDQ=\" }}", "plaintext"),
        ("{{ encryptAES \"secretkey\" \"plaintext\" | decryptAES \"secretkey\" }}", "plaintext"),
        ("{{ encryptAES \"k\" \"\" }}|{{ decryptAES \"k\" \"\" }}", "|"),
        (
            "{{ encryptAES \"a key longer than thirty-two bytes!!\" \"x\" | decryptAES \"a key longer than thirty-two bytes!!\" }}",
            "x",
        ),
    ]);
    let e = run("{{ decryptAES \"k\" \"AAAA\" }}").expect_err("short");
    assert!(e.contains("shorter than the 16-byte IV"), "{e}");
}
