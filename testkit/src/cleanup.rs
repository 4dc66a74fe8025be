//! Nothing a test creates outlives it, also on someone's real cluster. The shared helpers label
//! what they create with this run's id (`nodepulse.test/run`, a sweep handle) and remember it
//! for the test thread; the [`Cleanup`] guard in every `TestCluster` deletes it all when the
//! test ends, passing or failing, and then checks that nothing of it is left.

use std::{
    cell::RefCell,
    path::{Path, PathBuf},
    sync::OnceLock,
    time::{Duration, SystemTime},
};

use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Event, Node, Pod},
};
use kube::{
    Api,
    api::{DeleteParams, ListParams},
    config::{KubeConfigOptions, Kubeconfig},
};

/// The label every object a test creates carries: `kubectl delete nodes,pods -A -l
/// nodepulse.test/run` sweeps whatever a killed run could not delete.
pub const RUN_LABEL: &str = "nodepulse.test/run";

/// This run's label value: `<pid>-<start time, unix seconds>`.
pub fn run_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let started = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        format!("{}-{started}", std::process::id())
    })
}

/// An object a test is responsible for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owned {
    /// A Node and its Lease in `kube-node-lease` (an agent creates both).
    Node(String),
    Pod {
        namespace: String,
        name: String,
    },
    /// Any other object, by its API path (`/api/v1/persistentvolumes/pv-1`).
    Object {
        path: String,
    },
}

thread_local! {
    // Per test thread: tests run in parallel, and each must delete only its own objects. The
    // helpers run on the test's thread (its runtime's `block_on`), and so does the guard's drop.
    static OWNED: RefCell<Vec<Owned>> = const { RefCell::new(Vec::new()) };
}

/// Remembers `object` for the running test's clean-up.
pub fn own(object: Owned) {
    OWNED.with(|owned| {
        let mut owned = owned.borrow_mut();
        if !owned.contains(&object) {
            owned.push(object);
        }
    });
}

/// Remembers Node `name` (and its Lease).
pub fn own_node(name: &str) {
    own(Owned::Node(name.to_owned()));
}

fn take_owned() -> Vec<Owned> {
    OWNED.with(|owned| std::mem::take(&mut *owned.borrow_mut()))
}

/// Deletes what the test owns when dropped (test end, panic or timeout assertion), then fails
/// the test if anything is left. Lives in `TestCluster`, before the emulator it talks to.
pub struct Cleanup {
    kubeconfig: PathBuf,
}

impl Cleanup {
    pub fn new(kubeconfig: &Path) -> Self {
        Self {
            kubeconfig: kubeconfig.to_owned(),
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let owned = take_owned();
        if owned.is_empty() {
            return;
        }
        // The test's runtime may be the one being unwound, and the test's client needs it: a
        // thread with its own runtime and client does the deleting. Blocking here also keeps
        // the test's actors (on this thread) from re-creating what is being deleted.
        let kubeconfig = self.kubeconfig.clone();
        let left = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a clean-up runtime");
            runtime.block_on(async {
                let client = client(&kubeconfig).await;
                delete_all(&client, &owned).await;
                leftovers(&client, &owned).await
            })
        })
        .join()
        .unwrap_or_else(|_| vec!["the clean-up thread panicked".to_owned()]);
        if left.is_empty() {
            return;
        }
        if std::thread::panicking() {
            eprintln!("left in the cluster after a failed test: {left:?}");
        } else {
            panic!("the test left objects in the cluster: {left:?}");
        }
    }
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let file = Kubeconfig::read_from(kubeconfig).expect("a readable kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .expect("a usable kubeconfig");
    kube::Client::try_from(config).expect("a client")
}

