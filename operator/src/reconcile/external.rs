//! Inputs a `Hollo` names that the operator does not own: every Secret its pods read into their
//! environment ([`referenced_secrets`]: the database URLs, `SECRET_KEY`, the admin token, the S3
//! Secret, `secretKeyRef`s in `spec.env`, the CloudNativePG application Secret) and the
//! CloudNativePG `Cluster`. Read with one GET each (read-only RBAC: `secrets` get,
//! `clusters.postgresql.cnpg.io` get; no list or watch, so the operator cannot enumerate
//! Secrets — a rotation is seen at the next reconcile, at most a minute later). With
//! `WATCH_SECRETS=true` (RBAC adds `list` and `watch` on Secrets) a metadata-only
//! watch tells which Secret changed: a Secret is then read by GET only when its
//! `resourceVersion` differs from the one last read ([`SecretReader`]), a change triggers the
//! `Hollo`s that reference it, and a steady `Hollo` costs the apiserver no request at all.
//!
//! [`read`] asks the apiserver; everything else here is pure: the conditions ([`checks`]),
//! whether the reconcile must hold ([`External::hold`]) and the spec the builders then see
//! ([`effective`]: the Cluster's `max_connections`, the Secret's content hash on the pods).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use sha2::{Digest, Sha256};

use super::Error;
use crate::crd::{Hollo, HolloSpec, ImageProfile};
use crate::resources::backup::{self, ClusterBackup};
use crate::resources::pod::cnpg_app_secret;
use crate::resources::secret_key;
use crate::status::{self, Check};

/// Pod annotation carrying a hash of every referenced Secret's referenced values: a rotated
/// password, key or token changes the pod template, so the pods roll onto
/// it (environment variables are read once, at container start).
pub const SECRETS_HASH: &str = "hollo.social/secrets-hash";
/// Upstream's minimum (`src/env.ts`: `SECRET_KEY_MINIMUM_LENGTH = 44`).
pub const UPSTREAM_SECRET_KEY_MIN: usize = 44;
/// Keys of the application Secret the pods reference.
const APP_SECRET_KEYS: [&str; 4] = ["uri", "username", "password", "dbname"];

pub fn cluster_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("postgresql.cnpg.io", "v1", "Cluster"),
        "clusters",
    )
}

/// What was found of a Secret the pods reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretState {
    Missing,
    /// Present, but without these keys.
    MissingKeys(Vec<String>),
    /// Present with every key; a hash of the referenced values / the length of the one value.
    Found(String),
}

/// The CloudNativePG side of `spec.database.cnpg`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cnpg {
    pub secret: SecretState,
    /// `spec.postgresql.parameters.max_connections` of the Cluster, when it states one.
    pub max_connections: Option<i32>,
    /// Why the Cluster could not be read (absent, API not installed, …), if it could not.
    pub cluster_note: Option<String>,
    /// The Cluster's backup configuration (`None`: it could not be read), which
    /// `upgrade.backup`'s method defaults from.
    pub backup: Option<ClusterBackup>,
}

/// The operator's own `SECRET_KEY` Secret (`spec.secretKeyRef` unset), as found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeneratedKey {
    /// There with its key: read, or created by this reconcile.
    Present,
    /// There, but without the key `SECRET_KEY` (someone else made it).
    NoKey,
    /// Gone after the operator had generated it (the status says so). Not generated again:
    /// a new key could not decrypt the private keys the old one encrypted.
    Gone,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct External {
    pub cnpg: Option<Cnpg>,
    /// Upstream profile only: the `SECRET_KEY` value's length, or what is wrong with it.
    pub secret_key: Option<Result<usize, SecretState>>,
    /// `spec.secretKeyRef` unset: the operator's Secret `<name>-secret-key`.
    pub generated_key: Option<GeneratedKey>,
    /// `spec.admin`: its password Secret (read for its keys only; not hashed into the pods,
    /// which never read it).
    pub admin_password: Option<SecretState>,
    /// [`secrets_hash`] of the referenced Secrets, when the spec references any.
    pub secrets_hash: Option<String>,
}

/// The keys the pods read from one Secret: `None` = all of them (`envFrom`).
pub type Keys = Option<std::collections::BTreeSet<String>>;

