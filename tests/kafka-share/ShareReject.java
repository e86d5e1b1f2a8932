// A share consumer (kafka-clients' KafkaShareConsumer, KIP-932) for tests/kafka_share.rs: it
// consumes TOPIC in the share group GROUP with explicit acknowledgement, ACCEPTs every record
// whose value starts with "good" and REJECTs (mode `reject`) or RELEASEs (mode `release`, so
// the broker redelivers it until its delivery limit) every other one. It prints one line a
// delivery, `<ack> <key> <delivery count>` (the ack as AcknowledgeType prints it: `accept`,
// `reject`, `release`), and stops when it has accepted GOOD records and given up BAD
// (rejected once each, or released on their LIMIT-th delivery), or after SECS.
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareReject {
    public static void main(String[] args) {
        String bootstrap = args[0], topic = args[1], group = args[2], mode = args[3];
        int good = Integer.parseInt(args[4]), bad = Integer.parseInt(args[5]);
        int limit = Integer.parseInt(args[6]);
        long deadline = System.currentTimeMillis() + 1000L * Integer.parseInt(args[7]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("share.acknowledgement.mode", "explicit");
        int accepted = 0, gaveUp = 0;
        try (KafkaShareConsumer<String, String> c =
                new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(topic));
            while (System.currentTimeMillis() < deadline && (accepted < good || gaveUp < bad)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    int n = r.deliveryCount().map(Short::intValue).orElse(0);
                    AcknowledgeType ack;
                    if (r.value() != null && r.value().startsWith("good")) {
                        ack = AcknowledgeType.ACCEPT;
                        accepted++;
                    } else if (mode.equals("reject")) {
                        ack = AcknowledgeType.REJECT;
                        gaveUp++;
                    } else {
                        ack = AcknowledgeType.RELEASE;
                        if (n >= limit) gaveUp++;
                    }
                    c.acknowledge(r, ack);
                    System.out.println(ack + " " + r.key() + " " + n);
                }
                c.commitSync();
            }
        }
        System.out.println("DONE accepted=" + accepted + " gaveUp=" + gaveUp);
        System.exit(accepted == good && gaveUp == bad ? 0 : 1);
    }
}
