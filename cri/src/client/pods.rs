//! [`ContainerRuntime`] over CRI: the sandbox, container, exec and image calls the pod provider
//! makes. Each call is bounded by `runtimeRequestTimeout`; ExecSync by that plus the command's
//! own timeout, as the kubelet does, so the runtime can end the command and answer first.

use std::time::Duration;

use futures::{FutureExt, future::BoxFuture};
use nodepulse_actors::ports::{
    ContainerConfig, ContainerEvents, ContainerFilter, ContainerRuntime, ContainerRuntimeError,
    ContainerRuntimeResult, ContainerStatus, ContainerSummary, ExecOutput, ImageInfo,
    LinuxResources, PullAuth, SandboxConfig, SandboxFilter, SandboxStatus, SandboxSummary,
};

use super::{CallFailure, CriClient, convert, proto, proto::paths};

/// How long an ExecSync without a timeout of its own (a lifecycle hook) may take at most.
const EXEC_WITHOUT_TIMEOUT_BOUND: Duration = Duration::from_secs(24 * 60 * 60);

impl CallFailure {
    /// NotFound is an answer (the caller's view is stale); other statuses are failed calls.
    fn into_container_error(self, method: &'static str) -> ContainerRuntimeError {
        match self {
            Self::Status {
                code: tonic::Code::NotFound,
                message,
            } => ContainerRuntimeError::NotFound { method, message },
            other => other.into_runtime_error(method).into(),
        }
    }
}

impl CriClient {
    /// A pod call whose answer `answer` turns into the port's type.
    pub(super) fn call_with<Request, Response, Out>(
        &self,
        method: &'static str,
        path: &'static str,
        request: Request,
        answer: impl FnOnce(Response) -> ContainerRuntimeResult<Out> + Send + 'static,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Out>>
    where
        Request: prost::Message + Send + Sync + 'static,
        Response: prost::Message + Default + Send + Sync + 'static,
        Out: Send + 'static,
    {
        self.call_as(method, path, request, CallFailure::into_container_error)
            .map(|result| result.and_then(answer))
            .boxed()
    }

    pub(super) fn empty_call<Request>(
        &self,
        method: &'static str,
        path: &'static str,
        request: Request,
    ) -> BoxFuture<'static, ContainerRuntimeResult<()>>
    where
        Request: prost::Message + Send + Sync + 'static,
    {
        self.call_with(method, path, request, |_: proto::Empty| Ok(()))
    }
}

/// A field the runtime must answer with; its absence is an incomplete answer.
pub(super) fn required<T>(
    field: Option<T>,
    method: &'static str,
    name: &'static str,
) -> ContainerRuntimeResult<T> {
    field.ok_or(ContainerRuntimeError::Incomplete {
        method,
        field: name,
    })
}

/// Whole seconds, rounded up so a sub-second limit is not sent as "none" (0).
fn seconds(duration: Duration) -> i64 {
    let whole = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    i64::try_from(whole).unwrap_or(i64::MAX)
}

impl ContainerRuntime for CriClient {
    fn container_events(&self) -> BoxFuture<'static, ContainerRuntimeResult<ContainerEvents>> {
        self.events()
    }

