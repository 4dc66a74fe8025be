//! The fault-injection admin API, beside the Kubernetes API on the same port:
//!
//! - `GET /emulator/v1/faults`: `{"rules": [FaultStatus...], "counters": FaultCounters}`
//! - `POST /emulator/v1/faults` with a [`FaultRule`] body: 201 `{"id": N}`
//! - `DELETE /emulator/v1/faults`: removes every rule
//! - `DELETE /emulator/v1/faults/{id}`: removes one rule (404 if unknown)
//! - `POST /emulator/v1/faults/outage` with an [`Outage`] body (`{"seconds": 60, "graceful":
//!   false}`): 202, then the whole server, this endpoint included, is down that long; 409 while
//!   another outage is under way

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::{FaultHandle, FaultRule, Outage, OutageError};

/// Registers the admin routes.
pub fn configure(config: &mut web::ServiceConfig) {
    config.service(
        web::resource("/emulator/v1/faults")
            .route(web::get().to(list))
            .route(web::post().to(add))
            .route(web::delete().to(clear)),
    );
    // Before `{id}`, which would otherwise take the path and answer 405.
    config.service(web::resource("/emulator/v1/faults/outage").route(web::post().to(outage)));
    config.service(web::resource("/emulator/v1/faults/{id}").route(web::delete().to(remove)));
}

async fn list(faults: web::Data<FaultHandle>) -> HttpResponse {
    HttpResponse::Ok().json(json!({"rules": faults.rules(), "counters": faults.counters()}))
}

async fn add(faults: web::Data<FaultHandle>, body: web::Bytes) -> HttpResponse {
    match serde_json::from_slice::<FaultRule>(&body) {
        Ok(rule) => HttpResponse::Created().json(json!({"id": faults.inject(rule)})),
        Err(e) => {
            HttpResponse::BadRequest().json(json!({"error": format!("invalid fault rule: {e}")}))
        }
    }
}

async fn outage(faults: web::Data<FaultHandle>, body: web::Bytes) -> HttpResponse {
    let outage = match serde_json::from_slice::<Outage>(&body) {
        Ok(outage) => outage,
        Err(e) => {
            return HttpResponse::BadRequest()
                .json(json!({"error": format!("invalid outage: {e}")}));
        }
    };
    match faults.schedule_outage_after_answer(outage) {
        Ok(()) => HttpResponse::Accepted().json(json!({"outage": outage})),
        Err(e @ OutageError::Busy) => {
            HttpResponse::Conflict().json(json!({"error": e.to_string()}))
        }
        Err(e) => HttpResponse::BadRequest().json(json!({"error": e.to_string()})),
    }
}

async fn clear(faults: web::Data<FaultHandle>) -> HttpResponse {
    faults.clear();
    HttpResponse::NoContent().finish()
}

async fn remove(faults: web::Data<FaultHandle>, id: web::Path<String>) -> HttpResponse {
    match id.parse::<u64>() {
        Ok(id) if faults.remove(id) => HttpResponse::NoContent().finish(),
        Ok(id) => HttpResponse::NotFound().json(json!({"error": format!("no fault rule {id}")})),
        Err(_) => HttpResponse::BadRequest()
            .json(json!({"error": format!("fault id {id:?} is not a number")})),
    }
}
