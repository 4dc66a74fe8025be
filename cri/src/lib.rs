//! The CRI engine: runs the pods bound to this node on the container runtime, as the kubelet's
//! pod workers, PLEG, garbage collection and termination do, and the CRI client it uses.
//!
//! - [`provider`]: `CriPods`, the pod lifecycle provider PodLifecycleActor drives, and its engine
//!   (pod workers, PLEG, sandbox turns, GC, termination, hooks). It reaches the runtime only
//!   through the actors crate's `ContainerRuntime` port, so its tests run on a fake.
//! - [`client`]: `CriClient`, that port (with `RuntimeService` and `RuntimeStats`) over the
//!   runtime's unix socket with tonic and hand-written prost messages; stats, streaming, events.
//! - [`grpc`]: unary gRPC over a unix socket, for the CRI client and the daemon's CSI client.

pub mod client;
pub mod grpc;
pub mod provider;
