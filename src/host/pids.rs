//! PIDs as the kubelet counts them: max tasks = min(`pid_max`, `threads-max`), running tasks =
//! the total after "/" in the 4th field of `/proc/loadavg` (not sysinfo, which truncates above
//! 65538 — kubernetes#107107).

use std::path::Path;

use nodepulse_actors::ports::{HostError, PidStats};

use super::read;

/// The running tasks in a `/proc/loadavg` line (`0.10 0.20 0.30 2/345 6789` → 345).
pub fn parse_loadavg(path: &Path, text: &str) -> Result<u64, HostError> {
    text.split_whitespace()
        .nth(3)
        .and_then(|field| field.split_once('/'))
        .and_then(|(_, total)| total.parse().ok())
        .ok_or_else(|| HostError::Parse {
            path: path.to_owned(),
            message: format!(
                "expected a running/total field 4th, found {:?}",
                text.trim()
            ),
        })
}

pub fn node_pids(root: &Path) -> Result<PidStats, HostError> {
    let number = |relative: &str| -> Result<u64, HostError> {
        let path = root.join(relative);
        let text = read(&path)?;
        text.trim().parse().map_err(|_| HostError::Parse {
            path: path.clone(),
            message: format!("expected a number, found {:?}", text.trim()),
        })
    };
    let pid_max = number("proc/sys/kernel/pid_max")?;
    let threads_max = number("proc/sys/kernel/threads-max")?;
    let loadavg = root.join("proc/loadavg");
    Ok(PidStats {
        max_tasks: pid_max.min(threads_max),
        running_tasks: parse_loadavg(&loadavg, &read(&loadavg)?)?,
    })
}
