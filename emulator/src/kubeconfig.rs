//! Kubeconfig files pointing at the emulator, usable by kube-rs and kubectl.

use std::fmt::Write as _;

/// The name used for the cluster, user and context entries.
pub const CONTEXT: &str = "nodepulse-emulator";

/// A kubeconfig for `server` (an `http://` URL), authenticating with `token` when given.
pub fn render(server: &str, token: Option<&str>) -> String {
    render_with_ca(server, token, None)
}

/// A kubeconfig for `server`, trusting `ca_pem` (an `https://` server's CA) when given.
pub fn render_with_ca(server: &str, token: Option<&str>, ca_pem: Option<&str>) -> String {
    let mut out = String::new();
    // Plain YAML written by hand: the structure is fixed and every value is quoted.
    let _ = writeln!(out, "apiVersion: v1");
    let _ = writeln!(out, "kind: Config");
    let _ = writeln!(out, "clusters:");
    let _ = writeln!(out, "- name: {CONTEXT}");
    let _ = writeln!(out, "  cluster:");
    let _ = writeln!(out, "    server: {}", quote(server));
    if let Some(ca) = ca_pem {
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD.encode(ca);
        let _ = writeln!(out, "    certificate-authority-data: {}", quote(&data));
    }
    let _ = writeln!(out, "users:");
    let _ = writeln!(out, "- name: {CONTEXT}");
    match token {
        Some(token) => {
            let _ = writeln!(out, "  user:");
            let _ = writeln!(out, "    token: {}", quote(token));
        }
        None => {
            let _ = writeln!(out, "  user: {{}}");
        }
    }
    let _ = writeln!(out, "contexts:");
    let _ = writeln!(out, "- name: {CONTEXT}");
    let _ = writeln!(out, "  context:");
    let _ = writeln!(out, "    cluster: {CONTEXT}");
    let _ = writeln!(out, "    user: {CONTEXT}");
    let _ = writeln!(out, "current-context: {CONTEXT}");
    out
}

/// A double-quoted YAML scalar.
fn quote(value: &str) -> String {
    let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{escaped}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_server_and_optional_token() {
        let anonymous = render("http://127.0.0.1:1234", None);
        assert!(anonymous.contains("    server: \"http://127.0.0.1:1234\"\n"));
        assert!(anonymous.contains("  user: {}\n"));
        assert!(anonymous.contains("current-context: nodepulse-emulator\n"));
        let with_token = render("http://127.0.0.1:1234", Some("s3\"cret"));
        assert!(with_token.contains("    token: \"s3\\\"cret\"\n"));
    }
}