/// Every Secret the pods of `spec` read into their environment, by name, with the keys read.
/// Secrets mounted as volumes (`spec.pod.volumes`) are left out: the kubelet updates those in
/// place.
pub fn referenced_secrets(spec: &HolloSpec) -> std::collections::BTreeMap<String, Keys> {
    use crate::resources::pod;
    let mut out: std::collections::BTreeMap<String, Keys> = Default::default();
    let mut add = |name: &str, key: Option<&str>| {
        let entry = out
            .entry(name.to_string())
            .or_insert_with(|| Some(Default::default()));
        match (entry.as_mut(), key) {
            (Some(keys), Some(k)) => {
                keys.insert(k.to_string());
            }
            (_, None) => *entry = None,
            (None, Some(_)) => {}
        }
    };
    // What the containers really reference: the web container's env (a superset of the
    // worker's and the migration's), the extra env, and envFrom.
    let env = pod::with_extra_env(spec, pod::common_env(spec, true));
    for e in &env {
        if let Some(r) = e
            .value_from
            .as_ref()
            .and_then(|v| v.secret_key_ref.as_ref())
        {
            add(&r.name, Some(&r.key));
        }
    }
    for f in pod::env_from(spec).into_iter().flatten() {
        if let Some(r) = &f.secret_ref {
            add(&r.name, None);
        }
    }
    if let Some(cnpg) = &spec.database.cnpg {
        for k in APP_SECRET_KEYS {
            add(&cnpg_app_secret(&cnpg.cluster), Some(k));
        }
    }
    out
}

/// A hash of the referenced values of the referenced Secrets (as read; `None` = not found, which
/// hashes as such, so a Secret appearing rolls the pods onto it too).
pub fn secrets_hash(
    refs: &std::collections::BTreeMap<String, Keys>,
    found: &std::collections::BTreeMap<String, Option<Secret>>,
) -> String {
    let mut parts: Vec<Vec<u8>> = vec![];
    for (name, keys) in refs {
        parts.push(name.as_bytes().to_vec());
        let Some(Some(secret)) = found.get(name) else {
            parts.push(b"\0missing".to_vec());
            continue;
        };
        let data = secret.data.clone().unwrap_or_default();
        for (k, v) in &data {
            if keys.as_ref().is_none_or(|keys| keys.contains(k)) {
                parts.push(k.as_bytes().to_vec());
                parts.push(v.0.clone());
            }
        }
    }
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    hash(&refs)
}

impl External {
    /// Why nothing may be applied now: pods and migration Jobs would reference a Secret that
    /// is not there and sit in `CreateContainerConfigError` (or a failing Job), so the
    /// reconcile holds until it appears instead.
    pub fn hold(&self, spec: &HolloSpec) -> Option<Check> {
        let generated_unusable = matches!(
            self.generated_key,
            Some(GeneratedKey::Gone | GeneratedKey::NoKey)
        );
        checks(spec, self).into_iter().find(|c| {
            !c.ok
                && (c.type_ == status::DATABASE
                    || (c.type_ == status::SECRET_KEY && generated_unusable))
        })
    }
}

