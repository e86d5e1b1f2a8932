package dev.dlqctl.spring;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.stereotype.Component;

/**
 * The listener: while the file `dlqctl.fail-file` exists every record fails, a record whose
 * value starts with `transient` with {@link DownstreamUnavailable}, any other with
 * {@link StockRejected} (Spring wraps either in its ListenerExecutionFailedException);
 * otherwise each record is appended to `dlqctl.out-file` as `PROCESSED <topic> <key> <value>`.
 */
@Component
public class Listener {
    private static final Logger log = LoggerFactory.getLogger(Listener.class);

    @Value("${dlqctl.fail-file}")
    String failFile;

    @Value("${dlqctl.out-file}")
    String outFile;

    @KafkaListener(id = "dlqctl-app", idIsGroup = false, topics = "${dlqctl.topic}")
    public void listen(ConsumerRecord<String, String> record) throws IOException {
        if (Files.exists(Path.of(failFile))) {
            String value = String.valueOf(record.value());
            if (value.startsWith("transient")) {
                throw new DownstreamUnavailable("downstream unavailable: " + value);
            }
            throw new StockRejected("stock rejected: " + value);
        }
        String line = "PROCESSED " + record.topic() + " " + record.key() + " " + record.value() + "\n";
        Files.writeString(Path.of(outFile), line, StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        log.info(line.trim());
    }

}
