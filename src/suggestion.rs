//! "did you mean" hints for misspelt names.

/// The longest name compared by its edits (see [`did_you_mean`]).
const MAX_COMPARED: usize = 256;

/// The candidate closest to `name`, if it is close enough to be a likely typo.
pub(crate) fn did_you_mean<'a, I>(name: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let candidates: Vec<&'a str> = candidates.into_iter().filter(|c| *c != name).collect();
    // A third of the longer name, at least one edit: catches swaps and slips without
    // suggesting unrelated short names.
    let limit = |c: &str| (name.len().max(c.len()) / 3).max(1);
    let close = candidates
        .iter()
        // Edits are counted in time that grows with the product of the lengths: names
        // longer than any a person types are not compared (a 20,000-character name
        // against every node took seconds), nor names whose lengths alone differ by
        // more edits than allowed.
        .filter(|c| name.len() <= MAX_COMPARED && c.len() <= MAX_COMPARED)
        .filter(|c| name.len().abs_diff(c.len()) <= limit(c))
        .map(|c| (strsim::damerau_levenshtein(name, c), *c))
        .filter(|(d, c)| *d <= limit(c))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c);
    // A shortened name (`validate` for `validate_action`) is far by edits but
    // plainly meant.
    close.or_else(|| {
        (name.len() >= 4)
            .then(|| {
                candidates
                    .iter()
                    .copied()
                    .filter(|c| c.starts_with(name))
                    .min_by_key(|c| c.len())
            })
            .flatten()
    })
}

/// A `help:` line suggesting the closest candidate, or `None`.
/// `; did you mean `x`?` when a candidate is close to `name`, else `; it offers `a`,
/// `b`` listing them all: the end of an unknown-tool message.
pub(crate) fn offers<'a, I>(name: &str, candidates: I) -> String
where
    I: IntoIterator<Item = &'a str> + Clone,
{
    match did_you_mean(name, candidates.clone()) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => format!(
            "; it offers {}",
            candidates
                .into_iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

pub(crate) fn help_for<'a, I>(name: &str, candidates: I) -> Option<String>
where
    I: IntoIterator<Item = &'a str>,
{
    did_you_mean(name, candidates).map(|c| format!("did you mean `{c}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let names = ["plan_action", "policy_gate", "execute_action"];
        assert_eq!(did_you_mean("plan_actoin", names), Some("plan_action"));
        assert_eq!(did_you_mean("polcy_gate", names), Some("policy_gate"));
        assert_eq!(did_you_mean("zzz", names), None);
        assert_eq!(did_you_mean("execute", names), Some("execute_action"));
    }
}
