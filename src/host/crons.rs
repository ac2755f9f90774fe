//! Crons: a run request made again on a schedule, as LangGraph's Agent Server keeps
//! them. A cron is a store row ([`Cron`]) whose body holds its schedule, time zone,
//! end, the run request (`payload`), metadata and what becomes of a stateless run's
//! thread; the host checks and computes occurrences, and hands each due one to
//! exactly one taker: every server on a shared store tries
//! ([`Host::take_due_crons`]), and the store's conditional write lets one win.
//! Turning the request into a run is the server's, as for any other request.

use super::{Host, HostError, new_id, now_ms};
use crate::store::{Cron, Take};
use serde_json::{Map, Value as Json, json};

/// A cron's schedule: a cron pattern read in a time zone.
pub(crate) struct Schedule {
    /// As written.
    text: String,
    pattern: croner::Cron,
    zone: jiff::tz::TimeZone,
}

impl Schedule {
    /// `pattern` in `zone` (none: UTC), or why it is not one: five fields (minute,
    /// hour, day of month, month, day of week) as cron reads them, the nicknames
    /// (`@hourly`, `@daily`, ...), or six with seconds last, as LangGraph's server
    /// (croniter) reads them: `* * * * * */15` is every 15 seconds.
    pub(crate) fn parse(pattern: &str, zone: Option<&str>) -> Result<Self, HostError> {
        let zone = match zone {
            None => jiff::tz::TimeZone::UTC,
            Some(name) => jiff::tz::TimeZone::get(name).map_err(|_| {
                HostError::Invalid(format!(
                    "Invalid timezone: '{name}'. Use IANA timezone format (e.g. 'America/New_York')."
                ))
            })?,
        };
        let parser = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .year(croner::parser::Year::Disallowed)
            .build();
        let fields: Vec<&str> = pattern.split_whitespace().collect();
        // croner reads a sixth field as the first (seconds); croniter as the last.
        let read = match fields.as_slice() {
            [rest @ .., seconds] if fields.len() == 6 => format!("{seconds} {}", rest.join(" ")),
            _ => fields.join(" "),
        };
        let pattern = parser.parse(&read).map_err(|e| {
            let reason = e.to_string();
            HostError::Invalid(format!(
                "Invalid cron schedule: '{pattern}'. Reason: {}. Use the standard cron format (minute hour day_of_month month day_of_week), for example '*/5 * * * *' for every 5 minutes.",
                reason.trim_end_matches('.')
            ))
        })?;
        Ok(Schedule {
            text: fields.join(" "),
            pattern,
            zone,
        })
    }

    /// The first occurrence after `after_ms` (Unix milliseconds), none past the year
    /// 9999 or `end_ms`.
    pub(crate) fn next_after(&self, after_ms: u64, end_ms: Option<u64>) -> Option<u64> {
        let after = jiff::Timestamp::from_millisecond(i64::try_from(after_ms).ok()?).ok()?;
        let next = self
            .pattern
            .find_next_occurrence(&after.to_zoned(self.zone.clone()), false)
            .ok()?;
        let ms = u64::try_from(next.timestamp().as_millisecond()).ok()?;
        match end_ms {
            Some(end) if ms > end => None,
            _ => Some(ms),
        }
    }
}

/// A cron to make: what `POST /runs/crons` and `POST /threads/{id}/runs/crons` take,
/// checked by the server as a run request before it gets here.
pub(crate) struct NewCron {
    pub(crate) assistant: String,
    pub(crate) thread: Option<String>,
    pub(crate) schedule: String,
    pub(crate) timezone: Option<String>,
    /// As given (RFC 3339), and as Unix milliseconds.
    pub(crate) end_time: Option<(String, u64)>,
    pub(crate) enabled: bool,
    pub(crate) metadata: Map<String, Json>,
    /// The run request, as given.
    pub(crate) payload: Map<String, Json>,
    /// `delete` or `keep` a stateless run's thread; none for a thread's cron.
    pub(crate) on_run_completed: Option<String>,
}

/// What a search of crons asks for; `None` matches any.
#[derive(Default)]
pub(crate) struct CronFilter {
    pub(crate) assistant: Option<String>,
    pub(crate) thread: Option<String>,
    pub(crate) enabled: Option<bool>,
    /// Each key with this value in the cron's metadata.
    pub(crate) metadata: Map<String, Json>,
}

impl CronFilter {
    fn matches(&self, c: &Cron) -> bool {
        self.assistant.as_ref().is_none_or(|a| *a == c.assistant)
            && self
                .thread
                .as_ref()
                .is_none_or(|t| c.thread.as_ref() == Some(t))
            && self.enabled.is_none_or(|e| e == c.enabled)
            && self.metadata.iter().all(|(k, want)| {
                metadata(c)
                    .get(k)
                    .is_some_and(|have| super::contains(have, want))
            })
    }
}

