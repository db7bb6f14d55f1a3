//! The environment as the configuration reads it, and the start-up error it gives.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

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

/// A view over the environment, so tests can validate configuration without touching the
/// process environment (which is shared between parallel tests).
pub struct Env(HashMap<String, String>);

impl Env {
    pub fn from_process() -> Self {
        Env(std::env::vars().collect())
    }

    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Env(pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    /// A set, non-blank value.
    pub fn get(&self, var: &str) -> Option<&str> {
        self.0
            .get(var)
            .map(|v| v.as_str())
            .filter(|v| !v.trim().is_empty())
    }

    fn parse<T: FromStr>(
        &self,
        var: &'static str,
        default: T,
        expected: &str,
    ) -> Result<T, ConfigError> {
        match self.get(var) {
            None => Ok(default),
            Some(raw) => raw.trim().parse().map_err(|_| ConfigError::Invalid {
                var,
                value: raw.to_string(),
                expected: expected.to_string(),
            }),
        }
    }

    pub(super) fn count(
        &self,
        var: &'static str,
        default: u32,
        min: u32,
        max: u32,
    ) -> Result<u32, ConfigError> {
        let expected = format!("an integer from {min} to {max}");
        let v: i64 = self.parse(var, i64::from(default), &expected)?;
        if v < i64::from(min) || v > i64::from(max) {
            return Err(ConfigError::Invalid {
                var,
                value: v.to_string(),
                expected,
            });
        }
        Ok(v as u32)
    }

    pub(super) fn seconds(
        &self,
        var: &'static str,
        default: u64,
        min: u64,
        max: u64,
    ) -> Result<Duration, ConfigError> {
        let expected = format!("a whole number of seconds from {min} to {max}");
        let v: i64 = self.parse(var, default as i64, &expected)?;
        if v < min as i64 || v > max as i64 {
            return Err(ConfigError::Invalid {
                var,
                value: v.to_string(),
                expected,
            });
        }
        Ok(Duration::from_secs(v as u64))
    }

    pub(super) fn bool(&self, var: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self.get(var).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) if matches!(v.as_str(), "1" | "true" | "yes" | "on") => Ok(true),
            Some(v) if matches!(v.as_str(), "0" | "false" | "no" | "off") => Ok(false),
            Some(v) => Err(ConfigError::Invalid {
                var,
                value: v,
                expected: "true or false".into(),
            }),
        }
    }
}
