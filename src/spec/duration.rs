use std::time::Duration;

/// Parses a duration as people write one: `"1500ms"`, `"30s"`, `"10m"`, `"2h"`, `"7d"`,
/// and several together, `"1h30m"` or `"1h 30m"` (humantime's grammar, which also takes
/// `sec`, `min`, `hours`, `w`, ...). The errors say what is wrong in our words.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    use humantime::DurationError as E;
    humantime::parse_duration(s).map_err(|e| match e {
        E::Empty => "the duration is empty".to_string(),
        E::NumberExpected(0) => format!("`{s}` does not start with a number"),
        E::NumberExpected(at) | E::InvalidCharacter(at) => {
            // A position inside a character (should humantime count otherwise) is not
            // a reason to panic: the whole text is named instead.
            format!(
                "`{s}` is not a duration past `{}`",
                s.get(..at).unwrap_or(s)
            )
        }
        E::UnknownUnit { unit, value, .. } if unit.is_empty() => {
            format!("`{value}` has no unit")
        }
        E::UnknownUnit { unit, .. } => format!("`{unit}` is not a unit"),
        E::NumberOverflow => format!("`{s}` is too large"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_duration("10"), Err("`10` has no unit".into()));
        assert_eq!(
            parse_duration("ms"),
            Err("`ms` does not start with a number".into())
        );
        assert_eq!(
            parse_duration("10 parsecs"),
            Err("`parsecs` is not a unit".into())
        );
        assert_eq!(parse_duration(""), Err("the duration is empty".into()));
        assert_eq!(
            parse_duration("5m€"),
            Err("`5m€` is not a duration past `5m`".into())
        );
        assert_eq!(
            parse_duration("99999999999999999999d"),
            Err("`99999999999999999999d` is too large".into())
        );
    }
}
