//! The Docker Compose example (`examples/compose.yaml`) as a newcomer runs it, checked without
//! containers (no registry is reachable where the suite runs): every node's environment, with
//! the values the file asks for, passes the runtime's own configuration check; the public
//! address is the domain the reverse proxy serves, not localhost; media URLs are ones the node
//! really serves; every node runs the project's image; and only the proxy is published.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use hollo_runtime::config::{Config, Env};
use serde_yaml::Value;
use tower::ServiceExt;

/// The project's one image name (the operator's default, the charts', the Dockerfile's tag).
const IMAGE: &str = "ghcr.io/hollo-social/hollo";

/// What a newcomer sets before `docker compose up` (the file's comments say so).
const DOMAIN: &str = "social.example.org";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the runtime crate sits in the repository")
        .to_path_buf()
}

fn compose_text() -> String {
    std::fs::read_to_string(repo().join("examples/compose.yaml")).expect("examples/compose.yaml")
}

/// The file as Compose sees it: anchors and `<<` merges applied.
fn compose() -> Value {
    let mut v: Value = serde_yaml::from_str(&compose_text()).expect("examples/compose.yaml parses");
    v.apply_merge().expect("merge keys apply");
    v
}

/// Compose's interpolation of `${NAME}`, `${NAME:?message}`, `${NAME:-default}` with the values
/// a user sets; a variable neither set nor defaulted is an error, as Compose makes it.
fn interpolate(text: &str, set: &BTreeMap<&str, &str>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let end = rest[at..]
            .find('}')
            .ok_or_else(|| format!("unclosed ${{ in {text:?}"))?;
        let inner = &rest[at + 2..at + end];
        let (name, default) = match inner.find([':', '-', '?']) {
            Some(i) => (&inner[..i], Some(inner[i..].trim_start_matches(':'))),
            None => (inner, None),
        };
        let value = match (set.get(name), default) {
            (Some(v), _) => (*v).to_string(),
            (None, Some(d)) if d.starts_with('-') && d.len() > 1 => d[1..].to_string(),
            (None, Some(d)) if d.starts_with('-') => {
                // podman-compose 1.0.3 (Debian 12) leaves `${X:-}` as it is, literally.
                return Err(format!(
                    "${{{inner}}}: an empty default is passed literally by podman-compose"
                ));
            }
            _ => return Err(format!("${{{inner}}} is required and not set")),
        };
        out.push_str(&value);
        rest = &rest[at + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn user_settings() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([
        ("HOLLO_DOMAIN", DOMAIN),
        (
            "SECRET_KEY",
            "5f0c4e3e9a0b4d6f8e1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70",
        ),
        ("POSTGRES_PASSWORD", "0123456789abcdef0123456789abcdef"),
    ])
}

fn services() -> serde_yaml::Mapping {
    compose()["services"]
        .as_mapping()
        .expect("services")
        .clone()
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A service's environment (map or `KEY=value` list form), interpolated.
fn environment(service: &Value) -> BTreeMap<String, String> {
    let set = user_settings();
    let mut env = BTreeMap::new();
    match &service["environment"] {
        Value::Mapping(m) => {
            for (k, v) in m {
                let k = text(k).expect("a variable name");
                let v = text(v).unwrap_or_default();
                env.insert(
                    k.clone(),
                    interpolate(&v, &set).unwrap_or_else(|e| panic!("{k}: {e}")),
                );
            }
        }
        Value::Sequence(items) => {
            for item in items {
                let item = text(item).expect("KEY=value");
                let (k, v) = item.split_once('=').expect("KEY=value");
                env.insert(
                    k.to_string(),
                    interpolate(v, &set).unwrap_or_else(|e| panic!("{k}: {e}")),
                );
            }
        }
        Value::Null => {}
        other => panic!("environment must be a map or a list: {other:?}"),
    }
    env
}

fn words(v: &Value) -> Vec<String> {
    let set = user_settings();
    match v {
        Value::Sequence(items) => items
            .iter()
            .map(|w| interpolate(&text(w).expect("a word"), &set).expect("interpolates"))
            .collect(),
        Value::String(s) => interpolate(s, &set)
            .expect("interpolates")
            .split_whitespace()
            .map(String::from)
            .collect(),
        _ => Vec::new(),
    }
}

/// The services that run our image, by name, with their interpolated image.
fn hollo_services() -> Vec<(String, Value, String)> {
    let set = user_settings();
    services()
        .into_iter()
        .filter_map(|(name, service)| {
            let image = interpolate(&text(&service["image"])?, &set).expect("image interpolates");
            image
                .contains("hollo")
                .then(|| (text(&name).expect("name"), service, image))
        })
        .collect()
}

#[test]
fn every_node_runs_the_projects_image_at_this_version() {
    let nodes = hollo_services();
    assert!(nodes.len() >= 4, "migrate, web and workers: {nodes:?}");
    let want = format!("{IMAGE}:{}", env!("CARGO_PKG_VERSION"));
    for (name, _, image) in &nodes {
        assert_eq!(image, &want, "{name}");
    }
    assert!(
        compose_text().contains(&format!("docker build -f runtime/Dockerfile -t {want} .")),
        "the file's comments build the image it runs ({want})"
    );
}

#[test]
fn every_variable_is_set_or_defaulted_in_a_way_both_compose_tools_read() {
    let text = compose_text();
    let set = user_settings();
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        interpolate(line, &set).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    }
}

#[tokio::test]
async fn each_node_passes_the_runtimes_configuration_check_and_serves_its_media_urls() {
    let media_dir = crate::support::files::temp_dir("compose-media");
    let mut served = 0;
    for (name, service, _) in hollo_services() {
        let command = words(&service["command"]);
        if command.first().is_some_and(|c| c != "serve") {
            continue; // `migrate` reads the database URL only
        }
        let mut env = environment(&service);
        // The container's media directory, here a temporary one.
        let in_container = env
            .insert("FS_STORAGE_PATH".into(), media_dir.to_string_lossy().into())
            .unwrap_or_else(|| panic!("{name}: media on the shared volume (FS_STORAGE_PATH)"));
        let mounted = words(&service["volumes"])
            .iter()
            .any(|v| v.ends_with(&format!(":{in_container}")));
        assert!(mounted, "{name}: {in_container} is a volume");
        let config = Config::from_env(&Env::from_pairs(
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        ))
        .unwrap_or_else(|e| panic!("{name}: the runtime refuses its environment: {e}"));
        let public = &config.federation.public_url;
        assert_eq!(
            (public.scheme(), public.host_str()),
            ("https", Some(DOMAIN)),
            "{name}: PUBLIC_URL is the domain the proxy serves over HTTPS, not {public}"
        );
        // A media URL as the node writes it, requested from the node's own router.
        let drive = hollo_runtime::media::Drive::from_config(&config.media).expect("fs drive");
        let key = format!("media/{}/original.png", uuid::Uuid::new_v4());
        std::fs::create_dir_all(media_dir.join(&key).parent().unwrap()).unwrap();
        std::fs::write(media_dir.join(&key), b"\x89PNG\r\n\x1a\n").unwrap();
        let url = url::Url::parse(&drive.url(&key)).expect("a media URL");
        assert_eq!(
            url.origin(),
            public.origin(),
            "{name}: media URLs on the node's own origin ({url})"
        );
        let pool = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .expect("a lazy pool");
        let state = hollo_runtime::web::AppState {
            drive: Arc::new(drive),
            ..hollo_runtime::web::AppState::new(pool, None)
        };
        let response = hollo_runtime::web::router(state)
            .oneshot(Request::get(url.path()).body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "{name}: the node serves its media URL {url}"
        );
        served += 1;
    }
    assert!(served >= 3, "web and two workers checked");
    let _ = std::fs::remove_dir_all(&media_dir);
}

#[test]
fn a_reverse_proxy_serves_the_public_domain_and_only_it_is_published() {
    let services = services();
    let nodes = hollo_services();
    for (name, service, _) in &nodes {
        assert!(
            service["ports"].is_null(),
            "{name}: nodes are reached through the proxy only (and /metrics never)"
        );
    }
    let (web_name, web, _) = nodes
        .iter()
        .find(|(_, s, _)| environment(s).get("NODE_TYPE").map(String::as_str) == Some("web"))
        .expect("a web node");
    let web_env = environment(web);
    assert_eq!(
        web_env.get("BEHIND_PROXY").map(String::as_str),
        Some("true"),
        "the web node believes the proxy's X-Forwarded-* headers"
    );
    let port = web_env.get("PORT").map_or("3000", String::as_str);
    let proxy = services
        .values()
        .find(|s| words(&s["command"]).first().map(String::as_str) == Some("caddy"))
        .expect("Caddy in front");
    assert_eq!(
        words(&proxy["command"]),
        [
            "caddy",
            "reverse-proxy",
            "--from",
            DOMAIN,
            "--to",
            &format!("{web_name}:{port}")
        ],
        "Caddy (automatic HTTPS for the domain) forwards to the web node"
    );
    let published = words(&proxy["ports"]);
    for p in ["80:80", "443:443"] {
        assert!(published.iter().any(|x| x == p), "the proxy publishes {p}");
    }
    // Every node has the same identity.
    let identities: std::collections::BTreeSet<_> = nodes
        .iter()
        .map(|(_, s, _)| {
            let e = environment(s);
            (e.get("PUBLIC_URL").cloned(), e.get("SECRET_KEY").cloned())
        })
        .collect();
    assert_eq!(identities.len(), 1, "one PUBLIC_URL and SECRET_KEY");
}

#[test]
fn the_interpolation_reads_what_compose_reads() {
    let set = BTreeMap::from([("A", "x")]);
    assert_eq!(interpolate("${A}/${B:-d}/${A:?m}", &set).unwrap(), "x/d/x");
    assert!(interpolate("${B:?set B}", &set).is_err());
    assert!(interpolate("${B:-}", &set).is_err());
}
