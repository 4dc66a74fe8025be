//! The kubelet's `ParseEnv` table (`pkg/kubelet/util/env/env_util_test.go`), and the file read
//! inside its volume: links resolved within it, anything but a regular file refused.

use std::io::Cursor;

use super::*;

fn parse(text: &str, key: &str) -> Result<String, EnvFileError> {
    parse_env(Cursor::new(text.as_bytes()), key)
}

fn format(line: usize, problem: &'static str) -> Result<String, EnvFileError> {
    Err(EnvFileError::Format { line, problem })
}

#[test]
fn values_parse_as_the_kubelets_env_file_reader() {
    let ok = |value: &str| Ok(value.to_owned());
    let cases: Vec<(&str, &str, &str, Result<String, EnvFileError>)> = vec![
        (
            "leading blanks are ignored",
            "   KEY1='val1'\n\t\tKEY2='val2'\nKEY3='val3'\n",
            "KEY2",
            ok("val2"),
        ),
        (
            "blank and comment lines are skipped",
            "# comment\n\nKEY1='foo'\n   # another\n\nKEY2='bar'\n",
            "KEY2",
            ok("bar"),
        ),
        (
            "a blank before '=' fails the file",
            "KEY1 = 'val1'\nKEY2=   'val2'\n",
            "KEY2",
            format(1, "whitespace before '=' is not allowed"),
        ),
        (
            "a blank after '=' makes the value empty",
            "KEY2=   'val2'\n",
            "KEY2",
            ok(""),
        ),
        ("a missing key reads empty", "KEY1='foo'\n", "KEY3", ok("")),
        (
            "quotes keep '#', '=', '$' and blanks",
            "KEY1='  a#b=c $HOME ${X}  '\n",
            "KEY1",
            ok("  a#b=c $HOME ${X}  "),
        ),
        (
            "a comment after the closing quote",
            "KEY2='bar' # comment\n",
            "KEY2",
            ok("bar"),
        ),
        (
            "an empty name",
            "='foo'\nKEY2='bar'",
            "KEY2",
            format(1, "empty variable name"),
        ),
        (
            "a line without '='",
            "KEY1='foo'\nINVALID_LINE\nKEY2='bar'\n",
            "KEY2",
            format(2, "missing '='"),
        ),
        (
            "an unquoted value",
            "KEY2=bar\n",
            "KEY2",
            format(1, "value must be enclosed in single quotes"),
        ),
        (
            "a double-quoted value",
            "KEY2=\"bar\"\n",
            "KEY2",
            format(1, "value must be enclosed in single quotes"),
        ),
        (
            "adjacent quoted strings",
            "KEY1='foo''bar'",
            "KEY1",
            format(1, "unexpected content after closing quote"),
        ),
        (
            "backslashes are literal, so a quote ends the value",
            "KEY1='value with \\'nested\\' quotes'\n",
            "KEY1",
            format(1, "unexpected content after closing quote"),
        ),
        (
            "a value over lines keeps its newlines and blanks",
            "KEY1='line1\n\n  line3   '\nKEY2='bar'\n",
            "KEY1",
            ok("line1\n\n  line3   "),
        ),
        (
            "a quote never closed",
            "KEY1='foo\nbar\n",
            "KEY1",
            Err(EnvFileError::Unclosed { line: 1 }),
        ),
        (
            "the first assignment wins and later lines are not read",
            "KEY1='first'\nKEY1='second'\nbroken\n",
            "KEY1",
            ok("first"),
        ),
        (
            "a carriage return before the newline is dropped",
            "KEY1='dos'\r\nKEY2='x'\r\n",
            "KEY1",
            ok("dos"),
        ),
        (
            "unicode stays",
            "KEY1='中文 Español 🌍'\n",
            "KEY1",
            ok("中文 Español 🌍"),
        ),
    ];
    for (name, text, key, expected) in cases {
        assert_eq!(parse(text, key), expected, "{name}");
    }
}

#[test]
fn a_line_longer_than_the_kubelets_scanner_takes_fails_the_file() {
    let fits = format!("KEY='{}'\n", "x".repeat(MAX_LINE - 7));
    assert_eq!(fits.len(), MAX_LINE);
    assert_eq!(parse(&fits, "KEY").map(|v| v.len()), Ok(MAX_LINE - 7));
    let long = format!("KEY='{}'\n", "x".repeat(MAX_LINE));
    assert_eq!(
        parse(&long, "KEY"),
        Err(EnvFileError::Read {
            path: String::new(),
            reason: "bufio.Scanner: token too long".to_owned()
        })
    );
    let many = format!("KEY='{}", "x\n".repeat(MAX_VALUE / 2 + 1));
    assert_eq!(
        parse(&many, "KEY"),
        Err(EnvFileError::ValueTooLong { key: "KEY".into() })
    );
}

#[test]
fn the_file_is_read_inside_its_volume_and_must_be_a_regular_file() {
    let volume = tempfile::tempdir().expect("dir");
    let outside = tempfile::tempdir().expect("dir");
    std::fs::write(outside.path().join("secret.env"), "KEY='outside'\n").expect("write");
    std::fs::write(volume.path().join("config.env"), "KEY='inside'\n").expect("write");
    std::fs::create_dir(volume.path().join("sub")).expect("mkdir");
    std::fs::write(volume.path().join("sub/app.env"), "KEY='nested'\n").expect("write");
    let root = volume.path();
    assert_eq!(
        read_env_file(root, "config.env", "KEY"),
        Ok("inside".into())
    );
    assert_eq!(
        read_env_file(root, "sub/app.env", "KEY"),
        Ok("nested".into())
    );
    assert_eq!(
        read_env_file(root, "sub/../config.env", "KEY"),
        Ok("inside".into())
    );
    // An absolute link, or one that climbs, stays in the volume as securejoin resolves it.
    std::os::unix::fs::symlink(outside.path().join("secret.env"), root.join("absolute"))
        .expect("symlink");
    std::os::unix::fs::symlink("../../../../../config.env", root.join("sub/climbing"))
        .expect("symlink");
    assert!(matches!(
        read_env_file(root, "absolute", "KEY"),
        Err(EnvFileError::Open { .. })
    ));
    assert_eq!(
        read_env_file(root, "sub/climbing", "KEY"),
        Ok("inside".into())
    );
    let missing = read_env_file(root, "missing.env", "KEY").expect_err("no such file");
    assert_eq!(
        missing.to_string(),
        format!(
            "failed to open environment variable file {:?}: No such file or directory (os error 2)",
            root.join("missing.env").display().to_string()
        )
    );
    assert_eq!(
        read_env_file(root, "sub", "KEY"),
        Err(EnvFileError::NotAFile {
            path: root.join("sub").display().to_string()
        })
    );
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("fifo"),
        rustix::fs::FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    // Answered at once: no writer is waited for.
    assert!(matches!(
        read_env_file(root, "fifo", "KEY"),
        Err(EnvFileError::NotAFile { .. })
    ));
}
