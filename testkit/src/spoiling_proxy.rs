//! A proxy between nodepulse and the emulator that spoils the API's answers on demand: JSON cut
//! in half, objects with fields no client knows, objects swollen with megabytes of annotation.
//! The emulator's fault injection decides whether and when a request is answered; this decides
//! what an answer says. Watches and everything not selected pass through untouched.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use serde_json::{Value, json};

/// What happens to a selected answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spoil {
    /// The first half of the JSON, then garbage.
    Malformed,
    /// Valid JSON with unknown fields at the top, in metadata, spec and status.
    UnexpectedFields,
    /// Valid JSON with an 8 MiB annotation.
    Oversized,
}

#[derive(Default)]
struct Plan {
    /// (how, which paths: those containing this) — nothing spoiled when None.
    spoil: Option<(Spoil, String)>,
}

#[derive(Clone)]
struct Shared {
    upstream: String,
    plan: Arc<Mutex<Plan>>,
    spoiled: Arc<AtomicU64>,
    client: reqwest::Client,
}

pub struct SpoilingProxy {
    shared: Shared,
    /// A kubeconfig that talks to the API through the proxy (anonymously).
    pub kubeconfig: PathBuf,
}

impl SpoilingProxy {
    /// Starts a proxy to `upstream` (`http://host:port`), writing its kubeconfig into `dir`.
    pub fn start(upstream: &str, dir: &Path) -> Self {
        let shared = Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            plan: Arc::default(),
            spoiled: Arc::default(),
            client: reqwest::Client::new(),
        };
        let data = web::Data::new(shared.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(web::PayloadConfig::new(64 << 20))
                .default_service(web::to(forward))
        })
        .workers(1)
        .disable_signals()
        .bind("127.0.0.1:0")
        .expect("the proxy binds");
        let address = server.addrs()[0];
        actix_rt::spawn(server.run());
        let kubeconfig = dir.join("spoiling-proxy.kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: http://{address}\nusers:\n- name: anonymous\n  user: {{}}\ncontexts:\n- name: proxy\n  context: {{cluster: proxy, user: anonymous}}\ncurrent-context: proxy\n"
            ),
        )
        .expect("kubeconfig written");
        Self { shared, kubeconfig }
    }

    /// Spoils, from now on, every answer to a request whose path contains `path`.
    pub fn spoil(&self, how: Spoil, path: &str) {
        if let Ok(mut plan) = self.shared.plan.lock() {
            plan.spoil = Some((how, path.to_owned()));
        }
    }

    /// Answers honestly again.
    pub fn heal(&self) {
        if let Ok(mut plan) = self.shared.plan.lock() {
            plan.spoil = None;
        }
    }

    /// Answers spoiled so far.
    pub fn spoiled(&self) -> u64 {
        self.shared.spoiled.load(Ordering::Relaxed)
    }
}

fn spoiled_body(how: Spoil, body: &[u8]) -> Vec<u8> {
    match how {
        Spoil::Malformed => {
            let mut cut = body[..body.len() / 2].to_vec();
            cut.extend_from_slice(b"\x00}}]{\"garbage");
            cut
        }
        Spoil::UnexpectedFields | Spoil::Oversized => {
            let Ok(mut object) = serde_json::from_slice::<Value>(body) else {
                return body.to_vec();
            };
            if let Value::Object(fields) = &mut object {
                if how == Spoil::UnexpectedFields {
                    fields.insert("fromTheFuture".into(), json!({"nested": [1, {"x": null}]}));
                    for part in ["metadata", "spec", "status"] {
                        if let Some(Value::Object(inner)) = fields.get_mut(part) {
                            inner.insert("addedInV9".into(), json!({"any": ["thing", 42]}));
                        }
                    }
                } else if let Some(Value::Object(metadata)) = fields.get_mut("metadata") {
                    let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
                    if let Value::Object(annotations) = annotations {
                        annotations.insert(
                            "nodepulse.test/ballast".into(),
                            Value::String("x".repeat(8 << 20)),
                        );
                    }
                }
            }
            serde_json::to_vec(&object).unwrap_or_else(|_| body.to_vec())
        }
    }
}

async fn forward(
    request: HttpRequest,
    body: web::Bytes,
    shared: web::Data<Shared>,
) -> HttpResponse {
    let path_and_query = request
        .uri()
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .to_owned();
    let url = format!("{}{path_and_query}", shared.upstream);
    let method = reqwest::Method::from_bytes(request.method().as_str().as_bytes())
        .unwrap_or(reqwest::Method::GET);
    let mut upstream = shared.client.request(method, &url).body(body.to_vec());
    for (name, value) in request.headers() {
        if matches!(name.as_str(), "content-type" | "accept" | "authorization")
            && let Ok(value) = value.to_str()
        {
            upstream = upstream.header(name.as_str(), value);
        }
    }
    let Ok(response) = upstream.send().await else {
        return HttpResponse::BadGateway().finish();
    };
    let status = actix_web::http::StatusCode::from_u16(response.status().as_u16())
        .unwrap_or(actix_web::http::StatusCode::BAD_GATEWAY);
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("application/json")
        .to_owned();
    let mut answer = HttpResponse::build(status);
    answer.content_type(content_type);
    let watch = path_and_query.contains("watch=");
    let plan = shared
        .plan
        .lock()
        .ok()
        .and_then(|plan| plan.spoil.clone())
        .filter(|(_, path)| !watch && path_and_query.contains(path.as_str()));
    if watch {
        // Streamed as it comes, chunk by chunk.
        let stream = futures::stream::unfold(response, |mut response| async move {
            match response.chunk().await {
                Ok(Some(chunk)) => Some((Ok::<_, actix_web::Error>(chunk), response)),
                _ => None,
            }
        });
        return answer.streaming(stream);
    }
    let Ok(bytes) = response.bytes().await else {
        return HttpResponse::BadGateway().finish();
    };
    match plan {
        Some((how, _)) if status.is_success() => {
            shared.spoiled.fetch_add(1, Ordering::Relaxed);
            answer.body(spoiled_body(how, &bytes))
        }
        _ => answer.body(bytes),
    }
}