    fn run_pod_sandbox(
        &self,
        config: SandboxConfig,
        runtime_handler: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<String>> {
        let request = proto::RunPodSandboxRequest {
            config: Some(convert::sandbox_config(&config)),
            runtime_handler,
        };
        let method = "RunPodSandbox";
        self.call_with(
            method,
            paths::RUN_POD_SANDBOX,
            request,
            |response: proto::RunPodSandboxResponse| Ok(response.pod_sandbox_id),
        )
    }

    fn stop_pod_sandbox(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        let request = proto::PodSandboxIdRequest { pod_sandbox_id: id };
        self.empty_call("StopPodSandbox", paths::STOP_POD_SANDBOX, request)
    }

    fn remove_pod_sandbox(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        let request = proto::PodSandboxIdRequest { pod_sandbox_id: id };
        self.empty_call("RemovePodSandbox", paths::REMOVE_POD_SANDBOX, request)
    }

    fn pod_sandbox_status(
        &self,
        id: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<SandboxStatus>> {
        let request = proto::PodSandboxStatusRequest {
            pod_sandbox_id: id,
            verbose: false,
        };
        let method = "PodSandboxStatus";
        self.call_with(
            method,
            paths::POD_SANDBOX_STATUS,
            request,
            move |response: proto::PodSandboxStatusResponse| {
                Ok(convert::sandbox_status(required(
                    response.status,
                    method,
                    "status",
                )?))
            },
        )
    }

    fn list_pod_sandboxes(
        &self,
        filter: SandboxFilter,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Vec<SandboxSummary>>> {
        let request = proto::ListPodSandboxRequest {
            filter: Some(convert::sandbox_filter(filter)),
        };
        self.call_with(
            "ListPodSandbox",
            paths::LIST_POD_SANDBOX,
            request,
            |response: proto::ListPodSandboxResponse| {
                Ok(response
                    .items
                    .into_iter()
                    .map(convert::sandbox_summary)
                    .collect())
            },
        )
    }

    fn create_container(
        &self,
        sandbox_id: String,
        config: ContainerConfig,
        sandbox: SandboxConfig,
    ) -> BoxFuture<'static, ContainerRuntimeResult<String>> {
        let oom_score_adj = config
            .resources
            .as_ref()
            .map(|resources| self.oom_floor.apply(resources.oom_score_adj));
        let request = proto::CreateContainerRequest {
            pod_sandbox_id: sandbox_id,
            config: Some(convert::container_config(&config, &sandbox, oom_score_adj)),
            sandbox_config: Some(convert::sandbox_config(&sandbox)),
        };
        let method = "CreateContainer";
        self.call_with(
            method,
            paths::CREATE_CONTAINER,
            request,
            |response: proto::CreateContainerResponse| Ok(response.container_id),
        )
    }

    fn start_container(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        let request = proto::ContainerIdRequest { container_id: id };
        self.empty_call("StartContainer", paths::START_CONTAINER, request)
    }

    fn stop_container(
        &self,
        id: String,
        grace: Duration,
    ) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        let request = proto::StopContainerRequest {
            container_id: id,
            timeout: seconds(grace),
        };
        // The runtime waits out the grace period before it answers.
        self.unary::<_, proto::Empty>(
            "StopContainer",
            paths::STOP_CONTAINER,
            request,
            self.timeout + grace,
        )
        .map(|result| {
            result
                .map(|_| ())
                .map_err(|failure| failure.into_container_error("StopContainer"))
        })
        .boxed()
    }

    fn remove_container(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        let request = proto::ContainerIdRequest { container_id: id };
        self.empty_call("RemoveContainer", paths::REMOVE_CONTAINER, request)
    }

    fn update_container_resources(
        &self,
        id: String,
        resources: LinuxResources,
    ) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        let request = proto::UpdateContainerResourcesRequest {
            container_id: id,
            linux: Some(convert::linux_resources(
                &resources,
                Some(self.oom_floor.apply(resources.oom_score_adj)),
            )),
            annotations: std::collections::HashMap::new(),
        };
        self.call_with(
            "UpdateContainerResources",
            paths::UPDATE_CONTAINER_RESOURCES,
            request,
            |_: proto::UpdateContainerResourcesResponse| Ok(()),
        )
    }

