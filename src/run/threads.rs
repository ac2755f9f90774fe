//! [`Threads`]: a graph's threads in a checkpoint store, as the runner and its callers
//! read them: a thread's state at any checkpoint, its history, forks, a person's writes
//! between runs, pruning, and the checks that a stored thread still fits the graph.
//! Reading a thread needs no runner: a server or the command line asks this directly.

use super::apply::{route, write_fields};
use super::cursor::{Frontier, Live, now_ms};
use super::message_ids::WrittenAt;
use super::outcome::RunError;
use super::state::{State, describe};
use crate::graph::{Graph, Target};
use crate::store::{Checkpoint, Checkpoints, Pending, Source, Status, StoreError};
use serde_json::Value as Json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One graph's view of the threads in one store: what its records say, replayed
/// through this graph's fields and reducers.
#[derive(Clone)]
pub struct Threads {
    graph: Arc<Graph>,
    /// The graph file and its hash, as every checkpoint records them.
    path: Arc<str>,
    hash: Arc<str>,
    store: Arc<dyn Checkpoints>,
}

impl Threads {
    pub fn new(graph: Arc<Graph>, store: Arc<dyn Checkpoints>) -> Self {
        let path = Arc::from(
            std::path::absolute(&graph.path)
                .unwrap_or_else(|_| graph.path.clone())
                .to_string_lossy()
                .as_ref(),
        );
        let hash = Arc::from(graph.hash.as_str());
        Threads {
            graph,
            path,
            hash,
            store,
        }
    }

    #[inline]
    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    #[inline]
    pub(super) fn store(&self) -> &Arc<dyn Checkpoints> {
        &self.store
    }

    /// The graph file as records name it (absolute) and its hash.
    #[inline]
    pub(super) fn graph_path(&self) -> &Arc<str> {
        &self.path
    }

    #[inline]
    pub(super) fn graph_hash(&self) -> &Arc<str> {
        &self.hash
    }

    /// Copies a thread's history up to and including checkpoint `seq` into a new
    /// thread, which can then be resumed from there: the records `seq` follows, on its
    /// branch only, numbered again from the first.
    pub async fn fork(&self, thread: &str, seq: u64, new_thread: &str) -> Result<(), RunError> {
        if self.store.latest(new_thread).await?.is_some() {
            return Err(RunError::ThreadExists(new_thread.into()));
        }
        let records = self.store.load(thread).await?;
        if records.is_empty() {
            return Err(RunError::UnknownThread(thread.into()));
        }
        let chain = branch_to(thread, records, seq)?;
        let new: Arc<str> = Arc::from(new_thread);
        // A record's number in the copy, by its number in the original.
        let first = chain.first().map_or(0, |r| r.seq);
        let renumber: std::collections::HashMap<u64, u64> = chain
            .iter()
            .enumerate()
            .map(|(i, r)| (r.seq, first + i as u64))
            .collect();
        // A fork of a mid-run checkpoint (`running`) resumes from its `next` node, as a
        // thread whose process died there would. All records or none: a fork killed
        // part-way must not leave a thread that resumes from the wrong step.
        let copy: Vec<Checkpoint> = chain
            .into_iter()
            .map(|mut r| {
                r.thread = new.clone();
                r.seq = renumber[&r.seq];
                r.parent = r.parent.and_then(|p| renumber.get(&p).copied());
                if let Some(p) = r.pending.as_deref_mut() {
                    p.at_seq = p.at_seq.map(|a| renumber.get(&a).copied().unwrap_or(r.seq));
                }
                r
            })
            .collect();
        self.store.append_all(copy).await?;
        Ok(())
    }

    /// The state of a thread at its latest checkpoint, or at checkpoint `seq` (on any
    /// branch).
    pub async fn state(
        &self,
        thread: &str,
        seq: Option<u64>,
    ) -> Result<(Json, Checkpoint), RunError> {
        let Some(seq) = seq else {
            let (live, last) = self.load_live(thread).await?;
            let last = last.ok_or_else(|| RunError::UnknownThread(thread.into()))?;
            return Ok((live.state.to_json(&self.graph), last));
        };
        let records = self.store.load(thread).await?;
        if records.is_empty() {
            return Err(RunError::UnknownThread(thread.into()));
        }
        let records = branch_to(thread, records, seq)?;
        let (live, last) = self.replay(thread, &records)?;
        let last = last.ok_or_else(|| RunError::UnknownThread(thread.into()))?;
        Ok((live.state.to_json(&self.graph), last.clone()))
    }

