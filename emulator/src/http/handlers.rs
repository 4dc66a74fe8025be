//! The CRUD verbs on one resource: get, list, create, update (PUT), patch, delete and
//! deletecollection, with kube-apiserver's request validation and response shapes.
//!
//! Handlers translate between the HTTP request and [`Store`] calls; the write rules themselves
//! live in the store. Objects pass through `events_view` so both Event APIs see one store.

use std::time::SystemTime;

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use serde_json::{Map, Value, json};

use super::auth::{Identity, authorize};
use super::events_view::{accept, present};
use super::query::{Query, decode_continue, encode_continue};
use super::table::table;
use super::{AppState, json_response};
use crate::api::status::delete_success;
use crate::api::{ApiError, ApiResource, StoredKind, Target, Verb, typed};
use crate::patch::{self, PatchType, Schema};
use crate::store::{DeleteOptions, Deletion, ObjectKey, meta_str, set_meta, storage_key, strategy};

/// One API request, parsed.
pub struct Request<'a> {
    pub state: &'a AppState,
    pub target: Target,
    pub verb: Verb,
    pub query: Query,
    pub body: &'a [u8],
    pub content_type: &'a str,
    pub identity: Identity,
    /// The client asked for a `Table` (kubectl's human-readable output).
    pub table: bool,
}

impl Request<'_> {
    fn resource(&self) -> &'static ApiResource {
        self.target.resource
    }

    fn key(&self) -> ObjectKey {
        ObjectKey::new(
            self.target.namespace_or_empty(),
            self.target.name.clone().unwrap_or_default(),
        )
    }

    fn authorize(&self, existing: Option<&Value>, new: Option<&Value>) -> Result<(), ApiError> {
        authorize(
            &self.state.auth,
            &self.identity,
            self.verb,
            &self.target,
            existing,
            new,
        )
    }
}

pub fn get(req: &Request<'_>) -> Result<HttpResponse, ApiError> {
    let object = req
        .state
        .store
        .get(req.resource().stored, &req.key())
        .ok_or_else(|| ApiError::not_found(req.resource(), &req.key().name))?;
    if req.table {
        let rv = meta_str(&object, "resourceVersion");
        let body = table(req.resource(), &[&object], rv, SystemTime::now());
        return Ok(json_response(StatusCode::OK, &body));
    }
    Ok(json_response(
        StatusCode::OK,
        &present(req.resource(), &object),
    ))
}

pub fn list(req: &Request<'_>) -> Result<HttpResponse, ApiError> {
    let resource = req.resource();
    let selector = req.query.selector(resource)?;
    let limit = req
        .query
        .number("limit")?
        .filter(|l| *l > 0)
        .map(|l| usize::try_from(l).unwrap_or(usize::MAX));
    let start = req.query.get("continue").map(decode_continue).transpose()?;
    let (objects, revision) =
        req.state
            .store
            .list(resource.stored, req.target.namespace.as_deref(), |o| {
                let after_start = start.as_ref().is_none_or(|(_, ns, name)| {
                    (meta_str(o, "namespace"), meta_str(o, "name")) > (ns.as_str(), name.as_str())
                });
                after_start && selector.matches(o)
            });
    let revision = start.as_ref().map_or(revision, |(rv, _, _)| *rv);
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), revision.to_string().into());
    let page = match limit {
        Some(limit) if objects.len() > limit => {
            let last = &objects[limit - 1];
            metadata.insert(
                "continue".into(),
                encode_continue(
                    revision,
                    meta_str(last, "namespace"),
                    meta_str(last, "name"),
                )
                .into(),
            );
            metadata.insert("remainingItemCount".into(), (objects.len() - limit).into());
            &objects[..limit]
        }
        _ => &objects[..],
    };
    if req.table {
        let objects: Vec<&Value> = page.iter().map(|o| o.as_ref()).collect();
        let mut body = table(resource, &objects, &revision.to_string(), SystemTime::now());
        body["metadata"] = Value::Object(metadata);
        return Ok(json_response(StatusCode::OK, &body));
    }
    let items: Vec<Value> = page.iter().map(|o| list_item(resource, o)).collect();
    let list = json!({"kind": format!("{}List", resource.kind), "apiVersion": resource.api_version(), "metadata": metadata, "items": items});
    Ok(json_response(StatusCode::OK, &list))
}

