//! Durations as users write them: `500ms`, `30s`, `5m`, `7d`, or combined (`1h30m`).
//!
//! The JSON schema states the same pattern the parser accepts, so an editor flags a bad
//! duration before `dlqctl lint` does. Values are kept in milliseconds: every backend limit
//! dlqctl checks is a whole number of milliseconds or seconds.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The pattern the schema publishes; kept in step with [`Duration::parse`] by a test.
pub const PATTERN: &str = "^([0-9]+(ms|s|m|h|d))+$";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration {
    millis: u64,
}

impl Duration {
    pub const fn from_millis(millis: u64) -> Self {
        Duration { millis }
    }

    pub const fn from_secs(secs: u64) -> Self {
        Duration {
            millis: secs * 1000,
        }
    }

    pub const fn as_millis(self) -> u64 {
        self.millis
    }

    /// Parses `1h30m`-style text. The error says what was wrong, without repeating the text's
    /// role ("is not a duration") that the caller adds.
    pub fn parse(text: &str) -> Result<Self, String> {
        const HOW: &str = "write a number and a unit (ms, s, m, h, d), e.g. `30s`";
        if text.is_empty() {
            return Err(format!("it is empty; {HOW}"));
        }
        if text.contains(['.', ',']) {
            return Err(format!(
                "`{text}` has a fraction; use a smaller unit, e.g. `1500ms` for 1.5s"
            ));
        }
        let mut total: u64 = 0;
        let mut rest = text;
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(format!("`{text}` does not start with a number; {HOW}"));
            }
            let number: u64 = rest[..digits]
                .parse()
                .map_err(|_| format!("`{text}` is too large"))?;
            rest = &rest[digits..];
            let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
            let unit_ms = match &rest[..unit_len] {
                "ms" => 1,
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                "" => return Err(format!("`{text}` has no unit; {HOW}")),
                other => {
                    return Err(format!(
                        "`{text}`: unknown unit `{other}`; use ms, s, m, h or d"
                    ));
                }
            };
            rest = &rest[unit_len..];
            total = number
                .checked_mul(unit_ms)
                .and_then(|ms| total.checked_add(ms))
                .ok_or_else(|| format!("`{text}` is too large"))?;
        }
        Ok(Duration { millis: total })
    }
}

impl fmt::Display for Duration {
    /// The shortest exact form: `90s` → `1m30s`, `1500ms` stays `1500ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.millis;
        if ms == 0 {
            return f.write_str("0s");
        }
        if !ms.is_multiple_of(1000) {
            return write!(f, "{ms}ms");
        }
        let mut secs = ms / 1000;
        for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
            if secs >= size {
                write!(f, "{}{unit}", secs / size)?;
                secs %= size;
            }
        }
        Ok(())
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Cow::<str>::deserialize(d)?;
        Duration::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": PATTERN,
            "description": "A duration: a number and a unit (ms, s, m, h, d), combinable, e.g. `500ms`, `30s`, `1h30m`, `7d`.",
            "examples": ["30s", "5m", "4d"]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_combinations() {
        assert_eq!(Duration::parse("500ms").unwrap().as_millis(), 500);
        assert_eq!(Duration::parse("30s").unwrap().as_millis(), 30_000);
        assert_eq!(Duration::parse("1h30m").unwrap().as_millis(), 5_400_000);
        assert_eq!(Duration::parse("14d").unwrap().as_millis(), 1_209_600_000);
    }

    #[test]
    fn rejects_what_the_pattern_rejects() {
        for bad in [
            "",
            "5",
            "s",
            "5x",
            "1.5s",
            "-1s",
            " 5s",
            "5 s",
            "99999999999999999999d",
        ] {
            assert!(Duration::parse(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn pattern_and_parser_agree() {
        let re =
            jsonschema::validator_for(&serde_json::json!({"type": "string", "pattern": PATTERN}))
                .unwrap();
        for text in ["500ms", "30s", "1h30m", "7d", "", "5", "5x", "1.5s", "5 s"] {
            let by_pattern = re.is_valid(&serde_json::json!(text));
            assert_eq!(by_pattern, Duration::parse(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn serde_writes_and_reads_the_text_form() {
        let d = Duration::from_secs(5_400);
        assert_eq!(serde_json::to_value(d).unwrap(), serde_json::json!("1h30m"));
        let back: Duration = serde_json::from_value(serde_json::json!("1h30m")).unwrap();
        assert_eq!(back, d);
        let bad = serde_json::from_value::<Duration>(serde_json::json!("5x")).unwrap_err();
        assert!(bad.to_string().contains("unknown unit `x`"), "{bad}");
    }

    #[test]
    fn the_schema_is_a_named_string_with_the_parsers_pattern() {
        assert_eq!(Duration::schema_name(), "Duration");
        let schema =
            serde_json::to_value(Duration::json_schema(&mut SchemaGenerator::default())).unwrap();
        assert_eq!(schema["type"], "string");
        assert_eq!(schema["pattern"], PATTERN);
    }

    #[test]
    fn displays_the_shortest_exact_form() {
        assert_eq!(Duration::from_secs(90).to_string(), "1m30s");
        assert_eq!(Duration::from_millis(1500).to_string(), "1500ms");
        assert_eq!(Duration::from_secs(4 * 86_400).to_string(), "4d");
        assert_eq!(Duration::from_millis(0).to_string(), "0s");
        assert_eq!(Duration::from_secs(93_784).to_string(), "1d2h3m4s");
    }

    #[test]
    fn a_whole_unit_is_written_as_that_unit() {
        assert_eq!(
            [1, 60, 3_600, 86_400, 86_401].map(|s| Duration::from_secs(s).to_string()),
            ["1s", "1m", "1h", "1d", "1d1s"].map(str::to_owned)
        );
    }

    #[test]
    fn each_refusal_says_what_is_wrong() {
        let how = "write a number and a unit (ms, s, m, h, d), e.g. `30s`";
        assert_eq!(Duration::parse(""), Err(format!("it is empty; {how}")));
        assert_eq!(
            Duration::parse("1.5s"),
            Err("`1.5s` has a fraction; use a smaller unit, e.g. `1500ms` for 1.5s".into())
        );
        assert_eq!(
            Duration::parse("1,5s"),
            Err("`1,5s` has a fraction; use a smaller unit, e.g. `1500ms` for 1.5s".into())
        );
        assert_eq!(
            Duration::parse("5m s"),
            Err(format!("`5m s` does not start with a number; {how}"))
        );
        assert_eq!(
            Duration::parse("5m30"),
            Err(format!("`5m30` has no unit; {how}"))
        );
        assert_eq!(
            Duration::parse("5w"),
            Err("`5w`: unknown unit `w`; use ms, s, m, h or d".into())
        );
        assert_eq!(
            Duration::parse("99999999999999999999s"),
            Err("`99999999999999999999s` is too large".into())
        );
        assert_eq!(
            Duration::parse("9999999999999999d"),
            Err("`9999999999999999d` is too large".into())
        );
        let max = format!("{}ms", u64::MAX);
        assert_eq!(Duration::parse(&max).map(Duration::as_millis), Ok(u64::MAX));
        assert_eq!(
            Duration::parse(&format!("{max}1ms")),
            Err(format!("`{max}1ms` is too large"))
        );
        assert_eq!(
            Duration::parse(&format!("1ms{max}")),
            Err(format!("`1ms{max}` is too large"))
        );
        assert_eq!(
            Duration::parse("1d1h1m1s1ms").map(Duration::as_millis),
            Ok(86_400_000 + 3_600_000 + 60_000 + 1_000 + 1)
        );
    }
}