    /// The latest checkpoint of a thread: where it stands, its pending interrupt.
    pub async fn latest(&self, thread: &str) -> Result<Checkpoint, RunError> {
        self.store
            .latest(thread)
            .await?
            .ok_or_else(|| RunError::UnknownThread(thread.into()))
    }

    /// Keeps only a thread's latest checkpoint, rewritten to hold the whole state
    /// there (source `base`): the history before it goes, and with it the states and
    /// forks of earlier checkpoints. The thread goes on as it would have. Returns how
    /// many checkpoints went.
    pub async fn prune(&self, thread: &str) -> Result<u64, RunError> {
        let _claim = self.store.claim(thread).await?;
        let (live, last) = self.load_live(thread).await?;
        let last = last.ok_or_else(|| RunError::UnknownThread(thread.into()))?;
        let writes = self
            .graph
            .fields
            .iter()
            .zip(live.state.values.iter())
            .map(|(f, v)| crate::store::Write {
                field: f.name.clone(),
                value: v.arc().clone(),
            })
            .collect();
        Ok(self
            .store
            .prune(Checkpoint {
                writes,
                source: Source::Base,
                parent: None,
                ..last
            })
            .await?)
    }

    /// Every checkpoint of a thread.
    pub async fn history(&self, thread: &str) -> Result<Vec<Checkpoint>, RunError> {
        let records = self.store.load(thread).await?;
        if records.is_empty() {
            return Err(RunError::UnknownThread(thread.into()));
        }
        Ok(records)
    }

    /// A thread's latest state and record: from its snapshot and the records after it
    /// when the snapshot was made by this graph, else by replaying every record. The
    /// cost of resuming a thread does not grow with its history.
    pub(super) async fn load_live(
        &self,
        thread: &str,
    ) -> Result<(Live, Option<Checkpoint>), RunError> {
        if let (Some(snap), records) = self.store.resume_point(thread).await?
            && snap.graph_hash == self.hash
        {
            // The snapshot's own record first: a snapshot of a record a rollback removed
            // since is not used; nor one that is not on the latest record's branch (a
            // run forked the thread at an earlier record since).
            if records.first().is_some_and(|r| r.seq == snap.seq)
                && let Some(records) = on_branch_from(records)
            {
                let values = snap.values.into_iter().map(|(f, v)| (f, v.into()));
                let mut state = State::from_snapshot(&self.graph, values);
                for r in &records[1..] {
                    self.replay_writes(thread, &mut state, r)?;
                }
                let last = records.into_iter().next_back();
                return Ok((self.live_at(thread, state, last.as_ref()), last));
            }
        }
        let records = self.store.load(thread).await?;
        let Some(head) = records.last().map(|r| r.seq) else {
            let (live, _) = self.replay(thread, &[])?;
            return Ok((live, None));
        };
        let records = branch_to(thread, records, head)?;
        let (live, _) = self.replay(thread, &records)?;
        Ok((live, records.into_iter().next_back()))
    }

    /// The thread standing at its record `at` to go on from there: where `at` is not
    /// its latest record, a fork. The records a run then writes follow `at` (a new
    /// branch, whose first record is the thread's latest), in a run of their own
    /// (numbered after every run of the thread, so that the ids made from it are new).
    /// Also says whether it forks.
    pub(super) async fn load_live_at(
        &self,
        thread: &str,
        at: Option<u64>,
    ) -> Result<(Live, Option<Checkpoint>, bool), RunError> {
        let Some(at) = at else {
            let (live, last) = self.load_live(thread).await?;
            return Ok((live, last, false));
        };
        let head = self
            .store
            .latest(thread)
            .await?
            .ok_or_else(|| RunError::UnknownThread(thread.into()))?;
        if head.seq == at {
            let (live, last) = self.load_live(thread).await?;
            return Ok((live, last, false));
        }
        let records = branch_to(thread, self.store.load(thread).await?, at)?;
        let (mut live, last) = self.replay(thread, &records)?;
        let last = last.cloned();
        live.seq = head.seq + 1;
        live.run = head.run + 1;
        Ok((live, last, true))
    }

    /// Keeps the thread's state after its record `seq` as its snapshot.
    pub(super) async fn snapshot(&self, live: &Live, seq: u64) -> Result<(), RunError> {
        let values = self
            .graph
            .fields
            .iter()
            .zip(live.state.values.iter())
            .map(|(f, v)| (f.name.clone(), v.arc().clone()))
            .collect();
        self.store
            .put_snapshot(crate::store::Snapshot {
                thread: live.thread.clone(),
                seq,
                graph: self.path.clone(),
                graph_hash: self.hash.clone(),
                values,
            })
            .await?;
        Ok(())
    }

