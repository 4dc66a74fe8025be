//! apimachinery's DNS-1123 name rules (`IsDNS1123Label`, `IsDNS1123Subdomain`) and their
//! messages, word for word: object names, namespaces, container and volume names.

/// `validation.IsDNS1123Subdomain`'s regex error.
pub const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// `validation.IsDNS1123Subdomain`: what is wrong with `value` as a DNS subdomain, in order.
pub fn dns1123_subdomain_problems(value: &str) -> Vec<&'static str> {
    let mut problems = Vec::new();
    if value.len() > 253 {
        problems.push("must be no more than 253 characters");
    }
    if !is_subdomain(value) {
        problems.push(DNS1123_SUBDOMAIN_MESSAGE);
    }
    problems
}

pub fn is_subdomain(value: &str) -> bool {
    value.split('.').all(is_label)
}

pub fn is_label(part: &str) -> bool {
    let bytes = part.as_bytes();
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// `validation.IsDNS1123Label`'s regex error.
pub const DNS1123_LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
