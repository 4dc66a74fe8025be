//! The annotations that script a simulated pod (a node that runs no containers, as kwok's):
//! how it exits, which containers fail their readiness probe, and what it uses. Each is read
//! afresh from the pod as the API has it; a malformed value is ignored with a warning.
//!
//! | annotation | value | effect |
//! |---|---|---|
//! | `nodepulse.io/simulated-exit-code` | `0`–`255` | with `restartPolicy: Never`, every container exits with this code: Succeeded for 0, Failed otherwise |
//! | `nodepulse.io/simulated-exit-after` | seconds, e.g. `5` or `0.5` | how long the containers run before that exit (default 0) |
//! | `nodepulse.io/simulated-unready` | container names, comma-separated | these containers fail their readiness probe (Ready=False) until removed |
//! | `nodepulse.io/simulated-memory-usage` | a quantity (`300Mi`) for the first container, or `app=300Mi,sidecar=20Mi` | working set, for eviction ranking |
//! | `nodepulse.io/simulated-ephemeral-storage-usage` | the same form | local storage use, for eviction ranking |
//! | `nodepulse.io/simulated-processes` | a count | processes, for PID-pressure ranking |

use std::{collections::BTreeSet, time::Duration};

use k8s_openapi::api::core::v1::Pod;

use crate::quantity::parse_quantity;

pub const EXIT_CODE: &str = "nodepulse.io/simulated-exit-code";
pub const EXIT_AFTER: &str = "nodepulse.io/simulated-exit-after";
pub const UNREADY: &str = "nodepulse.io/simulated-unready";
pub const MEMORY_USAGE: &str = "nodepulse.io/simulated-memory-usage";
pub const STORAGE_USAGE: &str = "nodepulse.io/simulated-ephemeral-storage-usage";
pub const PROCESSES: &str = "nodepulse.io/simulated-processes";

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(|value| value.trim())
}

fn malformed(pod: &Pod, key: &str, value: &str, why: &str) {
    tracing::warn!(pod = ?pod.metadata.name, annotation = key, value, "ignoring a malformed annotation: {why}");
}

/// The scripted exit: its code and after how long. Only for `restartPolicy: Never` (another
/// policy would restart the container, which is not simulated).
pub fn scripted_exit(pod: &Pod) -> Option<(i32, Duration)> {
    let never = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.restart_policy.as_deref())
        == Some("Never");
    let value = annotation(pod, EXIT_CODE)?;
    let Some(code) = value
        .parse::<i32>()
        .ok()
        .filter(|code| (0..=255).contains(code))
    else {
        malformed(pod, EXIT_CODE, value, "an exit code is 0 to 255");
        return None;
    };
    if !never {
        malformed(
            pod,
            EXIT_CODE,
            value,
            "only pods with restartPolicy Never exit",
        );
        return None;
    }
    let after = match annotation(pod, EXIT_AFTER) {
        None => Duration::ZERO,
        Some(text) => match text
            .trim_end_matches('s')
            .parse::<f64>()
            .ok()
            .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        {
            Some(after) => after,
            None => {
                malformed(pod, EXIT_AFTER, text, "a number of seconds, at least 0");
                Duration::ZERO
            }
        },
    };
    Some((code, after))
}

/// The containers whose readiness probe fails.
pub fn unready_containers(pod: &Pod) -> BTreeSet<String> {
    annotation(pod, UNREADY)
        .map(|names| {
            names
                .split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Per-container usage from a usage annotation: `(container, bytes)`; a bare quantity is the
/// first container's. `None` when absent or malformed.
fn usage(pod: &Pod, key: &str, first_container: &str) -> Option<Vec<(String, u64)>> {
    let value = annotation(pod, key)?;
    let parse = |text: &str| -> Option<u64> {
        let amount = parse_quantity(text.trim()).ok()?;
        // Quantities are non-negative integers of bytes here; fractions round down.
        (amount >= 0.0).then_some(amount as u64)
    };
    let parsed = if value.contains('=') {
        value
            .split(',')
            .map(|entry| {
                let (name, amount) = entry.split_once('=')?;
                Some((name.trim().to_owned(), parse(amount)?))
            })
            .collect::<Option<Vec<_>>>()
    } else {
        parse(value).map(|amount| vec![(first_container.to_owned(), amount)])
    };
    if parsed.is_none() {
        malformed(pod, key, value, "a quantity, or container=quantity pairs");
    }
    parsed
}

/// Memory working set by container.
pub fn memory_usage(pod: &Pod, first_container: &str) -> Vec<(String, u64)> {
    usage(pod, MEMORY_USAGE, first_container).unwrap_or_default()
}

/// Ephemeral storage use by container.
pub fn storage_usage(pod: &Pod, first_container: &str) -> Vec<(String, u64)> {
    usage(pod, STORAGE_USAGE, first_container).unwrap_or_default()
}

pub fn processes(pod: &Pod) -> Option<u64> {
    let value = annotation(pod, PROCESSES)?;
    let count = value.parse().ok();
    if count.is_none() {
        malformed(pod, PROCESSES, value, "a count of processes");
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(restart_policy: &str, annotations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "annotations": annotations},
            "spec": {"restartPolicy": restart_policy, "containers": [{"name": "app"}]},
        }))
        .expect("a pod")
    }

    #[test]
    fn an_exit_is_scripted_only_for_restart_policy_never() {
        let exits = pod("Never", json!({EXIT_CODE: "3", EXIT_AFTER: "1.5"}));
        assert_eq!(
            scripted_exit(&exits),
            Some((3, Duration::from_millis(1500)))
        );
        let restarts = pod("Always", json!({EXIT_CODE: "3"}));
        assert_eq!(scripted_exit(&restarts), None);
        let malformed = pod("Never", json!({EXIT_CODE: "300"}));
        assert_eq!(scripted_exit(&malformed), None);
    }

    #[test]
    fn usage_is_a_bare_quantity_for_the_first_container_or_pairs() {
        let bare = pod("Always", json!({MEMORY_USAGE: "300Mi"}));
        assert_eq!(memory_usage(&bare, "app"), vec![("app".into(), 300 << 20)]);
        let pairs = pod("Always", json!({STORAGE_USAGE: "app=1Gi, log=2k"}));
        assert_eq!(
            storage_usage(&pairs, "app"),
            vec![("app".into(), 1 << 30), ("log".into(), 2000)]
        );
        let broken = pod("Always", json!({MEMORY_USAGE: "app=lots"}));
        assert!(memory_usage(&broken, "app").is_empty());
    }

    #[test]
    fn unready_containers_are_a_comma_separated_list() {
        let unready = pod("Always", json!({UNREADY: "app, sidecar,"}));
        assert_eq!(
            unready_containers(&unready),
            BTreeSet::from(["app".to_owned(), "sidecar".to_owned()])
        );
    }
}
