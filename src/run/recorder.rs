//! [`Recorder`]: writes a run's checkpoint records, and the thread's snapshot now and
//! then. What one record says besides what the thread's cursor holds is an [`Entry`].

use super::cursor::{Live, now_ms};
use super::emitter::Emitter;
use super::event::Event;
use super::outcome::RunError;
use super::state::State;
use super::threads::Threads;
use crate::graph::{Node, Target};
use crate::store::{Checkpoint, Pending, Source, Status, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Records between two snapshots of a thread that is running.
const SNAPSHOT_EVERY: u64 = 1024;

/// What one checkpoint record says besides where the thread stands: the node that
/// wrote it, where the run goes on, what it wrote, and how the thread stands. Small, so
/// that making one per step costs nothing (a pause's `Pending` is boxed already, as
/// the record keeps it).
pub(super) struct Entry<'a> {
    pub(super) node: Option<&'a Node>,
    pub(super) next: Option<Target>,
    pub(super) writes: Vec<Write>,
    pub(super) status: Status,
    pub(super) pending: Option<Box<Pending>>,
    pub(super) outcome: Option<String>,
}

impl<'a> Entry<'a> {
    /// A step of a run that goes on: `node`'s writes (none: the run's input), and
    /// `next`.
    pub(super) fn running(
        node: Option<&'a Node>,
        next: Option<Target>,
        writes: Vec<Write>,
    ) -> Self {
        Entry {
            node,
            next,
            writes,
            status: Status::Running,
            pending: None,
            outcome: None,
        }
    }

    /// A run stopped at a node boundary, to go on at `next`.
    pub(super) fn stopped(next: Option<Target>, writes: Vec<Write>) -> Self {
        Entry {
            node: None,
            next,
            writes,
            status: Status::Stopped,
            pending: None,
            outcome: None,
        }
    }

    /// A run that failed at `node` (with the outcome of a `fail` node).
    pub(super) fn failed(
        node: &'a Node,
        next: Option<Target>,
        writes: Vec<Write>,
        outcome: Option<String>,
    ) -> Self {
        Entry {
            node: Some(node),
            next,
            writes,
            status: Status::Failed,
            pending: None,
            outcome,
        }
    }

    /// A run that ended, after `node` (none: at END or a limit).
    pub(super) fn finished(node: Option<&'a Node>, writes: Vec<Write>, outcome: String) -> Self {
        Entry {
            node,
            next: None,
            writes,
            status: Status::Finished,
            pending: None,
            outcome: Some(outcome),
        }
    }

    /// A run paused at `node`, waiting for `pending`; a resume goes on at `next`.
    pub(super) fn interrupted(node: &'a Node, next: Target, pending: Pending) -> Self {
        Entry {
            node: Some(node),
            next: Some(next),
            writes: Vec::new(),
            status: Status::Interrupted,
            pending: Some(Box::new(pending)),
            outcome: None,
        }
    }
}

/// Writes a runner's records into its threads' store.
pub(super) struct Recorder {
    pub(super) threads: Threads,
    /// The store keeps records: without, they are built only for `Saved` events.
    keep: bool,
    /// Emit [`Event::Saved`] for every checkpoint; `Some(true)` with the whole state
    /// on the first of each start or resume.
    pub(super) saved: Option<bool>,
    /// The next `Saved` event is the first of a start or resume.
    first_saved: AtomicBool,
}

impl Recorder {
    pub(super) fn new(threads: Threads) -> Self {
        Recorder {
            keep: threads.store().keeps_records(),
            threads,
            saved: None,
            first_saved: AtomicBool::new(true),
        }
    }

    /// A start or resume begins: its first `Saved` event carries the whole state.
    pub(super) fn begin(&self) {
        self.first_saved.store(true, Ordering::SeqCst);
    }

    /// Tells, with a `Saved` event when asked for them, where a run that writes
    /// nothing finds its thread: its latest record `last`, and the whole state.
    pub(super) fn tell_standing(&self, live: &Live, last: &Checkpoint, events: &Emitter) {
        if self.saved.is_some() && events.is_on() {
            let values = (self.saved == Some(true))
                .then(|| Arc::new(live.state.to_json(self.threads.graph())));
            // Told as where the thread stands, not as a step taken now: no node, no
            // writes (a reader would take them for this run's).
            let mut record = last.clone();
            record.node = None;
            record.writes.clear();
            events.emit(|| Event::Saved {
                record: Arc::new(record),
                values,
            });
        }
    }

    /// Whether [`Recorder::tell_found`] tells anything.
    pub(super) fn tells_found(&self, events: &Emitter) -> bool {
        self.saved == Some(true) && events.is_on()
    }

    /// Tells, with a [`Event::Standing`] when whole states are asked for, the state a run
    /// that goes on from a pause finds (`found`, before the run writes anything); the
    /// `Saved` events after it carry no state, only their writes.
    pub(super) fn tell_found(&self, found: &State, events: &Emitter) {
        if self.tells_found(events) {
            self.first_saved.store(false, Ordering::SeqCst);
            let values = Arc::new(found.to_json(self.threads.graph()));
            let graph_hash = self.threads.graph_hash().clone();
            events.emit(|| Event::Standing { values, graph_hash });
        }
    }

