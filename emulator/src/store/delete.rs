//! Deletion: preconditions, graceful pod deletion and finalizers, following kube-apiserver's
//! `rest.BeforeDelete` and the generic registry's `Delete`.
//!
//! A pod bound to a node is deleted gracefully: the first DELETE only sets `deletionTimestamp`
//! and `deletionGracePeriodSeconds`; the object goes away on a DELETE with grace 0 (the kubelet's
//! final delete). Objects with finalizers stay until an update removes the last one.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::{EventType, ObjectKey, Store, meta_str, set_meta};
use crate::api::{ApiError, ApiResource, StoredKind};
use crate::time::format_time;

/// The parts of `metav1.DeleteOptions` the emulator honours.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    #[serde(default)]
    pub grace_period_seconds: Option<i64>,
    #[serde(default)]
    pub preconditions: Option<Preconditions>,
}

/// `metav1.Preconditions`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    #[serde(default)]
    pub uid: Option<String>,
    #[serde(default)]
    pub resource_version: Option<String>,
}

/// What a DELETE did.
#[derive(Debug, Clone)]
pub enum Deletion {
    /// The object is gone; this is its last state.
    Removed(Arc<Value>),
    /// Deletion is pending (grace period or finalizers); this is the object now.
    Pending(Arc<Value>),
}

impl Store {
    /// Deletes an object per `options`.
    pub fn delete(
        &self,
        resource: &ApiResource,
        key: &ObjectKey,
        options: &DeleteOptions,
        now: SystemTime,
    ) -> Result<Deletion, ApiError> {
        let mut inner = self.lock();
        let current = inner
            .objects
            .get(&resource.stored)
            .and_then(|m| m.get(key))
            .cloned()
            .ok_or_else(|| ApiError::not_found(resource, &key.name))?;
        check_preconditions(resource, &key.name, &current, options)?;

        let mut object = (*current).clone();
        let already_deleting = current
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        let existing_grace = current
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64);
        let mut changed = false;
        if already_deleting {
            // Only a shorter grace period may be given once deletion started.
            if let (Some(existing), Some(requested)) = (
                existing_grace.filter(|g| *g > 0),
                options.grace_period_seconds,
            ) {
                if requested < existing {
                    // The new deadline counts from when deletion started: old deadline - old
                    // grace + new grace, as rest.BeforeDelete computes it.
                    let started = current
                        .pointer("/metadata/deletionTimestamp")
                        .and_then(Value::as_str)
                        .and_then(crate::time::parse_time)
                        .and_then(|t| {
                            t.checked_sub(Duration::from_secs(u64::try_from(existing).unwrap_or(0)))
                        })
                        .unwrap_or(now);
                    set_deletion(&mut object, started, requested);
                    changed = true;
                } else {
                    return Ok(Deletion::Pending(current));
                }
            } else if existing_grace.is_some_and(|g| g > 0) {
                return Ok(Deletion::Pending(current));
            }
        } else if let Some(period) = graceful_period(resource, &current, options) {
            set_deletion(&mut object, now, period);
            let generation = current
                .pointer("/metadata/generation")
                .and_then(Value::as_i64);
            if let Some(generation) = generation.filter(|g| *g > 0) {
                set_meta(&mut object, "generation", (generation + 1).into());
            }
            changed = true;
        }

        let grace = object
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let has_finalizers = object
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if grace > 0 || has_finalizers {
            if has_finalizers && !already_deleting && !changed {
                set_deletion(&mut object, now, 0);
                changed = true;
            }
            if !changed {
                return Ok(Deletion::Pending(current));
            }
            let pending = self.commit(
                &mut inner,
                resource.stored,
                key.clone(),
                EventType::Modified,
                object,
                Some(current),
            );
            return Ok(Deletion::Pending(pending));
        }

        if resource.stored == StoredKind::Namespace {
            // The namespace controller would empty the namespace; the emulator does it at once.
            let contained: Vec<(StoredKind, ObjectKey, Value)> = inner
                .objects
                .iter()
                .flat_map(|(kind, objects)| {
                    objects
                        .iter()
                        .filter(|(k, _)| k.namespace == key.name)
                        .map(|(k, o)| (*kind, k.clone(), (**o).clone()))
                })
                .collect();
            for (kind, k, o) in contained {
                let previous = inner.objects.get(&kind).and_then(|m| m.get(&k)).cloned();
                self.commit(&mut inner, kind, k, EventType::Deleted, o, previous);
            }
        }
        let removed = self.commit(
            &mut inner,
            resource.stored,
            key.clone(),
            EventType::Deleted,
            object,
            Some(current),
        );
        Ok(Deletion::Removed(removed))
    }
}

/// The delete preconditions; the Conflict names the Kind, as `rest.BeforeDelete` does.
fn check_preconditions(
    resource: &ApiResource,
    name: &str,
    current: &Value,
    options: &DeleteOptions,
) -> Result<(), ApiError> {
    let Some(pre) = &options.preconditions else {
        return Ok(());
    };
    if let Some(uid) = &pre.uid {
        let actual = meta_str(current, "uid");
        if uid != actual {
            let cause = format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({actual}). The object might have been deleted and then recreated"
            );
            return Err(ApiError::conflict_named(
                resource.group,
                resource.kind,
                name,
                &cause,
            ));
        }
    }
    if let Some(rv) = &pre.resource_version {
        let actual = meta_str(current, "resourceVersion");
        if rv != actual {
            let cause = format!(
                "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({actual}). The object might have been modified"
            );
            return Err(ApiError::conflict_named(
                resource.group,
                resource.kind,
                name,
                &cause,
            ));
        }
    }
    Ok(())
}

/// The grace period for kinds with a graceful delete strategy (pods), `None` for the others.
/// An unscheduled or terminated pod is deleted at once (`podStrategy.CheckGracefulDelete`).
fn graceful_period(resource: &ApiResource, pod: &Value, options: &DeleteOptions) -> Option<i64> {
    if resource.stored != StoredKind::Pod {
        return None;
    }
    let default = pod
        .pointer("/spec/terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let mut period = options.grace_period_seconds.unwrap_or(default).max(0);
    let unscheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty();
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    if unscheduled || matches!(phase, "Failed" | "Succeeded") {
        period = 0;
    }
    Some(period)
}

fn set_deletion(object: &mut Value, now: SystemTime, period: i64) {
    let when = now + Duration::from_secs(u64::try_from(period).unwrap_or(0));
    set_meta(object, "deletionTimestamp", format_time(when).into());
    set_meta(object, "deletionGracePeriodSeconds", period.into());
}
