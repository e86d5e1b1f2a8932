//! Ratios as users write them: a percentage, `0.1%`, `2.5%`, `100%` — the share of a
//! channel's messages that may be dead-lettered before an alarm fires
//! (`alarms.deadLetterRate`).
//!
//! Why a type of its own and not a number: `0.1` would be read as 0.1 % by some and as 10 % by
//! others; the `%` says which. The JSON schema states the same pattern the parser accepts (a
//! test keeps them in step), so an editor flags `0%` or `0.1` before `dlqctl lint` does, and
//! lint's `schema/ratio` finding says why with the parser's own words. Resolved, a ratio is a
//! fraction (`0.1%` → 0.001), which is what Prometheus' division and CloudWatch's metric math
//! compare against.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The pattern the schema publishes: a number above 0 and at most 100, then `%`; kept in step
/// with [`Ratio::parse`] by a test.
pub const PATTERN: &str = r"^(100(\.0+)?|[1-9][0-9]?(\.[0-9]+)?|0\.[0-9]*[1-9][0-9]*)%$";

/// A percentage above 0 and at most 100.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Ratio {
    /// As written, in percent (`0.1` for `0.1%`): what the user reads back.
    percent: f64,
    /// The same as a fraction (`0.001`), parsed from the same digits moved two places, so it
    /// is the closest double to the written value rather than `percent / 100`'s rounding.
    fraction: f64,
}

impl Ratio {
    /// Parses `0.1%`-style text. The error says what was wrong, without repeating the text's
    /// role ("is not a ratio") that the caller adds.
    pub fn parse(text: &str) -> Result<Self, String> {
        const HOW: &str = "write a percentage of the source's messages, e.g. `0.1%` or `2.5%`";
        let Some(number) = text.strip_suffix('%') else {
            return Err(if text.parse::<f64>().is_ok() {
                format!("`{text}` has no `%`; {HOW} (`0.1` would be ambiguous: 0.1% or 10%?)")
            } else {
                format!("`{text}` is not a percentage; {HOW}")
            });
        };
        let (int, frac) = match number.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (number, None),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(int) || frac.is_some_and(|f| !digits(f)) {
            return Err(format!("`{text}` is not a percentage; {HOW}"));
        }
        let percent: f64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a percentage; {HOW}"))?;
        if percent == 0.0 {
            return Err(format!(
                "`{text}` is zero: the alarm would fire on the first dead letter (for that, alarm on `depth: {{above: 0}}`)"
            ));
        }
        if percent > 100.0 {
            return Err(format!(
                "`{text}` is above 100%: at most every message of the source is dead-lettered"
            ));
        }
        if int.len() > 1 && int.starts_with('0') {
            return Err(format!("`{text}` starts with a zero; write `{percent}%`"));
        }
        // The same digits as a fraction: `0.1` → `0.001`, `12.5` → `0.125`.
        let all: String = format!("{int}{}", frac.unwrap_or(""));
        let point = int.len();
        let fraction_text = if point > 2 {
            format!("{}.{}", &all[..point - 2], &all[point - 2..])
        } else {
            format!("0.{}{all}", "0".repeat(2 - point))
        };
        let fraction = fraction_text.parse().unwrap_or(percent / 100.0);
        Ok(Ratio { percent, fraction })
    }

    /// The ratio of a fraction read from a live system (a CloudWatch threshold: `0.001` →
    /// `0.1%`), in percent to ten decimals (dropping `× 100`'s float noise); `None` when it is
    /// no ratio (0 or less, above 1, not a number).
    pub fn from_fraction(fraction: f64) -> Option<Self> {
        if !fraction.is_finite() {
            return None;
        }
        let text = format!("{:.10}", fraction * 100.0);
        let text = text.trim_end_matches('0').trim_end_matches('.');
        Ratio::parse(&format!("{text}%")).ok()
    }

    /// The ratio as a fraction: `0.1%` → 0.001.
    pub fn fraction(self) -> f64 {
        self.fraction
    }

