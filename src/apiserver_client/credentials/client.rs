//! A kube-rs client builder for a node that holds a client certificate: the same layers as
//! kube-rs's own (`ClientBuilder::try_from`: base URI, auth, extra headers, timeouts), over a
//! rustls configuration whose client certificate comes from the [`ClientIdentity`], and a
//! connector that marks each connection so installing a certificate closes the older ones.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::Uri;
use kube::client::{Body, ClientBuilder, ConfigExt as _, DynBody};
use tower::util::BoxService;
use tower::{BoxError, ServiceBuilder, ServiceExt as _};

use super::identity::{ClientIdentity, Generations, MarkedStream};

/// The service every nodepulse client is built on (kube-rs's `GenericService`).
pub type Service = BoxService<http::Request<Body>, http::Response<Box<DynBody>>, BoxError>;

/// Builds `config`'s client with `identity`'s certificate.
pub fn builder(
    config: &kube::Config,
    identity: &Arc<ClientIdentity>,
) -> Result<ClientBuilder<Service>, kube::Error> {
    let mut tls = config.rustls_client_config()?;
    tls.client_auth_cert_resolver = Arc::clone(identity) as _;
    // A resumed TLS session carries the client certificate of the handshake it resumes, so a
    // connection made after a rotation would still be the old certificate's (and be refused
    // once that expires): every connection does a full handshake, as Go's client does by
    // default (no session cache).
    tls.resumption = rustls::client::Resumption::disabled();
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let https = match &config.tls_server_name {
        Some(name) => https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(
            name.clone()
                .try_into()
                .map_err(|e| kube::Error::Service(Box::new(e)))?,
        )),
        None => https,
    };
    let https = https.enable_http1().wrap_connector(http);
    let mut connector = hyper_timeout::TimeoutConnector::new(RotatingConnector {
        inner: https,
        generations: identity.generations(),
    });
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    let client: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Builder::new(hyper_util::rt::TokioExecutor::new())
            .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(client)
        .map_response(|response: http::Response<hyper::body::Incoming>| {
            response.map(|body| {
                Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>
            })
        });
    Ok(ClientBuilder::new(
        BoxService::new(service),
        config.default_namespace.clone(),
    ))
}

/// Marks each connection `inner` makes with the certificate generation it was made in.
#[derive(Clone)]
pub(super) struct RotatingConnector<C> {
    inner: C,
    generations: Arc<Generations>,
}

impl<C> tower::Service<Uri> for RotatingConnector<C>
where
    C: tower::Service<Uri> + Send,
    C::Future: Send + 'static,
    C::Response: Send,
{
    type Response = MarkedStream<C::Response>;
    type Error = C::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        // Marked before the handshake: one that raced an install presented the older
        // certificate, and goes with the older connections.
        let mark = self.generations.mark();
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            Ok(MarkedStream {
                inner: connecting.await?,
                mark,
            })
        })
    }
}
