//! Shared fixtures for unit tests.

use k8s_openapi::api::core::v1::{Container, EnvVar};

use crate::crd::{Hollo, HolloSpec};

/// The minimal valid spec (every other field defaulted), version 0.1.0.
pub fn spec() -> HolloSpec {
    serde_json::from_value(serde_json::json!({
        "version": "0.1.0",
        "database": {"urlSecretRef": {"name": "hollo-db", "key": "url"}},
        "secretKeyRef": {"name": "hollo-secret", "key": "key"},
    }))
    .expect("fixture spec parses")
}

/// A stored `Hollo` named `social` in namespace `fedi` with a uid (for owner references).
pub fn hollo(spec: HolloSpec) -> Hollo {
    let mut h = Hollo::new("social", spec);
    h.metadata.namespace = Some("fedi".into());
    h.metadata.uid = Some("0b3c-uid".into());
    h.metadata.generation = Some(3);
    h
}

/// The plain value of the variable `name` in `env`.
pub fn env_value<'a>(env: &'a [EnvVar], name: &str) -> Option<&'a str> {
    env.iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value.as_deref())
}

/// The plain value of the variable `name` of container `c`.
pub fn env<'a>(c: &'a Container, name: &str) -> Option<&'a str> {
    env_value(c.env.as_deref().unwrap_or_default(), name)
}

/// A mocked API server for a real kube `Client`: the client's requests arrive at the
/// [`MockHandle`], which answers each one (the controller-rs pattern).
///
/// Written here rather than taken from `tower-test`: that crate turns on tokio's `test-util`
/// feature, and since dev-dependencies take part in feature unification, every build with tests
/// then compiled tokio and everything above it a second time, apart from the builds without.
pub mod mock {
    use http::{Request, Response};
    use kube::client::Body;
    use tokio::sync::{mpsc, oneshot};

    /// The test's end: the next request the client sent, with where to send its answer.
    pub struct MockHandle(mpsc::UnboundedReceiver<(Request<Body>, SendResponse)>);

    /// Answers one request.
    pub struct SendResponse(oneshot::Sender<Response<Body>>);

    impl MockHandle {
        pub async fn next_request(&mut self) -> Option<(Request<Body>, SendResponse)> {
            self.0.recv().await
        }
    }

    impl SendResponse {
        pub fn send_response(self, response: Response<Body>) {
            // The client may have given up on the request; nobody is left to tell.
            let _ = self.0.send(response);
        }
    }

    /// A service for `kube::Client::new` and the handle that answers its requests. A request
    /// the handle drops unanswered fails in the client as a broken connection would.
    pub fn pair() -> (
        impl tower::Service<
            Request<Body>,
            Response = Response<Body>,
            Error = Box<dyn std::error::Error + Send + Sync>,
            Future = impl Send,
        > + Clone
        + Send
        + 'static,
        MockHandle,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let service = tower::service_fn(move |request: Request<Body>| {
            let tx = tx.clone();
            async move {
                let (send, answer) = oneshot::channel();
                tx.send((request, SendResponse(send)))
                    .map_err(|_| "the mock API server is gone")?;
                let response = answer
                    .await
                    .map_err(|_| "the mock API server did not answer")?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
            }
        });
        (service, MockHandle(rx))
    }
}