/// Items of a list carry no `kind`/`apiVersion`, as kube-apiserver encodes them.
fn list_item(resource: &ApiResource, object: &Value) -> Value {
    let mut item = present(resource, object);
    if let Some(map) = item.as_object_mut() {
        map.remove("kind");
        map.remove("apiVersion");
    }
    item
}

pub fn create(req: &Request<'_>, now: SystemTime) -> Result<HttpResponse, ApiError> {
    let resource = req.resource();
    if req.target.subresource.as_deref() == Some("token") {
        let answer = crate::service_accounts::create_token(
            &req.state.store,
            req.target.namespace_or_empty(),
            req.target.name.as_deref().unwrap_or_default(),
            req.body,
            now,
        )?;
        return Ok(json_response(StatusCode::CREATED, &answer));
    }
    let mut object = decode_body(req, resource)?;
    align_namespace(req, &mut object)?;
    req.authorize(None, Some(&object))?;
    if resource.stored == StoredKind::CertificateSigningRequest {
        crate::certificates::requests::prepare_create(req.identity.user(), &mut object);
    }
    let created = req.state.store.create(resource, object, now)?;
    if resource.stored == crate::api::StoredKind::Namespace {
        // kube-controller-manager's service-account controller and root-CA publisher follow
        // at once.
        let namespace = meta_str(&created, "name");
        crate::service_accounts::ensure_default(&req.state.store, namespace, now);
        crate::root_ca::publish(&req.state.store, namespace, now);
    }
    tracing::debug!(
        resource = resource.plural,
        name = meta_str(&created, "name"),
        "created"
    );
    Ok(json_response(
        StatusCode::CREATED,
        &present(resource, &created),
    ))
}

pub fn update(req: &Request<'_>, now: SystemTime) -> Result<HttpResponse, ApiError> {
    let resource = req.resource();
    let mut object = decode_body(req, resource)?;
    let url_name = req.target.name.clone().unwrap_or_default();
    let body_name = meta_str(&object, "name").to_string();
    if body_name != url_name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({url_name})"
        )));
    }
    align_namespace(req, &mut object)?;
    let uid = meta_str(&object, "uid").to_string();
    let key = req.key();
    let result = req.state.store.update(
        resource,
        &key,
        req.target.subresource.as_deref(),
        |current| {
            req.authorize(Some(current), Some(&object))?;
            // A UID in the body is a storage precondition, checked before the resourceVersion.
            let current_uid = meta_str(current, "uid");
            if !uid.is_empty() && uid != current_uid {
                let stored_at = storage_key(resource.stored, &key);
                return Err(ApiError::uid_precondition_failed(
                    resource,
                    &url_name,
                    &stored_at,
                    &uid,
                    current_uid,
                ));
            }
            Ok(object.clone())
        },
    );
    match result {
        Ok(updated) => Ok(json_response(StatusCode::OK, &present(resource, &updated))),
        // A PUT creates a missing Lease or Event (`AllowCreateOnUpdate`); storage clears the
        // resourceVersion a body may carry, as etcd3's create-on-update does.
        Err(e) if e.code == 404 && strategy::allows_create_on_update(resource.stored) => {
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
            }
            let created = req.state.store.create(resource, object, now)?;
            Ok(json_response(
                StatusCode::CREATED,
                &present(resource, &created),
            ))
        }
        Err(e) => Err(e),
    }
}

