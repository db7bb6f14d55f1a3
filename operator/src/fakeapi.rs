//! A small in-memory Kubernetes API for reconciler tests: objects keyed by their URL path,
//! server-side apply as "store the body", lists filtered by label selectors, every request
//! logged. Enough to check which objects a reconcile writes, not a model of the apiserver.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};

#[derive(Default)]
pub struct State {
    pub objects: BTreeMap<String, Value>,
    pub log: Vec<(Method, String, Value)>,
}

#[derive(Clone, Default)]
pub struct FakeApi {
    pub state: Arc<Mutex<State>>,
}

/// Collection names this fake serves (a path ending in one of these is a list or a create).
const COLLECTIONS: [&str; 11] = [
    "deployments",
    "pods",
    "jobs",
    "services",
    "poddisruptionbudgets",
    "horizontalpodautoscalers",
    "ingresses",
    "scaledobjects",
    "hollos",
    "events",
    "leases",
];

fn not_found() -> (StatusCode, Value) {
    (
        StatusCode::NOT_FOUND,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "reason": "NotFound", "message": "not found", "code": 404}),
    )
}

/// `k=v` and `k in (a,b)` terms, comma-separated (commas inside parentheses belong to `in`).
fn matches(selector: &str, labels: &Value) -> bool {
    let mut terms = vec![];
    let (mut depth, mut cur) = (0, String::new());
    for c in selector.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    terms.push(cur);
    terms.iter().filter(|t| !t.is_empty()).all(|t| {
        if let Some((k, v)) = t.split_once(" in ") {
            let set: Vec<&str> = v
                .trim_matches(|c| c == '(' || c == ')')
                .split(',')
                .collect();
            labels[k.trim()].as_str().is_some_and(|l| set.contains(&l))
        } else if let Some((k, v)) = t.split_once('=') {
            labels[k.trim()].as_str() == Some(v.trim())
        } else {
            false
        }
    })
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| {
            // Minimal percent-decoding for selectors.
            let mut out = String::new();
            let b = v.as_bytes();
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'%'
                    && i + 2 < b.len()
                    && let Ok(n) = u8::from_str_radix(&v[i + 1..i + 3], 16)
                {
                    out.push(n as char);
                    i += 3;
                    continue;
                }
                out.push(if b[i] == b'+' { ' ' } else { b[i] as char });
                i += 1;
            }
            out
        })
    })
}

impl FakeApi {
    pub fn client(&self) -> Client {
        let me = self.clone();
        let svc = tower::service_fn(move |req: Request<Body>| {
            let me = me.clone();
            async move {
                let (parts, body) = req.into_parts();
                let bytes = body
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let (status, out) = me.handle(
                    &parts.method,
                    parts.uri.path(),
                    parts.uri.query().unwrap_or(""),
                    body,
                );
                let mut resp =
                    Response::new(Body::from(serde_json::to_vec(&out).unwrap_or_default()));
                *resp.status_mut() = status;
                resp.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                Ok::<_, std::convert::Infallible>(resp)
            }
        });
        Client::new(svc, "default")
    }

    pub fn put(&self, path: &str, obj: Value) {
        self.state
            .lock()
            .expect("lock")
            .objects
            .insert(path.into(), obj);
    }

    pub fn get(&self, path: &str) -> Option<Value> {
        self.state.lock().expect("lock").objects.get(path).cloned()
    }

    /// Requests that wrote (PATCH/POST/DELETE) since the last call: method, path, body.
    pub fn take_writes(&self) -> Vec<(Method, String, Value)> {
        let mut s = self.state.lock().expect("lock");
        std::mem::take(&mut s.log)
            .into_iter()
            .filter(|(m, _, _)| *m != Method::GET)
            .collect()
    }

    fn handle(&self, method: &Method, path: &str, query: &str, body: Value) -> (StatusCode, Value) {
        let mut s = self.state.lock().expect("lock");
        s.log.push((method.clone(), path.to_string(), body.clone()));
        let last = path.rsplit('/').next().unwrap_or("");
        let is_collection = COLLECTIONS.contains(&last);
        match *method {
            Method::GET if is_collection => {
                let selector = query_param(query, "labelSelector").unwrap_or_default();
                let prefix = format!("{path}/");
                let items: Vec<Value> = s
                    .objects
                    .iter()
                    .filter(|(p, _)| p.starts_with(&prefix) && !p[prefix.len()..].contains('/'))
                    .map(|(_, o)| o.clone())
                    .filter(|o| matches(&selector, &o["metadata"]["labels"]))
                    .collect();
                (
                    StatusCode::OK,
                    json!({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items}),
                )
            }
            Method::GET => match s.objects.get(path) {
                Some(o) => (StatusCode::OK, o.clone()),
                None => not_found(),
            },
            Method::POST => {
                let mut obj = body;
                let name = obj["metadata"]["name"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("gen-{}", s.objects.len()));
                obj["metadata"]["name"] = json!(name);
                let key = format!("{path}/{name}");
                if s.objects.contains_key(&key) {
                    return (
                        StatusCode::CONFLICT,
                        json!({"kind": "Status", "apiVersion": "v1",
                        "metadata": {}, "status": "Failure", "reason": "AlreadyExists", "code": 409,
                        "message": "exists"}),
                    );
                }
                s.objects.insert(key, obj.clone());
                (StatusCode::CREATED, obj)
            }
            Method::PATCH if last == "status" => {
                let key = path.trim_end_matches("/status").to_string();
                match s.objects.get_mut(&key) {
                    Some(o) => {
                        o["status"] = body["status"].clone();
                        (StatusCode::OK, o.clone())
                    }
                    None => not_found(),
                }
            }
            Method::PATCH if last == "scale" => {
                let key = path.trim_end_matches("/scale").to_string();
                match s.objects.get_mut(&key) {
                    Some(o) => {
                        o["spec"]["replicas"] = body["spec"]["replicas"].clone();
                        let name = o["metadata"]["name"].clone();
                        (
                            StatusCode::OK,
                            json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                            "metadata": {"name": name}, "spec": {"replicas": body["spec"]["replicas"]}}),
                        )
                    }
                    None => not_found(),
                }
            }
            Method::PATCH => {
                // Apply: the body becomes the object; what only the server writes is kept.
                let mut obj = body;
                if let Some(old) = s.objects.get(path) {
                    if obj.get("status").is_none()
                        && let Some(st) = old.get("status")
                    {
                        obj["status"] = st.clone();
                    }
                    if obj["spec"].get("replicas").is_none()
                        && let Some(r) = old["spec"].get("replicas")
                    {
                        obj["spec"]["replicas"] = r.clone();
                    }
                }
                s.objects.insert(path.to_string(), obj.clone());
                (StatusCode::OK, obj)
            }
            Method::DELETE => match s.objects.remove(path) {
                Some(_) => (
                    StatusCode::OK,
                    json!({"kind": "Status", "apiVersion": "v1",
                    "metadata": {}, "status": "Success", "code": 200}),
                ),
                None => not_found(),
            },
            _ => not_found(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_equality_and_set_terms() {
        let labels = json!({"a": "1", "c": "web"});
        assert!(matches("a=1", &labels));
        assert!(matches("a=1,c in (web,worker)", &labels));
        assert!(!matches("a=1,c in (worker,all)", &labels));
        assert!(matches("", &labels));
        assert_eq!(
            query_param("labelSelector=a%3D1%2Cc+in+%28web%29", "labelSelector").as_deref(),
            Some("a=1,c in (web)")
        );
    }
}
