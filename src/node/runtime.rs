//! The container runtime a node's parts talk to: one CRI client per node, built here once from
//! the configuration and shared by the signal actors, the pod provider, the prober and the
//! node's handle; none for a simulated runtime. An endpoint that cannot be used is reported
//! unreachable to the signal actors, never pretended healthy.

use std::sync::Arc;

use nodepulse_actors::ports::{
    ImageFsUsage, RuntimeError, RuntimeResult, RuntimeService, RuntimeStatus, RuntimeVersion,
};

use crate::config::{Config, EndpointError, RuntimeKind};
use nodepulse_cri::client::CriClient;

/// The node's CRI client, or why the endpoint cannot be used; `None` for a simulated runtime.
/// Validation has checked the endpoint; should it still not parse, it is said once, here.
pub(super) fn cri_client(config: &Config) -> Option<Result<CriClient, EndpointError>> {
    match config.runtime {
        RuntimeKind::Simulated => None,
        RuntimeKind::Cri => Some(
            CriClient::for_node(
                &config.container_runtime_endpoint,
                config.runtime_request_timeout.0,
            )
            .inspect_err(|error| {
                tracing::error!(%error, "no usable containerRuntimeEndpoint; the runtime is reported unreachable");
            }),
        ),
    }
}

/// What the signal actors read of the node's runtime `cri`: the client itself, or one whose
/// every call fails saying why the endpoint cannot be used.
pub(super) fn runtime(
    cri: Option<&Result<CriClient, EndpointError>>,
) -> Option<Arc<dyn RuntimeService>> {
    cri.map(|cri| -> Arc<dyn RuntimeService> {
        match cri {
            Ok(client) => Arc::new(client.clone()),
            Err(error) => Arc::new(UnusableEndpoint(error.to_string())),
        }
    })
}

/// A runtime behind an endpoint that cannot be used: every call fails, saying why.
struct UnusableEndpoint(String);

impl UnusableEndpoint {
    fn fail<T: Send + 'static>(&self) -> futures::future::BoxFuture<'static, RuntimeResult<T>> {
        let error = RuntimeError::Unreachable {
            path: std::path::PathBuf::new(),
            message: self.0.clone(),
        };
        Box::pin(async move { Err(error) })
    }
}

impl RuntimeService for UnusableEndpoint {
    fn status(&self) -> futures::future::BoxFuture<'static, RuntimeResult<RuntimeStatus>> {
        self.fail()
    }

    fn version(&self) -> futures::future::BoxFuture<'static, RuntimeResult<RuntimeVersion>> {
        self.fail()
    }

    fn image_fs_info(
        &self,
    ) -> futures::future::BoxFuture<'static, RuntimeResult<Vec<ImageFsUsage>>> {
        self.fail()
    }

    fn update_pod_cidr(
        &self,
        _pod_cidr: String,
    ) -> futures::future::BoxFuture<'static, RuntimeResult<()>> {
        self.fail()
    }

    fn list_images(
        &self,
    ) -> futures::future::BoxFuture<'static, RuntimeResult<Vec<nodepulse_actors::ports::ImageInfo>>>
    {
        self.fail()
    }
}
