package dev.dlqctl.spring;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.retrytopic.RetryTopicConfiguration;
import org.springframework.kafka.retrytopic.RetryTopicConfigurationBuilder;
import org.springframework.scheduling.TaskScheduler;
import org.springframework.scheduling.concurrent.ThreadPoolTaskScheduler;

/**
 * Spring Kafka's non-blocking retries for `dlqctl.topic`, as `dlqctl.naming` says:
 * `inventory` is examples/inventory-kafka.yaml (backoff 1 s x 2 up to 4 s, 4 attempts, Spring's
 * default suffixes, one topic per delay); `docs` is the configuration docs/kafka.md shows
 * (`exponentialBackoff(1000, 2, 16000)`, `maxAttempts(5)`, `.retryTopicSuffix(".retry")`,
 * `.dltSuffix(".dlt")`, index suffixes). Spring creates no topic. (Its own class: a
 * RetryTopicConfiguration declared in the listener's bean is not seen while that bean is made.)
 */
@Configuration
public class RetryConfig {
    @Bean
    RetryTopicConfiguration retryTopics(KafkaTemplate<String, String> template,
            @Value("${dlqctl.topic}") String topic, @Value("${dlqctl.naming}") String naming) {
        RetryTopicConfigurationBuilder b = RetryTopicConfigurationBuilder.newInstance();
        switch (naming) {
            case "inventory" -> b.exponentialBackoff(1000, 2, 4000).maxAttempts(4)
                    .useSingleTopicForSameIntervals();
            case "docs" -> b.exponentialBackoff(1000, 2, 16000).maxAttempts(5)
                    .retryTopicSuffix(".retry").dltSuffix(".dlt").suffixTopicsWithIndexValues();
            default -> throw new IllegalArgumentException("dlqctl.naming: inventory or docs, not " + naming);
        }
        // The container factory Spring Boot configures (missing-topics-fatal included) for the
        // retry and DLT listeners too.
        return b.doNotAutoCreateRetryTopics().listenerFactory("kafkaListenerContainerFactory")
                .includeTopic(topic).create(template);
    }

    /** The scheduler Spring's retry topics resume paused partitions with. */
    @Bean
    TaskScheduler retryTopicScheduler() {
        ThreadPoolTaskScheduler s = new ThreadPoolTaskScheduler();
        s.setThreadNamePrefix("retry-");
        return s;
    }

}
