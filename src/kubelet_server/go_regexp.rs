//! Whether a node log query's `pattern` parses, judged as the kubelet judges it with Go's
//! `regexp/syntax.Parse(pattern, syntax.Perl)`, and its refusal in Go's words
//! (``error parsing regexp: <code>: `<expr>` ``). regex-syntax parses; its error kinds are named
//! by Go's error codes, and the expression quoted is the part Go quotes.

use regex_syntax::{ast::ErrorKind as Ast, hir::ErrorKind as Hir};

/// Go's `maxHeight`: how deep a pattern may nest.
const NEST_LIMIT: u32 = 1000;

/// A pattern Go refuses, as it says so.
#[derive(Debug, thiserror::Error)]
pub enum RegexpError {
    /// Go's error code and the part of the pattern it quotes.
    #[error("error parsing regexp: {code}: `{expr}`")]
    Go { code: &'static str, expr: String },
    /// What regex-syntax says where Go has no word for it.
    #[error("error parsing regexp: {0}")]
    Other(#[source] Box<regex_syntax::Error>),
}

/// `Err` with Go's message when `pattern` does not parse.
pub fn check(pattern: &str) -> Result<(), RegexpError> {
    // Go reads a `{` that does not start a well-formed repeat (`a{2`, `a{x}`, `{,3}`) as a
    // literal; regex-syntax refuses it, so it is escaped and the pattern parsed again.
    let mut parsed = pattern.to_owned();
    let error = loop {
        let error = match regex_syntax::ParserBuilder::new()
            .nest_limit(NEST_LIMIT)
            .build()
            .parse(&parsed)
        {
            Ok(_) => return Ok(()),
            Err(error) => error,
        };
        let brace = match &error {
            regex_syntax::Error::Parse(error) if literal_brace(error.kind()) => {
                let at = error.span().start.offset;
                match parsed.get(at..) {
                    Some(rest) if rest.starts_with('{') => Some(at),
                    _ => parsed.get(..at).and_then(|head| head.rfind('{')),
                }
            }
            _ => None,
        };
        // A brace escaped already is not escaped again (that would unescape it).
        match brace.filter(|at| !parsed[..*at].ends_with('\\')) {
            Some(at) => parsed.insert(at, '\\'),
            None => break error,
        }
    };
    let pattern = parsed.as_str();
    let (code, start, end) = match &error {
        regex_syntax::Error::Parse(error) => {
            let span = error.span();
            (ast_code(error.kind()), span.start.offset, span.end.offset)
        }
        regex_syntax::Error::Translate(error) => {
            let span = error.span();
            (hir_code(error.kind()), span.start.offset, span.end.offset)
        }
        _ => return Err(RegexpError::Other(Box::new(error))),
    };
    let rest = pattern.get(start..).unwrap_or(pattern);
    let (code, expr) = match code {
        // Go quotes the whole pattern for an unbalanced group, the rest from `[` for an
        // unclosed class, nothing for a trailing backslash, and the offending part otherwise;
        // `(?<` not followed by a name is a bad named capture to it, not a look-behind.
        MISSING_PAREN | UNEXPECTED_PAREN => (code, pattern),
        MISSING_BRACKET => (code, rest),
        TRAILING_BACKSLASH => (code, ""),
        _ if rest.starts_with("(?<") => ("invalid named capture", rest),
        // Flags cut short: from their `(?` on.
        INVALID_PERL if start == end => {
            let open = pattern[..start].rfind("(?").unwrap_or(start);
            (code, &pattern[open..start])
        }
        // An operator without its argument: the operator (a `{n,m}` whole).
        _ if start == end => {
            let length = match rest.find('}') {
                Some(close) if rest.starts_with('{') => close + 1,
                _ => rest.chars().next().map_or(0, char::len_utf8),
            };
            (code, &rest[..length])
        }
        _ => (code, pattern.get(start..end).unwrap_or(pattern)),
    };
    Err(RegexpError::Go {
        code,
        expr: expr.to_owned(),
    })
}

/// The refusals of a `{` that Go would read as a literal.
fn literal_brace(kind: &Ast) -> bool {
    matches!(
        kind,
        Ast::RepetitionCountUnclosed
            | Ast::RepetitionCountDecimalEmpty
            | Ast::DecimalEmpty
            | Ast::DecimalInvalid
    )
}

const MISSING_PAREN: &str = "missing closing )";
const UNEXPECTED_PAREN: &str = "unexpected )";
const MISSING_BRACKET: &str = "missing closing ]";
const TRAILING_BACKSLASH: &str = "trailing backslash at end of expression";
const INVALID_ESCAPE: &str = "invalid escape sequence";
const INVALID_RANGE: &str = "invalid character class range";
const INVALID_PERL: &str = "invalid or unsupported Perl syntax";

/// Go's `syntax.ErrorCode` text for a parse error.
fn ast_code(kind: &Ast) -> &'static str {
    match kind {
        Ast::GroupUnclosed => MISSING_PAREN,
        Ast::GroupUnopened => UNEXPECTED_PAREN,
        Ast::ClassUnclosed => MISSING_BRACKET,
        Ast::ClassRangeInvalid | Ast::ClassRangeLiteral | Ast::UnicodeClassInvalid => INVALID_RANGE,
        Ast::EscapeUnexpectedEof => TRAILING_BACKSLASH,
        Ast::ClassEscapeInvalid
        | Ast::EscapeHexEmpty
        | Ast::EscapeHexInvalid
        | Ast::EscapeHexInvalidDigit
        | Ast::EscapeUnrecognized
        | Ast::UnsupportedBackreference
        | Ast::SpecialWordBoundaryUnclosed
        | Ast::SpecialWordBoundaryUnrecognized => INVALID_ESCAPE,
        Ast::GroupNameDuplicate { .. }
        | Ast::GroupNameEmpty
        | Ast::GroupNameInvalid
        | Ast::GroupNameUnexpectedEof => "invalid named capture",
        Ast::RepetitionMissing => "missing argument to repetition operator",
        Ast::RepetitionCountInvalid
        | Ast::RepetitionCountDecimalEmpty
        | Ast::RepetitionCountUnclosed
        | Ast::DecimalEmpty
        | Ast::DecimalInvalid => "invalid repeat count",
        Ast::NestLimitExceeded(_) => "expression nests too deeply",
        Ast::CaptureLimitExceeded => "expression too large",
        _ => INVALID_PERL,
    }
}

/// Go's `syntax.ErrorCode` text for a translation error (an unknown Unicode class is a bad
/// range to Go).
fn hir_code(kind: &Hir) -> &'static str {
    match kind {
        Hir::InvalidUtf8 => "invalid UTF-8",
        Hir::UnicodePropertyNotFound
        | Hir::UnicodePropertyValueNotFound
        | Hir::UnicodePerlClassNotFound => INVALID_RANGE,
        _ => INVALID_PERL,
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn patterns_are_refused_in_gos_words() {
        let check = |pattern: &str| check(pattern).map_err(|error| error.to_string());
        assert_eq!(check(""), Ok(()));
        assert_eq!(check("container|pod-[0-9]+"), Ok(()));
        for literal in ["a{2", "a{x}", "a{,5}", "x{", "é{é", "a{2\\{x"] {
            assert_eq!(check(literal), Ok(()), "{literal}: a literal brace to Go");
        }
        let cases = [
            ("(abc", "missing closing ): `(abc`"),
            ("ab)", "unexpected ): `ab)`"),
            ("x[ab", "missing closing ]: `[ab`"),
            ("[z-a]", "invalid character class range: `z-a`"),
            ("a\\", "trailing backslash at end of expression: ``"),
            ("\\q", "invalid escape sequence: `\\q`"),
            ("*a", "missing argument to repetition operator: `*`"),
            ("\\p{Nope}", "invalid character class range: `\\p{Nope}`"),
            ("x{2,1}", "invalid repeat count: `{2,1}`"),
            ("(?<=a)b", "invalid named capture: `(?<=a)b`"),
            ("(?i", "invalid or unsupported Perl syntax: `(?i`"),
            ("\\8", "invalid escape sequence: `\\8`"),
            ("é(", "missing closing ): `é(`"),
        ];
        let wrong: Vec<String> = (cases.iter())
            .filter_map(|(pattern, expected)| {
                let got = check(pattern);
                let wanted = Err(format!("error parsing regexp: {expected}"));
                (got != wanted).then(|| format!("{pattern}: {got:?}"))
            })
            .collect();
        assert_eq!(wrong, Vec::<String>::new());
    }
}