fn hash(values: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for v in values {
        h.update((v.len() as u64).to_be_bytes());
        h.update(v);
    }
    let digest = h.finalize();
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The state of `keys` in a Secret (as read; `None` = not found).
pub fn secret_state(secret: Option<&Secret>, keys: &[&str]) -> SecretState {
    let Some(secret) = secret else {
        return SecretState::Missing;
    };
    let data = secret.data.clone().unwrap_or_default();
    let missing: Vec<String> = keys
        .iter()
        .filter(|k| !data.contains_key(**k))
        .map(|k| k.to_string())
        .collect();
    if !missing.is_empty() {
        return SecretState::MissingKeys(missing);
    }
    let values: Vec<&[u8]> = keys
        .iter()
        .filter_map(|k| data.get(*k).map(|v| v.0.as_slice()))
        .collect();
    SecretState::Found(hash(&values))
}

/// `max_connections` a Cluster's spec states (`spec.postgresql.parameters`, a string there).
pub fn cluster_max_connections(cluster: &DynamicObject) -> Option<i32> {
    let v = &cluster.data["spec"]["postgresql"]["parameters"]["max_connections"];
    match v {
        serde_json::Value::String(s) => s.trim().parse().ok(),
        serde_json::Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
        _ => None,
    }
}

/// How referenced Secrets are read: one GET each per reconcile (the default, RBAC `get` only),
/// or, with a metadata-only watch of Secrets, from a cache of what was last read, refreshed by
/// one GET when the watch shows a new `resourceVersion` (a Secret the watch does not have is
/// absent, without asking).
#[derive(Clone, Default)]
pub struct SecretReader {
    watched: Option<Watched>,
}

/// `(namespace, name)` → the `resourceVersion` last read and the Secret as read.
type SecretCache = HashMap<(String, String), (String, Secret)>;

#[derive(Clone)]
struct Watched {
    meta: Store<PartialObjectMeta<Secret>>,
    content: Arc<Mutex<SecretCache>>,
}

impl SecretReader {
    /// Reads through `meta`, the store of a metadata-only watch of Secrets.
    pub fn watched(meta: Store<PartialObjectMeta<Secret>>) -> Self {
        Self {
            watched: Some(Watched {
                meta,
                content: Arc::default(),
            }),
        }
    }

    pub fn is_watched(&self) -> bool {
        self.watched.is_some()
    }

    /// The metadata watch's first complete list (at once when Secrets are not watched).
    pub async fn ready(&self) -> Result<(), kube::runtime::reflector::store::WriterDropped> {
        match &self.watched {
            Some(w) => w.meta.wait_until_ready().await,
            None => Ok(()),
        }
    }

    /// The Secret `name` in `api`'s namespace `ns` (`None`: it does not exist).
    async fn get(&self, api: &Api<Secret>, ns: &str, name: &str) -> Result<Option<Secret>, Error> {
        let Some(w) = &self.watched else {
            return Ok(api.get_opt(name).await?);
        };
        let key = (ns.to_string(), name.to_string());
        let Some(meta) = w.meta.get(&ObjectRef::new(name).within(ns)) else {
            if let Ok(mut c) = w.content.lock() {
                c.remove(&key);
            }
            return Ok(None);
        };
        let rv = meta.resource_version().unwrap_or_default();
        if let Ok(c) = w.content.lock()
            && let Some((read_rv, secret)) = c.get(&key)
            && *read_rv == rv
        {
            return Ok(Some(secret.clone()));
        }
        let secret = api.get_opt(name).await?;
        if let Ok(mut c) = w.content.lock() {
            match &secret {
                Some(s) => {
                    let mut s = s.clone();
                    s.managed_fields_mut().clear();
                    let read_rv = s.resource_version().unwrap_or(rv);
                    c.insert(key, (read_rv, s));
                }
                None => {
                    c.remove(&key);
                }
            }
        }
        Ok(secret)
    }
}

/// The `Hollo`s in `hollos` whose pods read the Secret `name` in namespace `ns` (or whose
/// `spec.admin` names it): what a change of that Secret must reconcile.
pub fn hollos_reading(
    hollos: &[Arc<Hollo>],
    ns: Option<&str>,
    name: &str,
) -> Vec<ObjectRef<Hollo>> {
    hollos
        .iter()
        .filter(|h| h.namespace().as_deref() == ns)
        .filter(|h| {
            referenced_secrets(&h.spec).contains_key(name)
                || (secret_key::generated(h) && secret_key::name(h) == name)
                || h.spec
                    .admin
                    .as_ref()
                    .is_some_and(|a| a.password_secret_ref.name == name)
        })
        .map(|h| ObjectRef::from_obj(h.as_ref()))
        .collect()
}

/// Reads what `hollo` (as stored: `spec.secretKeyRef` possibly unset) names, and creates the
/// operator's `SECRET_KEY` Secret when the spec names none and it is absent
/// ([`secret_key::to_create`]; `applier` counts the write).
pub async fn read(
    client: &Client,
    reader: &SecretReader,
    applier: &super::apply::Applier,
    hollo: &Hollo,
) -> Result<External, Error> {
    let resolved = secret_key::resolved(hollo);
    let spec = &resolved.spec;
    let mut out = External::default();
    let refs = referenced_secrets(spec);
    if refs.is_empty() {
        return Ok(out);
    }
    let ns = hollo.namespace().ok_or(Error::NoNamespace)?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let mut found = std::collections::BTreeMap::new();
    for name in refs.keys() {
        found.insert(name.clone(), reader.get(&secrets, &ns, name).await?);
    }
    if secret_key::generated(hollo) {
        let name = secret_key::name(hollo);
        let mut secret = found.get(&name).cloned().flatten();
        if secret.is_none() && reader.is_watched() {
            // The watch may not show yet one created a moment ago: ask before calling it
            // absent (and, once the status says it was generated, gone).
            secret = secrets.get_opt(&name).await?;
            found.insert(name.clone(), secret.clone());
        }
        if let Some(new) = secret_key::to_create(hollo, secret.as_ref()) {
            let created = super::apply::create_secret(applier, &secrets, &new).await?;
            // Hashed as it now is, so the pods made next are not rolled once more by the
            // next reconcile.
            found.insert(name, Some(created.clone()));
            secret = Some(created);
        }
        out.generated_key = Some(generated_key(secret.as_ref()));
    }
    if let Some(admin) = &spec.admin {
        let r = &admin.password_secret_ref;
        let secret = match found.get(&r.name) {
            Some(s) => s.clone(),
            None => reader.get(&secrets, &ns, &r.name).await?,
        };
        // Whether it is there with its key, and nothing about its value.
        out.admin_password = Some(match secret_state(secret.as_ref(), &[r.key.as_str()]) {
            SecretState::Found(_) => SecretState::Found(String::new()),
            other => other,
        });
    }
    out.secrets_hash = Some(secrets_hash(&refs, &found));
    let get = |name: &str| found.get(name).cloned().flatten();
    if let Some(cnpg) = &spec.database.cnpg {
        let secret = get(&cnpg_app_secret(&cnpg.cluster));
        let clusters: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &cluster_resource());
        // The Cluster only refines the budget: a failure to read it is a note, not an error.
        let (max_connections, cluster_note, cluster_backup) =
            match clusters.get_opt(&cnpg.cluster).await {
                Ok(Some(c)) => (
                    cluster_max_connections(&c),
                    None,
                    Some(backup::cluster_backup(&c)),
                ),
                Ok(None) => (
                    None,
                    Some(format!(
                        "CloudNativePG Cluster {ns}/{} not found (or its API is not installed)",
                        cnpg.cluster
                    )),
                    None,
                ),
                Err(e) => (
                    None,
                    Some(format!(
                        "CloudNativePG Cluster {ns}/{} unreadable: {e}",
                        cnpg.cluster
                    )),
                    None,
                ),
            };
        out.cnpg = Some(Cnpg {
            secret: secret_state(secret.as_ref(), &APP_SECRET_KEYS),
            max_connections,
            cluster_note,
            backup: cluster_backup,
        });
    }
    if let (ImageProfile::Upstream, Some(r)) = (spec.image.profile, &spec.secret_key_ref) {
        let secret = get(&r.name);
        out.secret_key = Some(match secret_state(secret.as_ref(), &[r.key.as_str()]) {
            SecretState::Found(_) => Ok(secret
                .as_ref()
                .and_then(|s| s.data.as_ref())
                .and_then(|d| d.get(&r.key))
                .map(|v| String::from_utf8_lossy(&v.0).chars().count())
                .unwrap_or(0)),
            other => Err(other),
        });
    }
    Ok(out)
}

