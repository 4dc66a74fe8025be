use super::*;

/// An anchor of `items` scalars referenced `references` times: its expansion grows with
/// `items × references`, its text with their sum.
fn square_bomb(items: usize, references: usize) -> String {
    let anchor = vec!["x"; items].join(", ");
    let aliases = vec!["*a"; references].join(", ");
    format!("a: &a [{anchor}]\nb: [{aliases}]\n")
}

#[test]
fn an_anchor_referenced_many_times_is_refused_by_its_node_count() {
    let bomb = square_bomb(1_000, 1_000);
    let refused = check_aliasing(bomb.as_bytes()).expect_err("a million nodes from 6 KB");
    assert_eq!(refused.what, "nodes");
    assert_eq!(refused.limit, 2 * bomb.len() as u64 + ALIAS_NODES);
    assert!(
        refused
            .to_string()
            .starts_with("document contains excessive aliasing"),
        "{refused}"
    );
}

#[test]
fn a_long_string_referenced_many_times_is_refused_by_its_bytes() {
    let text = "y".repeat(100_000);
    let aliases = vec!["*s"; 100].join(", ");
    let bomb = format!("s: &s {text}\nl: [{aliases}]\n");
    let refused = check_aliasing(bomb.as_bytes()).expect_err("10 MB of strings from 100 KB");
    assert_eq!(refused.what, "scalar bytes");
}

#[test]
fn aliasing_under_a_tag_is_counted() {
    let bomb = format!(
        "{{a: &a [{}], t: !tagged [{}]}}",
        vec!["x"; 1_000].join(","),
        vec!["*a"; 1_000].join(",")
    );
    let refused = check_aliasing(bomb.as_bytes()).expect_err("a tagged bomb");
    assert_eq!(refused.what, "nodes");
}

#[test]
fn documents_without_aliases_pass_however_dense() {
    // Three nodes (a mapping, its null key and value) for every two bytes: the densest YAML.
    let dense = format!("[{}]", vec!["?"; 200_000].join(","));
    check_aliasing(dense.as_bytes()).expect("no aliases");
    let scalars = format!("[{}]", vec!["0"; 200_000].join(","));
    check_aliasing(scalars.as_bytes()).expect("no aliases");
    // Escapes that write more than they take: `\L` is three bytes of UTF-8.
    let escapes = format!("\"{}\"", "\\L".repeat(200_000));
    check_aliasing(escapes.as_bytes()).expect("no aliases");
}

#[test]
fn modest_sharing_passes() {
    check_aliasing(square_bomb(100, 100).as_bytes()).expect("ten thousand nodes");
    let env = "env: &env [{name: A, value: a}, {name: B, value: b}]\n";
    let containers = (0..20)
        .map(|i| format!("  - {{name: c{i}, image: busybox, env: *env}}\n"))
        .collect::<String>();
    check_aliasing(format!("{env}containers:\n{containers}").as_bytes()).expect("shared env");
}

#[test]
fn what_does_not_parse_is_left_to_the_decoder() {
    for text in ["kind: [", "a: *undefined", "", "--- 1\n--- 2\n", "\u{0}"] {
        check_aliasing(text.as_bytes()).expect(text);
    }
}
