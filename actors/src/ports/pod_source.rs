//! The node's pods as the actors that follow them subscribe (the pod lifecycle actor and the
//! volume manager): one source per node, fed by the API watch and, beside it, any other source
//! of pods (static manifests), so each actor instance that starts hears every pod there is now,
//! then `Listed` once every source has listed, then each change, without a watch of its own.

use futures::stream::BoxStream;

use super::PodWatchEvent;

pub trait PodSource: Send + Sync + 'static {
    /// The node's pods from now on, as a fresh watch would report them.
    fn subscribe(&self) -> BoxStream<'static, PodWatchEvent>;
}