/// What was found of the operator's `SECRET_KEY` Secret (after creating it if it was due).
pub fn generated_key(found: Option<&Secret>) -> GeneratedKey {
    match secret_state(found, &[secret_key::KEY]) {
        SecretState::Found(_) => GeneratedKey::Present,
        SecretState::MissingKeys(_) => GeneratedKey::NoKey,
        SecretState::Missing => GeneratedKey::Gone,
    }
}

/// The `SecretKey` condition of the operator's own Secret `name`.
fn generated_key_check(name: &str, key: GeneratedKey) -> Check {
    let (ok, reason, message) = match key {
        GeneratedKey::Present => (
            true,
            secret_key::GENERATED,
            format!("SECRET_KEY from Secret {name}, generated by the operator and never replaced"),
        ),
        GeneratedKey::NoKey => (
            false,
            secret_key::INCOMPLETE,
            format!(
                "Secret {name} has no key {k}; nothing is applied until it has (`kubectl \
                 create secret generic {name} --from-literal={k}=\"$(openssl rand -hex 32)\"` \
                 makes one, or name a Secret in spec.secretKeyRef)",
                k = secret_key::KEY
            ),
        ),
        GeneratedKey::Gone => (
            false,
            secret_key::GONE,
            format!(
                "Secret {name}, the SECRET_KEY the operator generated, is gone; a new key could \
                 not decrypt the accounts' private keys, so none is generated: restore the \
                 Secret from a backup (or name a Secret in spec.secretKeyRef). Nothing is \
                 applied until then"
            ),
        ),
    };
    Check {
        type_: status::SECRET_KEY,
        ok,
        reason,
        message,
    }
}

