//! Poll and status requests as the API receives them (serde shapes) and the checks that turn
//! them into what storage takes. Pure, so every rejection is tested without a database.
//! A body of the wrong shape is refused by the JSON extractor (422 on these routes); a
//! well-shaped one that breaks a rule is an [`Invalid`] (422 too).

use serde::Deserialize;

use super::{
    MAX_EXPIRES_IN, MAX_OPTION_CHARS, MAX_OPTIONS, MAX_STATUS_CHARS, MIN_EXPIRES_IN, MIN_OPTIONS,
};

/// A rule a request breaks (422).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Invalid {
    #[error("poll.expires_in must be a whole number of seconds")]
    ExpiresInNotSeconds,
    #[error("poll.expires_in must be from {MIN_EXPIRES_IN} to {MAX_EXPIRES_IN} seconds")]
    ExpiresInRange,
    #[error("a poll needs {MIN_OPTIONS} to {MAX_OPTIONS} options")]
    OptionCount,
    #[error("each poll option needs 1 to {MAX_OPTION_CHARS} characters")]
    OptionLength,
    #[error("duplicate poll option {0:?}")]
    DuplicateOption(String),
    #[error("poll.multiple must be true or false")]
    MultipleNotBool,
    #[error("status is longer than {MAX_STATUS_CHARS} characters")]
    StatusTooLong,
    #[error("a status needs text or a poll")]
    Empty,
    #[error("nothing to change: give status and/or poll.expires_in")]
    NothingToChange,
    #[error("choices must not be empty")]
    NoChoices,
    #[error("choices must be option indices")]
    ChoiceNotIndex,
    #[error("choice {0} given twice")]
    ChoiceTwice(i64),
    #[error("this poll allows a single choice")]
    SingleChoice,
    #[error("choice {choice} is not an option of this poll (0 to {last})")]
    NotAnOption { choice: i64, last: usize },
    #[error("the poll has already ended")]
    Ended,
    #[error("you have already voted on this poll")]
    AlreadyVoted,
    #[error("this status has no poll; adding one by editing is not supported")]
    NoPoll,
    #[error("changing poll options is not supported; only poll.expires_in can change")]
    OptionsFixed,
}

/// An integer sent as a JSON number or a numeric string (Mastodon clients send both).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Integer {
    Number(i64),
    Text(String),
}

impl Integer {
    fn value(&self) -> Option<i64> {
        match self {
            Integer::Number(n) => Some(*n),
            Integer::Text(s) => s.trim().parse().ok(),
        }
    }
}

/// A boolean sent as JSON `true`/`false` or as the strings `"true"`/`"false"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Flag {
    Bool(bool),
    Text(String),
}