/// What crons are listed by (LangGraph's `sort_by`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum CronSort {
    CronId,
    AssistantId,
    ThreadId,
    NextRunDate,
    EndTime,
    #[default]
    CreatedAt,
    UpdatedAt,
}

impl CronSort {
    pub(crate) const NAMES: [(&str, CronSort); 7] = [
        ("cron_id", CronSort::CronId),
        ("assistant_id", CronSort::AssistantId),
        ("thread_id", CronSort::ThreadId),
        ("next_run_date", CronSort::NextRunDate),
        ("end_time", CronSort::EndTime),
        ("created_at", CronSort::CreatedAt),
        ("updated_at", CronSort::UpdatedAt),
    ];

    fn order(self, a: &Cron, b: &Cron) -> std::cmp::Ordering {
        match self {
            CronSort::CronId => a.id.cmp(&b.id),
            CronSort::AssistantId => a.assistant.cmp(&b.assistant),
            CronSort::ThreadId => a.thread.cmp(&b.thread),
            CronSort::NextRunDate => a.next_ms.cmp(&b.next_ms),
            CronSort::EndTime => end_ms(a).cmp(&end_ms(b)),
            CronSort::CreatedAt => a.created_ms.cmp(&b.created_ms),
            CronSort::UpdatedAt => a.updated_ms.cmp(&b.updated_ms),
        }
        // Crons made in the same millisecond: their ids are in the order they were made.
        .then_with(|| a.id.cmp(&b.id))
    }
}

/// A cron's metadata, from its body.
pub(crate) fn metadata(c: &Cron) -> &Map<String, Json> {
    static EMPTY: std::sync::OnceLock<Map<String, Json>> = std::sync::OnceLock::new();
    c.body
        .get("metadata")
        .and_then(Json::as_object)
        .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

/// A field of a cron's body as text.
pub(crate) fn text<'c>(c: &'c Cron, key: &str) -> Option<&'c str> {
    c.body.get(key).and_then(Json::as_str)
}

fn schedule_of(c: &Cron) -> Result<Schedule, HostError> {
    Schedule::parse(text(c, "schedule").unwrap_or_default(), text(c, "timezone"))
}

fn end_ms(c: &Cron) -> Option<u64> {
    c.body.get("end_ms").and_then(Json::as_u64)
}

/// Why `schedule` in `zone`, ending at `end_ms`, is not a cron's schedule, if it is
/// not: checked before anything else of a new cron, as LangGraph does.
pub(crate) fn check_schedule(
    schedule: &str,
    zone: Option<&str>,
    end_ms: Option<u64>,
) -> Result<(), HostError> {
    first(&Schedule::parse(schedule, zone)?, now_ms(), end_ms).map(drop)
}

/// The first occurrence of `schedule` after `now_ms`, or the 400 LangGraph gives a
/// pattern that never matches (`0 0 31 2 *`) when it has no end to explain it.
fn first(schedule: &Schedule, now_ms: u64, end: Option<u64>) -> Result<Option<u64>, HostError> {
    match schedule.next_after(now_ms, None) {
        None => Err(HostError::Invalid(format!(
            "the schedule `{}` never comes: no date matches it (as the 31st of February)",
            schedule.text
        ))),
        Some(ms) if end.is_some_and(|e| ms > e) => Ok(None),
        Some(ms) => Ok(Some(ms)),
    }
}

impl Host {
    pub(crate) async fn create_cron(&self, new: NewCron) -> Result<Cron, HostError> {
        self.closing()?;
        if self.assistant(&new.assistant).await.is_err() {
            return Err(HostError::NotFound(format!(
                "Assistant '{}' not found",
                new.assistant
            )));
        }
        if let Some(t) = &new.thread {
            self.thread(t).await?;
        }
        let schedule = Schedule::parse(&new.schedule, new.timezone.as_deref())?;
        let now = now_ms();
        let end = new.end_time.as_ref().map(|(_, ms)| *ms);
        let next_ms = first(&schedule, now, end)?;
        let id = new_id();
        let mut payload = new.payload;
        // As LangGraph does: each run of the cron names it in its configuration.
        configurable(&mut payload).insert("cron_id".into(), json!(id));
        let mut body = Map::new();
        body.insert("schedule".into(), json!(new.schedule));
        body.insert("timezone".into(), json!(new.timezone));
        body.insert(
            "end_time".into(),
            json!(new.end_time.as_ref().map(|(t, _)| t)),
        );
        body.insert("end_ms".into(), json!(end));
        body.insert("user_id".into(), json!(""));
        body.insert("metadata".into(), Json::Object(new.metadata));
        body.insert("on_run_completed".into(), json!(new.on_run_completed));
        body.insert("payload".into(), Json::Object(payload));
        let cron = Cron {
            id,
            assistant: new.assistant,
            thread: new.thread,
            body,
            enabled: new.enabled,
            next_ms,
            created_ms: now,
            updated_ms: now,
        };
        self.inner.store.put_cron(&cron).await?;
        Ok(cron)
    }