/// The conditions only some specs have. `spec` as the builders see it
/// ([`secret_key::resolved`]).
pub fn checks(spec: &HolloSpec, ext: &External) -> Vec<Check> {
    let mut out = vec![];
    if let (Some(cnpg), Some(c)) = (&spec.database.cnpg, &ext.cnpg) {
        let app = cnpg_app_secret(&cnpg.cluster);
        let missing = |reason, message: String| Check {
            type_: status::DATABASE,
            ok: false,
            reason,
            message,
        };
        out.push(match &c.secret {
            SecretState::Missing => missing(
                "SecretMissing",
                format!(
                    "CloudNativePG application Secret {app} not found: is Cluster {} created \
                     and ready? Nothing is applied until the Secret exists",
                    cnpg.cluster
                ),
            ),
            SecretState::MissingKeys(keys) => missing(
                "SecretIncomplete",
                format!(
                    "CloudNativePG application Secret {app} has no key(s) {}; nothing is \
                     applied until it has",
                    keys.join(", ")
                ),
            ),
            SecretState::Found(_) => {
                let via = match &cnpg.pooler {
                    Some(p) => format!("web through Pooler {p}, workers and migrations direct"),
                    None => "every role direct".to_string(),
                };
                let budget = match (c.max_connections, &c.cluster_note) {
                    (Some(n), _) => {
                        format!("budget checked against the Cluster's max_connections {n}")
                    }
                    (None, Some(note)) => {
                        format!("{note}; budget checked against database.maxConnections")
                    }
                    (None, None) => "the Cluster states no max_connections; budget checked \
                                     against database.maxConnections"
                        .to_string(),
                };
                Check {
                    type_: status::DATABASE,
                    ok: true,
                    reason: "CnpgSecretFound",
                    message: format!(
                        "URL from Secret {app} (direct: {}-rw); {via}; {budget}",
                        cnpg.cluster
                    ),
                }
            }
        });
    }
    if let (Some(key), Some(r)) = (ext.generated_key, &spec.secret_key_ref) {
        out.push(generated_key_check(&r.name, key));
    } else if let (Some(key), Some(r)) = (&ext.secret_key, &spec.secret_key_ref) {
        let (ok, reason, message) = match key {
            Ok(n) if *n >= UPSTREAM_SECRET_KEY_MIN => (
                true,
                "LongEnough",
                format!("SECRET_KEY has {n} characters (upstream needs at least 44)"),
            ),
            Ok(n) => (
                false,
                "SecretKeyTooShort",
                format!(
                    "SECRET_KEY in Secret {} key {} has {n} characters; upstream Hollo refuses \
                     to start with fewer than {UPSTREAM_SECRET_KEY_MIN} (e.g. `openssl rand -hex 32`)",
                    r.name, r.key
                ),
            ),
            Err(_) => (
                false,
                "SecretKeyMissing",
                format!(
                    "Secret {} with key {} (SECRET_KEY) not found",
                    r.name, r.key
                ),
            ),
        };
        out.push(Check {
            type_: status::SECRET_KEY,
            ok,
            reason,
            message,
        });
    }
    if let Some(why) = spec.rolling_unavailable() {
        out.push(Check {
            type_: status::UPGRADE_STRATEGY,
            ok: false,
            reason: "RecreateUsed",
            message: why,
        });
    }
    out
}

/// `upgrade.backup`'s method and plugin (R-OP-OPS): the spec's, the rest from the Cluster's
/// backup configuration; `None` unless the spec wants a backup; `Err`: why none can be taken.
pub fn backup_method(
    spec: &HolloSpec,
    ext: &External,
) -> Option<
    Result<
        (
            crate::crd::BackupMethod,
            Option<crate::crd::BackupPluginConfiguration>,
        ),
        String,
    >,
