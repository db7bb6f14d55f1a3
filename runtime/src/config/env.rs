//! The environment as the configuration reads it, and the start-up error it gives. Every
//! getter takes a variable of the table (`vars`), parses its value — or, unset, the table's
//! default — the way the table says, and names the variable and what it allows when the value
//! does not fit: one parser per kind of value, so two variables of a kind never disagree.

use std::collections::HashMap;
use std::time::Duration;

use super::Secret;
use super::vars::{Kind, Max, Unit, Unset, UrlRule, Var};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("invalid {var}={value:?}: expected {expected}")]
    Invalid {
        var: &'static str,
        value: String,
        expected: String,
    },
    #[error("{0}")]
    Inconsistent(String),
}

/// The words a boolean variable accepts, in any case: true first, then false.
pub const TRUE_WORDS: [&str; 4] = ["1", "true", "yes", "on"];
pub const FALSE_WORDS: [&str; 4] = ["0", "false", "no", "off"];

/// A view over the environment, so tests can validate configuration without touching the
/// process environment (which is shared between parallel tests).
#[derive(Default)]
pub struct Env(HashMap<String, String>);

impl Env {
    /// The process environment. A value that is not UTF-8 is read with its invalid bytes
    /// replaced (`std::env::vars` would panic on it, whatever variable it is).
    pub fn from_process() -> Self {
        Env(std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect())
    }

    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Env(pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    /// The name `var` is set under (its own, else its alias) and its value, if not blank.
    fn lookup(&self, var: &Var) -> Option<(&'static str, &str)> {
        std::iter::once(var.name).chain(var.alias).find_map(|name| {
            let value = self.0.get(name)?;
            (!value.trim().is_empty()).then_some((name, value.as_str()))
        })
    }

    /// The value set for `var`, as given, if not blank.
    pub fn get(&self, var: &Var) -> Option<&str> {
        self.lookup(var).map(|(_, value)| value)
    }

    /// The value of a variable a user names at run time (`account create --password-env
    /// VAR`), as given, if not blank. Not a setting, so not in the table; a name written in
    /// the code is read with [`Env::get`] and a `&vars::Var` (docs.rs checks that none is
    /// read here).
    pub fn user_named(&self, name: &str) -> Option<&str> {
        self.0
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }

    /// An integer variable within the table's range, or its default.
    pub fn int<T: TryFrom<i64>>(&self, var: &Var) -> Result<T, ConfigError> {
        let (Kind::Int { max, .. }, Unset::Int(default)) = (var.kind, var.default) else {
            return Err(defect(var, "an integer with a default"));
        };
        let Max::Value(max) = max else {
            return Err(defect(var, "an integer with a fixed maximum (`int_with`)"));
        };
        self.int_with(var, default, max)
    }

    /// An integer variable whose default or maximum is computed at start (`Unset::Derived`,
    /// `Max::Of`): from the table's minimum to `max`, `default` when unset.
    pub fn int_with<T: TryFrom<i64>>(
        &self,
        var: &Var,
        default: i64,
        max: i64,
    ) -> Result<T, ConfigError> {
        let Kind::Int { min, unit, .. } = var.kind else {
            return Err(defect(var, "an integer"));
        };
        let v = match self.lookup(var) {
            None => default,
            Some((name, raw)) => parse_int(name, raw, min, max, unit)?,
        };
        T::try_from(v).map_err(|_| defect(var, "a range its type holds"))
    }

    /// An integer variable when it is set and valid; `None` otherwise (a lenient reader that
    /// falls back to a default of its own).
    pub fn int_if_valid<T: TryFrom<i64>>(&self, var: &Var) -> Option<T> {
        let Kind::Int { min, max, unit } = var.kind else {
            return None;
        };
        let max = max_of(max);
        let (name, raw) = self.lookup(var)?;
        let v = parse_int(name, raw, min, max, unit).ok()?;
        T::try_from(v).ok()
    }

    /// A duration variable (seconds or milliseconds, as the table says).
    pub fn duration(&self, var: &Var) -> Result<Duration, ConfigError> {
        let v: u64 = self.int(var)?;
        match var.kind {
            Kind::Int {
                unit: Unit::Seconds,
                ..
            } => Ok(Duration::from_secs(v)),
            Kind::Int {
                unit: Unit::Millis, ..
            } => Ok(Duration::from_millis(v)),
            _ => Err(defect(var, "a duration")),
        }
    }

    /// A boolean variable, or its default.
    pub fn bool(&self, var: &Var) -> Result<bool, ConfigError> {
        match (self.lookup(var), var.default) {
            (Some((name, raw)), _) => parse_bool(name, raw),
            (None, Unset::Bool(default)) => Ok(default),
            (None, _) => Err(defect(var, "a boolean with a default")),
        }
    }

    /// One of the table's words (as the table writes it), its default, or `None` when it has
    /// none (`Unset::Derived`: the caller decides).
    pub fn choice(&self, var: &Var) -> Result<Option<&'static str>, ConfigError> {
        let Kind::OneOf(values) = var.kind else {
            return Err(defect(var, "a choice"));
        };
        match (self.lookup(var), var.default) {
            (Some((name, raw)), _) => parse_choice(name, values, raw).map(Some),
            (None, Unset::Text(default)) => parse_choice(var.name, values, default).map(Some),
            (None, _) => Ok(None),
        }
    }

