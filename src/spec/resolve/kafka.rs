//! A channel's Kafka settings: partitions, replication, the topic config and ACLs as written,
//! and its topics' names as Spring Kafka derives them (retry topics, the DLT, the
//! exception-based DLTs), by the `spring`, `index` or `custom` profile.

use super::common::{ResolveError, RetryStage, expand, template_error};
use super::spring::spring_retry_suffixes;
use crate::spec::duration::Duration;
use crate::spec::model::{ChannelSpec, KafkaNaming, TopicReuse};

#[derive(Debug, Clone, PartialEq)]
pub struct KafkaResolved {
    pub partitions: u32,
    pub replication_factor: u16,
    pub dead_letter_partitions: u32,
    pub naming: KafkaNaming,
    /// The retry topic suffix Spring uses (`kafka.retryTopicSuffix`, default `-retry`).
    pub retry_topic_suffix: String,
    /// The dead-letter topic suffix Spring uses (`kafka.dltSuffix`, default `-dlt`).
    pub dlt_suffix: String,
    /// Spring's exception-based dead-letter topics (`kafka.exceptionBasedDlts`), in the spec's
    /// order: `<main><suffix><dltSuffix>`.
    pub exception_dead_letters: Vec<String>,
    pub config: std::collections::BTreeMap<String, String>,
    /// `kafka.acls`, as written (`None`: dlqctl owns no ACLs of this channel).
    pub acls: Option<crate::spec::model::KafkaAcls>,
    /// `kafka.shareGroups`: each group's id and whether its dead letters copy the record.
    pub share_groups: Vec<(String, bool)>,
    /// `retry.maxAttempts` as written (`None` when not): the share groups' delivery limit.
    pub share_delivery_limit: Option<u32>,
    /// `kafka.connectors` with their error-handling keys derived from the channel (filled in by
    /// `channel`, which knows the dead-letter topic and the delays).
    pub connectors: Vec<super::connect::ConnectorResolved>,
}

/// How a Kafka channel's retry topics are named: the profile, and Spring's retry suffix.
pub(super) struct KafkaRetryNaming<'a> {
    pub naming: KafkaNaming,
    pub retry_suffix: &'a str,
}

/// `spec.kafka` with defaults filled in.
pub(super) fn resolve(
    spec: &ChannelSpec,
    main: &str,
    retry: &KafkaRetryNaming<'_>,
    dlt_suffix: &str,
) -> KafkaResolved {
    let o = spec.kafka.clone().unwrap_or_default();
    let partitions = o.partitions.unwrap_or(1);
    KafkaResolved {
        partitions,
        replication_factor: o.replication_factor.unwrap_or(1),
        dead_letter_partitions: o.dead_letter_partitions.unwrap_or(partitions),
        naming: retry.naming,
        retry_topic_suffix: retry.retry_suffix.to_owned(),
        dlt_suffix: dlt_suffix.to_owned(),
        // `DestinationTopicPropertiesFactory.createCustomDltProperties`: the routing rule's
        // suffix, then the DLT suffix, on the main topic.
        exception_dead_letters: o
            .exception_based_dlts
            .iter()
            .flatten()
            .map(|suffix| format!("{main}{suffix}{dlt_suffix}"))
            .collect(),
        config: o
            .config
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect(),
        acls: o.acls,
        share_groups: o
            .share_groups
            .unwrap_or_default()
            .into_iter()
            .map(|g| (g.name, g.copy_record.unwrap_or(true)))
            .collect(),
        share_delivery_limit: spec.retry.as_ref().and_then(|r| r.max_attempts),
        connectors: Vec::new(),
    }
}

