//! The object store: every stored object as JSON, one global monotonically increasing
//! resourceVersion, and the change history that feeds watches.
//!
//! All writes go through [`Store::create`], [`Store::update`] and [`Store::delete`], which apply
//! the kind's strategy, optimistic concurrency and preconditions under one lock, so concurrent
//! requests see the same serialisable order a single etcd would give them. It never does I/O.

mod config_data;
mod delete;
mod ephemeral;
mod go_fields;
mod history;
mod node_kinds;
mod pod_defaults;
mod pod_generation;
mod runtime_class_admission;
pub mod services;
mod storage_kinds;
pub mod strategy;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use serde_json::Value;
use tokio::sync::broadcast;

use crate::api::{ApiError, ApiResource, StoredKind};
pub use delete::{DeleteOptions, Deletion};
use history::History;
pub use history::{Change, EventType};

/// Where an object lives: namespace ("" for cluster-scoped kinds) and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// A watch's starting point: the changes to replay plus a receiver for everything after them.
pub struct Subscription {
    /// Replayed history (resume) or synthetic ADDED changes for the current state (fresh watch).
    pub initial: Vec<Arc<Change>>,
    pub receiver: broadcast::Receiver<Arc<Change>>,
    /// The store revision at subscription time.
    pub revision: u64,
}

/// The emulator's storage.
pub struct Store {
    inner: Mutex<Inner>,
    changes: broadcast::Sender<Arc<Change>>,
}

struct Inner {
    revision: u64,
    objects: HashMap<StoredKind, BTreeMap<ObjectKey, Arc<Value>>>,
    history: History,
}