    /// A URL variable, trimmed and checked by its rule; `None` when unset.
    pub fn url(&self, var: &Var) -> Result<Option<String>, ConfigError> {
        let Kind::Url(rule) = var.kind else {
            return Err(defect(var, "a URL"));
        };
        self.lookup(var)
            .map(|(name, raw)| parse_url(name, rule, raw))
            .transpose()
    }

    /// A secret variable, as given (never trimmed: every character counts); `None` when
    /// unset.
    pub fn secret(&self, var: &Var) -> Result<Option<Secret>, ConfigError> {
        let Kind::Secret { min_len } = var.kind else {
            return Err(defect(var, "a secret"));
        };
        self.lookup(var)
            .map(|(name, raw)| parse_secret(name, min_len, raw))
            .transpose()
    }

    /// A text or path variable, trimmed, or its default; `None` when it has neither.
    pub fn text(&self, var: &Var) -> Option<String> {
        match (self.get(var), var.default) {
            (Some(raw), _) => Some(raw.trim().to_string()),
            (None, Unset::Text(default)) => Some(default.to_string()),
            (None, _) => None,
        }
    }

    /// A path variable (trimmed), or its default.
    pub fn path(&self, var: &Var) -> Option<std::path::PathBuf> {
        self.text(var).map(std::path::PathBuf::from)
    }

    /// A log filter variable (or its alias), or its default.
    pub fn log_filter(&self, var: &Var) -> Result<tracing_subscriber::EnvFilter, ConfigError> {
        match (self.lookup(var), var.default) {
            (Some((name, raw)), _) => parse_log_filter(name, raw),
            (None, Unset::Text(default)) => parse_log_filter(var.name, default),
            (None, _) => Err(defect(var, "a log filter with a default")),
        }
    }
}

impl Var {
    /// Checks `raw` as if this variable were set to it: what a node would say at start.
    pub fn check(&self, raw: &str) -> Result<(), ConfigError> {
        let name = self.name;
        match self.kind {
            Kind::Int { min, max, unit } => parse_int(name, raw, min, max_of(max), unit).map(drop),
            Kind::Bool => parse_bool(name, raw).map(drop),
            Kind::OneOf(values) => parse_choice(name, values, raw).map(drop),
            Kind::Url(rule) => parse_url(name, rule, raw).map(drop),
            Kind::Secret { min_len } => parse_secret(name, min_len, raw).map(drop),
            Kind::Text | Kind::Path => Ok(()),
            Kind::LogFilter => parse_log_filter(name, raw).map(drop),
        }
    }
}

/// The widest maximum of an integer: its own, or that of the variable bounding it.
fn max_of(max: Max) -> i64 {
    match max {
        Max::Value(v) => v,
        Max::Of(other) => match other.kind {
            Kind::Int { max, .. } => max_of(max),
            _ => i64::MAX,
        },
    }
}

/// A variable read other than as the table says: a defect of the code, not of the value (the
/// table's tests read every variable through its getter).
fn defect(var: &Var, needs: &str) -> ConfigError {
    ConfigError::Inconsistent(format!(
        "{} is read as {needs}, which its entry in the configuration table is not",
        var.name
    ))
}