pub fn patch(req: &Request<'_>) -> Result<HttpResponse, ApiError> {
    let resource = req.resource();
    let patch_type = PatchType::from_content_type(req.content_type)?;
    let schema = Schema::root(resource.stored);
    let updated = req.state.store.update(
        resource,
        &req.key(),
        req.target.subresource.as_deref(),
        |current| {
            req.authorize(Some(current), None)?;
            let patched = patch::apply(patch_type, &present(resource, current), req.body, schema)?;
            typed::check_patched(resource, req.body, &patched)?;
            Ok(accept(resource, patched))
        },
    )?;
    Ok(json_response(StatusCode::OK, &present(resource, &updated)))
}

pub fn delete(req: &Request<'_>, now: SystemTime) -> Result<HttpResponse, ApiError> {
    let resource = req.resource();
    let key = req.key();
    let options = delete_options(req)?;
    let existing = req
        .state
        .store
        .get(resource.stored, &key)
        .ok_or_else(|| ApiError::not_found(resource, &key.name))?;
    req.authorize(Some(&existing), None)?;
    let body = match req.state.store.delete(resource, &key, &options, now)? {
        // Pods return the deleted object (`ReturnDeletedObject`); other kinds a success Status.
        Deletion::Removed(object) if resource.stored == StoredKind::Pod => {
            present(resource, &object)
        }
        Deletion::Removed(object) => delete_success(resource, &key.name, meta_str(&object, "uid")),
        Deletion::Pending(object) => present(resource, &object),
    };
    Ok(json_response(StatusCode::OK, &body))
}

pub fn delete_collection(req: &Request<'_>, now: SystemTime) -> Result<HttpResponse, ApiError> {
    let resource = req.resource();
    let selector = req.query.selector(resource)?;
    let options = delete_options(req)?;
    let (objects, _) =
        req.state
            .store
            .list(resource.stored, req.target.namespace.as_deref(), |o| {
                selector.matches(o)
            });
    let mut deleted = Vec::new();
    for object in objects {
        req.authorize(Some(&object), None)?;
        let key = ObjectKey::new(meta_str(&object, "namespace"), meta_str(&object, "name"));
        match req.state.store.delete(resource, &key, &options, now) {
            Ok(Deletion::Removed(o) | Deletion::Pending(o)) => {
                deleted.push(list_item(resource, &o))
            }
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({"kind": format!("{}List", resource.kind), "apiVersion": resource.api_version(),
        "metadata": {"resourceVersion": req.state.store.revision().to_string()}, "items": deleted});
    Ok(json_response(StatusCode::OK, &list))
}

/// `DeleteOptions` from the body, with `gracePeriodSeconds` from the query taking precedence.
fn delete_options(req: &Request<'_>) -> Result<DeleteOptions, ApiError> {
    let mut options = if req.body.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::default()
    } else {
        serde_json::from_slice(req.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    if let Some(grace) = req.query.number("gracePeriodSeconds")? {
        options.grace_period_seconds = Some(grace);
    }
    Ok(options)
}

/// Parses a create/update body and checks it is the kind the URL names.
fn decode_body(req: &Request<'_>, resource: &ApiResource) -> Result<Value, ApiError> {
    let object: Value = serde_json::from_slice(req.body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: the body is not a JSON object",
        ));
    }
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or(resource.kind);
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if kind != resource.kind {
        return Err(ApiError::bad_request(format!(
            "{kind} in version {api_version:?} cannot be handled as a {}: no kind {kind:?} is registered for version {:?}",
            resource.kind,
            resource.api_version()
        )));
    }
    if !api_version.is_empty() && api_version != resource.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            resource.api_version()
        )));
    }
    typed::check_body(resource, &object)?;
    Ok(accept(resource, object))
}

/// Fills the request namespace into the body, rejecting a conflicting one.
fn align_namespace(req: &Request<'_>, object: &mut Value) -> Result<(), ApiError> {
    if !req.resource().namespaced {
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("namespace");
        }
        return Ok(());
    }
    let namespace = req.target.namespace_or_empty().to_string();
    let body_namespace = meta_str(object, "namespace");
    if !body_namespace.is_empty() && body_namespace != namespace {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    set_meta(object, "namespace", namespace.into());
    Ok(())
}
