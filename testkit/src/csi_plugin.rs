//! A tiny CSI node plugin for the tests: Identity and Node (CSI v1) on a unix socket, and the
//! kubelet registration service on a socket in `plugins_registry`, recording every call.
//! Stage and publish do not mount (the tests may not hold CAP_SYS_ADMIN, and a mount would
//! outlive a failed test): staging writes a `staged` marker into the directory the node agent
//! made, publishing creates the target directory with a `published` marker, and the reverse
//! calls remove what they made, as a real driver's unmount would.

use std::{
    collections::BTreeMap,
    convert::Infallible,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use hyper_util::rt::{TokioExecutor, TokioIo};
use nodepulse::volume_plugins::csi::{
    proto::{self, node_capability, paths},
    registration_proto::{self as registration, CSI_PLUGIN_TYPE},
};
use tokio::{net::UnixListener, task::JoinHandle};
use tonic::Status;

/// One call the plugin answered, with the fields the tests check.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Call {
    pub method: &'static str,
    pub volume_id: String,
    pub staging_path: String,
    pub target_path: String,
    pub read_only: bool,
    pub fs_type: String,
    pub volume_context: BTreeMap<String, String>,
}

/// How the plugin presents itself.
#[derive(Debug, Clone)]
pub struct PluginOptions {
    pub driver: String,
    pub node_id: String,
    /// Whether it advertises STAGE_UNSTAGE_VOLUME.
    pub stage: bool,
    pub max_volumes_per_node: i64,
    pub supported_versions: Vec<String>,
}

impl PluginOptions {
    pub fn new(driver: &str) -> Self {
        Self {
            driver: driver.to_owned(),
            node_id: format!("{driver}-node-id"),
            stage: true,
            max_volumes_per_node: 0,
            supported_versions: vec!["1.0.0".to_owned()],
        }
    }
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    statuses: Vec<registration::RegistrationStatus>,
    failures: BTreeMap<&'static str, Status>,
}

/// A running plugin; its servers stop and its sockets go when it is dropped.
pub struct CsiPlugin {
    pub options: PluginOptions,
    /// The driver's Identity and Node socket.
    pub endpoint: PathBuf,
    /// The registration socket, when registered through `plugins_registry`.
    pub registration_socket: Option<PathBuf>,
    state: Arc<Mutex<State>>,
    servers: Vec<JoinHandle<()>>,
}

impl CsiPlugin {
    /// Serves the driver at `endpoint` (its parent is created).
    pub fn start(options: PluginOptions, endpoint: &Path) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let server = serve(endpoint, {
            let (state, options) = (Arc::clone(&state), options.clone());
            move |request| node_route(Arc::clone(&state), options.clone(), request)
        });
        Self {
            options,
            endpoint: endpoint.to_path_buf(),
            registration_socket: None,
            state,
            servers: vec![server],
        }
    }

    /// Also serves the registration API at `<registry>/<driver>-reg.sock`, as the
    /// node-driver-registrar sidecar does.
    pub fn register_in(&mut self, registry: &Path) -> PathBuf {
        let socket = registry.join(format!("{}-reg.sock", self.options.driver));
        let info = registration::PluginInfo {
            r#type: CSI_PLUGIN_TYPE.to_owned(),
            name: self.options.driver.clone(),
            endpoint: self.endpoint.display().to_string(),
            supported_versions: self.options.supported_versions.clone(),
        };
        let state = Arc::clone(&self.state);
        self.servers.push(serve(&socket, move |request| {
            registration_route(Arc::clone(&state), info.clone(), request)
        }));
        self.registration_socket = Some(socket.clone());
        socket
    }

    /// Removes the registration socket, as a registrar that stops does.
    pub fn unregister(&mut self) {
        if let Some(socket) = self.registration_socket.take() {
            let _ = std::fs::remove_file(socket);
        }
    }

    /// Every call answered so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().expect("state").calls.clone()
    }

    /// The methods called so far, in order, leaving out the capability and info queries.
    pub fn volume_calls(&self) -> Vec<&'static str> {
        self.calls()
            .into_iter()
            .map(|call| call.method)
            .filter(|method| !matches!(*method, "GetInfo" | "NodeGetInfo" | "NodeGetCapabilities"))
            .collect()
    }

    /// The registration statuses the node agent sent back.
    pub fn registration_statuses(&self) -> Vec<registration::RegistrationStatus> {
        self.state.lock().expect("state").statuses.clone()
    }

    /// Makes every later call of `method` fail with `status`.
    pub fn fail(&self, method: &'static str, status: Status) {
        self.state
            .lock()
            .expect("state")
            .failures
            .insert(method, status);
    }
}

