//! No outage by mistake (R-OP-ZD, R-OP-UPG): a `spec.version` whose schema is older
//! than the database's is refused before anything stops, unless `spec.upgrade.allowDowngrade`.
//!
//! Pure. The database's schema is the one the running version (`status.currentVersion`)
//! migrated it to: that image's own `hollo version --json` `schemaVersion`. Only a version
//! *older* than the current one (dotted numbers, see [`older`]) is checked, so every upgrade
//! keeps its phases; both images are then probed with the version probe Jobs the rolling
//! strategy already uses, while the old pods keep serving.

use crate::resources::migration::VersionInfo;

/// What the check says about the target version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaCheck {
    /// Not a downgrade (or one explicitly allowed): nothing to check.
    NotNeeded,
    /// The version probes have not answered yet.
    Probing,
    /// A downgrade the images show to be safe: the target runs on the database's schema.
    Safe,
    /// Refused, and why (the condition's message).
    Refused(String),
}

/// The leading dotted numbers of a version: `v1.2.3-rc.1+b` → `[1, 2, 3]`. `None` when it does
/// not start with a number.
fn numbers(v: &str) -> Option<Vec<u64>> {
    let v = v.strip_prefix('v').unwrap_or(v);
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let head = &v[..end];
    let nums: Option<Vec<u64>> = head
        .trim_end_matches('.')
        .split('.')
        .map(|p| p.parse().ok())
        .collect();
    nums.filter(|n| !n.is_empty())
}

/// Whether `target` is an older version than `current`, comparing their dotted numbers
/// (`0.1.0` < `0.2.0`, `1.9` < `1.10`). Versions that are not dotted numbers (a digest, a
/// branch name) or that differ only after the numbers (`1.0.0-rc.1` against `1.0.0`) are not
/// known to be older: the check is not made for them.
pub fn older(target: &str, current: &str) -> bool {
    let (Some(mut t), Some(mut c)) = (numbers(target), numbers(current)) else {
        return false;
    };
    let len = t.len().max(c.len());
    t.resize(len, 0);
    c.resize(len, 0);
    t < c
}

/// A probe's `schemaVersion` as a number (the runtime reports its newest migration's
/// version, an integer; a numeric string is read too).
pub fn schema_of(info: &VersionInfo) -> Option<i64> {
    match &info.schema_version {
        serde_json::Value::Number(n) => n.as_i64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Compares the probes of the running (`database`) and the target image.
pub fn judge(target: &str, database: &VersionInfo, new: &VersionInfo) -> SchemaCheck {
    // R-OP-ZD: a binary refuses a database with a post-deploy migration it does not
    // carry, whatever its pre-deploy schema (an image without expand/contract migrations
    // reports none: 0).
    let post = |i: &VersionInfo| match &i.post_schema_version {
        serde_json::Value::Null => Some(0),
        v => schema_of(&VersionInfo {
            schema_version: v.clone(),
            ..VersionInfo::default()
        }),
    };
    if let (Some(db), Some(t)) = (post(database), post(new))
        && t < db
    {
        return SchemaCheck::Refused(format!(
            "version {target} carries post-deploy schema {t}, older than the database's {db} \
             (contracted by {}): it would refuse to start; nothing was stopped",
            database.version
        ));
    }
    match (schema_of(database), schema_of(new)) {
        (Some(db), Some(t)) if t >= db => SchemaCheck::Safe,
        (Some(db), Some(t)) => SchemaCheck::Refused(format!(
            "version {target} runs schema {t}, older than the database's {db} (migrated by {}); \
             nothing was stopped. Set spec.upgrade.allowDowngrade only if {target} is known to \
             run on the newer schema",
            database.version
        )),
        _ => SchemaCheck::Refused(format!(
            "version {target} is older than {} and the images' schema versions cannot be \
             compared ({:?} against {:?}); nothing was stopped. Set spec.upgrade.allowDowngrade \
             to downgrade anyway",
            database.version, new.schema_version, database.schema_version
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(version: &str, schema: serde_json::Value) -> VersionInfo {
        VersionInfo {
            version: version.into(),
            schema_version: schema,
            task_definition_version: json!(1),
            ..VersionInfo::default()
        }
    }

    #[test]
    fn only_dotted_numbers_that_go_down_are_older() {
        assert!(older("0.1.0", "0.2.0"));
        assert!(older("1.9.9", "1.10.0"));
        assert!(older("v1.2", "1.2.1"));
        assert!(older("0.1.0", "0.1.1-e2e"));
        assert!(!older("0.2.0", "0.1.0"), "an upgrade");
        assert!(!older("0.1.0", "0.1.0"));
        assert!(
            !older("1.0.0-rc.1", "1.0.0"),
            "same numbers: not known older"
        );
        assert!(!older("latest", "0.2.0"));
        assert!(!older("0.1.0", "sha256-abc"));
        assert!(!older("1.0", "1.0.0"));
    }

    #[test]
    fn a_target_schema_below_the_databases_is_refused() {
        let db = info("0.2.0", json!(20991231000001_i64));
        assert_eq!(
            judge("0.1.0", &db, &info("0.1.0", json!(20991231000001_i64))),
            SchemaCheck::Safe,
            "same schema: a safe downgrade"
        );
        match judge("0.1.0", &db, &info("0.1.0", json!("20260101000000"))) {
            SchemaCheck::Refused(why) => {
                assert!(why.contains("schema 20260101000000"), "{why}");
                assert!(why.contains("database's 20991231000001"), "{why}");
                assert!(why.contains("allowDowngrade"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            judge("0.1.0", &db, &info("0.1.0", json!("abc"))),
            SchemaCheck::Refused(_)
        ));
        // R-OP-ZD: the same pre-deploy schema, but the database was contracted by a
        // post-deploy migration the target does not carry.
        let contracted = VersionInfo {
            post_schema_version: json!(20991231000002_i64),
            ..info("0.2.0", json!(20991231000001_i64))
        };
        match judge(
            "0.1.0",
            &contracted,
            &info("0.1.0", json!(20991231000001_i64)),
        ) {
            SchemaCheck::Refused(why) => assert!(why.contains("post-deploy"), "{why}"),
            other => panic!("{other:?}"),
        }
        let carried = VersionInfo {
            post_schema_version: json!(20991231000002_i64),
            ..info("0.1.0", json!(20991231000001_i64))
        };
        assert_eq!(judge("0.1.0", &contracted, &carried), SchemaCheck::Safe);
    }
}
