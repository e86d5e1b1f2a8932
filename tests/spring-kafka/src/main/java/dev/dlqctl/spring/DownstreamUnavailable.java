package dev.dlqctl.spring;

/**
 * What the listener throws, while it is told to fail, for a record whose value starts with
 * `transient`: a failure that retrying later could get past (the class a spec's
 * `deadLetter.classes` maps to `transient_exhausted` in tests/spring_kafka.rs).
 */
public class DownstreamUnavailable extends RuntimeException {
    public DownstreamUnavailable(String message) {
        super(message);
    }
}
