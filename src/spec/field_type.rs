use std::fmt;

/// A state field's type: `string`, `int`, `float`, `bool`, `json`, `object`, `messages`,
/// `list<T>`, `map<T>`, each optionally followed by `?`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldType {
    String,
    Int,
    Float,
    Bool,
    Json,
    Object,
    Messages,
    List(Box<FieldType>),
    Map(Box<FieldType>),
    Optional(Box<FieldType>),
}

impl FieldType {
    /// The type without its `?`.
    pub fn base(&self) -> &FieldType {
        match self {
            FieldType::Optional(t) => t.base(),
            t => t,
        }
    }

    pub fn is_optional(&self) -> bool {
        matches!(self, FieldType::Optional(_))
    }

    /// Whether a JSON value fits. `json` takes anything; `?` adds null.
    pub fn accepts(&self, v: &serde_json::Value) -> bool {
        use serde_json::Value as V;
        match (self, v) {
            (FieldType::Optional(_), V::Null) => true,
            (FieldType::Optional(t), v) => t.accepts(v),
            (FieldType::Json, _) => true,
            (FieldType::String, V::String(_)) => true,
            (FieldType::Int, V::Number(n)) => n.is_i64() || n.is_u64(),
            (FieldType::Float, V::Number(_)) => true,
            (FieldType::Bool, V::Bool(_)) => true,
            (FieldType::Object, V::Object(_)) => true,
            (FieldType::Messages, V::Array(items)) => items.iter().all(is_message),
            (FieldType::List(t), V::Array(items)) => items.iter().all(|i| t.accepts(i)),
            (FieldType::Map(t), V::Object(m)) => m.values().all(|i| t.accepts(i)),
            _ => false,
        }
    }

    /// The value a field of this type starts with when no default is given.
    pub fn zero(&self) -> serde_json::Value {
        use serde_json::Value as V;
        match self {
            FieldType::Optional(_) | FieldType::Json => V::Null,
            FieldType::String => V::String(String::new()),
            FieldType::Int => V::from(0),
            FieldType::Float => V::from(0.0),
            FieldType::Bool => V::Bool(false),
            FieldType::Object | FieldType::Map(_) => V::Object(Default::default()),
            FieldType::Messages | FieldType::List(_) => V::Array(Vec::new()),
        }
    }
}

/// A chat message: an object with a string `role` and a `content`. Its few keys are
/// looked at one by one rather than the two names hashed (a history of messages is
/// checked at every resume).
pub fn is_message(v: &serde_json::Value) -> bool {
    let serde_json::Value::Object(m) = v else {
        return false;
    };
    let (mut role, mut content) = (false, false);
    for (k, v) in m {
        match k.as_str() {
            "role" => role = v.is_string(),
            "content" => content = true,
            _ => {}
        }
    }
    role && content
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldType::String => f.write_str("string"),
            FieldType::Int => f.write_str("int"),
            FieldType::Float => f.write_str("float"),
            FieldType::Bool => f.write_str("bool"),
            FieldType::Json => f.write_str("json"),
            FieldType::Object => f.write_str("object"),
            FieldType::Messages => f.write_str("messages"),
            FieldType::List(t) => write!(f, "list<{t}>"),
            FieldType::Map(t) => write!(f, "map<{t}>"),
            FieldType::Optional(t) => write!(f, "{t}?"),
        }
    }
}

/// Parses a type expression. The error says what was expected where.
pub fn parse_field_type(s: &str) -> Result<FieldType, String> {
    let s = s.trim();
    let (inner, optional) = match s.strip_suffix('?') {
        Some(rest) => (rest.trim_end(), true),
        None => (s, false),
    };
    let ty = parse_plain(inner)?;
    Ok(if optional {
        FieldType::Optional(Box::new(ty))
    } else {
        ty
    })
}

fn parse_plain(s: &str) -> Result<FieldType, String> {
    for (prefix, ctor) in [
        ("list<", FieldType::List as fn(Box<FieldType>) -> FieldType),
        ("map<", FieldType::Map),
    ] {
        if let Some(rest) = s.strip_prefix(prefix) {
            let inner = rest
                .strip_suffix('>')
                .ok_or_else(|| format!("`{s}` is missing its closing `>`"))?;
            if inner.trim().is_empty() {
                return Err(format!("`{s}` names no item type"));
            }
            return Ok(ctor(Box::new(parse_field_type(inner)?)));
        }
    }
    Ok(match s {
        "string" => FieldType::String,
        "int" => FieldType::Int,
        "float" => FieldType::Float,
        "bool" => FieldType::Bool,
        "json" => FieldType::Json,
        "object" => FieldType::Object,
        "messages" => FieldType::Messages,
        "" => return Err("the type is empty".into()),
        other => return Err(format!("`{other}` is not a type")),
    })
}

/// The base type names, for did-you-mean.
pub const TYPE_NAMES: [&str; 9] = [
    "string", "int", "float", "bool", "json", "object", "messages", "list", "map",
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_nested_and_optional() {
        let t = parse_field_type("list<map<int>?>?").unwrap();
        assert_eq!(t.to_string(), "list<map<int>?>?");
        assert!(t.accepts(&json!(null)));
        assert!(t.accepts(&json!([{"a": 1}, null])));
        assert!(!t.accepts(&json!([{"a": "x"}])));
        assert!(parse_field_type("lst<int>").is_err());
        assert!(parse_field_type("list<int").is_err());
        assert!(parse_field_type("list<>").is_err());
    }

    #[test]
    fn messages_need_role_and_content() {
        let t = FieldType::Messages;
        assert!(t.accepts(&json!([{"role": "user", "content": "hi"}])));
        assert!(!t.accepts(&json!([{"content": "hi"}])));
    }
}
