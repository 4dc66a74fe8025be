//! `imagePullSecrets` as CRI pull credentials, the way the kubelet's `MakeDockerKeyring` and
//! `BasicDockerKeyring.Lookup` choose them: each `kubernetes.io/dockerconfigjson` (or legacy
//! `dockercfg`) Secret is a keyring of registry entries; entries whose host (globs per label,
//! same port) and path prefix match the repository are tried in reverse-sorted key order, then
//! Docker Hub's `index.docker.io` entry for Hub images. No node-level credential providers.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;

use crate::ports::PullAuth;

const DOCKER_CONFIG_JSON: (&str, &str) = ("kubernetes.io/dockerconfigjson", ".dockerconfigjson");
const DOCKER_CFG: (&str, &str) = ("kubernetes.io/dockercfg", ".dockercfg");
const DOCKER_HUB_KEY: &str = "index.docker.io";

/// A pull Secret the kubelet cannot read (its JSON or its `auth` field): the pull fails with
/// this text until the Secret is fixed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullSecretError {
    #[error("{0}")]
    Json(String),
    #[error("unable to parse auth field, must be formatted as base64(username:password)")]
    Auth,
}

#[derive(Deserialize)]
struct DockerConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, DockerConfigEntry>,
}

#[derive(Deserialize, Default)]
struct DockerConfigEntry {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    /// `base64(username:password)`; when set it wins over the two fields.
    #[serde(default)]
    auth: String,
}

/// The credentials to try, in order, for `repository` (normalized, as
/// [`super::image_ref::ImageName::repository`]); empty means pull anonymously.
pub fn pull_auths(repository: &str, secrets: &[Secret]) -> Result<Vec<PullAuth>, PullSecretError> {
    let mut found = Vec::new();
    for secret in secrets {
        let kind = secret.type_.as_deref().unwrap_or_default();
        let data = |key: &str| {
            secret
                .data
                .as_ref()
                .and_then(|data| data.get(key))
                .map(|bytes| bytes.0.as_slice())
                .filter(|bytes| !bytes.is_empty())
        };
        let entries = match (kind, data(DOCKER_CONFIG_JSON.1), data(DOCKER_CFG.1)) {
            (kind, Some(json), _) if kind == DOCKER_CONFIG_JSON.0 => {
                parse(json, |config: DockerConfigJson| config.auths)?
            }
            (kind, _, Some(json)) if kind == DOCKER_CFG.0 => {
                parse(json, |config: BTreeMap<String, DockerConfigEntry>| config)?
            }
            _ => continue,
        };
        found.extend(lookup(&keyring(entries)?, repository));
    }
    Ok(found)
}

fn parse<T: for<'de> Deserialize<'de>>(
    json: &[u8],
    entries: impl FnOnce(T) -> BTreeMap<String, DockerConfigEntry>,
) -> Result<BTreeMap<String, DockerConfigEntry>, PullSecretError> {
    serde_json::from_slice(json)
        .map(entries)
        .map_err(|error| PullSecretError::Json(error.to_string()))
}

/// Entries keyed as the kubelet keys them: host plus path, without the scheme and with
/// `/v1/` or `/v2/` meaning the host itself.
fn keyring(
    entries: BTreeMap<String, DockerConfigEntry>,
) -> Result<BTreeMap<String, Vec<PullAuth>>, PullSecretError> {
    let mut keyring: BTreeMap<String, Vec<PullAuth>> = BTreeMap::new();
    for (location, entry) in entries {
        let schemeless = location
            .strip_prefix("https://")
            .or_else(|| location.strip_prefix("http://"))
            .unwrap_or(&location);
        let (host, path) = schemeless
            .split_once('/')
            .map_or((schemeless, ""), |(host, path)| (host, path));
        let path = format!("/{path}");
        let path = path
            .strip_prefix("/v1")
            .or_else(|| path.strip_prefix("/v2"))
            .filter(|rest| rest.starts_with('/'))
            .unwrap_or(&path);
        let key = if path.is_empty() || path == "/" {
            host.to_owned()
        } else {
            format!("{host}{path}")
        };
        let (username, password) = if entry.auth.is_empty() {
            (entry.username, entry.password)
        } else {
            decode_auth(&entry.auth)?
        };
        keyring.entry(key).or_default().push(PullAuth {
            username,
            password,
            ..PullAuth::default()
        });
    }
    Ok(keyring)
}

fn decode_auth(auth: &str) -> Result<(String, String), PullSecretError> {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth)
        .map_err(|_| PullSecretError::Auth)?;
    let text = String::from_utf8(decoded).map_err(|_| PullSecretError::Auth)?;
    let (username, password) = text.split_once(':').ok_or(PullSecretError::Auth)?;
    Ok((username.to_owned(), password.to_owned()))
}

/// `BasicDockerKeyring.Lookup`: every matching key, most specific (reverse-sorted) first;
/// failing that, Docker Hub's entry for a Hub image.
fn lookup(keyring: &BTreeMap<String, Vec<PullAuth>>, repository: &str) -> Vec<PullAuth> {
    let matched: Vec<PullAuth> = keyring
        .iter()
        .rev()
        .filter(|(key, _)| url_matches(key, repository))
        .flat_map(|(_, auths)| auths.iter().cloned())
        .collect();
    if !matched.is_empty() {
        return matched;
    }
    let first = repository.split('/').next().unwrap_or_default();
    let hub = !first.is_empty()
        && (!repository.contains('/')
            || matches!(first, "docker.io" | "index.docker.io")
            || !first.contains(['.', ':']));
    if hub {
        keyring.get(DOCKER_HUB_KEY).cloned().unwrap_or_default()
    } else {
        Vec::new()
    }
}

/// `URLsMatch`: same port, same number of host labels each matching its glob, and the key's
/// path a prefix of the repository's.
fn url_matches(key: &str, repository: &str) -> bool {
    let split = |url: &str| {
        let (authority, path) = url
            .split_once('/')
            .map_or((url, String::new()), |(a, p)| (a, format!("/{p}")));
        let (host, port) = authority
            .rsplit_once(':')
            .map_or((authority, ""), |(host, port)| (host, port));
        (
            host.split('.').map(str::to_owned).collect::<Vec<_>>(),
            port.to_owned(),
            path,
        )
    };
    let (key_labels, key_port, key_path) = split(key);
    let (labels, port, path) = split(repository);
    key_port == port
        && key_labels.len() == labels.len()
        && path.starts_with(&key_path)
        && key_labels
            .iter()
            .zip(&labels)
            .all(|(pattern, label)| glob(pattern.as_bytes(), label.as_bytes()))
}

/// `filepath.Match` for one host label: `*` any run, `?` one character (no classes).
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match (pattern.split_first(), text.split_first()) {
        (None, None) => true,
        (Some((b'*', rest)), _) => {
            glob(rest, text)
                || text
                    .split_first()
                    .is_some_and(|(_, tail)| glob(pattern, tail))
        }
        (Some((b'?', rest)), Some((_, tail))) => glob(rest, tail),
        (Some((expected, rest)), Some((actual, tail))) => expected == actual && glob(rest, tail),
        _ => false,
    }
}