    fn replay_writes(
        &self,
        thread: &str,
        state: &mut State,
        r: &Checkpoint,
    ) -> Result<(), RunError> {
        if r.source == Source::Base {
            *state = State::from_base(&self.graph, r);
            return Ok(());
        }
        for w in &r.writes {
            // A field the graph no longer declares is skipped: its value cannot be
            // read by anything the graph now says.
            // The writes were checked when they were made; a field whose type was
            // edited since is reported by `check_types` where it matters.
            if let Some(id) = self.graph.field_id(&w.field) {
                state
                    .replay(&self.graph, id, w.value.clone())
                    .map_err(|e| StoreError::Corrupt {
                        thread: thread.into(),
                        message: format!("replaying checkpoint {}: {e}", r.seq),
                    })?;
            }
        }
        Ok(())
    }

    /// The thread as the runner drives it, standing at `last` with `state`.
    fn live_at(&self, thread: &str, state: State, last: Option<&Checkpoint>) -> Live {
        Live {
            thread: Arc::from(thread),
            seq: last.map_or(0, |r| r.seq.saturating_add(1)),
            parent: last.map(|r| r.seq),
            run: last.map_or(0, |r| r.run),
            step: last.map_or(0, |r| r.step),
            state,
            tokens: last.map_or(0, |r| r.tokens),
            meter: Arc::new(super::meter::Meter::from_usage(
                &last.map(|r| r.usage).unwrap_or_default(),
            )),
            elapsed_before: Duration::ZERO,
            started: Instant::now(),
            wall: (Instant::now(), now_ms()),
            limited: last.is_some_and(|r| r.limited),
            error: Arc::new(
                last.and_then(|r| r.error.as_deref().cloned())
                    .unwrap_or(Json::Null),
            ),
            past_breakpoint: None,
            answer: None,
            undo: Vec::new(),
            frontier: None,
            branch: None,
        }
    }

