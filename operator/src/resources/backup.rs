//! The CloudNativePG `Backup` taken before an upgrade migrates (R-OP-OPS,
//! `spec.upgrade.backup`). CloudNativePG may be absent, so it is a `DynamicObject`.

use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

use super::labels::{self, Component};
use crate::crd::Hollo;

/// Label value of `app.kubernetes.io/component` on the Backup.
pub const COMPONENT: &str = "backup";

pub fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("postgresql.cnpg.io", "v1", "Backup"),
        "backups",
    )
}

pub fn name(hollo: &Hollo) -> String {
    super::migration::backup_name(&hollo.name_any(), &hollo.spec.version)
}

/// The Backup of `database.cnpg.cluster` before migrating to `spec.version`; `None` without
/// `database.cnpg`. The cluster's configured method (CloudNativePG's default) is used.
pub fn backup(hollo: &Hollo) -> Option<DynamicObject> {
    let cnpg = hollo.spec.database.cnpg.as_ref()?;
    let mut meta = super::child_meta(
        hollo,
        name(hollo),
        Component::Migration,
        &hollo.spec.version,
    );
    if let Some(l) = meta.labels.as_mut() {
        l.insert(labels::COMPONENT.into(), COMPONENT.into());
    }
    let mut o = DynamicObject::new(&name(hollo), &resource());
    o.metadata = meta;
    o.data = serde_json::json!({"spec": {"cluster": {"name": cnpg.cluster}}});
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn a_backup_of_the_cnpg_cluster_named_by_the_target_version() {
        let mut spec = testutil::spec();
        assert!(backup(&testutil::hollo(spec.clone())).is_none());
        spec.database.url_secret_ref = None;
        spec.database.cnpg = Some(crate::crd::CnpgSpec {
            cluster: "pg".into(),
            pooler: None,
        });
        spec.version = "0.2.0".into();
        let b = backup(&testutil::hollo(spec)).expect("backup");
        let v = serde_json::to_value(&b).expect("json");
        assert_eq!(v["apiVersion"], "postgresql.cnpg.io/v1");
        assert_eq!(v["kind"], "Backup");
        assert_eq!(v["metadata"]["name"], "social-backup-0-2-0");
        assert_eq!(
            v["metadata"]["labels"]["app.kubernetes.io/component"],
            "backup"
        );
        assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "Hollo");
        assert_eq!(v["spec"], serde_json::json!({"cluster": {"name": "pg"}}));
    }
}
