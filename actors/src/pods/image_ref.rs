//! Image references as the kubelet reads them (`parsers.ParseImageName` over
//! distribution/reference's `ParseNormalizedNamed`): the grammar checked, the repository
//! normalized (`busybox` → `docker.io/library/busybox`) for credential lookup, and the default
//! `latest` tag appended when neither tag nor digest is given.

/// A parsed reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageName {
    /// The normalized repository: `docker.io/library/busybox`, `registry:5000/team/app`.
    pub repository: String,
    /// `latest` when neither a tag nor a digest was written.
    pub tag: Option<String>,
    pub digest: Option<String>,
}

/// Why a reference was refused; the text is the kubelet's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("couldn't parse image name {image:?}: {reason}")]
pub struct InvalidImageName {
    pub image: String,
    pub reason: String,
}

const DEFAULT_DOMAIN: &str = "docker.io";

/// Parses and normalizes `image`.
pub fn parse_image_name(image: &str) -> Result<ImageName, InvalidImageName> {
    let refuse = |reason: String| InvalidImageName {
        image: image.to_owned(),
        reason,
    };
    let invalid = || refuse("invalid reference format".to_owned());
    if image.len() == 64 && image.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(refuse(format!(
            "invalid repository name ({image}), cannot specify 64-byte hexadecimal strings"
        )));
    }
    let (domain, remainder) = split_domain(image);
    let remote = remainder.split(':').next().unwrap_or_default();
    if remote.to_lowercase() != remote {
        return Err(refuse(format!(
            "invalid reference format: repository name ({remote}) must be lowercase"
        )));
    }
    let (name_and_tag, digest) = match remainder.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (remainder.as_str(), None),
    };
    let (path, tag) = match name_and_tag.rsplit_once(':') {
        Some((path, tag)) if !tag.contains('/') => (path, Some(tag)),
        _ => (name_and_tag, None),
    };
    if !valid_domain(domain) || path.is_empty() || !path.split('/').all(valid_path_component) {
        return Err(invalid());
    }
    if tag.is_some_and(|tag| !valid_tag(tag)) || digest.is_some_and(|digest| !valid_digest(digest))
    {
        return Err(invalid());
    }
    let repository = format!("{domain}/{path}");
    if repository.len() > 255 {
        return Err(refuse(
            "repository name must not be more than 255 characters".to_owned(),
        ));
    }
    let tag = match (tag, digest) {
        (None, None) => Some("latest".to_owned()),
        (tag, _) => tag.map(str::to_owned),
    };
    Ok(ImageName {
        repository,
        tag,
        digest: digest.map(str::to_owned),
    })
}

/// The reference the kubelet asks the runtime about: `image` with `:latest` appended when it
/// names neither a tag nor a digest (`applyDefaultImageTag`; not otherwise normalized).
pub fn with_default_tag(image: &str) -> Result<String, InvalidImageName> {
    let parsed = parse_image_name(image)?;
    Ok(match (&parsed.tag, &parsed.digest) {
        (Some(tag), None) if !image.ends_with(&format!(":{tag}")) => format!("{image}:{tag}"),
        _ => image.to_owned(),
    })
}

/// `splitDockerDomain`: a first component with `.` or `:`, or `localhost`, or any capital
/// letter is a registry; otherwise Docker Hub, where one-component names are in `library/`.
fn split_domain(image: &str) -> (&str, String) {
    let (domain, remainder) = match image.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.to_lowercase() != first =>
        {
            (first, rest.to_owned())
        }
        _ => (DEFAULT_DOMAIN, image.to_owned()),
    };
    let domain = if domain == "index.docker.io" {
        DEFAULT_DOMAIN
    } else {
        domain
    };
    if domain == DEFAULT_DOMAIN && !remainder.contains('/') {
        return (domain, format!("library/{remainder}"));
    }
    (domain, remainder)
}

/// `host[:port]`: dot-separated labels of letters, digits and inner hyphens, or `[ipv6]`.
fn valid_domain(domain: &str) -> bool {
    let (host, port) = match domain.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') && !port.contains(']') => (host, Some(port)),
        _ => (domain, None),
    };
    if port.is_some_and(|port| port.is_empty() || !port.bytes().all(|byte| byte.is_ascii_digit())) {
        return false;
    }
    if let Some(address) = host
        .strip_prefix('[')
        .and_then(|host| host.strip_suffix(']'))
    {
        return address.parse::<std::net::Ipv6Addr>().is_ok();
    }
    !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Lower-case letters and digits, joined by `.`, `_`, `__` or runs of `-`.
fn valid_path_component(component: &str) -> bool {
    let alphanumeric = |byte: &u8| byte.is_ascii_lowercase() || byte.is_ascii_digit();
    let mut rest = component.as_bytes();
    loop {
        let run = rest.iter().take_while(|byte| alphanumeric(byte)).count();
        if run == 0 {
            return false;
        }
        rest = &rest[run..];
        if rest.is_empty() {
            return true;
        }
        let separator = rest.iter().take_while(|byte| !alphanumeric(byte)).count();
        let valid = matches!(&rest[..separator], b"." | b"_" | b"__")
            || rest[..separator].iter().all(|byte| *byte == b'-');
        if !valid {
            return false;
        }
        rest = &rest[separator..];
    }
}

fn valid_tag(tag: &str) -> bool {
    let word = |byte: u8| byte.is_ascii_alphanumeric() || byte == b'_';
    tag.len() <= 128
        && tag.bytes().next().is_some_and(word)
        && tag
            .bytes()
            .all(|byte| word(byte) || byte == b'.' || byte == b'-')
}

/// `algorithm:hex` with at least 32 hex digits.
fn valid_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    algorithm
        .bytes()
        .next()
        .is_some_and(|byte| byte.is_ascii_alphabetic())
        && algorithm
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'.' | b'_' | b'-'))
        && hex.len() >= 32
        && hex.bytes().all(|byte| byte.is_ascii_hexdigit())
}