    /// Rebuilds a thread's state by replaying its records' writes.
    pub(super) fn replay<'r>(
        &self,
        thread: &str,
        records: &'r [Checkpoint],
    ) -> Result<(Live, Option<&'r Checkpoint>), RunError> {
        let mut state = State::new(&self.graph);
        for r in records {
            self.replay_writes(thread, &mut state, r)?;
        }
        let last = records.last();
        Ok((self.live_at(thread, state, last), last))
    }

    /// Where a stopped run goes on: its record's `next`, or, inside parallel branches,
    /// their join, with every branch's next node put back in `live`.
    pub(super) fn next_of(
        &self,
        thread: &str,
        live: &mut Live,
        next: Option<&str>,
    ) -> Result<Target, RunError> {
        match next.and_then(|n| Frontier::parse(n, &self.graph)) {
            Some(Ok(frontier)) => {
                let join = frontier.join;
                live.frontier = Some(frontier);
                Ok(Target::Node(join))
            }
            Some(Err(node)) => Err(RunError::NodeGone {
                thread: thread.into(),
                node,
            }),
            None => self.target_of(thread, next),
        }
    }

    pub(super) fn target_of(&self, thread: &str, name: Option<&str>) -> Result<Target, RunError> {
        match name {
            None => Ok(Target::End),
            Some(n) if n == crate::spec::END => Ok(Target::End),
            Some(n) => self
                .graph
                .node_id(n)
                .map(Target::Node)
                .ok_or_else(|| RunError::NodeGone {
                    thread: thread.into(),
                    node: n.to_string(),
                }),
        }
    }

    /// Whether a thread that has not ended, written by another version of this
    /// graph, can go on on this one: `None` when it can (every node where it stands is
    /// still there, each pending interrupt's node unedited, every value it holds fits
    /// its field's type), else why not. A thread that ended, or stands on this version
    /// already, can.
    pub async fn movable(&self, thread: &str) -> Result<Option<String>, RunError> {
        let (live, last) = self.load_live(thread).await?;
        let Some(last) = last else {
            return Err(RunError::UnknownThread(thread.into()));
        };
        if matches!(last.status, Status::Finished | Status::Failed) {
            return Ok(None);
        }
        let mut pending: Vec<&Pending> = Vec::new();
        if let Some(p) = last.pending.as_deref() {
            pending.push(p);
            pending.extend(p.others.iter());
        }
        let checks = if pending.is_empty() {
            vec![self.check_graph(thread, &last, None, false)]
        } else {
            pending
                .into_iter()
                .map(|p| self.check_graph(thread, &last, Some(p), false))
                .collect()
        };
        let found = checks
            .into_iter()
            .chain([self.check_types(thread, &live, false)])
            .find_map(Result::err);
        match found {
            None => Ok(None),
            Some(RunError::GraphChanged { why, .. }) => Ok(Some(why)),
            Some(RunError::NodeGone { node, .. }) => {
                Ok(Some(format!("the node `{node}` was removed")))
            }
            Some(e) => Err(e),
        }
    }

    /// Refuses to go on when a field's type was edited so that the value the thread
    /// holds no longer fits it, unless forced.
    pub(super) fn check_types(
        &self,
        thread: &str,
        live: &Live,
        force: bool,
    ) -> Result<(), RunError> {
        if force {
            return Ok(());
        }
        for (f, slot) in self.graph.fields.iter().zip(live.state.values.iter()) {
            // A value still text is looked at without being parsed where its type
            // tells by its first character (`json`, an object).
            if !slot.fits(&f.ty) {
                let value: &Json = slot;
                return Err(RunError::GraphChanged {
                    thread: thread.into(),
                    why: format!(
                        "field `{}` is now `{}`, and the thread holds {}",
                        f.name,
                        f.ty,
                        super::state::describe(value)
                    ),
                });
            }
        }
        Ok(())
    }

    /// Refuses to go on when the graph changed under a paused thread in a way that
    /// touches where it stands, unless forced.
    pub(super) fn check_graph(
        &self,
        thread: &str,
        last: &Checkpoint,
        pending: Option<&Pending>,
        force: bool,
    ) -> Result<(), RunError> {
        if force || *last.graph_hash == self.graph.hash {
            return Ok(());
        }
        let why = match pending {
            Some(p) => match self.graph.node_id(&p.node) {
                None => Some(format!("the pending node `{}` was removed", p.node)),
                Some(id) if self.graph.node(id).fingerprint != p.fingerprint => Some(format!(
                    "the pending node `{}` (its keys, edges, prompt or schema files) was edited",
                    p.node
                )),
                Some(_) => None,
            },
            None => match last.next.as_deref() {
                // Inside parallel branches: each branch's next node and the join.
                Some(n) if n.contains(';') => n
                    .split([',', ';'])
                    .find(|n| !n.is_empty() && self.graph.node_id(n).is_none())
                    .map(|n| format!("the next node `{n}` was removed")),
                Some(n) if n != crate::spec::END && self.graph.node_id(n).is_none() => {
                    Some(format!("the next node `{n}` was removed"))
                }
                _ => None,
            },
        };
        match why {
            Some(why) => Err(RunError::GraphChanged {
                thread: thread.into(),
                why,
            }),
            None => Ok(()),
        }
    }

    /// The state at each of a thread's checkpoints (on every branch), newest first:
    /// the last `limit` of those before checkpoint `before` (of all, without one), each
    /// with its record. One replay serves them all, of the records they follow and no
    /// other branch: records come in the order they were written, so a record's parent
    /// is replayed before it, and the state at a record a later one forks from is kept
    /// aside until then.
    pub async fn states(
        &self,
        thread: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(Json, Checkpoint)>, RunError> {
        let records = self.store.load(thread).await?;
        if records.is_empty() {
            return Err(RunError::UnknownThread(thread.into()));
        }
        let end = records
            .iter()
            .position(|r| before.is_some_and(|b| r.seq >= b))
            .unwrap_or(records.len());
        let first = end.saturating_sub(limit);
        let records = &records[..end];
        let corrupt = |r: &Checkpoint, p: u64| StoreError::Corrupt {
            thread: thread.into(),
            message: format!("checkpoint {} follows {p}, which it has not", r.seq),
        };
        // The records the listed ones follow, back to the first: the only ones replayed.
        let base = records.first().map_or(0, |r| r.seq);
        let mut needed = vec![false; records.len()];
        for i in (first..records.len()).rev() {
            let mut i = i;
            while !needed[i] {
                needed[i] = true;
                let r = &records[i];
                match r.parent.filter(|_| r.source != Source::Base) {
                    Some(p) => {
                        i = p
                            .checked_sub(base)
                            .map(|j| j as usize)
                            .filter(|&j| j < i)
                            .ok_or_else(|| corrupt(r, p))?;
                    }
                    None => break,
                }
            }
        }
        // Of those, the records some record other than the next one replayed follows,
        // with how many do: the state kept there is moved out for the last of them
        // rather than copied (a copy shared with the state going on is copied again,
        // whole, at its first write).
        let mut forked_from: std::collections::HashMap<u64, usize> =
            std::collections::HashMap::new();
        let mut previous = None;
        for (r, _) in records.iter().zip(&needed).filter(|(_, n)| **n) {
            if r.source != Source::Base
                && r.parent != previous
                && let Some(p) = r.parent
            {
                *forked_from.entry(p).or_default() += 1;
            }
            previous = Some(r.seq);
        }
        let mut kept: std::collections::HashMap<u64, State> = std::collections::HashMap::new();
        let mut state = State::new(&self.graph);
        let mut at: Option<u64> = None;
        let mut out = Vec::with_capacity(end - first);
        for (i, r) in records.iter().enumerate() {
            if !needed[i] {
                continue;
            }
            if r.source != Source::Base && r.parent != at {
                state = match r.parent {
                    None => State::new(&self.graph),
                    Some(p) => {
                        let left = forked_from.get_mut(&p).ok_or_else(|| corrupt(r, p))?;
                        *left -= 1;
                        match *left {
                            0 => kept.remove(&p),
                            _ => kept.get(&p).cloned(),
                        }
                        .ok_or_else(|| corrupt(r, p))?
                    }
                };
            }
            self.replay_writes(thread, &mut state, r)?;
            at = Some(r.seq);
            if forked_from.contains_key(&r.seq) {
                kept.insert(r.seq, state.clone());
            }
            if i >= first {
                out.push((state.to_json(&self.graph), r.clone()));
            }
        }
        out.reverse();
        Ok(out)
    }

    /// A person's write to a thread's state between runs (LangGraph's `update_state`):
    /// each field of `values` goes through its reducer and type checks, and the result
    /// is a checkpoint of its own (source `update`), so the history shows the change.
    /// The thread stays where it stood (paused at the same interrupt, finished) unless
    /// `as_node` names a node: then the write counts as that node's, and the thread
    /// stands stopped before the node the node's edges pick on the new state, to be
    /// resumed from there. A refused write changes nothing.
    pub async fn update(
        &self,
        thread: &str,
        values: Json,
        as_node: Option<&str>,
    ) -> Result<Checkpoint, RunError> {
        self.update_at(thread, None, values, as_node).await
    }

    /// [`Threads::update`] of the state at checkpoint `at` (the latest, without): from
    /// an earlier one, the update forks the thread there, and its record, following
    /// `at`, is the thread's latest, to go on from.
    pub async fn update_at(
        &self,
        thread: &str,
        at: Option<u64>,
        values: Json,
        as_node: Option<&str>,
    ) -> Result<Checkpoint, RunError> {
        let _claim = self.store.claim(thread).await?;
        let (mut live, last, _) = self.load_live_at(thread, at).await?;
        let last = last.as_ref();
        let Json::Object(fields) = values else {
            return Err(RunError::Update(format!(
                "expected an object of state fields, got {}",
                describe(&values)
            )));
        };
        // A constant is the graph's (a configurable one the run's configuration's),
        // never changed in the middle of a thread.
        if let Some(name) = fields.keys().find(|k| {
            self.graph
                .field_id(k)
                .is_some_and(|id| self.graph.field(id).constant)
        }) {
            return Err(RunError::Update(format!(
                "`{name}` is a constant of the graph: no update sets it{}",
                if self.graph.field_id(name).is_some_and(|id| self
                    .graph
                    .field(id)
                    .configurable
                    .is_some())
                {
                    " (a run's configuration gives a configurable one)"
                } else {
                    ""
                }
            )));
        }
        // The update is recorded as the next checkpoint.
        let at = WrittenAt {
            seq: live.seq,
            step: None,
        };
        let writes = write_fields(&self.graph, &mut live, fields, at).map_err(RunError::Update)?;
        let (node, next, status, pending, outcome): (_, _, _, Option<Pending>, _) = match as_node {
            Some(name) => {
                let id = self.graph.node_id(name).ok_or_else(|| {
                    let hint = crate::suggestion::help_for(
                        name,
                        self.graph.nodes.iter().map(|n| &*n.name),
                    )
                    .map(|h| format!("; {h}"))
                    .unwrap_or_default();
                    RunError::Update(format!("`{name}` is not a node{hint}"))
                })?;
                let node = self.graph.node(id);
                if matches!(node.next, crate::graph::Next::Fork { .. }) {
                    return Err(RunError::Update(format!(
                        "`{name}` forks into parallel branches, which an update cannot start"
                    )));
                }
                // `run.max_steps` is the graph's: an update is no run's.
                let next = route(&self.graph, &live, node, self.graph.limits.max_steps)
                    .map_err(|m| RunError::Update(format!("as `{name}`: {m}")))?
                    .map_or(Target::End, |(t, _)| t);
                (
                    Some(node.name.clone()),
                    Some(Arc::from(self.graph.target_name(next))),
                    Status::Stopped,
                    None,
                    None,
                )
            }
            None => match last {
                Some(l) => (
                    None,
                    l.next.clone(),
                    l.status,
                    l.pending.as_deref().cloned(),
                    l.outcome.clone(),
                ),
                // A thread that never ran holds only this write: nothing to go on
                // with, so it stands as finished, and a run starts afresh on it.
                None => (None, None, Status::Finished, None, None),
            },
        };
        let record = Checkpoint {
            thread: live.thread.clone(),
            seq: live.seq,
            run: live.run,
            step: live.step,
            node,
            next,
            writes,
            status,
            pending: pending.map(Box::new),
            outcome,
            graph: self.path.clone(),
            graph_hash: self.hash.clone(),
            limited: live.limited,
            error: (!live.error.is_null()).then(|| Box::new((*live.error).clone())),
            tokens: live.tokens,
            usage: live.meter.usage(),
            elapsed_ms: last.map_or(0, |l| l.elapsed_ms),
            at_ms: now_ms(),
            source: Source::Update,
            parent: live.parent,
        };
        self.store.append(record.clone()).await?;
        live.seq += 1;
        live.parent = Some(record.seq);
        self.snapshot(&live, record.seq).await?;
        Ok(record)
    }
}