    /// The ratio in percent: `0.1%` → 0.1.
    pub fn percent(self) -> f64 {
        self.percent
    }
}

impl fmt::Display for Ratio {
    /// The shortest exact form: `0.10%` → `0.1%`, `100.0%` → `100%`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.percent)
    }
}

impl Serialize for Ratio {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Ratio {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Cow::<str>::deserialize(d)?;
        Ratio::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Ratio {
    fn schema_name() -> Cow<'static, str> {
        "Ratio".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": PATTERN,
            "description": "A percentage above 0 and at most 100, with `%`: `0.1%`, `2.5%`, `100%`.",
            "examples": ["0.1%", "1%", "2.5%"]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_percentages_into_fractions() {
        let r = |s| Ratio::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(r("0.1%").fraction(), 0.001);
        assert_eq!(r("0.1%").percent(), 0.1);
        assert_eq!(r("1%").fraction(), 0.01);
        assert_eq!(r("2.5%").fraction(), 0.025);
        assert_eq!(r("12.5%").fraction(), 0.125);
        assert_eq!(r("100%").fraction(), 1.0);
        assert_eq!(r("0.05%").fraction(), 0.0005);
        assert!(r("0.1%") < r("1%"));
    }

    #[test]
    fn a_live_fraction_reads_back_as_the_percentage_written() {
        for text in ["0.1%", "1%", "2.5%", "0.05%", "100%", "33.3%"] {
            let r = Ratio::parse(text).expect("a ratio");
            assert_eq!(Ratio::from_fraction(r.fraction()), Some(r), "{text}");
        }
        for bad in [0.0, -0.1, 1.5, f64::NAN] {
            assert_eq!(Ratio::from_fraction(bad), None, "{bad}");
        }
    }

    #[test]
    fn refuses_what_the_pattern_refuses_and_says_why() {
        let why = |s| Ratio::parse(s).expect_err(s);
        assert!(why("0.1").contains("has no `%`"), "{}", why("0.1"));
        assert!(why("0%").contains("is zero"), "{}", why("0%"));
        assert!(why("0.000%").contains("is zero"));
        assert!(why("101%").contains("above 100%"));
        assert!(why("100.5%").contains("above 100%"));
        assert!(why("05%").contains("write `5%`"), "{}", why("05%"));
        assert!(why("00.1%").contains("write `0.1%`"), "{}", why("00.1%"));
        for bad in [
            "", "%", "1 %", "-1%", ".5%", "5.%", "1e-3%", "abc", "1%%", " 1%",
        ] {
            assert!(Ratio::parse(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn pattern_and_parser_agree() {
        let re =
            jsonschema::validator_for(&serde_json::json!({"type": "string", "pattern": PATTERN}))
                .expect("the pattern compiles");
        for text in [
            "0.1%", "1%", "2.5%", "99.99%", "100%", "100.0%", "0.001%", "10%", "", "%", "0%",
            "0.0%", "00.1%", "05%", "101%", "100.1%", "1000%", "0.1", "1 %", "-1%", ".5%", "5.%",
            "1e-3%",
        ] {
            let by_pattern = re.is_valid(&serde_json::json!(text));
            assert_eq!(by_pattern, Ratio::parse(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn serde_writes_and_reads_the_text_form() {
        let r = Ratio::parse("0.10%").expect("a ratio");
        assert_eq!(
            serde_json::to_value(r).expect("json"),
            serde_json::json!("0.1%")
        );
        let back: Ratio = serde_json::from_value(serde_json::json!("0.1%")).expect("reads");
        assert_eq!(back, r);
        assert_eq!(Ratio::parse("100.0%").expect("a ratio").to_string(), "100%");
    }

    #[test]
    fn the_schema_is_a_named_string_with_the_parsers_pattern() {
        assert_eq!(Ratio::schema_name(), "Ratio");
        let schema = serde_json::to_value(Ratio::json_schema(&mut SchemaGenerator::default()))
            .expect("json");
        assert_eq!(schema["type"], "string");
        assert_eq!(schema["pattern"], PATTERN);
    }
}