impl Drop for CsiPlugin {
    fn drop(&mut self) {
        for server in &self.servers {
            server.abort();
        }
        let _ = std::fs::remove_file(&self.endpoint);
        self.unregister();
    }
}

type Response = http::Response<tonic::body::Body>;
type Request = http::Request<hyper::body::Incoming>;

/// Accepts HTTP/2 connections on a fresh socket at `path` and answers each request with `route`.
fn serve<F, Fut>(path: &Path, route: F) -> JoinHandle<()>
where
    F: Fn(Request) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response> + Send + 'static,
{
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("socket dir");
    }
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).expect("bind plugin socket");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let route = route.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let answer = route(request);
                    async move { Ok::<_, Infallible>(answer.await) }
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// Decodes the request as `Req`, answers with `handler`'s result.
async fn unary<Req, Resp>(
    request: Request,
    handler: impl FnOnce(Req) -> Result<Resp, Status> + Send + 'static,
) -> Response
where
    Req: prost::Message + Default + Send + 'static,
    Resp: prost::Message + Send + 'static,
{
    let mut handler = Some(handler);
    let service = tower::service_fn(move |request: tonic::Request<Req>| {
        let answer = handler.take().map_or_else(
            || Err(Status::internal("called twice")),
            |handler| handler(request.into_inner()),
        );
        std::future::ready(answer.map(tonic::Response::new))
    });
    tonic::server::Grpc::new(tonic_prost::ProstCodec::<Resp, Req>::new())
        .unary(service, request)
        .await
}

fn record(state: &Mutex<State>, call: Call) -> Result<(), Status> {
    let mut state = state.lock().expect("state");
    let failure = state.failures.get(call.method).cloned();
    state.calls.push(call);
    failure.map_or(Ok(()), Err)
}

async fn registration_route(
    state: Arc<Mutex<State>>,
    info: registration::PluginInfo,
    request: Request,
) -> Response {
    match request.uri().path() {
        registration::paths::GET_INFO => {
            unary(request, move |_: registration::InfoRequest| {
                record(
                    &state,
                    Call {
                        method: "GetInfo",
                        ..Call::default()
                    },
                )?;
                Ok(info)
            })
            .await
        }
        registration::paths::NOTIFY_REGISTRATION_STATUS => {
            unary(request, move |status: registration::RegistrationStatus| {
                state.lock().expect("state").statuses.push(status);
                Ok(registration::RegistrationStatusResponse {})
            })
            .await
        }
        other => Status::unimplemented(other.to_owned()).into_http(),
    }
}