impl Store {
    /// A store keeping `history` changes for watch resumption; a watcher that falls more than
    /// `broadcast` changes behind is disconnected (and resumes from history, or gets 410).
    pub fn new(history: usize, broadcast: usize) -> Self {
        let (changes, _) = broadcast::channel(broadcast.max(16));
        Store {
            inner: Mutex::new(Inner {
                revision: 0,
                objects: HashMap::new(),
                history: History::new(history),
            }),
            changes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-applied write: writes build the new
        // object first and commit it with infallible map operations.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current global resourceVersion.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// One object.
    pub fn get(&self, kind: StoredKind, key: &ObjectKey) -> Option<Arc<Value>> {
        self.lock().objects.get(&kind)?.get(key).cloned()
    }

    /// Objects of `kind` (in `namespace` if given) passing `filter`, in key order, with the
    /// revision the list is consistent at.
    pub fn list(
        &self,
        kind: StoredKind,
        namespace: Option<&str>,
        filter: impl Fn(&Value) -> bool,
    ) -> (Vec<Arc<Value>>, u64) {
        let inner = self.lock();
        let items = match inner.objects.get(&kind) {
            Some(objects) => match namespace {
                Some(ns) => objects
                    .range(ObjectKey::new(ns, "")..)
                    .take_while(|(k, _)| k.namespace == ns)
                    .filter(|(_, o)| filter(o))
                    .map(|(_, o)| o.clone())
                    .collect(),
                None => objects.values().filter(|o| filter(o)).cloned().collect(),
            },
            None => Vec::new(),
        };
        (items, inner.revision)
    }

    /// Number of objects of `kind`.
    pub fn count(&self, kind: StoredKind) -> usize {
        self.lock().objects.get(&kind).map_or(0, BTreeMap::len)
    }

    /// Creates `object` (whose `metadata.namespace` the caller has set for namespaced kinds).
    pub fn create(
        &self,
        resource: &ApiResource,
        mut object: Value,
        now: SystemTime,
    ) -> Result<Arc<Value>, ApiError> {
        let namespace = if resource.namespaced {
            meta_str(&object, "namespace").to_string()
        } else {
            String::new()
        };
        if !object.is_object() {
            return Err(ApiError::bad_request(
                "the object provided is not a JSON object",
            ));
        }
        if !meta_str(&object, "resourceVersion").is_empty() {
            return Err(ApiError::unclassified(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let mut inner = self.lock();
        if meta_str(&object, "name").is_empty() {
            let prefix = meta_str(&object, "generateName").to_string();
            if !prefix.is_empty() {
                set_meta(
                    &mut object,
                    "name",
                    Value::String(format!("{prefix}{}", random_suffix())),
                );
            }
        }
        let name = meta_str(&object, "name").to_string();
        // Admission runs before validation, NamespaceLifecycle first, then ServiceAccount,
        // Priority and RuntimeClass.
        if resource.namespaced {
            let ns_key = ObjectKey::new("", namespace.as_str());
            if inner
                .objects
                .get(&StoredKind::Namespace)
                .and_then(|m| m.get(&ns_key))
                .is_none()
            {
                return Err(ApiError::namespace_not_found(&namespace));
            }
        }
        if resource.stored == StoredKind::Pod {
            if let Some(pod) = object.as_object_mut() {
                pod_defaults::alias_service_account(pod);
            }
            let accounts = inner.objects.get(&StoredKind::ServiceAccount);
            let account = |account: &str| {
                accounts?
                    .get(&ObjectKey::new(namespace.as_str(), account))
                    .cloned()
            };
            crate::service_accounts::admission::admit(
                &mut object,
                &namespace,
                account,
                random_suffix,
            )
            .map_err(|cause| ApiError::forbidden(resource, &name, &cause))?;
            if let Some(cause) = pod_defaults::priority_refusal(&object) {
                return Err(ApiError::forbidden(resource, &name, &cause));
            }
            let classes = inner.objects.get(&StoredKind::RuntimeClass);
            let class = |class: &str| {
                classes?
                    .get(&ObjectKey::new("", class))
                    .map(|object| object.as_ref().clone())
            };
            runtime_class_admission::admit(&mut object, class)
                .map_err(|cause| ApiError::forbidden(resource, &name, &cause))?;
        }
        let errors = strategy::validate_create(resource, &object);
        if !errors.is_empty() {
            return Err(ApiError::invalid(resource, &name, &errors));
        }
        let key = ObjectKey::new(namespace, name.as_str());
        if inner
            .objects
            .get(&resource.stored)
            .is_some_and(|m| m.contains_key(&key))
        {
            return Err(ApiError::already_exists(resource, &name));
        }
        if resource.stored == StoredKind::Service {
            let used: std::collections::BTreeSet<String> =
                (inner.objects.get(&StoredKind::Service))
                    .into_iter()
                    .flat_map(|services| services.values())
                    .filter_map(|service| {
                        service
                            .pointer("/spec/clusterIP")?
                            .as_str()
                            .map(str::to_owned)
                    })
                    .collect();
            services::allocate(&mut object, &used)
                .map_err(|error| ApiError::invalid(resource, &name, &[error]))?;
        }
        strategy::prepare_for_create(resource, &mut object, &new_uid(), now);
        Ok(self.commit(
            &mut inner,
            resource.stored,
            key,
            EventType::Added,
            object,
            None,
        ))
    }

    /// Replaces an object with what `mutate` makes of the current one (PUT, PATCH, controller
    /// writes). A `metadata.resourceVersion` in the result must equal the current one (409
    /// otherwise) and may be left out only for kinds that allow unconditional updates (422
    /// otherwise); the kind's update strategy and immutability rules are applied; a write that
    /// changes nothing keeps the current resourceVersion and sends no watch event.
    pub fn update(
        &self,
        resource: &ApiResource,
        key: &ObjectKey,
        subresource: Option<&str>,
        mutate: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Arc<Value>, ApiError> {
        let mut inner = self.lock();
        let current = inner
            .objects
            .get(&resource.stored)
            .and_then(|m| m.get(key))
            .cloned()
            .ok_or_else(|| ApiError::not_found(resource, &key.name))?;
        let mut updated = mutate(&current)?;
        if !updated.is_object() {
            return Err(ApiError::bad_request(
                "the object provided is not a JSON object",
            ));
        }
        let current_rv = meta_str(&current, "resourceVersion");
        let wanted_rv = meta_str(&updated, "resourceVersion");
        if wanted_rv.is_empty() && !strategy::allows_unconditional_update(resource.stored) {
            return Err(ApiError::resource_version_required(resource, &key.name));
        }
        if !wanted_rv.is_empty() && wanted_rv != current_rv {
            return Err(ApiError::stale(resource, &key.name));
        }
        strategy::prepare_for_update(resource, subresource, &current, &mut updated);
        let errors = strategy::validate_update(resource, &current, &updated);
        if !errors.is_empty() {
            return Err(ApiError::invalid(resource, &key.name, &errors));
        }
        set_meta(
            &mut updated,
            "resourceVersion",
            Value::String(current_rv.to_string()),
        );
        if updated == *current {
            return Ok(current);
        }
        if finalized(&updated) {
            return Ok(self.commit(
                &mut inner,
                resource.stored,
                key.clone(),
                EventType::Deleted,
                updated,
                Some(current),
            ));
        }
        Ok(self.commit(
            &mut inner,
            resource.stored,
            key.clone(),
            EventType::Modified,
            updated,
            Some(current),
        ))
    }

    /// Starts a watch of `kind`: from `since` (replaying retained history, 410 if too old) or,
    /// with `None`, from the current state as synthetic ADDED changes.
    pub fn subscribe(
        &self,
        kind: StoredKind,
        since: Option<u64>,
    ) -> Result<Subscription, ApiError> {
        let inner = self.lock();
        let initial = match since {
            Some(rv) => inner.history.since(kind, rv)?,
            None => inner
                .objects
                .get(&kind)
                .map(|objects| {
                    objects
                        .values()
                        .map(|o| {
                            Arc::new(Change {
                                kind,
                                event_type: EventType::Added,
                                object: o.clone(),
                                previous: None,
                                revision: meta_str(o, "resourceVersion").parse().unwrap_or(0),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default(),
        };
        Ok(Subscription {
            initial,
            receiver: self.changes.subscribe(),
            revision: inner.revision,
        })
    }

    /// Every change from now on, of every kind (a controller's view; lagging behind is the
    /// receiver's error to handle).
    pub fn subscribe_changes(&self) -> broadcast::Receiver<Arc<Change>> {
        self.changes.subscribe()
    }

    /// Records a change: bumps the revision, stamps it on the object, updates the map, appends
    /// to history and notifies watchers, all under the caller's lock.
    fn commit(
        &self,
        inner: &mut Inner,
        kind: StoredKind,
        key: ObjectKey,
        event_type: EventType,
        mut object: Value,
        previous: Option<Arc<Value>>,
    ) -> Arc<Value> {
        inner.revision += 1;
        let revision = inner.revision;
        set_meta(
            &mut object,
            "resourceVersion",
            Value::String(revision.to_string()),
        );
        let object = Arc::new(object);
        let objects = inner.objects.entry(kind).or_default();
        if event_type == EventType::Deleted {
            objects.remove(&key);
        } else {
            objects.insert(key, object.clone());
        }
        let change = Arc::new(Change {
            kind,
            event_type,
            object: object.clone(),
            previous,
            revision,
        });
        inner.history.push(change.clone());
        // No receivers is not an error: nobody is watching.
        let _ = self.changes.send(change);
        object
    }
}

/// Whether an object being deleted has no finalizers left and no grace period to wait out.
fn finalized(object: &Value) -> bool {
    let meta = object.get("metadata");
    let deleting = meta
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|t| !t.is_null());
    let finalizers = meta
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    let grace = meta
        .and_then(|m| m.get("deletionGracePeriodSeconds"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    deleting && !finalizers && grace == 0
}

/// The etcd key kube-apiserver stores an object under (default `/registry` prefix), as its
/// storage errors quote it. Nodes keep their historical name, `minions`.
pub fn storage_key(kind: StoredKind, key: &ObjectKey) -> String {
    let prefix = match kind {
        StoredKind::Namespace => "namespaces",
        StoredKind::Node => "minions",
        StoredKind::Pod => "pods",
        StoredKind::Lease => "leases",
        StoredKind::Event => "events",
        StoredKind::PersistentVolume => "persistentvolumes",
        StoredKind::PersistentVolumeClaim => "persistentvolumeclaims",
        StoredKind::CsiDriver => "csidrivers",
        StoredKind::RuntimeClass => "runtimeclasses",
        StoredKind::CsiNode => "csinodes",
        StoredKind::VolumeAttachment => "volumeattachments",
        StoredKind::ConfigMap => "configmaps",
        StoredKind::Secret => "secrets",
        StoredKind::ServiceAccount => "serviceaccounts",
        StoredKind::Service => "services/specs",
        StoredKind::CertificateSigningRequest => "certificatesigningrequests",
    };
    if key.namespace.is_empty() {
        format!("/registry/{prefix}/{}", key.name)
    } else {
        format!("/registry/{prefix}/{}/{}", key.namespace, key.name)
    }
}

/// `metadata.<field>` as a string, "" when absent.
pub fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Sets `metadata.<field>`, creating `metadata` when needed.
pub fn set_meta(object: &mut Value, field: &str, value: Value) {
    if let Some(map) = object.as_object_mut() {
        strategy::object_entry(map, "metadata").insert(field.into(), value);
    }
}

/// A random RFC 4122 version-4 UUID.
fn new_uid() -> String {
    let bits = rand::random::<u128>() & !(0xf << 76) & !(0x3 << 62) | (0x4 << 76) | (0x2 << 62);
    let hex = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The five-character suffix `generateName` gets (apiserver's `SimpleNameGenerator` alphabet).
pub(crate) fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
