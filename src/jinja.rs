//! The one minijinja environment every stage uses, so what `validate` accepts is what
//! a run can evaluate: minijinja's built-ins plus a few filters graphs need and the
//! template language lacks.
//!
//! | filter | does |
//! |---|---|
//! | `sha256` | the SHA-256 of a value's text (strings as they are, others as JSON), in hex |
//! | `fromjson` | parses a JSON string into a value; none when it is not JSON; any other value as it is |

pub(crate) mod limits;

use minijinja::value::Value;
use minijinja::{Environment, Error, ErrorKind};
use sha2::{Digest, Sha256};

/// Instructions one evaluation or render may run: loops that would build enormous
/// strings or lists, or never end, fail instead ("engine ran out of fuel").
pub(crate) const MAX_FUEL: u64 = 20_000_000;

/// A fresh environment with Switchyard's filters.
pub(crate) fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_fuel(Some(MAX_FUEL));
    env.add_filter("sha256", sha256);
    env.add_filter("fromjson", fromjson);
    env
}

/// The names of Switchyard's own filters, for did-you-mean hints.
pub(crate) const FILTERS: [&str; 2] = ["sha256", "fromjson"];

fn sha256(value: Value) -> Result<String, Error> {
    let text = match value.as_str() {
        Some(s) => s.to_string(),
        None => serde_json::to_string(&value)
            .map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?,
    };
    Ok(hex::encode(Sha256::digest(text.as_bytes())))
}

fn fromjson(value: Value) -> Value {
    // A tool's text result or a model's free text may or may not hold JSON; the graph
    // tests the result for none rather than failing the node. A value that is not a
    // string was parsed already (an MCP text result that is JSON arrives parsed).
    let Some(s) = value.as_str() else {
        return value;
    };
    serde_json::from_str::<serde_json::Value>(s)
        .ok()
        .map_or_else(|| Value::from(()), crate::value::from_json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_hash_and_parse() {
        let env = environment();
        let eval = |src: &str| env.compile_expression(src).unwrap().eval(()).unwrap();
        assert_eq!(
            eval("'abc' | sha256").as_str().unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(eval("{'a': 1} | sha256"), eval("'{\"a\":1}' | sha256"));
        assert_eq!(eval("('{\"a\": [1, 2]}' | fromjson).a[1]"), Value::from(2));
        assert!(eval("'not json' | fromjson").is_none());
        assert_eq!(eval("({'a': 1} | fromjson).a"), Value::from(1));
    }
}
