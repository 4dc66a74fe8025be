//! The fault-injection admin API, beside the Kubernetes API on the same port:
//!
//! - `GET /emulator/v1/faults`: `{"rules": [FaultStatus...], "counters": FaultCounters}`
//! - `POST /emulator/v1/faults` with a [`FaultRule`] body: 201 `{"id": N}`
//! - `DELETE /emulator/v1/faults`: removes every rule
//! - `DELETE /emulator/v1/faults/{id}`: removes one rule (404 if unknown)

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::{FaultHandle, FaultRule};

/// Registers the admin routes.
pub fn configure(config: &mut web::ServiceConfig) {
    config.service(
        web::resource("/emulator/v1/faults")
            .route(web::get().to(list))
            .route(web::post().to(add))
            .route(web::delete().to(clear)),
    );
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
