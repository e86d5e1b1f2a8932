package dev.dlqctl.spring;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.context.event.EventListener;
import org.springframework.kafka.annotation.EnableKafka;
import org.springframework.kafka.annotation.EnableKafkaRetryTopic;
import org.springframework.kafka.config.KafkaListenerEndpointRegistry;
import org.springframework.kafka.core.KafkaAdmin;
import org.springframework.kafka.listener.MessageListenerContainer;

/**
 * A Spring Kafka application for tests/spring_kafka.rs: {@link Listener} on `dlqctl.topic`
 * with the retries of {@link RetryConfig}. At start it checks, as an application's own
 * start-up check would, that every topic Spring subscribed to has at least the main topic's
 * partitions (Spring's DLT publisher keeps the partition of the failed record), and exits 3
 * naming the topic when one has fewer.
 */
@SpringBootApplication
@EnableKafka
@EnableKafkaRetryTopic
public class App {
    private static final Logger log = LoggerFactory.getLogger(App.class);

    @Value("${dlqctl.topic}")
    String topic;

    public static void main(String[] args) {
        SpringApplication.run(App.class, args);
    }

    /**
     * The application's own start-up check, over the topics Spring's listener containers
     * subscribed to (the main topic, every retry topic, the DLT): each needs the main topic's
     * partitions. Then `DLQCTL-READY` and those topics, sorted.
     */
    @EventListener(ApplicationReadyEvent.class)
    public void ready(ApplicationReadyEvent event) throws Exception {
        KafkaListenerEndpointRegistry registry = event.getApplicationContext().getBean(KafkaListenerEndpointRegistry.class);
        KafkaAdmin kafkaAdmin = event.getApplicationContext().getBean(KafkaAdmin.class);
        TreeSet<String> names = new TreeSet<>();
        for (MessageListenerContainer c : registry.getAllListenerContainers()) {
            String[] topics = c.getContainerProperties().getTopics();
            if (topics != null) {
                names.addAll(Arrays.asList(topics));
            }
        }
        StringBuilder seen = new StringBuilder();
        try (Admin admin = Admin.create(kafkaAdmin.getConfigurationProperties())) {
            int main = partitions(admin, topic);
            for (String name : names) {
                int p = partitions(admin, name);
                seen.append(' ').append(name).append(" (").append(p).append(')');
                if (p < main) {
                    log.error("topic {} has {} partitions, fewer than {} of {}: refusing to start",
                            name, p, main, topic);
                    System.exit(3);
                }
            }
        }
        log.info("DLQCTL-READY{}", seen);
    }

    private static int partitions(Admin admin, String name)
            throws InterruptedException, ExecutionException, TimeoutException {
        Map<String, TopicDescription> d = admin.describeTopics(List.of(name)).allTopicNames()
                .get(10, TimeUnit.SECONDS);
        return d.get(name).partitions().size();
    }
}
