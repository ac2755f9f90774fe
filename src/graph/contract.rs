//! What a graph takes from whoever runs it: the fields an input may set (`[graph]
//! input`; never a constant) and the values a run's configuration may give
//! (`[configurable]`, each of its type and within its bounds). Checked before a run
//! writes anything, by the runner and, earlier, by the server.

use super::Graph;

impl Graph {
    /// Refuses an input that sets what no input sets: a constant, or a field the
    /// graph's `input` does not list. (An unknown field is refused where it is written.)
    pub fn check_input(
        &self,
        input: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), String> {
        // Without `[graph] input` every state field is one, and an unknown name is
        // told as no state field where it is written.
        let declared = self.input_declared;
        for name in input.keys() {
            let Some(f) = self.field_id(name).map(|id| self.field(id)) else {
                if declared {
                    return Err(self.not_input(name));
                }
                continue;
            };
            if f.configurable.is_some() {
                return Err(format!(
                    "`{name}` is configurable: a run's configuration gives it (`context` or `config.configurable`; `switchyard run --context`), not its input"
                ));
            }
            if f.constant {
                return Err(format!(
                    "`{name}` is a constant of graph `{}`: no run sets it (declare it under `[configurable]` to let a run choose it)",
                    self.name
                ));
            }
            if !f.input {
                return Err(self.not_input(name));
            }
        }
        Ok(())
    }

    fn not_input(&self, name: &str) -> String {
        let inputs = self.fields.iter().filter(|f| f.input).map(|f| &*f.name);
        let hint = crate::suggestion::help_for(name, inputs.clone())
            .map(|h| format!("; {h}"))
            .unwrap_or_default();
        let all: Vec<String> = inputs.map(|n| format!("`{n}`")).collect();
        format!(
            "`{name}` is not an input of graph `{}`{hint} (its inputs: {})",
            self.name,
            if all.is_empty() {
                "none".into()
            } else {
                all.join(", ")
            }
        )
    }

    /// Checks a run's configuration: values for `[configurable]` constants, each
    /// of its type and within its bounds.
    pub fn check_configuration(
        &self,
        values: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), String> {
        for (key, value) in values {
            self.check_configured(key, value)?;
        }
        Ok(())
    }

    /// Why `value` is not one `key` of a run's configuration may have, if it is not.
    pub fn check_configured(&self, key: &str, value: &serde_json::Value) -> Result<(), String> {
        let field = self.field_id(key).map(|id| self.field(id));
        match field {
            Some(f) if f.configurable.is_some() => {
                if !f.ty.accepts(value) {
                    return Err(format!(
                        "`{key}` is a configurable `{}` of graph `{}`, and {value} is not one",
                        f.ty, self.name
                    ));
                }
                if let Some(why) = f.configurable.as_ref().and_then(|b| b.refuse(value)) {
                    return Err(format!("`{key}` of graph `{}`: {why}", self.name));
                }
                Ok(())
            }
            Some(f) if f.constant => Err(format!(
                "`{key}` is a constant of graph `{}`, not configurable (declare it under `[configurable]` to let a run choose it)",
                self.name
            )),
            _ => {
                let names = self
                    .fields
                    .iter()
                    .filter(|f| f.configurable.is_some())
                    .map(|f| &*f.name);
                let hint = crate::suggestion::help_for(key, names.clone())
                    .map(|h| format!("; {h}"))
                    .unwrap_or_default();
                let all: Vec<String> = names.map(|n| format!("`{n}`")).collect();
                Err(format!(
                    "graph `{}` has no configurable `{key}`{hint} (its configurable values: {})",
                    self.name,
                    if all.is_empty() {
                        "none".into()
                    } else {
                        all.join(", ")
                    }
                ))
            }
        }
    }
}