    pub(crate) async fn get_cron(&self, id: &str) -> Result<Cron, HostError> {
        self.inner
            .store
            .get_cron(id)
            .await?
            .ok_or_else(|| HostError::NotFound(format!("Cron '{id}' not found")))
    }

    pub(crate) async fn delete_cron(&self, id: &str) -> Result<(), HostError> {
        if !self.inner.store.delete_cron(id).await? {
            return Err(HostError::NotFound(format!("Cron '{id}' not found")));
        }
        Ok(())
    }

    /// Changes a cron as `patch` says (see [`CronPatch::apply`]).
    pub(crate) async fn update_cron(&self, id: &str, patch: CronPatch) -> Result<Cron, HostError> {
        // Written only over the cron as it was read: an occurrence a server took
        // meanwhile is not put back (it would fire again); then read and made again.
        for _ in 0..8 {
            let seen = self.get_cron(id).await?;
            let changed = patch.apply(seen.clone())?;
            if self.inner.store.replace_cron(&changed, &seen).await? {
                return Ok(changed);
            }
        }
        Err(HostError::Conflict(format!(
            "cron '{id}' kept changing while this change was made (its occurrences are due faster than it can be written); try again"
        )))
    }

    /// The crons `filter` matches, in the order of `sort` (`descending`: the last
    /// first).
    pub(crate) async fn search_crons(
        &self,
        filter: &CronFilter,
        sort: CronSort,
        descending: bool,
    ) -> Result<Vec<Cron>, HostError> {
        let mut crons = self.inner.store.crons().await?;
        crons.retain(|c| filter.matches(c));
        crons.sort_by(|a, b| {
            let o = sort.order(a, b);
            if descending { o.reverse() } else { o }
        });
        Ok(crons)
    }

    /// Takes the occurrences due at `now_ms` (at most `limit`) for this process: each
    /// cron taken has its next occurrence moved on in the store, so no other process
    /// takes it too; what to run is each cron's payload.
    pub async fn take_due_crons(&self, now_ms: u64, limit: usize) -> Result<Vec<Cron>, HostError> {
        let due = self.inner.store.due_crons(now_ms, limit).await?;
        let take: Vec<Take> = due
            .iter()
            .filter_map(|cron| {
                let at = cron.next_ms?;
                // An occurrence missed while no server ran fires once, and the next is
                // counted from now.
                let next = schedule_of(cron)
                    .ok()
                    .and_then(|s| s.next_after(now_ms.max(at), end_ms(cron)));
                Some(Take {
                    id: cron.id.clone(),
                    due_ms: at,
                    next_ms: next,
                })
            })
            .collect();
        let won = self.inner.store.take_occurrences(&take).await?;
        let mut taken = due;
        taken.retain(|c| won.contains(&c.id));
        Ok(taken)
    }
}

/// A change to a cron (see [`Host::update_cron`]).
#[derive(Default)]
pub(crate) struct CronPatch {
    pub(crate) schedule: Option<String>,
    pub(crate) timezone: Option<Option<String>>,
    pub(crate) end_time: Option<Option<(String, u64)>>,
    pub(crate) enabled: Option<bool>,
    pub(crate) on_run_completed: Option<String>,
    pub(crate) metadata: Map<String, Json>,
    pub(crate) payload: Map<String, Json>,
}

impl CronPatch {
    /// `cron` changed as this says: the cron's own keys in place, `metadata` merged
    /// into the cron's, every key into its run request; its next occurrence counted
    /// again from now when the schedule, the zone, the end or `enabled` changed.
    fn apply(&self, mut cron: Cron) -> Result<Cron, HostError> {
        let again = self.schedule.is_some()
            || self.timezone.is_some()
            || self.end_time.is_some()
            || self.enabled == Some(true) && !cron.enabled;
        if let Some(s) = &self.schedule {
            cron.body.insert("schedule".into(), json!(s));
        }
        if let Some(tz) = &self.timezone {
            cron.body.insert("timezone".into(), json!(tz));
        }
        if let Some(end) = &self.end_time {
            cron.body
                .insert("end_time".into(), json!(end.as_ref().map(|(t, _)| t)));
            cron.body
                .insert("end_ms".into(), json!(end.as_ref().map(|(_, ms)| ms)));
        }
        if let Some(e) = self.enabled {
            cron.enabled = e;
        }
        if let Some(o) = &self.on_run_completed {
            cron.body.insert("on_run_completed".into(), json!(o));
        }
        if !self.metadata.is_empty() {
            let mut m = metadata(&cron).clone();
            m.extend(self.metadata.clone());
            cron.body.insert("metadata".into(), Json::Object(m));
        }
        if !self.payload.is_empty() {
            let payload = payload_after(&cron, &self.payload);
            cron.body.insert("payload".into(), Json::Object(payload));
        }
        if again {
            cron.next_ms = first(&schedule_of(&cron)?, now_ms(), end_ms(&cron))?;
        }
        // Never the one read, even within its millisecond: another change's write
        // is told apart by it.
        cron.updated_ms = now_ms().max(cron.updated_ms + 1);
        Ok(cron)
    }
}

