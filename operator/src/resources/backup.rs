//! The CloudNativePG `Backup` taken before an upgrade migrates (R-OP-OPS,
//! `spec.upgrade.backup`). CloudNativePG may be absent, so it is a `DynamicObject`.
//!
//! Its `method` is never left to CloudNativePG's default (`barmanObjectStore`, deprecated
//! there, and failing on a Cluster that backs up through the Barman Cloud plugin or volume
//! snapshots): `upgrade.backup.method`, else what the Cluster's own backup configuration
//! says ([`cluster_backup`], [`resolve`]). Field names follow CloudNativePG's `BackupSpec`
//! (`postgresql.cnpg.io/v1`, 1.27).

use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

use super::labels::{self, Component};
use crate::crd::{BackupMethod, BackupPluginConfiguration, Hollo, UpgradeBackupSpec};

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

/// What a CloudNativePG Cluster's spec configures for its backups, in the order the upgrade
/// Backup's method defaults from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterBackup {
    /// `spec.backup.volumeSnapshot`.
    VolumeSnapshot,
    /// An enabled plugin of `spec.plugins` marked `isWALArchiver` (its name).
    Plugin(String),
    /// `spec.backup.barmanObjectStore`.
    BarmanObjectStore,
    /// None of them: the Cluster takes no backups.
    None,
}

/// The backup configuration of the Cluster `cluster` (as read).
pub fn cluster_backup(cluster: &DynamicObject) -> ClusterBackup {
    let spec = &cluster.data["spec"];
    let set = |v: &serde_json::Value| !v.is_null();
    if set(&spec["backup"]["volumeSnapshot"]) {
        return ClusterBackup::VolumeSnapshot;
    }
    let archiver = spec["plugins"].as_array().into_iter().flatten().find(|p| {
        p["isWALArchiver"].as_bool() == Some(true) && p["enabled"].as_bool() != Some(false)
    });
    if let Some(name) = archiver.and_then(|p| p["name"].as_str()) {
        return ClusterBackup::Plugin(name.to_string());
    }
    if set(&spec["backup"]["barmanObjectStore"]) {
        return ClusterBackup::BarmanObjectStore;
    }
    ClusterBackup::None
}

/// The method (and, for `plugin`, the plugin) the Backup is taken with: the spec's, the rest
/// from the Cluster's configuration (`None`: the Cluster could not be read, and why). `Err`
/// says why no Backup can be asked for.
pub fn resolve(
    spec: &UpgradeBackupSpec,
    cluster_name: &str,
    cluster: Result<&ClusterBackup, &str>,
) -> Result<(BackupMethod, Option<BackupPluginConfiguration>), String> {
    let archiver = match cluster {
        Ok(ClusterBackup::Plugin(name)) => Some(BackupPluginConfiguration {
            name: name.clone(),
            parameters: Default::default(),
        }),
        _ => None,
    };
    match spec.method {
        Some(BackupMethod::Plugin) => match spec.plugin_configuration.clone().or(archiver) {
            Some(plugin) => Ok((BackupMethod::Plugin, Some(plugin))),
            None => Err(format!(
                "upgrade.backup.method is plugin but names no plugin \
                 (upgrade.backup.pluginConfiguration.name), and CloudNativePG Cluster \
                 {cluster_name} has no WAL-archiver plugin to take it from"
            )),
        },
        Some(method) => Ok((method, None)),
        None => match cluster {
            Ok(ClusterBackup::VolumeSnapshot) => Ok((BackupMethod::VolumeSnapshot, None)),
            Ok(ClusterBackup::Plugin(_)) => Ok((BackupMethod::Plugin, archiver)),
            Ok(ClusterBackup::BarmanObjectStore) => Ok((BackupMethod::BarmanObjectStore, None)),
            Ok(ClusterBackup::None) => Err(format!(
                "CloudNativePG Cluster {cluster_name} has no backup configured (no \
                 spec.backup.volumeSnapshot, no WAL-archiver plugin in spec.plugins, no \
                 spec.backup.barmanObjectStore), so there is nothing to back up with before \
                 migrating: configure the Cluster's backups, set upgrade.backup.method, or \
                 disable upgrade.backup"
            )),
            Err(why) => Err(format!(
                "{why}: the backup method cannot be taken from it; set upgrade.backup.method"
            )),
        },
    }
}