    fn container_status(
        &self,
        id: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<ContainerStatus>> {
        let request = proto::ContainerIdRequest { container_id: id };
        let method = "ContainerStatus";
        self.call_with(
            method,
            paths::CONTAINER_STATUS,
            request,
            move |response: proto::ContainerStatusResponse| {
                Ok(convert::container_status(required(
                    response.status,
                    method,
                    "status",
                )?))
            },
        )
    }

    fn list_containers(
        &self,
        filter: ContainerFilter,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Vec<ContainerSummary>>> {
        let request = proto::ListContainersRequest {
            filter: Some(convert::container_filter(filter)),
        };
        self.call_with(
            "ListContainers",
            paths::LIST_CONTAINERS,
            request,
            |response: proto::ListContainersResponse| {
                Ok(response
                    .containers
                    .into_iter()
                    .map(convert::container_summary)
                    .collect())
            },
        )
    }

    fn exec_sync(
        &self,
        id: String,
        command: Vec<String>,
        timeout: Duration,
    ) -> BoxFuture<'static, ContainerRuntimeResult<ExecOutput>> {
        let request = proto::ExecSyncRequest {
            container_id: id,
            cmd: command.clone(),
            timeout: seconds(timeout),
        };
        // A zero timeout is a lifecycle hook's exec, which the kubelet runs without a deadline
        // (its own bound is the grace period or the container's life): bounded only so a lost
        // runtime cannot hold the call forever.
        let bound = if timeout.is_zero() {
            EXEC_WITHOUT_TIMEOUT_BOUND
        } else {
            self.timeout + timeout
        };
        self.unary::<_, proto::ExecSyncResponse>("ExecSync", paths::EXEC_SYNC, request, bound)
            .map(move |result| match result {
                Ok(response) => Ok(ExecOutput {
                    stdout: response.stdout,
                    stderr: response.stderr,
                    exit_code: response.exit_code,
                }),
                // The kubelet reads DeadlineExceeded from ExecSync as the command timing out.
                Err(CallFailure::Status {
                    code: tonic::Code::DeadlineExceeded,
                    ..
                }) => Err(ContainerRuntimeError::ExecTimedOut { command, timeout }),
                Err(failure) => Err(failure.into_container_error("ExecSync")),
            })
            .boxed()
    }

    fn image_status(
        &self,
        image: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Option<ImageInfo>>> {
        let request = proto::ImageStatusRequest {
            image: Some(convert::image_spec(&image)),
            verbose: false,
        };
        self.call_with(
            "ImageStatus",
            paths::IMAGE_STATUS,
            request,
            |response: proto::ImageStatusResponse| Ok(response.image.map(convert::image_info)),
        )
    }

    fn pull_image(
        &self,
        image: String,
        auth: Option<PullAuth>,
        sandbox: Option<SandboxConfig>,
    ) -> BoxFuture<'static, ContainerRuntimeResult<String>> {
        let request = proto::PullImageRequest {
            image: Some(convert::image_spec(&image)),
            auth: auth.map(convert::auth_config),
            sandbox_config: sandbox.as_ref().map(convert::sandbox_config),
        };
        self.call_with(
            "PullImage",
            paths::PULL_IMAGE,
            request,
            |response: proto::PullImageResponse| Ok(response.image_ref),
        )
    }

    fn remove_image(&self, image: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        let request = proto::RemoveImageRequest {
            image: Some(convert::image_spec(&image)),
        };
        self.empty_call("RemoveImage", paths::REMOVE_IMAGE, request)
    }

    fn reopen_container_log(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        // `ReopenContainerLogRequest { string container_id = 1; }`: ContainerIdRequest's shape.
        let request = proto::ContainerIdRequest { container_id: id };
        self.empty_call("ReopenContainerLog", paths::REOPEN_CONTAINER_LOG, request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sub_second_limit_is_sent_as_one_second_not_as_none() {
        assert_eq!(seconds(Duration::from_millis(1)), 1);
        assert_eq!(seconds(Duration::from_secs(2)), 2);
        assert_eq!(seconds(Duration::from_millis(2500)), 3);
        assert_eq!(seconds(Duration::ZERO), 0);
    }

    #[test]
    fn not_found_is_an_answer_and_other_statuses_are_failed_calls() {
        let not_found = CallFailure::Status {
            code: tonic::Code::NotFound,
            message: "container \"c\" not found".to_owned(),
        };
        assert!(matches!(
            not_found.into_container_error("ContainerStatus"),
            ContainerRuntimeError::NotFound {
                method: "ContainerStatus",
                ..
            }
        ));
        let invalid = CallFailure::Status {
            code: tonic::Code::InvalidArgument,
            message: "bad".to_owned(),
        };
        assert_eq!(
            invalid.into_container_error("CreateContainer").to_string(),
            "CreateContainer failed: Client specified an invalid argument: bad"
        );
    }
}