/// The retry topics. They follow Spring Kafka's grouping; `spring` and `index` name them as
/// Spring does (suffixes on the main topic), `custom` by the `retry.name` template.
pub(super) fn retry_stages(
    spec: &ChannelSpec,
    name: &str,
    main: &str,
    delays: &[Duration],
    naming: &KafkaRetryNaming<'_>,
) -> Result<Vec<RetryStage>, ResolveError> {
    let retry_template = spec.retry.as_ref().and_then(|r| r.name.as_deref());
    let kafka_reuse = spec
        .kafka
        .as_ref()
        .and_then(|k| k.same_interval_topic_reuse)
        .unwrap_or(TopicReuse::SingleTopic);
    let by_index = naming.naming == KafkaNaming::Index;
    let reuse = kafka_reuse == TopicReuse::SingleTopic;
    let mut retry_stages = Vec::new();
    for (i, (suffix, d)) in spring_retry_suffixes(delays, naming.retry_suffix, by_index, reuse)
        .into_iter()
        .enumerate()
    {
        let n = match (naming.naming, retry_template) {
            (KafkaNaming::Custom, Some(t)) => expand(t, name, Some(d), Some(i + 1))
                .map_err(|m| template_error("/spec/retry/name", m))?,
            _ => format!("{main}{suffix}"),
        };
        retry_stages.push(RetryStage { name: n, delay: d });
    }
    Ok(retry_stages)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{kafka, kafka_channel, ms, names, topic_names};
    use super::*;

    #[test]
    fn kafka_profiles_name_topics_after_the_main_topic() {
        let r = kafka("  retry: {maxAttempts: 4, backoff: {initial: 1s, multiplier: 2}}\n");
        assert_eq!(
            names(&r),
            [
                ("app.orders-retry-1000", 1000),
                ("app.orders-retry-2000", 2000),
                ("app.orders-retry-4000", 4000)
            ]
        );
        assert_eq!(r.dead_letter, "app.orders-dlt");

        // Spring suffixes the main topic, not the channel id.
        let r = kafka(
            "  name: \"{channel}.v2\"\n  retry: {maxAttempts: 3}\n  kafka: {naming: index}\n",
        );
        assert_eq!(
            names(&r),
            [("app.orders.v2-retry", 1000)],
            "fixed 1 s default backoff: one topic"
        );
        assert_eq!(r.dead_letter, "app.orders.v2-dlt");

        let r = kafka(
            "  retry: {maxAttempts: 4, backoff: {initial: 1s, multiplier: 3, max: 5s}}\n  kafka: {naming: index}\n",
        );
        assert_eq!(
            names(&r),
            [
                ("app.orders-retry-0", 1000),
                ("app.orders-retry-1", 3000),
                ("app.orders-retry-2", 5000)
            ]
        );

        let r =
            kafka("  retry: {maxAttempts: 3}\n  kafka: {sameIntervalTopicReuse: multipleTopics}\n");
        assert_eq!(
            names(&r),
            [("app.orders-retry-0", 1000), ("app.orders-retry-1", 1000)]
        );

        let r = kafka(
            "  retry: {maxAttempts: 3, name: \"{channel}.retry.{index}\", backoff: {initial: 1s, multiplier: 2}}\n  deadLetter: {name: \"{channel}.dead\"}\n  kafka: {naming: custom}\n",
        );
        assert_eq!(
            names(&r),
            [("app.orders.retry.1", 1000), ("app.orders.retry.2", 2000)]
        );
        assert_eq!(r.dead_letter, "app.orders.dead");
    }

    /// `kafka.retryTopicSuffix` and `kafka.dltSuffix`, resolved through the spec as Spring
    /// Kafka's own tests configure them (spring-kafka, `spring-kafka/src/test/java/org/
    /// springframework/kafka/retrytopic/`). Spring's backoffs in spec form: `new
    /// ExponentialBackOff(1000, 2)` keeps spring-core's default `maxInterval` of 30 s, `new
    /// ExponentialBackOff()` is 2 s × 1.5 up to 30 s, `FixedBackOff(n)` is a lone `initial`.
    #[test]
    fn custom_suffixes_match_spring_kafkas_own_tests() {
        // The suffixes of DestinationTopicPropertiesFactoryTests (`retryTopicSuffix`,
        // `dltSuffix` fields), which Spring appends with no `-` of its own.
        let sfx = "retryTopicSuffix: test-retry-suffix, dltSuffix: test-dlt-suffix";
        let case = |retry: &str, kafka: &str| {
            topic_names(&kafka_channel(
                "mainTopic",
                &format!("  retry: {retry}\n  kafka: {{{sfx}{kafka}}}\n"),
            ))
        };

        // DestinationTopicPropertiesFactoryTests.shouldCreateMainAndDltProperties: one
        // attempt, no retry topic, the DLT by `dltSuffix`.
        assert_eq!(
            case(
                "{maxAttempts: 1}",
                ", sameIntervalTopicReuse: multipleTopics"
            ),
            ["mainTopictest-dlt-suffix"]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldCreateTwoRetryPropertiesForMultipleBackoffValues: ExponentialBackOff(1000, 2),
        // 3 attempts, SUFFIX_WITH_DELAY_VALUE, MULTIPLE_TOPICS.
        assert_eq!(
            case(
                "{maxAttempts: 3, backoff: {initial: 1s, multiplier: 2, max: 30s}}",
                ", sameIntervalTopicReuse: multipleTopics"
            ),
            [
                "mainTopictest-retry-suffix-1000",
                "mainTopictest-retry-suffix-2000",
                "mainTopictest-dlt-suffix"
            ]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldCreateOneRetryPropertyForFixedBackoffWithSingleTopicSameIntervalReuseStrategy:
        // FixedBackOff(1000), 5 attempts, SINGLE_TOPIC: the bare suffix.
        assert_eq!(
            case("{maxAttempts: 5, backoff: {initial: 1s}}", ""),
            ["mainTopictest-retry-suffix", "mainTopictest-dlt-suffix"]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldCreateRetryPropertiesForFixedBackoffWithMultiTopicStrategy: FixedBackOff(5000),
        // 3 attempts, SUFFIX_WITH_DELAY_VALUE, MULTIPLE_TOPICS: a fixed delay is indexed.
        assert_eq!(
            case(
                "{maxAttempts: 3, backoff: {initial: 5s}}",
                ", sameIntervalTopicReuse: multipleTopics"
            ),
            [
                "mainTopictest-retry-suffix-0",
                "mainTopictest-retry-suffix-1",
                "mainTopictest-dlt-suffix"
            ]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldSuffixRetryTopicsWithIndexIfSuffixWithIndexStrategy: `new
        // ExponentialBackOff()`, 3 attempts, SUFFIX_WITH_INDEX_VALUE, MULTIPLE_TOPICS.
        assert_eq!(
            case(
                "{maxAttempts: 3, backoff: {initial: 2s, multiplier: 1.5, max: 30s}}",
                ", naming: index, sameIntervalTopicReuse: multipleTopics"
            ),
            [
                "mainTopictest-retry-suffix-0",
                "mainTopictest-retry-suffix-1",
                "mainTopictest-dlt-suffix"
            ]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldSuffixRetryTopicsWithIndexIfFixedDelayWithMultipleTopics: FixedBackOff(1000),
        // 3 attempts, SUFFIX_WITH_INDEX_VALUE, MULTIPLE_TOPICS.
        assert_eq!(
            case(
                "{maxAttempts: 3, backoff: {initial: 1s}}",
                ", naming: index, sameIntervalTopicReuse: multipleTopics"
            ),
            [
                "mainTopictest-retry-suffix-0",
                "mainTopictest-retry-suffix-1",
                "mainTopictest-dlt-suffix"
            ]
        );
        // The next three: ExponentialBackOff(1000, 2) with maxInterval 3000, 5 attempts, so
        // the delays are 1000, 2000, 3000, 3000.
        let capped = "{maxAttempts: 5, backoff: {initial: 1s, multiplier: 2, max: 3s}}";
        // DestinationTopicPropertiesFactoryTests.shouldSuffixRetryTopicsWithMixedIfMaxDelayReached:
        // SUFFIX_WITH_DELAY_VALUE, MULTIPLE_TOPICS.
        assert_eq!(
            case(capped, ", sameIntervalTopicReuse: multipleTopics"),
            [
                "mainTopictest-retry-suffix-1000",
                "mainTopictest-retry-suffix-2000",
                "mainTopictest-retry-suffix-3000-0",
                "mainTopictest-retry-suffix-3000-1",
                "mainTopictest-dlt-suffix"
            ]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldReuseRetryTopicsIfMaxDelayReachedWithDelayValueSuffixingStrategy:
        // SUFFIX_WITH_DELAY_VALUE, SINGLE_TOPIC: the attempts at maxInterval share a topic.
        assert_eq!(
            case(capped, ""),
            [
                "mainTopictest-retry-suffix-1000",
                "mainTopictest-retry-suffix-2000",
                "mainTopictest-retry-suffix-3000",
                "mainTopictest-dlt-suffix"
            ]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldReuseRetryTopicsIfMaxDelayReachedWithIndexValueSuffixingStrategy:
        // SUFFIX_WITH_INDEX_VALUE, SINGLE_TOPIC.
        assert_eq!(
            case(capped, ", naming: index"),
            [
                "mainTopictest-retry-suffix-0",
                "mainTopictest-retry-suffix-1",
                "mainTopictest-retry-suffix-2",
                "mainTopictest-dlt-suffix"
            ]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldNotReuseRetryTopicsIfRepeatedIntervalsAreInTheMiddleOfChain: delays no
        // backoff of the spec produces (1000, 2000, 2000, 2000, 3000), so the naming itself.
        assert_eq!(
            spring_retry_suffixes(
                &ms(&[1000, 2000, 2000, 2000, 3000]),
                "test-retry-suffix",
                false,
                false
            )
            .into_iter()
            .map(|(s, _)| s)
            .collect::<Vec<_>>(),
            [
                "test-retry-suffix-1000",
                "test-retry-suffix-2000-0",
                "test-retry-suffix-2000-1",
                "test-retry-suffix-2000-2",
                "test-retry-suffix-3000"
            ]
        );

        // RetryTopicIntegrationTests.shouldRetryFifthTopicWithTwoListenersAndManualAssignment
        // (FifthTopicListener1): attempts 4, @BackOff(250), retryTopicSuffix "-listener1",
        // dltTopicSuffix "-listener1-dlt", SUFFIX_WITH_INDEX_VALUE, MULTIPLE_TOPICS; the
        // listener sees exactly these topics.
        assert_eq!(
            topic_names(&kafka_channel(
                "myRetryTopic5",
                "  retry: {maxAttempts: 4, backoff: {initial: 250ms}}\n  kafka: {naming: index, sameIntervalTopicReuse: multipleTopics, retryTopicSuffix: -listener1, dltSuffix: -listener1-dlt}\n",
            )),
            [
                "myRetryTopic5-listener1-0",
                "myRetryTopic5-listener1-1",
                "myRetryTopic5-listener1-2",
                "myRetryTopic5-listener1-dlt"
            ]
        );
    }

    /// The configuration of issue 18 (a Spring application with `retryTopicSuffix(".retry")`,
    /// `dltSuffix(".dlt")`, `suffixTopicsWithIndexValues()`, `exponentialBackoff(1000, 2,
    /// 16000)`, `maxAttempts(5)`), and the reference's examples (spring-kafka-docs
    /// `retrytopic/topic-naming.adoc`, "Retry Topics and DLT Suffixes").
    #[test]
    fn dotted_suffixes_are_joined_to_the_index_or_delay_with_a_dash() {
        let r = kafka_channel(
            "orders",
            "  retry: {maxAttempts: 5, backoff: {initial: 1s, multiplier: 2, max: 16s}}\n  kafka: {naming: index, retryTopicSuffix: .retry, dltSuffix: .dlt}\n",
        );
        assert_eq!(
            names(&r),
            [
                ("orders.retry-0", 1000),
                ("orders.retry-1", 2000),
                ("orders.retry-2", 4000),
                ("orders.retry-3", 8000)
            ]
        );
        assert_eq!(r.dead_letter, "orders.dlt");
        let k = r.kafka.as_ref().expect("kafka");
        assert_eq!(
            (k.retry_topic_suffix.as_str(), k.dlt_suffix.as_str()),
            (".retry", ".dlt")
        );

        // The same with delays (`spring`), and past maxInterval (the 16 s topic reused).
        let r = kafka_channel(
            "orders",
            "  retry: {maxAttempts: 8, backoff: {initial: 1s, multiplier: 2, max: 16s}}\n  kafka: {retryTopicSuffix: .retry, dltSuffix: .dlt}\n",
        );
        assert_eq!(
            topic_names(&r),
            [
                "orders.retry-1000",
                "orders.retry-2000",
                "orders.retry-4000",
                "orders.retry-8000",
                "orders.retry-16000",
                "orders.dlt"
            ]
        );

        // topic-naming.adoc: `@RetryableTopic(retryTopicSuffix = "-my-retry-suffix",
        // dltTopicSuffix = "-my-dlt-suffix")` with Spring's default 1 s fixed backoff and
        // 3 attempts: one reused retry topic.
        let r = kafka_channel(
            "my-annotated-topic",
            "  retry: {maxAttempts: 3}\n  kafka: {retryTopicSuffix: -my-retry-suffix, dltSuffix: -my-dlt-suffix}\n",
        );
        assert_eq!(
            topic_names(&r),
            [
                "my-annotated-topic-my-retry-suffix",
                "my-annotated-topic-my-dlt-suffix"
            ]
        );

        // An explicit `deadLetter.name` still names the DLT (lint refuses it beside dltSuffix).
        let r = kafka(
            "  retry: {maxAttempts: 2}\n  deadLetter: {name: x.dead}\n  kafka: {dltSuffix: .dlt}\n",
        );
        assert_eq!(r.dead_letter, "x.dead");
    }

    /// `kafka.exceptionBasedDlts`: Spring's exception-based DLTs, `<main><suffix><dltSuffix>`.
    #[test]
    fn exception_based_dlts_are_named_as_spring_kafka_names_them() {
        // DestinationTopicPropertiesFactoryTests.shouldCreateDltPropertiesForCustomExceptionBasedRouting:
        // routing key `deserialization`, dltSuffix `test-dlt-suffix`, one attempt: the custom
        // DLT (`desExcDltSuffix + dltSuffix`) and then the DLT.
        let r = kafka_channel(
            "mainTopic",
            "  retry: {maxAttempts: 1}\n  kafka: {retryTopicSuffix: test-retry-suffix, dltSuffix: test-dlt-suffix, exceptionBasedDlts: [deserialization]}\n",
        );
        assert_eq!(
            r.names(),
            [
                ("mainTopic", "main"),
                ("mainTopictest-dlt-suffix", "dead-letter"),
                (
                    "mainTopicdeserializationtest-dlt-suffix",
                    "exception dead-letter"
                )
            ]
        );
        // The reference (spring-kafka-docs retrytopic/features.adoc, "Routing of messages to
        // custom DLTs based on thrown exceptions"): `@ExceptionBasedDltDestination(suffix =
        // "-deserialization", ...)` on `my-annotated-topic` routes to
        // `my-annotated-topic-deserialization-dlt`. DestinationTopicTests builds its custom DLTs
        // the same way (`"-deserialization" + dltSuffix`, `"-custom"`, `"-validation"`).
        let r = kafka_channel(
            "my-annotated-topic",
            "  retry: {maxAttempts: 3}\n  kafka: {exceptionBasedDlts: [-deserialization, -custom, -validation]}\n",
        );
        let k = r.kafka.as_ref().expect("kafka");
        assert_eq!(
            k.exception_dead_letters,
            [
                "my-annotated-topic-deserialization-dlt",
                "my-annotated-topic-custom-dlt",
                "my-annotated-topic-validation-dlt"
            ]
        );
        assert_eq!(r.dead_letter, "my-annotated-topic-dlt");
        // With `deadLetter.name` the DLT is named outright; the exception-based ones stay
        // Spring's.
        let r = kafka(
            "  retry: {maxAttempts: 2}\n  deadLetter: {name: app.dead}\n  kafka: {dltSuffix: .dlt, exceptionBasedDlts: [.poison]}\n",
        );
        let k = r.kafka.as_ref().expect("kafka");
        assert_eq!(
            (r.dead_letter.as_str(), k.exception_dead_letters.as_slice()),
            ("app.dead", &["app.orders.poison.dlt".to_owned()][..])
        );
    }
}
