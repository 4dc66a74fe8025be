//! kube-apiserver's bootstrap token authenticator (`--enable-bootstrap-token-auth`): a bearer
//! token `<id>.<secret>` is checked against the Secret `bootstrap-token-<id>` in `kube-system`
//! and names the user `system:bootstrap:<id>` in `system:bootstrappers` and the token's extra
//! groups. A token of that shape that does not check out is refused, never passed on.

use std::time::SystemTime;

use serde_json::Value;

use crate::api::StoredKind;
use crate::config::User;
use crate::store::{ObjectKey, Store};
use crate::time::parse_time;

/// The Secret type of bootstrap tokens (`bootstrapapi.SecretTypeBootstrapToken`).
const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";

/// Splits a `[a-z0-9]{6}.[a-z0-9]{16}` token into its id and secret.
pub fn parse(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let valid = |part: &str, len: usize| {
        part.len() == len
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (valid(id, 6) && valid(secret, 16)).then_some((id, secret))
}

/// The user `id.secret` authenticates as, if its Secret exists, is a bootstrap token for
/// authentication, matches, and has not expired.
pub fn authenticate(store: &Store, id: &str, secret: &str, now: SystemTime) -> Option<User> {
    let object = store.get(
        StoredKind::Secret,
        &ObjectKey::new("kube-system", format!("bootstrap-token-{id}")),
    )?;
    if object.pointer("/metadata/deletionTimestamp").is_some()
        || object.get("type").and_then(Value::as_str) != Some(SECRET_TYPE)
    {
        return None;
    }
    let data = |key: &str| -> Option<String> {
        use base64::Engine as _;
        let encoded = object.get("data")?.get(key)?.as_str()?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()?;
        String::from_utf8(bytes).ok()
    };
    let stored = data("token-secret")?;
    // Compared in constant time, as the authenticator's `subtle.ConstantTimeCompare`.
    let same = stored.len() == secret.len()
        && stored
            .bytes()
            .zip(secret.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if !same || data("token-id").as_deref() != Some(id) {
        return None;
    }
    if let Some(expiration) = data("expiration") {
        match parse_time(&expiration) {
            Some(at) if at > now => {}
            _ => return None,
        }
    }
    if data("usage-bootstrap-authentication").as_deref() != Some("true") {
        return None;
    }
    let mut groups = vec!["system:bootstrappers".to_string()];
    for group in data("auth-extra-groups")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
    {
        if !valid_extra_group(group) {
            return None;
        }
        if !groups.iter().any(|g| g == group) {
            groups.push(group.to_string());
        }
    }
    groups.push("system:authenticated".to_string());
    Some(User {
        name: format!("system:bootstrap:{id}"),
        groups,
    })
}

/// `^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$`.
fn valid_extra_group(group: &str) -> bool {
    let Some(rest) = group.strip_prefix("system:bootstrappers:") else {
        return false;
    };
    rest.len() <= 256
        && rest
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b':' || b == b'-')
        && rest
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::api::resource::SECRETS;
    use crate::time::format_time;

    fn store_with(string_data: Value, kind: &str) -> Store {
        let store = Store::new(100, 100);
        store
            .create(
                &crate::api::resource::NAMESPACES,
                json!({"metadata": {"name": "kube-system"}}),
                SystemTime::now(),
            )
            .expect("namespace");
        let secret = json!({"metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
            "type": kind, "stringData": string_data});
        store
            .create(&SECRETS, secret, SystemTime::now())
            .expect("secret");
        store
    }

    fn token_data() -> Value {
        json!({"token-id": "abcdef", "token-secret": "0123456789abcdef",
            "usage-bootstrap-authentication": "true",
            "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token"})
    }

    #[test]
    fn a_matching_token_is_the_bootstrap_user_in_its_groups() {
        assert_eq!(
            parse("abcdef.0123456789abcdef"),
            Some(("abcdef", "0123456789abcdef"))
        );
        assert_eq!(parse("ABCDEF.0123456789abcdef"), None);
        let store = store_with(token_data(), SECRET_TYPE);
        let user = authenticate(&store, "abcdef", "0123456789abcdef", SystemTime::now())
            .expect("authenticated");
        assert_eq!(user.name, "system:bootstrap:abcdef");
        assert_eq!(
            user.groups,
            [
                "system:bootstrappers",
                "system:bootstrappers:kubeadm:default-node-token",
                "system:authenticated"
            ]
        );
        assert_eq!(
            authenticate(&store, "abcdef", "0123456789abcdee", SystemTime::now()),
            None
        );
        assert_eq!(
            authenticate(&store, "zzzzzz", "0123456789abcdef", SystemTime::now()),
            None
        );
    }

    #[test]
    fn expired_unusable_or_mistyped_tokens_are_refused() {
        let mut expired = token_data();
        expired["expiration"] = json!(format_time(SystemTime::now() - Duration::from_secs(60)));
        let store = store_with(expired, SECRET_TYPE);
        assert_eq!(
            authenticate(&store, "abcdef", "0123456789abcdef", SystemTime::now()),
            None
        );
        let mut signing_only = token_data();
        signing_only["usage-bootstrap-authentication"] = json!("false");
        let store = store_with(signing_only, SECRET_TYPE);
        assert_eq!(
            authenticate(&store, "abcdef", "0123456789abcdef", SystemTime::now()),
            None
        );
        let store = store_with(token_data(), "Opaque");
        assert_eq!(
            authenticate(&store, "abcdef", "0123456789abcdef", SystemTime::now()),
            None
        );
        let mut bad_group = token_data();
        bad_group["auth-extra-groups"] = json!("system:masters");
        let store = store_with(bad_group, SECRET_TYPE);
        assert_eq!(
            authenticate(&store, "abcdef", "0123456789abcdef", SystemTime::now()),
            None
        );
    }
}
