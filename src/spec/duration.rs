use std::time::Duration;

/// Parses `"1500ms"`, `"30s"`, `"10m"`, `"2h"`, `"7d"`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = s.split_at(digits);
    if num.is_empty() {
        return Err(format!("`{s}` does not start with a number"));
    }
    let n: u64 = num.parse().map_err(|_| format!("`{num}` is too large"))?;
    let secs = |mul: u64| n.checked_mul(mul).map(Duration::from_secs);
    let d = match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => secs(1),
        "m" => secs(60),
        "h" => secs(3600),
        "d" => secs(86_400),
        "" => return Err(format!("`{s}` has no unit")),
        other => return Err(format!("`{other}` is not a unit")),
    };
    d.ok_or_else(|| format!("`{s}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("3w").is_err());
    }
}
