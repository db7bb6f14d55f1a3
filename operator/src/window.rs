//! Maintenance windows (`spec.upgrade.maintenanceWindows`, issue 63 item 6): whether a version
//! change may start its work now, and if not, when it may.
//!
//! Pure: [`gate`] takes the time, the windows, the approval annotation and the target version;
//! `observe` calls it and `phase::decide` turns a closed gate into `WaitingForWindow`.
//!
//! A window opens at each start its cron `schedule` names in its `timeZone` and stays open for
//! `duration`, elapsed time: it is open at `now` when a start lies in `(now - duration, now]`,
//! so the first start after `now - duration` says both whether one is open (it is at or before
//! `now`) and, when none is, when the next opens. Daylight-saving changes follow croner's
//! rules (OCPS, as Vixie cron): a start in a skipped hour opens right after the change, a start
//! in a repeated hour opens once, the first time. The zones come from jiff's bundled database.

use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, Zoned};

use crate::crd::MaintenanceWindow;

/// The annotation whose value, a version, lets that version's upgrade start outside the
/// windows.
pub const APPROVE_UPGRADE: &str = "hollo.social/approve-upgrade";

/// Whether an upgrade may start now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// No window is configured: at once.
    Unrestricted,
    /// Approved by [`APPROVE_UPGRADE`] for the target version.
    Approved,
    /// Inside a window, which closes at `closes` (the latest end of the open ones).
    Open { closes: Zoned },
    /// Outside every window: the next one opens at `opens`, `wait` from now.
    Closed { opens: Zoned, wait: Duration },
    /// No window can open: one cannot be read, or no schedule names a time to come; why.
    Never(String),
}

impl Gate {
    /// Whether the upgrade may start (what `phase::decide` reads from [`Gate::waiting_message`]).
    #[cfg(test)]
    pub fn allows(&self) -> bool {
        matches!(
            self,
            Gate::Unrestricted | Gate::Approved | Gate::Open { .. }
        )
    }

    /// What a waiting upgrade to `version` says in its condition; `None` when it may start.
    pub fn waiting_message(&self, version: &str) -> Option<String> {
        let approve =
            format!("annotate the Hollo with {APPROVE_UPGRADE}: \"{version}\" to start it at once");
        match self {
            Gate::Closed { opens, .. } => Some(format!(
                "version {version} waits for the next maintenance window, opening at {opens} \
                 ({}); {approve}",
                opens.timestamp()
            )),
            Gate::Never(why) => Some(format!(
                "version {version} waits: {why}; fix upgrade.maintenanceWindows or {approve}"
            )),
            _ => None,
        }
    }
}

/// A window as read from the spec.
struct Window {
    schedule: Cron,
    duration: SignedDuration,
    zone: TimeZone,
}

/// Reads `w`, or says what is wrong with it.
fn read(w: &MaintenanceWindow) -> Result<Window, String> {
    // Five fields only: no seconds, no year (admission checks the same shape).
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    let schedule = parser
        .parse(w.schedule.trim())
        .map_err(|e| format!("schedule {:?} is not a cron schedule ({e})", w.schedule))?;
    let duration = w
        .duration
        .parse::<SignedDuration>()
        .ok()
        .filter(|d| d.is_positive())
        .ok_or_else(|| {
            format!(
                "duration {:?} is not hours and minutes (say 2h or 1h30m)",
                w.duration
            )
        })?;
    let zone = TimeZone::get(&w.time_zone)
        .map_err(|_| format!("timeZone {:?} is not an IANA time zone", w.time_zone))?;
    Ok(Window {
        schedule,
        duration,
        zone,
    })
}

/// The start and end of the window that is open at `now`, else of the next one to open;
/// `None` when no start is to come.
fn around(w: &Window, now: Timestamp) -> Option<(Zoned, Zoned)> {
    let from = now.checked_sub(w.duration).ok()?.to_zoned(w.zone.clone());
    let start = w.schedule.find_next_occurrence(&from, false).ok()?;
    let end = start.checked_add(w.duration).ok()?;
    Some((start, end))
}