    /// Appends the record of `entry` at `live`'s position and moves it on; keeps the
    /// thread's snapshot when the thread stops running (or every so many records),
    /// and tells of the record with a `Saved` event when asked to.
    pub(super) async fn record(
        &self,
        live: &mut Live,
        entry: Entry<'_>,
        events: &Emitter,
    ) -> Result<(), RunError> {
        self.record_all(live, [(entry, Source::Loop)], None, events)
            .await
    }

    /// The first records of a new run that goes to `entry`: LangGraph's input
    /// checkpoint (source `input`: the state as the run found it, before its input),
    /// then the input's `writes`, appended together, so that the thread never stands
    /// at the first alone (a run resumed from there would have lost its input).
    /// `found` is the state before the input (`live` holds it after).
    pub(super) async fn record_start(
        &self,
        live: &mut Live,
        entry: Target,
        writes: Vec<Write>,
        found: Option<&State>,
        events: &Emitter,
    ) -> Result<(), RunError> {
        self.record_all(
            live,
            [
                (Entry::running(None, Some(entry), Vec::new()), Source::Input),
                (Entry::running(None, Some(entry), writes), Source::Loop),
            ],
            found,
            events,
        )
        .await
    }

    /// Appends the records of `entries` together. The whole state a first `Saved`
    /// event carries is the one after its record: `first`, when that is not `live`'s.
    async fn record_all<'a, const N: usize>(
        &self,
        live: &mut Live,
        entries: [(Entry<'a>, Source); N],
        first: Option<&State>,
        events: &Emitter,
    ) -> Result<(), RunError> {
        let saved_events = self.saved.is_some() && events.is_on();
        if !self.keep && !saved_events {
            live.parent = Some(live.seq + N as u64 - 1);
            live.seq += N as u64;
            return Ok(());
        }
        // An array, not a list: a node's step (one record) allocates nothing here.
        let mut stops = false;
        let records: [Checkpoint; N] = entries.map(|(entry, source)| {
            stops |= entry.status != Status::Running;
            let record = self.build(live, entry, source);
            live.parent = Some(live.seq);
            live.seq += 1;
            record
        });
        let graph = self.threads.graph();
        let saved = match self.saved {
            Some(values) if events.is_on() => Some(std::array::from_fn::<_, N, _>(|i| {
                let state = first.filter(|_| i == 0).unwrap_or(&live.state);
                (
                    Arc::new(records[i].clone()),
                    (values && self.first_saved.swap(false, Ordering::SeqCst))
                        .then(|| Arc::new(state.to_json(graph))),
                )
            })),
            _ => None,
        };
        if self.keep {
            let mut records = records.into_iter();
            match (records.next(), N) {
                (Some(record), 1) => self.threads.store().append(record).await?,
                (first, _) => {
                    self.threads
                        .store()
                        .append_all(first.into_iter().chain(records).collect())
                        .await?
                }
            }
        }
        // A paused, stopped or ended thread keeps its whole state, so that resuming it
        // reads no history; a long run keeps one every so often, for a process killed
        // mid-run.
        let crossed =
            (live.seq + 1 - N as u64..=live.seq).any(|s| s.is_multiple_of(SNAPSHOT_EVERY));
        if self.keep && (stops || crossed) {
            self.threads.snapshot(live, live.seq - 1).await?;
        }
        for (record, values) in saved.into_iter().flatten() {
            events.emit(|| Event::Saved { record, values });
        }
        Ok(())
    }

    /// The record of `entry` at `live`'s position.
    fn build(&self, live: &mut Live, entry: Entry<'_>, source: Source) -> Checkpoint {
        let Entry {
            node,
            next,
            writes,
            status,
            pending,
            outcome,
        } = entry;
        let graph = self.threads.graph();
        let now = Instant::now();
        if live.seq.is_multiple_of(64) {
            live.wall = (now, now_ms());
        }
        let since = now.saturating_duration_since(live.started);
        Checkpoint {
            thread: live.thread.clone(),
            seq: live.seq,
            run: live.run,
            step: live.step,
            node: node.map(|n| n.name.clone()),
            // Inside parallel branches, every branch's next node and the join.
            next: match &live.frontier {
                Some(f) if !f.done() && status != Status::Finished && status != Status::Failed => {
                    Some(f.text(graph))
                }
                _ => next.map(|t| match t {
                    Target::Node(n) => graph.node(n).name.clone(),
                    Target::End => Arc::from(crate::spec::END),
                }),
            },
            writes,
            status,
            pending,
            outcome,
            graph: self.threads.graph_path().clone(),
            graph_hash: self.threads.graph_hash().clone(),
            limited: live.limited,
            error: (!live.error.is_null()).then(|| Box::new((*live.error).clone())),
            tokens: live.tokens,
            usage: live.meter.usage(),
            elapsed_ms: (live.elapsed_before + since).as_millis() as u64,
            at_ms: (live.wall.1)
                .saturating_add(now.saturating_duration_since(live.wall.0).as_millis() as u64),
            source,
            parent: live.parent,
        }
    }
}
