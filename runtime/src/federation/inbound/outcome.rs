//! What applying an activity did, recorded in `inbox_activities.outcome` (operators read it to
//! see why an activity changed nothing; tests read it as the effect's witness).

use std::borrow::Cow;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The activity changed something (or was already applied: "… already stored").
    Applied(Cow<'static, str>),
    /// The activity is valid but changes nothing here, and why.
    Ignored(Cow<'static, str>),
}

impl Outcome {
    pub fn applied(what: impl Into<Cow<'static, str>>) -> Outcome {
        Outcome::Applied(what.into())
    }

    pub fn ignored(why: impl Into<Cow<'static, str>>) -> Outcome {
        Outcome::Ignored(why.into())
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Applied(what) => f.write_str(what),
            Outcome::Ignored(why) => write!(f, "ignored: {why}"),
        }
    }
}

impl From<crate::polls::remote::VoteOutcome> for Outcome {
    fn from(v: crate::polls::remote::VoteOutcome) -> Outcome {
        use crate::polls::remote::VoteOutcome::*;
        match v {
            Stored => Outcome::applied("poll vote stored"),
            AlreadyStored => Outcome::ignored("vote already stored"),
            NotAttributedToSigner => Outcome::ignored("vote not attributed to the signer"),
            AfterEnd => Outcome::ignored("vote after the poll ended"),
            NoSuchOption => Outcome::ignored("vote for no option of the poll"),
            AlreadyVoted => Outcome::ignored("already voted on a single-choice poll"),
            AcrossBlock => Outcome::ignored("vote across a block"),
        }
    }
}
