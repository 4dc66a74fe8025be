//! `$(VAR)` references in env values, command and args, expanded as the kubelet's
//! `third_party/forked/golang/expansion` does: a known name is replaced, an unknown one is left
//! as written, `$$` is a literal `$`, and any other `$` (or an unclosed `$(`) stays as it is.

/// Expands `input` against `lookup`.
pub fn expand<'a>(input: &str, lookup: impl Fn(&str) -> Option<&'a str>) -> String {
    let mut output = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(dollar) = rest.find('$') {
        output.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(escaped) = after.strip_prefix('$') {
            output.push('$');
            rest = escaped;
        } else if let Some(reference) = after.strip_prefix('(') {
            match reference.find(')') {
                Some(close) => {
                    let name = &reference[..close];
                    match lookup(name) {
                        Some(value) => output.push_str(value),
                        None => {
                            output.push_str("$(");
                            output.push_str(name);
                            output.push(')');
                        }
                    }
                    rest = &reference[close + 1..];
                }
                // An unclosed reference is copied as is (the Go code re-reads it after "$(").
                None => {
                    output.push_str("$(");
                    rest = reference;
                }
            }
        } else {
            // A lone `$`, or `$` before any other character: kept.
            output.push('$');
            rest = after;
        }
    }
    output.push_str(rest);
    output
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::expand;

    #[test]
    fn references_escapes_and_leftovers_expand_as_the_kubelet() {
        let vars = BTreeMap::from([
            ("VAR_A", "A"),
            ("VAR_B", "B"),
            ("EMPTY", ""),
            ("NESTED", "$(VAR_A)"),
        ]);
        let cases = [
            ("plain", "plain"),
            ("$(VAR_A)", "A"),
            ("___$(VAR_A)___$(VAR_B)", "___A___B"),
            ("$(UNKNOWN)", "$(UNKNOWN)"),
            ("$(EMPTY)x", "x"),
            ("$$(VAR_A)", "$(VAR_A)"),
            ("$$$(VAR_A)", "$A"),
            ("$$$$", "$$"),
            ("$", "$"),
            ("a$b", "a$b"),
            ("$(VAR_A", "$(VAR_A"),
            ("$()", "$()"),
            ("$(NESTED)", "$(VAR_A)"),
            ("$(VAR_A)$(VAR_A", "A$(VAR_A"),
            ("ü$(VAR_A)ü", "üAü"),
        ];
        for (input, expected) in cases {
            assert_eq!(
                expand(input, |name| vars.get(name).copied()),
                expected,
                "{input}"
            );
        }
    }
}