/// Whether an upgrade to `target` may start at `now` under `windows`, with `approval` the value
/// of the [`APPROVE_UPGRADE`] annotation.
pub fn gate(
    now: Timestamp,
    windows: &[MaintenanceWindow],
    approval: Option<&str>,
    target: &str,
) -> Gate {
    if windows.is_empty() {
        return Gate::Unrestricted;
    }
    if approval.map(str::trim) == Some(target) {
        return Gate::Approved;
    }
    // The end of each open window, and the start of each one still to open.
    let mut ends = vec![];
    let mut starts = vec![];
    for (i, w) in windows.iter().enumerate() {
        let window = match read(w) {
            Ok(window) => window,
            Err(why) => return Gate::Never(format!("maintenance window {} {why}", i + 1)),
        };
        match around(&window, now) {
            Some((start, end)) if start.timestamp() <= now => ends.push(end),
            Some((start, _)) => starts.push(start),
            None => {}
        }
    }
    let closes = ends.into_iter().max_by_key(Zoned::timestamp);
    let opens = starts.into_iter().min_by_key(Zoned::timestamp);
    match (closes, opens) {
        (Some(closes), _) => Gate::Open { closes },
        (None, Some(opens)) => {
            let wait = opens.timestamp().duration_since(now);
            Gate::Closed {
                wait: Duration::try_from(wait).unwrap_or_default(),
                opens,
            }
        }
        (None, None) => Gate::Never(
            "no maintenance window opens again (no schedule names a time to come)".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(schedule: &str, duration: &str, zone: &str) -> MaintenanceWindow {
        MaintenanceWindow {
            schedule: schedule.into(),
            duration: duration.into(),
            time_zone: zone.into(),
        }
    }

    fn at(utc: &str) -> Timestamp {
        utc.parse().expect("an RFC 3339 instant")
    }

    fn gate_at(utc: &str, windows: &[MaintenanceWindow]) -> Gate {
        gate(at(utc), windows, None, "0.2.0")
    }

    /// The start of the next window, as the condition shows it (zone time and offset).
    fn opens(g: &Gate) -> String {
        match g {
            Gate::Closed { opens, .. } => opens.to_string(),
            other => panic!("not closed: {other:?}"),
        }
    }

    fn closes(g: &Gate) -> String {
        match g {
            Gate::Open { closes } => closes.to_string(),
            other => panic!("not open: {other:?}"),
        }
    }

    #[test]
    fn no_window_no_wait() {
        assert_eq!(gate_at("2026-03-01T12:00:00Z", &[]), Gate::Unrestricted);
    }

    /// Half-open: the start is inside, the end is not; the wait is to the second.
    #[test]
    fn a_window_is_open_from_its_start_until_its_end() {
        let w = [window("0 2 * * 6", "2h", "UTC")];
        // 2026-03-07 is a Saturday.
        let before = gate_at("2026-03-07T01:59:59Z", &w);
        assert_eq!(opens(&before), "2026-03-07T02:00:00+00:00[UTC]");
        assert_eq!(
            before,
            Gate::Closed {
                opens: at("2026-03-07T02:00:00Z").to_zoned(TimeZone::UTC),
                wait: Duration::from_secs(1),
            }
        );
        let start = gate_at("2026-03-07T02:00:00Z", &w);
        assert_eq!(closes(&start), "2026-03-07T04:00:00+00:00[UTC]");
        assert!(gate_at("2026-03-07T03:59:59Z", &w).allows());
        let end = gate_at("2026-03-07T04:00:00Z", &w);
        assert_eq!(opens(&end), "2026-03-14T02:00:00+00:00[UTC]");
        assert!(!end.allows());
    }

    /// The schedule is read on the zone's calendar: Monday 00:00 in Kiritimati (UTC+14) is
    /// Sunday 10:00 UTC; in Pago Pago (UTC-11) it is Monday 11:00 UTC.
    #[test]
    fn the_zone_decides_the_day() {
        let monday = |zone| [window("0 0 * * 1", "1h", zone)];
        // Sunday 2026-03-08, 10:30 UTC.
        let now = "2026-03-08T10:30:00Z";
        assert_eq!(
            closes(&gate_at(now, &monday("Pacific/Kiritimati"))),
            "2026-03-09T01:00:00+14:00[Pacific/Kiritimati]"
        );
        assert_eq!(
            opens(&gate_at(now, &monday("Pacific/Pago_Pago"))),
            "2026-03-09T00:00:00-11:00[Pacific/Pago_Pago]"
        );
        assert_eq!(
            opens(&gate_at(now, &monday("UTC"))),
            "2026-03-09T00:00:00+00:00[UTC]"
        );
        // Pago Pago's Monday midnight is 11:00 UTC.
        assert!(gate_at("2026-03-09T11:00:00Z", &monday("Pacific/Pago_Pago")).allows());
    }

    /// Spring forward in Berlin (2026-03-29, 02:00 CET → 03:00 CEST): a 02:30 start does not
    /// exist that day and opens right after the change; the next day it is 02:30 CEST again.
    #[test]
    fn a_start_in_the_skipped_hour_opens_after_the_change() {
        let w = [window("30 2 * * *", "1h", "Europe/Berlin")];
        let g = gate_at("2026-03-28T23:00:00Z", &w); // 00:00 CET
        assert_eq!(opens(&g), "2026-03-29T03:00:00+02:00[Europe/Berlin]");
        assert_eq!(
            g,
            Gate::Closed {
                opens: at("2026-03-29T01:00:00Z").to_zoned(TimeZone::get("Europe/Berlin").unwrap()),
                wait: Duration::from_secs(2 * 3600),
            }
        );
        assert_eq!(
            closes(&gate_at("2026-03-29T01:30:00Z", &w)),
            "2026-03-29T04:00:00+02:00[Europe/Berlin]"
        );
        assert_eq!(
            opens(&gate_at("2026-03-29T02:00:00Z", &w)),
            "2026-03-30T02:30:00+02:00[Europe/Berlin]"
        );
    }

    /// Fall back in Berlin (2026-10-25, 03:00 CEST → 02:00 CET): a 02:30 start opens once, in
    /// the first pass of the repeated hour, and the second pass is outside the window.
    #[test]
    fn a_start_in_the_repeated_hour_opens_once() {
        let w = [window("30 2 * * *", "20m", "Europe/Berlin")];
        // 02:35 CEST, the first pass.
        assert_eq!(
            closes(&gate_at("2026-10-25T00:35:00Z", &w)),
            "2026-10-25T02:50:00+02:00[Europe/Berlin]"
        );
        // 02:35 CET, the second pass: closed until the next day.
        assert_eq!(
            opens(&gate_at("2026-10-25T01:35:00Z", &w)),
            "2026-10-26T02:30:00+01:00[Europe/Berlin]"
        );
        // Before the change, the next start is the first 02:30.
        assert_eq!(
            opens(&gate_at("2026-10-24T23:00:00Z", &w)),
            "2026-10-25T02:30:00+02:00[Europe/Berlin]"
        );
    }

    /// A duration is elapsed time: 01:00 CET for 3h on the day the clocks spring forward ends
    /// at 05:00 CEST, three real hours later.
    #[test]
    fn a_duration_spans_a_change_in_real_time() {
        let w = [window("0 1 * * *", "3h", "Europe/Berlin")];
        assert_eq!(
            closes(&gate_at("2026-03-29T02:30:00Z", &w)),
            "2026-03-29T05:00:00+02:00[Europe/Berlin]"
        );
        assert!(!gate_at("2026-03-29T03:00:00Z", &w).allows());
        // New York falls back 2026-11-01 02:00 EDT → 01:00 EST: 00:30 for 2h ends at 01:30 EST.
        let ny = [window("30 0 * * *", "2h", "America/New_York")];
        assert_eq!(
            closes(&gate_at("2026-11-01T05:00:00Z", &ny)),
            "2026-11-01T01:30:00-05:00[America/New_York]"
        );
    }

    /// Lord Howe Island moves its clocks by half an hour (2026-10-04, 02:00 → 02:30): a 02:15
    /// start opens at 02:30, and the wait is counted in real time.
    #[test]
    fn half_hour_changes_too() {
        let w = [window("15 2 * * *", "1h", "Australia/Lord_Howe")];
        // 01:00 +10:30 on 2026-10-04.
        let g = gate_at("2026-10-03T14:30:00Z", &w);
        assert_eq!(opens(&g), "2026-10-04T02:30:00+11:00[Australia/Lord_Howe]");
        match g {
            Gate::Closed { wait, .. } => assert_eq!(wait, Duration::from_secs(3600)),
            other => panic!("{other:?}"),
        }
    }

    /// Several windows: the earliest next start, or the latest end of the open ones.
    #[test]
    fn the_nearest_of_several_windows() {
        let w = [
            window("0 22 * * *", "1h", "UTC"),
            window("0 3 * * *", "4h", "Asia/Tokyo"), // 18:00 UTC
            window("0 17 * * *", "2h", "UTC"),
        ];
        assert_eq!(
            opens(&gate_at("2026-05-01T12:00:00Z", &w)),
            "2026-05-01T17:00:00+00:00[UTC]"
        );
        // 18:30 UTC: the 17:00 window (until 19:00) and Tokyo's (until 22:00 UTC) are open.
        assert_eq!(
            closes(&gate_at("2026-05-01T18:30:00Z", &w)),
            "2026-05-02T07:00:00+09:00[Asia/Tokyo]"
        );
    }

    /// The annotation lets only the version it names through, at any time.
    #[test]
    fn the_approval_names_a_version() {
        let w = [window("0 2 * * 6", "1h", "UTC")];
        let now = at("2026-03-04T12:00:00Z");
        assert_eq!(gate(now, &w, Some("0.2.0"), "0.2.0"), Gate::Approved);
        assert_eq!(gate(now, &w, Some(" 0.2.0\n"), "0.2.0"), Gate::Approved);
        assert!(!gate(now, &w, Some("0.1.9"), "0.2.0").allows());
        assert!(!gate(now, &w, Some(""), "0.2.0").allows());
        let bad = [window("not a schedule at all", "1h", "UTC")];
        assert_eq!(
            gate(now, &bad, Some("0.2.0"), "0.2.0"),
            Gate::Approved,
            "an approval also overrides a window that cannot be read"
        );
    }

    /// A window that cannot be read holds the upgrade and says which and why.
    #[test]
    fn a_broken_window_holds_and_says_why() {
        let now = "2026-03-04T12:00:00Z";
        for (w, why) in [
            (
                window("61 2 * * *", "1h", "UTC"),
                "maintenance window 2 schedule \"61 2 * * *\" is not a cron schedule",
            ),
            (
                window("0 2 * * * 2026", "1h", "UTC"),
                "is not a cron schedule",
            ),
            (
                window("0 2 * * *", "0m", "UTC"),
                "duration \"0m\" is not hours and minutes",
            ),
            (
                window("0 2 * * *", "1h", "Mars/Olympus_Mons"),
                "timeZone \"Mars/Olympus_Mons\" is not an IANA time zone",
            ),
        ] {
            let g = gate_at(now, &[window("0 2 * * 6", "1h", "UTC"), w]);
            match &g {
                Gate::Never(m) => assert!(m.contains(why), "{m}"),
                other => panic!("{other:?}"),
            }
            let m = g.waiting_message("0.2.0").expect("a message");
            assert!(m.contains("hollo.social/approve-upgrade: \"0.2.0\""), "{m}");
        }
        // 30 February never comes: alone, nothing ever opens; beside another window, that one
        // counts.
        match gate_at(now, &[window("0 0 30 2 *", "1h", "UTC")]) {
            Gate::Never(m) => assert!(m.contains("no maintenance window opens again"), "{m}"),
            other => panic!("{other:?}"),
        }
        let g = gate_at(
            now,
            &[
                window("0 0 30 2 *", "1h", "UTC"),
                window("0 2 * * 6", "1h", "UTC"),
            ],
        );
        assert_eq!(opens(&g), "2026-03-07T02:00:00+00:00[UTC]");
    }

    #[test]
    fn the_message_names_the_next_start_and_the_approval() {
        let g = gate_at(
            "2026-03-28T23:00:00Z",
            &[window("30 2 * * *", "1h", "Europe/Berlin")],
        );
        assert_eq!(
            g.waiting_message("0.2.0").as_deref(),
            Some(
                "version 0.2.0 waits for the next maintenance window, opening at \
                 2026-03-29T03:00:00+02:00[Europe/Berlin] (2026-03-29T01:00:00Z); annotate \
                 the Hollo with hollo.social/approve-upgrade: \"0.2.0\" to start it at once"
            )
        );
        assert_eq!(Gate::Unrestricted.waiting_message("0.2.0"), None);
    }
}