> {
    let cnpg = spec
        .database
        .cnpg
        .as_ref()
        .filter(|_| spec.backup_wanted())?;
    let read = ext.cnpg.as_ref();
    let cluster = match read.and_then(|c| c.backup.as_ref()) {
        Some(b) => Ok(b),
        None => Err(read
            .and_then(|c| c.cluster_note.as_deref())
            .unwrap_or("the CloudNativePG Cluster was not read")),
    };
    Some(backup::resolve(
        &spec.upgrade.backup,
        &cnpg.cluster,
        cluster,
    ))
}

/// The `Hollo` the builders see: the Cluster's `max_connections` (when it states one) in
/// place of `database.maxConnections`, `upgrade.backup`'s method and plugin as
/// [`backup_method`] resolves them, and the referenced Secrets' hash on every pod.
pub fn effective(hollo: &Hollo, ext: &External) -> Hollo {
    let mut h = hollo.clone();
    if let Some(n) = ext.cnpg.as_ref().and_then(|c| c.max_connections) {
        h.spec.database.max_connections = n;
    }
    if let Some(Ok((method, plugin))) = backup_method(&hollo.spec, ext) {
        h.spec.upgrade.backup.method = Some(method);
        h.spec.upgrade.backup.plugin_configuration = plugin;
    }
    if let Some(hash) = &ext.secrets_hash {
        h.spec
            .pod
            .annotations
            .insert(SECRETS_HASH.into(), hash.clone());
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::CnpgSpec;
    use crate::testutil;
    use k8s_openapi::ByteString;

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        Secret {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    fn cnpg_spec(pooler: Option<&str>) -> HolloSpec {
        let mut spec = testutil::spec();
        spec.database.url_secret_ref = None;
        spec.database.cnpg = Some(CnpgSpec {
            cluster: "pg".into(),
            pooler: pooler.map(Into::into),
        });
        spec
    }

    fn app(password: &str) -> Secret {
        secret(&[
            ("uri", "postgresql://app:x@pg-rw.fedi:5432/app"),
            ("username", "app"),
            ("password", password),
            ("dbname", "app"),
        ])
    }

    #[test]
    fn a_missing_or_incomplete_app_secret_holds_the_reconcile() {
        let spec = cnpg_spec(None);
        let ext = External {
            cnpg: Some(Cnpg {
                secret: secret_state(None, &APP_SECRET_KEYS),
                max_connections: None,
                cluster_note: None,
                backup: None,
            }),
            secret_key: None,
            generated_key: None,
            admin_password: None,
            secrets_hash: None,
        };
        let hold = ext.hold(&spec).expect("held");
        assert_eq!(hold.reason, "SecretMissing");
        assert!(
            hold.message.contains("Secret pg-app not found"),
            "{}",
            hold.message
        );
        let partial = secret(&[("uri", "postgresql://…")]);
        let state = secret_state(Some(&partial), &APP_SECRET_KEYS);
        assert_eq!(
            state,
            SecretState::MissingKeys(vec!["username".into(), "password".into(), "dbname".into()])
        );
        let ext = External {
            cnpg: Some(Cnpg {
                secret: secret_state(Some(&app("p1")), &APP_SECRET_KEYS),
                max_connections: Some(200),
                cluster_note: None,
                backup: None,
            }),
            secret_key: None,
            generated_key: None,
            admin_password: None,
            secrets_hash: None,
        };
        assert_eq!(ext.hold(&spec), None);
        let c = &checks(&spec, &ext)[0];
        assert!(c.ok);
        assert!(c.message.contains("max_connections 200"), "{}", c.message);
    }

    #[test]
    fn the_clusters_max_connections_and_secret_hash_reach_the_builders() {
        let h = testutil::hollo(cnpg_spec(Some("pg-pooler")));
        let with = |password: &str, max| External {
            cnpg: Some(Cnpg {
                secret: secret_state(Some(&app(password)), &APP_SECRET_KEYS),
                max_connections: max,
                cluster_note: None,
                backup: None,
            }),
            secret_key: None,
            generated_key: None,
            admin_password: None,
            secrets_hash: Some(secrets_hash(
                &referenced_secrets(&h.spec),
                &[
                    ("pg-app".to_string(), Some(app(password))),
                    ("hollo-secret".to_string(), Some(secret(&[("key", "k")]))),
                ]
                .into(),
            )),
        };
        let e1 = effective(&h, &with("p1", Some(300)));
        assert_eq!(e1.spec.database.max_connections, 300);
        let e2 = effective(&h, &with("p2", None));
        assert_eq!(e2.spec.database.max_connections, 100, "spec value kept");
        let hash = |h: &Hollo| h.spec.pod.annotations.get(SECRETS_HASH).cloned();
        assert!(hash(&e1).is_some());
        assert_ne!(
            hash(&e1),
            hash(&e2),
            "a rotated password changes the pod template"
        );
        let template = |h: &Hollo| {
            crate::resources::web::deployment(h, "0.1.0", None)
                .spec
                .template
                .metadata
                .and_then(|m| m.annotations)
                .and_then(|a| a.get(SECRETS_HASH).cloned())
        };
        assert_eq!(template(&e1), hash(&e1));
        assert_eq!(effective(&h, &with("p1", Some(300))), e1, "stable");
    }

    /// `upgrade.backup` without a method takes the Cluster's (the builders see it in the
    /// effective spec); a Cluster without backups, or unread, is a reason instead.
    #[test]
    fn the_backup_method_comes_from_the_cluster_when_unset() {
        use crate::crd::BackupMethod;
        let mut spec = cnpg_spec(None);
        let with = |backup: Option<ClusterBackup>, note: Option<&str>| External {
            cnpg: Some(Cnpg {
                secret: secret_state(Some(&app("p")), &APP_SECRET_KEYS),
                max_connections: None,
                cluster_note: note.map(Into::into),
                backup,
            }),
            ..External::default()
        };
        let snapshots = with(Some(ClusterBackup::VolumeSnapshot), None);
        assert_eq!(backup_method(&spec, &snapshots), None, "not wanted");
        spec.upgrade.backup.enabled = true;
        assert_eq!(
            backup_method(&spec, &snapshots),
            Some(Ok((BackupMethod::VolumeSnapshot, None)))
        );
        let h = effective(&testutil::hollo(spec.clone()), &snapshots);
        assert_eq!(
            h.spec.upgrade.backup.method,
            Some(BackupMethod::VolumeSnapshot)
        );
        let b = crate::resources::backup::backup(&h).expect("a Backup");
        assert_eq!(b.data["spec"]["method"], "volumeSnapshot");

        let none = with(Some(ClusterBackup::None), None);
        let why = backup_method(&spec, &none).expect("wanted").unwrap_err();
        assert!(why.contains("Cluster pg has no backup configured"), "{why}");
        let h = effective(&testutil::hollo(spec.clone()), &none);
        assert_eq!(h.spec.upgrade.backup.method, None);
        assert!(crate::resources::backup::backup(&h).is_none());

        let unread = with(None, Some("CloudNativePG Cluster fedi/pg not found"));
        let why = backup_method(&spec, &unread).expect("wanted").unwrap_err();
        assert!(
            why.starts_with("CloudNativePG Cluster fedi/pg not found"),
            "{why}"
        );
    }

    #[test]
    fn max_connections_is_read_from_the_cluster_spec() {
        let mut c = DynamicObject::new("pg", &cluster_resource());
        c.data =
            serde_json::json!({"spec": {"postgresql": {"parameters": {"max_connections": "250"}}}});
        assert_eq!(cluster_max_connections(&c), Some(250));
        c.data = serde_json::json!({"spec": {"instances": 3}});
        assert_eq!(cluster_max_connections(&c), None);
    }

    #[test]
    fn upstream_secret_key_length_is_a_condition() {
        let mut spec = testutil::spec();
        spec.image.profile = ImageProfile::Upstream;
        let check = |key| {
            checks(
                &spec,
                &External {
                    cnpg: None,
                    secret_key: Some(key),
                    generated_key: None,
                    admin_password: None,
                    secrets_hash: None,
                },
            )
        };
        let short = check(Ok(32));
        assert_eq!((short[0].ok, short[0].reason), (false, "SecretKeyTooShort"));
        assert!(short[0].message.contains("has 32 characters"));
        assert!(check(Ok(64))[0].ok);
        assert_eq!(
            check(Err(SecretState::Missing))[0].reason,
            "SecretKeyMissing"
        );
        // A short key is reported, not held: the pods would say the same in their log.
        assert_eq!(
            External {
                cnpg: None,
                secret_key: Some(Ok(10)),
                generated_key: None,
                admin_password: None,
                secrets_hash: None,
            }
            .hold(&spec),
            None
        );
    }

    fn found(
        pairs: &[(&str, Option<Secret>)],
    ) -> std::collections::BTreeMap<String, Option<Secret>> {
        pairs
            .iter()
            .map(|(n, s)| (n.to_string(), s.clone()))
            .collect()
    }

    #[test]
    fn every_secret_the_pods_read_is_referenced_with_its_keys() {
        let mut spec = testutil::spec();
        spec.admin_token_ref = Some(crate::crd::SecretKeyRef {
            name: "hollo-admin".into(),
            key: "token".into(),
        });
        spec.database.direct_url_secret_ref = Some(crate::crd::SecretKeyRef {
            name: "hollo-db".into(),
            key: "direct".into(),
        });
        spec.storage.disk = crate::crd::Disk::S3;
        spec.storage.s3 = Some(crate::crd::S3Storage {
            secret_name: "hollo-s3".into(),
        });
        spec.env = vec![k8s_openapi::api::core::v1::EnvVar {
            name: "SMTP_PASSWORD".into(),
            value_from: Some(k8s_openapi::api::core::v1::EnvVarSource {
                secret_key_ref: Some(k8s_openapi::api::core::v1::SecretKeySelector {
                    name: "mail".into(),
                    key: "password".into(),
                    optional: None,
                }),
                ..Default::default()
            }),
            value: None,
        }];
        let refs = referenced_secrets(&spec);
        let keys = |k: &[&str]| Some(k.iter().map(|k| k.to_string()).collect());
        assert_eq!(
            refs,
            [
                ("hollo-admin".to_string(), keys(&["token"])),
                ("hollo-db".to_string(), keys(&["direct", "url"])),
                ("hollo-s3".to_string(), None),
                ("hollo-secret".to_string(), keys(&["key"])),
                ("mail".to_string(), keys(&["password"])),
            ]
            .into()
        );
        let cnpg = referenced_secrets(&cnpg_spec(Some("pg-pooler")));
        assert_eq!(
            cnpg["pg-app"],
            keys(&["dbname", "password", "uri", "username"])
        );
    }

    #[test]
    fn the_hash_follows_referenced_values_only() {
        let mut spec = testutil::spec();
        spec.storage.disk = crate::crd::Disk::S3;
        spec.storage.s3 = Some(crate::crd::S3Storage {
            secret_name: "hollo-s3".into(),
        });
        let refs = referenced_secrets(&spec);
        let base = |url: &str, other: &str, s3: &str| {
            secrets_hash(
                &refs,
                &found(&[
                    ("hollo-db", Some(secret(&[("url", url), ("unused", other)]))),
                    ("hollo-secret", Some(secret(&[("key", "k")]))),
                    ("hollo-s3", Some(secret(&[("S3_BUCKET", s3)]))),
                ]),
            )
        };
        let h = base("postgres://a", "x", "media");
        assert_eq!(h, base("postgres://a", "x", "media"), "stable");
        assert_ne!(h, base("postgres://b", "x", "media"), "a rotated URL rolls");
        assert_eq!(
            h,
            base("postgres://a", "y", "media"),
            "an unread key does not"
        );
        assert_ne!(
            h,
            base("postgres://a", "x", "media2"),
            "envFrom: every key counts"
        );
        let missing = secrets_hash(
            &refs,
            &found(&[
                ("hollo-db", None),
                ("hollo-secret", Some(secret(&[("key", "k")]))),
            ]),
        );
        assert_ne!(missing, h, "a Secret appearing changes the hash");
        // The hash reaches every pod template through `effective`.
        let hollo = testutil::hollo(spec);
        let e = effective(
            &hollo,
            &External {
                secrets_hash: Some(h.clone()),
                ..External::default()
            },
        );
        let worker = crate::resources::worker::deployment(&e, "0.1.0", None);
        let annotations = worker.spec.template.metadata.and_then(|m| m.annotations);
        assert_eq!(
            annotations.and_then(|a| a.get(SECRETS_HASH).cloned()),
            Some(h)
        );
    }
}