/// The Backup of `database.cnpg.cluster` before migrating to `spec.version`; `None` without
/// `database.cnpg` or without a method (`upgrade.backup.method`, filled from the Cluster by
/// the reconcile when unset: see [`resolve`]).
pub fn backup(hollo: &Hollo) -> Option<DynamicObject> {
    let cnpg = hollo.spec.database.cnpg.as_ref()?;
    let want = &hollo.spec.upgrade.backup;
    let method = want.method?;
    let mut meta = super::child_meta(
        hollo,
        name(hollo),
        Component::Migration,
        &hollo.spec.version,
    );
    if let Some(l) = meta.labels.as_mut() {
        l.insert(labels::COMPONENT.into(), COMPONENT.into());
    }
    let mut spec = serde_json::json!({"cluster": {"name": cnpg.cluster}, "method": method});
    if method == BackupMethod::Plugin
        && let Some(plugin) = &want.plugin_configuration
    {
        spec["pluginConfiguration"] = serde_json::json!(plugin);
    }
    if let Some(online) = want.online {
        spec["online"] = online.into();
    }
    if let Some(target) = want.target {
        spec["target"] = serde_json::json!(target);
    }
    let mut o = DynamicObject::new(&name(hollo), &resource());
    o.metadata = meta;
    o.data = serde_json::json!({ "spec": spec });
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{BackupTarget, CnpgSpec};
    use crate::testutil;
    use serde_json::json;

    fn cnpg_hollo(backup: UpgradeBackupSpec) -> Hollo {
        let mut spec = testutil::spec();
        spec.database.url_secret_ref = None;
        spec.database.cnpg = Some(CnpgSpec {
            cluster: "pg".into(),
            pooler: None,
        });
        spec.version = "0.2.0".into();
        spec.upgrade.backup = UpgradeBackupSpec {
            enabled: true,
            ..backup
        };
        testutil::hollo(spec)
    }

    fn cluster(spec: serde_json::Value) -> DynamicObject {
        let mut c = DynamicObject::new("pg", &crate::reconcile::external::cluster_resource());
        c.data = json!({ "spec": spec });
        c
    }

    #[test]
    fn a_backup_of_the_cnpg_cluster_named_by_the_target_version() {
        assert!(backup(&testutil::hollo(testutil::spec())).is_none());
        let b = backup(&cnpg_hollo(UpgradeBackupSpec {
            method: Some(BackupMethod::VolumeSnapshot),
            ..UpgradeBackupSpec::default()
        }))
        .expect("backup");
        let v = serde_json::to_value(&b).expect("json");
        assert_eq!(v["apiVersion"], "postgresql.cnpg.io/v1");
        assert_eq!(v["kind"], "Backup");
        assert_eq!(v["metadata"]["name"], "social-backup-0-2-0");
        assert_eq!(
            v["metadata"]["labels"]["app.kubernetes.io/component"],
            "backup"
        );
        assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "Hollo");
        // F-backup-method: never CloudNativePG's implicit (deprecated) barmanObjectStore.
        assert_eq!(
            v["spec"],
            json!({"cluster": {"name": "pg"}, "method": "volumeSnapshot"})
        );
    }

    #[test]
    fn no_method_no_backup() {
        assert!(backup(&cnpg_hollo(UpgradeBackupSpec::default())).is_none());
    }

    /// Every field CloudNativePG's BackupSpec takes from `upgrade.backup`, spelled as it is.
    #[test]
    fn plugin_online_and_target_reach_the_backup() {
        let b = backup(&cnpg_hollo(UpgradeBackupSpec {
            method: Some(BackupMethod::Plugin),
            plugin_configuration: Some(BackupPluginConfiguration {
                name: "barman-cloud.cloudnative-pg.io".into(),
                parameters: [("barmanObjectName".to_string(), "store".to_string())].into(),
            }),
            online: Some(false),
            target: Some(BackupTarget::PreferStandby),
            ..UpgradeBackupSpec::default()
        }))
        .expect("backup");
        assert_eq!(
            b.data["spec"],
            json!({"cluster": {"name": "pg"}, "method": "plugin",
                   "pluginConfiguration": {"name": "barman-cloud.cloudnative-pg.io",
                                           "parameters": {"barmanObjectName": "store"}},
                   "online": false, "target": "prefer-standby"})
        );
        let b = backup(&cnpg_hollo(UpgradeBackupSpec {
            method: Some(BackupMethod::BarmanObjectStore),
            target: Some(BackupTarget::Primary),
            ..UpgradeBackupSpec::default()
        }))
        .expect("backup");
        assert_eq!(
            b.data["spec"],
            json!({"cluster": {"name": "pg"}, "method": "barmanObjectStore", "target": "primary"})
        );
    }

    #[test]
    fn the_clusters_backup_configuration_is_read_in_order() {
        let snapshot = json!({"volumeSnapshot": {"className": "csi-snap"}});
        let barman = json!({"barmanObjectStore": {"destinationPath": "s3://b/"}});
        let archiver = |enabled: Option<bool>| {
            let mut p = json!({"name": "barman-cloud.cloudnative-pg.io", "isWALArchiver": true,
                               "parameters": {"barmanObjectName": "store"}});
            if let Some(e) = enabled {
                p["enabled"] = e.into();
            }
            p
        };
        let cases = [
            (json!({"instances": 1}), ClusterBackup::None),
            (json!({"backup": barman}), ClusterBackup::BarmanObjectStore),
            (
                json!({"backup": {"volumeSnapshot": snapshot["volumeSnapshot"],
                                  "barmanObjectStore": barman["barmanObjectStore"]}}),
                ClusterBackup::VolumeSnapshot,
            ),
            (
                json!({"plugins": [archiver(None)]}),
                ClusterBackup::Plugin("barman-cloud.cloudnative-pg.io".into()),
            ),
            (
                json!({"plugins": [archiver(Some(true))], "backup": snapshot}),
                ClusterBackup::VolumeSnapshot,
            ),
            // A plugin that does not archive WAL, or a disabled one, takes no backups here.
            (
                json!({"plugins": [{"name": "other.example", "isWALArchiver": false}]}),
                ClusterBackup::None,
            ),
            (
                json!({"plugins": [archiver(Some(false))], "backup": barman}),
                ClusterBackup::BarmanObjectStore,
            ),
            // `backup` with only a retention policy or a target names no method.
            (
                json!({"backup": {"target": "primary", "retentionPolicy": "30d"}}),
                ClusterBackup::None,
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(cluster_backup(&cluster(spec.clone())), want, "{spec}");
        }
    }

    #[test]
    fn the_method_defaults_from_the_cluster() {
        let unset = UpgradeBackupSpec::default();
        let plugin = ClusterBackup::Plugin("barman-cloud.cloudnative-pg.io".into());
        let named = |n: &str| {
            Some(BackupPluginConfiguration {
                name: n.into(),
                parameters: Default::default(),
            })
        };
        assert_eq!(
            resolve(&unset, "pg", Ok(&ClusterBackup::VolumeSnapshot)),
            Ok((BackupMethod::VolumeSnapshot, None))
        );
        assert_eq!(
            resolve(&unset, "pg", Ok(&plugin)),
            Ok((
                BackupMethod::Plugin,
                named("barman-cloud.cloudnative-pg.io")
            ))
        );
        assert_eq!(
            resolve(&unset, "pg", Ok(&ClusterBackup::BarmanObjectStore)),
            Ok((BackupMethod::BarmanObjectStore, None))
        );
        let none = resolve(&unset, "pg", Ok(&ClusterBackup::None)).unwrap_err();
        assert!(
            none.contains("Cluster pg has no backup configured"),
            "{none}"
        );
        let unread = resolve(&unset, "pg", Err("CloudNativePG Cluster fedi/pg not found"));
        assert!(
            unread
                .unwrap_err()
                .contains("not found: the backup method cannot be taken from it"),
        );

        // The spec's method wins over the Cluster's; plugin takes the Cluster's archiver
        // unless it names its own plugin.
        let explicit = |method, plugin| UpgradeBackupSpec {
            method: Some(method),
            plugin_configuration: plugin,
            ..UpgradeBackupSpec::default()
        };
        assert_eq!(
            resolve(
                &explicit(BackupMethod::BarmanObjectStore, None),
                "pg",
                Ok(&plugin)
            ),
            Ok((BackupMethod::BarmanObjectStore, None))
        );
        assert_eq!(
            resolve(
                &explicit(BackupMethod::VolumeSnapshot, None),
                "pg",
                Err("unreadable")
            ),
            Ok((BackupMethod::VolumeSnapshot, None)),
            "an explicit method needs nothing from the Cluster"
        );
        assert_eq!(
            resolve(&explicit(BackupMethod::Plugin, None), "pg", Ok(&plugin)),
            Ok((
                BackupMethod::Plugin,
                named("barman-cloud.cloudnative-pg.io")
            ))
        );
        assert_eq!(
            resolve(
                &explicit(BackupMethod::Plugin, named("mine.example")),
                "pg",
                Ok(&plugin)
            ),
            Ok((BackupMethod::Plugin, named("mine.example")))
        );
        let nameless = resolve(
            &explicit(BackupMethod::Plugin, None),
            "pg",
            Ok(&ClusterBackup::VolumeSnapshot),
        )
        .unwrap_err();
        assert!(nameless.contains("names no plugin"), "{nameless}");
    }
}