/// Deletes every owned object; pods with grace 0 (a forced delete: their node may have no agent
/// left to confirm). Absent objects are fine.
pub async fn delete_all(client: &kube::Client, owned: &[Owned]) {
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    for object in owned {
        let result = match object {
            Owned::Node(name) => {
                let leases = Api::<Lease>::namespaced(client.clone(), "kube-node-lease");
                let lease = leases.delete(name, &DeleteParams::default()).await.err();
                let node = Api::<Node>::all(client.clone())
                    .delete(name, &DeleteParams::default())
                    .await
                    .err();
                node.or(lease)
            }
            Owned::Pod { namespace, name } => Api::<Pod>::namespaced(client.clone(), namespace)
                .delete(name, &force)
                .await
                .err(),
            Owned::Object { path } => raw(client, "DELETE", path).await.err(),
        };
        match result {
            None => {}
            Some(kube::Error::Api(status)) if status.code == 404 => {}
            Some(error) => eprintln!("clean-up of {object:?} failed: {error}"),
        }
        delete_events_about(client, object).await;
    }
}

/// The events the agent recorded about `object` (they would expire after an hour; a test run
/// should not leave a shared cluster's event list full of them until then).
async fn delete_events_about(client: &kube::Client, object: &Owned) {
    let (namespace, name) = match object {
        Owned::Node(name) => (None, name),
        Owned::Pod { namespace, name } => (Some(namespace.as_str()), name),
        Owned::Object { .. } => return,
    };
    let events: Api<Event> = match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let about = ListParams::default().fields(&format!("involvedObject.name={name}"));
    for event in events
        .list(&about)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let (Some(namespace), Some(event_name)) = (event.metadata.namespace, event.metadata.name)
        else {
            continue;
        };
        let _ = Api::<Event>::namespaced(client.clone(), &namespace)
            .delete(&event_name, &DeleteParams::default())
            .await;
    }
}

/// What of `owned` is still there, by name, plus any Node or pod carrying this run's label
/// under an owned name (the label is what a sweep finds). Retries briefly, since a pod deleted
/// with grace 0 can take a moment to go.
pub async fn leftovers(client: &kube::Client, owned: &[Owned]) -> Vec<String> {
    let labelled = ListParams::default().labels(&format!("{RUN_LABEL}={}", run_id()));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut left = Vec::new();
        let nodes = Api::<Node>::all(client.clone());
        let leases = Api::<Lease>::namespaced(client.clone(), "kube-node-lease");
        let labelled_nodes = names(nodes.list(&labelled).await.map(|l| l.items));
        let labelled_pods = names(
            Api::<Pod>::all(client.clone())
                .list(&labelled)
                .await
                .map(|l| l.items),
        );
        for object in owned {
            match object {
                Owned::Node(name) => {
                    let key = (String::new(), name.clone());
                    if labelled_nodes.contains(&key)
                        || matches!(nodes.get_opt(name).await, Ok(Some(_)))
                    {
                        left.push(format!("node {name}"));
                    }
                    if matches!(leases.get_opt(name).await, Ok(Some(_))) {
                        left.push(format!("lease kube-node-lease/{name}"));
                    }
                }
                Owned::Pod { namespace, name } => {
                    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
                    if labelled_pods.contains(&(namespace.clone(), name.clone()))
                        || matches!(pods.get_opt(name).await, Ok(Some(_)))
                    {
                        left.push(format!("pod {namespace}/{name}"));
                    }
                }
                Owned::Object { path } => {
                    if raw(client, "GET", path).await.is_ok() {
                        left.push(path.clone());
                    }
                }
            }
        }
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A request without a body to `path`; an error answer (404 included) is an `Err`.
async fn raw(client: &kube::Client, method: &str, path: &str) -> Result<(), kube::Error> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .body(Vec::new())
        .expect("a valid request");
    client.request_text(request).await.map(|_| ())
}

/// (namespace, name) of listed objects; none when the list failed (the by-name checks remain).
fn names<K: kube::Resource>(items: Result<Vec<K>, kube::Error>) -> Vec<(String, String)> {
    items
        .unwrap_or_default()
        .iter()
        .map(|o| {
            let meta = o.meta();
            (
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
            )
        })
        .collect()
}
