//! The bootstrap CSR's name as the kubelet derives it (`digestedName` in
//! `pkg/kubelet/certificate/bootstrap/bootstrap.go`): `node-csr-` and the unpadded base64url
//! SHA-512/256 of the public key (SubjectPublicKeyInfo DER), the common name, each
//! organization and each usage, every part base64url-encoded and followed by `|` (not in that
//! alphabet, so no two inputs run into each other). The same key and template name the same
//! CSR, so a bootstrap sent again after a restart finds the one it already made. Pure.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::template::Template;

/// `node-csr-<digest>` for a request of `template` with the key whose SubjectPublicKeyInfo is
/// `public_key_info`, asking for `usages` (in the order sent).
pub fn digested_name(public_key_info: &[u8], template: &Template, usages: &[&str]) -> String {
    let mut digest = ring::digest::Context::new(&ring::digest::SHA512_256);
    let mut write = |part: &[u8]| {
        digest.update(URL_SAFE_NO_PAD.encode(part).as_bytes());
        digest.update(b"|");
    };
    write(public_key_info);
    write(template.common_name.as_bytes());
    write(template.organization.as_bytes());
    for usage in usages {
        write(usage.as_bytes());
    }
    format!("node-csr-{}", URL_SAFE_NO_PAD.encode(digest.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const USAGES: [&str; 2] = ["digital signature", "client auth"];

    #[test]
    fn the_name_is_the_kubelets_digest() {
        // Computed apart from this code (Python's hashlib sha512_256 and urlsafe_b64encode
        // without padding), over the same parts and delimiters as bootstrap.go.
        assert_eq!(
            digested_name(b"spki-bytes", &Template::client("worker-1"), &USAGES),
            "node-csr-KVlfs9IQIgJHavMrzU1nLyWf9HZvM34HQq-SFenTpho"
        );
    }

    #[test]
    fn another_key_node_or_usage_names_another_csr() {
        let name = |key: &[u8], node: &str, usages: &[&str]| {
            digested_name(key, &Template::client(node), usages)
        };
        let first = name(b"k1", "n1", &USAGES);
        assert_eq!(first, name(b"k1", "n1", &USAGES), "the same inputs");
        assert_ne!(first, name(b"k2", "n1", &USAGES));
        assert_ne!(first, name(b"k1", "n2", &USAGES));
        assert_ne!(first, name(b"k1", "n1", &USAGES[..1]));
    }

    #[test]
    fn the_delimiter_keeps_parts_apart() {
        let parts = |common_name: &str, organization: &str| Template {
            common_name: common_name.into(),
            organization: organization.into(),
            ..Template::client("n")
        };
        assert_ne!(
            digested_name(b"k", &parts("foo", "bar"), &USAGES),
            digested_name(b"k", &parts("foob", "ar"), &USAGES)
        );
    }
}
