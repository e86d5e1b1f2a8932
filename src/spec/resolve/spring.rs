//! Spring Kafka's naming, mirrored exactly: the retry and dead-letter topic suffixes, when a
//! configured suffix counts (`StringUtils.hasText`), and which retry topics a chain of delays
//! gets. A Kafka channel's topics must be the ones a Spring consumer derives, so each rule
//! here names the Spring class it copies.
//!
//! Pure functions of strings and durations; `kafka` and `channel` use them.

use crate::spec::duration::Duration;

/// Spring Kafka's default retry topic suffix (`RetryTopicConstants.DEFAULT_RETRY_SUFFIX`).
pub const SPRING_RETRY_SUFFIX: &str = "-retry";
/// Spring Kafka's default dead-letter topic suffix (`RetryTopicConstants.DEFAULT_DLT_SUFFIX`).
pub const SPRING_DLT_SUFFIX: &str = "-dlt";

/// The suffix Spring Kafka uses for a configured one: `DestinationTopicSuffixes` keeps it only
/// when `StringUtils.hasText` (a character that is not Java whitespace), else it silently
/// takes the default. Lint refuses a blank suffix (`kafka/suffix`), so that never surprises.
pub fn spring_suffix<'a>(configured: Option<&'a str>, default: &'a str) -> &'a str {
    match configured {
        Some(s) if java_has_text(s) => s,
        _ => default,
    }
}

/// Spring's `StringUtils.hasText`: some character that is not Java whitespace.
pub fn java_has_text(s: &str) -> bool {
    // Java's `Character.isWhitespace`: Unicode space separators except the no-break ones,
    // line and paragraph separators, and the ASCII controls \t \n \v \f \r and 0x1C–0x1F
    // (Rust's `is_whitespace` adds U+0085 and the no-break spaces).
    let java_whitespace = |c: char| {
        (c.is_whitespace() && !matches!(c, '\u{85}' | '\u{a0}' | '\u{2007}' | '\u{202f}'))
            || ('\u{1c}'..='\u{1f}').contains(&c)
    };
    !s.chars().all(java_whitespace)
}