/// The records on the branch that leads to record `seq`, in order: `seq`, the record
/// it follows, and so on back to the thread's first (or its base). `records` are a
/// thread's, in order.
fn branch_to(
    thread: &str,
    mut records: Vec<Checkpoint>,
    seq: u64,
) -> Result<Vec<Checkpoint>, RunError> {
    let Some(first) = records.first().map(|r| r.seq) else {
        return Err(RunError::UnknownThread(thread.into()));
    };
    // Records are numbered without a gap (the store checks), so a record's place is
    // its number less the first's.
    let len = records.len();
    let place = |s: u64| {
        s.checked_sub(first)
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < len)
    };
    let Some(mut i) = place(seq) else {
        return Err(RunError::NoSuchCheckpoint {
            thread: thread.into(),
            seq,
        });
    };
    records.truncate(i + 1);
    // A linear history: every record follows the one before it.
    if on_branch_from_ref(&records) {
        return Ok(records);
    }
    let mut keep = vec![false; records.len()];
    loop {
        keep[i] = true;
        let r = &records[i];
        match r.parent {
            Some(p) if r.source != Source::Base => match place(p).filter(|&j| j < i) {
                Some(j) => i = j,
                None => {
                    return Err(StoreError::Corrupt {
                        thread: thread.into(),
                        message: format!("checkpoint {} follows {p}, which it has not", r.seq),
                    }
                    .into());
                }
            },
            _ => break,
        }
    }
    let mut keep = keep.into_iter();
    records.retain(|_| keep.next() == Some(true));
    Ok(records)
}

/// Whether every record of `records` after the first follows the one before it.
fn on_branch_from_ref(records: &[Checkpoint]) -> bool {
    records
        .windows(2)
        .all(|w| w[1].source == Source::Base || w[1].parent == Some(w[0].seq))
}

/// `records` (a snapshot's record and those written after it) on the latest one's
/// branch, when that branch goes through the first; none when it does not.
fn on_branch_from(mut records: Vec<Checkpoint>) -> Option<Vec<Checkpoint>> {
    if on_branch_from_ref(&records) {
        return Some(records);
    }
    let first = records.first()?.seq;
    let mut keep = vec![false; records.len()];
    let mut i = records.len() - 1;
    loop {
        keep[i] = true;
        if i == 0 {
            break;
        }
        let r = &records[i];
        if r.source == Source::Base {
            return None;
        }
        let j = r.parent?.checked_sub(first)? as usize;
        if j >= i {
            return None;
        }
        i = j;
    }
    let mut keep = keep.into_iter();
    records.retain(|_| keep.next() == Some(true));
    Some(records)
}