fn parse_int(
    name: &'static str,
    raw: &str,
    min: i64,
    max: i64,
    unit: Unit,
) -> Result<i64, ConfigError> {
    let expected = match unit {
        Unit::Seconds => format!("a whole number of seconds from {min} to {max}"),
        _ => format!("an integer from {min} to {max}"),
    };
    let v: i64 = raw.trim().parse().map_err(|_| ConfigError::Invalid {
        var: name,
        value: raw.to_string(),
        expected: expected.clone(),
    })?;
    if v < min || v > max {
        return Err(ConfigError::Invalid {
            var: name,
            value: v.to_string(),
            expected,
        });
    }
    Ok(v)
}

/// The one boolean parser of the configuration: [`TRUE_WORDS`] and [`FALSE_WORDS`], in any
/// case, around spaces.
pub fn parse_bool(name: &'static str, raw: &str) -> Result<bool, ConfigError> {
    let v = raw.trim().to_ascii_lowercase();
    if TRUE_WORDS.contains(&v.as_str()) {
        Ok(true)
    } else if FALSE_WORDS.contains(&v.as_str()) {
        Ok(false)
    } else {
        Err(ConfigError::Invalid {
            var: name,
            value: v,
            expected: "true or false".into(),
        })
    }
}

fn parse_choice(
    name: &'static str,
    values: &'static [&'static str],
    raw: &str,
) -> Result<&'static str, ConfigError> {
    let v = raw.trim();
    values
        .iter()
        .copied()
        .find(|allowed| allowed.eq_ignore_ascii_case(v))
        .ok_or_else(|| ConfigError::Invalid {
            var: name,
            value: raw.to_string(),
            expected: format!("one of: {}", values.join(", ")),
        })
}

fn parse_url(name: &'static str, rule: UrlRule, raw: &str) -> Result<String, ConfigError> {
    let v = raw.trim();
    let invalid = |value: String, expected: &str| ConfigError::Invalid {
        var: name,
        value,
        expected: expected.into(),
    };
    let http = |u: &url::Url| matches!(u.scheme(), "http" | "https");
    match rule {
        UrlRule::Postgres => {
            if v.starts_with("postgres://") || v.starts_with("postgresql://") {
                Ok(v.to_string())
            } else {
                Err(invalid(redact_url(v), "a postgres:// or postgresql:// URL"))
            }
        }
        // An origin: actor ids are `<origin>/users/<name>`, so a path, query or fragment
        // would silently produce IRIs nobody serves.
        UrlRule::Origin => {
            let origin = url::Url::parse(v).is_ok_and(|u| {
                http(&u)
                    && u.host_str().is_some()
                    && matches!(u.path(), "" | "/")
                    && u.query().is_none()
                    && u.fragment().is_none()
                    && u.username().is_empty()
                    && u.password().is_none()
            });
            if origin {
                Ok(v.to_string())
            } else {
                Err(invalid(
                    v.to_string(),
                    "an http(s) origin such as https://hollo.example.com (no path)",
                ))
            }
        }
        UrlRule::Base => {
            let base = url::Url::parse(v).is_ok_and(|u| {
                http(&u) && u.host_str().is_some() && u.query().is_none() && u.fragment().is_none()
            });
            if base {
                Ok(v.trim_end_matches('/').to_string())
            } else {
                Err(invalid(
                    v.to_string(),
                    "an http(s) URL without query, e.g. https://media.example.com",
                ))
            }
        }
        UrlRule::Http => {
            if url::Url::parse(v).is_ok_and(|u| http(&u)) {
                Ok(v.trim_end_matches('/').to_string())
            } else {
                Err(invalid(
                    v.to_string(),
                    "an http(s) URL such as https://s3.example.com",
                ))
            }
        }
    }
}

fn parse_secret(name: &'static str, min_len: usize, raw: &str) -> Result<Secret, ConfigError> {
    if raw.len() < min_len {
        return Err(ConfigError::Invalid {
            var: name,
            value: "***".into(),
            expected: format!("at least {min_len} characters (e.g. `openssl rand -hex 32`)"),
        });
    }
    Ok(Secret::new(raw))
}

fn parse_log_filter(
    name: &'static str,
    raw: &str,
) -> Result<tracing_subscriber::EnvFilter, ConfigError> {
    tracing_subscriber::EnvFilter::try_new(raw.trim()).map_err(|e| ConfigError::Invalid {
        var: name,
        value: raw.to_string(),
        expected: format!("a log filter such as `info` or `warn,hollo_runtime=debug` ({e})"),
    })
}

/// Hide the password of a connection URL in logs and errors.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme + 3],
                    &creds[..colon],
                    &url[at..]
                ),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}
