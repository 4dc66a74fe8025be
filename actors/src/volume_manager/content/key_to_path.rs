//! The configMap and secret plugins' projection (§1.11): every key becomes a file, or with
//! `items` only the listed keys under their paths; a missing key fails unless `optional`.

use k8s_openapi::api::core::v1::KeyToPath;

use super::{ContentError, FileProjection, Payload, mode_bits};

/// Which plugin's texts to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyedKind {
    ConfigMap,
    Secret,
}

/// Projects `data` (key → bytes) into `payload`.
pub fn project_keys(
    kind: KeyedKind,
    data: &std::collections::BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    default_mode: u32,
    optional: bool,
    payload: &mut Payload,
) -> Result<(), ContentError> {
    let Some(items) = items.filter(|items| !items.is_empty()) else {
        for (key, bytes) in data {
            payload.insert(
                key.clone(),
                FileProjection {
                    data: bytes.clone(),
                    mode: default_mode,
                    fs_user: None,
                },
            );
        }
        return Ok(());
    };
    for item in items {
        let Some(bytes) = data.get(&item.key) else {
            if optional {
                continue;
            }
            return Err(match kind {
                KeyedKind::ConfigMap => ContentError::MissingConfigMapKey(item.key.clone()),
                KeyedKind::Secret => ContentError::MissingSecretKey(item.key.clone()),
            });
        };
        payload.insert(
            item.path.clone(),
            FileProjection {
                data: bytes.clone(),
                mode: mode_bits(item.mode, default_mode),
                fs_user: None,
            },
        );
    }
    Ok(())
}
