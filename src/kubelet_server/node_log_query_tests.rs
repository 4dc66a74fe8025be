//! The node log query's decoding and validation, with the kubelet's field errors
//! (`pkg/kubelet/kubelet_server_journal_test.go`'s cases and their texts).

use super::*;

fn rendered(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(FieldError::render).collect()
}

fn parsed(query: &str) -> NodeLogQuery {
    parse(query)
        .expect("decodes")
        .expect("asks something of the query")
}

#[test]
fn parameters_decode_as_the_kubelets_new_node_log_query() {
    assert_eq!(parse(""), Ok(None));
    assert_eq!(parse("unrelated=1&pattern="), Ok(None), "nothing asked");
    let query = parsed(
        "query=kubelet&query=%2Fvar%2Flog%2Fsyslog&query=+&query=a%5Cb&sinceTime=2026-01-02T03:04:05Z&tailLines=3&tailLines=9&boot=-1&pattern=err.*",
    );
    assert_eq!(query.services, ["kubelet"], "a blank query is dropped");
    assert_eq!(query.files, ["/var/log/syslog", "a\\b"]);
    let options = &query.options;
    assert_eq!(options.tail_lines, Some(3), "the first value counts");
    assert_eq!(options.boot, Some(-1));
    assert_eq!(options.pattern, "err.*");
    assert_eq!(
        options.since_time.map(|time| time.journal()),
        Some("2026-1-2 3:4:5".to_owned())
    );
    let offset = parsed("query=a&sinceTime=2026-12-07T22:30:00.5%2B02:00");
    let since = offset.options.since_time.expect("a time");
    assert_eq!(
        since.journal(),
        "2026-12-7 22:30:0",
        "the wall clock as written"
    );
    assert_eq!(since.instant.to_string(), "2026-12-07T20:30:00.5Z");
    assert_eq!(parsed("tailLines=5").services, Vec::<String>::new());
}

#[test]
fn what_does_not_decode_is_refused_with_the_kubelets_field_errors() {
    let cases = [
        (
            "query",
            vec![r#"query: Invalid value: []string{""}: query cannot be empty"#],
        ),
        (
            "query=%20&query=",
            vec![r#"query: Invalid value: []string{" ", ""}: query cannot be empty"#],
        ),
        (
            "query=a&sinceTime=yesterday&untilTime=2026-01-02+03:04:05Z",
            vec![
                r#"sinceTime: Invalid value: "yesterday": invalid time format"#,
                r#"untilTime: Invalid value: "2026-01-02 03:04:05Z": invalid time format"#,
            ],
        ),
        (
            "query=a&boot=x&tailLines=99999999999999999999",
            vec![
                r#"boot: Invalid value: "x": strconv.Atoi: parsing "x": invalid syntax"#,
                r#"tailLines: Invalid value: "99999999999999999999": strconv.Atoi: parsing "99999999999999999999": value out of range"#,
            ],
        ),
    ];
    for (query, expected) in cases {
        assert_eq!(
            parse(query).map_err(|errors| rendered(&errors)),
            Err(expected.iter().map(|s| (*s).to_owned()).collect()),
            "{query}"
        );
    }
    let two = parse("query&boot=x").expect_err("refused");
    assert_eq!(
        aggregate(&two),
        r#"[query: Invalid value: []string{""}: query cannot be empty, boot: Invalid value: "x": strconv.Atoi: parsing "x": invalid syntax]"#
    );
}

#[test]
fn validation_refuses_what_the_kubelet_refuses() {
    let logs = tempfile::tempdir().expect("dir");
    std::fs::write(logs.path().join("syslog"), "booted\n").expect("write");
    let outside = tempfile::tempdir().expect("dir");
    std::os::unix::fs::symlink(outside.path(), logs.path().join("escape")).expect("symlink");
    let validated = |query: &str| rendered(&parsed(query).validate(logs.path()));
    let none: Vec<String> = Vec::new();
    assert_eq!(
        validated("query=kubelet&query=kube-proxy@1&tailLines=100000&boot=0"),
        none
    );
    assert_eq!(
        validated("query=kubelet.service&query=svc:foo&query=svc_foo"),
        none,
        "the characters 1.36 allows"
    );
    assert_eq!(validated("query=/syslog"), none);
    assert_eq!(
        validated("query=syslog/"),
        vec![
            r#"query: Invalid value: []string{"syslog/"}: statat syslog/: not a directory"#
                .to_owned()
        ]
    );
    let cases = [
        (
            "tailLines=3",
            vec!["query: Required value: cannot be empty with options"],
        ),
        (
            "query=a.b&query=c%20d&query=e%0A",
            vec![
                r#"query: Invalid value: "c d": input contains unsupported characters"#,
                r#"query: Invalid value: "e\n": input contains unsupported characters"#,
            ],
        ),
        (
            "query=a&query=b&query=c&query=d&query=e",
            vec!["query: Too many: 5: must have at most 4 items"],
        ),
        (
            "query=/syslog&query=kubelet",
            vec![
                r#"query: Invalid value: "[/syslog], [kubelet]": cannot specify a file and service"#,
            ],
        ),
        (
            "query=/a&query=/b",
            vec![
                r#"query: Invalid value: []string{"/a", "/b"}: cannot specify more than one file"#,
            ],
        ),
        (
            "query=/syslog&tailLines=1",
            vec![r#"query: Invalid value: []string{"/syslog"}: cannot specify file with options"#],
        ),
        (
            "query=/missing.log",
            vec![
                r#"query: Invalid value: []string{"/missing.log"}: statat /missing.log: no such file or directory"#,
            ],
        ),
        (
            "query=/escape/x",
            vec![
                r#"query: Invalid value: []string{"/escape/x"}: statat /escape/x: path escapes from parent"#,
            ],
        ),
        (
            "query=../etc/passwd",
            vec![
                r#"query: Invalid value: []string{"../etc/passwd"}: statat ../etc/passwd: path escapes from parent"#,
            ],
        ),
        (
            "query=a&sinceTime=2026-01-02T00:00:00Z&untilTime=2026-01-01T00:00:00%2B01:30",
            vec![
                "untilTime: Invalid value: 2026-01-01 00:00:00 +0130 +0130: must be after `sinceTime`",
            ],
        ),
        (
            "query=a&boot=1",
            vec!["boot: Invalid value: 1: must be less than 1"],
        ),
        (
            "query=a&tailLines=-1",
            vec!["tailLines: Invalid value: -1: must be between 0 and 100000, inclusive"],
        ),
        (
            "query=a&pattern=(abc",
            vec![
                r#"pattern: Invalid value: "(abc": error parsing regexp: missing closing ): `(abc`"#,
            ],
        ),
    ];
    for (query, expected) in cases {
        assert_eq!(validated(query), expected, "{query}");
    }
}