impl Flag {
    fn value(&self) -> Result<bool, Invalid> {
        match self {
            Flag::Bool(b) => Ok(*b),
            Flag::Text(s) if s == "true" || s == "false" => Ok(s == "true"),
            Flag::Text(_) => Err(Invalid::MultipleNotBool),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct NewPoll {
    pub options: Vec<String>,
    pub expires_in: i64,
    pub multiple: bool,
}

/// What `PUT /api/v1/statuses/{id}` may change.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusEdit {
    pub content: Option<String>,
    pub expires_in: Option<i64>,
    /// Given options/multiple must equal the stored ones: changing them is not supported.
    pub options: Option<Vec<String>>,
    pub multiple: Option<bool>,
    pub has_poll: bool,
}

pub fn expires_in(v: &Integer) -> Result<i64, Invalid> {
    let s = v.value().ok_or(Invalid::ExpiresInNotSeconds)?;
    if !(MIN_EXPIRES_IN..=MAX_EXPIRES_IN).contains(&s) {
        return Err(Invalid::ExpiresInRange);
    }
    Ok(s)
}

fn options(given: &[String]) -> Result<Vec<String>, Invalid> {
    if !(MIN_OPTIONS..=MAX_OPTIONS).contains(&given.len()) {
        return Err(Invalid::OptionCount);
    }
    let mut out: Vec<String> = Vec::with_capacity(given.len());
    for o in given {
        let t = o.trim();
        if t.is_empty() || t.chars().count() > MAX_OPTION_CHARS {
            return Err(Invalid::OptionLength);
        }
        if out.iter().any(|x| x == t) {
            return Err(Invalid::DuplicateOption(t.to_string()));
        }
        out.push(t.to_string());
    }
    Ok(out)
}

fn status_text(s: Option<String>) -> Result<Option<String>, Invalid> {
    match s {
        Some(s) if s.chars().count() > MAX_STATUS_CHARS => Err(Invalid::StatusTooLong),
        s => Ok(s),
    }
}

/// The `poll` of a new status.
#[derive(Clone, Debug, Deserialize)]
pub struct PollRequest {
    pub options: Vec<String>,
    pub expires_in: Integer,
    #[serde(default)]
    pub multiple: Option<Flag>,
}

impl PollRequest {
    pub fn validate(&self) -> Result<NewPoll, Invalid> {
        Ok(NewPoll {
            options: options(&self.options)?,
            expires_in: expires_in(&self.expires_in)?,
            multiple: self.multiple.as_ref().map_or(Ok(false), Flag::value)?,
        })
    }
}

/// `POST /api/v1/statuses`.
#[derive(Clone, Debug, Deserialize)]
pub struct CreateStatusRequest {
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub poll: Option<PollRequest>,
}

impl CreateStatusRequest {
    /// The text (empty when only a poll is given) and the poll.
    pub fn validate(self) -> Result<(String, Option<NewPoll>), Invalid> {
        let status = status_text(self.status)?.unwrap_or_default();
        let poll = self.poll.as_ref().map(PollRequest::validate).transpose()?;
        if status.trim().is_empty() && poll.is_none() {
            return Err(Invalid::Empty);
        }
        Ok((status, poll))
    }
}

/// The `poll` of an edit: only `expires_in` may change; options and `multiple`, if given,
/// must be the stored ones.
#[derive(Clone, Debug, Deserialize)]
pub struct PollEditRequest {
    #[serde(default)]
    pub expires_in: Option<Integer>,
    #[serde(default)]
    pub options: Option<Vec<String>>,
    #[serde(default)]
    pub multiple: Option<Flag>,
}

/// `PUT /api/v1/statuses/{id}`.
#[derive(Clone, Debug, Deserialize)]
pub struct EditStatusRequest {
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub poll: Option<PollEditRequest>,
}

impl EditStatusRequest {
    pub fn validate(self) -> Result<StatusEdit, Invalid> {
        let mut edit = StatusEdit {
            content: status_text(self.status)?,
            ..StatusEdit::default()
        };
        if let Some(p) = &self.poll {
            edit.has_poll = true;
            edit.expires_in = p.expires_in.as_ref().map(expires_in).transpose()?;
            edit.options = p.options.as_deref().map(options).transpose()?;
            edit.multiple = p.multiple.as_ref().map(Flag::value).transpose()?;
        }
        if edit.content.is_none() && !edit.has_poll {
            return Err(Invalid::NothingToChange);
        }
        Ok(edit)
    }
}

/// `POST /api/v1/polls/{id}/votes`.
#[derive(Clone, Debug, Deserialize)]
pub struct VoteRequest {
    pub choices: Vec<Integer>,
}

impl VoteRequest {
    /// The choice indices (shape only; range checks need the poll: [`check_choices`]).
    pub fn validate(&self) -> Result<Vec<i64>, Invalid> {
        if self.choices.is_empty() {
            return Err(Invalid::NoChoices);
        }
        let mut out = Vec::with_capacity(self.choices.len());
        for c in &self.choices {
            let i = c.value().ok_or(Invalid::ChoiceNotIndex)?;
            if out.contains(&i) {
                return Err(Invalid::ChoiceTwice(i));
            }
            out.push(i);
        }
        Ok(out)
    }
}

/// Checks choices against the poll.
pub fn check_choices(choices: &[i64], options: usize, multiple: bool) -> Result<(), Invalid> {
    if !multiple && choices.len() != 1 {
        return Err(Invalid::SingleChoice);
    }
    if let Some(bad) = choices.iter().find(|c| **c < 0 || **c >= options as i64) {
        return Err(Invalid::NotAnOption {
            choice: *bad,
            last: options.saturating_sub(1),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    /// The message a body gets: the extractor's for a wrong shape, the rule's otherwise.
    fn refusal<T: DeserializeOwned, R>(
        body: &Value,
        validate: impl Fn(T) -> Result<R, Invalid>,
    ) -> Option<String> {
        match serde_json::from_value::<T>(body.clone()) {
            Err(e) => Some(e.to_string()),
            Ok(req) => validate(req).err().map(|e| e.to_string()),
        }
    }

    fn create(body: Value) -> Result<(String, Option<NewPoll>), String> {
        serde_json::from_value::<CreateStatusRequest>(body)
            .map_err(|e| e.to_string())?
            .validate()
            .map_err(|e| e.to_string())
    }

    #[test]
    fn create_bodies_are_validated() {
        let ok = create(
            json!({"status": "Tea?", "poll": {"options": ["yes", "no"], "expires_in": 300}}),
        )
        .expect("valid");
        assert_eq!(
            ok.1,
            Some(NewPoll {
                options: vec!["yes".into(), "no".into()],
                expires_in: 300,
                multiple: false
            })
        );
        let s = create(json!({"status": "x", "poll": {"options": ["a", "b"], "expires_in": "60", "multiple": true}}))
            .expect("string seconds are accepted");
        assert!(s.1.is_some_and(|p| p.multiple && p.expires_in == 60));
        for (body, want) in [
            (json!([]), "text or a poll"),
            (json!({}), "text or a poll"),
            (json!({"status": 3}), "expected a string"),
            (
                json!({"status": "x", "poll": {"options": ["a"], "expires_in": 60}}),
                "2 to 4",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "b", "c", "d", "e"], "expires_in": 60}}),
                "2 to 4",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "a"], "expires_in": 60}}),
                "duplicate",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", ""], "expires_in": 60}}),
                "1 to 50",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "x".repeat(51)], "expires_in": 60}}),
                "1 to 50",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", 1], "expires_in": 60}}),
                "expected a string",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "b"]}}),
                "missing field `expires_in`",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "b"], "expires_in": 0}}),
                "from 1",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "b"], "expires_in": 9_999_999}}),
                "from 1",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "b"], "expires_in": "soon"}}),
                "whole number",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "b"], "expires_in": 60, "multiple": "maybe"}}),
                "true or false",
            ),
            (json!({"status": "x".repeat(501)}), "longer than 500"),
        ] {
            let err = refusal(&body, CreateStatusRequest::validate)
                .unwrap_or_else(|| panic!("{body} was accepted"));
            assert!(err.contains(want), "{body}: {err}");
        }
    }

    #[test]
    fn choices_are_validated() {
        let ok: VoteRequest = serde_json::from_value(json!({"choices": [1, "0"]})).expect("shape");
        assert_eq!(ok.validate(), Ok(vec![1, 0]));
        for body in [
            json!({}),
            json!({"choices": []}),
            json!({"choices": ["a"]}),
            json!({"choices": [1, 1]}),
        ] {
            assert!(
                refusal(&body, |r: VoteRequest| r.validate()).is_some(),
                "{body}"
            );
        }
        assert!(check_choices(&[0], 2, false).is_ok());
        assert!(check_choices(&[0, 1], 2, true).is_ok());
        assert_eq!(check_choices(&[0, 1], 2, false), Err(Invalid::SingleChoice));
        assert!(check_choices(&[2], 2, false).is_err());
        assert!(check_choices(&[-1], 2, true).is_err());
    }

    #[test]
    fn edits_are_validated() {
        let e: EditStatusRequest =
            serde_json::from_value(json!({"poll": {"expires_in": 120}})).expect("shape");
        let e = e.validate().expect("valid");
        assert_eq!(e.expires_in, Some(120));
        assert!(e.has_poll);
        for body in [
            json!({}),
            json!({"poll": {"expires_in": -5}}),
            json!({"poll": 5}),
            json!({"status": false}),
        ] {
            assert!(
                refusal(&body, EditStatusRequest::validate).is_some(),
                "{body}"
            );
        }
    }
}
