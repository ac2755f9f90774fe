//! Keeps the API key out of every message that leaves the client.

use std::fmt;
use std::sync::Arc;

/// Replaces every occurrence of a secret in a text. Servers and proxies sometimes echo
/// request headers in their error bodies, and transport errors may quote a URL, so all
/// text the client turns into an error passes through here.
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    secret: Option<Arc<str>>,
}

pub(crate) const REDACTED: &str = "[redacted]";

impl Redactor {
    pub(crate) fn new(secret: &str) -> Self {
        Redactor {
            secret: (!secret.is_empty()).then(|| Arc::from(secret)),
        }
    }

    pub(crate) fn apply(&self, text: &str) -> String {
        match &self.secret {
            Some(s) if text.contains(&**s) => text.replace(&**s, REDACTED),
            _ => text.to_string(),
        }
    }
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Redactor(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_every_occurrence() {
        let r = Redactor::new("sk-123");
        assert_eq!(
            r.apply("Bearer sk-123 and sk-123!"),
            "Bearer [redacted] and [redacted]!"
        );
    }

    #[test]
    fn an_empty_secret_changes_nothing() {
        assert_eq!(Redactor::new("").apply("abc"), "abc");
    }
}