/// A cron's run request with `change` merged in, as a change to the cron keeps it:
/// each key in place of the one before, `config` still naming the cron.
pub(crate) fn payload_after(cron: &Cron, change: &Map<String, Json>) -> Map<String, Json> {
    let mut payload = cron
        .body
        .get("payload")
        .and_then(Json::as_object)
        .cloned()
        .unwrap_or_default();
    for (k, v) in change {
        let mut v = v.clone();
        if k == "config"
            && let Some(c) = v.as_object_mut()
        {
            configurable(c).insert("cron_id".into(), json!(cron.id));
        }
        payload.insert(k.clone(), v);
    }
    payload
}

/// `payload.config.configurable`, made when missing.
fn configurable(payload: &mut Map<String, Json>) -> &mut Map<String, Json> {
    let config = payload.entry("config").or_insert_with(|| json!({}));
    if !config.is_object() {
        *config = json!({});
    }
    let c = config
        .as_object_mut()
        .expect("made an object above")
        .entry("configurable")
        .or_insert_with(|| json!({}));
    if !c.is_object() {
        *c = json!({});
    }
    c.as_object_mut().expect("made an object above")
}

#[cfg(test)]
mod tests {
    use super::Schedule;

    fn ms(t: &str) -> u64 {
        t.parse::<jiff::Timestamp>().unwrap().as_millisecond() as u64
    }

    fn next(pattern: &str, zone: Option<&str>, after: &str) -> Option<String> {
        Schedule::parse(pattern, zone)
            .unwrap()
            .next_after(ms(after), None)
            .map(|n| {
                jiff::Timestamp::from_millisecond(n as i64)
                    .unwrap()
                    .to_string()
            })
    }

    /// The next occurrences LangGraph's server gave for the same schedules at the same
    /// instants (croniter in the cron's time zone).
    #[test]
    fn occurrences_are_langgraphs() {
        let after = "2026-11-29T02:46:33Z";
        for (pattern, zone, want) in [
            (
                "0 9 * * 1-5",
                Some("America/New_York"),
                "2026-11-30T14:00:00Z",
            ),
            ("0 9 * * *", Some("Asia/Kolkata"), "2026-11-29T03:30:00Z"),
            ("0 12 * * *", Some("Europe/Berlin"), "2026-11-29T11:00:00Z"),
            ("*/1 * * * *", None, "2026-11-29T02:47:00Z"),
            ("0 0 1 1 *", None, "2027-01-01T00:00:00Z"),
            ("5 4 * * *", None, "2026-11-29T04:05:00Z"),
            ("@hourly", None, "2026-11-29T03:00:00Z"),
            // A sixth field is seconds, last: every 30th second; minutes */30.
            ("* * * * * 30", None, "2026-11-29T02:47:30Z"),
            ("*/30 * * * * *", None, "2026-11-29T03:00:00Z"),
            (" 0  9 * * MON ", None, "2026-11-30T09:00:00Z"),
        ] {
            assert_eq!(
                next(pattern, zone, after).as_deref(),
                Some(want),
                "{pattern}"
            );
        }
        assert_eq!(next("0 0 31 2 *", None, after), None);
        // Past its end, no occurrence.
        let s = Schedule::parse("0 0 1 1 *", None).unwrap();
        assert_eq!(
            s.next_after(ms(after), Some(ms("2026-12-31T00:00:00Z"))),
            None
        );
    }

    #[test]
    fn a_bad_schedule_or_zone_is_refused_naming_it() {
        let refused = |p: &str, z: Option<&str>| Schedule::parse(p, z).err().unwrap().to_string();
        assert_eq!(
            refused("0 0 1 1 *", Some("Mars/Olympus")),
            "Invalid timezone: 'Mars/Olympus'. Use IANA timezone format (e.g. 'America/New_York')."
        );
        for bad in [
            "",
            "* * * *",
            "61 * * * *",
            "0 0 1 1 * 2030 1",
            "@reboot",
            "H * * * *",
        ] {
            assert!(
                refused(bad, None)
                    .starts_with(&format!("Invalid cron schedule: '{bad}'. Reason: ")),
                "{bad}"
            );
        }
    }
}
