//! The `exec` probe: CRI ExecSync through the `ContainerRuntime` port with `timeoutSeconds`,
//! stdout then stderr capped at 10 KiB as the output, exit 0 a success; the runtime's timeout
//! is a failure with the kubelet's text, any other runtime error an Unknown (retried).

use std::time::Duration;

use nodepulse_actors::{
    go_duration::go_duration,
    ports::{
        ContainerRuntime, ContainerRuntimeError, ContainerRuntimeResult, ExecOutput, ProbeError,
        ProbeOutcome,
    },
};

use super::http::MAX_BODY_BYTES;

/// Runs `command` in the container (`containerd://<id>` or a bare CRI id).
pub async fn probe(
    runtime: &dyn ContainerRuntime,
    container_id: &str,
    command: Vec<String>,
    timeout: Duration,
) -> ProbeOutcome {
    let id = container_id
        .split_once("://")
        .map_or(container_id, |(_, id)| id);
    let result = runtime
        .exec_sync(id.to_owned(), command.clone(), timeout)
        .await;
    outcome(result, &command, timeout)
}

/// What ExecSync's answer means for the probe.
pub fn outcome(
    result: ContainerRuntimeResult<ExecOutput>,
    command: &[String],
    timeout: Duration,
) -> ProbeOutcome {
    match result {
        Ok(output) => {
            let mut bytes = output.stdout;
            bytes.extend_from_slice(&output.stderr);
            bytes.truncate(MAX_BODY_BYTES);
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if output.exit_code == 0 {
                ProbeOutcome::Success(text)
            } else {
                ProbeOutcome::Failure(text)
            }
        }
        Err(ContainerRuntimeError::ExecTimedOut { .. }) => ProbeOutcome::Failure(format!(
            "command timed out: \"{}\" timed out after {}",
            command.join(" "),
            go_duration(timeout)
        )),
        Err(error) => ProbeOutcome::Unknown(ProbeError::Exec(error.to_string())),
    }
}
