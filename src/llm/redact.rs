//! Keeps the API key out of every message that leaves the client.

use std::fmt;
use std::sync::Arc;

/// Replaces every occurrence of a secret in a text. Servers and proxies sometimes echo
/// request headers in their error bodies, and transport errors may quote a URL, so all
/// text the client turns into an error passes through here.
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    secrets: Vec<Arc<str>>,
}

pub(crate) const REDACTED: &str = "[redacted]";

impl Redactor {
    pub(crate) fn new(secret: &str) -> Self {
        Redactor::default().with(secret)
    }

    /// Keeps `secret` out too (a token in the endpoint's query string).
    pub(crate) fn with(mut self, secret: &str) -> Self {
        if !secret.is_empty() {
            self.secrets.push(Arc::from(secret));
            // The longest first, so one that contains another goes whole.
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
        self
    }

    pub(crate) fn apply(&self, text: &str) -> String {
        let mut out = text.to_string();
        for secret in &self.secrets {
            out = Self::one(&out, secret);
        }
        out
    }

    fn one(text: &str, secret: &str) -> String {
        let mut out = text.replace(secret, REDACTED);
        // A text cut short (an error body read up to a limit) may end in the start of
        // the secret: that start goes too.
        let tail = (6..secret.len())
            .rev()
            .filter(|n| secret.is_char_boundary(*n))
            .find(|n| out.ends_with(&secret[..*n]));
        if let Some(n) = tail {
            out.truncate(out.len() - n);
            out.push_str(REDACTED);
        }
        out
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
    fn a_text_cut_inside_the_secret_loses_its_start_too() {
        let r = Redactor::new("sk-SECRETKEY1234");
        assert_eq!(r.apply("Bearer sk-SECRETK"), "Bearer [redacted]");
        // Short common endings are not mistaken for a key.
        assert_eq!(r.apply("task sk-"), "task sk-");
    }

    #[test]
    fn an_empty_secret_changes_nothing() {
        assert_eq!(Redactor::new("").apply("abc"), "abc");
    }
}
