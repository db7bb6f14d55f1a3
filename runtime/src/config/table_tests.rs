//! The configuration table's own tests (issue 62, issue 64 item 4): every default passes its
//! variable's own check, the code enforces the table's ranges (not ranges of its own), one
//! parser per kind of value, and the ranges a meaning writes out are the table's.

use super::env::{FALSE_WORDS, TRUE_WORDS};
use super::vars::{self, Kind, Max, Unset, Var};
use super::*;

fn valid<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Config {
    Config::from_env(&Env::from_pairs(pairs)).expect("a valid configuration")
}

/// The table's integers with their range (the cap of a `Max::Of` is the default of the
/// variable it names).
fn integers<'a>(vars: impl Iterator<Item = &'a Var>) -> Vec<(&'a Var, i64, i64)> {
    vars.filter_map(|var| match var.kind {
        Kind::Int { min, max, .. } => Some((
            var,
            min,
            match max {
                Max::Value(max) => max,
                Max::Of(other) => other.int_default(),
            },
        )),
        _ => None,
    })
    .collect()
}

#[test]
fn every_default_passes_its_own_check() {
    for var in vars::all() {
        let default = match (var.default, var.kind) {
            (Unset::Int(v), Kind::Int { .. }) => v.to_string(),
            (Unset::Bool(b), Kind::Bool) => b.to_string(),
            (
                Unset::Text(t),
                Kind::OneOf(_) | Kind::Text | Kind::Path | Kind::LogFilter | Kind::Url(_),
            ) => t.to_string(),
            (Unset::Nothing | Unset::Derived(_), _) => continue,
            (default, kind) => panic!("{}: a default {default:?} for {kind:?}", var.name),
        };
        var.check(&default)
            .unwrap_or_else(|e| panic!("{}: its default {default:?} is refused: {e}", var.name));
    }
    // The settings' `Default` are the table's defaults.
    let c = valid([]);
    assert_eq!(c.http, HttpLimits::default());
    assert_eq!(c.streams, StreamLimits::default());
    assert_eq!(c.imports, ImportLimits::default());
    assert_eq!(c.writes, WriteLimits::default());
    assert_eq!(c.media, MediaConfig::default());
}

#[test]
fn names_are_unique_capitals_and_bounds_are_ordered() {
    let mut names: Vec<&str> = vars::all()
        .flat_map(|v| std::iter::once(v.name).chain(v.alias))
        .collect();
    assert!(names.len() > 70, "{names:?}");
    for name in &names {
        assert!(
            name.len() >= 3
                && name.starts_with(|c: char| c.is_ascii_uppercase())
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
            "{name}"
        );
    }
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), count, "a variable is in the table twice");
    for (var, min, max) in integers(vars::all()) {
        assert!(min <= max, "{}: {min} > {max}", var.name);
        if let Unset::Int(default) = var.default {
            assert!((min..=max).contains(&default), "{}", var.name);
        }
        if let Kind::Int {
            max: Max::Of(other),
            ..
        } = var.kind
        {
            assert!(matches!(other.kind, Kind::Int { .. }), "{}", var.name);
        }
    }
}

/// Each integer of a node, alone, is refused one past either end of its range and accepted at
/// both ends (unless another variable's own rule bounds it, as `TASK_CONCURRENCY` bounds
/// `REPLY_CONCURRENCY`): the code reads the table's range.
#[test]
fn the_code_enforces_the_tables_ranges() {
    let node = vars::NODE.iter().flat_map(|row| row.vars.iter().copied());
    for (var, min, max) in integers(node) {
        for outside in [min - 1, max + 1] {
            let value = outside.to_string();
            let err = Config::from_env(&Env::from_pairs([(var.name, value.as_str())]))
                .expect_err("out of range");
            assert!(
                matches!(&err, ConfigError::Invalid { var: v, .. } if *v == var.name),
                "{}={value}: {err}",
                var.name
            );
        }
        for inside in [min, max] {
            let value = inside.to_string();
            if let Err(err) = Config::from_env(&Env::from_pairs([(var.name, value.as_str())])) {
                assert!(
                    matches!(err, ConfigError::Inconsistent(_)),
                    "{}={value}: {err}",
                    var.name
                );
            }
        }
    }
    // The lenient readers of the maintenance page keep to the table's range too.
    let retry = &vars::RETRY_AFTER_SECONDS;
    let page = |v: i64| {
        crate::maintenance_page::retry_after_from(&Env::from_pairs([(
            retry.name,
            v.to_string().as_str(),
        )]))
    };
    assert_eq!(page(retry.int_max()), retry.int_max() as u64);
    assert_eq!(page(retry.int_max() + 1), retry.int_default() as u64);
}