/// Spring Kafka's retry topics for the given delays, as (name suffix after the main topic,
/// delay). Mirrors `DestinationTopicPropertiesFactory.getTopicSuffix` and
/// `reusableTopicAttempts`, with `retry_suffix` in place of Spring's `-retry` (its
/// `retryTopicSuffix`). With `reuse` (`SameIntervalTopicReuseStrategy.SINGLE_TOPIC`, the
/// `@RetryableTopic` default since Spring Kafka 3.2) the trailing attempts that share one delay
/// (fixed backoff, or the attempts at `maxDelay`) reuse a single topic, and a lone retry topic
/// is the plain suffix (`-retry`). Otherwise each topic gets its delay in ms (`-retry-1000`),
/// or its 0-based index (`-retry-0`) with `by_index`
/// (`TopicSuffixingStrategy.SUFFIX_WITH_INDEX_VALUE`) and, without reuse, for a fixed backoff;
/// without reuse a repeated delay also gets its repetition (`-retry-3000-1`). Spring joins with
/// `-` whatever the suffix: `.retry` gives `.retry-0`.
pub fn spring_retry_suffixes(
    delays: &[Duration],
    retry_suffix: &str,
    by_index: bool,
    reuse: bool,
) -> Vec<(String, Duration)> {
    let n = delays.len();
    let count = |d: &Duration| delays.iter().filter(|x| *x == d).count();
    let reusable = match delays.last() {
        Some(last) if reuse && n > 1 => count(last) - 1,
        _ => 0,
    };
    let topics = n - reusable;
    let fixed = by_index || (n > 1 && delays.iter().all(|d| Some(d) == delays.first()));
    let mut out: Vec<(String, Duration)> = Vec::with_capacity(topics);
    for (i, d) in delays.iter().take(topics).enumerate() {
        let suffix = if reuse && topics == 1 {
            retry_suffix.to_owned()
        } else if fixed {
            format!("{retry_suffix}-{i}")
        } else if !reuse && count(d) > 1 {
            let first = delays.iter().position(|x| x == d).unwrap_or(i);
            format!("{retry_suffix}-{}-{}", d.as_millis(), i - first)
        } else {
            format!("{retry_suffix}-{}", d.as_millis())
        };
        // Spring names a repeated delay in mid-chain the same; it is one topic.
        if !out.iter().any(|(s, _)| *s == suffix) {
            out.push((suffix, *d));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{kafka, ms, topic_names};
    use super::*;

    fn suffixes(delays: &[u64], by_index: bool) -> Vec<String> {
        spring_retry_suffixes(&ms(delays), SPRING_RETRY_SUFFIX, by_index, true)
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    }

    fn multiple(delays: &[u64], by_index: bool) -> Vec<String> {
        spring_retry_suffixes(&ms(delays), SPRING_RETRY_SUFFIX, by_index, false)
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    }

    /// The expectations of Spring Kafka's own DestinationTopicPropertiesFactoryTests with
    /// `MULTIPLE_TOPICS` (the `RetryTopicConfigurationBuilder` default).
    #[test]
    fn multiple_topics_suffixes_match_spring_kafka() {
        assert_eq!(
            multiple(&[1000, 2000], false),
            ["-retry-1000", "-retry-2000"]
        );
        assert_eq!(
            multiple(&[5000, 5000], false),
            ["-retry-0", "-retry-1"],
            "fixed backoff: by index"
        );
        assert_eq!(
            multiple(&[1000, 2000, 3000, 3000], false),
            [
                "-retry-1000",
                "-retry-2000",
                "-retry-3000-0",
                "-retry-3000-1"
            ],
            "the attempts at maxDelay"
        );
        assert_eq!(multiple(&[1000, 2000], true), ["-retry-0", "-retry-1"]);
        assert_eq!(
            multiple(&[1000], false),
            ["-retry-1000"],
            "a lone topic keeps its delay"
        );
    }

    /// The cases of Spring Kafka's reference ("Topic Naming") and of
    /// `DestinationTopicPropertiesFactory` with the 3.2+ default `SINGLE_TOPIC` reuse.
    #[test]
    fn retry_topic_suffixes_match_spring_kafka() {
        // Exponential 1000 × 2, 4 attempts: one topic per delay.
        assert_eq!(
            suffixes(&[1000, 2000, 4000], false),
            ["-retry-1000", "-retry-2000", "-retry-4000"]
        );
        // The attempts at maxDelay share the last topic (the reference's 16 s example).
        assert_eq!(
            suffixes(&[1000, 2000, 4000, 8000, 16000, 16000, 16000], false),
            [
                "-retry-1000",
                "-retry-2000",
                "-retry-4000",
                "-retry-8000",
                "-retry-16000"
            ]
        );
        // Fixed delay: one topic, no delay appended; likewise a single retry.
        assert_eq!(suffixes(&[1000, 1000, 1000], false), ["-retry"]);
        assert_eq!(suffixes(&[3000], false), ["-retry"]);
        assert_eq!(suffixes(&[], false), Vec::<String>::new());
        // SUFFIX_WITH_INDEX_VALUE: 0-based indexes, same grouping.
        assert_eq!(
            suffixes(&[1000, 2000, 4000], true),
            ["-retry-0", "-retry-1", "-retry-2"]
        );
        assert_eq!(
            suffixes(&[1000, 2000, 4000, 4000], true),
            ["-retry-0", "-retry-1", "-retry-2"]
        );
        assert_eq!(suffixes(&[1000, 1000], true), ["-retry"]);
    }

    /// `DestinationTopicPropertiesFactory.DestinationTopicSuffixes`: a suffix without text
    /// (`StringUtils.hasText`) is replaced by Spring's default, silently.
    #[test]
    fn a_blank_suffix_is_spring_default_as_in_destination_topic_suffixes() {
        assert_eq!(spring_suffix(None, "-retry"), "-retry");
        assert_eq!(spring_suffix(Some(""), "-retry"), "-retry");
        assert_eq!(spring_suffix(Some(" \t\u{1f}"), "-dlt"), "-dlt");
        // Java's isWhitespace excludes the no-break space: Spring keeps it (lint refuses it).
        assert_eq!(spring_suffix(Some("\u{a0}"), "-dlt"), "\u{a0}");
        assert_eq!(spring_suffix(Some(".r"), "-retry"), ".r");
        let r = kafka(
            "  retry: {maxAttempts: 3}\n  kafka: {retryTopicSuffix: \"\", dltSuffix: \" \"}\n",
        );
        assert_eq!(topic_names(&r), ["app.orders-retry", "app.orders-dlt"]);
    }
}
