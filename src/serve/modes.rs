//! The stream modes a reader asks for, as LangGraph names them.

use serde_json::Value as Json;

/// The stream modes a reader asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Modes {
    pub(super) values: bool,
    pub(super) updates: bool,
    pub(super) messages: bool,
    /// The legacy `messages` mode: `messages/metadata`, `messages/partial` (the whole
    /// message so far) and `messages/complete` events.
    pub(super) messages_whole: bool,
    pub(super) custom: bool,
    pub(super) events: bool,
    pub(super) debug: bool,
    pub(super) tasks: bool,
    pub(super) checkpoints: bool,
}

impl Modes {
    /// From the names a client gives; none means `values`.
    pub(super) fn parse(names: &[String]) -> Result<Modes, String> {
        let mut m = Modes::default();
        for name in names {
            match name.as_str() {
                "values" => m.values = true,
                "updates" => m.updates = true,
                "messages-tuple" => m.messages = true,
                "messages" => m.messages_whole = true,
                "custom" => m.custom = true,
                "events" => m.events = true,
                "debug" => m.debug = true,
                "tasks" => m.tasks = true,
                "checkpoints" => m.checkpoints = true,
                other => {
                    return Err(format!(
                        "stream mode `{other}` is not one of values, updates, messages-tuple, messages, custom, events, debug, tasks, checkpoints"
                    ));
                }
            }
        }
        if m == Modes::default() {
            m.values = true;
        }
        Ok(m)
    }

    pub(super) fn wants(&self, mode: Mode) -> bool {
        match mode {
            Mode::Values => self.values,
            Mode::Updates => self.updates,
            Mode::Messages => self.messages,
            Mode::MessagesWhole => self.messages_whole,
            Mode::Custom => self.custom,
            Mode::Events => self.events,
            Mode::Debug => self.debug,
            Mode::Tasks => self.tasks,
            Mode::Checkpoints => self.checkpoints,
        }
    }
}

/// Reads a `stream_mode` value as clients send it: a name, a list of names, or (in a
/// query string) a JSON list.
pub(super) fn mode_names(v: &Json) -> Result<Vec<String>, String> {
    match v {
        Json::Null => Ok(Vec::new()),
        Json::String(s) if s.trim_start().starts_with('[') => {
            let parsed: Json =
                serde_json::from_str(s).map_err(|e| format!("stream_mode `{s}`: {e}"))?;
            mode_names(&parsed)
        }
        Json::String(s) => Ok(vec![s.clone()]),
        Json::Array(items) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("stream_mode holds `{i}`, not a name"))
            })
            .collect(),
        other => Err(format!("stream_mode is `{other}`, not a name or a list")),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Values,
    Updates,
    Messages,
    MessagesWhole,
    Custom,
    Events,
    Debug,
    Tasks,
    Checkpoints,
}