async fn node_route(
    state: Arc<Mutex<State>>,
    options: PluginOptions,
    request: Request,
) -> Response {
    match request.uri().path() {
        paths::NODE_GET_INFO => {
            unary(request, move |_: proto::NodeGetInfoRequest| {
                record(
                    &state,
                    Call {
                        method: "NodeGetInfo",
                        ..Call::default()
                    },
                )?;
                Ok(proto::NodeGetInfoResponse {
                    node_id: options.node_id.clone(),
                    max_volumes_per_node: options.max_volumes_per_node,
                    accessible_topology: Some(proto::Topology {
                        segments: [("topology.example.com/zone".to_owned(), "z1".to_owned())]
                            .into(),
                    }),
                })
            })
            .await
        }
        paths::NODE_GET_CAPABILITIES => {
            unary(request, move |_: proto::NodeGetCapabilitiesRequest| {
                record(
                    &state,
                    Call {
                        method: "NodeGetCapabilities",
                        ..Call::default()
                    },
                )?;
                let stage = options.stage.then_some(proto::NodeServiceCapability {
                    rpc: Some(proto::NodeRpcCapability {
                        r#type: node_capability::STAGE_UNSTAGE_VOLUME,
                    }),
                });
                Ok(proto::NodeGetCapabilitiesResponse {
                    capabilities: stage.into_iter().collect(),
                })
            })
            .await
        }
        paths::NODE_STAGE_VOLUME => {
            unary(request, move |request: proto::NodeStageVolumeRequest| {
                record(
                    &state,
                    Call {
                        method: "NodeStageVolume",
                        volume_id: request.volume_id.clone(),
                        staging_path: request.staging_target_path.clone(),
                        fs_type: fs_type(request.volume_capability.as_ref()),
                        volume_context: request.volume_context.clone().into_iter().collect(),
                        ..Call::default()
                    },
                )?;
                // The CO makes the staging directory; the driver only fills it.
                let staging = Path::new(&request.staging_target_path);
                if !staging.is_dir() {
                    return Err(Status::failed_precondition(
                        "staging path is not a directory",
                    ));
                }
                write_marker(&staging.join("staged"), &request.volume_id)?;
                Ok(proto::NodeStageVolumeResponse {})
            })
            .await
        }
        paths::NODE_UNSTAGE_VOLUME => {
            unary(request, move |request: proto::NodeUnstageVolumeRequest| {
                record(
                    &state,
                    Call {
                        method: "NodeUnstageVolume",
                        volume_id: request.volume_id.clone(),
                        staging_path: request.staging_target_path.clone(),
                        ..Call::default()
                    },
                )?;
                remove(&Path::new(&request.staging_target_path).join("staged"))?;
                Ok(proto::NodeUnstageVolumeResponse {})
            })
            .await
        }
        paths::NODE_PUBLISH_VOLUME => {
            unary(request, move |request: proto::NodePublishVolumeRequest| {
                record(
                    &state,
                    Call {
                        method: "NodePublishVolume",
                        volume_id: request.volume_id.clone(),
                        staging_path: request.staging_target_path.clone(),
                        target_path: request.target_path.clone(),
                        read_only: request.readonly,
                        fs_type: fs_type(request.volume_capability.as_ref()),
                        volume_context: request.volume_context.clone().into_iter().collect(),
                    },
                )?;
                if options.stage
                    && !Path::new(&request.staging_target_path)
                        .join("staged")
                        .is_file()
                {
                    return Err(Status::failed_precondition("volume is not staged"));
                }
                let target = Path::new(&request.target_path);
                std::fs::create_dir_all(target)
                    .map_err(|error| Status::internal(error.to_string()))?;
                write_marker(&target.join("published"), &request.volume_id)?;
                Ok(proto::NodePublishVolumeResponse {})
            })
            .await
        }
        paths::NODE_UNPUBLISH_VOLUME => {
            unary(
                request,
                move |request: proto::NodeUnpublishVolumeRequest| {
                    record(
                        &state,
                        Call {
                            method: "NodeUnpublishVolume",
                            volume_id: request.volume_id.clone(),
                            target_path: request.target_path.clone(),
                            ..Call::default()
                        },
                    )?;
                    let target = Path::new(&request.target_path);
                    remove(&target.join("published"))?;
                    match std::fs::remove_dir(target) {
                        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                            Err(Status::internal(error.to_string()))
                        }
                        _ => Ok(proto::NodeUnpublishVolumeResponse {}),
                    }
                },
            )
            .await
        }
        other => Status::unimplemented(other.to_owned()).into_http(),
    }
}

fn fs_type(capability: Option<&proto::VolumeCapability>) -> String {
    capability
        .and_then(|capability| capability.mount.as_ref())
        .map(|mount| mount.fs_type.clone())
        .unwrap_or_default()
}

fn write_marker(path: &Path, volume_id: &str) -> Result<(), Status> {
    std::fs::write(path, volume_id).map_err(|error| Status::internal(error.to_string()))
}

fn remove(path: &Path) -> Result<(), Status> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(Status::internal(error.to_string()))
        }
        _ => Ok(()),
    }
}
