//! The configuration as others may read it (the kubelet API's `/configz`): without the `debug`
//! section (its fault-injection token lets whoever holds it kill actors) and with every other
//! secret-bearing value shown as [`HIDDEN`], as `check-config` shows a bad token. Never a
//! secret in the output, whatever the configuration holds.

use serde_json::Value;

use super::Config;

/// What stands for a secret wherever the configuration is shown.
pub const HIDDEN: &str = "(hidden)";

impl Config {
    /// This configuration as JSON, fit to publish: `debug` left out, the values of
    /// `staticPodURLHeader` (bearer tokens, as a rule) and the user information of
    /// `staticPodURL` hidden.
    pub fn published(&self) -> Value {
        let mut published = serde_json::to_value(self).unwrap_or_default();
        let Some(fields) = published.as_object_mut() else {
            return Value::Null;
        };
        fields.remove("debug");
        if let Some(Value::Object(headers)) = fields.get_mut("staticPodURLHeader") {
            for values in headers.values_mut() {
                if let Value::Array(values) = values {
                    values.fill(Value::from(HIDDEN));
                }
            }
        }
        if let Some(url) = self.static_pod_url.as_deref() {
            fields.insert(
                "staticPodURL".to_owned(),
                Value::from(without_userinfo(url)),
            );
        }
        published
    }
}

/// `url` with the user information of its authority (`user:password@`, or a token in the user
/// part) replaced by [`HIDDEN`].
fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{HIDDEN}{}", &rest[at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Source;

    #[test]
    fn no_secret_of_the_configuration_is_published() {
        let config = Config::parse(
            "staticPodURL: https://operator:s3cret@pods.example/manifests?x=1\nstaticPodURLHeader:\n  Authorization: [Bearer header-token-1, Bearer header-token-2]\ndebug:\n  address: 127.0.0.1:10280\n  faultInjection: {enabled: true, token: fault-token-0123456789}\n",
            Source::Embedded,
        )
        .expect("valid");
        let published = config.published();
        let text = published.to_string();
        for secret in ["s3cret", "operator", "header-token", "fault-token"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(published.get("debug"), None);
        assert_eq!(
            published["staticPodURLHeader"],
            serde_json::json!({"Authorization": [HIDDEN, HIDDEN]})
        );
        assert_eq!(
            published["staticPodURL"],
            "https://(hidden)@pods.example/manifests?x=1"
        );
        assert_eq!(published["port"], 10250, "the rest is all there");
    }

    #[test]
    fn a_url_without_user_information_is_published_as_it_is() {
        for url in [
            "https://pods.example/a@b",
            "http://10.0.0.1:8080/manifests",
            "not a url",
        ] {
            assert_eq!(without_userinfo(url), url);
        }
    }
}