#[test]
fn every_boolean_is_parsed_one_way() {
    let booleans: Vec<&Var> = vars::all()
        .filter(|v| matches!(v.kind, Kind::Bool))
        .collect();
    assert_eq!(booleans.len(), 4, "{booleans:?}");
    for var in booleans {
        for (words, want) in [(TRUE_WORDS, true), (FALSE_WORDS, false)] {
            for word in words {
                for spelled in [word.to_string(), word.to_uppercase(), format!(" {word} ")] {
                    let env = Env::from_pairs([(var.name, spelled.as_str())]);
                    assert_eq!(env.bool(var), Ok(want), "{}={spelled:?}", var.name);
                }
            }
        }
        for bad in ["maybe", "2", "y"] {
            let err = Env::from_pairs([(var.name, bad)]).bool(var).unwrap_err();
            assert!(err.to_string().contains(var.name), "{err}");
        }
    }
    // The settings read them so.
    let c = valid([
        ("BEHIND_PROXY", " On "),
        ("ALLOW_PRIVATE_ADDRESS", "YES"),
        ("PREVIEW_CARDS", "0"),
        ("DRIVE_DISK", "s3"),
        ("S3_BUCKET", "b"),
        ("STORAGE_URL_BASE", "https://cdn.example"),
        ("S3_FORCE_PATH_STYLE", "True"),
    ]);
    assert!(c.behind_proxy && c.federation.allow_private_address && !c.federation.preview_cards);
    assert!(matches!(
        c.media.drive,
        DriveConfig::S3(S3Config {
            force_path_style: true,
            ..
        })
    ));
}

#[test]
fn every_choice_is_parsed_one_way() {
    for var in vars::all() {
        let Kind::OneOf(values) = var.kind else {
            continue;
        };
        for value in values {
            for spelled in [
                value.to_string(),
                value.to_uppercase(),
                format!(" {value} "),
            ] {
                let env = Env::from_pairs([(var.name, spelled.as_str())]);
                assert_eq!(
                    env.choice(var),
                    Ok(Some(*value)),
                    "{}={spelled:?}",
                    var.name
                );
            }
        }
        let err = Env::from_pairs([(var.name, "nope")])
            .choice(var)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(var.name) && err.contains(&format!("one of: {}", values.join(", "))),
            "{err}"
        );
    }
    assert_eq!(valid([("NODE_TYPE", " Web ")]).role, Role::Web);
    assert_eq!(valid([("LOG_FORMAT", "JSON")]).log_format, LogFormat::Json);
    assert_eq!(
        valid([("DRIVE_DISK", "FS"), ("FS_STORAGE_PATH", " /srv/media ")])
            .media
            .drive,
        DriveConfig::Fs {
            path: "/srv/media".into()
        }
    );
}

/// `a–b` (an en dash between two numbers) in `text`.
fn written_ranges(text: &str) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for (at, dash) in text.match_indices('–') {
        let before = text[..at]
            .chars()
            .rev()
            .take_while(char::is_ascii_digit)
            .collect::<String>();
        let after = text[at + dash.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>();
        let before: String = before.chars().rev().collect();
        if let (Ok(a), Ok(b)) = (before.parse(), after.parse()) {
            out.push((a, b));
        }
    }
    out
}

#[test]
fn ranges_written_in_a_meaning_are_the_tables() {
    assert_eq!(
        written_ranges("(1–3600); (0 – `X`) and 1–1000000 / 1–604800"),
        [(1, 3600), (1, 1_000_000), (1, 604_800)]
    );
    let mut checked = 0;
    for row in vars::NODE.iter().chain(vars::LOCAL) {
        let ranges: Vec<(i64, i64)> = integers(row.vars.iter().copied())
            .into_iter()
            .map(|(_, min, max)| (min, max))
            .collect();
        for range in written_ranges(row.meaning) {
            assert!(
                ranges.contains(&range),
                "the meaning of {:?} says {range:?}, the table {ranges:?}",
                row.vars.iter().map(|v| v.name).collect::<Vec<_>>()
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "{checked} ranges found in the meanings");
}
