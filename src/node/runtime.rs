//! The container runtime a node's actors talk to: the CRI client the configuration names, or
//! none for a simulated runtime. An endpoint that cannot be used is reported unreachable,
//! never pretended healthy.

use std::sync::Arc;

use nodepulse_actors::ports::{
    ImageFsUsage, RuntimeError, RuntimeResult, RuntimeService, RuntimeStatus, RuntimeVersion,
};

use crate::{
    config::{Config, EndpointError, RuntimeKind},
    cri::CriClient,
};

/// The CRI client of a `runtime: cri` node, or why its endpoint cannot be used.
pub(super) fn cri_client(config: &Config) -> Result<CriClient, EndpointError> {
    CriClient::new(
        &config.container_runtime_endpoint,
        config.runtime_request_timeout.0,
    )
}

/// The runtime `config` names: a CRI client, or `None` for a simulated one. Validation has
/// checked the endpoint; should it still not parse, the runtime is reported unreachable (the
/// node stays NotReady and says why) — never pretended healthy.
pub fn runtime(config: &Config) -> Option<Arc<dyn RuntimeService>> {
    match config.runtime {
        RuntimeKind::Simulated => None,
        RuntimeKind::Cri => match CriClient::new(
            &config.container_runtime_endpoint,
            config.runtime_request_timeout.0,
        ) {
            Ok(client) => Some(Arc::new(client)),
            Err(error) => {
                tracing::error!(%error, "no usable containerRuntimeEndpoint; the runtime is reported unreachable");
                Some(Arc::new(UnusableEndpoint(error.to_string())))
            }
        },
    }
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
